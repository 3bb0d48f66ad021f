/* connection.c — opening and closing a SQLite connection, its settings, and
 * the admin checks (integrity, checkpoint). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sqlite_internal.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "storage/ stores world states as little-endian float32 and copies them as is"
#endif

/* Runs a PRAGMA that answers one row and returns its first column as text
 * (into buf) — used to confirm that a setting really took. */
static ws_status pragma_text(ws_sqlite *s, const char *sql, char *buf, size_t n, ws_error *err)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK) return ws_sqlite__sqlfail(s, rc, err, sql);
    rc = sqlite3_step(st);
    ws_status r = WS_OK;
    if (rc == SQLITE_ROW) {
        const unsigned char *t = sqlite3_column_text(st, 0);
        snprintf(buf, n, "%s", t ? (const char *)t : "");
    } else {
        r = rc == SQLITE_DONE ? ws_error_set(err, WS_ERR_STORAGE, "%s: no result", sql)
                              : ws_sqlite__sqlfail(s, rc, err, sql);
    }
    (void)sqlite3_finalize(st); /* repeats the step's error, handled above */
    return r;
}

/* Runs a PRAGMA assignment (answers no row). */
static ws_status pragma_set(ws_sqlite *s, const char *sql, ws_error *err)
{
    int rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? WS_OK : ws_sqlite__sqlfail(s, rc, err, sql);
}

/* Connection settings, each checked by reading it back: SQLite ignores an
 * unknown or inapplicable PRAGMA silently. */
static ws_status configure(ws_sqlite *s, ws_error *err)
{
    char v[32];
    /* Before anything else touches the file: every lock wait below and later
     * is bounded by the busy handler rather than failing at once. */
    int rc = sqlite3_busy_timeout(s->db, WS_STORE_BUSY_TIMEOUT_MS);
    if (rc != SQLITE_OK) return ws_sqlite__sqlfail(s, rc, err, "storage: setting busy_timeout");
    /* Extended codes name the exact cause (e.g. SQLITE_IOERR_FSYNC) in messages. */
    rc = sqlite3_extended_result_codes(s->db, 1);
    if (rc != SQLITE_OK) return ws_sqlite__sqlfail(s, rc, err, "storage: extended result codes");

    /* WAL: readers never block the writer nor it them, and a commit is one
     * append (+ fsync under FULL). Persistent in the file once set. */
    WS_TRY(pragma_text(s, "PRAGMA journal_mode = WAL", v, sizeof v, err));
    if (strcmp(v, "wal") != 0)
        return ws_error_set(err, WS_ERR_UNSUPPORTED,
                            "storage: cannot use WAL mode (journal_mode is \"%s\"); the "
                            "database must be a file on a local file system", v);

    /* Per connection: NORMAL (1) syncs the WAL only at checkpoints, FULL (2) at
     * every commit. See storage.h for what each promises. */
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA synchronous = %d", (int)s->durability);
    WS_TRY(pragma_set(s, sql, err));
    WS_TRY(pragma_text(s, "PRAGMA synchronous", v, sizeof v, err));
    if (atoi(v) != (int)s->durability)
        return ws_error_set(err, WS_ERR_STORAGE, "storage: synchronous is %s, wanted %d", v,
                            (int)s->durability);

    /* Off by default in SQLite; the schema relies on it for tenant/model
     * references and for deleting a session's log with the session. */
    WS_TRY(pragma_set(s, "PRAGMA foreign_keys = ON", err));
    WS_TRY(pragma_text(s, "PRAGMA foreign_keys", v, sizeof v, err));
    if (strcmp(v, "1") != 0)
        return ws_error_set(err, WS_ERR_UNSUPPORTED,
                            "storage: this SQLite cannot enforce foreign keys");
    return WS_OK;
}

ws_status ws_sqlite_open(const char *path, ws_store_durability durability, int create,
                         ws_store **out, ws_error *err)
{
    *out = NULL;
    /* Handles are used by one thread at a time (one per thread), so SQLite's
     * per-connection mutex is not needed (NOMUTEX); its global state still
     * has to be thread-safe. */
    if (!sqlite3_threadsafe())
        return ws_error_set(err, WS_ERR_UNSUPPORTED, "storage: SQLite was built single-threaded");
    if (!create) {
        struct stat sb;
        if (stat(path, &sb) != 0)
            return ws_error_set(err, WS_ERR_NOTFOUND, "storage: no database at %s", path);
    }

    ws_sqlite *s = calloc(1, sizeof *s);
    if (!s) return ws_error_set(err, WS_ERR_NOMEM, "storage: out of memory");
    s->durability = durability;
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (create ? SQLITE_OPEN_CREATE : 0);
    int rc = sqlite3_open_v2(path, &s->db, flags, NULL);
    ws_status st = WS_OK;
    if (rc != SQLITE_OK) {
        /* s->db is then usually a handle carrying the message; sqlfail reads it */
        char what[160];
        snprintf(what, sizeof what, "storage: cannot open %s", path);
        st = ws_sqlite__sqlfail(s, rc, err, what);
    }
    if (st == WS_OK) st = configure(s, err);
    if (st == WS_OK) st = ws_sqlite__migrate(s, create, err);
    if (st == WS_OK) st = ws_sqlite__prepare_all(s, err);
    if (st == WS_OK) ws_sqlite__ckpt_init(s);
    if (st != WS_OK) {
        ws_sqlite_close(&s->base);
        return st;
    }
    *out = &s->base;
    return WS_OK;
}

void ws_sqlite_close(ws_store *store)
{
    ws_sqlite *s = ws_sqlite_of(store);
    if (s->in_txn && s->db && !sqlite3_get_autocommit(s->db))
        (void)sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL); /* nothing to report to */
    ws_sqlite__ckpt_stop(s);
    ws_sqlite__finalize_all(s);
    /* With every statement finalized sqlite3_close cannot be busy; the last
     * connection to close also checkpoints and removes the WAL. */
    (void)sqlite3_close(s->db);
    free(s);
}

ws_status ws_sqlite_get_info(ws_store *store, ws_store_info *out, ws_error *err)
{
    ws_sqlite *s = ws_sqlite_of(store);
    char v[32];
    memset(out, 0, sizeof *out);
    WS_TRY(pragma_text(s, "PRAGMA journal_mode", out->journal_mode, sizeof out->journal_mode, err));
    WS_TRY(pragma_text(s, "PRAGMA synchronous", v, sizeof v, err));
    out->synchronous = atoi(v);
    WS_TRY(pragma_text(s, "PRAGMA foreign_keys", v, sizeof v, err));
    out->foreign_keys = atoi(v);
    WS_TRY(pragma_text(s, "PRAGMA busy_timeout", v, sizeof v, err));
    out->busy_timeout_ms = atoi(v);
    WS_TRY(pragma_text(s, "PRAGMA user_version", v, sizeof v, err));
    out->schema_version = atoi(v);
    return WS_OK;
}

ws_status ws_sqlite_integrity_check(ws_store *store, ws_error *err)
{
    ws_sqlite *s = ws_sqlite_of(store);
    sqlite3_stmt *st = ws_sqlite__stmt(s, WS_ST_INTEGRITY);
    int rc = sqlite3_step(st);
    ws_status r = WS_OK;
    if (rc == SQLITE_ROW) {
        const unsigned char *t = sqlite3_column_text(st, 0);
        if (!t || strcmp((const char *)t, "ok") != 0)
            r = ws_error_set(err, WS_ERR_FORMAT, "storage: integrity check: %s",
                             t ? (const char *)t : "(no text)");
    } else {
        r = rc == SQLITE_DONE
                ? ws_error_set(err, WS_ERR_STORAGE, "storage: integrity check: no result")
                : ws_sqlite__sqlfail(s, rc, err, "storage: integrity check");
    }
    ws_sqlite__done(st);
    if (r != WS_OK) return r;

    /* foreign_key_check answers one row per violation: none is the good case. */
    st = ws_sqlite__stmt(s, WS_ST_FK_CHECK);
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const unsigned char *table = sqlite3_column_text(st, 0);
        r = ws_error_set(err, WS_ERR_FORMAT,
                         "storage: foreign key check: row %lld of %s references a missing row",
                         (long long)sqlite3_column_int64(st, 1),
                         table ? (const char *)table : "?");
    } else if (rc != SQLITE_DONE) {
        r = ws_sqlite__sqlfail(s, rc, err, "storage: foreign key check");
    }
    ws_sqlite__done(st);
    return r;
}

ws_status ws_sqlite_checkpoint(ws_store *store, ws_error *err)
{
    ws_sqlite *s = ws_sqlite_of(store);
    if (s->in_txn)
        return ws_error_set(err, WS_ERR_INVALID, "storage: checkpoint inside a transaction");
    sqlite3_stmt *st = ws_sqlite__stmt(s, WS_ST_CHECKPOINT);
    int rc = sqlite3_step(st);
    ws_status r = WS_OK;
    if (rc == SQLITE_ROW) {
        /* (busy, wal frames, frames checkpointed): busy = 1 means a reader kept
         * the WAL from being fully copied and truncated. */
        if (sqlite3_column_int(st, 0) != 0)
            r = ws_error_set(err, WS_ERR_STORAGE,
                             "storage: checkpoint incomplete: readers are still using the WAL");
    } else {
        r = rc == SQLITE_DONE ? ws_error_set(err, WS_ERR_STORAGE, "storage: checkpoint: no result")
                              : ws_sqlite__sqlfail(s, rc, err, "storage: checkpoint");
    }
    ws_sqlite__done(st);
    return r;
}
