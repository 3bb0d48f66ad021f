/* task.h — the built-in tasks: seeded, deterministic world generators.
 *
 * A task keeps n_slots independent worlds. ws_task_reset() starts a fresh world
 * in a slot; each ws_task_step() advances that world by one step and appends the
 * step's instructions and labelled queries to the batch, as the trajectory the
 * caller has just begun with ws_batch_begin_traj(). Facts use symbols the task
 * registers in the model's vocabulary at creation.
 *
 *   recall  — experiment 0: a bit told at step 1 must be recalled later
 *   facts   — entities moving between places (the house assistant)
 *   life    — Conway's Game of Life on an 8×8 torus with interventions
 *   numbers — World of Numbers on Fashion-MNIST images
 */
#ifndef WS_TASK_H
#define WS_TASK_H

#include <stdint.h>

#include "../model.h"

typedef struct {
    const char *name;   /* "recall" | "facts" | "life" | "numbers" */
    /* recall */
    int thorough;       /* 1: recall queried every step; 0: only at step `horizon` */
    int horizon;        /* non-thorough recall: the step whose queries ask for the bit */
    /* facts */
    int entities, places;
    float move_rate;    /* Poisson mean of entities that move per step */
    int query_sample;   /* queries per step; 0 = every (entity, place) pair */
    /* life */
    float density;            /* initial alive probability */
    float intervention_rate;  /* Poisson mean of intervened cells per step (0 allowed) */
    /* numbers */
    int images;               /* images in the tuple */
    int max_told, max_told_first, n_queries;
    int test_split;           /* 1: draw images from the t10k files */
    const char *data_dir;     /* directory of the Fashion-MNIST .gz IDX files */
} ws_task_params;

/* Defaults for a task name (NULL if unknown): sizes of the experiments. */
int ws_task_params_default(const char *name, ws_task_params *out);

/* What a query is, for evaluation beyond plain accuracy. */
enum { WS_QK_PLAIN = 0, WS_QK_RECALL = 1, WS_QK_TOLD = 2, WS_QK_UNTOLD = 3 };
#define WS_TASK_MAX_BASELINES 2

typedef struct {
    int kind;    /* WS_QK_* */
    int group;   /* >= 0: one-hot group within this trajectory step (facts: an
                    entity's places), scored by argmax; -1: none */
    float baseline[WS_TASK_MAX_BASELINES]; /* baseline probabilities, task-defined */
} ws_query_info;

typedef struct ws_task ws_task;

ws_status ws_task_new(ws_task **out, const ws_task_params *p, int n_slots, ws_vocab *vocab,
                      ws_error *err);
void ws_task_free(ws_task *t);
const ws_task_params *ws_task_params_of(const ws_task *t);
/* Number of baselines this task reports and their names ("all dead", ...). */
int ws_task_n_baselines(const ws_task *t);
const char *ws_task_baseline_name(const ws_task *t, int i);
/* Upper bounds per step, for sizing buffers. */
int ws_task_max_queries(const ws_task *t);

ws_status ws_task_reset(ws_task *t, int slot, uint64_t seed);
/* Steps taken in the slot's world so far (0 right after reset). */
int ws_task_steps(const ws_task *t, int slot);
/* Advances the slot's world one step and appends its instructions and queries to
 * the batch's current trajectory; info (nullable, room for ws_task_max_queries)
 * receives one entry per query appended. */
ws_status ws_task_step(ws_task *t, int slot, ws_batch *b, ws_query_info *info, ws_error *err);

#endif
