/* routes_sessions.c — /v1/sessions...: reads (a session, lists, the log)
 * answer from storage on the HTTP thread; every write (create, delete, steps,
 * queries, labels) becomes an engine job, so that no HTTP thread waits for
 * SQLite's write lock. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "routes.h"

static void fail(ws_http_answer *a, ws_status s, const ws_error *err)
{
    const char *code;
    a->status = ws_http_status_of(s, &code);
    a->json = ws_http_error(code, "%s", err->msg);
}

static void fail_code(ws_http_answer *a, int status, const char *code, const char *msg)
{
    a->status = status;
    a->json = ws_http_error(code, "%s", msg);
}

/* The calling thread's store, with the route's session id (if it has one)
 * checked; NULL with the answer in a. */
static ws_store *session_store(ws_http_ctx *c, ws_http_answer *a)
{
    ws_error err = {0};
    ws_store *st = ws_srv_store(c->srv, &err);
    if (!st) {
        fail(a, err.code, &err);
        return NULL;
    }
    /* Malformed ids are simply unknown sessions. */
    if (c->params[0] && !ws_store_session_id_valid(c->params[0])) {
        fail_code(a, 404, "not_found", "no such session");
        return NULL;
    }
    return st;
}

/* An optional integer query argument. */
static int arg_int(ws_http_ctx *c, const char *name, int64_t lo, int64_t hi, int64_t *out,
                   ws_http_answer *a)
{
    const char *v = MHD_lookup_connection_value(c->conn, MHD_GET_ARGUMENT_KIND, name);
    if (!v) return 1;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (!*v || *end || errno || x < lo || x > hi) {
        a->status = 400;
        a->json =
            ws_http_error("invalid_request", "query argument %s must be an integer in [%lld, %lld]",
                          name, (long long)lo, (long long)hi);
        return 0;
    }
    *out = x;
    return 1;
}

cJSON *ws_srv_session_json(ws_store *st, const ws_store_session *s)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    ws_store_model m = {0};
    ws_error err;
    cJSON_AddStringToObject(o, "id", s->id);
    if (ws_store_model_get(st, s->model, &m, &err) == WS_OK)
        cJSON_AddStringToObject(o, "model", m.name);
    ws_store_model_clear(&m);
    cJSON_AddNumberToObject(o, "step", (double)s->step);
    cJSON_AddNumberToObject(o, "state_version", (double)s->state_version);
    cJSON_AddNumberToObject(o, "created_ms", (double)s->created_ms);
    cJSON_AddNumberToObject(o, "updated_ms", (double)s->updated_ms);
    return o;
}

/* A job on the tenant's session of the path (if any), or NULL with a 500 in a. */
static ws_job *session_job(ws_http_ctx *c, ws_job_kind kind, ws_http_answer *a)
{
    ws_job *j = calloc(1, sizeof *j);
    if (!j) {
        fail_code(a, 500, "internal", "out of memory");
        return NULL;
    }
    j->kind = kind;
    j->tenant = c->who.tenant;
    if (c->params[0]) snprintf(j->session, sizeof j->session, "%s", c->params[0]);
    return j;
}

void ws_route_session_create(ws_http_ctx *c, ws_http_answer *a)
{
    if (!session_store(c, a)) return;
    ws_job *j = session_job(c, WS_JOB_SESSION_CREATE, a);
    if (!j) return;
    ws_error err = {0};
    ws_status s = ws_http_session_create_parse(c->body, c->body_len, j, &err);
    if (s != WS_OK) {
        ws_job_free(j);
        return fail(a, s, &err);
    }
    j->max_sessions = c->srv->cfg.max_sessions;
    ws_http_submit(c, j, a);
}

typedef struct {
    cJSON *arr;
    char last[WS_STORE_ID_LEN + 1];
    int64_t last_step;
    int n;
    ws_engine *engine; /* sessions: their models' names */
} list_ctx;

static ws_status list_session(void *ctx, const ws_store_session *s)
{
    list_ctx *l = ctx;
    memcpy(l->last, s->id, sizeof l->last);
    l->n++;
    /* The model's name from the engine, which has every model loaded: storage's
     * connection is busy with this listing. */
    ws_engine_model_info m;
    cJSON *o = cJSON_CreateObject();
    if (!o) return WS_ERR_NOMEM;
    cJSON_AddStringToObject(o, "id", s->id);
    if (ws_engine_model_info_of(l->engine, s->model, &m))
        cJSON_AddStringToObject(o, "model", m.name);
    cJSON_AddNumberToObject(o, "step", (double)s->step);
    cJSON_AddNumberToObject(o, "updated_ms", (double)s->updated_ms);
    cJSON_AddItemToArray(l->arr, o);
    return WS_OK;
}

void ws_route_sessions_list(ws_http_ctx *c, ws_http_answer *a)
{
    ws_store *st = session_store(c, a);
    if (!st) return;
    int64_t limit = 100;
    if (!arg_int(c, "limit", 1, WS_STORE_PAGE_MAX, &limit, a)) return;
    const char *after = MHD_lookup_connection_value(c->conn, MHD_GET_ARGUMENT_KIND, "after");
    if (after && *after && !ws_store_session_id_valid(after))
        return fail_code(a, 400, "invalid_request", "after must be a session id");
    list_ctx l = {.arr = cJSON_CreateArray(), .engine = c->srv->engine};
    ws_error err = {0};
    ws_status s =
        l.arr ? ws_store_session_list(st, c->who.tenant, after, (int)limit, list_session, &l, &err)
              : ws_error_set(&err, WS_ERR_NOMEM, "out of memory");
    if (s != WS_OK) {
        cJSON_Delete(l.arr);
        return fail(a, s, &err);
    }
    a->status = 200;
    a->json = cJSON_CreateObject();
    cJSON_AddItemToObject(a->json, "sessions", l.arr);
    if (l.n == limit)
        cJSON_AddStringToObject(a->json, "next_after", l.last);
    else
        cJSON_AddNullToObject(a->json, "next_after");
}

static ws_status log_entry(void *ctx, const ws_store_log_entry *e)
{
    list_ctx *l = ctx;
    l->last_step = e->step;
    l->n++;
    cJSON *o = cJSON_CreateObject();
    if (!o) return WS_ERR_NOMEM;
    cJSON_AddItemToArray(l->arr, o); /* freed with the array on failure */
    return ws_srv_log_item_fill(o, e);
}

void ws_route_steps_list(ws_http_ctx *c, ws_http_answer *a)
{
    ws_store *st = session_store(c, a);
    if (!st) return;
    int64_t limit = 100, after = 0;
    if (!arg_int(c, "limit", 1, WS_STORE_PAGE_MAX, &limit, a) ||
        !arg_int(c, "after", 0, INT64_MAX / 2, &after, a))
        return;
    list_ctx l = {.arr = cJSON_CreateArray()};
    ws_error err = {0};
    ws_store_session sess = {0};
    ws_status s = ws_store_session_get(st, c->who.tenant, c->params[0], 0, &sess, &err);
    if (s == WS_OK)
        s = l.arr ? ws_store_log_page(st, c->who.tenant, c->params[0], after, (int)limit, log_entry,
                                      &l, &err)
                  : ws_error_set(&err, WS_ERR_NOMEM, "out of memory");
    ws_store_session_clear(&sess);
    if (s != WS_OK) {
        cJSON_Delete(l.arr);
        return fail(a, s, &err);
    }
    a->status = 200;
    a->json = cJSON_CreateObject();
    cJSON_AddItemToObject(a->json, "steps", l.arr);
    if (l.n == limit)
        cJSON_AddNumberToObject(a->json, "next_after", (double)l.last_step);
    else
        cJSON_AddNullToObject(a->json, "next_after");
}

void ws_route_state_get(ws_http_ctx *c, ws_http_answer *a)
{
    ws_store *st = session_store(c, a);
    if (!st) return;
    ws_store_session sess = {0};
    ws_error err = {0};
    ws_status s = ws_store_session_get(st, c->who.tenant, c->params[0], 1, &sess, &err);
    if (s != WS_OK) return fail(a, s, &err);
    size_t bytes = (size_t)sess.rows * (size_t)sess.cols * sizeof(float);
    /* The blob is little-endian float32 row-major, exactly as stored. */
    a->raw =
        MHD_create_response_from_buffer(bytes, bytes ? (void *)sess.state : "",
                                        bytes ? MHD_RESPMEM_MUST_COPY : MHD_RESPMEM_PERSISTENT);
    char shape[64], step[32];
    snprintf(shape, sizeof shape, "%d,%d", sess.rows, sess.cols);
    snprintf(step, sizeof step, "%lld", (long long)sess.step);
    if (a->raw &&
        (MHD_add_response_header(a->raw, "Content-Type", "application/octet-stream") != MHD_YES ||
         MHD_add_response_header(a->raw, "X-State-Shape", shape) != MHD_YES ||
         MHD_add_response_header(a->raw, "X-Step", step) != MHD_YES)) {
        MHD_destroy_response(a->raw);
        a->raw = NULL;
    }
    a->status = 200;
    ws_store_session_clear(&sess);
}

/* Builds a STEP / QUERY / LABELS job from the body; NULL with *a filled on bad input. */
static ws_job *parse_job(ws_http_ctx *c, ws_job_kind kind, ws_http_answer *a)
{
    ws_error err = {0};
    ws_job *j = session_job(c, kind, a);
    if (!j) return NULL;
    ws_status s = ws_http_session_job_parse(c->body, c->body_len, j, &err);
    if (s != WS_OK) {
        fail(a, s, &err);
        ws_job_free(j);
        return NULL;
    }
    return j;
}

void ws_route_session_get(ws_http_ctx *c, ws_http_answer *a)
{
    ws_store *st = session_store(c, a);
    if (!st) return;
    ws_error err = {0};
    ws_store_session sess = {0};
    ws_status s = ws_store_session_get(st, c->who.tenant, c->params[0], 0, &sess, &err);
    if (s != WS_OK) return fail(a, s, &err);
    a->status = 200;
    a->json = ws_srv_session_json(st, &sess);
    cJSON_AddItemToObject(a->json, "state_shape",
                          cJSON_CreateIntArray((int[]){sess.rows, sess.cols}, 2));
    ws_store_session_clear(&sess);
}

void ws_route_session_delete(ws_http_ctx *c, ws_http_answer *a)
{
    if (!session_store(c, a)) return;
    ws_job *j = session_job(c, WS_JOB_SESSION_DELETE, a);
    if (j) ws_http_submit(c, j, a);
}

/* A step, query or labels job from the body, handed to the engine. */
static void submit_session_job(ws_http_ctx *c, ws_job_kind kind, ws_http_answer *a)
{
    if (!session_store(c, a)) return;
    ws_job *j = parse_job(c, kind, a);
    if (!j) return;
    if (kind == WS_JOB_LABELS) {
        char *end;
        errno = 0;
        long long n = strtoll(c->params[1], &end, 10);
        if (!*c->params[1] || *end || errno || n < 1) {
            ws_job_free(j);
            return fail_code(a, 404, "not_found", "no such step");
        }
        j->label_step = n;
    }
    ws_http_submit(c, j, a);
}

void ws_route_step(ws_http_ctx *c, ws_http_answer *a)
{
    submit_session_job(c, WS_JOB_STEP, a);
}

void ws_route_query(ws_http_ctx *c, ws_http_answer *a)
{
    submit_session_job(c, WS_JOB_QUERY, a);
}

void ws_route_labels_put(ws_http_ctx *c, ws_http_answer *a)
{
    submit_session_job(c, WS_JOB_LABELS, a);
}
