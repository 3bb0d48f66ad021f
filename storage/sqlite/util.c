/* util.c — small helpers shared by the SQLite backend's files: error mapping,
 * checked binds, one-value queries, column copies. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite_internal.h"

ws_status ws_sqlite__sqlfail(ws_sqlite *s, int rc, ws_error *err, const char *what)
{
    ws_status code;
    /* By kind, as the API answers it: a lock held too long passes (busy), a
     * storage that cannot write stays so until an operator acts (unavailable),
     * a damaged file is neither the request's fault nor transient (corrupt). */
    switch (rc & 0xff) { /* primary code of an extended one */
    case SQLITE_NOMEM: code = WS_ERR_NOMEM; break;
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_PERM: code = WS_ERR_UNAVAILABLE; break;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: code = WS_ERR_CORRUPT; break;
    default: code = WS_ERR_STORAGE; break; /* BUSY/LOCKED (after the timeout), ... */
    }
    /* sqlite3_errmsg describes the connection's latest failure; use it only
     * when that failure is this one. */
    const char *msg = (s && s->db && sqlite3_extended_errcode(s->db) == rc)
                          ? sqlite3_errmsg(s->db)
                          : sqlite3_errstr(rc);
    const char *hint = ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED)
                           ? " (still locked after the busy timeout)"
                           : "";
    return ws_error_set(err, code, "%s: %s%s (sqlite %d)", what, msg, hint, rc);
}

ws_status ws_sqlite__bind_int64(ws_sqlite *s, sqlite3_stmt *st, int i, int64_t v, ws_error *err)
{
    int rc = sqlite3_bind_int64(st, i, (sqlite3_int64)v);
    return rc == SQLITE_OK ? WS_OK : ws_sqlite__sqlfail(s, rc, err, "binding a parameter");
}

ws_status ws_sqlite__bind_text(ws_sqlite *s, sqlite3_stmt *st, int i, const char *t, ws_error *err)
{
    if (!t) {
        int rc = sqlite3_bind_null(st, i);
        return rc == SQLITE_OK ? WS_OK : ws_sqlite__sqlfail(s, rc, err, "binding a parameter");
    }
    return ws_sqlite__bind_text_n(s, st, i, t, strlen(t), err);
}

ws_status ws_sqlite__bind_text_n(ws_sqlite *s, sqlite3_stmt *st, int i, const char *t, size_t n,
                                 ws_error *err)
{
    /* SQLITE_STATIC: no copy; every caller steps and resets before returning. */
    int rc = sqlite3_bind_text64(st, i, t, (sqlite3_uint64)n, SQLITE_STATIC, SQLITE_UTF8);
    return rc == SQLITE_OK ? WS_OK : ws_sqlite__sqlfail(s, rc, err, "binding a text parameter");
}

ws_status ws_sqlite__bind_blob(ws_sqlite *s, sqlite3_stmt *st, int i, const void *p, size_t n,
                               ws_error *err)
{
    int rc = p ? sqlite3_bind_blob64(st, i, p, (sqlite3_uint64)n, SQLITE_STATIC)
               : sqlite3_bind_null(st, i);
    return rc == SQLITE_OK ? WS_OK : ws_sqlite__sqlfail(s, rc, err, "binding a blob parameter");
}

ws_status ws_sqlite__query_int64(ws_sqlite *s, sqlite3_stmt *st, int64_t *out, ws_error *err,
                                 const char *what)
{
    int rc = sqlite3_step(st);
    ws_status r = WS_OK;
    if (rc == SQLITE_ROW)
        *out = (int64_t)sqlite3_column_int64(st, 0);
    else if (rc == SQLITE_DONE)
        r = ws_error_set(err, WS_ERR_STORAGE, "%s: no result row", what);
    else
        r = ws_sqlite__sqlfail(s, rc, err, what);
    ws_sqlite__done(st);
    return r;
}

ws_status ws_sqlite__query_int64_by(ws_sqlite *s, ws_sqlite_stmt_id id, int64_t key, int64_t *out,
                                    ws_error *err, const char *what)
{
    sqlite3_stmt *st = ws_sqlite__stmt(s, id);
    ws_status r = ws_sqlite__bind_int64(s, st, 1, key, err);
    if (r != WS_OK) {
        ws_sqlite__done(st);
        return r;
    }
    return ws_sqlite__query_int64(s, st, out, err, what);
}

ws_status ws_sqlite__exec(ws_sqlite *s, sqlite3_stmt *st, ws_error *err, const char *what)
{
    int rc = sqlite3_step(st);
    ws_status r = rc == SQLITE_DONE ? WS_OK : ws_sqlite__sqlfail(s, rc, err, what);
    ws_sqlite__done(st);
    return r;
}

ws_status ws_sqlite__probe(ws_sqlite *s, sqlite3_stmt *st, ws_status r, const char *what,
                           int64_t id, ws_error *err)
{
    if (r == WS_OK) {
        int rc = sqlite3_step(st);
        if (rc == SQLITE_DONE)
            r = ws_error_set(err, WS_ERR_NOTFOUND, "%s %lld not found", what, (long long)id);
        else if (rc != SQLITE_ROW) {
            char msg[64];
            snprintf(msg, sizeof msg, "storage: looking up a %s", what);
            r = ws_sqlite__sqlfail(s, rc, err, msg);
        }
    }
    ws_sqlite__done(st);
    return r;
}

ws_status ws_sqlite__dup_column(sqlite3_stmt *st, int col, char **out, ws_error *err)
{
    /* text first, then bytes: the order SQLite documents for a stable length */
    *out = NULL;
    const unsigned char *t = sqlite3_column_text(st, col);
    size_t n = (size_t)sqlite3_column_bytes(st, col);
    if (!t && sqlite3_column_type(st, col) != SQLITE_NULL) /* conversion ran out of memory */
        return ws_error_set(err, WS_ERR_NOMEM, "storage: out of memory reading a column");
    *out = malloc(n + 1);
    if (!*out) return ws_error_set(err, WS_ERR_NOMEM, "storage: out of memory (%zu bytes)", n);
    if (t) memcpy(*out, t, n);
    (*out)[t ? n : 0] = '\0';
    return WS_OK;
}
