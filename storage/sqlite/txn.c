/* txn.c — transactions: the caller's group transaction (ws_store_begin /
 * commit / rollback) and the write units every write call runs in. */
#include "sqlite_internal.h"

/* Runs one of the transaction-control statements. */
static ws_status run(ws_sqlite *s, ws_sqlite_stmt_id id, ws_error *err, const char *what)
{
    return ws_sqlite__exec(s, ws_sqlite__stmt(s, id), err, what);
}

/* SQLite rolls a transaction back by itself after some errors (SQLITE_FULL,
 * SQLITE_IOERR, SQLITE_NOMEM, ...). Then the connection is back in autocommit
 * mode although we still think a transaction is open. */
static int txn_lost(ws_sqlite *s) { return s->in_txn && sqlite3_get_autocommit(s->db); }

ws_status ws_sqlite_begin(ws_store *store, ws_error *err)
{
    ws_sqlite *s = ws_sqlite_of(store);
    if (s->in_txn)
        return ws_error_set(err, WS_ERR_INVALID, "storage: a transaction is already open");
    /* IMMEDIATE takes the write lock now, waiting up to busy_timeout. A
     * deferred BEGIN would take it at the first write, and in WAL mode a reader
     * whose snapshot went stale meanwhile gets SQLITE_BUSY_SNAPSHOT at once,
     * which no busy timeout can cure. */
    WS_TRY(run(s, WS_ST_BEGIN, err, "storage: BEGIN IMMEDIATE"));
    s->in_txn = 1;
    return WS_OK;
}

ws_status ws_sqlite_commit(ws_store *store, ws_error *err)
{
    ws_sqlite *s = ws_sqlite_of(store);
    if (!s->in_txn) return ws_error_set(err, WS_ERR_INVALID, "storage: no transaction to commit");
    if (txn_lost(s)) {
        s->in_txn = s->txn_poisoned = 0;
        return ws_error_set(err, WS_ERR_STORAGE,
                            "storage: the transaction was rolled back by SQLite after an "
                            "earlier error; nothing was committed");
    }
    if (s->txn_poisoned) {
        (void)run(s, WS_ST_ROLLBACK, NULL, "storage: ROLLBACK");
        s->in_txn = s->txn_poisoned = 0;
        return ws_error_set(err, WS_ERR_STORAGE,
                            "storage: a failed write could not be undone inside the "
                            "transaction; rolled back, nothing was committed");
    }
    ws_status st = run(s, WS_ST_COMMIT, err, "storage: COMMIT");
    if (st != WS_OK && !sqlite3_get_autocommit(s->db)) {
        /* A failed COMMIT may leave the transaction open; end it so that the
         * caller's "nothing committed" holds and the write lock is released.
         * The COMMIT error is the one to report. */
        (void)run(s, WS_ST_ROLLBACK, NULL, "storage: ROLLBACK");
    }
    s->in_txn = 0;
    return st;
}

ws_status ws_sqlite_rollback(ws_store *store, ws_error *err)
{
    ws_sqlite *s = ws_sqlite_of(store);
    if (!s->in_txn) return WS_OK; /* safe to call on any cleanup path */
    s->in_txn = s->txn_poisoned = 0;
    if (sqlite3_get_autocommit(s->db)) return WS_OK; /* SQLite already rolled it back */
    return run(s, WS_ST_ROLLBACK, err, "storage: ROLLBACK");
}

int ws_sqlite_in_transaction(const ws_store *store) { return ((const ws_sqlite *)store)->in_txn; }

/* One daemon per SQLite file (the data directory's lock): it leads alone. */
ws_status ws_sqlite_leader_try(ws_store *store, int64_t key, int *held, ws_error *err)
{
    (void)store, (void)key, (void)err;
    *held = 1;
    return WS_OK;
}

ws_status ws_sqlite__op_begin(ws_sqlite *s, ws_sqlite_op *op, ws_error *err)
{
    if (s->in_txn) {
        if (txn_lost(s))
            return ws_error_set(err, WS_ERR_STORAGE,
                                "storage: the open transaction was rolled back by SQLite after "
                                "an earlier error; roll back and retry");
        op->own = 0;
        return run(s, WS_ST_SAVEPOINT, err, "storage: SAVEPOINT");
    }
    op->own = 1;
    return run(s, WS_ST_BEGIN, err, "storage: BEGIN IMMEDIATE");
}

ws_status ws_sqlite__op_end(ws_sqlite *s, ws_sqlite_op *op, ws_status status, ws_error *err)
{
    if (op->own) {
        if (status == WS_OK) {
            ws_status st = run(s, WS_ST_COMMIT, err, "storage: COMMIT");
            if (st != WS_OK && !sqlite3_get_autocommit(s->db))
                (void)run(s, WS_ST_ROLLBACK, NULL, "storage: ROLLBACK");
            return st;
        }
        /* The unit's own failure is what the caller needs to hear; a rollback
         * failure can add nothing (SQLite then has rolled back already). */
        if (!sqlite3_get_autocommit(s->db)) (void)run(s, WS_ST_ROLLBACK, NULL, "storage: ROLLBACK");
        return status;
    }
    if (sqlite3_get_autocommit(s->db)) /* the whole group was rolled back under us */
        return status != WS_OK ? status
                               : ws_error_set(err, WS_ERR_STORAGE,
                                              "storage: the transaction was rolled back by "
                                              "SQLite after an error");
    if (status == WS_OK) {
        status = run(s, WS_ST_RELEASE, err, "storage: RELEASE");
        if (status == WS_OK) return WS_OK;
        /* fall through: undo the unit the caller is told failed */
    }
    /* ROLLBACK TO undoes the unit but keeps the savepoint on the stack;
     * RELEASE then removes it. The rest of the group is untouched. */
    ws_error ignored;
    if (run(s, WS_ST_ROLLBACK_TO, &ignored, "storage: ROLLBACK TO") != WS_OK ||
        run(s, WS_ST_RELEASE, &ignored, "storage: RELEASE") != WS_OK)
        s->txn_poisoned = 1; /* the failed unit might still be in the group: never commit it */
    return status;
}
