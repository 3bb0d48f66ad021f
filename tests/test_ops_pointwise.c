/* test_ops_pointwise.c — op-level proof tests for the row-wise and element-wise
 * ops of a backend: LayerNorm, GELU (tanh form), residual add, embedding
 * gather-sum (skipped negative ids, accumulate flag) and its scatter-add
 * backward (repeated ids), BCE with logits (unlabelled items, extreme logits),
 * sigmoid, sum_squares, scale, AdamW against a double-precision
 * transcription of torch.optim.AdamW, and the symbol codes (kernels/symcode.h)
 * against values computed by the numpy reference (tests/reference/symcode.py).
 *
 * Forwards are checked against naive double references with NaN-poisoned
 * outputs; backwards against central finite differences of L = Σ out ⊙ R (R
 * fixed and random, L in double) and for the += contract by pre-filling
 * gradients. All buffers go through ws_backend_alloc/upload/download. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/symcode.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_internal.h" /* WS_CPU_CODES, WS_CPU_CODE_WAYS */
#include "ops_check.h"
#include "test_util.h"

/* got[i] within atol + rtol·|want[i]| of each element (for values spanning many
 * orders of magnitude, where a max-relative bound would say nothing). */
static void check_elementwise(const char *what, const float *got, const double *want, size_t n,
                              double atol, double rtol)
{
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]);
        if (!(e <= atol + rtol * fabs(want[i])))
            fail_msg("%s[%zu]: got %.9g, want %.9g", what, i, (double)got[i], want[i]);
    }
}

/* Forward result has to be finite everywhere (catches overflow at extremes). */
static void check_finite(const char *what, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) fail_msg("%s[%zu] is not finite (%g)", what, i, (double)x[i]);
}

/* ---- LayerNorm ------------------------------------------------------------------ */

typedef struct {
    int n, c;
    float *x, *gain, *bias, *out, *mean, *rstd; /* device */
} ln_ctx;

static void ln_fwd(void *p)
{
    ln_ctx *l = p;
    assert_int_equal(g_run->ops->layernorm_forward(g_run, l->out, l->mean, l->rstd, l->x,
                                                   l->gain, l->bias, l->n, l->c),
                     WS_OK);
}

static void test_layernorm(void **state)
{
    (void)state;
    ws_test_rng rng = {0x1a1a};
    /* (n, c): odd sizes, one-wide rows, a row-parallel din (n >= 64) and a
     * column-parallel dgain/dbias (c >= 256) */
    static const int shapes[][2] = {{1, 1},  {3, 3},  {7, 17}, {17, 33},
                                    {1, 33}, {65, 7}, {3, 257}};
    for (int t = 0; t < N_OF(shapes); t++) {
        int n = shapes[t][0], c = shapes[t][1];
        size_t nx = (size_t)n * c;
        float *hx = xmalloc(nx * sizeof *hx), *hg = xmalloc(c * sizeof *hg);
        float *hb = xmalloc(c * sizeof *hb);
        for (size_t i = 0; i < nx; i++) hx[i] = 3.0f + 2.0f * ws_test_normal(&rng);
        for (int i = 0; i < c; i++) hg[i] = 1.0f + 0.5f * ws_test_normal(&rng);
        ws_test_fill_normal(&rng, hb, c, 1.0f);
        ln_ctx l = {n, c, dev_from(hx, nx), dev_from(hg, c), dev_from(hb, c),
                    dev_alloc(nx), dev_alloc(n), dev_alloc(n)};
        dev_set(l.out, NAN, nx), dev_set(l.mean, NAN, n), dev_set(l.rstd, NAN, n);
        ln_fwd(&l);

        /* forward vs double two-pass reference (biased variance, eps 1e-5) */
        double *w_out = xmalloc(nx * sizeof(double)), *w_mean = xmalloc(n * sizeof(double));
        double *w_rstd = xmalloc(n * sizeof(double));
        for (int r = 0; r < n; r++) {
            const float *x = hx + (size_t)r * c;
            double m = 0.0, v = 0.0;
            for (int i = 0; i < c; i++) m += x[i];
            m /= c;
            for (int i = 0; i < c; i++) v += (x[i] - m) * (x[i] - m);
            v /= c;
            double s = 1.0 / sqrt(v + 1e-5);
            for (int i = 0; i < c; i++) w_out[(size_t)r * c + i] = (x[i] - m) * s * hg[i] + hb[i];
            w_mean[r] = m, w_rstd[r] = s;
        }
        float *got = xmalloc((nx > 2 * (size_t)c ? nx : 2 * (size_t)c) * sizeof *got);
        char what[80];
        get(got, l.out, nx);
        snprintf(what, sizeof what, "layernorm out n%d c%d", n, c);
        check_close(what, got, w_out, nx, NULL, 1e-5, 1e-5);
        get(got, l.mean, n);
        snprintf(what, sizeof what, "layernorm mean n%d c%d", n, c);
        check_close(what, got, w_mean, n, NULL, 1e-6, 1e-6);
        get(got, l.rstd, n);
        snprintf(what, sizeof what, "layernorm rstd n%d c%d", n, c);
        check_elementwise(what, got, w_rstd, n, 0.0, 1e-5);

        /* backward: analytic from zero */
        double *r = random_weights(&rng, NULL, nx);
        float *hdy = xmalloc(nx * sizeof *hdy);
        for (size_t i = 0; i < nx; i++) hdy[i] = (float)r[i];
        float *dy = dev_from(hdy, nx);
        float *gx = dev_alloc(nx), *gg = dev_alloc(c), *gb = dev_alloc(c);
        dev_set(gx, 0.0f, nx), dev_set(gg, 0.0f, c), dev_set(gb, 0.0f, c);
        assert_int_equal(g_be->ops->layernorm_backward(g_be, gx, gg, gb, dy, l.x, l.gain, l.mean,
                                                       l.rstd, n, c),
                         WS_OK);
        float *an_x = xmalloc(nx * sizeof(float)), *an_g = xmalloc(c * sizeof(float));
        float *an_b = xmalloc(c * sizeof(float));
        get(an_x, gx, nx), get(an_g, gg, c), get(an_b, gb, c);

        /* analytic backward vs a double-precision transcription of the formula */
        double *w_dx = xmalloc(nx * sizeof(double)), *w_dg = calloc(c, sizeof(double));
        double *w_db = calloc(c, sizeof(double));
        assert_non_null(w_dg), assert_non_null(w_db);
        for (int row = 0; row < n; row++) {
            const float *x = hx + (size_t)row * c;
            const double *dyr = r + (size_t)row * c;
            double s = w_rstd[row], m = w_mean[row], mg = 0.0, mgx = 0.0;
            for (int i = 0; i < c; i++) {
                double xh = (x[i] - m) * s;
                mg += dyr[i] * hg[i] / c;
                mgx += dyr[i] * hg[i] * xh / c;
                w_dg[i] += dyr[i] * xh;
                w_db[i] += dyr[i];
            }
            for (int i = 0; i < c; i++)
                w_dx[(size_t)row * c + i] = s * (dyr[i] * hg[i] - mg - (x[i] - m) * s * mgx);
        }
        /* din cancels terms of size rstd·|g·dy| (all of it when c == 1), so the
         * absolute floor scales with that */
        double big = 0.0;
        for (size_t i = 0; i < nx; i++) big = fmax(big, w_rstd[i / c] * fabs(r[i] * hg[i % c]));
        snprintf(what, sizeof what, "layernorm din (ref) n%d c%d", n, c);
        check_close(what, an_x, w_dx, nx, NULL, 1e-6 + 3e-7 * big, 1e-5);
        snprintf(what, sizeof what, "layernorm dgain (ref) n%d c%d", n, c);
        check_close(what, an_g, w_dg, c, NULL, 1e-5, 1e-5);
        snprintf(what, sizeof what, "layernorm dbias (ref) n%d c%d", n, c);
        check_close(what, an_b, w_db, c, NULL, 1e-5, 1e-5);
        free(w_dx), free(w_dg), free(w_db);

        /* += contract (the saved mean/rstd are still those of the forward) */
        float *px = xmalloc(nx * sizeof(float)), *pg = xmalloc(c * sizeof(float));
        float *pb = xmalloc(c * sizeof(float));
        ws_test_fill_normal(&rng, px, nx, 2.0f);
        ws_test_fill_normal(&rng, pg, c, 2.0f);
        ws_test_fill_normal(&rng, pb, c, 2.0f);
        put(gx, px, nx), put(gg, pg, c), put(gb, pb, c);
        assert_int_equal(g_be->ops->layernorm_backward(g_be, gx, gg, gb, dy, l.x, l.gain, l.mean,
                                                       l.rstd, n, c),
                         WS_OK);
        get(got, gx, nx);
        check_accumulated("layernorm din +=", got, px, an_x, nx, NULL);
        get(got, gg, c);
        check_accumulated("layernorm dgain +=", got, pg, an_g, c, NULL);
        get(got, gb, c);
        check_accumulated("layernorm dbias +=", got, pb, an_b, c, NULL);

        /* din may be NULL (no gradient wanted for the input) */
        put(gg, pg, c), put(gb, pb, c);
        assert_int_equal(g_be->ops->layernorm_backward(g_be, NULL, gg, gb, dy, l.x, l.gain,
                                                       l.mean, l.rstd, n, c),
                         WS_OK);
        get(got, gg, c);
        check_accumulated("layernorm dgain (din NULL)", got, pg, an_g, c, NULL);
        get(got, gb, c);
        check_accumulated("layernorm dbias (din NULL)", got, pb, an_b, c, NULL);

        /* finite differences: L is linear in gain and bias (h = 1), smooth in x */
        loss_fn lf = {ln_fwd, &l, l.out, nx, r, xmalloc(nx * sizeof(float))};
        double *fd = xmalloc(nx * sizeof(double));
        /* steps scale with each row's spread: the curvature goes as rstd³ */
        float *steps = xmalloc(nx * sizeof *steps);
        for (size_t i = 0; i < nx; i++) steps[i] = (float)(3e-3 / w_rstd[i / c]);
        fd_grad_steps(&lf, l.x, nx, NULL, 0.0f, steps, fd);
        free(steps);
        snprintf(what, sizeof what, "layernorm din n%d c%d", n, c);
        check_close(what, an_x, fd, nx, NULL, 5e-4, 2e-3);
        fd_grad(&lf, l.gain, c, NULL, 1.0f, fd);
        snprintf(what, sizeof what, "layernorm dgain n%d c%d", n, c);
        check_close(what, an_g, fd, c, NULL, 1e-4, 1e-4);
        fd_grad(&lf, l.bias, c, NULL, 1.0f, fd);
        snprintf(what, sizeof what, "layernorm dbias n%d c%d", n, c);
        check_close(what, an_b, fd, c, NULL, 1e-4, 1e-4);

        dev_free(l.x), dev_free(l.gain), dev_free(l.bias), dev_free(l.out), dev_free(l.mean);
        dev_free(l.rstd), dev_free(dy), dev_free(gx), dev_free(gg), dev_free(gb);
        free(hx), free(hg), free(hb), free(w_out), free(w_mean), free(w_rstd), free(got);
        free(r), free(hdy), free(an_x), free(an_g), free(an_b), free(px), free(pg), free(pb);
        free(lf.scratch), free(fd);
    }
}

/* ---- GELU (tanh form) -------------------------------------------------------------- */

typedef struct {
    size_t n;
    float *x, *out;
} un_ctx;

static void gelu_fwd(void *p)
{
    un_ctx *u = p;
    assert_int_equal(g_run->ops->gelu_forward(g_run, u->out, u->x, u->n), WS_OK);
}

static double gelu_ref(double x)
{
    return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

static void test_gelu(void **state)
{
    (void)state;
    ws_test_rng rng = {0x6e1u};
    static const float special[] = {0.0f, 1e-3f, -1e-3f, 1.0f, -1.0f, 3.0f,   -3.0f,
                                    6.0f, -6.0f, 10.0f,  -10.0f, 20.0f, -20.0f, 80.0f, -80.0f};
    static const size_t ns[] = {1, 3, 7, 33, 5001}; /* 5001: the threaded path */
    for (int t = 0; t < N_OF(ns); t++) {
        size_t n = ns[t];
        float *hx = xmalloc(n * sizeof *hx);
        ws_test_fill_normal(&rng, hx, n, 2.0f);
        if (n >= (size_t)N_OF(special)) memcpy(hx, special, sizeof special);
        un_ctx u = {n, dev_from(hx, n), dev_alloc(n)};
        dev_set(u.out, NAN, n);
        gelu_fwd(&u);
        float *got = xmalloc(n * sizeof *got);
        double *want = xmalloc(n * sizeof *want);
        get(got, u.out, n);
        for (size_t i = 0; i < n; i++) want[i] = gelu_ref(hx[i]);
        char what[64];
        snprintf(what, sizeof what, "gelu forward n%zu", n);
        check_elementwise(what, got, want, n, 1e-6, 1e-6);

        double *r = random_weights(&rng, NULL, n);
        float *hdy = xmalloc(n * sizeof *hdy), *pre = xmalloc(n * sizeof *pre);
        for (size_t i = 0; i < n; i++) hdy[i] = (float)r[i];
        ws_test_fill_normal(&rng, pre, n, 1.0f);
        float *dy = dev_from(hdy, n), *gx = dev_alloc(n);
        dev_set(gx, 0.0f, n);
        assert_int_equal(g_be->ops->gelu_backward(g_be, gx, u.x, dy, n), WS_OK);
        float *an = xmalloc(n * sizeof *an);
        get(an, gx, n);
        put(gx, pre, n);
        assert_int_equal(g_be->ops->gelu_backward(g_be, gx, u.x, dy, n), WS_OK);
        get(got, gx, n);
        snprintf(what, sizeof what, "gelu backward += n%zu", n);
        check_accumulated(what, got, pre, an, n, NULL);

        loss_fn lf = {gelu_fwd, &u, u.out, n, r, xmalloc(n * sizeof(float))};
        double *fd = xmalloc(n * sizeof *fd);
        fd_grad(&lf, u.x, n, NULL, 1e-2f, fd);
        snprintf(what, sizeof what, "gelu backward n%zu", n);
        check_close(what, an, fd, n, NULL, 2e-4, 1e-3);
        /* per element, too: dL/dx_i = gelu'(x_i)·r_i, small ones included */
        for (size_t i = 0; i < n; i++)
            if (!(fabs(an[i] - fd[i]) <= 2e-4 + 2e-3 * fabs(fd[i])))
                fail_msg("gelu backward n%zu [%zu] x=%g: got %.9g, want %.9g", n, i,
                         (double)hx[i], (double)an[i], fd[i]);

        dev_free(u.x), dev_free(u.out), dev_free(dy), dev_free(gx);
        free(hx), free(got), free(want), free(r), free(hdy), free(pre), free(an);
        free(lf.scratch), free(fd);
    }
}

/* ---- residual add -------------------------------------------------------------------- */

typedef struct {
    size_t n;
    float *a, *b, *out;
} add_ctx;

/* A float sum is one correctly rounded operation: the op must match it bit for bit. */
static void check_exact_sum(const char *what, const float *got, const float *a, const float *b,
                            size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (got[i] != a[i] + b[i])
            fail_msg("%s[%zu]: got %.9g, want %.9g", what, i, (double)got[i], (double)(a[i] + b[i]));
}

static void add_fwd(void *p)
{
    add_ctx *c = p;
    assert_int_equal(g_run->ops->add_forward(g_run, c->out, c->a, c->b, c->n), WS_OK);
}

static void test_add(void **state)
{
    (void)state;
    ws_test_rng rng = {0xadd};
    static const size_t ns[] = {1, 7, 33, 4097};
    for (int t = 0; t < N_OF(ns); t++) {
        size_t n = ns[t];
        float *ha = xmalloc(n * sizeof *ha), *hb = xmalloc(n * sizeof *hb);
        float *got = xmalloc(n * sizeof *got);
        ws_test_fill_normal(&rng, ha, n, 1.0f);
        ws_test_fill_normal(&rng, hb, n, 1.0f);
        add_ctx c = {n, dev_from(ha, n), dev_from(hb, n), dev_alloc(n)};
        dev_set(c.out, NAN, n);
        add_fwd(&c);
        get(got, c.out, n);
        check_exact_sum("add forward", got, ha, hb, n);
        /* in place: out aliases a */
        float *alias = dev_from(ha, n);
        assert_int_equal(g_be->ops->add_forward(g_be, alias, alias, c.b, n), WS_OK);
        get(got, alias, n);
        check_exact_sum("add forward (out = a)", got, ha, hb, n);

        /* backward: FD (linear, h = 1), +=, NULL gradients */
        double *r = random_weights(&rng, NULL, n);
        float *hdy = xmalloc(n * sizeof *hdy);
        for (size_t i = 0; i < n; i++) hdy[i] = (float)r[i];
        float *dy = dev_from(hdy, n), *ga = dev_alloc(n), *gb = dev_alloc(n);
        float *pa = xmalloc(n * sizeof *pa), *pb = xmalloc(n * sizeof *pb);
        ws_test_fill_normal(&rng, pa, n, 1.0f);
        ws_test_fill_normal(&rng, pb, n, 1.0f);
        dev_set(ga, 0.0f, n), dev_set(gb, 0.0f, n);
        assert_int_equal(g_be->ops->add_backward(g_be, ga, gb, dy, n), WS_OK);
        float *an_a = xmalloc(n * sizeof *an_a), *an_b = xmalloc(n * sizeof *an_b);
        get(an_a, ga, n), get(an_b, gb, n);
        loss_fn lf = {add_fwd, &c, c.out, n, r, xmalloc(n * sizeof(float))};
        double *fd = xmalloc(n * sizeof *fd);
        fd_grad(&lf, c.a, n, NULL, 1.0f, fd);
        check_close("add backward da", an_a, fd, n, NULL, 1e-5, 1e-5);
        fd_grad(&lf, c.b, n, NULL, 1.0f, fd);
        check_close("add backward db", an_b, fd, n, NULL, 1e-5, 1e-5);

        put(ga, pa, n), put(gb, pb, n);
        assert_int_equal(g_be->ops->add_backward(g_be, ga, gb, dy, n), WS_OK);
        get(got, ga, n);
        check_accumulated("add backward da +=", got, pa, an_a, n, NULL);
        get(got, gb, n);
        check_accumulated("add backward db +=", got, pb, an_b, n, NULL);
        put(ga, pa, n), put(gb, pb, n);
        assert_int_equal(g_be->ops->add_backward(g_be, ga, NULL, dy, n), WS_OK);
        assert_int_equal(g_be->ops->add_backward(g_be, NULL, gb, dy, n), WS_OK);
        get(got, ga, n);
        check_accumulated("add backward da (db NULL)", got, pa, an_a, n, NULL);
        get(got, gb, n);
        check_accumulated("add backward db (da NULL)", got, pb, an_b, n, NULL);

        dev_free(c.a), dev_free(c.b), dev_free(c.out), dev_free(alias), dev_free(dy);
        dev_free(ga), dev_free(gb);
        free(ha), free(hb), free(got), free(r), free(hdy), free(pa), free(pb);
        free(an_a), free(an_b), free(lf.scratch), free(fd);
    }
}

/* ---- embedding gather-sum / scatter-add ---------------------------------------------- */

typedef struct {
    int n_rows, k, d, accumulate;
    float *table, *out;
    int32_t *ids;
} emb_ctx;

static void emb_fwd(void *p)
{
    emb_ctx *e = p;
    assert_int_equal(g_run->ops->embedding_forward(g_run, e->out, e->table, e->ids, e->n_rows,
                                                   e->k, e->d, e->accumulate),
                     WS_OK);
}

static void test_embedding(void **state)
{
    (void)state;
    ws_test_rng rng = {0xe3b};
    /* (n_rows, k, d, vocab): tiny, odd, heavy repeats, row-parallel forward
     * (n_rows >= 256) with a width-parallel backward (d >= 64) */
    static const int shapes[][4] = {{1, 1, 1, 1}, {7, 3, 17, 5}, {33, 4, 3, 3}, {300, 3, 65, 7}};
    for (int t = 0; t < N_OF(shapes); t++) {
        int n_rows = shapes[t][0], k = shapes[t][1], d = shapes[t][2], vocab = shapes[t][3];
        size_t nid = (size_t)n_rows * k, nt = (size_t)(vocab + 1) * d, no = (size_t)n_rows * d;
        /* the table has one more row that no id names: its gradient stays as it was */
        int32_t *hid = xmalloc(nid * sizeof *hid);
        for (size_t i = 0; i < nid; i++)
            hid[i] = ws_test_uniform(&rng) < 0.25f ? -1 - ws_test_int(&rng, 0, 2)
                                                   : ws_test_int(&rng, 0, vocab - 1);
        if (n_rows >= 3) {
            for (int j = 0; j < k; j++) hid[(size_t)1 * k + j] = -1; /* row 1: nothing */
            if (k >= 2) hid[2 * (size_t)k] = hid[2 * (size_t)k + 1] = vocab - 1; /* repeat */
        }
        float *htab = xmalloc(nt * sizeof *htab), *pre = xmalloc(no * sizeof *pre);
        ws_test_fill_normal(&rng, htab, nt, 1.0f);
        ws_test_fill_normal(&rng, pre, no, 1.0f);
        emb_ctx e = {n_rows, k, d, 0, dev_from(htab, nt), dev_alloc(no),
                     dev_alloc_bytes(nid * sizeof(int32_t))};
        assert_int_equal(ws_backend_upload(g_be, e.ids, hid, nid * sizeof *hid), WS_OK);

        double *want = xmalloc(no * sizeof *want);
        for (int r = 0; r < n_rows; r++)
            for (int i = 0; i < d; i++) {
                double s = 0.0;
                for (int j = 0; j < k; j++) {
                    int32_t id = hid[(size_t)r * k + j];
                    if (id >= 0) s += htab[(size_t)id * d + i];
                }
                want[(size_t)r * d + i] = s;
            }
        float *got = xmalloc((no > nt ? no : nt) * sizeof *got);
        char what[80];
        /* overwrite: poisoned rows all written; a row of only skipped ids is zero */
        dev_set(e.out, NAN, no);
        emb_fwd(&e);
        get(got, e.out, no);
        snprintf(what, sizeof what, "embedding forward n%d k%d d%d", n_rows, k, d);
        check_close(what, got, want, no, NULL, 1e-6, 1e-6);
        if (n_rows >= 3)
            for (int i = 0; i < d; i++)
                if (got[(size_t)d + i] != 0.0f) fail_msg("%s: row of skipped ids not zero", what);
        /* accumulate: out += gather-sum; the row of skipped ids unchanged */
        put(e.out, pre, no);
        e.accumulate = 1;
        emb_fwd(&e);
        e.accumulate = 0;
        get(got, e.out, no);
        for (size_t i = 0; i < no; i++) want[i] += pre[i];
        snprintf(what, sizeof what, "embedding forward += n%d k%d d%d", n_rows, k, d);
        check_close(what, got, want, no, NULL, 1e-6, 1e-6);
        if (n_rows >= 3)
            for (int i = 0; i < d; i++)
                if (got[(size_t)d + i] != pre[(size_t)d + i])
                    fail_msg("%s: row of skipped ids changed", what);

        /* backward: scatter-add with repeated ids; FD on the table (linear, h = 1) */
        double *r = random_weights(&rng, NULL, no);
        float *hdy = xmalloc(no * sizeof *hdy), *ptab = xmalloc(nt * sizeof *ptab);
        for (size_t i = 0; i < no; i++) hdy[i] = (float)r[i];
        ws_test_fill_normal(&rng, ptab, nt, 1.0f);
        float *dy = dev_from(hdy, no), *gt = dev_alloc(nt);
        dev_set(gt, 0.0f, nt);
        assert_int_equal(g_be->ops->embedding_backward(g_be, gt, dy, e.ids, n_rows, k, d), WS_OK);
        float *an = xmalloc(nt * sizeof *an);
        get(an, gt, nt);
        loss_fn lf = {emb_fwd, &e, e.out, no, r, xmalloc(no * sizeof(float))};
        double *fd = xmalloc(nt * sizeof *fd);
        fd_grad(&lf, e.table, nt, NULL, 1.0f, fd);
        snprintf(what, sizeof what, "embedding backward n%d k%d d%d", n_rows, k, d);
        check_close(what, an, fd, nt, NULL, 1e-4, 1e-5);
        for (int i = 0; i < d; i++) /* the row no id names */
            if (an[(size_t)vocab * d + i] != 0.0f) fail_msg("%s: unnamed row touched", what);

        put(gt, ptab, nt);
        assert_int_equal(g_be->ops->embedding_backward(g_be, gt, dy, e.ids, n_rows, k, d), WS_OK);
        get(got, gt, nt);
        snprintf(what, sizeof what, "embedding backward += n%d k%d d%d", n_rows, k, d);
        check_accumulated(what, got, ptab, an, nt, NULL);
        for (int i = 0; i < d; i++)
            if (got[(size_t)vocab * d + i] != ptab[(size_t)vocab * d + i])
                fail_msg("%s: unnamed row changed", what);

        dev_free(e.table), dev_free(e.out), dev_free(e.ids), dev_free(dy), dev_free(gt);
        free(hid), free(htab), free(pre), free(want), free(got), free(r), free(hdy), free(ptab);
        free(an), free(lf.scratch), free(fd);
    }
}

/* ---- BCE with logits, sigmoid ---------------------------------------------------------- */

typedef struct {
    size_t n;
    float scale;
    float *logits, *labels, *loss;
} bce_ctx;

static void bce_fwd(void *p)
{
    bce_ctx *b = p;
    assert_int_equal(g_run->ops->bce_forward(g_run, b->loss, b->logits, b->labels, b->n, b->scale),
                     WS_OK);
}

/* softplus in double, stable: log(1 + e^x) */
static double softplus(double x) { return fmax(x, 0.0) + log1p(exp(-fabs(x))); }

static double sigmoid_ref(double x) { return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x)); }

static void test_bce(void **state)
{
    (void)state;
    ws_test_rng rng = {0xbce};
    static const float ext[][2] = {{80.0f, 0.0f}, {80.0f, 1.0f}, {-80.0f, 0.0f}, {-80.0f, 1.0f},
                                   {80.0f, -1.0f}, {-80.0f, 0.5f}, {30.0f, 0.0f}, {-30.0f, 1.0f}};
    static const size_t ns[] = {1, 8, 33, 257};
    for (int t = 0; t < N_OF(ns); t++) {
        size_t n = ns[t];
        float *hx = xmalloc(n * sizeof *hx), *hy = xmalloc(n * sizeof *hy);
        size_t labelled = 0;
        for (size_t i = 0; i < n; i++) {
            hx[i] = 3.0f * ws_test_normal(&rng);
            float u = ws_test_uniform(&rng);
            hy[i] = u < 0.3f ? -1.0f : u < 0.6f ? 0.0f : u < 0.9f ? 1.0f : 0.25f;
        }
        if (n >= (size_t)N_OF(ext))
            for (int i = 0; i < N_OF(ext); i++) hx[i] = ext[i][0], hy[i] = ext[i][1];
        for (size_t i = 0; i < n; i++) labelled += hy[i] >= 0.0f;
        float scale = labelled ? 1.0f / (float)labelled : 1.0f;
        bce_ctx b = {n, scale, dev_from(hx, n), dev_from(hy, n), dev_alloc(2)};
        float poison[2] = {NAN, SENTINEL}, got[2];
        put(b.loss, poison, 2);
        bce_fwd(&b);
        get(got, b.loss, 2);
        /* reference: y·softplus(−x) + (1 − y)·softplus(x) over labelled items */
        double want = 0.0;
        for (size_t i = 0; i < n; i++)
            if (hy[i] >= 0.0f) want += hy[i] * softplus(-hx[i]) + (1.0 - hy[i]) * softplus(hx[i]);
        want *= scale;
        char what[64];
        snprintf(what, sizeof what, "bce forward n%zu", n);
        check_finite(what, got, 1);
        check_elementwise(what, got, &want, 1, 1e-6, 1e-6);
        if (got[1] != SENTINEL) fail_msg("%s: wrote past loss_out[0]", what);

        /* backward: dlogits += scale·(σ(x) − y) for labelled, untouched otherwise */
        float *pre = xmalloc(n * sizeof *pre), *an = xmalloc(n * sizeof *an);
        float *g2 = xmalloc(n * sizeof *g2);
        ws_test_fill_normal(&rng, pre, n, 1.0f);
        float *gx = dev_alloc(n);
        dev_set(gx, 0.0f, n);
        assert_int_equal(g_be->ops->bce_backward(g_be, gx, b.logits, b.labels, n, scale), WS_OK);
        get(an, gx, n);
        snprintf(what, sizeof what, "bce backward n%zu", n);
        check_finite(what, an, n);
        double *want_g = xmalloc(n * sizeof *want_g);
        for (size_t i = 0; i < n; i++)
            want_g[i] = hy[i] < 0.0f ? 0.0 : scale * (sigmoid_ref(hx[i]) - hy[i]);
        check_elementwise(what, an, want_g, n, 1e-7, 1e-5);
        for (size_t i = 0; i < n; i++)
            if (hy[i] < 0.0f && an[i] != 0.0f) fail_msg("%s: unlabelled %zu got %g", what, i,
                                                         (double)an[i]);
        put(gx, pre, n);
        assert_int_equal(g_be->ops->bce_backward(g_be, gx, b.logits, b.labels, n, scale), WS_OK);
        get(g2, gx, n);
        snprintf(what, sizeof what, "bce backward += n%zu", n);
        check_accumulated(what, g2, pre, an, n, NULL);

        double r1 = 1.0;
        loss_fn lf = {bce_fwd, &b, b.loss, 1, &r1, xmalloc(sizeof(float))};
        double *fd = xmalloc(n * sizeof *fd);
        fd_grad(&lf, b.logits, n, NULL, 1e-2f, fd);
        snprintf(what, sizeof what, "bce backward vs FD n%zu", n);
        check_close(what, an, fd, n, NULL, 2e-4, 1e-3);

        /* nothing labelled: zero loss, no gradient */
        float *none = xmalloc(n * sizeof *none);
        for (size_t i = 0; i < n; i++) none[i] = -1.0f;
        put(b.labels, none, n);
        put(b.loss, poison, 2);
        bce_fwd(&b);
        get(got, b.loss, 2);
        if (got[0] != 0.0f) fail_msg("bce forward, nothing labelled: %g", (double)got[0]);
        put(gx, pre, n);
        assert_int_equal(g_be->ops->bce_backward(g_be, gx, b.logits, b.labels, n, scale), WS_OK);
        get(g2, gx, n);
        if (memcmp(g2, pre, n * sizeof *pre) != 0) fail_msg("bce backward, nothing labelled: "
                                                            "gradient changed");

        dev_free(b.logits), dev_free(b.labels), dev_free(b.loss), dev_free(gx);
        free(hx), free(hy), free(pre), free(an), free(g2), free(want_g), free(lf.scratch);
        free(fd), free(none);
    }
}

static void test_sigmoid(void **state)
{
    (void)state;
    ws_test_rng rng = {0x516};
    static const float special[] = {0.0f,   -0.0f, 1.0f,   -1.0f,   20.0f,  -20.0f,   80.0f,
                                    -80.0f, 88.0f, -88.0f, 100.0f, -100.0f, 1000.0f, -1000.0f};
    static const size_t ns[] = {1, 3, 33, 5000};
    for (int t = 0; t < N_OF(ns); t++) {
        size_t n = ns[t];
        float *hx = xmalloc(n * sizeof *hx), *got = xmalloc(n * sizeof *got);
        double *want = xmalloc(n * sizeof *want);
        ws_test_fill_normal(&rng, hx, n, 4.0f);
        if (n >= (size_t)N_OF(special)) memcpy(hx, special, sizeof special);
        for (size_t i = 0; i < n; i++) want[i] = sigmoid_ref(hx[i]);
        float *x = dev_from(hx, n), *out = dev_alloc(n);
        dev_set(out, NAN, n);
        assert_int_equal(g_be->ops->sigmoid(g_be, out, x, n), WS_OK);
        get(got, out, n);
        char what[64];
        snprintf(what, sizeof what, "sigmoid n%zu", n);
        check_finite(what, got, n);
        /* relative per element, so σ(−80) ≈ 1.8e-35 is checked too (denormals aside) */
        check_elementwise(what, got, want, n, 1e-38, 1e-6);
        for (size_t i = 0; i < n; i++)
            if (got[i] < 0.0f || got[i] > 1.0f) fail_msg("%s[%zu] = %g", what, i, (double)got[i]);
        dev_free(x), dev_free(out);
        free(hx), free(got), free(want);
    }
}

/* ---- gradient utilities ------------------------------------------------------------- */

static void test_sum_squares(void **state)
{
    (void)state;
    ws_test_rng rng = {0x55};
    static const size_t ns[] = {1, 7, 33, 4097, 100003};
    for (int t = 0; t < N_OF(ns); t++) {
        size_t n = ns[t];
        float *hx = xmalloc(n * sizeof *hx);
        ws_test_fill_normal(&rng, hx, n, 3.0f);
        double want = 0.0;
        for (size_t i = 0; i < n; i++) want += (double)hx[i] * hx[i];
        float *x = dev_from(hx, n), *out = dev_alloc(2);
        float poison[2] = {NAN, SENTINEL}, got[2];
        put(out, poison, 2);
        assert_int_equal(g_be->ops->sum_squares(g_be, out, x, n), WS_OK);
        get(got, out, 2);
        char what[64];
        snprintf(what, sizeof what, "sum_squares n%zu", n);
        check_elementwise(what, got, &want, 1, 0.0, 1e-6);
        if (got[1] != SENTINEL) fail_msg("%s: wrote past out[0]", what);
        dev_free(x), dev_free(out);
        free(hx);
    }
}

static void test_scale(void **state)
{
    (void)state;
    ws_test_rng rng = {0x5ca1e};
    static const size_t ns[] = {1, 33, 5000};
    static const float ss[] = {0.37f, -1.0f, 0.0f};
    for (int t = 0; t < N_OF(ns); t++)
        for (int s = 0; s < N_OF(ss); s++) {
            size_t n = ns[t];
            float *hx = xmalloc((n + 1) * sizeof *hx), *got = xmalloc((n + 1) * sizeof *got);
            ws_test_fill_normal(&rng, hx, n, 2.0f);
            hx[n] = SENTINEL;
            float *x = dev_from(hx, n + 1);
            assert_int_equal(g_be->ops->scale(g_be, x, ss[s], n), WS_OK);
            get(got, x, n + 1);
            for (size_t i = 0; i < n; i++) {
                float want = hx[i] * ss[s]; /* one float product: bit-exact */
                if (got[i] != want)
                    fail_msg("scale n%zu s%g [%zu]: got %.9g want %.9g", n, (double)ss[s], i,
                             (double)got[i], (double)want);
            }
            if (got[n] != SENTINEL) fail_msg("scale n%zu: wrote past the end", n);
            dev_free(x);
            free(hx), free(got);
        }
}

/* ---- AdamW vs torch.optim.AdamW (double precision) -------------------------------------- */

/* One step of torch.optim.AdamW (amsgrad off, maximize off) on double state, with
 * the gradient multiplied by grad_scale first. */
static void adamw_ref(double *p, double *m, double *v, const float *grad, size_t n,
                      const ws_adamw_args *a)
{
    double lr = a->lr, b1 = a->beta1, b2 = a->beta2, eps = a->eps, wd = a->weight_decay;
    double bc1 = 1.0 - pow(b1, a->step), bc2 = 1.0 - pow(b2, a->step);
    double step_size = lr / bc1, bc2_sqrt = sqrt(bc2);
    for (size_t i = 0; i < n; i++) {
        double g = (double)grad[i] * a->grad_scale;
        p[i] *= 1.0 - lr * wd;                 /* param.mul_(1 - lr * weight_decay) */
        m[i] += (g - m[i]) * (1.0 - b1);       /* exp_avg.lerp_(grad, 1 - beta1) */
        v[i] = b2 * v[i] + (1.0 - b2) * g * g; /* exp_avg_sq.mul_(b2).addcmul_(g, g, 1 - b2) */
        double denom = sqrt(v[i]) / bc2_sqrt + eps;
        p[i] -= step_size * m[i] / denom;      /* param.addcdiv_(exp_avg, denom, -step_size) */
    }
}

static void test_adamw(void **state)
{
    (void)state;
    ws_test_rng rng = {0xada};
    typedef struct {
        ws_adamw_args a;
        float grad_mag, state0; /* gradient size; initial m, v (resumed run) */
    } cfg;
    static const cfg cfgs[] = {
        /* defaults-ish, strong decay so decoupled vs L2 decay differ visibly */
        {{1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f, 1, 0.5f}, 1.0f, 0.0f},
        /* eps comparable to √v, grad_scale != 1 shows in m and v */
        {{3e-3f, 0.8f, 0.99f, 1e-3f, 0.0f, 1, 0.25f}, 1e-3f, 0.0f},
        /* resumed at step 1000 (β2^t still matters) with non-zero m, v */
        {{1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1000, 1.0f}, 1.0f, 1.0f},
    };
    static const size_t ns[] = {1, 7, 33, 5000};
    for (int ci = 0; ci < N_OF(cfgs); ci++)
        for (int t = 0; t < N_OF(ns); t++) {
            size_t n = ns[t];
            ws_adamw_args a = cfgs[ci].a;
            float *hp = xmalloc(n * sizeof *hp), *hm = xmalloc(n * sizeof *hm);
            float *hv = xmalloc(n * sizeof *hv), *hg = xmalloc(n * sizeof *hg);
            double *rp = xmalloc(n * sizeof *rp), *rm = xmalloc(n * sizeof *rm);
            double *rv = xmalloc(n * sizeof *rv);
            ws_test_fill_normal(&rng, hp, n, 1.0f);
            for (size_t i = 0; i < n; i++) {
                float s0 = cfgs[ci].state0;
                hm[i] = s0 * 0.1f * ws_test_normal(&rng);
                hv[i] = s0 * 0.01f * ws_test_uniform(&rng);
                rp[i] = hp[i], rm[i] = hm[i], rv[i] = hv[i];
            }
            float *p = dev_from(hp, n), *m = dev_from(hm, n), *v = dev_from(hv, n);
            float *g = dev_alloc(n);
            for (int step = 0; step < 5; step++, a.step++) {
                ws_test_fill_normal(&rng, hg, n, cfgs[ci].grad_mag);
                if (n > 3) hg[3] = 0.0f; /* a parameter with no gradient this step */
                put(g, hg, n);
                assert_int_equal(g_be->ops->adamw(g_be, p, g, m, v, n, &a), WS_OK);
                adamw_ref(rp, rm, rv, hg, n, &a);
                get(hp, p, n), get(hm, m, n), get(hv, v, n);
                char what[80];
                snprintf(what, sizeof what, "adamw param cfg%d n%zu step%d", ci, n, a.step);
                check_close(what, hp, rp, n, NULL, 1e-6, 1e-6);
                snprintf(what, sizeof what, "adamw m cfg%d n%zu step%d", ci, n, a.step);
                check_close(what, hm, rm, n, NULL, 0.0, 1e-5);
                snprintf(what, sizeof what, "adamw v cfg%d n%zu step%d", ci, n, a.step);
                check_close(what, hv, rv, n, NULL, 0.0, 1e-5);
            }
            dev_free(p), dev_free(m), dev_free(v), dev_free(g);
            free(hp), free(hm), free(hv), free(hg), free(rp), free(rm), free(rv);
        }
}

/* ---- symbol codes ------------------------------------------------------------------- */

/* The hash and the first code elements of "mary", as tests/reference/symcode.py
 * computes them (an independent implementation of the same definition):
 *   sym_hash("mary") = 0x646c6a01b5918fda; codes([h], 8)[0] = below. */
static void test_symcode_reference_values(void **state)
{
    (void)state;
    uint64_t h = ws_sym_hash("mary", 4);
    assert_true(h == 0x646c6a01b5918fdaULL);
    static const double want[8] = {1.48211408, -0.41588423, -0.12227257, -0.61255133,
                                   2.08695817, 0.21264236,  0.4881705,   -0.64076191};
    for (int e = 0; e < 8; e++)
        if (fabs(ws_sym_code(h, e) - want[e]) > 1e-7)
            fail_msg("code(mary)[%d] = %.9g, reference %.9g", e, (double)ws_sym_code(h, e), want[e]);
    assert_true(ws_sym_hash("", 0) != 0);
    assert_true(ws_sym_hash("mary", 4) != ws_sym_hash("marz", 4));
    /* unit-variance Gaussian: mean ~0, variance ~1, |x| > 3 about 0.27% of the time */
    double sum = 0, sq = 0;
    long tails = 0, n = 0;
    for (uint64_t s = 1; s <= 2000; s++)
        for (int e = 0; e < 64; e++, n++) {
            double x = ws_sym_code(ws_mix64(s), e);
            sum += x, sq += x * x, tails += fabs(x) > 3.0;
        }
    double mean = sum / n, var = sq / n - mean * mean;
    printf("symbol codes: mean %.4f var %.4f tails>3 %.3f%% over %ld\n", mean, var,
           100.0 * tails / n, n);
    assert_true(fabs(mean) < 0.02 && fabs(var - 1.0) < 0.02);
    assert_true(tails > n / 1000 && tails < n / 200);
}

/* The op against the definition in double: Σ over present slots j of the code
 * rolled by j; absent symbols (0) and empty rows add nothing; += contract. */
static void test_symcode(void **state)
{
    (void)state;
    static const int shapes[][3] = {{1, 1, 1}, {3, 3, 17}, {17, 4, 33}, {9, 16, 3}, {40, 2, 128}};
    ws_test_rng rng = {77};
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        int n = shapes[si][0], k = shapes[si][1], d = shapes[si][2];
        size_t nh = (size_t)n * k, no = (size_t)n * d;
        uint64_t *h = malloc(nh * sizeof *h);
        float *base = malloc(no * sizeof *base), *got = malloc(no * sizeof *got);
        double *want = malloc(no * sizeof *want);
        assert_true(h && base && got && want);
        for (size_t i = 0; i < nh; i++)
            h[i] = ws_test_int(&rng, 0, 3) ? ws_mix64(i * 31 + si + 1) : 0;
        if (n > 1)
            for (int j = 0; j < k; j++) h[k + j] = 0; /* a row without symbols */
        ws_test_fill_normal(&rng, base, no, 1.0f);
        for (int acc = 0; acc < 2; acc++) {
            for (int r = 0; r < n; r++)
                for (int c = 0; c < d; c++) {
                    double v = acc ? base[(size_t)r * d + c] : 0.0;
                    for (int j = 0; j < k; j++)
                        if (h[(size_t)r * k + j]) v += ws_sym_code(h[(size_t)r * k + j], (c + j) % d);
                    want[(size_t)r * d + c] = v;
                }
            uint64_t *dh = dev_alloc_bytes(nh * sizeof *dh);
            put_bytes(dh, h, nh * sizeof *h);
            float *dout = dev_from(base, no);
            if (!acc) dev_set(dout, NAN, no); /* "=" must overwrite, not read */
            assert_int_equal(g_be->ops->symcode_forward(g_be, dout, dh, n, k, d, acc), WS_OK);
            get(got, dout, no);
            char what[64];
            snprintf(what, sizeof what, "symcode n%d k%d d%d acc%d", n, k, d, acc);
            check_elementwise(what, got, want, no, 1e-5, 1e-5);
            dev_free(dh), dev_free(dout);
        }
        free(h), free(base), free(got), free(want);
    }
}

/* The backend keeps codes in sets of WS_CPU_CODE_WAYS entries: symbols that
 * all want one set (more of them than it has ways, within one call and across
 * calls, some recurring) are each added with their own code, the same bits
 * whether kept, replaced or computed where used. */
static void test_symcode_kept_codes(void **state)
{
    (void)state;
    enum { N = 4, K = 4, D = 16, CALLS = 5 };
    int sets = WS_CPU_CODES / WS_CPU_CODE_WAYS;
    uint64_t h[N * K];
    float got[N * D], first[CALLS][N * D];
    double want[N * D];
    uint64_t *dh = dev_alloc_bytes(sizeof h);
    float *dout = dev_alloc(N * D);
    for (int call = 0; call < 2 * CALLS; call++) {
        /* 16 slots over 9 symbols of one set: 2 + call % CALLS, then others */
        for (int i = 0; i < N * K; i++)
            h[i] = ((uint64_t)(1 + (i + call % CALLS) % 9) << 32) | (uint64_t)(sets - 3);
        for (int r = 0; r < N; r++)
            for (int c = 0; c < D; c++) {
                double v = 0;
                for (int j = 0; j < K; j++) v += ws_sym_code(h[r * K + j], (c + j) % D);
                want[r * D + c] = v;
            }
        put_bytes(dh, h, sizeof h);
        assert_int_equal(g_be->ops->symcode_forward(g_be, dout, dh, N, K, D, 0), WS_OK);
        get(got, dout, N * D);
        check_elementwise("symcode, one set", got, want, N * D, 1e-5, 1e-5);
        /* the second round: the same symbols, kept or not, the same bits */
        if (call < CALLS)
            memcpy(first[call], got, sizeof got);
        else
            assert_memory_equal(got, first[call - CALLS], sizeof got);
    }
    dev_free(dh), dev_free(dout);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layernorm),   cmocka_unit_test(test_gelu),
        cmocka_unit_test(test_add),         cmocka_unit_test(test_embedding),
        cmocka_unit_test(test_bce),         cmocka_unit_test(test_sigmoid),
        cmocka_unit_test(test_sum_squares), cmocka_unit_test(test_scale),
        cmocka_unit_test(test_adamw),       cmocka_unit_test(test_symcode_reference_values),
        cmocka_unit_test(test_symcode),     cmocka_unit_test(test_symcode_kept_codes),
    };
    return cmocka_run_group_tests(tests, ops_group_setup, ops_group_teardown);
}
