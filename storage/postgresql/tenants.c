/* tenants.c — tenants: the owners of sessions and API keys. */
#include "pg_internal.h"

/* Looks a tenant up by name: WS_OK with *id, WS_ERR_NOTFOUND (err untouched),
 * or a storage failure. */
static ws_status find(ws_pg *s, const char *name, int64_t *id, ws_error *err)
{
    ws_pg_args a = {0};
    ws_pg__arg_text(&a, name);
    PGresult *res;
    WS_TRY(ws_pg__run(s, WS_PG_TENANT_FIND, &a, &res, err, "storage: looking up a tenant"));
    ws_status r = PQntuples(res) ? WS_OK : WS_ERR_NOTFOUND;
    if (r == WS_OK) *id = ws_pg__int(res, 0, 0);
    PQclear(res);
    return r;
}

/* find-or-insert, inside the caller's write unit. Another connection may insert
 * the same name meanwhile: the insert then does nothing and the name is found
 * again (its row committed, or this unit waits for it). */
ws_status ws_pg__tenant_ensure_in(ws_pg *s, const char *name, int64_t *id, ws_error *err)
{
    ws_status r = find(s, name, id, err);
    if (r != WS_ERR_NOTFOUND) return r;
    ws_pg_args a = {0};
    ws_pg__arg_text(&a, name);
    ws_pg__arg_int(&a, ws_clock_wall_ms());
    PGresult *res;
    WS_TRY(ws_pg__run(s, WS_PG_TENANT_INSERT, &a, &res, err, "storage: creating a tenant"));
    int inserted = PQntuples(res) == 1;
    if (inserted) *id = ws_pg__int(res, 0, 0);
    PQclear(res);
    if (inserted) return WS_OK;
    r = find(s, name, id, err);
    return r == WS_ERR_NOTFOUND
               ? ws_error_set(err, WS_ERR_STORAGE, "storage: tenant \"%s\" vanished", name)
               : r;
}

ws_status ws_pg_tenant_ensure(ws_store *store, const char *name, int64_t *id, ws_error *err)
{
    ws_pg *s = ws_pg_of(store);
    ws_pg_op op;
    WS_TRY(ws_pg__op_begin(s, &op, err));
    return ws_pg__op_end(s, &op, ws_pg__tenant_ensure_in(s, name, id, err), err);
}

ws_status ws_pg_tenant_find(ws_store *store, const char *name, int64_t *id, ws_error *err)
{
    ws_status r = find(ws_pg_of(store), name, id, err);
    if (r == WS_ERR_NOTFOUND)
        return ws_error_set(err, WS_ERR_NOTFOUND, "tenant \"%s\" not found", name);
    return r;
}
