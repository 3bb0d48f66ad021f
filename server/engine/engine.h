/* engine.h — the engine (DESIGN §4), a library of its own (ws_engine): one
 * thread owns the compute backend and every loaded model. It takes native jobs
 * (steps, queries, labels, model creation, import and training settings) from
 * a queue, batches them (each session at most once per batch, so a session's
 * steps apply in order), runs the model, commits each group in one SQLite
 * transaction on a commit thread while the next batch runs (a session in at
 * most one of the two), publishes the versions that each model's online-training
 * thread makes (between batches: training itself never runs on the engine
 * thread), and completes every job through its callback. It speaks no HTTP and parses no request: a front end (the
 * daemon's HTTP edge, tests/test_engine.c) builds jobs and reads results, the
 * way llama.cpp's server keeps JSON and status codes at its edge.
 *
 *   ws_engine_config cfg = ws_engine_config_default();   ...data_dir, db_path
 *   ws_engine_start(&cfg, &e, &err);
 *   ws_job *j = calloc(1, sizeof *j); j->kind = WS_JOB_STEP; ... j->done = cb;
 *   ws_engine_submit(e, j, &err);   cb(j, user) runs on an engine thread;
 *   ...                             the job is the caller's again: ws_job_free(j)
 *   ws_engine_free(e);
 */
#ifndef WS_ENGINE_H
#define WS_ENGINE_H

#include <stdint.h>

#include "model/model.h"
#include "storage/storage.h"
#include "server/common/limits.h"
#include "state_cache.h"

typedef struct ws_engine ws_engine;

/* The CPU priority of the online-training threads (engine_train.c). */
typedef enum {
    WS_TRAIN_PRIORITY_LOW = 0, /* nice 19: a small share of a busy CPU (default) */
    WS_TRAIN_PRIORITY_IDLE,    /* SCHED_IDLE: only CPU nothing else wants */
    WS_TRAIN_PRIORITY_NORMAL   /* as the engine's: an equal share */
} ws_train_priority;

typedef struct {
    char data_dir[WS_SRV_PATH_MAX];     /* checkpoints live in <data_dir>/models */
    char db_path[WS_SRV_PATH_MAX + 32]; /* the SQLite database */
    ws_store_durability durability;
    int force_cpu;      /* else the best backend found */
    int max_batch;      /* jobs per batch */
    int batch_wait_us;  /* after a batch of several jobs was answered, the longest wait
                           for half as many again (never when idle: engine.c,
                           continuous batching) */
    int max_queue;      /* queued jobs before ws_engine_submit refuses */
    int job_timeout_ms; /* a job still queued this long is failed without running */
    /* Bytes all loaded models may take together (ws_engine_model_bytes): a model
     * that would take the total past it is refused before it is allocated.
     * Models loaded at start count but are never refused. */
    size_t max_model_memory;
    /* Bytes of session states the engine keeps from its commits, so that a
     * session's next step need not read its state from the store
     * (state_cache.h); 0: none. Never used on a shared store. */
    size_t state_cache_bytes;
    /* How long the engine thread polls for the next job before it sleeps, µs
     * (engine.c, idle_until); 0: it sleeps at once. */
    int idle_spin_us;
    ws_train_priority train_priority;
    /* Process-wide counters (may be NULL): on_batch on the commit thread once
     * the batch is answered, on_training_update on a model's training thread as
     * an AdamW step begins. */
    void (*on_batch)(int n_jobs, int n_steps, int n_queries);
    void (*on_training_update)(void);
} ws_engine_config;

/* max_batch 64, batch_wait_us 2000, max_queue 4096, job_timeout_ms 30000,
 * max_model_memory half of the machine's physical memory (the other half for
 * SQLite's cache, sessions, the HTTP threads and the rest of the machine);
 * data_dir and db_path empty (the caller's to set). */
ws_engine_config ws_engine_config_default(void);
/* The bytes an engine of cfg holds for a model of mc: parameters, gradients
 * and AdamW state twice (the served weights and the training thread's copy),
 * the vocabulary, the serving context's activation arena for the largest
 * serving batch (max_batch steps of WS_SRV_MAX_ITEMS instructions and queries)
 * and the training context's for the largest online-training batch, the
 * engine's max_batch world states on device and host, and the online trainer's
 * states and examples.
 * An upper bound, computed from the config alone (model.h ws_model_memory_of). */
ws_status ws_engine_model_bytes(const ws_engine_config *cfg, const ws_model_config *mc, size_t *out,
                                ws_error *err);

/* ---- jobs ---------------------------------------------------------------- */
typedef enum {
    WS_JOB_STEP,           /* instructions, then queries, on a session's state: a new step */
    WS_JOB_QUERY,          /* queries on the session's current state: nothing changes */
    WS_JOB_LABELS,         /* labels for the queries of a committed step */
    WS_JOB_MODEL_CREATE,   /* a new model with random parameters (built off the engine
                              thread: serving goes on meanwhile) */
    WS_JOB_TRAINING_SET,   /* change some of a model's online-training settings */
    WS_JOB_MODEL_IMPORT,   /* a checkpoint file becomes a model, or a model's next version
                              (loaded off the engine thread: serving goes on meanwhile) */
    WS_JOB_SESSION_CREATE, /* a session on a model (model_name); its id into session */
    WS_JOB_SESSION_DELETE, /* a session and its step log */
    WS_JOB_MODEL_ROLLBACK, /* make a recorded version (version) of a model current again */
    WS_JOB_MODEL_DELETE    /* a model with its versions, vocabulary and checkpoint files */
} ws_job_kind;

/* A fact: 1..max_fact_len symbols, or a vector of the model's d_raw numbers. */
typedef struct {
    int n_sym;                  /* 0: a vector fact */
    char *sym[WS_MAX_FACT_LEN]; /* owned, NUL-terminated */
    float *vec;                 /* owned, n_vec floats */
    int n_vec;
    int value; /* instruction: 0 or 1; query: its label, -1 none */
} ws_job_fact;

/* Why a job failed, where its status alone does not say it. */
typedef enum {
    WS_JOB_FAILED,             /* see result.status */
    WS_JOB_STEP_CONFLICT,      /* the session is not at expect_step (result.step: where it is) */
    WS_JOB_LABELS_CONFLICT,    /* the step already has other labels, and replace is 0 */
    WS_JOB_DEADLINE,           /* queued past job_timeout_ms: not run */
    WS_JOB_SHUTTING_DOWN,      /* the engine stopped before running it */
    WS_JOB_BAD_CHECKPOINT,     /* import: not a checkpoint, or a model this engine cannot hold */
    WS_JOB_CONFIG_MISMATCH,    /* import: the checkpoint's config is not the model's */
    WS_JOB_VOCAB_MISMATCH,     /* import: a symbol id means another symbol in the model */
    WS_JOB_MODEL_TOO_LARGE,    /* create, import: the model would take the loaded models
                               past max_model_memory (err.msg: bytes needed and left) */
    WS_JOB_INCONSISTENT,       /* the data directory contradicts itself (a stored state that
                                does not fit its model, a session's model not loaded) */
    WS_JOB_MODEL_NOT_FOUND,    /* session create: no model of that name */
    WS_JOB_SESSION_LIMIT,      /* session create: the tenant has max_sessions sessions */
    WS_JOB_MODEL_IS_DEFAULT,   /* delete: "default", the model of sessions that name none */
    WS_JOB_MODEL_IN_USE,       /* delete: sessions still use the model */
    WS_JOB_VERSION_UNAVAILABLE /* rollback: the version's checkpoint is gone or damaged */
} ws_job_why;

typedef struct {
    ws_status status; /* WS_OK, or what failed (err.msg says it) */
    ws_job_why why;   /* when status != WS_OK */
    ws_error err;
    int64_t step; /* STEP: the step made; QUERY: the session's step; LABELS: the
                              step labelled; WS_JOB_STEP_CONFLICT: the session's step */
    float *p;     /* STEP, QUERY: one probability per query (owned) */
    int n_p;
    int64_t model_version;    /* STEP, QUERY: the version that answered */
    int training_example;     /* LABELS: the labelled step is now a training example */
    int created;              /* MODEL_IMPORT: 1 a new model, 0 a new version of one */
    ws_srv_training training; /* TRAINING_SET: the settings now in force */
} ws_job_result;

typedef struct ws_job ws_job;
/* Completion, on one of the engine's threads (the engine thread, or the
 * commit thread for the steps, queries and labels of a batch), once
 * job->result is written. From the call on the job is the caller's again: the
 * engine never touches it after. */
typedef void ws_job_done_fn(ws_job *job, void *user);

struct ws_job {
    ws_job_kind kind;
    /* STEP, QUERY, LABELS, SESSION_CREATE (session: the new id), SESSION_DELETE */
    int64_t tenant;
    char session[WS_STORE_ID_LEN + 1];
    int64_t max_sessions;       /* SESSION_CREATE: the tenant's cap (0: none) */
    int64_t expect_step;        /* STEP: apply only at this step; -1 any */
    ws_job_fact *instr, *query; /* owned arrays (STEP: both; QUERY: queries) */
    int n_instr, n_query;
    int has_labels;     /* STEP: the queries' values are client labels */
    int64_t label_step; /* LABELS: the step labelled */
    int *labels;        /* LABELS: owned, n_labels of 0 or 1 */
    int n_labels;
    int replace; /* LABELS: overwrite different labels */
    /* The step log's JSON text of what was sent (owned; written by the front
     * end, as it lists the log): STEP instr_json and query_json, labels_json
     * when labelled; LABELS labels_json. */
    char *instr_json, *query_json, *labels_json;
    /* MODEL_CREATE, TRAINING_SET, MODEL_IMPORT, SESSION_CREATE, MODEL_ROLLBACK */
    char model_name[WS_STORE_NAME_MAX + 1];
    /* MODEL_CREATE, MODEL_IMPORT: the tenant the new model is for, only its
     * sessions use it; 0 a model shared by all (import: an existing model's
     * tenant must be this one, or 0) */
    int64_t model_tenant;
    int64_t version;          /* MODEL_ROLLBACK: the version to serve */
    ws_model_config cfg;      /* MODEL_CREATE */
    uint64_t seed;            /* MODEL_CREATE */
    ws_srv_training training; /* MODEL_CREATE: the settings; TRAINING_SET: new values */
    unsigned training_fields; /* TRAINING_SET: which (WS_SRV_TRAINING_* bits) */
    char *upload;             /* MODEL_IMPORT: the checkpoint's file (owned path); the
                                  engine moves it into place or removes it, ws_job_free
                                  removes it from a job that never ran */
    /* completion */
    ws_job_done_fn *done;
    void *user;
    ws_job_result result;
    /* the engine's own */
    int64_t deadline_us;
    int tries; /* STEP without expect_step: runs again after another daemon's step */
    ws_job *next;
};

/* Frees the job and everything it owns (NULL is fine). */
void ws_job_free(ws_job *j);
/* A symbol fact of n owned copies of syms[i] (lens[i] bytes each). */
ws_status ws_job_fact_syms(ws_job_fact *f, const char *const *syms, const int *lens, int n,
                           ws_error *err);

/* ---- the engine ---------------------------------------------------------- */
/* Opens the store and the backend, loads every model (on a fresh data
 * directory: creates the model "default", from the checkpoint shipped in the
 * binary when there is one) and starts the thread. */
ws_status ws_engine_start(const ws_engine_config *cfg, ws_engine **out, ws_error *err);
/* Queues a job; WS_ERR_UNSUPPORTED when stopping, WS_ERR_CONFLICT when the
 * queue is full (the job stays the caller's). */
ws_status ws_engine_submit(ws_engine *e, ws_job *job, ws_error *err);
/* Stops the thread after the batch in hand: queued jobs complete with
 * WS_JOB_SHUTTING_DOWN, later submits are refused. Idempotent. */
void ws_engine_stop(ws_engine *e);
/* Stops if needed, then frees the models, backend and storage connection. */
void ws_engine_free(ws_engine *e);
const char *ws_engine_backend_name(ws_engine *e);
/* Why the automatic backend is not CUDA ("no CUDA plugin at ...", "no CUDA
 * device", ...); "" when it is, or when --backend cpu asked for the CPU. */
const char *ws_engine_backend_why(ws_engine *e);
int ws_engine_queue_depth(ws_engine *e);
/* Seconds the engine thread has waited with nothing to run since it started
 * (its busy share is 1 - the rate of this): the online training threads wait
 * while it is busy. */
double ws_engine_idle_seconds(ws_engine *e);
/* The state cache's counters (state_cache.h); 0 when the engine keeps none
 * (state_cache_bytes 0, or a shared store). */
int ws_engine_state_cache(ws_engine *e, ws_state_cache_stats *out);

/* One version's scores at the publication gate (engine_gate.c). */
/* The probe's answers by kind: told true, overridden, never told (the memory
 * probe), and the told-moves worlds' answers (WS_ENGINE_GATE_MOVES). */
#define WS_ENGINE_GATE_KINDS 4
#define WS_ENGINE_GATE_MOVES 3
typedef struct {
    double probe; /* accuracy on the fixed memory probe; -1: not run (facts of
                     fewer than 4 symbols) */
    double probe_kind[WS_ENGINE_GATE_KINDS]; /* the same per kind of answer; -1: none */
    long probe_kind_n[WS_ENGINE_GATE_KINDS];
    long replay_right, replay_n; /* held-out answers replayed right, of */
} ws_engine_gate_score;

/* The publication gate of a model: its counts since the start and its last
 * decision. */
typedef struct {
    int64_t published, rejected;
    int64_t restored; /* times the anchor was served again (engine_gate.c) */
    /* The served version's probe (probe < 0: not measured yet), and the best
     * probe accuracies, overall and per kind, that a version served since the
     * last load, adoption or rollback had: the bar, less the tolerance (so
     * versions cannot creep down one tolerance at a time); -1 none. */
    ws_engine_gate_score served;
    double best_probe, best_kind[WS_ENGINE_GATE_KINDS];
    /* The version kept as the held-out replay's bar (the anchor, engine_gate.c):
     * the line's first, then each published candidate that replayed more right
     * than the anchor on its gate's set. */
    int64_t anchor_version;
    int has_last;
    struct {
        int published;                 /* 1: published as version; 0: rejected */
        int64_t base_version, version; /* trained from; published as (0: rejected) */
        int64_t restored_version;      /* the anchor served again as (0: not) */
        ws_engine_gate_score served, candidate;
        double ms; /* the evaluation's wall time */
        char reason[160];
    } last;
} ws_engine_gate_info;

/* A loaded model as the engine serves and trains it. */
typedef struct {
    int64_t id, version;
    int64_t unloadable; /* the recorded current version when it cannot be served; 0 none */
    char name[WS_STORE_NAME_MAX + 1];
    int examples_ready, examples_held_out;
    int64_t examples_labelled, examples_self, examples_trained, examples_dropped, updates;
    float last_loss;
    size_t memory_bytes; /* ws_engine_model_bytes of its config */
    ws_engine_gate_info gate;
} ws_engine_model_info;

/* ---- what the web console charts (history.c) ---------------------------- */
/* Bounded and in memory only: it starts empty with the engine. */
#define WS_ENGINE_HISTORY_POINTS  512 /* training points kept per model, the newest */
#define WS_ENGINE_CHANGE_STEPS    32  /* state changes kept per session, the newest */
#define WS_ENGINE_CHANGE_SESSIONS 256 /* sessions kept: the most recently stepped */

/* One online-training update of a model (an AdamW step). */
typedef struct {
    int64_t time_ms;          /* wall clock, when it was recorded */
    int64_t version;          /* the version served after it */
    int64_t updates;          /* updates so far, this one included */
    int64_t examples_trained; /* examples trained on so far */
    double loss;              /* mean training loss of the update's examples */
    int gated;                /* 1: the publication gate decided on it (below) */
    int published;            /* gated: 1 published, 0 rejected */
    ws_engine_gate_score served, candidate;
} ws_engine_train_point;

/* The model's points, oldest first, into out (WS_ENGINE_HISTORY_POINTS
 * room); returns how many. */
int ws_engine_training_history(ws_engine *e, int64_t model_id, ws_engine_train_point *out);

/* A session's newest steps that ran the Updater on a stored state (a step
 * from the learned W_0 has none): per step, each state token's change norm
 * ||W_t[i] - W_{t-1}[i]||_2. */
typedef struct {
    int n_state, n; /* tokens per step, steps (oldest first; 0: none known) */
    int64_t step[WS_ENGINE_CHANGE_STEPS], version[WS_ENGINE_CHANGE_STEPS];
    float *norm; /* n rows of n_state (owned: free()) */
} ws_engine_state_changes;
ws_status ws_engine_state_changes_of(ws_engine *e, const char *session,
                                     ws_engine_state_changes *out, ws_error *err);

/* The model of that id: 1 with *out filled, 0 when it is not loaded. */
int ws_engine_model_info_of(ws_engine *e, int64_t model_id, ws_engine_model_info *out);
/* A rule learned from a model's labels (server/engine/rules.h): facts of
 * `arity` symbols that differ only at `position` and hold `anchor` at
 * `anchor_position` cannot both hold — once it `holds`. */
typedef struct {
    int arity, position, anchor_position;
    /* the anchor symbol ("" unknown), cut between characters: 63 bytes at most */
    char anchor[64];
    uint32_t exclusive, not_exclusive; /* labelled queries for it and against it */
    int contexts;                      /* distinct facts it was seen with, up to 3 */
    int holds;
} ws_engine_rule;
/* The model's rules with evidence, most evidence first, at most max into out;
 * returns how many (0 when the model is not loaded). */
int ws_engine_model_rules(ws_engine *e, int64_t model_id, ws_engine_rule *out, int max);

/* Calls fn for every loaded model, under the engine's lock (fn must not call
 * the engine). */
void ws_engine_models_each(ws_engine *e, void (*fn)(void *ctx, const ws_engine_model_info *m),
                           void *ctx);

#endif
