/* sessions.c — sessions: a tenant's world state on a model. Every lookup is
 * keyed by (id, tenant), so another tenant's session is indistinguishable from
 * a missing one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_internal.h"

ws_status ws_pg__session_find(ws_pg *s, int64_t tenant, const char *id, int lock, int64_t *sid,
                              int64_t *step, ws_error *err)
{
    if (!ws_store_session_id_valid(id)) return ws_store__session_not_found(id, err);
    ws_pg_args a = {0};
    ws_pg__arg_text(&a, id);
    ws_pg__arg_int(&a, tenant);
    PGresult *res;
    WS_TRY(ws_pg__run(s, lock ? WS_PG_SESSION_LOCK : WS_PG_SESSION_FIND, &a, &res, err,
                      "storage: looking up a session"));
    ws_status r = PQntuples(res) ? WS_OK : ws_store__session_not_found(id, err);
    if (r == WS_OK && sid) *sid = ws_pg__int(res, 0, 0);
    if (r == WS_OK && step) *step = ws_pg__int(res, 0, 1);
    PQclear(res);
    return r;
}

/* Fills a session's columns (WS_PG_SESSION_COLS order) from a row. */
static void read_session(const PGresult *res, int row, ws_store_session *o)
{
    memset(o, 0, sizeof *o);
    snprintf(o->id, sizeof o->id, "%s", ws_pg__text(res, row, 0));
    o->tenant = ws_pg__int(res, row, 1);
    o->model = ws_pg__int(res, row, 2);
    o->step = ws_pg__int(res, row, 3);
    o->state_version = ws_pg__int(res, row, 4);
    o->rows = (int32_t)ws_pg__int(res, row, 5);
    o->cols = (int32_t)ws_pg__int(res, row, 6);
    o->created_ms = ws_pg__int(res, row, 7);
    o->updated_ms = ws_pg__int(res, row, 8);
}

/* The tenant's row locked for the unit (the session limit and the counter the
 * trigger keeps are read and written under it, so concurrent creates cannot
 * overshoot); WS_ERR_NOTFOUND for an unknown tenant. */
static ws_status tenant_lock(ws_pg *s, int64_t tenant, int64_t *n_sessions, ws_error *err)
{
    ws_pg_args a = {0};
    ws_pg__arg_int(&a, tenant);
    PGresult *res;
    WS_TRY(ws_pg__run(s, WS_PG_TENANT_LOCK, &a, &res, err, "storage: looking up a tenant"));
    ws_status r = PQntuples(res) ? WS_OK
                                 : ws_error_set(err, WS_ERR_NOTFOUND, "tenant %lld not found",
                                                (long long)tenant);
    if (r == WS_OK) *n_sessions = ws_pg__int(res, 0, 0);
    PQclear(res);
    return r;
}

ws_status ws_pg_session_create(ws_store *store, int64_t tenant, int64_t model, const float *state,
                               int32_t rows, int32_t cols, int64_t state_version,
                               int64_t max_sessions, char id_out[WS_STORE_ID_LEN + 1],
                               ws_error *err)
{
    ws_pg *s = ws_pg_of(store);
    ws_pg_op op;
    WS_TRY(ws_pg__op_begin(s, &op, err));
    int64_t n = 0;
    ws_status r = tenant_lock(s, tenant, &n, err);
    if (r == WS_OK) {
        ws_pg_args a = {0};
        ws_pg__arg_int(&a, model);
        ws_pg__arg_int(&a, tenant);
        r = ws_pg__probe(s, WS_PG_MODEL_USABLE, &a, "model", model, err);
    }
    if (r == WS_OK && max_sessions > 0 && n >= max_sessions)
        r = ws_error_set(err, WS_ERR_CONFLICT, "tenant has reached its limit of %lld sessions",
                         (long long)max_sessions);
    char id[WS_STORE_ID_LEN + 1];
    /* 128 random bits collide with probability ~n^2/2^129: never in practice,
     * but a collision must not become an error, so draw again (ON CONFLICT
     * DO NOTHING: the insert returns no row instead of failing). */
    for (int attempt = 0; r == WS_OK; attempt++) {
        r = ws_store__new_id(id, err);
        if (r != WS_OK) break;
        ws_pg_args a = {0};
        ws_pg__arg_text(&a, id);
        ws_pg__arg_int(&a, tenant);
        ws_pg__arg_int(&a, model);
        ws_pg__arg_blob(&a, state, (size_t)rows * (size_t)cols * sizeof(float));
        ws_pg__arg_int(&a, rows);
        ws_pg__arg_int(&a, cols);
        ws_pg__arg_int(&a, state ? state_version : 0);
        ws_pg__arg_int(&a, ws_clock_wall_ms());
        int64_t made = 0;
        r = ws_pg__run_n(s, WS_PG_SESSION_INSERT, &a, &made, err, "storage: creating a session");
        if (r != WS_OK || made == 1) break;
        if (attempt == 3) r = ws_error_set(err, WS_ERR_STORAGE, "storage: no free session id");
    }
    r = ws_pg__op_end(s, &op, r, err);
    if (r == WS_OK) memcpy(id_out, id, sizeof id); /* only a committed id */
    return r;
}

ws_status ws_pg_session_get(ws_store *store, int64_t tenant, const char *id, int with_state,
                            ws_store_session *out, ws_error *err)
{
    ws_pg *s = ws_pg_of(store);
    ws_pg_args a = {0};
    ws_pg__arg_text(&a, id);
    ws_pg__arg_int(&a, tenant);
    PGresult *res;
    WS_TRY(ws_pg__run(s, WS_PG_SESSION_GET, &a, &res, err, "storage: reading a session"));
    ws_status r = WS_OK;
    if (!PQntuples(res)) {
        r = ws_store__session_not_found(id, err);
    } else {
        read_session(res, 0, out);
        if (with_state && !PQgetisnull(res, 0, 9)) {
            size_t n = (size_t)PQgetlength(res, 0, 9);
            size_t want = (size_t)out->rows * (size_t)out->cols * sizeof(float);
            if (n != want || n == 0) /* the CHECK constraint forbids this */
                r = ws_error_set(err, WS_ERR_FORMAT,
                                 "session %s: state has %zu bytes, shape %dx%d wants %zu", id, n,
                                 (int)out->rows, (int)out->cols, want);
            else if (!(out->state = malloc(n)))
                r = ws_error_set(err, WS_ERR_NOMEM, "storage: out of memory (%zu bytes)", n);
            else
                memcpy(out->state, PQgetvalue(res, 0, 9), n);
        }
    }
    PQclear(res);
    if (r != WS_OK) ws_store_session_clear(out);
    return r;
}

ws_status ws_pg_session_delete(ws_store *store, int64_t tenant, const char *id, ws_error *err)
{
    ws_pg *s = ws_pg_of(store);
    ws_pg_op op;
    WS_TRY(ws_pg__op_begin(s, &op, err));
    ws_pg_args a = {0};
    ws_pg__arg_text(&a, id);
    ws_pg__arg_int(&a, tenant);
    int64_t n = 0;
    /* the step log goes with it: ON DELETE CASCADE */
    ws_status r = ws_pg__run_n(s, WS_PG_SESSION_DELETE, &a, &n, err, "storage: deleting a session");
    if (r == WS_OK && n == 0) r = ws_store__session_not_found(id, err);
    return ws_pg__op_end(s, &op, r, err);
}

ws_status ws_pg_session_count(ws_store *store, int64_t tenant, int64_t *n, ws_error *err)
{
    return ws_pg__int_by(ws_pg_of(store), WS_PG_SESSION_COUNT, tenant, n, err,
                         "storage: counting sessions");
}

typedef struct {
    ws_store_session_fn fn;
    void *ctx;
} session_list_ctx;

static ws_status session_row(void *ctx, const PGresult *res, int row, ws_error *err)
{
    (void)err;
    session_list_ctx *c = ctx;
    ws_store_session sess;
    read_session(res, row, &sess);
    return c->fn(c->ctx, &sess);
}

ws_status ws_pg_session_list(ws_store *store, int64_t tenant, const char *after_id, int limit,
                             ws_store_session_fn fn, void *ctx, ws_error *err)
{
    /* keyset paging: "" sorts before every id, and any string is a valid cursor */
    ws_pg_args a = {0};
    ws_pg__arg_int(&a, tenant);
    ws_pg__arg_text(&a, after_id ? after_id : "");
    ws_pg__arg_int(&a, limit);
    session_list_ctx c = {fn, ctx};
    return ws_pg__each(ws_pg_of(store), WS_PG_SESSION_LIST, &a, session_row, &c, err,
                       "storage: listing sessions");
}

ws_status ws_pg_session_each_of_model(ws_store *store, int64_t model, ws_store_session_fn fn,
                                      void *ctx, ws_error *err)
{
    ws_pg_args a = {0};
    ws_pg__arg_int(&a, model);
    session_list_ctx c = {fn, ctx};
    return ws_pg__each(ws_pg_of(store), WS_PG_SESSION_OF_MODEL, &a, session_row, &c, err,
                       "storage: listing sessions");
}
