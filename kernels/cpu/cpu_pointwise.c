/* cpu_pointwise.c — element-wise ops: GELU, residual add, sigmoid, BCE, scaling. */
#include <math.h>
#include <omp.h>

#include "cpu_internal.h"
#include "cpu_math.h"
#include "cpu_par.h"
#include "kernels/op_constants.h"

/* GELU, tanh form: x/2·(1 + tanh u) with u = √(2/π)(x + 0.044715x³), computed as
 * x·σ(2u) — the same function, without tanh's cancellation and vectorisable. */
/* Elements [lo, hi) of GELU forward and backward: one thread's share, in
 * functions of their own so that they are built per x86-64 level (WS_CPU_CLONES). */
WS_CPU_CLONES static void gelu_fwd(float *out, const float *in, size_t lo, size_t hi)
{
#pragma omp simd
    for (size_t i = lo; i < hi; i++) {
        float x = in[i];
        out[i] = x * ws_sigmoidf(2.0f * WS_GELU_K * (x + WS_GELU_C * x * x * x));
    }
}

WS_CPU_CLONES static void gelu_bwd(float *din, const float *in, const float *dout, size_t lo,
                                   size_t hi)
{
#pragma omp simd
    for (size_t i = lo; i < hi; i++) {
        float x = in[i];
        float s = ws_sigmoidf(2.0f * WS_GELU_K * (x + WS_GELU_C * x * x * x));
        float du = 2.0f * WS_GELU_K * (1.0f + 3.0f * WS_GELU_C * x * x);
        din[i] += (s + x * s * (1.0f - s) * du) * dout[i];
    }
}

/* The calling thread's share of n elements (all of them outside a parallel region). */
static void share(size_t n, size_t *lo, size_t *hi)
{
    size_t t = (size_t)omp_get_thread_num(), nt = (size_t)omp_get_num_threads();
    *lo = n * t / nt, *hi = n * (t + 1) / nt;
}

ws_status ws_cpu_gelu_forward(ws_backend *be, float *out, const float *in, size_t n)
{
    WS_CPU_REGION(ws_cpu_threads_for(be, n), {
        size_t lo, hi;
        share(n, &lo, &hi);
        gelu_fwd(out, in, lo, hi);
    });
    return WS_OK;
}

ws_status ws_cpu_gelu_backward(ws_backend *be, float *din, const float *in, const float *dout,
                               size_t n)
{
    WS_CPU_REGION(ws_cpu_threads_for(be, n), {
        size_t lo, hi;
        share(n, &lo, &hi);
        gelu_bwd(din, in, dout, lo, hi);
    });
    return WS_OK;
}

ws_status ws_cpu_add_forward(ws_backend *be, float *out, const float *a, const float *b,
                             size_t n)
{
    /* simd: out may be a or b (in place), element by element; unmarked, the
     * outlined loop was scalar */
    int threads = ws_cpu_threads_for(be, n);
    WS_CPU_FOR_SIMD(threads, for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];);
    return WS_OK;
}

ws_status ws_cpu_add_backward(ws_backend *be, float *da, float *db, const float *dout,
                              size_t n)
{
    int threads = ws_cpu_threads_for(be, n);
    if (da) WS_CPU_FOR_SIMD(threads, for (size_t i = 0; i < n; i++) da[i] += dout[i];);
    if (db) WS_CPU_FOR_SIMD(threads, for (size_t i = 0; i < n; i++) db[i] += dout[i];);
    return WS_OK;
}

static float sigmoid_precise(float x)
{
    /* Two branches so exp never overflows. */
    if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}

ws_status ws_cpu_sigmoid(ws_backend *be, float *out, const float *logits, size_t n)
{
    (void)be;
    for (size_t i = 0; i < n; i++) out[i] = sigmoid_precise(logits[i]);
    return WS_OK;
}

ws_status ws_cpu_bce_forward(ws_backend *be, float *loss_out, const float *logits,
                             const float *labels, size_t n, float scale)
{
    (void)be;
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (labels[i] < 0.0f) continue;
        float x = logits[i];
        /* log(1 + e^-|x|) + max(x, 0) − x·y: stable for any x */
        sum += (double)(fmaxf(x, 0.0f) - x * labels[i] + log1pf(expf(-fabsf(x))));
    }
    loss_out[0] = (float)(sum * scale);
    return WS_OK;
}

ws_status ws_cpu_bce_backward(ws_backend *be, float *dlogits, const float *logits,
                              const float *labels, size_t n, float scale)
{
    (void)be;
    for (size_t i = 0; i < n; i++) {
        if (labels[i] < 0.0f) continue;
        dlogits[i] += scale * (sigmoid_precise(logits[i]) - labels[i]);
    }
    return WS_OK;
}

ws_status ws_cpu_sum_squares(ws_backend *be, float *out, const float *x, size_t n)
{
    double sum = 0.0;
    int threads = ws_cpu_threads_for(be, n);
    WS_CPU_FOR(threads, reduction(+ : sum),
               for (size_t i = 0; i < n; i++) sum += (double)x[i] * x[i];);
    out[0] = (float)sum;
    return WS_OK;
}

ws_status ws_cpu_scale(ws_backend *be, float *x, float s, size_t n)
{
    ws_cpu_packs_forget(x, n * sizeof *x);
    WS_CPU_FOR(ws_cpu_threads_for(be, n), , for (size_t i = 0; i < n; i++) x[i] *= s;);
    return WS_OK;
}
