/* engine_train.h — a model's training thread (engine_train.c): online training,
 * the publication gate and the optimizer state off the engine thread. */
#ifndef WS_ENGINE_TRAIN_H
#define WS_ENGINE_TRAIN_H

#include <stdatomic.h>

#include "engine.h"
#include "online_trainer.h"

typedef struct ws_eng_trainer ws_eng_trainer;

typedef struct {
    const char *data_dir;
    const char *db_path;
    ws_store_durability durability;
    const char *name; /* the model's */
    int64_t model_id;
    int cpu; /* the engine serves on the CPU: train on a CPU backend of one thread */
    ws_train_priority priority;
    /* Called on the training thread as an AdamW step begins (may be NULL). */
    void (*on_update)(void);
    /* Wakes the engine thread (a candidate waits for it), from the training
     * thread with no lock of the trainer held. */
    void (*wake_engine)(void *ctx);
    void *wake_ctx;
    /* The engine thread's idle time so far, µs (ctx: wake_ctx; any thread):
     * while the engine is busy, training waits (engine_train.c,
     * yield_to_serving). NULL: it never waits. */
    int64_t (*engine_idle_us)(void *ctx);
    /* Counts the passes under way, this thread's among them (may be NULL):
     * the engine thread does not poll for jobs meanwhile (engine.c,
     * idle_until), leaving the core to the threads serving needs. */
    _Atomic int *training_now;
    /* Where each update's point goes (the console's charts), or NULL. */
    struct ws_eng_history *history;
} ws_eng_trainer_config;

/* A checkpoint's path and a temporary suffix (engine_models.c, retention). */
#define WS_ENG_RETIRED_PATH (WS_SRV_PATH_MAX + 200)

/* A candidate version the gate passed, waiting for the engine thread to
 * publish it: its checkpoint (parameters only) written and synced at `staged`,
 * its SHA-256, and its parameters on the host (ws_model_n_params floats). */
typedef struct {
    char staged[WS_SRV_PATH_MAX + 160];
    char retired[WS_ENG_RETIRED_PATH]; /* from the verdict: to remove, or "" */
    char sha256[65];
    float *params;
} ws_eng_candidate;

/* Starts the training thread of a model served as `served` (version
 * `version`): its own backend, its own copy of the weights (the served
 * parameters; the AdamW state of <data-dir>/models/<name>.optim.safetensors
 * when there is one, else the served model's), its own contexts, its own
 * store connection; it trains on ex's examples, with settings tr. */
ws_status ws_eng_trainer_start(ws_eng_trainer **out, const ws_eng_trainer_config *c,
                               ws_model *served, int64_t version, const ws_srv_training *tr,
                               ws_online_trainer *ex, ws_error *err);
/* Stops the thread (a candidate waiting is dropped), saves the optimizer
 * state when it changed since the last save, frees everything. NULL is fine. */
void ws_eng_trainer_free(ws_eng_trainer *t);

/* Where the AdamW state of model `name` is saved:
 * <data_dir>/models/<name>.optim.safetensors. */
void ws_eng_optim_path(const char *data_dir, const char *name, char *out, size_t cap);

/* ---- the engine thread ---------------------------------------------------- */
void ws_eng_trainer_settings(ws_eng_trainer *t, const ws_srv_training *tr);
/* The served parameters changed by other means (an adopted version, a
 * rollback, an import): training goes on from served's parameters as version
 * `version`; the gradients summed so far and a candidate not yet published are
 * dropped, the gate begins a new line. The AdamW moments are kept. */
ws_status ws_eng_trainer_rebase(ws_eng_trainer *t, ws_model *served, int64_t version,
                                ws_error *err);
/* 1 when a candidate waits for ws_eng_trainer_candidate (lock-free). */
int ws_eng_trainer_waiting(ws_eng_trainer *t);
/* The candidate waiting, or NULL; it stays the trainer's, and waits, until
 * ws_eng_trainer_verdict. */
const ws_eng_candidate *ws_eng_trainer_candidate(ws_eng_trainer *t);
/* The engine's answer to the candidate: s == WS_OK published as `version` (its
 * staged file renamed into place); otherwise not (err says why; the staged file
 * is the trainer's to remove, and training goes on from the served version).
 * retired (may be NULL or ""): a file the publication retired, for this thread
 * to remove (an unlink of a checkpoint took the engine thread 0.9-1.3 ms). */
void ws_eng_trainer_verdict(ws_eng_trainer *t, ws_status s, int64_t version, const ws_error *err,
                            const char *retired);
/* The gate's counts and last decision (any thread). */
void ws_eng_trainer_gate(ws_eng_trainer *t, ws_engine_gate_info *out);

#endif
