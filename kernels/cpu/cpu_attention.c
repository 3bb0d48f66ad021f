/* cpu_attention.c — multi-head attention over ragged segments, softmax fused,
 * in the general form of mixer_ops_compositional.h's search op: head (search) h
 * reads the value columns [h·v_step, h·v_step + dv) and writes out columns
 * [h·dv, (h+1)·dv). Multi-head attention is v_step = dv = d_h; compositional
 * attention's searches share one block of all retrievals' values (v_step = 0).
 *
 * Forward work splits over (segment, head) pairs: each reads and writes its own
 * columns of its own rows (segments' query and key ranges are disjoint). The
 * backward splits the same way when heads' value columns are disjoint, and over
 * segments when they overlap (heads of a segment then add into the same dV), so
 * it needs no atomics. */
#include <cblas.h>
#include <math.h>
#include <omp.h>

#include "cpu_internal.h"
#include "cpu_math.h"

void ws_cpu_softmax_rows(float *s, int q_len, int k_len, const uint8_t *valid, int mask_diag)
{
    for (int i = 0; i < q_len; i++) {
        float *row = s + (long)i * k_len;
        int skip = mask_diag ? i : -1;
        float mx = -INFINITY;
        for (int j = 0; j < k_len; j++) /* not fmaxf: without -ffast-math a libm call */
            if ((!valid || valid[j]) && j != skip && row[j] > mx) mx = row[j];
        if (mx == -INFINITY) { /* every key masked: no attention at all */
            for (int j = 0; j < k_len; j++) row[j] = 0.0f;
            continue;
        }
        /* the diagonal out of the vectorised loop: exp(−inf) is clamped to ~1e-38 */
        if (skip >= 0) row[skip] = -INFINITY;
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int j = 0; j < k_len; j++) {
            float e = ws_expf(row[j] - mx);
            e = (!valid || valid[j]) ? e : 0.0f;
            row[j] = e;
            sum += e;
        }
        if (skip >= 0) sum -= row[skip], row[skip] = 0.0f;
        float inv = 1.0f / sum;
        for (int j = 0; j < k_len; j++) row[j] *= inv;
    }
}

void ws_cpu_softmax_rows_backward(const float *p, float *dp, int q_len, int k_len, float scale)
{
    for (int i = 0; i < q_len; i++) {
        const float *pr = p + (long)i * k_len;
        float *dr = dp + (long)i * k_len;
        float dot = 0.0f;
        for (int j = 0; j < k_len; j++) dot += pr[j] * dr[j];
        for (int j = 0; j < k_len; j++) dr[j] = pr[j] * (dr[j] - dot) * scale;
    }
}

ws_status ws_cpu_search_forward(ws_backend *be, const ws_comp_search_args *c)
{
    const ws_attn_args *a = &c->a;
    int dk = a->d / a->n_heads;
    float scale = 1.0f / sqrtf((float)dk);
    int pairs = a->n_segs * a->n_heads;
#pragma omp parallel for schedule(dynamic, 1) num_threads(ws_cpu_threads(be))
    for (int p = 0; p < pairs; p++) {
        const ws_attn_seg *s = &a->segs[p / a->n_heads];
        int h = p % a->n_heads;
        if (s->q_len <= 0) continue;
        float *probs = a->probs + s->p_off + (long)h * s->q_len * s->k_len;
        float *out = a->out + (long)s->q_off * a->ldo + (long)h * c->dv;
        if (s->k_len <= 0) {
            for (int i = 0; i < s->q_len; i++)
                for (int j = 0; j < c->dv; j++) out[(long)i * a->ldo + j] = 0.0f;
            continue;
        }
        const float *q = a->q + (long)s->q_off * a->ldq + h * dk;
        const float *k = a->k + (long)s->k_off * a->ldk + h * dk;
        const float *v = a->v + (long)s->k_off * a->ldv + (long)h * c->v_step;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s->q_len, s->k_len, dk, scale, q,
                    a->ldq, k, a->ldk, 0.0f, probs, s->k_len);
        ws_cpu_softmax_rows(probs, s->q_len, s->k_len,
                            a->key_valid ? a->key_valid + s->k_off : NULL, c->mask_diag);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s->q_len, c->dv, s->k_len, 1.0f,
                    probs, s->k_len, v, a->ldv, 0.0f, out, a->ldo);
    }
    return WS_OK;
}

ws_status ws_cpu_search_backward(ws_backend *be, const ws_comp_search_args *c,
                                 const ws_attn_grads *g)
{
    const ws_attn_args *a = &c->a;
    int dk = a->d / a->n_heads, heads = a->n_heads;
    float scale = 1.0f / sqrtf((float)dk);
    int threads = ws_cpu_threads(be);
    size_t per_thread = (size_t)(a->max_q_len > 0 ? a->max_q_len : 1) *
                        (size_t)(a->max_k_len > 0 ? a->max_k_len : 1);
    float *scratch = ws_cpu_scratch(be, (size_t)threads * per_thread);
    if (!scratch) return WS_ERR_NOMEM;
    /* Heads whose value columns overlap add into the same dV: one unit per segment. */
    int per_unit = heads > 1 && c->v_step < c->dv ? heads : 1;
    int units_per_seg = heads / per_unit;
    int units = a->n_segs * units_per_seg;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int u = 0; u < units; u++) {
        const ws_attn_seg *s = &a->segs[u / units_per_seg];
        if (s->q_len <= 0 || s->k_len <= 0) continue;
        float *dp = scratch + (size_t)omp_get_thread_num() * per_thread;
        int h0 = (u % units_per_seg) * per_unit;
        for (int h = h0; h < h0 + per_unit; h++) {
            const float *probs = a->probs + s->p_off + (long)h * s->q_len * s->k_len;
            const float *q = a->q + (long)s->q_off * a->ldq + h * dk;
            const float *k = a->k + (long)s->k_off * a->ldk + h * dk;
            const float *v = a->v + (long)s->k_off * a->ldv + (long)h * c->v_step;
            const float *dout = g->dout + (long)s->q_off * a->ldo + (long)h * c->dv;
            float *dq = g->dq + (long)s->q_off * a->ldq + h * dk;
            float *dkk = g->dk + (long)s->k_off * a->ldk + h * dk;
            float *dv = g->dv + (long)s->k_off * a->ldv + (long)h * c->v_step;
            /* dV += Pᵀ dout */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s->k_len, c->dv, s->q_len, 1.0f,
                        probs, s->k_len, dout, a->ldo, 1.0f, dv, a->ldv);
            /* dP = dout Vᵀ, then dS = P ⊙ (dP − Σ_j dP⊙P) · scale (masked keys have P = 0) */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s->q_len, s->k_len, c->dv, 1.0f,
                        dout, a->ldo, v, a->ldv, 0.0f, dp, s->k_len);
            ws_cpu_softmax_rows_backward(probs, dp, s->q_len, s->k_len, scale);
            /* dQ += dS K, dK += dSᵀ Q */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s->q_len, dk, s->k_len, 1.0f,
                        dp, s->k_len, k, a->ldk, 1.0f, dq, a->ldq);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s->k_len, dk, s->q_len, 1.0f,
                        dp, s->k_len, q, a->ldq, 1.0f, dkk, a->ldk);
        }
    }
    return WS_OK;
}

/* Multi-head attention: head h's values are its own d_h columns. */
static ws_comp_search_args mha_args(const ws_attn_args *a)
{
    int dh = a->d / a->n_heads;
    ws_comp_search_args c = {.a = *a, .dv = dh, .v_step = dh};
    return c;
}

ws_status ws_cpu_attention_forward(ws_backend *be, const ws_attn_args *a)
{
    ws_comp_search_args c = mha_args(a);
    return ws_cpu_search_forward(be, &c);
}

ws_status ws_cpu_attention_backward(ws_backend *be, const ws_attn_args *a,
                                    const ws_attn_grads *g)
{
    ws_comp_search_args c = mha_args(a);
    return ws_cpu_search_backward(be, &c, g);
}
