/* model_internal.h — the model's private structures, shared by the model sources.
 *
 * Parameters are addressed by offsets (in floats) into the parameter buffer; the
 * same offsets address the gradient buffer. Activations for one step live in a
 * plan (plan.c) carved out of one arena per step shape. */
#ifndef WS_MODEL_INTERNAL_H
#define WS_MODEL_INTERNAL_H

#include "batch.h"
#include "model.h"

typedef struct { size_t g, b; } ws_ln_off;
typedef struct { size_t w, b; } ws_lin_off;

/* Sub-blocks of a layer: LN then self-attention / cross-attention / MLP. */
typedef struct { ws_ln_off ln; ws_lin_off qkv, out; } ws_self_off;
typedef struct { ws_ln_off ln; ws_lin_off q, kv, out; } ws_cross_off;
typedef struct { ws_ln_off ln; ws_lin_off fc, proj; } ws_mlp_off;

typedef struct { ws_self_off self; ws_cross_off cross; ws_mlp_off mlp; } ws_upd_layer_off;
typedef struct { ws_cross_off cross; ws_mlp_off mlp; } ws_ext_layer_off;

typedef struct {
    size_t sym, slot, val, raw; /* raw only when d_raw > 0 */
    ws_ln_off fact_ln;
    size_t w0, pos, null;
    ws_upd_layer_off *upd;
    ws_ln_off state_ln; /* only when state_norm */
    ws_ext_layer_off *ext;
    ws_ln_off out_ln;
    ws_lin_off head;
} ws_param_offsets;

/* Activations of one LayerNorm. */
typedef struct { float *out, *mean, *rstd; } ws_ln_act;

/* Activations of an attention sub-block. For self-attention q holds the fused
 * [n, 3d] qkv and kv is unused; for cross-attention q is [n, d], kv [n_keys, 2d]. */
typedef struct {
    ws_ln_act ln;
    float *q, *kv, *att, *probs, *x_out;
    const ws_attn_seg *segs;
    int n_segs, max_q, max_k;
} ws_attn_act;

typedef struct { ws_ln_act ln; float *fc, *act, *x_out; } ws_mlp_act;

typedef struct { ws_attn_act self, cross; ws_mlp_act mlp; } ws_upd_layer_act;
typedef struct { ws_attn_act cross; ws_mlp_act mlp; } ws_ext_layer_act;

/* Gradient scratch reused by every sub-block (zeroed before each use). */
typedef struct { float *d_ln, *d_att, *d_q, *d_kv, *d_act, *d_fc; } ws_grad_scratch;

typedef struct {
    /* shape */
    int B, n_instr, n_query, n_facts, n_ctx, n_state_rows, has_raw;
    /* inputs, uploaded from the host staging copy in one transfer */
    int32_t *sym_ids, *slot_ids, *val_ids, *ctx_tok, *ctx_null, *ids_prev, *ids_w0, *ids_pos;
    ws_attn_seg *seg_self, *seg_cross, *seg_ext;
    int n_ext_segs;
    float *labels, *raw;
    /* forward activations */
    float *u, *tok, *ctx, *x0;
    ws_ln_act fact_ln;
    ws_upd_layer_act *upd;
    ws_ln_act state_ln; /* out unused: the new state goes to the caller's buffer */
    ws_ext_layer_act *ext;
    ws_ln_act out_ln;
    float *logits, *loss;
    /* gradients (train only) */
    float *d_u, *d_tok, *d_ctx, *d_x, *d_w, *d_lno, *d_logits;
    ws_grad_scratch scratch;
} ws_plan;

struct ws_model {
    ws_model_config cfg;
    ws_backend *be;
    ws_vocab *vocab;
    int n_tensors;
    ws_tensor_info *tensors;
    size_t n_params;
    float *params, *grads, *adam_m, *adam_v; /* device */
    float *scalar_dev;                       /* one device float for reductions */
    int optim_steps;
    ws_param_offsets off;
    /* the step arena: inputs | activations | gradients */
    void *arena;
    size_t arena_bytes;
    void *staging; /* host mirror of the input region */
    size_t staging_bytes;
    ws_plan plan;
    int train_planned; /* plan includes the gradient region */
    float *probs_dev; /* σ(logits) before download */
};

/* plan.c: lays out the arena for the batch (growing it when needed), fills and
 * uploads the inputs. */
ws_status ws_plan_prepare(ws_model *m, const ws_batch *b, int train, ws_error *err);

/* blocks.c: sub-blocks shared by the Updater and the Extractor. x_in is the
 * residual stream; each forward writes act->x_out = x_in + branch(x_in). Each
 * backward takes d_x = ∂L/∂x_out and turns it into ∂L/∂x_in in place. */
ws_status ws_self_forward(ws_model *m, const ws_self_off *o, ws_attn_act *a, const float *x_in,
                          int n);
ws_status ws_self_backward(ws_model *m, const ws_self_off *o, ws_attn_act *a,
                           const float *x_in, float *d_x, int n);
ws_status ws_cross_forward(ws_model *m, const ws_cross_off *o, ws_attn_act *a, const float *x_in,
                           int n, const float *keys, int n_keys);
ws_status ws_cross_backward(ws_model *m, const ws_cross_off *o, ws_attn_act *a,
                            const float *x_in, float *d_x, int n, const float *keys,
                            float *d_keys, int n_keys);
ws_status ws_mlp_forward(ws_model *m, const ws_mlp_off *o, ws_mlp_act *a, const float *x_in,
                         int n);
ws_status ws_mlp_backward(ws_model *m, const ws_mlp_off *o, ws_mlp_act *a, const float *x_in,
                          float *d_x, int n);
ws_status ws_ln_forward(ws_model *m, const ws_ln_off *o, ws_ln_act *a, float *out,
                        const float *in, int n);
ws_status ws_ln_backward(ws_model *m, const ws_ln_off *o, const ws_ln_act *a, float *d_in,
                         const float *d_out, const float *in, int n);

/* Forward and backward of the three stages (embed.c, updater.c, extractor.c). */
ws_status ws_embed_forward(ws_model *m);
ws_status ws_embed_backward(ws_model *m);
ws_status ws_updater_forward(ws_model *m, const float *w_prev, float *w_out);
ws_status ws_updater_backward(ws_model *m);
ws_status ws_extractor_forward(ws_model *m, const float *w);
ws_status ws_extractor_backward(ws_model *m, const float *w, float *d_w);

#define WS_P(m, off) ((m)->params + (off))
#define WS_G(m, off) ((m)->grads + (off))

#endif
