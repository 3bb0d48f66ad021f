/* test_server_cluster.c — several daemons over one database (api.md, Running a
 * cluster). On PostgreSQL (WS_TEST_STORE=postgresql) two daemons serve one
 * schema, each with a data directory of its own sharing models/; on SQLite one
 * daemon takes both roles (the same assertions, one node).
 *
 * Writers post steps to the same sessions through both daemons at once, each
 * step naming symbols no other step names (so both daemons grow the model's
 * vocabulary at once): without expect_step every step is applied exactly once
 * (a step that lost its session to the other daemon runs again on the state
 * now stored), with the step number it was answered, and no session has a gap;
 * with expect_step a step applies only at its step, the losers get 409 and try
 * again. The vocabulary keeps one dense id per symbol. On PostgreSQL also: one
 * daemon at a time holds a model's cluster lock (it alone trains and
 * publishes), the other takes it over when the first stops, and a version
 * recorded, or a model created, through one daemon is served by the other
 * within its sync. */
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test_server_util.h"
#include "test_util.h"

enum { SESSIONS = 3, WRITERS = 4, STEPS = 8, CONTENDED = 5, TRIES = 200 };

static ws_ts_daemon node[2];
static int n_nodes;
static char dir[2][256];
static char ids[SESSIONS][33];

typedef struct {
    int w;
    int64_t got[SESSIONS][STEPS]; /* the step each post was answered (0: none) */
    int64_t contended[CONTENDED]; /* phase 2: the steps applied with expect_step */
    int conflicts;
    char why[256]; /* the first unexpected answer */
} writer;

static const ws_ts_daemon *node_of(int w) { return &node[w % n_nodes]; }

static void note(writer *wr, long st, const ws_ts_resp *r)
{
    if (!wr->why[0])
        snprintf(wr->why, sizeof wr->why, "writer %d: HTTP %ld %.200s", wr->w, st,
                 r->body ? r->body : "");
}

/* The step of a 200 answer, or -1. */
static int64_t step_of(long st, const ws_ts_resp *r)
{
    const cJSON *s = cJSON_GetObjectItem(r->json, "step");
    return st == 200 && cJSON_IsNumber(s) ? (int64_t)s->valuedouble : -1;
}

/* Phase 1: STEPS steps to every session, no expect_step, through node w % n. */
static void *write_free(void *arg)
{
    writer *wr = arg;
    char path[128], body[256];
    for (int j = 0; j < STEPS; j++)
        for (int k = 0; k < SESSIONS; k++) {
            snprintf(body, sizeof body,
                     "{\"instructions\":[{\"fact\":[\"w%d\",\"k%dj%d\",\"x%d_%d_%d\"],\"value\":true}],"
                     "\"queries\":[{\"fact\":[\"w%d\",\"k%dj%d\",\"x%d_%d_%d\"]}]}",
                     wr->w, k, j, wr->w, k, j, wr->w, k, j, wr->w, k, j);
            ws_ts_resp r;
            long st = ws_ts_req(node_of(wr->w), "POST", ws_ts_spath(path, sizeof path, ids[k], "/steps"),
                                NULL, body, &r);
            wr->got[k][j] = step_of(st, &r);
            if (wr->got[k][j] < 0) note(wr, st, &r);
            ws_ts_resp_free(&r);
        }
    return NULL;
}

/* The session's step as node d reads it (-1 on failure). */
static int64_t session_step(const ws_ts_daemon *d, const char *id)
{
    char path[128];
    ws_ts_resp r;
    long st = ws_ts_req(d, "GET", ws_ts_spath(path, sizeof path, id, ""), NULL, NULL, &r);
    const cJSON *s = cJSON_GetObjectItem(r.json, "step");
    int64_t step = st == 200 && cJSON_IsNumber(s) ? (int64_t)s->valuedouble : -1;
    ws_ts_resp_free(&r);
    return step;
}

/* Phase 2: CONTENDED steps to session 0 with expect_step, read then posted;
 * a 409 (another writer got there first) reads again and retries. */
static void *write_expect(void *arg)
{
    writer *wr = arg;
    char path[128], body[256];
    ws_ts_spath(path, sizeof path, ids[0], "/steps");
    for (int j = 0, tries = 0; j < CONTENDED && tries < TRIES; tries++) {
        int64_t at = session_step(node_of(wr->w), ids[0]);
        snprintf(body, sizeof body,
                 "{\"expect_step\":%lld,\"instructions\":[{\"fact\":[\"e%d\",\"n%d\"],\"value\":true}]}",
                 (long long)at, wr->w, j);
        ws_ts_resp r;
        long st = ws_ts_req(node_of(wr->w), "POST", path, NULL, body, &r);
        if (st == 409) {
            wr->conflicts++;
        } else if (step_of(st, &r) == at + 1) {
            wr->contended[j++] = at + 1;
        } else {
            note(wr, st, &r);
            j = CONTENDED; /* stop: the test fails on why */
        }
        ws_ts_resp_free(&r);
    }
    return NULL;
}

static void run_writers(writer *wr, void *(*fn)(void *))
{
    pthread_t th[WRITERS];
    for (int w = 0; w < WRITERS; w++) {
        wr[w].w = w;
        assert_int_equal(pthread_create(&th[w], NULL, fn, &wr[w]), 0);
    }
    for (int w = 0; w < WRITERS; w++) pthread_join(th[w], NULL);
    for (int w = 0; w < WRITERS; w++)
        if (wr[w].why[0]) fail_msg("%s", wr[w].why);
}

/* The session's log: the instruction fact's second symbol by step (1-based),
 * one string per step; *n the entries. Asserts steps 1..n with no gap. */
static char **read_log(const char *id, int *n)
{
    char path[160];
    int cap = 256;
    char **tags = calloc((size_t)cap, sizeof *tags);
    assert_non_null(tags);
    *n = 0;
    for (int64_t after = 0;;) {
        snprintf(path, sizeof path, "/v1/sessions/%s/steps?after=%lld&limit=100", id,
                 (long long)after);
        ws_ts_resp r;
        assert_int_equal(ws_ts_req(&node[0], "GET", path, NULL, NULL, &r), 200);
        const cJSON *e, *steps = cJSON_GetObjectItem(r.json, "steps");
        cJSON_ArrayForEach(e, steps)
        {
            int64_t step = (int64_t)cJSON_GetObjectItem(e, "step")->valuedouble;
            assert_int_equal(step, *n + 1); /* no gap, no repeat */
            assert_true(*n < cap);
            const cJSON *in = cJSON_GetArrayItem(cJSON_GetObjectItem(e, "instructions"), 0);
            const cJSON *fact = cJSON_GetObjectItem(in, "fact");
            char tag[64];
            snprintf(tag, sizeof tag, "%s/%s", cJSON_GetArrayItem(fact, 0)->valuestring,
                     cJSON_GetArrayItem(fact, 1)->valuestring);
            tags[(*n)++] = strdup(tag);
            after = step;
        }
        const cJSON *next = cJSON_GetObjectItem(r.json, "next_after");
        int more = cJSON_IsNumber(next);
        ws_ts_resp_free(&r);
        if (!more) break;
    }
    return tags;
}

static void free_log(char **tags, int n)
{
    for (int i = 0; i < n; i++) free(tags[i]);
    free(tags);
}

static void test_steps_from_two_daemons(void **state)
{
    (void)state;
    for (int k = 0; k < SESSIONS; k++)
        assert_int_equal(ws_ts_session(&node[k % n_nodes], NULL, "default", ids[k]), 201);
    static writer wr[WRITERS]; /* static: a failed assertion leaks nothing */
    memset(wr, 0, sizeof wr);
    run_writers(wr, write_free);
    for (int k = 0; k < SESSIONS; k++) {
        int n = 0;
        char **tags = read_log(ids[k], &n);
        assert_int_equal(n, WRITERS * STEPS); /* every step once: none lost, none twice */
        for (int w = 0; w < WRITERS; w++)
            for (int j = 0; j < STEPS; j++) { /* answered with the step it is logged at */
                char want[64];
                snprintf(want, sizeof want, "w%d/k%dj%d", w, k, j);
                int64_t s = wr[w].got[k][j];
                assert_true(s >= 1 && s <= n);
                assert_string_equal(tags[s - 1], want);
            }
        free_log(tags, n);
    }

    int64_t base = session_step(&node[0], ids[0]);
    memset(wr, 0, sizeof wr);
    run_writers(wr, write_expect);
    int conflicts = 0;
    for (int w = 0; w < WRITERS; w++) conflicts += wr[w].conflicts;
    int n = 0;
    char **tags = read_log(ids[0], &n);
    assert_int_equal(n, base + WRITERS * CONTENDED);
    for (int w = 0; w < WRITERS; w++)
        for (int j = 0; j < CONTENDED; j++) {
            char want[64];
            snprintf(want, sizeof want, "e%d/n%d", w, j);
            assert_string_equal(tags[wr[w].contended[j] - 1], want);
        }
    free_log(tags, n);
    printf("cluster: %d nodes, %d steps without expect_step, %d with it (%d answered 409 and "
           "retried)\n",
           n_nodes, SESSIONS * WRITERS * STEPS, WRITERS * CONTENDED, conflicts);
}

/* psql's one value for sql on the cluster's schema, into out. */
static void pg_value(const char *sql, char *out, size_t cap)
{
    char cmd[1024];
    const char *base = strrchr(dir[0], '/') + 1;
    char schema[128] = "ws_";
    for (size_t i = 3; *base && i + 1 < sizeof schema; base++, i++)
        schema[i] = (*base >= 'A' && *base <= 'Z') ? (char)(*base + 32)
                    : ((*base >= 'a' && *base <= 'z') || (*base >= '0' && *base <= '9')) ? *base
                                                                                           : '_';
    snprintf(cmd, sizeof cmd, "psql -qtAX \"$(cat \"$WS_TEST_POSTGRES_FILE\")\" -c 'SET search_path = %s' -c \"%s\"",
             schema, sql);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    out[0] = '\0';
    char *got = fgets(out, (int)cap, p);
    pclose(p);
    assert_non_null(got);
    out[strcspn(out, "\n")] = '\0';
}

/* Symbols added by both daemons at once got one dense id each. */
static void test_vocabulary_one_id_per_symbol(void **state)
{
    (void)state;
    if (!ws_ts_on_postgresql()) skip();
    char v[128];
    pg_value("SELECT count(*) = count(DISTINCT symbol) AND count(*) = max(id) + 1 FROM vocab", v,
             sizeof v);
    assert_string_equal(v, "t");
    pg_value("SELECT count(*) FROM vocab WHERE symbol LIKE 'x%'", v, sizeof v);
    assert_int_equal(atoi(v), SESSIONS * WRITERS * STEPS); /* every writer's symbol is there */
}

/* 1 when node d's log has line (waits up to 60 s for it when wait). */
static int log_has(const ws_ts_daemon *d, const char *line, int wait)
{
    for (int i = 0; i < (wait ? 600 : 1); i++) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "grep -q '%s' '%s'", line, d->log);
        if (system(cmd) == 0) return 1;
        if (wait) usleep(100 * 1000);
    }
    return 0;
}

/* The version node d answers a query of session id with (-1 on failure). */
static int64_t served_version(const ws_ts_daemon *d, const char *id)
{
    char path[128];
    ws_ts_resp r;
    long st = ws_ts_req(d, "POST", ws_ts_spath(path, sizeof path, id, "/queries"), NULL,
                        "{\"queries\":[{\"fact\":[\"a\",\"b\"]}]}", &r);
    const cJSON *v = cJSON_GetObjectItem(r.json, "model_version");
    int64_t out = st == 200 && cJSON_IsNumber(v) ? (int64_t)v->valuedouble : -1;
    ws_ts_resp_free(&r);
    return out;
}

/* A version imported through one daemon is served by the other (it polls the
 * models table about once a second); one daemon holds the training lock, and
 * the other takes it when the first stops. */
static void test_versions_and_training_lock(void **state)
{
    (void)state;
    if (!ws_ts_on_postgresql()) skip();
    const char *leads = "default: this daemon trains and publishes it";
    assert_true(log_has(&node[0], leads, 1));
    assert_false(log_has(&node[1], leads, 0));

    ws_ts_resp ck, r;
    char path[128];
    assert_int_equal(ws_ts_http(&node[0], "GET", "/v1/models/default/checkpoint", NULL, NULL, 0, &ck),
                     200);
    long st = ws_ts_http(&node[0], "POST", "/v1/models/default/import", NULL, ck.body, ck.len, &r);
    if (st != 200) fail_msg("import: HTTP %ld %s", st, r.body);
    int64_t v = (int64_t)cJSON_GetObjectItem(r.json, "version")->valuedouble;
    ws_ts_resp_free(&r);
    ws_ts_resp_free(&ck);
    /* v, or a later one: node 0 trains online and may publish the next version
     * (from v) on the examples of the steps above before node 1 looks */
    int64_t seen = -1;
    for (int i = 0; i < 600 && (seen = served_version(&node[1], ids[1])) < v; i++)
        usleep(100 * 1000);
    assert_true(seen >= v);

    /* a model created through one daemon is served by the other */
    assert_int_equal(ws_ts_req(&node[0], "POST", "/v1/models", NULL,
                               "{\"name\":\"small\",\"config\":{\"d\":32,\"n_heads\":2,"
                               "\"n_state\":8,\"n_upd_layers\":1,\"n_ext_layers\":1,\"vocab_cap\":64}}",
                               &r),
                     201);
    ws_ts_resp_free(&r);
    char small[33] = "";
    assert_int_equal(ws_ts_session(&node[1], NULL, "small", small), 201);
    st = 0; /* 503 until the other has loaded it (it looks at once, and every second) */
    for (int i = 0; i < 600 && st != 200; i++) {
        st = ws_ts_req(&node[1], "POST", ws_ts_spath(path, sizeof path, small, "/steps"), NULL,
                       "{\"instructions\":[{\"fact\":[\"a\",\"b\"],\"value\":true}]}", &r);
        assert_true(st == 200 || st == 503);
        ws_ts_resp_free(&r);
        if (st != 200) usleep(100 * 1000);
    }
    assert_int_equal(st, 200);

    assert_int_equal(ws_ts_stop(&node[0]), 0);
    assert_true(log_has(&node[1], leads, 1));
}

static int setup(void **state)
{
    (void)state;
    n_nodes = ws_ts_on_postgresql() ? 2 : 1;
    ws_ts_tmpdir(dir[0], sizeof dir[0]);
    if (ws_ts_start(&node[0], dir[0], NULL) != 0) return -1;
    if (n_nodes == 1) return 0;
    /* the second node: its own data directory, the first's schema and models/ */
    ws_ts_tmpdir(dir[1], sizeof dir[1]);
    char models[300], link[300];
    snprintf(models, sizeof models, "%s/models", dir[0]);
    snprintf(link, sizeof link, "%s/models", dir[1]);
    if (symlink(models, link) != 0) return -1;
    return ws_ts_start_node(&node[1], dir[1], dir[0], NULL);
}

static int teardown(void **state)
{
    (void)state;
    int rc = 0;
    for (int i = n_nodes - 1; i >= 0; i--) {
        if (node[i].pid > 0 && ws_ts_stop(&node[i]) != 0) rc = -1;
        if (rc == 0) ws_ts_cleanup(dir[i]);
    }
    return rc;
}

int main(void)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) return 1; /* before the writer threads */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_steps_from_two_daemons),
        cmocka_unit_test(test_vocabulary_one_id_per_symbol),
        cmocka_unit_test(test_versions_and_training_lock),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
