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
#include <math.h>
#include <omp.h>
#include <string.h>

#include "cpu_internal.h"
#include "cpu_par.h"
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

/* The forward pass works on vectors of ATT_LANES query rows: scores, softmax
 * and outputs of ATT_LANES rows at a time, one row per lane, so that maxima and
 * sums over keys are lane by lane (no reductions across a vector) and every
 * element of every row goes through the same arithmetic whatever its lane or the
 * rows beside it: results depend on the segment alone. */
#define ATT_LANES 16
#define ATT_CHAINS 8 /* independent multiply-add chains in flight */

typedef float att_vec __attribute__((vector_size(ATT_LANES * sizeof(float)), aligned(4)));

/* t[j] = scale·Σ_c a[c]·b_j[c] for j < n (a: [len] vectors, b_j = b + j·ldb), the
 * sums in order of c; rows past n repeat the last, never stored. Always inlined
 * (as att_mix): with two callers GCC kept one copy out of line, which a portable
 * build compiles for the SSE2 baseline, outside the callers' WS_CPU_CLONES. */
static inline __attribute__((always_inline)) void
att_products(att_vec *t, const att_vec *a, const float *b, long ldb, int n, int len, float scale)
{
    for (int j0 = 0; j0 < n; j0 += ATT_CHAINS) {
        const float *r[ATT_CHAINS];
        for (int u = 0; u < ATT_CHAINS; u++) r[u] = b + (j0 + u < n ? j0 + u : n - 1) * ldb;
        att_vec s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0}, s4 = {0}, s5 = {0}, s6 = {0}, s7 = {0};
        for (int c = 0; c < len; c++) {
            att_vec x = a[c];
            s0 += r[0][c] * x, s1 += r[1][c] * x, s2 += r[2][c] * x, s3 += r[3][c] * x;
            s4 += r[4][c] * x, s5 += r[5][c] * x, s6 += r[6][c] * x, s7 += r[7][c] * x;
        }
        att_vec out[ATT_CHAINS] = {s0, s1, s2, s3, s4, s5, s6, s7};
        for (int u = 0; u < ATT_CHAINS && j0 + u < n; u++) t[j0 + u] = out[u] * scale;
    }
}

/* o[c] = Σ_i p_i·v_i[c0 + c] for c < ATT_CHAINS, in order of i < n (p_i: the vector
 * at p + i·lds floats, v_i = v + i·ldv); columns past w (<= ATT_CHAINS) repeat the
 * last, for the caller not to store. */
static inline __attribute__((always_inline)) void
att_mix(att_vec *o, const float *p, long lds, const float *v, long ldv, int n, int c0, int w)
{
    att_vec o0 = {0}, o1 = {0}, o2 = {0}, o3 = {0}, o4 = {0}, o5 = {0}, o6 = {0}, o7 = {0};
    int u = w - 1;
    for (int i = 0; i < n; i++) {
        const float *vi = v + (long)i * ldv + c0;
        att_vec x = *(const att_vec *)(p + (long)i * lds);
        o0 += vi[0] * x, o1 += vi[1 < u ? 1 : u] * x, o2 += vi[2 < u ? 2 : u] * x;
        o3 += vi[3 < u ? 3 : u] * x, o4 += vi[4 < u ? 4 : u] * x;
        o5 += vi[5 < u ? 5 : u] * x, o6 += vi[6 < u ? 6 : u] * x;
        o7 += vi[7 < u ? 7 : u] * x;
    }
    o[0] = o0, o[1] = o1, o[2] = o2, o[3] = o3, o[4] = o4, o[5] = o5, o[6] = o6, o[7] = o7;
}

/* out[l][c0 + c] = Σ_j p_j[l]·v_j[c0 + c] for the rows l < rows of the block
 * (p_j = s + j·lds floats, a row per lane), or with `add` that sum added to
 * out, for c < ATT_LANES, in order of j < n: as att_mix, each element the same
 * multiply-adds in the same order, but rows in registers and columns as lanes,
 * so the sums go out to the row-major output as whole vectors (att_mix's
 * columns-as-lanes took a scalar transpose per element, a sixth of the forward
 * pass's attention, and more of the backward's). ATT_CHAINS rows at a time,
 * one load of v_j's columns for all of them; lanes of p_j past `rows` are read
 * (they must be readable), never stored. */
static inline __attribute__((always_inline)) void att_mix_rows(float *out, long ldo, const float *s,
                                                               long lds, const float *v, long ldv,
                                                               int n, int c0, int rows, int add)
{
    for (int l0 = 0; l0 < rows; l0 += ATT_CHAINS) {
        att_vec o0 = {0}, o1 = {0}, o2 = {0}, o3 = {0}, o4 = {0}, o5 = {0}, o6 = {0}, o7 = {0};
        for (int j = 0; j < n; j++) {
            att_vec x = *(const att_vec *)(v + (long)j * ldv + c0);
            const float *p = s + (long)j * lds + l0;
            o0 += p[0] * x, o1 += p[1] * x, o2 += p[2] * x, o3 += p[3] * x;
            o4 += p[4] * x, o5 += p[5] * x, o6 += p[6] * x, o7 += p[7] * x;
        }
        att_vec o[ATT_CHAINS] = {o0, o1, o2, o3, o4, o5, o6, o7};
        float *y = out + (long)l0 * ldo + c0;
        for (int l = 0; l < ATT_CHAINS && l < rows - l0; l++) {
            att_vec *yl = (att_vec *)(y + l * ldo);
            *yl = add ? *yl + o[l] : o[l];
        }
    }
}

/* The softmax over keys of each lane of s[k_len] in place; keys with live[j] == 0
 * and lane j − i0 of key j under mask_diag get p = 0, a lane with no key left is
 * all zeros. */
static inline void att_softmax(att_vec *s, int k_len, const uint8_t *live, int mask_diag, int i0)
{
    float mx[ATT_LANES], sum[ATT_LANES];
    for (int l = 0; l < ATT_LANES; l++) mx[l] = -INFINITY, sum[l] = 0.0f;
    for (int j = 0; j < k_len; j++) {
        float *x = (float *)&s[j];
        if (!live[j]) {
            for (int l = 0; l < ATT_LANES; l++) x[l] = -INFINITY;
            continue;
        }
        if (mask_diag && j >= i0 && j < i0 + ATT_LANES) x[j - i0] = -INFINITY;
#pragma omp simd
        for (int l = 0; l < ATT_LANES; l++) mx[l] = x[l] > mx[l] ? x[l] : mx[l];
    }
    for (int j = 0; j < k_len; j++) {
        float *x = (float *)&s[j];
#pragma omp simd
        for (int l = 0; l < ATT_LANES; l++) {
            float e = x[l] == -INFINITY ? 0.0f : ws_expf(x[l] - mx[l]);
            x[l] = e;
            sum[l] += e;
        }
    }
    float inv[ATT_LANES];
#pragma omp simd
    for (int l = 0; l < ATT_LANES; l++) inv[l] = sum[l] > 0.0f ? 1.0f / sum[l] : 0.0f;
    for (int j = 0; j < k_len; j++) {
        float *x = (float *)&s[j];
#pragma omp simd
        for (int l = 0; l < ATT_LANES; l++) x[l] *= inv[l];
    }
}

/* One (segment, head) of the forward pass, softmax fused: per query row the
 * scores s_j = scale·Σ_c q_c k_jc (multiply-adds over c in order), their softmax
 * over the live keys, then out_c = Σ_j p_j v_jc (multiply-adds over j in order).
 * Without BLAS: at these sizes (d_h 16..32, tens of keys) its calls, packing and
 * a separate softmax pass cost several times the arithmetic. The scratch holds
 * dk + k_len vectors (Q's rows as lanes, the scores) and k_len bytes (which keys
 * are live). probs NULL: a forward-only pass (writing them cost the default
 * model 5-8% of its pass at batch 64 on one thread, bench_threads). */
WS_CPU_CLONES static void attend(float *out, int ldo, float *probs, const float *q, int ldq,
                                 const float *k, int ldk, const float *v, int ldv, int q_len,
                                 int k_len, int dk, int dv, float scale, const uint8_t *valid,
                                 int mask_diag, att_vec *scratch)
{
    att_vec *qt = scratch, *s = qt + dk;
    uint8_t *live = (uint8_t *)(s + k_len);
    for (int j = 0; j < k_len; j++) live[j] = !valid || valid[j];
    for (int i0 = 0; i0 < q_len; i0 += ATT_LANES) {
        int rows = q_len - i0 < ATT_LANES ? q_len - i0 : ATT_LANES;
        /* Q's rows as lanes (lanes past the end zero) */
        memset(qt, 0, (size_t)dk * sizeof *qt);
        for (int l = 0; l < rows; l++)
            for (int c = 0; c < dk; c++) qt[c][l] = q[(long)(i0 + l) * ldq + c];
        att_products(s, qt, k, ldk, k_len, dk, scale);
        att_softmax(s, k_len, live, mask_diag, i0);
        for (int l = 0; probs && l < rows; l++)
            for (int j = 0; j < k_len; j++) probs[(long)(i0 + l) * k_len + j] = s[j][l];
        /* out_c = Σ_j v_jc·p_j in order of j: whole vectors of columns as
         * lanes where dv allows (the models' heads: 16 or 32 columns), else
         * ATT_CHAINS columns at a time */
        if (dv % ATT_LANES == 0) {
            for (int c0 = 0; c0 < dv; c0 += ATT_LANES)
                att_mix_rows(out + (long)i0 * ldo, ldo, (const float *)s, ATT_LANES, v, ldv, k_len,
                             c0, rows, 0);
            continue;
        }
        for (int c0 = 0; c0 < dv; c0 += ATT_CHAINS) {
            int w = dv - c0 < ATT_CHAINS ? dv - c0 : ATT_CHAINS;
            att_vec o[ATT_CHAINS];
            att_mix(o, (const float *)s, ATT_LANES, v, ldv, k_len, c0, w);
            for (int l = 0; l < rows; l++)
                for (int c = 0; c < w; c++) out[(long)(i0 + l) * ldo + c0 + c] = o[c][l];
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
    /* attend's vectors, then its bytes rounded up to whole vectors */
    size_t per_thread = (size_t)dk + max_k + (size_t)(max_k + sizeof(att_vec) - 1) / sizeof(att_vec);
    att_vec *scratch = (att_vec *)ws_cpu_scratch(be, (size_t)threads * per_thread * ATT_LANES);
    if (!scratch) return WS_ERR_NOMEM;
    WS_CPU_FOR(threads, schedule(dynamic, 1), for (int p = 0; p < pairs; p++) {
        const ws_attn_seg *s = &a->segs[p / a->n_heads];
        int h = p % a->n_heads;
        if (s->q_len <= 0) continue;
        float *out = a->out + (long)s->q_off * a->ldo + (long)h * c->dv;
        if (s->k_len <= 0) {
            for (int i = 0; i < s->q_len; i++)
                for (int j = 0; j < c->dv; j++) out[(long)i * a->ldo + j] = 0.0f;
            continue;
        }
        attend(out, a->ldo,
               a->forward_only ? NULL : a->probs + s->p_off + (long)h * s->q_len * s->k_len,
               a->q + (long)s->q_off * a->ldq + h * dk, a->ldq,
               a->k + (long)s->k_off * a->ldk + h * dk, a->ldk,
               a->v + (long)s->k_off * a->ldv + (long)h * c->v_step, a->ldv, s->q_len, s->k_len,
               dk, c->dv, scale, a->key_valid ? a->key_valid + s->k_off : NULL, c->mask_diag,
               scratch + (size_t)omp_get_thread_num() * per_thread);
    });
    return WS_OK;
}

/* rows x w of o (ATT_CHAINS vectors, lane l: row l) added into y's rows (stride ldy) */
static inline __attribute__((always_inline)) void
att_add_rows(float *y, long ldy, const att_vec *o, int rows, int w)
{
    for (int l = 0; l < rows; l++)
        for (int c = 0; c < w; c++) y[(long)l * ldy + c] += o[c][l];
}

/* One (segment, head) of the backward pass, the softmax's backward fused. Query
 * rows as lanes, ATT_LANES at a time: P (from probs), dP_j = Σ_c dout_c·v_jc,
 * dS = P ⊙ (dP − Σ_j P_j·dP_j)·scale (masked keys have P = 0, so dS = 0) and
 * dQ += Σ_j dS_j·k_j. P and dS are kept as rows padded to whole vectors, which
 * the second loop reads with keys as lanes: dV += Σ_i P_i·dout_i and
 * dK += Σ_i dS_i·q_i. Every sum in a fixed order, whatever the lane or the rows
 * beside: results depend on the segment alone. Without BLAS, for the forward
 * pass's reasons. The scratch holds dv + 2·k_len vectors, then 2·q_len rows of
 * k_len rounded up to ATT_LANES floats. */
WS_CPU_CLONES static void attend_backward(float *dq, float *dk, float *dvv, const float *dout,
                                          int ldo, const float *probs, const float *q, int ldq,
                                          const float *k, int ldk, const float *v, int ldv,
                                          int q_len, int k_len, int dkd, int dvd, float scale,
                                          att_vec *scratch)
{
    int kp = (k_len + ATT_LANES - 1) / ATT_LANES * ATT_LANES;
    att_vec *dt = scratch, *p = dt + dvd, *ds = p + k_len, o[ATT_CHAINS];
    float *prow = (float *)(ds + k_len), *srow = prow + (long)q_len * kp;
    for (int i0 = 0; i0 < q_len; i0 += ATT_LANES) {
        int rows = q_len - i0 < ATT_LANES ? q_len - i0 : ATT_LANES;
        /* dout's and P's rows as lanes (lanes past the end zero) */
        memset(dt, 0, (size_t)dvd * sizeof *dt);
        memset(p, 0, (size_t)k_len * sizeof *p);
        for (int l = 0; l < rows; l++) {
            for (int c = 0; c < dvd; c++) dt[c][l] = dout[(long)(i0 + l) * ldo + c];
            for (int j = 0; j < k_len; j++) p[j][l] = probs[(long)(i0 + l) * k_len + j];
        }
        att_products(ds, dt, v, ldv, k_len, dvd, 1.0f);
        att_vec dot = {0};
        for (int j = 0; j < k_len; j++) dot += p[j] * ds[j];
        for (int j = 0; j < k_len; j++) ds[j] = p[j] * (ds[j] - dot) * scale;
        for (int l = 0; l < rows; l++) {
            float *pr = prow + (long)(i0 + l) * kp, *sr = srow + (long)(i0 + l) * kp;
            for (int j = 0; j < k_len; j++) pr[j] = p[j][l], sr[j] = ds[j][l];
            for (int j = k_len; j < kp; j++) pr[j] = sr[j] = 0.0f;
        }
        if (dkd % ATT_LANES == 0) {
            for (int c0 = 0; c0 < dkd; c0 += ATT_LANES)
                att_mix_rows(dq + (long)i0 * ldq, ldq, (const float *)ds, ATT_LANES, k, ldk, k_len,
                             c0, rows, 1);
            continue;
        }
        for (int c0 = 0; c0 < dkd; c0 += ATT_CHAINS) {
            int w = dkd - c0 < ATT_CHAINS ? dkd - c0 : ATT_CHAINS;
            att_mix(o, (const float *)ds, ATT_LANES, k, ldk, k_len, c0, w);
            att_add_rows(dq + (long)i0 * ldq + c0, ldq, o, rows, w);
        }
    }
    for (int j0 = 0; j0 < k_len; j0 += ATT_LANES) {
        int keys = k_len - j0 < ATT_LANES ? k_len - j0 : ATT_LANES;
        if (dvd % ATT_LANES == 0 && dkd % ATT_LANES == 0) {
            for (int c0 = 0; c0 < dvd; c0 += ATT_LANES)
                att_mix_rows(dvv + (long)j0 * ldv, ldv, prow + j0, kp, dout, ldo, q_len, c0, keys,
                             1);
            for (int c0 = 0; c0 < dkd; c0 += ATT_LANES)
                att_mix_rows(dk + (long)j0 * ldk, ldk, srow + j0, kp, q, ldq, q_len, c0, keys, 1);
            continue;
        }
        for (int c0 = 0; c0 < dvd; c0 += ATT_CHAINS) {
            int w = dvd - c0 < ATT_CHAINS ? dvd - c0 : ATT_CHAINS;
            att_mix(o, prow + j0, kp, dout, ldo, q_len, c0, w);
            att_add_rows(dvv + (long)j0 * ldv + c0, ldv, o, keys, w);
        }
        for (int c0 = 0; c0 < dkd; c0 += ATT_CHAINS) {
            int w = dkd - c0 < ATT_CHAINS ? dkd - c0 : ATT_CHAINS;
            att_mix(o, srow + j0, kp, q, ldq, q_len, c0, w);
            att_add_rows(dk + (long)j0 * ldk + c0, ldk, o, keys, w);
        }
    }
}

ws_status ws_cpu_search_backward(ws_backend *be, const ws_comp_search_args *c,
                                 const ws_attn_grads *g)
{
    const ws_attn_args *a = &c->a;
    int dk = a->d / a->n_heads, heads = a->n_heads;
    float scale = 1.0f / sqrtf((float)dk);
    int threads = ws_cpu_threads(be);
    size_t max_q = a->max_q_len > 0 ? (size_t)a->max_q_len : 1;
    size_t max_k = a->max_k_len > 0 ? (size_t)a->max_k_len : 1;
    size_t kp = (max_k + ATT_LANES - 1) / ATT_LANES * ATT_LANES;
    /* attend_backward's vectors, then its rows */
    size_t per_thread = ((size_t)c->dv + 2 * max_k) * ATT_LANES + 2 * max_q * kp;
    att_vec *scratch = (att_vec *)ws_cpu_scratch(be, (size_t)threads * per_thread);
    if (!scratch) return WS_ERR_NOMEM;
    /* Heads whose value columns overlap add into the same dV: one unit per segment. */
    int per_unit = heads > 1 && c->v_step < c->dv ? heads : 1;
    int units_per_seg = heads / per_unit;
    int units = a->n_segs * units_per_seg;
    WS_CPU_FOR(threads, schedule(dynamic, 1), for (int u = 0; u < units; u++) {
        const ws_attn_seg *s = &a->segs[u / units_per_seg];
        if (s->q_len <= 0 || s->k_len <= 0) continue;
        att_vec *mine = (att_vec *)((float *)scratch + (size_t)omp_get_thread_num() * per_thread);
        int h0 = (u % units_per_seg) * per_unit;
        for (int h = h0; h < h0 + per_unit; h++)
            attend_backward(g->dq + (long)s->q_off * a->ldq + h * dk,
                            g->dk + (long)s->k_off * a->ldk + h * dk,
                            g->dv + (long)s->k_off * a->ldv + (long)h * c->v_step,
                            g->dout + (long)s->q_off * a->ldo + (long)h * c->dv, a->ldo,
                            a->probs + s->p_off + (long)h * s->q_len * s->k_len,
                            a->q + (long)s->q_off * a->ldq + h * dk, a->ldq,
                            a->k + (long)s->k_off * a->ldk + h * dk, a->ldk,
                            a->v + (long)s->k_off * a->ldv + (long)h * c->v_step, a->ldv,
                            s->q_len, s->k_len, dk, c->dv, scale, mine);
    });
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
