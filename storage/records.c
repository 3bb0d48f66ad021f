/* records.c — the backend-independent part of the public API: durability
 * names, the form of a session id, and freeing the records _get fills. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "storage.h"

ws_status ws_store_durability_parse(const char *text, ws_store_durability *out, ws_error *err)
{
    if (text && strcasecmp(text, "normal") == 0) {
        *out = WS_STORE_DURABILITY_NORMAL;
        return WS_OK;
    }
    if (text && strcasecmp(text, "full") == 0) {
        *out = WS_STORE_DURABILITY_FULL;
        return WS_OK;
    }
    return ws_error_set(err, WS_ERR_INVALID,
                        "durability must be \"normal\" or \"full\", not \"%s\"",
                        text ? text : "(null)");
}

const char *ws_store_durability_name(ws_store_durability d)
{
    return d == WS_STORE_DURABILITY_FULL     ? "full"
           : d == WS_STORE_DURABILITY_NORMAL ? "normal"
                                             : "?";
}

int ws_store_session_id_valid(const char *id)
{
    if (!id) return 0;
    for (int i = 0; i < WS_STORE_ID_LEN; i++)
        if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f'))) return 0;
    return id[WS_STORE_ID_LEN] == '\0';
}

void ws_store_session_clear(ws_store_session *sess)
{
    if (!sess) return;
    free(sess->state);
    memset(sess, 0, sizeof *sess);
}

void ws_store_model_clear(ws_store_model *m)
{
    if (!m) return;
    free(m->config_json);
    free(m->training_json);
    memset(m, 0, sizeof *m);
}

void ws_store_version_clear(ws_store_version *v)
{
    if (!v) return;
    free(v->path);
    free(v->note);
    free(v->sha256);
    memset(v, 0, sizeof *v);
}
