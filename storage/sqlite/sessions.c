/* sessions.c — sessions: a tenant's world state on a model. Every lookup is
 * keyed by (id, tenant), so another tenant's session is indistinguishable from
 * a missing one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite_internal.h"

ws_status ws_sqlite__session_find(ws_sqlite *s, int64_t tenant, const char *id, int64_t *sid,
                                  int64_t *step, ws_error *err)
{
    if (!ws_store_session_id_valid(id)) return ws_store__session_not_found(id, err);
    sqlite3_stmt *st = ws_sqlite__stmt(s, WS_ST_SESSION_FIND);
    ws_status r = ws_sqlite__bind_text(s, st, 1, id, err);
    if (r == WS_OK) r = ws_sqlite__bind_int64(s, st, 2, tenant, err);
    if (r == WS_OK) {
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            if (sid) *sid = (int64_t)sqlite3_column_int64(st, 0);
            if (step) *step = (int64_t)sqlite3_column_int64(st, 1);
        } else if (rc == SQLITE_DONE) {
            r = ws_store__session_not_found(id, err);
        } else {
            r = ws_sqlite__sqlfail(s, rc, err, "storage: looking up a session");
        }
    }
    ws_sqlite__done(st);
    return r;
}

/* Fills a session's columns (WS_SQLITE_SESSION_COLS order) from a row. */
static void read_session(sqlite3_stmt *st, ws_store_session *o)
{
    memset(o, 0, sizeof *o);
    const unsigned char *id = sqlite3_column_text(st, 0);
    snprintf(o->id, sizeof o->id, "%s", id ? (const char *)id : "");
    o->tenant = (int64_t)sqlite3_column_int64(st, 1);
    o->model = (int64_t)sqlite3_column_int64(st, 2);
    o->step = (int64_t)sqlite3_column_int64(st, 3);
    o->state_version = (int64_t)sqlite3_column_int64(st, 4);
    o->rows = (int32_t)sqlite3_column_int(st, 5);
    o->cols = (int32_t)sqlite3_column_int(st, 6);
    o->created_ms = (int64_t)sqlite3_column_int64(st, 7);
    o->updated_ms = (int64_t)sqlite3_column_int64(st, 8);
}

ws_status ws_sqlite_session_create(ws_store *store, int64_t tenant, int64_t model,
                                   const float *state, int32_t rows, int32_t cols,
                                   int64_t state_version, int64_t max_sessions,
                                   char id_out[WS_STORE_ID_LEN + 1], ws_error *err)
{
    ws_sqlite *s = ws_sqlite_of(store);
    ws_sqlite_op op;
    WS_TRY(ws_sqlite__op_begin(s, &op, err));
    ws_status r = ws_sqlite__tenant_exists(s, tenant, err);
    if (r == WS_OK) r = ws_sqlite__model_usable(s, model, tenant, err);
    if (r == WS_OK && max_sessions > 0) {
        /* read under the write lock (the tenant's counter, kept by triggers in
         * the same transactions as every insert and delete): concurrent
         * creates cannot overshoot */
        int64_t n = 0;
        r = ws_sqlite__query_int64_by(s, WS_ST_SESSION_COUNT, tenant, &n, err,
                                      "storage: counting sessions");
        if (r == WS_OK && n >= max_sessions)
            r = ws_error_set(err, WS_ERR_CONFLICT, "tenant has reached its limit of %lld sessions",
                             (long long)max_sessions);
    }
    char id[WS_STORE_ID_LEN + 1];
    /* 128 random bits collide with probability ~n^2/2^129: never in practice,
     * but a collision must not become an error, so draw again. */
    for (int attempt = 0; r == WS_OK; attempt++) {
        r = ws_store__new_id(id, err);
        if (r != WS_OK) break;
        int64_t now = ws_clock_wall_ms();
        sqlite3_stmt *st = ws_sqlite__stmt(s, WS_ST_SESSION_INSERT);
        r = ws_sqlite__bind_text(s, st, 1, id, err);
        if (r == WS_OK) r = ws_sqlite__bind_int64(s, st, 2, tenant, err);
        if (r == WS_OK) r = ws_sqlite__bind_int64(s, st, 3, model, err);
        if (r == WS_OK)
            r = ws_sqlite__bind_blob(s, st, 4, state,
                                     (size_t)rows * (size_t)cols * sizeof(float), err);
        if (r == WS_OK) r = ws_sqlite__bind_int64(s, st, 5, rows, err);
        if (r == WS_OK) r = ws_sqlite__bind_int64(s, st, 6, cols, err);
        if (r == WS_OK) r = ws_sqlite__bind_int64(s, st, 7, state ? state_version : 0, err);
        if (r == WS_OK) r = ws_sqlite__bind_int64(s, st, 8, now, err);
        int rc = r == WS_OK ? sqlite3_step(st) : SQLITE_DONE;
        if (r == WS_OK && rc != SQLITE_DONE) {
            if (rc == SQLITE_CONSTRAINT_UNIQUE && attempt < 3) { /* the id was taken */
                ws_sqlite__done(st);
                continue;
            }
            r = ws_sqlite__sqlfail(s, rc, err, "storage: creating a session");
        }
        ws_sqlite__done(st);
        break;
    }
    r = ws_sqlite__op_end(s, &op, r, err);
    if (r == WS_OK) memcpy(id_out, id, sizeof id); /* only a committed id */
    return r;
}

ws_status ws_sqlite_session_get(ws_store *store, int64_t tenant, const char *id, int with_state,
                                ws_store_session *out, ws_error *err)
{
    ws_sqlite *s = ws_sqlite_of(store);
    sqlite3_stmt *st = ws_sqlite__stmt(s, WS_ST_SESSION_GET);
    ws_status r = ws_sqlite__bind_text(s, st, 1, id, err);
    if (r == WS_OK) r = ws_sqlite__bind_int64(s, st, 2, tenant, err);
    if (r == WS_OK) {
        int rc = sqlite3_step(st);
        if (rc == SQLITE_DONE) {
            r = ws_store__session_not_found(id, err);
        } else if (rc != SQLITE_ROW) {
            r = ws_sqlite__sqlfail(s, rc, err, "storage: reading a session");
        } else {
            read_session(st, out);
            /* state is the last column: without with_state its overflow pages
             * are never read. */
            if (with_state && sqlite3_column_type(st, 9) != SQLITE_NULL) {
                const void *blob = sqlite3_column_blob(st, 9);
                size_t n = (size_t)sqlite3_column_bytes(st, 9);
                size_t want = (size_t)out->rows * (size_t)out->cols * sizeof(float);
                if (n != want || n == 0) /* the CHECK constraint forbids this */
                    r = ws_error_set(err, WS_ERR_FORMAT,
                                     "session %s: state has %zu bytes, shape %dx%d wants %zu", id,
                                     n, (int)out->rows, (int)out->cols, want);
                else if (!blob)
                    r = ws_error_set(err, WS_ERR_NOMEM, "storage: out of memory reading a state");
                else if (!(out->state = malloc(n)))
                    r = ws_error_set(err, WS_ERR_NOMEM, "storage: out of memory (%zu bytes)", n);
                else
                    memcpy(out->state, blob, n); /* the blob need not be float-aligned */
            }
        }
    }
    ws_sqlite__done(st);
    if (r != WS_OK) ws_store_session_clear(out);
    return r;
}

ws_status ws_sqlite_session_delete(ws_store *store, int64_t tenant, const char *id, ws_error *err)
{
    ws_sqlite *s = ws_sqlite_of(store);
    ws_sqlite_op op;
    WS_TRY(ws_sqlite__op_begin(s, &op, err));
    sqlite3_stmt *st = ws_sqlite__stmt(s, WS_ST_SESSION_DELETE);
    ws_status r = ws_sqlite__bind_text(s, st, 1, id, err);
    if (r == WS_OK) r = ws_sqlite__bind_int64(s, st, 2, tenant, err);
    /* the step log goes with it: ON DELETE CASCADE */
    if (r == WS_OK) r = ws_sqlite__exec(s, st, err, "storage: deleting a session");
    ws_sqlite__done(st);
    if (r == WS_OK && sqlite3_changes(s->db) == 0) r = ws_store__session_not_found(id, err);
    return ws_sqlite__op_end(s, &op, r, err);
}

ws_status ws_sqlite_session_count(ws_store *store, int64_t tenant, int64_t *n, ws_error *err)
{
    ws_sqlite *s = ws_sqlite_of(store);
    return ws_sqlite__query_int64_by(s, WS_ST_SESSION_COUNT, tenant, n, err,
                                     "storage: counting sessions");
}

/* Calls fn for every row of a session listing statement (already bound). */
static ws_status each_row(ws_sqlite *s, sqlite3_stmt *st, ws_store_session_fn fn, void *ctx,
                          ws_error *err)
{
    ws_status r = WS_OK;
    for (;;) {
        int rc = sqlite3_step(st);
        if (rc == SQLITE_DONE) break;
        if (rc != SQLITE_ROW) {
            r = ws_sqlite__sqlfail(s, rc, err, "storage: listing sessions");
            break;
        }
        ws_store_session sess;
        read_session(st, &sess);
        r = fn(ctx, &sess);
        if (r != WS_OK) break;
    }
    ws_sqlite__done(st);
    return r;
}

ws_status ws_sqlite_session_list(ws_store *store, int64_t tenant, const char *after_id, int limit,
                                 ws_store_session_fn fn, void *ctx, ws_error *err)
{
    ws_sqlite *s = ws_sqlite_of(store);
    /* keyset paging: "" sorts before every id, and any string is a valid cursor */
    sqlite3_stmt *st = ws_sqlite__stmt(s, WS_ST_SESSION_LIST);
    ws_status r = ws_sqlite__bind_int64(s, st, 1, tenant, err);
    if (r == WS_OK) r = ws_sqlite__bind_text(s, st, 2, after_id ? after_id : "", err);
    if (r == WS_OK) r = ws_sqlite__bind_int64(s, st, 3, limit, err);
    if (r != WS_OK) {
        ws_sqlite__done(st);
        return r;
    }
    return each_row(s, st, fn, ctx, err);
}

ws_status ws_sqlite_session_each_of_model(ws_store *store, int64_t model, ws_store_session_fn fn,
                                          void *ctx, ws_error *err)
{
    ws_sqlite *s = ws_sqlite_of(store);
    sqlite3_stmt *st = ws_sqlite__stmt(s, WS_ST_SESSION_OF_MODEL);
    ws_status r = ws_sqlite__bind_int64(s, st, 1, model, err);
    if (r != WS_OK) {
        ws_sqlite__done(st);
        return r;
    }
    return each_row(s, st, fn, ctx, err);
}
