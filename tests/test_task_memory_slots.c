/* test_task_memory_slots.c — the memory task's slot worlds (tasks/memory_slots.h):
 * an exclusive relation whose symbol carries the marker id (the vocabulary's
 * last overflow id) and a plain one without it. Every instruction is replayed
 * into the rule's own bookkeeping — an entity holds one value of the exclusive
 * relation, so a new one makes the old one false; plain facts hold as told —
 * and every query's label and kind must agree with it. The places left (told
 * true once, false now, never told false) must be asked, or the worlds teach no
 * rule; a told query is tagged current, left or plain as the bookkeeping has
 * it. Worlds with and without the relation mix at exclusive_rate, steps tell
 * as often and as much as slot_active and slot_single say, and the same seed
 * gives the same bytes. Told-moves worlds (relational_rate) are the same worlds
 * with no id at all and every move told in full: replayed literally, no rule
 * applied, an entity never holds two values. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "task_rig.h"
#include "test_util.h"

enum { MAX_FACTS = 512 };

/* A fact of a slot world: (entity, relation, value) hashes, the relation's id. */
typedef struct {
    uint64_t h[3];
    int32_t rel_id;
    int excl; /* the exclusive relation (the one step 1 places every entity with) */
    int value, ever_true;
} slot_fact;

typedef struct {
    slot_fact f[MAX_FACTS];
    int n;
} facts;

static slot_fact read_fact(const rig *r, const ws_fact_list *l, int i)
{
    slot_fact f = {{0}, 0, 0, 0, 0};
    const int32_t *ids = l->ids + (long)i * r->b->S;
    const uint64_t *h = l->hash + (long)i * r->b->S;
    for (int j = 0; j < 3; j++) {
        assert_true(h[j] != 0);
        if (j != 1) assert_int_equal(ids[j], -1); /* only the relation may carry an id */
        f.h[j] = h[j];
    }
    assert_int_equal(h[3], 0); /* three symbols */
    f.rel_id = ids[1];
    return f;
}

static slot_fact *find(facts *t, const slot_fact *f)
{
    for (int i = 0; i < t->n; i++)
        if (!memcmp(t->f[i].h, f->h, sizeof f->h)) return &t->f[i];
    return NULL;
}

/* Tells f: with the rule, a new value of the exclusive relation makes the
 * entity's others false; without it, f alone changes. */
static void tell(facts *t, slot_fact f, int rule)
{
    if (f.value && f.excl && rule)
        for (int i = 0; i < t->n; i++)
            if (t->f[i].h[0] == f.h[0] && t->f[i].h[1] == f.h[1]) t->f[i].value = 0;
    slot_fact *old = find(t, &f);
    if (!old) {
        assert_true(t->n < MAX_FACTS);
        old = &t->f[t->n++];
        *old = f;
    }
    old->value = f.value;
    old->ever_true |= f.value;
}

/* How many values of the exclusive relation entity e holds. */
static int values_held(const facts *t, uint64_t e)
{
    int n = 0;
    for (int i = 0; i < t->n; i++) n += t->f[i].excl && t->f[i].h[0] == e && t->f[i].value;
    return n;
}

typedef struct {
    int worlds, slot_worlds, excl_q, plain_q, left_q, current_q, told_left;
    int later, active, single; /* steps after the first; those telling; telling one thing */
} tally;

/* A world of slot (the memory task's own worlds end it at step 1: test_tasks):
 * a marked slot world (its rule applied in the replay), or with told_moves a
 * told-moves world (no id; replayed literally, each entity holds at most one
 * value after every step). */
static void check_world(rig *r, int slot, uint64_t seed, int steps, int32_t marker, int told_moves,
                        tally *c)
{
    facts *t = calloc(1, sizeof *t);
    assert_non_null(t);
    assert_int_equal(ws_task_reset(r->t, slot, seed), WS_OK);
    int is_slot = -1;
    int32_t rel_id = told_moves ? -1 : marker;
    uint64_t excl = 0;
    for (int s = 1; s <= steps; s++) {
        rig_step(r, slot);
        int ni = ws_batch_n_instr(r->b);
        if (is_slot < 0) { /* a slot world places every entity at once */
            is_slot =
                r->b->S >= 4 && ni > 0 && r->b->instr.hash[3] == 0 && r->b->instr.ids[1] == rel_id;
            /* all of it (facts and questions) of three symbols, one relation
             * placing: the memory task's own worlds have 1 to 4 */
            excl = r->b->instr.hash[1];
            for (int i = 0; is_slot && i < ni; i++)
                is_slot = r->b->instr.hash[(long)i * r->b->S + 1] == excl;
            for (int q = 0; is_slot && q < ws_batch_n_query(r->b); q++)
                is_slot = r->b->query.hash[(long)q * r->b->S + 2] != 0 &&
                          r->b->query.hash[(long)q * r->b->S + 3] == 0;
            if (!is_slot) break;
            assert_true(ni >= 2 && ni <= 4);
        } else {
            c->later++;
            c->active += ni > 0;
            c->single += ni == 1;
        }
        for (int i = 0; i < ni; i++) {
            slot_fact f = read_fact(r, &r->b->instr, i);
            f.excl = f.h[1] == excl;
            assert_int_equal(f.rel_id, f.excl ? rel_id : -1);
            f.value = r->b->instr.value[i];
            c->told_left += f.excl && !f.value;
            tell(t, f, !told_moves);
        }
        if (told_moves)
            for (int i = 0; i < t->n; i++) assert_true(values_held(t, t->f[i].h[0]) <= 1);
        for (int q = 0; q < ws_batch_n_query(r->b); q++) {
            slot_fact f = read_fact(r, &r->b->query, q);
            f.excl = f.h[1] == excl;
            assert_int_equal(f.rel_id, f.excl ? rel_id : -1);
            const slot_fact *k = find(t, &f);
            int want = k && k->value;
            assert_int_equal(r->b->query.value[q], want);
            assert_int_equal(r->info[q].kind, k ? WS_QK_TOLD : WS_QK_UNTOLD);
            int what = !k             ? WS_QS_NONE
                       : !f.excl      ? WS_QS_PLAIN
                       : want         ? WS_QS_CURRENT
                       : k->ever_true ? WS_QS_LEFT
                                      : WS_QS_NONE;
            assert_int_equal(r->info[q].slot, what);
            c->excl_q += f.excl;
            c->plain_q += !f.excl;
            c->left_q += k && f.excl && k->ever_true && !k->value;
            c->current_q += want && f.excl;
        }
    }
    c->worlds++;
    c->slot_worlds += is_slot == 1;
    free(t);
}

/* 40 worlds of a task whose worlds are all slot worlds (told_moves: all
 * told-moves worlds), 30 steps each, every one checked; both relations asked
 * alike, the values held and left asked often. */
static tally forty_worlds(const ws_task_params *p, int told_moves, uint64_t seed, const char *what)
{
    rig r;
    rig_open(&r, p, 2);
    int32_t marker = ws_vocab_capacity(r.v) + ws_vocab_n_overflow(r.v) - 1;
    tally c = {0};
    for (int w = 0; w < 40; w++)
        check_world(&r, w % 2, seed + (uint64_t)w, 30, marker, told_moves, &c);
    printf("%s: %d of %d; %d values told left; queries: %d exclusive (%d current, %d left), %d "
           "plain\n",
           what, c.slot_worlds, c.worlds, c.told_left, c.excl_q, c.current_q, c.left_q, c.plain_q);
    assert_int_equal(c.slot_worlds, c.worlds);
    assert_true(c.excl_q > c.plain_q / 2 && c.plain_q > c.excl_q / 2);
    assert_true(c.left_q > c.excl_q / 10 && c.current_q > c.excl_q / 4);
    rig_close(&r);
    return c;
}

static void test_slot_worlds(void **state)
{
    (void)state;
    ws_task_params p = rig_params("memory");
    p.exclusive_rate = 1.0f;
    forty_worlds(&p, 0, 100, "slot worlds");

    /* Half the worlds at 0.5; none at 0 (the default). */
    p.exclusive_rate = 0.5f;
    rig r;
    rig_open(&r, &p, 1);
    int32_t marker = ws_vocab_capacity(r.v) + ws_vocab_n_overflow(r.v) - 1;
    tally c = {0};
    for (int w = 0; w < 200; w++) check_world(&r, 0, 7000 + (uint64_t)w, 1, marker, 0, &c);
    assert_true(c.slot_worlds > 60 && c.slot_worlds < 140);
    rig_close(&r);
}

/* relational_rate: worlds whose moves are told in full, without the marker;
 * beside the marked ones, each kind at its rate. */
static void test_told_moves_worlds(void **state)
{
    (void)state;
    ws_task_params p = rig_params("memory");
    p.relational_rate = 1.0f;
    tally c = forty_worlds(&p, 1, 300, "told-moves worlds");
    assert_true(c.told_left > c.worlds * 5); /* moves tell the value left */

    /* Marked worlds at exclusive_rate, told-moves worlds at relational_rate of
     * the rest, the memory task's own worlds after them. */
    p.exclusive_rate = 0.4f;
    p.relational_rate = 0.5f;
    rig r;
    rig_open(&r, &p, 1);
    int32_t marker = ws_vocab_capacity(r.v) + ws_vocab_n_overflow(r.v) - 1;
    tally marked = {0}, told = {0};
    for (int w = 0; w < 300; w++) {
        check_world(&r, 0, 8000 + (uint64_t)w, 1, marker, 0, &marked);
        check_world(&r, 0, 8000 + (uint64_t)w, 1, marker, 1, &told);
    }
    printf("exclusive_rate 0.4, relational_rate 0.5: %d marked, %d told-moves of %d worlds\n",
           marked.slot_worlds, told.slot_worlds, marked.worlds);
    assert_true(marked.slot_worlds > 90 && marked.slot_worlds < 150); /* 120 */
    assert_true(told.slot_worlds > 60 && told.slot_worlds < 120);     /* 90 */
    rig_close(&r);
}

/* slot_active: how often a later step tells; slot_single: how often a telling
 * step tells one thing (else 1..instr_per_step things, as by default). */
static void test_slot_worlds_calm(void **state)
{
    (void)state;
    ws_task_params p = rig_params("memory");
    p.exclusive_rate = 1.0f;
    struct {
        float active, single;
        double lo_active, hi_active, lo_single;
    } cases[] = {{0.8f, 0.0f, 0.72, 0.88, 0.0}, /* the defaults */
                 {0.6f, 0.7f, 0.52, 0.68, 0.7},
                 {0.0f, 0.0f, 0.0, 0.0, 0.0},
                 {1.0f, 1.0f, 1.0, 1.0, 1.0}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        p.slot_active = cases[k].active;
        p.slot_single = cases[k].single;
        rig r;
        rig_open(&r, &p, 1);
        int32_t marker = ws_vocab_capacity(r.v) + ws_vocab_n_overflow(r.v) - 1;
        tally c = {0};
        for (int w = 0; w < 60; w++) check_world(&r, 0, 900 + (uint64_t)w, 30, marker, 0, &c);
        double active = (double)c.active / c.later;
        double single = c.active ? (double)c.single / c.active : 0;
        printf("slot_active %.1f slot_single %.1f: %.3f of later steps tell, %.3f of those one "
               "thing\n",
               cases[k].active, cases[k].single, active, single);
        assert_true(active >= cases[k].lo_active && active <= cases[k].hi_active);
        assert_true(single >= cases[k].lo_single);
        if (cases[k].single == 0.0f && cases[k].active > 0) assert_true(single < 0.6);
        rig_close(&r);
    }
}

static void test_slot_worlds_repeat(void **state)
{
    (void)state;
    ws_task_params p = rig_params("memory");
    p.exclusive_rate = 0.5f;
    rig a, b;
    rig_open(&a, &p, 3);
    rig_open(&b, &p, 1);
    for (int w = 0; w < 6; w++) {
        assert_int_equal(ws_task_reset(a.t, w % 3, 40 + (uint64_t)w), WS_OK);
        assert_int_equal(ws_task_reset(b.t, 0, 40 + (uint64_t)w), WS_OK);
        for (int s = 0; s < 12; s++) {
            rig_blob x = {0}, y = {0};
            rig_step(&a, w % 3);
            rig_step(&b, 0);
            rig_snapshot(&a, &x);
            rig_snapshot(&b, &y);
            assert_int_equal(x.n, y.n);
            assert_memory_equal(x.p, y.p, x.n);
            free(x.p);
            free(y.p);
        }
    }
    rig_close(&a);
    rig_close(&b);
}

static void test_slot_worlds_refused(void **state)
{
    (void)state;
    ws_task_params p = rig_params("memory");
    p.exclusive_rate = 1.5f;
    ws_vocab *v;
    assert_int_equal(ws_vocab_new(&v, 64, 4), WS_OK);
    rig_expect_new_fails(&p, v, WS_ERR_INVALID);
    p.exclusive_rate = -0.1f;
    rig_expect_new_fails(&p, v, WS_ERR_INVALID);
    p.exclusive_rate = 0.5f;
    p.slot_active = 1.5f;
    rig_expect_new_fails(&p, v, WS_ERR_INVALID);
    p.slot_active = 0.8f;
    p.slot_single = -0.1f;
    rig_expect_new_fails(&p, v, WS_ERR_INVALID);
    p.slot_single = 0.0f;
    p.relational_rate = 1.5f;
    rig_expect_new_fails(&p, v, WS_ERR_INVALID);
    ws_vocab_free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slot_worlds), cmocka_unit_test(test_told_moves_worlds),
        cmocka_unit_test(test_slot_worlds_calm), cmocka_unit_test(test_slot_worlds_repeat),
        cmocka_unit_test(test_slot_worlds_refused)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
