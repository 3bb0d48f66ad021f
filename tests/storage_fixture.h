/* storage_fixture.h — what the storage tests (test_storage.c, test_storage_db.c)
 * share: a temporary directory per group, the backend under test, databases
 * opened on it, a fixture of two tenants and a model, small builders, and the
 * runner that runs a group of cases once per registered backend
 * (storage/registry.c). */
#ifndef WS_STORAGE_FIXTURE_H
#define WS_STORAGE_FIXTURE_H

#include <stdint.h>

#include "storage/storage.h"
#include "test_util.h"

/* A checkpoint digest for version rows (the storage layer only stores it). */
#define SHA "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

extern char storage_tmpdir[64];     /* the running group's scratch folder */
extern const char *storage_scheme;  /* the backend under test */

/* path of file `name` in the scratch folder */
void path_in(char *out, size_t n, const char *name);
/* The data location of database `name` on the backend under test. */
void location_in(char *out, size_t n, const char *name);
/* 1 when the backend under test keeps SQLite files that checks may open. */
int on_sqlite(void);
/* 1 when the backend under test is PostgreSQL. */
int on_postgresql(void);
/* Opens (creating) database `name`; asserts success. */
ws_store *open_db(const char *name, ws_store_durability d);

/* Asserts WS_OK, printing the message on failure; the call passes &e_ (declared
 * here) as its ws_error: OK(ws_store_x(..., &e_)). */
#define OK(call)                                                                      \
    do {                                                                              \
        ws_error e_ = {0};                                                            \
        ws_status s_ = (call);                                                        \
        if (s_ != WS_OK) fail_msg("%s -> %s: %s", #call, ws_status_name(s_), e_.msg); \
    } while (0)

void expect_status(ws_status got, ws_status want, const ws_error *err, const char *what);

/* A tenant pair and a model in a fresh database. */
typedef struct {
    ws_store *s;
    int64_t acme, evil, model;
} fixture;

fixture make_fixture(const char *name);
void check_integrity(ws_store *s);
/* A distinct, recognisable state for (seed, rows, cols). */
float *make_state(int seed, int rows, int cols);
ws_store_log_entry entry_for(int step, char *buf, size_t n);
/* A check past the API: sql's count on the SQLite file (other backends run the
 * case without it). */
void assert_raw_count(const char *name, const char *sql, int64_t want);

/* ws_store_log_each/page callback: counts the entries into *(int *)ctx. */
ws_status count_log_cb(void *ctx, const ws_store_log_entry *e);
/* Asserts the tenant's session count. */
void assert_count(ws_store *s, int64_t tenant, int64_t want);

/* Runs `shared` once and `per_backend` once per registered backend, each group
 * in a fresh scratch folder; returns the number of failed cases. WS_TEST_STORE
 * (a scheme) runs only that backend's group, and `shared` only with sqlite. A
 * backend that needs a server it was not given (PostgreSQL: WS_TEST_POSTGRES,
 * or the file WS_TEST_POSTGRES_FILE names) is skipped, and a run that skipped
 * everything returns 77 (ctest's SKIP_RETURN_CODE). */
int storage_run(const struct CMUnitTest *shared, size_t n_shared,
                const struct CMUnitTest *per_backend, size_t n_per_backend);

#ifdef WS_HAVE_POSTGRESQL
/* storage_fixture_pg.c: the server's URI (NULL when none), a group's schemas,
 * the location of database `name` (a schema of the running group, created if
 * new), and ending every connection of the stores open on it (the count). */
const char *pg_test_uri(void);
int pg_group_setup(void);
int pg_group_teardown(void);
void pg_location(char *out, size_t n, const char *name);
int pg_terminate(const char *name);
#endif

#endif
