/* backend.h — the compute backend interface.
 *
 * A backend is a table of functions (ggml-backend is the model). Every pointer an
 * op takes is *device* memory obtained from ws_backend_alloc(): on the CPU backend
 * that happens to be host memory, on CUDA it is not, so callers never dereference
 * it; data crosses only through upload/download. Ops are queued on the backend's
 * stream in call order; ws_backend_sync() waits for them, and download() syncs
 * implicitly. Each op returns a ws_status (a CUDA launch or cuBLAS call can fail).
 *
 * Layout conventions: matrices are row-major; a "row" is one token of width d.
 * Backward ops ACCUMULATE (+=) into every gradient they write (llm.c style), so a
 * caller zeroes gradient buffers once and sums contributions from many uses.
 */
#ifndef WS_BACKEND_H
#define WS_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "base/ws_status.h"

typedef struct ws_backend ws_backend;

/* Op tables of the relational mixers (../shared/MIXERS.md), each defined in its
 * own header kernels/mixer_ops_<name>.h; a backend without them leaves NULL and
 * models that need them are refused at creation. */
struct ws_simplicial_ops;
struct ws_compositional_ops;
struct ws_rmc_ops;
struct ws_rn_ops;

/* One ragged attention segment: queries [q_off, q_off+q_len) attend to keys
 * [k_off, k_off+k_len) of the packed Q and K/V arrays. Softmax probabilities of
 * the segment live at probs[p_off + (h*q_len + i)*k_len + j]. Segments must
 * have pairwise disjoint query ranges and disjoint key ranges: no trajectory
 * sees another's data, and backends need no atomics in the backward pass. */
typedef struct {
    int32_t q_off, q_len;
    int32_t k_off, k_len;
    int32_t p_off;
} ws_attn_seg;

/* Multi-head attention over ragged segments: per head h (d_h = d / n_heads)
 * out[i, h] = softmax(q[i,h] k[:,h]ᵀ / √d_h, masked) v[:, h].
 * key_valid (nullable, one byte per packed key row) masks keys; a query whose
 * keys are all masked gets a zero output. q/k/v/out have row strides ld*. */
typedef struct {
    float *out;
    int ldo;
    float *probs;
    const float *q;
    int ldq;
    const float *k;
    int ldk;
    const float *v;
    int ldv;
    const ws_attn_seg *segs; /* device array of n_segs segments */
    int n_segs;
    const uint8_t *key_valid; /* device, nullable */
    int n_heads;
    int d;
    int max_q_len, max_k_len; /* bounds over segs, for launch sizing */
    /* Non-zero: no backward pass reads this forward's probabilities (a pass of
     * inference), so the backend need not leave them in probs; it may still
     * use probs as scratch (the CUDA kernel keeps its scores there). */
    int forward_only;
} ws_attn_args;

/* Gradients for ws_attn_args: dq/dk/dv accumulate; dout is read. */
typedef struct {
    float *dq, *dk, *dv; /* same strides as q, k, v */
    const float *dout;    /* stride ldo */
} ws_attn_grads;

/* Strided batched matrix product, row-major:
 * C_b = alpha * op(A_b) op(B_b) + beta * C_b for b < batch, where op(A) is M×K,
 * op(B) is K×N, and X_b = X + b * stride_x. */
typedef struct {
    int trans_a, trans_b;
    int m, n, k;
    float alpha, beta;
    const float *a;
    int lda;
    long stride_a;
    const float *b;
    int ldb;
    long stride_b;
    float *c;
    int ldc;
    long stride_c;
    int batch;
} ws_gemm_args;

typedef struct {
    float lr, beta1, beta2, eps, weight_decay;
    int step;         /* 1-based step for bias correction */
    float grad_scale; /* gradients are multiplied by this first (averaging, clipping) */
} ws_adamw_args;

typedef struct ws_backend_ops {
    const char *name;
    void (*destroy)(ws_backend *be);

    /* memory */
    ws_status (*alloc)(ws_backend *be, size_t bytes, void **out);
    void (*release)(ws_backend *be, void *p);
    ws_status (*upload)(ws_backend *be, void *dst, const void *src_host, size_t bytes);
    ws_status (*download)(ws_backend *be, void *dst_host, const void *src, size_t bytes);
    ws_status (*copy)(ws_backend *be, void *dst, const void *src, size_t bytes);
    ws_status (*fill)(ws_backend *be, float *dst, float value, size_t n);
    ws_status (*sync)(ws_backend *be);
    /* How many threads the calling thread's next ops may use (n <= 0: the
     * backend's count at creation; more is clamped to it); returns that count.
     * NULL where the backend has no such choice (CUDA). */
    int (*threads)(ws_backend *be, int n);

    /* compute ops, one field per line of backend_ops.h */
#define WS_OP(name, params) ws_status(*name) params;
#include "backend_ops.h"
#undef WS_OP

    /* relational mixers; NULL where the backend lacks them */
    const struct ws_simplicial_ops *simplicial;
    const struct ws_compositional_ops *compositional;
    const struct ws_rmc_ops *rmc;
    const struct ws_rn_ops *rn;
} ws_backend_ops;

struct ws_backend {
    const ws_backend_ops *ops;
    void *impl;
};

/* Backends. ws_backend_cpu_new: n_threads <= 0 picks the number of cores. */
ws_status ws_backend_cpu_new(ws_backend **out, int n_threads, ws_error *err);
/* The threads of a CPU backend made with n_threads <= 0: the cores this process
 * may run on (its CPU affinity, as taskset or a container's cpuset sets it). */
int ws_backend_cpu_default_threads(void);
/* The CUDA backend on device 0 from its plugin (backend_plugin.c):
 * WS_ERR_UNSUPPORTED, saying why, when there is no plugin, it cannot be loaded
 * (no CUDA runtime), it is from another build, or it finds no usable GPU. */
ws_status ws_backend_cuda_load(ws_backend **out, ws_error *err);
/* CUDA when its plugin loads and finds a GPU, else CPU; ws_backend_auto_why also
 * says why not CUDA in why ("" when CUDA). */
ws_status ws_backend_auto(ws_backend **out, ws_error *err);
ws_status ws_backend_auto_why(ws_backend **out, char *why, size_t why_len, ws_error *err);

/* The backend interface's version, which a plugin must share (with the sizes of
 * ws_backend_ops and ws_backend): bump it when an op's meaning or parameters
 * change without changing those sizes. */
#define WS_BACKEND_ABI 1u
void ws_backend_free(ws_backend *be);

/* For programs' main(): unless OMP_WAIT_POLICY is set, set it to "passive" and
 * re-execute once (libgomp reads it only at load). Idle OpenMP threads then sleep
 * instead of spinning, which on a shared 2-core machine starved the other
 * thread of a pair (30x slowdowns seen) and the HTTP threads of the daemon.
 * Returns only if nothing was re-executed. */
void ws_backend_prefer_passive_waits(char **argv);

/* Convenience wrappers, so call sites read like plain function calls. */
static inline int ws_backend_threads(ws_backend *be, int n)
{
    return be->ops->threads ? be->ops->threads(be, n) : 1;
}
static inline ws_status ws_backend_alloc(ws_backend *be, size_t bytes, void **out)
{
    return be->ops->alloc(be, bytes, out);
}
static inline void ws_backend_release(ws_backend *be, void *p)
{
    if (p) be->ops->release(be, p);
}
static inline ws_status ws_backend_upload(ws_backend *be, void *dst, const void *src, size_t n)
{
    return be->ops->upload(be, dst, src, n);
}
static inline ws_status ws_backend_download(ws_backend *be, void *dst, const void *src, size_t n)
{
    return be->ops->download(be, dst, src, n);
}

/* Matrix-product backward through ws_gemm_args (composed of two gemms):
 * dA += dC·op(B)ᵀ (as op requires), dB += op(A)ᵀ·dC; either may be NULL.
 * dA/dB have the layouts (lda/ldb, strides) of A and B. */
ws_status ws_gemm_backward(ws_backend *be, const ws_gemm_args *g, const float *dc, float *da,
                           float *db);

#endif
