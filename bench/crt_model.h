/* crt_model.h — the authors' Contextual Retrieval Task model
 * (Contextual_Retrieval_Task/model.py, run with --concat) on the compute backend:
 *
 *   encoder  Linear(in→d), nonlinearity, Linear(d→d)
 *   ONE attention layer, no residual, no LayerNorm, the search masking the
 *   diagonal (the target's argmin excludes the object itself):
 *     compositional (S searches, R retrievals): search width d_k = d/S, value
 *       width d_v = d/R, retrieval queries d → S·d_k scaled 1/√d_k, one shared
 *       retrieval key Linear(d_v → d_k), y = concat_s Σ_r ρ O_{s,r} (S·d_v);
 *     multi-head (h heads): d_k = d_v = d/h, y = concat of the heads (h·d_v);
 *   --concat: Linear(d → d_v) of the token itself joins y before out_proj
 *     Linear((S or h)·d_v + d_v → d), computed as y·W_yᵀ + t·W_tᵀ + b
 *   decoder  Linear(d→d), nonlinearity, Linear(d→1)
 *
 * The nonlinearity is the backend's GELU (tanh form): the authors use ReLU and
 * the backend has no ReLU op (a deviation, the same for both models).
 * Every linear has a bias and PyTorch's default init U(±1/√fan_in).
 * The search and the retrieval selection are the compositional ops
 * (kernels/mixer_ops_compositional.h); multi-head attention is the same search
 * op with per-head values (v_step = d_v). */
#ifndef WS_CRT_MODEL_H
#define WS_CRT_MODEL_H

#include <stdint.h>

#include "kernels/backend.h"

typedef struct crt_model crt_model;

/* comp: 1 compositional (S searches, R retrievals), 0 multi-head (S heads; R
 * ignored). Buffers for up to max_batch samples of n_obj objects. */
ws_status crt_model_new(crt_model **out, ws_backend *be, int comp, int d, int S, int R,
                        int in_dim, int n_obj, int max_batch, uint64_t seed);
void crt_model_free(crt_model *m);
size_t crt_model_n_params(const crt_model *m);

/* Predictions pred [B·n_obj] (host) of inputs x [B·n_obj, in_dim] (host). */
ws_status crt_model_forward(crt_model *m, const float *x, int B, float *pred);
/* After crt_model_forward: gradients of the loss with ∂L/∂pred = dpred (host,
 * [B·n_obj]), into zeroed parameter gradients. */
ws_status crt_model_backward(crt_model *m, const float *dpred);
/* One Adam step (PyTorch Adam: no weight decay) at learning rate lr. */
ws_status crt_model_adam(crt_model *m, float lr);

#endif
