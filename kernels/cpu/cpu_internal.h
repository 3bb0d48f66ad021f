/* cpu_internal.h — the CPU backend's op functions, shared by its files.
 *
 * Threading: OpenBLAS runs single-threaded (on these small products two BLAS
 * threads are ~10x slower than one: see bench/bench_ops), and the ops split work
 * across OpenMP threads instead — rows of a product, (segment, head) pairs of
 * attention, rows of element-wise ops. */
#ifndef WS_CPU_INTERNAL_H
#define WS_CPU_INTERNAL_H

#include "../backend.h"
#include "../mixer_ops_compositional.h"

typedef struct {
    int n_threads;
    /* Grow-only scratch for ops that need temporaries (attention backward):
     * allocating per call cost page faults on every step. A backend is used by
     * one thread at a time, so one buffer suffices. */
    float *scratch;
    size_t scratch_floats;
} ws_cpu;

/* Returns scratch of at least n floats, or NULL when out of memory. */
float *ws_cpu_scratch(ws_backend *be, size_t n);

static inline int ws_cpu_threads(const ws_backend *be)
{
    return ((const ws_cpu *)be->impl)->n_threads;
}

ws_status ws_cpu_gemm(ws_backend *be, const ws_gemm_args *g);
ws_status ws_cpu_linear_forward(ws_backend *be, float *out, const float *in, const float *w,
                                const float *bias, int n, int in_dim, int out_dim);
ws_status ws_cpu_linear_backward(ws_backend *be, float *din, float *dw, float *dbias,
                                 const float *dout, const float *in, const float *w, int n,
                                 int in_dim, int out_dim);
ws_status ws_cpu_layernorm_forward(ws_backend *be, float *out, float *mean, float *rstd,
                                   const float *in, const float *gain, const float *bias, int n,
                                   int c);
ws_status ws_cpu_layernorm_backward(ws_backend *be, float *din, float *dgain, float *dbias,
                                    const float *dout, const float *in, const float *gain,
                                    const float *mean, const float *rstd, int n, int c);
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
ws_status ws_cpu_attention_forward(ws_backend *be, const ws_attn_args *a);
ws_status ws_cpu_attention_backward(ws_backend *be, const ws_attn_args *a,
                                    const ws_attn_grads *g);
ws_status ws_cpu_gelu_forward(ws_backend *be, float *out, const float *in, size_t n);
ws_status ws_cpu_gelu_backward(ws_backend *be, float *din, const float *in, const float *dout,
                               size_t n);
ws_status ws_cpu_add_forward(ws_backend *be, float *out, const float *a, const float *b,
                             size_t n);
ws_status ws_cpu_add_backward(ws_backend *be, float *da, float *db, const float *dout,
                              size_t n);
ws_status ws_cpu_embedding_forward(ws_backend *be, float *out, const float *table,
                                   const int32_t *ids, int n_rows, int k, int d, int accumulate);
ws_status ws_cpu_embedding_backward(ws_backend *be, float *dtable, const float *dout,
                                    const int32_t *ids, int n_rows, int k, int d);
ws_status ws_cpu_symcode_forward(ws_backend *be, float *out, const uint64_t *hashes, int n_rows,
                                 int k, int d, int accumulate);
ws_status ws_cpu_bce_forward(ws_backend *be, float *loss_out, const float *logits,
                             const float *labels, size_t n, float scale);
ws_status ws_cpu_bce_backward(ws_backend *be, float *dlogits, const float *logits,
                              const float *labels, size_t n, float scale);
ws_status ws_cpu_sigmoid(ws_backend *be, float *out, const float *logits, size_t n);
ws_status ws_cpu_adamw(ws_backend *be, float *param, const float *grad, float *m, float *v,
                       size_t n, const ws_adamw_args *a);
ws_status ws_cpu_sum_squares(ws_backend *be, float *out, const float *x, size_t n);
ws_status ws_cpu_scale(ws_backend *be, float *x, float s, size_t n);

/* Op tables of the relational mixers (cpu_<name>.c). */
extern const struct ws_rn_ops ws_cpu_rn_ops;
extern const struct ws_rmc_ops ws_cpu_rmc_ops;

#endif
