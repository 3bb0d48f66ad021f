/* model_internal.h — the model's private structures, shared by the model sources.
 *
 * Parameters are addressed by offsets (in floats) into the parameter buffer; the
 * same offsets address the gradient buffer. A model holds weights only; what a
 * step needs besides (the arena, the staging copy of the inputs, the plan) is an
 * execution context's (struct ws_exec), so that several contexts run one set of
 * weights. Activations for one step live in the context's plan (plan.c), carved
 * out of one arena per step shape. Forward and backward functions take the
 * context; it points at its model. */
#ifndef WS_MODEL_INTERNAL_H
#define WS_MODEL_INTERNAL_H

#include "batch.h"
#include "carve.h"
#include "model.h"
#include "params.h"

struct ws_mixer_s;
struct ws_updater_variant_s;
struct ws_readout_variant_s;

/* The parameter offsets of one mixer use (or of a variant), in slots that the
 * mixer's layout hook fills as it registers its tensors (mixer.h): what each
 * slot holds is the mixer's own business. A LayerNorm in a slot keeps its gain
 * in w (ws_slot_ln). */
#define WS_MIX_SLOTS 12
typedef struct { ws_lin_off at[WS_MIX_SLOTS]; } ws_mix_params;

static inline ws_ln_off ws_slot_ln(ws_lin_off s) { return (ws_ln_off){s.w, s.b}; }

/* Sub-blocks of a layer: LN then a mixer (self or cross, mixer.h) / an MLP. */
typedef struct {
    ws_ln_off ln;
    const struct ws_mixer_s *mixer;
    int mode; /* ws_mix_mode */
    ws_mix_params p;
} ws_mix_off;
typedef struct { ws_ln_off ln; ws_lin_off fc, proj; } ws_mlp_off;

typedef struct { ws_mix_off self, cross; ws_mlp_off mlp; } ws_upd_layer_off;
typedef struct { ws_mix_off cross; ws_mlp_off mlp; } ws_ext_layer_off;

typedef struct ws_param_offsets_s {
    size_t sym, slot, val, raw; /* raw only when d_raw > 0 */
    ws_ln_off fact_ln;
    size_t w0, pos, null;
    ws_upd_layer_off *upd;
    ws_ln_off state_ln; /* only when state_norm */
    ws_ext_layer_off *ext;
    ws_ln_off out_ln;
    ws_lin_off head; /* only without a readout variant */
    ws_mix_params upd_variant, readout; /* the variants' own tensors (mixer.h) */
} ws_param_offsets;

/* Activations of one LayerNorm. */
typedef struct { float *out, *mean, *rstd; } ws_ln_act;

/* The rows a mixer sub-block works on (mixer.h). */
typedef struct {
    int n, n_keys;                /* query rows, key rows (== n in SELF mode) */
    const ws_attn_seg *segs;      /* device: one per trajectory */
    const ws_attn_seg *segs_host; /* the same segments on the host (sizing, loops) */
    int n_segs, max_q, max_k;     /* bounds over segs */
    size_t n_pairs;               /* Σ_seg q_len·k_len */
} ws_mix_shape;

/* Activations of a mixer sub-block: its LN, the mixer's own region, the output. */
typedef struct {
    ws_ln_act ln;
    float *mix, *x_out;
    ws_mix_shape shape;
} ws_mix_act;

typedef struct { ws_ln_act ln; float *fc, *act, *x_out; } ws_mlp_act;

typedef struct { ws_mix_act self, cross; ws_mlp_act mlp; } ws_upd_layer_act;
typedef struct { ws_mix_act cross; ws_mlp_act mlp; } ws_ext_layer_act;

/* Gradient scratch reused by every sub-block: d_ln, d_act and d_fc are zeroed
 * before each use; mix is the mixers' backward scratch (mixer.h). */
typedef struct { float *d_ln, *d_act, *d_fc, *mix; } ws_grad_scratch;

typedef struct {
    /* shape */
    int B, n_instr, n_query, n_facts, n_ctx, n_state_rows, has_raw;
    /* inputs, uploaded from the host staging copy in one transfer */
    int32_t *sym_ids, *slot_ids, *val_ids, *ctx_tok, *ctx_null, *ids_prev, *ids_w0, *ids_pos;
    uint64_t *sym_hash; /* symbol codes' hashes, 0 where none (hashed encoding only) */
    ws_attn_seg *seg_self, *seg_cross, *seg_ext;
    const ws_attn_seg *seg_self_host, *seg_cross_host, *seg_ext_host; /* staging copies */
    int n_ext_segs, max_instr, max_query;
    int train; /* a backward pass follows the forward: gradients laid out */
    float *labels, *raw;
    /* forward activations */
    float *u, *tok, *ctx, *x0;
    float *w_new; /* empty_steps "hold": the Updater's output, before the
                     trajectories that hold take W_{t-1} instead (exec.c) */
    ws_ln_act fact_ln;
    ws_upd_layer_act *upd;
    ws_ln_act state_ln; /* out unused: the new state goes to the caller's buffer */
    ws_ext_layer_act *ext;
    ws_ln_act out_ln;
    float *upd_variant_act, *readout_act; /* regions of the variants (mixer.h) */
    float *logits, *loss;
    float *probs; /* σ(logits) before download */
    /* gradients (train only) */
    float *d_u, *d_tok, *d_ctx, *d_x, *d_w, *d_lno, *d_logits;
    ws_grad_scratch scratch;
    size_t mix_scratch_floats; /* the largest scratch any mixer use asks for */
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
    const struct ws_updater_variant_s *upd_variant; /* rmc, or NULL */
    const struct ws_readout_variant_s *readout;     /* rn, or NULL */
};

/* One running context of a model (exec.c). Nothing in it is shared with another
 * context: a step writes only its own context and the model's gradients. */
struct ws_exec {
    ws_model *m;
    /* the step arena: inputs | activations | gradients */
    void *arena;
    size_t arena_bytes;
    void *staging; /* host mirror of the input region */
    size_t staging_bytes;
    ws_plan plan;
    /* views.c, a model of views > 1: the batch as the plan runs it, and the
     * views' logits and their gradients on the host */
    ws_batch *views;
    float *view_logits;
    size_t view_logits_cap;
};

/* views.c: a symbol's hash in view v (view 0: the hash itself). */
uint64_t ws_view_hash(uint64_t hash, int view);
/* views.c: x->views laid out from src, every trajectory as its views. */
ws_status ws_views_expand(ws_exec *x, const ws_batch *src, ws_error *err);
/* views.c: after the forward pass of x->views, src's answers (σ of the mean of
 * each query's views' logits) into probs_host (nullable), their loss and counts
 * into res; when training, the views' logits' gradients uploaded (each the
 * mean's over V, scaled by loss_scale / src's labelled queries). */
ws_status ws_views_finish(ws_exec *x, const ws_batch *src, float *probs_host, float loss_scale,
                          int train, ws_step_result *res, ws_error *err);

/* plan.c: lays out the context's arena for the batch (growing it when needed),
 * fills and uploads the inputs. */
ws_status ws_plan_prepare(ws_exec *x, const ws_batch *b, int train, ws_error *err);
/* plan.c: the arena (*arena, as grown for it) and host staging (*staging) bytes
 * of the largest batch of shape s (ws_model_memory). */
ws_status ws_plan_bound(const ws_model_config *cfg, const ws_batch_shape *s, size_t *arena,
                        size_t *staging, ws_error *err);

/* blocks.c: sub-blocks shared by the Updater and the Extractor. x_in is the
 * residual stream; each forward writes act->x_out = x_in + branch(x_in). Each
 * backward takes d_x = ∂L/∂x_out and turns it into ∂L/∂x_in in place.
 * Mixer sub-blocks: keys NULL in SELF mode; d_keys accumulates (CROSS mode). */
ws_status ws_mix_forward(ws_exec *x, const ws_mix_off *o, ws_mix_act *a, const float *x_in,
                         const float *keys);
ws_status ws_mix_backward(ws_exec *x, const ws_mix_off *o, ws_mix_act *a, const float *x_in,
                          float *d_x, const float *keys, float *d_keys);
ws_status ws_mlp_forward(ws_exec *x, const ws_mlp_off *o, ws_mlp_act *a, const float *x_in,
                         int n);
ws_status ws_mlp_backward(ws_exec *x, const ws_mlp_off *o, ws_mlp_act *a, const float *x_in,
                          float *d_x, int n);
ws_status ws_ln_forward(ws_model *m, const ws_ln_off *o, ws_ln_act *a, float *out,
                        const float *in, int n);
ws_status ws_ln_backward(ws_model *m, const ws_ln_off *o, const ws_ln_act *a, float *d_in,
                         const float *d_out, const float *in, int n);

/* Forward and backward of the three stages (embed.c, updater.c, extractor.c). */
ws_status ws_embed_forward(ws_exec *x);
ws_status ws_embed_backward(ws_exec *x);
ws_status ws_updater_forward(ws_exec *x, const float *w_prev, float *w_out);
ws_status ws_updater_backward(ws_exec *x);
ws_status ws_extractor_forward(ws_exec *x, const float *w);
ws_status ws_extractor_backward(ws_exec *x, const float *w, float *d_w);

#define WS_P(m, off) ((m)->params + (off))
#define WS_G(m, off) ((m)->grads + (off))

#endif
