/* test_engine.c — the engine library through its native interface (engine.h),
 * without HTTP: an engine on a temporary data directory creates a small random
 * model, then steps, queries and labels a session; each answer is checked
 * against what storage holds (the session's step, the log's answers and
 * labels), and the refusals (expect_step, an unknown session) come back as
 * native results; model memory is bounded; model creation and import never
 * hold up serving. Batching, the training thread and the pipeline:
 * test_engine_concurrency.c. */
#include <dirent.h>
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
#include "engine_fixture.h"
#include "test_util.h"

static ws_engine *E;
static ws_store *ST;
static char SESSION[WS_STORE_ID_LEN + 1];

static void run(ws_job *j)
{
    ef_run_on(E, j);
}

/* Labels for step 1's two queries. */
static ws_job *labels_job(int a, int b)
{
    ws_job *j = ef_job_new(WS_JOB_LABELS, SESSION);
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
    assert_int_equal(ws_store_session_get(ST, EF_TENANT, SESSION, 0, &s, &err), WS_OK);
    int64_t step = s.step;
    ws_store_session_clear(&s);
    return step;
}

static ef_log_row stored_log(int64_t step)
{
    ef_log_row r = {0};
    ws_error err = {0};
    assert_int_equal(ws_store_log_page(ST, EF_TENANT, SESSION, step - 1, 1, ef_keep_row, &r, &err),
                     WS_OK);
    assert_int_equal(r.step, step);
    return r;
}

static int setup(void **state)
{
    (void)state;
    const char *tmp = getenv("TMPDIR");
    snprintf(EF_DIR, sizeof EF_DIR, "%s/ws_engine_XXXXXX", tmp ? tmp : "/tmp");
    if (!mkdtemp(EF_DIR)) return -1;
    ws_engine_config cfg = ef_engine_config(EF_DIR);
    ws_error err = {0};
    if (ws_store_open(cfg.db_path, cfg.durability, 1, &ST, &err) != WS_OK ||
        ws_store_tenant_ensure(ST, "default", &EF_TENANT, &err) != WS_OK ||
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
    return ws_test_rm_tree(EF_DIR);
}

/* How many threads of this process have the name (/proc/self/task/<tid>/comm). */
static int threads_named(const char *name)
{
    DIR *d = opendir("/proc/self/task");
    assert_non_null(d);
    int found = 0;
    for (struct dirent *t; (t = readdir(d));) {
        char path[300], comm[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", t->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (fgets(comm, sizeof comm, f)) comm[strcspn(comm, "\n")] = '\0';
        fclose(f);
        found += !strcmp(comm, name);
    }
    closedir(d);
    return found;
}

static void test_model_and_session(void **state)
{
    (void)state;
    int helpers = threads_named("ws-pass");
    ws_model_config tiny = ef_tiny_config();
    ws_job *j = ef_create_job("tiny", &tiny);
    run(j);
    assert_int_equal(j->result.status, WS_OK);
    ws_job_free(j);
    /* the passes' helpers are the engine's, not one set per model */
    assert_int_equal(threads_named("ws-pass"), helpers);
    /* the same name again: a conflict, nothing created */
    ws_model_config def = ws_model_config_default();
    j = ef_create_job("tiny", &def);
    run(j);
    assert_int_equal(j->result.status, WS_ERR_CONFLICT);
    ws_job_free(j);

    ws_store_model m = {0};
    ws_error err = {0};
    assert_int_equal(ws_store_model_find(ST, "tiny", &m, &err), WS_OK);
    assert_int_equal(m.current_version, 1);
    assert_int_equal(
        ws_store_session_create(ST, EF_TENANT, m.id, NULL, 0, 0, m.current_version, 10, SESSION, &err),
        WS_OK);
    ws_engine_model_info info;
    assert_true(ws_engine_model_info_of(E, m.id, &info));
    assert_string_equal(info.name, "tiny");
    assert_int_equal(info.version, 1);
    ws_store_model_clear(&m);
}

/* The engine's threads say what they are (top -H, perf): its own, the commit
 * stage's, and on a machine of several cores its passes' helpers. At least
 * one each: a thread starts with its creator's name, so libgomp's workers of
 * the engine thread's OpenMP regions are "ws-engine" too. */
static void test_threads_named(void **state)
{
    (void)state;
    assert_true(threads_named("ws-engine") >= 1);
    assert_true(threads_named("ws-commit") >= 1);
    assert_int_equal(threads_named("no-such-thread"), 0);
    /* one pass helper per core it may run on past the engine thread's (the
     * test runs also under taskset -c 0: none) */
    assert_int_equal(threads_named("ws-pass"), ws_backend_cpu_default_threads() - 1);
}

static void test_step_query_labels(void **state)
{
    (void)state;
    ws_job *j = ef_step_job(SESSION, 0);
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
    ef_log_row row = stored_log(1);
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
    j = ef_step_job(SESSION, 0);
    run(j);
    assert_int_equal(j->result.status, WS_ERR_CONFLICT);
    assert_int_equal(j->result.why, WS_JOB_STEP_CONFLICT);
    assert_int_equal(j->result.step, 1);
    ws_job_free(j);
    assert_int_equal(stored_step(), 1);

    /* queries on W_1: the step's own answers, and no new step */
    j = ef_job_new(WS_JOB_QUERY, SESSION);
    j->query = ef_facts(EF_QUERIES, NULL, 2), j->n_query = 2;
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
    j = ef_step_job(SESSION, -1);
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
        ws_job *j = ef_job_new(k == 0   ? WS_JOB_STEP
                            : k == 1 ? WS_JOB_QUERY
                                     : WS_JOB_LABELS,
                            "0123456789abcdef0123456789abcdef");
        if (k == 0) {
            j->instr_json = strdup("[]");
            j->query_json = strdup("[]");
        }
        if (k == 1) j->query = ef_facts(EF_QUERIES, NULL, 2), j->n_query = 2;
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
    ws_engine_config cfg = ef_engine_config(dir);
    cfg.max_model_memory = max;
    ws_engine *e = NULL;
    ws_error err = {0};
    if (ws_engine_start(&cfg, &e, &err) != WS_OK) fprintf(stderr, "start: %s\n", err.msg);
    assert_non_null(e);
    return e;
}

static void expect_too_large(ws_engine *e, const char *name, const ws_model_config *c)
{
    ws_job *j = ef_create_job(name, c);
    ef_run_on(e, j);
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
    snprintf(dir, sizeof dir, "%s/bound", EF_DIR);
    assert_int_equal(mkdir(dir, 0700), 0);
    ws_engine *e = engine_with_bound(dir, 0); /* first start: the default model */
    size_t used = 0;
    ws_engine_models_each(e, add_bytes, &used);
    ws_engine_free(e);
    assert_true(used > 0);

    ws_model_config tiny = ef_tiny_config();
    ws_engine_config cfg = ef_engine_config(dir);
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
    ws_job *j = ef_create_job("a", &tiny);
    ef_run_on(e, j);
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
    ws_job *j = ef_step_job(SESSION, -1);
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
    ef_waiter w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    int64_t t0 = ws_clock_mono_us();
    ef_submit_on(E, j, &w);
    for (; !ef_waiter_done(&w); (*n)++) timed_step(max);
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
    ws_job *create = ef_create_job("big", &big);
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
    snprintf(file, sizeof file, "%s/models/.upload-test-import", EF_DIR);
    assert_int_equal(ws_backend_cpu_new(&be, 1, &err), WS_OK);
    assert_int_equal(ws_model_new(&m, &big, be, 11, &err), WS_OK);
    assert_int_equal(ws_checkpoint_save(m, file, 0, &err), WS_OK);
    ws_model_free(m);
    ws_backend_free(be);
    struct stat sb;
    assert_int_equal(stat(file, &sb), 0);
    int64_t base_max = 0, during_max = 0, n_during = 0;
    for (int i = 0; i < 20; i++) timed_step(&base_max);
    ws_job *imp = ef_job_new(WS_JOB_MODEL_IMPORT, "");
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


int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_and_session),
        cmocka_unit_test(test_threads_named), /* after it: a model is loaded */
        cmocka_unit_test(test_step_query_labels),
        cmocka_unit_test(test_unknown_session),
        cmocka_unit_test(test_model_memory_bound),
        cmocka_unit_test(test_creation_does_not_block_serving),
        cmocka_unit_test(test_import_does_not_block_serving),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
