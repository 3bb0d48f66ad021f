/* cpu_attention.c — multi-head attention over ragged segments, softmax fused.
 *
 * Work splits over (segment, head) pairs. Each pair reads and writes its own
 * columns of its own rows (segments' query and key ranges are disjoint), so the
 * backward pass needs no atomics. */
#include <cblas.h>
#include <math.h>
#include <omp.h>

#include "cpu_internal.h"
#include "cpu_math.h"

/* Row-wise masked softmax of s[q_len, k_len] in place. */
static void softmax_rows(float *s, int q_len, int k_len, const uint8_t *valid)
{
    for (int i = 0; i < q_len; i++) {
        float *row = s + (long)i * k_len;
        float mx = -INFINITY;
        for (int j = 0; j < k_len; j++)
            if (!valid || valid[j]) mx = fmaxf(mx, row[j]);
        if (mx == -INFINITY) { /* every key masked: no attention at all */
            for (int j = 0; j < k_len; j++) row[j] = 0.0f;
            continue;
        }
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int j = 0; j < k_len; j++) {
            float e = ws_expf(row[j] - mx);
            e = (!valid || valid[j]) ? e : 0.0f;
            row[j] = e;
            sum += e;
        }
        float inv = 1.0f / sum;
        for (int j = 0; j < k_len; j++) row[j] *= inv;
    }
}

ws_status ws_cpu_attention_forward(ws_backend *be, const ws_attn_args *a)
{
    int dh = a->d / a->n_heads;
    float scale = 1.0f / sqrtf((float)dh);
    int pairs = a->n_segs * a->n_heads;
#pragma omp parallel for schedule(dynamic, 1) num_threads(ws_cpu_threads(be))
    for (int p = 0; p < pairs; p++) {
        const ws_attn_seg *s = &a->segs[p / a->n_heads];
        int h = p % a->n_heads;
        if (s->q_len <= 0) continue;
        float *probs = a->probs + s->p_off + (long)h * s->q_len * s->k_len;
        float *out = a->out + (long)s->q_off * a->ldo + h * dh;
        if (s->k_len <= 0) {
            for (int i = 0; i < s->q_len; i++)
                for (int c = 0; c < dh; c++) out[(long)i * a->ldo + c] = 0.0f;
            continue;
        }
        const float *q = a->q + (long)s->q_off * a->ldq + h * dh;
        const float *k = a->k + (long)s->k_off * a->ldk + h * dh;
        const float *v = a->v + (long)s->k_off * a->ldv + h * dh;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s->q_len, s->k_len, dh, scale, q,
                    a->ldq, k, a->ldk, 0.0f, probs, s->k_len);
        softmax_rows(probs, s->q_len, s->k_len, a->key_valid ? a->key_valid + s->k_off : NULL);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s->q_len, dh, s->k_len, 1.0f,
                    probs, s->k_len, v, a->ldv, 0.0f, out, a->ldo);
    }
    return WS_OK;
}

ws_status ws_cpu_attention_backward(ws_backend *be, const ws_attn_args *a,
                                    const ws_attn_grads *g)
{
    int dh = a->d / a->n_heads;
    float scale = 1.0f / sqrtf((float)dh);
    int threads = ws_cpu_threads(be);
    size_t per_thread = (size_t)(a->max_q_len > 0 ? a->max_q_len : 1) *
                        (size_t)(a->max_k_len > 0 ? a->max_k_len : 1);
    float *scratch = ws_cpu_scratch(be, (size_t)threads * per_thread);
    if (!scratch) return WS_ERR_NOMEM;
    int pairs = a->n_segs * a->n_heads;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int p = 0; p < pairs; p++) {
        const ws_attn_seg *s = &a->segs[p / a->n_heads];
        int h = p % a->n_heads;
        if (s->q_len <= 0 || s->k_len <= 0) continue;
        float *dp = scratch + (size_t)omp_get_thread_num() * per_thread;
        const float *probs = a->probs + s->p_off + (long)h * s->q_len * s->k_len;
        const float *q = a->q + (long)s->q_off * a->ldq + h * dh;
        const float *k = a->k + (long)s->k_off * a->ldk + h * dh;
        const float *v = a->v + (long)s->k_off * a->ldv + h * dh;
        const float *dout = g->dout + (long)s->q_off * a->ldo + h * dh;
        float *dq = g->dq + (long)s->q_off * a->ldq + h * dh;
        float *dk = g->dk + (long)s->k_off * a->ldk + h * dh;
        float *dv = g->dv + (long)s->k_off * a->ldv + h * dh;
        /* dV += Pᵀ dout */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s->k_len, dh, s->q_len, 1.0f, probs,
                    s->k_len, dout, a->ldo, 1.0f, dv, a->ldv);
        /* dP = dout Vᵀ, then dS = P ⊙ (dP − Σ_j dP⊙P) · scale (masked keys have P = 0) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s->q_len, s->k_len, dh, 1.0f, dout,
                    a->ldo, v, a->ldv, 0.0f, dp, s->k_len);
        for (int i = 0; i < s->q_len; i++) {
            const float *pr = probs + (long)i * s->k_len;
            float *dr = dp + (long)i * s->k_len;
            float dot = 0.0f;
            for (int j = 0; j < s->k_len; j++) dot += pr[j] * dr[j];
            for (int j = 0; j < s->k_len; j++) dr[j] = pr[j] * (dr[j] - dot) * scale;
        }
        /* dQ += dS K, dK += dSᵀ Q */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s->q_len, dh, s->k_len, 1.0f, dp,
                    s->k_len, k, a->ldk, 1.0f, dq, a->ldq);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s->k_len, dh, s->q_len, 1.0f, dp,
                    s->k_len, q, a->ldq, 1.0f, dk, a->ldk);
    }
    return WS_OK;
}
