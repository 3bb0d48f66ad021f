/* cpu_simplicial2_attn.c — 2-simplicial attention over key pairs
 * (mixer_ops_simplicial2.h): triple-product logits, softmax over the k_len²
 * pairs, aggregation of the pair values; and the backward.
 *
 * Work splits over (segment, head) pairs, which own disjoint rows and columns.
 * Forward: the Gram pieces x = p·l1, y = p·l2, z = l1·l2 come from three
 * products, then w = x l2 − y l1 + z p is formed per triple (≈ 8δ FLOPs) so
 * that ‖w‖² never rounds negative.
 * Backward (MIXERS.md §2.4.6): with c_ijk = ∂L/∂logit · τ²/logit (the chain rule
 * through τ√(s + ε)) and the norms A = ‖p‖², B = ‖l1‖², C = ‖l2‖²,
 *   ∂s/∂p = 2[z² p + (xC − yz) l1 + (yB − xz) l2]
 *   ∂s/∂l1 = 2[(xC − yz) p + y² l1 + (zA − xy) l2]
 *   ∂s/∂l2 = 2[(yB − xz) p + (zA − xy) l1 + x² l2]
 * so every triple folds into a few scalar sums (q×k and k×k coefficient
 * matrices, three diagonals) and the vector work is six small products:
 * O(q k² + q k δ) per head instead of O(q k² δ). */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "../mixer_ops_simplicial2.h"
#include "cpu_internal.h"
#include "cpu_math.h"
#include "cpu_simplicial2.h"

/* One (segment, head): its views into the packed arrays. */
typedef struct {
    int nq, nk, dl;
    const float *p, *l1, *l2, *pair;
    const float *logits;
    float *probs;
    long pl_off; /* first logit/probability of the head */
} s2_view;

static s2_view view(const ws_s2_args *a, const ws_s2_seg *s, int h)
{
    int dl = a->d2 / a->n_heads;
    s2_view v = {
        .nq = s->q_len, .nk = s->k_len, .dl = dl,
        .p = a->p + (long)s->q_off * a->ldp + h * dl,
        .l1 = a->l1 + (long)s->k_off * a->ldl1 + h * dl,
        .l2 = a->l2 + (long)s->k_off * a->ldl2 + h * dl,
        .pair = a->pair + (long)s->t_off * a->d2 + h * dl,
        .logits = a->logits, .probs = a->probs,
        .pl_off = s->p_off + (long)h * s->q_len * s->k_len * s->k_len,
    };
    return v;
}

/* x = P L1ᵀ, y = P L2ᵀ [nq, nk] and z = L1 L2ᵀ [nk, nk]. */
static void gram(const ws_s2_args *a, const s2_view *v, float *x, float *y, float *z)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, v->nq, v->nk, v->dl, 1.0f, v->p,
                a->ldp, v->l1, a->ldl1, 0.0f, x, v->nk);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, v->nq, v->nk, v->dl, 1.0f, v->p,
                a->ldp, v->l2, a->ldl2, 0.0f, y, v->nk);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, v->nk, v->nk, v->dl, 1.0f, v->l1,
                a->ldl1, v->l2, a->ldl2, 0.0f, z, v->nk);
}

/* Logits of query i into lg[nk²], then its softmax into pr[nk²]. */
static void row_forward(const ws_s2_args *a, const s2_view *v, int i, const float *x,
                        const float *y, const float *z, float *lg, float *pr)
{
    int nk = v->nk, dl = v->dl;
    const float *pi = v->p + (long)i * a->ldp;
    float mx = -INFINITY;
    for (int j = 0; j < nk; j++) {
        const float *l1 = v->l1 + (long)j * a->ldl1;
        float xij = x[(long)i * nk + j];
        for (int k = 0; k < nk; k++) {
            const float *l2 = v->l2 + (long)k * a->ldl2;
            float yik = y[(long)i * nk + k], zjk = z[(long)j * nk + k], s = 0.0f;
#pragma omp simd reduction(+ : s)
            for (int c = 0; c < dl; c++) {
                float w = xij * l2[c] - yik * l1[c] + zjk * pi[c];
                s += w * w;
            }
            float l = a->tau * sqrtf(s + WS_S2_EPS);
            lg[j * nk + k] = l;
            mx = fmaxf(mx, l);
        }
    }
    float sum = 0.0f;
    for (int t = 0; t < nk * nk; t++) sum += pr[t] = ws_expf(lg[t] - mx);
    float inv = 1.0f / sum;
    for (int t = 0; t < nk * nk; t++) pr[t] *= inv;
}

/* Scratch floats per thread: forward x, y, z; backward adds dA, the
 * coefficient matrices and the norms/diagonals. */
static size_t fwd_floats(int nq, int nk) { return 2 * (size_t)nq * nk + (size_t)nk * nk; }
static size_t bwd_floats(int nq, int nk)
{
    return 2 * fwd_floats(nq, nk) + (size_t)nq * nk * nk + 2 * (size_t)nq + 4 * (size_t)nk;
}

static size_t bound(int n) { return (size_t)(n > 0 ? n : 1); }

/* Key rows' own values as their output (virtual entities). */
static void values_rows(const ws_s2_args *a, const ws_s2_seg *s, int h, float *dst, int ld_dst,
                        const float *src, int ld_src, int accumulate)
{
    int dl = a->d2 / a->n_heads;
    for (int j = 0; j < s->k_len; j++) {
        float *d = dst + (long)(s->k_off + j) * ld_dst + h * dl;
        const float *u = src + (long)(s->k_off + j) * ld_src + h * dl;
        for (int c = 0; c < dl; c++) d[c] = accumulate ? d[c] + u[c] : u[c];
    }
}

static ws_status s2_attention_forward(ws_backend *be, const ws_s2_args *a)
{
    int threads = ws_cpu_threads(be), units = a->n_segs * a->n_heads;
    size_t per_thread = fwd_floats((int)bound(a->max_q_len), (int)bound(a->max_k_len));
    float *scratch = ws_cpu_scratch(be, (size_t)threads * per_thread);
    if (!scratch) return WS_ERR_NOMEM;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int t = 0; t < units; t++) {
        const ws_s2_seg *s = &a->segs[t / a->n_heads];
        int h = t % a->n_heads;
        s2_view v = view(a, s, h);
        if (a->values_out) values_rows(a, s, h, a->out, a->ldo, a->u, a->ldu, 0);
        if (v.nq <= 0) continue;
        float *out = a->out + (long)s->q_off * a->ldo + h * v.dl;
        if (v.nk <= 0) { /* no pairs: nothing to attend to */
            for (int i = 0; i < v.nq; i++) memset(out + (long)i * a->ldo, 0, v.dl * sizeof *out);
            continue;
        }
        float *x = scratch + (size_t)omp_get_thread_num() * per_thread;
        float *y = x + (size_t)v.nq * v.nk, *z = y + (size_t)v.nq * v.nk;
        gram(a, &v, x, y, z);
        long nn = (long)v.nk * v.nk;
        float *pr = v.probs + v.pl_off;
        for (int i = 0; i < v.nq; i++)
            row_forward(a, &v, i, x, y, z, a->logits + v.pl_off + i * nn, pr + i * nn);
        /* o = A T: [nq, nk²] × [nk², δ] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, v.nq, v.dl, (int)nn, 1.0f, pr,
                    (int)nn, v.pair, a->d2, 0.0f, out, a->ldo);
    }
    return WS_OK;
}

/* Coefficients of one (segment, head): from dA (∂L/∂A, overwritten) to the sums
 * c1 = Σ_k c(xC − yz) [nq, nk], c2 = Σ_j c(yB − xz) [nq, nk], c3 = Σ_i c(zA − xy)
 * [nk, nk], da = Σ_jk c z² [nq], db = Σ_ik c y² [nk], dc = Σ_ij c x² [nk]. The
 * norms (A, B, C) come in na, nb, nc. */
typedef struct {
    float *x, *y, *z, *c1, *c2, *c3, *na, *nb, *nc, *da, *db, *dc, *dA;
} s2_coef;

static s2_coef carve_coef(float *base, int nq, int nk)
{
    s2_coef c;
    size_t qk = (size_t)nq * nk, kk = (size_t)nk * nk;
    c.x = base, c.y = c.x + qk, c.z = c.y + qk;
    c.c1 = c.z + kk, c.c2 = c.c1 + qk, c.c3 = c.c2 + qk;
    c.na = c.c3 + kk, c.da = c.na + nq;
    c.nb = c.da + nq, c.nc = c.nb + nk, c.db = c.nc + nk, c.dc = c.db + nk;
    c.dA = c.dc + nk;
    return c;
}

static void sq_norms(float *out, const float *rows, int ld, int n, int dl)
{
    for (int i = 0; i < n; i++) {
        const float *r = rows + (long)i * ld;
        float s = 0.0f;
        for (int c = 0; c < dl; c++) s += r[c] * r[c];
        out[i] = s;
    }
}

static void coefficients(const ws_s2_args *a, const s2_view *v, const s2_coef *c)
{
    int nq = v->nq, nk = v->nk;
    long nn = (long)nk * nk;
    float tau2 = a->tau * a->tau;
    sq_norms(c->na, v->p, a->ldp, nq, v->dl);
    sq_norms(c->nb, v->l1, a->ldl1, nk, v->dl);
    sq_norms(c->nc, v->l2, a->ldl2, nk, v->dl);
    memset(c->c1, 0, sizeof(float) * (2 * (size_t)nq * nk + nn));
    memset(c->da, 0, sizeof(float) * nq);
    memset(c->db, 0, sizeof(float) * 2 * nk);
    for (int i = 0; i < nq; i++) {
        const float *pr = v->probs + v->pl_off + i * nn, *lg = v->logits + v->pl_off + i * nn;
        float *dr = c->dA + i * nn;
        float dot = 0.0f;
        for (long t = 0; t < nn; t++) dot += pr[t] * dr[t];
        for (int j = 0; j < nk; j++)
            for (int k = 0; k < nk; k++) {
                long t = (long)j * nk + k;
                /* dlogit = A(dA − Σ A dA); ∂logit/∂s = τ²/(2 logit) */
                float cf = pr[t] * (dr[t] - dot) * tau2 / lg[t];
                float x = c->x[i * nk + j], y = c->y[i * nk + k], z = c->z[j * nk + k];
                c->c1[i * nk + j] += cf * (x * c->nc[k] - y * z);
                c->c2[i * nk + k] += cf * (y * c->nb[j] - x * z);
                c->c3[j * nk + k] += cf * (z * c->na[i] - x * y);
                c->da[i] += cf * z * z;
                c->db[j] += cf * y * y;
                c->dc[k] += cf * x * x;
            }
    }
}

/* dst[n, δ] (stride ld) += diag(s) src (stride lds) */
static void add_scaled_rows(float *dst, int ld, const float *s, const float *src, int lds, int n,
                            int dl)
{
    for (int i = 0; i < n; i++)
        for (int t = 0; t < dl; t++) dst[(long)i * ld + t] += s[i] * src[(long)i * lds + t];
}

/* dst [m, δ] += op(coef) [m, n] · src [n, δ] */
static void add_product(float *dst, int ld, const float *coef, int trans, int m, int n,
                        const float *src, int lds, int dl)
{
    cblas_sgemm(CblasRowMajor, trans ? CblasTrans : CblasNoTrans, CblasNoTrans, m, dl, n, 1.0f,
                coef, trans ? m : n, src, lds, 1.0f, dst, ld);
}

static ws_status s2_attention_backward(ws_backend *be, const ws_s2_args *a, const ws_s2_grads *g)
{
    int threads = ws_cpu_threads(be), units = a->n_segs * a->n_heads;
    size_t per_thread = bwd_floats((int)bound(a->max_q_len), (int)bound(a->max_k_len));
    float *scratch = ws_cpu_scratch(be, (size_t)threads * per_thread);
    if (!scratch) return WS_ERR_NOMEM;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int t = 0; t < units; t++) {
        const ws_s2_seg *s = &a->segs[t / a->n_heads];
        int h = t % a->n_heads;
        s2_view v = view(a, s, h);
        if (a->values_out) values_rows(a, s, h, g->du, a->ldu, g->dout, a->ldo, 1);
        if (v.nq <= 0 || v.nk <= 0) continue;
        int nq = v.nq, nk = v.nk, dl = v.dl, nn = nk * nk;
        s2_coef c = carve_coef(scratch + (size_t)omp_get_thread_num() * per_thread, nq, nk);
        const float *gout = g->dout + (long)s->q_off * a->ldo + h * dl;
        const float *pr = a->probs + v.pl_off;
        /* dT += Aᵀ G [nk², δ]; dA = G Tᵀ [nq, nk²] */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nn, dl, nq, 1.0f, pr, nn, gout,
                    a->ldo, 1.0f, g->dpair + (long)s->t_off * a->d2 + h * dl, a->d2);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, nn, dl, 1.0f, gout, a->ldo,
                    v.pair, a->d2, 0.0f, c.dA, nn);
        gram(a, &v, c.x, c.y, c.z);
        coefficients(a, &v, &c);
        float *dp = g->dp + (long)s->q_off * a->ldp + h * dl;
        float *dl1 = g->dl1 + (long)s->k_off * a->ldl1 + h * dl;
        float *dl2 = g->dl2 + (long)s->k_off * a->ldl2 + h * dl;
        /* dP += c1 L1 + c2 L2 + diag(da) P */
        add_product(dp, a->ldp, c.c1, 0, nq, nk, v.l1, a->ldl1, dl);
        add_product(dp, a->ldp, c.c2, 0, nq, nk, v.l2, a->ldl2, dl);
        add_scaled_rows(dp, a->ldp, c.da, v.p, a->ldp, nq, dl);
        /* dL1 += c1ᵀ P + c3 L2 + diag(db) L1 */
        add_product(dl1, a->ldl1, c.c1, 1, nk, nq, v.p, a->ldp, dl);
        add_product(dl1, a->ldl1, c.c3, 0, nk, nk, v.l2, a->ldl2, dl);
        add_scaled_rows(dl1, a->ldl1, c.db, v.l1, a->ldl1, nk, dl);
        /* dL2 += c2ᵀ P + c3ᵀ L1 + diag(dc) L2 */
        add_product(dl2, a->ldl2, c.c2, 1, nk, nq, v.p, a->ldp, dl);
        add_product(dl2, a->ldl2, c.c3, 1, nk, nk, v.l1, a->ldl1, dl);
        add_scaled_rows(dl2, a->ldl2, c.dc, v.l2, a->ldl2, nk, dl);
    }
    return WS_OK;
}

const struct ws_simplicial_ops ws_cpu_simplicial2_ops = {
    .pair_forward = ws_cpu_s2_pair_forward,
    .pair_backward = ws_cpu_s2_pair_backward,
    .attention_forward = s2_attention_forward,
    .attention_backward = s2_attention_backward,
};
