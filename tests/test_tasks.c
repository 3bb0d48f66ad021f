/* test_tasks.c — the built-in task generators: determinism, and each world
 * checked against an independent replay of what it told (recall's bit, facts'
 * moves, conj's conjunctions, memory's facts and chatter, life's rule plus
 * interventions), and the Game of Life rule on known patterns. The numbers task
 * and its IDX reader: test_task_numbers.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/tasks/life.h"
#include "task_rig.h"
#include "test_util.h"

/* ---- the interface --------------------------------------------------------- */

static void test_defaults(void **state)
{
    (void)state;
    ws_task_params p;
    assert_false(ws_task_params_default("chess", &p));
    assert_false(ws_task_params_default(NULL, &p));
    p = rig_params("recall");
    assert_string_equal(p.name, "recall");
    assert_int_equal(p.thorough, 1);
    assert_int_equal(p.horizon, 8);
    p = rig_params("facts");
    assert_int_equal(p.entities, 4);
    assert_int_equal(p.places, 4);
    assert_true(p.move_rate == 1.0f);
    assert_int_equal(p.query_sample, 0);
    p = rig_params("life");
    assert_true(p.density == 0.35f && p.intervention_rate == 2.0f);
    p = rig_params("numbers");
    assert_int_equal(p.images, 3);
    assert_int_equal(p.max_told, 75);
    assert_int_equal(p.max_told_first, 500);
    assert_int_equal(p.n_queries, 75);
    assert_int_equal(p.test_split, 0);
    assert_string_equal(p.data_dir, MNIST_DIR);

    const char *names[] = {"recall", "facts", "life"};
    const int maxq[] = {4, 16, 64}, nb[] = {0, 0, 2};
    for (int i = 0; i < 3; i++) {
        rig r;
        p = rig_params(names[i]);
        rig_open(&r, &p, 1);
        assert_int_equal(ws_task_max_queries(r.t), maxq[i]);
        assert_int_equal(ws_task_n_baselines(r.t), nb[i]);
        assert_int_equal(ws_task_max_fact_len(r.t), 2);
        assert_string_equal(ws_task_params_of(r.t)->name, names[i]);
        assert_null(ws_task_baseline_name(r.t, nb[i]));
        if (nb[i]) {
            assert_string_equal(ws_task_baseline_name(r.t, 0), "all dead");
            assert_string_equal(ws_task_baseline_name(r.t, 1), "copy previous");
        }
        rig_close(&r);
    }
}

static void test_rejects(void **state)
{
    (void)state;
    ws_vocab *v;
    assert_int_equal(ws_vocab_new(&v, 4096, 16), WS_OK);
    ws_task_params p = rig_params("facts");
    p.name = "chess";
    rig_expect_new_fails(&p, v, WS_ERR_INVALID);
    p = rig_params("facts");
    p.places = 1;
    rig_expect_new_fails(&p, v, WS_ERR_INVALID);
    p = rig_params("facts");
    p.query_sample = 17;
    rig_expect_new_fails(&p, v, WS_ERR_INVALID);
    p = rig_params("facts");
    p.move_rate = NAN;
    rig_expect_new_fails(&p, v, WS_ERR_INVALID);
    p = rig_params("life");
    p.density = 1.5f;
    rig_expect_new_fails(&p, v, WS_ERR_INVALID);
    p = rig_params("life");
    p.intervention_rate = -1;
    rig_expect_new_fails(&p, v, WS_ERR_INVALID);
    p = rig_params("recall");
    p.thorough = 0, p.horizon = 0;
    rig_expect_new_fails(&p, v, WS_ERR_INVALID);
    p = rig_params("numbers");
    p.images = 0;
    rig_expect_new_fails(&p, v, WS_ERR_INVALID);
    ws_error err = {0};
    ws_task *t;
    assert_int_equal(ws_task_new(&t, &p, 0, v, &err), WS_ERR_INVALID);
    ws_vocab_free(v);

    /* A vocabulary too small for the task's symbols. */
    assert_int_equal(ws_vocab_new(&v, 5, 16), WS_OK);
    p = rig_params("life");
    rig_expect_new_fails(&p, v, WS_ERR_INVALID);
    ws_vocab_free(v);
}

/* Refused steps change nothing: the world does not advance. */
static void test_step_refusals(void **state)
{
    (void)state;
    rig r;
    ws_error err = {0};
    ws_task_params p = rig_params("life");
    rig_open(&r, &p, 2);
    assert_int_equal(ws_task_reset(r.t, 2, 1), WS_ERR_INVALID);
    assert_int_equal(ws_task_steps(r.t, 2), -1);
    assert_int_equal(ws_batch_begin_traj(r.b, 1), WS_OK);
    assert_int_equal(ws_task_step(r.t, 0, r.b, r.info, &err), WS_ERR_INVALID); /* never reset */
    assert_int_equal(ws_task_reset(r.t, 0, 7), WS_OK);
    ws_batch_clear(r.b);
    assert_int_equal(ws_task_step(r.t, 0, r.b, r.info, &err), WS_ERR_INVALID); /* no trajectory */
    assert_int_equal(ws_task_steps(r.t, 0), 0);

    /* A model whose facts hold one symbol cannot take (row, col). */
    ws_model_config c = ws_model_config_default();
    c.max_fact_len = 1;
    ws_batch *small;
    assert_int_equal(ws_batch_new(&small, &c), WS_OK);
    assert_int_equal(ws_batch_begin_traj(small, 1), WS_OK);
    assert_int_equal(ws_task_step(r.t, 0, small, r.info, &err), WS_ERR_INVALID);
    assert_non_null(strstr(err.msg, "max_fact_len"));
    assert_int_equal(ws_task_steps(r.t, 0), 0);
    assert_int_equal(ws_batch_n_instr(small), 0);
    ws_batch_free(small);

    /* ... and after the refusals the world is the one a fresh slot gives. */
    rig_blob a = {0}, b = {0};
    rig_step(&r, 0);
    rig_snapshot(&r, &a);
    assert_int_equal(ws_task_reset(r.t, 1, 7), WS_OK);
    rig_step(&r, 1);
    rig_snapshot(&r, &b);
    assert_int_equal(a.n, b.n);
    assert_memory_equal(a.p, b.p, a.n);
    free(a.p);
    free(b.p);
    rig_close(&r);
}

/* Same seed: identical batches, whichever slot or task object, with other slots
 * stepped in between; another seed: different batches. */
static void check_determinism(ws_task_params p, int steps)
{
    rig r1, r2;
    rig_open(&r1, &p, 3);
    rig_open(&r2, &p, 1);
    rig_blob a = {0}, b = {0}, c = {0}, d = {0};
    assert_int_equal(ws_task_reset(r1.t, 0, 42), WS_OK);
    assert_int_equal(ws_task_reset(r1.t, 1, 43), WS_OK);
    assert_int_equal(ws_task_reset(r1.t, 2, 42), WS_OK);
    assert_int_equal(ws_task_reset(r2.t, 0, 42), WS_OK);
    for (int s = 0; s < steps; s++) {
        rig_step(&r1, 0), rig_snapshot(&r1, &a);
        rig_step(&r1, 1), rig_snapshot(&r1, &c);
        rig_step(&r2, 0), rig_snapshot(&r2, &b);
    }
    for (int s = 0; s < steps; s++) rig_step(&r1, 2), rig_snapshot(&r1, &d);
    assert_int_equal(ws_task_steps(r1.t, 2), steps);
    assert_int_equal(a.n, b.n);
    assert_memory_equal(a.p, b.p, a.n);
    assert_int_equal(a.n, d.n);
    assert_memory_equal(a.p, d.p, a.n);
    assert_true(a.n != c.n || memcmp(a.p, c.p, a.n) != 0);
    free(a.p), free(b.p), free(c.p), free(d.p);
    rig_close(&r1);
    rig_close(&r2);
}

static void test_determinism(void **state)
{
    (void)state;
    check_determinism(rig_params("recall"), 12);
    ws_task_params p = rig_params("facts");
    check_determinism(p, 12);
    p.query_sample = 5;
    check_determinism(p, 12);
    check_determinism(rig_params("life"), 12);
    check_determinism(rig_params("conj"), 12);
    check_determinism(rig_params("memory"), 40);
}

/* ---- recall ------------------------------------------------------------------ */

/* Runs a recall world for `steps` steps checking every step; returns its bit. */
static int check_recall_world(rig *r, uint64_t seed, int steps, int thorough, int horizon)
{
    assert_int_equal(ws_task_reset(r->t, 0, seed), WS_OK);
    int bit = -1;
    for (int s = 1; s <= steps; s++) {
        rig_step(r, 0);
        int ni = ws_batch_n_instr(r->b), nq = ws_batch_n_query(r->b), first = 0;
        if (s == 1) {
            const int32_t *ids = rig_instr_ids(r, 0);
            assert_int_equal(rig_n_ids(r, ids), 1);
            assert_true(rig_is_sym(r, ids[0], "target"));
            bit = r->b->instr.value[0];
            first = 1;
        }
        /* The distractors: three distinct ("input", token) told, each repeated. */
        assert_int_equal(ni - first, 3);
        int asks = thorough || s == horizon;
        assert_int_equal(nq, 3 + asks);
        for (int i = 0; i < 3; i++) {
            const int32_t *in = rig_instr_ids(r, first + i), *q = rig_query_ids(r, i);
            assert_int_equal(rig_n_ids(r, in), 2);
            assert_true(rig_is_sym(r, in[0], "input"));
            assert_true(rig_sym_num(r, in[1], "i") < 8);
            for (int j = 0; j < i; j++) assert_int_not_equal(in[1], rig_instr_ids(r, first + j)[1]);
            assert_memory_equal(q, in, 2 * sizeof *q);
            assert_int_equal(r->b->query.value[i], r->b->instr.value[first + i]);
            assert_int_equal(r->info[i].kind, WS_QK_PLAIN);
            assert_int_equal(r->info[i].group, -1);
        }
        if (asks) {
            assert_true(rig_is_sym(r, rig_query_ids(r, 3)[0], "target"));
            assert_int_equal(rig_n_ids(r, rig_query_ids(r, 3)), 1);
            assert_int_equal(r->b->query.value[3], bit);
            assert_int_equal(r->info[3].kind, WS_QK_RECALL);
        }
    }
    return bit;
}

static void test_recall(void **state)
{
    (void)state;
    rig r;
    ws_task_params p = rig_params("recall");
    rig_open(&r, &p, 1);
    int ones = 0;
    for (uint64_t seed = 1; seed <= 40; seed++) ones += check_recall_world(&r, seed, 10, 1, 8);
    assert_true(ones > 5 && ones < 35); /* a fair coin, not a constant */
    rig_close(&r);

    p.thorough = 0, p.horizon = 5;
    rig_open(&r, &p, 1);
    for (uint64_t seed = 1; seed <= 10; seed++) check_recall_world(&r, seed, 9, 0, 5);
    rig_close(&r);
}

/* ---- facts ------------------------------------------------------------------- */

/* Replays every instruction into a table of last-told values and checks that
 * each label is the last value told about its fact (0 if never told), that
 * moves tell (e, new) = 1 then (e, old) = 0, and one place per entity. */
static void check_facts(ws_task_params p, int steps, uint64_t seed)
{
    rig r;
    rig_open(&r, &p, 1);
    int E = p.entities, P = p.places, moved = 0;
    int *told = calloc((size_t)(E * P), sizeof *told), *asked = malloc((size_t)(E * P) * sizeof *asked);
    assert_true(told && asked);
    assert_int_equal(ws_task_reset(r.t, 0, seed), WS_OK);
    for (int s = 1; s <= steps; s++) {
        rig_step(&r, 0);
        int ni = ws_batch_n_instr(r.b), nq = ws_batch_n_query(r.b);
        if (s == 1) assert_int_equal(ni, E);
        else assert_int_equal(ni % 2, 0);
        for (int i = 0; i < ni; i++) {
            const int32_t *ids = rig_instr_ids(&r, i);
            assert_int_equal(rig_n_ids(&r, ids), 2);
            int e = rig_sym_num(&r, ids[0], "e"), pl = rig_sym_num(&r, ids[1], "p"), v = r.b->instr.value[i];
            assert_true(e < E && pl < P);
            if (s == 1) {
                assert_int_equal(v, 1);
            } else if (i % 2 == 0) { /* a move: to a new place, then away from the old */
                const int32_t *away = rig_instr_ids(&r, i + 1);
                assert_int_equal(v, 1);
                assert_int_equal(told[e * P + pl], 0);
                assert_int_equal(away[0], ids[0]);
                assert_int_equal(r.b->instr.value[i + 1], 0);
                assert_int_equal(told[e * P + rig_sym_num(&r, away[1], "p")], 1);
                moved++;
            }
            told[e * P + pl] = v;
        }
        memset(asked, 0, (size_t)(E * P) * sizeof *asked);
        assert_int_equal(nq, p.query_sample ? p.query_sample : E * P);
        for (int i = 0; i < nq; i++) {
            const int32_t *ids = rig_query_ids(&r, i);
            int e = rig_sym_num(&r, ids[0], "e"), pl = rig_sym_num(&r, ids[1], "p");
            assert_int_equal(asked[e * P + pl]++, 0); /* distinct pairs */
            assert_int_equal(r.b->query.value[i], told[e * P + pl]);
            assert_int_equal(r.info[i].kind, WS_QK_PLAIN);
            assert_int_equal(r.info[i].group, p.query_sample ? -1 : e);
        }
        for (int e = 0; e < E; e++) {
            int places = 0;
            for (int pl = 0; pl < P; pl++) places += told[e * P + pl];
            assert_int_equal(places, 1);
        }
    }
    /* About move_rate moves a step (Poisson), capped at E. */
    assert_true(moved > (steps - 1) * p.move_rate / 3 && moved < (steps - 1) * p.move_rate * 3);
    free(told);
    free(asked);
    rig_close(&r);
}

static void test_facts(void **state)
{
    (void)state;
    ws_task_params p = rig_params("facts");
    check_facts(p, 60, 1);
    p.entities = p.places = 8;
    p.move_rate = 2.0f;
    check_facts(p, 60, 2);
    p.query_sample = 20;
    check_facts(p, 60, 3);
}

/* ---- conj -------------------------------------------------------------------- */

/* Replays holds (agent, key) and opens (key, box) into tables of last-told
 * values and checks that every label is the conjunction "some key k with
 * holds(a, k) and opens(k, x)", that each agent holds one key and each key
 * opens one box, that moves tell (s, new) = 1 then (s, old) = 0, and that the
 * queries are every (agent, box) pair grouped by agent. */
static void check_conj(ws_task_params p, int steps, uint64_t seed)
{
    rig r;
    rig_open(&r, &p, 1);
    int A = p.entities, P = p.places, moved = 0, positives = 0;
    int *holds = calloc((size_t)(A * P), sizeof *holds);
    int *opens = calloc((size_t)(P * P), sizeof *opens);
    assert_true(holds && opens);
    assert_int_equal(ws_task_reset(r.t, 0, seed), WS_OK);
    for (int s = 1; s <= steps; s++) {
        rig_step(&r, 0);
        int ni = ws_batch_n_instr(r.b), nq = ws_batch_n_query(r.b);
        assert_int_equal(ni % (s == 1 ? 1 : 2), 0);
        if (s == 1) assert_int_equal(ni, A + P);
        for (int i = 0; i < ni; i++) {
            const int32_t *ids = rig_instr_ids(&r, i);
            assert_int_equal(rig_n_ids(&r, ids), 2);
            int agent = ws_vocab_symbol(r.v, ids[0])[0] == 'a', v = r.b->instr.value[i];
            int subj = rig_sym_num(&r, ids[0], agent ? "a" : "k");
            int obj = rig_sym_num(&r, ids[1], agent ? "k" : "x");
            int *cell = agent ? &holds[subj * P + obj] : &opens[subj * P + obj];
            if (s == 1) {
                assert_int_equal(v, 1);
            } else if (i % 2 == 0) { /* a move: to a new key/box, then away from the old */
                const int32_t *away = rig_instr_ids(&r, i + 1);
                assert_int_equal(v, 1);
                assert_int_equal(*cell, 0);
                assert_int_equal(away[0], ids[0]);
                assert_int_equal(r.b->instr.value[i + 1], 0);
                int old = rig_sym_num(&r, away[1], agent ? "k" : "x");
                assert_int_equal(agent ? holds[subj * P + old] : opens[subj * P + old], 1);
                moved++;
            }
            *cell = v;
        }
        for (int a = 0; a < A; a++) {
            int n = 0;
            for (int k = 0; k < P; k++) n += holds[a * P + k];
            assert_int_equal(n, 1);
        }
        for (int k = 0; k < P; k++) {
            int n = 0;
            for (int x = 0; x < P; x++) n += opens[k * P + x];
            assert_int_equal(n, 1);
        }
        assert_int_equal(nq, A * P);
        for (int i = 0; i < nq; i++) {
            const int32_t *ids = rig_query_ids(&r, i);
            int a = rig_sym_num(&r, ids[0], "a"), x = rig_sym_num(&r, ids[1], "x"), want = 0;
            assert_int_equal(a * P + x, i); /* every pair, agent-major */
            for (int k = 0; k < P; k++) want |= holds[a * P + k] && opens[k * P + x];
            assert_int_equal(r.b->query.value[i], want);
            assert_int_equal(r.info[i].kind, WS_QK_PLAIN);
            assert_int_equal(r.info[i].group, a);
            positives += want;
        }
    }
    assert_int_equal(positives, steps * A); /* one box per agent */
    /* About move_rate moves a step (Poisson), capped at A + P. */
    assert_true(moved > (steps - 1) * p.move_rate / 3 && moved < (steps - 1) * p.move_rate * 3);
    free(holds);
    free(opens);
    rig_close(&r);
}

/* ---- memory -------------------------------------------------------------------- */

/* A fact as the batch holds it: its symbols' hashes (every symbol id -1). */
typedef struct {
    int arity, value;
    uint64_t h[4];
    int asked; /* a symbol of it is in some query of its world */
} mem_told;

static int fact_of(const rig *r, const ws_fact_list *f, int i, mem_told *out)
{
    memset(out, 0, sizeof *out);
    for (int j = 0; j < r->b->S; j++) {
        int32_t id = f->ids[(long)i * r->b->S + j];
        uint64_t h = f->hash[(long)i * r->b->S + j];
        assert_int_equal(id, -1); /* fresh symbols: no vocabulary id */
        if (!h) break;
        assert_true(j < 4);
        out->h[out->arity++] = h;
    }
    return out->arity;
}

static mem_told *find_told(mem_told *t, int n, const mem_told *f)
{
    for (int i = 0; i < n; i++)
        if (t[i].arity == f->arity && !memcmp(t[i].h, f->h, sizeof f->h)) return &t[i];
    return NULL;
}

/* Marks the facts of told[first, n) that share a symbol with query fact f. */
static void mark_asked(mem_told *told, int first, int n, const mem_told *f)
{
    for (int w = first; w < n; w++)
        for (int j = 0; j < told[w].arity; j++)
            for (int k = 0; k < f->arity; k++) told[w].asked |= told[w].h[j] == f->h[k];
}

/* Replays every instruction into a table of last-told values and checks each
 * query's label and kind against it; counts what the task is meant to produce.
 * Chatter facts are told facts none of whose symbols is ever in a query (every
 * pool symbol is, over the steps these checks run). */
static void check_memory(ws_task_params p, int steps, uint64_t seed, int n_slots)
{
    rig r;
    rig_open(&r, &p, n_slots);
    int cap = 4096, n = 0, overrides = 0, hard = 0, told_q = 0, untold_q = 0, silent = 0;
    int chatter = 0;
    mem_told *told = calloc((size_t)cap, sizeof *told);
    assert_non_null(told);
    for (int slot = 0; slot < n_slots; slot++) {
        assert_int_equal(ws_task_reset(r.t, slot, seed + (uint64_t)slot), WS_OK);
        int first = n; /* this world's facts start here: no symbol is shared across worlds */
        for (int s = 1; s <= steps; s++) {
            rig_step(&r, slot);
            int ni = ws_batch_n_instr(r.b), nq = ws_batch_n_query(r.b);
            silent += ni == 0;
            assert_true(ni <= p.instr_per_step + (p.chatter_rate > 0));
            for (int i = 0; i < ni; i++) {
                mem_told f;
                assert_true(fact_of(&r, &r.b->instr, i, &f) >= 1);
                assert_true(f.arity <= p.max_arity);
                for (int j = 0; j < i; j++) { /* one instruction per fact and step */
                    mem_told g;
                    fact_of(&r, &r.b->instr, j, &g);
                    assert_false(g.arity == f.arity && !memcmp(g.h, f.h, sizeof f.h));
                }
                f.value = r.b->instr.value[i];
                mem_told *t = find_told(told + first, n - first, &f);
                if (t) {
                    overrides += t->value == 1 && f.value == 0;
                    t->value = f.value;
                } else {
                    for (int w = 0; w < first; w++)
                        for (int j = 0; j < f.arity; j++)
                            for (int k = 0; k < told[w].arity; k++)
                                assert_true(told[w].h[k] != f.h[j]);
                    assert_true(n < cap);
                    told[n++] = f;
                }
            }
            assert_int_equal(nq, p.n_queries);
            for (int q = 0; q < nq; q++) {
                mem_told f;
                assert_true(fact_of(&r, &r.b->query, q, &f) >= 1);
                const mem_told *t = find_told(told + first, n - first, &f);
                assert_int_equal(r.b->query.value[q], t ? t->value : 0);
                assert_int_equal(r.info[q].kind, t ? WS_QK_TOLD : WS_QK_UNTOLD);
                assert_int_equal(r.info[q].group, -1);
                mark_asked(told, first, n, &f);
                told_q += t != NULL;
                untold_q += t == NULL;
                /* a never-told tuple made of told symbols: a distractor */
                if (!t)
                    for (int w = first; w < n && !hard; w++)
                        for (int j = 0; j < told[w].arity; j++) hard |= told[w].h[j] == f.h[0];
            }
        }
        int unasked = 0;
        for (int w = first; w < n; w++) unasked += !told[w].asked;
        chatter += unasked;
        assert_true(n - first - unasked >= p.live_facts_min &&
                    n - first - unasked <= p.live_facts);
    }
    printf("memory: %d facts (%d chatter), %d overrides, %d told / %d never-told queries, "
           "%d silent steps\n",
           n, chatter, overrides, told_q, untold_q, silent);
    assert_true(overrides > 0 && hard);
    /* chatter at rate 1 leaves few steps silent; without it a world falls quiet */
    assert_true(p.chatter_rate > 0 ? chatter > steps / 4 : chatter == 0 && silent > 0);
    assert_true(told_q > untold_q / 2 && untold_q > told_q / 2);
    free(told);
    rig_close(&r);
}

static void test_memory(void **state)
{
    (void)state;
    ws_task_params p = rig_params("memory");
    check_memory(p, 200, 5, 4);
    p.live_facts = p.live_facts_min = 8;
    p.max_arity = 2;
    p.instr_per_step = 1;
    p.override_rate = 0.5f;
    p.active_rate = 1.0f;
    check_memory(p, 100, 9, 3);
    p = rig_params("memory");
    p.chatter_rate = 1.0f;
    check_memory(p, 200, 11, 4);
}

static void test_conj(void **state)
{
    (void)state;
    ws_task_params p = rig_params("conj");
    check_conj(p, 60, 1);
    p.entities = 6, p.places = 3, p.move_rate = 2.0f;
    check_conj(p, 60, 2);
}

/* ---- life -------------------------------------------------------------------- */

static uint64_t board_of(const int (*cells)[2], int n, int dr, int dc)
{
    uint64_t b = 0;
    for (int i = 0; i < n; i++) {
        int r = (cells[i][0] + dr + 8) % 8, c = (cells[i][1] + dc + 8) % 8;
        b |= 1ULL << (r * 8 + c);
    }
    return b;
}

static uint64_t generations(uint64_t b, int n)
{
    while (n--) b = ws_task_life_next(b);
    return b;
}

static void test_life_rule(void **state)
{
    (void)state;
    assert_true(ws_task_life_next(0) == 0);
    /* Blinker: period 2, also when it straddles the corner of the torus. */
    const int blinker_h[3][2] = {{3, 2}, {3, 3}, {3, 4}}, blinker_v[3][2] = {{2, 3}, {3, 3}, {4, 3}};
    for (int shift = 0; shift < 8; shift += 4) {
        uint64_t h = board_of(blinker_h, 3, shift + 4, shift + 4), v = board_of(blinker_v, 3, shift + 4, shift + 4);
        assert_true(ws_task_life_next(h) == v);
        assert_true(ws_task_life_next(v) == h);
    }
    /* Block: still life, in the middle and split over all four corners. */
    const int block[4][2] = {{0, 0}, {0, 1}, {1, 0}, {1, 1}};
    for (int dr = 3; dr <= 7; dr += 4) {
        uint64_t b = board_of(block, 4, dr, dr);
        assert_true(ws_task_life_next(b) == b);
    }
    /* Glider: after 4 generations the same shape one cell down and right; it
     * wraps around the edge, and after 32 it is back where it started. */
    const int glider[5][2] = {{0, 1}, {1, 2}, {2, 0}, {2, 1}, {2, 2}};
    uint64_t g = board_of(glider, 5, 0, 0);
    for (int k = 1; k <= 8; k++) {
        uint64_t moved = generations(g, 4 * k);
        assert_true(moved == board_of(glider, 5, k, k));
        assert_true(__builtin_popcountll(moved) == 5);
    }
    assert_true(generations(g, 32) == g);
    /* Crossing the edge: at k = 6 the glider occupies rows 6, 7 and 0. */
    assert_true(generations(g, 24) & (1ULL << (0 * 8 + 6)));
}

/* Each step's labels are GoL(previous labels) with the told interventions
 * applied; the told values are the resulting cells; baselines as documented. */
static void check_life(ws_task_params p, int steps, uint64_t seed, int *interventions)
{
    rig r;
    rig_open(&r, &p, 1);
    assert_int_equal(ws_task_reset(r.t, 0, seed), WS_OK);
    uint64_t prev = 0;
    *interventions = 0;
    for (int s = 1; s <= steps; s++) {
        rig_step(&r, 0);
        int ni = ws_batch_n_instr(r.b);
        assert_int_equal(ws_batch_n_query(r.b), 64);
        if (s == 1) assert_int_equal(ni, 64);
        else *interventions += ni;
        uint64_t expect = s == 1 ? 0 : ws_task_life_next(prev), copy = prev, mask = 0;
        for (int i = 0; i < ni; i++) {
            const int32_t *ids = rig_instr_ids(&r, i);
            int cell = rig_sym_num(&r, ids[0], "r") * 8 + rig_sym_num(&r, ids[1], "c");
            uint64_t bit = 1ULL << cell;
            assert_false(mask & bit); /* distinct cells */
            mask |= bit;
            int v = r.b->instr.value[i];
            expect = v ? expect | bit : expect & ~bit;
            copy = v ? copy | bit : copy & ~bit;
        }
        uint64_t board = 0;
        for (int i = 0; i < 64; i++) {
            const int32_t *ids = rig_query_ids(&r, i);
            assert_int_equal(rig_sym_num(&r, ids[0], "r"), i / 8);
            assert_int_equal(rig_sym_num(&r, ids[1], "c"), i % 8);
            if (r.b->query.value[i]) board |= 1ULL << i;
            assert_int_equal(r.info[i].kind, WS_QK_PLAIN);
            assert_int_equal(r.info[i].group, -1);
            assert_true(r.info[i].baseline[0] == 0.0f);
            assert_true(r.info[i].baseline[1] == (float)((copy >> i) & 1));
        }
        assert_true(board == expect);
        prev = board;
    }
    rig_close(&r);
}

static void test_life(void **state)
{
    (void)state;
    ws_task_params p = rig_params("life");
    int n;
    check_life(p, 50, 5, &n);
    assert_true(n > 49 * 2 / 3 && n < 49 * 2 * 3);
    p.intervention_rate = 6.0f, p.density = 0.5f;
    check_life(p, 30, 6, &n);
    assert_true(n > 29 * 6 / 3);
    p.intervention_rate = 0.0f;
    check_life(p, 20, 7, &n);
    assert_int_equal(n, 0);
}


static void test_dynamics_need_update(void **state)
{
    (void)state;
    const char *names[] = {"life", "numbers", "memory", "recall"};
    for (int i = 0; i < 4; i++) {
        ws_task_params p = rig_params(names[i]);
        if (i == 1 && access(p.data_dir, R_OK) != 0) continue; /* dataset not installed */
        rig r;
        rig_open(&r, &p, 1);
        ws_model_config c = ws_model_config_default();
        ws_error err = {0};
        assert_int_equal(c.empty_steps, WS_EMPTY_HOLD);
        ws_status want = i < 2 ? WS_ERR_INVALID : WS_OK;
        assert_int_equal(ws_task_check_model(r.t, &c, &err), want);
        if (want != WS_OK) assert_non_null(strstr(err.msg, "--empty-steps update"));
        c.empty_steps = WS_EMPTY_UPDATE;
        assert_int_equal(ws_task_check_model(r.t, &c, &err), WS_OK);
        rig_close(&r);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),     cmocka_unit_test(test_rejects),
        cmocka_unit_test(test_step_refusals), cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_recall),       cmocka_unit_test(test_facts),
        cmocka_unit_test(test_conj),         cmocka_unit_test(test_memory),
        cmocka_unit_test(test_life_rule),    cmocka_unit_test(test_life),
        cmocka_unit_test(test_dynamics_need_update),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
