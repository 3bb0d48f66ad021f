/* exec.c — running statements on the connection: parameters, lazy preparation,
 * error mapping by SQLSTATE, streamed listings, binary result readers. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_internal.h"

static const char *const stmt_sql[WS_PG_COUNT] = {
#define WS_PG_X_SQL(name, sql) [WS_PG_##name] = sql,
    WS_PG_STATEMENTS(WS_PG_X_SQL)
#undef WS_PG_X_SQL
};

static const char *const stmt_name[WS_PG_COUNT] = {
#define WS_PG_X_NAME(name, sql) [WS_PG_##name] = "ws_" #name,
    WS_PG_STATEMENTS(WS_PG_X_NAME)
#undef WS_PG_X_NAME
};

/* ---- parameters ---- */

void ws_pg__arg_int(ws_pg_args *a, int64_t v)
{
    snprintf(a->num[a->n], sizeof a->num[0], "%" PRId64, v);
    a->value[a->n] = a->num[a->n];
    a->length[a->n] = 0; /* text: ignored */
    a->format[a->n++] = 0;
}

void ws_pg__arg_text(ws_pg_args *a, const char *t)
{
    a->value[a->n] = t;
    a->length[a->n] = 0;
    a->format[a->n++] = 0;
}

void ws_pg__arg_blob(ws_pg_args *a, const void *p, size_t n)
{
    a->value[a->n] = p;
    a->length[a->n] = (int)n; /* states are at most WS_STORE_STATE_MAX_BYTES */
    a->format[a->n++] = 1;
}

/* ---- errors ---- */

/* By kind, as the API answers it (ws_status.h): what passes by itself is busy
 * (a lost connection, a lock or statement timeout, a deadlock or serialization
 * failure, too many connections, a server starting or stopping), what needs an
 * operator is unavailable (disk full, I/O error, read-only standby), damage is
 * corrupt; anything else is a storage failure too. */
static ws_status code_of(const char *state)
{
    if (!state || strlen(state) != 5) return WS_ERR_STORAGE;
    if (!strcmp(state, "53100") || !strncmp(state, "58", 2) || !strcmp(state, "25006"))
        return WS_ERR_UNAVAILABLE;
    if (!strcmp(state, "53200")) return WS_ERR_NOMEM;
    if (!strncmp(state, "XX00", 4) && (state[4] == '1' || state[4] == '2')) return WS_ERR_CORRUPT;
    return WS_ERR_STORAGE; /* 08 connection, 40 rollback, 55P03, 57014, 57P0x, 53300, ... */
}

ws_status ws_pg__fail(ws_pg *s, const PGresult *res, ws_error *err, const char *what)
{
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    snprintf(s->sqlstate, sizeof s->sqlstate, "%s", state ? state : "");
    if (s->in_txn && !s->in_unit) s->txn_poisoned = 1;
    const char *msg = res ? PQresultErrorMessage(res) : "";
    if (!msg || !*msg) msg = PQerrorMessage(s->conn);
    /* the first line says it; libpq's further lines are hints and positions */
    int n = (int)strcspn(msg, "\n");
    if (PQstatus(s->conn) == CONNECTION_BAD)
        return ws_error_set(err, WS_ERR_STORAGE,
                            "%s: no connection to PostgreSQL (%.*s); nothing was committed "
                            "by this call: retry",
                            what, n, msg);
    return ws_error_set(err, code_of(state), "%s: %.*s (postgresql %s)", what, n, msg,
                        state ? state : "?");
}

/* A connection lost outside any transaction lost nothing but the statement in
 * hand (a read, or the BEGIN of a write unit): it is run again, once, on a new
 * connection, so a server restart costs the daemon's pooled connections no
 * failed request. Inside a transaction the caller must hear of it. */
static int retry_after(ws_pg *s, int attempt)
{
    return attempt == 0 && !s->in_txn && !s->in_unit && PQstatus(s->conn) == CONNECTION_BAD;
}

/* ---- statements ---- */

static int ok(const PGresult *res)
{
    ExecStatusType t = PQresultStatus(res);
    return t == PGRES_COMMAND_OK || t == PGRES_TUPLES_OK;
}

ws_status ws_pg__exec(ws_pg *s, const char *sql, ws_error *err, const char *what)
{
    for (int attempt = 0;; attempt++) {
        WS_TRY(ws_pg__ensure(s, err));
        PGresult *res = PQexec(s->conn, sql);
        ws_status r = ok(res) || retry_after(s, attempt) ? WS_OK : ws_pg__fail(s, res, err, what);
        int done = ok(res) || r != WS_OK;
        PQclear(res);
        if (done) return r;
    }
}

/* Sends statement id (preparing it on this connection the first time):
 * synchronously, its result; asynchronously (single-row mode to follow), NULL
 * when sent, else the failure. */
static PGresult *submit(ws_pg *s, ws_pg_stmt_id id, const ws_pg_args *a, int async)
{
    if (!s->prepared[id]) {
        PGresult *res = PQprepare(s->conn, stmt_name[id], stmt_sql[id], 0, NULL);
        if (PQresultStatus(res) != PGRES_COMMAND_OK) return res;
        PQclear(res);
        s->prepared[id] = 1;
    }
    int n = a ? a->n : 0;
    const char *const *v = a ? a->value : NULL;
    const int *len = a ? a->length : NULL, *fmt = a ? a->format : NULL;
    if (!async) return PQexecPrepared(s->conn, stmt_name[id], n, v, len, fmt, 1);
    if (PQsendQueryPrepared(s->conn, stmt_name[id], n, v, len, fmt, 1)) return NULL;
    return PQmakeEmptyPGresult(s->conn, PGRES_FATAL_ERROR);
}

ws_status ws_pg__run(ws_pg *s, ws_pg_stmt_id id, const ws_pg_args *a, PGresult **out,
                     ws_error *err, const char *what)
{
    *out = NULL;
    for (int attempt = 0;; attempt++) {
        WS_TRY(ws_pg__ensure(s, err));
        PGresult *res = submit(s, id, a, 0);
        if (ok(res)) {
            s->sqlstate[0] = '\0';
            *out = res;
            return WS_OK;
        }
        ws_status r = retry_after(s, attempt) ? WS_OK : ws_pg__fail(s, res, err, what);
        PQclear(res);
        if (r != WS_OK) return r;
    }
}

ws_status ws_pg__run_n(ws_pg *s, ws_pg_stmt_id id, const ws_pg_args *a, int64_t *rows,
                       ws_error *err, const char *what)
{
    PGresult *res;
    WS_TRY(ws_pg__run(s, id, a, &res, err, what));
    /* RETURNING counts its rows in ntuples, a plain write in the command tag */
    if (rows) *rows = PQntuples(res) > 0 ? PQntuples(res) : strtoll(PQcmdTuples(res), NULL, 10);
    PQclear(res);
    return WS_OK;
}

ws_status ws_pg__int_by(ws_pg *s, ws_pg_stmt_id id, int64_t key, int64_t *out, ws_error *err,
                        const char *what)
{
    ws_pg_args a = {0};
    ws_pg__arg_int(&a, key);
    PGresult *res;
    WS_TRY(ws_pg__run(s, id, &a, &res, err, what));
    ws_status r = WS_OK;
    if (PQntuples(res) == 1)
        *out = ws_pg__int(res, 0, 0);
    else
        r = ws_error_set(err, WS_ERR_STORAGE, "%s: no result row", what);
    PQclear(res);
    return r;
}

ws_status ws_pg__probe(ws_pg *s, ws_pg_stmt_id id, const ws_pg_args *a, const char *what,
                       int64_t key, ws_error *err)
{
    char msg[64];
    snprintf(msg, sizeof msg, "storage: looking up a %s", what);
    PGresult *res;
    WS_TRY(ws_pg__run(s, id, a, &res, err, msg));
    int found = PQntuples(res) > 0;
    PQclear(res);
    return found ? WS_OK
                 : ws_error_set(err, WS_ERR_NOTFOUND, "%s %lld not found", what, (long long)key);
}

ws_status ws_pg__each(ws_pg *s, ws_pg_stmt_id id, const ws_pg_args *a, ws_pg_row_fn fn, void *ctx,
                      ws_error *err, const char *what)
{
    for (int attempt = 0;; attempt++) {
        WS_TRY(ws_pg__ensure(s, err));
        PGresult *res = submit(s, id, a, 1);
        if (res) {
            ws_status r = retry_after(s, attempt) ? WS_OK : ws_pg__fail(s, res, err, what);
            PQclear(res);
            if (r != WS_OK) return r;
            continue;
        }
        /* Without single-row mode the whole result would be buffered first;
         * failing to enter it only costs memory. */
        (void)PQsetSingleRowMode(s->conn);
        ws_status r = WS_OK;
        int failed = 0, rows = 0, again = 0;
        /* Read to the end even after fn stopped: the connection is busy until then. */
        while ((res = PQgetResult(s->conn))) {
            ExecStatusType t = PQresultStatus(res);
            if (t == PGRES_SINGLE_TUPLE || t == PGRES_TUPLES_OK) {
                for (int row = 0; r == WS_OK && row < PQntuples(res); row++, rows++)
                    r = fn(ctx, res, row, err);
            } else if (!failed) {
                failed = 1;
                again = rows == 0 && r == WS_OK && retry_after(s, attempt);
                ws_status f = again ? WS_OK : ws_pg__fail(s, res, r == WS_OK ? err : NULL, what);
                if (r == WS_OK) r = f;
            }
            PQclear(res);
        }
        if (again) continue;
        if (!failed) s->sqlstate[0] = '\0';
        return r;
    }
}

/* ---- results (binary format) ---- */

int64_t ws_pg__int(const PGresult *res, int row, int col)
{
    if (PQgetisnull(res, row, col)) return 0;
    const unsigned char *p = (const unsigned char *)PQgetvalue(res, row, col);
    int n = PQgetlength(res, row, col); /* 1 (bool), 2, 4 or 8: big-endian two's complement */
    uint64_t v = 0;
    for (int i = 0; i < n && i < 8; i++) v = v << 8 | p[i];
    if (n > 0 && n < 8 && (p[0] & 0x80)) v |= ~(uint64_t)0 << (8 * n);
    return (int64_t)v;
}

const char *ws_pg__text(const PGresult *res, int row, int col)
{
    /* a binary text value is its bytes, and libpq ends every value with a NUL */
    return PQgetisnull(res, row, col) ? NULL : PQgetvalue(res, row, col);
}

ws_status ws_pg__dup(const PGresult *res, int row, int col, char **out, ws_error *err)
{
    const char *t = ws_pg__text(res, row, col);
    size_t n = t ? (size_t)PQgetlength(res, row, col) : 0;
    *out = malloc(n + 1);
    if (!*out) return ws_error_set(err, WS_ERR_NOMEM, "storage: out of memory (%zu bytes)", n);
    if (n) memcpy(*out, t, n);
    (*out)[n] = '\0';
    return WS_OK;
}
