/* mixer_ops_simplicial2.h — the backend ops of 2-simplicial attention (Clift et
 * al., ICLR 2020; ../shared/MIXERS.md §2), used by model/mixer_simplicial2.c.
 *
 * Per head h (width δ = d2 / n_heads, columns [h·δ, (h+1)·δ) of every row) and
 * per segment, query i attends to the k_len² ordered pairs (j, k) of the
 * segment's key rows:
 *   w_ijk = (p_i·l1_j) l2_k − (p_i·l2_k) l1_j + (l1_j·l2_k) p_i
 *   logit_ijk = τ √(‖w_ijk‖² + WS_S2_EPS)          the unsigned triple product
 *   A_ijk = softmax over the k_len² pairs (j, k)
 *   o_i = Σ_jk A_ijk T_jk,   T_jk[q] = Σ_rs B_h[q, r·δ + s] u_j[r] u_k[s]
 * s = ‖w‖² is evaluated as the Gram polynomial x²C + y²B + z²A − 2xyz (x = p·l1,
 * y = p·l2, z = l1·l2, A = ‖p‖², B = ‖l1‖², C = ‖l2‖²): O(1) per triple instead
 * of the 8δ FLOPs of forming w, which in the Extractor's T² pairs would cost 4x
 * the aggregation. It is well conditioned: by Cauchy-Schwarz and AM-GM,
 * x²C + y²B + z²A ≥ 3|xyz|, so s ≥ |xyz| ≥ 0 and s ≥ (sum of |terms|)/5; its
 * float evaluation is accurate to a few ulps of the terms and cannot go
 * negative beyond rounding, which max(s, 0) absorbs. WS_S2_EPS keeps the square
 * root differentiable where s = 0 (exactly the pairwise-orthogonal triples):
 * there ∂s/∂(p, l1, l2) = 0, so the gradient is exactly 0, not 0/0.
 *
 * pair_* compute T (it does not depend on i: once per segment) and its backward;
 * attention_* the rest. Backward ops ACCUMULATE (+=) into every gradient, dpair
 * included (attention_backward adds into it, pair_backward reads it).
 */
#ifndef WS_MIXER_OPS_SIMPLICIAL2_H
#define WS_MIXER_OPS_SIMPLICIAL2_H

#include "backend.h"

#define WS_S2_EPS 1e-6f

/* One trajectory: queries [q_off, q_off+q_len) and keys [k_off, k_off+k_len)
 * of the packed rows. Head h's logits and probabilities live at
 * [p_off + (h·q_len + i)·k_len² + j·k_len + k]; its pair values T_jk at row
 * t_off + j·k_len + k of pair, columns of head h. Query ranges are pairwise
 * disjoint and so are key ranges (no atomics in the backward passes); with
 * values_out, key ranges are also disjoint from every query range. */
typedef struct {
    int32_t q_off, q_len;
    int32_t k_off, k_len;
    int32_t p_off, t_off;
} ws_s2_seg;

typedef struct {
    float *out; /* [rows, ≥ d2] stride ldo: o of query rows (= , not +=) */
    int ldo;
    float *logits, *probs; /* written by attention_forward, read by its backward */
    float *pair;           /* T [Σ k_len², d2] (pair_forward writes it) */
    const float *p, *l1, *l2, *u; /* query rows (p) and key rows (l1, l2, u) */
    int ldp, ldl1, ldl2, ldu;
    const float *b; /* [n_heads·δ, δ·δ]: B_h is rows [h·δ, (h+1)·δ) */
    const ws_s2_seg *segs; /* device array */
    int n_segs;
    int n_heads, d2;
    float tau;
    /* Key rows output their own value: o_j = u_j (virtual entities, which the
     * 2-simplicial update leaves as a recurrence). */
    int values_out;
    int max_q_len, max_k_len; /* bounds over segs, for scratch and launch sizing */
} ws_s2_args;

typedef struct {
    float *dp, *dl1, *dl2, *du; /* strides of p, l1, l2, u */
    float *db;                  /* like b */
    float *dpair;               /* like pair */
    const float *dout;          /* stride ldo */
} ws_s2_grads;

struct ws_simplicial_ops {
    /* pair = T from u and b */
    ws_status (*pair_forward)(ws_backend *be, const ws_s2_args *a);
    /* du += , db += from g->dpair */
    ws_status (*pair_backward)(ws_backend *be, const ws_s2_args *a, const ws_s2_grads *g);
    /* logits, probs, out from p, l1, l2 and pair (and u with values_out) */
    ws_status (*attention_forward)(ws_backend *be, const ws_s2_args *a);
    /* dp, dl1, dl2, dpair += from g->dout (and du with values_out) */
    ws_status (*attention_backward)(ws_backend *be, const ws_s2_args *a, const ws_s2_grads *g);
};

#endif
