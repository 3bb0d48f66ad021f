/* mixer.h — the pluggable mixers inside the model's blocks (DESIGN §2 "Mixers",
 * ../shared/MIXERS.md). Internal to model/.
 *
 * Three slots take a mixer, each named by a config field:
 *
 *   cfg.upd_mixer, a ws_mixer in SELF mode: the Updater's state tokens mixing
 *       among themselves (upd.{l}.self). mha | simplicial2 | compositional.
 *       Or rmc, a ws_updater_variant: a gated relational-memory Updater that
 *       replaces the whole layer stack (and LN_w).
 *   cfg.ext_mixer, a ws_mixer in CROSS mode: the Extractor's queries reading W_t
 *       (ext.{l}.cross). mha | simplicial2 | compositional.
 *       Or rn, a ws_readout_variant: a relation-network readout that replaces
 *       the head (logit = f(Σ_{i,j} g(w_i, w_j, q)) after LN_o).
 *   The Updater's cross-attention to the instructions stays multi-head.
 *
 * A ws_mixer fills the branch of a pre-LN residual sub-block:
 *     x_out = x_in + mixer(LN(x_in), keys)
 * The block owns the LN and the residual; the mixer owns everything between
 * (its projections in and out). Rows are ragged, one segment per trajectory, as
 * for attention (backend.h ws_attn_seg): queries [q_off, q_off+q_len) may only
 * see keys [k_off, k_off+k_len). In SELF mode a segment's query and key ranges
 * are the same T state rows.
 *
 * Parameters: a mixer's layout hook registers its tensors in order as
 * "<prefix>.<name>" (prefix e.g. "upd.0.self" or "ext.1.cross") and keeps the
 * offsets the registry returns in the slots of its use's ws_mix_params (an
 * enum in the mixer's file names them; WS_MIX_Q and WS_MIX_KV are the shared
 * input projections'). That runs once, when the model is made; forward and
 * backward read the slots. Each tensor starts as the init kind it is
 * registered with says (model.h ws_init_kind: linear weights [out, in]
 * N(0, 1/in), biases zero, LayerNorm gains one, anything else N(0, 1)).
 *
 * Memory: the plan gives each use `act_floats` floats that live from forward to
 * backward, and a `scratch_floats` region shared by every sub-block's backward
 * (its contents are undefined on entry). Both are device memory.
 *
 * Backward contract (as every backend op): d_x and d_keys are ACCUMULATED (+=);
 * parameter gradients accumulate into the model's gradient buffer (WS_G).
 */
#ifndef WS_MIXER_H
#define WS_MIXER_H

#include "model_internal.h"
#include "params.h"

typedef enum { WS_MIX_SELF = 1, WS_MIX_CROSS = 2 } ws_mix_mode;

typedef struct {
    ws_model *m;
    const ws_mix_params *p; /* this use's parameter offsets */
    ws_mix_mode mode;
    ws_mix_shape s;
    float *act;         /* act_floats(): written by forward, read by backward */
    float *scratch;     /* scratch_floats(): backward only */
    const float *x;     /* [n, d] the LayerNorm'd query-side rows */
    const float *keys;  /* [n_keys, d] key rows (== x in SELF mode) */
    float *out;         /* forward: [n, d] the branch output (no residual) */
    const float *d_out; /* backward: ∂L/∂out [n, d] */
    float *d_x;         /* backward: += ∂L/∂x */
    float *d_keys;      /* backward: += ∂L/∂keys (== d_x in SELF mode) */
    int forward_only;   /* forward: no backward follows (what only it reads may be skipped) */
} ws_mix_call;

typedef struct ws_mixer_s {
    unsigned modes; /* WS_MIX_SELF | WS_MIX_CROSS that it can fill */
    /* Checks the config fields it reads (range, divisibility) for this mode. */
    ws_status (*validate)(const ws_model_config *c, ws_mix_mode mode, ws_error *err);
    /* Non-zero when the backend has every op it calls. */
    int (*supported)(const ws_backend *be);
    void (*layout)(ws_param_layout *L, const char *prefix, const ws_model_config *c,
                   ws_mix_mode mode, ws_mix_params *p);
    size_t (*act_floats)(const ws_model_config *c, ws_mix_mode mode, const ws_mix_shape *s);
    size_t (*scratch_floats)(const ws_model_config *c, ws_mix_mode mode, const ws_mix_shape *s);
    ws_status (*forward)(const ws_mix_call *call);
    ws_status (*backward)(const ws_mix_call *call);
} ws_mixer;

/* An Updater that replaces the layer stack (upd.{l}.* and LN_w): rmc.
 * forward reads the context's plan (x->plan): x0 (= W_{t-1} + P, W_0 rows for trajectories
 * that start from it), ctx [n_ctx, d] (c_null then the instruction tokens of each
 * trajectory), seg_self / seg_cross (state rows, and state rows ↔ context rows,
 * per trajectory), ids_prev / ids_w0 / ids_pos; it writes W_t to w_out
 * [n_state_rows, d]. w_prev may be NULL (every trajectory from W_0).
 * backward reads p->d_w (∂L/∂W_t) and accumulates into p->d_ctx, the parameter
 * gradients and p->d_x = ∂L/∂x0 (the Updater then carries p->d_x into W_0 and P).
 * A path that reads W_{t-1} without P (the gates) adds its W_0 gradient itself,
 * through p->ids_w0: W_{t-1} is a constant (DESIGN §3), W_0 is a parameter.
 * w_prev may alias w_out: forward saves in act whatever backward needs of it.
 * scratch is the plan's shared mixer scratch (scratch_floats). */
typedef struct ws_updater_variant_s {
    ws_status (*validate)(const ws_model_config *c, ws_error *err);
    int (*supported)(const ws_backend *be);
    /* registers "upd.*": the blocks' offsets in o->upd[l] (cross, mlp), LN_w's in
     * o->state_ln, its own in o->upd_variant */
    void (*layout)(ws_param_layout *L, const ws_model_config *c, ws_param_offsets *o);
    size_t (*act_floats)(const ws_exec *x); /* for the shape of x->plan */
    size_t (*scratch_floats)(const ws_exec *x);
    ws_status (*forward)(ws_exec *x, float *act, const float *w_prev, float *w_out);
    ws_status (*backward)(ws_exec *x, float *act, float *scratch);
} ws_updater_variant;

/* A readout that replaces ext.head: logits [n_query] from q = LN_o(Q) [n_query, d]
 * and the state w [n_state_rows, d], with p->seg_ext pairing each trajectory's
 * query rows with its T state rows (p->n_ext_segs segments; host copies in
 * p_host_seg_ext). backward accumulates into d_q, d_w and the parameter grads. */
typedef struct ws_readout_variant_s {
    ws_status (*validate)(const ws_model_config *c, ws_error *err);
    int (*supported)(const ws_backend *be);
    /* registers "ext.rn.*", its offsets in p */
    void (*layout)(ws_param_layout *L, const ws_model_config *c, ws_mix_params *p);
    size_t (*act_floats)(const ws_exec *x); /* for the shape of x->plan */
    size_t (*scratch_floats)(const ws_exec *x);
    ws_status (*forward)(ws_exec *x, float *act, const float *q, const float *w,
                         float *logits);
    ws_status (*backward)(ws_exec *x, float *act, float *scratch, const float *q,
                          const float *w, const float *d_logits, float *d_q, float *d_w);
} ws_readout_variant;

/* The registry (mixer.c). NULL when kind names no mixer of that slot. */
const ws_mixer *ws_mixer_find(int kind);
const ws_updater_variant *ws_updater_variant_find(int kind);
const ws_readout_variant *ws_readout_variant_find(int kind);

/* ---- what mixers share (mixer_proj.c) --------------------------------------
 * The input projections: SELF one fused "<prefix>.qkv" [q_dim + kv_dim, d] over
 * x (slot WS_MIX_Q); CROSS "<prefix>.q" [q_dim, d] over x (WS_MIX_Q) and
 * "<prefix>.kv" [kv_dim, d] over the keys (WS_MIX_KV). A mixer's own slots
 * start at WS_MIX_OWN. */
enum { WS_MIX_Q = 0, WS_MIX_KV = 1, WS_MIX_OWN = 2 };
void ws_mix_qkv_layout(ws_param_layout *L, const char *prefix, int d, ws_mix_mode mode,
                       int q_dim, int kv_dim, ws_mix_params *p);
/* q: [n, q_dim + kv_dim] in SELF mode, [n, q_dim] in CROSS; kv: [n_keys, kv_dim]
 * (CROSS only, NULL in SELF). */
ws_status ws_mix_qkv_forward(const ws_mix_call *call, int q_dim, int kv_dim, float *q,
                             float *kv);
/* From their gradients dq, dkv (same shapes) into d_x, d_keys and the weights. */
ws_status ws_mix_qkv_backward(const ws_mix_call *call, int q_dim, int kv_dim, const float *dq,
                              const float *dkv);
/* One linear y [n, out] = x [n, in] Wᵀ + b of the model's tensors o (no bias when
 * o.b == WS_NO_PARAM); backward accumulates dx (nullable) and the gradients. */
ws_status ws_mix_linear_forward(const ws_model *m, ws_lin_off o, float *y, const float *x,
                                int n, int in, int out);
ws_status ws_mix_linear_backward(const ws_model *m, ws_lin_off o, float *dx, const float *dy,
                                 const float *x, int n, int in, int out);

#endif
