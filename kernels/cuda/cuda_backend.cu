/* cuda_backend.cu — the CUDA backend's context: device, one stream, a cuBLAS handle
 * bound to it, stream-ordered memory, copies, and the op table. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"

/* Allocation granularity: keeps every buffer 256-byte aligned, as cudaMalloc's are. */
#define WS_CUDA_ALIGN 256

ws_status ws_cuda_fail(ws_cuda *c, ws_status code, const char *call, const char *file, int line,
                       const char *msg)
{
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    if (c) {
        snprintf(c->last_error, sizeof c->last_error, "%s:%d: %s: %s", base, line, call, msg);
        fprintf(stderr, "worldstate cuda: %s\n", c->last_error);
    } else {
        fprintf(stderr, "worldstate cuda: %s:%d: %s: %s\n", base, line, call, msg);
    }
    return code;
}

ws_status ws_cuda_after_launch(ws_cuda *c, const char *what, const char *file, int line)
{
    /* A launch error (configuration, missing kernel image) is reported here; the
     * call is a cheap host-side query, so release builds check it too. */
    cudaError_t e = cudaGetLastError();
#ifndef NDEBUG
    /* Debug builds: with WS_CUDA_SYNC_CHECK=1, fault in the op that caused it. */
    if (e == cudaSuccess && c->sync_check) e = cudaStreamSynchronize(c->stream);
#endif
    if (e != cudaSuccess)
        return ws_cuda_fail(c, WS_ERR_BACKEND, what, file, line, cudaGetErrorString(e));
    return WS_OK;
}

ws_status ws_cuda_bind(ws_cuda *c)
{
    /* The current device is per host thread; a service may call from several. */
    WS_CUDA_CHECK(c, cudaSetDevice(c->device));
    return WS_OK;
}

static size_t round_up(size_t bytes)
{
    size_t r = (bytes + WS_CUDA_ALIGN - 1) & ~(size_t)(WS_CUDA_ALIGN - 1);
    return r ? r : WS_CUDA_ALIGN;
}

static ws_status raw_alloc(ws_cuda *c, size_t bytes, void **out)
{
    *out = NULL;
    if (c->mem_pool)
        WS_CUDA_CHECK(c, cudaMallocAsync(out, round_up(bytes), c->stream));
    else
        WS_CUDA_CHECK(c, cudaMalloc(out, round_up(bytes)));
    return WS_OK;
}

static ws_status raw_free(ws_cuda *c, void *p)
{
    if (!p) return WS_OK;
    if (c->mem_pool)
        WS_CUDA_CHECK(c, cudaFreeAsync(p, c->stream));
    else
        WS_CUDA_CHECK(c, cudaFree(p)); /* synchronises the device */
    return WS_OK;
}

ws_status ws_cuda_scratch(ws_cuda *c, size_t bytes, void **out)
{
    if (bytes > c->scratch_bytes) {
        /* Stream-ordered: work already queued keeps using the old buffer. */
        WS_TRY(raw_free(c, c->scratch));
        c->scratch = NULL;
        c->scratch_bytes = 0;
        size_t want = round_up(bytes + bytes / 4);
        WS_TRY(raw_alloc(c, want, &c->scratch));
        c->scratch_bytes = want;
    }
    *out = c->scratch;
    return WS_OK;
}

static void cuda_destroy(ws_backend *be)
{
    if (!be) return;
    ws_cuda *c = ws_cuda_of(be);
    if (c) {
        /* Teardown: report failures, but free everything that can be freed. */
        if (cudaSetDevice(c->device) != cudaSuccess) cudaGetLastError();
        if (c->stream) {
            if (c->scratch) (void)raw_free(c, c->scratch);
            if (cudaStreamSynchronize(c->stream) != cudaSuccess) cudaGetLastError();
        }
        if (c->blas) cublasDestroy(c->blas);
        if (c->stream) cudaStreamDestroy(c->stream);
        if (c->mem_pool) { /* hand the pool's cached, unused blocks back to the driver */
            cudaMemPool_t pool;
            if (cudaDeviceGetDefaultMemPool(&pool, c->device) != cudaSuccess ||
                cudaMemPoolTrimTo(pool, 0) != cudaSuccess)
                cudaGetLastError();
        }
        free(c);
    }
    free(be);
}

static ws_status cuda_alloc(ws_backend *be, size_t bytes, void **out)
{
    *out = NULL;
    WS_CUDA_ENTER(be, c);
    return raw_alloc(c, bytes, out);
}

static void cuda_release(ws_backend *be, void *p)
{
    if (!p) return;
    ws_cuda *c = ws_cuda_of(be);
    if (ws_cuda_bind(c) != WS_OK) return;
    (void)raw_free(c, p); /* a failure is recorded in last_error and on stderr */
}

static ws_status cuda_upload(ws_backend *be, void *dst, const void *src_host, size_t bytes)
{
    if (!bytes) return WS_OK;
    WS_CUDA_ENTER(be, c);
    /* From pageable memory the driver stages the data before returning, so the
     * caller may reuse src_host at once (pinned memory would need a sync). */
    WS_CUDA_CHECK(c, cudaMemcpyAsync(dst, src_host, bytes, cudaMemcpyHostToDevice, c->stream));
    return WS_OK;
}

static ws_status cuda_download(ws_backend *be, void *dst_host, const void *src, size_t bytes)
{
    WS_CUDA_ENTER(be, c);
    if (bytes)
        WS_CUDA_CHECK(c,
                      cudaMemcpyAsync(dst_host, src, bytes, cudaMemcpyDeviceToHost, c->stream));
    WS_CUDA_CHECK(c, cudaStreamSynchronize(c->stream));
    return WS_OK;
}

static ws_status cuda_copy(ws_backend *be, void *dst, const void *src, size_t bytes)
{
    if (!bytes || dst == src) return WS_OK;
    WS_CUDA_ENTER(be, c);
    uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;
    if (d < s + bytes && s < d + bytes) {
        /* Overlap (memmove semantics, as the CPU backend): go through scratch. */
        void *tmp;
        WS_TRY(ws_cuda_scratch(c, bytes, &tmp));
        WS_CUDA_CHECK(c, cudaMemcpyAsync(tmp, src, bytes, cudaMemcpyDeviceToDevice, c->stream));
        WS_CUDA_CHECK(c, cudaMemcpyAsync(dst, tmp, bytes, cudaMemcpyDeviceToDevice, c->stream));
        return WS_OK;
    }
    WS_CUDA_CHECK(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->stream));
    return WS_OK;
}

static ws_status cuda_sync(ws_backend *be)
{
    WS_CUDA_ENTER(be, c);
    WS_CUDA_CHECK(c, cudaStreamSynchronize(c->stream));
    return WS_OK;
}

static void fill_ops(ws_backend_ops *o)
{
    memset(o, 0, sizeof *o);
    o->name = "cuda";
    o->destroy = cuda_destroy;
    o->alloc = cuda_alloc;
    o->release = cuda_release;
    o->upload = cuda_upload;
    o->download = cuda_download;
    o->copy = cuda_copy;
    o->fill = ws_cuda_fill;
    o->sync = cuda_sync;
#define WS_OP(name, params) o->name = ws_cuda_##name;
#include "kernels/backend_ops.h"
#undef WS_OP
}

/* Runs one fill and reads it back: catches a GPU this build has no kernel image
 * for (or a broken driver) here, so ws_backend_auto can fall back to the CPU. */
static ws_status probe(ws_backend *be, ws_error *err)
{
    ws_cuda *c = ws_cuda_of(be);
    void *p = NULL;
    float got = 0.0f;
    ws_status st = cuda_alloc(be, sizeof(float), &p);
    if (st == WS_OK) st = ws_cuda_fill(be, (float *)p, 42.0f, 1);
    if (st == WS_OK) st = cuda_download(be, &got, p, sizeof got);
    cuda_release(be, p);
    if (st == WS_OK && got != 42.0f) st = WS_ERR_BACKEND;
    if (st != WS_OK)
        return ws_error_set(err, WS_ERR_UNSUPPORTED,
                            "cuda backend: device %d cannot run this build's kernels: %s",
                            c->device, c->last_error[0] ? c->last_error : "wrong result");
    return WS_OK;
}

static int env_flag(const char *name)
{
    const char *v = getenv(name);
    return v && v[0] && strcmp(v, "0") != 0;
}

/* Turns a failed CUDA/cuBLAS call during construction into err. */
#define WS_NEW_CHECK(cond, what, msg)                                                          \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            st = ws_error_set(err, WS_ERR_BACKEND, "cuda backend: %s failed: %s", (what), (msg)); \
            goto fail;                                                                         \
        }                                                                                      \
    } while (0)

ws_status ws_backend_cuda_new_ex(ws_backend **out, int device, unsigned flags, ws_error *err)
{
    *out = NULL;
    int n_dev = 0;
    cudaError_t e = cudaGetDeviceCount(&n_dev);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* not sticky: clear it */
        return ws_error_set(err, WS_ERR_UNSUPPORTED,
                            "cuda backend: no usable GPU (cudaGetDeviceCount: %s)",
                            cudaGetErrorString(e));
    }
    if (n_dev <= 0)
        return ws_error_set(err, WS_ERR_UNSUPPORTED, "cuda backend: no CUDA device present");
    if (device < 0 || device >= n_dev)
        return ws_error_set(err, WS_ERR_INVALID, "cuda backend: device %d out of range (%d present)",
                            device, n_dev);

    /* Declared up front: the error path jumps over the code below. */
    ws_status st = WS_OK;
    int major = 0, minor = 0, pools = 0;
    cublasStatus_t bs;
    ws_backend *be = (ws_backend *)calloc(1, sizeof *be);
    ws_cuda *c = (ws_cuda *)calloc(1, sizeof *c);
    if (!be || !c) {
        free(be);
        free(c);
        return ws_error_set(err, WS_ERR_NOMEM, "cuda backend: out of memory");
    }
    be->impl = c;
    be->ops = &c->ops;
    fill_ops(&c->ops);
    c->device = device;
    c->flags = flags;
    c->sync_check = env_flag("WS_CUDA_SYNC_CHECK");

    e = cudaSetDevice(device);
    WS_NEW_CHECK(e == cudaSuccess, "cudaSetDevice", cudaGetErrorString(e));
    e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&c->n_sm, cudaDevAttrMultiProcessorCount, device);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device);
    WS_NEW_CHECK(e == cudaSuccess, "cudaDeviceGetAttribute", cudaGetErrorString(e));
    if (major * 10 + minor < 75) {
        st = ws_error_set(err, WS_ERR_UNSUPPORTED,
                          "cuda backend: device %d has compute capability %d.%d; this build "
                          "needs 7.5 or newer", device, major, minor);
        goto fail;
    }
    e = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
    WS_NEW_CHECK(e == cudaSuccess, "cudaStreamCreate", cudaGetErrorString(e));
    if (pools) {
        /* Keep freed blocks in the device's default pool instead of returning them to
         * the driver at every sync: the activation arena is freed and regrown. */
        cudaMemPool_t pool;
        uint64_t keep = UINT64_MAX;
        e = cudaDeviceGetDefaultMemPool(&pool, device);
        if (e == cudaSuccess) e = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
        WS_NEW_CHECK(e == cudaSuccess, "cudaMemPoolSetAttribute", cudaGetErrorString(e));
        c->mem_pool = 1;
    }

    bs = cublasCreate(&c->blas);
    WS_NEW_CHECK(bs == CUBLAS_STATUS_SUCCESS, "cublasCreate", cublasGetStatusString(bs));
    bs = cublasSetStream(c->blas, c->stream);
    WS_NEW_CHECK(bs == CUBLAS_STATUS_SUCCESS, "cublasSetStream", cublasGetStatusString(bs));
    bs = cublasSetPointerMode(c->blas, CUBLAS_POINTER_MODE_HOST);
    WS_NEW_CHECK(bs == CUBLAS_STATUS_SUCCESS, "cublasSetPointerMode", cublasGetStatusString(bs));
    /* Full FP32 by default; TF32 tensor cores only when asked for. */
    bs = cublasSetMathMode(c->blas, (flags & WS_CUDA_TF32) ? CUBLAS_TF32_TENSOR_OP_MATH
                                                            : CUBLAS_DEFAULT_MATH);
    WS_NEW_CHECK(bs == CUBLAS_STATUS_SUCCESS, "cublasSetMathMode", cublasGetStatusString(bs));

    st = probe(be, err);
    if (st != WS_OK) goto fail;
    *out = be;
    return WS_OK;

fail:
    cuda_destroy(be);
    return st;
}

ws_status ws_backend_cuda_new(ws_backend **out, int device, ws_error *err)
{
    unsigned flags = env_flag("WS_CUDA_TF32") ? WS_CUDA_TF32 : 0u;
    return ws_backend_cuda_new_ex(out, device, flags, err);
}

int ws_backend_cuda_plugin_abi(unsigned abi, size_t ops_size, size_t backend_size)
{
    return abi == WS_BACKEND_ABI && ops_size == sizeof(ws_backend_ops) &&
           backend_size == sizeof(ws_backend);
}

int ws_backend_is_cuda(const ws_backend *be)
{
    return be && be->ops && be->ops->destroy == cuda_destroy;
}

const char *ws_backend_cuda_last_error(const ws_backend *be)
{
    if (!ws_backend_is_cuda(be)) return "";
    return ((const ws_cuda *)be->impl)->last_error;
}
