/* mixer_ops_rn.h — the backend ops of the relation-network readout
 * (../shared/MIXERS.md §5; model/readout_rn.c).
 *
 * RN(O, q) = f(Σ_{i,j} g(o_i, o_j, q)) over every ordered pair of a set's K
 * objects, i = j included. g's first layer is affine in the concatenation, so it
 * splits per token: W₁[o_i; o_j; q] + b₁ = A o_i + B o_j + (C q + b₁). The caller
 * projects each object once (obj rows [A o ; B o], 2w wide) and each query once
 * (qry rows C q + b₁, w wide) with ordinary linear ops; pair_forward then only
 * adds and rectifies per pair. Later layers of g are row-wise linear ops over the
 * pair rows, and f runs on the pair sum.
 *
 * Pair rows: query row r of the packed queries owns the K² rows
 * [r·K², (r+1)·K²), pair (i, j) at r·K² + i·K + j, each `width` floats. Segments
 * (backend.h ws_attn_seg) pair queries [q_off, q_off+q_len) with objects
 * [k_off, k_off+K); every segment has exactly K objects (k_len == K, p_off
 * unused), and segments' query and object ranges are disjoint.
 *
 * Backward ops ACCUMULATE (+=), as every backend op. */
#ifndef WS_MIXER_OPS_RN_H
#define WS_MIXER_OPS_RN_H

#include "backend.h"

typedef struct {
    const ws_attn_seg *segs; /* device, n_segs segments */
    int n_segs;
    int n_obj;     /* K: objects per segment */
    int width;     /* w: width of g's layers */
    int max_q_len; /* bound over segs, for launch sizing */
} ws_rn_args;

struct ws_rn_ops {
    /* pairs[r·K² + i·K + j] = relu(obj[k_off+i, 0:w] + obj[k_off+j, w:2w] + qry[r])
     * for every query r of a segment; obj [rows, 2w], qry [n_query, w]. */
    ws_status (*pair_forward)(ws_backend *be, float *pairs, const float *obj, const float *qry,
                              const ws_rn_args *a);
    /* With dz = dpairs ⊙ [pairs > 0] (the ReLU, read off its output):
     * dobj[k_off+i, 0:w] += Σ_{r,j} dz[r,i,j], dobj[k_off+j, w:2w] += Σ_{r,i} dz[r,i,j],
     * dqry[r] += Σ_{i,j} dz[r,i,j]. */
    ws_status (*pair_backward)(ws_backend *be, float *dobj, float *dqry, const float *dpairs,
                               const float *pairs, const ws_rn_args *a);
    /* out[r] = scale · Σ_{p < per} in[r·per + p] over rows of width w, r < n. */
    ws_status (*pair_sum_forward)(ws_backend *be, float *out, const float *in, int n, int per,
                                  int width, float scale);
    /* din[r·per + p] += scale · dout[r], masked by [relu_out[r·per + p] > 0] when
     * relu_out is given: then din is the gradient of the pre-activations of a
     * ReLU whose outputs were summed (one pass instead of two). */
    ws_status (*pair_sum_backward)(ws_backend *be, float *din, const float *dout,
                                   const float *relu_out, int n, int per, int width,
                                   float scale);
    /* out = max(in, 0) (out may alias in); backward din += dout ⊙ [out > 0]. */
    ws_status (*relu_forward)(ws_backend *be, float *out, const float *in, size_t n);
    ws_status (*relu_backward)(ws_backend *be, float *din, const float *out, const float *dout,
                               size_t n);
};

#endif
