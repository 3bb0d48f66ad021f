/* http.c — the transport: one libcurl easy handle per attempt (so a ws_client is
 * shareable across threads), the retry policy of ws_client.h, and the mapping
 * of API error bodies onto ws_client_error. */
#include <curl/curl.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define WSC_BACKOFF_MAX_MS 10000L /* doubling stops here */

typedef struct {
    CURL *h;
    FILE *sink;
    wsc_response *rs;
    int nomem, io_failed;
} attempt_ctx;

static size_t on_body(char *p, size_t sz, size_t n, void *ctx)
{
    attempt_ctx *a = ctx;
    size_t k = sz * n;
    long code = 0;
    if (a->sink && curl_easy_getinfo(a->h, CURLINFO_RESPONSE_CODE, &code) == CURLE_OK &&
        code >= 200 && code < 300) {
        if (fwrite(p, 1, k, a->sink) == k) return k;
        a->io_failed = 1;
        return 0; /* aborts the transfer with CURLE_WRITE_ERROR */
    }
    wsc_response *rs = a->rs;
    char *b = realloc(rs->body, rs->len + k + 1);
    if (!b) {
        a->nomem = 1;
        return 0;
    }
    memcpy(b + rs->len, p, k);
    rs->body = b;
    rs->len += k;
    b[rs->len] = '\0';
    return k;
}

/* Keeps the values of the few headers the routes answer with. */
static size_t on_header(char *p, size_t sz, size_t n, void *ctx)
{
    wsc_response *rs = ((attempt_ctx *)ctx)->rs;
    static const struct {
        const char *name;
        size_t off;
    } wanted[] = {{"X-State-Shape", offsetof(wsc_response, x_state_shape)},
                  {"X-Step", offsetof(wsc_response, x_step)},
                  {"X-Model-Version", offsetof(wsc_response, x_model_version)}};
    size_t k = sz * n;
    for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++) {
        size_t nl = strlen(wanted[i].name);
        if (k <= nl || p[nl] != ':' || strncasecmp(p, wanted[i].name, nl) != 0) continue;
        const char *v = p + nl + 1, *end = p + k;
        while (v < end && (*v == ' ' || *v == '\t')) v++;
        while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ')) end--;
        char *dst = (char *)rs + wanted[i].off;
        size_t len = (size_t)(end - v) < 31 ? (size_t)(end - v) : 31; /* every slot is 32 bytes */
        memcpy(dst, v, len);
        dst[len] = '\0';
    }
    return k;
}

/* A binary body from its file (rq->source). */
static size_t on_read(char *p, size_t sz, size_t n, void *ctx)
{
    size_t k = fread(p, 1, sz * n, ctx);
    return k == 0 && ferror((FILE *)ctx) ? CURL_READFUNC_ABORT : k;
}

static CURLcode set_options(CURL *h, const ws_client *c, const wsc_request *rq, const char *url,
                            struct curl_slist *headers, attempt_ctx *ctx, char *errbuf)
{
    CURLcode e = curl_easy_setopt(h, CURLOPT_URL, url);
    if (e == CURLE_OK) e = curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, rq->method);
    if (e == CURLE_OK) e = curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    if (e == CURLE_OK)
        e = curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L); /* timeouts without SIGALRM: threads */
    if (e == CURLE_OK) e = curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->timeout_ms);
    if (e == CURLE_OK) e = curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, c->connect_timeout_ms);
    if (e == CURLE_OK) e = curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    if (e == CURLE_OK) e = curl_easy_setopt(h, CURLOPT_WRITEDATA, ctx);
    if (e == CURLE_OK) e = curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    if (e == CURLE_OK) e = curl_easy_setopt(h, CURLOPT_HEADERDATA, ctx);
    if (e == CURLE_OK) e = curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    if (e == CURLE_OK && rq->body) e = curl_easy_setopt(h, CURLOPT_POSTFIELDS, rq->body);
    if (e == CURLE_OK && rq->body)
        e = curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(rq->body));
    if (e == CURLE_OK && rq->source) e = curl_easy_setopt(h, CURLOPT_POST, 1L);
    if (e == CURLE_OK && rq->source) e = curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
    if (e == CURLE_OK && rq->source) e = curl_easy_setopt(h, CURLOPT_READDATA, rq->source);
    if (e == CURLE_OK && rq->source)
        e = curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->source_len);
    return e;
}

static struct curl_slist *headers_of(const ws_client *c, const wsc_request *rq)
{
    /* "Expect:" turns off 100-continue: the daemon answers at once, so the
     * handshake would only add a round trip to larger bodies. */
    /* A binary body (a checkpoint, up to 256 MiB) keeps 100-continue instead:
     * a refusal (403, 413) then comes before any of it is sent. */
    const char *lines[] = {rq->body ? "Content-Type: application/json" : NULL,
                           rq->body ? "Expect:" : NULL,
                           rq->source ? "Content-Type: application/octet-stream" : NULL,
                           rq->source ? "Expect: 100-continue" : NULL, c->auth};
    struct curl_slist *list = NULL;
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        if (!lines[i]) continue;
        struct curl_slist *l = curl_slist_append(list, lines[i]);
        if (!l) {
            curl_slist_free_all(list);
            return NULL;
        }
        list = l;
    }
    return list;
}

/* One request. *sent: some of it went out, so the server may have acted on it. */
static CURLcode attempt(const ws_client *c, const wsc_request *rq, const char *url,
                        wsc_response *rs, attempt_ctx *ctx, char *errbuf, int *sent)
{
    *sent = 0;
    errbuf[0] = '\0';
    CURL *h = curl_easy_init();
    struct curl_slist *headers = h ? headers_of(c, rq) : NULL;
    if (!h || (!headers && (rq->body || rq->source || c->auth))) {
        curl_easy_cleanup(h);
        ctx->nomem = 1;
        return CURLE_OUT_OF_MEMORY;
    }
    *ctx = (attempt_ctx){.h = h, .sink = rq->sink, .rs = rs};
    CURLcode e = set_options(h, c, rq, url, headers, ctx, errbuf);
    if (e == CURLE_OK) e = curl_easy_perform(h);
    /* Bytes of request that went out: none means the server cannot have acted
     * (connection refused or timed out), so even a POST may go again. */
    long request_bytes = 0;
    *sent = curl_easy_getinfo(h, CURLINFO_REQUEST_SIZE, &request_bytes) != CURLE_OK ||
            request_bytes > 0;
    if (e == CURLE_OK) e = curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &rs->status);
    curl_slist_free_all(headers);
    curl_easy_cleanup(h);
    return e;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* Clears what one attempt left, keeping `lost`. */
static void reset_answer(wsc_response *rs)
{
    int lost = rs->lost;
    wsc_response_free(rs);
    rs->lost = lost;
}

static ws_client_status http_error(const wsc_response *rs, ws_client_error *err)
{
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(rs->json, "error");
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(e, "code");
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(e, "message");
    const cJSON *cur = cJSON_GetObjectItemCaseSensitive(rs->json, "current_step");
    if (cJSON_IsString(msg))
        wsc_fail(err, WS_CLIENT_ERR_HTTP, "%s", msg->valuestring);
    else
        wsc_fail(err, WS_CLIENT_ERR_HTTP, "HTTP %ld: %.200s", rs->status, rs->body ? rs->body : "");
    if (!err) return WS_CLIENT_ERR_HTTP;
    err->status = rs->status;
    if (cJSON_IsString(code)) snprintf(err->code, sizeof err->code, "%s", code->valuestring);
    if (cJSON_IsNumber(cur)) err->current_step = (int64_t)cur->valuedouble;
    return WS_CLIENT_ERR_HTTP;
}

ws_client_status wsc_call(const ws_client *c, const wsc_request *rq, wsc_response *rs,
                          ws_client_error *err)
{
    memset(rs, 0, sizeof *rs);
    size_t cap = strlen(c->url) + strlen(rq->path) + 1;
    char *url = malloc(cap);
    if (!url) return wsc_fail(err, WS_CLIENT_ERR_NOMEM, "out of memory");
    snprintf(url, cap, "%s%s", c->url, rq->path);
    char errbuf[CURL_ERROR_SIZE];
    attempt_ctx ctx = {0};
    CURLcode e = CURLE_OK;
    int tries = 0;
    for (;;) {
        reset_answer(rs);
        if (rq->sink && (fflush(rq->sink) != 0 || ftruncate(fileno(rq->sink), 0) != 0 ||
                         fseek(rq->sink, 0, SEEK_SET) != 0)) {
            free(url);
            return wsc_fail(err, WS_CLIENT_ERR_IO, "cannot rewrite the download file: %s",
                            strerror(errno));
        }
        if (rq->source && fseek(rq->source, 0, SEEK_SET) != 0) {
            free(url);
            return wsc_fail(err, WS_CLIENT_ERR_IO, "cannot rewind the file to send: %s",
                            strerror(errno));
        }
        int sent;
        e = attempt(c, rq, url, rs, &ctx, errbuf, &sent);
        tries++;
        if (ctx.nomem || ctx.io_failed) break;
        int again;
        if (e == CURLE_OK) {
            again = rs->status == 503 && !rq->answer_503; /* 503s are "not applied" */
        } else {
            rs->lost |= sent;
            again = !sent || rq->repeatable;
        }
        if (!again || tries > c->retries) break;
        long wait = c->backoff_ms << (tries - 1 < 10 ? tries - 1 : 10);
        sleep_ms(wait < WSC_BACKOFF_MAX_MS ? wait : WSC_BACKOFF_MAX_MS);
    }
    free(url);
    if (ctx.nomem) return wsc_fail(err, WS_CLIENT_ERR_NOMEM, "out of memory");
    if (ctx.io_failed)
        return wsc_fail(err, WS_CLIENT_ERR_IO, "cannot write the download file: %s",
                        strerror(errno));
    ws_client_status s;
    if (e != CURLE_OK) {
        /* libcurl's error buffer is the more precise of its two messages. */
        s = wsc_fail(err, WS_CLIENT_ERR_TRANSPORT, "%s",
                     errbuf[0] ? errbuf : curl_easy_strerror(e));
        if (err) err->curl_code = (int)e;
    } else {
        rs->json = rs->len ? cJSON_ParseWithLength(rs->body, rs->len) : NULL;
        int ok = (rs->status >= 200 && rs->status < 300) || (rs->status == 503 && rq->answer_503);
        s = ok ? WS_CLIENT_OK : http_error(rs, err);
    }
    if (s != WS_CLIENT_OK && err) err->attempts = tries;
    return s;
}

void wsc_response_free(wsc_response *rs)
{
    free(rs->body);
    cJSON_Delete(rs->json);
    memset(rs, 0, sizeof *rs);
}

ws_client_status wsc_fetch(const ws_client *c, const wsc_request *rq, wsc_decoder decode, void *out,
                           ws_client_error *err)
{
    wsc_response rs;
    const cJSON *body;
    ws_client_status s = wsc_call(c, rq, &rs, err);
    if (s == WS_CLIENT_OK) s = wsc_json_body(&rs, &body, err);
    if (s == WS_CLIENT_OK) s = decode(body, out, err);
    wsc_response_free(&rs);
    return s;
}

ws_client_status wsc_get(const ws_client *c, ws_client_status path_status, const char *path,
                         wsc_decoder decode, void *out, ws_client_error *err)
{
    if (path_status != WS_CLIENT_OK) return path_status;
    wsc_request rq = {.method = "GET", .path = path, .repeatable = 1};
    return wsc_fetch(c, &rq, decode, out, err);
}

ws_client_status wsc_delete(const ws_client *c, ws_client_status path_status, const char *path,
                            ws_client_error *err)
{
    if (path_status != WS_CLIENT_OK) return path_status;
    wsc_request rq = {.method = "DELETE", .path = path, .repeatable = 1};
    wsc_response rs;
    ws_client_status s = wsc_call(c, &rq, &rs, err);
    if (s == WS_CLIENT_ERR_HTTP && rs.status == 404 && rs.lost) s = WS_CLIENT_OK;
    wsc_response_free(&rs);
    return s;
}

ws_client_status wsc_send(const ws_client *c, ws_client_status prior, const char *method,
                          const char *path, char *body, int repeatable, wsc_decoder decode,
                          void *out, ws_client_error *err)
{
    wsc_request rq = {.method = method, .path = path, .body = body, .repeatable = repeatable};
    ws_client_status s = prior == WS_CLIENT_OK ? wsc_fetch(c, &rq, decode, out, err) : prior;
    free(body);
    return s;
}
