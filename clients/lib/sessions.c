/* sessions.c — /v1/sessions: create, list, get, delete, and the state download. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static ws_client_status decode_session(const cJSON *body, void *out, ws_client_error *err)
{
    return wsc_session_from_json(body, 0, out, err);
}

ws_client_status ws_client_session_create(const ws_client *c, const char *model,
                                          ws_client_session *out, ws_client_error *err)
{
    const char *name = model ? model : "default";
    char *body = NULL;
    ws_client_status s = wsc_check_name(name, err);
    if (s != WS_CLIENT_OK) return s;
    cJSON *o = cJSON_CreateObject();
    if (o && !cJSON_AddStringToObject(o, "model", name)) {
        cJSON_Delete(o);
        o = NULL;
    }
    s = wsc_print(o, &body, err);
    /* Not repeatable: a second POST after a lost reply would make a second session. */
    return wsc_send(c, s, "POST", "/v1/sessions", body, 0, decode_session, out, err);
}

ws_client_status ws_client_session_get(const ws_client *c, const char *id, ws_client_session *out,
                                       ws_client_error *err)
{
    char path[96];
    return wsc_get(c, wsc_session_path(path, sizeof path, id, "", err), path, decode_session, out,
                   err);
}

void ws_client_session_page_free(ws_client_session_page *p)
{
    free(p->items);
    memset(p, 0, sizeof *p);
}

static ws_client_status decode_page(const cJSON *body, void *dst, ws_client_error *err)
{
    ws_client_session_page *out = dst;
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(body, "sessions");
    const cJSON *next = cJSON_GetObjectItemCaseSensitive(body, "next_after");
    int next_ok = cJSON_IsNull(next) ||
                  (cJSON_IsString(next) && wsc_check_id(next->valuestring, NULL) == WS_CLIENT_OK);
    if (!cJSON_IsArray(arr) || !next_ok)
        return wsc_fail(err, WS_CLIENT_ERR_PROTOCOL,
                        "a session page needs \"sessions\" and \"next_after\"");
    if (cJSON_IsString(next)) memcpy(out->next_after, next->valuestring, WS_CLIENT_ID_LEN + 1);
    out->items = calloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof *out->items);
    if (!out->items) return wsc_fail(err, WS_CLIENT_ERR_NOMEM, "out of memory");
    const cJSON *it;
    cJSON_ArrayForEach(it, arr)
    {
        ws_client_status s = wsc_session_from_json(it, 1, &out->items[out->n], err);
        if (s != WS_CLIENT_OK) return s;
        out->n++;
    }
    return WS_CLIENT_OK;
}

ws_client_status ws_client_session_list(const ws_client *c, const char *after, int limit,
                                        ws_client_session_page *out, ws_client_error *err)
{
    memset(out, 0, sizeof *out);
    char path[128];
    int from_start = !after || !*after;
    ws_client_status s = from_start ? WS_CLIENT_OK : wsc_check_id(after, err);
    if (s == WS_CLIENT_OK && (limit < 1 || limit > 1000))
        s = wsc_fail(err, WS_CLIENT_ERR_INVALID, "limit must be 1..1000");
    if (s == WS_CLIENT_OK)
        s = wsc_path(path, sizeof path, err, "/v1/sessions?limit=%d%s%s", limit,
                     from_start ? "" : "&after=", from_start ? "" : after);
    s = wsc_get(c, s, path, decode_page, out, err);
    if (s != WS_CLIENT_OK) ws_client_session_page_free(out);
    return s;
}

ws_client_status ws_client_session_delete(const ws_client *c, const char *id, ws_client_error *err)
{
    char path[96];
    return wsc_delete(c, wsc_session_path(path, sizeof path, id, "", err), path, err);
}

void ws_client_state_free(ws_client_state *st)
{
    free(st->values);
    memset(st, 0, sizeof *st);
}

/* The body is T*d little-endian float32: decode to host order. */
static ws_client_status decode_state(const wsc_response *rs, ws_client_state *out,
                                     ws_client_error *err)
{
    long long step;
    char tail;
    if (sscanf(rs->x_state_shape, "%d,%d%c", &out->rows, &out->cols, &tail) != 2 || out->rows < 0 ||
        out->cols < 0 || sscanf(rs->x_step, "%lld%c", &step, &tail) != 1)
        return wsc_fail(err, WS_CLIENT_ERR_PROTOCOL, "state answer lacks X-State-Shape / X-Step");
    out->step = step;
    size_t n = (size_t)out->rows * (size_t)out->cols;
    if (rs->len != n * 4)
        return wsc_fail(err, WS_CLIENT_ERR_PROTOCOL, "state is %zu bytes, its shape %d,%d says %zu",
                        rs->len, out->rows, out->cols, n * 4);
    if (n == 0) return WS_CLIENT_OK;
    out->values = malloc(n * sizeof(float));
    if (!out->values) return wsc_fail(err, WS_CLIENT_ERR_NOMEM, "out of memory");
    const unsigned char *b = (const unsigned char *)rs->body;
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)b[4 * i] | (uint32_t)b[4 * i + 1] << 8 |
                     (uint32_t)b[4 * i + 2] << 16 | (uint32_t)b[4 * i + 3] << 24;
        memcpy(&out->values[i], &u, sizeof u);
    }
    return WS_CLIENT_OK;
}

ws_client_status ws_client_state_get(const ws_client *c, const char *id, ws_client_state *out,
                                     ws_client_error *err)
{
    memset(out, 0, sizeof *out);
    char path[96];
    wsc_request rq = {.method = "GET", .path = path, .repeatable = 1};
    wsc_response rs = {0};
    ws_client_status s = wsc_session_path(path, sizeof path, id, "/state", err);
    if (s == WS_CLIENT_OK) s = wsc_call(c, &rq, &rs, err);
    if (s == WS_CLIENT_OK) s = decode_state(&rs, out, err); /* binary: not wsc_fetch */
    if (s != WS_CLIENT_OK) ws_client_state_free(out);
    wsc_response_free(&rs);
    return s;
}
