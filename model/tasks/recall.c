/* recall.c — experiment 0 of the paper (§8.2) in the instruction/query setting.
 *
 * Each world has a secret random bit v (drawn at reset); step 1 tells
 * ("target") = v. Every step (step 1
 * included) also tells RECALL_INPUTS distinct random tokens of RECALL_TOKENS,
 * ("input", "i<j>") = a fresh random bit, and asks a "repeat" query about each
 * (WS_QK_PLAIN, label = the value just told), so the updater always has current
 * work that competes with keeping v. The recall query ("target"), label v,
 * WS_QK_RECALL, is asked every step when thorough, else only on step `horizon`:
 * the paper's failure case, where truncated training leaves recall at chance
 * (50%). Recall is the last query of a step. No baselines, no groups.
 *
 * Defaults: thorough 1, horizon 8 — the trainer's default rollout, so that the
 * non-thorough recall query does fall inside trained trajectories. */
#include <stdlib.h>

#include "task_impl.h"

enum { RECALL_TOKENS = 8, RECALL_INPUTS = 3 };

typedef struct {
    int bit;
    int pick[RECALL_TOKENS]; /* sampling scratch */
} recall_world;

typedef struct {
    int32_t target, input, tok[RECALL_TOKENS];
    recall_world *w; /* [n_slots] */
} recall_data;

static void recall_defaults(ws_task_params *p)
{
    p->thorough = 1;
    p->horizon = 8;
}

static ws_status recall_create(ws_task *t, ws_vocab *v, ws_error *err)
{
    if (t->p.thorough != 0 && t->p.thorough != 1)
        return ws_error_set(err, WS_ERR_INVALID, "task recall: thorough must be 0 or 1");
    if (!t->p.thorough && t->p.horizon < 1)
        return ws_error_set(err, WS_ERR_INVALID, "task recall: horizon must be >= 1, got %d",
                            t->p.horizon);
    recall_data *d = calloc(1, sizeof *d);
    if (!d) return ws_error_set(err, WS_ERR_NOMEM, "task recall: out of memory");
    t->data = d;
    d->w = calloc((size_t)t->n_slots, sizeof *d->w);
    if (!d->w) return ws_error_set(err, WS_ERR_NOMEM, "task recall: out of memory");
    WS_TRY(ws_task_symbol(t, v, "target", &d->target, err));
    WS_TRY(ws_task_symbol(t, v, "input", &d->input, err));
    return ws_task_symbols(t, v, "i", RECALL_TOKENS, d->tok, err);
}

static void recall_destroy(ws_task *t)
{
    recall_data *d = t->data;
    if (d) free(d->w);
    free(d);
}

static int recall_max_queries(const ws_task *t)
{
    (void)t;
    return RECALL_INPUTS + 1;
}

static void recall_reset(ws_task *t, int slot)
{
    recall_data *d = t->data;
    d->w[slot].bit = ws_task_rng_bit(&t->rng[slot]);
}

static ws_status recall_step(ws_task *t, int slot, ws_batch *b, ws_query_info *info)
{
    recall_data *d = t->data;
    recall_world *w = &d->w[slot];
    ws_task_rng *r = &t->rng[slot];
    int step = t->steps[slot], nq = 0;
    if (step == 1) WS_TRY(ws_batch_add_instr(b, &d->target, 1, w->bit));
    int told[RECALL_INPUTS];
    ws_task_rng_sample(r, w->pick, RECALL_TOKENS, RECALL_INPUTS);
    for (int i = 0; i < RECALL_INPUTS; i++) {
        int32_t fact[2] = {d->input, d->tok[w->pick[i]]};
        told[i] = ws_task_rng_bit(r);
        WS_TRY(ws_batch_add_instr(b, fact, 2, told[i]));
    }
    for (int i = 0; i < RECALL_INPUTS; i++) {
        int32_t fact[2] = {d->input, d->tok[w->pick[i]]};
        WS_TRY(ws_task_query(b, fact, 2, told[i], info, &nq,
                             (ws_query_info){.kind = WS_QK_PLAIN, .group = -1}));
    }
    if (t->p.thorough || step == t->p.horizon)
        WS_TRY(ws_task_query(b, &d->target, 1, w->bit, info, &nq,
                             (ws_query_info){.kind = WS_QK_RECALL, .group = -1}));
    return WS_OK;
}

const ws_task_kind ws_task_kind_recall = {
    .name = "recall",
    .fact_len = 2,
    .n_baselines = 0,
    .defaults = recall_defaults,
    .create = recall_create,
    .destroy = recall_destroy,
    .max_queries = recall_max_queries,
    .reset = recall_reset,
    .step = recall_step,
};
