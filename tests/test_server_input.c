/* test_server_input.c — what a client sends, at the daemon's edge (issue 14,
 * items 2, 4 and 10): strings are strict UTF-8 without NUL or control
 * characters, numbers follow RFC 8259, the learning rate is checked as it is
 * stored (so a restart never refuses it), every reply is UTF-8 JSON in the
 * error shape, and the HTTP framing (Content-Length, %2F, %00) is unambiguous. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/ws_utf8.h"
#include "test_server_util.h"
#include "test_util.h"
#include "utf8_cases.h"

/* The daemon the tests share (ws_ts_shared_setup starts it). */
static ws_ts_daemon *const D = &ws_ts_shared;
static const char *const DIR_ = ws_ts_shared_dir;

/* A refusal: the status, UTF-8 JSON with {"error":{"code","message"}}, the code. */
static void assert_error(const ws_ts_resp *r, long status, const char *code)
{
    if (r->status != status) fail_msg("status %ld, not %ld: %s", r->status, status, r->body);
    assert_true(ws_utf8_valid((const unsigned char *)r->body, r->len));
    const cJSON *e = cJSON_GetObjectItem(r->json, "error");
    assert_true(cJSON_IsString(cJSON_GetObjectItem(e, "message")));
    const cJSON *c = cJSON_GetObjectItem(e, "code");
    assert_true(cJSON_IsString(c));
    assert_string_equal(c->valuestring, code);
}

static const char *message(const ws_ts_resp *r)
{
    return cJSON_GetObjectItem(cJSON_GetObjectItem(r->json, "error"), "message")->valuestring;
}

static long step(const char *id, const char *body, size_t len, ws_ts_resp *r)
{
    char p[128];
    return ws_ts_http(D, "POST", ws_ts_spath(p, sizeof p, id, "/steps"), NULL, body, len, r);
}

/* Item 2: every invalid UTF-8 form in a symbol is refused (all were 200). */
static void test_utf8_symbols(void **state)
{
    (void)state;
    char id[33], body[256];
    ws_ts_resp r;
    assert_int_equal(ws_ts_session(D, NULL, "default", id), 201);
    for (int i = 0; i < WS_UTF8_N_BAD; i++) {
        int n = snprintf(body, sizeof body,
                         "{\"instructions\":[{\"fact\":[\"a%sb\",\"c\"],\"value\":true}]}",
                         ws_utf8_bad[i]);
        step(id, body, (size_t)n, &r);
        assert_error(&r, 400, "bad_json");
        ws_ts_resp_free(&r);
    }
    /* lone surrogates as escapes */
    const char *esc[] = {"\\ud800", "\\udfff", "\\ud800\\u0041"};
    for (int i = 0; i < 3; i++) {
        int n = snprintf(body, sizeof body,
                         "{\"instructions\":[{\"fact\":[\"a%s\",\"c\"],\"value\":true}]}", esc[i]);
        step(id, body, (size_t)n, &r);
        assert_error(&r, 400, "bad_json");
        ws_ts_resp_free(&r);
    }
    /* The session is untouched, and the edges of the valid range are symbols. */
    char p[128];
    assert_int_equal(ws_ts_req(D, "GET", ws_ts_spath(p, sizeof p, id, ""), NULL, NULL, &r), 200);
    assert_int_equal(cJSON_GetObjectItem(r.json, "step")->valueint, 0);
    ws_ts_resp_free(&r);
    for (int i = 0; i < WS_UTF8_N_GOOD; i++) {
        int n = snprintf(body, sizeof body,
                         "{\"instructions\":[{\"fact\":[\"a%s\",\"c\"],\"value\":true}]}",
                         ws_utf8_good[i]);
        assert_int_equal(step(id, body, (size_t)n, &r), 200);
        ws_ts_resp_free(&r);
    }
    assert_int_equal(ws_ts_req(D, "GET", ws_ts_spath(p, sizeof p, id, "/steps"), NULL, NULL, &r),
                     200);
    assert_true(ws_utf8_valid((const unsigned char *)r.body, r.len));
    assert_non_null(strstr(r.body, "a\xF4\x8F\xBF\xBF"));
    ws_ts_resp_free(&r);
}

/* Item 2: \u0000 used to cut a string (a symbol truncated, "default\u0000x"
 * naming model default); control characters in symbols were kept. */
static void test_nul_and_controls(void **state)
{
    (void)state;
    char id[33];
    ws_ts_resp r;
    ws_ts_req(D, "POST", "/v1/sessions", NULL, "{\"model\":\"default\\u0000x\"}", &r);
    assert_error(&r, 400, "invalid_request");
    assert_non_null(strstr(message(&r), "\"model\""));
    ws_ts_resp_free(&r);
    ws_ts_req(D, "POST", "/v1/sessions", NULL, "{\"model\\u0000\":\"default\"}", &r);
    assert_error(&r, 400, "invalid_request");
    ws_ts_resp_free(&r);
    ws_ts_req(D, "POST", "/v1/sessions", NULL, "{\"model\":\"def\\u0001ault\"}", &r);
    assert_error(&r, 400, "invalid_request");
    assert_non_null(strstr(message(&r), "model contains a control character"));
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_session(D, NULL, "default", id), 201);
    const char *nul = "{\"instructions\":[{\"fact\":[\"a\\u0000b\",\"c\"],\"value\":true}]}";
    step(id, nul, strlen(nul), &r);
    assert_error(&r, 400, "invalid_request");
    assert_non_null(strstr(message(&r), "\"fact\""));
    ws_ts_resp_free(&r);
    const char *ctl[] = {"\\u0001", "\\u001f", "\\u007f", "\\n", "\\t", "\x7f"};
    for (int i = 0; i < 6; i++) {
        char body[128];
        int n = snprintf(body, sizeof body,
                         "{\"instructions\":[{\"fact\":[\"a%sb\",\"c\"],\"value\":true}]}", ctl[i]);
        step(id, body, (size_t)n, &r);
        assert_error(&r, 400, "invalid_request");
        assert_non_null(strstr(message(&r), "instructions[0].fact[0]"));
        ws_ts_resp_free(&r);
    }
    /* a raw control byte inside a string is not JSON */
    const char raw[] = "{\"instructions\":[{\"fact\":[\"a\x01\",\"c\"],\"value\":true}]}";
    step(id, raw, sizeof raw - 1, &r);
    assert_error(&r, 400, "bad_json");
    ws_ts_resp_free(&r);
    /* a body with a NUL byte in it */
    const char zero[] = "{\"model\":\"default\"}\0x";
    ws_ts_http(D, "POST", "/v1/sessions", NULL, zero, sizeof zero - 1, &r);
    assert_error(&r, 400, "bad_json");
    ws_ts_resp_free(&r);
}

/* A key's note (printed by `key list`, tab-separated) is checked the same way. */
static void test_key_note(void **state)
{
    (void)state;
    char dir[256], cmd[1024];
    ws_ts_tmpdir(dir, sizeof dir);
    const char *daemon = getenv("WS_DAEMON");
    assert_non_null(daemon);
    snprintf(cmd, sizeof cmd,
             "'%s' key create --create --tenant t --note \"$(printf 'a\\tb')\" --data-dir '%s' "
             ">/dev/null 2>&1",
             daemon, dir);
    assert_int_not_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd,
             "'%s' key create --create --tenant t --note 'caf\xC3\xA9' --data-dir '%s' >/dev/null 2>&1",
             daemon, dir);
    assert_int_equal(system(cmd), 0);
    ws_ts_cleanup(dir);
}

/* Item 10: numbers follow RFC 8259 (cJSON took "00", "1." and control bytes
 * before a number); error messages stay UTF-8 when they echo a cut name. */
static void test_numbers(void **state)
{
    (void)state;
    char id[33];
    ws_ts_resp r;
    assert_int_equal(ws_ts_session(D, NULL, "default", id), 201);
    const char *bad[] = {"{\"expect_step\":00}", "{\"expect_step\":\x01 0}",
                         "{\"expect_step\":-0.}", "{\"expect_step\":0e}", "{\"expect_step\":0.0.0}",
                         "{\"queries\":[{\"vector\":[1.]}]}", "{\"queries\":[{\"vector\":[.5]}]}",
                         "{\"queries\":[{\"vector\":[01]}]}"};
    for (int i = 0; i < 8; i++) {
        step(id, bad[i], strlen(bad[i]), &r);
        assert_error(&r, 400, "bad_json");
        ws_ts_resp_free(&r);
    }
    /* a 64-byte cut of this name ends inside "é": the message stays UTF-8 */
    char body[160];
    int n = snprintf(body, sizeof body, "{\"%.63s\xC3\xA9\":01}",
                     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
    step(id, body, (size_t)n, &r);
    assert_error(&r, 400, "bad_json");
    ws_ts_resp_free(&r);
    /* a step log's "inferred" mark (a replay posts it back): a boolean or nothing */
    const char *marked =
        "{\"instructions\":[{\"fact\":[\"a\",\"c\"],\"value\":false,\"inferred\":1}]}";
    step(id, marked, strlen(marked), &r);
    assert_error(&r, 400, "invalid_request");
    ws_ts_resp_free(&r);
    const char *ok = "{\"expect_step\":0,\"instructions\":[{\"fact\":[\"a\",\"c\"],"
                     "\"value\":true},{\"fact\":[\"b\"],\"value\":false,\"inferred\":true}]}";
    assert_int_equal(step(id, ok, strlen(ok), &r), 200);
    ws_ts_resp_free(&r);
}

/* Item 4: lr 1e-46 is 0 as a float: it was stored, and the next start exited 1. */
static void test_lr_stored(void **state)
{
    (void)state;
    ws_ts_resp r;
    const char *path = "/v1/models/default/training";
    ws_ts_req(D, "PATCH", path, NULL, "{\"lr\":1e-46}", &r);
    assert_error(&r, 400, "invalid_request");
    ws_ts_resp_free(&r);
    /* the smallest float: accepted, so the next start must take it */
    assert_int_equal(ws_ts_req(D, "PATCH", path, NULL, "{\"lr\":1.5e-45}", &r), 200);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_stop(D), 0);
    assert_int_equal(ws_ts_start(D, DIR_, NULL), 0);
    assert_int_equal(ws_ts_req(D, "GET", "/v1/models/default", NULL, NULL, &r), 200);
    double lr = cJSON_GetObjectItem(cJSON_GetObjectItem(r.json, "training"), "lr")->valuedouble;
    assert_true(lr > 0 && lr < 2e-45);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_req(D, "PATCH", path, NULL, "{\"lr\":0.001}", &r), 200);
    ws_ts_resp_free(&r);
}

/* Whether the model's stored training setting `name`, as GET /v1/models/default
 * says, prints as `want` (JSON). */
static int training_is(const char *name, const char *want)
{
    ws_ts_resp r;
    assert_int_equal(ws_ts_req(D, "GET", "/v1/models/default", NULL, NULL, &r), 200);
    char *v =
        cJSON_PrintUnformatted(cJSON_GetObjectItem(cJSON_GetObjectItem(r.json, "training"), name));
    assert_non_null(v);
    int same = !strcmp(v, want);
    free(v);
    ws_ts_resp_free(&r);
    return same;
}

/* A training setting: each of `bad` refused with nothing changed (the field
 * stays at `first`), `good` taken, kept across a start, then `first` again. */
static void check_setting(const char *name, const char *first, const char *good,
                          const char *const *bad, size_t n_bad)
{
    ws_ts_resp r;
    const char *path = "/v1/models/default/training";
    char body[96];
    assert_true(training_is(name, first));
    for (size_t i = 0; i < n_bad; i++) {
        ws_ts_req(D, "PATCH", path, NULL, bad[i], &r);
        assert_error(&r, 400, "invalid_request");
        ws_ts_resp_free(&r);
        assert_true(training_is(name, first));
    }
    snprintf(body, sizeof body, "{\"%s\":%s}", name, good);
    assert_int_equal(ws_ts_req(D, "PATCH", path, NULL, body, &r), 200);
    ws_ts_resp_free(&r);
    assert_true(training_is(name, good));
    assert_int_equal(ws_ts_stop(D), 0);
    assert_int_equal(ws_ts_start(D, DIR_, NULL), 0);
    assert_true(training_is(name, good));
    snprintf(body, sizeof body, "{\"%s\":%s}", name, first);
    assert_int_equal(ws_ts_req(D, "PATCH", path, NULL, body, &r), 200);
    ws_ts_resp_free(&r);
}

/* rehearsal: an integer in [0, 8] (the training pass's trajectories), off by
 * default. */
static void test_rehearsal_setting(void **state)
{
    (void)state;
    const char *bad[] = {"{\"rehearsal\":9}",          "{\"rehearsal\":-1}",
                         "{\"rehearsal\":1.5}",        "{\"rehearsal\":\"8\"}",
                         "{\"rehearsal\":true}",       "{\"rehearsal\":null}",
                         "{\"rehearsal\":8,\"lr\":-1}"};
    check_setting("rehearsal", "0", "8", bad, sizeof bad / sizeof bad[0]);
}

/* scope: "all" (the default) or "symbols", nothing else. */
static void test_scope_setting(void **state)
{
    (void)state;
    const char *bad[] = {"{\"scope\":\"weights\"}", "{\"scope\":\"SYMBOLS\"}",
                         "{\"scope\":1}",           "{\"scope\":null}",
                         "{\"scope\":\"\"}",        "{\"scope\":\"symbols\",\"lr\":-1}"};
    check_setting("scope", "\"all\"", "\"symbols\"", bad, sizeof bad / sizeof bad[0]);
}

/* rules: a boolean, off by default. */
static void test_rules_setting(void **state)
{
    (void)state;
    const char *bad[] = {"{\"rules\":1}", "{\"rules\":\"true\"}", "{\"rules\":null}",
                         "{\"rules\":true,\"lr\":-1}"};
    check_setting("rules", "false", "true", bad, sizeof bad / sizeof bad[0]);
}

/* One raw HTTP exchange (curl would not send these); the reply into out. */
static size_t raw_http(const char *request, char *out, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)D->port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(write(fd, request, strlen(request)), (ssize_t)strlen(request));
    size_t n = 0;
    ssize_t k;
    while (n + 1 < cap && (k = read(fd, out + n, cap - 1 - n)) > 0) n += (size_t)k;
    out[n] = '\0';
    close(fd);
    return n;
}

/* Item 10: disagreeing Content-Length headers; %2F and %00 in the path. */
static void test_framing(void **state)
{
    (void)state;
    char reply[4096];
    raw_http("POST /v1/sessions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
             "Content-Length: 2\r\nContent-Length: 19\r\n\r\n{\"model\":\"default\"}",
             reply, sizeof reply);
    assert_true(!strncmp(reply, "HTTP/1.1 400", 12));
    assert_non_null(strstr(reply, "\"invalid_request\""));
    /* an encoded '/' or NUL never forges a segment: 404, as for any unknown path */
    const char *paths[] = {"/v1/models/default%2Fcheckpoint", "/v1/models/default%2fcheckpoint",
                           "/v1/models/default%00x", "/v1%2Fmodels", "/v1/models%00/x"};
    for (int i = 0; i < 5; i++) {
        ws_ts_resp r;
        ws_ts_req(D, "GET", paths[i], NULL, NULL, &r);
        assert_error(&r, 404, "not_found");
        ws_ts_resp_free(&r);
    }
    ws_ts_resp r; /* other escapes still decode */
    assert_int_equal(ws_ts_req(D, "GET", "/v1/models/defaul%74", NULL, NULL, &r), 200);
    ws_ts_resp_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8_symbols),      cmocka_unit_test(test_nul_and_controls),
        cmocka_unit_test(test_numbers),           cmocka_unit_test(test_lr_stored),
        cmocka_unit_test(test_framing),           cmocka_unit_test(test_key_note),
        cmocka_unit_test(test_rehearsal_setting), cmocka_unit_test(test_scope_setting),
        cmocka_unit_test(test_rules_setting),
    };
    return cmocka_run_group_tests(tests, ws_ts_shared_setup, ws_ts_shared_teardown);
}
