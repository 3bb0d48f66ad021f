/* trainer.h — truncated-gradient training on a built-in task (DESIGN §3), and
 * the evaluator that rolls a model out to long horizons.
 *
 * The trainer keeps `batch` trajectory slots, each a task world plus its current
 * world state on the backend. One iteration advances every slot by one step:
 * W_t = U(stopgrad(W_{t-1}), I_t), loss on Q_t, gradients accumulated; every
 * update_every iterations an AdamW step. Memory is one step of activations plus
 * `batch` states, whatever the trajectories' length. A slot is restarted from
 * W_0 when its trajectory reaches its lifetime:
 *   fixed — every lifetime is `rollout` (the paper's 8-step rollouts); first
 *           lifetimes are staggered so every age 1..rollout is always in a batch;
 *   pool  — a persistent-trajectory pool with a curriculum over state age:
 *           lifetimes are drawn log-uniformly from [1, A] where A grows from
 *           `rollout` to `max_age` over training, so states of every age train. */
#ifndef WS_TRAINER_H
#define WS_TRAINER_H

#include <stdio.h>

#include "model.h"
#include "model/tasks/task.h"

typedef enum { WS_LIFETIME_FIXED = 0, WS_LIFETIME_POOL = 1 } ws_lifetime;

typedef struct {
    int batch;          /* trajectory slots */
    int rollout;        /* steps per trajectory (fixed) / initial max age (pool) */
    ws_lifetime lifetime;
    int max_age;        /* pool: final max age of the curriculum */
    int update_every;   /* AdamW every N iterations */
    float lr, min_lr_ratio; /* peak LR; cosine decays to lr·min_lr_ratio */
    int warmup;         /* linear warmup iterations */
    long iters;         /* iteration budget (0: time only) */
    double seconds;     /* time budget (0: iterations only) */
    float weight_decay, clip_norm;
    uint64_t seed;
    /* On the CPU, >= 1: each step's slots in chunks of WS_EXEC_POOL_CHUNK
     * trajectories shared among this many threads, each chunk's ops on one
     * thread (exec_pool.h ws_exec_chunks_step): the activations of a chunk stay
     * in the core's caches and the threads meet once a step, not at every op.
     * 0 (and on a GPU): one pass of the whole batch, its ops on the backend's
     * threads. The gradients' bits depend on the threads (the shares' sums). */
    int threads;
} ws_train_config;

ws_train_config ws_train_config_default(void);

/* The schedule, shared with log retraining (worldstate-train retrain): the
 * learning rate of iteration iter at progress in [0, 1] — linear warmup over
 * c->warmup iterations, then cosine decay from c->lr to c->lr·c->min_lr_ratio. */
float ws_train_lr(const ws_train_config *c, long iter, double progress);
/* One AdamW step at learning rate lr with c's weight decay and clipping (then
 * the gradients are zero); grad_norm (nullable) as ws_model_adamw_step. */
ws_status ws_train_adamw(ws_model *m, const ws_train_config *c, float lr, float *grad_norm,
                         ws_error *err);

typedef struct {
    long iter;          /* iterations done */
    long optim_steps;
    double elapsed;     /* seconds */
    double progress;    /* fraction of the budget used, in [0, 1] */
    float lr;
    float loss;         /* mean loss of the last iteration */
    float accuracy;     /* labelled-query accuracy of the last iteration */
    float grad_norm;    /* at the last optimizer step */
    double steps_per_s; /* trajectory steps per second (iterations × batch) */
} ws_train_stats;

typedef struct ws_trainer ws_trainer;

/* Trains x's model, running its steps in x (which must outlive the trainer). */
ws_status ws_trainer_new(ws_trainer **out, ws_exec *x, const ws_task_params *task,
                         const ws_train_config *tc, ws_error *err);
void ws_trainer_free(ws_trainer *t);
/* One iteration; *stats is updated. Returns WS_OK until the budget is spent,
 * then WS_ERR_CONFLICT ("done") without doing work. */
ws_status ws_trainer_iterate(ws_trainer *t, ws_train_stats *stats, ws_error *err);
/* One step of every slot, its gradients added to the model's (times scale),
 * without an optimizer step, the budget or the schedule: for a caller that
 * steps the optimizer itself (the daemon's online training rehearses the
 * task beside its own examples). */
ws_status ws_trainer_accumulate(ws_trainer *t, float scale, ws_step_result *res, ws_error *err);
/* Continue a schedule (resume from a checkpoint): iterations already done. */
void ws_trainer_set_iter(ws_trainer *t, long iter);

/* ---- evaluation ---------------------------------------------------------- */

#define WS_EVAL_MAX_HORIZONS 16

typedef struct {
    int horizon;          /* accuracy over steps (horizon-window, horizon] */
    long n_queries, n_groups, n_boards;
    double acc;           /* labelled queries answered right (p >= 0.5) */
    double group_acc;     /* one-hot groups whose argmax is the true member */
    double exact_acc;     /* trajectory steps with every query right */
    double recall_acc;    /* WS_QK_RECALL queries (-1 if none) */
    double told_acc, untold_acc; /* WS_QK_TOLD / WS_QK_UNTOLD (-1 if none) */
    double slot_acc[WS_QS_N];    /* by WS_QS_* (slot worlds' told queries; -1 if none) */
    double baseline_acc[WS_TASK_MAX_BASELINES];
    double baseline_exact[WS_TASK_MAX_BASELINES];
    double baseline_untold[WS_TASK_MAX_BASELINES];
} ws_eval_point;

typedef struct {
    int n_traj;           /* trajectories rolled out in parallel */
    int window;           /* steps averaged per horizon (capped at the horizon) */
    uint64_t seed;        /* fresh worlds: use seeds never used in training */
    int n_horizons;
    int horizons[WS_EVAL_MAX_HORIZONS]; /* ascending */
} ws_eval_config;

ws_status ws_evaluate(ws_exec *x, const ws_task_params *task, const ws_eval_config *ec,
                      ws_eval_point *out, ws_error *err);
/* Prints a table (with the task's baselines) and one JSON line. */
void ws_eval_print(FILE *f, const ws_task_params *task, const ws_eval_point *pts, int n,
                   const char *label);

#endif
