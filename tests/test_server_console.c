/* test_server_console.c — what the web console stands on, against a live
 * worldstated ($WS_DAEMON): its embedded files at / and /console/NAME (the
 * bytes of server/daemon/console/, their Content-Type, ETag revalidation, no
 * key needed, nothing else served), and the routes added for it: a session's
 * state change norms (GET /v1/sessions/{id}/state/changes), a model's training
 * history (GET /v1/models/{name}/training/history) and the model of each
 * listed session. The browser itself is tests/browser/ (ctest console_browser). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_server_util.h"

static ws_ts_daemon *const D = &ws_ts_shared;

#define STEP_TELL "{\"instructions\":[{\"fact\":[\"anna\",\"room\",\"%d\"],\"value\":true}]}"

static void step(const ws_ts_daemon *d, const char *key, const char *id, const char *body)
{
    char path[128];
    ws_ts_resp r;
    assert_int_equal(
        ws_ts_req(d, "POST", ws_ts_spath(path, sizeof path, id, "/steps"), key, body, &r), 200);
    ws_ts_resp_free(&r);
}

static void step_tell(const ws_ts_daemon *d, const char *key, const char *id, int i)
{
    char body[128];
    snprintf(body, sizeof body, STEP_TELL, i);
    step(d, key, id, body);
}

/* The file's bytes from the source tree (owned), its length into *len. */
static char *source_file(const char *name, size_t *len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/server/daemon/console/%s", WS_SOURCE_DIR, name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    assert_true(n > 0);
    rewind(f);
    char *buf = malloc((size_t)n);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* GET path serves exactly the source file `name` with Content-Type `type`. */
static void serves(const char *path, const char *name, const char *type)
{
    ws_ts_resp r;
    char got[128];
    size_t len;
    char *want = source_file(name, &len);
    assert_int_equal(ws_ts_http(D, "GET", path, NULL, NULL, 0, &r), 200);
    assert_true(ws_ts_header(&r, "Content-Type", got, sizeof got));
    assert_string_equal(got, type);
    assert_int_equal(r.len, len);
    assert_memory_equal(r.body, want, len);
    assert_true(ws_ts_header(&r, "ETag", got, sizeof got));
    assert_true(ws_ts_header(&r, "Cache-Control", got, sizeof got));
    assert_string_equal(got, "no-cache");
    assert_true(ws_ts_header(&r, "Content-Security-Policy", got, sizeof got));
    assert_non_null(strstr(got, "script-src 'self'"));
    free(want);
    ws_ts_resp_free(&r);
}

static void test_console_files(void **state)
{
    (void)state;
    serves("/", "index.html", "text/html; charset=utf-8");
    serves("/console/index.html", "index.html", "text/html; charset=utf-8");
    serves("/console/app.js", "app.js", "text/javascript; charset=utf-8");
    serves("/console/session.js", "session.js", "text/javascript; charset=utf-8");
    serves("/console/console.css", "console.css", "text/css; charset=utf-8");
}

/* "STATUS BYTES" of GET path with the header If-None-Match: inm, through curl
 * (ws_ts_http sends no extra headers). */
static void get_if_none_match(const char *path, const char *inm, char *out, size_t cap)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "curl -s -o /dev/null -w '%%{http_code} %%{size_download}' -H 'If-None-Match: %s' "
             "http://127.0.0.1:%d%s",
             inm, D->port, path);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    assert_non_null(fgets(out, (int)cap, p));
    assert_int_equal(pclose(p), 0);
}

/* A browser's revalidation: the file's ETag back (alone or in a list) is a
 * 304 without a body; another ETag gets the file. HEAD has the GET's headers. */
static void test_console_etag(void **state)
{
    (void)state;
    ws_ts_resp r;
    char etag[64], list[128], got[64];
    assert_int_equal(ws_ts_http(D, "HEAD", "/console/draw.js", NULL, NULL, 0, &r), 200);
    assert_int_equal(r.len, 0);
    assert_true(ws_ts_header(&r, "ETag", etag, sizeof etag));
    assert_int_equal(strlen(etag), 18); /* "16 hex" */
    ws_ts_resp_free(&r);
    get_if_none_match("/console/draw.js", etag, got, sizeof got);
    assert_string_equal(got, "304 0");
    snprintf(list, sizeof list, "\"x\", %s", etag);
    get_if_none_match("/console/draw.js", list, got, sizeof got);
    assert_string_equal(got, "304 0");
    get_if_none_match("/console/draw.js", "\"0000000000000000\"", got, sizeof got);
    assert_true(!strncmp(got, "200 ", 4) && atoi(got + 4) > 0);
    get_if_none_match("/", etag, got, sizeof got); /* another file's ETag */
    assert_true(!strncmp(got, "200 ", 4));
}

/* Nothing but the embedded files: no file system path, no other method. */
static void test_console_nothing_else(void **state)
{
    (void)state;
    ws_ts_resp r;
    char allow[64];
    assert_int_equal(ws_ts_req(D, "GET", "/console/nope.js", NULL, NULL, &r), 404);
    assert_string_equal(
        cJSON_GetObjectItem(cJSON_GetObjectItem(r.json, "error"), "code")->valuestring,
        "not_found");
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_req(D, "GET", "/console/..%2Fapi.md", NULL, NULL, &r), 404);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_req(D, "GET", "/console/a/app.js", NULL, NULL, &r), 404);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_req(D, "POST", "/", NULL, "{}", &r), 405);
    assert_true(ws_ts_header(&r, "Allow", allow, sizeof allow));
    assert_string_equal(allow, "GET, HEAD, OPTIONS");
    ws_ts_resp_free(&r);
}

/* The norms of one change entry: T of them, none negative; their sum. */
static double norms_sum(const cJSON *entry, int T)
{
    const cJSON *norms = cJSON_GetObjectItem(entry, "norms");
    assert_int_equal(cJSON_GetArraySize(norms), T);
    double sum = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, norms)
    {
        assert_true(cJSON_IsNumber(x) && x->valuedouble >= 0);
        sum += x->valuedouble;
    }
    return sum;
}

static void test_state_changes(void **state)
{
    (void)state;
    char id[33], path[128];
    ws_ts_resp r;
    assert_int_equal(ws_ts_session(D, NULL, "default", id), 201);
    long floats = ws_ts_state_floats(D, NULL, "default");
    assert_true(floats > 0);
    ws_ts_spath(path, sizeof path, id, "/state/changes");
    /* step 1 starts from the learned W_0: no entry */
    step_tell(D, NULL, id, 1);
    assert_int_equal(ws_ts_req(D, "GET", path, NULL, NULL, &r), 200);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(r.json, "changes")), 0);
    assert_int_equal(cJSON_GetObjectItem(r.json, "step")->valueint, 1);
    int T = cJSON_GetArrayItem(cJSON_GetObjectItem(r.json, "state_shape"), 0)->valueint;
    assert_true(T > 0 && floats % T == 0);
    ws_ts_resp_free(&r);
    /* a step that tells something moves the state; one that tells nothing holds it
     * (empty_steps "hold", the default) */
    step_tell(D, NULL, id, 2);
    step(D, NULL, id, "{\"queries\":[{\"fact\":[\"anna\",\"room\",\"2\"]}]}");
    assert_int_equal(ws_ts_req(D, "GET", path, NULL, NULL, &r), 200);
    const cJSON *ch = cJSON_GetObjectItem(r.json, "changes");
    assert_int_equal(cJSON_GetArraySize(ch), 2);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(ch, 0), "step")->valueint, 2);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(ch, 1), "step")->valueint, 3);
    assert_true(cJSON_GetObjectItem(cJSON_GetArrayItem(ch, 0), "model_version")->valueint >= 1);
    assert_true(norms_sum(cJSON_GetArrayItem(ch, 0), T) > 0);
    assert_true(norms_sum(cJSON_GetArrayItem(ch, 1), T) == 0);
    int window = cJSON_GetObjectItem(r.json, "window")->valueint;
    ws_ts_resp_free(&r);
    /* bounded: the newest `window` steps */
    for (int i = 4; i <= window + 6; i++) step_tell(D, NULL, id, i);
    assert_int_equal(ws_ts_req(D, "GET", path, NULL, NULL, &r), 200);
    ch = cJSON_GetObjectItem(r.json, "changes");
    assert_int_equal(cJSON_GetArraySize(ch), window);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(ch, window - 1), "step")->valueint,
                     window + 6);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(ch, 0), "step")->valueint, 7);
    ws_ts_resp_free(&r);
    /* unknown and malformed ids are missing sessions */
    assert_int_equal(ws_ts_req(D, "GET",
                               "/v1/sessions/0123456789abcdef0123456789abcdef/state/changes", NULL,
                               NULL, &r),
                     404);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_req(D, "GET", "/v1/sessions/xyz/state/changes", NULL, NULL, &r), 404);
    ws_ts_resp_free(&r);
}

/* Points of the model's history (the JSON array; r owns it). */
static const cJSON *history(const char *model, ws_ts_resp *r)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/models/%s/training/history", model);
    assert_int_equal(ws_ts_req(D, "GET", path, NULL, NULL, r), 200);
    assert_string_equal(cJSON_GetObjectItem(r->json, "model")->valuestring, model);
    return cJSON_GetObjectItem(r->json, "points");
}

static void test_training_history(void **state)
{
    (void)state;
    ws_ts_resp r;
    assert_int_equal(
        ws_ts_req(D, "POST", "/v1/models", NULL,
                  "{\"name\":\"hist\",\"config\":{\"d\":32,\"n_heads\":2,\"n_state\":8},"
                  "\"training\":{\"update_every\":1,\"publish_every\":1}}",
                  &r),
        201);
    ws_ts_resp_free(&r);
    assert_int_equal(cJSON_GetArraySize(history("hist", &r)), 0); /* nothing trained yet */
    assert_int_equal(cJSON_GetObjectItem(r.json, "capacity")->valueint, 512);
    ws_ts_resp_free(&r);
    char id[33];
    assert_int_equal(ws_ts_session(D, NULL, "hist", id), 201);
    /* The engine trains when idle, on the examples ready then (one update per
     * pass here): one step at a time, each waited for (60 s at most). */
    const cJSON *pts = NULL;
    for (int i = 0; i < 2; i++) {
        step_tell(D, NULL, id, i);
        for (int t = 0; t < 600; t++) {
            pts = history("hist", &r);
            if (cJSON_GetArraySize(pts) > i) break;
            ws_ts_resp_free(&r);
            usleep(100000);
        }
        assert_int_equal(cJSON_GetArraySize(pts), i + 1);
        if (i == 0) ws_ts_resp_free(&r);
    }
    double prev_updates = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, pts)
    {
        double updates = cJSON_GetObjectItem(p, "updates")->valuedouble;
        assert_true(updates > prev_updates); /* one point per update, oldest first */
        prev_updates = updates;
        assert_true(cJSON_IsNumber(cJSON_GetObjectItem(p, "loss")));
        assert_true(cJSON_GetObjectItem(p, "time_ms")->valuedouble > 0);
        assert_true(cJSON_GetObjectItem(p, "version")->valueint >= 1);
        const cJSON *g = cJSON_GetObjectItem(p, "gate"); /* the gate is on by default */
        assert_true(cJSON_IsObject(g));
        const char *v = cJSON_GetObjectItem(g, "verdict")->valuestring;
        assert_true(!strcmp(v, "published") || !strcmp(v, "rejected"));
        assert_non_null(cJSON_GetObjectItem(cJSON_GetObjectItem(g, "candidate"), "replay_answers"));
    }
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_req(D, "GET", "/v1/models/nope/training/history", NULL, NULL, &r), 404);
    ws_ts_resp_free(&r);
    /* a deleted model's history goes with it: a new model of the name (which may
     * get the same id) starts empty */
    char path[128];
    assert_int_equal(ws_ts_req(D, "DELETE", ws_ts_spath(path, sizeof path, id, ""), NULL, NULL, &r),
                     204);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_req(D, "DELETE", "/v1/models/hist", NULL, NULL, &r), 204);
    ws_ts_resp_free(&r);
    assert_int_equal(
        ws_ts_req(D, "POST", "/v1/models", NULL,
                  "{\"name\":\"hist\",\"config\":{\"d\":32,\"n_heads\":2,\"n_state\":8}}", &r),
        201);
    ws_ts_resp_free(&r);
    assert_int_equal(cJSON_GetArraySize(history("hist", &r)), 0);
    ws_ts_resp_free(&r);
}

/* GET /v1/sessions names each session's model. */
static void test_sessions_list_model(void **state)
{
    (void)state;
    char id[33];
    ws_ts_resp r;
    assert_int_equal(ws_ts_session(D, NULL, "default", id), 201);
    assert_int_equal(ws_ts_req(D, "GET", "/v1/sessions?limit=1000", NULL, NULL, &r), 200);
    int found = 0;
    const cJSON *s;
    cJSON_ArrayForEach(s, cJSON_GetObjectItem(r.json, "sessions"))
    {
        assert_true(cJSON_IsString(cJSON_GetObjectItem(s, "model")));
        if (!strcmp(cJSON_GetObjectItem(s, "id")->valuestring, id)) {
            found = 1;
            assert_string_equal(cJSON_GetObjectItem(s, "model")->valuestring, "default");
        }
    }
    assert_true(found);
    ws_ts_resp_free(&r);
}

/* With keys: the console needs none, every API call it makes does, and one
 * tenant cannot read another's state changes. */
static void test_keyed(void **state)
{
    (void)state;
    char dir[256], acme[128], beta[128], id[33], path[128];
    ws_ts_tmpdir(dir, sizeof dir);
    assert_int_equal(ws_ts_key_create(dir, "acme", 0, acme, sizeof acme), 0);
    assert_int_equal(ws_ts_key_create(dir, "beta", 0, beta, sizeof beta), 0);
    ws_ts_daemon d;
    assert_int_equal(ws_ts_start(&d, dir, NULL), 0);
    ws_ts_resp r;
    assert_int_equal(ws_ts_http(&d, "GET", "/", NULL, NULL, 0, &r), 200);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_http(&d, "GET", "/console/api.js", NULL, NULL, 0, &r), 200);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_session(&d, acme, "default", id), 201);
    step_tell(&d, acme, id, 1);
    step_tell(&d, acme, id, 2);
    ws_ts_spath(path, sizeof path, id, "/state/changes");
    assert_int_equal(ws_ts_req(&d, "GET", path, NULL, NULL, &r), 401);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_req(&d, "GET", path, beta, NULL, &r), 404);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_req(&d, "GET", path, acme, NULL, &r), 200);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(r.json, "changes")), 1);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_req(&d, "GET", "/v1/models/default/training/history", NULL, NULL, &r),
                     401);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_req(&d, "GET", "/v1/models/default/training/history", beta, NULL, &r),
                     200);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_stop(&d), 0);
    ws_ts_cleanup(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_console_files),
        cmocka_unit_test(test_console_etag),
        cmocka_unit_test(test_console_nothing_else),
        cmocka_unit_test(test_state_changes),
        cmocka_unit_test(test_training_history),
        cmocka_unit_test(test_sessions_list_model),
        cmocka_unit_test(test_keyed),
    };
    return cmocka_run_group_tests(tests, ws_ts_shared_setup, ws_ts_shared_teardown);
}
