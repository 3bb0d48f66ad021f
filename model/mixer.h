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
 * Parameters: a mixer registers its tensors in order as "<prefix>.<name>"
 * (prefix e.g. "upd.0.self" or "ext.1.cross") and finds them again by name
 * (ws_model_param_off). Generic initialisation applies (model.c): tensors
 * registered with decay=1 are linear weights [out, in] drawn N(0, 1/in); names
 * ending in ".b" are zero; names containing "ln" ending ".g" are one; anything
 * else N(0, 1).
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
    const char *prefix; /* this use's tensor prefix, e.g. "upd.0.self" */
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
} ws_mix_call;

typedef struct ws_mixer_s {
    int kind; /* ws_mixer_kind */
    const char *name;
    unsigned modes; /* WS_MIX_SELF | WS_MIX_CROSS that it can fill */
    /* Checks the config fields it reads (range, divisibility) for this mode. */
    ws_status (*validate)(const ws_model_config *c, ws_mix_mode mode, ws_error *err);
    /* Non-zero when the backend has every op it calls. */
    int (*supported)(const ws_backend *be);
    void (*layout)(ws_param_layout *L, const char *prefix, const ws_model_config *c,
                   ws_mix_mode mode);
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
    int kind;
    const char *name;
    ws_status (*validate)(const ws_model_config *c, ws_error *err);
    int (*supported)(const ws_backend *be);
    void (*layout)(ws_param_layout *L, const ws_model_config *c); /* registers "upd.*" */
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
    int kind;
    const char *name;
    ws_status (*validate)(const ws_model_config *c, ws_error *err);
    int (*supported)(const ws_backend *be);
    void (*layout)(ws_param_layout *L, const ws_model_config *c); /* registers "ext.rn.*" */
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

/* Offset of tensor "<prefix><suffix>" in the parameter (and gradient) buffer;
 * aborts on a missing name (a programming error: names come from layout). */
size_t ws_model_param_off(const ws_model *m, const char *prefix, const char *suffix);

#endif
