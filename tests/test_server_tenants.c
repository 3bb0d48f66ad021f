/* test_server_tenants.c — tenants stay apart (issue 12, item 5), on the real
 * daemon with keys of two tenants (alice, bob) and an admin (ops): a model's
 * checkpoint is admin-only; a model made for bob is seen, used and trained by
 * bob's sessions only, and alice gets the answers a missing model gets, byte
 * for byte; bob's model's vocabulary (in SQLite and in its checkpoint) holds
 * bob's symbols and none of alice's, while the shared default learns from
 * both. */
#define _GNU_SOURCE /* memmem */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "storage/storage.h"
#include "test_server_util.h"
#include "test_util.h"

/* The daemon the tests share (started by setup, stopped by ws_ts_shared_teardown). */
static ws_ts_daemon *const D = &ws_ts_shared;
static const char *const DIR_ = ws_ts_shared_dir;
static char ALICE[128], BOB[128], OPS[128];

/* Symbols only one tenant ever sends. */
#define ALICE_SYM "alice-patient-zorbex"
#define BOB_SYM   "bob-widget-quillon"
#define SMALL     "\"config\":{\"d\":16,\"n_heads\":2,\"n_state\":4,\"n_upd_layers\":1,\"n_ext_layers\":1}"

static int setup(void **state)
{
    (void)state;
    ws_ts_tmpdir(ws_ts_shared_dir, sizeof ws_ts_shared_dir);
    if (ws_ts_key_create(DIR_, "alice", 0, ALICE, sizeof ALICE) != 0) return -1;
    if (ws_ts_key_create(DIR_, "bob", 0, BOB, sizeof BOB) != 0) return -1;
    if (ws_ts_key_create(DIR_, "ops", 1, OPS, sizeof OPS) != 0) return -1;
    return ws_ts_start(D, DIR_, NULL);
}

/* The status of one request, its response freed. */
static long status_of(const char *method, const char *path, const char *key, const char *body)
{
    ws_ts_resp r;
    long st = ws_ts_req(D, method, path, key, body, &r);
    ws_ts_resp_free(&r);
    return st;
}

/* The body of one request (owned), asserting its status. */
static char *body_of(const char *method, const char *path, const char *key, const char *body,
                     long want)
{
    ws_ts_resp r;
    assert_int_equal(ws_ts_req(D, method, path, key, body, &r), want);
    char *b = strdup(r.body);
    assert_non_null(b);
    ws_ts_resp_free(&r);
    return b;
}

static const char *error_code(const ws_ts_resp *r)
{
    return cJSON_GetObjectItem(cJSON_GetObjectItem(r->json, "error"), "code")->valuestring;
}

/* Creating a session on model `hidden` answers `key` byte for byte as on
 * `missing`, a model that does not exist: 404 model_not_found. */
static void session_refused_as_missing(const char *key, const char *hidden, const char *missing)
{
    char bh[128], bm[128];
    snprintf(bh, sizeof bh, "{\"model\":\"%s\"}", hidden);
    snprintf(bm, sizeof bm, "{\"model\":\"%s\"}", missing);
    char *a = body_of("POST", "/v1/sessions", key, bh, 404);
    char *b = body_of("POST", "/v1/sessions", key, bm, 404);
    assert_string_equal(a, b);
    assert_non_null(strstr(a, "\"model_not_found\""));
    free(a);
    free(b);
}

/* 1 when the listing of `key` names model `name`. */
static int lists(const char *key, const char *name)
{
    ws_ts_resp r;
    assert_int_equal(ws_ts_req(D, "GET", "/v1/models", key, NULL, &r), 200);
    int found = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItem(r.json, "models"))
        found |= !strcmp(cJSON_GetObjectItem(m, "name")->valuestring, name);
    ws_ts_resp_free(&r);
    return found;
}

/* One labelled step telling and asking `sym`. */
static void tell(const char *key, const char *model, const char *sym)
{
    char id[33], p[160], body[512];
    assert_int_equal(ws_ts_session(D, key, model, id), 201);
    snprintf(body, sizeof body,
             "{\"instructions\":[{\"fact\":[\"%s\",\"location\",\"attic\"],\"value\":true}],"
             "\"queries\":[{\"fact\":[\"%s\",\"location\",\"attic\"]}],\"labels\":[true]}",
             sym, sym);
    assert_int_equal(status_of("POST", ws_ts_spath(p, sizeof p, id, "/steps"), key, body), 200);
}

/* Which of the two tenants' symbols a vocabulary holds. */
typedef struct {
    int alice, bob;
} sym_seen;

static ws_status see_symbol(void *ctx, int64_t id, const char *sym, size_t len)
{
    (void)id;
    sym_seen *s = ctx;
    s->alice |= memmem(sym, len, ALICE_SYM, strlen(ALICE_SYM)) != NULL;
    s->bob |= memmem(sym, len, BOB_SYM, strlen(BOB_SYM)) != NULL;
    return WS_OK;
}

/* A model's status field, as an admin reads it. */
static double model_status(const char *name, const char *field)
{
    char p[160];
    ws_ts_resp r;
    snprintf(p, sizeof p, "/v1/models/%s", name);
    assert_int_equal(ws_ts_req(D, "GET", p, OPS, NULL, &r), 200);
    double v = cJSON_GetObjectItem(cJSON_GetObjectItem(r.json, "status"), field)->valuedouble;
    ws_ts_resp_free(&r);
    return v;
}

/* The checkpoint download is an admin route: 403 for any other key, like import. */
static void test_checkpoint_admin_only(void **state)
{
    (void)state;
    ws_ts_resp r;
    assert_int_equal(ws_ts_req(D, "GET", "/v1/models/default/checkpoint", BOB, NULL, &r), 403);
    assert_string_equal(error_code(&r),
                        "forbidden");
    assert_null(memmem(r.body, r.len, "worldstate-model-1", 18));
    ws_ts_resp_free(&r);
    assert_int_equal(status_of("HEAD", "/v1/models/default/checkpoint", ALICE, NULL), 403);
    assert_int_equal(status_of("GET", "/v1/models/default/checkpoint", NULL, NULL), 401);
    assert_int_equal(ws_ts_req(D, "GET", "/v1/models/default/checkpoint", OPS, NULL, &r), 200);
    assert_non_null(memmem(r.body, r.len, "worldstate-model-1", 18));
    ws_ts_resp_free(&r);
}

/* Creating a tenant's model: an admin's; bad tenants are refused and change nothing. */
static void test_create_for_tenant(void **state)
{
    (void)state;
    ws_ts_resp r;
    assert_int_equal(status_of("POST", "/v1/models", BOB, "{\"name\":\"mine\",\"tenant\":\"bob\"}"), 403);
    static const char *const bad[] = {
        "{\"name\":\"nobody-m\",\"tenant\":\"nobody\"}", /* no such tenant */
        "{\"name\":\"nobody-m\",\"tenant\":7}",
        "{\"name\":\"nobody-m\",\"tenant\":\"\"}",
        "{\"name\":\"nobody-m\",\"tenant\":\"bad name!\"}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(ws_ts_req(D, "POST", "/v1/models", OPS, bad[i], &r), 400);
        assert_string_equal(error_code(&r),
                            "invalid_request");
        ws_ts_resp_free(&r);
    }
    assert_int_equal(status_of("GET", "/v1/models/nobody-m", OPS, NULL), 404);
    assert_int_equal(ws_ts_req(D, "POST", "/v1/models", OPS,
                               "{\"name\":\"shared-small\",\"tenant\":null," SMALL "}", &r),
                     201);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(r.json, "tenant")));
    ws_ts_resp_free(&r);
    assert_int_equal(
        ws_ts_req(D, "POST", "/v1/models", OPS,
                  "{\"name\":\"bobs\",\"tenant\":\"bob\",\"training\":{\"update_every\":1}," SMALL
                  "}",
                  &r),
        201);
    assert_string_equal(cJSON_GetObjectItem(r.json, "tenant")->valuestring, "bob");
    ws_ts_resp_free(&r);
}

/* bob's model: bob sees, uses and trains it; alice cannot tell it from a model
 * that does not exist; its vocabulary holds bob's symbols only. */
static void test_tenant_model_apart(void **state)
{
    (void)state;
    /* listings: bob sees shared models and his own, alice only the shared, ops all */
    assert_true(lists(BOB, "bobs") && lists(BOB, "default") && lists(BOB, "shared-small"));
    assert_true(!lists(ALICE, "bobs") && lists(ALICE, "default") && lists(ALICE, "shared-small"));
    assert_true(lists(OPS, "bobs"));
    /* alice: GET, session creation, download answer as for a missing model */
    char *hidden = body_of("GET", "/v1/models/bobs", ALICE, NULL, 404);
    char *missing = body_of("GET", "/v1/models/bobz", ALICE, NULL, 404);
    char *at = strstr(missing, "bobz");
    assert_non_null(at);
    memcpy(at, "bobs", 4); /* the messages name the model asked for */
    assert_string_equal(hidden, missing);
    free(hidden);
    free(missing);
    session_refused_as_missing(ALICE, "bobs", "bobz");
    /* an admin key of another tenant sees it but has no session on it either */
    assert_int_equal(status_of("POST", "/v1/sessions", OPS, "{\"model\":\"bobs\"}"), 404);
    assert_int_equal(status_of("GET", "/v1/models/bobs/checkpoint", ALICE, NULL), 403);
    assert_int_equal(status_of("PATCH", "/v1/models/bobs/training", ALICE, "{\"enabled\":false}"), 403);
    ws_ts_resp r;
    assert_int_equal(ws_ts_req(D, "GET", "/v1/models/bobs", BOB, NULL, &r), 200);
    assert_string_equal(cJSON_GetObjectItem(r.json, "tenant")->valuestring, "bob");
    ws_ts_resp_free(&r);

    /* both tenants talk: alice on the shared default, bob on his model and the default */
    tell(ALICE, "default", ALICE_SYM);
    tell(ALICE, "default", ALICE_SYM);
    tell(BOB, "bobs", BOB_SYM);
    tell(BOB, "default", BOB_SYM "-shared");
    /* only bob's step was an example of his model (alice's two went to default);
     * the engine counts an example just after the step's answer: wait for it */
    for (int i = 0; i < 100 && (model_status("bobs", "examples_labelled") < 1 ||
                                model_status("default", "examples_labelled") < 3); i++) {
        struct timespec ts = {0, 50000000};
        nanosleep(&ts, NULL);
    }
    assert_int_equal((int)model_status("bobs", "examples_labelled"), 1);
    assert_int_equal((int)model_status("default", "examples_labelled"), 3);

    /* the vocabularies, as SQLite holds them: bob's model has bob's symbol
     * and none of alice's; the shared default has both */
    char db[320];
    snprintf(db, sizeof db, "%s/worldstate.db", DIR_);
    ws_store *st;
    ws_error err = {0};
    assert_int_equal(ws_store_open(db, WS_STORE_DURABILITY_NORMAL, 0, &st, &err), WS_OK);
    ws_store_model bobs = {0}, def = {0};
    assert_int_equal(ws_store_model_find(st, "bobs", &bobs, &err), WS_OK);
    assert_int_equal(ws_store_model_find(st, "default", &def, &err), WS_OK);
    assert_string_equal(bobs.tenant_name, "bob");
    assert_int_equal(def.tenant, 0);
    sym_seen in_bobs = {0}, in_default = {0};
    assert_int_equal(ws_store_vocab_load(st, bobs.id, see_symbol, &in_bobs, &err), WS_OK);
    assert_int_equal(ws_store_vocab_load(st, def.id, see_symbol, &in_default, &err), WS_OK);
    ws_store_model_clear(&bobs);
    ws_store_model_clear(&def);
    ws_store_close(st);
    assert_true(in_bobs.bob && !in_bobs.alice);
    assert_true(in_default.bob && in_default.alice);

    /* the checkpoint: bob's model's next version carries its vocabulary (an
     * admin imports its own checkpoint back: the stored symbols are merged in) */
    ws_ts_resp ck, imp;
    assert_int_equal(ws_ts_req(D, "GET", "/v1/models/bobs/checkpoint", OPS, NULL, &ck), 200);
    assert_int_equal(ws_ts_http(D, "POST", "/v1/models/bobs/import", OPS, ck.body, ck.len, &imp),
                     200);
    assert_string_equal(cJSON_GetObjectItem(imp.json, "tenant")->valuestring, "bob"); /* still bob's */
    ws_ts_resp_free(&imp);
    ws_ts_resp_free(&ck);
    assert_int_equal(ws_ts_req(D, "GET", "/v1/models/bobs/checkpoint", OPS, NULL, &ck), 200);
    assert_non_null(memmem(ck.body, ck.len, BOB_SYM, strlen(BOB_SYM)));
    assert_null(memmem(ck.body, ck.len, ALICE_SYM, strlen(ALICE_SYM)));
    ws_ts_resp_free(&ck);
    /* the shared default's: alice's symbol is in it, for any admin to read */
    assert_int_equal(ws_ts_req(D, "GET", "/v1/models/default/checkpoint", OPS, NULL, &ck), 200);
    assert_int_equal(ws_ts_http(D, "POST", "/v1/models/default/import", OPS, ck.body, ck.len, &imp),
                     200);
    ws_ts_resp_free(&imp);
    ws_ts_resp_free(&ck);
    assert_int_equal(ws_ts_req(D, "GET", "/v1/models/default/checkpoint", OPS, NULL, &ck), 200);
    assert_non_null(memmem(ck.body, ck.len, ALICE_SYM, strlen(ALICE_SYM)));
    ws_ts_resp_free(&ck);
}

/* Importing a checkpoint for a tenant: the new model is the tenant's; a
 * version keeps its model's tenant; an unknown tenant is refused before the
 * body is read. */
static void test_import_for_tenant(void **state)
{
    (void)state;
    ws_ts_resp ck, r;
    /* a checkpoint no tenant has talked to (its vocabulary is empty) */
    assert_int_equal(ws_ts_req(D, "GET", "/v1/models/shared-small/checkpoint", OPS, NULL, &ck),
                     200);
    assert_int_equal(
        ws_ts_http(D, "POST", "/v1/models/alices/import?tenant=nobody", OPS, ck.body, ck.len, &r),
        400);
    assert_string_equal(error_code(&r),
                        "invalid_request");
    ws_ts_resp_free(&r);
    assert_int_equal(
        ws_ts_http(D, "POST", "/v1/models/alices/import?tenant=alice", ALICE, ck.body, ck.len, &r),
        403);
    ws_ts_resp_free(&r);
    assert_int_equal(status_of("GET", "/v1/models/alices", OPS, NULL), 404); /* nothing made */
    assert_int_equal(
        ws_ts_http(D, "POST", "/v1/models/alices/import?tenant=alice", OPS, ck.body, ck.len, &r),
        201);
    assert_string_equal(cJSON_GetObjectItem(r.json, "tenant")->valuestring, "alice");
    ws_ts_resp_free(&r);
    /* its next version: with no tenant or alice, kept alice's; another tenant is refused */
    assert_int_equal(
        ws_ts_http(D, "POST", "/v1/models/alices/import?tenant=bob", OPS, ck.body, ck.len, &r),
        409);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_http(D, "POST", "/v1/models/alices/import", OPS, ck.body, ck.len, &r),
                     200);
    assert_string_equal(cJSON_GetObjectItem(r.json, "tenant")->valuestring, "alice");
    assert_int_equal(cJSON_GetObjectItem(r.json, "version")->valueint, 2);
    ws_ts_resp_free(&r);
    ws_ts_resp_free(&ck);
    assert_true(lists(ALICE, "alices") && !lists(BOB, "alices"));
    tell(ALICE, "alices", ALICE_SYM);
    session_refused_as_missing(BOB, "alices", "alicez");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checkpoint_admin_only),
        cmocka_unit_test(test_create_for_tenant),
        cmocka_unit_test(test_tenant_model_apart),
        cmocka_unit_test(test_import_for_tenant),
    };
    return cmocka_run_group_tests(tests, setup, ws_ts_shared_teardown);
}
