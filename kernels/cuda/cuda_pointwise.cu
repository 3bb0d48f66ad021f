/* cuda_pointwise.cu — element-wise ops (fill, GELU, residual add, sigmoid, BCE,
 * scaling) and the two reductions (BCE loss, sum of squares), which sum in double
 * as the CPU backend does: per-thread, per-block, then one block over the block
 * partials — a fixed order, no atomics. */
#include "cuda_internal.h"
#include "kernels/op_constants.h"

#define WS_THREADS 256
#define WS_REDUCE_BLOCKS 512 /* most partials a reduction makes */

#define GRID_STRIDE(i, n)                                                   \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); \
         i += (size_t)gridDim.x * blockDim.x)

__global__ void k_fill(float *dst, float value, size_t n)
{
    GRID_STRIDE(i, n) dst[i] = value;
}

/* x·σ(2u), u = √(2/π)(x + 0.044715x³): the tanh form of GELU, as the CPU computes it. */
static __device__ __forceinline__ float gelu_sig(float x)
{
    return 1.0f / (1.0f + expf(-(2.0f * WS_GELU_K * (x + WS_GELU_C * x * x * x))));
}

__global__ void k_gelu_forward(float *out, const float *in, size_t n)
{
    GRID_STRIDE(i, n)
    {
        float x = in[i];
        out[i] = x * gelu_sig(x);
    }
}

__global__ void k_gelu_backward(float *din, const float *in, const float *dout, size_t n)
{
    GRID_STRIDE(i, n)
    {
        float x = in[i];
        float s = gelu_sig(x);
        float du = 2.0f * WS_GELU_K * (1.0f + 3.0f * WS_GELU_C * x * x);
        din[i] += (s + x * s * (1.0f - s) * du) * dout[i];
    }
}

__global__ void k_add_forward(float *out, const float *a, const float *b, size_t n)
{
    GRID_STRIDE(i, n) out[i] = a[i] + b[i];
}

__global__ void k_add_backward(float *da, float *db, const float *dout, size_t n)
{
    GRID_STRIDE(i, n)
    {
        if (da) da[i] += dout[i];
        if (db) db[i] += dout[i];
    }
}

static __device__ __forceinline__ float sigmoid_precise(float x)
{
    /* Two branches so exp never overflows. */
    if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}

__global__ void k_sigmoid(float *out, const float *logits, size_t n)
{
    GRID_STRIDE(i, n) out[i] = sigmoid_precise(logits[i]);
}

__global__ void k_bce_backward(float *dlogits, const float *logits, const float *labels,
                               size_t n, float scale)
{
    GRID_STRIDE(i, n)
    {
        if (labels[i] < 0.0f) continue;
        dlogits[i] += scale * (sigmoid_precise(logits[i]) - labels[i]);
    }
}

__global__ void k_scale(float *x, float s, size_t n)
{
    GRID_STRIDE(i, n) x[i] *= s;
}

/* Sum of v over the block; the result is valid in thread 0. */
static __device__ double block_sum(double v)
{
    __shared__ double warp_part[WS_THREADS / WS_WARP];
    int lane = threadIdx.x % WS_WARP, warp = threadIdx.x / WS_WARP;
    v = ws_warp_sum_d(v);
    if (lane == 0) warp_part[warp] = v;
    __syncthreads();
    v = 0.0;
    if (warp == 0) {
        if (lane < (int)(blockDim.x / WS_WARP)) v = warp_part[lane];
        v = ws_warp_sum_d(v);
    }
    return v;
}

/* partial[block] = Σ over the block's grid-stride share of log-loss terms. */
__global__ void k_bce_partial(double *partial, const float *logits, const float *labels,
                              size_t n)
{
    double sum = 0.0;
    GRID_STRIDE(i, n)
    {
        if (labels[i] < 0.0f) continue;
        float x = logits[i];
        /* log(1 + e^-|x|) + max(x, 0) − x·y: stable for any x */
        sum += (double)(fmaxf(x, 0.0f) - x * labels[i] + log1pf(expf(-fabsf(x))));
    }
    sum = block_sum(sum);
    if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}

__global__ void k_sumsq_partial(double *partial, const float *x, size_t n)
{
    double sum = 0.0;
    GRID_STRIDE(i, n) sum += (double)x[i] * x[i];
    sum = block_sum(sum);
    if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}

/* out[0] = (float)(scale · Σ partial), one block. */
__global__ void k_reduce_final(float *out, const double *partial, int n_partial, float scale)
{
    double sum = 0.0;
    for (int i = threadIdx.x; i < n_partial; i += blockDim.x) sum += partial[i];
    sum = block_sum(sum);
    if (threadIdx.x == 0) out[0] = (float)(sum * scale);
}

/* Blocks of a reduction over n: enough to fill the GPU, few enough for one final block. */
static unsigned reduce_blocks(size_t n, const ws_cuda *c)
{
    unsigned b = ws_cuda_blocks(n, WS_THREADS, c);
    return b > WS_REDUCE_BLOCKS ? WS_REDUCE_BLOCKS : b;
}

#define LAUNCH(c, kernel, n, ...)                                                       \
    do {                                                                                \
        kernel<<<ws_cuda_blocks((n), WS_THREADS, (c)), WS_THREADS, 0, (c)->stream>>>(__VA_ARGS__); \
        WS_CUDA_LAUNCHED((c), #kernel);                                                 \
    } while (0)

ws_status ws_cuda_fill(ws_backend *be, float *dst, float value, size_t n)
{
    if (!n) return WS_OK;
    WS_CUDA_ENTER(be, c);
    if (value == 0.0f && !signbit(value)) {
        WS_CUDA_CHECK(c, cudaMemsetAsync(dst, 0, n * sizeof *dst, c->stream));
        return WS_OK;
    }
    LAUNCH(c, k_fill, n, dst, value, n);
    return WS_OK;
}

ws_status ws_cuda_gelu_forward(ws_backend *be, float *out, const float *in, size_t n)
{
    if (!n) return WS_OK;
    WS_CUDA_ENTER(be, c);
    LAUNCH(c, k_gelu_forward, n, out, in, n);
    return WS_OK;
}

ws_status ws_cuda_gelu_backward(ws_backend *be, float *din, const float *in, const float *dout,
                                size_t n)
{
    if (!n) return WS_OK;
    WS_CUDA_ENTER(be, c);
    LAUNCH(c, k_gelu_backward, n, din, in, dout, n);
    return WS_OK;
}

ws_status ws_cuda_add_forward(ws_backend *be, float *out, const float *a, const float *b,
                              size_t n)
{
    if (!n) return WS_OK;
    WS_CUDA_ENTER(be, c);
    LAUNCH(c, k_add_forward, n, out, a, b, n);
    return WS_OK;
}

ws_status ws_cuda_add_backward(ws_backend *be, float *da, float *db, const float *dout,
                               size_t n)
{
    if (!n || (!da && !db)) return WS_OK;
    WS_CUDA_ENTER(be, c);
    LAUNCH(c, k_add_backward, n, da, db, dout, n);
    return WS_OK;
}

ws_status ws_cuda_sigmoid(ws_backend *be, float *out, const float *logits, size_t n)
{
    if (!n) return WS_OK;
    WS_CUDA_ENTER(be, c);
    LAUNCH(c, k_sigmoid, n, out, logits, n);
    return WS_OK;
}

ws_status ws_cuda_bce_forward(ws_backend *be, float *loss_out, const float *logits,
                              const float *labels, size_t n, float scale)
{
    WS_CUDA_ENTER(be, c);
    unsigned blocks = reduce_blocks(n, c);
    void *partial;
    WS_TRY(ws_cuda_scratch(c, blocks * sizeof(double), &partial));
    k_bce_partial<<<blocks, WS_THREADS, 0, c->stream>>>((double *)partial, logits, labels, n);
    WS_CUDA_LAUNCHED(c, "k_bce_partial");
    k_reduce_final<<<1, WS_THREADS, 0, c->stream>>>(loss_out, (const double *)partial,
                                                    (int)blocks, scale);
    WS_CUDA_LAUNCHED(c, "k_reduce_final");
    return WS_OK;
}

ws_status ws_cuda_bce_backward(ws_backend *be, float *dlogits, const float *logits,
                               const float *labels, size_t n, float scale)
{
    if (!n) return WS_OK;
    WS_CUDA_ENTER(be, c);
    LAUNCH(c, k_bce_backward, n, dlogits, logits, labels, n, scale);
    return WS_OK;
}

ws_status ws_cuda_sum_squares(ws_backend *be, float *out, const float *x, size_t n)
{
    WS_CUDA_ENTER(be, c);
    unsigned blocks = reduce_blocks(n, c);
    void *partial;
    WS_TRY(ws_cuda_scratch(c, blocks * sizeof(double), &partial));
    k_sumsq_partial<<<blocks, WS_THREADS, 0, c->stream>>>((double *)partial, x, n);
    WS_CUDA_LAUNCHED(c, "k_sumsq_partial");
    k_reduce_final<<<1, WS_THREADS, 0, c->stream>>>(out, (const double *)partial, (int)blocks,
                                                    1.0f);
    WS_CUDA_LAUNCHED(c, "k_reduce_final");
    return WS_OK;
}

ws_status ws_cuda_scale(ws_backend *be, float *x, float s, size_t n)
{
    if (!n) return WS_OK;
    WS_CUDA_ENTER(be, c);
    LAUNCH(c, k_scale, n, x, s, n);
    return WS_OK;
}
