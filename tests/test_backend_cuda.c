/* test_backend_cuda.c — the CUDA backend against the CPU backend (ggml's
 * test-backend-ops is the model): every op, forward and backward, on seeded random
 * inputs of several shapes (odd ones included: 1, 3, 17, 33, 100), run on both
 * backends and compared with a per-op tolerance relative to the CPU result's
 * largest magnitude. Outputs an op assigns are poisoned with NaN on both sides
 * first, so an element the CUDA op fails to write (or writes where the CPU op does
 * not: strided padding, gaps between attention segments) fails the comparison;
 * outputs an op accumulates into (+=) start from the same random values. Then the
 * whole model: one ragged TRAIN step, W_t, probabilities, loss and every gradient,
 * an AdamW step, and a second step from the states of the first.
 *
 * Without a GPU (ws_backend_cuda_new says WS_ERR_UNSUPPORTED) or in a build without
 * CUDA, every test calls skip() and the program exits 77, which CTest reports as
 * skipped. WS_REQUIRE_CUDA=1 turns that into a failure (scripts/gpu-check.sh).
 * WS_CUDA_TF32=1 runs the products in TF32 and loosens their tolerances. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "model/model.h"
#include "ops_check.h"
#include "test_util.h"
#ifdef WS_HAVE_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

#define EXIT_SKIPPED 77

static ws_backend *g_side[2]; /* [0] CPU (the reference), [1] CUDA */
static char g_skip_why[320];
static int g_tf32;

/* The closest call of the run, per kind (0: ops, 1: whole model): the largest
 * error/tolerance ratio, for the summary (TF32 wants the numbers, not just a pass). */
static struct {
    double ratio, err, tol;
    char what[200];
} g_worst[2];

static void record(int kind, const char *what, double err, double tol)
{
    double ratio = tol > 0.0 ? err / tol : (err > 0.0 ? INFINITY : 0.0);
    if (ratio > g_worst[kind].ratio || isnan(err)) {
        g_worst[kind].ratio = ratio, g_worst[kind].err = err, g_worst[kind].tol = tol;
        snprintf(g_worst[kind].what, sizeof g_worst[kind].what, "%s", what);
    }
}

/* Tolerances: max |cuda − cpu| / max(max |cpu|, floor). */
#define TOL_EXACT 1e-6    /* element-wise ops both sides compute alike */
#define TOL_POINTWISE 2e-6 /* transcendental functions (the CPU's exp is a polynomial) */
#define TOL_SUM 1e-5      /* short sums in another order (rows, softmax, atomics) */
static double tol_product(void) { return g_tf32 ? 1e-2 : 1e-5; } /* cuBLAS products */
static double tol_model(void) { return g_tf32 ? 5e-2 : 1e-4; }   /* whole step, norm-wise */

#define NEED_GPU()                                                        \
    do {                                                                  \
        if (!g_side[1]) {                                                 \
            skip();                                                       \
        }                                                                 \
    } while (0)

/* Runs call on both backends: inside it, `be` is the backend and S_ its side. */
#define BOTH(call)                                                        \
    do {                                                                  \
        for (int S_ = 0; S_ < 2; S_++) {                                  \
            ws_backend *be = g_side[S_];                                  \
            ws_status st_ = (call);                                       \
            if (st_ != WS_OK) fail_msg("%s backend: %s returned %s", be->ops->name, #call, \
                                       ws_status_name(st_));              \
        }                                                                 \
    } while (0)

/* ---- buffers that exist on both backends ------------------------------------- */

typedef struct {
    void *p[2];
    size_t bytes;
} dual;

#define F(x) ((float *)(x).p[S_])
#define I(x) ((int32_t *)(x).p[S_])

static dual dual_new(size_t bytes)
{
    dual d = {.bytes = bytes};
    for (int s = 0; s < 2; s++) {
        assert_int_equal(ws_backend_alloc(g_side[s], bytes ? bytes : 4, &d.p[s]), WS_OK);
        assert_non_null(d.p[s]);
    }
    return d;
}

static void dual_put(dual *d, const void *host)
{
    for (int s = 0; s < 2; s++)
        if (d->bytes)
            assert_int_equal(ws_backend_upload(g_side[s], d->p[s], host, d->bytes), WS_OK);
}

static dual dual_from(const void *host, size_t bytes)
{
    dual d = dual_new(bytes);
    dual_put(&d, host);
    return d;
}

/* n floats of scale·N(0,1) on both sides. */
static dual dual_normal(ws_test_rng *r, size_t n, float scale)
{
    float *h = xmalloc(n * sizeof *h);
    ws_test_fill_normal(r, h, n, scale);
    dual d = dual_from(h, n * sizeof *h);
    free(h);
    return d;
}

/* n floats of NaN on both sides: what an op must overwrite. */
static dual dual_nan(size_t n)
{
    float *h = xmalloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++) h[i] = NAN;
    dual d = dual_from(h, n * sizeof *h);
    free(h);
    return d;
}

static void dual_free(dual *d)
{
    for (int s = 0; s < 2; s++) ws_backend_release(g_side[s], d->p[s]);
    d->p[0] = d->p[1] = NULL;
}

/* Copies side 0's contents to side 1 (the CPU result becomes both sides' input). */
static void dual_sync_from_cpu(dual *d)
{
    void *h = xmalloc(d->bytes);
    assert_int_equal(ws_backend_download(g_side[0], h, d->p[0], d->bytes), WS_OK);
    assert_int_equal(ws_backend_upload(g_side[1], d->p[1], h, d->bytes), WS_OK);
    free(h);
}

/* Compares the first n floats of both sides. NaN on both sides means neither op
 * wrote the element (fine); NaN on one side only fails. */
static void compare(const char *what, const dual *d, size_t n, double tol, double floor)
{
    float *a = xmalloc(n * sizeof *a), *b = xmalloc(n * sizeof *b);
    assert_int_equal(ws_backend_download(g_side[0], a, d->p[0], n * sizeof *a), WS_OK);
    assert_int_equal(ws_backend_download(g_side[1], b, d->p[1], n * sizeof *b), WS_OK);
    char msg[400] = "";
    double mag = floor, worst = 0.0;
    size_t at = 0;
    for (size_t i = 0; i < n && !msg[0]; i++) {
        if (isnan(a[i]) != isnan(b[i]))
            snprintf(msg, sizeof msg, "%s: element %zu is %g on the CPU but %g on CUDA (%s)", what,
                     i, a[i], b[i],
                     isnan(b[i]) ? "not written" : "written where the CPU writes nothing");
        else if (isnan(a[i]))
            continue;
        else if (isinf(a[i]) || isinf(b[i])) {
            if (a[i] != b[i])
                snprintf(msg, sizeof msg, "%s: element %zu is %g on the CPU but %g on CUDA", what,
                         i, a[i], b[i]);
        } else {
            mag = fmax(mag, fabs((double)a[i]));
            double e = fabs((double)a[i] - b[i]);
            if (e > worst) worst = e, at = i;
        }
    }
    double rel = worst / mag;
    if (!msg[0] && !(rel <= tol))
        snprintf(msg, sizeof msg,
                 "%s: max error %.3e (relative to %.3e) at element %zu: cpu %.9g cuda %.9g, "
                 "tolerance %.1e", what, rel, mag, at, a[at], b[at], tol);
    free(a);
    free(b);
    if (!msg[0]) record(0, what, rel, tol);
    if (msg[0]) fail_msg("%s", msg);
}

static void comparef(const dual *d, size_t n, double tol, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void comparef(const dual *d, size_t n, double tol, const char *fmt, ...)
{
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    compare(what, d, n, tol, 1e-6);
}

static const int k_sizes[] = {1, 3, 17, 33, 100, 4099, 100003};
#define N_SIZES (int)(sizeof k_sizes / sizeof k_sizes[0])

/* ---- memory -------------------------------------------------------------------- */

static void test_memory(void **state)
{
    (void)state;
    NEED_GPU();
    ws_test_rng r = {1};
    for (int si = 0; si < N_SIZES; si++) {
        size_t n = (size_t)k_sizes[si];
        /* upload/download round trip is exact */
        float *h = xmalloc(n * sizeof *h), *back = xmalloc(n * sizeof *back);
        ws_test_fill_normal(&r, h, n, 1.0f);
        void *p;
        assert_int_equal(ws_backend_alloc(g_side[1], n * sizeof *h, &p), WS_OK);
        assert_int_equal(ws_backend_upload(g_side[1], p, h, n * sizeof *h), WS_OK);
        assert_int_equal(ws_backend_download(g_side[1], back, p, n * sizeof *h), WS_OK);
        assert_memory_equal(h, back, n * sizeof *h);
        ws_backend_release(g_side[1], p);
        free(h);
        free(back);

        /* fill (zero, negative zero, a value) over a NaN buffer with guard elements */
        const float values[] = {0.0f, -0.0f, 2.5f};
        for (int v = 0; v < 3; v++) {
            dual d = dual_nan(n + 2);
            BOTH(be->ops->fill(be, F(d) + 1, values[v], n));
            comparef(&d, n + 2, 0.0, "fill %g n=%zu", values[v], n);
            dual_free(&d);
        }

        /* copy: disjoint, and overlapping both ways (memmove semantics) */
        size_t len = n + 8;
        dual d = dual_normal(&r, len + 8, 1.0f);
        BOTH(be->ops->copy(be, F(d) + len, F(d), 8 * sizeof(float)));
        BOTH(be->ops->copy(be, F(d) + 3, F(d), n * sizeof(float)));
        BOTH(be->ops->copy(be, F(d), F(d) + 5, n * sizeof(float)));
        comparef(&d, len + 8, 0.0, "copy n=%zu", n);
        dual_free(&d);
    }
    void *z = NULL;
    assert_int_equal(ws_backend_alloc(g_side[1], 0, &z), WS_OK);
    assert_non_null(z);
    ws_backend_release(g_side[1], z);
    assert_int_equal(g_side[1]->ops->sync(g_side[1]), WS_OK);
}

/* ---- matrix products --------------------------------------------------------------- */

static const int k_mnk[][3] = {{1, 1, 1}, {3, 17, 33}, {17, 3, 100}, {33, 100, 17},
                               {100, 33, 3}, {1, 100, 1}, {100, 1, 33}};
#define N_MNK (int)(sizeof k_mnk / sizeof k_mnk[0])

static void run_gemm(ws_test_rng *r, int ta, int tb, int m, int n, int k, int batch, int pad,
                     float alpha, float beta, int shared_c)
{
    ws_gemm_args g = {.trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k, .alpha = alpha,
                      .beta = beta, .batch = batch};
    int a_rows = ta ? k : m, a_cols = ta ? m : k;
    int b_rows = tb ? n : k, b_cols = tb ? k : n;
    g.lda = a_cols + pad, g.ldb = b_cols + pad, g.ldc = n + pad;
    g.stride_a = (long)a_rows * g.lda + pad;
    g.stride_b = (long)b_rows * g.ldb + 2 * pad;
    g.stride_c = shared_c ? 0 : (long)m * g.ldc + pad;
    size_t na = (size_t)g.stride_a * batch, nb = (size_t)g.stride_b * batch;
    size_t nc = shared_c ? (size_t)m * g.ldc : (size_t)g.stride_c * batch;
    dual a = dual_normal(r, na, 1.0f), b = dual_normal(r, nb, 1.0f);
    /* beta == 0: C is not read (BLAS), so NaN there must vanish; padding stays NaN */
    dual c = beta == 0.0f ? dual_nan(nc) : dual_normal(r, nc, 1.0f);
    BOTH((g.a = F(a), g.b = F(b), g.c = F(c), be->ops->gemm(be, &g)));
    comparef(&c, nc, tol_product(), "gemm ta=%d tb=%d m=%d n=%d k=%d batch=%d pad=%d alpha=%g "
             "beta=%g shared_c=%d", ta, tb, m, n, k, batch, pad, alpha, beta, shared_c);
    dual_free(&a);
    dual_free(&b);
    dual_free(&c);
}

static void test_gemm(void **state)
{
    (void)state;
    NEED_GPU();
    ws_test_rng r = {2};
    for (int s = 0; s < N_MNK; s++)
        for (int t = 0; t < 4; t++) {
            const int *d = k_mnk[s];
            run_gemm(&r, t & 1, t >> 1, d[0], d[1], d[2], 1, 0, 1.0f, 0.0f, 0);
            run_gemm(&r, t & 1, t >> 1, d[0], d[1], d[2], 3, 3, 0.7f, 1.0f, 0);
            run_gemm(&r, t & 1, t >> 1, d[0], d[1], d[2], 2, 1, -1.3f, 0.0f, 0);
            /* every batch accumulates into one C (ws_gemm_backward's dA of a shared A) */
            run_gemm(&r, t & 1, t >> 1, d[0], d[1], d[2], 3, 2, 1.0f, 1.0f, 1);
        }
    /* ws_gemm_backward composes two gemm calls on the backend */
    ws_gemm_args g = {.trans_b = 1, .m = 17, .n = 33, .k = 3, .alpha = 0.5f, .beta = 0.0f,
                      .lda = 3, .stride_a = 0, .ldb = 3, .stride_b = 99, .ldc = 33,
                      .stride_c = 17 * 33, .batch = 3};
    dual a = dual_normal(&r, 17 * 3, 1.0f), b = dual_normal(&r, 99 * 3, 1.0f);
    dual dc = dual_normal(&r, 17 * 33 * 3, 1.0f);
    dual da = dual_normal(&r, 17 * 3, 1.0f), db = dual_normal(&r, 99 * 3, 1.0f);
    BOTH((g.a = F(a), g.b = F(b), ws_gemm_backward(be, &g, F(dc), F(da), F(db))));
    comparef(&da, 17 * 3, tol_product(), "gemm_backward dA (shared A)");
    comparef(&db, 99 * 3, tol_product(), "gemm_backward dB");
    dual_free(&a);
    dual_free(&b);
    dual_free(&dc);
    dual_free(&da);
    dual_free(&db);
}

static const int k_linear[][3] = {{1, 1, 1}, {3, 17, 33}, {100, 33, 17}, {17, 100, 3},
                                  {33, 3, 100}, {100, 33, 1}};
#define N_LINEAR (int)(sizeof k_linear / sizeof k_linear[0])

static void test_linear(void **state)
{
    (void)state;
    NEED_GPU();
    ws_test_rng r = {3};
    for (int s = 0; s < N_LINEAR; s++) {
        int n = k_linear[s][0], in = k_linear[s][1], out = k_linear[s][2];
        dual x = dual_normal(&r, (size_t)n * in, 1.0f);
        dual w = dual_normal(&r, (size_t)out * in, 0.3f), bias = dual_normal(&r, out, 1.0f);
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            dual y = dual_nan((size_t)n * out);
            BOTH(be->ops->linear_forward(be, F(y), F(x), F(w), with_bias ? F(bias) : NULL, n,
                                         in, out));
            comparef(&y, (size_t)n * out, tol_product(), "linear_forward n=%d in=%d out=%d bias=%d",
                     n, in, out, with_bias);
            dual_free(&y);
        }
        dual dy = dual_normal(&r, (size_t)n * out, 1.0f);
        /* all three gradients, then each alone (the others NULL) */
        for (int which = 0; which < 4; which++) {
            dual dx = dual_normal(&r, (size_t)n * in, 1.0f);
            dual dw = dual_normal(&r, (size_t)out * in, 1.0f);
            dual db = dual_normal(&r, out, 1.0f);
            BOTH(be->ops->linear_backward(be, which == 0 || which == 1 ? F(dx) : NULL,
                                          which == 0 || which == 2 ? F(dw) : NULL,
                                          which == 0 || which == 3 ? F(db) : NULL, F(dy), F(x),
                                          F(w), n, in, out));
            comparef(&dx, (size_t)n * in, tol_product(), "linear_backward din n=%d in=%d out=%d (%d)",
                     n, in, out, which);
            comparef(&dw, (size_t)out * in, tol_product(), "linear_backward dW n=%d in=%d out=%d (%d)",
                     n, in, out, which);
            comparef(&db, out, TOL_SUM, "linear_backward dbias n=%d in=%d out=%d (%d)", n, in,
                     out, which);
            dual_free(&dx);
            dual_free(&dw);
            dual_free(&db);
        }
        dual_free(&x);
        dual_free(&w);
        dual_free(&bias);
        dual_free(&dy);
    }
}

/* ---- LayerNorm ------------------------------------------------------------------------ */

static const int k_ln[][2] = {{1, 1}, {3, 17}, {17, 33}, {100, 100}, {33, 3}, {5, 515}};
#define N_LN (int)(sizeof k_ln / sizeof k_ln[0])

static void test_layernorm(void **state)
{
    (void)state;
    NEED_GPU();
    ws_test_rng r = {4};
    for (int s = 0; s < N_LN; s++) {
        int n = k_ln[s][0], c = k_ln[s][1];
        size_t nc = (size_t)n * c;
        float *h = xmalloc(nc * sizeof *h);
        for (size_t i = 0; i < nc; i++) h[i] = 2.0f * ws_test_normal(&r) + (float)(i / c % 5);
        dual x = dual_from(h, nc * sizeof *h);
        free(h);
        dual gain = dual_normal(&r, c, 1.0f), bias = dual_normal(&r, c, 1.0f);
        dual y = dual_nan(nc), mean = dual_nan(n), rstd = dual_nan(n);
        BOTH(be->ops->layernorm_forward(be, F(y), F(mean), F(rstd), F(x), F(gain), F(bias), n, c));
        comparef(&y, nc, TOL_SUM, "layernorm_forward out n=%d c=%d", n, c);
        comparef(&mean, n, TOL_SUM, "layernorm_forward mean n=%d c=%d", n, c);
        comparef(&rstd, n, TOL_SUM, "layernorm_forward rstd n=%d c=%d", n, c);
        /* the backward pass reads the CPU's statistics on both sides */
        dual_sync_from_cpu(&mean);
        dual_sync_from_cpu(&rstd);
        dual dy = dual_normal(&r, nc, 1.0f);
        for (int which = 0; which < 3; which++) { /* all; no din; only dbias */
            dual dx = dual_normal(&r, nc, 1.0f), dg = dual_normal(&r, c, 1.0f);
            dual db = dual_normal(&r, c, 1.0f);
            BOTH(be->ops->layernorm_backward(be, which == 0 ? F(dx) : NULL,
                                             which < 2 ? F(dg) : NULL, F(db), F(dy), F(x),
                                             F(gain), F(mean), F(rstd), n, c));
            comparef(&dx, nc, TOL_SUM, "layernorm_backward din n=%d c=%d (%d)", n, c, which);
            comparef(&dg, c, TOL_SUM, "layernorm_backward dgain n=%d c=%d (%d)", n, c, which);
            comparef(&db, c, TOL_SUM, "layernorm_backward dbias n=%d c=%d (%d)", n, c, which);
            dual_free(&dx);
            dual_free(&dg);
            dual_free(&db);
        }
        dual_free(&x);
        dual_free(&gain);
        dual_free(&bias);
        dual_free(&y);
        dual_free(&mean);
        dual_free(&rstd);
        dual_free(&dy);
    }
}

/* ---- attention ------------------------------------------------------------------------- */

typedef struct {
    int n_heads, dh;
    int fused;       /* self-attention on one [N, 3d+pad] QKV buffer (q range == k range) */
    int mask;        /* 0: key_valid NULL; 1: random keys masked; 2: also one segment fully */
    int n_segs;
    int q_len[6], k_len[6];
} attn_case;

static const attn_case k_attn[] = {
    {1, 1, 0, 0, 1, {1}, {1}},
    {2, 3, 0, 1, 3, {3, 17, 1}, {17, 3, 33}},
    {3, 17, 0, 2, 5, {33, 100, 0, 4, 3}, {100, 33, 5, 0, 17}},
    {4, 33, 1, 0, 3, {17, 33, 1}, {17, 33, 1}},
    {1, 64, 1, 2, 2, {100, 3}, {100, 3}},
    {2, 8, 0, 1, 6, {1, 3, 17, 33, 100, 2}, {100, 33, 17, 3, 1, 40}},
};
#define N_ATTN (int)(sizeof k_attn / sizeof k_attn[0])

static void run_attention(ws_test_rng *r, const attn_case *tc)
{
    int H = tc->n_heads, d = H * tc->dh, S = tc->n_segs;
    ws_attn_seg segs[6];
    /* query rows packed in segment order; key rows in reverse order (independent
     * offsets), both with a spare row between segments; probs with gaps */
    int nq = 1, nk = 1, np = 3, max_q = 0, max_k = 0;
    for (int s = 0; s < S; s++) {
        segs[s].q_off = nq, segs[s].q_len = tc->q_len[s];
        nq += tc->q_len[s] + 1;
        segs[s].p_off = np;
        np += H * tc->q_len[s] * tc->k_len[s] + 5;
        max_q = tc->q_len[s] > max_q ? tc->q_len[s] : max_q;
        max_k = tc->k_len[s] > max_k ? tc->k_len[s] : max_k;
    }
    for (int s = S - 1; s >= 0; s--) {
        segs[s].k_off = tc->fused ? segs[s].q_off : nk, segs[s].k_len = tc->k_len[s];
        nk += tc->k_len[s] + 1;
    }
    if (tc->fused) nk = nq;
    /* layouts: fused [nq, 3d+1] holding q|k|v; else Q [nq, d+3], KV [nk, 2d+2] */
    int ldq = tc->fused ? 3 * d + 1 : d + 3, ldkv = tc->fused ? 3 * d + 1 : 2 * d + 2;
    int ldo = d + 2;
    size_t n_q = (size_t)nq * ldq, n_kv = tc->fused ? 0 : (size_t)nk * ldkv;
    dual q = dual_normal(r, n_q, 1.0f), kv = dual_normal(r, n_kv ? n_kv : 1, 1.0f);
    uint8_t *valid = xmalloc((size_t)nk);
    for (int i = 0; i < nk; i++) valid[i] = ws_test_uniform(r) < 0.8f;
    if (tc->mask == 2) /* the last segment with keys sees none of them */
        for (int s = S - 1; s >= 0; s--)
            if (tc->k_len[s] > 0 && tc->q_len[s] > 0) {
                memset(valid + segs[s].k_off, 0, (size_t)tc->k_len[s]);
                break;
            }
    dual kvalid = dual_from(valid, (size_t)nk);
    free(valid);
    dual dsegs = dual_from(segs, sizeof segs);
    dual out = dual_nan((size_t)nq * ldo), probs = dual_nan((size_t)np);

    ws_attn_args a = {.ldo = ldo, .ldq = ldq, .ldk = ldkv, .ldv = ldkv, .n_segs = S,
                      .n_heads = H, .d = d, .max_q_len = max_q, .max_k_len = max_k};
#define SET_ARGS()                                                                   \
    (a.out = F(out), a.probs = F(probs), a.q = F(q),                                 \
     a.k = tc->fused ? F(q) + d : F(kv), a.v = tc->fused ? F(q) + 2 * d : F(kv) + d, \
     a.segs = (const ws_attn_seg *)dsegs.p[S_],                                      \
     a.key_valid = tc->mask ? (const uint8_t *)kvalid.p[S_] : NULL)
    BOTH((SET_ARGS(), be->ops->attention_forward(be, &a)));
    char what[160];
    snprintf(what, sizeof what, "attention H=%d dh=%d fused=%d mask=%d segs=%d", H, tc->dh,
             tc->fused, tc->mask, S);
    comparef(&out, (size_t)nq * ldo, TOL_SUM, "%s: out", what);
    comparef(&probs, (size_t)np, TOL_SUM, "%s: probs", what);

    /* backward from the CPU's probabilities on both sides; gradients accumulate */
    dual_sync_from_cpu(&probs);
    dual dout = dual_normal(r, (size_t)nq * ldo, 1.0f);
    dual dq = dual_normal(r, n_q, 1.0f), dkv = dual_normal(r, n_kv ? n_kv : 1, 1.0f);
    ws_attn_grads g = {0};
    BOTH((SET_ARGS(), g.dout = F(dout), g.dq = F(dq),
          g.dk = tc->fused ? F(dq) + d : F(dkv), g.dv = tc->fused ? F(dq) + 2 * d : F(dkv) + d,
          be->ops->attention_backward(be, &a, &g)));
#undef SET_ARGS
    comparef(&dq, n_q, TOL_SUM, "%s: dq%s", what, tc->fused ? "/dk/dv" : "");
    if (!tc->fused) comparef(&dkv, n_kv, TOL_SUM, "%s: dk/dv", what);
    dual_free(&q);
    dual_free(&kv);
    dual_free(&kvalid);
    dual_free(&dsegs);
    dual_free(&out);
    dual_free(&probs);
    dual_free(&dout);
    dual_free(&dq);
    dual_free(&dkv);
}

static void test_attention(void **state)
{
    (void)state;
    NEED_GPU();
    ws_test_rng r = {5};
    for (int i = 0; i < N_ATTN; i++) run_attention(&r, &k_attn[i]);
}

/* ---- element-wise ops ------------------------------------------------------------------ */

/* scale·N(0,1) with extremes at the front: large logits, zero. */
static dual dual_logits(ws_test_rng *r, size_t n, float scale)
{
    static const float extremes[] = {0.0f, 100.0f, -100.0f, 20.0f, -20.0f, 9.5f, -9.5f};
    float *h = xmalloc(n * sizeof *h);
    ws_test_fill_normal(r, h, n, scale);
    for (size_t i = 0; i < n && i < sizeof extremes / sizeof *extremes; i++) h[i] = extremes[i];
    dual d = dual_from(h, n * sizeof *h);
    free(h);
    return d;
}

static void test_pointwise(void **state)
{
    (void)state;
    NEED_GPU();
    ws_test_rng r = {6};
    for (int si = 0; si < N_SIZES; si++) {
        size_t n = (size_t)k_sizes[si];
        dual x = dual_logits(&r, n, 3.0f), y = dual_normal(&r, n, 1.0f);
        dual dy = dual_normal(&r, n, 1.0f);

        dual out = dual_nan(n);
        BOTH(be->ops->gelu_forward(be, F(out), F(x), n));
        comparef(&out, n, TOL_POINTWISE, "gelu_forward n=%zu", n);
        dual dx = dual_normal(&r, n, 1.0f);
        BOTH(be->ops->gelu_backward(be, F(dx), F(x), F(dy), n));
        comparef(&dx, n, TOL_POINTWISE, "gelu_backward n=%zu", n);
        dual_free(&dx);

        BOTH(be->ops->add_forward(be, F(out), F(x), F(y), n));
        comparef(&out, n, TOL_EXACT, "add_forward n=%zu", n);
        BOTH(be->ops->add_forward(be, F(out), F(out), F(y), n)); /* out aliases a */
        comparef(&out, n, TOL_EXACT, "add_forward aliased n=%zu", n);
        dual da = dual_normal(&r, n, 1.0f), db = dual_normal(&r, n, 1.0f);
        BOTH(be->ops->add_backward(be, F(da), F(db), F(dy), n));
        BOTH(be->ops->add_backward(be, NULL, F(db), F(dy), n));
        BOTH(be->ops->add_backward(be, F(da), NULL, F(dy), n));
        comparef(&da, n, TOL_EXACT, "add_backward da n=%zu", n);
        comparef(&db, n, TOL_EXACT, "add_backward db n=%zu", n);
        dual_free(&da);
        dual_free(&db);

        dual_free(&out);
        out = dual_nan(n);
        BOTH(be->ops->sigmoid(be, F(out), F(x), n));
        comparef(&out, n, TOL_POINTWISE, "sigmoid n=%zu", n);

        BOTH(be->ops->scale(be, F(y), -0.37f, n));
        comparef(&y, n, TOL_EXACT, "scale n=%zu", n);

        dual_free(&x);
        dual_free(&y);
        dual_free(&dy);
        dual_free(&out);
    }
}

static void test_reductions(void **state)
{
    (void)state;
    NEED_GPU();
    ws_test_rng r = {7};
    for (int si = -1; si < N_SIZES; si++) {
        size_t n = si < 0 ? 0 : (size_t)k_sizes[si]; /* n == 0 still writes out[0] */
        dual x = dual_logits(&r, n ? n : 1, 3.0f);
        float *lab = xmalloc((n ? n : 1) * sizeof *lab);
        for (size_t i = 0; i < n; i++) {
            float u = ws_test_uniform(&r);
            lab[i] = u < 0.2f ? -1.0f : (u < 0.6f ? 0.0f : 1.0f); /* -1: unlabelled */
        }
        dual labels = dual_from(lab, (n ? n : 1) * sizeof *lab);
        free(lab);
        dual loss = dual_nan(1);
        BOTH(be->ops->bce_forward(be, F(loss), F(x), F(labels), n, 0.25f));
        comparef(&loss, 1, TOL_SUM, "bce_forward n=%zu", n);
        dual dl = dual_normal(&r, n ? n : 1, 1.0f);
        BOTH(be->ops->bce_backward(be, F(dl), F(x), F(labels), n, 0.25f));
        comparef(&dl, n ? n : 1, TOL_POINTWISE, "bce_backward n=%zu", n);
        dual ss = dual_nan(2); /* one float written, the next untouched */
        BOTH(be->ops->sum_squares(be, F(ss), F(x), n));
        comparef(&ss, 2, TOL_SUM, "sum_squares n=%zu", n);
        dual_free(&x);
        dual_free(&labels);
        dual_free(&loss);
        dual_free(&dl);
        dual_free(&ss);
    }
}

/* ---- embeddings ------------------------------------------------------------------------- */

static const int k_emb[][4] = {/* n_rows, k, d, vocab */
                               {1, 1, 1, 1}, {3, 3, 17, 5}, {17, 4, 33, 7},
                               {100, 1, 100, 3}, {33, 16, 3, 100}, {1000, 2, 128, 50}};
#define N_EMB (int)(sizeof k_emb / sizeof k_emb[0])

static void test_embedding(void **state)
{
    (void)state;
    NEED_GPU();
    ws_test_rng r = {8};
    for (int s = 0; s < N_EMB; s++) {
        int n = k_emb[s][0], k = k_emb[s][1], d = k_emb[s][2], vocab = k_emb[s][3];
        size_t nid = (size_t)n * k;
        int32_t *ids = xmalloc(nid * sizeof *ids);
        for (size_t i = 0; i < nid; i++) ids[i] = ws_test_int(&r, -1, vocab - 1); /* repeats */
        if (n > 1)
            for (int j = 0; j < k; j++) ids[k + j] = -1; /* a row with no id at all */
        dual did = dual_from(ids, nid * sizeof *ids);
        free(ids);
        dual table = dual_normal(&r, (size_t)vocab * d, 1.0f);
        for (int acc = 0; acc < 2; acc++) {
            dual out = acc ? dual_normal(&r, (size_t)n * d, 1.0f) : dual_nan((size_t)n * d);
            BOTH(be->ops->embedding_forward(be, F(out), F(table), I(did), n, k, d, acc));
            comparef(&out, (size_t)n * d, TOL_SUM, "embedding_forward n=%d k=%d d=%d acc=%d", n,
                     k, d, acc);
            dual_free(&out);
        }
        dual dout = dual_normal(&r, (size_t)n * d, 1.0f);
        dual dtable = dual_normal(&r, (size_t)vocab * d, 1.0f);
        BOTH(be->ops->embedding_backward(be, F(dtable), F(dout), I(did), n, k, d));
        comparef(&dtable, (size_t)vocab * d, TOL_SUM, "embedding_backward n=%d k=%d d=%d", n, k, d);
        dual_free(&did);
        dual_free(&table);
        dual_free(&dout);
        dual_free(&dtable);
    }
}

/* Symbol codes: the same hashes (zeros = no symbol, a row without any) on both. */
static void test_symcode(void **state)
{
    (void)state;
    NEED_GPU();
    ws_test_rng r = {9};
    for (int s = 0; s < N_EMB; s++) {
        int n = k_emb[s][0], k = k_emb[s][1], d = k_emb[s][2];
        size_t nh = (size_t)n * k;
        uint64_t *h = xmalloc(nh * sizeof *h);
        for (size_t i = 0; i < nh; i++)
            h[i] = ws_test_int(&r, 0, 3) ? ((uint64_t)ws_test_int(&r, 0, 1 << 30) << 33) + i + 1 : 0;
        if (n > 1)
            for (int j = 0; j < k; j++) h[k + j] = 0;
        dual dh = dual_from(h, nh * sizeof *h);
        free(h);
        for (int acc = 0; acc < 2; acc++) {
            dual out = acc ? dual_normal(&r, (size_t)n * d, 1.0f) : dual_nan((size_t)n * d);
            BOTH(be->ops->symcode_forward(be, F(out), (const uint64_t *)dh.p[S_], n, k, d, acc));
            comparef(&out, (size_t)n * d, TOL_SUM, "symcode_forward n=%d k=%d d=%d acc=%d", n, k,
                     d, acc);
            dual_free(&out);
        }
        dual_free(&dh);
    }
}

/* ---- AdamW -------------------------------------------------------------------------------- */

static void test_adamw(void **state)
{
    (void)state;
    NEED_GPU();
    ws_test_rng r = {9};
    const int steps[] = {1, 7};
    for (int si = 0; si < N_SIZES; si++) {
        size_t n = (size_t)k_sizes[si];
        for (int t = 0; t < 4; t++) {
            dual p = dual_normal(&r, n, 1.0f), g = dual_normal(&r, n, 0.1f);
            dual m = dual_normal(&r, n, 0.01f);
            float *hv = xmalloc(n * sizeof *hv);
            for (size_t i = 0; i < n; i++) hv[i] = 1e-4f * ws_test_uniform(&r); /* v >= 0 */
            dual v = dual_from(hv, n * sizeof *hv);
            free(hv);
            ws_adamw_args a = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                               .weight_decay = (t & 1) ? 0.01f : 0.0f, .step = steps[t >> 1],
                               .grad_scale = 0.5f};
            BOTH(be->ops->adamw(be, F(p), F(g), F(m), F(v), n, &a));
            comparef(&p, n, TOL_EXACT, "adamw param n=%zu step=%d wd=%g", n, a.step,
                     a.weight_decay);
            comparef(&m, n, TOL_EXACT, "adamw m n=%zu", n);
            comparef(&v, n, TOL_EXACT, "adamw v n=%zu", n);
            dual_free(&p);
            dual_free(&g);
            dual_free(&m);
            dual_free(&v);
        }
    }
}

/* ---- the whole model ---------------------------------------------------------------------- */

static ws_model_config model_config(void)
{
    ws_model_config c = ws_model_config_default();
    c.d = 32, c.n_heads = 4, c.n_state = 8, c.n_upd_layers = 2, c.n_ext_layers = 2;
    c.max_fact_len = 3, c.vocab_cap = 20, c.n_overflow = 4, c.d_raw = 5, c.state_norm = 1;
    return c;
}

/* Five ragged trajectories: from W_0 and from states, with and without instructions
 * and queries, raw facts, unlabelled queries; `round` varies the content. */
static void build_batch(ws_batch *b, int round)
{
    ws_test_rng rng = {(uint64_t)(77 + round)}, *r = &rng;
    const ws_model_config c = model_config();
    const int n_instr[] = {3, 0, 6, 1, 2}, n_query[] = {4, 2, 0, 17, 1};
    int32_t ids[3];
    float x[5];
    ws_batch_clear(b);
    for (int t = 0; t < 5; t++) {
        assert_int_equal(ws_batch_begin_traj(b, round == 0 ? (t == 0 || t == 3) : t == 2),
                         WS_OK);
        for (int i = 0; i < n_instr[t]; i++) {
            if (i == 1 && t == 0) {
                ws_test_fill_normal(r, x, 5, 1.0f);
                assert_int_equal(ws_batch_add_instr_raw(b, x, 1), WS_OK);
                continue;
            }
            int len = ws_test_int(r, 1, 3);
            for (int j = 0; j < len; j++) ids[j] = ws_test_int(r, 0, c.vocab_cap - 1);
            assert_int_equal(ws_batch_add_instr(b, ids, len, ws_test_int(r, 0, 1)), WS_OK);
        }
        for (int i = 0; i < n_query[t]; i++) {
            int label = t == 4 ? -1 : ws_test_int(r, -1, 1);
            if (i == 2 && t == 3) {
                ws_test_fill_normal(r, x, 5, 1.0f);
                assert_int_equal(ws_batch_add_query_raw(b, x, label), WS_OK);
                continue;
            }
            int len = ws_test_int(r, 1, 3);
            for (int j = 0; j < len; j++) ids[j] = ws_test_int(r, 0, c.vocab_cap - 1);
            assert_int_equal(ws_batch_add_query(b, ids, len, label), WS_OK);
        }
    }
}

typedef struct {
    ws_model *m[2];
    ws_exec *x[2];
    float *w_prev[2], *w_out[2];
    size_t state_floats;
} model_pair;

/* Norm-wise error of a host pair, with a message naming it. */
static void compare_host(const char *what, const float *cuda, const float *cpu, size_t n,
                         double tol)
{
    double e = ws_test_norm_rel_err(cuda, cpu, n, 1e-7);
    record(1, what, e, tol);
    if (!(e <= tol)) fail_msg("model: %s differs: relative error %.3e, tolerance %.1e", what, e, tol);
}

static void compare_states(model_pair *mp, float *const w[2], const char *what)
{
    size_t n = 5 * mp->state_floats;
    float *a = xmalloc(n * sizeof *a), *b = xmalloc(n * sizeof *b);
    assert_int_equal(ws_backend_download(g_side[0], a, w[0], n * sizeof *a), WS_OK);
    assert_int_equal(ws_backend_download(g_side[1], b, w[1], n * sizeof *b), WS_OK);
    compare_host(what, b, a, n, tol_model());
    free(a);
    free(b);
}

/* Every parameter (grads 0) or gradient (grads 1) tensor, CUDA against CPU.
 * adam_steps > 0: parameters after that many AdamW steps of learning rate lr. */
static void compare_tensors(model_pair *mp, int grads, int adam_steps, float lr, const char *when)
{
    int d = ws_model_config_of(mp->m[0])->d;
    for (int i = 0; i < ws_model_n_tensors(mp->m[0]); i++) {
        const ws_tensor_info *t = ws_model_tensor(mp->m[0], i);
        float *a = xmalloc(t->numel * sizeof *a), *b = xmalloc(t->numel * sizeof *b);
        ws_error err = {0};
        assert_int_equal(ws_model_get_tensor(mp->m[0], t->name, a, t->numel, grads, &err), WS_OK);
        assert_int_equal(ws_model_get_tensor(mp->m[1], t->name, b, t->numel, grads, &err), WS_OK);
        char what[160];
        snprintf(what, sizeof what, "%s of %s %s", grads ? "gradient" : "parameter", t->name, when);
        size_t off, len;
        if (!grads && adam_steps > 0 && ws_test_key_bias_slice(t->name, d, t->numel, &off, &len)) {
            double bound = 1.05 * adam_steps * lr;
            for (size_t j = off; j < off + len; j++) {
                if (!(fabs((double)a[j] - b[j]) <= bound))
                    fail_msg("model: %s: key bias %zu differs by %.3e, beyond the Adam bound %.3e",
                             what, j - off, fabs((double)a[j] - b[j]), bound);
                a[j] = b[j] = 0.0f; /* the rest of the tensor is compared as usual */
            }
        }
        compare_host(what, b, a, t->numel, tol_model());
        free(a);
        free(b);
    }
}

static void step_both(model_pair *mp, ws_batch *b, const char *when)
{
    int nq = ws_batch_n_query(b);
    float *probs[2] = {xmalloc((size_t)nq * sizeof(float)), xmalloc((size_t)nq * sizeof(float))};
    ws_step_result res[2];
    for (int s = 0; s < 2; s++) {
        ws_error err = {0};
        if (ws_exec_step(mp->x[s], b, mp->w_prev[s], mp->w_out[s], WS_STEP_TRAIN, 1.0f,
                         probs[s], &res[s], &err) != WS_OK)
            fail_msg("model step on %s: %s", g_side[s]->ops->name, err.msg);
    }
    char what[96];
    snprintf(what, sizeof what, "W_t %s", when);
    compare_states(mp, mp->w_out, what);
    snprintf(what, sizeof what, "probabilities %s", when);
    compare_host(what, probs[1], probs[0], (size_t)nq, tol_model());
    snprintf(what, sizeof what, "loss %s", when);
    compare_host(what, &res[1].loss, &res[0].loss, 1, tol_model());
    assert_int_equal(res[0].n_labelled, res[1].n_labelled);
    compare_tensors(mp, 1, 0, 0.0f, when);
    free(probs[0]);
    free(probs[1]);
}

static void test_model_step(void **state)
{
    (void)state;
    NEED_GPU();
    ws_model_config c = model_config();
    model_pair mp = {0};
    ws_error err = {0};
    ws_test_rng r = {10};
    for (int s = 0; s < 2; s++) {
        if (ws_model_new(&mp.m[s], &c, g_side[s], 7, &err) != WS_OK)
            fail_msg("ws_model_new on %s: %s", g_side[s]->ops->name, err.msg);
        assert_int_equal(ws_exec_new(&mp.x[s], mp.m[s], &err), WS_OK);
        assert_int_equal(ws_model_state_alloc(mp.m[s], 5, &mp.w_prev[s], &err), WS_OK);
        assert_int_equal(ws_model_state_alloc(mp.m[s], 5, &mp.w_out[s], &err), WS_OK);
    }
    mp.state_floats = ws_model_state_floats(mp.m[0]);
    /* The same seed gives the same parameters; copy them anyway, so the comparison
     * does not depend on the initialiser running identically on both. */
    for (int i = 0; i < ws_model_n_tensors(mp.m[0]); i++) {
        const ws_tensor_info *t = ws_model_tensor(mp.m[0], i);
        float *h = xmalloc(t->numel * sizeof *h);
        assert_int_equal(ws_model_get_tensor(mp.m[0], t->name, h, t->numel, 0, &err), WS_OK);
        assert_int_equal(ws_model_set_tensor(mp.m[1], t->name, h, t->numel, &err), WS_OK);
        free(h);
    }
    size_t n = 5 * mp.state_floats;
    float *h = xmalloc(n * sizeof *h);
    ws_test_fill_normal(&r, h, n, 1.0f);
    for (int s = 0; s < 2; s++) {
        assert_int_equal(ws_backend_upload(g_side[s], mp.w_prev[s], h, n * sizeof *h), WS_OK);
        assert_int_equal(ws_model_zero_grads(mp.m[s], &err), WS_OK);
    }
    free(h);
    ws_batch *b;
    assert_int_equal(ws_batch_new(&b, &c), WS_OK);
    build_batch(b, 0);
    step_both(&mp, b, "after step 1");

    ws_optim_config oc = ws_optim_config_default();
    float norm[2];
    for (int s = 0; s < 2; s++) {
        if (ws_model_adamw_step(mp.m[s], &oc, &norm[s], &err) != WS_OK)
            fail_msg("adamw step on %s: %s", g_side[s]->ops->name, err.msg);
    }
    compare_host("gradient norm", &norm[1], &norm[0], 1, tol_model());
    compare_tensors(&mp, 0, 1, oc.lr, "after AdamW");

    /* step 2 continues from the states of step 1 (W_t becomes W_{t-1}) */
    for (int s = 0; s < 2; s++) {
        float *t = mp.w_prev[s];
        mp.w_prev[s] = mp.w_out[s];
        mp.w_out[s] = t;
    }
    build_batch(b, 1);
    step_both(&mp, b, "after step 2");

    ws_batch_free(b);
    for (int s = 0; s < 2; s++) {
        ws_backend_release(g_side[s], mp.w_prev[s]);
        ws_backend_release(g_side[s], mp.w_out[s]);
        ws_exec_free(mp.x[s]);
        ws_model_free(mp.m[s]);
    }
}

/* ---- setup ------------------------------------------------------------------------------ */

static int group_setup(void **state)
{
    (void)state;
    ws_error err = {0};
    if (ws_backend_cpu_new(&g_side[0], 2, &err) != WS_OK) {
        fprintf(stderr, "cpu backend: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    ws_backend_free(g_side[0]);
    g_side[0] = NULL;
    return 0;
}

/* Starts the CUDA backend: 1 when there is one, 0 to skip (g_skip_why says why),
 * -1 when a GPU is there but the backend fails. */
static int start_cuda(void)
{
#ifdef WS_HAVE_CUDA
    ws_error err = {0};
    ws_status st = ws_backend_cuda_new(&g_side[1], 0, &err);
    if (st == WS_OK) {
        const char *tf = getenv("WS_CUDA_TF32");
        g_tf32 = tf && tf[0] && strcmp(tf, "0") != 0;
        return 1;
    }
    g_side[1] = NULL;
    if (st == WS_ERR_UNSUPPORTED) {
        snprintf(g_skip_why, sizeof g_skip_why, "%s", err.msg);
        return 0;
    }
    fprintf(stderr, "test_backend_cuda: the CUDA backend failed to start: %s (%s)\n", err.msg,
            ws_status_name(st));
    return -1;
#else
    snprintf(g_skip_why, sizeof g_skip_why, "built without CUDA (no toolkit or WS_CUDA=OFF)");
    return 0;
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory),     cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_linear),     cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_attention),  cmocka_unit_test(test_pointwise),
        cmocka_unit_test(test_reductions), cmocka_unit_test(test_embedding),
        cmocka_unit_test(test_symcode),
        cmocka_unit_test(test_adamw),      cmocka_unit_test(test_model_step),
    };
    int have = start_cuda();
    if (have < 0) return 1;
    if (!have) {
        const char *req = getenv("WS_REQUIRE_CUDA");
        if (req && req[0] && strcmp(req, "0") != 0) {
            fprintf(stderr, "test_backend_cuda: WS_REQUIRE_CUDA is set but %s\n", g_skip_why);
            return 1;
        }
        printf("test_backend_cuda: skipping every test: %s\n", g_skip_why);
    } else {
        printf("test_backend_cuda: CUDA backend up%s\n", g_tf32 ? " (TF32 products)" : "");
    }
    int failed = cmocka_run_group_tests(tests, group_setup, group_teardown);
    for (int k = 0; have && k < 2; k++)
        if (g_worst[k].what[0])
            printf("test_backend_cuda: closest %s comparison: %s, error %.3e (tolerance %.1e)\n",
                   k ? "model" : "op", g_worst[k].what, g_worst[k].err, g_worst[k].tol);
    ws_backend_free(g_side[1]);
    g_side[1] = NULL;
    if (!have && failed == 0) return EXIT_SKIPPED; /* CTest: SKIP_RETURN_CODE 77 */
    return failed;
}
