/* tenants.c — tenants: the owners of sessions and API keys. */
#include "store_internal.h"

/* Looks a tenant up by name: WS_OK with *id, WS_ERR_NOTFOUND (err untouched),
 * or a storage failure. */
static ws_status find(ws_store *s, const char *name, int64_t *id, ws_error *err)
{
    sqlite3_stmt *st = ws_store__stmt(s, WS_ST_TENANT_FIND);
    ws_status r = ws_store__bind_text(s, st, 1, name, err);
    if (r == WS_OK) {
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
            *id = (int64_t)sqlite3_column_int64(st, 0);
        else if (rc == SQLITE_DONE)
            r = WS_ERR_NOTFOUND;
        else
            r = ws_store__sqlfail(s, rc, err, "storage: looking up a tenant");
    }
    ws_store__done(st);
    return r;
}

/* find-or-insert, inside the caller's write unit. */
ws_status ws_store__tenant_ensure_in(ws_store *s, const char *name, int64_t *id, ws_error *err)
{
    ws_status r = find(s, name, id, err);
    if (r != WS_ERR_NOTFOUND) return r;
    sqlite3_stmt *st = ws_store__stmt(s, WS_ST_TENANT_INSERT);
    r = ws_store__bind_text(s, st, 1, name, err);
    if (r == WS_OK) r = ws_store__bind_int64(s, st, 2, ws_store__now_ms(), err);
    if (r == WS_OK) {
        r = ws_store__exec(s, st, err, "storage: creating a tenant");
        if (r == WS_OK) *id = (int64_t)sqlite3_last_insert_rowid(s->db);
    }
    ws_store__done(st);
    return r;
}

ws_status ws_store_tenant_ensure(ws_store *s, const char *name, int64_t *id, ws_error *err)
{
    WS_STORE_ENTER(s, err);
    WS_TRY(ws_store__check_name("tenant", name, err));
    ws_store_op op;
    WS_TRY(ws_store__op_begin(s, &op, err));
    return ws_store__op_end(s, &op, ws_store__tenant_ensure_in(s, name, id, err), err);
}

ws_status ws_store_tenant_find(ws_store *s, const char *name, int64_t *id, ws_error *err)
{
    WS_STORE_ENTER(s, err);
    WS_TRY(ws_store__check_name("tenant", name, err));
    ws_status r = find(s, name, id, err);
    if (r == WS_ERR_NOTFOUND)
        return ws_error_set(err, WS_ERR_NOTFOUND, "tenant \"%s\" not found", name);
    return r;
}
