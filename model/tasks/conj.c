/* conj.c — a two-key conjunction world: agents hold keys, keys open boxes, and
 * every query needs two instructions at once (a 3-way relation: agent, key,
 * box; MIXERS.md §9, issue 7).
 *
 * Params: entities = A agents, places = P keys and P boxes, move_rate.
 * Symbols "a0".."a{A-1}", "k0".."k{P-1}", "x0".."x{P-1}".
 * Instructions: ("a<i>", "k<j>") "agent i holds key j"; ("k<j>", "x<b>") "key j
 * opens box b". Each agent holds exactly one key (several agents may hold the
 * same key) and each key opens exactly one box (several keys may open the same
 * box). Step 1 draws both maps uniformly and tells every pair that holds. Each
 * later step, min(Poisson(move_rate), A + P) distinct movers are drawn among the
 * A agents and P keys: an agent takes a uniform other key, told (a, new) = 1
 * then (a, old) = 0; a key is re-cut for a uniform other box, told (k, new) = 1
 * then (k, old) = 0 (as in facts.c, so every told fact's truth is its last
 * instruction).
 * Queries ("a<i>", "x<b>") "agent i can open box b", for every pair in
 * agent-major order with group = i: label = (box(key(i)) == b), the conjunction
 * of the two instructions (a_i, k) and (k, x_b) over the key k that agent i
 * holds. No single instruction decides a query, and re-cutting one key changes
 * the answers of every agent holding it without any instruction naming them.
 * Exactly one box per agent is true: the evaluator scores each agent's argmax
 * (chance 1/P); all-false answers get (P−1)/P of the queries right.
 * No baselines. Defaults: 4 agents, 4 keys/boxes, move_rate 1.0. */
#include <math.h>
#include <stdlib.h>

#include "task_impl.h"

enum { CONJ_MAX_SIDE = 256 };

typedef struct {
    int *key; /* [A] the key each agent holds */
    int *box; /* [P] the box each key opens */
    int *pick; /* [A + P] sampling scratch */
} conj_world;

typedef struct {
    int32_t *agent, *key, *box; /* symbol ids [A], [P], [P] */
    conj_world *w;              /* [n_slots] */
} conj_data;

static void conj_defaults(ws_task_params *p)
{
    p->entities = 4;
    p->places = 4;
    p->move_rate = 1.0f;
}

static ws_status conj_create(ws_task *t, ws_vocab *v, ws_error *err)
{
    const ws_task_params *p = &t->p;
    if (p->entities < 1 || p->entities > CONJ_MAX_SIDE || p->places < 2 ||
        p->places > CONJ_MAX_SIDE)
        return ws_error_set(err, WS_ERR_INVALID,
                            "task conj: need 1..%d agents (entities) and 2..%d keys/boxes "
                            "(places), got %d x %d",
                            CONJ_MAX_SIDE, CONJ_MAX_SIDE, p->entities, p->places);
    if (!isfinite(p->move_rate) || p->move_rate < 0)
        return ws_error_set(err, WS_ERR_INVALID, "task conj: move_rate must be finite and >= 0");
    int A = p->entities, P = p->places;
    conj_data *d = calloc(1, sizeof *d);
    if (!d) return ws_error_set(err, WS_ERR_NOMEM, "task conj: out of memory");
    t->data = d;
    d->agent = malloc((size_t)A * sizeof *d->agent);
    d->key = malloc((size_t)P * sizeof *d->key);
    d->box = malloc((size_t)P * sizeof *d->box);
    d->w = calloc((size_t)t->n_slots, sizeof *d->w);
    if (!d->agent || !d->key || !d->box || !d->w)
        return ws_error_set(err, WS_ERR_NOMEM, "task conj: out of memory");
    for (int s = 0; s < t->n_slots; s++) {
        d->w[s].key = malloc((size_t)A * sizeof *d->w[s].key);
        d->w[s].box = malloc((size_t)P * sizeof *d->w[s].box);
        d->w[s].pick = malloc((size_t)(A + P) * sizeof *d->w[s].pick);
        if (!d->w[s].key || !d->w[s].box || !d->w[s].pick)
            return ws_error_set(err, WS_ERR_NOMEM, "task conj: out of memory");
    }
    WS_TRY(ws_task_symbols(t, v, "a", A, d->agent, err));
    WS_TRY(ws_task_symbols(t, v, "k", P, d->key, err));
    return ws_task_symbols(t, v, "x", P, d->box, err);
}

static void conj_destroy(ws_task *t)
{
    conj_data *d = t->data;
    if (!d) return;
    for (int s = 0; d->w && s < t->n_slots; s++) {
        free(d->w[s].key);
        free(d->w[s].box);
        free(d->w[s].pick);
    }
    free(d->w);
    free(d->agent);
    free(d->key);
    free(d->box);
    free(d);
}

static int conj_max_queries(const ws_task *t) { return t->p.entities * t->p.places; }

static void conj_reset(ws_task *t, int slot)
{
    conj_data *d = t->data;
    conj_world *w = &d->w[slot];
    uint32_t P = (uint32_t)t->p.places;
    for (int a = 0; a < t->p.entities; a++) w->key[a] = (int)ws_task_rng_below(&t->rng[slot], P);
    for (int k = 0; k < t->p.places; k++) w->box[k] = (int)ws_task_rng_below(&t->rng[slot], P);
}

static ws_status tell(ws_batch *b, int32_t s0, int32_t s1, int value)
{
    int32_t fact[2] = {s0, s1};
    return ws_batch_add_instr(b, fact, 2, value);
}

/* Moves *at to a uniform other value of [0, n) and tells (subject, new) = 1,
 * (subject, old) = 0. */
static ws_status move(ws_batch *b, ws_task_rng *r, int *at, int n, int32_t subject,
                      const int32_t *objects)
{
    int old = *at;
    *at = (old + 1 + (int)ws_task_rng_below(r, (uint32_t)(n - 1))) % n;
    WS_TRY(tell(b, subject, objects[*at], 1));
    return tell(b, subject, objects[old], 0);
}

static ws_status conj_step(ws_task *t, int slot, ws_batch *b, ws_query_info *info)
{
    conj_data *d = t->data;
    conj_world *w = &d->w[slot];
    ws_task_rng *r = &t->rng[slot];
    int A = t->p.entities, P = t->p.places, nq = 0;
    if (t->steps[slot] == 1) {
        for (int a = 0; a < A; a++) WS_TRY(tell(b, d->agent[a], d->key[w->key[a]], 1));
        for (int k = 0; k < P; k++) WS_TRY(tell(b, d->key[k], d->box[w->box[k]], 1));
    } else {
        int moves = ws_task_rng_poisson(r, t->p.move_rate, A + P);
        ws_task_rng_sample(r, w->pick, A + P, moves);
        for (int i = 0; i < moves; i++) {
            int m = w->pick[i];
            if (m < A) WS_TRY(move(b, r, &w->key[m], P, d->agent[m], d->key));
            else WS_TRY(move(b, r, &w->box[m - A], P, d->key[m - A], d->box));
        }
    }
    for (int a = 0; a < A; a++)
        for (int x = 0; x < P; x++) {
            int32_t fact[2] = {d->agent[a], d->box[x]};
            WS_TRY(ws_task_query(b, fact, 2, w->box[w->key[a]] == x, info, &nq,
                                 (ws_query_info){.kind = WS_QK_PLAIN, .group = a}));
        }
    return WS_OK;
}

const ws_task_kind ws_task_kind_conj = {
    .name = "conj",
    .fact_len = 2,
    .n_baselines = 0,
    .defaults = conj_defaults,
    .create = conj_create,
    .destroy = conj_destroy,
    .max_queries = conj_max_queries,
    .reset = conj_reset,
    .step = conj_step,
};
