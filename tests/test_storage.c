/* test_storage.c — the storage API on real databases in a temporary directory,
 * once per registered backend (storage/registry.c): settings, schema, sessions
 * and tenant isolation, group commit with a stale expect_step, rollback,
 * bit-exact states (also re-derived ones), the step log, vocabularies, models
 * and versions, API keys (stored hashed only), two writer threads; the data
 * location and its schemes; storage errors by kind (a full disk: unavailable,
 * a damaged page: corrupt); and SHA-256 against the FIPS 180-4 examples.
 * Checks that look past the API into the SQLite file run on SQLite only. */
#define _GNU_SOURCE /* memmem */
#include <dirent.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db_damage.h"
#include "storage/sha256.h"
#include "storage/storage.h"

/* A checkpoint digest for version rows (the storage layer only stores it). */
#define SHA "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#include "test_util.h"

static char tmpdir[64];
static const char *scheme; /* the backend under test */

static void path_in(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", tmpdir, name);
}

/* The data location of database `name` on the backend under test. */
static void location_in(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s:%s/%s", scheme, tmpdir, name);
}

/* 1 when the backend under test keeps SQLite files that checks may open. */
static int on_sqlite(void) { return strcmp(scheme, "sqlite") == 0; }

/* Opens (creating) database `name`; asserts success. */
static ws_store *open_db(const char *name, ws_store_durability d)
{
    char loc[160];
    location_in(loc, sizeof loc, name);
    ws_store *s = NULL;
    ws_error err = {0};
    ws_status st = ws_store_open(loc, d, 1, &s, &err);
    if (st != WS_OK) fail_msg("open %s: %s", loc, err.msg);
    return s;
}

/* Asserts WS_OK, printing the message on failure; the call passes &e_ (declared
 * here) as its ws_error: OK(ws_store_x(..., &e_)). */
#define OK(call)                                                                      \
    do {                                                                              \
        ws_error e_ = {0};                                                            \
        ws_status s_ = (call);                                                        \
        if (s_ != WS_OK) fail_msg("%s -> %s: %s", #call, ws_status_name(s_), e_.msg); \
    } while (0)

static void expect_status(ws_status got, ws_status want, const ws_error *err, const char *what)
{
    if (got != want)
        fail_msg("%s: got %s (%s), want %s", what, ws_status_name(got), err ? err->msg : "",
                 ws_status_name(want));
}

/* A tenant pair and a model in a fresh database. */
typedef struct {
    ws_store *s;
    int64_t acme, evil, model;
} fixture;

static fixture make_fixture(const char *name)
{
    fixture f = {.s = open_db(name, WS_STORE_DURABILITY_NORMAL)};
    OK(ws_store_tenant_ensure(f.s, "acme", &f.acme, &e_));
    OK(ws_store_tenant_ensure(f.s, "evil", &f.evil, &e_));
    OK(ws_store_model_create(f.s, "life", 0, "{\"d\":8}", NULL, &f.model, &e_));
    return f;
}

static void check_integrity(ws_store *s) { OK(ws_store_integrity_check(s, &e_)); }

/* A distinct, recognisable state for (seed, rows, cols). */
static float *make_state(int seed, int rows, int cols)
{
    float *x = malloc((size_t)rows * cols * sizeof *x);
    assert_non_null(x);
    for (int i = 0; i < rows * cols; i++) x[i] = (float)seed + 0.001f * (float)i;
    return x;
}

static ws_store_log_entry entry_for(int step, char *buf, size_t n)
{
    snprintf(buf, n, "[[\"step\",\"%d\"]]", step);
    return (ws_store_log_entry){.instructions_json = buf,
                                .queries_json = "[[\"q\"]]",
                                .answers_json = "[0.5]",
                                .labels_json = NULL,
                                .model_version = 3};
}

/* A check past the API: sql's count on the SQLite file (other backends run the
 * case without it). */
static void assert_raw_count(const char *name, const char *sql, int64_t want)
{
    if (!on_sqlite()) return;
    char path[128];
    path_in(path, sizeof path, name);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    int64_t n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    assert_int_equal(n, want);
}

/* ---- SHA-256 ------------------------------------------------------------------ */

static void test_sha256_vectors(void **state)
{
    (void)state;
    /* FIPS 180-4 examples (NIST CSRC "SHA256.pdf", "SHA2_Additional.pdf"). */
    static const struct {
        const char *msg;
        const char *hex;
    } v[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopq"
         "klmnopqrlmnopqrsmnopqrstnopqrstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
    };
    char hex[65];
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        ws_store_sha256_hex(v[i].msg, strlen(v[i].msg), hex);
        assert_string_equal(hex, v[i].hex);
    }
    /* one million 'a', fed in uneven pieces across block boundaries */
    ws_store_sha256_ctx c;
    ws_store_sha256_init(&c);
    char a[1024]; /* pieces are at most 1009 bytes */
    memset(a, 'a', sizeof a);
    size_t left = 1000000, piece = 1;
    while (left) {
        size_t n = piece < left ? piece : left;
        ws_store_sha256_update(&c, a, n);
        left -= n;
        piece = piece % 997 + 13;
    }
    unsigned char d[32];
    ws_store_sha256_final(&c, d);
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    /* lengths around the 55/56/64-byte padding edges agree with one-shot */
    unsigned char buf[130], one[32], inc[32];
    for (int i = 0; i < 130; i++) buf[i] = (unsigned char)(i * 7 + 1);
    for (size_t n = 50; n <= 130; n++) {
        ws_store_sha256(buf, n, one);
        ws_store_sha256_init(&c);
        ws_store_sha256_update(&c, buf, n / 3);
        ws_store_sha256_update(&c, buf + n / 3, n - n / 3);
        ws_store_sha256_final(&c, inc);
        assert_memory_equal(one, inc, 32);
    }
}

/* ---- connection and schema --------------------------------------------------- */

static void test_open_settings(void **state)
{
    (void)state;
    ws_error err = {0};
    ws_store_durability d;
    assert_int_equal(ws_store_durability_parse("normal", &d, &err), WS_OK);
    assert_int_equal(d, WS_STORE_DURABILITY_NORMAL);
    assert_int_equal(ws_store_durability_parse("FULL", &d, &err), WS_OK);
    assert_int_equal(d, WS_STORE_DURABILITY_FULL);
    assert_int_equal(ws_store_durability_parse("fast", &d, &err), WS_ERR_INVALID);

    ws_store *s = open_db("settings.db", WS_STORE_DURABILITY_NORMAL);
    ws_store *f = open_db("settings.db", WS_STORE_DURABILITY_FULL);
    ws_store_info info;
    OK(ws_store_get_info(s, &info, &e_));
    assert_int_equal(info.schema_version, WS_STORE_SCHEMA_VERSION);
    int64_t t;
    OK(ws_store_tenant_ensure(s, "acme", &t, &e_));
    char path[128];
    path_in(path, sizeof path, "settings.db");
    if (on_sqlite()) {
        OK(ws_store_get_info(s, &info, &e_));
        assert_string_equal(info.journal_mode, "wal");
        assert_int_equal(info.synchronous, 1);
        assert_int_equal(info.foreign_keys, 1);
        assert_int_equal(info.busy_timeout_ms, WS_STORE_BUSY_TIMEOUT_MS);
        OK(ws_store_get_info(f, &info, &e_));
        assert_int_equal(info.synchronous, 2);

        /* WAL is a property of the file: another plain connection sees it, and
         * a write leaves a -wal file beside the database. */
        char wal[128];
        path_in(wal, sizeof wal, "settings.db-wal");
        assert_int_equal(access(wal, F_OK), 0);
        sqlite3 *db = NULL;
        assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
        sqlite3_stmt *st = NULL;
        assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL),
                         SQLITE_OK);
        assert_int_equal(sqlite3_step(st), SQLITE_ROW);
        assert_string_equal((const char *)sqlite3_column_text(st, 0), "wal");
        sqlite3_finalize(st);
        sqlite3_close(db);
    }

    check_integrity(s);
    ws_store_close(f);
    ws_store_close(s);
    ws_store_close(NULL); /* a no-op */

    /* bad arguments never open anything */
    ws_store *x = (ws_store *)&err;
    assert_int_equal(ws_store_open("", WS_STORE_DURABILITY_NORMAL, 1, &x, &err), WS_ERR_INVALID);
    assert_null(x);
    char loc[160];
    location_in(loc, sizeof loc, "settings.db");
    assert_int_equal(ws_store_open(loc, (ws_store_durability)7, 1, &x, &err), WS_ERR_INVALID);
    snprintf(loc, sizeof loc, "%s:", scheme);
    assert_int_equal(ws_store_open(loc, WS_STORE_DURABILITY_NORMAL, 1, &x, &err), WS_ERR_INVALID);
    assert_null(x);
}

/* Which backend a location names: a registered "scheme:", a bare path (the
 * first backend, SQLite), and an unknown scheme refused with its name. */
static void test_locations(void **state)
{
    (void)state;
    assert_string_equal(ws_store_backend_scheme(0), "sqlite");
    assert_null(ws_store_backend_scheme(ws_store_backend_count()));
    char path[128];
    path_in(path, sizeof path, "bare.db");
    ws_store *s = NULL;
    OK(ws_store_open(path, WS_STORE_DURABILITY_NORMAL, 1, &s, &e_));
    int64_t t;
    OK(ws_store_tenant_ensure(s, "acme", &t, &e_));
    ws_store_close(s);
    char loc[160];
    snprintf(loc, sizeof loc, "sqlite:%s", path); /* the same database */
    OK(ws_store_open(loc, WS_STORE_DURABILITY_NORMAL, 0, &s, &e_));
    OK(ws_store_tenant_find(s, "acme", &t, &e_));
    ws_store_close(s);

    ws_error err = {0};
    s = (ws_store *)&err;
    assert_int_equal(ws_store_open("nosuch://host/db", WS_STORE_DURABILITY_NORMAL, 1, &s, &err),
                     WS_ERR_INVALID);
    assert_null(s);
    assert_non_null(strstr(err.msg, "unknown storage scheme \"nosuch:\""));
    assert_non_null(strstr(err.msg, "sqlite:"));
}

static void test_schema_survives_reopen(void **state)
{
    (void)state;
    ws_error err = {0};
    char path[128], loc[160], id[WS_STORE_ID_LEN + 1];
    path_in(path, sizeof path, "reopen.db");
    location_in(loc, sizeof loc, "reopen.db");
    ws_store *s = NULL;
    /* without create, a missing database is NOTFOUND and nothing is created */
    assert_int_equal(ws_store_open(loc, WS_STORE_DURABILITY_NORMAL, 0, &s, &err), WS_ERR_NOTFOUND);
    assert_null(s);
    if (on_sqlite()) assert_int_not_equal(access(path, F_OK), 0);

    fixture f = make_fixture("reopen.db");
    float *w = make_state(5, 2, 3);
    OK(ws_store_session_create(f.s, f.acme, f.model, w, 2, 3, 1, 0, id, &e_));
    const char *syms[] = {"mary", "kitchen"};
    OK(ws_store_vocab_append(f.s, f.model, 0, 2, syms, &e_));
    ws_store_close(f.s);

    OK(ws_store_open(loc, WS_STORE_DURABILITY_FULL, 0, &s, &e_));
    ws_store_session got;
    OK(ws_store_session_get(s, f.acme, id, 1, &got, &e_));
    assert_int_equal(got.rows, 2);
    assert_memory_equal(got.state, w, 6 * sizeof(float));
    ws_store_session_clear(&got);
    int64_t n, t;
    OK(ws_store_vocab_count(s, f.model, &n, &e_));
    assert_int_equal(n, 2);
    OK(ws_store_tenant_find(s, "evil", &t, &e_));
    assert_int_equal(t, f.evil);
    assert_int_equal(ws_store_tenant_find(s, "nobody", &t, &err), WS_ERR_NOTFOUND);
    ws_store_info info;
    OK(ws_store_get_info(s, &info, &e_));
    assert_int_equal(info.schema_version, WS_STORE_SCHEMA_VERSION);
    check_integrity(s);
    ws_store_close(s);
    free(w);
    if (!on_sqlite()) return;

    /* a database from a newer build is refused, not "migrated" */
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    expect_status(ws_store_open(path, WS_STORE_DURABILITY_NORMAL, 1, &s, &err), WS_ERR_FORMAT,
                  &err, "newer schema");
    assert_null(s);

    /* so is a foreign SQLite file */
    char other[128];
    path_in(other, sizeof other, "foreign.db");
    assert_int_equal(sqlite3_open(other, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "CREATE TABLE t(x)", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    expect_status(ws_store_open(other, WS_STORE_DURABILITY_NORMAL, 1, &s, &err), WS_ERR_FORMAT,
                  &err, "foreign db");
    assert_null(s);
}

/* ---- sessions ---------------------------------------------------------------- */

static ws_status count_cb(void *ctx, const ws_store_session *sess)
{
    (void)sess;
    ++*(int *)ctx;
    return WS_OK;
}

static ws_status count_log_cb(void *ctx, const ws_store_log_entry *e)
{
    (void)e;
    ++*(int *)ctx;
    return WS_OK;
}

static void test_sessions_and_isolation(void **state)
{
    (void)state;
    fixture f = make_fixture("sessions.db");
    ws_error err = {0};
    char id[WS_STORE_ID_LEN + 1], id2[WS_STORE_ID_LEN + 1], buf[64];

    OK(ws_store_session_create(f.s, f.acme, f.model, NULL, 0, 0, 0, 0, id, &e_));
    assert_true(ws_store_session_id_valid(id));
    OK(ws_store_session_create(f.s, f.acme, f.model, NULL, 0, 0, 0, 0, id2, &e_));
    assert_string_not_equal(id, id2);
    ws_store_session got;
    OK(ws_store_session_get(f.s, f.acme, id, 1, &got, &e_));
    assert_string_equal(got.id, id);
    assert_int_equal(got.tenant, f.acme);
    assert_int_equal(got.model, f.model);
    assert_int_equal(got.step, 0);
    assert_int_equal(got.rows, 0);
    assert_null(got.state); /* no state yet */
    assert_true(got.created_ms > 0);
    ws_store_session_clear(&got);

    /* bad input: unknown model/tenant, state/shape mismatch */
    float w[4] = {1, 2, 3, 4};
    expect_status(ws_store_session_create(f.s, f.acme, 999, NULL, 0, 0, 0, 0, buf, &err),
                  WS_ERR_NOTFOUND, &err, "unknown model");
    expect_status(ws_store_session_create(f.s, 999, f.model, NULL, 0, 0, 0, 0, buf, &err),
                  WS_ERR_NOTFOUND, &err, "unknown tenant");
    expect_status(ws_store_session_create(f.s, f.acme, f.model, NULL, 2, 2, 0, 0, buf, &err),
                  WS_ERR_INVALID, &err, "NULL state with a shape");
    expect_status(ws_store_session_create(f.s, f.acme, f.model, w, 0, 4, 0, 0, buf, &err),
                  WS_ERR_INVALID, &err, "state with an empty shape");

    /* Another tenant gets NOTFOUND for everything, with the very message a
     * missing session gets: existence does not leak. */
    char want_msg[128];
    snprintf(want_msg, sizeof want_msg, "session %s not found", id);
    ws_store_log_entry e = entry_for(1, buf, sizeof buf);
    int64_t cur = -1;
    int n = 0;
    expect_status(ws_store_session_get(f.s, f.evil, id, 1, &got, &err), WS_ERR_NOTFOUND, &err,
                  "get other tenant");
    assert_string_equal(err.msg, want_msg);
    expect_status(ws_store_session_delete(f.s, f.evil, id, &err), WS_ERR_NOTFOUND, &err,
                  "delete other tenant");
    assert_string_equal(err.msg, want_msg);
    expect_status(ws_store_apply_step(f.s, f.evil, id, 0, w, 2, 2, &e, &cur, &err),
                  WS_ERR_NOTFOUND, &err, "apply other tenant");
    assert_int_equal(cur, -1);
    expect_status(ws_store_log_page(f.s, f.evil, id, 0, 10, count_log_cb, &n, &err),
                  WS_ERR_NOTFOUND, &err, "log other tenant");
    expect_status(ws_store_log_each(f.s, f.evil, id, count_log_cb, &n, &err), WS_ERR_NOTFOUND,
                  &err, "replay other tenant");
    expect_status(ws_store_log_set_labels(f.s, f.evil, id, 1, "[1]", 0, &err), WS_ERR_NOTFOUND,
                  &err, "labels other tenant");
    assert_int_equal(n, 0);
    /* and the session is untouched */
    OK(ws_store_session_get(f.s, f.acme, id, 0, &got, &e_));
    assert_int_equal(got.step, 0);
    ws_store_session_clear(&got);
    /* malformed ids: NOTFOUND too */
    expect_status(ws_store_session_get(f.s, f.acme, "nope", 0, &got, &err), WS_ERR_NOTFOUND, &err,
                  "malformed id");
    expect_status(ws_store_session_get(f.s, f.acme, NULL, 0, &got, &err), WS_ERR_NOTFOUND, &err,
                  "NULL id");

    /* delete takes the log with it (real delete, cascade) */
    OK(ws_store_apply_step(f.s, f.acme, id, 0, w, 2, 2, &e, &cur, &e_));
    assert_int_equal(cur, 1);
    ws_store_close(f.s);
    assert_raw_count("sessions.db", "SELECT count(*) FROM step_log", 1);
    f.s = open_db("sessions.db", WS_STORE_DURABILITY_NORMAL);
    OK(ws_store_session_delete(f.s, f.acme, id, &e_));
    expect_status(ws_store_session_get(f.s, f.acme, id, 0, &got, &err), WS_ERR_NOTFOUND, &err,
                  "get deleted");
    expect_status(ws_store_session_delete(f.s, f.acme, id, &err), WS_ERR_NOTFOUND, &err,
                  "delete twice");
    expect_status(ws_store_apply_step(f.s, f.acme, id, 1, w, 2, 2, &e, &cur, &err),
                  WS_ERR_NOTFOUND, &err, "apply to deleted");
    ws_store_close(f.s);
    assert_raw_count("sessions.db", "SELECT count(*) FROM step_log", 0);
    assert_raw_count("sessions.db", "SELECT count(*) FROM sessions", 1);
}

typedef struct {
    char ids[64][WS_STORE_ID_LEN + 1];
    int n;
} id_list;

static ws_status collect_ids(void *ctx, const ws_store_session *sess)
{
    id_list *l = ctx;
    assert_true(l->n < 64);
    memcpy(l->ids[l->n++], sess->id, WS_STORE_ID_LEN + 1);
    assert_null(sess->state); /* listings never carry states */
    return WS_OK;
}

static ws_status reenter_cb(void *ctx, const ws_store_session *sess)
{
    (void)sess;
    ws_store *s = ctx;
    int64_t n;
    ws_error err = {0};
    /* the listing's statement is still running: re-entry must be refused */
    assert_int_equal(ws_store_session_count(s, 1, &n, &err), WS_ERR_INVALID);
    return WS_ERR_CONFLICT; /* and a callback's status stops the listing */
}

static int cmp_id(const void *a, const void *b) { return strcmp(a, b); }

static void test_session_list_count_limit(void **state)
{
    (void)state;
    fixture f = make_fixture("list.db");
    ws_error err = {0};
    char id[WS_STORE_ID_LEN + 1];
    id_list made = {0};
    for (int i = 0; i < 23; i++) {
        OK(ws_store_session_create(f.s, f.acme, f.model, NULL, 0, 0, 0, 0, id, &e_));
        memcpy(made.ids[made.n++], id, sizeof id);
    }
    for (int i = 0; i < 4; i++)
        OK(ws_store_session_create(f.s, f.evil, f.model, NULL, 0, 0, 0, 0, id, &e_));
    int64_t n;
    OK(ws_store_session_count(f.s, f.acme, &n, &e_));
    assert_int_equal(n, 23);
    OK(ws_store_session_count(f.s, f.evil, &n, &e_));
    assert_int_equal(n, 4);

    /* pages of 10 by keyset cursor: every session once, in id order, none of
     * the other tenant's */
    id_list seen = {0};
    const char *after = NULL;
    for (;;) {
        int before = seen.n;
        OK(ws_store_session_list(f.s, f.acme, after, 10, collect_ids, &seen, &e_));
        assert_true(seen.n - before <= 10);
        if (seen.n == before) break;
        after = seen.ids[seen.n - 1];
    }
    assert_int_equal(seen.n, 23);
    qsort(made.ids, (size_t)made.n, sizeof made.ids[0], cmp_id);
    for (int i = 0; i < 23; i++) assert_string_equal(seen.ids[i], made.ids[i]);
    expect_status(ws_store_session_list(f.s, f.acme, NULL, 0, collect_ids, &seen, &err),
                  WS_ERR_INVALID, &err, "limit 0");

    /* per-tenant limit: checked inside the create transaction */
    expect_status(ws_store_session_create(f.s, f.evil, f.model, NULL, 0, 0, 0, 4, id, &err),
                  WS_ERR_CONFLICT, &err, "tenant limit");
    OK(ws_store_session_create(f.s, f.evil, f.model, NULL, 0, 0, 0, 5, id, &e_));

    /* every session of a model (replay), all tenants */
    int all = 0;
    OK(ws_store_session_each_of_model(f.s, f.model, count_cb, &all, &e_));
    assert_int_equal(all, 28);

    /* callbacks cannot re-enter the store; their status is returned */
    expect_status(ws_store_session_list(f.s, f.acme, NULL, 5, reenter_cb, f.s, &err),
                  WS_ERR_CONFLICT, &err, "callback status");
    OK(ws_store_session_count(f.s, f.acme, &n, &e_)); /* usable again afterwards */
    check_integrity(f.s);
    ws_store_close(f.s);
}

/* The tenant's count of sessions (a counter the schema keeps, schema v4) under
 * creates, deletes, refusals and a rolled-back group: the count and the limit
 * mean exactly what counting the rows meant. */
static void assert_count(ws_store *s, int64_t tenant, int64_t want)
{
    int64_t n = -1;
    OK(ws_store_session_count(s, tenant, &n, &e_));
    assert_int_equal(n, want);
}

static void test_session_counter(void **state)
{
    (void)state;
    fixture f = make_fixture("counter.db");
    ws_error err = {0};
    char ids[3][WS_STORE_ID_LEN + 1], id[WS_STORE_ID_LEN + 1];
    assert_count(f.s, f.acme, 0);
    assert_count(f.s, 999, 0); /* an unknown tenant has none, as before */
    for (int i = 0; i < 3; i++)
        OK(ws_store_session_create(f.s, f.acme, f.model, NULL, 0, 0, 0, 3, ids[i], &e_));
    assert_count(f.s, f.acme, 3);
    assert_count(f.s, f.evil, 0);
    /* at the limit: refused, nothing counted */
    expect_status(ws_store_session_create(f.s, f.acme, f.model, NULL, 0, 0, 0, 3, id, &err),
                  WS_ERR_CONFLICT, &err, "at the limit");
    assert_count(f.s, f.acme, 3);
    /* another tenant's limit is its own */
    OK(ws_store_session_create(f.s, f.evil, f.model, NULL, 0, 0, 0, 1, id, &e_));
    assert_count(f.s, f.evil, 1);
    /* a refused create (unknown model) and a refused delete (another tenant's
     * session) count nothing */
    expect_status(ws_store_session_create(f.s, f.acme, 999, NULL, 0, 0, 0, 0, id, &err),
                  WS_ERR_NOTFOUND, &err, "unknown model");
    expect_status(ws_store_session_delete(f.s, f.evil, ids[0], &err), WS_ERR_NOTFOUND, &err,
                  "another tenant's session");
    assert_count(f.s, f.acme, 3);
    assert_count(f.s, f.evil, 1);
    /* a delete makes room for exactly one more */
    OK(ws_store_session_delete(f.s, f.acme, ids[0], &e_));
    assert_count(f.s, f.acme, 2);
    OK(ws_store_session_create(f.s, f.acme, f.model, NULL, 0, 0, 0, 3, ids[0], &e_));
    expect_status(ws_store_session_create(f.s, f.acme, f.model, NULL, 0, 0, 0, 3, id, &err),
                  WS_ERR_CONFLICT, &err, "full again");
    /* creates and a delete inside a group that is rolled back: all undone */
    OK(ws_store_begin(f.s, &e_));
    OK(ws_store_session_delete(f.s, f.acme, ids[1], &e_));
    OK(ws_store_session_create(f.s, f.acme, f.model, NULL, 0, 0, 0, 3, id, &e_));
    OK(ws_store_session_create(f.s, f.evil, f.model, NULL, 0, 0, 0, 0, id, &e_));
    assert_count(f.s, f.evil, 2); /* the transaction sees its own writes */
    OK(ws_store_rollback(f.s, &e_));
    assert_count(f.s, f.acme, 3);
    assert_count(f.s, f.evil, 1);
    check_integrity(f.s);
    ws_store_close(f.s);
    /* past the API: the counters are the rows' counts */
    assert_raw_count("counter.db",
                     "SELECT count(*) FROM tenants t WHERE t.n_sessions <> "
                     "(SELECT count(*) FROM sessions s WHERE s.tenant = t.id)",
                     0);
}

/* ---- group commit ------------------------------------------------------------ */

static void test_group_commit_with_stale_step(void **state)
{
    (void)state;
    fixture f = make_fixture("group.db");
    ws_store *other = open_db("group.db", WS_STORE_DURABILITY_NORMAL);
    ws_error err = {0};
    enum { N = 5, STALE = 2 };
    char ids[N][WS_STORE_ID_LEN + 1], evil_id[WS_STORE_ID_LEN + 1], buf[64];
    for (int i = 0; i < N; i++)
        OK(ws_store_session_create(f.s, f.acme, f.model, NULL, 0, 0, 0, 0, ids[i], &e_));
    OK(ws_store_session_create(f.s, f.evil, f.model, NULL, 0, 0, 0, 0, evil_id, &e_));
    /* session STALE moves to step 1 first, so "expect 0" is stale for it */
    float *pre = make_state(100, 4, 8);
    ws_store_log_entry e = entry_for(1, buf, sizeof buf);
    OK(ws_store_apply_step(f.s, f.acme, ids[STALE], 0, pre, 4, 8, &e, NULL, &e_));

    float *w[N];
    int64_t cur[N];
    ws_status st[N];
    OK(ws_store_begin(f.s, &e_));
    assert_true(ws_store_in_transaction(f.s));
    expect_status(ws_store_begin(f.s, &err), WS_ERR_INVALID, &err, "nested begin");
    for (int i = 0; i < N; i++) {
        w[i] = make_state(i, 4, 8);
        cur[i] = -1;
        st[i] = ws_store_apply_step(f.s, f.acme, ids[i], 0, w[i], 4, 8, &e, &cur[i], &err);
        if (i == STALE / 2) { /* a foreign session in the same batch: NOTFOUND, harmless */
            int64_t c = -1;
            expect_status(ws_store_apply_step(f.s, f.acme, evil_id, 0, w[i], 4, 8, &e, &c, &err),
                          WS_ERR_NOTFOUND, &err, "other tenant in group");
            assert_int_equal(c, -1);
        }
    }
    /* nothing is visible to another connection before the commit: a step may
     * be acknowledged only after it */
    ws_store_session got;
    OK(ws_store_session_get(other, f.acme, ids[0], 0, &got, &e_));
    assert_int_equal(got.step, 0);
    ws_store_session_clear(&got);
    OK(ws_store_commit(f.s, &e_));
    assert_false(ws_store_in_transaction(f.s));

    for (int i = 0; i < N; i++) {
        if (i == STALE) {
            expect_status(st[i], WS_ERR_CONFLICT, NULL, "stale expect_step");
            assert_int_equal(cur[i], 1); /* the current step comes back */
        } else {
            expect_status(st[i], WS_OK, NULL, "fresh expect_step");
            assert_int_equal(cur[i], 1);
        }
    }
    /* seen through the second connection: committed ones moved, the stale one
     * kept its earlier state and its one log entry */
    for (int i = 0; i < N; i++) {
        OK(ws_store_session_get(other, f.acme, ids[i], 1, &got, &e_));
        assert_int_equal(got.step, 1);
        assert_memory_equal(got.state, i == STALE ? pre : w[i], 32 * sizeof(float));
        assert_int_equal(got.state_version, 3);
        ws_store_session_clear(&got);
        int n = 0;
        OK(ws_store_log_each(other, f.acme, ids[i], count_log_cb, &n, &e_));
        assert_int_equal(n, 1);
    }
    /* the retry with the right step goes through */
    OK(ws_store_apply_step(f.s, f.acme, ids[STALE], 1, w[STALE], 4, 8, &e, &cur[STALE], &e_));
    assert_int_equal(cur[STALE], 2);
    for (int i = 0; i < N; i++) free(w[i]);
    free(pre);
    expect_status(ws_store_commit(f.s, &err), WS_ERR_INVALID, &err, "commit without begin");
    check_integrity(f.s);
    ws_store_close(other);
    ws_store_close(f.s);
}

static void test_rollback_leaves_nothing(void **state)
{
    (void)state;
    fixture f = make_fixture("rollback.db");
    char ids[3][WS_STORE_ID_LEN + 1], buf[64];
    for (int i = 0; i < 3; i++)
        OK(ws_store_session_create(f.s, f.acme, f.model, NULL, 0, 0, 0, 0, ids[i], &e_));
    float *w = make_state(1, 2, 2);
    ws_store_log_entry e = entry_for(1, buf, sizeof buf);
    OK(ws_store_begin(f.s, &e_));
    for (int i = 0; i < 3; i++)
        OK(ws_store_apply_step(f.s, f.acme, ids[i], 0, w, 2, 2, &e, NULL, &e_));
    const char *syms[] = {"a", "b"};
    OK(ws_store_vocab_append(f.s, f.model, 0, 2, syms, &e_));
    OK(ws_store_version_add(f.s, f.model, 1, "/x/v1.safetensors", SHA, NULL, &e_));
    OK(ws_store_rollback(f.s, &e_));
    OK(ws_store_rollback(f.s, &e_)); /* harmless when nothing is open */

    ws_store_session got;
    for (int i = 0; i < 3; i++) {
        OK(ws_store_session_get(f.s, f.acme, ids[i], 1, &got, &e_));
        assert_int_equal(got.step, 0);
        assert_null(got.state);
        ws_store_session_clear(&got);
    }
    int64_t n;
    OK(ws_store_vocab_count(f.s, f.model, &n, &e_));
    assert_int_equal(n, 0);
    ws_store_model m;
    OK(ws_store_model_get(f.s, f.model, &m, &e_));
    assert_int_equal(m.current_version, 0);
    ws_store_model_clear(&m);
    /* an open transaction is rolled back by close, too */
    OK(ws_store_begin(f.s, &e_));
    OK(ws_store_apply_step(f.s, f.acme, ids[0], 0, w, 2, 2, &e, NULL, &e_));
    ws_store_close(f.s);
    assert_raw_count("rollback.db", "SELECT count(*) FROM step_log", 0);
    assert_raw_count("rollback.db", "SELECT max(step) FROM sessions", 0);
    free(w);
}

static void test_state_bit_exact(void **state)
{
    (void)state;
    fixture f = make_fixture("bits.db");
    enum { R = 3, C = 7 }; /* 84 bytes: not a multiple of 8 or 16 */
    uint32_t bits[R * C] = {
        0x00000000, 0x80000000, /* +0, -0 */
        0x00000001, 0x807fffff, /* denormals */
        0x7f800000, 0xff800000, /* +-inf */
        0x7fc00001, 0xffffffff, 0x7f800001, /* NaNs with payloads, a signalling NaN */
        0x3f800000, 0x7f7fffff};
    ws_test_rng rng = {0x5eed};
    for (int i = 11; i < R * C; i++) bits[i] = (uint32_t)ws_test_next(&rng);
    float w[R * C];
    memcpy(w, bits, sizeof w);
    char id[WS_STORE_ID_LEN + 1], buf[64];
    OK(ws_store_session_create(f.s, f.acme, f.model, w, R, C, 7, 0, id, &e_));
    ws_store_session got;
    OK(ws_store_session_get(f.s, f.acme, id, 1, &got, &e_));
    assert_int_equal(got.rows, R);
    assert_int_equal(got.cols, C);
    assert_int_equal(got.state_version, 7);
    assert_memory_equal(got.state, bits, sizeof bits);
    ws_store_session_clear(&got);
    /* the same through apply_step, reversed; and a shape change is stored as is */
    uint32_t rev[R * C];
    for (int i = 0; i < R * C; i++) rev[i] = bits[R * C - 1 - i];
    memcpy(w, rev, sizeof w);
    ws_store_log_entry e = entry_for(1, buf, sizeof buf);
    OK(ws_store_apply_step(f.s, f.acme, id, 0, w, C, R, &e, NULL, &e_));
    OK(ws_store_session_get(f.s, f.acme, id, 1, &got, &e_));
    assert_int_equal(got.rows, C);
    assert_int_equal(got.cols, R);
    assert_memory_equal(got.state, rev, sizeof rev);
    ws_store_session_clear(&got);
    /* without with_state the shape comes back but no buffer */
    OK(ws_store_session_get(f.s, f.acme, id, 0, &got, &e_));
    assert_int_equal(got.rows, C);
    assert_null(got.state);
    ws_store_session_clear(&got);
    ws_error err;
    expect_status(ws_store_apply_step(f.s, f.acme, id, 1, NULL, 0, 0, &e, NULL, &err),
                  WS_ERR_INVALID, &err, "apply without a state");
    /* a re-derived state replaces the state and its version, never the step or log */
    OK(ws_store_session_set_state(f.s, f.acme, id, 1, (const float *)bits, R, C, 9, &e_));
    OK(ws_store_session_get(f.s, f.acme, id, 1, &got, &e_));
    assert_int_equal(got.step, 1);
    assert_int_equal(got.state_version, 9);
    assert_int_equal(got.rows, R);
    assert_memory_equal(got.state, bits, sizeof bits);
    ws_store_session_clear(&got);
    expect_status(ws_store_session_set_state(f.s, f.acme, id, 0, w, R, C, 4, &err),
                  WS_ERR_CONFLICT, &err, "set_state at a stale step");
    expect_status(ws_store_session_set_state(f.s, f.evil, id, 1, w, R, C, 4, &err),
                  WS_ERR_NOTFOUND, &err, "set_state of another tenant's session");
    expect_status(ws_store_session_set_state(f.s, f.acme, id, 1, NULL, 0, 0, 4, &err),
                  WS_ERR_INVALID, &err, "set_state without a state");
    OK(ws_store_session_get(f.s, f.acme, id, 1, &got, &e_));
    assert_int_equal(got.state_version, 9);
    assert_memory_equal(got.state, bits, sizeof bits);
    assert_raw_count("bits.db", "SELECT count(*) FROM step_log", 1);
    ws_store_session_clear(&got);
    ws_store_close(f.s);
}

/* ---- the step log ------------------------------------------------------------ */

typedef struct {
    int64_t steps[64];
    int n;
    int labelled_step; /* the one step expected to carry labels */
    const char *labels;
} log_seen;

static ws_status collect_log(void *ctx, const ws_store_log_entry *e)
{
    log_seen *l = ctx;
    assert_true(l->n < 64);
    l->steps[l->n++] = e->step;
    char want[64];
    snprintf(want, sizeof want, "[[\"step\",\"%d\"]]", (int)e->step);
    assert_string_equal(e->instructions_json, want);
    assert_string_equal(e->queries_json, "[[\"q\"]]");
    assert_string_equal(e->answers_json, "[0.5]");
    assert_int_equal(e->model_version, 3);
    assert_true(e->time_ms > 0);
    if (e->step == l->labelled_step)
        assert_string_equal(e->labels_json, l->labels);
    else
        assert_null(e->labels_json);
    return WS_OK;
}

static void test_step_log_paging_and_labels(void **state)
{
    (void)state;
    fixture f = make_fixture("log.db");
    ws_error err = {0};
    char id[WS_STORE_ID_LEN + 1], other[WS_STORE_ID_LEN + 1], buf[64];
    OK(ws_store_session_create(f.s, f.acme, f.model, NULL, 0, 0, 0, 0, id, &e_));
    OK(ws_store_session_create(f.s, f.acme, f.model, NULL, 0, 0, 0, 0, other, &e_));
    float w[4] = {0};
    for (int t = 1; t <= 25; t++) {
        ws_store_log_entry e = entry_for(t, buf, sizeof buf);
        w[0] = (float)t;
        int64_t cur;
        OK(ws_store_apply_step(f.s, f.acme, id, t - 1, w, 1, 4, &e, &cur, &e_));
        assert_int_equal(cur, t);
        if (t <= 3) OK(ws_store_apply_step(f.s, f.acme, other, t - 1, w, 1, 4, &e, NULL, &e_));
    }
    /* pages of 10 after 0, 10, 20, 25 */
    static const int want_n[] = {10, 10, 5, 0};
    for (int p = 0; p < 4; p++) {
        log_seen seen = {.labelled_step = -1};
        int64_t after = p < 3 ? 10 * p : 25;
        OK(ws_store_log_page(f.s, f.acme, id, after, 10, collect_log, &seen, &e_));
        assert_int_equal(seen.n, want_n[p]);
        for (int i = 0; i < seen.n; i++) assert_int_equal(seen.steps[i], after + 1 + i);
    }
    expect_status(ws_store_log_page(f.s, f.acme, id, 0, WS_STORE_PAGE_MAX + 1, collect_log, NULL,
                                    &err),
                  WS_ERR_INVALID, &err, "page too large");

    /* labels arrive later: set, retry with the same, refuse different, replace */
    OK(ws_store_log_set_labels(f.s, f.acme, id, 7, "[true]", 0, &e_));
    OK(ws_store_log_set_labels(f.s, f.acme, id, 7, "[true]", 0, &e_));
    expect_status(ws_store_log_set_labels(f.s, f.acme, id, 7, "[false]", 0, &err),
                  WS_ERR_CONFLICT, &err, "different labels");
    log_seen seen = {.labelled_step = 7, .labels = "[true]"};
    OK(ws_store_log_page(f.s, f.acme, id, 6, 1, collect_log, &seen, &e_));
    assert_int_equal(seen.n, 1);
    OK(ws_store_log_set_labels(f.s, f.acme, id, 7, "[false]", 1, &e_));
    expect_status(ws_store_log_set_labels(f.s, f.acme, id, 26, "[1]", 0, &err), WS_ERR_NOTFOUND,
                  &err, "labels for an unlogged step");
    expect_status(ws_store_log_set_labels(f.s, f.acme, id, 0, "[1]", 0, &err), WS_ERR_NOTFOUND,
                  &err, "labels for step 0");

    /* the whole log in order (replay), only this session's steps */
    seen = (log_seen){.labelled_step = 7, .labels = "[false]"};
    OK(ws_store_log_each(f.s, f.acme, id, collect_log, &seen, &e_));
    assert_int_equal(seen.n, 25);
    for (int i = 0; i < 25; i++) assert_int_equal(seen.steps[i], i + 1);
    seen = (log_seen){.labelled_step = -1};
    OK(ws_store_log_each(f.s, f.acme, other, collect_log, &seen, &e_));
    assert_int_equal(seen.n, 3);

    /* labels given with the step itself */
    ws_store_log_entry e = entry_for(4, buf, sizeof buf);
    e.labels_json = "[1,0]";
    OK(ws_store_apply_step(f.s, f.acme, other, 3, w, 1, 4, &e, NULL, &e_));
    seen = (log_seen){.labelled_step = 4, .labels = "[1,0]"};
    OK(ws_store_log_page(f.s, f.acme, other, 3, 5, collect_log, &seen, &e_));
    assert_int_equal(seen.n, 1);
    /* a missing field is bad input: nothing changes */
    e.answers_json = NULL;
    int64_t cur = -1;
    expect_status(ws_store_apply_step(f.s, f.acme, other, 4, w, 1, 4, &e, &cur, &err),
                  WS_ERR_INVALID, &err, "entry without answers");
    assert_int_equal(cur, -1);
    check_integrity(f.s);
    ws_store_close(f.s);
}

/* ---- vocabulary -------------------------------------------------------------- */

typedef struct {
    char syms[16][16];
    int n;
} vocab_seen;

static ws_status collect_vocab(void *ctx, int64_t id, const char *sym, size_t len)
{
    vocab_seen *v = ctx;
    assert_int_equal(id, v->n);
    assert_int_equal(strlen(sym), len);
    snprintf(v->syms[v->n++], sizeof v->syms[0], "%s", sym);
    return WS_OK;
}

static void test_vocab(void **state)
{
    (void)state;
    fixture f = make_fixture("vocab.db");
    ws_error err = {0};
    int64_t m2, n;
    OK(ws_store_model_create(f.s, "facts", 0, "{}", "{}", &m2, &e_));
    const char *a[] = {"mary", "location", "kitchen"};
    const char *b[] = {"caf\xc3\xa9", "john"};
    OK(ws_store_vocab_append(f.s, f.model, 0, 3, a, &e_));
    OK(ws_store_vocab_append(f.s, f.model, 3, 2, b, &e_));
    OK(ws_store_vocab_append(f.s, m2, 0, 1, b + 1, &e_)); /* models are separate */
    OK(ws_store_vocab_append(f.s, f.model, 5, 0, NULL, &e_)); /* nothing to do */

    /* the caller's ids must continue the stored ones */
    const char *c[] = {"x"};
    expect_status(ws_store_vocab_append(f.s, f.model, 4, 1, c, &err), WS_ERR_CONFLICT, &err,
                  "append at a wrong id");
    /* a symbol already stored fails the whole append */
    const char *d[] = {"new", "mary"};
    expect_status(ws_store_vocab_append(f.s, f.model, 5, 2, d, &err), WS_ERR_CONFLICT, &err,
                  "duplicate symbol");
    expect_status(ws_store_vocab_append(f.s, 999, 0, 1, c, &err), WS_ERR_NOTFOUND, &err,
                  "unknown model");
    OK(ws_store_vocab_count(f.s, f.model, &n, &e_));
    assert_int_equal(n, 5);

    vocab_seen v = {0};
    OK(ws_store_vocab_load(f.s, f.model, collect_vocab, &v, &e_));
    assert_int_equal(v.n, 5);
    const char *want[] = {"mary", "location", "kitchen", "caf\xc3\xa9", "john"};
    for (int i = 0; i < 5; i++) assert_string_equal(v.syms[i], want[i]);
    v = (vocab_seen){0};
    OK(ws_store_vocab_load(f.s, m2, collect_vocab, &v, &e_));
    assert_int_equal(v.n, 1);
    assert_string_equal(v.syms[0], "john");
    ws_store_close(f.s);
}

/* ---- models and versions ----------------------------------------------------- */

typedef struct {
    int64_t versions[8];
    int n;
} version_seen;

static ws_status collect_versions(void *ctx, const ws_store_version *v)
{
    version_seen *s = ctx;
    s->versions[s->n++] = v->version;
    return WS_OK;
}

static ws_status count_models(void *ctx, const ws_store_model *m)
{
    assert_non_null(m->config_json);
    ++*(int *)ctx;
    return WS_OK;
}

static void test_models_and_versions(void **state)
{
    (void)state;
    fixture f = make_fixture("models.db");
    ws_error err = {0};
    int64_t id;
    expect_status(ws_store_model_create(f.s, "life", 0, "{}", NULL, &id, &err), WS_ERR_CONFLICT,
                  &err, "duplicate model name");
    expect_status(ws_store_model_create(f.s, "bad name!", 0, "{}", NULL, &id, &err),
                  WS_ERR_INVALID, &err, "bad model name");
    ws_store_model m;
    OK(ws_store_model_find(f.s, "life", &m, &e_));
    assert_int_equal(m.id, f.model);
    assert_string_equal(m.config_json, "{\"d\":8}");
    assert_string_equal(m.training_json, "{}");
    assert_int_equal(m.current_version, 0);
    ws_store_model_clear(&m);
    expect_status(ws_store_model_find(f.s, "nope", &m, &err), WS_ERR_NOTFOUND, &err, "find");
    OK(ws_store_model_set_training(f.s, f.model, "{\"lr\":0.001}", &e_));
    expect_status(ws_store_model_set_training(f.s, 999, "{}", &err), WS_ERR_NOTFOUND, &err,
                  "training of unknown model");

    int64_t max = -1;
    OK(ws_store_version_max(f.s, f.model, &max, &e_));
    assert_int_equal(max, 0);
    OK(ws_store_version_add(f.s, f.model, 1, "/ck/life-1.safetensors", SHA, "init", &e_));
    OK(ws_store_version_add(f.s, f.model, 2, "/ck/life-2.safetensors", SHA, NULL, &e_));
    expect_status(ws_store_version_add(f.s, f.model, 2, "/ck/x", SHA, NULL, &err), WS_ERR_CONFLICT,
                  &err, "repeated version");
    expect_status(ws_store_version_add(f.s, 999, 1, "/ck/x", SHA, NULL, &err), WS_ERR_NOTFOUND,
                  &err, "version of unknown model");
    OK(ws_store_model_get(f.s, f.model, &m, &e_));
    assert_int_equal(m.current_version, 2);
    assert_string_equal(m.training_json, "{\"lr\":0.001}");
    ws_store_model_clear(&m);
    /* roll back to 1; a new version must still exceed 2 */
    OK(ws_store_model_set_current(f.s, f.model, 1, &e_));
    expect_status(ws_store_model_set_current(f.s, f.model, 9, &err), WS_ERR_NOTFOUND, &err,
                  "unrecorded version");
    expect_status(ws_store_version_add(f.s, f.model, 2, "/ck/x", SHA, NULL, &err), WS_ERR_CONFLICT,
                  &err, "reused version number");
    OK(ws_store_model_get(f.s, f.model, &m, &e_));
    assert_int_equal(m.current_version, 1);
    ws_store_model_clear(&m);
    OK(ws_store_version_max(f.s, f.model, &max, &e_)); /* the greatest, not the current one */
    assert_int_equal(max, 2);
    OK(ws_store_version_add(f.s, f.model, 3, "/ck/life-3.safetensors", SHA, NULL, &e_));
    ws_store_version v;
    OK(ws_store_version_get(f.s, f.model, 1, &v, &e_));
    assert_string_equal(v.path, "/ck/life-1.safetensors");
    assert_string_equal(v.note, "init");
    assert_string_equal(v.sha256, SHA);
    assert_true(v.created_ms > 0);
    ws_store_version_clear(&v);
    version_seen seen = {0};
    OK(ws_store_version_list(f.s, f.model, collect_versions, &seen, &e_));
    assert_int_equal(seen.n, 3);
    for (int i = 0; i < 3; i++) assert_int_equal(seen.versions[i], i + 1);

    int64_t m2;
    OK(ws_store_model_create(f.s, "facts", 0, "{}", NULL, &m2, &e_));
    int nm = 0;
    OK(ws_store_model_list(f.s, count_models, &nm, &e_));
    assert_int_equal(nm, 2);

    /* a model in use cannot go; an unused one goes with versions and vocab */
    char sid[WS_STORE_ID_LEN + 1];
    OK(ws_store_session_create(f.s, f.acme, f.model, NULL, 0, 0, 0, 0, sid, &e_));
    expect_status(ws_store_model_delete(f.s, f.model, &err), WS_ERR_CONFLICT, &err,
                  "delete a model in use");
    OK(ws_store_session_delete(f.s, f.acme, sid, &e_));
    const char *syms[] = {"a"};
    OK(ws_store_vocab_append(f.s, f.model, 0, 1, syms, &e_));
    OK(ws_store_model_delete(f.s, f.model, &e_));
    expect_status(ws_store_model_get(f.s, f.model, &m, &err), WS_ERR_NOTFOUND, &err, "deleted");
    expect_status(ws_store_version_get(f.s, f.model, 1, &v, &err), WS_ERR_NOTFOUND, &err,
                  "version of a deleted model");
    expect_status(ws_store_model_delete(f.s, f.model, &err), WS_ERR_NOTFOUND, &err,
                  "delete twice");
    check_integrity(f.s);
    ws_store_close(f.s);
    assert_raw_count("models.db", "SELECT count(*) FROM vocab", 0);
    assert_raw_count("models.db", "SELECT count(*) FROM model_versions", 0);
}

/* A tenant's model: recorded with its tenant, usable by that tenant's sessions
 * only (another tenant's session is NOTFOUND, as for a missing model). */
static void test_model_of_tenant(void **state)
{
    (void)state;
    fixture f = make_fixture("tenant_model.db");
    ws_error err = {0};
    int64_t own, id;
    expect_status(ws_store_model_create(f.s, "acme-only", 999, "{}", NULL, &id, &err),
                  WS_ERR_NOTFOUND, &err, "model of an unknown tenant");
    OK(ws_store_model_create(f.s, "acme-only", f.acme, "{}", NULL, &own, &e_));
    ws_store_model m;
    OK(ws_store_model_find(f.s, "acme-only", &m, &e_));
    assert_int_equal(m.tenant, f.acme);
    assert_string_equal(m.tenant_name, "acme");
    ws_store_model_clear(&m);
    OK(ws_store_model_get(f.s, f.model, &m, &e_)); /* the fixture's model is shared */
    assert_int_equal(m.tenant, 0);
    assert_string_equal(m.tenant_name, "");
    ws_store_model_clear(&m);

    char sid[WS_STORE_ID_LEN + 1];
    expect_status(ws_store_session_create(f.s, f.evil, own, NULL, 0, 0, 1, 0, sid, &err),
                  WS_ERR_NOTFOUND, &err, "a session on another tenant's model");
    char missing[64]; /* worded as for a model that does not exist */
    snprintf(missing, sizeof missing, "model %lld not found", (long long)own);
    assert_string_equal(err.msg, missing);
    int64_t n = -1;
    OK(ws_store_session_count(f.s, f.evil, &n, &e_));
    assert_int_equal(n, 0);
    OK(ws_store_session_create(f.s, f.acme, own, NULL, 0, 0, 1, 0, sid, &e_));
    OK(ws_store_session_create(f.s, f.evil, f.model, NULL, 0, 0, 1, 0, sid, &e_));
    check_integrity(f.s);
    ws_store_close(f.s);
    assert_raw_count("tenant_model.db", "SELECT count(*) FROM models WHERE tenant IS NULL", 1);
}

/* Opens the old database `name`, whose table has no `column` yet: migrated to
 * the current version. */
static ws_store *open_migrated(const char *name, const char *table, const char *column)
{
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM pragma_table_info('%s') WHERE name = '%s'",
             table, column);
    assert_raw_count(name, sql, 0);
    ws_store *s = open_db(name, WS_STORE_DURABILITY_NORMAL);
    ws_store_info info;
    OK(ws_store_get_info(s, &info, &e_));
    assert_int_equal(info.schema_version, WS_STORE_SCHEMA_VERSION);
    return s;
}

/* Makes a current database one of schema version 3 (before the tenants'
 * session counters): without the triggers and the column, user_version 3. */
static void downgrade_to_v3(sqlite3 *db)
{
    assert_int_equal(sqlite3_exec(db,
                                  "BEGIN;"
                                  "DROP TRIGGER sessions_count_insert;"
                                  "DROP TRIGGER sessions_count_delete;"
                                  "ALTER TABLE tenants DROP COLUMN n_sessions;"
                                  "PRAGMA user_version = 3; COMMIT;",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
}

/* A database of schema version 3 opens: the migration counts each tenant's
 * sessions, and from there the counters follow creates and deletes. */
static void test_schema_v3_migrates(void **state)
{
    (void)state;
    if (!on_sqlite()) return;
    fixture f = make_fixture("v3.db");
    ws_error err = {0};
    char ids[3][WS_STORE_ID_LEN + 1], id[WS_STORE_ID_LEN + 1], path[128];
    int64_t quiet;
    OK(ws_store_tenant_ensure(f.s, "quiet", &quiet, &e_)); /* a tenant with no session */
    for (int i = 0; i < 3; i++)
        OK(ws_store_session_create(f.s, f.acme, f.model, NULL, 0, 0, 0, 0, ids[i], &e_));
    OK(ws_store_session_create(f.s, f.evil, f.model, NULL, 0, 0, 0, 0, id, &e_));
    ws_store_close(f.s);
    path_in(path, sizeof path, "v3.db");
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    downgrade_to_v3(db);
    /* rows the v3 build writes, no counter seeing them: a session more for
     * evil, one of acme's gone */
    char sql[256];
    snprintf(sql, sizeof sql,
             "INSERT INTO sessions(id, tenant, model, created_ms, updated_ms) "
             "VALUES('ffffffffffffffffffffffffffffffff', %lld, %lld, 0, 0);"
             "DELETE FROM sessions WHERE id = '%s';",
             (long long)f.evil, (long long)f.model, ids[2]);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    ws_store *s = open_migrated("v3.db", "tenants", "n_sessions");
    assert_count(s, f.acme, 2);
    assert_count(s, f.evil, 2);
    assert_count(s, quiet, 0);
    /* the limit holds at the migrated count, and the counters move on */
    expect_status(ws_store_session_create(s, f.evil, f.model, NULL, 0, 0, 0, 2, id, &err),
                  WS_ERR_CONFLICT, &err, "evil at its limit after the migration");
    OK(ws_store_session_delete(s, f.acme, ids[1], &e_));
    assert_count(s, f.acme, 1);
    OK(ws_store_session_create(s, f.acme, f.model, NULL, 0, 0, 0, 2, id, &e_));
    expect_status(ws_store_session_create(s, f.acme, f.model, NULL, 0, 0, 0, 2, id, &err),
                  WS_ERR_CONFLICT, &err, "acme at its limit");
    OK(ws_store_session_create(s, quiet, f.model, NULL, 0, 0, 0, 1, id, &e_));
    assert_count(s, f.acme, 2);
    assert_count(s, quiet, 1);
    check_integrity(s);
    ws_store_close(s);
}

/* A database of schema version 2 (before models had tenants) opens: it is
 * migrated to the current version, its data intact, its models shared. The v2
 * file is made from a current one the way SQLite rebuilds a table: models
 * again without its tenant column, user_version 2. */
static void test_schema_v2_migrates(void **state)
{
    (void)state;
    if (!on_sqlite()) return;
    fixture f = make_fixture("v2.db");
    char sid[WS_STORE_ID_LEN + 1], path[128];
    OK(ws_store_session_create(f.s, f.acme, f.model, NULL, 0, 0, 1, 0, sid, &e_));
    OK(ws_store_version_add(f.s, f.model, 1, "models/life-v1.safetensors", SHA, "created", &e_));
    const char *syms[] = {"mary"};
    OK(ws_store_vocab_append(f.s, f.model, 0, 1, syms, &e_));
    ws_store_close(f.s);
    path_in(path, sizeof path, "v2.db");
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    downgrade_to_v3(db);
    assert_int_equal(sqlite3_exec(db,
                                  "PRAGMA foreign_keys = OFF; BEGIN;"
                                  "CREATE TABLE v2("
                                  "  id INTEGER PRIMARY KEY,"
                                  "  name TEXT NOT NULL UNIQUE,"
                                  "  config TEXT NOT NULL,"
                                  "  training TEXT NOT NULL,"
                                  "  current_version INTEGER NOT NULL DEFAULT 0,"
                                  "  created_ms INTEGER NOT NULL);"
                                  "INSERT INTO v2 SELECT id, name, config, training, "
                                  "  current_version, created_ms FROM models;"
                                  "DROP TABLE models; ALTER TABLE v2 RENAME TO models;"
                                  "PRAGMA user_version = 2; COMMIT;",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    ws_store *s = open_migrated("v2.db", "models", "tenant");
    ws_store_model m;
    OK(ws_store_model_find(s, "life", &m, &e_));
    assert_int_equal(m.id, f.model);
    assert_int_equal(m.current_version, 1);
    assert_int_equal(m.tenant, 0); /* every model before tenants is shared */
    ws_store_model_clear(&m);
    ws_store_session got;
    OK(ws_store_session_get(s, f.acme, sid, 0, &got, &e_));
    assert_int_equal(got.model, f.model);
    ws_store_session_clear(&got);
    int64_t n = 0, id;
    OK(ws_store_vocab_count(s, f.model, &n, &e_));
    assert_int_equal(n, 1);
    OK(ws_store_session_create(s, f.evil, f.model, NULL, 0, 0, 1, 0, sid, &e_));
    OK(ws_store_model_create(s, "evil-only", f.evil, "{}", NULL, &id, &e_));
    check_integrity(s);
    ws_store_close(s);
    assert_raw_count("v2.db", "SELECT count(*) FROM models WHERE tenant IS NOT NULL", 1);
}

/* ---- API keys ---------------------------------------------------------------- */

typedef struct {
    int n, n_revoked;
    char prefixes[4][WS_STORE_KEY_PREFIX_LEN + 1];
} key_seen;

static ws_status collect_keys(void *ctx, const ws_store_key_info *k)
{
    key_seen *s = ctx;
    assert_true(s->n < 4);
    snprintf(s->prefixes[s->n++], sizeof s->prefixes[0], "%s", k->prefix);
    if (k->revoked_ms) s->n_revoked++;
    return WS_OK;
}

/* All bytes of the database file and its WAL. */
static unsigned char *db_bytes(const char *name, size_t *n)
{
    unsigned char *all = NULL;
    *n = 0;
    static const char *const suffix[] = {"", "-wal"};
    for (int i = 0; i < 2; i++) {
        char path[160];
        snprintf(path, sizeof path, "%s/%s%s", tmpdir, name, suffix[i]);
        FILE *fp = fopen(path, "rb");
        if (!fp) continue;
        assert_int_equal(fseek(fp, 0, SEEK_END), 0);
        long len = ftell(fp);
        assert_true(len >= 0);
        rewind(fp);
        all = realloc(all, *n + (size_t)len + 1);
        assert_non_null(all);
        assert_int_equal(fread(all + *n, 1, (size_t)len, fp), (size_t)len);
        *n += (size_t)len;
        fclose(fp);
    }
    return all;
}

/* The database bytes hold the key's hash and neither the key nor its secret part
 * (everything after the listed prefix). */
static void assert_key_hashed_only(const unsigned char *bytes, size_t nb, const char *k)
{
    char hash[65];
    ws_store_sha256_hex(k, WS_STORE_KEY_LEN, hash);
    assert_non_null(memmem(bytes, nb, hash, 64));
    assert_null(memmem(bytes, nb, k, WS_STORE_KEY_LEN));
    assert_null(memmem(bytes, nb, k + WS_STORE_KEY_PREFIX_LEN,
                       WS_STORE_KEY_LEN - WS_STORE_KEY_PREFIX_LEN));
}

static void test_api_keys(void **state)
{
    (void)state;
    ws_store *s = open_db("keys.db", WS_STORE_DURABILITY_NORMAL);
    ws_error err = {0};
    char key[WS_STORE_KEY_LEN + 1], admin_key[WS_STORE_KEY_LEN + 1];
    int64_t kid, admin_id, n;
    OK(ws_store_key_count_active(s, &n, &e_));
    assert_int_equal(n, 0);
    OK(ws_store_key_create(s, "acme", 0, "laptop", key, &kid, &e_));
    OK(ws_store_key_create(s, "ops", 1, NULL, admin_key, &admin_id, &e_));
    assert_int_equal(strlen(key), WS_STORE_KEY_LEN);
    assert_memory_equal(key, "wsk_", 4);
    assert_string_not_equal(key, admin_key);
    expect_status(ws_store_key_create(s, "no spaces", 0, NULL, key + 0, NULL, &err),
                  WS_ERR_INVALID, &err, "bad tenant name");

    ws_store_principal p;
    OK(ws_store_key_verify(s, key, &p, &e_));
    assert_int_equal(p.key_id, kid);
    assert_string_equal(p.tenant_name, "acme");
    assert_false(p.admin);
    int64_t acme;
    OK(ws_store_tenant_find(s, "acme", &acme, &e_));
    assert_int_equal(p.tenant, acme);
    OK(ws_store_key_verify(s, admin_key, &p, &e_));
    assert_string_equal(p.tenant_name, "ops");
    assert_true(p.admin);

    /* wrong keys: one character off, truncated, empty, NULL */
    char wrong[WS_STORE_KEY_LEN + 1];
    memcpy(wrong, key, sizeof wrong);
    wrong[20] = wrong[20] == 'a' ? 'b' : 'a';
    expect_status(ws_store_key_verify(s, wrong, &p, &err), WS_ERR_NOTFOUND, &err, "wrong key");
    wrong[WS_STORE_KEY_LEN - 1] = '\0';
    expect_status(ws_store_key_verify(s, wrong, &p, &err), WS_ERR_NOTFOUND, &err, "short key");
    expect_status(ws_store_key_verify(s, "", &p, &err), WS_ERR_NOTFOUND, &err, "empty key");
    expect_status(ws_store_key_verify(s, NULL, &p, &err), WS_ERR_NOTFOUND, &err, "NULL key");

    key_seen seen = {0};
    OK(ws_store_key_list(s, collect_keys, &seen, &e_));
    assert_int_equal(seen.n, 2);
    assert_memory_equal(seen.prefixes[0], key, WS_STORE_KEY_PREFIX_LEN);
    assert_memory_equal(seen.prefixes[1], admin_key, WS_STORE_KEY_PREFIX_LEN);

    /* revoked keys stop working at once; revoking is idempotent */
    OK(ws_store_key_revoke(s, kid, &e_));
    expect_status(ws_store_key_verify(s, key, &p, &err), WS_ERR_NOTFOUND, &err, "revoked key");
    OK(ws_store_key_revoke(s, kid, &e_));
    expect_status(ws_store_key_revoke(s, 999, &err), WS_ERR_NOTFOUND, &err, "unknown key id");
    OK(ws_store_key_count_active(s, &n, &e_));
    assert_int_equal(n, 1);
    seen = (key_seen){0};
    OK(ws_store_key_list(s, collect_keys, &seen, &e_));
    assert_int_equal(seen.n_revoked, 1);
    check_integrity(s);
    ws_store_close(s);

    if (!on_sqlite()) return;
    size_t nb;
    unsigned char *bytes = db_bytes("keys.db", &nb);
    assert_non_null(bytes);
    assert_key_hashed_only(bytes, nb, key);
    assert_key_hashed_only(bytes, nb, admin_key);
    free(bytes);
}

/* ---- two writer threads ------------------------------------------------------ */

enum { THREAD_SESSIONS = 4, THREAD_ROUNDS = 60 };

typedef struct {
    int64_t tenant, model;
    char ids[THREAD_SESSIONS][WS_STORE_ID_LEN + 1];
    ws_status failed;
    ws_error err;
    int n_ok;
} writer;

/* Each writer has its own connection and sessions: a group transaction per
 * round over its sessions, plus a self-committing create now and then. Any
 * SQLITE_BUSY escaping the busy timeout would show up as a failure here. */
static void *writer_main(void *arg)
{
    writer *w = arg;
    ws_store *s = NULL;
    char loc[160], buf[64];
    location_in(loc, sizeof loc, "threads.db");
    if ((w->failed = ws_store_open(loc, WS_STORE_DURABILITY_NORMAL, 0, &s, &w->err))) return NULL;
    float state[16];
    for (int r = 0; r < THREAD_ROUNDS && !w->failed; r++) {
        if ((w->failed = ws_store_begin(s, &w->err))) break;
        for (int i = 0; i < THREAD_SESSIONS && !w->failed; i++) {
            for (int k = 0; k < 16; k++) state[k] = (float)(r * 100 + i);
            ws_store_log_entry e = entry_for(r + 1, buf, sizeof buf);
            w->failed = ws_store_apply_step(s, w->tenant, w->ids[i], r, state, 4, 4, &e, NULL,
                                            &w->err);
        }
        if (w->failed) {
            ws_store_rollback(s, NULL);
            break;
        }
        if ((w->failed = ws_store_commit(s, &w->err))) break;
        w->n_ok++;
        if (r % 10 == 0) {
            char id[WS_STORE_ID_LEN + 1];
            w->failed = ws_store_session_create(s, w->tenant, w->model, NULL, 0, 0, 0, 0, id,
                                                &w->err);
        }
    }
    ws_store_close(s);
    return NULL;
}

static void test_two_writer_threads(void **state)
{
    (void)state;
    fixture f = make_fixture("threads.db");
    writer w[2] = {{.tenant = f.acme, .model = f.model}, {.tenant = f.evil, .model = f.model}};
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < THREAD_SESSIONS; i++)
            OK(ws_store_session_create(f.s, w[t].tenant, f.model, NULL, 0, 0, 0, 0, w[t].ids[i],
                                       &e_));
    pthread_t th[2];
    for (int t = 0; t < 2; t++) assert_int_equal(pthread_create(&th[t], NULL, writer_main, &w[t]), 0);
    for (int t = 0; t < 2; t++) assert_int_equal(pthread_join(th[t], NULL), 0);
    for (int t = 0; t < 2; t++) {
        if (w[t].failed) fail_msg("writer %d: %s: %s", t, ws_status_name(w[t].failed), w[t].err.msg);
        assert_int_equal(w[t].n_ok, THREAD_ROUNDS);
    }
    /* every write is there */
    for (int t = 0; t < 2; t++) {
        int64_t n;
        OK(ws_store_session_count(f.s, w[t].tenant, &n, &e_));
        assert_int_equal(n, THREAD_SESSIONS + THREAD_ROUNDS / 10);
        for (int i = 0; i < THREAD_SESSIONS; i++) {
            ws_store_session got;
            OK(ws_store_session_get(f.s, w[t].tenant, w[t].ids[i], 1, &got, &e_));
            assert_int_equal(got.step, THREAD_ROUNDS);
            assert_true(got.state[0] == (float)((THREAD_ROUNDS - 1) * 100 + i));
            ws_store_session_clear(&got);
            int nlog = 0;
            OK(ws_store_log_each(f.s, w[t].tenant, w[t].ids[i], count_log_cb, &nlog, &e_));
            assert_int_equal(nlog, THREAD_ROUNDS);
        }
    }
    check_integrity(f.s);
    OK(ws_store_checkpoint(f.s, &e_));
    ws_store_close(f.s);
}

/* ---- fixture ------------------------------------------------------------------ */

/* Storage errors by kind, as the daemon answers them: a write past a full disk
 * is WS_ERR_UNAVAILABLE (503 storage_unavailable), a damaged page
 * WS_ERR_CORRUPT (500 storage_corrupt) — neither a caller's format error. */
static void test_error_kinds(void **state)
{
    (void)state;
    if (!on_sqlite()) return;
    fixture f = make_fixture("kinds.db");
    char id[WS_STORE_ID_LEN + 1], buf[64];
    OK(ws_store_session_create(f.s, f.acme, f.model, NULL, 0, 0, 0, 0, id, &e_));
    float *w = make_state(3, 64, 64); /* 16 KiB a step */
    ws_error err = {0};
    ws_status st = WS_OK;
    ws_test_file_limit(256 << 10);
    for (int step = 0; step < 64 && st == WS_OK; step++) {
        ws_store_log_entry e = entry_for(step + 1, buf, sizeof buf);
        st = ws_store_begin(f.s, &err);
        if (st == WS_OK) st = ws_store_apply_step(f.s, f.acme, id, step, w, 64, 64, &e, NULL, &err);
        if (st == WS_OK) st = ws_store_commit(f.s, &err);
    }
    ws_test_file_limit(0);
    expect_status(st, WS_ERR_UNAVAILABLE, &err, "a write past a full disk");
    OK(ws_store_rollback(f.s, &e_));
    ws_store_close(f.s);
    free(w);

    char path[128];
    path_in(path, sizeof path, "kinds.db");
    ws_test_corrupt_root(path, "sessions");
    ws_store *s = open_db("kinds.db", WS_STORE_DURABILITY_NORMAL);
    ws_store_session got = {0};
    expect_status(ws_store_session_get(s, f.acme, id, 0, &got, &err), WS_ERR_CORRUPT, &err,
                  "a read of a damaged page");
    ws_store_session_clear(&got);
    ws_store_close(s);
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ws_test_storage_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    DIR *d = opendir(tmpdir);
    if (!d) return -1;
    struct dirent *ent;
    while ((ent = readdir(d))) {
        if (strcmp(ent->d_name, ".") == 0 || strcmp(ent->d_name, "..") == 0) continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", tmpdir, ent->d_name);
        unlink(path);
    }
    closedir(d);
    return rmdir(tmpdir);
}

int main(void)
{
    const struct CMUnitTest shared[] = {
        cmocka_unit_test(test_sha256_vectors),
        cmocka_unit_test(test_locations),
    };
    const struct CMUnitTest per_backend[] = {
        cmocka_unit_test(test_open_settings),
        cmocka_unit_test(test_schema_survives_reopen),
        cmocka_unit_test(test_sessions_and_isolation),
        cmocka_unit_test(test_session_list_count_limit),
        cmocka_unit_test(test_session_counter),
        cmocka_unit_test(test_group_commit_with_stale_step),
        cmocka_unit_test(test_rollback_leaves_nothing),
        cmocka_unit_test(test_state_bit_exact),
        cmocka_unit_test(test_step_log_paging_and_labels),
        cmocka_unit_test(test_vocab),
        cmocka_unit_test(test_models_and_versions),
        cmocka_unit_test(test_model_of_tenant),
        cmocka_unit_test(test_schema_v2_migrates),
        cmocka_unit_test(test_schema_v3_migrates),
        cmocka_unit_test(test_api_keys),
        cmocka_unit_test(test_two_writer_threads),
        cmocka_unit_test(test_error_kinds),
    };
    int failed = cmocka_run_group_tests_name("storage", shared, setup, teardown);
    /* A new backend gets every case by its registry line alone. */
    for (int i = 0; i < ws_store_backend_count(); i++) {
        scheme = ws_store_backend_scheme(i);
        failed += cmocka_run_group_tests_name(scheme, per_backend, setup, teardown);
    }
    return failed;
}
