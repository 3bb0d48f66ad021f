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

/* A session-level job (create, delete) for the tenant, or NULL with a 500 in a. */
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
    static const char *const fields[] = {"model", NULL};
    ws_error err = {0};
    cJSON *body = NULL;
    const char *name = "default";
    if (c->body_len) {
        ws_status s = ws_json_parse_object(c->body, c->body_len, &body, &err);
        if (s == WS_OK) s = ws_json_only(body, fields, &err);
        const cJSON *mn = body ? cJSON_GetObjectItemCaseSensitive(body, "model") : NULL;
        if (s == WS_OK && mn && !cJSON_IsString(mn))
            s = ws_error_set(&err, WS_ERR_INVALID, "model must be a string");
        if (s == WS_OK && mn)
            s = ws_srv_text_check(mn->valuestring, WS_STORE_NAME_MAX, "model", &err);
        if (s != WS_OK) {
            cJSON_Delete(body);
            return fail(a, s, &err);
        }
        if (mn) name = mn->valuestring;
    }
    if (strlen(name) > WS_STORE_NAME_MAX) { /* no model has a longer name */
        cJSON_Delete(body);
        return fail_code(a, 404, "model_not_found", "no such model");
    }
    ws_job *j = session_job(c, WS_JOB_SESSION_CREATE, a);
    if (j) {
        snprintf(j->model_name, sizeof j->model_name, "%s", name);
        j->max_sessions = c->srv->cfg.max_sessions;
        ws_http_submit(c, j, a);
    }
    cJSON_Delete(body);
}

typedef struct {
    cJSON *arr;
    char last[WS_STORE_ID_LEN + 1];
    int64_t last_step;
    int n;
} list_ctx;

static ws_status list_session(void *ctx, const ws_store_session *s)
{
    list_ctx *l = ctx;
    memcpy(l->last, s->id, sizeof l->last);
    l->n++;
    /* No model name here: looking it up needs the connection busy with this listing. */
    cJSON *o = cJSON_CreateObject();
    if (!o) return WS_ERR_NOMEM;
    cJSON_AddStringToObject(o, "id", s->id);
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
    list_ctx l = {.arr = cJSON_CreateArray()};
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

/* The job's own copy of parsed facts: their vectors move over (src keeps
 * none), their symbols, which borrow the body, are copied. */
static ws_status facts_take(ws_srv_fact *src, int n, ws_job_fact **out, ws_error *err)
{
    ws_job_fact *f = n ? calloc((size_t)n, sizeof *f) : NULL;
    *out = f;
    if (n && !f) return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        f[i].value = src[i].value;
        f[i].vec = src[i].vec, f[i].n_vec = src[i].n_vec;
        src[i].vec = NULL;
    }
    for (int i = 0; i < n; i++)
        WS_TRY(ws_job_fact_syms(&f[i], src[i].sym, src[i].sym_len, src[i].n_sym, err));
    return WS_OK;
}

static void srv_facts_free(ws_srv_fact *f, int n)
{
    for (int i = 0; i < n; i++) free(f[i].vec);
    free(f);
}

/* The labels of a LABELS job (ls: checked booleans). */
static ws_status labels_take(const cJSON *ls, ws_job *j, ws_error *err)
{
    j->labels = malloc(sizeof(int) * (size_t)cJSON_GetArraySize(ls));
    if (!j->labels) return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    for (const cJSON *l = ls->child; l; l = l->next) j->labels[j->n_labels++] = cJSON_IsTrue(l);
    return WS_OK;
}

/* The step log's JSON text of a job (engine.h): what was sent, normalised. */
static ws_status log_text(ws_job *j, const cJSON *ins, const cJSON *qs, const cJSON *ls,
                          ws_error *err)
{
    j->labels_json = ls ? cJSON_PrintUnformatted(ls) : NULL;
    int ok = !ls || j->labels_json;
    if (j->kind == WS_JOB_STEP) {
        cJSON *empty = cJSON_CreateArray();
        j->instr_json = cJSON_PrintUnformatted(ins ? ins : empty);
        j->query_json = cJSON_PrintUnformatted(qs ? qs : empty);
        cJSON_Delete(empty);
        ok = ok && j->instr_json && j->query_json;
    }
    return ok ? WS_OK : ws_error_set(err, WS_ERR_NOMEM, "out of memory");
}

/* Builds a STEP / QUERY / LABELS job from the body; NULL with *a filled on bad input. */
static ws_job *parse_job(ws_http_ctx *c, ws_job_kind kind, ws_http_answer *a)
{
    static const char *const step_fields[] = {"expect_step", "instructions", "queries", "labels",
                                              NULL};
    static const char *const query_fields[] = {"queries", NULL};
    static const char *const label_fields[] = {"labels", "replace", NULL};
    ws_error err = {0};
    ws_job *j = calloc(1, sizeof *j);
    if (!j) {
        fail_code(a, 500, "internal", "out of memory");
        return NULL;
    }
    j->kind = kind;
    j->expect_step = -1;
    j->tenant = c->who.tenant;
    memcpy(j->session, c->params[0], strlen(c->params[0]) + 1);
    cJSON *body = NULL;
    ws_srv_fact *instr = NULL, *query = NULL;
    int n_instr = 0, n_query = 0;
    ws_status s = ws_json_parse_object(c->body, c->body_len, &body, &err);
    const char *const *fields = kind == WS_JOB_STEP    ? step_fields
                                : kind == WS_JOB_QUERY ? query_fields
                                                       : label_fields;
    if (s == WS_OK) s = ws_json_only(body, fields, &err);
    const cJSON *ins = cJSON_GetObjectItemCaseSensitive(body, "instructions");
    const cJSON *qs = cJSON_GetObjectItemCaseSensitive(body, "queries");
    const cJSON *ls = cJSON_GetObjectItemCaseSensitive(body, "labels");
    const cJSON *es = cJSON_GetObjectItemCaseSensitive(body, "expect_step");
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(body, "replace");
    if (s == WS_OK && es)
        s = ws_json_int(es, 0, INT64_MAX / 2, &j->expect_step, "expect_step", &err);
    if (s == WS_OK) s = ws_json_facts(ins, 1, &instr, &n_instr, &err);
    if (s == WS_OK) s = ws_json_facts(qs, 0, &query, &n_query, &err);
    if (s == WS_OK && kind == WS_JOB_QUERY && !qs)
        s = ws_error_set(&err, WS_ERR_INVALID, "queries is required");
    if (s == WS_OK && kind == WS_JOB_LABELS) {
        if (!ls)
            s = ws_error_set(&err, WS_ERR_INVALID, "labels is required");
        else if (!cJSON_IsArray(ls) || cJSON_GetArraySize(ls) < 1 ||
                 cJSON_GetArraySize(ls) > WS_SRV_MAX_ITEMS)
            s = ws_error_set(&err, WS_ERR_INVALID, "labels must be an array of 1..%d booleans",
                             WS_SRV_MAX_ITEMS);
        else
            s = ws_json_labels(ls, NULL, cJSON_GetArraySize(ls), &err);
        if (s == WS_OK && rp && !cJSON_IsBool(rp))
            s = ws_error_set(&err, WS_ERR_INVALID, "replace must be a boolean");
        j->replace = rp && cJSON_IsTrue(rp);
        if (s == WS_OK) s = labels_take(ls, j, &err);
    } else if (s == WS_OK && ls) {
        s = ws_json_labels(ls, query, n_query, &err);
        j->has_labels = 1;
    }
    if (s == WS_OK && kind != WS_JOB_QUERY) s = log_text(j, ins, qs, ls, &err);
    j->n_instr = n_instr, j->n_query = n_query;
    if (s == WS_OK) s = facts_take(instr, n_instr, &j->instr, &err);
    if (s == WS_OK) s = facts_take(query, n_query, &j->query, &err);
    srv_facts_free(instr, n_instr);
    srv_facts_free(query, n_query);
    cJSON_Delete(body);
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
