/* test_storage_db.c — the storage databases themselves, once per registered
 * backend (storage/registry.c): open settings, schema versions and the
 * migrations from v2 and v3, API keys (stored hashed only), two writer threads,
 * an online backup under writes, storage errors by kind (a full disk: unavailable, a damaged page: corrupt);
 * once: the data location and its schemes (SHA-256 has test_sha256.c). Checks
 * that look past the API into the SQLite file run on SQLite only. */
#define _GNU_SOURCE /* memmem */
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "db_damage.h"
#include "storage/sha256.h"
#include "storage_fixture.h"

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
    char loc[640];
    location_in(loc, sizeof loc, "settings.db");
    assert_int_equal(ws_store_open(loc, (ws_store_durability)7, 1, &x, &err), WS_ERR_INVALID);
    snprintf(loc, sizeof loc, "%s:", storage_scheme);
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
    char loc[640];
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
#ifdef WS_HAVE_POSTGRESQL
    /* both URI schemes pick PostgreSQL: a server that is not there is a
     * storage failure (retry later), not an unknown scheme */
    static const char *const pg[] = {"postgresql:///db?host=/nonexistent",
                                      "postgres:///db?host=/nonexistent",
                                      "postgresql:host=/nonexistent dbname=db"};
    for (int i = 0; i < 3; i++) {
        expect_status(ws_store_open(pg[i], WS_STORE_DURABILITY_NORMAL, 1, &s, &err),
                      WS_ERR_STORAGE, &err, pg[i]);
        assert_null(s);
        assert_non_null(strstr(err.msg, "no connection to PostgreSQL"));
    }
#endif
}

static void test_schema_survives_reopen(void **state)
{
    (void)state;
    ws_error err = {0};
    char path[128], loc[640], id[WS_STORE_ID_LEN + 1];
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
    if (!on_sqlite()) skip(); /* a SQLite file's own case */
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
    if (!on_sqlite()) skip(); /* a SQLite file's own case */
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
        snprintf(path, sizeof path, "%s/%s%s", storage_tmpdir, name, suffix[i]);
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
    char loc[640], buf[64];
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

/* ---- WAL checkpoints -------------------------------------------------------------- */

enum { CKPT_SESSIONS = 200, CKPT_ROWS = 64, CKPT_COLS = 128 }; /* 32 KB a state: 6.4 MB */

/* SQLite checkpoints the WAL on a thread of its own (storage/sqlite/wal_checkpoint.c),
 * not inside the commits: with the store open and nothing but commits made (6.4 MB
 * of states), the states still reach the database file (a WAL never checkpointed
 * would leave it as small as it was), and every step reads back. */
static void test_wal_checkpointed(void **state)
{
    (void)state;
    if (!on_sqlite()) skip();
    fixture f = make_fixture("ckpt.db");
    char path[128];
    path_in(path, sizeof path, "ckpt.db");
    static char ids[CKPT_SESSIONS][WS_STORE_ID_LEN + 1];
    for (int i = 0; i < CKPT_SESSIONS; i++) {
        char buf[64];
        float *w = make_state(i, CKPT_ROWS, CKPT_COLS);
        ws_store_log_entry e = entry_for(1, buf, sizeof buf);
        OK(ws_store_session_create(f.s, f.acme, f.model, NULL, 0, 0, 0, 0, ids[i], &e_));
        OK(ws_store_apply_step(f.s, f.acme, ids[i], 0, w, CKPT_ROWS, CKPT_COLS, &e, NULL, &e_));
        free(w);
    }
    /* the checkpoint thread runs when it gets a core: wait for it, generously */
    /* past 1000 pages (4 MB) of WAL a checkpoint is due: at least 1 MB reaches the file */
    const off_t want = (off_t)1 << 20;
    struct stat sb = {0};
    for (int tries = 0; tries < 12000; tries++) { /* 120 s */
        assert_int_equal(stat(path, &sb), 0);
        if (sb.st_size >= want) break;
        usleep(10000);
    }
    if (sb.st_size < want)
        fail_msg("the database file is %lld bytes: the WAL was not checkpointed",
                 (long long)sb.st_size);
    for (int i = 0; i < CKPT_SESSIONS; i += 37) {
        ws_store_session got;
        OK(ws_store_session_get(f.s, f.acme, ids[i], 1, &got, &e_));
        float *w = make_state(i, CKPT_ROWS, CKPT_COLS);
        assert_int_equal(got.step, 1);
        assert_memory_equal(got.state, w, sizeof(float) * CKPT_ROWS * CKPT_COLS);
        free(w);
        ws_store_session_clear(&got);
    }
    check_integrity(f.s);
    ws_store_close(f.s);
}

enum { WAL_SESSIONS = 32, WAL_STEPS = 192 }; /* 6,144 commits of a 32 KB state: 192 MB */

/* Steps committed back to back, as the engine's commit thread does under load,
 * while another connection keeps reading: the WAL file stays bounded (one that
 * is seldom started over grew to 110 MB here; 64 MB is where the store catches
 * up and starts it over, and a commit's pages and a checkpoint's lateness come
 * on top). */
static void test_wal_bounded(void **state)
{
    (void)state;
    if (!on_sqlite()) skip();
    fixture f = make_fixture("walcap.db");
    ws_store *reader = open_db("walcap.db", WS_STORE_DURABILITY_NORMAL);
    char wal[128];
    path_in(wal, sizeof wal, "walcap.db-wal");
    static char ids[WAL_SESSIONS][WS_STORE_ID_LEN + 1];
    for (int i = 0; i < WAL_SESSIONS; i++)
        OK(ws_store_session_create(f.s, f.acme, f.model, NULL, 0, 0, 0, 0, ids[i], &e_));
    float *w = make_state(7, CKPT_ROWS, CKPT_COLS);
    off_t largest = 0;
    for (int step = 0; step < WAL_STEPS; step++)
        for (int i = 0; i < WAL_SESSIONS; i++) {
            char buf[64];
            ws_store_log_entry e = entry_for(step + 1, buf, sizeof buf);
            w[0] = (float)step;
            OK(ws_store_apply_step(f.s, f.acme, ids[i], step, w, CKPT_ROWS, CKPT_COLS, &e, NULL,
                                   &e_));
            ws_store_session got;
            OK(ws_store_session_get(reader, f.acme, ids[(i + 7) % WAL_SESSIONS], 1, &got, &e_));
            ws_store_session_clear(&got);
            struct stat sb;
            if (stat(wal, &sb) == 0 && sb.st_size > largest) largest = sb.st_size;
        }
    free(w);
    printf("wal: largest %.1f MB after %d MB of states\n", (double)largest / 1e6,
           WAL_SESSIONS * WAL_STEPS * CKPT_ROWS * CKPT_COLS * 4 >> 20);
    assert_true(largest < (off_t)80 << 20);
    ws_store_close(reader);
    check_integrity(f.s);
    ws_store_close(f.s);
}

/* ---- online backup -------------------------------------------------------------- */

enum { BACKUP_SESSIONS = 24 };

/* Between the backup's steps: a step committed through another connection
 * (the copy must not see it, nor start over because of it), and a call into
 * the store being copied (refused). */
typedef struct {
    ws_store *src, *other;
    int64_t tenant;
    const char *id;
    int64_t written, last_done, total;
    int calls, reentry;
} backup_watch;

static ws_status backup_between(void *ctx, int64_t done, int64_t total)
{
    backup_watch *b = ctx;
    char buf[64];
    ws_error err = {0};
    int64_t n;
    b->calls++;
    b->reentry = ws_store_session_count(b->src, b->tenant, &n, &err);
    /* progress only grows, over a total that stays that of the snapshot */
    if (done < b->last_done || (b->total && total != b->total)) return WS_ERR_FORMAT;
    b->last_done = done, b->total = total;
    ws_store_log_entry e = entry_for((int)b->written + 1, buf, sizeof buf);
    float w[4] = {(float)b->written, 1, 2, 3};
    ws_status s =
        ws_store_apply_step(b->other, b->tenant, b->id, b->written, w, 2, 2, &e, NULL, &err);
    if (s == WS_OK) b->written++;
    return s;
}

static ws_status backup_stop_at_2(void *ctx, int64_t done, int64_t total)
{
    (void)done, (void)total;
    return ++*(int *)ctx == 2 ? WS_ERR_CONFLICT : WS_OK;
}

/* ws_store_backup: a copy of the database as of the moment it began, made in
 * steps while another connection commits between them; an existing file is
 * never overwritten, a stopped copy leaves nothing, no copy inside a
 * transaction. A backend without it says so (WS_ERR_UNSUPPORTED). */
static void test_backup_under_writes(void **state)
{
    (void)state;
    fixture f = make_fixture("bsrc.db");
    char ids[BACKUP_SESSIONS][WS_STORE_ID_LEN + 1], dest[128], buf[64];
    float *w = make_state(7, 64, 64); /* 16 KiB each: the copy takes many steps */
    for (int i = 0; i < BACKUP_SESSIONS; i++) {
        OK(ws_store_session_create(f.s, f.acme, f.model, w, 64, 64, 1, 0, ids[i], &e_));
        ws_store_log_entry e = entry_for(1, buf, sizeof buf);
        OK(ws_store_apply_step(f.s, f.acme, ids[i], 0, w, 64, 64, &e, NULL, &e_));
    }
    char id[WS_STORE_ID_LEN + 1];
    OK(ws_store_session_create(f.s, f.evil, f.model, NULL, 0, 0, 0, 0, id, &e_));
    path_in(dest, sizeof dest, "bcopy.db");
    ws_error err = {0};
    ws_status st = ws_store_backup(f.s, dest, 4, NULL, NULL, &err);
    if (st == WS_ERR_UNSUPPORTED) { /* e.g. PostgreSQL: pg_dump's job */
        assert_int_not_equal(access(dest, F_OK), 0);
        ws_store_close(f.s);
        free(w);
        return;
    }
    expect_status(st, WS_OK, &err, "a backup");
    assert_int_equal(unlink(dest), 0);

    backup_watch b = {.src = f.s, .other = open_db("bsrc.db", WS_STORE_DURABILITY_NORMAL),
                      .tenant = f.evil, .id = id};
    OK(ws_store_backup(f.s, dest, 4, backup_between, &b, &e_));
    assert_true(b.calls > 10);
    assert_int_equal(b.written, b.calls); /* each step's commit went in */
    assert_int_equal(b.reentry, WS_ERR_INVALID);
    assert_int_equal(b.last_done, b.total);

    /* the copy: everything of before, nothing of during */
    ws_store *c = NULL;
    OK(ws_store_open(dest, WS_STORE_DURABILITY_NORMAL, 0, &c, &e_));
    check_integrity(c);
    assert_count(c, f.acme, BACKUP_SESSIONS);
    ws_store_session got;
    OK(ws_store_session_get(c, f.acme, ids[BACKUP_SESSIONS - 1], 1, &got, &e_));
    assert_int_equal(got.step, 1);
    assert_memory_equal(got.state, w, 64 * 64 * sizeof(float));
    ws_store_session_clear(&got);
    OK(ws_store_session_get(c, f.evil, id, 0, &got, &e_));
    assert_int_equal(got.step, 0);
    ws_store_session_clear(&got);
    ws_store_close(c);
    OK(ws_store_session_get(f.s, f.evil, id, 0, &got, &e_)); /* the source has them all */
    assert_int_equal(got.step, b.written);
    ws_store_session_clear(&got);

    /* an existing file: refused and left as it is */
    struct stat before, after;
    assert_int_equal(stat(dest, &before), 0);
    expect_status(ws_store_backup(f.s, dest, 4, NULL, NULL, &err), WS_ERR_CONFLICT, &err,
                  "a backup onto an existing file");
    assert_int_equal(stat(dest, &after), 0);
    assert_int_equal(before.st_size, after.st_size);
    assert_int_equal(before.st_ino, after.st_ino);

    /* stopped by its callback: that status, and no file */
    char stopped[128];
    path_in(stopped, sizeof stopped, "bstopped.db");
    int n = 0;
    expect_status(ws_store_backup(f.s, stopped, 4, backup_stop_at_2, &n, &err), WS_ERR_CONFLICT,
                  &err, "a stopped backup");
    assert_int_not_equal(access(stopped, F_OK), 0);

    OK(ws_store_begin(f.s, &e_));
    expect_status(ws_store_backup(f.s, stopped, 4, NULL, NULL, &err), WS_ERR_INVALID, &err,
                  "a backup inside a transaction");
    OK(ws_store_rollback(f.s, &e_));
    assert_int_not_equal(access(stopped, F_OK), 0);
    ws_store_close(b.other);
    ws_store_close(f.s);
    free(w);
}

/* ---- storage errors ---------------------------------------------------------- */

/* Storage errors by kind, as the daemon answers them: a write past a full disk
 * is WS_ERR_UNAVAILABLE (503 storage_unavailable), a damaged page
 * WS_ERR_CORRUPT (500 storage_corrupt) — neither a caller's format error. */
static void test_error_kinds(void **state)
{
    (void)state;
    if (!on_sqlite()) skip(); /* a SQLite file's own case */
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

/* ---- a lost connection (PostgreSQL) ------------------------------------------ */

#ifdef WS_HAVE_POSTGRESQL
/* The server ends the store's connection (a restart, a failover, an admin).
 * Outside a transaction nothing was lost but the statement in hand: the next
 * call reconnects and runs (a read, a self-committing write). Inside a group
 * the whole group is lost: its calls and its commit fail as busy (503
 * storage_busy: retry), naming the lost connection, nothing of it is kept,
 * and after the rollback the store works again. While the server is away the
 * reconnect itself fails, as busy too. */
static void test_reconnect(void **state)
{
    (void)state;
    if (!on_postgresql()) skip();
    fixture f = make_fixture("reconnect.db");
    ws_error err = {0};
    char id[WS_STORE_ID_LEN + 1], id2[WS_STORE_ID_LEN + 1], buf[64];
    OK(ws_store_session_create(f.s, f.acme, f.model, NULL, 0, 0, 0, 0, id, &e_));
    ws_store_session got;
    assert_int_equal(pg_terminate("reconnect.db"), 1);
    OK(ws_store_session_get(f.s, f.acme, id, 0, &got, &e_)); /* reconnected by itself */
    assert_int_equal(got.step, 0);
    ws_store_session_clear(&got);
    assert_int_equal(pg_terminate("reconnect.db"), 1);
    OK(ws_store_session_create(f.s, f.acme, f.model, NULL, 0, 0, 0, 0, id2, &e_));
    assert_count(f.s, f.acme, 2);

    float *w = make_state(7, 2, 2);
    ws_store_log_entry e = entry_for(1, buf, sizeof buf);
    OK(ws_store_begin(f.s, &e_));
    OK(ws_store_apply_step(f.s, f.acme, id, 0, w, 2, 2, &e, NULL, &e_));
    assert_int_equal(pg_terminate("reconnect.db"), 1);
    expect_status(ws_store_apply_step(f.s, f.acme, id, 1, w, 2, 2, &e, NULL, &err),
                  WS_ERR_STORAGE, &err, "a step in a group that lost its connection");
    assert_non_null(strstr(err.msg, "connection to PostgreSQL"));
    expect_status(ws_store_commit(f.s, &err), WS_ERR_STORAGE, &err, "its commit");
    assert_false(ws_store_in_transaction(f.s));
    OK(ws_store_rollback(f.s, &e_)); /* nothing left to roll back: fine */
    OK(ws_store_session_get(f.s, f.acme, id, 0, &got, &e_));
    assert_int_equal(got.step, 0); /* the lost group left nothing */
    ws_store_session_clear(&got);
    OK(ws_store_begin(f.s, &e_));
    OK(ws_store_apply_step(f.s, f.acme, id, 0, w, 2, 2, &e, NULL, &e_));
    OK(ws_store_commit(f.s, &e_));
    OK(ws_store_session_get(f.s, f.acme, id, 1, &got, &e_));
    assert_int_equal(got.step, 1);
    assert_memory_equal(got.state, w, 4 * sizeof(float));
    ws_store_session_clear(&got);
    free(w);
    check_integrity(f.s);
    ws_store_close(f.s);
}
#endif

int main(void)
{
    const struct CMUnitTest shared[] = {
        cmocka_unit_test(test_locations),
    };
    const struct CMUnitTest per_backend[] = {
        cmocka_unit_test(test_open_settings),
        cmocka_unit_test(test_schema_survives_reopen),
        cmocka_unit_test(test_schema_v2_migrates),
        cmocka_unit_test(test_schema_v3_migrates),
        cmocka_unit_test(test_api_keys),
        cmocka_unit_test(test_two_writer_threads),
        cmocka_unit_test(test_wal_checkpointed),
        cmocka_unit_test(test_wal_bounded),
        cmocka_unit_test(test_backup_under_writes),
        cmocka_unit_test(test_error_kinds),
#ifdef WS_HAVE_POSTGRESQL
        cmocka_unit_test(test_reconnect),
#endif
    };
    return storage_run(shared, sizeof shared / sizeof *shared, per_backend,
                       sizeof per_backend / sizeof *per_backend);
}
