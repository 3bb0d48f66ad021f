/* cpu_simplicial2_attn.c — 2-simplicial attention over key pairs
 * (mixer_ops_simplicial2.h): triple-product logits, softmax over the k_len²
 * pairs, aggregation of the pair values; and the backward.
 *
 * Work splits over (segment, head) pairs, which own disjoint rows and columns.
 * Per (segment, head) three products give the Gram pieces x = P L1ᵀ, y = P L2ᵀ,
 * z = L1 L2ᵀ, and the norms A = ‖p‖², B = ‖l1‖², C = ‖l2‖² (MIXERS.md §2.3);
 * every triple then costs O(1): s = x²C + y²B + z²A − 2xyz (the header says
 * why that is safe), vectorised over the second key k.
 * Backward (MIXERS.md §2.4.6): with c_ijk = ∂L/∂logit · τ²/logit (the chain rule
 * through τ√(s + ε)),
 *   ∂s/∂p = 2[z² p + (xC − yz) l1 + (yB − xz) l2]
 *   ∂s/∂l1 = 2[(xC − yz) p + y² l1 + (zA − xy) l2]
 *   ∂s/∂l2 = 2[(yB − xz) p + (zA − xy) l1 + x² l2]
 * so every triple folds into scalar sums (q×k and k×k coefficient matrices and
 * three diagonals) and the vector work is six small products: O(q k² + q k δ)
 * per head instead of O(q k² δ). */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "kernels/mixer_ops_simplicial2.h"
#include "cpu_internal.h"
#include "cpu_par.h"
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

/* The Gram pieces of one (segment, head): x [nq, nk], y [nq, nk], z [nk, nk],
 * na [nq], nb [nk], nc [nk]. */
typedef struct {
    float *x, *y, *z, *na, *nb, *nc;
} s2_gram;

static size_t gram_floats(int nq, int nk)
{
    return 2 * (size_t)nq * nk + (size_t)nk * nk + (size_t)nq + 2 * (size_t)nk;
}

static s2_gram carve_gram(float *base, int nq, int nk)
{
    s2_gram g;
    g.x = base, g.y = g.x + (size_t)nq * nk, g.z = g.y + (size_t)nq * nk;
    g.na = g.z + (size_t)nk * nk, g.nb = g.na + nq, g.nc = g.nb + nk;
    return g;
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

static void gram(const ws_s2_args *a, const s2_view *v, const s2_gram *g)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, v->nq, v->nk, v->dl, 1.0f, v->p,
                a->ldp, v->l1, a->ldl1, 0.0f, g->x, v->nk);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, v->nq, v->nk, v->dl, 1.0f, v->p,
                a->ldp, v->l2, a->ldl2, 0.0f, g->y, v->nk);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, v->nk, v->nk, v->dl, 1.0f, v->l1,
                a->ldl1, v->l2, a->ldl2, 0.0f, g->z, v->nk);
    sq_norms(g->na, v->p, a->ldp, v->nq, v->dl);
    sq_norms(g->nb, v->l1, a->ldl1, v->nk, v->dl);
    sq_norms(g->nc, v->l2, a->ldl2, v->nk, v->dl);
}

/* Logits of query i into lg[nk²], then its softmax into pr[nk²]. The loops
 * avoid fmaxf, a library call here (NaN rules), so that they vectorise.
 * Probabilities below e^-40 of the row's largest (4e-18: nothing at float
 * precision) are exactly 0: with the authors' unscaled logits (tens, spread
 * over tens) they would otherwise underflow to subnormals, which made every
 * product touching them (and the backward) 20x slower. */
static void row_forward(float tau, const s2_view *v, int i, const s2_gram *g, float *restrict lg,
                        float *restrict pr)
{
    int nk = v->nk, nn = nk * nk;
    float na = g->na[i], mx = -INFINITY;
    const float *restrict yi = g->y + (long)i * nk, *restrict nc = g->nc;
    for (int j = 0; j < nk; j++) {
        float x = g->x[(long)i * nk + j], nb = g->nb[j];
        const float *restrict zj = g->z + (long)j * nk;
        float *restrict lj = lg + (long)j * nk;
#pragma omp simd
        for (int k = 0; k < nk; k++) {
            float y = yi[k], z = zj[k];
            float s = x * x * nc[k] + y * y * nb + z * z * na - 2.0f * x * y * z;
            lj[k] = s > 0.0f ? s : 0.0f;
        }
    }
    for (int t = 0; t < nn; t++) {
        float l = tau * sqrtf(lg[t] + WS_S2_EPS);
        lg[t] = l;
        mx = l > mx ? l : mx;
    }
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int t = 0; t < nn; t++) {
        float dl = lg[t] - mx;
        pr[t] = dl < -40.0f ? 0.0f : ws_expf(dl);
        sum += pr[t];
    }
    float inv = 1.0f / sum;
    for (int t = 0; t < nn; t++) pr[t] *= inv;
}

static size_t bound(int n) { return (size_t)(n > 0 ? n : 1); }

/* Key rows' own values as their output (virtual entities); or, accumulating,
 * the gradient of that identity. */
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

ws_status ws_cpu_s2_for_units(ws_backend *be, const ws_s2_args *a, size_t per_thread,
                              ws_cpu_s2_unit_fn fn, const void *ctx)
{
    int threads = ws_cpu_threads(be), units = a->n_segs * a->n_heads;
    float *scratch = ws_cpu_scratch(be, (size_t)threads * (per_thread ? per_thread : 1));
    if (!scratch) return WS_ERR_NOMEM;
    WS_CPU_FOR(threads, schedule(dynamic, 1), for (int t = 0; t < units; t++)
        fn(a, ctx, t, scratch + (size_t)omp_get_thread_num() * per_thread););
    return WS_OK;
}

static void forward_unit(const ws_s2_args *a, const void *ctx, int t, float *scratch)
{
    (void)ctx;
    const ws_s2_seg *s = &a->segs[t / a->n_heads];
    int h = t % a->n_heads;
    s2_view v = view(a, s, h);
    if (a->values_out) values_rows(a, s, h, a->out, a->ldo, a->u, a->ldu, 0);
    if (v.nq <= 0) return;
    float *out = a->out + (long)s->q_off * a->ldo + h * v.dl;
    if (v.nk <= 0) { /* no pairs: nothing to attend to */
        for (int i = 0; i < v.nq; i++) memset(out + (long)i * a->ldo, 0, v.dl * sizeof *out);
        return;
    }
    s2_gram g = carve_gram(scratch, v.nq, v.nk);
    gram(a, &v, &g);
    long nn = (long)v.nk * v.nk;
    float *pr = v.probs + v.pl_off;
    for (int i = 0; i < v.nq; i++)
        row_forward(a->tau, &v, i, &g, a->logits + v.pl_off + i * nn, pr + i * nn);
    /* o = A T: [nq, nk²] × [nk², δ] */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, v.nq, v.dl, (int)nn, 1.0f, pr,
                (int)nn, v.pair, a->d2, 0.0f, out, a->ldo);
}

static ws_status s2_attention_forward(ws_backend *be, const ws_s2_args *a)
{
    size_t per_thread = gram_floats((int)bound(a->max_q_len), (int)bound(a->max_k_len));
    return ws_cpu_s2_for_units(be, a, per_thread, forward_unit, NULL);
}

/* The backward's coefficients: c1 = Σ_k c(xC − yz) [nq, nk], c2 = Σ_j c(yB − xz)
 * [nq, nk], c3 = Σ_i c(zA − xy) [nk, nk], da = Σ_jk c z² [nq], db = Σ_ik c y²
 * [nk], dc = Σ_ij c x² [nk]; dA holds ∂L/∂A [nq, nk²] on entry. */
typedef struct {
    float *c1, *c2, *c3, *da, *db, *dc, *dA;
} s2_coef;

static size_t coef_floats(int nq, int nk)
{
    return 2 * (size_t)nq * nk + (size_t)nk * nk + (size_t)nq + 2 * (size_t)nk +
           (size_t)nq * nk * nk;
}

static s2_coef carve_coef(float *base, int nq, int nk)
{
    s2_coef c;
    c.c1 = base, c.c2 = c.c1 + (size_t)nq * nk, c.c3 = c.c2 + (size_t)nq * nk;
    c.da = c.c3 + (size_t)nk * nk, c.db = c.da + nq, c.dc = c.db + nk, c.dA = c.dc + nk;
    return c;
}

static void coefficients(float tau, const s2_view *v, const s2_gram *g, const s2_coef *c)
{
    int nq = v->nq, nk = v->nk;
    long nn = (long)nk * nk;
    float tau2 = tau * tau;
    memset(c->c1, 0, sizeof(float) * (2 * (size_t)nq * nk + nn + nq + 2 * (size_t)nk));
    float *restrict dc = c->dc;
    const float *restrict nc = g->nc;
    for (int i = 0; i < nq; i++) {
        const float *pr = v->probs + v->pl_off + i * nn, *lg = v->logits + v->pl_off + i * nn;
        const float *dr = c->dA + i * nn;
        float dot = 0.0f, da = 0.0f, na = g->na[i];
        for (long t = 0; t < nn; t++) dot += pr[t] * dr[t];
        const float *restrict yi = g->y + (long)i * nk;
        float *restrict c2i = c->c2 + (long)i * nk;
        for (int j = 0; j < nk; j++) {
            const float *restrict pj = pr + (long)j * nk, *restrict lj = lg + (long)j * nk;
            const float *restrict dj = dr + (long)j * nk, *restrict zj = g->z + (long)j * nk;
            float *restrict c3j = c->c3 + (long)j * nk;
            float x = g->x[(long)i * nk + j], nb = g->nb[j], c1 = 0.0f, db = 0.0f;
#pragma omp simd reduction(+ : c1, db, da)
            for (int k = 0; k < nk; k++) {
                /* dlogit = A(dA − Σ A dA); ∂logit/∂s = τ²/(2 logit) */
                float cf = pj[k] * (dj[k] - dot) * tau2 / lj[k], y = yi[k], z = zj[k];
                c1 += cf * (x * nc[k] - y * z);
                c2i[k] += cf * (y * nb - x * z);
                c3j[k] += cf * (z * na - x * y);
                da += cf * z * z;
                db += cf * y * y;
                dc[k] += cf * x * x;
            }
            c->c1[(long)i * nk + j] = c1;
            c->db[j] += db;
        }
        c->da[i] = da;
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

static void backward_unit(const ws_s2_args *a, const void *ctx, int t, float *scratch)
{
    const ws_s2_grads *g = ctx;
    const ws_s2_seg *s = &a->segs[t / a->n_heads];
    int h = t % a->n_heads;
    s2_view v = view(a, s, h);
    if (a->values_out) values_rows(a, s, h, g->du, a->ldu, g->dout, a->ldo, 1);
    if (v.nq <= 0 || v.nk <= 0) return;
    int nq = v.nq, nk = v.nk, dl = v.dl, nn = nk * nk;
    s2_gram gr = carve_gram(scratch, nq, nk);
    s2_coef c = carve_coef(scratch + gram_floats(nq, nk), nq, nk);
    const float *gout = g->dout + (long)s->q_off * a->ldo + h * dl;
    const float *pr = v.probs + v.pl_off;
    /* dT += Aᵀ G [nk², δ]; dA = G Tᵀ [nq, nk²] */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nn, dl, nq, 1.0f, pr, nn, gout, a->ldo,
                1.0f, g->dpair + (long)s->t_off * a->d2 + h * dl, a->d2);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nq, nn, dl, 1.0f, gout, a->ldo, v.pair,
                a->d2, 0.0f, c.dA, nn);
    gram(a, &v, &gr);
    coefficients(a->tau, &v, &gr, &c);
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

static ws_status s2_attention_backward(ws_backend *be, const ws_s2_args *a, const ws_s2_grads *g)
{
    int mq = (int)bound(a->max_q_len), mk = (int)bound(a->max_k_len);
    return ws_cpu_s2_for_units(be, a, gram_floats(mq, mk) + coef_floats(mq, mk), backward_unit,
                               g);
}

const struct ws_simplicial_ops ws_cpu_simplicial2_ops = {
    .pair_forward = ws_cpu_s2_pair_forward,
    .pair_backward = ws_cpu_s2_pair_backward,
    .attention_forward = s2_attention_forward,
    .attention_backward = s2_attention_backward,
};
