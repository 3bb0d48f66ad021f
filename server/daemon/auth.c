/* auth.c — Bearer API keys. Keys live hashed in storage (ws_store_key_*).
 *
 * Open mode: with no active key at startup the daemon binds loopback only
 * (main.c enforces it) and every request acts as tenant "default" with admin
 * rights, so a fresh install works with plain curl. Once any key exists at
 * startup, every request but the probes must carry one. */
#include <string.h>

#include "daemon.h"

int ws_auth_is_loopback(const char *host)
{
    return !strncmp(host, "127.", 4) || !strcmp(host, "localhost");
}

ws_status ws_auth_check(ws_srv *srv, struct MHD_Connection *conn, ws_store_principal *who,
                        ws_error *err)
{
    const char *h =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h) {
        if (!srv->open_mode)
            return ws_error_set(err, WS_ERR_NOTFOUND, "missing Authorization: Bearer <key>");
        memset(who, 0, sizeof *who);
        who->tenant = srv->default_tenant;
        strcpy(who->tenant_name, "default");
        who->admin = 1;
        return WS_OK;
    }
    if (strncmp(h, "Bearer ", 7) != 0)
        return ws_error_set(err, WS_ERR_NOTFOUND, "Authorization must be \"Bearer <key>\"");
    ws_store *st = ws_srv_store(srv, err);
    if (!st) return err->code;
    ws_status s = ws_store_key_verify(st, h + 7, who, err);
    if (s == WS_ERR_NOTFOUND)
        return ws_error_set(err, WS_ERR_NOTFOUND, "unknown or revoked API key");
    return s;
}
