/* keys.c — API keys: created by an admin command, shown once, stored as their
 * SHA-256 only, verified by hash lookup, revoked but never deleted. */
#include <stdio.h>
#include <string.h>

#include "sha256.h"
#include "store_internal.h"

#define KEY_TAG "wsk_"
#define KEY_RANDOM_BYTES 32 /* 256 bits: not guessable, so no salt or slow hash is needed */

ws_status ws_store_key_create(ws_store *s, const char *tenant_name, int admin, const char *note,
                              char key_out[WS_STORE_KEY_LEN + 1], int64_t *key_id,
                              ws_error *err)
{
    WS_STORE_ENTER(s, err);
    WS_TRY(ws_store__check_name("tenant", tenant_name, err));

    unsigned char raw[KEY_RANDOM_BYTES];
    char key[WS_STORE_KEY_LEN + 1], hash[2 * WS_STORE_SHA256_BYTES + 1];
    char prefix[WS_STORE_KEY_PREFIX_LEN + 1];
    WS_TRY(ws_store__random(raw, sizeof raw, err));
    memcpy(key, KEY_TAG, 4);
    ws_store__hex(raw, sizeof raw, key + 4);
    ws_store_sha256_hex(key, WS_STORE_KEY_LEN, hash);
    memcpy(prefix, key, WS_STORE_KEY_PREFIX_LEN);
    prefix[WS_STORE_KEY_PREFIX_LEN] = '\0';

    ws_store_op op;
    ws_status r = ws_store__op_begin(s, &op, err);
    if (r == WS_OK) {
        int64_t tenant = 0;
        r = ws_store__tenant_ensure_in(s, tenant_name, &tenant, err);
        sqlite3_stmt *st = ws_store__stmt(s, WS_ST_KEY_INSERT);
        if (r == WS_OK) r = ws_store__bind_int64(s, st, 1, tenant, err);
        if (r == WS_OK) r = ws_store__bind_text(s, st, 2, hash, err);
        if (r == WS_OK) r = ws_store__bind_text(s, st, 3, prefix, err);
        if (r == WS_OK) r = ws_store__bind_int64(s, st, 4, admin ? 1 : 0, err);
        if (r == WS_OK) r = ws_store__bind_text(s, st, 5, note ? note : "", err);
        if (r == WS_OK) r = ws_store__bind_int64(s, st, 6, ws_store__now_ms(), err);
        if (r == WS_OK) r = ws_store__exec(s, st, err, "storage: storing an API key");
        ws_store__done(st);
        if (r == WS_OK && key_id) *key_id = (int64_t)sqlite3_last_insert_rowid(s->db);
        r = ws_store__op_end(s, &op, r, err);
    }
    /* Only a committed key is handed out. */
    if (r == WS_OK) memcpy(key_out, key, sizeof key);
    memset(key, 0, sizeof key);
    memset(raw, 0, sizeof raw);
    return r;
}

ws_status ws_store_key_verify(ws_store *s, const char *key, ws_store_principal *out,
                              ws_error *err)
{
    WS_STORE_ENTER(s, err);
    /* One answer for every kind of bad key, so a caller learns nothing from it.
     * Lookup is by hash: timing of the index probe reveals at most something
     * about the hash of the guess, not about any stored key. */
    static const char bad[] = "invalid or revoked API key";
    if (!key || strlen(key) != WS_STORE_KEY_LEN) return ws_error_set(err, WS_ERR_NOTFOUND, "%s", bad);
    char hash[2 * WS_STORE_SHA256_BYTES + 1];
    ws_store_sha256_hex(key, WS_STORE_KEY_LEN, hash);

    sqlite3_stmt *st = ws_store__stmt(s, WS_ST_KEY_VERIFY);
    ws_status r = ws_store__bind_text(s, st, 1, hash, err);
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
            r = ws_error_set(err, WS_ERR_NOTFOUND, "%s", bad);
        } else {
            r = ws_store__sqlfail(s, rc, err, "storage: verifying an API key");
        }
    }
    ws_store__done(st);
    return r;
}

ws_status ws_store_key_list(ws_store *s, ws_store_key_fn fn, void *ctx, ws_error *err)
{
    WS_STORE_ENTER(s, err);
    sqlite3_stmt *st = ws_store__stmt(s, WS_ST_KEY_LIST);
    ws_status r = WS_OK;
    for (;;) {
        int rc = sqlite3_step(st);
        if (rc == SQLITE_DONE) break;
        if (rc != SQLITE_ROW) {
            r = ws_store__sqlfail(s, rc, err, "storage: listing API keys");
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
        s->in_callback = 1;
        r = fn(ctx, &k);
        s->in_callback = 0;
        if (r != WS_OK) break;
    }
    ws_store__done(st);
    return r;
}

ws_status ws_store_key_revoke(ws_store *s, int64_t key_id, ws_error *err)
{
    WS_STORE_ENTER(s, err);
    ws_store_op op;
    WS_TRY(ws_store__op_begin(s, &op, err));
    sqlite3_stmt *st = ws_store__stmt(s, WS_ST_KEY_REVOKE);
    ws_status r = ws_store__bind_int64(s, st, 1, key_id, err);
    if (r == WS_OK) r = ws_store__bind_int64(s, st, 2, ws_store__now_ms(), err);
    if (r == WS_OK) r = ws_store__exec(s, st, err, "storage: revoking an API key");
    ws_store__done(st);
    /* coalesce() keeps the first revocation time, so a repeat still matches
     * the row: no change count means no such key. */
    if (r == WS_OK && sqlite3_changes(s->db) == 0)
        r = ws_error_set(err, WS_ERR_NOTFOUND, "API key %lld not found", (long long)key_id);
    return ws_store__op_end(s, &op, r, err);
}

ws_status ws_store_key_count_active(ws_store *s, int64_t *n, ws_error *err)
{
    WS_STORE_ENTER(s, err);
    return ws_store__query_int64(s, ws_store__stmt(s, WS_ST_KEY_COUNT_ACTIVE), n, err,
                                 "storage: counting API keys");
}
