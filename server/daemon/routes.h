/* routes.h — the route table: every route of the REST API is one row here
 * (method, path pattern, handler, auth level, metrics name, body hook).
 *
 * The rows are an X-macro so that the same list declares the handlers and
 * builds the table (routes.c): adding a route is one handler function plus one
 * row. Everything else comes from the table: the matcher, 405 with an Allow
 * header for a known path with another method, HEAD for every GET row, the
 * key a route needs, and the route label of /metrics (rows that share a name
 * share a label: "steps" counts both GET and POST .../steps).
 *
 * A row names its handler and auth level by suffix: handler `step` is the
 * function ws_route_step, auth KEY is WS_AUTH_KEY. A pattern's {…} segment
 * matches any one path segment and becomes the handler's c->params[i], in the
 * order of the pattern.
 *
 * Every row is an operation of server/daemon/openapi.json (same method and
 * pattern, the handler's name as its operationId) and every operation there a
 * row: tests/test_server_openapi.c checks both ways, and checks live answers of
 * every row against the document. OPTIONS is answered for every known path
 * (http.c, cors.c), so the table has no OPTIONS rows. */
#ifndef WS_SRV_ROUTES_H
#define WS_SRV_ROUTES_H

#include "daemon.h"

typedef enum {
    WS_AUTH_NONE, /* probes and scrapers carry no keys */
    WS_AUTH_KEY,  /* any active key (open mode: none needed, tenant "default") */
    WS_AUTH_ADMIN /* an admin key: 403 forbidden otherwise */
} ws_route_auth;

/* clang-format off */
/*      method  pattern                                  handler         auth   name         body */
#define WS_ROUTES(ROW) \
    ROW(GET,    "/healthz",                              healthz,        NONE,  "healthz",    MEM) \
    ROW(GET,    "/readyz",                               readyz,         NONE,  "readyz",     MEM) \
    ROW(GET,    "/metrics",                              metrics,        NONE,  "metrics",    MEM) \
    ROW(GET,    "/version",                              version,        NONE,  "version",    MEM) \
    ROW(GET,    "/openapi.json",                         openapi,        NONE,  "openapi",    MEM) \
    ROW(GET,    "/v1/sessions",                          sessions_list,  KEY,   "sessions",   MEM) \
    ROW(POST,   "/v1/sessions",                          session_create, KEY,   "sessions",   MEM) \
    ROW(GET,    "/v1/sessions/{id}",                     session_get,    KEY,   "session",    MEM) \
    ROW(DELETE, "/v1/sessions/{id}",                     session_delete, KEY,   "session",    MEM) \
    ROW(GET,    "/v1/sessions/{id}/state",               state_get,      KEY,   "state",      MEM) \
    ROW(GET,    "/v1/sessions/{id}/steps",               steps_list,     KEY,   "steps",      MEM) \
    ROW(POST,   "/v1/sessions/{id}/steps",               step,           KEY,   "steps",      MEM) \
    ROW(POST,   "/v1/sessions/{id}/queries",             query,          KEY,   "queries",    MEM) \
    ROW(PUT,    "/v1/sessions/{id}/steps/{step}/labels", labels_put,     KEY,   "labels",     MEM) \
    ROW(GET,    "/v1/models",                            models_list,    KEY,   "models",     MEM) \
    ROW(POST,   "/v1/models",                            model_create,   ADMIN, "models",     MEM) \
    ROW(GET,    "/v1/models/{name}",                     model_get,      KEY,   "model",      MEM) \
    ROW(DELETE, "/v1/models/{name}",                     model_delete,   ADMIN, "model",      MEM) \
    ROW(PATCH,  "/v1/models/{name}/training",            training_patch, ADMIN, "training",   MEM) \
    ROW(GET,    "/v1/models/{name}/checkpoint",          checkpoint_get, ADMIN, "checkpoint", MEM) \
    ROW(POST,   "/v1/models/{name}/import",              model_import,   ADMIN, "import",     FILE) \
    ROW(GET,    "/v1/models/{name}/versions",            versions_list,  KEY,   "versions",   MEM) \
    ROW(POST,   "/v1/models/{name}/versions/{version}/current", version_current, ADMIN, "rollback", MEM)
/* clang-format on */

/* A handler answers into a (status + JSON, a raw response, or a submitted job). */
typedef void ws_route_fn(ws_http_ctx *c, ws_http_answer *a);
/* A FILE row takes its (large) body into a file, c->upload, not into memory;
 * its hook ws_route_<handler>_begin runs on the headers alone, after the key
 * check, and may refuse (0, the answer in a) before any of the body is read. */
typedef int ws_route_begin_fn(ws_http_ctx *c, ws_http_answer *a);

#define WS_ROUTE_BEGIN_MEM(handler)  NULL
#define WS_ROUTE_BEGIN_FILE(handler) ws_route_##handler##_begin
#define WS_ROUTE_DECLARE_MEM(handler)
#define WS_ROUTE_DECLARE_FILE(handler) ws_route_begin_fn ws_route_##handler##_begin;
#define WS_ROUTE_DECLARE(method, pattern, handler, auth, name, body) \
    ws_route_fn ws_route_##handler;                                  \
    WS_ROUTE_DECLARE_##body(handler)
WS_ROUTES(WS_ROUTE_DECLARE)

typedef struct {
    const char *method, *pattern;
    ws_route_fn *handler;
    ws_route_auth auth;
    const char *name;               /* the /metrics route label */
    ws_route_begin_fn *before_body; /* FILE rows only */
} ws_route;

/* Metrics label slots: one per row (rows sharing a name use the first one's),
 * and the last for "other" (no row: 404). */
#define WS_ROUTE_LABELS 32

/* What the table says about one request. */
typedef struct {
    const ws_route *route; /* NULL: no row for this method (405) or path (404) */
    ws_route_auth auth;    /* the key to check first: the row's; for a 405 the least of
                              the path's rows; for an unknown path WS_AUTH_KEY */
    int label;             /* metrics label slot */
    int pattern;           /* metrics slot of the path's pattern: its first row (any method);
                              WS_ROUTE_LABELS - 1 for an unknown path */
    char allow[64];        /* the path's methods, "GET, HEAD, POST, OPTIONS"; "" for a 404 */
    const char *params[WS_HTTP_PARAMS];
} ws_route_match;

/* Matches method and the path's segments against the table; HEAD matches a
 * path's GET row (MHD sends the GET's headers without the body). */
void ws_route_find(const char *method, char *const *segs, int n_segs, ws_route_match *m);
/* The /metrics route label of a slot. */
const char *ws_route_label_name(int label);
/* The route pattern of a pattern slot ("other" for none). */
const char *ws_route_pattern_name(int slot);

/* ---- a request's path (path.c) ------------------------------------------ */
/* MHD's unescape callback: decodes %HH in place, except %2F and %00 (a '/' or
 * NUL from the client would split or cut a segment); returns the new length. */
size_t ws_http_unescape(void *cls, struct MHD_Connection *conn, char *s);
/* Matches the (unescaped) url and method against the table: its segments are
 * split into path (cap bytes; m->params point into it). -1 for a path too
 * long or too deep for any route, or one with an encoded '/' or NUL left in it. */
int ws_http_route(const char *url, const char *method, char *path, size_t cap, ws_route_match *m);

/* ---- request bodies into engine jobs (request.c) ------------------------- */
/* Each runs the strict body parse and every field's check; on failure the
 * status and message are the answer (400 invalid_request or bad_json) and j
 * may hold parts of the request (ws_job_free frees them). */
/* POST /v1/sessions: j->model_name, "default" without a body. */
ws_status ws_http_session_create_parse(const char *body, size_t len, ws_job *j, ws_error *err);
/* POST .../steps, .../queries, PUT .../labels: j->kind says which. */
ws_status ws_http_session_job_parse(const char *body, size_t len, ws_job *j, ws_error *err);
/* POST /v1/models: name, config, seed and training settings; the tenant's name
 * (checked as a name, not looked up) into tenant (WS_STORE_NAME_MAX + 1
 * bytes; "" for a shared model). */
ws_status ws_http_model_create_parse(const char *body, size_t len, ws_job *j, char *tenant,
                                     ws_error *err);
/* PATCH /v1/models/{name}/training: the settings sent and which they are. */
ws_status ws_http_training_patch_parse(const char *body, size_t len, ws_job *j, ws_error *err);
/* 1 when s is a model name: 1..64 characters of [A-Za-z0-9._-]. */
int ws_http_model_name_ok(const char *s);

#endif
