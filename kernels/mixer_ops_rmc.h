/* mixer_ops_rmc.h — backend ops of the relational-memory-core Updater (rmc,
 * ../shared/MIXERS.md §4): the gated memory update and the two small helpers
 * it needs (tanh of the previous memory, the per-trajectory mean of the
 * instruction context). Its attention, projections and LayerNorms are the
 * backend's ordinary ops.
 *
 * Rows are ragged like attention: segment s (one trajectory) owns the memory
 * rows [q_off, q_off + q_len) and the context rows [k_off, k_off + k_len) (a
 * ws_attn_seg of the Updater's state → context attention); p_off is unused.
 * Backward ops ACCUMULATE (+=), as every backend op. */
#ifndef WS_MIXER_OPS_RMC_H
#define WS_MIXER_OPS_RMC_H

#include "backend.h"

/* The gated update of 'unit' style (one gate per element):
 *   G   = gm[r] + gx[s]          for row r of segment s, width 2d: [G_i | G_f]
 *   i   = σ(G_i + input_bias),   f = σ(G_f + forget_bias)
 *   a   = tanh(cand)
 *   out = i ⊙ a + f ⊙ m_prev
 * gm = tanh(M_{t-1}) W_gmᵀ + b_gm per row, gx = x̄ W_gxᵀ + b_gx per segment.
 * Forward writes gates ([n_rows, 2d]: i then f) and a for the backward; out may
 * alias m_prev (each element is read before it is written). Rows outside every
 * segment are left alone. */
typedef struct {
    int n_rows, d;
    const ws_attn_seg *segs; /* device, n_segs */
    int n_segs;
    float input_bias, forget_bias; /* constants: 0 and +1 in the RMC */
    const float *gm;     /* [n_rows, 2d] */
    const float *gx;     /* [n_segs, 2d] */
    const float *cand;   /* [n_rows, d] the candidate memory before tanh */
    const float *m_prev; /* [n_rows, d] */
    float *gates;        /* [n_rows, 2d] forward: σ outputs i | f */
    float *a;            /* [n_rows, d] forward: tanh(cand) */
    float *out;          /* [n_rows, d] forward: the new memory */
} ws_rmc_gate_args;

/* Gradients for ws_rmc_gate_args (reading its gates, a, m_prev): every output
 * accumulates and may be NULL when not wanted. d_gm is ∂L/∂gm (= ∂L/∂G),
 * d_gx sums it over each segment's rows (the broadcast), d_m_prev is the direct
 * path f ⊙ dout only (the path through gm belongs to whoever computed gm). */
typedef struct {
    const float *dout; /* [n_rows, d] */
    float *d_cand;     /* [n_rows, d] */
    float *d_gm;       /* [n_rows, 2d] */
    float *d_gx;       /* [n_segs, 2d] */
    float *d_m_prev;   /* [n_rows, d] */
} ws_rmc_gate_grads;

typedef struct ws_rmc_ops {
    ws_status (*gate_forward)(ws_backend *be, const ws_rmc_gate_args *a);
    ws_status (*gate_backward)(ws_backend *be, const ws_rmc_gate_args *a,
                               const ws_rmc_gate_grads *g);
    /* out = tanh(in); backward din += dout ⊙ (1 − out²) from the saved output */
    ws_status (*tanh_forward)(ws_backend *be, float *out, const float *in, size_t n);
    ws_status (*tanh_backward)(ws_backend *be, float *din, const float *out, const float *dout,
                               size_t n);
    /* out[s] = mean of rows [k_off, k_off + k_len) of segment s (k_len >= 1);
     * backward rows[k] += dout[s] / k_len. */
    ws_status (*seg_mean_forward)(ws_backend *be, float *out, const float *rows,
                                  const ws_attn_seg *segs, int n_segs, int d);
    ws_status (*seg_mean_backward)(ws_backend *be, float *d_rows, const float *dout,
                                   const ws_attn_seg *segs, int n_segs, int d);
} ws_rmc_ops;

#endif
