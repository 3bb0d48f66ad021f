/* ops_check.c — the harness of the op-level proof tests (see ops_check.h). */
#include "ops_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

ws_backend *g_be, *g_fd_be, *g_run;

int ops_group_setup(void **state)
{
    (void)state;
    ws_error err = {0};
    if (ws_backend_cpu_new(&g_be, 2, &err) != WS_OK ||
        ws_backend_cpu_new(&g_fd_be, 1, &err) != WS_OK) {
        fprintf(stderr, "cpu backend: %s\n", err.msg);
        return -1;
    }
    g_run = g_be;
    return 0;
}

int ops_group_teardown(void **state)
{
    (void)state;
    ws_backend_free(g_be);
    ws_backend_free(g_fd_be);
    g_be = g_fd_be = g_run = NULL;
    return 0;
}

void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    assert_non_null(p);
    return p;
}

float *dev_alloc(size_t n)
{
    void *p = NULL;
    assert_int_equal(ws_backend_alloc(g_be, (n ? n : 1) * sizeof(float), &p), WS_OK);
    assert_non_null(p);
    return p;
}

void *dev_alloc_bytes(size_t bytes)
{
    void *p = NULL;
    assert_int_equal(ws_backend_alloc(g_be, bytes ? bytes : 1, &p), WS_OK);
    assert_non_null(p);
    return p;
}

void put(float *dev, const float *host, size_t n)
{
    assert_int_equal(ws_backend_upload(g_be, dev, host, n * sizeof *host), WS_OK);
}

void put_bytes(void *dev, const void *host, size_t bytes)
{
    assert_int_equal(ws_backend_upload(g_be, dev, host, bytes), WS_OK);
}

void get(float *host, const float *dev, size_t n)
{
    assert_int_equal(ws_backend_download(g_be, host, dev, n * sizeof *host), WS_OK);
}

float *dev_from(const float *host, size_t n)
{
    float *d = dev_alloc(n);
    put(d, host, n);
    return d;
}

void dev_set(float *dev, float value, size_t n)
{
    float *h = xmalloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++) h[i] = value;
    put(dev, h, n);
    free(h);
}

void dev_free(void *p) { ws_backend_release(g_be, p); }

int verbose(void) { return getenv("WS_TEST_VERBOSE") != NULL; }

void check_close(const char *what, const float *got, const double *want, size_t n,
                 const uint8_t *mask, double atol, double rtol)
{
    double mx = 0.0;
    for (size_t i = 0; i < n; i++)
        if (!mask || mask[i]) mx = fmax(mx, fabs(want[i]));
    double tol = atol + rtol * mx, worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (mask && !mask[i]) continue;
        double e = fabs((double)got[i] - want[i]);
        if (!(e <= tol))
            fail_msg("%s[%zu]: got %.9g, want %.9g (|err| %.3g > tol %.3g, max|want| %.3g)", what,
                     i, (double)got[i], want[i], e, tol, mx);
        worst = fmax(worst, e);
    }
    if (verbose()) fprintf(stderr, "  %-34s n=%-6zu worst %.3g tol %.3g (%.0f%%)\n", what, n, worst,
                           tol, 100.0 * worst / tol);
}

void check_untouched(const char *what, const float *got, const uint8_t *mask, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!mask[i] && got[i] != SENTINEL)
            fail_msg("%s[%zu]: padding overwritten (%.9g)", what, i, (double)got[i]);
}

void check_accumulated(const char *what, const float *got, const float *prefill,
                       const float *fresh, size_t n, const uint8_t *mask)
{
    double *want = xmalloc(n * sizeof *want);
    for (size_t i = 0; i < n; i++) want[i] = (double)prefill[i] + fresh[i];
    check_close(what, got, want, n, mask, 1e-5, 1e-5);
    free(want);
}

double eval_loss(loss_fn *l)
{
    l->forward(l->ctx);
    get(l->scratch, l->out, l->n_out);
    double s = 0.0;
    for (size_t i = 0; i < l->n_out; i++)
        if (l->r[i] != 0.0) s += (double)l->scratch[i] * l->r[i];
    return s;
}

void fd_grad_steps(loss_fn *l, float *x, size_t n, const uint8_t *mask, float h,
                   const float *steps, double *g)
{
    float *hx = xmalloc(n * sizeof *hx);
    get(hx, x, n);
    g_run = g_fd_be;
    for (size_t i = 0; i < n; i++) {
        g[i] = 0.0;
        if (mask && !mask[i]) continue;
        float s = steps ? steps[i] : h;
        float x0 = hx[i], xp = x0 + s, xm = x0 - s;
        put(x + i, &xp, 1);
        double lp = eval_loss(l);
        put(x + i, &xm, 1);
        double lm = eval_loss(l);
        put(x + i, &x0, 1);
        g[i] = (lp - lm) / ((double)xp - (double)xm);
    }
    g_run = g_be;
    free(hx);
}

void fd_grad(loss_fn *l, float *x, size_t n, const uint8_t *mask, float h, double *g)
{
    fd_grad_steps(l, x, n, mask, h, NULL, g);
}

double *random_weights(ws_test_rng *rng, const uint8_t *mask, size_t n)
{
    double *r = xmalloc(n * sizeof *r);
    for (size_t i = 0; i < n; i++) {
        if (mask && !mask[i]) {
            r[i] = 0.0;
            continue;
        }
        double v = ws_test_normal(rng);
        r[i] = v == 0.0 ? 0.5 : v;
    }
    return r;
}
