/* task_rig.c — the task tests' shared rig (task_rig.h). */
#include "task_rig.h"

#include <stdlib.h>
#include <string.h>

#include "test_util.h"

void rig_check(ws_status st, const ws_error *err)
{
    if (st != WS_OK) fail_msg("%s: %s", ws_status_name(st), err->msg);
}

ws_task_params rig_params(const char *name)
{
    ws_task_params p;
    assert_true(ws_task_params_default(name, &p));
    return p;
}

void rig_open(rig *r, const ws_task_params *p, int n_slots)
{
    ws_error err = {0};
    ws_model_config c = ws_model_config_default();
    assert_int_equal(ws_vocab_new(&r->v, c.vocab_cap, c.n_overflow), WS_OK);
    assert_int_equal(ws_batch_new(&r->b, &c), WS_OK);
    rig_check(ws_task_new(&r->t, p, n_slots, r->v, &err), &err);
    r->info = calloc((size_t)ws_task_max_queries(r->t) + 1, sizeof *r->info);
    assert_non_null(r->info);
}

void rig_close(rig *r)
{
    ws_task_free(r->t);
    ws_batch_free(r->b);
    ws_vocab_free(r->v);
    free(r->info);
}

void rig_step(rig *r, int slot)
{
    ws_error err = {0};
    ws_batch_clear(r->b);
    assert_int_equal(ws_batch_begin_traj(r->b, ws_task_steps(r->t, slot) == 0), WS_OK);
    rig_check(ws_task_step(r->t, slot, r->b, r->info, &err), &err);
    assert_true(ws_batch_n_query(r->b) <= ws_task_max_queries(r->t));
}

const int32_t *rig_instr_ids(const rig *r, int i) { return r->b->instr.ids + (long)i * r->b->S; }
const int32_t *rig_query_ids(const rig *r, int i) { return r->b->query.ids + (long)i * r->b->S; }
int rig_n_ids(const rig *r, const int32_t *ids)
{
    int n = 0;
    while (n < r->b->S && ids[n] >= 0) n++;
    return n;
}

int rig_sym_num(const rig *r, int32_t id, const char *prefix)
{
    const char *s = ws_vocab_symbol(r->v, id);
    assert_non_null(s);
    size_t n = strlen(prefix);
    assert_memory_equal(s, prefix, n);
    assert_true(s[n] >= '0' && s[n] <= '9');
    return atoi(s + n);
}

int rig_is_sym(const rig *r, int32_t id, const char *sym)
{
    const char *s = ws_vocab_symbol(r->v, id);
    return s && !strcmp(s, sym);
}

static void put(rig_blob *o, const void *x, size_t n)
{
    o->p = realloc(o->p, o->n + n);
    assert_non_null(o->p);
    memcpy(o->p + o->n, x, n);
    o->n += n;
}

void rig_snapshot(const rig *r, rig_blob *o)
{
    const ws_batch *b = r->b;
    put(o, &b->instr.n, sizeof b->instr.n);
    put(o, &b->query.n, sizeof b->query.n);
    put(o, b->instr.ids, (size_t)b->instr.n * b->S * sizeof *b->instr.ids);
    put(o, b->instr.value, (size_t)b->instr.n * sizeof *b->instr.value);
    put(o, b->instr.hash, (size_t)b->instr.n * b->S * sizeof *b->instr.hash);
    put(o, b->query.ids, (size_t)b->query.n * b->S * sizeof *b->query.ids);
    put(o, b->query.hash, (size_t)b->query.n * b->S * sizeof *b->query.hash);
    put(o, b->query.value, (size_t)b->query.n * sizeof *b->query.value);
    put(o, r->info, (size_t)b->query.n * sizeof *r->info);
}

void rig_expect_new_fails(const ws_task_params *p, ws_vocab *v, ws_status want)
{
    ws_error err = {0};
    static int sentinel;
    ws_task *t = (ws_task *)(void *)&sentinel; /* must come back NULL */
    assert_int_equal(ws_task_new(&t, p, 2, v, &err), want);
    assert_null(t);
    assert_true(err.msg[0] != '\0');
}
