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
#include <string.h>

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

/* The forward pass works on vectors of ATT_LANES floats: a segment's keys are
 * padded to a multiple of it (scores) and so are value columns, so that every
 * element of every row goes through the same vector code whatever the segment's
 * length or the rows beside it (results depend on the segment alone). */
#define ATT_LANES 16
#define ATT_ROWS  4 /* query rows at a time: independent chains of multiply-adds */

typedef float att_vec __attribute__((vector_size(ATT_LANES * sizeof(float)), aligned(4)));

/* Softmax of one padded score row s[kpad] in place (masked keys hold −inf); a row
 * with every key masked becomes zeros. Sums and maxima over lanes in a fixed tree. */
static void att_softmax(float *s, int kpad)
{
    float lanes[ATT_LANES];
    for (int l = 0; l < ATT_LANES; l++) lanes[l] = -INFINITY;
    for (int j0 = 0; j0 < kpad; j0 += ATT_LANES)
#pragma omp simd
        for (int l = 0; l < ATT_LANES; l++)
            lanes[l] = s[j0 + l] > lanes[l] ? s[j0 + l] : lanes[l];
    for (int w = ATT_LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++) lanes[l] = lanes[l + w] > lanes[l] ? lanes[l + w] : lanes[l];
    float mx = lanes[0];
    if (mx == -INFINITY) { /* every key masked: no attention at all */
        for (int j = 0; j < kpad; j++) s[j] = 0.0f;
        return;
    }
    for (int l = 0; l < ATT_LANES; l++) lanes[l] = 0.0f;
    for (int j0 = 0; j0 < kpad; j0 += ATT_LANES)
#pragma omp simd
        for (int l = 0; l < ATT_LANES; l++) {
            float x = s[j0 + l];
            float e = x == -INFINITY ? 0.0f : ws_expf(x - mx);
            s[j0 + l] = e;
            lanes[l] += e;
        }
    for (int w = ATT_LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++) lanes[l] += lanes[l + w];
    float inv = 1.0f / lanes[0];
#pragma omp simd
    for (int j = 0; j < kpad; j++) s[j] *= inv;
}

/* One (segment, head) of the forward pass, softmax fused: per query row the
 * scores s_j = scale·Σ_c q_c k_jc (multiply-adds over c in order), their softmax
 * over the live keys, then out = Σ_j p_j v_j (multiply-adds over j in order).
 * Without BLAS: at these sizes (d_h 16..32, tens of keys) its calls, packing and
 * a separate softmax pass cost several times the arithmetic. The scratch holds
 * (dk + ATT_ROWS + 1)·kpad + k_len·ATT_LANES floats: K transposed and padded,
 * ATT_ROWS score rows, which keys are live, value columns of a partial block. */
WS_CPU_CLONES static void attend(float *out, int ldo, float *probs, const float *q, int ldq,
                                 const float *k, int ldk, const float *v, int ldv, int q_len,
                                 int k_len, int dk, int dv, float scale, const uint8_t *valid,
                                 int mask_diag, float *scratch)
{
    int kpad = (k_len + ATT_LANES - 1) / ATT_LANES * ATT_LANES;
    float *kt = scratch, *s = kt + (long)dk * kpad, *live = s + (long)ATT_ROWS * kpad;
    float *vpad = live + kpad;
    for (int j = 0; j < kpad; j++) live[j] = j < k_len && (!valid || valid[j]);
    for (int c = 0; c < dk; c++) {
        float *row = kt + (long)c * kpad;
        for (int j = 0; j < k_len; j++) row[j] = k[(long)j * ldk + c];
        for (int j = k_len; j < kpad; j++) row[j] = 0.0f;
    }
    for (int i0 = 0; i0 < q_len; i0 += ATT_ROWS) {
        /* rows past the end repeat the last one: the same work, never stored */
        const float *qr[ATT_ROWS];
        for (int r = 0; r < ATT_ROWS; r++)
            qr[r] = q + (long)(i0 + r < q_len ? i0 + r : q_len - 1) * ldq;
        for (int j0 = 0; j0 < kpad; j0 += ATT_LANES) {
            att_vec a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
            for (int c = 0; c < dk; c++) {
                att_vec kc = *(const att_vec *)(kt + (long)c * kpad + j0);
                a0 += qr[0][c] * kc, a1 += qr[1][c] * kc;
                a2 += qr[2][c] * kc, a3 += qr[3][c] * kc;
            }
            att_vec acc[ATT_ROWS] = {a0, a1, a2, a3};
            for (int r = 0; r < ATT_ROWS; r++) {
                float *sr = s + (long)r * kpad + j0;
                int diag = mask_diag ? i0 + r - j0 : -1;
#pragma omp simd
                for (int l = 0; l < ATT_LANES; l++)
                    sr[l] = live[j0 + l] != 0.0f && l != diag ? acc[r][l] * scale : -INFINITY;
            }
        }
        for (int r = 0; r < ATT_ROWS; r++) {
            float *sr = s + (long)r * kpad;
            att_softmax(sr, kpad);
            if (i0 + r < q_len)
                memcpy(probs + (long)(i0 + r) * k_len, sr, (size_t)k_len * sizeof *sr);
        }
        for (int c0 = 0; c0 < dv; c0 += ATT_LANES) {
            int w = dv - c0 < ATT_LANES ? dv - c0 : ATT_LANES;
            const float *vc = v + c0;
            long ld = ldv;
            if (w < ATT_LANES) { /* a partial block of columns, zero-padded */
                if (i0 == 0)
                    for (int j = 0; j < k_len; j++)
                        for (int l = 0; l < ATT_LANES; l++)
                            vpad[(long)j * ATT_LANES + l] = l < w ? vc[(long)j * ldv + l] : 0.0f;
                vc = vpad, ld = ATT_LANES;
            }
            att_vec a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
            for (int j = 0; j < k_len; j++) {
                att_vec vj = *(const att_vec *)(vc + j * ld);
                a0 += s[j] * vj, a1 += s[kpad + j] * vj;
                a2 += s[2L * kpad + j] * vj, a3 += s[3L * kpad + j] * vj;
            }
            att_vec acc[ATT_ROWS] = {a0, a1, a2, a3};
            for (int r = 0; r < ATT_ROWS && i0 + r < q_len; r++)
                memcpy(out + (long)(i0 + r) * ldo + c0, &acc[r], (size_t)w * sizeof(float));
        }
    }
}

ws_status ws_cpu_search_forward(ws_backend *be, const ws_comp_search_args *c)
{
    const ws_attn_args *a = &c->a;
    int dk = a->d / a->n_heads;
    float scale = 1.0f / sqrtf((float)dk);
    int pairs = a->n_segs * a->n_heads, threads = ws_cpu_threads(be), max_k = 1;
    for (int i = 0; i < a->n_segs; i++)
        if (a->segs[i].k_len > max_k) max_k = a->segs[i].k_len;
    size_t kpad = (size_t)(max_k + ATT_LANES - 1) / ATT_LANES * ATT_LANES;
    size_t per_thread = (size_t)(dk + ATT_ROWS + 1) * kpad + (size_t)max_k * ATT_LANES;
    float *scratch = ws_cpu_scratch(be, (size_t)threads * per_thread);
    if (!scratch) return WS_ERR_NOMEM;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int p = 0; p < pairs; p++) {
        const ws_attn_seg *s = &a->segs[p / a->n_heads];
        int h = p % a->n_heads;
        if (s->q_len <= 0) continue;
        float *out = a->out + (long)s->q_off * a->ldo + (long)h * c->dv;
        if (s->k_len <= 0) {
            for (int i = 0; i < s->q_len; i++)
                for (int j = 0; j < c->dv; j++) out[(long)i * a->ldo + j] = 0.0f;
            continue;
        }
        attend(out, a->ldo, a->probs + s->p_off + (long)h * s->q_len * s->k_len,
               a->q + (long)s->q_off * a->ldq + h * dk, a->ldq,
               a->k + (long)s->k_off * a->ldk + h * dk, a->ldk,
               a->v + (long)s->k_off * a->ldv + (long)h * c->v_step, a->ldv, s->q_len, s->k_len,
               dk, c->dv, scale, a->key_valid ? a->key_valid + s->k_off : NULL, c->mask_diag,
               scratch + (size_t)omp_get_thread_num() * per_thread);
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
