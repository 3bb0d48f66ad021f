/* cuda_internal.h — what the CUDA backend's .cu files share: the context, the
 * checking macros, launch helpers and the op entry points. CUDA C++ only. */
#ifndef WS_CUDA_INTERNAL_H
#define WS_CUDA_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda_backend.h"

typedef struct {
    ws_backend_ops ops; /* per-backend copy of the table: no shared mutable state */
    int device;
    unsigned flags;      /* WS_CUDA_TF32 */
    int mem_pool;        /* cudaMallocAsync available (stream-ordered allocator) */
    int sync_check;      /* WS_CUDA_SYNC_CHECK=1: synchronise after every launch */
    int n_sm;
    cudaStream_t stream;
    cublasHandle_t blas;
    /* Stream-ordered scratch (attention backward's per-row dot products, reduction
     * partials), grown on demand, freed with the backend. */
    void *scratch;
    size_t scratch_bytes;
    char last_error[256];
} ws_cuda;

static inline ws_cuda *ws_cuda_of(ws_backend *be) { return (ws_cuda *)be->impl; }

/* Records a failure (file:line, the call, the library's message) in the context and
 * on stderr; returns code. */
ws_status ws_cuda_fail(ws_cuda *c, ws_status code, const char *call, const char *file, int line,
                       const char *msg);
/* After a kernel launch: the launch error (bad configuration, no kernel image for
 * this GPU) and, with sync_check, the kernel's own faults. */
ws_status ws_cuda_after_launch(ws_cuda *c, const char *what, const char *file, int line);
/* Makes the context's device current on the calling thread. */
ws_status ws_cuda_bind(ws_cuda *c);
/* A device buffer of at least bytes, valid for work queued on c->stream until the
 * next call (contents undefined). */
ws_status ws_cuda_scratch(ws_cuda *c, size_t bytes, void **out);

#define WS_CUDA_CHECK(c, call)                                                              \
    do {                                                                                    \
        cudaError_t ws_ce_ = (call);                                                        \
        if (ws_ce_ != cudaSuccess)                                                          \
            return ws_cuda_fail((c), ws_ce_ == cudaErrorMemoryAllocation ? WS_ERR_NOMEM     \
                                                                         : WS_ERR_BACKEND,  \
                                #call, __FILE__, __LINE__, cudaGetErrorString(ws_ce_));     \
    } while (0)

#define WS_CUBLAS_CHECK(c, call)                                                            \
    do {                                                                                    \
        cublasStatus_t ws_bs_ = (call);                                                     \
        if (ws_bs_ != CUBLAS_STATUS_SUCCESS)                                                \
            return ws_cuda_fail((c), ws_bs_ == CUBLAS_STATUS_ALLOC_FAILED ? WS_ERR_NOMEM     \
                                                                          : WS_ERR_BACKEND, \
                                #call, __FILE__, __LINE__, cublasGetStatusString(ws_bs_));  \
    } while (0)

/* Place right after a <<<...>>> launch. */
#define WS_CUDA_LAUNCHED(c, what) WS_TRY(ws_cuda_after_launch((c), (what), __FILE__, __LINE__))

/* Enter an op: the context, with its device current. */
#define WS_CUDA_ENTER(be, c)        \
    ws_cuda *c = ws_cuda_of(be);    \
    WS_TRY(ws_cuda_bind(c))

#define WS_WARP 32
#define WS_FULL_MASK 0xffffffffu

/* Blocks for n elements at `threads` per block, capped for grid-stride loops. */
static inline unsigned ws_cuda_blocks(size_t n, unsigned threads, const ws_cuda *c)
{
    size_t b = (n + threads - 1) / threads;
    size_t cap = (size_t)(c->n_sm > 0 ? c->n_sm : 80) * 32;
    if (b > cap) b = cap;
    return b ? (unsigned)b : 1u;
}

static __device__ __forceinline__ float ws_warp_sum(float v)
{
    for (int o = WS_WARP / 2; o > 0; o >>= 1) v += __shfl_xor_sync(WS_FULL_MASK, v, o);
    return v;
}

static __device__ __forceinline__ float ws_warp_max(float v)
{
    for (int o = WS_WARP / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(WS_FULL_MASK, v, o));
    return v;
}

static __device__ __forceinline__ double ws_warp_sum_d(double v)
{
    for (int o = WS_WARP / 2; o > 0; o >>= 1) v += __shfl_xor_sync(WS_FULL_MASK, v, o);
    return v;
}

/* The ops of backend_ops.h, ws_cuda_<name> (one file per family), wired into
 * the table by cuda_backend.cu. */
#define WS_OP(name, params) ws_status ws_cuda_##name params;
#include "kernels/backend_ops.h"
#undef WS_OP
/* fill lives in cuda_pointwise.cu, next to the other element-wise kernels. */
ws_status ws_cuda_fill(ws_backend *be, float *dst, float value, size_t n);

#endif
