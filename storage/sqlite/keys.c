/* keys.c — API keys as SQLite rows: stored by their SHA-256 (storage/keys.c
 * makes and hashes them), found by hash, revoked but never deleted. */
#include <stdio.h>
#include <string.h>

#include "sqlite_internal.h"

ws_status ws_sqlite_key_insert(ws_store *store, const char *tenant_name, int admin,
                               const char *note, const char *hash, const char *prefix,
                               int64_t *key_id, ws_error *err)
{
    ws_sqlite *s = ws_sqlite_of(store);
    ws_sqlite_op op;
    WS_TRY(ws_sqlite__op_begin(s, &op, err));
    int64_t tenant = 0;
    ws_status r = ws_sqlite__tenant_ensure_in(s, tenant_name, &tenant, err);
    sqlite3_stmt *st = ws_sqlite__stmt(s, WS_ST_KEY_INSERT);
    if (r == WS_OK) r = ws_sqlite__bind_int64(s, st, 1, tenant, err);
    if (r == WS_OK) r = ws_sqlite__bind_text(s, st, 2, hash, err);
    if (r == WS_OK) r = ws_sqlite__bind_text(s, st, 3, prefix, err);
    if (r == WS_OK) r = ws_sqlite__bind_int64(s, st, 4, admin ? 1 : 0, err);
    if (r == WS_OK) r = ws_sqlite__bind_text(s, st, 5, note, err);
    if (r == WS_OK) r = ws_sqlite__bind_int64(s, st, 6, ws_clock_wall_ms(), err);
    if (r == WS_OK) r = ws_sqlite__exec(s, st, err, "storage: storing an API key");
    ws_sqlite__done(st);
    if (r == WS_OK && key_id) *key_id = (int64_t)sqlite3_last_insert_rowid(s->db);
    return ws_sqlite__op_end(s, &op, r, err);
}

ws_status ws_sqlite_key_find(ws_store *store, const char *hash, ws_store_principal *out,
                             ws_error *err)
{
    ws_sqlite *s = ws_sqlite_of(store);
    sqlite3_stmt *st = ws_sqlite__stmt(s, WS_ST_KEY_VERIFY);
    ws_status r = ws_sqlite__bind_text(s, st, 1, hash, err);
    if (r == WS_OK) {
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            memset(out, 0, sizeof *out);
            out->key_id = (int64_t)sqlite3_column_int64(st, 0);
            out->tenant = (int64_t)sqlite3_column_int64(st, 1);
            const unsigned char *name = sqlite3_column_text(st, 2);
            snprintf(out->tenant_name, sizeof out->tenant_name, "%s",
                     name ? (const char *)name : "");
            out->admin = sqlite3_column_int(st, 3) != 0;
        } else if (rc == SQLITE_DONE) {
            r = WS_ERR_NOTFOUND; /* the wrapper words it */
        } else {
            r = ws_sqlite__sqlfail(s, rc, err, "storage: verifying an API key");
        }
    }
    ws_sqlite__done(st);
    return r;
}

ws_status ws_sqlite_key_list(ws_store *store, ws_store_key_fn fn, void *ctx, ws_error *err)
{
    ws_sqlite *s = ws_sqlite_of(store);
    sqlite3_stmt *st = ws_sqlite__stmt(s, WS_ST_KEY_LIST);
    ws_status r = WS_OK;
    for (;;) {
        int rc = sqlite3_step(st);
        if (rc == SQLITE_DONE) break;
        if (rc != SQLITE_ROW) {
            r = ws_sqlite__sqlfail(s, rc, err, "storage: listing API keys");
            break;
        }
        ws_store_key_info k = {
            .id = (int64_t)sqlite3_column_int64(st, 0),
            .tenant_name = (const char *)sqlite3_column_text(st, 1),
            .prefix = (const char *)sqlite3_column_text(st, 2),
            .admin = sqlite3_column_int(st, 3) != 0,
            .note = (const char *)sqlite3_column_text(st, 4),
            .created_ms = (int64_t)sqlite3_column_int64(st, 5),
            .revoked_ms = (int64_t)sqlite3_column_int64(st, 6), /* NULL reads as 0 */
        };
        if (!k.tenant_name || !k.prefix || !k.note) { /* NOT NULL columns: only OOM */
            r = ws_error_set(err, WS_ERR_NOMEM, "storage: out of memory listing API keys");
            break;
        }
        r = fn(ctx, &k);
        if (r != WS_OK) break;
    }
    ws_sqlite__done(st);
    return r;
}

ws_status ws_sqlite_key_revoke(ws_store *store, int64_t key_id, ws_error *err)
{
    ws_sqlite *s = ws_sqlite_of(store);
    ws_sqlite_op op;
    WS_TRY(ws_sqlite__op_begin(s, &op, err));
    sqlite3_stmt *st = ws_sqlite__stmt(s, WS_ST_KEY_REVOKE);
    ws_status r = ws_sqlite__bind_int64(s, st, 1, key_id, err);
    if (r == WS_OK) r = ws_sqlite__bind_int64(s, st, 2, ws_clock_wall_ms(), err);
    if (r == WS_OK) r = ws_sqlite__exec(s, st, err, "storage: revoking an API key");
    ws_sqlite__done(st);
    /* coalesce() keeps the first revocation time, so a repeat still matches
     * the row: no change count means no such key. */
    if (r == WS_OK && sqlite3_changes(s->db) == 0)
        r = ws_error_set(err, WS_ERR_NOTFOUND, "API key %lld not found", (long long)key_id);
    return ws_sqlite__op_end(s, &op, r, err);
}

ws_status ws_sqlite_key_count_active(ws_store *store, int64_t *n, ws_error *err)
{
    ws_sqlite *s = ws_sqlite_of(store);
    return ws_sqlite__query_int64(s, ws_sqlite__stmt(s, WS_ST_KEY_COUNT_ACTIVE), n, err,
                                  "storage: counting API keys");
}
