/* http.c — libmicrohttpd setup, body accumulation, dispatch and replies.
 *
 * One request = one ws_http_req (MHD's con_cls). The first callback has the
 * headers only: an oversized Content-Length is answered 413 at once. Body
 * chunks accumulate under WS_SRV_BODY_MAX (an import's go to a file, under
 * WS_SRV_IMPORT_MAX); on the final call the route runs.
 * A route that needs the engine returns a job: the connection is suspended and
 * the job's completion callback (on an engine thread) resumes it; MHD then
 * calls us again and the result goes out as JSON (jobs.c). A job can finish
 * before the connection is suspended, and MHD must never be asked to resume a
 * connection that is not suspended (it then neither replies nor lets the
 * daemon stop cleanly): job_phase decides, without a lock, which of the two
 * threads resumes or replies (job_done, await_job). Suspended
 * connections never time out in MHD, so every job carries its own deadline,
 * enforced by the engine. Every reply is one access-log line (access_log);
 * MHD's own messages go to the same log (mhd_log). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "routes.h"
#include "base/ws_clock.h"
#include "base/ws_utf8.h"
#include "server/common/log.h"

static atomic_int active_requests; /* for a graceful stop: replies still going out */

/* A job's phases. The engine's thread moves any phase to DONE, and resumes
 * the connection only if it found SUSPENDED; MHD's thread moves RUNNING to
 * SUSPENDING before it suspends and SUSPENDING to SUSPENDED after, and if the
 * job got DONE in between it resumes the connection itself. */
enum { JOB_RUNNING, JOB_SUSPENDING, JOB_SUSPENDED, JOB_DONE };

typedef struct ws_http_req {
    ws_srv *srv;
    struct MHD_Connection *conn;
    char *body;
    size_t len, cap;
    int too_large;
    int replied; /* a reply was queued before the body was read (413, 401, 403, 400) */
    ws_job *job;
    atomic_int job_phase; /* JOB_*: where the job and the connection are */
    int label;            /* the route's metrics label (routes.h) */
    int pattern, method;  /* its pattern slot (routes.h) and method (ws_metrics_method) */
    double t0;            /* ws_clock_mono_s at arrival: the request's duration for metrics */
    /* for the access log: what the request was and whose */
    char method_name[16];
    int probe; /* a route that needs no key: logged at debug */
    char tenant[WS_STORE_NAME_MAX + 1];
    char session[48];
    /* a FILE route (POST /v1/models/{name}/import): the body goes to a file */
    int import;
    uint64_t received; /* body bytes so far */
    int spool_fd;      /* -1 once closed */
    char *spool;       /* its path, until a job takes it over */
    int spool_failed;
    char spool_msg[256];
} ws_http_req;

cJSON *ws_http_error(const char *code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ws_utf8_scrub(msg); /* messages echo client bytes, maybe cut mid-character */
    cJSON *root = cJSON_CreateObject();
    cJSON *e = cJSON_AddObjectToObject(root, "error");
    if (!e || !cJSON_AddStringToObject(e, "code", code) ||
        !cJSON_AddStringToObject(e, "message", msg)) {
        cJSON_Delete(root);
        return NULL; /* send_json answers a bodiless 500 */
    }
    return root;
}

int ws_http_status_of(ws_status s, const char **code)
{
    switch (s) {
    case WS_OK: *code = "ok"; return 200;
    case WS_ERR_INVALID: *code = "invalid_request"; return 400;
    case WS_ERR_FORMAT: *code = "bad_json"; return 400;
    case WS_ERR_NOTFOUND: *code = "not_found"; return 404;
    case WS_ERR_CONFLICT: *code = "conflict"; return 409;
    case WS_ERR_UNSUPPORTED: *code = "unavailable"; return 503;
    case WS_ERR_STORAGE: *code = "storage_busy"; return 503;
    case WS_ERR_UNAVAILABLE: *code = "storage_unavailable"; return 503;
    case WS_ERR_CORRUPT: *code = "storage_corrupt"; return 500;
    default: *code = "internal"; return 500;
    }
}

/* One line per reply: method, route pattern, status, milliseconds, and the
 * tenant and session when the request has them; probes at debug. */
static void access_log(const ws_http_req *r, int status, double seconds)
{
    ws_log_level level = r->probe ? WS_LOG_DEBUG : WS_LOG_INFO;
    if (!ws_log_enabled(level)) return;
    ws_log_field f[] = {WS_LOG_STR("method", r->method_name),
                        WS_LOG_STR("route", ws_route_pattern_name(r->pattern)),
                        WS_LOG_NUM("status", status),
                        WS_LOG_NUM("ms", seconds * 1000),
                        WS_LOG_STR("tenant", r->tenant[0] ? r->tenant : NULL),
                        WS_LOG_STR("session", r->session[0] ? r->session : NULL)};
    ws_log_kv(level, "request", f, (int)(sizeof f / sizeof *f));
}

/* What the metrics and the access log say of a known path: its label and
 * pattern slots, whether it is a probe's, and the session it names. */
static void note_route(ws_http_req *r, const ws_route_match *m)
{
    r->label = m->label, r->pattern = m->pattern;
    if (!m->route) return;
    r->probe = m->auth == WS_AUTH_NONE;
    if (!strncmp(m->route->pattern, "/v1/sessions/{id}", 17) && m->params[0])
        snprintf(r->session, sizeof r->session, "%s", m->params[0]);
}

static enum MHD_Result send_response(struct MHD_Connection *conn, ws_http_req *r, int status,
                                     struct MHD_Response *resp)
{
    if (!resp) return MHD_NO; /* out of memory: MHD closes the connection */
    if (!ws_cors_headers(r->srv, conn, resp)) {
        MHD_destroy_response(resp);
        return MHD_NO;
    }
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    double seconds = ws_clock_mono_s() - r->t0;
    ws_metrics_request(r->label, r->pattern, r->method, status, seconds);
    access_log(r, status, seconds);
    return ret;
}

/* A JSON response (json is consumed); a bodiless 500 when it cannot be printed. */
static struct MHD_Response *json_response(cJSON *json, int *status)
{
    char *text = json ? cJSON_PrintUnformatted(json) : NULL;
    cJSON_Delete(json);
    if (!text) {
        *status = 500;
        return MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
    }
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(text);
        return NULL;
    }
    if (MHD_add_response_header(resp, "Content-Type", "application/json") != MHD_YES) {
        MHD_destroy_response(resp);
        return NULL;
    }
    return resp;
}

static enum MHD_Result send_json(struct MHD_Connection *conn, ws_http_req *r, int status,
                                 cJSON *json)
{
    struct MHD_Response *resp = json_response(json, &status);
    return send_response(conn, r, status, resp);
}

/* 405 for a known path: the table's methods for it in the Allow header. */
static enum MHD_Result send_405(struct MHD_Connection *conn, ws_http_req *r, const char *allow)
{
    int status = 405;
    struct MHD_Response *resp =
        json_response(ws_http_error("method_not_allowed", "allowed: %s", allow), &status);
    if (resp && status == 405 && MHD_add_response_header(resp, "Allow", allow) != MHD_YES) {
        MHD_destroy_response(resp);
        resp = NULL;
    }
    return send_response(conn, r, status, resp);
}

static cJSON *too_large(const ws_http_req *r)
{
    return ws_http_error("too_large", "request body over %llu bytes",
                         (unsigned long long)(r->import ? WS_SRV_IMPORT_MAX : WS_SRV_BODY_MAX));
}

/* Fills c->who from the key the route needs; 0 with the refusal (401, 403, or
 * 503 when storage fails) in a. */
static int auth_ok(ws_http_ctx *c, ws_route_auth need, ws_http_answer *a)
{
    if (need == WS_AUTH_NONE) return 1;
    ws_error err = {0};
    ws_status st = ws_auth_check(c->srv, c->conn, &c->who, &err);
    if (st == WS_OK) snprintf(c->req->tenant, sizeof c->req->tenant, "%s", c->who.tenant_name);
    if (st == WS_OK && (need == WS_AUTH_KEY || c->who.admin)) return 1;
    if (st == WS_OK) {
        a->status = 403;
        a->json = ws_http_error("forbidden", "this route needs an admin key");
        return 0;
    }
    const char *code = "unauthorized";
    a->status = st == WS_ERR_NOTFOUND ? 401 : ws_http_status_of(st, &code);
    a->json = ws_http_error(code, "%s", err.msg);
    return 0;
}

/* The request's row in the route table (ws_http_route), its {…} segments in
 * c->params (pointing into path); -1 for a path no route can have. */
static int route_of(const char *url, char *path, size_t cap, ws_http_ctx *c, ws_route_match *m)
{
    if (ws_http_route(url, c->method, path, cap, m) != 0) return -1;
    memcpy(c->params, m->params, sizeof c->params);
    return 0;
}

/* Content-Length headers that disagree: which one frames the body would be a
 * guess (and a proxy may guess otherwise), so the request is refused. */
typedef struct {
    const char *first;
    int conflict;
} length_seen;

static enum MHD_Result length_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
    (void)kind;
    length_seen *l = cls;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) != 0) return MHD_YES;
    if (!l->first)
        l->first = value ? value : "";
    else if (strcmp(l->first, value ? value : "") != 0)
        l->conflict = 1;
    return MHD_YES;
}

/* First call of a request (headers only): refuses an announced body over the
 * route's cap; for a FILE route (an import), also checks the key and runs the
 * route's begin hook before a body of up to WS_SRV_IMPORT_MAX is read (a client
 * sending "Expect: 100-continue" then sends none of it), and opens the file
 * the body goes to. */
static enum MHD_Result begin_request(ws_srv *srv, struct MHD_Connection *conn, ws_http_req *r,
                                     const char *url, const char *method)
{
    ws_http_ctx c = {.srv = srv, .conn = conn, .req = r, .method = method};
    char path[WS_SRV_PATH_MAX];
    ws_route_match m;
    int known = route_of(url, path, sizeof path, &c, &m) == 0;
    if (known) note_route(r, &m);
    if (atomic_load(&srv->stopping)) { /* a graceful stop takes no new work */
        r->replied = 1;
        return send_json(conn, r, 503,
                         ws_http_error("shutting_down", "the server is shutting down"));
    }
    r->import = known && m.route && m.route->before_body;
    uint64_t cap = r->import ? WS_SRV_IMPORT_MAX : WS_SRV_BODY_MAX;
    length_seen lengths = {0};
    if (MHD_get_connection_values(conn, MHD_HEADER_KIND, length_header, &lengths) < 0)
        return MHD_NO;
    if (lengths.conflict) {
        r->replied = 1;
        return send_json(conn, r, 400,
                         ws_http_error("invalid_request", "Content-Length headers disagree"));
    }
    const char *cl = lengths.first;
    if (cl && strtoull(cl, NULL, 10) > cap) {
        r->too_large = r->replied = 1; /* any body that still arrives is dropped */
        return send_json(conn, r, 413, too_large(r));
    }
    if (!r->import) return MHD_YES;
    ws_http_answer a = {0};
    if (!auth_ok(&c, m.auth, &a) || !m.route->before_body(&c, &a)) {
        r->replied = 1;
        return send_json(conn, r, a.status, a.json);
    }
    ws_error err = {0};
    char file[WS_SRV_PATH_MAX + 64];
    if (ws_srv_upload_create(srv->cfg.data_dir, file, sizeof file, &r->spool_fd, &err) != WS_OK) {
        r->replied = 1;
        return send_json(conn, r, 500, ws_http_error("internal", "%s", err.msg));
    }
    if (!(r->spool = strdup(file))) {
        unlink(file);
        return MHD_NO;
    }
    return MHD_YES;
}

/* A job's completion, on one of the engine's threads: the job is ours again. */
static void job_done(ws_job *j, void *user)
{
    (void)j;
    ws_http_req *r = user;
    struct MHD_Connection *conn = r->conn;
    if (atomic_exchange(&r->job_phase, JOB_DONE) == JOB_SUSPENDED) MHD_resume_connection(conn);
}

void ws_http_submit(ws_http_ctx *c, ws_job *j, ws_http_answer *a)
{
    ws_error err = {0};
    j->done = job_done;
    j->user = c->req;
    atomic_store(&c->req->job_phase, JOB_RUNNING);
    ws_status s = ws_engine_submit(c->srv->engine, j, &err);
    if (s == WS_OK) {
        a->job = j;
        return;
    }
    ws_job_free(j);
    a->status = 503;
    a->json = ws_http_error(s == WS_ERR_CONFLICT ? "overloaded" : "shutting_down", "%s", err.msg);
}

/* One chunk of an import's body into its file; a write failure is answered
 * (500) once the body is in, the rest of it is dropped. */
static void spool_chunk(ws_http_req *r, const char *data, size_t n)
{
    ws_error err = {0};
    if (r->spool_failed) return;
    if (ws_srv_write_all(r->spool_fd, data, n, &err) != WS_OK) {
        r->spool_failed = 1;
        snprintf(r->spool_msg, sizeof r->spool_msg, "%s", err.msg);
    }
}

/* r's finished job, answered; the job is freed. */
static enum MHD_Result reply_job(ws_srv *srv, struct MHD_Connection *conn, ws_http_req *r)
{
    ws_http_answer a = {0};
    ws_http_job_reply(srv, r->job, &a);
    ws_job_free(r->job);
    r->job = NULL;
    if (a.raw) return send_response(conn, r, a.status, a.raw);
    return send_json(conn, r, a.status, a.json);
}

/* r's job is submitted: suspend the connection until it is done, or answer at
 * once if it is done already (see JOB_*). */
static enum MHD_Result await_job(ws_srv *srv, struct MHD_Connection *conn, ws_http_req *r)
{
    int phase = JOB_RUNNING;
    if (!atomic_compare_exchange_strong(&r->job_phase, &phase, JOB_SUSPENDING))
        return reply_job(srv, conn, r); /* DONE before we could suspend */
    MHD_suspend_connection(conn);
    phase = JOB_SUSPENDING;
    if (!atomic_compare_exchange_strong(&r->job_phase, &phase, JOB_SUSPENDED))
        MHD_resume_connection(conn); /* DONE while we suspended: MHD calls us again */
    return MHD_YES;
}

static enum MHD_Result run_route(ws_srv *srv, struct MHD_Connection *conn, ws_http_req *r,
                                 const char *url, const char *method)
{
    ws_http_ctx c = {
        .srv = srv, .conn = conn, .req = r, .method = method, .body = r->body, .body_len = r->len};
    char path[WS_SRV_PATH_MAX];
    ws_route_match m;
    if (route_of(url, path, sizeof path, &c, &m) != 0)
        return send_json(conn, r, 404, ws_http_error("not_found", "no such route"));
    note_route(r, &m);
    if (r->too_large) return send_json(conn, r, 413, too_large(r));
    if (r->spool_failed)
        return send_json(conn, r, 500,
                         ws_http_error("internal", "cannot store the body: %s", r->spool_msg));
    /* OPTIONS needs no key: a browser's preflight never carries one */
    if (!m.route && m.allow[0] && !strcmp(method, "OPTIONS"))
        return send_response(conn, r, 204, ws_cors_options(srv, conn, m.allow));
    ws_http_answer a = {0};
    if (!auth_ok(&c, m.auth, &a)) return send_json(conn, r, a.status, a.json);
    if (!m.route && m.allow[0]) return send_405(conn, r, m.allow);
    if (!m.route) return send_json(conn, r, 404, ws_http_error("not_found", "no such route"));
    c.upload = r->spool;
    m.route->handler(&c, &a);
    if (r->spool && !c.upload) r->spool = NULL; /* a job owns the file now */
    if (a.job) {
        r->job = a.job;
        return await_job(srv, conn, r);
    }
    if (a.raw) return send_response(conn, r, a.status, a.raw);
    return send_json(conn, r, a.status, a.json);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    (void)version;
    ws_srv *srv = cls;
    ws_http_req *r = *con_cls;
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r) return MHD_NO;
        r->t0 = ws_clock_mono_s();
        r->srv = srv;
        r->conn = conn;
        r->label = r->pattern = WS_ROUTE_LABELS - 1;
        r->method = ws_metrics_method(method);
        r->spool_fd = -1;
        snprintf(r->method_name, sizeof r->method_name, "%s", method);
        *con_cls = r;
        atomic_fetch_add(&active_requests, 1);
        return begin_request(srv, conn, r, url, method);
    }
    if (r->job) { /* resumed */
        if (atomic_load(&r->job_phase) != JOB_DONE) return MHD_YES;
        return reply_job(srv, conn, r);
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (r->replied || r->too_large) return MHD_YES; /* answered already: dropped */
        /* chunked bodies have no Content-Length */
        if (r->received + n > (r->import ? WS_SRV_IMPORT_MAX : WS_SRV_BODY_MAX)) {
            r->too_large = 1;
            return MHD_YES;
        }
        r->received += n;
        if (r->spool) {
            spool_chunk(r, upload_data, n);
            return MHD_YES;
        }
        if (r->len + n + 1 > r->cap) {
            size_t cap = r->cap ? r->cap : 4096;
            while (cap < r->len + n + 1) cap *= 2;
            char *b = realloc(r->body, cap);
            if (!b) return MHD_NO;
            r->body = b;
            r->cap = cap;
        }
        memcpy(r->body + r->len, upload_data, n);
        r->len += n;
        r->body[r->len] = '\0';
        return MHD_YES;
    }
    if (r->replied) return MHD_YES;
    if (r->spool_fd >= 0) { /* the whole body is in the file */
        if (close(r->spool_fd) != 0 && !r->spool_failed) {
            r->spool_failed = 1;
            snprintf(r->spool_msg, sizeof r->spool_msg, "%s", strerror(errno));
        }
        r->spool_fd = -1;
    }
    return run_route(srv, conn, r, url, method);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls, (void)conn, (void)toe;
    ws_http_req *r = *con_cls;
    if (!r) return;
    /* A job is only still attached if the engine finished it but the client
     * vanished before the reply went out: it is ours to free. */
    if (r->job) ws_job_free(r->job);
    if (r->spool_fd >= 0) close(r->spool_fd);
    if (r->spool) unlink(r->spool); /* no job took it: the request failed or was refused */
    free(r->spool);
    free(r->body);
    free(r);
    *con_cls = NULL;
    atomic_fetch_sub(&active_requests, 1);
}

/* libmicrohttpd's own messages (a failed accept, a malformed request) into
 * the daemon's log, one line each. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    msg[strcspn(msg, "\n")] = '\0';
    ws_log_kv(WS_LOG_WARN, msg, (ws_log_field[]){WS_LOG_STR("from", "libmicrohttpd")}, 1);
}

/* libmicrohttpd's fatal errors (a broken invariant): said in the log, where
 * an operator looks, before the abort that MHD requires. */
static void mhd_panic(void *cls, const char *file, unsigned int line, const char *reason)
{
    (void)cls;
    char msg[512];
    snprintf(msg, sizeof msg, "libmicrohttpd panic at %s:%u: %s", file ? file : "?", line,
             reason ? reason : "");
    msg[strcspn(msg, "\n")] = '\0';
    ws_log(WS_LOG_ERROR, "%s", msg);
    abort();
}

ws_status ws_http_start(ws_srv *srv, ws_error *err)
{
    MHD_set_panic_func(mhd_panic, NULL);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)srv->cfg.port)};
    if (inet_pton(AF_INET, srv->cfg.host, &addr.sin_addr) != 1)
        return ws_error_set(err, WS_ERR_INVALID, "--listen: \"%s\" is not an IPv4 address",
                            srv->cfg.host);
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    /* The bounds keep a flood of slow connections from one client (each
     * trickling a byte now and then) from taking every slot: MHD refuses its
     * connections over the per-IP limit at accept and closes any connection
     * idle for the timeout (a suspended one, waiting on the engine, is exempt:
     * its job has a deadline). */
    srv->mhd = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, srv,
        /* first, so that MHD's messages about the options are logged too */
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)srv->cfg.threads, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)srv->cfg.connection_timeout_s, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)srv->cfg.max_connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        (unsigned)srv->cfg.max_connections_per_ip, MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
        MHD_OPTION_UNESCAPE_CALLBACK, ws_http_unescape, NULL, MHD_OPTION_END);
    if (!srv->mhd)
        return ws_error_set(err, WS_ERR_IO, "cannot listen on %s:%d (in use, or not allowed)",
                            srv->cfg.host, srv->cfg.port);
    if (srv->cfg.port == 0) { /* --listen host:0 picks a free port: report it */
        const union MHD_DaemonInfo *info = MHD_get_daemon_info(srv->mhd, MHD_DAEMON_INFO_BIND_PORT);
        if (info) srv->cfg.port = info->port;
    }
    return WS_OK;
}

void ws_http_stop(ws_srv *srv)
{
    if (!srv->mhd) return;
    /* The engine has resumed every job; give their replies up to 3 s to go out
     * before MHD closes the connections. (Not MHD_quiesce_daemon: with a thread
     * pool on epoll, libmicrohttpd 0.9.75 to 1.0 panics, aborting the daemon,
     * when a worker takes the listening socket out of its epoll set just
     * before quiesce does. Meanwhile new requests are answered 503.) */
    for (int i = 0; i < 300 && atomic_load(&active_requests) > 0; i++) usleep(10000);
    MHD_stop_daemon(srv->mhd);
    srv->mhd = NULL;
}
