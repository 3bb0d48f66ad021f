/* cpu_rmc.c — the relational-memory-core ops (mixer_ops_rmc.h) on the CPU:
 * OpenMP over segments (trajectories) for the gated update and the context
 * mean, over elements for tanh. */
#include <math.h>

#include "../mixer_ops_rmc.h"
#include "cpu_internal.h"
#include "cpu_math.h"

#define WS_PAR_MIN 4096 /* elements below which threads cost more */

/* Segments are few (one per trajectory) and their rows cheap: threads only pay
 * off on large batches. */
static int seg_threads(const ws_backend *be, size_t work)
{
    return work >= WS_PAR_MIN ? ws_cpu_threads(be) : 1;
}

static ws_status gate_forward(ws_backend *be, const ws_rmc_gate_args *a)
{
    int d = a->d;
#pragma omp parallel for num_threads(seg_threads(be, (size_t)a->n_rows * d)) schedule(static)
    for (int s = 0; s < a->n_segs; s++) {
        const ws_attn_seg *sg = &a->segs[s];
        const float *gx = a->gx + (long)s * 2 * d;
        for (int r = sg->q_off; r < sg->q_off + sg->q_len; r++) {
            const float *gm = a->gm + (long)r * 2 * d, *cand = a->cand + (long)r * d;
            const float *mp = a->m_prev + (long)r * d;
            float *gates = a->gates + (long)r * 2 * d, *an = a->a + (long)r * d;
            float *out = a->out + (long)r * d;
            for (int j = 0; j < d; j++) {
                float i = ws_sigmoidf(gm[j] + gx[j] + a->input_bias);
                float f = ws_sigmoidf(gm[d + j] + gx[d + j] + a->forget_bias);
                float t = tanhf(cand[j]);
                gates[j] = i, gates[d + j] = f, an[j] = t;
                out[j] = i * t + f * mp[j]; /* out may alias m_prev: mp[j] read first */
            }
        }
    }
    return WS_OK;
}

/* With u = dout: d_cand = u·i·(1 − a²), dG_i = u·a·i(1 − i), dG_f = u·m_prev·f(1 − f),
 * d_gx[s] = Σ_rows dG, d_m_prev = u·f. */
static ws_status gate_backward(ws_backend *be, const ws_rmc_gate_args *a,
                               const ws_rmc_gate_grads *g)
{
    int d = a->d;
#pragma omp parallel for num_threads(seg_threads(be, (size_t)a->n_rows * d)) schedule(static)
    for (int s = 0; s < a->n_segs; s++) {
        const ws_attn_seg *sg = &a->segs[s];
        float *dgx = g->d_gx ? g->d_gx + (long)s * 2 * d : NULL;
        for (int r = sg->q_off; r < sg->q_off + sg->q_len; r++) {
            const float *gates = a->gates + (long)r * 2 * d, *an = a->a + (long)r * d;
            const float *mp = a->m_prev + (long)r * d, *u = g->dout + (long)r * d;
            for (int j = 0; j < d; j++) {
                float i = gates[j], f = gates[d + j], t = an[j];
                float dgi = u[j] * t * i * (1.0f - i), dgf = u[j] * mp[j] * f * (1.0f - f);
                if (g->d_cand) g->d_cand[(long)r * d + j] += u[j] * i * (1.0f - t * t);
                if (g->d_gm) {
                    g->d_gm[(long)r * 2 * d + j] += dgi;
                    g->d_gm[(long)r * 2 * d + d + j] += dgf;
                }
                if (dgx) dgx[j] += dgi, dgx[d + j] += dgf;
                if (g->d_m_prev) g->d_m_prev[(long)r * d + j] += u[j] * f;
            }
        }
    }
    return WS_OK;
}

static ws_status tanh_forward(ws_backend *be, float *out, const float *in, size_t n)
{
#pragma omp parallel for num_threads(ws_cpu_threads(be)) if (n >= WS_PAR_MIN)
    for (size_t i = 0; i < n; i++) out[i] = tanhf(in[i]);
    return WS_OK;
}

static ws_status tanh_backward(ws_backend *be, float *din, const float *out, const float *dout,
                               size_t n)
{
#pragma omp parallel for num_threads(ws_cpu_threads(be)) if (n >= WS_PAR_MIN)
    for (size_t i = 0; i < n; i++) din[i] += dout[i] * (1.0f - out[i] * out[i]);
    return WS_OK;
}

static ws_status seg_mean_forward(ws_backend *be, float *out, const float *rows,
                                  const ws_attn_seg *segs, int n_segs, int d)
{
#pragma omp parallel for num_threads(seg_threads(be, (size_t)n_segs * d)) schedule(static)
    for (int s = 0; s < n_segs; s++) {
        float *y = out + (long)s * d;
        float inv = 1.0f / (float)segs[s].k_len;
        for (int j = 0; j < d; j++) y[j] = 0.0f;
        for (int k = segs[s].k_off; k < segs[s].k_off + segs[s].k_len; k++)
            for (int j = 0; j < d; j++) y[j] += rows[(long)k * d + j];
        for (int j = 0; j < d; j++) y[j] *= inv;
    }
    return WS_OK;
}

static ws_status seg_mean_backward(ws_backend *be, float *d_rows, const float *dout,
                                   const ws_attn_seg *segs, int n_segs, int d)
{
    /* Segments own disjoint row ranges, so segments can run in parallel. */
#pragma omp parallel for num_threads(seg_threads(be, (size_t)n_segs * d)) schedule(static)
    for (int s = 0; s < n_segs; s++) {
        const float *dy = dout + (long)s * d;
        float inv = 1.0f / (float)segs[s].k_len;
        for (int k = segs[s].k_off; k < segs[s].k_off + segs[s].k_len; k++)
            for (int j = 0; j < d; j++) d_rows[(long)k * d + j] += dy[j] * inv;
    }
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
