/* backend_ops.h — the compute ops of a backend, one line each:
 * WS_OP(name, (parameters)). This list generates the fields of ws_backend_ops
 * (backend.h), each backend's declarations of ws_<backend>_<name>
 * (cpu_internal.h, cuda_internal.h) and each backend's table (cpu_backend.c,
 * cuda_backend.cu). A new op is its line here plus one function in each backend
 * (and a test comparing the two, tests/test_ops_*.c and test_backend_cuda.c).
 * Every op returns a ws_status; pointers are device memory (backend.h). No
 * include guard: the includer defines WS_OP first. */

/* clang-format off */

/* matrix products */
WS_OP(gemm, (ws_backend *be, const ws_gemm_args *g))
/* out[n,o] = in[n,i] · W[o,i]ᵀ + bias[o] (bias nullable). W and bias are weights:
 * a backend may keep them in another layout between calls (the CPU backend does),
 * so they change only through upload, copy, fill, adamw, scale or release. */
WS_OP(linear_forward, (ws_backend *be, float *out, const float *in, const float *w,
                       const float *bias, int n, int in_dim, int out_dim))
/* din += dout·W, dW += doutᵀ·in, dbias += Σ_rows dout (any of them nullable) */
WS_OP(linear_backward, (ws_backend *be, float *din, float *dw, float *dbias, const float *dout,
                        const float *in, const float *w, int n, int in_dim, int out_dim))

/* LayerNorm over rows of width c (eps 1e-5); mean/rstd saved per row */
WS_OP(layernorm_forward, (ws_backend *be, float *out, float *mean, float *rstd, const float *in,
                          const float *gain, const float *bias, int n, int c))
WS_OP(layernorm_backward, (ws_backend *be, float *din, float *dgain, float *dbias,
                           const float *dout, const float *in, const float *gain,
                           const float *mean, const float *rstd, int n, int c))

WS_OP(attention_forward, (ws_backend *be, const ws_attn_args *a))
WS_OP(attention_backward, (ws_backend *be, const ws_attn_args *a, const ws_attn_grads *g))

/* GELU, tanh form */
WS_OP(gelu_forward, (ws_backend *be, float *out, const float *in, size_t n))
WS_OP(gelu_backward, (ws_backend *be, float *din, const float *in, const float *dout, size_t n))

/* residual add: out = a + b (out may alias a); backward da += dout, db += dout */
WS_OP(add_forward, (ws_backend *be, float *out, const float *a, const float *b, size_t n))
WS_OP(add_backward, (ws_backend *be, float *da, float *db, const float *dout, size_t n))

/* Embedding gather-sum: out[r] (=, or += if accumulate) Σ_j table[ids[r*k+j]]
 * over ids >= 0 (negative ids are skipped; a row with none is zero/unchanged).
 * Backward scatter-adds dout rows into dtable. */
WS_OP(embedding_forward, (ws_backend *be, float *out, const float *table, const int32_t *ids,
                          int n_rows, int k, int d, int accumulate))
WS_OP(embedding_backward, (ws_backend *be, float *dtable, const float *dout, const int32_t *ids,
                           int n_rows, int k, int d))

/* Symbol codes (symcode.h): out[r] (=, or += if accumulate) Σ_j code_j(hashes[r*k+j])
 * over hashes != 0, code_j being the code rolled by slot j, slots summed in order.
 * The codes are fixed, so there is no backward. */
WS_OP(symcode_forward, (ws_backend *be, float *out, const uint64_t *hashes, int n_rows, int k,
                        int d, int accumulate))

/* Binary cross-entropy with logits. Labels < 0 mark unlabelled items.
 * loss_out[0] = scale * Σ_labelled bce(logit, label);
 * dlogits[i] += scale * (σ(logit_i) − label_i) for labelled i. */
WS_OP(bce_forward, (ws_backend *be, float *loss_out, const float *logits, const float *labels,
                    size_t n, float scale))
WS_OP(bce_backward, (ws_backend *be, float *dlogits, const float *logits, const float *labels,
                     size_t n, float scale))
/* out[i] = σ(logits[i]) */
WS_OP(sigmoid, (ws_backend *be, float *out, const float *logits, size_t n))

/* optimizer and gradient utilities */
WS_OP(adamw, (ws_backend *be, float *param, const float *grad, float *m, float *v, size_t n,
              const ws_adamw_args *a))
/* out[0] = Σ x² (the square of the L2 norm) */
WS_OP(sum_squares, (ws_backend *be, float *out, const float *x, size_t n))
WS_OP(scale, (ws_backend *be, float *x, float s, size_t n))
/* clang-format on */
