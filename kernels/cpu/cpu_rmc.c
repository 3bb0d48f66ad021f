/* cpu_rmc.c — the relational-memory-core ops (mixer_ops_rmc.h) on the CPU:
 * OpenMP over segments (trajectories) for the gated update and the context
 * mean, over elements for tanh; SIMD along the rows. */
#include "kernels/mixer_ops_rmc.h"
#include "cpu_internal.h"
#include "cpu_math.h"
#include "cpu_par.h"

/* tanh as the odd rational minimax approximation of Eigen's
 * generic_fast_tanh_float (its coefficients), clamped where it reaches ±1 to
 * float precision: |error| < 4e-7 over the line, and vectorisable where glibc's
 * tanhf is a scalar call that took most of the gate time. */
#pragma omp declare simd notinbranch
static inline float rmc_tanhf(float x)
{
    const float c = 7.90531110763549805f;
    x = x < -c ? -c : (x > c ? c : x);
    float x2 = x * x;
    float p = -2.76076847742355e-16f;
    p = p * x2 + 2.00018790482477e-13f;
    p = p * x2 - 8.60467152213735e-11f;
    p = p * x2 + 5.12229709037114e-08f;
    p = p * x2 + 1.48572235717979e-05f;
    p = p * x2 + 6.37261928875436e-04f;
    p = p * x2 + 4.89352455891786e-03f;
    float q = 1.19825839466702e-06f;
    q = q * x2 + 1.18534705686654e-04f;
    q = q * x2 + 2.26843463243900e-03f;
    q = q * x2 + 4.89352518554385e-03f;
    return x * p / q;
}

/* Segments are few (one per trajectory) and their rows cheap: the ops over
 * segments take threads by their elements, like the element-wise ones. */
static ws_status gate_forward(ws_backend *be, const ws_rmc_gate_args *a)
{
    int d = a->d;
    int threads = ws_cpu_threads_for(be, (size_t)a->n_rows * d);
    WS_CPU_FOR(threads, schedule(static), for (int s = 0; s < a->n_segs; s++) {
        const ws_attn_seg *sg = &a->segs[s];
        const float *gx = a->gx + (long)s * 2 * d;
        for (int r = sg->q_off; r < sg->q_off + sg->q_len; r++) {
            const float *gm = a->gm + (long)r * 2 * d, *cand = a->cand + (long)r * d;
            const float *mp = a->m_prev + (long)r * d;
            float *gates = a->gates + (long)r * 2 * d, *an = a->a + (long)r * d;
            float *out = a->out + (long)r * d;
            _Pragma("omp simd")
            for (int j = 0; j < d; j++) {
                float i = ws_sigmoidf(gm[j] + gx[j] + a->input_bias);
                float f = ws_sigmoidf(gm[d + j] + gx[d + j] + a->forget_bias);
                float t = rmc_tanhf(cand[j]);
                gates[j] = i, gates[d + j] = f, an[j] = t;
                out[j] = i * t + f * mp[j]; /* out may alias m_prev: mp[j] read first */
            }
        }
    });
    return WS_OK;
}

/* With u = dout: d_cand = u·i·(1 − a²), dG_i = u·a·i(1 − i), dG_f = u·m_prev·f(1 − f),
 * d_gx[s] = Σ_rows dG, d_m_prev = u·f. */
static ws_status gate_backward(ws_backend *be, const ws_rmc_gate_args *a,
                               const ws_rmc_gate_grads *g)
{
    int d = a->d;
    int threads = ws_cpu_threads_for(be, (size_t)a->n_rows * d);
    WS_CPU_FOR(threads, schedule(static), for (int s = 0; s < a->n_segs; s++) {
        const ws_attn_seg *sg = &a->segs[s];
        float *dgx = g->d_gx ? g->d_gx + (long)s * 2 * d : NULL;
        for (int r = sg->q_off; r < sg->q_off + sg->q_len; r++) {
            const float *gi = a->gates + (long)r * 2 * d, *gf = gi + d, *an = a->a + (long)r * d;
            const float *mp = a->m_prev + (long)r * d, *u = g->dout + (long)r * d;
            if (g->d_cand) {
                float *dc = g->d_cand + (long)r * d;
                _Pragma("omp simd")
                for (int j = 0; j < d; j++) dc[j] += u[j] * gi[j] * (1.0f - an[j] * an[j]);
            }
            if (g->d_gm) {
                float *di = g->d_gm + (long)r * 2 * d, *df = di + d;
                _Pragma("omp simd")
                for (int j = 0; j < d; j++) {
                    di[j] += u[j] * an[j] * gi[j] * (1.0f - gi[j]);
                    df[j] += u[j] * mp[j] * gf[j] * (1.0f - gf[j]);
                }
            }
            if (dgx) {
                _Pragma("omp simd")
                for (int j = 0; j < d; j++) {
                    dgx[j] += u[j] * an[j] * gi[j] * (1.0f - gi[j]);
                    dgx[d + j] += u[j] * mp[j] * gf[j] * (1.0f - gf[j]);
                }
            }
            if (g->d_m_prev) {
                float *dm = g->d_m_prev + (long)r * d;
                _Pragma("omp simd")
                for (int j = 0; j < d; j++) dm[j] += u[j] * gf[j];
            }
        }
    });
    return WS_OK;
}

static ws_status tanh_forward(ws_backend *be, float *out, const float *in, size_t n)
{
    int threads = ws_cpu_threads_for(be, n);
    WS_CPU_FOR_SIMD(threads, for (size_t i = 0; i < n; i++) out[i] = rmc_tanhf(in[i]););
    return WS_OK;
}

static ws_status tanh_backward(ws_backend *be, float *din, const float *out, const float *dout,
                               size_t n)
{
    int threads = ws_cpu_threads_for(be, n);
    WS_CPU_FOR_SIMD(threads,
                    for (size_t i = 0; i < n; i++) din[i] += dout[i] * (1.0f - out[i] * out[i]););
    return WS_OK;
}

static ws_status seg_mean_forward(ws_backend *be, float *out, const float *rows,
                                  const ws_attn_seg *segs, int n_segs, int d)
{
    int threads = ws_cpu_threads_for(be, (size_t)n_segs * d);
    WS_CPU_FOR(threads, schedule(static), for (int s = 0; s < n_segs; s++) {
        float *y = out + (long)s * d;
        float inv = 1.0f / (float)segs[s].k_len;
        for (int j = 0; j < d; j++) y[j] = 0.0f;
        for (int k = segs[s].k_off; k < segs[s].k_off + segs[s].k_len; k++)
            for (int j = 0; j < d; j++) y[j] += rows[(long)k * d + j];
        for (int j = 0; j < d; j++) y[j] *= inv;
    });
    return WS_OK;
}

static ws_status seg_mean_backward(ws_backend *be, float *d_rows, const float *dout,
                                   const ws_attn_seg *segs, int n_segs, int d)
{
    /* Segments own disjoint row ranges, so segments can run in parallel. */
    int threads = ws_cpu_threads_for(be, (size_t)n_segs * d);
    WS_CPU_FOR(threads, schedule(static), for (int s = 0; s < n_segs; s++) {
        const float *dy = dout + (long)s * d;
        float inv = 1.0f / (float)segs[s].k_len;
        for (int k = segs[s].k_off; k < segs[s].k_off + segs[s].k_len; k++)
            for (int j = 0; j < d; j++) d_rows[(long)k * d + j] += dy[j] * inv;
    });
    return WS_OK;
}

const ws_rmc_ops ws_cpu_rmc_ops = {
    .gate_forward = gate_forward,
    .gate_backward = gate_backward,
    .tanh_forward = tanh_forward,
    .tanh_backward = tanh_backward,
    .seg_mean_forward = seg_mean_forward,
    .seg_mean_backward = seg_mean_backward,
};
