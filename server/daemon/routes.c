/* routes.c — the route table built from routes.h, its matcher, and the probes
 * (/healthz, /readyz, /metrics, /version). */
#include <stdio.h>
#include <string.h>

#include "base/ws_version.h"
#include "routes.h"

/* clang-format off */
#define WS_ROUTE_ROW(method, pattern, handler, auth, name, body) \
    {#method, pattern, ws_route_##handler, WS_AUTH_##auth, name, WS_ROUTE_BEGIN_##body(handler)},
/* clang-format on */
static const ws_route table[] = {WS_ROUTES(WS_ROUTE_ROW)};
#define N_ROUTES ((int)(sizeof table / sizeof table[0]))
_Static_assert(N_ROUTES < WS_ROUTE_LABELS, "WS_ROUTE_LABELS: one slot per row and one for other");

/* 1 when the path's segments fit the pattern; its {…} segments into params. */
static int match(const char *pattern, char *const *segs, int n, const char **params)
{
    int i = 0, np = 0;
    for (const char *p = pattern; *p == '/'; i++) {
        p++;
        size_t len = strcspn(p, "/");
        if (i == n) return 0;
        if (*p == '{') {
            if (np == WS_HTTP_PARAMS) return 0;
            params[np++] = segs[i];
        } else if (strlen(segs[i]) != len || memcmp(segs[i], p, len) != 0) {
            return 0;
        }
        p += len;
    }
    return i == n;
}

/* A row's label slot: the first row of the same name. */
static int label_of(int row)
{
    int i = 0;
    while (strcmp(table[i].name, table[row].name) != 0) i++;
    return i;
}

static void allow_add(char *allow, size_t cap, const char *method)
{
    size_t n = strlen(allow);
    snprintf(allow + n, cap - n, "%s%s", n ? ", " : "", method);
}

void ws_route_find(const char *method, char *const *segs, int n_segs, ws_route_match *m)
{
    memset(m, 0, sizeof *m);
    m->auth = WS_AUTH_KEY;
    m->label = m->pattern = WS_ROUTE_LABELS - 1;
    const char *want = strcmp(method, "HEAD") != 0 ? method : "GET";
    int known = 0;
    for (int i = 0; i < N_ROUTES; i++) {
        const ws_route *r = &table[i];
        const char *params[WS_HTTP_PARAMS] = {0};
        if (!match(r->pattern, segs, n_segs, params)) continue;
        if (!known || r->auth < m->auth) m->auth = r->auth;
        /* the first row that matches is the first of its pattern: the pattern's slot */
        if (!known) m->label = label_of(i), m->pattern = i;
        known = 1;
        allow_add(m->allow, sizeof m->allow, r->method);
        if (!strcmp(r->method, "GET")) allow_add(m->allow, sizeof m->allow, "HEAD");
        if (!m->route && !strcmp(r->method, want)) {
            m->route = r;
            m->label = label_of(i);
            memcpy(m->params, params, sizeof params);
        }
    }
    if (known) allow_add(m->allow, sizeof m->allow, "OPTIONS"); /* http.c answers it */
    if (m->route) m->auth = m->route->auth;
}

const char *ws_route_label_name(int label)
{
    return label >= 0 && label < N_ROUTES ? table[label].name : "other";
}

const char *ws_route_pattern_name(int slot)
{
    return slot >= 0 && slot < N_ROUTES ? table[slot].pattern : "other";
}

/* The process is up and serving HTTP: answered from memory, never from
 * storage, so that a held lock or a slow disk cannot delay it. */
void ws_route_healthz(ws_http_ctx *c, ws_http_answer *a)
{
    (void)c;
    a->json = cJSON_CreateObject();
    a->status = 200;
    cJSON_AddStringToObject(a->json, "status", "ok");
}

/* Why the daemon is not ready, or NULL: stopping, the latest write failed
 * (storage cannot commit), or storage does not answer a read. */
static const char *not_ready(ws_srv *srv, ws_store_info *info, ws_error *err)
{
    if (atomic_load(&srv->stopping)) return "shutting down";
    switch ((ws_status)atomic_load(&srv->storage_fault)) {
    case WS_ERR_UNAVAILABLE: return "storage cannot commit: the latest write failed";
    case WS_ERR_CORRUPT: return "storage is corrupt: the latest write failed";
    default: break;
    }
    ws_store *st = ws_srv_store(srv, err);
    if (!st || ws_store_get_info(st, info, err) != WS_OK) return err->msg;
    return NULL;
}

/* Ready: not shutting down, storage commits and answers. */
void ws_route_readyz(ws_http_ctx *c, ws_http_answer *a)
{
    ws_error err = {0};
    ws_store_info info;
    const char *why = not_ready(c->srv, &info, &err);
    a->json = cJSON_CreateObject();
    a->status = why ? 503 : 200;
    cJSON_AddStringToObject(a->json, "status", why ? "not_ready" : "ready");
    if (!why) {
        cJSON_AddStringToObject(a->json, "durability", info.synchronous == 2 ? "full" : "normal");
        cJSON_AddNumberToObject(a->json, "queue_depth", ws_engine_queue_depth(c->srv->engine));
    } else {
        cJSON_AddStringToObject(a->json, "reason", why);
    }
}

void ws_route_metrics(ws_http_ctx *c, ws_http_answer *a)
{
    a->raw = ws_metrics_render(c->srv);
    a->status = 200;
}

/* Which build answers, and on which backend: for support and for a fleet's
 * rollout (also the metric worldstate_build_info). */
void ws_route_version(ws_http_ctx *c, ws_http_answer *a)
{
    a->json = cJSON_CreateObject();
    a->status = 200;
    cJSON_AddStringToObject(a->json, "version", ws_version());
    cJSON_AddStringToObject(a->json, "git", ws_version_git());
    cJSON_AddStringToObject(a->json, "backend", ws_engine_backend_name(c->srv->engine));
}
