/* jobs.c — the engine at the HTTP edge: the engine's settings from the
 * daemon's flags, and a finished job's native result as the API answers it
 * (status code, error code, JSON). The engine reports what happened (a
 * ws_status and, where the API names it, a ws_job_why); which HTTP status and
 * error code that is, is decided here and in ws_http_status_of only. */
#include <stdio.h>
#include <string.h>

#include "daemon.h"

static void on_batch(int n_jobs, int n_steps, int n_queries)
{
    ws_metrics_batch(n_jobs, n_steps, n_queries);
}

ws_status ws_srv_engine_start(ws_srv *srv, ws_error *err)
{
    ws_engine_config ec = ws_engine_config_default();
    snprintf(ec.data_dir, sizeof ec.data_dir, "%s", srv->cfg.data_dir);
    snprintf(ec.db_path, sizeof ec.db_path, "%s", srv->db_path);
    ec.durability = srv->cfg.durability;
    ec.force_cpu = srv->cfg.force_cpu;
    ec.train_priority = (ws_train_priority)srv->cfg.train_priority;
    ec.max_batch = srv->cfg.max_batch;
    ec.batch_wait_us = srv->cfg.batch_wait_us;
    ec.max_queue = srv->cfg.max_queue;
    ec.job_timeout_ms = srv->cfg.request_timeout_ms;
    ec.max_model_memory = srv->cfg.max_model_memory;
    ec.state_cache_bytes = srv->cfg.state_cache;
    ec.idle_spin_us = srv->cfg.idle_spin_us;
    ec.on_batch = on_batch;
    ec.on_training_update = ws_metrics_training_update;
    return ws_engine_start(&ec, &srv->engine, err);
}

/* The API's status and error code of a failure the engine names itself. */
static const struct {
    ws_job_why why;
    int status;
    const char *code;
} refusals[] = {
    {WS_JOB_STEP_CONFLICT, 409, "step_conflict"},
    {WS_JOB_LABELS_CONFLICT, 409, "labels_conflict"},
    {WS_JOB_DEADLINE, 503, "deadline_exceeded"},
    {WS_JOB_SHUTTING_DOWN, 503, "shutting_down"},
    {WS_JOB_BAD_CHECKPOINT, 400, "bad_checkpoint"},
    {WS_JOB_CONFIG_MISMATCH, 409, "config_mismatch"},
    {WS_JOB_VOCAB_MISMATCH, 409, "vocab_mismatch"},
    {WS_JOB_MODEL_TOO_LARGE, 400, "model_too_large"},
    {WS_JOB_INCONSISTENT, 500, "internal"},
    {WS_JOB_MODEL_NOT_FOUND, 404, "model_not_found"},
    {WS_JOB_SESSION_LIMIT, 409, "session_limit"},
    {WS_JOB_VERSION_UNAVAILABLE, 409, "version_unavailable"},
    {WS_JOB_MODEL_IS_DEFAULT, 409, "model_is_default"},
    {WS_JOB_MODEL_IN_USE, 409, "model_in_use"},
};

static void failure(const ws_job_result *r, ws_http_answer *a)
{
    const char *code;
    a->status = ws_http_status_of(r->status, &code);
    for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++)
        if (refusals[i].why == r->why) a->status = refusals[i].status, code = refusals[i].code;
    if (r->why == WS_JOB_LABELS_CONFLICT)
        a->json = ws_http_error(code, "%s (send \"replace\": true to change them)", r->err.msg);
    else
        a->json = ws_http_error(code, "%s", r->err.msg);
    if (r->why == WS_JOB_STEP_CONFLICT && a->json)
        cJSON_AddNumberToObject(a->json, "current_step", (double)r->step);
}

/* A created or imported model, as GET /v1/models lists it. */
static void model_reply(ws_srv *srv, const ws_job *j, int status, ws_http_answer *a)
{
    ws_error err = {0};
    ws_store *st = ws_srv_store(srv, &err);
    /* create and import are admin routes: the model as an admin sees it */
    ws_status s = st ? ws_srv_model_json(st, j->model_name, NULL, &a->json, NULL, &err) : err.code;
    if (s == WS_OK) {
        a->status = status;
        return;
    }
    const char *code;
    a->status = ws_http_status_of(s, &code);
    a->json = ws_http_error(code, "%s", err.msg);
}

/* A created session, read back as GET /v1/sessions/{id} shows it. */
static void session_reply(ws_srv *srv, const ws_job *j, ws_http_answer *a)
{
    ws_error err = {0};
    ws_store *st = ws_srv_store(srv, &err);
    ws_store_session sess = {0};
    ws_status s = st ? ws_store_session_get(st, j->tenant, j->session, 0, &sess, &err) : err.code;
    if (s == WS_OK && !(a->json = ws_srv_session_json(st, &sess)))
        s = ws_error_set(&err, WS_ERR_NOMEM, "out of memory");
    ws_store_session_clear(&sess);
    if (s == WS_OK) {
        a->status = 201;
        return;
    }
    const char *code;
    a->status = ws_http_status_of(s, &code);
    a->json = ws_http_error(code, "%s", err.msg);
}

void ws_srv_storage_note(ws_srv *srv, ws_status s)
{
    if (s == WS_OK || s == WS_ERR_UNAVAILABLE || s == WS_ERR_CORRUPT)
        atomic_store(&srv->storage_fault, (int)s);
}

/* Jobs that write to storage when they succeed (a query writes nothing). */
static int writes(ws_job_kind k)
{
    return k != WS_JOB_QUERY;
}

void ws_http_job_reply(ws_srv *srv, const ws_job *j, ws_http_answer *a)
{
    const ws_job_result *r = &j->result;
    if (r->status != WS_OK || writes(j->kind)) ws_srv_storage_note(srv, r->status);
    if (r->status != WS_OK) return failure(r, a);
    switch (j->kind) {
    case WS_JOB_MODEL_CREATE: return model_reply(srv, j, 201, a);
    case WS_JOB_MODEL_IMPORT: return model_reply(srv, j, r->created ? 201 : 200, a);
    case WS_JOB_MODEL_ROLLBACK: return model_reply(srv, j, 200, a);
    case WS_JOB_SESSION_CREATE: return session_reply(srv, j, a);
    case WS_JOB_SESSION_DELETE:
    case WS_JOB_MODEL_DELETE:
        a->status = 204;
        a->raw = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
        return;
    case WS_JOB_TRAINING_SET:
        a->status = 200;
        a->json = ws_srv_training_json(&r->training);
        return;
    case WS_JOB_LABELS:
        a->status = 200;
        a->json = cJSON_CreateObject();
        cJSON_AddNumberToObject(a->json, "step", (double)r->step);
        cJSON_AddBoolToObject(a->json, "stored", 1);
        cJSON_AddBoolToObject(a->json, "training_example", r->training_example);
        return;
    case WS_JOB_STEP:
    case WS_JOB_QUERY:
        a->status = 200;
        a->json = cJSON_CreateObject();
        cJSON_AddNumberToObject(a->json, "step", (double)r->step);
        cJSON_AddItemToObject(a->json, "answers", ws_srv_answers_json(r->p, r->n_p));
        cJSON_AddNumberToObject(a->json, "model_version", (double)r->model_version);
        return;
    }
}
