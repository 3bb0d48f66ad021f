/* mixer_ops_compositional.h — the backend ops of compositional attention
 * (Mittal et al., ICLR 2022; ../shared/MIXERS.md §3): S searches, R retrievals.
 *
 *   search:  α_s = softmax_keys(Q_s K_sᵀ / √d_k) per ragged segment, applied to a
 *            block of value columns. With the values of all R retrievals as one
 *            block [n_keys, R·d_v] shared by every search, one product per search
 *            gives every hypothetical retrieval O_{s,r} = α_s V_r at once: the
 *            softmax is computed S times, not S·R times (as R calls of the
 *            attention op would), and the values need no per-search copies.
 *   select:  ρ_{n,s,·} = softmax_r(q̄_{n,s}·k̄_{n,s,r} · scale), y_{n,s} = Σ_r ρ O_{s,r}[n].
 *
 * The retrieval keys k̄ = O W̄_kᵀ + b̄_k in between are one linear op over the
 * S·R·n rows of O (W̄_k is shared by every search and retrieval), so the caller
 * runs linear_forward/backward for them; select's backward gives the direct path
 * ∂L/∂O += ρ·dy and ∂L/∂k̄, and linear_backward adds the path through the keys.
 * Backward ops ACCUMULATE (+=) like every backend op. */
#ifndef WS_MIXER_OPS_COMPOSITIONAL_H
#define WS_MIXER_OPS_COMPOSITIONAL_H

#include "backend.h"

/* Multi-search attention. The fields of a as for attention_forward (ragged
 * segments, key_valid, probabilities at probs[p_off + (s·q_len + i)·k_len + j]),
 * with n_heads = S searches of width d_k = d / S on q and k. Search s reads the
 * value columns [s·v_step, s·v_step + dv) of v and writes out columns
 * [s·dv, (s+1)·dv):
 *   v_step = 0, dv = R·d_v: every search reads all R retrievals (compositional);
 *   v_step = dv = d_h:      each search its own values (multi-head attention).
 * mask_diag: query i of a segment never sees key i (the contextual-retrieval
 * task's search excludes the object itself); needs q_len == k_len. */
typedef struct {
    ws_attn_args a;
    int dv, v_step, mask_diag;
} ws_comp_search_args;

/* Retrieval selection over n rows, S searches, R retrievals:
 *   e[n,s,r] = scale · q[n, s·dr .. ] · k[(n·S + s)·R + r, :]
 *   rho[n,s,:] = softmax_r(e[n,s,:])
 *   y[n, s·dv + c] = Σ_r rho[n,s,r] · o[(n·S + s)·R + r, c]
 * o [n·S·R, dv] and k [n·S·R, dr] are contiguous; q and y have row strides ldq, ldy. */
typedef struct {
    int n, n_searches, n_retrievals, dv, dr;
    float scale;
    const float *o, *k, *q;
    int ldq;
    float *rho; /* [n·S·R]: written by forward, read by backward */
    float *y;
    int ldy;
} ws_comp_select_args;

/* d_o += rho·dy (the direct path), d_k += ∂L/∂k, d_q += ∂L/∂q (strides as o, k, q). */
typedef struct {
    float *d_o, *d_k, *d_q;
    const float *d_y; /* stride ldy */
} ws_comp_select_grads;

struct ws_compositional_ops {
    ws_status (*search_forward)(ws_backend *be, const ws_comp_search_args *a);
    /* g->dq, dk, dv (strides of q, k, v) accumulate; g->dout (stride ldo) is read */
    ws_status (*search_backward)(ws_backend *be, const ws_comp_search_args *a,
                                 const ws_attn_grads *g);
    ws_status (*select_forward)(ws_backend *be, const ws_comp_select_args *a);
    ws_status (*select_backward)(ws_backend *be, const ws_comp_select_args *a,
                                 const ws_comp_select_grads *g);
};

#endif
