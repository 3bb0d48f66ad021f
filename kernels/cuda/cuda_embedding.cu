/* cuda_embedding.cu — embedding gather-sum and its scatter-add gradient; symbol codes. */
#include "kernels/symcode.h"
#include "cuda_internal.h"

#define WS_THREADS 256

/* One thread per output element: adds the row's k table entries in id order (the
 * CPU backend's order, so the sums agree bit for bit). */
__global__ void k_embedding_forward(float *out, const float *table, const int32_t *ids,
                                    int n_rows, int k, int d, int accumulate)
{
    size_t total = (size_t)n_rows * d;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / d, c = i % d;
        float acc = accumulate ? out[i] : 0.0f;
        for (int j = 0; j < k; j++) {
            int32_t id = ids[r * k + j];
            if (id >= 0) acc += table[(size_t)id * d + c];
        }
        out[i] = acc;
    }
}

/* One thread per (row, slot, column): rows share ids, so the adds are atomic (and
 * their order, hence the last bits of a shared row's gradient, varies run to run). */
__global__ void k_embedding_backward(float *dtable, const float *dout, const int32_t *ids,
                                     int n_rows, int k, int d)
{
    size_t total = (size_t)n_rows * k * d;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t rj = i / d, c = i % d;
        int32_t id = ids[rj];
        if (id < 0) continue;
        atomicAdd(&dtable[(size_t)id * d + c], dout[(rj / k) * d + c]);
    }
}

ws_status ws_cuda_embedding_forward(ws_backend *be, float *out, const float *table,
                                    const int32_t *ids, int n_rows, int k, int d, int accumulate)
{
    if (n_rows <= 0 || d <= 0) return WS_OK;
    WS_CUDA_ENTER(be, c);
    size_t total = (size_t)n_rows * d;
    k_embedding_forward<<<ws_cuda_blocks(total, WS_THREADS, c), WS_THREADS, 0, c->stream>>>(
        out, table, ids, n_rows, k > 0 ? k : 0, d, accumulate);
    WS_CUDA_LAUNCHED(c, "k_embedding_forward");
    return WS_OK;
}

ws_status ws_cuda_embedding_backward(ws_backend *be, float *dtable, const float *dout,
                                     const int32_t *ids, int n_rows, int k, int d)
{
    if (n_rows <= 0 || k <= 0 || d <= 0) return WS_OK;
    WS_CUDA_ENTER(be, c);
    size_t total = (size_t)n_rows * k * d;
    k_embedding_backward<<<ws_cuda_blocks(total, WS_THREADS, c), WS_THREADS, 0, c->stream>>>(
        dtable, dout, ids, n_rows, k, d);
    WS_CUDA_LAUNCHED(c, "k_embedding_backward");
    return WS_OK;
}

/* One thread per output element: the row's slots in order, as the CPU backend. */
__global__ void k_symcode_forward(float *out, const uint64_t *hashes, int n_rows, int k, int d,
                                  int accumulate)
{
    size_t total = (size_t)n_rows * d;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / d;
        int c = (int)(i % d);
        float acc = accumulate ? out[i] : 0.0f;
        for (int j = 0; j < k; j++) {
            uint64_t h = hashes[r * k + j];
            if (h) acc += ws_sym_code(h, (c + j % d) % d);
        }
        out[i] = acc;
    }
}

ws_status ws_cuda_symcode_forward(ws_backend *be, float *out, const uint64_t *hashes, int n_rows,
                                  int k, int d, int accumulate)
{
    if (n_rows <= 0 || d <= 0) return WS_OK;
    WS_CUDA_ENTER(be, c);
    size_t total = (size_t)n_rows * d;
    k_symcode_forward<<<ws_cuda_blocks(total, WS_THREADS, c), WS_THREADS, 0, c->stream>>>(
        out, hashes, n_rows, k > 0 ? k : 0, d, accumulate);
    WS_CUDA_LAUNCHED(c, "k_symcode_forward");
    return WS_OK;
}
