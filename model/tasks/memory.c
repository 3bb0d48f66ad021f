/* memory.c — open-vocabulary session memory: what the shipped default model is
 * trained on (DESIGN §3).
 *
 * Every world draws fresh random symbols (64-bit hashes with no vocabulary id:
 * symbols no model has seen) into a pool of 2K+4, and K facts over them, K
 * log-uniform in [live_facts_min, live_facts]; a fact has 1..max_arity distinct
 * pool symbols (uniform arity) and no two facts are the same tuple. Instructions
 * set facts true or false; the last value told wins; a fact never told does not
 * hold (closed world).
 *   Telling: facts are told in order, first value true with probability 0.8.
 *   Steps: while facts remain untold a step is active with probability 0.8, after
 *   that with the world's own rate, log-uniform in [active_rate/1000, active_rate]
 *   (some worlds fall silent for thousands of steps: delays far beyond any
 *   rollout). An active step carries 1..instr_per_step instructions about
 *   distinct facts: the next untold fact (probability 0.7 while any remain) or a
 *   told one, re-told at its value or, with probability override_rate, overridden
 *   (its value flipped).
 *   Chatter (chatter_rate > 0): every world has its own rate, uniform in
 *   [0, chatter_rate], at which a step also tells one fact over fresh symbols of
 *   its own (1..max_arity, value true or false alike) that is never asked about:
 *   what an assistant hears about other things while it must keep what it was
 *   told. It makes the Updater run on steps that tell nothing the queries ask
 *   about, so what a model keeps is trained under new facts, not only silence.
 * Queries, every step, n_queries of them: half about told facts (uniform, label
 * = the last value told, WS_QK_TOLD) once any is told, the rest never-told
 * tuples (WS_QK_UNTOLD, label 0): with probability 1/2 a told fact with one
 * symbol swapped for another pool symbol (a distractor that shares symbols with
 * what was told), else a random tuple of pool symbols, with a brand-new symbol
 * in it one time in four. A generated tuple that happens to be a told fact is
 * labelled and kinded as that fact. No baselines, no groups.
 *   Slot worlds (exclusive_rate > 0): that share of worlds are instead the slot
 * worlds of memory_slots.h (entities with one value of an exclusive relation at
 * a time, its symbol marked by the last overflow id of the vocabulary): what a
 * model needs so that online training can teach it a deployment's one-place
 * rule by moving one symbol's correction (api.md, Rules from labels).
 *   Told-moves worlds (relational_rate > 0): that share of the other worlds
 * are slot worlds whose moves are told in full (the value left false, the new
 * one true) and whose relation carries no marker: an app's household told as it
 * happens, facts that differ in one symbol with opposite values
 * (memory_slots.h).
 * Defaults: live_facts 32, live_facts_min 1, max_arity 4, instr_per_step 4,
 * override_rate 0.25, active_rate 0.5, n_queries 16, chatter_rate 0 (none),
 * exclusive_rate 0 (none), slot_active 0.8, slot_single 0, relational_rate 0 (none). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "memory_slots.h"

enum { MEM_ARITY = 4, MEM_MAX_FACTS = 4096, MEM_MAX_INSTR = 64, MEM_MAX_QUERIES = 4096 };

typedef struct {
    int arity;
    int sym[MEM_ARITY]; /* pool indices */
    int told, value;
} mem_fact;

typedef struct {
    int k, n_pool, n_told; /* facts; pool symbols; facts told so far (in order) */
    double rate;           /* activity after the telling */
    double chatter;        /* probability a step also tells a fact of fresh symbols */
    uint64_t *pool;        /* [2K+4] symbol hashes */
    mem_fact *facts;       /* [K] */
    int *told_idx;         /* [K] indices of told facts */
    int *touched;          /* [K] step stamp: one instruction per fact and step */
    int is_slot;           /* a slot world: `slot` below, nothing above */
    ws_slot_world slot;
} mem_world;

typedef struct {
    mem_world *w;   /* [n_slots] */
    int32_t marker; /* the exclusive relation's id in slot worlds */
} mem_data;

static void mem_defaults(ws_task_params *p)
{
    p->live_facts = 32;
    p->live_facts_min = 1;
    p->max_arity = 4;
    p->instr_per_step = 4;
    p->override_rate = 0.25f;
    p->active_rate = 0.5f;
    p->n_queries = 16;
    p->chatter_rate = 0.0f;
    p->exclusive_rate = 0.0f;
    p->slot_active = 0.8f;
    p->slot_single = 0.0f;
}

static ws_status mem_create(ws_task *t, ws_vocab *v, ws_error *err)
{
    const ws_task_params *p = &t->p;
    if (p->live_facts < 1 || p->live_facts > MEM_MAX_FACTS || p->live_facts_min < 1 ||
        p->live_facts_min > p->live_facts)
        return ws_error_set(err, WS_ERR_INVALID,
                            "task memory: need 1 <= live_facts_min <= live_facts <= %d",
                            MEM_MAX_FACTS);
    if (p->max_arity < 1 || p->max_arity > MEM_ARITY)
        return ws_error_set(err, WS_ERR_INVALID, "task memory: max_arity must be in [1, %d]",
                            MEM_ARITY);
    if (p->instr_per_step < 1 || p->instr_per_step > MEM_MAX_INSTR)
        return ws_error_set(err, WS_ERR_INVALID, "task memory: instr_per_step must be in [1, %d]",
                            MEM_MAX_INSTR);
    if (!(p->override_rate >= 0 && p->override_rate <= 1) ||
        !(p->active_rate >= 0 && p->active_rate <= 1) ||
        !(p->chatter_rate >= 0 && p->chatter_rate <= 1) ||
        !(p->exclusive_rate >= 0 && p->exclusive_rate <= 1) ||
        !(p->relational_rate >= 0 && p->relational_rate <= 1) ||
        !(p->slot_active >= 0 && p->slot_active <= 1) ||
        !(p->slot_single >= 0 && p->slot_single <= 1))
        return ws_error_set(
            err, WS_ERR_INVALID,
            "task memory: override_rate, active_rate, chatter_rate, "
            "exclusive_rate, relational_rate, slot_active and slot_single must be in "
            "[0, 1]");
    if (p->n_queries < 0 || p->n_queries > MEM_MAX_QUERIES)
        return ws_error_set(err, WS_ERR_INVALID, "task memory: n_queries must be in [0, %d]",
                            MEM_MAX_QUERIES);
    mem_data *d = calloc(1, sizeof *d);
    if (!d) return ws_error_set(err, WS_ERR_NOMEM, "task memory: out of memory");
    t->data = d;
    /* Fresh symbols have no vocabulary id; only the slot worlds' marker has one,
     * the last overflow id (every vocabulary has at least one). */
    if (p->exclusive_rate > 0) {
        d->marker = ws_vocab_capacity(v) + ws_vocab_n_overflow(v) - 1;
        if (d->marker > t->max_id) t->max_id = d->marker;
    }
    d->w = calloc((size_t)t->n_slots, sizeof *d->w);
    if (!d->w) return ws_error_set(err, WS_ERR_NOMEM, "task memory: out of memory");
    size_t k = (size_t)p->live_facts;
    for (int s = 0; s < t->n_slots; s++) {
        mem_world *w = &d->w[s];
        w->pool = malloc((2 * k + 4) * sizeof *w->pool);
        w->facts = malloc(k * sizeof *w->facts);
        w->told_idx = malloc(k * sizeof *w->told_idx);
        w->touched = malloc(k * sizeof *w->touched);
        if (!w->pool || !w->facts || !w->told_idx || !w->touched)
            return ws_error_set(err, WS_ERR_NOMEM, "task memory: out of memory");
    }
    return WS_OK;
}

static void mem_destroy(ws_task *t)
{
    mem_data *d = t->data;
    for (int s = 0; d && d->w && s < t->n_slots; s++) {
        free(d->w[s].pool);
        free(d->w[s].facts);
        free(d->w[s].told_idx);
        free(d->w[s].touched);
    }
    if (d) free(d->w);
    free(d);
}

static int mem_max_queries(const ws_task *t) { return t->p.n_queries; }

/* The fact with exactly these pool symbols, or -1. */
static int find_fact(const mem_world *w, const int *sym, int arity)
{
    for (int i = 0; i < w->k; i++)
        if (w->facts[i].arity == arity && !memcmp(w->facts[i].sym, sym, arity * sizeof *sym))
            return i;
    return -1;
}

/* arity distinct pool symbols, in random order. */
static void draw_tuple(ws_task_rng *r, const mem_world *w, int arity, int *sym)
{
    for (int j = 0; j < arity; j++) {
        int s, dup;
        do {
            s = (int)ws_task_rng_below(r, (uint32_t)w->n_pool);
            dup = 0;
            for (int i = 0; i < j; i++) dup |= sym[i] == s;
        } while (dup);
        sym[j] = s;
    }
}

static void mem_reset(ws_task *t, int slot)
{
    mem_data *d = t->data;
    mem_world *w = &d->w[slot];
    ws_task_rng *r = &t->rng[slot];
    const ws_task_params *p = &t->p;
    double lo = log((double)p->live_facts_min), hi = log((double)p->live_facts + 1.0);
    int k = (int)exp(lo + (hi - lo) * ws_task_rng_uniform(r));
    k = k < p->live_facts_min ? p->live_facts_min : k > p->live_facts ? p->live_facts : k;
    w->n_pool = 2 * k + 4;
    for (int i = 0; i < w->n_pool; i++) w->pool[i] = ws_task_rng_symbol(r);
    for (w->k = 0; w->k < k; w->k++) { /* find_fact searches the facts drawn so far */
        mem_fact *f = &w->facts[w->k];
        do {
            f->arity = 1 + (int)ws_task_rng_below(r, (uint32_t)p->max_arity);
            draw_tuple(r, w, f->arity, f->sym);
        } while (find_fact(w, f->sym, f->arity) >= 0);
        f->told = 0;
        f->value = ws_task_rng_uniform(r) < 0.8;
        w->touched[w->k] = -1;
    }
    w->n_told = 0;
    w->rate = p->active_rate * pow(10.0, -3.0 * ws_task_rng_uniform(r));
    /* drawn only when asked for, so worlds without chatter keep their streams */
    w->chatter = p->chatter_rate > 0 ? p->chatter_rate * ws_task_rng_uniform(r) : 0.0;
    w->is_slot = p->exclusive_rate > 0 && ws_task_rng_uniform(r) < p->exclusive_rate;
    int told_moves =
        !w->is_slot && p->relational_rate > 0 && ws_task_rng_uniform(r) < p->relational_rate;
    if (w->is_slot || told_moves) ws_slot_reset(&w->slot, r, told_moves);
    w->is_slot |= told_moves;
}

/* Appends a fact's symbols as ws_syms. */
static void fact_syms(const mem_world *w, const int *sym, int arity, uint64_t extra, ws_sym *out)
{
    for (int j = 0; j < arity; j++) out[j] = (ws_sym){-1, w->pool[sym[j]]};
    if (extra) out[arity - 1] = (ws_sym){-1, extra};
}

static ws_status tell(mem_world *w, int i, int value, int step, ws_batch *b)
{
    mem_fact *f = &w->facts[i];
    ws_sym syms[MEM_ARITY];
    fact_syms(w, f->sym, f->arity, 0, syms);
    if (!f->told) w->told_idx[w->n_told++] = i;
    f->told = 1;
    f->value = value;
    w->touched[i] = step;
    return ws_batch_add_instr_syms(b, syms, f->arity, value);
}

/* One fact over fresh symbols, never asked about (see "Chatter" above). */
static ws_status chatter(mem_world *w, ws_task_rng *r, int max_arity, ws_batch *b)
{
    if (!(w->chatter > 0) || ws_task_rng_uniform(r) >= w->chatter) return WS_OK;
    int arity = 1 + (int)ws_task_rng_below(r, (uint32_t)max_arity);
    ws_sym syms[MEM_ARITY];
    for (int j = 0; j < arity; j++) syms[j] = (ws_sym){-1, ws_task_rng_symbol(r)};
    return ws_batch_add_instr_syms(b, syms, arity, ws_task_rng_bit(r));
}

static ws_status instructions(ws_task *t, mem_world *w, ws_task_rng *r, int step, ws_batch *b)
{
    const ws_task_params *p = &t->p;
    WS_TRY(chatter(w, r, p->max_arity, b));
    int telling = w->n_told < w->k;
    if (ws_task_rng_uniform(r) >= (telling ? 0.8 : w->rate)) return WS_OK;
    int n = 1 + (int)ws_task_rng_below(r, (uint32_t)p->instr_per_step);
    for (int m = 0; m < n; m++) {
        if (w->n_told < w->k && (w->n_told == 0 || ws_task_rng_uniform(r) < 0.7)) {
            int i = w->n_told; /* told in order: the first n_told facts are told */
            WS_TRY(tell(w, i, w->facts[i].value, step, b));
            continue;
        }
        int i = w->told_idx[ws_task_rng_below(r, (uint32_t)w->n_told)];
        if (w->touched[i] == step) continue; /* one instruction per fact and step */
        int flip = ws_task_rng_uniform(r) < p->override_rate;
        WS_TRY(tell(w, i, flip ? !w->facts[i].value : w->facts[i].value, step, b));
    }
    return WS_OK;
}

/* A never-told candidate: a told fact with one symbol swapped, or a random tuple
 * (with a brand-new last symbol one time in four). */
static void negative(const mem_world *w, ws_task_rng *r, int max_arity, int *sym, int *arity,
                     uint64_t *extra)
{
    *extra = 0;
    if (w->n_told > 0 && ws_task_rng_bit(r)) {
        const mem_fact *f = &w->facts[w->told_idx[ws_task_rng_below(r, (uint32_t)w->n_told)]];
        *arity = f->arity;
        memcpy(sym, f->sym, sizeof f->sym);
        int j = (int)ws_task_rng_below(r, (uint32_t)f->arity), s, dup;
        do {
            s = (int)ws_task_rng_below(r, (uint32_t)w->n_pool);
            dup = 0;
            for (int i = 0; i < f->arity; i++) dup |= sym[i] == s;
        } while (dup);
        sym[j] = s;
        return;
    }
    *arity = 1 + (int)ws_task_rng_below(r, (uint32_t)max_arity);
    draw_tuple(r, w, *arity, sym);
    if (ws_task_rng_below(r, 4) == 0) *extra = ws_task_rng_symbol(r);
}

static ws_status mem_step(ws_task *t, int slot, ws_batch *b, ws_query_info *info)
{
    mem_data *d = t->data;
    mem_world *w = &d->w[slot];
    ws_task_rng *r = &t->rng[slot];
    int step = t->steps[slot], n_info = 0;
    if (w->is_slot)
        return ws_slot_step(&w->slot, r, step, w->slot.told_moves ? -1 : d->marker, &t->p, b, info,
                            &n_info);
    WS_TRY(instructions(t, w, r, step, b));
    int n_told_q = w->n_told > 0 ? t->p.n_queries / 2 : 0;
    for (int q = 0; q < t->p.n_queries; q++) {
        int sym[MEM_ARITY], arity, i;
        uint64_t extra = 0;
        if (q < n_told_q) {
            i = w->told_idx[ws_task_rng_below(r, (uint32_t)w->n_told)];
            arity = w->facts[i].arity;
            memcpy(sym, w->facts[i].sym, sizeof sym);
        } else {
            negative(w, r, t->p.max_arity, sym, &arity, &extra);
            i = extra ? -1 : find_fact(w, sym, arity);
        }
        int told = i >= 0 && w->facts[i].told;
        ws_sym syms[MEM_ARITY];
        fact_syms(w, sym, arity, extra, syms);
        WS_TRY(ws_batch_add_query_syms(b, syms, arity, told ? w->facts[i].value : 0));
        if (info)
            info[n_info++] = (ws_query_info){.kind = told ? WS_QK_TOLD : WS_QK_UNTOLD, .group = -1};
    }
    return WS_OK;
}

const ws_task_kind ws_task_kind_memory = {
    .name = "memory",
    .fact_len = MEM_ARITY,
    .n_baselines = 0,
    .defaults = mem_defaults,
    .create = mem_create,
    .destroy = mem_destroy,
    .max_queries = mem_max_queries,
    .reset = mem_reset,
    .step = mem_step,
};
