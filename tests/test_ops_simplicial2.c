/* test_ops_simplicial2.c — op-level proof tests for 2-simplicial attention
 * (kernels/mixer_ops_simplicial2.h): pair values, logits, probabilities and
 * outputs against a naive double-precision reference (explicit w_ijk per triple,
 * T_jk from the full outer product u_j ⊗ u_k); both backward ops against central
 * finite differences of L = Σ out ⊙ R over every element of p, l1, l2, u and B;
 * the += contract; ragged segments (empty query and key ranges), odd widths
 * (δ = 3, 5), 1-3 keys (1-9 pairs), strided rows whose padding (NaN) must be
 * neither read nor written. Pairwise-orthogonal p, l1, l2 (the square root's
 * singular point) give finite gradients, exactly zero for p, l1, l2, and the
 * same as finite differences of a double-precision reference nearby; the
 * triple product is symmetric under permutations and absolutely homogeneous. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/mixer_ops_simplicial2.h"
#include "ops_check.h"

typedef struct {
    int q_len, k_len;
} seg_spec;

typedef struct {
    int d2, heads, dl, values_out, n_segs, rows, ldp, ldkv, ldo;
    float tau;
    size_t np, nkv, nb, nout, nprob, npair;
    float *hp, *hkv, *hb;               /* host inputs, NaN where nothing may read */
    uint8_t *mp, *mkv, *mout, *mprob, *mpair;
    ws_s2_seg *segs;
    float *p, *kv, *b, *out, *logits, *probs, *pair; /* device */
    ws_s2_seg *dsegs;
    ws_s2_args a;
} s2_case;

static uint8_t *zeros(size_t n)
{
    uint8_t *m = calloc(n ? n : 1, 1);
    assert_non_null(m);
    return m;
}

/* Rows per segment: its queries, then its keys, then one unused row. */
static void case_init(s2_case *c, ws_test_rng *rng, int d2, int heads, float tau, int values_out,
                      const seg_spec *spec, int n_segs, float scale)
{
    memset(c, 0, sizeof *c);
    c->d2 = d2, c->heads = heads, c->dl = d2 / heads, c->tau = tau;
    c->values_out = values_out, c->n_segs = n_segs;
    c->segs = xmalloc((size_t)n_segs * sizeof *c->segs);
    int rows = 0, max_q = 0, max_k = 0;
    size_t prob = 0, pair_rows = 0;
    for (int s = 0; s < n_segs; s++) {
        const seg_spec *sp = &spec[s];
        prob += 2, pair_rows += 1; /* padding the op must leave alone */
        c->segs[s] = (ws_s2_seg){rows, sp->q_len, rows + sp->q_len, sp->k_len, (int32_t)prob,
                                 (int32_t)pair_rows};
        rows += sp->q_len + sp->k_len + 1;
        prob += (size_t)heads * sp->q_len * sp->k_len * sp->k_len;
        pair_rows += (size_t)sp->k_len * sp->k_len;
        if (sp->q_len > max_q) max_q = sp->q_len;
        if (sp->k_len > max_k) max_k = sp->k_len;
    }
    c->rows = rows;
    c->ldp = d2 + 1, c->ldkv = 3 * d2 + 2, c->ldo = d2 + 1;
    c->np = (size_t)rows * c->ldp, c->nkv = (size_t)rows * c->ldkv, c->nout = (size_t)rows * c->ldo;
    c->nb = (size_t)d2 * c->dl * c->dl, c->nprob = prob + 2, c->npair = (pair_rows + 1) * d2;
    c->mp = zeros(c->np), c->mkv = zeros(c->nkv), c->mout = zeros(c->nout);
    c->mprob = zeros(c->nprob), c->mpair = zeros(c->npair);
    for (int s = 0; s < n_segs; s++) {
        const ws_s2_seg *g = &c->segs[s];
        for (int i = 0; i < g->q_len; i++) {
            memset(c->mp + (size_t)(g->q_off + i) * c->ldp, 1, d2);
            memset(c->mout + (size_t)(g->q_off + i) * c->ldo, 1, d2);
        }
        for (int j = 0; j < g->k_len; j++) {
            memset(c->mkv + (size_t)(g->k_off + j) * c->ldkv, 1, 3 * (size_t)d2);
            if (values_out) memset(c->mout + (size_t)(g->k_off + j) * c->ldo, 1, d2);
        }
        memset(c->mprob + g->p_off, 1, (size_t)heads * g->q_len * g->k_len * g->k_len);
        memset(c->mpair + (size_t)g->t_off * d2, 1, (size_t)g->k_len * g->k_len * d2);
    }
    c->hp = xmalloc(c->np * sizeof(float)), c->hkv = xmalloc(c->nkv * sizeof(float));
    c->hb = xmalloc(c->nb * sizeof(float));
    for (size_t i = 0; i < c->np; i++) c->hp[i] = c->mp[i] ? scale * ws_test_normal(rng) : NAN;
    for (size_t i = 0; i < c->nkv; i++) c->hkv[i] = c->mkv[i] ? scale * ws_test_normal(rng) : NAN;
    ws_test_fill_normal(rng, c->hb, c->nb, 1.0f / (float)c->dl);
    c->p = dev_from(c->hp, c->np), c->kv = dev_from(c->hkv, c->nkv), c->b = dev_from(c->hb, c->nb);
    c->out = dev_alloc(c->nout), c->logits = dev_alloc(c->nprob), c->probs = dev_alloc(c->nprob);
    c->pair = dev_alloc(c->npair);
    c->dsegs = dev_alloc_bytes((size_t)n_segs * sizeof *c->segs);
    put_bytes(c->dsegs, c->segs, (size_t)n_segs * sizeof *c->segs);
    c->a = (ws_s2_args){.out = c->out, .ldo = c->ldo, .logits = c->logits, .probs = c->probs,
                        .pair = c->pair, .p = c->p, .l1 = c->kv, .l2 = c->kv + d2,
                        .u = c->kv + 2 * d2, .ldp = c->ldp, .ldl1 = c->ldkv, .ldl2 = c->ldkv,
                        .ldu = c->ldkv, .b = c->b, .segs = c->dsegs, .n_segs = n_segs,
                        .n_heads = heads, .d2 = d2, .tau = tau, .values_out = values_out,
                        .max_q_len = max_q, .max_k_len = max_k};
}

static void case_free(s2_case *c)
{
    dev_free(c->p), dev_free(c->kv), dev_free(c->b), dev_free(c->out);
    dev_free(c->logits), dev_free(c->probs), dev_free(c->pair), dev_free(c->dsegs);
    free(c->hp), free(c->hkv), free(c->hb), free(c->segs);
    free(c->mp), free(c->mkv), free(c->mout), free(c->mprob), free(c->mpair);
}

/* The unsigned triple product of a, b, c (n long, strides 1) in double. */
static double triple(const double *a, const double *b, const double *c, int n)
{
    double x = 0, y = 0, z = 0, s = 0;
    for (int t = 0; t < n; t++) x += a[t] * b[t], y += a[t] * c[t], z += b[t] * c[t];
    for (int t = 0; t < n; t++) {
        double w = x * c[t] - y * b[t] + z * a[t];
        s += w * w;
    }
    return sqrt(s + WS_S2_EPS);
}

typedef struct {
    double *out, *logits, *probs, *pair; /* nout, nprob, nprob, npair */
} s2_ref;

/* Naive reference from double inputs p [rows, ldp], kv [rows, ldkv], b. */
static void reference(const s2_case *c, const double *p, const double *kv, const double *b,
                      s2_ref *r)
{
    int dl = c->dl, d2 = c->d2;
    memset(r->out, 0, c->nout * sizeof(double));
    memset(r->pair, 0, c->npair * sizeof(double));
    for (int s = 0; s < c->n_segs; s++) {
        const ws_s2_seg *g = &c->segs[s];
        int nk = g->k_len, nn = nk * nk;
        for (int h = 0; h < c->heads; h++) {
            const double *bh = b + (size_t)h * dl * dl * dl;
            for (int j = 0; j < nk; j++)
                for (int k = 0; k < nk; k++) {
                    const double *uj = kv + (size_t)(g->k_off + j) * c->ldkv + 2 * d2 + h * dl;
                    const double *uk = kv + (size_t)(g->k_off + k) * c->ldkv + 2 * d2 + h * dl;
                    double *t = r->pair + ((size_t)g->t_off + j * nk + k) * d2 + h * dl;
                    for (int q = 0; q < dl; q++)
                        for (int a = 0; a < dl; a++)
                            for (int e = 0; e < dl; e++)
                                t[q] += bh[((size_t)q * dl + a) * dl + e] * uj[a] * uk[e];
                }
            for (int i = 0; i < g->q_len; i++) {
                const double *pi = p + (size_t)(g->q_off + i) * c->ldp + h * dl;
                size_t at = g->p_off + ((size_t)h * g->q_len + i) * nn;
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j < nk; j++)
                    for (int k = 0; k < nk; k++) {
                        const double *l1 = kv + (size_t)(g->k_off + j) * c->ldkv + h * dl;
                        const double *l2 = kv + (size_t)(g->k_off + k) * c->ldkv + d2 + h * dl;
                        double l = c->tau * triple(pi, l1, l2, dl);
                        r->logits[at + j * nk + k] = l;
                        mx = fmax(mx, l);
                    }
                for (int t = 0; t < nn; t++) sum += r->probs[at + t] = exp(r->logits[at + t] - mx);
                double *o = r->out + (size_t)(g->q_off + i) * c->ldo + h * dl;
                for (int t = 0; t < nn; t++) {
                    r->probs[at + t] /= sum;
                    for (int q = 0; q < dl; q++)
                        o[q] += r->probs[at + t] *
                                r->pair[((size_t)g->t_off + t) * d2 + h * dl + q];
                }
            }
            for (int j = 0; c->values_out && j < nk; j++)
                for (int q = 0; q < dl; q++)
                    r->out[(size_t)(g->k_off + j) * c->ldo + h * dl + q] =
                        kv[(size_t)(g->k_off + j) * c->ldkv + 2 * d2 + h * dl + q];
        }
    }
}

static double *to_double(const float *x, size_t n)
{
    double *d = xmalloc(n * sizeof *d);
    for (size_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}

static s2_ref ref_alloc(const s2_case *c)
{
    s2_ref r = {xmalloc(c->nout * sizeof(double)), xmalloc(c->nprob * sizeof(double)),
                xmalloc(c->nprob * sizeof(double)), xmalloc(c->npair * sizeof(double))};
    return r;
}

static void ref_free(s2_ref *r) { free(r->out), free(r->logits), free(r->probs), free(r->pair); }

static void run_forward(void *ctx)
{
    s2_case *c = ctx;
    assert_int_equal(g_run->ops->simplicial->pair_forward(g_run, &c->a), WS_OK);
    assert_int_equal(g_run->ops->simplicial->attention_forward(g_run, &c->a), WS_OK);
}

/* Poisons the outputs (NaN where the ops write, SENTINEL elsewhere), runs the
 * forward and compares every output with the reference. */
static void check_forward(s2_case *c, const char *tag)
{
    struct { float *dev; size_t n; const uint8_t *m; const char *what; } o[] = {
        {c->out, c->nout, c->mout, "out"}, {c->logits, c->nprob, c->mprob, "logits"},
        {c->probs, c->nprob, c->mprob, "probs"}, {c->pair, c->npair, c->mpair, "pair"}};
    for (int k = 0; k < N_OF(o); k++) {
        float *h = xmalloc(o[k].n * sizeof *h);
        for (size_t i = 0; i < o[k].n; i++) h[i] = o[k].m[i] ? NAN : SENTINEL;
        put(o[k].dev, h, o[k].n);
        free(h);
    }
    run_forward(c);
    double *p = to_double(c->hp, c->np), *kv = to_double(c->hkv, c->nkv);
    double *b = to_double(c->hb, c->nb);
    s2_ref r = ref_alloc(c);
    reference(c, p, kv, b, &r);
    const double *want[] = {r.out, r.logits, r.probs, r.pair};
    for (int k = 0; k < N_OF(o); k++) {
        float *got = xmalloc(o[k].n * sizeof *got);
        get(got, o[k].dev, o[k].n);
        char what[96];
        snprintf(what, sizeof what, "s2 %s %s", o[k].what, tag);
        check_close(what, got, want[k], o[k].n, o[k].m, 1e-5, 1e-5);
        check_untouched(what, got, o[k].m, o[k].n);
        free(got);
    }
    ref_free(&r);
    free(p), free(kv), free(b);
}

/* Analytic gradients of L = Σ out ⊙ R into gp, gkv, gb (device, prefilled). */
static void run_backward(s2_case *c, const float *dy, float *gp, float *gkv, float *gb)
{
    float *dpair = dev_alloc(c->npair);
    dev_set(dpair, 0.0f, c->npair);
    ws_s2_grads g = {.dp = gp, .dl1 = gkv, .dl2 = gkv + c->d2, .du = gkv + 2 * c->d2, .db = gb,
                     .dpair = dpair, .dout = dy};
    run_forward(c);
    assert_int_equal(g_be->ops->simplicial->attention_backward(g_be, &c->a, &g), WS_OK);
    assert_int_equal(g_be->ops->simplicial->pair_backward(g_be, &c->a, &g), WS_OK);
    dev_free(dpair);
}

typedef struct {
    float *dev; /* the input's device buffer */
    size_t n;
    const uint8_t *m;
    const char *what;
} s2_input;

/* Backward: analytic gradients of every input against finite differences of
 * the ops, the += contract, and untouched padding. Returns the analytic
 * gradients (host, caller frees) in grads[3] when grads is not NULL. */
static void check_backward(s2_case *c, ws_test_rng *rng, const char *tag, float h, double atol,
                           double rtol, float **grads)
{
    double *r = random_weights(rng, c->mout, c->nout);
    float *hdy = xmalloc(c->nout * sizeof *hdy);
    for (size_t i = 0; i < c->nout; i++) hdy[i] = c->mout[i] ? (float)r[i] : NAN;
    float *dy = dev_from(hdy, c->nout);
    uint8_t *all_b = xmalloc(c->nb);
    memset(all_b, 1, c->nb);
    s2_input in[3] = {{c->p, c->np, c->mp, "p"}, {c->kv, c->nkv, c->mkv, "l1|l2|u"},
                      {c->b, c->nb, all_b, "B"}};
    float *gdev[3], *an[3], *pre[3];
    for (int k = 0; k < 3; k++) {
        float *z = xmalloc(in[k].n * sizeof *z);
        pre[k] = xmalloc(in[k].n * sizeof(float)), an[k] = xmalloc(in[k].n * sizeof(float));
        for (size_t i = 0; i < in[k].n; i++) {
            z[i] = in[k].m[i] ? 0.0f : SENTINEL;
            pre[k][i] = in[k].m[i] ? ws_test_normal(rng) : SENTINEL;
        }
        gdev[k] = dev_from(z, in[k].n);
        free(z);
    }
    run_backward(c, dy, gdev[0], gdev[1], gdev[2]);
    for (int k = 0; k < 3; k++) {
        get(an[k], gdev[k], in[k].n);
        put(gdev[k], pre[k], in[k].n);
    }
    run_backward(c, dy, gdev[0], gdev[1], gdev[2]);
    loss_fn l = {run_forward, c, c->out, c->nout, r, xmalloc(c->nout * sizeof(float))};
    char what[96];
    for (int k = 0; k < 3; k++) {
        float *got = xmalloc(in[k].n * sizeof *got);
        get(got, gdev[k], in[k].n);
        snprintf(what, sizeof what, "s2 grad += %s %s", in[k].what, tag);
        check_accumulated(what, got, pre[k], an[k], in[k].n, in[k].m);
        check_untouched(what, got, in[k].m, in[k].n);
        double *fd = xmalloc(in[k].n * sizeof *fd);
        fd_grad(&l, in[k].dev, in[k].n, in[k].m, h, fd);
        snprintf(what, sizeof what, "s2 grad %s %s", in[k].what, tag);
        check_close(what, an[k], fd, in[k].n, in[k].m, atol, rtol);
        free(fd), free(got), free(pre[k]), dev_free(gdev[k]);
        if (grads) grads[k] = an[k];
        else free(an[k]);
    }
    dev_free(dy);
    free(hdy), free(r), free(l.scratch), free(all_b);
}

/* ---- tests ------------------------------------------------------------------ */

/* Forward and backward of one random case. */
static void run_case(uint64_t seed, int d2, int heads, float tau, int values_out,
                     const seg_spec *segs, int n_segs, float scale, const char *tag)
{
    ws_test_rng rng = {seed};
    s2_case c;
    case_init(&c, &rng, d2, heads, tau, values_out, segs, n_segs, scale);
    check_forward(&c, tag);
    check_backward(&c, &rng, tag, 1e-2f, 1e-4, 5e-4, NULL);
    case_free(&c);
}

/* δ = 3, one head, virtual-entity layout (key rows output their own u): 1-3
 * keys, a segment without queries. δ = 5, two heads, τ = 0.5, cross layout: a
 * segment without keys (zero output), one key (a single pair: probability 1). */
static void test_s2_ragged(void **state)
{
    (void)state;
    static const seg_spec self_like[] = {{3, 2}, {1, 1}, {5, 3}, {0, 2}, {2, 2}};
    static const seg_spec cross_like[] = {{2, 3}, {4, 1}, {1, 2}, {3, 0}, {3, 3}};
    run_case(0x5111, 3, 1, 1.0f, 1, self_like, N_OF(self_like), 0.8f, "d2=3 h1 virtual");
    run_case(0xc2055, 10, 2, 0.5f, 0, cross_like, N_OF(cross_like), 1.0f, "d2=10 h2 cross");
}

/* Logits in the tens (the authors' unscaled regime): the softmax must subtract
 * the row maximum, and probabilities are either exactly 0 or normal floats
 * (no subnormals); three heads of δ = 3. */
static void test_s2_large_logits(void **state)
{
    (void)state;
    ws_test_rng rng = {0x1a7e};
    static const seg_spec segs[] = {{4, 3}, {6, 2}};
    s2_case c;
    case_init(&c, &rng, 9, 3, 1.0f, 1, segs, N_OF(segs), 2.5f);
    check_forward(&c, "d2=9 h3 large");
    float *pr = xmalloc(c.nprob * sizeof *pr);
    get(pr, c.probs, c.nprob);
    int zeros = 0;
    for (size_t i = 0; i < c.nprob; i++) {
        if (!c.mprob[i]) continue;
        if (pr[i] != 0.0f && !(pr[i] >= FLT_MIN)) fail_msg("probs[%zu] = %g", i, (double)pr[i]);
        zeros += pr[i] == 0.0f;
    }
    assert_true(zeros > 0); /* the case does reach the cut */
    free(pr);
    case_free(&c);
}

/* p_i ∈ span(e0), l1_j ∈ span(e1, e2), l2_k ∈ span(e3, e4) (δ = 5): every triple
 * is pairwise orthogonal, logits are τ√ε and the probabilities uniform. The
 * gradients of p, l1, l2 are finite and exactly 0 (∂‖w‖²/∂· = 0 at w = 0), and
 * agree with finite differences (which are 0 by symmetry); u and B still learn.
 * Then, 1e-3 away from that point, the analytic gradient agrees with central
 * differences of the double-precision reference. */
static void test_s2_orthogonal(void **state)
{
    (void)state;
    ws_test_rng rng = {0x0a7};
    static const seg_spec segs[] = {{2, 2}, {3, 1}};
    s2_case c;
    case_init(&c, &rng, 5, 1, 1.0f, 0, segs, N_OF(segs), 1.0f);
    for (int s = 0; s < c.n_segs; s++) {
        const ws_s2_seg *g = &c.segs[s];
        for (int i = 0; i < g->q_len; i++)
            for (int t = 1; t < 5; t++) c.hp[(size_t)(g->q_off + i) * c.ldp + t] = 0.0f;
        for (int j = 0; j < g->k_len; j++) {
            float *r = c.hkv + (size_t)(g->k_off + j) * c.ldkv;
            r[0] = r[3] = r[4] = 0.0f;    /* l1 in e1, e2 */
            r[5] = r[6] = r[7] = 0.0f;    /* l2 in e3, e4 */
        }
    }
    put(c.p, c.hp, c.np), put(c.kv, c.hkv, c.nkv);
    check_forward(&c, "orthogonal");
    float *lg = xmalloc(c.nprob * sizeof *lg);
    get(lg, c.logits, c.nprob);
    for (size_t i = 0; i < c.nprob; i++)
        if (c.mprob[i] && lg[i] != sqrtf(WS_S2_EPS)) fail_msg("orthogonal logit %g", (double)lg[i]);
    free(lg);
    float *g[3];
    check_backward(&c, &rng, "orthogonal", 1e-2f, 1e-4, 5e-4, g);
    for (size_t i = 0; i < c.np; i++)
        if (c.mp[i] && g[0][i] != 0.0f) fail_msg("orthogonal dp[%zu] = %g", i, (double)g[0][i]);
    for (size_t i = 0; i < c.nkv; i++) {
        int col = (int)(i % c.ldkv);
        if (c.mkv[i] && col < 10 && g[1][i] != 0.0f)
            fail_msg("orthogonal dl[%zu] = %g", i, (double)g[1][i]);
    }
    for (int k = 0; k < 3; k++) free(g[k]);

    /* near the singular point: double-precision central differences */
    for (size_t i = 0; i < c.np; i++) c.hp[i] += c.mp[i] ? 1e-3f * ws_test_normal(&rng) : 0.0f;
    for (size_t i = 0; i < c.nkv; i++) c.hkv[i] += c.mkv[i] ? 1e-3f * ws_test_normal(&rng) : 0.0f;
    put(c.p, c.hp, c.np), put(c.kv, c.hkv, c.nkv);
    double *r = random_weights(&rng, c.mout, c.nout);
    float *hdy = xmalloc(c.nout * sizeof *hdy);
    for (size_t i = 0; i < c.nout; i++) hdy[i] = c.mout[i] ? (float)r[i] : NAN;
    float *dy = dev_from(hdy, c.nout), *gp = dev_alloc(c.np), *gkv = dev_alloc(c.nkv);
    float *gb = dev_alloc(c.nb);
    dev_set(gp, 0.0f, c.np), dev_set(gkv, 0.0f, c.nkv), dev_set(gb, 0.0f, c.nb);
    run_backward(&c, dy, gp, gkv, gb);
    double *p = to_double(c.hp, c.np), *kv = to_double(c.hkv, c.nkv);
    double *b = to_double(c.hb, c.nb);
    s2_ref ref = ref_alloc(&c);
    struct { float *dev; double *x; size_t n; const uint8_t *m; const char *what; } in[2] = {
        {gp, p, c.np, c.mp, "s2 grad p near-orthogonal"},
        {gkv, kv, c.nkv, c.mkv, "s2 grad l1|l2|u near-orthogonal"}};
    for (int k = 0; k < 2; k++) {
        float *an = xmalloc(in[k].n * sizeof *an);
        double *fd = xmalloc(in[k].n * sizeof *fd);
        get(an, in[k].dev, in[k].n);
        for (size_t i = 0; i < in[k].n; i++) {
            fd[i] = 0.0;
            if (!in[k].m[i]) continue;
            if (!isfinite(an[i])) fail_msg("%s[%zu] is not finite", in[k].what, i);
            double keep = in[k].x[i], L[2];
            for (int side = 0; side < 2; side++) {
                in[k].x[i] = keep + (side ? -1e-7 : 1e-7);
                reference(&c, p, kv, b, &ref);
                L[side] = 0.0;
                for (size_t o = 0; o < c.nout; o++) L[side] += c.mout[o] ? ref.out[o] * r[o] : 0.0;
            }
            in[k].x[i] = keep;
            fd[i] = (L[0] - L[1]) / 2e-7;
        }
        check_close(in[k].what, an, fd, in[k].n, in[k].m, 1e-4, 1e-3);
        free(an), free(fd);
    }
    ref_free(&ref);
    free(p), free(kv), free(b), free(hdy), free(r);
    dev_free(dy), dev_free(gp), dev_free(gkv), dev_free(gb);
    case_free(&c);
}

/* ⟨a,b,c⟩ is the same for all six orders of (a, b, c) as (p, l1, l2), scales by
 * |λ| with any argument, is ‖a‖‖b‖‖c‖ for linearly dependent vectors, and
 * satisfies ⟨a,b,c⟩² = the Gram polynomial. Eight segments of one query and one
 * key each (the six orders, then λa, then a dependent triple). */
static void test_s2_symmetry(void **state)
{
    (void)state;
    ws_test_rng rng = {0x5e7};
    enum { DL = 5 };
    static const seg_spec segs[] = {{1, 1}, {1, 1}, {1, 1}, {1, 1},
                                    {1, 1}, {1, 1}, {1, 1}, {1, 1}};
    static const int order[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                    {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    s2_case c;
    case_init(&c, &rng, DL, 1, 1.0f, 0, segs, N_OF(segs), 1.0f);
    float v[3][DL];
    for (int k = 0; k < 3; k++) ws_test_fill_normal(&rng, v[k], DL, 1.0f);
    for (int s = 0; s < 8; s++) {
        const ws_s2_seg *g = &c.segs[s];
        float *p = c.hp + (size_t)g->q_off * c.ldp, *kv = c.hkv + (size_t)g->k_off * c.ldkv;
        for (int t = 0; t < DL; t++) {
            if (s < 6) {
                p[t] = v[order[s][0]][t], kv[t] = v[order[s][1]][t], kv[DL + t] = v[order[s][2]][t];
            } else if (s == 6) { /* ⟨-2.5 a, b, c⟩ */
                p[t] = -2.5f * v[0][t], kv[t] = v[1][t], kv[DL + t] = v[2][t];
            } else { /* ⟨a, 2a, -a⟩ = 2‖a‖³ */
                p[t] = v[0][t], kv[t] = 2.0f * v[0][t], kv[DL + t] = -v[0][t];
            }
        }
    }
    put(c.p, c.hp, c.np), put(c.kv, c.hkv, c.nkv);
    run_forward(&c);
    float *lg = xmalloc(c.nprob * sizeof *lg);
    get(lg, c.logits, c.nprob);
    double a = 0, b = 0, cc = 0, x = 0, y = 0, z = 0;
    for (int t = 0; t < DL; t++) {
        a += (double)v[0][t] * v[0][t], b += (double)v[1][t] * v[1][t];
        cc += (double)v[2][t] * v[2][t], x += (double)v[0][t] * v[1][t];
        y += (double)v[0][t] * v[2][t], z += (double)v[1][t] * v[2][t];
    }
    double gram = sqrt(x * x * cc + y * y * b + z * z * a - 2 * x * y * z + WS_S2_EPS);
    for (int s = 0; s < 6; s++) {
        double got = lg[c.segs[s].p_off];
        if (fabs(got - gram) > 1e-5 * gram)
            fail_msg("order %d: triple product %.9g, Gram polynomial %.9g", s, got, gram);
    }
    if (fabs(lg[c.segs[6].p_off] - 2.5 * gram) > 1e-5 * gram)
        fail_msg("homogeneity: %.9g vs %.9g", (double)lg[c.segs[6].p_off], 2.5 * gram);
    double dep = 2.0 * pow(a, 1.5);
    if (fabs(lg[c.segs[7].p_off] - dep) > 1e-5 * dep)
        fail_msg("dependent: %.9g vs %.9g", (double)lg[c.segs[7].p_off], dep);
    if (verbose()) fprintf(stderr, "  triple product %.9g, Gram polynomial %.9g\n",
                           (double)lg[c.segs[0].p_off], gram);
    free(lg);
    case_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_s2_ragged),     cmocka_unit_test(test_s2_large_logits),
        cmocka_unit_test(test_s2_orthogonal), cmocka_unit_test(test_s2_symmetry),
    };
    return cmocka_run_group_tests(tests, ops_group_setup, ops_group_teardown);
}
