/* test_server_replay.c — replaying step logs reproduces the daemon's states bit
 * for bit. Five sessions on two models (a small one with raw vector facts and
 * a vocabulary small enough to overflow, and the default d=128 one) are driven
 * from five threads at once, so the engine's batches mix sessions and models;
 * queries-only requests and labels put later are mixed in. Then, with the
 * daemon stopped, `worldstate-train rederive` replays every log from W_0 under
 * the version that computed it and must find every state identical to the one
 * stored. Also: rederive refuses beside a running daemon; export writes the
 * log as JSON Lines that retrain reads back (--jsonl) into a new version;
 * rederive moves the sessions to it, and a second rederive finds those states
 * identical again; the restarted daemon serves them under the new version. */
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_server_util.h"
#include "test_util.h"

enum { N_SESSIONS = 5, N_SMALL = 3, STEPS_SMALL = 40, STEPS_DEFAULT = 24 };

static ws_ts_daemon D;
static char g_out[1 << 20]; /* worldstate-train's stdout */

typedef struct {
    char id[33];
    const char *model;
    int steps, vectors;
    uint64_t seed;
    char failure[256]; /* set by the thread; asserted by the test */
} driver;

/* Appends n random facts: 2-3 symbols out of 60 (overflowing a 24-symbol
 * vocabulary), or a raw vector when vectors is set. */
static size_t random_facts(char *buf, size_t cap, size_t len, ws_test_rng *rng, int n, int instructions,
                           int vectors)
{
    for (int i = 0; i < n; i++) {
        len += (size_t)snprintf(buf + len, cap - len, "%s{", i ? "," : "");
        if (vectors && ws_test_int(rng, 0, 3) == 0) {
            len += (size_t)snprintf(buf + len, cap - len, "\"vector\":[");
            for (int k = 0; k < 4; k++)
                len += (size_t)snprintf(buf + len, cap - len, "%s%.9g", k ? "," : "", ws_test_normal(rng));
            len += (size_t)snprintf(buf + len, cap - len, "]");
        } else if (ws_test_int(rng, 0, 2) == 0) {
            len += (size_t)snprintf(buf + len, cap - len, "\"fact\":[\"s%d\",\"a%d\",\"v%d\"]", ws_test_int(rng, 0, 59),
                                    ws_test_int(rng, 0, 3), ws_test_int(rng, 0, 4));
        } else {
            len += (size_t)snprintf(buf + len, cap - len, "\"fact\":[\"s%d\",\"v%d\"]", ws_test_int(rng, 0, 59),
                                    ws_test_int(rng, 0, 4));
        }
        if (instructions) len += (size_t)snprintf(buf + len, cap - len, ",\"value\":%s", ws_test_int(rng, 0, 1) ? "true" : "false");
        len += (size_t)snprintf(buf + len, cap - len, "}");
    }
    return len;
}

/* One request; records a failure unless the status is `want`. */
static int request(driver *dr, const char *method, const char *path, const char *body, long want)
{
    ws_ts_resp r;
    long got = ws_ts_req(&D, method, path, NULL, body, &r);
    if (got != want && !dr->failure[0])
        snprintf(dr->failure, sizeof dr->failure, "%s %s -> %ld (want %ld): %.150s", method, path, got, want, r.body);
    ws_ts_resp_free(&r);
    return got == want;
}

/* Steps one session with random instructions and queries; every 5th step is
 * followed by a queries-only request, every 3rd labelled afterwards. */
static void *drive(void *arg)
{
    driver *dr = arg;
    ws_test_rng rng = {dr->seed};
    char steps[128], queries[128], labels[160], body[8192];
    ws_ts_spath(steps, sizeof steps, dr->id, "/steps");
    ws_ts_spath(queries, sizeof queries, dr->id, "/queries");
    for (int t = 0; t < dr->steps && !dr->failure[0]; t++) {
        int n_q = ws_test_int(&rng, 0, 3);
        size_t len = (size_t)snprintf(body, sizeof body, "{\"expect_step\":%d,\"instructions\":[", t);
        len = random_facts(body, sizeof body, len, &rng, ws_test_int(&rng, 0, 4), 1, dr->vectors);
        len += (size_t)snprintf(body + len, sizeof body - len, "],\"queries\":[");
        len = random_facts(body, sizeof body, len, &rng, n_q, 0, dr->vectors);
        snprintf(body + len, sizeof body - len, "]}");
        if (!request(dr, "POST", steps, body, 200)) break;
        if (t % 5 == 4) {
            len = (size_t)snprintf(body, sizeof body, "{\"queries\":[");
            len = random_facts(body, sizeof body, len, &rng, 2, 0, dr->vectors);
            snprintf(body + len, sizeof body - len, "]}");
            request(dr, "POST", queries, body, 200);
        }
        if (t % 3 == 2 && n_q > 0) {
            char path[160];
            snprintf(path, sizeof path, "/v1/sessions/%s/steps/%d/labels", dr->id, t + 1);
            len = (size_t)snprintf(labels, sizeof labels, "{\"labels\":[");
            for (int q = 0; q < n_q; q++) len += (size_t)snprintf(labels + len, sizeof labels - len, "%strue", q ? "," : "");
            snprintf(labels + len, sizeof labels - len, "]}");
            request(dr, "PUT", path, labels, 200);
        }
    }
    return NULL;
}

/* A session's stored state, as GET .../state returns it (owned). */
static char *get_state(const char *id, size_t *len)
{
    char path[128];
    ws_ts_resp r;
    assert_int_equal(ws_ts_req(&D, "GET", ws_ts_spath(path, sizeof path, id, "/state"), NULL, NULL, &r), 200);
    char *b = r.body;
    *len = r.len;
    r.body = NULL;
    ws_ts_resp_free(&r);
    return b;
}

static int64_t session_field(const char *id, const char *field)
{
    char path[128];
    ws_ts_resp r;
    assert_int_equal(ws_ts_req(&D, "GET", ws_ts_spath(path, sizeof path, id, NULL), NULL, NULL, &r), 200);
    int64_t v = (int64_t)cJSON_GetObjectItem(r.json, field)->valuedouble;
    ws_ts_resp_free(&r);
    return v;
}

/* Batches of more than one job since the start (from /metrics). */
static long mixed_batches(void)
{
    ws_ts_resp r;
    assert_int_equal(ws_ts_req(&D, "GET", "/metrics", NULL, NULL, &r), 200);
    const char *one = strstr(r.body, "worldstate_batch_jobs_bucket{le=\"1\"} ");
    const char *count = strstr(r.body, "worldstate_batch_jobs_count ");
    assert_non_null(one);
    assert_non_null(count);
    long n = atol(count + strlen("worldstate_batch_jobs_count ")) - atol(one + strlen("worldstate_batch_jobs_bucket{le=\"1\"} "));
    ws_ts_resp_free(&r);
    return n;
}

/* Runs rederive on model; returns its summary (parsed JSON, owned). */
static cJSON *rederive(const char *dir, const char *model)
{
    const char *args[] = {"rederive", "--data-dir", dir, "--model", model, NULL};
    assert_int_equal(ws_ts_train(args, g_out, sizeof g_out), 0);
    fprintf(stderr, "%s", g_out);
    cJSON *j = cJSON_Parse(g_out);
    assert_non_null(j);
    return j;
}

static long num(const cJSON *j, const char *field)
{
    const cJSON *v = cJSON_GetObjectItem(j, field);
    assert_true(cJSON_IsNumber(v));
    return (long)v->valuedouble;
}

static void start_and_drive(const char *dir, driver *dr)
{
    assert_int_equal(ws_ts_start(&D, dir, NULL), 0);
    ws_ts_resp r;
    assert_int_equal(ws_ts_req(&D, "POST", "/v1/models", NULL,
                               "{\"name\":\"small\",\"seed\":3,\"config\":{\"d\":32,\"n_heads\":2,\"n_state\":8,"
                               "\"n_upd_layers\":1,\"n_ext_layers\":1,\"max_fact_len\":3,\"vocab_cap\":24,"
                               "\"n_overflow\":4,\"d_raw\":4},\"training\":{\"enabled\":false}}",
                               &r),
                     201);
    ws_ts_resp_free(&r);
    /* Every step of "default" would train it (self-supervised), and states made
     * by several versions do not replay bit for bit: this test is about replay. */
    assert_int_equal(ws_ts_req(&D, "PATCH", "/v1/models/default/training", NULL, "{\"enabled\":false}", &r),
                     200);
    ws_ts_resp_free(&r);
    pthread_t th[N_SESSIONS];
    for (int i = 0; i < N_SESSIONS; i++) {
        dr[i] = (driver){.model = i < N_SMALL ? "small" : "default", .steps = i < N_SMALL ? STEPS_SMALL : STEPS_DEFAULT,
                         .vectors = i < N_SMALL, .seed = 0xABC0u + (uint64_t)i};
        assert_int_equal(ws_ts_session(&D, NULL, dr[i].model, dr[i].id), 201);
    }
    for (int i = 0; i < N_SESSIONS; i++) assert_int_equal(pthread_create(&th[i], NULL, drive, &dr[i]), 0);
    for (int i = 0; i < N_SESSIONS; i++) assert_int_equal(pthread_join(th[i], NULL), 0);
    for (int i = 0; i < N_SESSIONS; i++)
        if (dr[i].failure[0]) fail_msg("session %d: %s", i, dr[i].failure);
}

static void test_rederive_is_bit_exact(void **state)
{
    (void)state;
    char dir[256];
    ws_ts_tmpdir(dir, sizeof dir);
    driver dr[N_SESSIONS];
    start_and_drive(dir, dr);
    long mixed = mixed_batches();
    fprintf(stderr, "engine batches with more than one job: %ld\n", mixed);
    assert_true(mixed >= 5);
    char *before[N_SESSIONS];
    size_t len[N_SESSIONS];
    for (int i = 0; i < N_SESSIONS; i++) {
        before[i] = get_state(dr[i].id, &len[i]);
        long big = ws_ts_state_floats(&D, NULL, "default"); /* the shipped model's shape */
        assert_int_equal(len[i], i < N_SMALL ? 8 * 32 * 4 : big * 4);
        assert_int_equal(session_field(dr[i].id, "step"), dr[i].steps);
    }

    /* Beside the daemon rederive refuses (the daemon would overwrite its states). */
    const char *busy[] = {"rederive", "--data-dir", dir, "--model", "small", NULL};
    assert_int_equal(ws_ts_train(busy, g_out, sizeof g_out), 1);
    assert_int_equal(ws_ts_stop(&D), 0);

    cJSON *small = rederive(dir, "small"), *dflt = rederive(dir, "default");
    assert_int_equal(num(small, "sessions"), N_SMALL);
    assert_int_equal(num(small, "steps"), N_SMALL * STEPS_SMALL);
    assert_int_equal(num(small, "steps_of_other_versions"), 0);
    assert_int_equal(num(small, "identical"), N_SMALL);
    assert_int_equal(num(small, "rewritten"), 0);
    assert_int_equal(num(dflt, "sessions"), N_SESSIONS - N_SMALL);
    assert_int_equal(num(dflt, "identical"), N_SESSIONS - N_SMALL);
    assert_int_equal(num(dflt, "rewritten"), 0);
    cJSON_Delete(small);
    cJSON_Delete(dflt);

    /* export -> JSON Lines -> retrain --jsonl: version 2 of small */
    const char *exp[] = {"export", "--data-dir", dir, "--model", "small", NULL};
    assert_int_equal(ws_ts_train(exp, g_out, sizeof g_out), 0);
    int lines = 0;
    for (char *line = g_out, *nl; (nl = strchr(line, '\n')); line = nl + 1, lines++) {
        *nl = '\0';
        cJSON *o = cJSON_Parse(line);
        assert_non_null(o);
        static const char *const fields[] = {"session", "model", "step", "instructions", "queries", "labels",
                                             "answers", "model_version", "time_ms"};
        for (size_t f = 0; f < sizeof fields / sizeof *fields; f++)
            if (!cJSON_GetObjectItem(o, fields[f])) fail_msg("export line %d lacks \"%s\": %s", lines, fields[f], line);
        *nl = '\n';
        cJSON_Delete(o);
    }
    assert_int_equal(lines, N_SMALL * STEPS_SMALL);
    char jsonl[320];
    snprintf(jsonl, sizeof jsonl, "%s/small.jsonl", dir);
    FILE *f = fopen(jsonl, "w");
    assert_non_null(f);
    assert_int_equal(fputs(g_out, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
    const char *re[] = {"retrain", "--data-dir", dir, "--model", "small", "--jsonl", jsonl, "--epochs", "2", NULL};
    assert_int_equal(ws_ts_train(re, g_out, sizeof g_out), 0);
    assert_non_null(strstr(g_out, "published small version 2"));

    /* rederive moves the sessions to version 2; replaying again finds them identical */
    small = rederive(dir, "small");
    assert_int_equal(num(small, "version"), 2);
    assert_int_equal(num(small, "rewritten"), N_SMALL);
    assert_int_equal(num(small, "steps_of_other_versions"), N_SMALL * STEPS_SMALL);
    cJSON_Delete(small);
    small = rederive(dir, "small");
    assert_int_equal(num(small, "identical"), N_SMALL);
    assert_int_equal(num(small, "rewritten"), 0);
    cJSON_Delete(small);

    assert_int_equal(ws_ts_start(&D, dir, NULL), 0);
    for (int i = 0; i < N_SESSIONS; i++) {
        size_t n;
        char *after = get_state(dr[i].id, &n);
        assert_int_equal(n, len[i]);
        /* the default model's states were not touched; small's now belong to version 2 */
        if (i < N_SMALL) assert_true(memcmp(after, before[i], n) != 0);
        else assert_memory_equal(after, before[i], n);
        assert_int_equal(session_field(dr[i].id, "state_version"), i < N_SMALL ? 2 : 1);
        assert_int_equal(session_field(dr[i].id, "step"), dr[i].steps);
        free(after);
        free(before[i]);
    }
    char path[128];
    ws_ts_resp r;
    assert_int_equal(ws_ts_req(&D, "POST", ws_ts_spath(path, sizeof path, dr[0].id, "/steps"), NULL,
                               "{\"instructions\":[{\"fact\":[\"s1\",\"v1\"],\"value\":true}]}", &r),
                     200);
    assert_int_equal((int)cJSON_GetObjectItem(r.json, "model_version")->valuedouble, 2);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_stop(&D), 0);
    ws_ts_cleanup(dir);
}

int main(void)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) return 1; /* before the driver threads */
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_rederive_is_bit_exact)};
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
