/* memory_slots.h — the memory task's slot worlds (internal to tasks/; memory.c
 * says when a world is one).
 *
 * A slot world holds 2..4 entities, 3..6 values and 2..4 objects over fresh
 * symbols, and two relations over fresh symbols: an exclusive one (an entity has
 * one value of it at a time: `mary,location,garden` makes `mary,location,kitchen`
 * false) and a plain one (`mary,has,key`, any number true at once). Facts are
 * (entity, relation, value|object), in that order. The exclusive relation's symbol
 * carries a marker vocabulary id (its learned correction, E_sym of that id) that
 * the plain one lacks: a model trained on these worlds learns to follow the rule
 * for a relation whose correction looks like the marker's, so online training
 * need only move a deployment's own relation symbol (`location`) there.
 *
 * A told-moves world (told_moves 1, memory.c's relational_rate) is the same world
 * as an app that does not know the rule tells it: a move tells the value left
 * false beside the new one true, the relation carries no marker, and nothing is
 * left to infer: what it trains is memory of many facts that differ in one
 * symbol, some true and some false (a household's `mary,location,kitchen` and
 * `mary,location,garden`).
 *
 * Step 1 places every entity (one value each, told true). Later steps are active
 * with probability slot_active (0.8 by default) and carry instructions about
 * distinct entities, one with probability slot_single (0 by default), else
 * 1..instr_per_step: a move (a new value told true, the old one left unsaid; 65%), leaving
 * (the value held told false; 5%), or a plain fact told (a new one true with
 * probability 0.7, a told one flipped or re-told alike; 30%).
 * Queries, n_queries a step, each about a random entity: half the exclusive
 * relation (its value now, else a value it left, else any other), half the plain
 * one (a random object); labels are the true state, kind TOLD for a fact ever
 * told, else UNTOLD; a told one is also tagged (ws_query_info.slot) CURRENT
 * (the value held now), LEFT (held before, not now) or PLAIN. */
#ifndef WS_MEMORY_SLOTS_H
#define WS_MEMORY_SLOTS_H

#include "task_impl.h"

enum { SLOT_MAX_ENT = 4, SLOT_MAX_VAL = 6, SLOT_MAX_OBJ = 4 };

typedef struct {
    int n_ent, n_val, n_obj;
    uint64_t ent[SLOT_MAX_ENT], val[SLOT_MAX_VAL], obj[SLOT_MAX_OBJ];
    uint64_t rel_excl, rel_plain;        /* symbol hashes */
    int where[SLOT_MAX_ENT];             /* value held, -1: none */
    unsigned visited[SLOT_MAX_ENT];      /* bit v: value v was ever told */
    int has[SLOT_MAX_ENT][SLOT_MAX_OBJ]; /* -1 never told, else the value */
    int told_moves;                      /* 1: a move also tells the value left false */
} ws_slot_world;

/* told_moves: see above (its marker is then -1: no id). */
void ws_slot_reset(ws_slot_world *w, ws_task_rng *r, int told_moves);
/* Appends step `step` (1 = the first) of w to b; marker is the exclusive
 * relation's vocabulary id (-1: none); p the task's (instr_per_step, n_queries,
 * slot_active, slot_single). info/n_info as ws_task_query. */
ws_status ws_slot_step(ws_slot_world *w, ws_task_rng *r, int step, int32_t marker,
                       const ws_task_params *p, ws_batch *b, ws_query_info *info, int *n_info);

#endif
