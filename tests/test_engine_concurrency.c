/* test_engine_concurrency.c — the engine under concurrent work, through its
 * native interface: continuous batching (a lone client never waits for a batch;
 * what arrives meanwhile forms the next one, each session once), the training
 * thread (serving goes on while an update runs; a published version serves the
 * next batch, bit for bit as its file replays), and the pipeline (nothing is
 * acknowledged before its commit; a session's jobs complete in order). */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/ws_clock.h"
#include "model/checkpoint.h"
#include "model/safetensors.h"
#include "server/common/versions.h"
#include "server/engine/engine.h"
#include "storage/storage.h"
#include "engine_fixture.h"
#include "test_util.h"

/* A temporary directory for the tests' engines, and the id a fresh database
 * gives the tenant "default" (the jobs carry it). */
static int setup(void **state)
{
    (void)state;
    const char *tmp = getenv("TMPDIR");
    snprintf(EF_DIR, sizeof EF_DIR, "%s/ws_engine_conc_XXXXXX", tmp ? tmp : "/tmp");
    if (!mkdtemp(EF_DIR)) return -1;
    char path[320];
    snprintf(path, sizeof path, "%s/tenant.db", EF_DIR);
    ws_store *st = NULL;
    ws_error err = {0};
    ws_status s = ws_store_open(path, WS_STORE_DURABILITY_NORMAL, 1, &st, &err);
    if (s == WS_OK) s = ws_store_tenant_ensure(st, "default", &EF_TENANT, &err);
    ws_store_close(st);
    if (s != WS_OK) fprintf(stderr, "setup: %s\n", err.msg);
    return s == WS_OK ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return ws_test_rm_tree(EF_DIR);
}

/* ---- continuous batching (issue 15) ------------------------------------------ */
/* Batch sizes as the engine reports them (on_batch, on the commit thread once
 * the batch is answered); with hold set, the commit stage stays inside the
 * callback of its next batch until the test clears it. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int sizes[16], n, hold;
} batches = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {0}, 0, 0};

static void record_batch(int n_jobs, int n_steps, int n_queries)
{
    (void)n_steps, (void)n_queries;
    pthread_mutex_lock(&batches.mu);
    if (batches.n < 16) batches.sizes[batches.n] = n_jobs;
    batches.n++;
    pthread_cond_broadcast(&batches.cv);
    while (batches.hold) pthread_cond_wait(&batches.cv, &batches.mu);
    pthread_mutex_unlock(&batches.mu);
}

/* Waits (up to 5 s) until n batches were reported: a job completes before its
 * batch is reported. Returns how many were. */
static int batches_reported(int n)
{
    pthread_mutex_lock(&batches.mu);
    for (int64_t until = ws_clock_mono_us() + 5000000;
         batches.n < n && ws_clock_mono_us() < until;) {
        pthread_mutex_unlock(&batches.mu);
        usleep(1000);
        pthread_mutex_lock(&batches.mu);
    }
    int got = batches.n;
    pthread_mutex_unlock(&batches.mu);
    return got;
}

static void wait_done(ef_waiter *w)
{
    pthread_mutex_lock(&w->mu);
    while (!w->done) pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
}

/* An engine of cfg (its directory EF_DIR/name) serving a new model "tiny"
 * without training, n sessions on it, and a connection of the test's own. */
static void tiny_engine(const char *name, ws_engine_config *cfg, ws_engine **e, ws_store **st,
                        char (*sess)[WS_STORE_ID_LEN + 1], int n)
{
    char dir[300];
    snprintf(dir, sizeof dir, "%s/%s", EF_DIR, name);
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(cfg->data_dir, sizeof cfg->data_dir, "%s", dir);
    snprintf(cfg->db_path, sizeof cfg->db_path, "%s/worldstate.db", dir);
    ws_error err = {0};
    int64_t tenant = 0;
    assert_int_equal(ws_store_open(cfg->db_path, cfg->durability, 1, st, &err), WS_OK);
    assert_int_equal(ws_store_tenant_ensure(*st, "default", &tenant, &err), WS_OK);
    assert_int_equal(tenant, EF_TENANT); /* the jobs carry EF_TENANT */
    assert_int_equal(ws_engine_start(cfg, e, &err), WS_OK);
    ws_model_config tiny = ef_tiny_config();
    ws_job *j = ef_create_job("tiny", &tiny);
    j->training.enabled = 0; /* no training pass between the batches */
    ef_run_on(*e, j);
    assert_int_equal(j->result.status, WS_OK);
    ws_job_free(j);
    ws_store_model m = {0};
    assert_int_equal(ws_store_model_find(*st, "tiny", &m, &err), WS_OK);
    for (int i = 0; i < n; i++)
        assert_int_equal(ws_store_session_create(*st, tenant, m.id, NULL, 0, 0, m.current_version,
                                                 0, sess[i], &err),
                         WS_OK);
    ws_store_model_clear(&m);
}

/* With a batch wait of 200 ms, a lone client's step runs at once (the old
 * engine waited the whole 200 ms for a batch to fill); steps submitted while a
 * batch runs form the next batch together, each session at most once in it,
 * its steps in order. */
static void test_continuous_batching(void **state)
{
    (void)state;
    enum { WAIT_US = 200000, N = 7 };
    ws_engine_config cfg = ef_engine_config("");
    cfg.batch_wait_us = WAIT_US;
    cfg.on_batch = record_batch;
    ws_engine *e = NULL;
    ws_store *st = NULL;
    char sess[N + 1][WS_STORE_ID_LEN + 1];
    tiny_engine("batching", &cfg, &e, &st, sess, N + 1);
    ws_job *j;

    /* one client, step after step: no batch wait in any of them */
    int64_t worst = 0;
    for (int i = 0; i < 5; i++) {
        j = ef_step_job(sess[0], -1);
        int64_t t0 = ws_clock_mono_us();
        ef_run_on(e, j);
        int64_t dt = ws_clock_mono_us() - t0;
        assert_int_equal(j->result.status, WS_OK);
        assert_int_equal(j->result.step, i + 1);
        if (dt > worst) worst = dt;
        ws_job_free(j);
    }
    printf("lone steps with --batch-wait-us %d: longest %.1f ms\n", WAIT_US, worst / 1e3);
    assert_true(worst < WAIT_US / 4);

    /* a step is being committed (held in on_batch), and the engine thread is
     * held by an admin job that waits for that commit; meanwhile N sessions
     * step, one of them twice */
    const int before = 5;
    assert_int_equal(batches_reported(before), before);
    pthread_mutex_lock(&batches.mu);
    batches.hold = 1;
    pthread_mutex_unlock(&batches.mu);
    ef_waiter w[N + 3];
    ws_job *jobs[N + 3];
    for (int i = 0; i < N + 2; i++) {
        w[i] = (ef_waiter){PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
        jobs[i] = ef_step_job(sess[i <= N ? i : 1], -1);
    }
    ef_submit_on(e, jobs[0], &w[0]);
    pthread_mutex_lock(&batches.mu);
    while (batches.n == before) pthread_cond_wait(&batches.cv, &batches.mu);
    pthread_mutex_unlock(&batches.mu);
    w[N + 2] = (ef_waiter){PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    jobs[N + 2] = ef_job_new(WS_JOB_TRAINING_SET, "");
    snprintf(jobs[N + 2]->model_name, sizeof jobs[N + 2]->model_name, "tiny");
    jobs[N + 2]->training_fields = WS_SRV_TRAINING_ENABLED; /* enabled = 0, as it is */
    ef_submit_on(e, jobs[N + 2], &w[N + 2]);
    while (ws_engine_queue_depth(e) > 0) usleep(1000); /* the engine thread has it */
    for (int i = 1; i < N + 2; i++) ef_submit_on(e, jobs[i], &w[i]);
    pthread_mutex_lock(&batches.mu);
    batches.hold = 0;
    pthread_cond_broadcast(&batches.cv);
    pthread_mutex_unlock(&batches.mu);
    for (int i = 0; i < N + 3; i++) {
        wait_done(&w[i]);
        assert_int_equal(jobs[i]->result.status, WS_OK);
    }
    assert_int_equal(jobs[0]->result.step, 6);
    assert_int_equal(jobs[1]->result.step, 1); /* sess[1]'s two steps, in order */
    assert_int_equal(jobs[N + 1]->result.step, 2);
    for (int i = 0; i < N + 3; i++) ws_job_free(jobs[i]);
    assert_int_equal(batches_reported(before + 3), before + 3);
    pthread_mutex_lock(&batches.mu);
    assert_int_equal(batches.sizes[before], 1);
    assert_int_equal(batches.sizes[before + 1], N); /* all of them but sess[1]'s second */
    assert_int_equal(batches.sizes[before + 2], 1);
    pthread_mutex_unlock(&batches.mu);
    ws_engine_free(e);
    ws_store_close(st);
}

/* The state stored for session `id` (owned by the caller: ws_store_session_clear). */
static ws_store_session stored_state(ws_store *st, const char *id)
{
    ws_store_session s = {0};
    ws_error err = {0};
    assert_int_equal(ws_store_session_get(st, EF_TENANT, id, 1, &s, &err), WS_OK);
    assert_true(s.rows > 0 && s.cols > 0);
    return s;
}

/* Steps of sessions sess[1..n] computed as one batch, once `before` batches
 * were reported: a step of sess[0] is held in its commit (on_batch) and the
 * engine thread by an admin job that waits for that commit while they are
 * queued. Each job is in jobs[1..n], done. */
static void step_as_one_batch(ws_engine *e, char (*sess)[WS_STORE_ID_LEN + 1], int n, ws_job **jobs,
                              int before)
{
    ef_waiter w[66];
    assert_true(n + 2 <= 66 && before + 2 <= 16);
    assert_int_equal(batches_reported(before), before);
    pthread_mutex_lock(&batches.mu);
    batches.hold = 1;
    pthread_mutex_unlock(&batches.mu);
    for (int i = 0; i <= n + 1; i++)
        w[i] = (ef_waiter){PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    jobs[0] = ef_step_job(sess[0], -1);
    ef_submit_on(e, jobs[0], &w[0]);
    pthread_mutex_lock(&batches.mu);
    while (batches.n == before) pthread_cond_wait(&batches.cv, &batches.mu);
    pthread_mutex_unlock(&batches.mu);
    jobs[n + 1] = ef_job_new(WS_JOB_TRAINING_SET, "");
    snprintf(jobs[n + 1]->model_name, sizeof jobs[n + 1]->model_name, "tiny");
    jobs[n + 1]->training_fields = WS_SRV_TRAINING_ENABLED; /* enabled = 0, as it is */
    ef_submit_on(e, jobs[n + 1], &w[n + 1]);
    while (ws_engine_queue_depth(e) > 0) usleep(1000); /* the engine thread has it */
    for (int i = 1; i <= n; i++) {
        jobs[i] = ef_step_job(sess[i], -1);
        ef_submit_on(e, jobs[i], &w[i]);
    }
    pthread_mutex_lock(&batches.mu);
    batches.hold = 0;
    pthread_cond_broadcast(&batches.cv);
    pthread_mutex_unlock(&batches.mu);
    for (int i = 0; i <= n + 1; i++) {
        wait_done(&w[i]);
        assert_int_equal(jobs[i]->result.status, WS_OK);
    }
    ws_job_free(jobs[0]);
    ws_job_free(jobs[n + 1]);
    assert_int_equal(batches_reported(before + 2), before + 2);
    pthread_mutex_lock(&batches.mu);
    assert_int_equal(batches.sizes[before + 1], n);
    pthread_mutex_unlock(&batches.mu);
}

/* A batch larger than a pass's chunk (WS_EXEC_POOL_CHUNK trajectories, on one
 * thread or on each of several) answers and steps every session, bit for bit,
 * as a session stepped alone: twice, from W_0 and then from the stored states. */
static void test_batch_in_chunks(void **state)
{
    (void)state;
    enum { N = 21 }; /* chunks of 8, 8 and 5 */
    ws_engine_config cfg = ef_engine_config("");
    cfg.max_batch = 64;
    cfg.on_batch = record_batch;
    ws_engine *e = NULL;
    ws_store *st = NULL;
    char sess[N + 2][WS_STORE_ID_LEN + 1]; /* the held one, N, the one alone */
    tiny_engine("chunks", &cfg, &e, &st, sess, N + 2);
    pthread_mutex_lock(&batches.mu);
    batches.n = 0;
    pthread_mutex_unlock(&batches.mu);
    for (int round = 1; round <= 2; round++) {
        ws_job *jobs[N + 2], *alone = ef_step_job(sess[N + 1], -1);
        ef_run_on(e, alone);
        assert_int_equal(alone->result.status, WS_OK);
        step_as_one_batch(e, sess, N, jobs, 3 * round - 2); /* after `alone`'s */
        for (int i = 1; i <= N; i++) {
            assert_int_equal(jobs[i]->result.step, round);
            assert_int_equal(jobs[i]->result.n_p, alone->result.n_p);
            assert_memory_equal(jobs[i]->result.p, alone->result.p,
                                sizeof(float) * (size_t)alone->result.n_p);
            ws_job_free(jobs[i]);
        }
        ws_job_free(alone);
    }
    ws_store_session want = stored_state(st, sess[N + 1]);
    for (int i = 1; i <= N; i++) {
        ws_store_session got = stored_state(st, sess[i]);
        assert_memory_equal(got.state, want.state, sizeof(float) * (size_t)want.rows * want.cols);
        ws_store_session_clear(&got);
    }
    ws_store_session_clear(&want);
    ws_engine_free(e);
    ws_store_close(st);
}

/* ---- training never stalls serving (issue 12 item 4) ------------------------ */
/* With hold set, the training thread stays at the start of its next AdamW step
 * (on_training_update) until the test clears it. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int hold, entered;
} update_gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};

static void hold_update(void)
{
    pthread_mutex_lock(&update_gate.mu);
    update_gate.entered++;
    pthread_cond_broadcast(&update_gate.cv);
    while (update_gate.hold) pthread_cond_wait(&update_gate.cv, &update_gate.mu);
    pthread_mutex_unlock(&update_gate.mu);
}

/* Waits up to 60 s for w: a job the engine never answers fails the test
 * instead of hanging it. */
static int wait_done_60s(ef_waiter *w)
{
    for (int64_t until = ws_clock_mono_us() + 60000000; ws_clock_mono_us() < until;) {
        if (ef_waiter_done(w)) return 1;
        usleep(1000);
    }
    return 0;
}

/* step_job's step replayed on w_prev by version `version` loaded from its file,
 * on a backend of its own: the answers must be the served ones, bit for bit. */
static void expect_replayed(ws_store *st, const char *dir, int64_t model, int64_t version,
                            const float *w_prev, const float *p_served)
{
    static const char *const fact[3][2] = {
        {"mary", "kitchen"}, {"mary", "kitchen"}, {"john", "garden"}};
    ws_backend *be = NULL;
    ws_model *m = NULL;
    ws_exec *x = NULL;
    ws_batch *b = NULL;
    float *w = NULL, p[2];
    ws_error err = {0};
    assert_int_equal(ws_backend_cpu_new(&be, 0, &err), WS_OK);
    assert_int_equal(ws_srv_version_load(st, dir, model, version, be, &m, &err), WS_OK);
    assert_int_equal(ws_exec_new(&x, m, &err), WS_OK);
    assert_int_equal(ws_batch_new(&b, ws_model_config_of(m)), WS_OK);
    assert_int_equal(ws_batch_begin_traj(b, 0), WS_OK);
    for (int f = 0; f < 3; f++) {
        ws_sym syms[2];
        for (int k = 0; k < 2; k++)
            syms[k] = ws_vocab_sym(ws_model_vocab(m), fact[f][k], strlen(fact[f][k]), 0);
        assert_int_equal(f == 0 ? ws_batch_add_instr_syms(b, syms, 2, 1)
                                : ws_batch_add_query_syms(b, syms, 2, -1),
                         WS_OK);
    }
    size_t T = ws_model_state_floats(m);
    assert_int_equal(ws_model_state_alloc(m, 1, &w, &err), WS_OK);
    assert_int_equal(ws_backend_upload(be, w, w_prev, sizeof(float) * T), WS_OK);
    ws_step_result res;
    assert_int_equal(ws_exec_step(x, b, w, w, WS_STEP_INFER, 1.0f, p, &res, &err), WS_OK);
    assert_memory_equal(p, p_served, sizeof p);
    ws_backend_release(be, w);
    ws_batch_free(b);
    ws_exec_free(x);
    ws_model_free(m);
    ws_backend_free(be);
}

static int64_t serving_version(ws_engine *e, int64_t model)
{
    ws_engine_model_info info;
    assert_true(ws_engine_model_info_of(e, model, &info));
    return info.version;
}

/* A step is answered while the training thread is inside an AdamW step (held
 * there), by the version served; once that update is published, the next
 * step's batch is answered by it, bit for bit as its file answers, and logs
 * it; the version file holds no AdamW state, which the optimizer file saved at
 * shutdown does. */
static void test_training_does_not_block_serving(void **state)
{
    (void)state;
    char dir[300], path[400];
    snprintf(dir, sizeof dir, "%s/training", EF_DIR);
    assert_int_equal(mkdir(dir, 0700), 0);
    ws_engine_config cfg = ef_engine_config(dir);
    cfg.on_training_update = hold_update;
    ws_engine *e = NULL;
    ws_store *st = NULL;
    ws_error err = {0};
    int64_t tenant = 0;
    assert_int_equal(ws_store_open(cfg.db_path, cfg.durability, 1, &st, &err), WS_OK);
    assert_int_equal(ws_store_tenant_ensure(st, "default", &tenant, &err), WS_OK);
    assert_int_equal(ws_engine_start(&cfg, &e, &err), WS_OK);
    ws_model_config tiny = ef_tiny_config();
    ws_job *j = ef_create_job("tiny", &tiny);
    j->training.update_every = 1; /* an AdamW step per example */
    j->training.publish_every = 1; /* a candidate of each */
    j->training.gate = 0;         /* and every one published */
    j->training.holdout = 0;
    ef_run_on(e, j);
    assert_int_equal(j->result.status, WS_OK);
    ws_job_free(j);
    ws_store_model m = {0};
    assert_int_equal(ws_store_model_find(st, "tiny", &m, &err), WS_OK);
    int64_t id = m.id;
    ws_store_model_clear(&m);
    char sess[WS_STORE_ID_LEN + 1];
    assert_int_equal(ws_store_session_create(st, tenant, id, NULL, 0, 0, 1, 0, sess, &err), WS_OK);

    pthread_mutex_lock(&update_gate.mu);
    update_gate.hold = 1;
    pthread_mutex_unlock(&update_gate.mu);
    /* the first step is an example: the training thread takes it and holds */
    j = ef_step_job(sess, -1);
    ef_run_on(e, j);
    assert_int_equal(j->result.status, WS_OK);
    ws_job_free(j);
    pthread_mutex_lock(&update_gate.mu);
    for (int64_t until = ws_clock_mono_us() + 60000000;
         !update_gate.entered && ws_clock_mono_us() < until;) {
        pthread_mutex_unlock(&update_gate.mu);
        usleep(1000);
        pthread_mutex_lock(&update_gate.mu);
    }
    assert_int_equal(update_gate.entered, 1);
    pthread_mutex_unlock(&update_gate.mu);

    /* training is inside its update: steps are answered meanwhile, by version 1 */
    for (int i = 0; i < 3; i++) {
        ef_waiter w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
        j = ef_step_job(sess, -1);
        ef_submit_on(e, j, &w);
        assert_true(wait_done_60s(&w));
        assert_int_equal(j->result.status, WS_OK);
        assert_int_equal(j->result.step, 2 + i);
        assert_int_equal(j->result.model_version, 1);
        ws_job_free(j);
    }
    assert_int_equal(serving_version(e, id), 1);

    /* let the update go (and every later one): version 2 is published */
    pthread_mutex_lock(&update_gate.mu);
    update_gate.hold = 0;
    pthread_cond_broadcast(&update_gate.cv);
    pthread_mutex_unlock(&update_gate.mu);
    for (int64_t until = ws_clock_mono_us() + 60000000;
         serving_version(e, id) < 2 && ws_clock_mono_us() < until;)
        usleep(1000);
    int64_t v = serving_version(e, id);
    assert_true(v >= 2);
    /* served only once recorded: SQLite names it (or a later one) current */
    assert_int_equal(ws_store_model_find(st, "tiny", &m, &err), WS_OK);
    assert_true(m.current_version >= v);
    ws_store_model_clear(&m);
    /* the next step's batch answers with it, and its log entry names it: the
     * version's file replays that step bit for bit */
    ws_store_session before = {0};
    assert_int_equal(ws_store_session_get(st, tenant, sess, 1, &before, &err), WS_OK);
    j = ef_step_job(sess, -1);
    ef_run_on(e, j);
    assert_int_equal(j->result.status, WS_OK);
    assert_true(j->result.model_version >= v);
    int64_t step = j->result.step, answered = j->result.model_version;
    expect_replayed(st, dir, id, answered, before.state, j->result.p);
    ws_store_session_clear(&before);
    ws_job_free(j);
    ef_log_row row = {0};
    assert_int_equal(ws_store_log_page(st, tenant, sess, step - 1, 1, ef_keep_row, &row, &err), WS_OK);
    assert_int_equal(row.model_version, answered);

    /* version 2's file: parameters only */
    snprintf(path, sizeof path, "%s/models/tiny-v2.safetensors", dir);
    ws_st_file *f = NULL;
    assert_int_equal(ws_st_read(path, &f, &err), WS_OK);
    for (int i = 0; i < ws_st_count(f); i++) assert_null(strstr(ws_st_at(f, i)->name, "adam."));
    assert_null(ws_st_meta(f, "optim_steps"));
    ws_st_close(f);
    ws_engine_free(e);
    /* the AdamW state, saved when the training thread stopped */
    snprintf(path, sizeof path, "%s/models/tiny.optim.safetensors", dir);
    assert_int_equal(ws_st_read(path, &f, &err), WS_OK);
    assert_non_null(ws_st_meta(f, "optim_steps"));
    assert_true(atoi(ws_st_meta(f, "optim_steps")) >= 1);
    ws_st_close(f);
    ws_store_close(st);
    pthread_mutex_lock(&update_gate.mu);
    printf("training held inside update %d: 3 steps answered by version 1; version %lld "
           "published and served\n",
           update_gate.entered, (long long)v);
    pthread_mutex_unlock(&update_gate.mu);
}

/* ---- the pipeline (issue 15) ------------------------------------------------ */
/* What the callbacks of test_pipeline saw: each job's callback checks, through
 * a connection of the test's own, that what it acknowledges is committed, and
 * that the jobs of a session complete in the order they were submitted. */
enum { PIPE_SESSIONS = 12, PIPE_ROUNDS = 10, PIPE_THREADS = 4 };
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    ws_engine *e;
    ws_store *st;
    char sess[PIPE_SESSIONS + 1][WS_STORE_ID_LEN + 1]; /* the last: test_pipeline's reference */
    int64_t acked[PIPE_SESSIONS]; /* steps acknowledged so far, per session */
    int done, failed, uncommitted, out_of_order;
} pipe_seen = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

typedef struct {
    int sess;
    int64_t want; /* STEP: the step it makes; QUERY: the step it sees */
} pipe_job;

static void pipe_done(ws_job *j, void *user)
{
    const pipe_job *pj = user;
    pthread_mutex_lock(&pipe_seen.mu);
    ws_error err = {0};
    ws_store_session s = {0};
    ef_log_row r = {0};
    int committed =
        ws_store_session_get(pipe_seen.st, EF_TENANT, j->session, 0, &s, &err) == WS_OK &&
        s.step >= j->result.step;
    if (committed && j->kind == WS_JOB_STEP)
        committed = ws_store_log_page(pipe_seen.st, EF_TENANT, j->session, j->result.step - 1, 1,
                                      ef_keep_row, &r, &err) == WS_OK &&
                    r.step == j->result.step && r.answers[0] == '[';
    ws_store_session_clear(&s);
    pipe_seen.failed += j->result.status != WS_OK;
    pipe_seen.uncommitted += !committed;
    pipe_seen.out_of_order += j->result.step != pj->want;
    if (j->kind == WS_JOB_STEP) {
        pipe_seen.out_of_order += pipe_seen.acked[pj->sess] + 1 != j->result.step;
        pipe_seen.acked[pj->sess] = j->result.step;
    }
    pipe_seen.done++;
    pthread_cond_signal(&pipe_seen.cv);
    pthread_mutex_unlock(&pipe_seen.mu);
    ws_job_free(j);
}

/* Submits, without waiting, PIPE_ROUNDS steps (each expecting the step before
 * it) of every PIPE_THREADS-th session from the thread's own, and a query after
 * every third. */
static void *pipe_submit(void *arg)
{
    static pipe_job ctx[PIPE_SESSIONS][PIPE_ROUNDS][2];
    int t = (int)(intptr_t)arg;
    for (int k = 0; k < PIPE_ROUNDS; k++) {
        for (int i = t; i < PIPE_SESSIONS; i += PIPE_THREADS) {
            ws_job *j = ef_step_job(pipe_seen.sess[i], -1);
            j->expect_step = k;
            ctx[i][k][0] = (pipe_job){i, k + 1};
            j->done = pipe_done, j->user = &ctx[i][k][0];
            ws_error err = {0};
            if (ws_engine_submit(pipe_seen.e, j, &err) != WS_OK) abort();
            if (k % 3) continue;
            j = ef_job_new(WS_JOB_QUERY, pipe_seen.sess[i]);
            j->query = ef_facts(EF_QUERIES, NULL, 2), j->n_query = 2;
            ctx[i][k][1] = (pipe_job){i, k + 1};
            j->done = pipe_done, j->user = &ctx[i][k][1];
            if (ws_engine_submit(pipe_seen.e, j, &err) != WS_OK) abort();
        }
    }
    return NULL;
}

/* Steps and queries of many sessions submitted at once from several threads,
 * so that batches are computed while others are committed (and, with
 * WS_ENG_FLIGHTS, while others wait for their commit): every job succeeds, is
 * answered only once its step is committed, and a session's jobs complete in
 * the order they were sent (each step expects the one before it). Every
 * session is told the same, so each ends with the state, bit for bit, of a
 * session stepped alone one step at a time: a batch computed into the states
 * of a flight still in hand would commit another step's state. */
static void test_pipeline(void **state)
{
    (void)state;
    ws_engine_config cfg = ef_engine_config("");
    cfg.max_batch = 5; /* batches of a part of the sessions, in flight beside each other */
    tiny_engine("pipeline", &cfg, &pipe_seen.e, &pipe_seen.st, pipe_seen.sess, PIPE_SESSIONS + 1);
    pthread_t th[PIPE_THREADS];
    for (int t = 0; t < PIPE_THREADS; t++)
        assert_int_equal(pthread_create(&th[t], NULL, pipe_submit, (void *)(intptr_t)t), 0);
    for (int t = 0; t < PIPE_THREADS; t++) assert_int_equal(pthread_join(th[t], NULL), 0);
    const int total = PIPE_SESSIONS * (PIPE_ROUNDS + (PIPE_ROUNDS + 2) / 3);
    pthread_mutex_lock(&pipe_seen.mu);
    while (pipe_seen.done < total) pthread_cond_wait(&pipe_seen.cv, &pipe_seen.mu);
    pthread_mutex_unlock(&pipe_seen.mu);
    assert_int_equal(pipe_seen.failed, 0);
    assert_int_equal(pipe_seen.uncommitted, 0);
    assert_int_equal(pipe_seen.out_of_order, 0);
    for (int i = 0; i < PIPE_SESSIONS; i++) assert_int_equal(pipe_seen.acked[i], PIPE_ROUNDS);
    const char *alone = pipe_seen.sess[PIPE_SESSIONS];
    for (int k = 0; k < PIPE_ROUNDS; k++) {
        ws_job *j = ef_step_job(alone, k);
        ef_run_on(pipe_seen.e, j);
        assert_int_equal(j->result.status, WS_OK);
        ws_job_free(j);
    }
    ws_store_session want = stored_state(pipe_seen.st, alone);
    for (int i = 0; i < PIPE_SESSIONS; i++) {
        ws_store_session got = stored_state(pipe_seen.st, pipe_seen.sess[i]);
        assert_int_equal(got.step, PIPE_ROUNDS);
        assert_int_equal(got.rows * got.cols, want.rows * want.cols);
        assert_memory_equal(got.state, want.state, sizeof(float) * (size_t)want.rows * want.cols);
        ws_store_session_clear(&got);
    }
    ws_store_session_clear(&want);
    ws_engine_free(pipe_seen.e);
    ws_store_close(pipe_seen.st);
}


int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_continuous_batching),
        cmocka_unit_test(test_batch_in_chunks),
        cmocka_unit_test(test_training_does_not_block_serving),
        cmocka_unit_test(test_pipeline),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
