/* cpu_norm.c — LayerNorm forward/backward over rows (eps 1e-5, biased variance). */
#include <math.h>

#include "cpu_internal.h"
#include "cpu_par.h"
#include "kernels/op_constants.h"

ws_status ws_cpu_layernorm_forward(ws_backend *be, float *out, float *mean, float *rstd,
                                   const float *in, const float *gain, const float *bias, int n,
                                   int c)
{
    WS_CPU_FOR(n >= 64 ? ws_cpu_threads(be) : 1, , for (int r = 0; r < n; r++) {
        const float *x = in + (long)r * c;
        float *y = out + (long)r * c;
        float m = 0.0f;
        _Pragma("omp simd reduction(+ : m)")
        for (int i = 0; i < c; i++) m += x[i];
        m /= (float)c;
        float v = 0.0f;
        _Pragma("omp simd reduction(+ : v)")
        for (int i = 0; i < c; i++) {
            float dx = x[i] - m;
            v += dx * dx;
        }
        v /= (float)c;
        float s = 1.0f / sqrtf(v + WS_LN_EPS);
        _Pragma("omp simd") /* y[i] needs x[i] alone (in place is fine); unmarked, a scalar loop */
        for (int i = 0; i < c; i++) y[i] = (x[i] - m) * s * gain[i] + bias[i];
        mean[r] = m;
        rstd[r] = s;
    });
    return WS_OK;
}

ws_status ws_cpu_layernorm_backward(ws_backend *be, float *din, float *dgain, float *dbias,
                                    const float *dout, const float *in, const float *gain,
                                    const float *mean, const float *rstd, int n, int c)
{
    /* din: rows are independent, so threads split rows. */
    if (din) {
        WS_CPU_FOR(n >= 64 ? ws_cpu_threads(be) : 1, , for (int r = 0; r < n; r++) {
            const float *x = in + (long)r * c, *dy = dout + (long)r * c;
            float *dx = din + (long)r * c;
            float m = mean[r], s = rstd[r];
            float sum_g = 0.0f, sum_gx = 0.0f;
            _Pragma("omp simd reduction(+ : sum_g, sum_gx)")
            for (int i = 0; i < c; i++) {
                float g = dy[i] * gain[i];
                sum_g += g;
                sum_gx += g * (x[i] - m) * s;
            }
            sum_g /= (float)c;
            sum_gx /= (float)c;
            /* dx[i] needs the row's i-th elements alone; unmarked, a scalar loop */
            _Pragma("omp simd")
            for (int i = 0; i < c; i++) {
                float xhat = (x[i] - m) * s;
                dx[i] += (dy[i] * gain[i] - sum_g - xhat * sum_gx) * s;
            }
        });
    }
    /* dgain/dbias reduce over rows: threads split columns. */
    int threads = c >= 256 ? ws_cpu_threads(be) : 1;
    WS_CPU_FOR(threads, , for (int t = 0; t < threads; t++) {
        int i0 = c * t / threads, i1 = c * (t + 1) / threads;
        for (int r = 0; r < n; r++) {
            const float *x = in + (long)r * c, *dy = dout + (long)r * c;
            float m = mean[r], s = rstd[r];
            /* one loop each, marked: with the tests inside, both were scalar */
            if (dgain)
                _Pragma("omp simd")
                for (int i = i0; i < i1; i++) dgain[i] += dy[i] * (x[i] - m) * s;
            if (dbias)
                _Pragma("omp simd")
                for (int i = i0; i < i1; i++) dbias[i] += dy[i];
        }
    });
    return WS_OK;
}
