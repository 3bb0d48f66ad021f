/* cpu_internal.h — the CPU backend's op functions, shared by its files.
 *
 * Threading: OpenBLAS runs single-threaded (on these small products two BLAS
 * threads are ~10x slower than one: see bench/bench_ops), and the ops split work
 * across OpenMP threads instead — rows of a product, (segment, head) pairs of
 * attention, rows of element-wise ops. */
#ifndef WS_CPU_INTERNAL_H
#define WS_CPU_INTERNAL_H

#include "kernels/backend.h"
#include "kernels/mixer_ops_compositional.h"

typedef struct {
    int n_threads;
    /* Grow-only scratch for ops that need temporaries (attention backward):
     * allocating per call cost page faults on every step. A backend is used by
     * one thread at a time, so one buffer suffices. */
    float *scratch;
    size_t scratch_floats;
    /* Symbol codes computed before (cpu_symcode.c): WS_CPU_CODES entries of
     * code_d floats, the hash each holds (0: none), the call that last used it. */
    float *codes;
    uint64_t *code_tag;
    uint32_t *code_stamp, code_calls;
    int code_d;
} ws_cpu;

#define WS_CPU_CODES     4096 /* a power of two */
#define WS_CPU_CODE_WAYS 4    /* entries a hash may take (cpu_symcode.c) */

/* Packed weights (cpu_linear.c packs them, cpu_packs.c keeps them).
 * ws_cpu_packs_forget forgets those that [p, p + bytes) overlaps: every op that
 * writes memory a weight or a bias can be in (upload, copy, fill, adamw, scale,
 * release) calls it, on any CPU backend: their memory is one. ws_cpu_pack_find:
 * the kept pack of (w, bias, in_dim, out_dim), or NULL. ws_cpu_pack_keep keeps
 * wt (floats long, malloc'ed) as that pack and returns it, or the pack another
 * thread kept first (wt freed), or NULL when the table is full (wt still the
 * caller's). */
void ws_cpu_packs_forget(const void *p, size_t bytes);
float *ws_cpu_pack_find(const float *w, const float *bias, int in_dim, int out_dim);
float *ws_cpu_pack_keep(float *wt, size_t floats, const float *w, const float *bias, int in_dim,
                        int out_dim);

/* Returns scratch of at least n floats, or NULL when out of memory. */
float *ws_cpu_scratch(ws_backend *be, size_t n);

/* Loops written for wide vectors, in a build for the generic x86-64 baseline
 * (WS_NATIVE=OFF: the package), which has only SSE2: such a function is built for
 * x86-64-v4 (AVX-512), x86-64-v3 (AVX2, FMA) and the baseline, and the loader
 * picks the best the CPU has (GCC function multi-versioning; an OpenMP region's
 * body is a function of its own, so the clones go on a function it calls). A CPU
 * always runs the same version: results stay deterministic on a machine. With
 * -march giving AVX2 or more there is one version. bench/native_vs_portable.sh
 * measures what a portable build costs. */
#if defined(__x86_64__) && !defined(__AVX2__)
#define WS_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define WS_CPU_CLONES
#endif

/* The threads an op of the calling thread may use (ws_backend_threads). */
int ws_cpu_threads(const ws_backend *be);

/* The ops of backend_ops.h, ws_cpu_<name> (one file per family: cpu_gemm.c,
 * cpu_linear.c, cpu_norm.c, cpu_attention.c, cpu_pointwise.c, cpu_embedding.c,
 * cpu_optim.c). */
#define WS_OP(name, params) ws_status ws_cpu_##name params;
#include "kernels/backend_ops.h"
#undef WS_OP

/* Row-wise softmax of s[q_len, k_len] in place (cpu_attention.c). Keys with
 * valid[j] == 0 (valid nullable) and, with mask_diag, key i of row i get p = 0;
 * a row with no key left is all zeros. */
void ws_cpu_softmax_rows(float *s, int q_len, int k_len, const uint8_t *valid, int mask_diag);
/* Its backward in place: dp ← p ⊙ (dp − rowsum(dp ⊙ p)) · scale (masked keys, with
 * p = 0, get 0). */
void ws_cpu_softmax_rows_backward(const float *p, float *dp, int q_len, int k_len, float scale);
/* Attention with value blocks (mixer_ops_compositional.h's search op), which
 * attention_forward/backward run with v_step = dv = d_h. */
ws_status ws_cpu_search_forward(ws_backend *be, const ws_comp_search_args *c);
ws_status ws_cpu_search_backward(ws_backend *be, const ws_comp_search_args *c,
                                 const ws_attn_grads *g);
/* The compositional mixer's op table (cpu_compositional.c). */
extern const struct ws_compositional_ops ws_cpu_compositional_ops;

/* Op tables of the relational mixers (cpu_<name>.c). */
extern const struct ws_rn_ops ws_cpu_rn_ops;
extern const struct ws_rmc_ops ws_cpu_rmc_ops;

#endif
