/* task.h — the built-in tasks: seeded, deterministic world generators.
 *
 * A task keeps n_slots independent worlds. ws_task_reset() starts a fresh world
 * in a slot; each ws_task_step() advances that world by one step and appends the
 * step's instructions and labelled queries to the batch, as the trajectory the
 * caller has just begun with ws_batch_begin_traj(). Facts use symbols the task
 * registers in the model's vocabulary at creation. A world is a pure function of
 * its seed: the same seed gives the same batches, in any slot of any task object
 * with the same params.
 *
 *   recall  — experiment 0: a bit told at step 1 must be recalled later
 *             facts ("target") and ("input", "i0".."i7"); no baselines
 *   facts   — entities moving between places (the house assistant)
 *             facts ("e<k>", "p<j>"); group = entity, chance 1/places
 *   conj    — agents hold keys, keys open boxes; "can agent i open box b?" is
 *             the conjunction of two instructions (a 3-way relation)
 *             facts ("a<i>", "k<j>"), ("k<j>", "x<b>"), queries ("a<i>", "x<b>");
 *             group = agent, chance 1/places
 *   life    — Conway's Game of Life on an 8×8 torus with interventions
 *             facts ("r<row>", "c<col>"); baselines "all dead", "copy previous"
 *   numbers — World of Numbers on Fashion-MNIST images
 *             facts ("m<image>", "y<row>", "x<col>"); baseline "class mean image"
 *   memory  — open-vocabulary session memory: fresh random symbols every world
 *             (no vocabulary ids), facts of 1..4 symbols told, re-told and
 *             overridden, never-told facts queried; kinds TOLD / UNTOLD
 * Each generator's file (recall.c, facts.c, conj.c, life.c, numbers.c) says exactly what
 * it tells and asks. Facts have at most 3 symbols (memory: 4; ws_task_max_fact_len).
 */
#ifndef WS_TASK_H
#define WS_TASK_H

#include <stdint.h>

#include "model/model.h"

typedef struct {
    const char *name;   /* a task of task_list.h: "recall", "facts", "memory", ... */
    /* Ranges are checked by ws_task_new (WS_ERR_INVALID); fields of other tasks
     * are ignored. */
    /* recall */
    int thorough;       /* 1: recall queried every step; 0: only at step `horizon` */
    int horizon;        /* non-thorough recall: the step whose queries ask for the bit */
    /* facts; conj: entities = agents, places = keys = boxes, move_rate */
    int entities, places;
    float move_rate;    /* Poisson mean of entities that move per step */
    int query_sample;   /* queries per step: distinct random (entity, place) pairs,
                           <= entities*places; 0 = every pair (only then are
                           queries grouped by entity) */
    /* life */
    float density;            /* initial alive probability */
    float intervention_rate;  /* Poisson mean of intervened cells per step (0 allowed) */
    /* numbers */
    int images;               /* images in the tuple */
    int max_told;             /* pixels told per step: uniform in [0, max_told] */
    int max_told_first;       /* ... at step 1: uniform in [0, max_told_first] */
    int n_queries;            /* distinct random pixels (of any image) queried per step */
    int test_split;           /* 1: draw images from the t10k files */
    const char *data_dir;     /* directory of the Fashion-MNIST .gz IDX files (NULL:
                                 /usr/share/datasets/fashion-mnist); copied by ws_task_new */
    /* memory (n_queries: queries per step, half told facts, half never-told) */
    int live_facts, live_facts_min; /* facts per world: log-uniform in [min, live_facts] */
    int max_arity;            /* symbols per fact: uniform in [1, max_arity] */
    int instr_per_step;       /* an active step carries 1..instr_per_step instructions */
    float override_rate;      /* a told fact's instruction flips its value */
    float active_rate;        /* after the telling: a world's rate of active steps is
                                 log-uniform in [active_rate/1000, active_rate] */
    float chatter_rate;       /* a world's rate of steps that also tell a fact of fresh,
                                 never-asked symbols: uniform in [0, chatter_rate] */
    float exclusive_rate;     /* share of worlds that are slot worlds (an exclusive
                                 relation; tasks/memory_slots.h) */
    float slot_active;        /* slot worlds: how often a step after the first tells */
    float slot_single;        /* slot worlds: how often a telling step tells one thing */
    float relational_rate;    /* share of worlds that are told-moves slot worlds (the
                                 same, moves told in full, no marker: memory_slots.h) */
} ws_task_params;

/* Fills *out with a task's defaults (the experiments): returns 1, or 0
 * for an unknown name. out->name then points to static storage.
 *   recall:  thorough 1, horizon 8
 *   facts:   entities 4, places 4, move_rate 1.0, query_sample 0
 *   conj:    entities 4, places 4, move_rate 1.0
 *   life:    density 0.35, intervention_rate 2.0
 *   numbers: images 3, max_told 75, max_told_first 500, n_queries 75, test_split 0
 *   memory:  live_facts 32 (min 1), max_arity 4, instr_per_step 4, override_rate 0.25,
 *            active_rate 0.5, n_queries 16, chatter_rate 0, exclusive_rate 0,
 *            slot_active 0.8, slot_single 0, relational_rate 0 */
int ws_task_params_default(const char *name, ws_task_params *out);
/* The built-in tasks' names, in order; NULL past the last. */
const char *ws_task_name(int i);

/* What a query is, for evaluation beyond plain accuracy. */
enum { WS_QK_PLAIN = 0, WS_QK_RECALL = 1, WS_QK_TOLD = 2, WS_QK_UNTOLD = 3 };
/* A slot world's query (memory_slots.h), besides its kind: the exclusive
 * relation's value held now, one held before and left, or a plain fact told. */
enum { WS_QS_NONE = 0, WS_QS_CURRENT = 1, WS_QS_LEFT = 2, WS_QS_PLAIN = 3, WS_QS_N = 4 };
#define WS_TASK_MAX_BASELINES 2

typedef struct {
    int kind;    /* WS_QK_* */
    int group;   /* >= 0: one-hot group within this trajectory step (facts: an
                    entity's places), scored by argmax; -1: none */
    float baseline[WS_TASK_MAX_BASELINES]; /* baseline probabilities, task-defined */
    int slot; /* WS_QS_*: what a slot world's query asks (0 elsewhere) */
} ws_query_info;

typedef struct ws_task ws_task;

/* n_slots >= 1 worlds, none started until ws_task_reset. WS_ERR_INVALID for an
 * unknown name, bad params or a vocabulary without room for the task's symbols;
 * numbers also passes on the dataset's WS_ERR_NOTFOUND / WS_ERR_IO /
 * WS_ERR_FORMAT. *out is NULL on failure. */
ws_status ws_task_new(ws_task **out, const ws_task_params *p, int n_slots, ws_vocab *vocab,
                      ws_error *err);
void ws_task_free(ws_task *t);
/* The params in use; their strings belong to the task. */
const ws_task_params *ws_task_params_of(const ws_task *t);
/* Number of baselines this task reports and their names ("all dead", ...). */
int ws_task_n_baselines(const ws_task *t);
const char *ws_task_baseline_name(const ws_task *t, int i);
/* Upper bounds per step, for sizing buffers. */
int ws_task_max_queries(const ws_task *t);
/* Symbols in the task's longest fact: a model needs max_fact_len >= this. */
int ws_task_max_fact_len(const ws_task *t);
/* WS_ERR_INVALID when a model of config cfg cannot learn the task: its worlds
 * change on steps that tell nothing, and cfg holds the state on such steps. */
ws_status ws_task_check_model(const ws_task *t, const ws_model_config *cfg, ws_error *err);

/* WS_ERR_INVALID for a slot out of range. */
ws_status ws_task_reset(ws_task *t, int slot, uint64_t seed);
/* Steps taken in the slot's world so far (0 right after reset; -1: bad slot). */
int ws_task_steps(const ws_task *t, int slot);
/* Advances the slot's world one step and appends its instructions and queries to
 * the batch's current trajectory; info (nullable, room for ws_task_max_queries)
 * receives one entry per query appended (group -1 and unused baselines 0 where
 * they do not apply).
 * WS_ERR_INVALID (slot never reset, no trajectory begun, facts longer than the
 * batch's max_fact_len, symbols beyond its vocabulary) changes nothing. After
 * WS_ERR_NOMEM the batch holds part of the step: clear it and reset the slot.
 * Different slots may be stepped from different threads at once. */
ws_status ws_task_step(ws_task *t, int slot, ws_batch *b, ws_query_info *info, ws_error *err);

#endif
