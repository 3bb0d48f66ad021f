/* test_exec_pool.c — a pass in chunks on several threads (model/exec_pool.h)
 * gives every trajectory the bits it gets alone: the shipped model, trajectories
 * of fresh symbols from W_0 and then from their states, steps and queries, at
 * chunk sizes that do and do not divide the batch; a chunk's failure is the
 * pass's; and two models' pools share one crew of threads, passes from two
 * threads at once. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/ws_rng.h"
#include "model/checkpoint.h"
#include "model/exec_pool.h"
#include "test_util.h"

#define N       21 /* trajectories */
#define N_INSTR 4
#define N_QUERY 8
#define THREADS 3 /* more than this machine's 2 cores: chunks claimed in any order */

typedef struct {
    ws_backend *be;
    ws_model *m;
    size_t T; /* floats of a state */
    float *w; /* N states, stepped in place */
    float probs[N * N_QUERY];
    uint64_t hash[N][N_INSTR + N_QUERY][3];
    int from_w0, query_only, fail_at; /* fail_at: the row whose chunk fails (-1 none) */
} pass_rig;

/* Trajectory t's facts into b: 3 symbols each, instructions then queries. */
static void add_traj(const pass_rig *r, ws_batch *b, int t)
{
    assert_int_equal(ws_batch_begin_traj(b, r->from_w0 && !r->query_only), WS_OK);
    for (int i = 0; i < N_INSTR + N_QUERY; i++) {
        ws_sym syms[3];
        for (int k = 0; k < 3; k++) syms[k] = (ws_sym){-1, r->hash[t][i][k]};
        if (i < N_INSTR && !r->query_only)
            assert_int_equal(ws_batch_add_instr_syms(b, syms, 3, (t + i) & 1), WS_OK);
        else if (i >= N_INSTR)
            assert_int_equal(ws_batch_add_query_syms(b, syms, 3, -1), WS_OK);
    }
}

static ws_status run_chunk(void *ctx, ws_exec *x, ws_batch *b, int r0, int r1, ws_error *err)
{
    pass_rig *r = ctx;
    if (r->fail_at >= r0 && r->fail_at < r1)
        return ws_error_set(err, WS_ERR_INVALID, "chunk at %d failed", r0);
    ws_batch_clear(b);
    for (int t = r0; t < r1; t++) add_traj(r, b, t);
    float *w = r->w + (size_t)r0 * r->T, *p = r->probs + (size_t)r0 * N_QUERY;
    if (r->query_only) return ws_exec_query(x, b, w, p, NULL, err);
    return ws_exec_step(x, b, w, w, WS_STEP_INFER, 1.0f, p, NULL, err);
}

/* Whether the pass at (chunk, threads) gives what each trajectory gets alone
 * (chunks of one on one thread), from the same states; the pass's states are
 * kept. No cmocka assertion: other threads than the test's call it. */
static int pass_as_alone(ws_exec_pool *pool, pass_rig *r, int chunk, int threads)
{
    ws_error err = {0};
    size_t bytes = sizeof(float) * r->T * N;
    float *w0 = malloc(bytes), *alone_w = malloc(bytes), alone_p[N * N_QUERY];
    int ok = w0 && alone_w;
    if (ok) memcpy(w0, r->w, bytes);
    ws_backend_threads(ws_model_backend(r->m), 1); /* as the engine: ops on one thread */
    ok = ok && ws_exec_pool_run(pool, N, 1, 1, run_chunk, r, &err) == WS_OK;
    if (ok) {
        memcpy(alone_w, r->w, bytes);
        memcpy(alone_p, r->probs, sizeof alone_p);
        memcpy(r->w, w0, bytes);
        memset(r->probs, 0xff, sizeof r->probs);
    }
    ok = ok && ws_exec_pool_run(pool, N, chunk, threads, run_chunk, r, &err) == WS_OK;
    ok = ok && !memcmp(r->probs, alone_p, sizeof alone_p) && !memcmp(r->w, alone_w, bytes);
    free(w0);
    free(alone_w);
    return ok;
}

/* The shipped model on a backend of its own (the pool's thread 0 uses it),
 * N states from W_0 and the facts' symbols. */
static pass_rig *rig_open(uint64_t seed)
{
    ws_error err = {0};
    pass_rig *r = calloc(1, sizeof *r);
    assert_non_null(r);
    assert_int_equal(ws_backend_cpu_new(&r->be, 2, &err), WS_OK);
    assert_int_equal(
        ws_checkpoint_load(&r->m, WS_SOURCE_DIR "/models/default.safetensors", r->be, &err), WS_OK);
    r->T = ws_model_state_floats(r->m);
    assert_int_equal(ws_model_state_alloc(r->m, N, &r->w, &err), WS_OK);
    assert_int_equal(ws_model_state_init(r->m, r->w, 0, N, &err), WS_OK);
    for (int t = 0; t < N; t++)
        for (int i = 0; i < N_INSTR + N_QUERY; i++)
            for (int k = 0; k < 3; k++) r->hash[t][i][k] = ws_xorshift64(&seed) | 1;
    r->fail_at = -1;
    r->from_w0 = 1;
    return r;
}

static void rig_close(pass_rig *r)
{
    ws_backend_release(r->be, r->w);
    ws_model_free(r->m);
    ws_backend_free(r->be);
    free(r);
}

static void test_chunks_on_threads_as_alone(void **state)
{
    (void)state;
    ws_error err = {0};
    pass_rig *r = rig_open(0x5EED);
    ws_exec_crew *crew = NULL;
    ws_exec_pool *pool = NULL;
    assert_int_equal(ws_exec_crew_new(&crew, THREADS, &err), WS_OK);
    assert_int_equal(ws_exec_pool_new(&pool, r->m, crew, &err), WS_OK);
    assert_int_equal(ws_exec_pool_threads(pool), THREADS);
    assert_true(pass_as_alone(pool, r, 8, THREADS)); /* chunks of 8, 8 and 5, from W_0 */
    r->from_w0 = 0;
    assert_true(pass_as_alone(pool, r, 4, 2)); /* from the states just made */
    assert_true(pass_as_alone(pool, r, 1, THREADS));
    r->query_only = 1;
    assert_true(pass_as_alone(pool, r, 5, THREADS));
    r->query_only = 0;
    /* a failed chunk fails the pass, with its message */
    r->fail_at = 9;
    assert_int_equal(ws_exec_pool_run(pool, N, 4, THREADS, run_chunk, r, &err), WS_ERR_INVALID);
    assert_string_equal(err.msg, "chunk at 8 failed");
    ws_exec_pool_free(pool);
    ws_exec_crew_free(crew);
    /* without a crew, one thread */
    assert_int_equal(ws_exec_pool_new(&pool, r->m, NULL, &err), WS_OK);
    assert_int_equal(ws_exec_pool_threads(pool), 1);
    r->fail_at = -1;
    assert_true(pass_as_alone(pool, r, 8, THREADS));
    ws_exec_pool_free(pool);
    rig_close(r);
}

typedef struct {
    ws_exec_pool *pool;
    pass_rig *r;
    int passes_right;
} pass_loop;

static void *run_passes(void *arg)
{
    pass_loop *l = arg;
    for (int i = 0; i < 6; i++) {
        l->passes_right += pass_as_alone(l->pool, l->r, 1 + i % 8, THREADS);
        l->r->from_w0 = 0;
    }
    return NULL;
}

/* One crew, two models' pools, passes from two threads at once: they take the
 * crew in turn (the engine's passes all come from its one thread, but the crew
 * does not rely on it) and each trajectory still gets the bits it gets alone. */
static void test_pools_share_a_crew(void **state)
{
    (void)state;
    ws_error err = {0};
    ws_exec_crew *crew = NULL;
    assert_int_equal(ws_exec_crew_new(&crew, THREADS, &err), WS_OK);
    pass_loop loop[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        loop[i] = (pass_loop){.r = rig_open(0xC0DE + (uint64_t)i)};
        assert_int_equal(ws_exec_pool_new(&loop[i].pool, loop[i].r->m, crew, &err), WS_OK);
    }
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, run_passes, &loop[i]), 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_int_equal(loop[i].passes_right, 6);
        ws_exec_pool_free(loop[i].pool);
        rig_close(loop[i].r);
    }
    ws_exec_crew_free(crew);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chunks_on_threads_as_alone),
        cmocka_unit_test(test_pools_share_a_crew),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
