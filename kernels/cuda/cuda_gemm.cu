/* cuda_gemm.cu — matrix products on cuBLAS (row-major on a column-major library),
 * linear layers, and the bias column sums.
 *
 * Row-major X (r×c, leading dimension ld) is, to cuBLAS, the column-major c×r
 * matrix Xᵀ with the same ld. So row-major C = op(A)·op(B) is computed as the
 * column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: swap the operands and m/n, keep each flag. */
#include <stdlib.h>

#include "cuda_internal.h"

/* C_b = beta·C_b (0 where beta == 0, as BLAS: C is not read), for k == 0. */
__global__ void k_scale_matrix(float *c, int m, int n, int ldc, long long stride, int batch,
                               float beta)
{
    size_t total = (size_t)batch * m * n;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t b = i / ((size_t)m * n), rem = i % ((size_t)m * n);
        float *x = c + (long long)b * stride + (long long)(rem / n) * ldc + rem % n;
        *x = beta == 0.0f ? 0.0f : beta * *x;
    }
}

/* out[r, :] = bias, before a product with beta = 1 adds in·Wᵀ. */
__global__ void k_bias_rows(float *out, const float *bias, int n, int cols)
{
    size_t total = (size_t)n * cols;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = bias[i % cols];
}

/* dbias[col] += Σ_r dout[r, col]. A block owns 32 columns (threadIdx.x) and its 32
 * rows of threads stride down them; a shared-memory pass sums the 32 partials, so
 * every column has one writer: no atomics, a fixed summation order. */
__global__ void k_col_sums(float *dbias, const float *dout, int n, int cols)
{
    __shared__ float part[WS_WARP][WS_WARP + 1];
    int col = blockIdx.x * WS_WARP + threadIdx.x;
    float s = 0.0f;
    if (col < cols)
        for (int r = threadIdx.y; r < n; r += blockDim.y) s += dout[(size_t)r * cols + col];
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && col < cols) {
        float t = 0.0f;
        for (int y = 0; y < (int)blockDim.y; y++) t += part[y][threadIdx.x];
        dbias[col] += t;
    }
}

static cublasOperation_t op_of(int trans) { return trans ? CUBLAS_OP_T : CUBLAS_OP_N; }

ws_status ws_cuda_gemm(ws_backend *be, const ws_gemm_args *g)
{
    if (g->m <= 0 || g->n <= 0 || g->batch <= 0) return WS_OK;
    WS_CUDA_ENTER(be, c);
    if (g->k <= 0) { /* an empty sum: only the beta scaling remains */
        if (g->beta == 1.0f) return WS_OK;
        size_t total = (size_t)g->batch * g->m * g->n;
        k_scale_matrix<<<ws_cuda_blocks(total, 256, c), 256, 0, c->stream>>>(
            g->c, g->m, g->n, g->ldc, g->stride_c, g->batch, g->beta);
        WS_CUDA_LAUNCHED(c, "k_scale_matrix");
        return WS_OK;
    }
    cublasOperation_t oa = op_of(g->trans_a), ob = op_of(g->trans_b);
    long c_span = (long)(g->m - 1) * g->ldc + g->n;
    if (g->batch == 1) {
        WS_CUBLAS_CHECK(c, cublasSgemm(c->blas, ob, oa, g->n, g->m, g->k, &g->alpha, g->b, g->ldb,
                                       g->a, g->lda, &g->beta, g->c, g->ldc));
    } else if (labs(g->stride_c) >= c_span) {
        WS_CUBLAS_CHECK(c, cublasSgemmStridedBatched(
                               c->blas, ob, oa, g->n, g->m, g->k, &g->alpha, g->b, g->ldb,
                               g->stride_b, g->a, g->lda, g->stride_a, &g->beta, g->c, g->ldc,
                               g->stride_c, g->batch));
    } else {
        /* C blocks overlap (stride 0: every batch accumulates into one dA): a batched
         * call would race, so the batches run one after another on the stream. */
        for (int b = 0; b < g->batch; b++)
            WS_CUBLAS_CHECK(c, cublasSgemm(c->blas, ob, oa, g->n, g->m, g->k, &g->alpha,
                                           g->b + (long)b * g->stride_b, g->ldb,
                                           g->a + (long)b * g->stride_a, g->lda, &g->beta,
                                           g->c + (long)b * g->stride_c, g->ldc));
    }
    return WS_OK;
}

ws_status ws_cuda_linear_forward(ws_backend *be, float *out, const float *in, const float *w,
                                 const float *bias, int n, int in_dim, int out_dim)
{
    if (n <= 0 || out_dim <= 0) return WS_OK;
    WS_CUDA_ENTER(be, c);
    float beta = 0.0f;
    if (bias) {
        size_t total = (size_t)n * out_dim;
        k_bias_rows<<<ws_cuda_blocks(total, 256, c), 256, 0, c->stream>>>(out, bias, n, out_dim);
        WS_CUDA_LAUNCHED(c, "k_bias_rows");
        beta = 1.0f;
    }
    /* out[n, out] (+)= in[n, in] · W[out, in]ᵀ */
    ws_gemm_args g = {};
    g.trans_b = 1;
    g.m = n, g.n = out_dim, g.k = in_dim;
    g.alpha = 1.0f, g.beta = beta;
    g.a = in, g.lda = in_dim;
    g.b = w, g.ldb = in_dim;
    g.c = out, g.ldc = out_dim;
    g.batch = 1;
    return ws_cuda_gemm(be, &g);
}

ws_status ws_cuda_linear_backward(ws_backend *be, float *din, float *dw, float *dbias,
                                  const float *dout, const float *in, const float *w, int n,
                                  int in_dim, int out_dim)
{
    if (n <= 0) return WS_OK;
    WS_CUDA_ENTER(be, c);
    if (din) { /* din[n, in] += dout[n, out] · W[out, in] */
        ws_gemm_args g = {};
        g.m = n, g.n = in_dim, g.k = out_dim;
        g.alpha = 1.0f, g.beta = 1.0f;
        g.a = dout, g.lda = out_dim;
        g.b = w, g.ldb = in_dim;
        g.c = din, g.ldc = in_dim;
        g.batch = 1;
        WS_TRY(ws_cuda_gemm(be, &g));
    }
    if (dw) { /* dW[out, in] += doutᵀ · in */
        ws_gemm_args g = {};
        g.trans_a = 1;
        g.m = out_dim, g.n = in_dim, g.k = n;
        g.alpha = 1.0f, g.beta = 1.0f;
        g.a = dout, g.lda = out_dim;
        g.b = in, g.ldb = in_dim;
        g.c = dw, g.ldc = in_dim;
        g.batch = 1;
        WS_TRY(ws_cuda_gemm(be, &g));
    }
    if (dbias && out_dim > 0) {
        dim3 block(WS_WARP, WS_WARP);
        unsigned grid = (unsigned)((out_dim + WS_WARP - 1) / WS_WARP);
        k_col_sums<<<grid, block, 0, c->stream>>>(dbias, dout, n, out_dim);
        WS_CUDA_LAUNCHED(c, "k_col_sums");
    }
    return WS_OK;
}
