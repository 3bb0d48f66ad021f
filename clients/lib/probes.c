/* probes.c — /healthz, /readyz and /metrics (never need a key). */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static ws_client_status decode_ok(const cJSON *body, void *unused, ws_client_error *err)
{
    (void)unused;
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(body, "status");
    return cJSON_IsString(st) && !strcmp(st->valuestring, "ok")
               ? WS_CLIENT_OK
               : wsc_fail(err, WS_CLIENT_ERR_PROTOCOL,
                          "healthz did not answer {\"status\":\"ok\"}");
}

ws_client_status ws_client_healthz(const ws_client *c, ws_client_error *err)
{
    return wsc_get(c, WS_CLIENT_OK, "/healthz", decode_ok, NULL, err);
}

ws_client_status ws_client_readyz(const ws_client *c, ws_client_ready *out, ws_client_error *err)
{
    static const wsc_field ready_fields[] = {
        {"durability", WSC_STR, offsetof(ws_client_ready, durability), sizeof out->durability, 1},
        {"queue_depth", WSC_I64, offsetof(ws_client_ready, queue_depth), 0, 1}};
    static const wsc_field not_ready_fields[] = {
        {"reason", WSC_STR, offsetof(ws_client_ready, reason), sizeof out->reason, 1}};
    memset(out, 0, sizeof *out);
    /* A 503 here is the answer "not ready", not a busy server to retry. */
    wsc_request rq = {.method = "GET", .path = "/readyz", .repeatable = 1, .answer_503 = 1};
    wsc_response rs;
    const cJSON *body;
    ws_client_status s = wsc_call(c, &rq, &rs, err);
    if (s == WS_CLIENT_OK) s = wsc_json_body(&rs, &body, err);
    out->ready = rs.status == 200;
    if (s == WS_CLIENT_OK)
        s = out->ready ? wsc_decode_fields(body, ready_fields, 2, out, err)
                       : wsc_decode_fields(body, not_ready_fields, 1, out, err);
    wsc_response_free(&rs);
    return s;
}

ws_client_status ws_client_metrics(const ws_client *c, char **text, ws_client_error *err)
{
    *text = NULL;
    wsc_request rq = {.method = "GET", .path = "/metrics", .repeatable = 1};
    wsc_response rs;
    ws_client_status s = wsc_call(c, &rq, &rs, err);
    if (s == WS_CLIENT_OK) {
        /* The body is text: hand it over rather than copy it. */
        *text = rs.body ? rs.body : strdup("");
        rs.body = NULL;
        if (!*text) s = wsc_fail(err, WS_CLIENT_ERR_NOMEM, "out of memory");
    }
    wsc_response_free(&rs);
    return s;
}
