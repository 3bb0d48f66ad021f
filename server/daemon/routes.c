/* routes.c — the route table and the probes (/healthz, /readyz, /metrics). */
#include <string.h>

#include "daemon.h"

static int is(const ws_http_ctx *c, int i, const char *s)
{
    return i < c->n_segs && !strcmp(c->segs[i], s);
}

int ws_http_route_of(const ws_http_ctx *c)
{
    if (c->n_segs == 1 && is(c, 0, "healthz")) return WS_ROUTE_HEALTH;
    if (c->n_segs == 1 && is(c, 0, "readyz")) return WS_ROUTE_READY;
    if (c->n_segs == 1 && is(c, 0, "metrics")) return WS_ROUTE_METRICS;
    if (c->n_segs < 2 || !is(c, 0, "v1")) return WS_ROUTE_OTHER;
    if (is(c, 1, "sessions")) {
        switch (c->n_segs) {
        case 2: return WS_ROUTE_SESSIONS;
        case 3: return WS_ROUTE_SESSION;
        case 4:
            if (is(c, 3, "state")) return WS_ROUTE_STATE;
            if (is(c, 3, "steps")) return WS_ROUTE_STEPS;
            if (is(c, 3, "queries")) return WS_ROUTE_QUERIES;
            return WS_ROUTE_OTHER;
        case 6: return is(c, 3, "steps") && is(c, 5, "labels") ? WS_ROUTE_LABELS : WS_ROUTE_OTHER;
        default: return WS_ROUTE_OTHER;
        }
    }
    if (is(c, 1, "models")) {
        if (c->n_segs == 2) return WS_ROUTE_MODELS;
        if (c->n_segs == 3) return WS_ROUTE_MODEL;
        if (c->n_segs == 4 && is(c, 3, "training")) return WS_ROUTE_TRAINING;
        if (c->n_segs == 4 && is(c, 3, "checkpoint")) return WS_ROUTE_CHECKPOINT;
        if (c->n_segs == 4 && is(c, 3, "import")) return WS_ROUTE_IMPORT;
    }
    return WS_ROUTE_OTHER;
}

static void probe(ws_http_ctx *c, int route, ws_http_answer *a)
{
    if (strcmp(c->method, "GET") != 0) {
        a->status = 405;
        a->json = ws_http_error("method_not_allowed", "use GET");
        return;
    }
    if (route == WS_ROUTE_METRICS) {
        a->raw = ws_metrics_render(c->srv);
        a->status = 200;
        return;
    }
    a->json = cJSON_CreateObject();
    if (route == WS_ROUTE_HEALTH) { /* the process is up and serving HTTP */
        a->status = 200;
        cJSON_AddStringToObject(a->json, "status", "ok");
        return;
    }
    /* Ready: not shutting down, and storage answers. */
    ws_error err = {0};
    ws_store *st = ws_srv_store(c->srv, &err);
    ws_store_info info;
    int ok = !atomic_load(&c->srv->stopping) && st && ws_store_get_info(st, &info, &err) == WS_OK;
    a->status = ok ? 200 : 503;
    cJSON_AddStringToObject(a->json, "status", ok ? "ready" : "not_ready");
    if (ok) {
        cJSON_AddStringToObject(a->json, "durability", info.synchronous == 2 ? "full" : "normal");
        cJSON_AddNumberToObject(a->json, "queue_depth", ws_engine_queue_depth(c->srv->engine));
    } else {
        cJSON_AddStringToObject(a->json, "reason", atomic_load(&c->srv->stopping) ? "shutting down" : err.msg);
    }
}

void ws_routes_dispatch(ws_http_ctx *c, int route, ws_http_answer *a)
{
    switch (route) {
    case WS_ROUTE_HEALTH:
    case WS_ROUTE_READY:
    case WS_ROUTE_METRICS: probe(c, route, a); return;
    case WS_ROUTE_SESSIONS:
    case WS_ROUTE_SESSION:
    case WS_ROUTE_STATE:
    case WS_ROUTE_STEPS:
    case WS_ROUTE_QUERIES:
    case WS_ROUTE_LABELS: ws_routes_sessions(c, route, a); return;
    case WS_ROUTE_MODELS:
    case WS_ROUTE_MODEL:
    case WS_ROUTE_TRAINING:
    case WS_ROUTE_CHECKPOINT:
    case WS_ROUTE_IMPORT: ws_routes_models(c, route, a); return;
    default:
        a->status = 404;
        a->json = ws_http_error("not_found", "no such route");
    }
}
