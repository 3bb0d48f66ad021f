/* facts.c — the house-assistant world: E entities, each in one of P places.
 *
 * Symbols "e0".."e{E-1}", "p0".."p{P-1}"; fact (e, p) = "e is in p".
 * Step 1 puts every entity in a uniform random place and tells (e, place) = 1
 * for each. Each later step, min(Poisson(move_rate), E) distinct random entities
 * move, each to a uniform random *other* place, told as (e, new) = 1 then
 * (e, old) = 0. Telling the old place false is deliberate: then every fact's
 * truth is the value of the last instruction about that fact (0 if never told),
 * which is exactly the rule the service uses to label recall queries it samples
 * from a session's step log (DESIGN §3). Without it, (e, old) told 1 would turn
 * false with no instruction about it, and the world would only be knowable
 * through the one-place-per-entity rule.
 * Queries (WS_QK_PLAIN, label = (p == place(e))): every pair in entity-major
 * order with group = e, so the evaluator scores the argmax over an entity's
 * places (chance 1/P); or, with query_sample > 0, that many distinct uniform
 * pairs and no groups (a partial group's argmax would mean nothing).
 * No baselines.
 *
 * Defaults: 4 entities × 4 places, move_rate 1.0 (about one move a step: recent
 * moves and long-unmoved entities both stay common over an 8-step rollout),
 * query_sample 0. The issue also runs 8 × 8. */
#include <math.h>
#include <stdlib.h>

#include "task_impl.h"

enum { FACTS_MAX_SIDE = 1024, FACTS_MAX_PAIRS = 1 << 16 };

typedef struct {
    int *place; /* [E] */
    int *pick;  /* [max(E, E*P)] sampling scratch */
} facts_world;

typedef struct {
    int32_t *ent, *plc; /* symbol ids [E], [P] */
    facts_world *w;     /* [n_slots] */
} facts_data;

static void facts_defaults(ws_task_params *p)
{
    p->entities = 4;
    p->places = 4;
    p->move_rate = 1.0f;
    p->query_sample = 0;
}

static ws_status facts_create(ws_task *t, ws_vocab *v, ws_error *err)
{
    const ws_task_params *p = &t->p;
    if (p->entities < 1 || p->entities > FACTS_MAX_SIDE || p->places < 2 ||
        p->places > FACTS_MAX_SIDE || p->entities * p->places > FACTS_MAX_PAIRS)
        return ws_error_set(err, WS_ERR_INVALID, "task facts: need 1..%d entities, 2..%d places "
                                                 "and at most %d pairs, got %d x %d",
                            FACTS_MAX_SIDE, FACTS_MAX_SIDE, FACTS_MAX_PAIRS, p->entities,
                            p->places);
    if (!isfinite(p->move_rate) || p->move_rate < 0)
        return ws_error_set(err, WS_ERR_INVALID, "task facts: move_rate must be finite and >= 0");
    if (p->query_sample < 0 || p->query_sample > p->entities * p->places)
        return ws_error_set(err, WS_ERR_INVALID, "task facts: query_sample must be in [0, %d]",
                            p->entities * p->places);
    facts_data *d = calloc(1, sizeof *d);
    if (!d) return ws_error_set(err, WS_ERR_NOMEM, "task facts: out of memory");
    t->data = d;
    d->ent = malloc((size_t)p->entities * sizeof *d->ent);
    d->plc = malloc((size_t)p->places * sizeof *d->plc);
    d->w = calloc((size_t)t->n_slots, sizeof *d->w);
    if (!d->ent || !d->plc || !d->w)
        return ws_error_set(err, WS_ERR_NOMEM, "task facts: out of memory");
    size_t scratch = (size_t)p->entities * (size_t)p->places; /* >= E since P >= 2 */
    for (int s = 0; s < t->n_slots; s++) {
        d->w[s].place = malloc((size_t)p->entities * sizeof *d->w[s].place);
        d->w[s].pick = malloc(scratch * sizeof *d->w[s].pick);
        if (!d->w[s].place || !d->w[s].pick)
            return ws_error_set(err, WS_ERR_NOMEM, "task facts: out of memory");
    }
    WS_TRY(ws_task_symbols(t, v, "e", p->entities, d->ent, err));
    return ws_task_symbols(t, v, "p", p->places, d->plc, err);
}

static void facts_destroy(ws_task *t)
{
    facts_data *d = t->data;
    if (!d) return;
    for (int s = 0; d->w && s < t->n_slots; s++) {
        free(d->w[s].place);
        free(d->w[s].pick);
    }
    free(d->w);
    free(d->ent);
    free(d->plc);
    free(d);
}

static int facts_max_queries(const ws_task *t)
{
    return t->p.query_sample ? t->p.query_sample : t->p.entities * t->p.places;
}

static void facts_reset(ws_task *t, int slot)
{
    facts_data *d = t->data;
    for (int e = 0; e < t->p.entities; e++)
        d->w[slot].place[e] = (int)ws_task_rng_below(&t->rng[slot], (uint32_t)t->p.places);
}

static ws_status tell(const facts_data *d, ws_batch *b, int e, int p, int value)
{
    int32_t fact[2] = {d->ent[e], d->plc[p]};
    return ws_batch_add_instr(b, fact, 2, value);
}

static ws_status facts_step(ws_task *t, int slot, ws_batch *b, ws_query_info *info)
{
    facts_data *d = t->data;
    facts_world *w = &d->w[slot];
    ws_task_rng *r = &t->rng[slot];
    int E = t->p.entities, P = t->p.places, nq = 0;
    if (t->steps[slot] == 1) {
        for (int e = 0; e < E; e++) WS_TRY(tell(d, b, e, w->place[e], 1));
    } else {
        int moves = ws_task_rng_poisson(r, t->p.move_rate, E);
        ws_task_rng_sample(r, w->pick, E, moves);
        for (int i = 0; i < moves; i++) {
            int e = w->pick[i], old = w->place[e];
            /* A uniform place among the P-1 others. */
            w->place[e] = (old + 1 + (int)ws_task_rng_below(r, (uint32_t)(P - 1))) % P;
            WS_TRY(tell(d, b, e, w->place[e], 1));
            WS_TRY(tell(d, b, e, old, 0));
        }
    }
    int sampled = t->p.query_sample > 0, n = sampled ? t->p.query_sample : E * P;
    if (sampled) ws_task_rng_sample(r, w->pick, E * P, n);
    for (int i = 0; i < n; i++) {
        int pair = sampled ? w->pick[i] : i, e = pair / P, p = pair % P;
        int32_t fact[2] = {d->ent[e], d->plc[p]};
        WS_TRY(ws_task_query(b, fact, 2, w->place[e] == p, info, &nq,
                             (ws_query_info){.kind = WS_QK_PLAIN, .group = sampled ? -1 : e}));
    }
    return WS_OK;
}

const ws_task_kind ws_task_kind_facts = {
    .name = "facts",
    .fact_len = 2,
    .n_baselines = 0,
    .defaults = facts_defaults,
    .create = facts_create,
    .destroy = facts_destroy,
    .max_queries = facts_max_queries,
    .reset = facts_reset,
    .step = facts_step,
};
