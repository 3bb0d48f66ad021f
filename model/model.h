/* model.h — the Updater-Extractor model (DESIGN §2) on a compute backend.
 *
 * A model owns its parameters, gradients and AdamW state (one contiguous backend
 * allocation each, described by a table of named tensors) and its vocabulary:
 * the weights. Running them takes an execution context (ws_exec), which owns an
 * activation arena sized for the largest batch shape it has seen; a model may
 * have several (serving, online training, a publication gate), each used by one
 * thread at a time. It knows nothing about HTTP or SQL.
 *
 * One call, ws_exec_step(), runs a ragged batch of trajectories through one
 * step: W_t = U(W_{t-1}, I_t) and, when the batch has queries, logits E(W_t, Q_t).
 * In training mode it also backpropagates the mean BCE over labelled queries into
 * the parameter gradients, treating W_{t-1} as a constant (DESIGN §3), except
 * that a trajectory starting from the learned W_0 sends gradient into W_0.
 */
#ifndef WS_MODEL_H
#define WS_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"
#include "vocab.h"

#define WS_MAX_FACT_LEN 16 /* hard upper bound on symbols per fact */
#define WS_MAX_LAYERS   64 /* hard upper bound on Updater and on Extractor layers */

/* The mixers a block can use (model/mixer.h, ../shared/MIXERS.md). */
typedef enum {
#define WS_MIXER(KIND, name, role) WS_MIXER_##KIND,
#include "mixer_list.h"
#undef WS_MIXER
    WS_MIXER_COUNT
} ws_mixer_kind;

/* "mha", "simplicial2", ... ; NULL when unknown (the config's field table
 * reads the names: ws_model_config_parse). */
const char *ws_mixer_name(int kind);

/* How a symbol becomes a vector (DESIGN §2, Facts). */
typedef enum {
    WS_SYMBOLS_TABLE = 0,  /* a learned row per vocabulary id only (the encoding before
                              `symbol_code` existed: a symbol never trained on is noise) */
    WS_SYMBOLS_HASHED = 1, /* the fixed code of its bytes (kernels/symcode.h) plus a
                              learned per-id correction that starts at zero (default) */
    WS_SYMBOLS_COUNT
} ws_symbol_code;

/* What a step that tells a trajectory nothing does to its state (DESIGN §2). */
typedef enum {
    WS_EMPTY_UPDATE = 0, /* the Updater runs as on any step: a world with its own
                            dynamics (the tasks life, numbers) changes while nobody
                            tells anything; the behaviour before `empty_steps` */
    WS_EMPTY_HOLD = 1,   /* W_t = W_{t-1} exactly: a fact memory keeps what it was
                            told through any number of silent steps (default) */
    WS_EMPTY_COUNT
} ws_empty_steps;

typedef struct {
    int d;            /* width */
    int n_heads;      /* d % n_heads == 0 */
    int n_state;      /* T: world-state tokens */
    int n_upd_layers; /* L_u */
    int n_ext_layers; /* L_e */
    int max_fact_len; /* S: symbols per fact, <= WS_MAX_FACT_LEN */
    int vocab_cap;    /* symbols that get their own id */
    int n_overflow;   /* hash buckets for symbols beyond vocab_cap (>= 1) */
    int d_raw;        /* raw fact vector width; 0 disables raw facts */
    int state_norm;   /* 1: W_t = LN_w(X) (default); 0: ablation, W_t = X */
    /* mixers (model/mixer.h); the fields of a mixer not in use are ignored */
    int upd_mixer;       /* Updater state self-mixing: mha | simplicial2 | compositional | rmc */
    int ext_mixer;       /* Extractor reading W_t: mha | simplicial2 | compositional | rn */
    int s2_virtual;      /* simplicial2, SELF mode: the last M of each T state tokens are
                            its virtual entities (1 <= M < T) */
    int s2_heads;        /* simplicial2: K2 2-simplicial heads (0 = the ordinary block) */
    int s2_dim;          /* simplicial2: d2, total 2-simplicial width (s2_heads | s2_dim) */
    float s2_tau;        /* simplicial2: logit scale tau (1 = the authors) */
    int comp_searches;   /* compositional: S searches (S | d; search/value width d/S) */
    int comp_retrievals; /* compositional: R retrievals */
    int comp_dim;        /* compositional: d_r, retrieval query/key width */
    int rn_width;        /* rn: width of g and f */
    int rn_layers;       /* rn: layers of g (>= 1) */
    int symbol_code;     /* ws_symbol_code */
    int empty_steps;     /* ws_empty_steps */
    /* V >= 1 views (model/views.c): a world state is V states of T tokens, view
     * v the Updater's over the symbols' codes of view v (view 0 the codes
     * themselves, view v > 0 the codes of their hashes mixed with v: the same
     * facts on other random codes); an answer is σ of the mean of the views'
     * logits. A view's errors are mostly interference between its codes, which
     * the other views do not share. Under symbol_code "table" a symbol with an
     * id is alike in every view (views help the hashed code). 1: one state. */
    int views;
} ws_model_config;

/* One world state of a model of c: views x n_state rows (tokens) of d floats. */
int ws_model_config_state_rows(const ws_model_config *c);
size_t ws_model_config_state_floats(const ws_model_config *c);

/* The default configuration (d=128, h=4, T=32, 2+2 layers, S=4, ...). */
ws_model_config ws_model_config_default(void);
/* Checks ranges and divisibility; fills err on failure. */
ws_status ws_model_config_validate(const ws_model_config *c, ws_error *err);

/* Every ws_model_config field, described once: the key that names it in JSON
 * (checkpoints' "config" metadata and the server's API spell them alike), its
 * type, its range and worldstate-train's flag (--key with dashes, e.g.
 * --upd-mixer; an int field in [0, 1] also gets --no-key). Adding a field is one
 * row of ws_model_config_fields (config.c): JSON, range checks and the flag follow.
 * Mixer kinds and the symbol code are JSON strings ("mha", "simplicial2", ...;
 * "table", "hashed"), s2_tau a number, the rest integers. */
#define WS_MODEL_CONFIG_N_FIELDS ((int)(sizeof(ws_model_config) / sizeof(int)))
typedef enum { WS_CFG_INT, WS_CFG_FLOAT, WS_CFG_NAME } ws_config_type;
typedef struct {
    const char *key;
    const char *alias; /* worldstate-train's older, shorter flag (--heads), or NULL */
    size_t off;        /* offsetof(ws_model_config, field) */
    ws_config_type type;
    double def;        /* ws_model_config_default's value (WS_CFG_NAME: an index) */
    double lo, hi;     /* the range: lo <= v <= hi (WS_CFG_FLOAT: lo < v, so that 0
                          can be refused for a scale); WS_CFG_NAME: an index of names */
    int required; /* 0: may be absent from a checkpoint (added after format 1 began) */
    int absent_zero; /* a checkpoint without the field predates it: the field is 0
                        (the behaviour before it existed), not the default */
    const char *const *names; /* WS_CFG_NAME: the spelling of each value */
    int n_names;
} ws_model_config_field;
extern const ws_model_config_field ws_model_config_fields[]; /* N_FIELDS rows */

/* Field i's value in c as a double (a WS_CFG_NAME: its index); set stores v
 * (an integral v for a WS_CFG_INT or WS_CFG_NAME field) without checking it. */
double ws_model_config_get(const ws_model_config *c, int i);
void ws_model_config_set(ws_model_config *c, int i, double v);
/* Checks field i's value in c against the field's range; `as` names the field in
 * the message (the JSON key, a flag). Cross-field rules are ws_model_config_validate's. */
ws_status ws_model_config_check(const ws_model_config *c, int i, const char *as,
                                ws_error *err);
/* Sets field i of c from text, as a flag's value is written (an integer, a number,
 * or one of the names), in range; `as` names the field in the message. */
ws_status ws_model_config_parse(ws_model_config *c, int i, const char *text, const char *as,
                                ws_error *err);

/* JSON codec of a config (config_json.c). from_json starts from the defaults,
 * refuses unknown, repeated and ill-typed fields, requires the `required` ones
 * when need_required (checkpoints), and validates the result. */
typedef struct cJSON cJSON;
cJSON *ws_model_config_to_json(const ws_model_config *cfg);
ws_status ws_model_config_from_json(const cJSON *o, int need_required, ws_model_config *c,
                                    ws_error *err);

/* How a tensor starts (ws_model_new draws the random ones in table order from
 * one stream seeded by the model's seed). */
typedef enum {
    WS_INIT_NORMAL = 0, /* N(0, 1): embeddings, W_0, positions, c_null */
    WS_INIT_FAN_IN = 1, /* a linear map's weight [out, in]: N(0, 1/in), and AdamW decays it */
    WS_INIT_ZERO = 2,   /* biases; E_sym under the hashed code (a correction to the codes) */
    WS_INIT_ONE = 3     /* LayerNorm gains */
} ws_init_kind;

/* One named parameter tensor: offset (in floats) into the parameter buffer. */
typedef struct {
    char name[48];
    int ndim;
    int shape[2];
    size_t offset, numel;
    int init;  /* ws_init_kind */
    int decay; /* AdamW weight decay applies (projection matrices only: WS_INIT_FAN_IN) */
} ws_tensor_info;

typedef struct ws_model ws_model;
typedef struct ws_exec ws_exec;

/* ---- batches -------------------------------------------------------------
 * A batch is built on the host, trajectory by trajectory: ws_batch_begin_traj()
 * then that trajectory's instructions and queries. A fact is either up to S
 * symbols or a raw vector of d_raw floats. A symbol is its vocabulary id and the
 * hash of its bytes that seeds its fixed code (ws_sym; ws_vocab_sym makes one).
 * The id-only calls take the hash from the model's vocabulary for named ids. A
 * symbol with id -1 has no vocabulary row: a fresh symbol, its code alone
 * (under the table encoding it takes its overflow bucket, as an unseen symbol
 * beyond the vocabulary's capacity would). */
typedef struct ws_batch ws_batch;

ws_status ws_batch_new(ws_batch **out, const ws_model_config *cfg);
void ws_batch_free(ws_batch *b);
void ws_batch_clear(ws_batch *b);
/* Starts trajectory b; from_w0 != 0: its previous state is the learned W_0
 * (state row b of the W_prev buffer is then ignored and may be absent). */
ws_status ws_batch_begin_traj(ws_batch *b, int from_w0);
ws_status ws_batch_add_instr(ws_batch *b, const int32_t *ids, int n_ids, int value);
ws_status ws_batch_add_instr_raw(ws_batch *b, const float *x, int value);
/* label: 0 or 1, or -1 for an unlabelled query (answered, not trained on) */
ws_status ws_batch_add_query(ws_batch *b, const int32_t *ids, int n_ids, int label);
ws_status ws_batch_add_query_raw(ws_batch *b, const float *x, int label);
ws_status ws_batch_add_instr_syms(ws_batch *b, const ws_sym *syms, int n_syms, int value);
ws_status ws_batch_add_query_syms(ws_batch *b, const ws_sym *syms, int n_syms, int label);
int ws_batch_n_traj(const ws_batch *b);
int ws_batch_n_instr(const ws_batch *b);
int ws_batch_n_query(const ws_batch *b);
int ws_batch_n_labelled(const ws_batch *b);
/* Queries of trajectory t are rows [query_off(t), query_off(t)+query_count(t)). */
int ws_batch_query_off(const ws_batch *b, int traj);
int ws_batch_query_count(const ws_batch *b, int traj);
const float *ws_batch_labels(const ws_batch *b); /* one per query */

/* ---- the model ----------------------------------------------------------- */
/* Non-zero when the backend has the ops of every mixer cfg names (ws_model_new
 * refuses a model otherwise; callers may pick the CPU backend for it). */
int ws_model_config_supported(const ws_model_config *cfg, const ws_backend *be);
ws_status ws_model_new(ws_model **out, const ws_model_config *cfg, ws_backend *be,
                       uint64_t seed, ws_error *err);
void ws_model_free(ws_model *m);

const ws_model_config *ws_model_config_of(const ws_model *m);
/* Switches what steps that tell nothing do (ws_empty_steps): the parameters do
 * not depend on it, so a model trained with "update" can go on with "hold".
 * Not while a step of the model runs. WS_ERR_INVALID for another value. */
ws_status ws_model_set_empty_steps(ws_model *m, int empty_steps, ws_error *err);
/* Sets the model's views (ws_model_config.views): the parameters do not depend
 * on them, the size of a world state does (states of the old count are not
 * states of the new). */
ws_status ws_model_set_views(ws_model *m, int views, ws_error *err);
/* A new model (on src's backend) with add_upd more Updater and add_ext more
 * Extractor layers, appended to each stack with their residual branches' output
 * projections zero: it answers exactly as src does (same parameters, same
 * vocabulary), and training grows the new layers from there (model/deepen.c).
 * Only models whose mixers are both mha (WS_ERR_UNSUPPORTED otherwise). No
 * AdamW state is carried. */
ws_status ws_model_deepen(ws_model **out, ws_model *src, int add_upd, int add_ext,
                          uint64_t seed, ws_error *err);
ws_backend *ws_model_backend(const ws_model *m);
ws_vocab *ws_model_vocab(ws_model *m);

int ws_model_n_tensors(const ws_model *m);
const ws_tensor_info *ws_model_tensor(const ws_model *m, int i);
const ws_tensor_info *ws_model_tensor_by_name(const ws_model *m, const char *name);
size_t ws_model_n_params(const ws_model *m);
/* Device buffers (ws_model_n_params floats each). */
float *ws_model_params(ws_model *m);
float *ws_model_grads(ws_model *m);

/* Host copies of one tensor's parameters or gradients. */
ws_status ws_model_get_tensor(ws_model *m, const char *name, float *host, size_t numel,
                              int grads, ws_error *err);
ws_status ws_model_set_tensor(ws_model *m, const char *name, const float *host, size_t numel,
                              ws_error *err);

/* A world-state buffer of n trajectories (n*T*d floats) on the backend. */
size_t ws_model_state_floats(const ws_model *m);
ws_status ws_model_state_alloc(ws_model *m, int n, float **out, ws_error *err);
/* Writes W_0 into state rows [first, first+n) of a state buffer. */
ws_status ws_model_state_init(ws_model *m, float *states, int first, int n, ws_error *err);

typedef enum {
    WS_STEP_INFER = 0, /* forward only: W_t and logits */
    WS_STEP_TRAIN = 1  /* forward + backward into the gradients */
} ws_step_mode;

typedef struct {
    float loss;          /* mean BCE over labelled queries (0 if none) */
    int n_labelled;
    int n_correct;       /* labelled queries with (p >= 0.5) == label */
} ws_step_result;

/* ---- execution contexts ---------------------------------------------------
 * A context runs batches on its model's weights; it must not outlive the model.
 * Contexts share nothing but the weights and the gradients a TRAIN step
 * accumulates into. */
ws_status ws_exec_new(ws_exec **out, ws_model *m, ws_error *err);
void ws_exec_free(ws_exec *x);
ws_model *ws_exec_model(const ws_exec *x);

/* Runs one step for every trajectory of the batch.
 * w_prev: device [n_traj, T, d] (may be NULL when every trajectory is from_w0);
 * w_out:  device [n_traj, T, d], receives W_t (may alias w_prev);
 * probs_host: nullable, receives σ(logit) per query (ws_batch_n_query floats).
 * In TRAIN mode gradients are accumulated (call ws_model_zero_grads between
 * optimizer steps) with the loss of this step scaled by loss_scale. */
ws_status ws_exec_step(ws_exec *x, const ws_batch *batch, const float *w_prev, float *w_out,
                       ws_step_mode mode, float loss_scale, float *probs_host,
                       ws_step_result *res, ws_error *err);

/* Extractor only: answers the batch's queries on the given states (no update). */
ws_status ws_exec_query(ws_exec *x, const ws_batch *batch, const float *w, float *probs_host,
                        ws_step_result *res, ws_error *err);

ws_status ws_model_zero_grads(ws_model *m, ws_error *err);

/* Bytes of the context's activation arena as grown so far. */
size_t ws_exec_arena_bytes(const ws_exec *x);

/* ---- memory (memory.c) ----------------------------------------------------
 * What a model of a config takes, computed from the config alone, before
 * anything is allocated, so that a server can refuse a model it cannot hold.
 * A batch shape bounds the batches one context runs: up to n_traj trajectories
 * of up to n_instr instructions and n_query queries each, trained or not. */
typedef struct {
    int n_traj, n_instr, n_query, train;
} ws_batch_shape;

typedef struct {
    size_t params;  /* parameters, gradients and both AdamW moments (ws_model_new) */
    size_t vocab;   /* the vocabulary's tables at capacity (its strings not counted) */
    size_t arena;   /* one context's arena and input staging for the largest shape */
    size_t states;  /* the caller's world-state buffers */
    size_t total;
} ws_model_memory;

/* Fills *out for a model of cfg (validated first), one context running batches
 * of the n_shapes shapes, and n_states world-state buffers (ws_model_state_floats
 * floats each) kept beside it. An upper bound: every batch within a shape takes
 * at most its arena, the largest shape's. */
ws_status ws_model_memory_of(const ws_model_config *cfg, const ws_batch_shape *shapes,
                             int n_shapes, size_t n_states, ws_model_memory *out, ws_error *err);

typedef struct {
    float lr, beta1, beta2, eps, weight_decay;
    float clip_norm; /* <= 0: no clipping */
    float grad_scale; /* gradients are multiplied by this (e.g. 1/update_every) */
    const char *only; /* NULL: every tensor steps; else only the tensor of this name
                         (its gradient alone is clipped; the rest keep their values
                         and moments) */
} ws_optim_config;

ws_optim_config ws_optim_config_default(void);
/* One AdamW step over all parameters, then zeroes the gradients.
 * grad_norm_out (nullable) receives the global norm before clipping. */
ws_status ws_model_adamw_step(ws_model *m, const ws_optim_config *oc, float *grad_norm_out,
                              ws_error *err);
int ws_model_optim_steps(const ws_model *m);
void ws_model_set_optim_steps(ws_model *m, int steps);
/* AdamW moment buffers (device, laid out like the parameters), for checkpoints. */
float *ws_model_adam_m(ws_model *m);
float *ws_model_adam_v(ws_model *m);

#endif
