/* engine_impl.h — engine internals shared by the files of server/engine/
 * (engine.h is the interface). The engine parses no request, but SQLite keeps
 * some things as JSON (training settings, model configs, the step log's
 * answers), so cJSON is used here, never in engine.h. */
#ifndef WS_ENGINE_IMPL_H
#define WS_ENGINE_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include "server/common/common.h"
#include "server/common/log.h"
#include "engine.h"
#include "files.h"
#include "kernels/threads_pick.h"
#include "model/exec_pool.h"
#include "online_trainer.h"
#include "rules.h"
#include "state_cache.h"
#include "engine_train.h"

/* Flights the engine thread may have handed to the commit stage and not yet
 * seen completed. Two: a batch computed while the commit thread is still on
 * the one before it is handed over at once, and the engine thread goes on
 * to the next, instead of waiting for that commit (which the HTTP threads and
 * the clients preempt on a small machine). */
#define WS_ENG_FLIGHTS 2

typedef struct {
    int64_t id;
    char name[WS_STORE_NAME_MAX + 1];
    ws_model *m;
    ws_exec_pool *pool; /* serving: the contexts of m on the engine thread and the crew's */
    ws_model_config cfg;
    int64_t version;
    int64_t unloadable; /* a recorded version that failed to load (not tried again): the
                           current one in SQLite while an older one is served; 0 none */
    int64_t latest;     /* the greatest version recorded, as last seen: a rollback makes
                           an older one current, and the next publish goes on top */
    int vocab_stored;   /* symbols already in SQLite; the rest go with the next commit (on a
                           shared store: before the batch that named them is computed) */
    atomic_int leader;  /* this daemon holds the model's cluster lock (ws_store_leader_try):
                           it alone trains and publishes; always 1 on SQLite */
    ws_srv_training tr;
    ws_online_trainer *trainer; /* the examples made from its committed steps */
    ws_eng_trainer *train;      /* its training thread (NULL: it could not start) */
    ws_rules *rules;            /* exclusive relations learned from its labels (tr.rules) */
    ws_threads_pick par[2]; /* the threads of its step and of its query passes */
    float *w_dev;           /* max_batch states on the backend */
    float *w_host[WS_ENG_FLIGHTS + 1]; /* max_batch states on the host: one per flight in
                                          hand (engine_commit.c), one for the batch being
                                          computed */
    size_t bytes;           /* what it takes (ws_engine_model_bytes), counted in mem_used */
} ws_eng_model;

typedef struct ws_eng_build ws_eng_build;
typedef struct ws_eng_history ws_eng_history;
typedef struct ws_eng_flight ws_eng_flight;

#define WS_ENG_CKPT_PATH (WS_SRV_PATH_MAX + 128) /* a checkpoint's path (ws_srv_ckpt_path) */

struct ws_engine {
    ws_engine_config cfg;
    ws_store *st;               /* the engine thread's own connection */
    int shared;                 /* other daemons serve the same database (ws_store_shared) */
    ws_state_cache *cache;      /* states of this engine's commits; NULL: none */
    int64_t created_unloadable; /* another daemon's new model that did not load (said once) */
    int sync_due; /* engine thread: a session named a model not loaded; sync before the next batch */
    ws_backend *be;
    ws_exec_crew *crew;    /* the helper threads of every model's passes (NULL: not the CPU) */
    char backend_why[256]; /* why not CUDA, when the automatic backend is the CPU */
    pthread_t thread;
    int started;
    pthread_mutex_t mu; /* guards the queue and the model table */
    pthread_cond_t cv;
    ws_job *head, *tail;
    int depth, stop;
    ws_eng_model *models;
    int n_models, cap_models;
    _Atomic size_t mem_used; /* loaded models' bytes and those reserved for models
                                being built or imported (atomic: an import
                                reserves on its build's thread) */
    ws_eng_build *builds;    /* engine thread: creations and imports in flight (engine_build.c) */
    ws_eng_history *hist;    /* what the console charts (history.c) */
    /* The commit stage (engine_commit.c), under mu: */
    ws_store *commit_st; /* the commit thread's own connection */
    pthread_t commit_thread;
    int commit_started, commit_stop;
    pthread_cond_t commit_cv; /* wakes the commit thread: a flight handed over, or stop */
    ws_eng_flight *flight[WS_ENG_FLIGHTS]; /* handed over and not yet completed, in the
                                              order handed: flight[0] is being committed */
    int n_flight;
    int refill;       /* jobs of the last completed flight, their clients coming back
                         (engine.c waits for them when idle); 0 once waited */
    unsigned flights; /* flights computed: which w_host buffer the next one uses */
    /* The engine thread's time with nothing to run (engine.c; any thread reads
     * them through ws_eng_idle_us): what the training threads yield to. */
    _Atomic int64_t idle_us;    /* idle waits completed, µs */
    _Atomic int64_t idle_since; /* monotonic start of the idle wait under way; 0: none */
    _Atomic unsigned signals;   /* ws_eng_signal's count: what idle_until polls for */
    _Atomic int training_now;   /* training threads inside a pass: idle_until polls only at 0 */
};

/* engine_models.c */
ws_status ws_eng_models_load(ws_engine *e, ws_error *err);
/* Reserves a model of cfg's bytes (*bytes) in mem_used; WS_ERR_INVALID, with the
 * bytes needed and left, when that would pass max_model_memory (or cfg is not
 * valid): nothing is reserved then. */
ws_status ws_eng_memory_reserve(ws_engine *e, const ws_model_config *cfg, size_t *bytes,
                                ws_error *err);
void ws_eng_memory_release(ws_engine *e, size_t bytes);
/* Counts a model of cfg's bytes (*bytes) in mem_used without a check, for the
 * models of a start (loaded, or the default one made on first start): the
 * server never refuses to start over a model it accepted; a total over the
 * bound is logged. */
ws_status ws_eng_memory_count(ws_engine *e, const char *name, const ws_model_config *cfg,
                              size_t *bytes, ws_error *err);
/* A new model of cfg with random parameters, written as version 1 of `name` at
 * *path (WS_ENG_CKPT_PATH bytes), the file's SHA-256 into sha256: what creation
 * does off the engine thread (it touches no engine state but the backend, which
 * takes calls from any thread; hashing a large file is as slow as writing it). */
ws_status ws_eng_model_build(ws_engine *e, const char *name, const ws_model_config *cfg,
                             uint64_t seed, ws_model **out, char *path, char sha256[65],
                             ws_error *err);
/* Builds and installs model `name` on the calling thread (first start: the
 * default model of a build that ships none), its bytes counted. */
ws_status ws_eng_model_create_now(ws_engine *e, const char *name, const ws_model_config *cfg,
                                  const ws_srv_training *tr, uint64_t seed, ws_error *err);
/* Adds model `name` (of tenant `tenant`, 0: shared) served from m (owned: freed on failure), whose version 1
 * is already written at `path` (its SHA-256: sha256, or NULL to read the file
 * here), and whose `bytes` were reserved (the model's
 * from now on; released on failure): records the model, version 1 with `note`
 * and m's vocabulary in one transaction. On failure nothing stays: no row, and
 * no file at path (except for WS_ERR_CONFLICT, a name in use: path is untouched). */
ws_status ws_eng_model_install(ws_engine *e, const char *name, int64_t tenant, ws_model *m,
                               size_t bytes, const ws_srv_training *tr, const char *path,
                               const char *sha256, const char *note, ws_eng_model **out,
                               ws_error *err);
/* Serves m (owned, freed on failure; em's configuration) as version `version`
 * of em from the next batch on; the gradients summed for the replaced
 * parameters are dropped. */
ws_status ws_eng_model_adopt(ws_engine *e, ws_eng_model *em, ws_model *m, int64_t version,
                             ws_error *err);
ws_eng_model *ws_eng_model_by_id(ws_engine *e, int64_t id);
ws_eng_model *ws_eng_model_by_name(ws_engine *e, const char *name);
/* 1 when a training thread has a candidate version waiting (mu held). */
int ws_eng_models_waiting(ws_engine *e);
/* Publishes every candidate waiting (engine thread, between batches, mu not
 * held): as each model's next version, recorded and served from the next
 * batch on; the training thread is told either way (ws_eng_trainer_verdict). */
void ws_eng_models_publish(ws_engine *e);
/* Serves each model's current version as recorded in SQLite, loading those that
 * another process recorded (api.md, Online training: an external version wins). */
void ws_eng_models_sync(ws_engine *e);
void ws_eng_models_free(ws_engine *e);
/* Takes each model's cluster lock where another daemon does not hold it, and
 * says when that changes (engine thread, between batches). */
void ws_eng_models_lead(ws_engine *e);
/* Puts a step job that lost its session to another daemon's step back at the
 * head of the queue, to run again on the state now stored (any thread, mu not
 * held); 0 when it has run WS_ENG_STEP_TRIES times (the caller answers it). */
int ws_eng_requeue(ws_engine *e, ws_job *j);
#define WS_ENG_STEP_TRIES 16
/* Wakes the engine thread (ctx: the engine), from any thread holding no lock. */
void ws_eng_wake(void *ctx);
/* Signals e->cv (mu held): every wake of the engine thread goes through here,
 * so that its poll before it sleeps (engine.c, idle_until) sees it. */
void ws_eng_signal(ws_engine *e);
/* The engine thread's idle time so far, µs, the wait under way included (ctx:
 * the engine; any thread, no lock). */
int64_t ws_eng_idle_us(void *ctx);

/* engine_gate.c: the publication gate (on a training thread). */
/* Scores x's model's parameters as they are now, in x: the fixed memory probe
 * (when probe is non-zero; else out->probe is left as it is) and the replay of
 * t's held-out examples. */
ws_status ws_eng_gate_score(ws_exec *x, ws_online_trainer *t, int probe, ws_engine_gate_score *out,
                            uint8_t *answers, ws_error *err);
/* 1 when the candidate may be published: its probe accuracy, overall and per
 * kind, is not below the served version's or g's best by more than the
 * tolerance, nor its replay accuracy below the better of the served version's
 * and the anchor's (NULL: the anchor is the served version) on the same set;
 * else 0 with why. */
int ws_eng_gate_pass(const ws_srv_training *tr, const ws_engine_gate_info *g,
                     const ws_engine_gate_score *served, const ws_engine_gate_score *anchor,
                     const ws_engine_gate_score *cand, char *why, size_t cap);
/* 1 when the anchor (NULL: the served version is the anchor) is to be served
 * again in place of the served version: on the same set it replayed better by
 * the tolerance or more, and anchor_leads (its lead answer by answer over the
 * served version's is beyond chance: ws_eng_gate_leads). */
int ws_eng_gate_restores(const ws_srv_training *tr, const ws_engine_gate_score *served,
                         const ws_engine_gate_score *anchor, int anchor_leads);
/* 1 when mine leads bar beyond chance, answer by answer (1 right, 0 wrong, n
 * each, the same questions): of the answers only one of them got right, mine
 * has more by 3 standard deviations of a fair coin (a sign test). Over
 * hundreds of gates a candidate of a line that is getting worse still wins a
 * set by a few answers now and then; it must not become the anchor. */
int ws_eng_gate_leads(const uint8_t *mine, const uint8_t *bar, long n);
/* A new served line (a load, an adoption, a rollback) from version: nothing
 * measured yet, version is the anchor. */
void ws_eng_gate_reset(ws_engine_gate_info *g, int64_t version);
/* The gate's verdict on cand, scored beside served (and the anchor, NULL when
 * it is the served version) on one replay set: the version served from now on
 * is cand when published, else served (its best accuracies raise the bar).
 * 1 when cand, published, replayed better than the anchor by the tolerance or
 * more, and sure (its lead answer by answer is beyond chance: engine_train.c):
 * it is the anchor from now on (the caller keeps its parameters and sets
 * anchor_version). */
int ws_eng_gate_served(const ws_srv_training *tr, ws_engine_gate_info *g,
                       const ws_engine_gate_score *served, const ws_engine_gate_score *anchor,
                       const ws_engine_gate_score *cand, int published, int sure);
/* WS_JOB_MODEL_ROLLBACK (engine_models.c). */
void ws_eng_rollback_job(ws_engine *e, ws_job *j);
/* WS_JOB_MODEL_DELETE (engine_models.c): refused for "default", for a model
 * that sessions use or that is being built; else the rows go in one
 * transaction, then the model leaves the table and its files are removed. */
void ws_eng_model_delete_job(ws_engine *e, ws_job *j);

/* engine_import.c: models from checkpoint files. */
/* WS_JOB_MODEL_IMPORT, in three parts. On the engine thread, what refuses it
 * before its file is read: a model being created under `name`, or a version
 * whose tenant (> 0) is not the model's (WS_ERR_CONFLICT); *em: the model it
 * would be a version of (NULL: a new model). */
ws_status ws_eng_import_check(ws_engine *e, const char *name, int64_t tenant, ws_eng_model **em,
                              ws_error *err);
/* Off the engine thread (it touches no engine state but the backend and
 * mem_used): loads and checks the checkpoint in `file` (always consumed:
 * renamed into place or removed). A new model (model_cfg NULL) has its bytes
 * reserved (*bytes; at_start: counted, not refused) and its file placed as
 * version 1 at *path (WS_ENG_CKPT_PATH bytes; its SHA-256 in sha256); a version
 * must have model_cfg. A refusal of the checkpoint itself sets *why
 * (WS_JOB_BAD_CHECKPOINT, _CONFIG_MISMATCH, _MODEL_TOO_LARGE); other failures
 * leave it WS_JOB_FAILED. Nothing stays on failure. */
ws_status ws_eng_import_load(ws_engine *e, const char *name, const char *file,
                             const ws_model_config *model_cfg, int at_start, ws_model **out,
                             size_t *bytes, char *path, char sha256[65], ws_job_why *why,
                             ws_error *err);
/* On the engine thread: m (owned: freed on failure) becomes em's next version;
 * vocabularies that disagree are WS_JOB_VOCAB_MISMATCH. Nothing changes on
 * failure. */
ws_status ws_eng_import_version(ws_engine *e, ws_eng_model *em, ws_model *m, ws_job_why *why,
                                ws_error *err);
/* Removes an import job's upload, if it still has one. */
void ws_eng_upload_drop(ws_job *j);
/* First start: the model "default" from the checkpoint shipped in the binary,
 * or, in a build without one, with random parameters (said loudly). */
ws_status ws_eng_default_create(ws_engine *e, ws_error *err);
/* Removes the temporary files a crash left in models/: uploads
 * (WS_SRV_UPLOAD_PREFIX) and checkpoints being saved by a process now gone. */
void ws_eng_tmp_clean(ws_engine *e);

/* history.c: the console's history (engine.h), recorded on the engine thread. */
ws_status ws_eng_history_new(ws_eng_history **out, ws_error *err);
void ws_eng_history_free(ws_eng_history *h);
/* A point for em when st counts an update the history has not seen (with the
 * gate's last decision when the gate decided since). */
void ws_eng_history_train(ws_eng_history *h, int64_t model_id, int64_t version,
                          const ws_online_stats *st, const ws_engine_gate_info *gate);
/* Drops a deleted model's points (a later model may get its id). */
void ws_eng_history_forget_model(ws_eng_history *h, int64_t model_id);
/* The change norms of a session's step `step` (prev, next: n_state x d). */
void ws_eng_history_change(ws_eng_history *h, const char *session, int64_t step, int64_t version,
                           int n_state, int d, const float *prev, const float *next);

/* engine_sessions.c: WS_JOB_SESSION_CREATE and WS_JOB_SESSION_DELETE. */
void ws_eng_session_job(ws_engine *e, ws_job *j);

/* engine_build.c: WS_JOB_MODEL_CREATE and WS_JOB_MODEL_IMPORT off the engine thread. */
/* Checks the name (and reserves a creation's memory), then builds or loads on
 * a thread of its own; the job completes when the engine installs what was
 * built. */
void ws_eng_build_start(ws_engine *e, ws_job *j);
/* Installs every finished build and completes its job (engine thread, mu not held). */
void ws_eng_builds_finish(ws_engine *e);
/* 1 while a model of that name is being built or imported (its name is taken). */
int ws_eng_building(ws_engine *e, const char *name);
/* 1 when a build has finished (mu held). */
int ws_eng_builds_ready(ws_engine *e);
/* After the engine thread stopped: waits for every build, discards what was
 * built and completes its job with WS_JOB_SHUTTING_DOWN. */
void ws_eng_builds_stop(ws_engine *e);

/* A job of a batch as it goes through the pipeline. */
typedef struct {
    ws_job *j;
    ws_store_session sess;
    ws_eng_model *em;
    int32_t *ids;   /* (n_instr + n_query) rows of S ids, -1 padded (vector rows all -1) */
    uint64_t *hash; /* the same rows: each symbol's hash of its bytes (its fixed code, also
                       for a symbol past the vocabulary's capacity), 0 padded */
    int row;        /* trajectory in the model's batch */
    int q_off;      /* first answer in the probs array */
    int live;       /* still to be answered by the run */
    ws_recall_facts *told; /* STEP under rules (engine_rules.c): what the session was
                              told, this step included; NULL otherwise */
} ws_eng_item;

/* engine_run.c: row r of the item's facts (instructions, then queries) as
 * symbols (id and hash), S of them into out; returns out. */
const ws_sym *ws_eng_row_syms(const ws_eng_item *it, int r, int S, ws_sym *out);

/* engine_rules.c: a step job of a model with rules on (tr.rules) whose symbols
 * are mapped: learns from its labels, adds the instructions its rules infer
 * (it->ids, it->hash and the job's instructions and log text grow), and
 * leaves in it->told what the session was told, for the commit to keep. */
ws_status ws_eng_rules_apply(ws_engine *e, ws_eng_item *it, ws_error *err);
/* engine_rules.c: the labels of a LABELS job as evidence for its model's
 * rules (engine thread, before the commit thread stores them): only for the
 * session's latest step, not yet labelled, while its told facts are cached. */
void ws_eng_rules_labels(ws_engine *e, const ws_job *j);
/* Adds model em's saved rules (its rules file, if any) to em->rules (a start). */
void ws_eng_rules_load(ws_engine *e, ws_eng_model *em);
/* Where model `name`'s learned rules are saved: <data_dir>/models/<name>.rules. */
void ws_eng_rules_path(const char *data_dir, const char *name, char *out, size_t cap);

/* The step or query jobs of one model in a flight, as the compute left them. */
typedef struct {
    ws_eng_model *em;
    ws_job_kind kind;
    ws_status s; /* the compute's status: not WS_OK fails every job of the group */
    ws_error err;
    float *probs;    /* the answers (owned) */
    const float *w;  /* STEP: the new states, by row (em->w_host[flight parity]) */
    int64_t version; /* the model version that computed them */
    int vocab_now;   /* the vocabulary's size after the batch was prepared */
} ws_eng_group;

/* Whether item it belongs to group g (live, g's model and kind). */
static inline int ws_eng_in_group(const ws_eng_item *it, const ws_eng_group *g)
{
    return it->live && it->em == g->em && it->j->kind == g->kind;
}

/* One batch handed from the compute (engine thread, engine_run.c) to the
 * commit stage (commit thread, engine_commit.c). */
struct ws_eng_flight {
    ws_eng_item *items; /* n; LABELS jobs are items too (their live flag is set) */
    int n, n_steps, n_queries;
    ws_eng_group *groups;
    int n_groups;
    char (*sessions)[WS_STORE_ID_LEN + 1]; /* the sessions of items, copied: the jobs
                                               are the callers' once answered */
};

/* engine_run.c: em's vocabulary as the store has it now (a shared store, where
 * other daemons add symbols): its symbols not yet stored are dropped (a later
 * batch adds them again), those other daemons stored are added. Engine thread,
 * no flight in hand referring to em's ids. */
ws_status ws_eng_vocab_refresh(ws_engine *e, ws_eng_model *em, ws_error *err);
/* engine_run.c: steps, queries and labels of one batch (all kinds mixed):
 * loads the sessions and computes (engine thread), then hands the flight to
 * the commit stage, waiting first while WS_ENG_FLIGHTS are in hand. */
void ws_eng_run_batch(ws_engine *e, ws_job **jobs, int n);

/* engine_commit.c: the commit stage, on a thread of its own, so that the
 * SQLite commit and the replies of a batch overlap the compute of the next.
 * The engine thread hands over at most WS_ENG_FLIGHTS flights, committed in
 * the order handed; the sessions of a flight in hand are not taken into a
 * batch until it completed (so a session's steps stay in order, each computed
 * from the state committed by its step before), and every SQLite write, the
 * online trainer's observations and labels, and the replies of a flight are
 * made here. What else writes SQLite or changes a model (admin jobs,
 * training, version adoption, builds) runs on the engine thread only after
 * ws_eng_commit_wait. */
ws_status ws_eng_commit_start(ws_engine *e, ws_error *err);
/* Waits while WS_ENG_FLIGHTS flights are in hand, then hands f over (mu not held). */
void ws_eng_commit_hand(ws_engine *e, ws_eng_flight *f);
/* Waits until no flight is in hand (mu held). */
void ws_eng_commit_wait(ws_engine *e);
/* 1 when session is in a flight in hand (mu held). */
int ws_eng_commit_holds(const ws_engine *e, const char *session);
/* Stops the thread once the flights in hand completed; closes its connection. */
void ws_eng_commit_stop(ws_engine *e);
/* Frees a flight and what its items own. */
void ws_eng_flight_free(ws_eng_flight *f);
/* Completes a job whose result is written: hands it back through its callback. */
void ws_eng_finish(ws_job *j);
/* Completes a job that failed with s (err's message). */
void ws_eng_fail(ws_job *j, ws_status s, const ws_error *err);
/* Completes a job that failed for a reason of its own (engine.h, ws_job_why). */
void ws_eng_refuse(ws_job *j, ws_job_why why, ws_status s, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
