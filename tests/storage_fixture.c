/* storage_fixture.c — the storage tests' shared scaffolding (storage_fixture.h). */
#include "storage_fixture.h"

#include <dirent.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char storage_tmpdir[64];
const char *storage_scheme;

void path_in(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", storage_tmpdir, name);
}

void location_in(char *out, size_t n, const char *name)
{
#ifdef WS_HAVE_POSTGRESQL
    if (on_postgresql()) {
        pg_location(out, n, name);
        return;
    }
#endif
    snprintf(out, n, "%s:%s/%s", storage_scheme, storage_tmpdir, name);
}

int on_sqlite(void) { return strcmp(storage_scheme, "sqlite") == 0; }

int on_postgresql(void) { return strcmp(storage_scheme, "postgresql") == 0; }

ws_store *open_db(const char *name, ws_store_durability d)
{
    char loc[640];
    location_in(loc, sizeof loc, name);
    ws_store *s = NULL;
    ws_error err = {0};
    ws_status st = ws_store_open(loc, d, 1, &s, &err);
    if (st != WS_OK) fail_msg("open %s: %s", loc, err.msg);
    return s;
}

void expect_status(ws_status got, ws_status want, const ws_error *err, const char *what)
{
    if (got != want)
        fail_msg("%s: got %s (%s), want %s", what, ws_status_name(got), err ? err->msg : "",
                 ws_status_name(want));
}

fixture make_fixture(const char *name)
{
    fixture f = {.s = open_db(name, WS_STORE_DURABILITY_NORMAL)};
    OK(ws_store_tenant_ensure(f.s, "acme", &f.acme, &e_));
    OK(ws_store_tenant_ensure(f.s, "evil", &f.evil, &e_));
    OK(ws_store_model_create(f.s, "life", 0, "{\"d\":8}", NULL, &f.model, &e_));
    return f;
}

void check_integrity(ws_store *s) { OK(ws_store_integrity_check(s, &e_)); }

float *make_state(int seed, int rows, int cols)
{
    float *x = malloc((size_t)rows * cols * sizeof *x);
    assert_non_null(x);
    for (int i = 0; i < rows * cols; i++) x[i] = (float)seed + 0.001f * (float)i;
    return x;
}

ws_store_log_entry entry_for(int step, char *buf, size_t n)
{
    snprintf(buf, n, "[[\"step\",\"%d\"]]", step);
    return (ws_store_log_entry){.instructions_json = buf,
                                .queries_json = "[[\"q\"]]",
                                .answers_json = "[0.5]",
                                .labels_json = NULL,
                                .model_version = 3};
}

void assert_raw_count(const char *name, const char *sql, int64_t want)
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


ws_status count_log_cb(void *ctx, const ws_store_log_entry *e)
{
    (void)e;
    ++*(int *)ctx;
    return WS_OK;
}

void assert_count(ws_store *s, int64_t tenant, int64_t want)
{
    int64_t n = -1;
    OK(ws_store_session_count(s, tenant, &n, &e_));
    assert_int_equal(n, want);
}

static int group_setup(void **state)
{
    (void)state;
    snprintf(storage_tmpdir, sizeof storage_tmpdir, "/tmp/ws_test_storage_XXXXXX");
    if (!mkdtemp(storage_tmpdir)) return -1;
#ifdef WS_HAVE_POSTGRESQL
    if (storage_scheme && on_postgresql()) return pg_group_setup();
#endif
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
#ifdef WS_HAVE_POSTGRESQL
    if (storage_scheme && on_postgresql() && pg_group_teardown() != 0) return -1;
#endif
    DIR *d = opendir(storage_tmpdir);
    if (!d) return -1;
    struct dirent *ent;
    while ((ent = readdir(d))) {
        if (strcmp(ent->d_name, ".") == 0 || strcmp(ent->d_name, "..") == 0) continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", storage_tmpdir, ent->d_name);
        unlink(path);
    }
    closedir(d);
    return rmdir(storage_tmpdir);
}

/* 1 when the backend has what its tests need (a server to talk to). */
static int backend_available(const char *scheme)
{
#ifdef WS_HAVE_POSTGRESQL
    if (!strcmp(scheme, "postgresql")) return pg_test_uri() != NULL;
#endif
    (void)scheme;
    return 1;
}

int storage_run(const struct CMUnitTest *shared, size_t n_shared,
                const struct CMUnitTest *per_backend, size_t n_per_backend)
{
    const char *only = getenv("WS_TEST_STORE");
    if (only && !*only) only = NULL;
    int failed = 0, ran = 0, skipped = 0;
    if (n_shared && (!only || !strcmp(only, "sqlite"))) {
        failed += _cmocka_run_group_tests("storage", shared, n_shared, group_setup,
                                          group_teardown);
        ran++;
    }
    /* A new backend gets every case by its registry line alone. */
    for (int i = 0; i < ws_store_backend_count(); i++) {
        storage_scheme = ws_store_backend_scheme(i);
        if (only && strcmp(only, storage_scheme)) continue;
        if (!backend_available(storage_scheme)) {
            printf("[  SKIPPED ] %s: %zu tests (no server: set WS_TEST_POSTGRES, see "
                   "scripts/pg-test-server.sh)\n",
                   storage_scheme, n_per_backend);
            skipped++;
            continue;
        }
        failed += _cmocka_run_group_tests(storage_scheme, per_backend, n_per_backend,
                                          group_setup, group_teardown);
        ran++;
    }
    if (!ran && !skipped) {
        fprintf(stderr, "WS_TEST_STORE=%s: no such backend in this build\n", only);
        return 1;
    }
    return failed ? failed : ran ? 0 : 77;
}
