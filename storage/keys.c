/* keys.c — API keys, the part no backend repeats: a key is made here, shown
 * once, and handed to the backend only as its SHA-256 and display prefix. */
#include <string.h>

#include "sha256.h"
#include "store_ops.h"
#include "store_util.h"

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

    ws_status r = s->ops->key_insert(s, tenant_name, admin, note ? note : "", hash, prefix,
                                     key_id, err);
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
    if (!key || strlen(key) != WS_STORE_KEY_LEN)
        return ws_error_set(err, WS_ERR_NOTFOUND, "%s", bad);
    char hash[2 * WS_STORE_SHA256_BYTES + 1];
    ws_store_sha256_hex(key, WS_STORE_KEY_LEN, hash);
    ws_status r = s->ops->key_find(s, hash, out, err);
    return r == WS_ERR_NOTFOUND ? ws_error_set(err, WS_ERR_NOTFOUND, "%s", bad) : r;
}
