/* test_state_cache.c — the engine's cache of committed session states
 * (server/engine/state_cache.h): the cache alone (exact floats back, a tenant
 * that is not the session's misses, least recently used first out under the
 * byte bound, a state that cannot be kept leaves no older one behind), then
 * through the engine: the same steps on an engine with the cache and on one
 * without give the same answers bit for bit and store the same states, every
 * step after the first finds its state in memory, and a deleted session or a
 * stale expect_step is never answered from memory. What a session was told
 * (the learned rules' facts) rides with the state it was committed with. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "server/engine/engine.h"
#include "server/engine/state_cache.h"
#include "storage/storage.h"
#include "engine_fixture.h"
#include "test_util.h"

#define ID_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define ID_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define ID_C "cccccccccccccccccccccccccccccccc"

static ws_state_cache *cache_new(size_t bytes)
{
    ws_state_cache *c = NULL;
    ws_error err = {0};
    assert_int_equal(ws_state_cache_new(&c, bytes, &err), WS_OK);
    return c;
}

static void fill(float *x, int n, float base)
{
    for (int i = 0; i < n; i++) x[i] = base + (float)i * 0.25f;
}

/* 1 when the cache has id's state for tenant 1, equal to want (n floats) at step. */
static int holds(ws_state_cache *c, const char *id, const float *want, int n, int64_t step)
{
    ws_store_session s = {0};
    if (!ws_state_cache_get(c, 1, id, &s)) return 0;
    assert_string_equal(s.id, id);
    assert_int_equal(s.tenant, 1);
    assert_int_equal(s.model, 9);
    assert_int_equal(s.step, step);
    assert_int_equal((int)s.rows * (int)s.cols, n);
    assert_memory_equal(s.state, want, sizeof(float) * (size_t)n);
    ws_store_session_clear(&s);
    return 1;
}

static void test_cache_alone(void **state)
{
    (void)state;
    enum { ROWS = 4, COLS = 8, N = ROWS * COLS };
    float a[N], b[N], c2[N], big[3 * N];
    fill(a, N, 1), fill(b, N, 2), fill(c2, N, 3), fill(big, 3 * N, 4);
    /* room for two states of 128 bytes, not three */
    ws_state_cache *c = cache_new(2 * sizeof a + sizeof a / 2);
    ws_state_cache_put(c, 1, ID_A, 9, 1, ROWS, COLS, a);
    ws_state_cache_put(c, 1, ID_B, 9, 5, ROWS, COLS, b);
    assert_true(holds(c, ID_A, a, N, 1)); /* A is now the more recently used */

    /* another tenant's request for the id misses, and takes nothing away */
    ws_store_session s = {0};
    assert_false(ws_state_cache_get(c, 2, ID_A, &s));
    assert_true(holds(c, ID_A, a, N, 1));

    /* a third state: B, used least recently, goes */
    ws_state_cache_put(c, 1, ID_C, 9, 2, ROWS, COLS, c2);
    assert_false(holds(c, ID_B, b, N, 5));
    assert_true(holds(c, ID_A, a, N, 1));
    assert_true(holds(c, ID_C, c2, N, 2));
    ws_state_cache_stats st = ws_state_cache_stats_of(c);
    assert_int_equal(st.entries, 2);
    assert_int_equal(st.bytes, 2 * sizeof a);

    /* a new state replaces the old one in place */
    ws_state_cache_put(c, 1, ID_A, 9, 2, ROWS, COLS, b);
    assert_true(holds(c, ID_A, b, N, 2));

    /* a state past the bound is not kept, and the older one of the session goes too */
    ws_state_cache_put(c, 1, ID_C, 9, 3, 3 * ROWS, COLS, big);
    assert_false(ws_state_cache_get(c, 1, ID_C, &s));
    /* another shape that fits replaces it */
    ws_state_cache_put(c, 1, ID_A, 9, 3, ROWS / 2, COLS, c2);
    assert_true(holds(c, ID_A, c2, N / 2, 3));

    ws_state_cache_drop(c, ID_A);
    assert_false(ws_state_cache_get(c, 1, ID_A, &s));
    ws_state_cache_drop(c, ID_A); /* twice: nothing to drop */
    st = ws_state_cache_stats_of(c);
    assert_int_equal(st.entries, 0);
    assert_int_equal(st.bytes, 0);
    assert_int_equal(st.hits, 6);
    assert_int_equal(st.misses, 4);
    ws_state_cache_free(c);
}

/* ---- through the engine ------------------------------------------------------ */

enum { SESSIONS = 3 }; /* stepped together: a batch holds several, each its own row */

typedef struct {
    char dir[300];
    ws_engine *e;
    ws_store *st;
    char session[SESSIONS][WS_STORE_ID_LEN + 1];
} rig;

static void rig_open(rig *r, const char *name, size_t cache_bytes)
{
    snprintf(r->dir, sizeof r->dir, "%s/%s", EF_DIR, name);
    assert_int_equal(mkdir(r->dir, 0700), 0);
    ws_engine_config cfg = ef_engine_config(r->dir);
    cfg.state_cache_bytes = cache_bytes;
    ws_error err = {0};
    assert_int_equal(ws_engine_start(&cfg, &r->e, &err), WS_OK);
    assert_int_equal(ws_store_open(cfg.db_path, cfg.durability, 1, &r->st, &err), WS_OK);
    assert_int_equal(ws_store_tenant_ensure(r->st, "default", &EF_TENANT, &err), WS_OK);
    ws_model_config tiny = ef_tiny_config();
    ws_job *j = ef_create_job("tiny", &tiny);
    ef_run_on(r->e, j);
    assert_int_equal(j->result.status, WS_OK);
    ws_job_free(j);
    for (int i = 0; i < SESSIONS; i++) {
        j = ef_job_new(WS_JOB_SESSION_CREATE, "");
        snprintf(j->model_name, sizeof j->model_name, "tiny");
        ef_run_on(r->e, j);
        assert_int_equal(j->result.status, WS_OK);
        memcpy(r->session[i], j->session, sizeof r->session[i]);
        ws_job_free(j);
    }
}

/* The jobs submitted at once, so that the later ones share a batch; returns
 * once all are answered. */
static void run_all(ws_engine *e, ws_job **jobs, int n)
{
    ef_waiter w[SESSIONS];
    for (int i = 0; i < n; i++) {
        w[i] = (ef_waiter){PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
        ef_submit_on(e, jobs[i], &w[i]);
    }
    for (int i = 0; i < n; i++) {
        pthread_mutex_lock(&w[i].mu);
        while (!w[i].done) pthread_cond_wait(&w[i].cv, &w[i].mu);
        pthread_mutex_unlock(&w[i].mu);
    }
}

static void rig_close(rig *r)
{
    ws_engine_free(r->e);
    ws_store_close(r->st);
}

/* Step t: a fact told (true or false by t) and the two queries. */
static ws_job *step_job(const char *session, int t, int64_t expect_step)
{
    ws_job *j = ef_step_job(session, expect_step);
    j->instr[0].value = t % 3 != 0;
    return j;
}

static float *stored_state(rig *r, int k, int64_t *step)
{
    ws_store_session s = {0};
    ws_error err = {0};
    assert_int_equal(ws_store_session_get(r->st, EF_TENANT, r->session[k], 1, &s, &err), WS_OK);
    float *w = s.state;
    *step = s.step;
    s.state = NULL;
    ws_store_session_clear(&s);
    return w;
}

/* Steps t of every session of r (session k told as at step t + k); then, every
 * fourth step, queries. The answers into p (SESSIONS x 2 per step, 2 more per query). */
static int play(rig *r, int t, float *p)
{
    ws_job *jobs[SESSIONS];
    for (int k = 0; k < SESSIONS; k++) jobs[k] = step_job(r->session[k], t + k, t % 2 ? t : -1);
    run_all(r->e, jobs, SESSIONS);
    int n = 0;
    for (int k = 0; k < SESSIONS; k++) {
        assert_int_equal(jobs[k]->result.status, WS_OK);
        assert_int_equal(jobs[k]->result.step, t + 1);
        assert_int_equal(jobs[k]->result.n_p, 2);
        memcpy(p + n, jobs[k]->result.p, 2 * sizeof *p), n += 2;
        ws_job_free(jobs[k]);
    }
    if (t % 4 != 3) return n;
    for (int k = 0; k < SESSIONS; k++) { /* queries on the states in memory */
        jobs[k] = ef_job_new(WS_JOB_QUERY, r->session[k]);
        jobs[k]->query = ef_facts(EF_QUERIES, NULL, 2), jobs[k]->n_query = 2;
    }
    run_all(r->e, jobs, SESSIONS);
    for (int k = 0; k < SESSIONS; k++) {
        assert_int_equal(jobs[k]->result.status, WS_OK);
        memcpy(p + n, jobs[k]->result.p, 2 * sizeof *p), n += 2;
        ws_job_free(jobs[k]);
    }
    return n;
}

static void test_same_bits_with_and_without(void **state)
{
    (void)state;
    rig on, off;
    rig_open(&on, "cache-on", (size_t)1 << 20);
    rig_open(&off, "cache-off", 0);
    ws_state_cache_stats st;
    assert_false(ws_engine_state_cache(off.e, &st));
    enum { STEPS = 12 };
    for (int t = 0; t < STEPS; t++) {
        float p_on[4 * SESSIONS], p_off[4 * SESSIONS];
        int n = play(&on, t, p_on);
        assert_int_equal(play(&off, t, p_off), n);
        assert_memory_equal(p_on, p_off, sizeof(float) * (size_t)n);
    }
    ws_model_config tiny = ef_tiny_config();
    size_t bytes = sizeof(float) * (size_t)(tiny.n_state * tiny.d);
    for (int k = 0; k < SESSIONS; k++) {
        int64_t s_on, s_off;
        float *w_on = stored_state(&on, k, &s_on), *w_off = stored_state(&off, k, &s_off);
        assert_int_equal(s_on, STEPS);
        assert_int_equal(s_off, STEPS);
        assert_memory_equal(w_on, w_off, bytes);
        free(w_on);
        free(w_off);
    }
    /* every step after the first and every query started from memory */
    assert_true(ws_engine_state_cache(on.e, &st));
    printf("cache: %llu hits, %llu misses, %zu bytes\n", (unsigned long long)st.hits,
           (unsigned long long)st.misses, st.bytes);
    assert_int_equal(st.hits, SESSIONS * (STEPS - 1 + STEPS / 4));
    assert_int_equal(st.misses, SESSIONS);
    assert_int_equal(st.bytes, SESSIONS * bytes);
    rig_close(&on);
    rig_close(&off);
}

static void test_never_answers_from_a_stale_entry(void **state)
{
    (void)state;
    rig r;
    rig_open(&r, "stale", (size_t)1 << 20);
    for (int t = 0; t < 2; t++) {
        ws_job *j = step_job(r.session[0], t, -1);
        ef_run_on(r.e, j);
        assert_int_equal(j->result.status, WS_OK);
        ws_job_free(j);
    }
    /* expect_step behind the session: refused with where it is, nothing applied */
    ws_job *j = step_job(r.session[0], 2, 1);
    ef_run_on(r.e, j);
    assert_int_equal(j->result.why, WS_JOB_STEP_CONFLICT);
    assert_int_equal(j->result.step, 2);
    ws_job_free(j);
    /* deleted: no step or query of it is answered from memory */
    j = ef_job_new(WS_JOB_SESSION_DELETE, r.session[0]);
    ef_run_on(r.e, j);
    assert_int_equal(j->result.status, WS_OK);
    ws_job_free(j);
    ws_state_cache_stats st;
    assert_true(ws_engine_state_cache(r.e, &st));
    assert_int_equal(st.entries, 0);
    j = ef_job_new(WS_JOB_QUERY, r.session[0]);
    j->query = ef_facts(EF_QUERIES, NULL, 2), j->n_query = 2;
    ef_run_on(r.e, j);
    assert_int_equal(j->result.status, WS_ERR_NOTFOUND);
    ws_job_free(j);
    j = step_job(r.session[0], 2, -1);
    ef_run_on(r.e, j);
    assert_int_equal(j->result.status, WS_ERR_NOTFOUND);
    ws_job_free(j);
    rig_close(&r);
}

static int setup(void **state)
{
    (void)state;
    const char *tmp = getenv("TMPDIR");
    snprintf(EF_DIR, sizeof EF_DIR, "%s/ws_state_cache_XXXXXX", tmp ? tmp : "/tmp");
    return mkdtemp(EF_DIR) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return ws_test_rm_tree(EF_DIR);
}

/* What a session was told (the learned rules' facts, engine_rules.c) rides
 * with the state it was committed with: kept only at that state's step, for
 * that tenant, counted in the bound, forgotten by the next put or a drop. */
static void test_told_facts(void **state)
{
    (void)state;
    enum { ROWS = 4, COLS = 8, N = ROWS * COLS };
    float a[N];
    fill(a, N, 1);
    ws_state_cache *c = cache_new(4 * sizeof a + 2 * sizeof(ws_recall_facts));
    ws_recall_facts told = {0}, back;
    int32_t ids[WS_MAX_FACT_LEN] = {3, 4, -1, -1};
    uint64_t hash[WS_MAX_FACT_LEN] = {33, 44, 0, 0};
    ws_recall_tell(&told, WS_MAX_FACT_LEN, ids, hash, 1);
    ws_state_cache_put(c, 1, ID_A, 9, 3, ROWS, COLS, a);
    ws_state_cache_put_told(c, ID_A, 2, &told); /* another step: not kept */
    assert_false(ws_state_cache_told(c, 1, ID_A, 3, &back, NULL));
    ws_state_cache_put_told(c, ID_A, 3, &told);
    assert_false(ws_state_cache_told(c, 2, ID_A, 3, &back, NULL)); /* another tenant */
    assert_false(ws_state_cache_told(c, 1, ID_A, 2, &back, NULL)); /* another step */
    assert_true(ws_state_cache_told(c, 1, ID_A, 3, &back, NULL));
    assert_memory_equal(&back, &told, sizeof told);
    assert_int_equal(ws_state_cache_stats_of(c).bytes, sizeof a + sizeof told);
    ws_state_cache_put(c, 1, ID_A, 9, 4, ROWS, COLS, a); /* the next step: told anew */
    assert_false(ws_state_cache_told(c, 1, ID_A, 4, &back, NULL));
    assert_int_equal(ws_state_cache_stats_of(c).bytes, sizeof a);
    ws_state_cache_put_told(c, ID_A, 4, &told);
    ws_state_cache_drop(c, ID_A);
    assert_false(ws_state_cache_told(c, 1, ID_A, 4, &back, NULL));
    assert_int_equal(ws_state_cache_stats_of(c).bytes, 0);
    ws_state_cache_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cache_alone),
        cmocka_unit_test(test_told_facts),
        cmocka_unit_test(test_same_bits_with_and_without),
        cmocka_unit_test(test_never_answers_from_a_stale_entry),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
