/* txn.c — transactions: the caller's group transaction (ws_store_begin /
 * commit / rollback) and the write units every write call runs in.
 *
 * PostgreSQL aborts a whole transaction at its first failed statement, so a
 * unit inside a group is a savepoint: a unit's failure (a conflict is not a
 * failure of SQL, but a unique violation is) rolls back to it and the rest of
 * the group goes on. A failure outside any unit (a read inside the group)
 * poisons the group: commit refuses it. Writers do not queue on one database
 * lock as SQLite's do: each unit locks the rows it checks before it writes
 * (FOR NO KEY UPDATE, or the UPDATE itself), waiting up to lock_timeout. */
#include <string.h>

#include "pg_internal.h"

/* The server's view of the transaction: idle (none), open, or aborted. */
static PGTransactionStatusType txn_status(ws_pg *s) { return PQtransactionStatus(s->conn); }

/* Sends COMMIT. Its answer lost with the connection leaves the outcome
 * unknown, and the message says so (storage.h's caller acknowledges nothing;
 * a retry with expect_step finds out); COMMIT of an aborted transaction
 * answers success with the tag ROLLBACK. */
static ws_status commit(ws_pg *s, ws_error *err)
{
    PGresult *res = PQexec(s->conn, "COMMIT");
    ws_status r = WS_OK;
    if (PQresultStatus(res) == PGRES_COMMAND_OK && strcmp(PQcmdStatus(res), "COMMIT") != 0)
        r = ws_error_set(err, WS_ERR_STORAGE, "storage: COMMIT was a rollback; nothing was "
                                              "committed");
    else if (PQresultStatus(res) != PGRES_COMMAND_OK && PQstatus(s->conn) == CONNECTION_BAD)
        r = ws_error_set(err, WS_ERR_STORAGE,
                         "storage: COMMIT: the connection to PostgreSQL was lost before its "
                         "answer; the transaction may or may not have committed: retry");
    else if (PQresultStatus(res) != PGRES_COMMAND_OK)
        r = ws_pg__fail(s, res, err, "storage: COMMIT");
    PQclear(res);
    return r;
}

ws_status ws_pg_begin(ws_store *store, ws_error *err)
{
    ws_pg *s = ws_pg_of(store);
    if (s->in_txn)
        return ws_error_set(err, WS_ERR_INVALID, "storage: a transaction is already open");
    WS_TRY(ws_pg__exec(s, "BEGIN", err, "storage: BEGIN"));
    s->in_txn = 1;
    s->txn_poisoned = 0;
    return WS_OK;
}

ws_status ws_pg_commit(ws_store *store, ws_error *err)
{
    ws_pg *s = ws_pg_of(store);
    if (!s->in_txn) return ws_error_set(err, WS_ERR_INVALID, "storage: no transaction to commit");
    int poisoned = s->txn_poisoned || txn_status(s) != PQTRANS_INTRANS;
    s->in_txn = s->txn_poisoned = 0;
    if (poisoned) {
        /* aborted by the server, lost with the connection, or a failed read
         * inside it: nothing of it may be kept */
        if (PQstatus(s->conn) == CONNECTION_OK) (void)ws_pg__exec(s, "ROLLBACK", NULL, "ROLLBACK");
        return ws_error_set(err, WS_ERR_STORAGE,
                            "storage: the transaction failed before its commit (%s); rolled "
                            "back, nothing was committed",
                            PQstatus(s->conn) == CONNECTION_OK ? "an earlier statement failed"
                                                               : "the connection was lost");
    }
    ws_status r = commit(s, err);
    /* A failed COMMIT may leave the transaction open: end it, so that "nothing
     * committed" holds and its locks go. */
    if (r != WS_OK && PQstatus(s->conn) == CONNECTION_OK && txn_status(s) != PQTRANS_IDLE)
        (void)ws_pg__exec(s, "ROLLBACK", NULL, "ROLLBACK");
    return r;
}

ws_status ws_pg_rollback(ws_store *store, ws_error *err)
{
    ws_pg *s = ws_pg_of(store);
    if (!s->in_txn) return WS_OK; /* safe to call on any cleanup path */
    s->in_txn = s->txn_poisoned = 0;
    /* a lost connection took the transaction with it: nothing to undo */
    if (PQstatus(s->conn) != CONNECTION_OK || txn_status(s) == PQTRANS_IDLE) return WS_OK;
    return ws_pg__exec(s, "ROLLBACK", err, "storage: ROLLBACK");
}

int ws_pg_in_transaction(const ws_store *store) { return ((const ws_pg *)store)->in_txn; }

/* A session-level advisory lock (LEADER_TRY): the server drops it with the
 * connection, so a daemon that dies or loses its connection frees it for
 * another at once. Asking again while held must not stack it (advisory locks
 * count), hence the look in pg_locks first. */
ws_status ws_pg_leader_try(ws_store *store, int64_t key, int *held, ws_error *err)
{
    int64_t got = 0;
    WS_TRY(ws_pg__int_by(ws_pg_of(store), WS_PG_LEADER_TRY, key, &got, err,
                         "storage: taking the cluster lock"));
    *held = got == 1;
    return WS_OK;
}

/* Begins a unit, with a savepoint inside a group when savepoint. */
static ws_status op_begin(ws_pg *s, ws_pg_op *op, int savepoint, ws_error *err)
{
    op->own = !s->in_txn;
    op->savepoint = !op->own && savepoint;
    if (s->in_txn && (s->txn_poisoned || txn_status(s) != PQTRANS_INTRANS))
        return ws_error_set(err, WS_ERR_STORAGE,
                            "storage: the open transaction failed earlier (or lost its "
                            "connection); roll back and retry");
    if (op->own || op->savepoint)
        WS_TRY(ws_pg__exec(s, op->own ? "BEGIN" : "SAVEPOINT ws_op", err,
                           op->own ? "storage: BEGIN" : "storage: SAVEPOINT"));
    s->in_unit = op->own || op->savepoint;
    return WS_OK;
}

ws_status ws_pg__op_begin(ws_pg *s, ws_pg_op *op, ws_error *err) { return op_begin(s, op, 1, err); }

ws_status ws_pg__op_begin_one(ws_pg *s, ws_pg_op *op, ws_error *err)
{
    return op_begin(s, op, 0, err);
}

ws_status ws_pg__op_end(ws_pg *s, ws_pg_op *op, ws_status status, ws_error *err)
{
    s->in_unit = 0;
    int up = PQstatus(s->conn) == CONNECTION_OK;
    if (op->own) {
        if (status == WS_OK) status = commit(s, err);
        /* the unit's own failure is what the caller hears; end the transaction */
        if (status != WS_OK && PQstatus(s->conn) == CONNECTION_OK && txn_status(s) != PQTRANS_IDLE)
            (void)ws_pg__exec(s, "ROLLBACK", NULL, "ROLLBACK");
        return status;
    }
    if (!op->savepoint) return status; /* a failed statement poisoned the group already */
    if (!up) /* the group went with the connection */
        return status != WS_OK ? status
                               : ws_error_set(err, WS_ERR_STORAGE,
                                              "storage: lost the connection to PostgreSQL "
                                              "inside a transaction");
    if (status == WS_OK) {
        status = ws_pg__exec(s, "RELEASE SAVEPOINT ws_op", err, "storage: RELEASE");
        if (status == WS_OK) return WS_OK;
        /* fall through: undo the unit the caller is told failed */
    }
    /* ROLLBACK TO undoes the unit (and ends an aborted state) but keeps the
     * savepoint; RELEASE then drops it. The rest of the group is untouched. */
    ws_error ignored;
    if (ws_pg__exec(s, "ROLLBACK TO SAVEPOINT ws_op; RELEASE SAVEPOINT ws_op", &ignored,
                    "storage: ROLLBACK TO") != WS_OK)
        s->txn_poisoned = 1; /* the failed unit might still be in the group: never commit it */
    return status;
}
