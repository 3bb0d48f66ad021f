/* probe.c — memory probes (probe.h): episode generation and the batched run. */
#include "probe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ws_rng.h"
#include "kernels/symcode.h"
#include "model/tasks/task_rng.h"

static int same_fact(const ws_probe_fact *a, const ws_probe_fact *b)
{
    if (a->arity != b->arity) return 0;
    for (int j = 0; j < a->arity; j++)
        if (strcmp(a->sym[j], b->sym[j])) return 0;
    return 1;
}

static int has_repeat(const ws_probe_fact *f)
{
    for (int i = 0; i < f->arity; i++)
        for (int j = 0; j < i; j++)
            if (!strcmp(f->sym[i], f->sym[j])) return 1;
    return 0;
}

static int known(const ws_probe_fact *list, int n, const ws_probe_fact *f)
{
    for (int i = 0; i < n; i++)
        if (same_fact(&list[i], f)) return 1;
    return 0;
}

/* arity distinct symbols of the pool, in random order. */
static void draw(ws_task_rng *r, char (*pool)[WS_PROBE_SYM_LEN + 1], int n_pool, int arity,
                 ws_probe_fact *f)
{
    int pick[WS_PROBE_ARITY];
    f->arity = arity;
    for (int j = 0; j < arity; j++) {
        int dup;
        do {
            pick[j] = (int)ws_task_rng_below(r, (uint32_t)n_pool);
            dup = 0;
            for (int i = 0; i < j; i++) dup |= pick[i] == pick[j];
        } while (dup);
        memcpy(f->sym[j], pool[pick[j]], sizeof f->sym[j]);
    }
}

void ws_probe_episode_free(ws_probe_episode *e)
{
    free(e->facts);
    free(e->untold);
    free(e->kind);
    free(e->instr_fact);
    free(e->instr_value);
    free(e->step_off);
    memset(e, 0, sizeof *e);
}

ws_status ws_probe_episode_make(ws_probe_episode *e, int k, const ws_probe_config *pc,
                                uint64_t seed, ws_error *err)
{
    memset(e, 0, sizeof *e);
    e->seed = seed;
    int instr_per_step = pc->instr_per_step;
    uint32_t arities = pc->max_arity ? (uint32_t)pc->max_arity : WS_PROBE_ARITY;
    if (k < 1 || k > 65536 || instr_per_step < 1 || arities > WS_PROBE_ARITY)
        return ws_error_set(err, WS_ERR_INVALID, "probe: need 1 <= k <= 65536 facts, "
                                                 "instr_per_step >= 1, max_arity <= %d",
                            WS_PROBE_ARITY);
    int n_over = k / 4, n_instr = k + n_over, n_pool = 2 * k + 4;
    int n_steps = (k + instr_per_step - 1) / instr_per_step +
                  (n_over + instr_per_step - 1) / instr_per_step;
    char(*pool)[WS_PROBE_SYM_LEN + 1] = malloc((size_t)n_pool * sizeof *pool);
    e->facts = malloc((size_t)k * sizeof *e->facts);
    e->untold = malloc((size_t)k * sizeof *e->untold);
    e->kind = malloc((size_t)k * sizeof *e->kind);
    e->instr_fact = malloc((size_t)n_instr * sizeof *e->instr_fact);
    e->instr_value = malloc((size_t)n_instr * sizeof *e->instr_value);
    e->step_off = malloc((size_t)(n_steps + 1) * sizeof *e->step_off);
    if (!pool || !e->facts || !e->untold || !e->kind || !e->instr_fact || !e->instr_value ||
        !e->step_off) {
        free(pool);
        ws_probe_episode_free(e);
        return ws_error_set(err, WS_ERR_NOMEM, "probe: out of memory");
    }
    ws_task_rng r;
    ws_task_rng_seed(&r, seed);
    for (int i = 0; i < n_pool; i++)
        snprintf(pool[i], sizeof pool[i], "s%012llx",
                 (unsigned long long)(ws_task_rng_next(&r) >> 16));
    e->k = k;
    for (int i = 0; i < k; i++) {
        do draw(&r, pool, n_pool, 1 + (int)ws_task_rng_below(&r, arities), &e->facts[i]);
        while (known(e->facts, i, &e->facts[i]));
        e->kind[i] = WS_PROBE_TOLD_TRUE;
    }
    for (int i = 0; i < k; i++) {
        ws_probe_fact *u = &e->untold[i];
        do {
            if (i % 2 == 0) { /* a distractor: a told fact with one symbol swapped */
                *u = e->facts[ws_task_rng_below(&r, (uint32_t)k)];
                ws_probe_fact one;
                draw(&r, pool, n_pool, 1, &one);
                memcpy(u->sym[ws_task_rng_below(&r, (uint32_t)u->arity)], one.sym[0],
                       sizeof one.sym[0]);
            } else {
                draw(&r, pool, n_pool, 1 + (int)ws_task_rng_below(&r, arities), u);
            }
        } while (known(e->facts, k, u) || known(e->untold, i, u) || has_repeat(u));
    }
    /* Telling, then overriding the first n_over facts of a random order. */
    int n = 0, s = 0;
    for (int i = 0; i < k; i++) e->instr_fact[n] = i, e->instr_value[n++] = 1;
    int *order = malloc((size_t)k * sizeof *order);
    if (!order) {
        free(pool);
        ws_probe_episode_free(e);
        return ws_error_set(err, WS_ERR_NOMEM, "probe: out of memory");
    }
    ws_task_rng_sample(&r, order, k, k);
    for (int i = 0; i < n_over; i++) {
        e->kind[order[i]] = WS_PROBE_OVERRIDDEN;
        e->instr_fact[n] = order[i], e->instr_value[n++] = 0;
    }
    free(order);
    free(pool);
    e->n_instr = n;
    for (int i = 0; i < k; i += instr_per_step) e->step_off[s++] = i;
    for (int i = 0; i < n_over; i += instr_per_step) e->step_off[s++] = k + i;
    e->step_off[s] = n;
    e->n_steps = s;
    return WS_OK;
}

const ws_probe_fact *ws_probe_question(const ws_probe_episode *e, int q, int *kind, int *label)
{
    if (q < e->k) {
        *kind = e->kind[q];
        *label = e->kind[q] == WS_PROBE_TOLD_TRUE;
        return &e->facts[q];
    }
    *kind = WS_PROBE_NEVER_TOLD;
    *label = 0;
    return &e->untold[q - e->k];
}

void ws_probe_syms(const ws_probe_fact *f, ws_vocab *vocab, ws_sym *out)
{
    for (int j = 0; j < f->arity; j++) {
        size_t len = strlen(f->sym[j]);
        out[j] = vocab ? ws_vocab_sym(vocab, f->sym[j], len, 1)
                       : (ws_sym){-1, ws_sym_hash(f->sym[j], len)};
    }
}

/* ---- the run ---------------------------------------------------------------- */

typedef struct {
    ws_probe_episode *ep; /* [n] */
    int *ki;              /* [n]: index into the config's ks */
    int n, last;          /* episodes; the global step of the last instruction */
} probe_set;

static ws_status add_step(ws_batch *b, const probe_set *ps, int g, ws_vocab *v)
{
    for (int i = 0; i < ps->n; i++) {
        const ws_probe_episode *e = &ps->ep[i];
        WS_TRY(ws_batch_begin_traj(b, g == 1));
        int s = g - (ps->last - e->n_steps + 1); /* this episode's step index */
        if (s < 0 || s >= e->n_steps) continue;
        for (int j = e->step_off[s]; j < e->step_off[s + 1]; j++) {
            ws_sym syms[WS_PROBE_ARITY];
            const ws_probe_fact *f = &e->facts[e->instr_fact[j]];
            ws_probe_syms(f, v, syms);
            WS_TRY(ws_batch_add_instr_syms(b, syms, f->arity, e->instr_value[j]));
        }
    }
    return WS_OK;
}

void ws_probe_chatter_fact(const ws_probe_config *pc, const ws_probe_episode *e, int after, int j,
                           ws_probe_fact *out, int *value)
{
    uint32_t arities = pc->max_arity ? (uint32_t)pc->max_arity : WS_PROBE_ARITY;
    ws_task_rng r;
    ws_task_rng_seed(&r, ws_mix64(e->seed ^ ((uint64_t)after << 24) ^ (uint64_t)j << 56));
    memset(out, 0, sizeof *out);
    out->arity = 1 + (int)ws_task_rng_below(&r, arities);
    for (int a = 0; a < out->arity; a++)
        snprintf(out->sym[a], sizeof out->sym[a], "c%012llx",
                 (unsigned long long)(ws_task_rng_next(&r) >> 16));
    *value = (int)ws_task_rng_below(&r, 2);
}

/* A step after every episode's instructions: silent, or pc->chatter facts per
 * episode (ws_probe_chatter_fact). */
static ws_status add_after_step(ws_batch *b, const probe_set *ps, const ws_probe_config *pc,
                                int g, ws_vocab *v)
{
    for (int i = 0; i < ps->n; i++) {
        WS_TRY(ws_batch_begin_traj(b, 0));
        for (int j = 0; j < pc->chatter; j++) {
            ws_probe_fact f;
            int value;
            ws_probe_chatter_fact(pc, &ps->ep[i], g - ps->last, j, &f, &value);
            ws_sym syms[WS_PROBE_ARITY];
            ws_probe_syms(&f, v, syms);
            WS_TRY(ws_batch_add_instr_syms(b, syms, f.arity, value));
        }
    }
    return WS_OK;
}

static ws_status ask(ws_exec *x, ws_batch *b, const probe_set *ps, const float *w, ws_vocab *v,
                     int di, ws_probe_result *res, ws_error *err)
{
    ws_batch_clear(b);
    for (int i = 0; i < ps->n; i++) {
        WS_TRY(ws_batch_begin_traj(b, 0));
        for (int q = 0; q < 2 * ps->ep[i].k; q++) {
            int kind, label;
            const ws_probe_fact *f = ws_probe_question(&ps->ep[i], q, &kind, &label);
            ws_sym syms[WS_PROBE_ARITY];
            ws_probe_syms(f, v, syms);
            WS_TRY(ws_batch_add_query_syms(b, syms, f->arity, label));
        }
    }
    float *p = malloc((size_t)ws_batch_n_query(b) * sizeof *p);
    if (!p) return ws_error_set(err, WS_ERR_NOMEM, "probe: out of memory");
    ws_step_result sr;
    ws_status st = ws_exec_query(x, b, w, p, &sr, err);
    for (int i = 0, row = 0; st == WS_OK && i < ps->n; i++)
        for (int q = 0; q < 2 * ps->ep[i].k; q++, row++) {
            int kind, label;
            ws_probe_question(&ps->ep[i], q, &kind, &label);
            res->n[ps->ki[i]][di][kind]++;
            res->right[ps->ki[i]][di][kind] += (p[row] >= 0.5f) == label;
        }
    free(p);
    return st;
}

static ws_status run(ws_exec *x, const ws_probe_config *pc, probe_set *ps, ws_batch *b,
                     float *w, ws_probe_result *res, ws_error *err)
{
    ws_vocab *v = pc->grow_vocab ? ws_model_vocab(ws_exec_model(x)) : NULL;
    ws_step_result sr;
    for (int g = 1; g <= ps->last; g++) {
        ws_batch_clear(b);
        WS_TRY(add_step(b, ps, g, v));
        WS_TRY(ws_exec_step(x, b, w, w, WS_STEP_INFER, 1.0f, NULL, &sr, err));
    }
    int done = 0; /* steps since the last instruction */
    for (int di = 0; di < pc->n_delays; di++) {
        for (; done < pc->delays[di]; done++) {
            ws_batch_clear(b);
            WS_TRY(add_after_step(b, ps, pc, ps->last + 1 + done, v));
            WS_TRY(ws_exec_step(x, b, w, w, WS_STEP_INFER, 1.0f, NULL, &sr, err));
        }
        WS_TRY(ask(x, b, ps, w, v, di, res, err));
    }
    return WS_OK;
}

ws_status ws_probe_run(ws_exec *x, const ws_probe_config *pc, ws_probe_result *res,
                       ws_error *err)
{
    ws_model *m = ws_exec_model(x);
    memset(res, 0, sizeof *res);
    if (pc->n_ks < 1 || pc->n_ks > WS_PROBE_MAX_KS || pc->n_delays < 1 ||
        pc->n_delays > WS_PROBE_MAX_DELAYS)
        return ws_error_set(err, WS_ERR_INVALID, "probe: 1..%d K values and 1..%d delays",
                            WS_PROBE_MAX_KS, WS_PROBE_MAX_DELAYS);
    for (int di = 0; di < pc->n_delays; di++)
        if (pc->delays[di] < 0 || (di && pc->delays[di] <= pc->delays[di - 1]))
            return ws_error_set(err, WS_ERR_INVALID, "probe: delays must ascend from >= 0");
    if (pc->chatter < 0 || pc->chatter > 64)
        return ws_error_set(err, WS_ERR_INVALID, "probe: chatter must be in [0, 64]");
    if (ws_model_config_of(m)->max_fact_len < WS_PROBE_ARITY)
        return ws_error_set(err, WS_ERR_INVALID, "probe: facts of %d symbols need max_fact_len "
                                                 ">= %d", WS_PROBE_ARITY, WS_PROBE_ARITY);
    probe_set ps = {0};
    for (int ki = 0; ki < pc->n_ks; ki++) ps.n += pc->n_traj[ki];
    ps.ep = calloc((size_t)(ps.n > 0 ? ps.n : 1), sizeof *ps.ep);
    ps.ki = calloc((size_t)(ps.n > 0 ? ps.n : 1), sizeof *ps.ki);
    ws_batch *b = NULL;
    float *w = NULL;
    ws_status st = ps.ep && ps.ki ? ws_batch_new(&b, ws_model_config_of(m)) : WS_ERR_NOMEM;
    if (st != WS_OK) ws_error_set(err, st, "probe: out of memory");
    for (int ki = 0, i = 0; st == WS_OK && ki < pc->n_ks; ki++)
        for (int t = 0; st == WS_OK && t < pc->n_traj[ki]; t++, i++) {
            ps.ki[i] = ki;
            st = ws_probe_episode_make(&ps.ep[i], pc->ks[ki], pc, ws_probe_seed(pc, ki, t), err);
            if (st == WS_OK && ps.ep[i].n_steps > ps.last) ps.last = ps.ep[i].n_steps;
        }
    if (st == WS_OK && ps.n > 0) st = ws_model_state_alloc(m, ps.n, &w, err);
    if (st == WS_OK && ps.n > 0) st = run(x, pc, &ps, b, w, res, err);
    ws_backend_release(ws_model_backend(m), w);
    for (int i = 0; i < ps.n && ps.ep; i++) ws_probe_episode_free(&ps.ep[i]);
    free(ps.ep);
    free(ps.ki);
    ws_batch_free(b);
    return st;
}

uint64_t ws_probe_seed(const ws_probe_config *pc, int ki, int t)
{
    return pc->seed + (uint64_t)pc->ks[ki] * 1000003u + (uint64_t)t;
}

double ws_probe_acc(const ws_probe_result *r, int ki, int di, unsigned kinds_mask)
{
    long n = 0, right = 0;
    for (int k = 0; k < WS_PROBE_KINDS; k++)
        if (kinds_mask & (1u << k)) n += r->n[ki][di][k], right += r->right[ki][di][k];
    return n ? (double)right / (double)n : -1.0;
}
