/* task.c — the task dispatcher: names to generators, slots, seeding, and the
 * checks every step shares. */
#include "task_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/batch.h"

static const ws_task_kind *const kinds[] = {
#define WS_TASK(name) &ws_task_kind_##name,
#include "task_list.h"
#undef WS_TASK
};
#define N_KINDS (sizeof kinds / sizeof *kinds)

const char *ws_task_name(int i)
{
    return i >= 0 && i < (int)N_KINDS ? kinds[i]->name : NULL;
}

static const ws_task_kind *find_kind(const char *name)
{
    if (!name) return NULL;
    for (size_t i = 0; i < N_KINDS; i++)
        if (!strcmp(kinds[i]->name, name)) return kinds[i];
    return NULL;
}

int ws_task_params_default(const char *name, ws_task_params *out)
{
    const ws_task_kind *k = find_kind(name);
    if (!k) return 0;
    memset(out, 0, sizeof *out);
    out->name = k->name; /* static: outlives the caller's string */
    k->defaults(out);
    return 1;
}

ws_status ws_task_new(ws_task **out, const ws_task_params *p, int n_slots, ws_vocab *vocab,
                      ws_error *err)
{
    *out = NULL;
    const ws_task_kind *k = find_kind(p->name);
    if (!k) {
        char names[128] = "";
        for (int i = 0; ws_task_name(i); i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
                     ws_task_name(i));
        return ws_error_set(err, WS_ERR_INVALID, "task: unknown task '%s' (%s)",
                            p->name ? p->name : "(null)", names);
    }
    if (n_slots < 1) return ws_error_set(err, WS_ERR_INVALID, "task: need at least one slot");
    ws_task *t = calloc(1, sizeof *t);
    if (!t) return ws_error_set(err, WS_ERR_NOMEM, "task: out of memory");
    t->kind = k;
    t->p = *p;
    t->p.name = k->name;
    t->n_slots = n_slots;
    ws_status st = WS_OK;
    if (p->data_dir) {
        t->data_dir = strdup(p->data_dir);
        if (!t->data_dir) st = WS_ERR_NOMEM;
    }
    t->p.data_dir = t->data_dir;
    t->rng = calloc((size_t)n_slots, sizeof *t->rng);
    t->steps = calloc((size_t)n_slots, sizeof *t->steps);
    t->live = calloc((size_t)n_slots, sizeof *t->live);
    if (st != WS_OK || !t->rng || !t->steps || !t->live) {
        ws_task_free(t);
        return ws_error_set(err, WS_ERR_NOMEM, "task: out of memory");
    }
    if ((st = k->create(t, vocab, err)) != WS_OK) {
        ws_task_free(t);
        return st;
    }
    *out = t;
    return WS_OK;
}

void ws_task_free(ws_task *t)
{
    if (!t) return;
    t->kind->destroy(t);
    free(t->data_dir);
    free(t->rng);
    free(t->steps);
    free(t->live);
    free(t);
}

const ws_task_params *ws_task_params_of(const ws_task *t) { return &t->p; }

int ws_task_n_baselines(const ws_task *t) { return t->kind->n_baselines; }

const char *ws_task_baseline_name(const ws_task *t, int i)
{
    return i >= 0 && i < t->kind->n_baselines ? t->kind->baselines[i] : NULL;
}

int ws_task_max_queries(const ws_task *t) { return t->kind->max_queries(t); }

int ws_task_max_fact_len(const ws_task *t) { return t->kind->fact_len; }

ws_status ws_task_check_model(const ws_task *t, const ws_model_config *cfg, ws_error *err)
{
    if (t->kind->dynamics && cfg->empty_steps == WS_EMPTY_HOLD)
        return ws_error_set(err, WS_ERR_INVALID,
                            "task %s: its worlds change on steps that tell nothing, which a "
                            "model with empty_steps \"hold\" cannot follow "
                            "(use empty_steps \"update\", flag --empty-steps update)",
                            t->kind->name);
    return WS_OK;
}

ws_status ws_task_reset(ws_task *t, int slot, uint64_t seed)
{
    if (slot < 0 || slot >= t->n_slots) return WS_ERR_INVALID;
    ws_task_rng_seed(&t->rng[slot], seed);
    t->steps[slot] = 0;
    t->live[slot] = 1;
    t->kind->reset(t, slot);
    return WS_OK;
}

int ws_task_steps(const ws_task *t, int slot)
{
    return slot >= 0 && slot < t->n_slots ? t->steps[slot] : -1;
}

ws_status ws_task_step(ws_task *t, int slot, ws_batch *b, ws_query_info *info, ws_error *err)
{
    if (slot < 0 || slot >= t->n_slots || !t->live[slot])
        return ws_error_set(err, WS_ERR_INVALID, "task %s: slot %d is out of range or was never "
                                                 "reset", t->kind->name, slot);
    /* Checked here, before the world moves, so that a rejected step changes nothing
     * (the batch would refuse these facts only after the world had advanced). */
    if (b->n_traj == 0)
        return ws_error_set(err, WS_ERR_INVALID, "task %s: no trajectory begun in the batch",
                            t->kind->name);
    if (b->S < t->kind->fact_len)
        return ws_error_set(err, WS_ERR_INVALID, "task %s: facts of %d symbols need a model "
                                                 "with max_fact_len >= %d, not %d",
                            t->kind->name, t->kind->fact_len, t->kind->fact_len, b->S);
    if (t->max_id >= b->n_ids)
        return ws_error_set(err, WS_ERR_INVALID, "task %s: symbol id %d is beyond the batch's "
                                                 "vocabulary (%d ids): another model's vocabulary?",
                            t->kind->name, (int)t->max_id, b->n_ids);
    t->steps[slot]++;
    ws_status st = t->kind->step(t, slot, b, info);
    if (st != WS_OK)
        return ws_error_set(err, st, "task %s: step %d: %s (the slot needs a reset)",
                            t->kind->name, t->steps[slot], ws_status_name(st));
    return WS_OK;
}

ws_status ws_task_symbol(ws_task *t, ws_vocab *v, const char *sym, int32_t *id, ws_error *err)
{
    *id = ws_vocab_id(v, sym, strlen(sym), 1);
    if (*id >= ws_vocab_capacity(v))
        return ws_error_set(err, WS_ERR_INVALID, "task %s: the vocabulary (capacity %d) has no "
                                                 "room for symbol '%s'",
                            t->kind->name, ws_vocab_capacity(v), sym);
    if (*id > t->max_id) t->max_id = *id;
    return WS_OK;
}

ws_status ws_task_symbols(ws_task *t, ws_vocab *v, const char *prefix, int n, int32_t *ids,
                          ws_error *err)
{
    char sym[32];
    for (int i = 0; i < n; i++) {
        snprintf(sym, sizeof sym, "%s%d", prefix, i);
        WS_TRY(ws_task_symbol(t, v, sym, &ids[i], err));
    }
    return WS_OK;
}

ws_status ws_task_query(ws_batch *b, const int32_t *ids, int n_ids, int label,
                        ws_query_info *info, int *n_info, ws_query_info qi)
{
    WS_TRY(ws_batch_add_query(b, ids, n_ids, label));
    if (info) info[(*n_info)++] = qi;
    return WS_OK;
}
