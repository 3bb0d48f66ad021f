/* test_ops_rmc.c — op-level proof tests of the relational-memory-core ops
 * (kernels/mixer_ops_rmc.h): the gated update i ⊙ tanh(cand) + f ⊙ m_prev with
 * its per-segment broadcast of the input term, tanh, and the per-segment mean.
 *
 * Forwards against double references on odd widths and ragged segments (rows
 * outside every segment must keep their SENTINEL); backwards against central
 * finite differences of L = Σ out ⊙ R for every input, the += contract, NULL
 * outputs, and the gated update computed in place (out aliasing m_prev). All
 * buffers go through ws_backend_alloc/upload/download. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/mixer_ops_rmc.h"
#include "ops_check.h"
#include "test_util.h"

static const ws_rmc_ops *rmc(const ws_backend *be)
{
    assert_non_null(be->ops->rmc);
    return be->ops->rmc;
}

/* Ragged segments over n rows, one free row before each segment (rows no
 * segment owns) and context ranges of the given lengths, also spaced. */
typedef struct {
    int n_segs, n_rows, n_ctx;
    ws_attn_seg *segs, *d_segs;
    uint8_t *row_used, *ctx_used; /* per row */
} layout;

static void layout_init(layout *l, const int *q_lens, const int *k_lens, int n_segs)
{
    l->n_segs = n_segs;
    l->segs = xmalloc((size_t)n_segs * sizeof *l->segs);
    int r = 0, k = 0;
    for (int s = 0; s < n_segs; s++) {
        r++, k++; /* the free rows */
        l->segs[s] = (ws_attn_seg){r, q_lens[s], k, k_lens[s], 0};
        r += q_lens[s], k += k_lens[s];
    }
    l->n_rows = r + 1, l->n_ctx = k + 1;
    l->row_used = calloc((size_t)l->n_rows, 1);
    l->ctx_used = calloc((size_t)l->n_ctx, 1);
    assert_true(l->row_used && l->ctx_used);
    for (int s = 0; s < n_segs; s++) {
        memset(l->row_used + l->segs[s].q_off, 1, (size_t)l->segs[s].q_len);
        memset(l->ctx_used + l->segs[s].k_off, 1, (size_t)l->segs[s].k_len);
    }
    l->d_segs = dev_alloc_bytes((size_t)n_segs * sizeof *l->segs);
    put_bytes(l->d_segs, l->segs, (size_t)n_segs * sizeof *l->segs);
}

static void layout_free(layout *l)
{
    dev_free(l->d_segs);
    free(l->segs), free(l->row_used), free(l->ctx_used);
}

/* Element mask of a [rows, width] buffer from a row mask. */
static uint8_t *elem_mask(const uint8_t *rows, int n_rows, int width)
{
    uint8_t *m = xmalloc((size_t)n_rows * width);
    for (int r = 0; r < n_rows; r++) memset(m + (size_t)r * width, rows[r], (size_t)width);
    return m;
}

static float *random_dev(ws_test_rng *rng, size_t n, float scale, float *host)
{
    ws_test_fill_normal(rng, host, n, scale);
    return dev_from(host, n);
}

static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

/* A backward output computed from zero against FD; padding keeps its SENTINEL. */
static void check_grad(const char *what, size_t n, const uint8_t *mask, const float *fresh,
                       const double *fd, double atol, double rtol)
{
    check_close(what, fresh, fd, n, mask, atol, rtol);
    if (mask) check_untouched(what, fresh, mask, n);
}

/* ---- the gated update ------------------------------------------------------- */

typedef struct {
    layout l;
    int d;
    ws_rmc_gate_args a;
    float *gm, *gx, *cand, *m_prev, *gates, *an, *out; /* device */
    float *h_gm, *h_gx, *h_cand, *h_m;                 /* host copies */
} gate_case;

static void gate_fwd(void *p)
{
    gate_case *c = p;
    assert_int_equal(rmc(g_run)->gate_forward(g_run, &c->a), WS_OK);
}

static void gate_case_init(gate_case *c, ws_test_rng *rng, int d, const int *q_lens,
                           const int *k_lens, int n_segs)
{
    memset(c, 0, sizeof *c);
    layout_init(&c->l, q_lens, k_lens, n_segs);
    c->d = d;
    size_t n = (size_t)c->l.n_rows;
    c->h_gm = xmalloc(n * 2 * d * sizeof(float));
    c->h_gx = xmalloc((size_t)n_segs * 2 * d * sizeof(float));
    c->h_cand = xmalloc(n * d * sizeof(float));
    c->h_m = xmalloc(n * d * sizeof(float));
    c->gm = random_dev(rng, n * 2 * d, 1.5f, c->h_gm);
    c->gx = random_dev(rng, (size_t)n_segs * 2 * d, 1.0f, c->h_gx);
    c->cand = random_dev(rng, n * d, 1.5f, c->h_cand);
    c->m_prev = random_dev(rng, n * d, 2.0f, c->h_m);
    c->gates = dev_alloc(n * 2 * d), c->an = dev_alloc(n * d), c->out = dev_alloc(n * d);
    dev_set(c->gates, SENTINEL, n * 2 * d), dev_set(c->an, SENTINEL, n * d);
    dev_set(c->out, SENTINEL, n * d);
    c->a = (ws_rmc_gate_args){.n_rows = (int)n, .d = d, .segs = c->l.d_segs, .n_segs = n_segs,
                              .input_bias = 0.25f, .forget_bias = 1.0f, .gm = c->gm,
                              .gx = c->gx, .cand = c->cand, .m_prev = c->m_prev,
                              .gates = c->gates, .a = c->an, .out = c->out};
}

static void gate_case_free(gate_case *c)
{
    float *dev[] = {c->gm, c->gx, c->cand, c->m_prev, c->gates, c->an, c->out};
    for (int i = 0; i < N_OF(dev); i++) dev_free(dev[i]);
    free(c->h_gm), free(c->h_gx), free(c->h_cand), free(c->h_m);
    layout_free(&c->l);
}

static void check_gate_forward(gate_case *c, const char *tag)
{
    int d = c->d, n = c->l.n_rows;
    size_t nd = (size_t)n * d;
    double *w_out = calloc(nd, sizeof(double)), *w_a = calloc(nd, sizeof(double));
    double *w_g = calloc(2 * nd, sizeof(double));
    assert_true(w_out && w_a && w_g);
    for (int s = 0; s < c->l.n_segs; s++) {
        const ws_attn_seg *sg = &c->l.segs[s];
        for (int r = sg->q_off; r < sg->q_off + sg->q_len; r++)
            for (int j = 0; j < d; j++) {
                size_t e = (size_t)r * d + j, g = (size_t)r * 2 * d + j;
                double i = sigmoid((double)c->h_gm[g] + c->h_gx[(size_t)s * 2 * d + j] +
                                   c->a.input_bias);
                double f = sigmoid((double)c->h_gm[g + d] + c->h_gx[(size_t)s * 2 * d + d + j] +
                                   c->a.forget_bias);
                w_a[e] = tanh((double)c->h_cand[e]);
                w_g[g] = i, w_g[g + d] = f;
                w_out[e] = i * w_a[e] + f * c->h_m[e];
            }
    }
    gate_fwd(c);
    uint8_t *m1 = elem_mask(c->l.row_used, n, d), *m2 = elem_mask(c->l.row_used, n, 2 * d);
    float *got = xmalloc(2 * nd * sizeof *got);
    char what[96];
    get(got, c->out, nd);
    snprintf(what, sizeof what, "gate out %s", tag);
    check_close(what, got, w_out, nd, m1, 1e-6, 1e-6);
    check_untouched(what, got, m1, nd);
    get(got, c->an, nd);
    snprintf(what, sizeof what, "gate tanh(cand) %s", tag);
    check_close(what, got, w_a, nd, m1, 1e-6, 1e-6);
    check_untouched(what, got, m1, nd);
    get(got, c->gates, 2 * nd);
    snprintf(what, sizeof what, "gate i|f %s", tag);
    check_close(what, got, w_g, 2 * nd, m2, 1e-6, 1e-6);
    check_untouched(what, got, m2, 2 * nd);

    /* In place (out = m_prev) gives the same new memory, bit for bit. */
    float *same = xmalloc(nd * sizeof *same), *inplace = dev_from(c->h_m, nd);
    get(same, c->out, nd);
    ws_rmc_gate_args a = c->a;
    a.m_prev = a.out = inplace;
    assert_int_equal(rmc(g_be)->gate_forward(g_be, &a), WS_OK);
    get(got, inplace, nd);
    for (size_t e = 0; e < nd; e++)
        if (m1[e] ? got[e] != same[e] : got[e] != c->h_m[e])
            fail_msg("gate in place %s[%zu]: %.9g, out of place %.9g", tag, e, (double)got[e],
                     (double)same[e]);
    dev_free(inplace);
    free(same), free(got), free(m1), free(m2), free(w_out), free(w_a), free(w_g);
}

/* d_cand, d_gm, d_gx, d_m_prev against FD of L = Σ out ⊙ R; then += and NULLs. */
static void check_gate_backward(gate_case *c, ws_test_rng *rng, const char *tag)
{
    int d = c->d, n = c->l.n_rows, S = c->l.n_segs;
    size_t nd = (size_t)n * d;
    uint8_t *m1 = elem_mask(c->l.row_used, n, d), *m2 = elem_mask(c->l.row_used, n, 2 * d);
    double *r = random_weights(rng, m1, nd);
    float *hdy = xmalloc(nd * sizeof *hdy);
    for (size_t i = 0; i < nd; i++) hdy[i] = m1[i] ? (float)r[i] : NAN;
    float *dy = dev_from(hdy, nd);
    /* the gradients: [0] cand, [1] gm, [2] gx, [3] m_prev */
    float *in[4] = {c->cand, c->gm, c->gx, c->m_prev};
    size_t len[4] = {nd, 2 * nd, (size_t)S * 2 * d, nd};
    const uint8_t *mask[4] = {m1, m2, NULL, m1};
    float *g[4], *fresh[4], *pre[4];
    for (int k = 0; k < 4; k++) {
        g[k] = dev_alloc(len[k]);
        fresh[k] = xmalloc(len[k] * sizeof(float));
        pre[k] = xmalloc(len[k] * sizeof(float));
        for (size_t i = 0; i < len[k]; i++)
            pre[k][i] = !mask[k] || mask[k][i] ? ws_test_normal(rng) : SENTINEL;
        float *zero = xmalloc(len[k] * sizeof(float));
        for (size_t i = 0; i < len[k]; i++) zero[i] = !mask[k] || mask[k][i] ? 0.0f : SENTINEL;
        put(g[k], zero, len[k]);
        free(zero);
    }
    ws_rmc_gate_grads gg = {.dout = dy, .d_cand = g[0], .d_gm = g[1], .d_gx = g[2],
                            .d_m_prev = g[3]};
    gate_fwd(c);
    assert_int_equal(rmc(g_be)->gate_backward(g_be, &c->a, &gg), WS_OK);
    for (int k = 0; k < 4; k++) get(fresh[k], g[k], len[k]);

    static const char *names[4] = {"d_cand", "d_gm", "d_gx", "d_m_prev"};
    char what[96];
    loss_fn l = {gate_fwd, c, c->out, nd, r, xmalloc(nd * sizeof(float))};
    for (int k = 0; k < 4; k++) {
        double *fd = xmalloc(len[k] * sizeof *fd);
        fd_grad(&l, in[k], len[k], mask[k], 1e-2f, fd);
        snprintf(what, sizeof what, "gate %s %s", names[k], tag);
        check_grad(what, len[k], mask[k], fresh[k], fd, 1e-4, 5e-4);
        free(fd);
    }
    /* += on top of random values */
    for (int k = 0; k < 4; k++) put(g[k], pre[k], len[k]);
    gate_fwd(c);
    assert_int_equal(rmc(g_be)->gate_backward(g_be, &c->a, &gg), WS_OK);
    float *got = xmalloc(2 * nd * sizeof *got + len[2] * sizeof *got);
    for (int k = 0; k < 4; k++) {
        get(got, g[k], len[k]);
        snprintf(what, sizeof what, "gate %s += %s", names[k], tag);
        check_accumulated(what, got, pre[k], fresh[k], len[k], mask[k]);
    }
    /* each output alone (the others NULL) gives the same values */
    for (int k = 0; k < 4; k++) {
        ws_rmc_gate_grads one = {.dout = dy};
        float **slot[4] = {&one.d_cand, &one.d_gm, &one.d_gx, &one.d_m_prev};
        float *zero = calloc(len[k], sizeof(float));
        assert_non_null(zero);
        put(g[k], zero, len[k]);
        *slot[k] = g[k];
        assert_int_equal(rmc(g_be)->gate_backward(g_be, &c->a, &one), WS_OK);
        get(got, g[k], len[k]);
        for (size_t i = 0; i < len[k]; i++)
            if ((!mask[k] || mask[k][i]) && got[i] != fresh[k][i])
                fail_msg("gate %s alone %s[%zu]: %.9g, with the others %.9g", names[k], tag, i,
                         (double)got[i], (double)fresh[k][i]);
        free(zero);
    }
    for (int k = 0; k < 4; k++) dev_free(g[k]), free(fresh[k]), free(pre[k]);
    dev_free(dy);
    free(got), free(hdy), free(r), free(l.scratch), free(m1), free(m2);
}

static void test_gate(void **state)
{
    (void)state;
    ws_test_rng rng = {0x6a7e};
    static const int q_lens[] = {1, 3, 0, 7, 2}, k_lens[] = {1, 2, 1, 5, 3};
    static const int dims[] = {1, 3, 7, 17};
    for (int t = 0; t < N_OF(dims); t++) {
        gate_case c;
        gate_case_init(&c, &rng, dims[t], q_lens, k_lens, N_OF(q_lens));
        char tag[32];
        snprintf(tag, sizeof tag, "d%d", dims[t]);
        check_gate_forward(&c, tag);
        check_gate_backward(&c, &rng, tag);
        gate_case_free(&c);
    }
}

/* Saturated gates are exact: σ of ±100 is 0 or 1 in float, so the memory is
 * held (f = 1, i ≈ 0) or overwritten by tanh(cand) (i = 1, f ≈ 0) bit for bit;
 * and σ(0) is exactly 1/2, so forget_bias is added as given. */
static void test_gate_saturated(void **state)
{
    (void)state;
    ws_test_rng rng = {0x5a7};
    static const int q_lens[] = {4, 2}, k_lens[] = {1, 1};
    int d = 5;
    gate_case c;
    gate_case_init(&c, &rng, d, q_lens, k_lens, 2);
    size_t n = (size_t)c.l.n_rows, nd = n * d;
    float *gm = xmalloc(n * 2 * d * sizeof *gm), *got = xmalloc(nd * sizeof *got);
    float *t = xmalloc(nd * sizeof *t);
    static const float settings[][2] = {{-100.0f, 100.0f}, {100.0f, -101.0f}, {0.0f, -1.0f}};
    dev_set(c.gx, 0.0f, 4 * (size_t)d);
    c.a.input_bias = 0.0f;
    for (int s = 0; s < N_OF(settings); s++) {
        for (size_t r = 0; r < n; r++)
            for (int j = 0; j < d; j++)
                gm[r * 2 * d + j] = settings[s][0], gm[r * 2 * d + d + j] = settings[s][1];
        put(c.gm, gm, n * 2 * d);
        gate_fwd(&c);
        get(got, c.out, nd);
        get(t, c.an, nd); /* tanh(cand), checked by test_gate */
        for (size_t r = 0; r < n; r++)
            for (int j = 0; c.l.row_used[r] && j < d; j++) {
                size_t e = r * d + j;
                float m = c.h_m[e];
                float want = s == 0 ? m : s == 1 ? t[e] : 0.5f * t[e] + 0.5f * m;
                if (got[e] != want)
                    fail_msg("saturated gates %d [%zu]: %.9g, want exactly %.9g", s, e,
                             (double)got[e], (double)want);
            }
    }
    free(gm), free(got), free(t);
    gate_case_free(&c);
}

/* ---- tanh and the segment mean --------------------------------------------- */

typedef struct {
    size_t n;
    float *in, *out;
} tanh_case;

static void tanh_fwd(void *p)
{
    tanh_case *c = p;
    assert_int_equal(rmc(g_run)->tanh_forward(g_run, c->out, c->in, c->n), WS_OK);
}

static void test_tanh(void **state)
{
    (void)state;
    ws_test_rng rng = {0x7a4};
    static const size_t sizes[] = {1, 7, 5000}; /* 5000: the threaded path */
    for (int t = 0; t < N_OF(sizes); t++) {
        size_t n = sizes[t];
        float *h = xmalloc(n * sizeof *h);
        ws_test_fill_normal(&rng, h, n, 2.0f);
        h[0] = n > 1 ? 20.0f : -0.0f; /* saturated, and a signed zero */
        tanh_case c = {n, dev_from(h, n), dev_alloc(n)};
        tanh_fwd(&c);
        float *got = xmalloc(n * sizeof *got);
        double *want = xmalloc(n * sizeof *want);
        for (size_t i = 0; i < n; i++) want[i] = tanh((double)h[i]);
        get(got, c.out, n);
        check_close("tanh forward", got, want, n, NULL, 1e-7, 1e-6);
        double *r = random_weights(&rng, NULL, n);
        float *hdy = xmalloc(n * sizeof *hdy), *pre = xmalloc(n * sizeof *pre);
        for (size_t i = 0; i < n; i++) hdy[i] = (float)r[i];
        ws_test_fill_normal(&rng, pre, n, 1.0f);
        float *dy = dev_from(hdy, n), *din = dev_alloc(n);
        dev_set(din, 0.0f, n);
        assert_int_equal(rmc(g_be)->tanh_backward(g_be, din, c.out, dy, n), WS_OK);
        float *fresh = xmalloc(n * sizeof *fresh);
        get(fresh, din, n);
        loss_fn l = {tanh_fwd, &c, c.out, n, r, xmalloc(n * sizeof(float))};
        double *fd = xmalloc(n * sizeof *fd);
        fd_grad(&l, c.in, n, NULL, 1e-2f, fd);
        check_close("tanh backward", fresh, fd, n, NULL, 1e-4, 5e-4);
        tanh_fwd(&c); /* FD left the output of a perturbed input */
        put(din, pre, n);
        assert_int_equal(rmc(g_be)->tanh_backward(g_be, din, c.out, dy, n), WS_OK);
        get(got, din, n);
        check_accumulated("tanh backward +=", got, pre, fresh, n, NULL);
        dev_free(c.in), dev_free(c.out), dev_free(dy), dev_free(din);
        free(h), free(got), free(want), free(r), free(hdy), free(pre), free(fresh), free(fd);
        free(l.scratch);
    }
}

typedef struct {
    layout l;
    int d;
    float *rows, *out;
} mean_case;

static void mean_fwd(void *p)
{
    mean_case *c = p;
    assert_int_equal(rmc(g_run)->seg_mean_forward(g_run, c->out, c->rows, c->l.d_segs,
                                                  c->l.n_segs, c->d),
                     WS_OK);
}

static void test_seg_mean(void **state)
{
    (void)state;
    ws_test_rng rng = {0x3ea7};
    static const int q_lens[] = {2, 1, 3, 1}, k_lens[] = {1, 2, 17, 5};
    static const int dims[] = {1, 3, 9};
    for (int t = 0; t < N_OF(dims); t++) {
        int d = dims[t], S = N_OF(k_lens);
        mean_case c = {.d = d};
        layout_init(&c.l, q_lens, k_lens, S);
        size_t nr = (size_t)c.l.n_ctx * d, no = (size_t)S * d;
        float *h = xmalloc(nr * sizeof *h);
        c.rows = random_dev(&rng, nr, 1.0f, h);
        c.out = dev_alloc(no);
        mean_fwd(&c);
        double *want = xmalloc(no * sizeof *want);
        for (int s = 0; s < S; s++)
            for (int j = 0; j < d; j++) {
                double sum = 0.0;
                for (int k = 0; k < k_lens[s]; k++)
                    sum += h[(size_t)(c.l.segs[s].k_off + k) * d + j];
                want[(size_t)s * d + j] = sum / k_lens[s];
            }
        float *got = xmalloc(nr * sizeof *got);
        get(got, c.out, no);
        check_close("segment mean forward", got, want, no, NULL, 1e-6, 1e-6);

        uint8_t *mask = elem_mask(c.l.ctx_used, c.l.n_ctx, d);
        double *r = random_weights(&rng, NULL, no);
        float *hdy = xmalloc(no * sizeof *hdy), *pre = xmalloc(nr * sizeof *pre);
        for (size_t i = 0; i < no; i++) hdy[i] = (float)r[i];
        for (size_t i = 0; i < nr; i++) pre[i] = mask[i] ? ws_test_normal(&rng) : SENTINEL;
        float *dy = dev_from(hdy, no), *dr = dev_alloc(nr), *fresh = xmalloc(nr * sizeof *fresh);
        for (size_t i = 0; i < nr; i++) fresh[i] = mask[i] ? 0.0f : SENTINEL;
        put(dr, fresh, nr);
        assert_int_equal(rmc(g_be)->seg_mean_backward(g_be, dr, dy, c.l.d_segs, S, d), WS_OK);
        get(fresh, dr, nr);
        loss_fn l = {mean_fwd, &c, c.out, no, r, xmalloc(no * sizeof(float))};
        double *fd = xmalloc(nr * sizeof *fd);
        fd_grad(&l, c.rows, nr, mask, 1e-2f, fd);
        check_grad("segment mean backward", nr, mask, fresh, fd, 1e-5, 1e-4);
        put(dr, pre, nr);
        assert_int_equal(rmc(g_be)->seg_mean_backward(g_be, dr, dy, c.l.d_segs, S, d), WS_OK);
        get(got, dr, nr);
        check_accumulated("segment mean backward +=", got, pre, fresh, nr, mask);
        check_untouched("segment mean backward +=", got, mask, nr);
        dev_free(c.rows), dev_free(c.out), dev_free(dy), dev_free(dr);
        free(h), free(want), free(got), free(mask), free(r), free(hdy), free(pre), free(fresh);
        free(fd), free(l.scratch);
        layout_free(&c.l);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gate),
        cmocka_unit_test(test_gate_saturated),
        cmocka_unit_test(test_tanh),
        cmocka_unit_test(test_seg_mean),
    };
    return cmocka_run_group_tests(tests, ops_group_setup, ops_group_teardown);
}
