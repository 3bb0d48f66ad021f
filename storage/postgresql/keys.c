/* keys.c — API keys as rows: stored by their SHA-256 (storage/keys.c makes and
 * hashes them), found by hash, revoked but never deleted. */
#include <stdio.h>
#include <string.h>

#include "pg_internal.h"

ws_status ws_pg_key_insert(ws_store *store, const char *tenant_name, int admin, const char *note,
                           const char *hash, const char *prefix, int64_t *key_id, ws_error *err)
{
    ws_pg *s = ws_pg_of(store);
    ws_pg_op op;
    WS_TRY(ws_pg__op_begin(s, &op, err));
    int64_t tenant = 0;
    ws_status r = ws_pg__tenant_ensure_in(s, tenant_name, &tenant, err);
    if (r == WS_OK) {
        ws_pg_args a = {0};
        ws_pg__arg_int(&a, tenant);
        ws_pg__arg_text(&a, hash);
        ws_pg__arg_text(&a, prefix);
        ws_pg__arg_text(&a, admin ? "true" : "false");
        ws_pg__arg_text(&a, note);
        ws_pg__arg_int(&a, ws_clock_wall_ms());
        PGresult *res;
        r = ws_pg__run(s, WS_PG_KEY_INSERT, &a, &res, err, "storage: storing an API key");
        if (r == WS_OK && key_id) *key_id = ws_pg__int(res, 0, 0);
        PQclear(res);
    }
    return ws_pg__op_end(s, &op, r, err);
}

ws_status ws_pg_key_find(ws_store *store, const char *hash, ws_store_principal *out,
                         ws_error *err)
{
    ws_pg *s = ws_pg_of(store);
    ws_pg_args a = {0};
    ws_pg__arg_text(&a, hash);
    PGresult *res;
    WS_TRY(ws_pg__run(s, WS_PG_KEY_VERIFY, &a, &res, err, "storage: verifying an API key"));
    ws_status r = PQntuples(res) ? WS_OK : WS_ERR_NOTFOUND; /* the wrapper words NOTFOUND */
    if (r == WS_OK) {
        memset(out, 0, sizeof *out);
        out->key_id = ws_pg__int(res, 0, 0);
        out->tenant = ws_pg__int(res, 0, 1);
        snprintf(out->tenant_name, sizeof out->tenant_name, "%s", ws_pg__text(res, 0, 2));
        out->admin = ws_pg__int(res, 0, 3) != 0;
    }
    PQclear(res);
    return r;
}

typedef struct {
    ws_store_key_fn fn;
    void *ctx;
} key_list_ctx;

static ws_status key_row(void *ctx, const PGresult *res, int row, ws_error *err)
{
    (void)err;
    key_list_ctx *c = ctx;
    ws_store_key_info k = {
        .id = ws_pg__int(res, row, 0),
        .tenant_name = ws_pg__text(res, row, 1),
        .prefix = ws_pg__text(res, row, 2),
        .admin = ws_pg__int(res, row, 3) != 0,
        .note = ws_pg__text(res, row, 4),
        .created_ms = ws_pg__int(res, row, 5),
        .revoked_ms = ws_pg__int(res, row, 6), /* NULL reads as 0: active */
    };
    return c->fn(c->ctx, &k);
}

ws_status ws_pg_key_list(ws_store *store, ws_store_key_fn fn, void *ctx, ws_error *err)
{
    key_list_ctx c = {fn, ctx};
    return ws_pg__each(ws_pg_of(store), WS_PG_KEY_LIST, NULL, key_row, &c, err,
                       "storage: listing API keys");
}

ws_status ws_pg_key_revoke(ws_store *store, int64_t key_id, ws_error *err)
{
    ws_pg *s = ws_pg_of(store);
    ws_pg_op op;
    WS_TRY(ws_pg__op_begin(s, &op, err));
    ws_pg_args a = {0};
    ws_pg__arg_int(&a, key_id);
    ws_pg__arg_int(&a, ws_clock_wall_ms());
    int64_t n = 0;
    ws_status r = ws_pg__run_n(s, WS_PG_KEY_REVOKE, &a, &n, err, "storage: revoking an API key");
    /* coalesce() keeps the first revocation time, so a repeat still matches
     * the row: no row means no such key. */
    if (r == WS_OK && n == 0)
        r = ws_error_set(err, WS_ERR_NOTFOUND, "API key %lld not found", (long long)key_id);
    return ws_pg__op_end(s, &op, r, err);
}

ws_status ws_pg_key_count_active(ws_store *store, int64_t *n, ws_error *err)
{
    ws_pg *s = ws_pg_of(store);
    PGresult *res;
    WS_TRY(ws_pg__run(s, WS_PG_KEY_COUNT_ACTIVE, NULL, &res, err, "storage: counting API keys"));
    *n = ws_pg__int(res, 0, 0);
    PQclear(res);
    return WS_OK;
}
