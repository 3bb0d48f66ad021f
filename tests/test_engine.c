/* test_engine.c — the engine library through its native interface (engine.h),
 * without HTTP: an engine on a temporary data directory creates a small random
 * model, then steps, queries and labels a session; each answer is checked
 * against what storage holds (the session's step, the log's answers and
 * labels), and the refusals (expect_step, an unknown session) come back as
 * native results; model creation, import and online training never hold up
 * serving. */
#include <math.h>
#include <pthread.h>
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
#include "test_util.h"

static char DIR_[256];
static ws_engine *E;
static ws_store *ST;
static int64_t TENANT;
static char SESSION[WS_STORE_ID_LEN + 1];

/* ---- submitting a job and waiting for its callback ------------------------ */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
} waiter;

static void on_done(ws_job *j, void *user)
{
    (void)j;
    waiter *w = user;
    pthread_mutex_lock(&w->mu);
    w->done = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static int waiter_done(waiter *w)
{
    pthread_mutex_lock(&w->mu);
    int done = w->done;
    pthread_mutex_unlock(&w->mu);
    return done;
}

/* Submits j to e; its callback marks w. */
static void submit_on(ws_engine *e, ws_job *j, waiter *w)
{
    ws_error err = {0};
    j->done = on_done;
    j->user = w;
    assert_int_equal(ws_engine_submit(e, j, &err), WS_OK);
}

/* Submits j to e and returns once its callback ran; the result is in j->result. */
static void run_on(ws_engine *e, ws_job *j)
{
    waiter w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    submit_on(e, j, &w);
    pthread_mutex_lock(&w.mu);
    while (!w.done) pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
}

static void run(ws_job *j)
{
    run_on(E, j);
}

static ws_job *job_new(ws_job_kind kind, const char *session)
{
    ws_job *j = calloc(1, sizeof *j);
    assert_non_null(j);
    j->kind = kind;
    j->tenant = TENANT;
    j->expect_step = -1;
    snprintf(j->session, sizeof j->session, "%s", session);
    return j;
}

/* facts[i] = "sym sym ..." (space-separated symbols), value as given. */
static ws_job_fact *facts(const char *const *text, const int *value, int n)
{
    ws_job_fact *f = calloc((size_t)n, sizeof *f);
    assert_non_null(f);
    for (int i = 0; i < n; i++) {
        char buf[128];
        const char *syms[WS_MAX_FACT_LEN];
        int lens[WS_MAX_FACT_LEN], k = 0;
        snprintf(buf, sizeof buf, "%s", text[i]);
        char *save = NULL;
        for (char *p = strtok_r(buf, " ", &save); p; p = strtok_r(NULL, " ", &save)) {
            syms[k] = p;
            lens[k++] = (int)strlen(p);
        }
        ws_error err = {0};
        assert_int_equal(ws_job_fact_syms(&f[i], syms, lens, k, &err), WS_OK);
        f[i].value = value ? value[i] : -1;
    }
    return f;
}

static const char *const QUERIES[] = {"mary kitchen", "john garden"};
static const char QUERIES_JSON[] =
    "[{\"fact\":[\"mary\",\"kitchen\"]},{\"fact\":[\"john\",\"garden\"]}]";

static ws_job *step_job(int64_t expect_step)
{
    static const char *const instr[] = {"mary kitchen"};
    static const int val[] = {1};
    ws_job *j = job_new(WS_JOB_STEP, SESSION);
    j->expect_step = expect_step;
    j->instr = facts(instr, val, 1), j->n_instr = 1;
    j->query = facts(QUERIES, NULL, 2), j->n_query = 2;
    j->instr_json = strdup("[{\"fact\":[\"mary\",\"kitchen\"],\"value\":true}]");
    j->query_json = strdup(QUERIES_JSON);
    assert_true(j->instr_json && j->query_json);
    return j;
}

/* Labels for step 1's two queries. */
static ws_job *labels_job(int a, int b)
{
    ws_job *j = job_new(WS_JOB_LABELS, SESSION);
    char text[32];
    snprintf(text, sizeof text, "[%s,%s]", a ? "true" : "false", b ? "true" : "false");
    j->label_step = 1;
    j->labels = malloc(2 * sizeof(int));
    j->labels_json = strdup(text);
    assert_true(j->labels && j->labels_json);
    j->labels[0] = a, j->labels[1] = b, j->n_labels = 2;
    return j;
}

/* ---- what storage holds ----------------------------------------------------- */
static int64_t stored_step(void)
{
    ws_store_session s = {0};
    ws_error err = {0};
    assert_int_equal(ws_store_session_get(ST, TENANT, SESSION, 0, &s, &err), WS_OK);
    int64_t step = s.step;
    ws_store_session_clear(&s);
    return step;
}

typedef struct {
    int64_t step, model_version;
    char answers[512], labels[64];
} log_row;

static ws_status keep_row(void *ctx, const ws_store_log_entry *e)
{
    log_row *r = ctx;
    r->step = e->step, r->model_version = e->model_version;
    snprintf(r->answers, sizeof r->answers, "%s", e->answers_json);
    snprintf(r->labels, sizeof r->labels, "%s", e->labels_json ? e->labels_json : "");
    return WS_OK;
}

static log_row stored_log(int64_t step)
{
    log_row r = {0};
    ws_error err = {0};
    assert_int_equal(ws_store_log_page(ST, TENANT, SESSION, step - 1, 1, keep_row, &r, &err),
                     WS_OK);
    assert_int_equal(r.step, step);
    return r;
}

static ws_job *create_job(const char *name, const ws_model_config *c)
{
    ws_job *j = job_new(WS_JOB_MODEL_CREATE, "");
    snprintf(j->model_name, sizeof j->model_name, "%s", name);
    j->cfg = *c;
    j->training = ws_srv_training_default();
    j->seed = 7;
    return j;
}

/* d=16, 2 heads, T=4, 1+1 layers, 64 symbols */
static ws_model_config tiny_config(void)
{
    ws_model_config c = ws_model_config_default();
    c.d = 16, c.n_heads = 2, c.n_state = 4;
    c.n_upd_layers = 1, c.n_ext_layers = 1, c.vocab_cap = 64;
    return c;
}

/* ---- setup: an engine, a small random model, a session on it ----------------- */
static ws_engine_config engine_config(const char *dir)
{
    ws_engine_config cfg = ws_engine_config_default();
    snprintf(cfg.data_dir, sizeof cfg.data_dir, "%s", dir);
    snprintf(cfg.db_path, sizeof cfg.db_path, "%s/worldstate.db", dir);
    cfg.force_cpu = 1;
    cfg.max_batch = 8;
    cfg.batch_wait_us = 0;
    return cfg;
}

static int setup(void **state)
{
    (void)state;
    const char *tmp = getenv("TMPDIR");
    snprintf(DIR_, sizeof DIR_, "%s/ws_engine_XXXXXX", tmp ? tmp : "/tmp");
    if (!mkdtemp(DIR_)) return -1;
    ws_engine_config cfg = engine_config(DIR_);
    ws_error err = {0};
    if (ws_store_open(cfg.db_path, cfg.durability, 1, &ST, &err) != WS_OK ||
        ws_store_tenant_ensure(ST, "default", &TENANT, &err) != WS_OK ||
        ws_engine_start(&cfg, &E, &err) != WS_OK) {
        fprintf(stderr, "setup: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    ws_engine_free(E);
    ws_store_close(ST);
    return ws_test_rm_tree(DIR_);
}

static void test_model_and_session(void **state)
{
    (void)state;
    ws_model_config tiny = tiny_config();
    ws_job *j = create_job("tiny", &tiny);
    run(j);
    assert_int_equal(j->result.status, WS_OK);
    ws_job_free(j);
    /* the same name again: a conflict, nothing created */
    ws_model_config def = ws_model_config_default();
    j = create_job("tiny", &def);
    run(j);
    assert_int_equal(j->result.status, WS_ERR_CONFLICT);
    ws_job_free(j);

    ws_store_model m = {0};
    ws_error err = {0};
    assert_int_equal(ws_store_model_find(ST, "tiny", &m, &err), WS_OK);
    assert_int_equal(m.current_version, 1);
    assert_int_equal(
        ws_store_session_create(ST, TENANT, m.id, NULL, 0, 0, m.current_version, 10, SESSION, &err),
        WS_OK);
    ws_engine_model_info info;
    assert_true(ws_engine_model_info_of(E, m.id, &info));
    assert_string_equal(info.name, "tiny");
    assert_int_equal(info.version, 1);
    ws_store_model_clear(&m);
}

static void test_step_query_labels(void **state)
{
    (void)state;
    ws_job *j = step_job(0);
    run(j);
    assert_int_equal(j->result.status, WS_OK);
    assert_int_equal(j->result.step, 1);
    assert_int_equal(j->result.model_version, 1);
    assert_int_equal(j->result.n_p, 2);
    float p[2];
    memcpy(p, j->result.p, sizeof p);
    ws_job_free(j);
    for (int i = 0; i < 2; i++) assert_true(p[i] > 0 && p[i] < 1);
    /* storage: the session moved to step 1, and the log holds these answers */
    assert_int_equal(stored_step(), 1);
    log_row row = stored_log(1);
    assert_int_equal(row.model_version, 1);
    const char *at = row.answers;
    for (int i = 0; i < 2; i++) {
        at = strstr(at, "\"p\":");
        assert_non_null(at);
        at += 4;
        assert_true((float)strtod(at, NULL) == p[i]);
    }
    assert_string_equal(row.labels, "");

    /* expect_step 0 again: refused with the session's step, nothing applied */
    j = step_job(0);
    run(j);
    assert_int_equal(j->result.status, WS_ERR_CONFLICT);
    assert_int_equal(j->result.why, WS_JOB_STEP_CONFLICT);
    assert_int_equal(j->result.step, 1);
    ws_job_free(j);
    assert_int_equal(stored_step(), 1);

    /* queries on W_1: the step's own answers, and no new step */
    j = job_new(WS_JOB_QUERY, SESSION);
    j->query = facts(QUERIES, NULL, 2), j->n_query = 2;
    run(j);
    assert_int_equal(j->result.status, WS_OK);
    assert_int_equal(j->result.step, 1);
    assert_int_equal(j->result.n_p, 2);
    for (int i = 0; i < 2; i++) assert_true(fabsf(j->result.p[i] - p[i]) < 1e-5f);
    ws_job_free(j);
    assert_int_equal(stored_step(), 1);

    /* labels for step 1: stored in the log; a different set without replace conflicts */
    j = labels_job(1, 0);
    run(j);
    assert_int_equal(j->result.status, WS_OK);
    assert_int_equal(j->result.step, 1);
    ws_job_free(j);
    assert_string_equal(stored_log(1).labels, "[true,false]");
    j = labels_job(0, 0);
    run(j);
    assert_int_equal(j->result.status, WS_ERR_CONFLICT);
    assert_int_equal(j->result.why, WS_JOB_LABELS_CONFLICT);
    ws_job_free(j);
    assert_string_equal(stored_log(1).labels, "[true,false]");

    /* the next step, without expect_step, is step 2 */
    j = step_job(-1);
    run(j);
    assert_int_equal(j->result.status, WS_OK);
    assert_int_equal(j->result.step, 2);
    ws_job_free(j);
    assert_int_equal(stored_step(), 2);
}

static void test_unknown_session(void **state)
{
    (void)state;
    static const char *const kinds[] = {"step", "query", "labels"};
    for (int k = 0; k < 3; k++) {
        ws_job *j = job_new(k == 0   ? WS_JOB_STEP
                            : k == 1 ? WS_JOB_QUERY
                                     : WS_JOB_LABELS,
                            "0123456789abcdef0123456789abcdef");
        if (k == 0) {
            j->instr_json = strdup("[]");
            j->query_json = strdup("[]");
        }
        if (k == 1) j->query = facts(QUERIES, NULL, 2), j->n_query = 2;
        if (k == 2) {
            j->label_step = 1;
            j->labels = calloc(1, sizeof(int));
            j->n_labels = 1;
            j->labels_json = strdup("[false]");
        }
        run(j);
        if (j->result.status != WS_ERR_NOTFOUND)
            fprintf(stderr, "%s: %s\n", kinds[k], j->result.err.msg);
        assert_int_equal(j->result.status, WS_ERR_NOTFOUND);
        assert_int_equal(j->result.why, WS_JOB_FAILED);
        assert_true(j->result.err.msg[0] != '\0');
        ws_job_free(j);
    }
    assert_int_equal(stored_step(), 2);
}

/* ---- model memory (issue 14, item 1) -------------------------------------- */
static void add_bytes(void *ctx, const ws_engine_model_info *m)
{
    *(size_t *)ctx += m->memory_bytes;
}

static ws_engine *engine_with_bound(const char *dir, size_t max)
{
    ws_engine_config cfg = engine_config(dir);
    cfg.max_model_memory = max;
    ws_engine *e = NULL;
    ws_error err = {0};
    if (ws_engine_start(&cfg, &e, &err) != WS_OK) fprintf(stderr, "start: %s\n", err.msg);
    assert_non_null(e);
    return e;
}

static void expect_too_large(ws_engine *e, const char *name, const ws_model_config *c)
{
    ws_job *j = create_job(name, c);
    run_on(e, j);
    printf("%s: %s\n", name, j->result.err.msg);
    assert_int_equal(j->result.status, WS_ERR_INVALID);
    assert_int_equal(j->result.why, WS_JOB_MODEL_TOO_LARGE);
    assert_non_null(strstr(j->result.err.msg, "bytes"));
    ws_job_free(j);
}

/* d=4096 passed the old d²·layers bound and took the daemon to 24 GB: refused
 * before anything is allocated (this process never grows past 1 GiB). A model
 * that fits alone but not beside the loaded ones is refused too; the bound is
 * max_model_memory. */
static void test_model_memory_bound(void **state)
{
    (void)state;
    char dir[300];
    snprintf(dir, sizeof dir, "%s/bound", DIR_);
    assert_int_equal(mkdir(dir, 0700), 0);
    ws_engine *e = engine_with_bound(dir, 0); /* first start: the default model */
    size_t used = 0;
    ws_engine_models_each(e, add_bytes, &used);
    ws_engine_free(e);
    assert_true(used > 0);

    ws_model_config tiny = tiny_config();
    ws_engine_config cfg = engine_config(dir);
    size_t tiny_bytes = 0;
    ws_error err = {0};
    assert_int_equal(ws_engine_model_bytes(&cfg, &tiny, &tiny_bytes, &err), WS_OK);
    /* Room for one tiny model beside the default, not two. */
    e = engine_with_bound(dir, used + tiny_bytes + tiny_bytes / 2);
    ws_model_config huge = ws_model_config_default();
    huge.d = 4096;
    expect_too_large(e, "huge", &huge);
    huge = ws_model_config_default();
    huge.vocab_cap = 1 << 24;
    expect_too_large(e, "vocab", &huge);
    huge = ws_model_config_default();
    huge.d_raw = 65536;
    expect_too_large(e, "raw", &huge);
    ws_job *j = create_job("a", &tiny);
    run_on(e, j);
    assert_int_equal(j->result.status, WS_OK);
    ws_job_free(j);
    expect_too_large(e, "b", &tiny);
    ws_engine_free(e);

    struct rusage ru;
    assert_int_equal(getrusage(RUSAGE_SELF, &ru), 0);
    printf("peak RSS of this test process: %ld KiB\n", ru.ru_maxrss);
    assert_true(ru.ru_maxrss < 1024 * 1024);
}

/* Runs one step (it must succeed) and raises *max to its wall time (µs). */
static void timed_step(int64_t *max)
{
    ws_job *j = step_job(-1);
    int64_t t0 = ws_clock_mono_us();
    run(j);
    int64_t dt = ws_clock_mono_us() - t0;
    assert_int_equal(j->result.status, WS_OK);
    if (dt > *max) *max = dt;
    ws_job_free(j);
}

/* Submits j and runs steps (each must succeed) until j completes: *max is the
 * longest of them, *n how many ran; returns j's duration (µs). */
static int64_t steps_beside(ws_job *j, int64_t *max, int64_t *n)
{
    waiter w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    int64_t t0 = ws_clock_mono_us();
    submit_on(E, j, &w);
    for (; !waiter_done(&w); (*n)++) timed_step(max);
    return ws_clock_mono_us() - t0;
}

/* A step's longest wait while a large model (6.5M parameters, a 100 MB
 * checkpoint with its AdamW state) is created beside it, against the longest
 * without: creation is built off the engine thread, so steps go on (before, a
 * step waited for all of it). */
static void test_creation_does_not_block_serving(void **state)
{
    (void)state;
    int64_t base_max = 0, during_max = 0, n_during = 0;
    for (int i = 0; i < 20; i++) timed_step(&base_max);
    ws_model_config big = ws_model_config_default();
    big.d = 256, big.n_heads = 8, big.n_upd_layers = 4, big.n_ext_layers = 4;
    ws_job *create = create_job("big", &big);
    int64_t c_us = steps_beside(create, &during_max, &n_during);
    printf("creation of d=256 4+4 layers: %.0f ms; longest step: %.1f ms without, %.1f ms "
           "during (%lld steps)\n",
           c_us / 1e3, base_max / 1e3, during_max / 1e3, (long long)n_during);
    assert_int_equal(create->result.status, WS_OK);
    ws_job_free(create);
    assert_true(n_during >= 2);
    assert_true(during_max < c_us / 2);
}

/* A step's longest wait while a 37 MB checkpoint (d=64, 140,000 symbols) is
 * imported beside it, against the import's duration: the checkpoint is loaded
 * and checked off the engine thread, so steps go on (before, a step waited for
 * the whole load). */
static void test_import_does_not_block_serving(void **state)
{
    (void)state;
    ws_model_config big = ws_model_config_default();
    big.d = 64, big.n_heads = 4, big.vocab_cap = 140000;
    ws_backend *be = NULL;
    ws_model *m = NULL;
    ws_error err = {0};
    char file[400];
    snprintf(file, sizeof file, "%s/models/.upload-test-import", DIR_);
    assert_int_equal(ws_backend_cpu_new(&be, 1, &err), WS_OK);
    assert_int_equal(ws_model_new(&m, &big, be, 11, &err), WS_OK);
    assert_int_equal(ws_checkpoint_save(m, file, 0, &err), WS_OK);
    ws_model_free(m);
    ws_backend_free(be);
    struct stat sb;
    assert_int_equal(stat(file, &sb), 0);
    int64_t base_max = 0, during_max = 0, n_during = 0;
    for (int i = 0; i < 20; i++) timed_step(&base_max);
    ws_job *imp = job_new(WS_JOB_MODEL_IMPORT, "");
    snprintf(imp->model_name, sizeof imp->model_name, "imported");
    imp->upload = strdup(file);
    assert_non_null(imp->upload);
    int64_t c_us = steps_beside(imp, &during_max, &n_during);
    printf("import of a %.1f MB checkpoint: %.0f ms; longest step: %.1f ms without, %.1f ms "
           "during (%lld steps)\n",
           sb.st_size / 1e6, c_us / 1e3, base_max / 1e3, during_max / 1e3, (long long)n_during);
    assert_int_equal(imp->result.status, WS_OK);
    assert_int_equal(imp->result.created, 1);
    ws_job_free(imp);
    assert_int_not_equal(access(file, F_OK), 0); /* the upload was consumed */
    assert_true(n_during >= 2);
    assert_true(during_max < c_us / 2);
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

static ws_job *step_of(const char session[WS_STORE_ID_LEN + 1])
{
    ws_job *j = step_job(-1);
    memcpy(j->session, session, WS_STORE_ID_LEN + 1);
    return j;
}

static void wait_done(waiter *w)
{
    pthread_mutex_lock(&w->mu);
    while (!w->done) pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
}

/* An engine of cfg (its directory DIR_/name) serving a new model "tiny"
 * without training, n sessions on it, and a connection of the test's own. */
static void tiny_engine(const char *name, ws_engine_config *cfg, ws_engine **e, ws_store **st,
                        char (*sess)[WS_STORE_ID_LEN + 1], int n)
{
    char dir[300];
    snprintf(dir, sizeof dir, "%s/%s", DIR_, name);
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(cfg->data_dir, sizeof cfg->data_dir, "%s", dir);
    snprintf(cfg->db_path, sizeof cfg->db_path, "%s/worldstate.db", dir);
    ws_error err = {0};
    int64_t tenant = 0;
    assert_int_equal(ws_store_open(cfg->db_path, cfg->durability, 1, st, &err), WS_OK);
    assert_int_equal(ws_store_tenant_ensure(*st, "default", &tenant, &err), WS_OK);
    assert_int_equal(tenant, TENANT); /* the jobs carry TENANT */
    assert_int_equal(ws_engine_start(cfg, e, &err), WS_OK);
    ws_model_config tiny = tiny_config();
    ws_job *j = create_job("tiny", &tiny);
    j->training.enabled = 0; /* no training pass between the batches */
    run_on(*e, j);
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
    ws_engine_config cfg = engine_config("");
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
        j = step_of(sess[0]);
        int64_t t0 = ws_clock_mono_us();
        run_on(e, j);
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
    waiter w[N + 3];
    ws_job *jobs[N + 3];
    for (int i = 0; i < N + 2; i++) {
        w[i] = (waiter){PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
        jobs[i] = step_of(sess[i <= N ? i : 1]);
    }
    submit_on(e, jobs[0], &w[0]);
    pthread_mutex_lock(&batches.mu);
    while (batches.n == before) pthread_cond_wait(&batches.cv, &batches.mu);
    pthread_mutex_unlock(&batches.mu);
    w[N + 2] = (waiter){PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    jobs[N + 2] = job_new(WS_JOB_TRAINING_SET, "");
    snprintf(jobs[N + 2]->model_name, sizeof jobs[N + 2]->model_name, "tiny");
    jobs[N + 2]->training_fields = WS_SRV_TRAINING_ENABLED; /* enabled = 0, as it is */
    submit_on(e, jobs[N + 2], &w[N + 2]);
    while (ws_engine_queue_depth(e) > 0) usleep(1000); /* the engine thread has it */
    for (int i = 1; i < N + 2; i++) submit_on(e, jobs[i], &w[i]);
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
static int wait_done_60s(waiter *w)
{
    for (int64_t until = ws_clock_mono_us() + 60000000; ws_clock_mono_us() < until;) {
        if (waiter_done(w)) return 1;
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
    snprintf(dir, sizeof dir, "%s/training", DIR_);
    assert_int_equal(mkdir(dir, 0700), 0);
    ws_engine_config cfg = engine_config(dir);
    cfg.on_training_update = hold_update;
    ws_engine *e = NULL;
    ws_store *st = NULL;
    ws_error err = {0};
    int64_t tenant = 0;
    assert_int_equal(ws_store_open(cfg.db_path, cfg.durability, 1, &st, &err), WS_OK);
    assert_int_equal(ws_store_tenant_ensure(st, "default", &tenant, &err), WS_OK);
    assert_int_equal(ws_engine_start(&cfg, &e, &err), WS_OK);
    ws_model_config tiny = tiny_config();
    ws_job *j = create_job("tiny", &tiny);
    j->training.update_every = 1; /* an AdamW step per example */
    j->training.gate = 0;         /* and every one published */
    j->training.holdout = 0;
    run_on(e, j);
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
    j = step_of(sess);
    run_on(e, j);
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
        waiter w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
        j = step_of(sess);
        submit_on(e, j, &w);
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
    j = step_of(sess);
    run_on(e, j);
    assert_int_equal(j->result.status, WS_OK);
    assert_true(j->result.model_version >= v);
    int64_t step = j->result.step, answered = j->result.model_version;
    expect_replayed(st, dir, id, answered, before.state, j->result.p);
    ws_store_session_clear(&before);
    ws_job_free(j);
    log_row row = {0};
    assert_int_equal(ws_store_log_page(st, tenant, sess, step - 1, 1, keep_row, &row, &err), WS_OK);
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
    char sess[PIPE_SESSIONS][WS_STORE_ID_LEN + 1];
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
    log_row r = {0};
    int committed =
        ws_store_session_get(pipe_seen.st, TENANT, j->session, 0, &s, &err) == WS_OK &&
        s.step >= j->result.step;
    if (committed && j->kind == WS_JOB_STEP)
        committed = ws_store_log_page(pipe_seen.st, TENANT, j->session, j->result.step - 1, 1,
                                      keep_row, &r, &err) == WS_OK &&
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
            ws_job *j = step_of(pipe_seen.sess[i]);
            j->expect_step = k;
            ctx[i][k][0] = (pipe_job){i, k + 1};
            j->done = pipe_done, j->user = &ctx[i][k][0];
            ws_error err = {0};
            if (ws_engine_submit(pipe_seen.e, j, &err) != WS_OK) abort();
            if (k % 3) continue;
            j = job_new(WS_JOB_QUERY, pipe_seen.sess[i]);
            j->query = facts(QUERIES, NULL, 2), j->n_query = 2;
            ctx[i][k][1] = (pipe_job){i, k + 1};
            j->done = pipe_done, j->user = &ctx[i][k][1];
            if (ws_engine_submit(pipe_seen.e, j, &err) != WS_OK) abort();
        }
    }
    return NULL;
}

/* Steps and queries of many sessions submitted at once from several threads,
 * so that batches are computed while others are committed: every job succeeds,
 * is answered only once its step is committed, and a session's jobs complete
 * in the order they were sent (each step expects the one before it). */
static void test_pipeline(void **state)
{
    (void)state;
    ws_engine_config cfg = engine_config("");
    cfg.max_batch = 5; /* batches of a part of the sessions, in flight beside each other */
    tiny_engine("pipeline", &cfg, &pipe_seen.e, &pipe_seen.st, pipe_seen.sess, PIPE_SESSIONS);
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
    ws_engine_free(pipe_seen.e);
    ws_store_close(pipe_seen.st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_and_session),
        cmocka_unit_test(test_step_query_labels),
        cmocka_unit_test(test_unknown_session),
        cmocka_unit_test(test_model_memory_bound),
        cmocka_unit_test(test_creation_does_not_block_serving),
        cmocka_unit_test(test_import_does_not_block_serving),
        cmocka_unit_test(test_continuous_batching),
        cmocka_unit_test(test_training_does_not_block_serving),
        cmocka_unit_test(test_pipeline),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
