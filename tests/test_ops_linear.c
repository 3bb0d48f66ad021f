/* test_ops_linear.c — op-level proof tests for the matrix products of a backend:
 * gemm (every transpose combination, batches with strides and padded leading
 * dimensions, alpha/beta), ws_gemm_backward, linear_forward (also: a row's
 * output is the same bits whatever rows share the call) and linear_backward.
 *
 * Forwards are checked against naive double-precision references; backwards
 * against central finite differences of L = Σ out ⊙ R (R fixed and random, L
 * accumulated in double), and for the += contract by pre-filling gradients.
 * Every buffer an op touches is allocated with ws_backend_alloc and crosses
 * through upload/download only, so the tests can run against any backend. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "ops_check.h"
#include "test_util.h"

static const int odd_sizes[] = {1, 3, 7, 17, 33};
#define N_ODD ((int)(sizeof odd_sizes / sizeof odd_sizes[0]))

static int pick_odd(ws_test_rng *r) { return odd_sizes[ws_test_int(r, 0, N_ODD - 1)]; }

/* ---- gemm problem: host images with padding, masks of the logical elements ---- */

typedef struct {
    ws_gemm_args g; /* pointers are device pointers */
    int a_rows, a_cols, b_rows, b_cols;
    size_t na, nb, nc; /* buffer lengths in floats */
    float *ha, *hb, *hc0; /* host images; padding of ha/hb is NaN, of hc0 SENTINEL */
    uint8_t *ma, *mb, *mc;
    float *da, *db, *dc;
} gemm_case;

static size_t batched_len(int rows, int ld, long stride, int batch)
{
    if (rows == 0) return 1;
    return (size_t)stride * (size_t)(batch - 1) + (size_t)rows * (size_t)ld;
}

static uint8_t *batched_mask(int rows, int cols, int ld, long stride, int batch, size_t n)
{
    uint8_t *m = calloc(n ? n : 1, 1);
    assert_non_null(m);
    for (int b = 0; b < batch; b++)
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < cols; j++) m[(size_t)b * stride + (size_t)i * ld + j] = 1;
    return m;
}

/* Builds a random case: ld padding 0..3, batch stride padding 0..5 (stride_a
 * may be forced to 0: every batch shares one A). beta == 0 poisons C with NaN. */
static void gemm_case_init(gemm_case *c, ws_test_rng *rng, int ta, int tb, int m, int n, int k,
                           int batch, float alpha, float beta, int shared_a)
{
    memset(c, 0, sizeof *c);
    ws_gemm_args *g = &c->g;
    g->trans_a = ta, g->trans_b = tb, g->m = m, g->n = n, g->k = k;
    g->alpha = alpha, g->beta = beta, g->batch = batch;
    c->a_rows = ta ? k : m, c->a_cols = ta ? m : k;
    c->b_rows = tb ? n : k, c->b_cols = tb ? k : n;
    g->lda = c->a_cols + ws_test_int(rng, 0, 3);
    g->ldb = c->b_cols + ws_test_int(rng, 0, 3);
    g->ldc = n + ws_test_int(rng, 0, 3);
    g->stride_a = shared_a ? 0 : (long)c->a_rows * g->lda + ws_test_int(rng, 0, 5);
    g->stride_b = (long)c->b_rows * g->ldb + ws_test_int(rng, 0, 5);
    g->stride_c = (long)m * g->ldc + ws_test_int(rng, 0, 5);
    c->na = batched_len(c->a_rows, g->lda, g->stride_a, batch);
    c->nb = batched_len(c->b_rows, g->ldb, g->stride_b, batch);
    c->nc = batched_len(m, g->ldc, g->stride_c, batch);
    c->ma = batched_mask(c->a_rows, c->a_cols, g->lda, g->stride_a, batch, c->na);
    c->mb = batched_mask(c->b_rows, c->b_cols, g->ldb, g->stride_b, batch, c->nb);
    c->mc = batched_mask(m, n, g->ldc, g->stride_c, batch, c->nc);
    c->ha = xmalloc(c->na * sizeof(float));
    c->hb = xmalloc(c->nb * sizeof(float));
    c->hc0 = xmalloc(c->nc * sizeof(float));
    for (size_t i = 0; i < c->na; i++) c->ha[i] = c->ma[i] ? ws_test_normal(rng) : NAN;
    for (size_t i = 0; i < c->nb; i++) c->hb[i] = c->mb[i] ? ws_test_normal(rng) : NAN;
    for (size_t i = 0; i < c->nc; i++)
        c->hc0[i] = !c->mc[i] ? SENTINEL : beta == 0.0f ? NAN : ws_test_normal(rng);
    c->da = dev_from(c->ha, c->na);
    c->db = dev_from(c->hb, c->nb);
    c->dc = dev_from(c->hc0, c->nc);
    g->a = c->da, g->b = c->db, g->c = c->dc;
}

static void gemm_case_free(gemm_case *c)
{
    dev_free(c->da), dev_free(c->db), dev_free(c->dc);
    free(c->ha), free(c->hb), free(c->hc0);
    free(c->ma), free(c->mb), free(c->mc);
}

static double op_at(const float *x, int trans, int ld, int i, int j)
{
    return trans ? x[(size_t)j * ld + i] : x[(size_t)i * ld + j];
}

/* Naive double reference of C over its buffer (padding entries left 0). */
static double *gemm_reference(const gemm_case *c)
{
    const ws_gemm_args *g = &c->g;
    double *want = calloc(c->nc, sizeof *want);
    assert_non_null(want);
    for (int b = 0; b < g->batch; b++) {
        const float *a = c->ha + (size_t)b * g->stride_a, *bm = c->hb + (size_t)b * g->stride_b;
        for (int i = 0; i < g->m; i++)
            for (int j = 0; j < g->n; j++) {
                double s = 0.0;
                for (int p = 0; p < g->k; p++)
                    s += op_at(a, g->trans_a, g->lda, i, p) * op_at(bm, g->trans_b, g->ldb, p, j);
                size_t ci = (size_t)b * g->stride_c + (size_t)i * g->ldc + j;
                want[ci] = g->alpha * s + (g->beta == 0.0f ? 0.0 : (double)g->beta * c->hc0[ci]);
            }
    }
    return want;
}

static void run_gemm(gemm_case *c)
{
    assert_int_equal(g_run->ops->gemm(g_run, &c->g), WS_OK);
}

static void check_gemm_forward(gemm_case *c, const char *tag)
{
    run_gemm(c);
    float *got = xmalloc(c->nc * sizeof *got);
    get(got, c->dc, c->nc);
    double *want = gemm_reference(c);
    char what[96];
    snprintf(what, sizeof what, "gemm %s", tag);
    check_close(what, got, want, c->nc, c->mc, 1e-5, 1e-5);
    check_untouched(what, got, c->mc, c->nc);
    free(want);
    free(got);
}

static void test_gemm_forward(void **state)
{
    (void)state;
    ws_test_rng rng = {0x1234};
    static const float ab[][2] = {{1.0f, 0.0f}, {0.5f, -1.25f}, {-2.0f, 1.0f}, {1.0f, 1.0f}};
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int rep = 0; rep < 8; rep++) {
                int m = pick_odd(&rng), n = pick_odd(&rng), k = pick_odd(&rng);
                int batch = 1 + rep % 4; /* 1 and 2..4: row-split and batch-split paths */
                const float *s = ab[rep % 4];
                gemm_case c;
                gemm_case_init(&c, &rng, ta, tb, m, n, k, batch, s[0], s[1], 0);
                char tag[64];
                snprintf(tag, sizeof tag, "t%d%d m%d n%d k%d b%d", ta, tb, m, n, k, batch);
                check_gemm_forward(&c, tag);
                gemm_case_free(&c);
            }
}

/* Tall products: the CPU backend splits rows of C across threads (and columns of
 * a transposed A); the split must not lose or double a row. */
static void test_gemm_forward_row_split(void **state)
{
    (void)state;
    ws_test_rng rng = {0x5678};
    static const int ms[] = {64, 67, 129};
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int i = 0; i < 3; i++) {
                gemm_case c;
                gemm_case_init(&c, &rng, ta, tb, ms[i], pick_odd(&rng), pick_odd(&rng), 1, 0.75f,
                               i == 1 ? 0.5f : 0.0f, 0);
                char tag[64];
                snprintf(tag, sizeof tag, "split t%d%d m%d", ta, tb, ms[i]);
                check_gemm_forward(&c, tag);
                gemm_case_free(&c);
            }
}

typedef struct {
    gemm_case *c;
} gemm_fwd_ctx;

static void gemm_fwd(void *ctx)
{
    gemm_case *c = ((gemm_fwd_ctx *)ctx)->c;
    put(c->dc, c->hc0, c->nc); /* restore C: beta reads it */
    run_gemm(c);
}

/* Runs ws_gemm_backward into fresh (zeroed) and pre-filled gradient buffers and
 * checks against finite differences, the += contract, padding and NULL paths. */
static void check_gemm_backward(gemm_case *c, ws_test_rng *rng, const char *tag)
{
    const ws_gemm_args *g = &c->g;
    double *r = random_weights(rng, c->mc, c->nc);
    float *hdc = xmalloc(c->nc * sizeof *hdc);
    for (size_t i = 0; i < c->nc; i++) hdc[i] = c->mc[i] ? (float)r[i] : NAN;
    float *ddc = dev_from(hdc, c->nc);

    /* gradient buffers: logical part 0 (fresh) or random (prefill), padding SENTINEL */
    float *zero_a = xmalloc(c->na * sizeof(float)), *zero_b = xmalloc(c->nb * sizeof(float));
    float *pre_a = xmalloc(c->na * sizeof(float)), *pre_b = xmalloc(c->nb * sizeof(float));
    for (size_t i = 0; i < c->na; i++) {
        zero_a[i] = c->ma[i] ? 0.0f : SENTINEL;
        pre_a[i] = c->ma[i] ? ws_test_normal(rng) : SENTINEL;
    }
    for (size_t i = 0; i < c->nb; i++) {
        zero_b[i] = c->mb[i] ? 0.0f : SENTINEL;
        pre_b[i] = c->mb[i] ? ws_test_normal(rng) : SENTINEL;
    }
    float *dga = dev_from(zero_a, c->na), *dgb = dev_from(zero_b, c->nb);
    assert_int_equal(ws_gemm_backward(g_be, g, ddc, dga, dgb), WS_OK);
    float *an_a = xmalloc(c->na * sizeof(float)), *an_b = xmalloc(c->nb * sizeof(float));
    get(an_a, dga, c->na);
    get(an_b, dgb, c->nb);

    char what[96];
    /* stride_a == 0: every batch adds into one dA, so the mask marks each element once */
    loss_fn l = {gemm_fwd, &(gemm_fwd_ctx){c}, c->dc, c->nc, r, xmalloc(c->nc * sizeof(float))};
    double *fd_a = xmalloc(c->na * sizeof(double)), *fd_b = xmalloc(c->nb * sizeof(double));
    /* L is linear in A and in B, so a large step is exact up to rounding */
    fd_grad(&l, c->da, c->na, c->ma, 1.0f, fd_a);
    fd_grad(&l, c->db, c->nb, c->mb, 1.0f, fd_b);
    snprintf(what, sizeof what, "gemm_backward dA %s", tag);
    check_close(what, an_a, fd_a, c->na, c->ma, 1e-4, 1e-4);
    check_untouched(what, an_a, c->ma, c->na);
    snprintf(what, sizeof what, "gemm_backward dB %s", tag);
    check_close(what, an_b, fd_b, c->nb, c->mb, 1e-4, 1e-4);
    check_untouched(what, an_b, c->mb, c->nb);

    /* += contract */
    float *got = xmalloc((c->na > c->nb ? c->na : c->nb) * sizeof(float));
    put(dga, pre_a, c->na);
    put(dgb, pre_b, c->nb);
    assert_int_equal(ws_gemm_backward(g_be, g, ddc, dga, dgb), WS_OK);
    get(got, dga, c->na);
    snprintf(what, sizeof what, "gemm_backward dA += %s", tag);
    check_accumulated(what, got, pre_a, an_a, c->na, c->ma);
    check_untouched(what, got, c->ma, c->na);
    get(got, dgb, c->nb);
    snprintf(what, sizeof what, "gemm_backward dB += %s", tag);
    check_accumulated(what, got, pre_b, an_b, c->nb, c->mb);
    check_untouched(what, got, c->mb, c->nb);

    /* one gradient at a time (the other NULL) gives the same numbers */
    put(dga, zero_a, c->na);
    assert_int_equal(ws_gemm_backward(g_be, g, ddc, dga, NULL), WS_OK);
    get(got, dga, c->na);
    snprintf(what, sizeof what, "gemm_backward dA only %s", tag);
    check_accumulated(what, got, zero_a, an_a, c->na, c->ma);
    put(dgb, zero_b, c->nb);
    assert_int_equal(ws_gemm_backward(g_be, g, ddc, NULL, dgb), WS_OK);
    get(got, dgb, c->nb);
    snprintf(what, sizeof what, "gemm_backward dB only %s", tag);
    check_accumulated(what, got, zero_b, an_b, c->nb, c->mb);

    free(got), free(fd_a), free(fd_b), free(l.scratch);
    free(an_a), free(an_b), free(zero_a), free(zero_b), free(pre_a), free(pre_b);
    free(hdc), free(r);
    dev_free(ddc), dev_free(dga), dev_free(dgb);
}

static void test_gemm_backward(void **state)
{
    (void)state;
    ws_test_rng rng = {0x9abc};
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int rep = 0; rep < 3; rep++) {
                int m = pick_odd(&rng), n = pick_odd(&rng), k = pick_odd(&rng);
                if (m * k > 300) k = odd_sizes[ws_test_int(&rng, 0, 2)]; /* keep FD cheap */
                int batch = rep == 0 ? 1 : 1 + rep; /* 1, 2, 3 */
                float alpha = rep == 1 ? -0.75f : 1.0f, beta = rep == 2 ? 0.5f : 0.0f;
                gemm_case c;
                gemm_case_init(&c, &rng, ta, tb, m, n, k, batch, alpha, beta, 0);
                char tag[64];
                snprintf(tag, sizeof tag, "t%d%d m%d n%d k%d b%d", ta, tb, m, n, k, batch);
                check_gemm_backward(&c, &rng, tag);
                gemm_case_free(&c);
            }
}

/* One A shared by every batch (stride_a = 0, e.g. a weight applied per head):
 * the forward broadcasts it and the backward must sum every batch's dA into
 * the single copy, even when the batches run on different threads. */
static void test_gemm_shared_operand(void **state)
{
    (void)state;
    ws_test_rng rng = {0xdef0};
    for (int ta = 0; ta < 2; ta++)
        for (int rep = 0; rep < 2; rep++) {
            gemm_case c;
            int batch = rep ? 8 : 3;
            gemm_case_init(&c, &rng, ta, rep, 17, 7, 3, batch, 1.0f, 0.0f, 1);
            char tag[64];
            snprintf(tag, sizeof tag, "shared-A t%d%d b%d", ta, rep, batch);
            check_gemm_forward(&c, tag);
            check_gemm_backward(&c, &rng, tag);
            gemm_case_free(&c);
        }
}

/* ---- linear ---- */

typedef struct {
    int n, in_dim, out_dim;
    float *x_, *dw, *db, *dout; /* device: in, W, bias (nullable), out */
} lin_ctx;

static void lin_fwd(void *p)
{
    lin_ctx *c = p;
    assert_int_equal(g_run->ops->linear_forward(g_run, c->dout, c->x_, c->dw, c->db, c->n,
                                               c->in_dim, c->out_dim),
                     WS_OK);
}

static void test_linear_forward(void **state)
{
    (void)state;
    ws_test_rng rng = {0x1111};
    static const int ns[] = {1, 3, 7, 17, 33, 70, 130};
    for (int t = 0; t < 7; t++)
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            int n = ns[t], in_dim = pick_odd(&rng), out_dim = pick_odd(&rng);
            size_t nin = (size_t)n * in_dim, nw = (size_t)out_dim * in_dim, nout = (size_t)n * out_dim;
            float *x = xmalloc(nin * sizeof *x), *w = xmalloc(nw * sizeof *w);
            float *bias = xmalloc(out_dim * sizeof *bias), *got = xmalloc(nout * sizeof *got);
            ws_test_fill_normal(&rng, x, nin, 1.0f);
            ws_test_fill_normal(&rng, w, nw, 1.0f);
            ws_test_fill_normal(&rng, bias, out_dim, 1.0f);
            lin_ctx c = {n, in_dim, out_dim, dev_from(x, nin), dev_from(w, nw),
                         with_bias ? dev_from(bias, out_dim) : NULL, dev_alloc(nout)};
            dev_set(c.dout, NAN, nout);
            lin_fwd(&c);
            get(got, c.dout, nout);
            double *want = xmalloc(nout * sizeof *want);
            for (int r = 0; r < n; r++)
                for (int o = 0; o < out_dim; o++) {
                    double s = with_bias ? bias[o] : 0.0;
                    for (int i = 0; i < in_dim; i++)
                        s += (double)x[(size_t)r * in_dim + i] * w[(size_t)o * in_dim + i];
                    want[(size_t)r * out_dim + o] = s;
                }
            char what[64];
            snprintf(what, sizeof what, "linear_forward n%d %dx%d b%d", n, in_dim, out_dim,
                     with_bias);
            check_close(what, got, want, nout, NULL, 1e-5, 1e-5);
            dev_free(c.x_), dev_free(c.dw), dev_free(c.db), dev_free(c.dout);
            free(x), free(w), free(bias), free(got), free(want);
        }
}

/* A row's output must not depend on how many rows share the call, nor where it
 * sits among them, bit for bit: the daemon steps a session in batches of other
 * sessions, and replaying its log alone must reproduce its stored state (OpenBLAS
 * rounds small and large products differently; cpu_gemm.c says how that is
 * avoided). Rows of one pool are computed all at once and in runs of every kind
 * of length and offset. */
static void test_linear_forward_rows_independent(void **state)
{
    (void)state;
    ws_test_rng rng = {0x3333};
    /* (in, out): the model's products at d = 32 and 128, the readout, an odd one */
    static const int shapes[][2] = {{32, 96}, {32, 32}, {32, 128}, {128, 32},
                                    {128, 384}, {128, 1}, {48, 144}};
    static const int runs[][2] = {{0, 1}, {5, 2}, {1, 3}, {7, 5}, {3, 8}, {11, 13}, {2, 31},
                                  {9, 63}, {0, 64}, {4, 65}, {30, 100}, {17, 129}, {1, 199}};
    enum { POOL = 200 };
    for (int s = 0; s < N_OF(shapes); s++)
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            int in_dim = shapes[s][0], out_dim = shapes[s][1];
            size_t nin = (size_t)POOL * in_dim, nw = (size_t)out_dim * in_dim;
            size_t nout = (size_t)POOL * out_dim;
            float *x = xmalloc(nin * sizeof *x), *w = xmalloc(nw * sizeof *w);
            float *bias = xmalloc(out_dim * sizeof *bias);
            float *all = xmalloc(nout * sizeof *all), *part = xmalloc(nout * sizeof *part);
            ws_test_fill_normal(&rng, x, nin, 1.0f);
            ws_test_fill_normal(&rng, w, nw, 0.3f);
            ws_test_fill_normal(&rng, bias, out_dim, 1.0f);
            float *dx = dev_from(x, nin), *dw = dev_from(w, nw), *dout = dev_alloc(nout);
            float *db = with_bias ? dev_from(bias, out_dim) : NULL;
            assert_int_equal(g_be->ops->linear_forward(g_be, dout, dx, dw, db, POOL, in_dim,
                                                       out_dim),
                             WS_OK);
            get(all, dout, nout);
            for (int r = 0; r < N_OF(runs); r++) {
                int off = runs[r][0], n = runs[r][1];
                assert_int_equal(g_be->ops->linear_forward(g_be, dout, dx + (size_t)off * in_dim,
                                                           dw, db, n, in_dim, out_dim),
                                 WS_OK);
                get(part, dout, (size_t)n * out_dim);
                if (memcmp(part, all + (size_t)off * out_dim, (size_t)n * out_dim * sizeof *part))
                    fail_msg("linear_forward %dx%d bias %d: rows %d..%d alone differ from the "
                             "same rows among %d", in_dim, out_dim, with_bias, off, off + n - 1,
                             POOL);
            }
            dev_free(dx), dev_free(dw), dev_free(db), dev_free(dout);
            free(x), free(w), free(bias), free(all), free(part);
        }
}

/* The CPU backend keeps W packed between calls (cpu_linear.c): a product after W
 * or its bias is rewritten (uploaded, copied over, filled, scaled, stepped by
 * AdamW, freed and allocated again), through the backend that computes or
 * another, must use the new values. Each rewrite is followed by products on both
 * backends, checked against the weights as they now are. */
static void lin_check_now(lin_ctx *c, const char *what)
{
    size_t nin = (size_t)c->n * c->in_dim, nw = (size_t)c->out_dim * c->in_dim;
    size_t nout = (size_t)c->n * c->out_dim;
    float *x = xmalloc(nin * sizeof *x), *w = xmalloc(nw * sizeof *w);
    float *b = xmalloc(c->out_dim * sizeof *b), *got = xmalloc(nout * sizeof *got);
    double *want = xmalloc(nout * sizeof *want);
    get(x, c->x_, nin), get(w, c->dw, nw), get(b, c->db, c->out_dim);
    for (int r = 0; r < c->n; r++)
        for (int o = 0; o < c->out_dim; o++) {
            double sum = b[o];
            for (int i = 0; i < c->in_dim; i++)
                sum += (double)x[(size_t)r * c->in_dim + i] * w[(size_t)o * c->in_dim + i];
            want[(size_t)r * c->out_dim + o] = sum;
        }
    ws_backend *runners[2] = {g_be, g_fd_be};
    for (int k = 0; k < 2; k++) {
        g_run = runners[k];
        dev_set(c->dout, NAN, nout);
        lin_fwd(c);
        get(got, c->dout, nout);
        check_close(what, got, want, nout, NULL, 1e-5, 1e-5);
    }
    g_run = g_be;
    free(x), free(w), free(b), free(got), free(want);
}

static void test_linear_forward_weights_rewritten(void **state)
{
    (void)state;
    ws_test_rng rng = {0x4444};
    enum { N = 9, IN = 24, OUT = 40 };
    float x[N * IN], w[OUT * IN], b[OUT], other[OUT * IN];
    ws_test_fill_normal(&rng, x, N * IN, 1.0f);
    ws_test_fill_normal(&rng, w, OUT * IN, 1.0f);
    ws_test_fill_normal(&rng, b, OUT, 1.0f);
    ws_test_fill_normal(&rng, other, OUT * IN, 1.0f);
    lin_ctx c = {N, IN, OUT, dev_from(x, N * IN), dev_from(w, OUT * IN), dev_from(b, OUT),
                 dev_alloc(N * OUT)};
    float *d_other = dev_from(other, OUT * IN), *grad = dev_from(other, OUT * IN);
    float *m = dev_alloc(OUT * IN), *v = dev_alloc(OUT * IN);
    dev_set(m, 0.0f, OUT * IN), dev_set(v, 0.0f, OUT * IN);
    lin_check_now(&c, "linear_forward, first");
    for (int k = 0; k < 2; k++) { /* k: the backend that writes */
        ws_backend *be = k ? g_fd_be : g_be;
        ws_test_fill_normal(&rng, w, OUT * IN, 1.0f);
        ws_test_fill_normal(&rng, b, OUT, 1.0f);
        assert_int_equal(ws_backend_upload(be, c.dw, w, sizeof w), WS_OK);
        lin_check_now(&c, "linear_forward after W is uploaded");
        assert_int_equal(ws_backend_upload(be, c.db, b, sizeof b), WS_OK);
        lin_check_now(&c, "linear_forward after the bias is uploaded");
        /* a part of W only: its second row */
        assert_int_equal(be->ops->copy(be, c.dw + IN, d_other, IN * sizeof(float)), WS_OK);
        lin_check_now(&c, "linear_forward after a row of W is copied over");
        assert_int_equal(be->ops->fill(be, c.dw + 3 * IN, 0.5f, 2 * IN), WS_OK);
        lin_check_now(&c, "linear_forward after rows of W are filled");
        assert_int_equal(be->ops->scale(be, c.dw, -2.0f, OUT * IN), WS_OK);
        lin_check_now(&c, "linear_forward after W is scaled");
        ws_adamw_args a = {.lr = 0.1f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                           .weight_decay = 0.01f, .step = 1 + k, .grad_scale = 1.0f};
        assert_int_equal(be->ops->adamw(be, c.dw, grad, m, v, OUT * IN, &a), WS_OK);
        lin_check_now(&c, "linear_forward after an AdamW step on W");
    }
    /* freed and allocated again: likely at the same address */
    dev_free(c.dw);
    ws_test_fill_normal(&rng, w, OUT * IN, 1.0f);
    c.dw = dev_from(w, OUT * IN);
    lin_check_now(&c, "linear_forward after W is freed and another allocated");
    dev_free(c.x_), dev_free(c.dw), dev_free(c.db), dev_free(c.dout);
    dev_free(d_other), dev_free(grad), dev_free(m), dev_free(v);
}

static void test_linear_backward(void **state)
{
    (void)state;
    ws_test_rng rng = {0x2222};
    /* (n, in, out): odd sizes, a row split (n >= 64) and a column-split bias (out >= 256) */
    static const int shapes[][3] = {{1, 1, 1},  {3, 7, 1},  {7, 3, 17}, {17, 33, 7},
                                    {33, 5, 3}, {67, 3, 5}, {5, 3, 257}};
    for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
        int n = shapes[t][0], in_dim = shapes[t][1], out_dim = shapes[t][2];
        size_t nin = (size_t)n * in_dim, nw = (size_t)out_dim * in_dim, nout = (size_t)n * out_dim;
        float *x = xmalloc(nin * sizeof *x), *w = xmalloc(nw * sizeof *w);
        float *bias = xmalloc(out_dim * sizeof *bias);
        ws_test_fill_normal(&rng, x, nin, 1.0f);
        ws_test_fill_normal(&rng, w, nw, 1.0f);
        ws_test_fill_normal(&rng, bias, out_dim, 1.0f);
        lin_ctx c = {n, in_dim, out_dim, dev_from(x, nin), dev_from(w, nw),
                     dev_from(bias, out_dim), dev_alloc(nout)};
        double *r = random_weights(&rng, NULL, nout);
        float *hdy = xmalloc(nout * sizeof *hdy);
        for (size_t i = 0; i < nout; i++) hdy[i] = (float)r[i];
        float *ddy = dev_from(hdy, nout);

        /* analytic from zero */
        float *gx = dev_alloc(nin), *gw = dev_alloc(nw), *gb = dev_alloc(out_dim);
        dev_set(gx, 0.0f, nin), dev_set(gw, 0.0f, nw), dev_set(gb, 0.0f, out_dim);
        assert_int_equal(g_be->ops->linear_backward(g_be, gx, gw, gb, ddy, c.x_, c.dw, n,
                                                    in_dim, out_dim),
                         WS_OK);
        float *an_x = xmalloc(nin * sizeof(float)), *an_w = xmalloc(nw * sizeof(float));
        float *an_b = xmalloc(out_dim * sizeof(float));
        get(an_x, gx, nin), get(an_w, gw, nw), get(an_b, gb, out_dim);

        /* finite differences (L is linear in each input: h = 1) */
        loss_fn l = {lin_fwd, &c, c.dout, nout, r, xmalloc(nout * sizeof(float))};
        double *fd = xmalloc((nw > nin ? nw : nin) * sizeof(double));
        char what[80];
        fd_grad(&l, c.x_, nin, NULL, 1.0f, fd);
        snprintf(what, sizeof what, "linear_backward din n%d %dx%d", n, in_dim, out_dim);
        check_close(what, an_x, fd, nin, NULL, 1e-4, 1e-4);
        fd_grad(&l, c.dw, nw, NULL, 1.0f, fd);
        snprintf(what, sizeof what, "linear_backward dW n%d %dx%d", n, in_dim, out_dim);
        check_close(what, an_w, fd, nw, NULL, 1e-4, 1e-4);
        fd_grad(&l, c.db, out_dim, NULL, 1.0f, fd);
        snprintf(what, sizeof what, "linear_backward dbias n%d %dx%d", n, in_dim, out_dim);
        check_close(what, an_b, fd, out_dim, NULL, 1e-4, 1e-4);

        /* += contract */
        float *px = xmalloc(nin * sizeof(float)), *pw = xmalloc(nw * sizeof(float));
        float *pb = xmalloc(out_dim * sizeof(float));
        ws_test_fill_normal(&rng, px, nin, 3.0f);
        ws_test_fill_normal(&rng, pw, nw, 3.0f);
        ws_test_fill_normal(&rng, pb, out_dim, 3.0f);
        put(gx, px, nin), put(gw, pw, nw), put(gb, pb, out_dim);
        assert_int_equal(g_be->ops->linear_backward(g_be, gx, gw, gb, ddy, c.x_, c.dw, n,
                                                    in_dim, out_dim),
                         WS_OK);
        float *got = xmalloc((nw > nin ? nw : nin) * sizeof(float) + out_dim * sizeof(float));
        get(got, gx, nin);
        check_accumulated("linear_backward din +=", got, px, an_x, nin, NULL);
        get(got, gw, nw);
        check_accumulated("linear_backward dW +=", got, pw, an_w, nw, NULL);
        get(got, gb, out_dim);
        check_accumulated("linear_backward dbias +=", got, pb, an_b, out_dim, NULL);

        /* each gradient alone (the others NULL) */
        float *zeros = calloc((nw > nin ? nw : nin) + out_dim, sizeof(float));
        assert_non_null(zeros);
        dev_set(gx, 0.0f, nin), dev_set(gw, 0.0f, nw), dev_set(gb, 0.0f, out_dim);
        assert_int_equal(g_be->ops->linear_backward(g_be, gx, NULL, NULL, ddy, c.x_, c.dw, n,
                                                    in_dim, out_dim),
                         WS_OK);
        assert_int_equal(g_be->ops->linear_backward(g_be, NULL, gw, NULL, ddy, c.x_, c.dw, n,
                                                    in_dim, out_dim),
                         WS_OK);
        assert_int_equal(g_be->ops->linear_backward(g_be, NULL, NULL, gb, ddy, c.x_, c.dw, n,
                                                    in_dim, out_dim),
                         WS_OK);
        get(got, gx, nin);
        check_accumulated("linear_backward din only", got, zeros, an_x, nin, NULL);
        get(got, gw, nw);
        check_accumulated("linear_backward dW only", got, zeros, an_w, nw, NULL);
        get(got, gb, out_dim);
        check_accumulated("linear_backward dbias only", got, zeros, an_b, out_dim, NULL);

        dev_free(c.x_), dev_free(c.dw), dev_free(c.db), dev_free(c.dout), dev_free(ddy);
        dev_free(gx), dev_free(gw), dev_free(gb);
        free(x), free(w), free(bias), free(r), free(hdy), free(an_x), free(an_w), free(an_b);
        free(l.scratch), free(fd), free(px), free(pw), free(pb), free(got), free(zeros);
    }
}

/* din, dW and dbias are right and the same bits run to run and at any thread
 * count: a training step must not depend on how many threads computed it. Shapes
 * that split across threads, whole tiles and ragged edges, dW's sums over several
 * row blocks (cpu_linear.c's WG_BLOCK) and the test_train model's products (d = 48,
 * a one-column head); each run adds twice into pre-filled gradients, as a rollout's
 * steps do, checked against a double reference. */
static void linear_backward_reference(double *want[3], float *const pre[3], const float *x,
                                      const float *w, const float *dy, int n, int in_dim,
                                      int out_dim, int calls)
{
    for (int r = 0; r < n; r++)
        for (int i = 0; i < in_dim; i++) {
            double s = 0.0;
            for (int o = 0; o < out_dim; o++)
                s += (double)dy[(size_t)r * out_dim + o] * w[(size_t)o * in_dim + i];
            want[0][(size_t)r * in_dim + i] = pre[0][(size_t)r * in_dim + i] + calls * s;
        }
    for (int o = 0; o < out_dim; o++) {
        double sb = 0.0;
        for (int i = 0; i < in_dim; i++) {
            double s = 0.0;
            for (int r = 0; r < n; r++)
                s += (double)dy[(size_t)r * out_dim + o] * x[(size_t)r * in_dim + i];
            want[1][(size_t)o * in_dim + i] = pre[1][(size_t)o * in_dim + i] + calls * s;
        }
        for (int r = 0; r < n; r++) sb += dy[(size_t)r * out_dim + o];
        want[2][o] = pre[2][o] + calls * sb;
    }
}

static void test_linear_backward_threads(void **state)
{
    (void)state;
    ws_test_rng rng = {0x7e11};
    static const int shapes[][3] = {{256, 128, 128}, {300, 100, 70}, {517, 64, 257},
                                    {129, 48, 144},  {1000, 48, 1},  {1000, 192, 48}};
    enum { CALLS = 2 };
    static const char *names[3] = {"din", "dW", "dbias"};
    for (int t = 0; t < N_OF(shapes); t++) {
        int n = shapes[t][0], in_dim = shapes[t][1], out_dim = shapes[t][2];
        size_t nin = (size_t)n * in_dim, nw = (size_t)out_dim * in_dim, nout = (size_t)n * out_dim;
        size_t sizes[3] = {nin, nw, (size_t)out_dim};
        float *h[3], *pre[3], *got[3][3];
        double *want[3];
        float *x = xmalloc(nin * sizeof *x), *w = xmalloc(nw * sizeof *w);
        float *dy = xmalloc(nout * sizeof *dy);
        ws_test_fill_normal(&rng, x, nin, 1.0f);
        ws_test_fill_normal(&rng, w, nw, 1.0f);
        ws_test_fill_normal(&rng, dy, nout, 1.0f);
        float *d_in = dev_from(x, nin), *d_w = dev_from(w, nw), *d_dy = dev_from(dy, nout);
        for (int g = 0; g < 3; g++) {
            pre[g] = xmalloc(sizes[g] * sizeof(float));
            want[g] = xmalloc(sizes[g] * sizeof(double));
            ws_test_fill_normal(&rng, pre[g], sizes[g], 1.0f);
            h[g] = dev_alloc(sizes[g]);
        }
        linear_backward_reference(want, pre, x, w, dy, n, in_dim, out_dim, CALLS);
        ws_backend *runs[3] = {g_be, g_fd_be, g_be}; /* 2 threads, 1, 2 again */
        for (int run = 0; run < 3; run++) {
            for (int g = 0; g < 3; g++) put(h[g], pre[g], sizes[g]);
            for (int call = 0; call < CALLS; call++)
                assert_int_equal(runs[run]->ops->linear_backward(runs[run], h[0], h[1], h[2],
                                                                 d_dy, d_in, d_w, n, in_dim,
                                                                 out_dim),
                                 WS_OK);
            for (int g = 0; g < 3; g++) {
                got[run][g] = xmalloc(sizes[g] * sizeof(float));
                get(got[run][g], h[g], sizes[g]);
            }
        }
        for (int g = 0; g < 3; g++) {
            char what[80];
            snprintf(what, sizeof what, "linear_backward %s n%d %dx%d, %d calls", names[g], n,
                     in_dim, out_dim, CALLS);
            check_close(what, got[0][g], want[g], sizes[g], NULL, 1e-5, 1e-5);
        }
        for (int run = 1; run < 3; run++)
            for (int g = 0; g < 3; g++)
                if (memcmp(got[run][g], got[0][g], sizes[g] * sizeof(float)))
                    fail_msg("linear_backward %s n%d %dx%d differs %s", names[g], n, in_dim,
                             out_dim, run == 1 ? "on one thread" : "run again");
        for (int g = 0; g < 3; g++) {
            for (int run = 0; run < 3; run++) free(got[run][g]);
            free(pre[g]), free(want[g]);
            dev_free(h[g]);
        }
        dev_free(d_in), dev_free(d_w), dev_free(d_dy);
        free(x), free(w), free(dy);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_forward),
        cmocka_unit_test(test_gemm_forward_row_split),
        cmocka_unit_test(test_gemm_backward),
        cmocka_unit_test(test_gemm_shared_operand),
        cmocka_unit_test(test_linear_forward),
        cmocka_unit_test(test_linear_forward_rows_independent),
        cmocka_unit_test(test_linear_forward_weights_rewritten),
        cmocka_unit_test(test_linear_backward),
        cmocka_unit_test(test_linear_backward_threads),
    };
    return cmocka_run_group_tests(tests, ops_group_setup, ops_group_teardown);
}
