/* cpu_rn.c — the relation-network ops (kernels/mixer_ops_rn.h) on the CPU.
 *
 * Work splits over (segment, query) items for everything a query owns (its K²
 * pair rows, its query-row gradient) and over (segment, object) items for the
 * object-row gradients, which sum over all of a segment's queries: each item
 * writes only its own rows, so no atomics are needed. */
#include "../mixer_ops_rn.h"
#include "cpu_internal.h"

#define WS_PAR_MIN 4096 /* elements below which threads cost more than they save */

static ws_status rn_pair_forward(ws_backend *be, float *pairs, const float *obj, const float *qry,
                                 const ws_rn_args *a)
{
    int K = a->n_obj, w = a->width, max_q = a->max_q_len > 0 ? a->max_q_len : 1;
    long items = (long)a->n_segs * max_q;
#pragma omp parallel for schedule(dynamic, 1) num_threads(ws_cpu_threads(be))
    for (long it = 0; it < items; it++) {
        const ws_attn_seg *s = &a->segs[it / max_q];
        int k = (int)(it % max_q);
        if (k >= s->q_len) continue;
        long r = s->q_off + k;
        const float *q = qry + r * w;
        for (int i = 0; i < K; i++) {
            const float *oi = obj + (long)(s->k_off + i) * 2 * w;
            for (int j = 0; j < K; j++) {
                const float *oj = obj + (long)(s->k_off + j) * 2 * w + w;
                float *out = pairs + ((r * K + i) * K + j) * w;
#pragma omp simd
                for (int c = 0; c < w; c++) {
                    float z = oi[c] + oj[c] + q[c];
                    out[c] = z > 0.0f ? z : 0.0f;
                }
            }
        }
    }
    return WS_OK;
}

/* dst += dpairs ⊙ [pairs > 0] over one pair row. */
static void add_masked(float *dst, const float *dpairs, const float *pairs, int w)
{
#pragma omp simd
    for (int c = 0; c < w; c++) dst[c] += pairs[c] > 0.0f ? dpairs[c] : 0.0f;
}

static ws_status rn_pair_backward(ws_backend *be, float *dobj, float *dqry,
                                  const float *dpairs, const float *pairs, const ws_rn_args *a)
{
    int K = a->n_obj, w = a->width, max_q = a->max_q_len > 0 ? a->max_q_len : 1;
    int threads = ws_cpu_threads(be);
    long per = (long)K * K;
    if (dqry) {
        long items = (long)a->n_segs * max_q;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
        for (long it = 0; it < items; it++) {
            const ws_attn_seg *s = &a->segs[it / max_q];
            int k = (int)(it % max_q);
            if (k >= s->q_len) continue;
            long r = s->q_off + k;
            for (long p = 0; p < per; p++)
                add_masked(dqry + r * w, dpairs + (r * per + p) * w, pairs + (r * per + p) * w, w);
        }
    }
    if (dobj) {
        /* Item (segment, i) owns object row k_off+i: its A half sums the pairs
         * (·, i, ·), its B half the pairs (·, ·, i), over the segment's queries. */
        long items = (long)a->n_segs * K;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
        for (long it = 0; it < items; it++) {
            const ws_attn_seg *s = &a->segs[it / K];
            int i = (int)(it % K);
            float *da = dobj + (long)(s->k_off + i) * 2 * w, *db = da + w;
            for (long r = s->q_off; r < s->q_off + s->q_len; r++)
                for (int j = 0; j < K; j++) {
                    long as_i = (r * K + i) * K + j, as_j = (r * K + j) * K + i;
                    add_masked(da, dpairs + as_i * w, pairs + as_i * w, w);
                    add_masked(db, dpairs + as_j * w, pairs + as_j * w, w);
                }
        }
    }
    return WS_OK;
}

static ws_status rn_pair_sum_forward(ws_backend *be, float *out, const float *in, int n,
                                     int per, int width, float scale)
{
    int threads = (long)n * per * width >= WS_PAR_MIN ? ws_cpu_threads(be) : 1;
#pragma omp parallel for num_threads(threads)
    for (int r = 0; r < n; r++) {
        float *o = out + (long)r * width;
        for (int c = 0; c < width; c++) o[c] = 0.0f;
        for (int p = 0; p < per; p++) {
            const float *row = in + ((long)r * per + p) * width;
#pragma omp simd
            for (int c = 0; c < width; c++) o[c] += row[c];
        }
        for (int c = 0; c < width; c++) o[c] *= scale;
    }
    return WS_OK;
}

static ws_status rn_pair_sum_backward(ws_backend *be, float *din, const float *dout, int n,
                                      int per, int width, float scale)
{
    int threads = (long)n * per * width >= WS_PAR_MIN ? ws_cpu_threads(be) : 1;
#pragma omp parallel for num_threads(threads)
    for (int r = 0; r < n; r++) {
        const float *g = dout + (long)r * width;
        for (int p = 0; p < per; p++) {
            float *row = din + ((long)r * per + p) * width;
#pragma omp simd
            for (int c = 0; c < width; c++) row[c] += scale * g[c];
        }
    }
    return WS_OK;
}

static ws_status rn_relu_forward(ws_backend *be, float *out, const float *in, size_t n)
{
#pragma omp parallel for simd num_threads(ws_cpu_threads(be)) if (n >= WS_PAR_MIN)
    for (size_t i = 0; i < n; i++) out[i] = in[i] > 0.0f ? in[i] : 0.0f;
    return WS_OK;
}

static ws_status rn_relu_backward(ws_backend *be, float *din, const float *out,
                                  const float *dout, size_t n)
{
#pragma omp parallel for simd num_threads(ws_cpu_threads(be)) if (n >= WS_PAR_MIN)
    for (size_t i = 0; i < n; i++) din[i] += out[i] > 0.0f ? dout[i] : 0.0f;
    return WS_OK;
}

const struct ws_rn_ops ws_cpu_rn_ops = {
    .pair_forward = rn_pair_forward,
    .pair_backward = rn_pair_backward,
    .pair_sum_forward = rn_pair_sum_forward,
    .pair_sum_backward = rn_pair_sum_backward,
    .relu_forward = rn_relu_forward,
    .relu_backward = rn_relu_backward,
};
