/* cpu_rn.c — the relation-network ops (kernels/mixer_ops_rn.h) on the CPU.
 *
 * The forward splits over (segment, query) items, each writing its query's K²
 * pair rows; the pair backward over segments, since object-row gradients sum
 * over all of a segment's queries. Each item writes only its own rows, so no
 * atomics are needed. */
#include "kernels/mixer_ops_rn.h"
#include "cpu_internal.h"
#include "cpu_par.h"

static ws_status rn_pair_forward(ws_backend *be, float *pairs, const float *obj, const float *qry,
                                 const ws_rn_args *a)
{
    int K = a->n_obj, w = a->width, max_q = a->max_q_len > 0 ? a->max_q_len : 1;
    long items = (long)a->n_segs * max_q;
    WS_CPU_FOR(ws_cpu_threads(be), schedule(dynamic, 1), for (long it = 0; it < items; it++) {
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
                _Pragma("omp simd")
                for (int c = 0; c < w; c++) {
                    float z = oi[c] + oj[c] + q[c];
                    out[c] = z > 0.0f ? z : 0.0f;
                }
            }
        }
    });
    return WS_OK;
}

/* One pass over a segment's pair rows: with dz = dpairs ⊙ [pairs > 0] (the
 * ReLU, read off its output), each pair row adds into its query's row and the
 * A half of object i and B half of object j. The segment owns all three. */
static ws_status rn_pair_backward(ws_backend *be, float *dobj, float *dqry,
                                  const float *dpairs, const float *pairs, const ws_rn_args *a)
{
    int K = a->n_obj, w = a->width;
    WS_CPU_FOR(ws_cpu_threads(be), schedule(dynamic, 1), for (int sg = 0; sg < a->n_segs; sg++) {
        const ws_attn_seg *s = &a->segs[sg];
        for (long r = s->q_off; r < s->q_off + s->q_len; r++)
            for (int i = 0; i < K; i++) {
                float *dq = dqry + r * w, *da = dobj + (long)(s->k_off + i) * 2 * w;
                for (int j = 0; j < K; j++) {
                    long row = ((r * K + i) * K + j) * w;
                    const float *dp = dpairs + row, *h = pairs + row;
                    float *db = dobj + (long)(s->k_off + j) * 2 * w + w;
                    _Pragma("omp simd")
                    for (int c = 0; c < w; c++) {
                        float dz = h[c] > 0.0f ? dp[c] : 0.0f;
                        dq[c] += dz;
                        da[c] += dz;
                        db[c] += dz;
                    }
                }
            }
    });
    return WS_OK;
}

static ws_status rn_pair_sum_forward(ws_backend *be, float *out, const float *in, int n,
                                     int per, int width, float scale)
{
    int threads = ws_cpu_threads_for(be, (size_t)n * per * width);
    WS_CPU_FOR(threads, , for (int r = 0; r < n; r++) {
        float *o = out + (long)r * width;
        for (int c = 0; c < width; c++) o[c] = 0.0f;
        for (int p = 0; p < per; p++) {
            const float *row = in + ((long)r * per + p) * width;
            _Pragma("omp simd")
            for (int c = 0; c < width; c++) o[c] += row[c];
        }
        for (int c = 0; c < width; c++) o[c] *= scale;
    });
    return WS_OK;
}

static ws_status rn_pair_sum_backward(ws_backend *be, float *din, const float *dout,
                                      const float *relu_out, int n, int per, int width,
                                      float scale)
{
    int threads = ws_cpu_threads_for(be, (size_t)n * per * width);
    WS_CPU_FOR(threads, , for (int r = 0; r < n; r++) {
        const float *g = dout + (long)r * width;
        for (int p = 0; p < per; p++) {
            long row = ((long)r * per + p) * width;
            float *d = din + row;
            if (relu_out) {
                const float *h = relu_out + row;
                _Pragma("omp simd")
                for (int c = 0; c < width; c++) d[c] += h[c] > 0.0f ? scale * g[c] : 0.0f;
            } else {
                _Pragma("omp simd")
                for (int c = 0; c < width; c++) d[c] += scale * g[c];
            }
        }
    });
    return WS_OK;
}

static ws_status rn_relu_forward(ws_backend *be, float *out, const float *in, size_t n)
{
    int threads = ws_cpu_threads_for(be, n);
    WS_CPU_FOR_SIMD(threads, for (size_t i = 0; i < n; i++) out[i] = in[i] > 0.0f ? in[i] : 0.0f;);
    return WS_OK;
}

static ws_status rn_relu_backward(ws_backend *be, float *din, const float *out,
                                  const float *dout, size_t n)
{
    int threads = ws_cpu_threads_for(be, n);
    WS_CPU_FOR_SIMD(threads,
                    for (size_t i = 0; i < n; i++) din[i] += out[i] > 0.0f ? dout[i] : 0.0f;);
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
