/* tenants.c — tenants: the owners of sessions and API keys. */
#include "sqlite_internal.h"

/* Looks a tenant up by name: WS_OK with *id, WS_ERR_NOTFOUND (err untouched),
 * or a storage failure. */
static ws_status find(ws_sqlite *s, const char *name, int64_t *id, ws_error *err)
{
    sqlite3_stmt *st = ws_sqlite__stmt(s, WS_ST_TENANT_FIND);
    ws_status r = ws_sqlite__bind_text(s, st, 1, name, err);
    if (r == WS_OK) {
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
            *id = (int64_t)sqlite3_column_int64(st, 0);
        else if (rc == SQLITE_DONE)
            r = WS_ERR_NOTFOUND;
        else
            r = ws_sqlite__sqlfail(s, rc, err, "storage: looking up a tenant");
    }
    ws_sqlite__done(st);
    return r;
}

ws_status ws_sqlite__tenant_exists(ws_sqlite *s, int64_t tenant, ws_error *err)
{
    sqlite3_stmt *st = ws_sqlite__stmt(s, WS_ST_TENANT_EXISTS);
    return ws_sqlite__probe(s, st, ws_sqlite__bind_int64(s, st, 1, tenant, err), "tenant", tenant,
                            err);
}

/* find-or-insert, inside the caller's write unit. */
ws_status ws_sqlite__tenant_ensure_in(ws_sqlite *s, const char *name, int64_t *id, ws_error *err)
{
    ws_status r = find(s, name, id, err);
    if (r != WS_ERR_NOTFOUND) return r;
    sqlite3_stmt *st = ws_sqlite__stmt(s, WS_ST_TENANT_INSERT);
    r = ws_sqlite__bind_text(s, st, 1, name, err);
    if (r == WS_OK) r = ws_sqlite__bind_int64(s, st, 2, ws_clock_wall_ms(), err);
    if (r == WS_OK) {
        r = ws_sqlite__exec(s, st, err, "storage: creating a tenant");
        if (r == WS_OK) *id = (int64_t)sqlite3_last_insert_rowid(s->db);
    }
    ws_sqlite__done(st);
    return r;
}

ws_status ws_sqlite_tenant_ensure(ws_store *store, const char *name, int64_t *id, ws_error *err)
{
    ws_sqlite *s = ws_sqlite_of(store);
    ws_sqlite_op op;
    WS_TRY(ws_sqlite__op_begin(s, &op, err));
    return ws_sqlite__op_end(s, &op, ws_sqlite__tenant_ensure_in(s, name, id, err), err);
}

ws_status ws_sqlite_tenant_find(ws_store *store, const char *name, int64_t *id, ws_error *err)
{
    ws_sqlite *s = ws_sqlite_of(store);
    ws_status r = find(s, name, id, err);
    if (r == WS_ERR_NOTFOUND)
        return ws_error_set(err, WS_ERR_NOTFOUND, "tenant \"%s\" not found", name);
    return r;
}
