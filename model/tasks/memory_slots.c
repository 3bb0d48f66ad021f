/* memory_slots.c — the memory task's slot worlds: entities with one value of an
 * exclusive relation at a time (memory_slots.h says what they tell and ask). */
#include "memory_slots.h"

static int draw_in(ws_task_rng *r, int lo, int hi)
{
    return lo + (int)ws_task_rng_below(r, (uint32_t)(hi - lo + 1));
}

void ws_slot_reset(ws_slot_world *w, ws_task_rng *r, int told_moves)
{
    w->told_moves = told_moves;
    w->n_ent = draw_in(r, 2, SLOT_MAX_ENT);
    w->n_val = draw_in(r, 3, SLOT_MAX_VAL);
    w->n_obj = draw_in(r, 2, SLOT_MAX_OBJ);
    for (int i = 0; i < w->n_ent; i++) w->ent[i] = ws_task_rng_symbol(r);
    for (int i = 0; i < w->n_val; i++) w->val[i] = ws_task_rng_symbol(r);
    for (int i = 0; i < w->n_obj; i++) w->obj[i] = ws_task_rng_symbol(r);
    w->rel_excl = ws_task_rng_symbol(r);
    w->rel_plain = ws_task_rng_symbol(r);
    for (int e = 0; e < w->n_ent; e++) {
        w->where[e] = -1;
        w->visited[e] = 0;
        for (int o = 0; o < w->n_obj; o++) w->has[e][o] = -1;
    }
}

/* A value of the exclusive relation that entity e does not hold now. */
static int other_value(const ws_slot_world *w, ws_task_rng *r, int e)
{
    int v;
    do v = (int)ws_task_rng_below(r, (uint32_t)w->n_val);
    while (v == w->where[e]);
    return v;
}

/* (entity, relation, x) as ws_syms: the exclusive relation with the marker id. */
static void fact(const ws_slot_world *w, int e, int excl, int x, int32_t marker, ws_sym *out)
{
    out[0] = (ws_sym){-1, w->ent[e]};
    out[1] = excl ? (ws_sym){marker, w->rel_excl} : (ws_sym){-1, w->rel_plain};
    out[2] = (ws_sym){-1, excl ? w->val[x] : w->obj[x]};
}

static ws_status place(ws_slot_world *w, int e, int v, int value, int32_t marker, ws_batch *b)
{
    ws_sym s[3];
    fact(w, e, 1, v, marker, s);
    w->where[e] = value ? v : -1;
    w->visited[e] |= 1u << v;
    return ws_batch_add_instr_syms(b, s, 3, value);
}

/* One instruction about entity e (see memory_slots.h for the mix). */
static ws_status happen(ws_slot_world *w, ws_task_rng *r, int e, int32_t marker, ws_batch *b)
{
    double u = ws_task_rng_uniform(r);
    if (u < 0.65 || (u < 0.7 && w->where[e] < 0)) {
        int v = other_value(w, r, e);
        if (w->told_moves && w->where[e] >= 0) WS_TRY(place(w, e, w->where[e], 0, marker, b));
        return place(w, e, v, 1, marker, b);
    }
    if (u < 0.7) return place(w, e, w->where[e], 0, marker, b);
    int o = (int)ws_task_rng_below(r, (uint32_t)w->n_obj);
    int *h = &w->has[e][o];
    *h = *h < 0 ? ws_task_rng_uniform(r) < 0.7 : ws_task_rng_bit(r) ? !*h : *h;
    ws_sym s[3];
    fact(w, e, 0, o, marker, s);
    return ws_batch_add_instr_syms(b, s, 3, *h);
}

/* A value to ask entity e about: the one held, one left, or any other. */
static int asked_value(const ws_slot_world *w, ws_task_rng *r, int e)
{
    if (w->where[e] >= 0 && ws_task_rng_bit(r)) return w->where[e];
    unsigned left = w->visited[e] & ~(w->where[e] >= 0 ? 1u << w->where[e] : 0u);
    if (left && ws_task_rng_uniform(r) < 0.6) {
        int v;
        do v = (int)ws_task_rng_below(r, (uint32_t)w->n_val);
        while (!(left >> v & 1));
        return v;
    }
    return other_value(w, r, e);
}

/* How many entities an active step tells about. slot_single is drawn only when
 * set, so that worlds without it keep their streams. */
static int told_count(ws_task_rng *r, const ws_task_params *p)
{
    if (p->slot_single > 0 && ws_task_rng_uniform(r) < p->slot_single) return 1;
    return draw_in(r, 1, p->instr_per_step);
}

ws_status ws_slot_step(ws_slot_world *w, ws_task_rng *r, int step, int32_t marker,
                       const ws_task_params *p, ws_batch *b, ws_query_info *info, int *n_info)
{
    if (step == 1) {
        for (int e = 0; e < w->n_ent; e++)
            WS_TRY(place(w, e, (int)ws_task_rng_below(r, (uint32_t)w->n_val), 1, marker, b));
    } else if (ws_task_rng_uniform(r) < p->slot_active) {
        int idx[SLOT_MAX_ENT], n = told_count(r, p);
        n = n < w->n_ent ? n : w->n_ent;
        ws_task_rng_sample(r, idx, w->n_ent, n); /* distinct entities */
        for (int i = 0; i < n; i++) WS_TRY(happen(w, r, idx[i], marker, b));
    }
    for (int q = 0; q < p->n_queries; q++) {
        int e = (int)ws_task_rng_below(r, (uint32_t)w->n_ent), excl = ws_task_rng_bit(r);
        int x, label, told, what;
        if (excl) {
            x = asked_value(w, r, e);
            label = w->where[e] == x;
            told = w->visited[e] >> x & 1;
            what = label ? WS_QS_CURRENT : told ? WS_QS_LEFT : WS_QS_NONE;
        } else {
            x = (int)ws_task_rng_below(r, (uint32_t)w->n_obj);
            label = w->has[e][x] == 1;
            told = w->has[e][x] >= 0;
            what = told ? WS_QS_PLAIN : WS_QS_NONE;
        }
        ws_sym s[3];
        fact(w, e, excl, x, marker, s);
        WS_TRY(ws_batch_add_query_syms(b, s, 3, label));
        if (info)
            info[(*n_info)++] = (ws_query_info){
                .kind = told ? WS_QK_TOLD : WS_QK_UNTOLD, .group = -1, .slot = what};
    }
    return WS_OK;
}
