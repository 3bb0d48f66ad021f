/* test_server_openapi.c — server/daemon/openapi.json against the daemon that
 * serves it: the document is valid, strict OpenAPI 3.0 (tests/openapi_check.c);
 * its operations are exactly the rows of the route table (routes.h: method,
 * pattern, the handler as operationId, the key each needs); and a real daemon
 * on loopback answers every route, successes and errors alike, with what the
 * document says: the status documented, the headers it requires, a body that
 * fits its schema. A route added to the table without its operation, or an
 * answer that drifts from the document, fails here. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "openapi_check.h"
#include "server/daemon/routes.h"
#include "test_server_util.h"
#include "test_util.h"

#define DOC_PATH WS_SOURCE_DIR "/server/daemon/openapi.json"

typedef struct {
    const char *method, *pattern, *handler;
    ws_route_auth auth;
} row;
#define ROW(method, pattern, handler, auth, name, body) {#method, pattern, #handler, WS_AUTH_##auth},
static const row rows[] = {WS_ROUTES(ROW)};
#undef ROW
#define N_ROWS ((int)(sizeof rows / sizeof rows[0]))

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0, got;
    do {
        if (n + 4096 + 1 > cap) {
            cap = 2 * cap + 8192;
            char *b = realloc(buf, cap);
            if (!b) break;
            buf = b;
        }
        got = fread(buf + n, 1, 4096, f);
        n += got;
    } while (got > 0);
    fclose(f);
    if (buf) buf[n] = '\0';
    *len = n;
    return buf;
}

static cJSON *load_doc(void)
{
    size_t len;
    char *text = read_file(DOC_PATH, &len);
    assert_non_null(text);
    cJSON *doc = cJSON_ParseWithLength(text, len);
    free(text);
    assert_non_null(doc);
    return doc;
}

static void lower(char *out, const char *s)
{
    while (*s) *out++ = (char)tolower((unsigned char)*s++);
    *out = '\0';
}

static const cJSON *operation(const cJSON *doc, const char *pattern, const char *method)
{
    char m[16];
    lower(m, method);
    return cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "paths"), pattern),
        m);
}

static void report_ok(const ws_oa_report *rep)
{
    if (rep->n) print_message("%s", rep->msg);
    assert_int_equal(rep->n, 0);
}

static void test_document_valid(void **state)
{
    (void)state;
    cJSON *doc = load_doc();
    ws_oa_report rep = {0};
    ws_oa_check_document(doc, &rep);
    report_ok(&rep);
    cJSON_Delete(doc);
}

/* The checker finds what it is there for: each kind of fault, put into a
 * copy of the document, is reported. */
static void test_checker_catches_faults(void **state)
{
    (void)state;
    cJSON *doc = load_doc();
    cJSON *schemas =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "components"), "schemas");
    cJSON *lr = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(schemas, "Training"), "properties"),
        "lr");
    cJSON_ReplaceItemInObjectCaseSensitive(lr, "exclusiveMinimum", cJSON_CreateNumber(0));
    cJSON *health = cJSON_GetObjectItemCaseSensitive(schemas, "Health");
    cJSON_DeleteItemFromObjectCaseSensitive(health, "additionalProperties");
    cJSON *ready = cJSON_GetObjectItemCaseSensitive(schemas, "Ready");
    cJSON_DeleteItemFromObjectCaseSensitive(ready, "required");
    cJSON *status = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(health, "properties"), "status");
    const char *both[] = {"string", "null"};
    cJSON_ReplaceItemInObjectCaseSensitive(status, "type", cJSON_CreateStringArray(both, 2));
    cJSON_DeleteItemFromObjectCaseSensitive((cJSON *)operation(doc, "/healthz", "GET"), "operationId");
    cJSON *ref = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(schemas, "StepResult"), "properties"),
        "answers");
    cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(ref, "items"), "description", "x");
    cJSON_AddStringToObject(cJSON_GetObjectItemCaseSensitive(schemas, "ModelList"), "$ref",
                            "#/components/schemas/Nowhere");
    ws_oa_report rep = {0};
    ws_oa_check_document(doc, &rep);
    static const char *const expect[] = {
        "exclusiveMinimum must be true or false", "must have additionalProperties: false",
        "must list its required fields",          "OpenAPI 3.1",
        "no operationId",                         "keywords beside $ref",
        "does not resolve",                       NULL};
    for (int i = 0; expect[i]; i++) {
        if (!strstr(rep.msg, expect[i])) print_message("not reported: %s\n%s", expect[i], rep.msg);
        assert_non_null(strstr(rep.msg, expect[i]));
    }
    cJSON_Delete(doc);

    /* values: each fault of a body against a clean document */
    doc = load_doc();
    static const struct {
        const char *schema, *body, *says;
    } bodies[] = {
        {"Health", "{\"status\":\"ok\",\"extra\":1}", "additionalProperties: false"},
        {"Health", "{\"status\":\"up\"}", "enum"},
        {"Health", "{}", "required field \"status\""},
        {"Ready", "{\"status\":\"ready\",\"durability\":\"full\",\"queue_depth\":-1}", "minimum"},
        {"Ready", "{\"status\":\"ready\",\"durability\":\"full\",\"queue_depth\":1.5}", "type integer"},
        {"SessionPage", "{\"sessions\":null,\"next_after\":null}", "not nullable"},
        {"Session", "{\"id\":\"a\",\"model\":\"m\",\"step\":0,\"state_version\":0,\"created_ms\":1,"
                    "\"updated_ms\":1,\"state_shape\":[0]}",
         "fewer than minItems"},
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        char ref_text[128];
        snprintf(ref_text, sizeof ref_text, "{\"$ref\":\"#/components/schemas/%s\"}", bodies[i].schema);
        cJSON *schema = cJSON_Parse(ref_text), *body = cJSON_Parse(bodies[i].body);
        ws_oa_report r = {0};
        ws_oa_check_value(doc, schema, body, "$", &r);
        if (!strstr(r.msg, bodies[i].says)) print_message("%s: %s\n", bodies[i].body, r.msg);
        assert_non_null(strstr(r.msg, bodies[i].says));
        cJSON_Delete(schema);
        cJSON_Delete(body);
    }
    cJSON_Delete(doc);
}

/* The document and the route table name the same operations, both ways, and
 * agree on the key each needs. */
static void test_routes_match_table(void **state)
{
    (void)state;
    cJSON *doc = load_doc();
    int n_ops = 0;
    const cJSON *paths = cJSON_GetObjectItemCaseSensitive(doc, "paths");
    for (const cJSON *item = paths->child; item; item = item->next)
        for (const cJSON *op = item->child; op; op = op->next) {
            if (!strcmp(op->string, "parameters")) continue;
            n_ops++;
            int found = 0;
            for (int i = 0; i < N_ROWS; i++) {
                char m[16];
                lower(m, rows[i].method);
                found |= !strcmp(rows[i].pattern, item->string) && !strcmp(m, op->string);
            }
            if (!found) print_message("%s %s: in the document, not in routes.h\n", op->string, item->string);
            assert_true(found);
        }
    for (int i = 0; i < N_ROWS; i++) {
        const cJSON *op = operation(doc, rows[i].pattern, rows[i].method);
        if (!op) print_message("%s %s: in routes.h, not in the document\n", rows[i].method, rows[i].pattern);
        assert_non_null(op);
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(op, "operationId");
        assert_true(cJSON_IsString(id));
        assert_string_equal(id->valuestring, rows[i].handler);
        const cJSON *sec = cJSON_GetObjectItemCaseSensitive(op, "security");
        const cJSON *responses = cJSON_GetObjectItemCaseSensitive(op, "responses");
        /* a route that needs no key says so (security: []); the others inherit the bearer key */
        assert_int_equal(sec && cJSON_GetArraySize(sec) == 0, rows[i].auth == WS_AUTH_NONE);
        assert_int_equal(cJSON_HasObjectItem(responses, "401"), rows[i].auth != WS_AUTH_NONE);
        assert_int_equal(cJSON_HasObjectItem(responses, "403"), rows[i].auth == WS_AUTH_ADMIN);
        assert_true(cJSON_HasObjectItem(responses, "405"));
    }
    assert_int_equal(n_ops, N_ROWS);
    cJSON_Delete(doc);
}

/* ---- live answers ---------------------------------------------------------- */

static cJSON *live_doc;
static int covered[N_ROWS]; /* rows answered with a 2xx that fit the document */
static char admin_key[128], user_key[128];

static int row_of(const char *pattern, const char *method)
{
    for (int i = 0; i < N_ROWS; i++)
        if (!strcmp(rows[i].pattern, pattern) && !strcmp(rows[i].method, method)) return i;
    return -1;
}

/* Checks one answer against the document (problems into rep). */
static void check_answer(const char *method, const char *path, const ws_ts_resp *r,
                         ws_oa_report *rep)
{
    const cJSON *doc = live_doc;
    char where[600];
    snprintf(where, sizeof where, "%s %s -> %ld", method, path, r->status);
    const char *pattern = ws_oa_path_of(doc, path);
    const char *as = strcmp(method, "HEAD") ? method : "GET";
    const cJSON *op = pattern ? operation(doc, pattern, as) : NULL;
    const cJSON *resp;
    if (!strcmp(method, "OPTIONS") && pattern) { /* every known path: 204 with Allow */
        char allow[128];
        if (r->status != 204 || !ws_ts_header(r, "Allow", allow, sizeof allow))
            ws_oa_problem(rep, "%s: OPTIONS is not 204 with Allow", where);
        return;
    }
    if (op) {
        resp = ws_oa_response(doc, op, r->status);
    } else { /* no route: 404 not_found; a known path, another method: 405 */
        const cJSON *shared = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(doc, "components"), "responses");
        resp = cJSON_GetObjectItemCaseSensitive(shared, pattern ? "MethodNotAllowed" : "NotFound");
        if (r->status != (pattern ? 405 : 404))
            ws_oa_problem(rep, "%s: expected %d", where, pattern ? 405 : 404);
    }
    if (!resp) return ws_oa_problem(rep, "%s: status not in the document", where);
    const cJSON *headers = cJSON_GetObjectItemCaseSensitive(resp, "headers");
    for (const cJSON *h = headers ? headers->child : NULL; h; h = h->next) {
        char value[256];
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(h, "required")) &&
            !ws_ts_header(r, h->string, value, sizeof value))
            ws_oa_problem(rep, "%s: header %s is missing", where, h->string);
    }
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(resp, "content");
    if (!content) {
        if (r->len) ws_oa_problem(rep, "%s: a body where the document has none", where);
    } else if (strcmp(method, "HEAD") != 0) {
        char type[128] = "";
        ws_ts_header(r, "Content-Type", type, sizeof type);
        type[strcspn(type, "; ")] = '\0';
        const cJSON *mt = cJSON_GetObjectItemCaseSensitive(content, type);
        const cJSON *schema = cJSON_GetObjectItemCaseSensitive(mt, "schema");
        /* Only a JSON body is checked as JSON: a binary one may parse as JSON too
         * (a state whose first float's bytes read as a number did). */
        int json = !strcmp(type, "application/json");
        if (!mt)
            ws_oa_problem(rep, "%s: Content-Type %s not in the document", where, type);
        else if (json && !r->json)
            ws_oa_problem(rep, "%s: not JSON", where);
        else if (json)
            ws_oa_check_value(doc, schema, r->json, where, rep);
    }
    if (op && r->status >= 200 && r->status < 300) {
        int i = row_of(pattern, as);
        if (i >= 0) covered[i] = 1;
    }
}

/* One request that must answer `expect` and fit the document; the response
 * is the caller's to free. */
static void call(const char *method, const char *path, const char *key, const char *body,
                 size_t len, long expect, ws_ts_resp *r)
{
    ws_ts_http(&ws_ts_shared, method, path, key, body, len, r);
    if (r->status != expect)
        print_message("%s %s: %ld, expected %ld: %s\n", method, path, r->status, expect, r->body);
    assert_int_equal(r->status, expect);
    ws_oa_report rep = {0};
    check_answer(method, path, r, &rep);
    report_ok(&rep);
}

/* call() with a NUL-terminated body (or none), the response dropped. */
static void expect(const char *method, const char *path, const char *key, const char *body,
                   long status)
{
    ws_ts_resp r;
    call(method, path, key, body, body ? strlen(body) : 0, status, &r);
    ws_ts_resp_free(&r);
}

static char *fmt(char *buf, size_t cap, const char *f, ...) __attribute__((format(printf, 3, 4)));
static char *fmt(char *buf, size_t cap, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf, cap, f, ap);
    va_end(ap);
    return buf;
}

static int live_setup(void **state)
{
    (void)state;
    ws_ts_tmpdir(ws_ts_shared_dir, sizeof ws_ts_shared_dir);
    if (ws_ts_key_create(ws_ts_shared_dir, "ops", 1, admin_key, sizeof admin_key) != 0 ||
        ws_ts_key_create(ws_ts_shared_dir, "acme", 0, user_key, sizeof user_key) != 0)
        return -1;
    live_doc = load_doc();
    static char backups[300];
    snprintf(backups, sizeof backups, "%s/backups", ws_ts_shared_dir);
    if (mkdir(backups, 0700) != 0) return -1;
    const char *extra[] = {"--backup-dir", backups, NULL};
    return ws_ts_start(&ws_ts_shared, ws_ts_shared_dir, extra);
}

static int live_teardown(void **state)
{
    cJSON_Delete(live_doc);
    return ws_ts_shared_teardown(state);
}

/* The daemon serves the document of its build, byte for byte. */
static void test_served_document(void **state)
{
    (void)state;
    size_t len;
    char *text = read_file(DOC_PATH, &len);
    assert_non_null(text);
    ws_ts_resp r;
    call("GET", "/openapi.json", NULL, NULL, 0, 200, &r);
    assert_int_equal(r.len, len);
    assert_memory_equal(r.body, text, len);
    ws_ts_resp_free(&r);
    free(text);
}

static void sessions_and_steps(void)
{
    const char *U = user_key;
    char p[256], sid[40];
    ws_ts_resp r;
    expect("GET", "/v1/sessions", NULL, NULL, 401);
    expect("GET", "/v1/sessions?limit=0", U, NULL, 400);
    call("POST", "/v1/sessions", U, "{}", 2, 201, &r);
    snprintf(sid, sizeof sid, "%s", cJSON_GetObjectItem(r.json, "id")->valuestring);
    ws_ts_resp_free(&r);
    expect("POST", "/v1/sessions", U, "{\"model\":\"nope\"}", 404);
    expect("POST", "/v1/sessions", U, "{\"model\":", 400);
    expect("GET", "/v1/sessions", U, NULL, 200);
    expect("GET", fmt(p, sizeof p, "/v1/sessions/%s", sid), U, NULL, 200);
    expect("GET", "/v1/sessions/0123456789abcdef0123456789abcdef", U, NULL, 404);
    expect("GET", fmt(p, sizeof p, "/v1/sessions/%s/state", sid), U, NULL, 200);
    expect("POST", fmt(p, sizeof p, "/v1/sessions/%s/steps", sid), U,
           "{\"expect_step\":0,\"instructions\":[{\"fact\":[\"mary\",\"kitchen\"],\"value\":true},"
           "{\"fact\":[\"john\"],\"value\":false}],\"queries\":[{\"fact\":[\"mary\",\"kitchen\"]}],"
           "\"labels\":[true]}",
           200);
    expect("POST", p, U, "{\"expect_step\":0}", 409); /* step_conflict, with current_step */
    /* a second step, from a stored state: a state change to list */
    expect("POST", p, U, "{\"instructions\":[{\"fact\":[\"mary\",\"kitchen\"],\"value\":false}]}",
           200);
    expect("GET", fmt(p, sizeof p, "/v1/sessions/%s/state/changes", sid), U, NULL, 200);
    expect("GET", "/v1/sessions/0123456789abcdef0123456789abcdef/state/changes", U, NULL, 404);
    fmt(p, sizeof p, "/v1/sessions/%s/steps", sid);
    expect("POST", p, U, "{\"instructions\":[{\"fact\":[],\"value\":true}]}", 400);
    expect("GET", fmt(p, sizeof p, "/v1/sessions/%s", sid), U, NULL, 200); /* now with a shape */
    expect("GET", fmt(p, sizeof p, "/v1/sessions/%s/state", sid), U, NULL, 200);
    expect("HEAD", p, U, NULL, 200);
    expect("GET", fmt(p, sizeof p, "/v1/sessions/%s/steps?after=0&limit=10", sid), U, NULL, 200);
    expect("GET", fmt(p, sizeof p, "/v1/sessions/%s/steps?limit=x", sid), U, NULL, 400);
    expect("POST", fmt(p, sizeof p, "/v1/sessions/%s/queries", sid), U,
           "{\"queries\":[{\"fact\":[\"mary\",\"kitchen\"]},{\"fact\":[\"nobody\"]}]}", 200);
    expect("POST", p, U, "{}", 400);
    fmt(p, sizeof p, "/v1/sessions/%s/steps/1/labels", sid);
    expect("PUT", p, U, "{\"labels\":[false]}", 409); /* labels_conflict */
    expect("PUT", p, U, "{\"labels\":[false],\"replace\":true}", 200);
    expect("PUT", fmt(p, sizeof p, "/v1/sessions/%s/steps/9/labels", sid), U, "{\"labels\":[true]}",
           404);
    expect("DELETE", fmt(p, sizeof p, "/v1/sessions/%s", sid), U, NULL, 204);
    expect("DELETE", p, U, NULL, 404);
    /* a body over 1 MiB: 413 before it is read */
    size_t big = (1u << 20) + 1;
    char *body = malloc(big);
    assert_non_null(body);
    memset(body, ' ', big);
    call("POST", "/v1/sessions", U, body, big, 413, &r);
    ws_ts_resp_free(&r);
    free(body);
}

static void models(void)
{
    const char *A = admin_key, *U = user_key;
    char p[256], sid[40];
    ws_ts_resp r, ck;
    expect("GET", "/v1/models", U, NULL, 200);
    expect("GET", "/v1/models/default", U, NULL, 200);
    expect("GET", "/v1/models/nope", U, NULL, 404);
    expect("GET", "/v1/models/default/training/history", U, NULL, 200);
    expect("GET", "/v1/models/nope/training/history", U, NULL, 404);
    const char *small = "{\"name\":\"oa\",\"config\":{\"d\":16,\"n_heads\":2,\"n_state\":4},"
                        "\"training\":{\"enabled\":false}}";
    expect("POST", "/v1/models", U, small, 403);
    expect("POST", "/v1/models", A, "{\"name\":\"bad name\"}", 400);
    expect("POST", "/v1/models", A, small, 201);
    expect("POST", "/v1/models", A, small, 409);
    expect("PATCH", "/v1/models/oa/training", A, "{\"update_every\":8}", 200);
    expect("PATCH", "/v1/models/oa/training", A, "{\"lr\":0}", 400);
    expect("PATCH", "/v1/models/nope/training", A, "{}", 404);
    expect("GET", "/v1/models/oa/checkpoint", U, NULL, 403);
    call("GET", "/v1/models/oa/checkpoint", A, NULL, 0, 200, &ck);
    call("POST", "/v1/models/oa/import", A, ck.body, ck.len, 200, &r); /* its version 2 */
    ws_ts_resp_free(&r);
    call("POST", "/v1/models/ob/import", A, ck.body, ck.len, 201, &r); /* a new model */
    ws_ts_resp_free(&r);
    ws_ts_resp_free(&ck);
    expect("POST", "/v1/models/oc/import", A, "not a checkpoint", 400);
    expect("GET", "/v1/models/oa/versions", U, NULL, 200);
    expect("GET", "/v1/models/nope/versions", U, NULL, 404);
    expect("POST", "/v1/models/oa/versions/1/current", A, NULL, 200);
    expect("POST", "/v1/models/oa/versions/99/current", A, NULL, 404);
    expect("POST", "/v1/models/oa/versions/x/current", A, NULL, 400);
    /* delete: refused for default, for a model in use, for a non-admin key */
    call("POST", "/v1/sessions", U, "{\"model\":\"oa\"}", 14, 201, &r);
    snprintf(sid, sizeof sid, "%s", cJSON_GetObjectItem(r.json, "id")->valuestring);
    ws_ts_resp_free(&r);
    expect("DELETE", "/v1/models/default", A, NULL, 409);
    expect("DELETE", "/v1/models/oa", A, NULL, 409);
    expect("DELETE", "/v1/models/oa", U, NULL, 403);
    expect("DELETE", fmt(p, sizeof p, "/v1/sessions/%s", sid), U, NULL, 204);
    expect("DELETE", "/v1/models/oa", A, NULL, 204);
    expect("DELETE", "/v1/models/oa", A, NULL, 404);
    expect("GET", "/v1/models/oa", A, NULL, 404);
}

/* The backup routes: none yet, one started, its state until it is done, and
 * the refusals. */
static void backups(void)
{
    expect("GET", "/v1/admin/backup", admin_key, NULL, 200);
    expect("GET", "/v1/admin/backup", user_key, NULL, 403);
    expect("POST", "/v1/admin/backup", admin_key, "{\"name\":\"../up\"}", 400);
    expect("POST", "/v1/admin/backup", admin_key, "{\"name\":\"oa\"}", 202);
    expect("POST", "/v1/admin/backup", admin_key, "{\"name\":\"oa\"}", 409);
    for (int i = 0; i < 600; i++) { /* each state it reports must fit the document */
        ws_ts_resp r;
        call("GET", "/v1/admin/backup", admin_key, NULL, 0, 200, &r);
        int running = strstr(r.body, "\"running\"") != NULL;
        ws_ts_resp_free(&r);
        if (!running) break;
        usleep(50000);
    }
}

/* Every route, successes and errors, against the document. */
static void test_live_answers_fit(void **state)
{
    (void)state;
    expect("GET", "/healthz", NULL, NULL, 200);
    expect("HEAD", "/healthz", NULL, NULL, 200);
    expect("GET", "/readyz", NULL, NULL, 200);
    expect("GET", "/metrics", NULL, NULL, 200);
    expect("GET", "/version", NULL, NULL, 200);
    expect("PUT", "/healthz", NULL, NULL, 405);
    expect("POST", "/v1/models/default/checkpoint", admin_key, NULL, 405);
    expect("OPTIONS", "/v1/sessions", NULL, NULL, 204);
    expect("GET", "/nowhere", user_key, NULL, 404);
    expect("GET", "/", NULL, NULL, 200); /* the web console: its files need no key */
    expect("HEAD", "/", NULL, NULL, 200);
    expect("GET", "/console/app.js", NULL, NULL, 200);
    expect("GET", "/console/console.css", NULL, NULL, 200);
    expect("GET", "/console/nope.js", NULL, NULL, 404);
    expect("POST", "/", NULL, NULL, 405);
    sessions_and_steps();
    models();
    backups();
    for (int i = 0; i < N_ROWS; i++) { /* GET /openapi.json: test_served_document, before */
        if (!covered[i])
            print_message("%s %s: no live 2xx checked: add a request to this test\n",
                          rows[i].method, rows[i].pattern);
        assert_true(covered[i]);
    }
}

int main(void)
{
    const struct CMUnitTest doc_tests[] = {
        cmocka_unit_test(test_document_valid),
        cmocka_unit_test(test_checker_catches_faults),
        cmocka_unit_test(test_routes_match_table),
    };
    const struct CMUnitTest live_tests[] = {
        cmocka_unit_test(test_served_document),
        cmocka_unit_test(test_live_answers_fit),
    };
    int failed = cmocka_run_group_tests_name("openapi document", doc_tests, NULL, NULL);
    failed += cmocka_run_group_tests_name("openapi live", live_tests, live_setup, live_teardown);
    return failed;
}
