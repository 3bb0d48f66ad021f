/* client.c — the handle, errors, argument checks and small shared helpers. */
#include <curl/curl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc = CURLE_FAILED_INIT;

/* curl_global_init is not thread-safe before libcurl 7.84: run it exactly once. */
static void global_init(void)
{
    global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

const char *ws_client_status_name(ws_client_status s)
{
    switch (s) {
    case WS_CLIENT_OK: return "ok";
    case WS_CLIENT_ERR_TRANSPORT: return "transport";
    case WS_CLIENT_ERR_HTTP: return "http";
    case WS_CLIENT_ERR_PROTOCOL: return "protocol";
    case WS_CLIENT_ERR_INVALID: return "invalid";
    case WS_CLIENT_ERR_NOMEM: return "nomem";
    case WS_CLIENT_ERR_IO: return "io";
    }
    return "unknown";
}

ws_client_status wsc_fail(ws_client_error *err, ws_client_status kind, const char *fmt, ...)
{
    if (!err) return kind;
    memset(err, 0, sizeof *err);
    err->kind = kind;
    err->current_step = -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return kind;
}

ws_client_config ws_client_config_default(void)
{
    return (ws_client_config){.url = "http://127.0.0.1:8080",
                              .timeout_ms = 30000,
                              .connect_timeout_ms = 5000,
                              .retries = 3,
                              .backoff_ms = 100};
}

ws_client_status ws_client_new(const ws_client_config *cfg, ws_client **out, ws_client_error *err)
{
    *out = NULL;
    if (!cfg || !cfg->url ||
        (strncmp(cfg->url, "http://", 7) != 0 && strncmp(cfg->url, "https://", 8) != 0))
        return wsc_fail(err, WS_CLIENT_ERR_INVALID, "url must start with http:// or https://");
    if (cfg->timeout_ms < 0 || cfg->connect_timeout_ms < 0 || cfg->backoff_ms < 0 ||
        cfg->retries < 0 || cfg->retries > 100)
        return wsc_fail(err, WS_CLIENT_ERR_INVALID,
                        "timeouts and backoff must be >= 0, retries 0..100");
    const char *key = cfg->api_key && *cfg->api_key ? cfg->api_key : NULL;
    /* The key goes into a header line: control characters would split it. */
    for (const char *k = key; k && *k; k++)
        if ((unsigned char)*k < 0x21 || *k == 0x7f)
            return wsc_fail(err, WS_CLIENT_ERR_INVALID,
                            "api key contains a space or control character");
    pthread_once(&global_once, global_init);
    if (global_rc != CURLE_OK)
        return wsc_fail(err, WS_CLIENT_ERR_TRANSPORT, "libcurl init: %s",
                        curl_easy_strerror(global_rc));
    ws_client *c = calloc(1, sizeof *c);
    size_t n = strlen(cfg->url);
    while (n > 0 && cfg->url[n - 1] == '/') n--;
    if (c) c->url = strndup(cfg->url, n);
    if (c && key) {
        size_t cap = strlen(key) + 32;
        c->auth = malloc(cap);
        if (c->auth) snprintf(c->auth, cap, "Authorization: Bearer %s", key);
    }
    if (!c || !c->url || (key && !c->auth)) {
        ws_client_free(c);
        return wsc_fail(err, WS_CLIENT_ERR_NOMEM, "out of memory");
    }
    c->timeout_ms = cfg->timeout_ms;
    c->connect_timeout_ms = cfg->connect_timeout_ms;
    c->backoff_ms = cfg->backoff_ms;
    c->retries = cfg->retries;
    *out = c;
    return WS_CLIENT_OK;
}

void ws_client_free(ws_client *c)
{
    if (!c) return;
    free(c->url);
    free(c->auth);
    free(c);
}

ws_client_status wsc_check_id(const char *id, ws_client_error *err)
{
    size_t n = id ? strlen(id) : 0;
    int ok = n == WS_CLIENT_ID_LEN;
    for (size_t i = 0; ok && i < n; i++)
        ok = (id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f');
    return ok ? WS_CLIENT_OK
              : wsc_fail(err, WS_CLIENT_ERR_INVALID,
                         "\"%s\" is not a session id (32 lowercase hex digits)",
                         id ? id : "(null)");
}

ws_client_status wsc_check_name(const char *name, ws_client_error *err)
{
    size_t n = name ? strlen(name) : 0;
    int ok = n >= 1 && n <= WS_CLIENT_NAME_MAX &&
             strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
    return ok ? WS_CLIENT_OK
              : wsc_fail(err, WS_CLIENT_ERR_INVALID,
                         "\"%s\" is not a model or tenant name ([A-Za-z0-9._-]{1,64})",
                         name ? name : "(null)");
}

ws_client_status wsc_path(char *buf, size_t cap, ws_client_error *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
    return n >= 0 && (size_t)n < cap
               ? WS_CLIENT_OK
               : wsc_fail(err, WS_CLIENT_ERR_INVALID, "request path too long");
}

ws_client_status wsc_session_path(char *buf, size_t cap, const char *id, const char *suffix,
                                  ws_client_error *err)
{
    ws_client_status s = wsc_check_id(id, err);
    return s == WS_CLIENT_OK ? wsc_path(buf, cap, err, "/v1/sessions/%s%s", id, suffix) : s;
}

ws_client_status wsc_model_path(char *buf, size_t cap, const char *name, const char *suffix,
                                ws_client_error *err)
{
    ws_client_status s = wsc_check_name(name, err);
    return s == WS_CLIENT_OK ? wsc_path(buf, cap, err, "/v1/models/%s%s", name, suffix) : s;
}

ws_client_status wsc_json_body(const wsc_response *rs, const cJSON **out, ws_client_error *err)
{
    *out = rs->json;
    return cJSON_IsObject(rs->json)
               ? WS_CLIENT_OK
               : wsc_fail(err, WS_CLIENT_ERR_PROTOCOL, "HTTP %ld: the answer is not a JSON object",
                          rs->status);
}

ws_client_status wsc_print(cJSON *obj, char **out, ws_client_error *err)
{
    *out = obj ? cJSON_PrintUnformatted(obj) : NULL;
    cJSON_Delete(obj);
    return *out ? WS_CLIENT_OK : wsc_fail(err, WS_CLIENT_ERR_NOMEM, "out of memory");
}
