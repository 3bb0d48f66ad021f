/* task_impl.h — what the dispatcher (task.c) shares with the task generators
 * (internal to tasks/).
 *
 * A generator is a ws_task_kind: a table of functions over a ws_task whose
 * generic part (params, slots, per-slot RNG and step counters) task.c manages,
 * plus the kind's own state in `data`. */
#ifndef WS_TASK_IMPL_H
#define WS_TASK_IMPL_H

#include "task.h"
#include "task_rng.h"

typedef struct ws_task_kind ws_task_kind;

struct ws_task {
    const ws_task_kind *kind;
    ws_task_params p;  /* a copy; p.name and p.data_dir point into this object */
    char *data_dir;    /* owned copy behind p.data_dir (NULL if none was given) */
    int n_slots;
    ws_task_rng *rng;  /* [n_slots]: each world's own generator */
    int *steps;        /* [n_slots]: steps taken since the slot's reset */
    unsigned char *live; /* [n_slots]: reset at least once, so a world exists */
    int32_t max_id;    /* largest symbol id registered: the batch must accept it */
    void *data;        /* the kind's state: symbol ids, shared data, per-slot worlds */
};

struct ws_task_kind {
    const char *name;
    int fact_len;      /* longest fact it emits: the batch's S must be at least this */
    int dynamics;      /* its worlds change on steps that tell nothing (a model that
                          holds its state on such steps cannot learn it) */
    int n_baselines;
    const char *baselines[WS_TASK_MAX_BASELINES];
    void (*defaults)(ws_task_params *p);
    /* Validates t->p, registers symbols, allocates t->data for t->n_slots slots.
     * On failure it leaves t->data for destroy (which must accept partial state). */
    ws_status (*create)(ws_task *t, ws_vocab *v, ws_error *err);
    void (*destroy)(ws_task *t);
    int (*max_queries)(const ws_task *t);
    /* Starts a fresh world in the slot; the slot's RNG is already seeded. */
    void (*reset)(ws_task *t, int slot);
    /* Advances the world to step t->steps[slot] (already incremented, >= 1) and
     * appends it to b; returns the batch's status (WS_ERR_NOMEM only: the
     * dispatcher checked fact lengths and the open trajectory beforehand). */
    ws_status (*step)(ws_task *t, int slot, ws_batch *b, ws_query_info *info);
};

#define WS_TASK(name) extern const ws_task_kind ws_task_kind_##name;
#include "task_list.h"
#undef WS_TASK

/* Registers (or finds) sym for t and stores its id; WS_ERR_INVALID when the
 * vocabulary is full, since an overflow id would silently merge task symbols. */
ws_status ws_task_symbol(ws_task *t, ws_vocab *v, const char *sym, int32_t *id, ws_error *err);
/* The same for prefix0 .. prefix{n-1}, into ids[0..n). */
ws_status ws_task_symbols(ws_task *t, ws_vocab *v, const char *prefix, int n, int32_t *ids,
                          ws_error *err);

/* Appends one query; when info is given, also its description at info[*n_info]
 * (then *n_info is advanced). */
ws_status ws_task_query(ws_batch *b, const int32_t *ids, int n_ids, int label,
                        ws_query_info *info, int *n_info, ws_query_info qi);

#endif
