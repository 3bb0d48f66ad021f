/* cuda_norm.cu — LayerNorm forward/backward (eps 1e-5, biased variance), one warp
 * per row; the dgain/dbias reduction over rows gives each column one writer. */
#include "cuda_internal.h"
#include "kernels/op_constants.h"

#define WS_LN_WARPS 4 /* rows per block */

__global__ void k_ln_forward(float *out, float *mean, float *rstd, const float *in,
                             const float *gain, const float *bias, int n, int c)
{
    int row = blockIdx.x * WS_LN_WARPS + threadIdx.x / WS_WARP, lane = threadIdx.x % WS_WARP;
    if (row >= n) return; /* whole warps leave together */
    const float *x = in + (size_t)row * c;
    float *y = out + (size_t)row * c;
    float m = 0.0f;
    for (int i = lane; i < c; i += WS_WARP) m += x[i];
    m = ws_warp_sum(m) / (float)c;
    float v = 0.0f;
    for (int i = lane; i < c; i += WS_WARP) {
        float dx = x[i] - m;
        v += dx * dx;
    }
    v = ws_warp_sum(v) / (float)c;
    float s = 1.0f / sqrtf(v + WS_LN_EPS);
    for (int i = lane; i < c; i += WS_WARP) y[i] = (x[i] - m) * s * gain[i] + bias[i];
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = s;
    }
}

__global__ void k_ln_backward_in(float *din, const float *dout, const float *in,
                                 const float *gain, const float *mean, const float *rstd, int n,
                                 int c)
{
    int row = blockIdx.x * WS_LN_WARPS + threadIdx.x / WS_WARP, lane = threadIdx.x % WS_WARP;
    if (row >= n) return;
    const float *x = in + (size_t)row * c, *dy = dout + (size_t)row * c;
    float *dx = din + (size_t)row * c;
    float m = mean[row], s = rstd[row];
    float sum_g = 0.0f, sum_gx = 0.0f;
    for (int i = lane; i < c; i += WS_WARP) {
        float g = dy[i] * gain[i];
        sum_g += g;
        sum_gx += g * (x[i] - m) * s;
    }
    sum_g = ws_warp_sum(sum_g) / (float)c;
    sum_gx = ws_warp_sum(sum_gx) / (float)c;
    for (int i = lane; i < c; i += WS_WARP) {
        float xhat = (x[i] - m) * s;
        dx[i] += (dy[i] * gain[i] - sum_g - xhat * sum_gx) * s;
    }
}

/* dgain[i] += Σ_r dy·x̂, dbias[i] += Σ_r dy: a block owns 32 columns; its 32 rows of
 * threads stride down the rows, then one thread per column adds the partials. */
__global__ void k_ln_backward_params(float *dgain, float *dbias, const float *dout,
                                     const float *in, const float *mean, const float *rstd,
                                     int n, int c)
{
    __shared__ float pg[WS_WARP][WS_WARP + 1], pb[WS_WARP][WS_WARP + 1];
    int col = blockIdx.x * WS_WARP + threadIdx.x;
    float sg = 0.0f, sb = 0.0f;
    if (col < c)
        for (int r = threadIdx.y; r < n; r += blockDim.y) {
            float dy = dout[(size_t)r * c + col];
            sg += dy * (in[(size_t)r * c + col] - mean[r]) * rstd[r];
            sb += dy;
        }
    pg[threadIdx.y][threadIdx.x] = sg;
    pb[threadIdx.y][threadIdx.x] = sb;
    __syncthreads();
    if (threadIdx.y == 0 && col < c) {
        float tg = 0.0f, tb = 0.0f;
        for (int y = 0; y < (int)blockDim.y; y++) {
            tg += pg[y][threadIdx.x];
            tb += pb[y][threadIdx.x];
        }
        if (dgain) dgain[col] += tg;
        if (dbias) dbias[col] += tb;
    }
}

ws_status ws_cuda_layernorm_forward(ws_backend *be, float *out, float *mean, float *rstd,
                                    const float *in, const float *gain, const float *bias, int n,
                                    int c)
{
    if (n <= 0 || c <= 0) return WS_OK;
    WS_CUDA_ENTER(be, ctx);
    unsigned grid = (unsigned)((n + WS_LN_WARPS - 1) / WS_LN_WARPS);
    k_ln_forward<<<grid, WS_LN_WARPS * WS_WARP, 0, ctx->stream>>>(out, mean, rstd, in, gain, bias,
                                                                  n, c);
    WS_CUDA_LAUNCHED(ctx, "k_ln_forward");
    return WS_OK;
}

ws_status ws_cuda_layernorm_backward(ws_backend *be, float *din, float *dgain, float *dbias,
                                     const float *dout, const float *in, const float *gain,
                                     const float *mean, const float *rstd, int n, int c)
{
    if (n <= 0 || c <= 0) return WS_OK;
    WS_CUDA_ENTER(be, ctx);
    if (din) {
        unsigned grid = (unsigned)((n + WS_LN_WARPS - 1) / WS_LN_WARPS);
        k_ln_backward_in<<<grid, WS_LN_WARPS * WS_WARP, 0, ctx->stream>>>(din, dout, in, gain,
                                                                          mean, rstd, n, c);
        WS_CUDA_LAUNCHED(ctx, "k_ln_backward_in");
    }
    if (dgain || dbias) {
        dim3 block(WS_WARP, WS_WARP);
        unsigned grid = (unsigned)((c + WS_WARP - 1) / WS_WARP);
        k_ln_backward_params<<<grid, block, 0, ctx->stream>>>(dgain, dbias, dout, in, mean, rstd,
                                                             n, c);
        WS_CUDA_LAUNCHED(ctx, "k_ln_backward_params");
    }
    return WS_OK;
}
