/* test_tasks.c — the built-in task generators: determinism, and each world
 * checked against an independent replay of what it told (recall's bit, facts'
 * moves, conj's conjunctions, life's rule plus interventions, numbers' images
 * and rotating classes), the Game of Life rule on known patterns, and the IDX
 * reader on the real Fashion-MNIST files and on damaged ones. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "model/batch.h"
#include "model/model.h"
#include "model/tasks/life.h"
#include "model/tasks/mnist.h"
#include "model/tasks/task.h"
#include "test_util.h"

#define MNIST_DIR "/usr/share/datasets/fashion-mnist"

static void check(ws_status st, const ws_error *err)
{
    if (st != WS_OK) fail_msg("%s: %s", ws_status_name(st), err->msg);
}

/* A vocabulary and a batch for a default model (S = 4), and one task. */
typedef struct {
    ws_vocab *v;
    ws_batch *b;
    ws_task *t;
    ws_query_info *info;
} rig;

static ws_task_params params(const char *name)
{
    ws_task_params p;
    assert_true(ws_task_params_default(name, &p));
    return p;
}

static void rig_open(rig *r, const ws_task_params *p, int n_slots)
{
    ws_error err = {0};
    ws_model_config c = ws_model_config_default();
    assert_int_equal(ws_vocab_new(&r->v, c.vocab_cap, c.n_overflow), WS_OK);
    assert_int_equal(ws_batch_new(&r->b, &c), WS_OK);
    check(ws_task_new(&r->t, p, n_slots, r->v, &err), &err);
    r->info = calloc((size_t)ws_task_max_queries(r->t) + 1, sizeof *r->info);
    assert_non_null(r->info);
}

static void rig_close(rig *r)
{
    ws_task_free(r->t);
    ws_batch_free(r->b);
    ws_vocab_free(r->v);
    free(r->info);
}

/* One step of a slot into a cleared batch (one trajectory). */
static void step(rig *r, int slot)
{
    ws_error err = {0};
    ws_batch_clear(r->b);
    assert_int_equal(ws_batch_begin_traj(r->b, ws_task_steps(r->t, slot) == 0), WS_OK);
    check(ws_task_step(r->t, slot, r->b, r->info, &err), &err);
    assert_true(ws_batch_n_query(r->b) <= ws_task_max_queries(r->t));
}

static const int32_t *instr_ids(const rig *r, int i) { return r->b->instr.ids + (long)i * r->b->S; }
static const int32_t *query_ids(const rig *r, int i) { return r->b->query.ids + (long)i * r->b->S; }
static int n_ids(const rig *r, const int32_t *ids)
{
    int n = 0;
    while (n < r->b->S && ids[n] >= 0) n++;
    return n;
}

/* The number after a symbol's prefix ("e12" -> 12), checking the prefix. */
static int sym_num(const rig *r, int32_t id, const char *prefix)
{
    const char *s = ws_vocab_symbol(r->v, id);
    assert_non_null(s);
    size_t n = strlen(prefix);
    assert_memory_equal(s, prefix, n);
    assert_true(s[n] >= '0' && s[n] <= '9');
    return atoi(s + n);
}

static int is_sym(const rig *r, int32_t id, const char *sym)
{
    const char *s = ws_vocab_symbol(r->v, id);
    return s && !strcmp(s, sym);
}

/* Everything a step put in the batch and the info array, as one byte string. */
typedef struct {
    unsigned char *p;
    size_t n;
} blob;

static void put(blob *o, const void *x, size_t n)
{
    o->p = realloc(o->p, o->n + n);
    assert_non_null(o->p);
    memcpy(o->p + o->n, x, n);
    o->n += n;
}

static void snapshot(const rig *r, blob *o)
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

/* ---- the interface --------------------------------------------------------- */

static void test_defaults(void **state)
{
    (void)state;
    ws_task_params p;
    assert_false(ws_task_params_default("chess", &p));
    assert_false(ws_task_params_default(NULL, &p));
    p = params("recall");
    assert_string_equal(p.name, "recall");
    assert_int_equal(p.thorough, 1);
    assert_int_equal(p.horizon, 8);
    p = params("facts");
    assert_int_equal(p.entities, 4);
    assert_int_equal(p.places, 4);
    assert_true(p.move_rate == 1.0f);
    assert_int_equal(p.query_sample, 0);
    p = params("life");
    assert_true(p.density == 0.35f && p.intervention_rate == 2.0f);
    p = params("numbers");
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
        p = params(names[i]);
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

static void expect_new_fails(const ws_task_params *p, ws_vocab *v, ws_status want)
{
    ws_error err = {0};
    static int sentinel;
    ws_task *t = (ws_task *)(void *)&sentinel; /* must come back NULL */
    assert_int_equal(ws_task_new(&t, p, 2, v, &err), want);
    assert_null(t);
    assert_true(err.msg[0] != '\0');
}

static void test_rejects(void **state)
{
    (void)state;
    ws_vocab *v;
    assert_int_equal(ws_vocab_new(&v, 4096, 16), WS_OK);
    ws_task_params p = params("facts");
    p.name = "chess";
    expect_new_fails(&p, v, WS_ERR_INVALID);
    p = params("facts");
    p.places = 1;
    expect_new_fails(&p, v, WS_ERR_INVALID);
    p = params("facts");
    p.query_sample = 17;
    expect_new_fails(&p, v, WS_ERR_INVALID);
    p = params("facts");
    p.move_rate = NAN;
    expect_new_fails(&p, v, WS_ERR_INVALID);
    p = params("life");
    p.density = 1.5f;
    expect_new_fails(&p, v, WS_ERR_INVALID);
    p = params("life");
    p.intervention_rate = -1;
    expect_new_fails(&p, v, WS_ERR_INVALID);
    p = params("recall");
    p.thorough = 0, p.horizon = 0;
    expect_new_fails(&p, v, WS_ERR_INVALID);
    p = params("numbers");
    p.images = 0;
    expect_new_fails(&p, v, WS_ERR_INVALID);
    ws_error err = {0};
    ws_task *t;
    assert_int_equal(ws_task_new(&t, &p, 0, v, &err), WS_ERR_INVALID);
    ws_vocab_free(v);

    /* A vocabulary too small for the task's symbols. */
    assert_int_equal(ws_vocab_new(&v, 5, 16), WS_OK);
    p = params("life");
    expect_new_fails(&p, v, WS_ERR_INVALID);
    ws_vocab_free(v);
}

/* Refused steps change nothing: the world does not advance. */
static void test_step_refusals(void **state)
{
    (void)state;
    rig r;
    ws_error err = {0};
    ws_task_params p = params("life");
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
    blob a = {0}, b = {0};
    step(&r, 0);
    snapshot(&r, &a);
    assert_int_equal(ws_task_reset(r.t, 1, 7), WS_OK);
    step(&r, 1);
    snapshot(&r, &b);
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
    blob a = {0}, b = {0}, c = {0}, d = {0};
    assert_int_equal(ws_task_reset(r1.t, 0, 42), WS_OK);
    assert_int_equal(ws_task_reset(r1.t, 1, 43), WS_OK);
    assert_int_equal(ws_task_reset(r1.t, 2, 42), WS_OK);
    assert_int_equal(ws_task_reset(r2.t, 0, 42), WS_OK);
    for (int s = 0; s < steps; s++) {
        step(&r1, 0), snapshot(&r1, &a);
        step(&r1, 1), snapshot(&r1, &c);
        step(&r2, 0), snapshot(&r2, &b);
    }
    for (int s = 0; s < steps; s++) step(&r1, 2), snapshot(&r1, &d);
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
    check_determinism(params("recall"), 12);
    ws_task_params p = params("facts");
    check_determinism(p, 12);
    p.query_sample = 5;
    check_determinism(p, 12);
    check_determinism(params("life"), 12);
    check_determinism(params("conj"), 12);
    check_determinism(params("memory"), 40);
}

/* ---- recall ------------------------------------------------------------------ */

/* Runs a recall world for `steps` steps checking every step; returns its bit. */
static int check_recall_world(rig *r, uint64_t seed, int steps, int thorough, int horizon)
{
    assert_int_equal(ws_task_reset(r->t, 0, seed), WS_OK);
    int bit = -1;
    for (int s = 1; s <= steps; s++) {
        step(r, 0);
        int ni = ws_batch_n_instr(r->b), nq = ws_batch_n_query(r->b), first = 0;
        if (s == 1) {
            const int32_t *ids = instr_ids(r, 0);
            assert_int_equal(n_ids(r, ids), 1);
            assert_true(is_sym(r, ids[0], "target"));
            bit = r->b->instr.value[0];
            first = 1;
        }
        /* The distractors: three distinct ("input", token) told, each repeated. */
        assert_int_equal(ni - first, 3);
        int asks = thorough || s == horizon;
        assert_int_equal(nq, 3 + asks);
        for (int i = 0; i < 3; i++) {
            const int32_t *in = instr_ids(r, first + i), *q = query_ids(r, i);
            assert_int_equal(n_ids(r, in), 2);
            assert_true(is_sym(r, in[0], "input"));
            assert_true(sym_num(r, in[1], "i") < 8);
            for (int j = 0; j < i; j++) assert_int_not_equal(in[1], instr_ids(r, first + j)[1]);
            assert_memory_equal(q, in, 2 * sizeof *q);
            assert_int_equal(r->b->query.value[i], r->b->instr.value[first + i]);
            assert_int_equal(r->info[i].kind, WS_QK_PLAIN);
            assert_int_equal(r->info[i].group, -1);
        }
        if (asks) {
            assert_true(is_sym(r, query_ids(r, 3)[0], "target"));
            assert_int_equal(n_ids(r, query_ids(r, 3)), 1);
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
    ws_task_params p = params("recall");
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
        step(&r, 0);
        int ni = ws_batch_n_instr(r.b), nq = ws_batch_n_query(r.b);
        if (s == 1) assert_int_equal(ni, E);
        else assert_int_equal(ni % 2, 0);
        for (int i = 0; i < ni; i++) {
            const int32_t *ids = instr_ids(&r, i);
            assert_int_equal(n_ids(&r, ids), 2);
            int e = sym_num(&r, ids[0], "e"), pl = sym_num(&r, ids[1], "p"), v = r.b->instr.value[i];
            assert_true(e < E && pl < P);
            if (s == 1) {
                assert_int_equal(v, 1);
            } else if (i % 2 == 0) { /* a move: to a new place, then away from the old */
                const int32_t *away = instr_ids(&r, i + 1);
                assert_int_equal(v, 1);
                assert_int_equal(told[e * P + pl], 0);
                assert_int_equal(away[0], ids[0]);
                assert_int_equal(r.b->instr.value[i + 1], 0);
                assert_int_equal(told[e * P + sym_num(&r, away[1], "p")], 1);
                moved++;
            }
            told[e * P + pl] = v;
        }
        memset(asked, 0, (size_t)(E * P) * sizeof *asked);
        assert_int_equal(nq, p.query_sample ? p.query_sample : E * P);
        for (int i = 0; i < nq; i++) {
            const int32_t *ids = query_ids(&r, i);
            int e = sym_num(&r, ids[0], "e"), pl = sym_num(&r, ids[1], "p");
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
    ws_task_params p = params("facts");
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
        step(&r, 0);
        int ni = ws_batch_n_instr(r.b), nq = ws_batch_n_query(r.b);
        assert_int_equal(ni % (s == 1 ? 1 : 2), 0);
        if (s == 1) assert_int_equal(ni, A + P);
        for (int i = 0; i < ni; i++) {
            const int32_t *ids = instr_ids(&r, i);
            assert_int_equal(n_ids(&r, ids), 2);
            int agent = ws_vocab_symbol(r.v, ids[0])[0] == 'a', v = r.b->instr.value[i];
            int subj = sym_num(&r, ids[0], agent ? "a" : "k");
            int obj = sym_num(&r, ids[1], agent ? "k" : "x");
            int *cell = agent ? &holds[subj * P + obj] : &opens[subj * P + obj];
            if (s == 1) {
                assert_int_equal(v, 1);
            } else if (i % 2 == 0) { /* a move: to a new key/box, then away from the old */
                const int32_t *away = instr_ids(&r, i + 1);
                assert_int_equal(v, 1);
                assert_int_equal(*cell, 0);
                assert_int_equal(away[0], ids[0]);
                assert_int_equal(r.b->instr.value[i + 1], 0);
                int old = sym_num(&r, away[1], agent ? "k" : "x");
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
            const int32_t *ids = query_ids(&r, i);
            int a = sym_num(&r, ids[0], "a"), x = sym_num(&r, ids[1], "x"), want = 0;
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
            step(&r, slot);
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
    ws_task_params p = params("memory");
    check_memory(p, 200, 5, 4);
    p.live_facts = p.live_facts_min = 8;
    p.max_arity = 2;
    p.instr_per_step = 1;
    p.override_rate = 0.5f;
    p.active_rate = 1.0f;
    check_memory(p, 100, 9, 3);
    p = params("memory");
    p.chatter_rate = 1.0f;
    check_memory(p, 200, 11, 4);
}

static void test_conj(void **state)
{
    (void)state;
    ws_task_params p = params("conj");
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
        step(&r, 0);
        int ni = ws_batch_n_instr(r.b);
        assert_int_equal(ws_batch_n_query(r.b), 64);
        if (s == 1) assert_int_equal(ni, 64);
        else *interventions += ni;
        uint64_t expect = s == 1 ? 0 : ws_task_life_next(prev), copy = prev, mask = 0;
        for (int i = 0; i < ni; i++) {
            const int32_t *ids = instr_ids(&r, i);
            int cell = sym_num(&r, ids[0], "r") * 8 + sym_num(&r, ids[1], "c");
            uint64_t bit = 1ULL << cell;
            assert_false(mask & bit); /* distinct cells */
            mask |= bit;
            int v = r.b->instr.value[i];
            expect = v ? expect | bit : expect & ~bit;
            copy = v ? copy | bit : copy & ~bit;
        }
        uint64_t board = 0;
        for (int i = 0; i < 64; i++) {
            const int32_t *ids = query_ids(&r, i);
            assert_int_equal(sym_num(&r, ids[0], "r"), i / 8);
            assert_int_equal(sym_num(&r, ids[1], "c"), i % 8);
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
    ws_task_params p = params("life");
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

/* ---- numbers ----------------------------------------------------------------- */

static int have_mnist(void)
{
    struct stat st;
    return stat(MNIST_DIR, &st) == 0 && S_ISDIR(st.st_mode);
}

static void load_ref(ws_mnist *m, const char *split)
{
    char im[256], lb[256];
    snprintf(im, sizeof im, MNIST_DIR "/%s-images-idx3-ubyte.gz", split);
    snprintf(lb, sizeof lb, MNIST_DIR "/%s-labels-idx1-ubyte.gz", split);
    ws_error err = {0};
    check(ws_mnist_load(m, im, lb, &err), &err);
}

/* Whether `set` holds an image of class cls with exactly these 784 pixels
 * (identical pictures may exist in two classes, so every match is tried). */
static int holds_image(const ws_mnist *set, const int *px, int cls)
{
    uint8_t packed[98] = {0};
    for (int p = 0; p < 784; p++) packed[p / 8] |= (uint8_t)(px[p] << (p % 8));
    assert_int_equal(set->stride, 98);
    for (int i = 0; i < set->n; i++)
        if (set->labels[i] == cls && !memcmp(set->bits + (size_t)i * 98, packed, 98)) return 1;
    return 0;
}

/* Steps a numbers world that queries every pixel: each image must be a real
 * image of `images` (train or t10k) whose class moves on by one each step, the
 * baseline must be its class's training mean, and told pixels true values. */
static void check_numbers(rig *r, int slot, int steps, const ws_mnist *images,
                          const float *mean, const ws_task_params *p)
{
    int n = p->images, cls[8] = {0}, px[8][784];
    static float base[8][784];
    assert_true(n <= 8);
    for (int s = 1; s <= steps; s++) {
        step(r, slot);
        int ni = ws_batch_n_instr(r->b), nq = ws_batch_n_query(r->b);
        assert_int_equal(nq, n * 784);
        assert_true(ni <= (s == 1 ? p->max_told_first : p->max_told));
        memset(px, 0xff, sizeof px);
        for (int q = 0; q < nq; q++) {
            const int32_t *ids = query_ids(r, q);
            assert_int_equal(n_ids(r, ids), 3);
            int m = sym_num(r, ids[0], "m"), y = sym_num(r, ids[1], "y"), x = sym_num(r, ids[2], "x");
            assert_true(m < n && y < 28 && x < 28);
            assert_int_equal(px[m][y * 28 + x], -1); /* distinct */
            px[m][y * 28 + x] = r->b->query.value[q];
            base[m][y * 28 + x] = r->info[q].baseline[0];
        }
        /* Told pixels carry the image's value and make their queries TOLD. */
        int told[8][784] = {{0}};
        for (int i = 0; i < ni; i++) {
            const int32_t *ids = instr_ids(r, i);
            int m = sym_num(r, ids[0], "m"), k = sym_num(r, ids[1], "y") * 28 + sym_num(r, ids[2], "x");
            assert_int_equal(r->b->instr.value[i], px[m][k]);
            assert_int_equal(told[m][k]++, 0);
        }
        for (int q = 0; q < nq; q++) {
            const int32_t *ids = query_ids(r, q);
            int m = sym_num(r, ids[0], "m"), k = sym_num(r, ids[1], "y") * 28 + sym_num(r, ids[2], "x");
            assert_int_equal(r->info[q].kind, told[m][k] ? WS_QK_TOLD : WS_QK_UNTOLD);
            assert_int_equal(r->info[q].group, -1);
        }
        for (int m = 0; m < n; m++) {
            int best = -1;
            double best_d = 1e30;
            for (int c = 0; c < 10; c++) {
                double dist = 0;
                for (int k = 0; k < 784; k++) dist += fabs(base[m][k] - mean[c * 784 + k]);
                if (dist < best_d) best_d = dist, best = c;
            }
            assert_true(best_d < 1e-3);
            if (s > 1) assert_int_equal(best, (cls[m] + 1) % 10);
            cls[m] = best;
            assert_true(holds_image(images, px[m], best));
        }
    }
}

static void class_means(const ws_mnist *m, float *mean)
{
    int count[10] = {0};
    memset(mean, 0, 10 * 784 * sizeof *mean);
    for (int i = 0; i < m->n; i++) {
        count[m->labels[i]]++;
        for (int k = 0; k < 784; k++) mean[m->labels[i] * 784 + k] += (float)ws_mnist_pixel(m, i, k);
    }
    for (int c = 0; c < 10; c++)
        for (int k = 0; k < 784; k++) mean[c * 784 + k] /= (float)count[c];
}

static void test_numbers(void **state)
{
    (void)state;
    if (!have_mnist()) skip();
    ws_mnist train, t10k;
    load_ref(&train, "train");
    load_ref(&t10k, "t10k");
    assert_int_equal(train.n, 60000);
    assert_int_equal(t10k.n, 10000);
    assert_true(train.rows == 28 && train.cols == 28 && t10k.rows == 28 && t10k.cols == 28);
    assert_int_equal(train.labels[0], 9); /* ankle boot, in both splits */
    assert_int_equal(t10k.labels[0], 9);
    float *mean = malloc(10 * 784 * sizeof *mean);
    assert_non_null(mean);
    class_means(&train, mean);

    ws_task_params p = params("numbers");
    p.n_queries = 3 * 784; /* every pixel, so the test sees whole images */
    rig r;
    rig_open(&r, &p, 3);
    assert_int_equal(ws_task_max_fact_len(r.t), 3);
    assert_int_equal(ws_task_n_baselines(r.t), 1);
    assert_string_equal(ws_task_baseline_name(r.t, 0), "class mean image");
    assert_int_equal(ws_task_reset(r.t, 0, 11), WS_OK);
    check_numbers(&r, 0, 12, &train, mean, &p);
    /* Determinism: slot 1 with the same seed repeats slot 0, slot 2 differs. */
    blob a = {0}, b = {0}, c = {0};
    assert_int_equal(ws_task_reset(r.t, 0, 5), WS_OK);
    assert_int_equal(ws_task_reset(r.t, 1, 5), WS_OK);
    assert_int_equal(ws_task_reset(r.t, 2, 6), WS_OK);
    for (int s = 0; s < 3; s++) {
        step(&r, 0), snapshot(&r, &a);
        step(&r, 2), snapshot(&r, &c);
        step(&r, 1), snapshot(&r, &b);
    }
    assert_int_equal(a.n, b.n);
    assert_memory_equal(a.p, b.p, a.n);
    assert_true(a.n != c.n || memcmp(a.p, c.p, a.n) != 0);
    free(a.p), free(b.p), free(c.p);
    rig_close(&r);

    /* Unseen images: test_split draws from t10k, the baseline stays the train mean. */
    p = params("numbers");
    p.test_split = 1, p.images = 2, p.n_queries = 2 * 784, p.max_told_first = 3, p.max_told = 0;
    rig_open(&r, &p, 1);
    assert_int_equal(ws_task_reset(r.t, 0, 3), WS_OK);
    check_numbers(&r, 0, 4, &t10k, mean, &p);
    rig_close(&r);
    free(mean);
    ws_mnist_free(&train);
    ws_mnist_free(&t10k);
}

/* The default sizes, on a model whose facts are too short for (m, y, x). */
static void test_numbers_defaults(void **state)
{
    (void)state;
    if (!have_mnist()) skip();
    ws_task_params p = params("numbers");
    rig r;
    rig_open(&r, &p, 1);
    assert_int_equal(ws_task_max_queries(r.t), 75);
    assert_int_equal(ws_task_reset(r.t, 0, 1), WS_OK);
    int told = 0, told_q = 0, max_first = 0;
    for (int s = 1; s <= 40; s++) {
        step(&r, 0);
        int ni = ws_batch_n_instr(r.b);
        if (s == 1) max_first = ni;
        else {
            assert_true(ni <= 75);
            told += ni;
        }
        assert_int_equal(ws_batch_n_query(r.b), 75);
        for (int q = 0; q < 75; q++) {
            told_q += r.info[q].kind == WS_QK_TOLD;
            assert_true(r.info[q].baseline[0] >= 0.0f && r.info[q].baseline[0] <= 1.0f);
        }
    }
    assert_true(max_first <= 500);
    assert_true(told > 39 * 75 / 4 && told < 39 * 75 * 3 / 4); /* uniform in [0, 75] */
    assert_true(told_q > 0);
    ws_model_config c = ws_model_config_default();
    c.max_fact_len = 2;
    ws_batch *small;
    ws_error err = {0};
    assert_int_equal(ws_batch_new(&small, &c), WS_OK);
    assert_int_equal(ws_batch_begin_traj(small, 1), WS_OK);
    assert_int_equal(ws_task_step(r.t, 0, small, r.info, &err), WS_ERR_INVALID);
    ws_batch_free(small);
    rig_close(&r);
}

/* ---- damaged IDX files ------------------------------------------------------- */

static char tmpdir[64];

static void path_in(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", tmpdir, name);
}

static void write_bytes(const char *name, const void *x, size_t n, int gz)
{
    char path[128];
    path_in(path, sizeof path, name);
    if (gz) {
        gzFile f = gzopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(gzwrite(f, x, (unsigned)n), (int)n);
        assert_int_equal(gzclose(f), Z_OK);
    } else {
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(x, 1, n, f), n);
        assert_int_equal(fclose(f), 0);
    }
}

static unsigned char *read_bytes(const char *name, size_t *n)
{
    char path[128];
    path_in(path, sizeof path, name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    unsigned char *x = malloc(1 << 16);
    assert_non_null(x);
    *n = fread(x, 1, 1 << 16, f);
    fclose(f);
    return x;
}

static void be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8), p[3] = (unsigned char)v;
}

/* IDX contents: n rows×cols images with grey = 100 + 9·image + pixel (both
 * sides of the 127 threshold), and n labels counting up from `first`. */
static size_t make_images(unsigned char *buf, uint32_t magic, int n, int rows, int cols)
{
    be32(buf, magic), be32(buf + 4, (uint32_t)n), be32(buf + 8, (uint32_t)rows);
    be32(buf + 12, (uint32_t)cols);
    size_t k = 16;
    for (int i = 0; i < n; i++)
        for (int p = 0; p < rows * cols; p++) buf[k++] = (unsigned char)(100 + 9 * i + p);
    return k;
}

static size_t make_labels(unsigned char *buf, int n, int first)
{
    be32(buf, 0x801), be32(buf + 4, (uint32_t)n);
    for (int i = 0; i < n; i++) buf[8 + i] = (unsigned char)((first + i) % 10);
    return 8 + (size_t)n;
}

static ws_status load_tmp(ws_mnist *m, const char *images, const char *labels, ws_error *err)
{
    char im[128], lb[128];
    path_in(im, sizeof im, images);
    path_in(lb, sizeof lb, labels);
    memset(err, 0, sizeof *err);
    return ws_mnist_load(m, im, lb, err);
}

static void expect_format(const char *images, const char *labels)
{
    ws_mnist m;
    ws_error err;
    assert_int_equal(load_tmp(&m, images, labels, &err), WS_ERR_FORMAT);
    assert_null(m.bits);
    assert_null(m.labels);
    assert_true(err.msg[0] != '\0');
}

static void test_idx_damaged(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ws_test_tasks_XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    unsigned char img[2048], lab[64];
    size_t ni = make_images(img, 0x803, 3, 4, 5), nl = make_labels(lab, 3, 8);

    /* A good pair, gzipped and plain: binarized at > 127. */
    write_bytes("img.gz", img, ni, 1);
    write_bytes("lab.gz", lab, nl, 1);
    write_bytes("img.raw", img, ni, 0);
    ws_mnist m;
    ws_error err;
    const char *good[] = {"img.gz", "img.raw"};
    for (int g = 0; g < 2; g++) {
        check(load_tmp(&m, good[g], "lab.gz", &err), &err);
        assert_true(m.n == 3 && m.rows == 4 && m.cols == 5 && m.stride == 3);
        for (int i = 0; i < 3; i++) {
            assert_int_equal(m.labels[i], (8 + i) % 10);
            for (int p = 0; p < 20; p++)
                assert_int_equal(ws_mnist_pixel(&m, i, p), 100 + 9 * i + p > 127);
        }
        ws_mnist_free(&m);
    }

    /* Wrong magic (labels file given as images; images as labels). */
    expect_format("lab.gz", "lab.gz");
    expect_format("img.gz", "img.gz");
    /* Data cut short, or running on. */
    write_bytes("short.gz", img, ni - 7, 1);
    expect_format("short.gz", "lab.gz");
    write_bytes("header.gz", img, 10, 1);
    expect_format("header.gz", "lab.gz");
    img[ni] = 0;
    write_bytes("long.gz", img, ni + 1, 1);
    expect_format("long.gz", "lab.gz");
    /* Counts that disagree, labels out of range, empty or absurd dimensions. */
    unsigned char lab2[64];
    write_bytes("lab2.gz", lab2, make_labels(lab2, 2, 0), 1);
    expect_format("img.gz", "lab2.gz");
    lab[9] = 10;
    write_bytes("lab10.gz", lab, nl, 1);
    expect_format("img.gz", "lab10.gz");
    lab[9] = 9;
    unsigned char bad[64];
    write_bytes("zero.gz", bad, make_images(bad, 0x803, 0, 4, 5), 1);
    expect_format("zero.gz", "lab.gz");
    make_images(bad, 0x803, 0, 4, 5);
    be32(bad + 4, 10000000), be32(bad + 8, 1000), be32(bad + 12, 1000);
    write_bytes("huge.gz", bad, 16, 1);
    expect_format("huge.gz", "lab.gz");

    /* A gzip stream cut in the middle, and one with a damaged body. */
    size_t n;
    unsigned char *z = read_bytes("img.gz", &n);
    write_bytes("cut.gz", z, n - 12, 0);
    expect_format("cut.gz", "lab.gz");
    write_bytes("cut2.gz", z, n / 2, 0);
    expect_format("cut2.gz", "lab.gz");
    z[n - 6] ^= 0x55; /* inside the CRC/length trailer */
    write_bytes("crc.gz", z, n, 0);
    expect_format("crc.gz", "lab.gz");
    free(z);

    /* A missing file. */
    assert_int_equal(load_tmp(&m, "nothing.gz", "lab.gz", &err), WS_ERR_NOTFOUND);

    /* The task refuses a data_dir whose training images are damaged. */
    z = read_bytes("cut2.gz", &n);
    write_bytes("train-images-idx3-ubyte.gz", z, n, 0);
    free(z);
    write_bytes("train-labels-idx1-ubyte.gz", lab, nl, 1);
    ws_vocab *v;
    assert_int_equal(ws_vocab_new(&v, 4096, 16), WS_OK);
    ws_task_params p = params("numbers");
    p.data_dir = tmpdir;
    expect_new_fails(&p, v, WS_ERR_FORMAT);
    p.data_dir = "/nonexistent/fashion-mnist";
    expect_new_fails(&p, v, WS_ERR_NOTFOUND);
    ws_vocab_free(v);

    const char *files[] = {"img.gz", "lab.gz", "img.raw", "short.gz", "header.gz", "long.gz",
                           "lab2.gz", "lab10.gz", "zero.gz", "huge.gz", "cut.gz", "cut2.gz",
                           "crc.gz", "train-images-idx3-ubyte.gz",
                           "train-labels-idx1-ubyte.gz"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char path[128];
        path_in(path, sizeof path, files[i]);
        assert_int_equal(unlink(path), 0);
    }
    assert_int_equal(rmdir(tmpdir), 0);
}

/* A task whose worlds move on silent steps refuses a model that holds its state
 * on them; the others take either. */
static void test_dynamics_need_update(void **state)
{
    (void)state;
    const char *names[] = {"life", "numbers", "memory", "recall"};
    for (int i = 0; i < 4; i++) {
        ws_task_params p = params(names[i]);
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
        cmocka_unit_test(test_numbers),      cmocka_unit_test(test_numbers_defaults),
        cmocka_unit_test(test_idx_damaged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
