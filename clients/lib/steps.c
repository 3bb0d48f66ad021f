/* steps.c — steps (with the expect_step recovery of ws_client.h), the step log,
 * queries and labels. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* POSTs body to path and decodes {"step","answers","model_version"}. */
static ws_client_status answers_call(const ws_client *c, const wsc_request *rq, wsc_response *rs,
                                     ws_client_answers *out, ws_client_error *err)
{
    const cJSON *body;
    ws_client_status s = wsc_call(c, rq, rs, err);
    if (s == WS_CLIENT_OK) s = wsc_json_body(rs, &body, err);
    if (s == WS_CLIENT_OK) s = wsc_answers_from_json(body, out, err);
    return s;
}

static ws_client_status page_from_json(const cJSON *body, const char *id, ws_client_log_page *out,
                                       ws_client_error *err)
{
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(body, "steps");
    const cJSON *next = cJSON_GetObjectItemCaseSensitive(body, "next_after");
    int64_t after = WS_CLIENT_NO_STEP;
    if (!cJSON_IsArray(arr) || !next ||
        (!cJSON_IsNull(next) && wsc_json_i64(next, 0, INT64_MAX / 2, &after, "next_after", err) != WS_CLIENT_OK))
        return wsc_fail(err, WS_CLIENT_ERR_PROTOCOL, "a step-log page needs \"steps\" and \"next_after\"");
    out->next_after = after;
    out->steps = calloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof *out->steps);
    if (!out->steps) return wsc_fail(err, WS_CLIENT_ERR_NOMEM, "out of memory");
    const cJSON *it;
    cJSON_ArrayForEach(it, arr)
    {
        ws_client_log_entry *e = &out->steps[out->n];
        ws_client_status s = wsc_log_entry_from_json(it, 0, e, err);
        if (s != WS_CLIENT_OK) return wsc_fail(err, WS_CLIENT_ERR_PROTOCOL, "step log: %s", err ? err->message : "");
        out->n++;
        memcpy(e->session, id, WS_CLIENT_ID_LEN + 1);
        if (e->step < 1) return wsc_fail(err, WS_CLIENT_ERR_PROTOCOL, "step log entry without a step number");
    }
    return WS_CLIENT_OK;
}

ws_client_status ws_client_step_log(const ws_client *c, const char *id, int64_t after, int limit,
                                    ws_client_log_page *out, ws_client_error *err)
{
    memset(out, 0, sizeof *out);
    out->next_after = WS_CLIENT_NO_STEP;
    char path[160];
    ws_client_status s = wsc_check_id(id, err);
    if (s == WS_CLIENT_OK && (after < 0 || limit < 1 || limit > 1000))
        s = wsc_fail(err, WS_CLIENT_ERR_INVALID, "after must be >= 0 and limit 1..1000");
    if (s == WS_CLIENT_OK)
        s = wsc_path(path, sizeof path, err, "/v1/sessions/%s/steps?after=%lld&limit=%d", id, (long long)after, limit);
    if (s != WS_CLIENT_OK) return s;
    wsc_request rq = {.method = "GET", .path = path, .repeatable = 1};
    wsc_response rs;
    const cJSON *body;
    s = wsc_call(c, &rq, &rs, err);
    if (s == WS_CLIENT_OK) s = wsc_json_body(&rs, &body, err);
    if (s == WS_CLIENT_OK) s = page_from_json(body, id, out, err);
    if (s != WS_CLIENT_OK) ws_client_log_page_free(out);
    wsc_response_free(&rs);
    return s;
}

/* The reply of an applied step was lost: read step expect_step+1 back from the
 * log; it is ours only if it carries what we sent. */
static ws_client_status recover(const ws_client *c, const char *id, const ws_client_step_req *req,
                                ws_client_answers *out)
{
    ws_client_error e2;
    ws_client_log_page page;
    if (ws_client_step_log(c, id, req->expect_step, 1, &page, &e2) != WS_CLIENT_OK) return WS_CLIENT_ERR_HTTP;
    ws_client_status s = WS_CLIENT_ERR_HTTP;
    const ws_client_log_entry *e = page.n == 1 ? &page.steps[0] : NULL;
    if (e && e->step == req->expect_step + 1 && ws_client_step_req_equal(&e->req, req)) {
        *out = (ws_client_answers){.step = e->step,
                                   .answers = e->answers,
                                   .n_answers = e->n_answers,
                                   .model_version = e->model_version,
                                   .recovered = 1};
        page.steps[0].answers = NULL; /* moved into out */
        s = WS_CLIENT_OK;
    }
    ws_client_log_page_free(&page);
    return s; /* on failure the caller reports the 409 it had */
}

ws_client_status ws_client_step(const ws_client *c, const char *id, const ws_client_step_req *req,
                                ws_client_answers *out, ws_client_error *err)
{
    memset(out, 0, sizeof *out);
    char path[96], *body = NULL;
    cJSON *o;
    ws_client_status s = wsc_check_id(id, err);
    if (s == WS_CLIENT_OK) s = wsc_path(path, sizeof path, err, "/v1/sessions/%s/steps", id);
    if (s == WS_CLIENT_OK) s = wsc_step_req_to_json(req, 1, &o, err);
    if (s == WS_CLIENT_OK) s = wsc_print(o, &body, err);
    if (s != WS_CLIENT_OK) return s;
    /* With expect_step a repeated POST cannot apply twice (409 instead). */
    wsc_request rq = {.method = "POST", .path = path, .body = body, .repeatable = req->expect_step >= 0};
    wsc_response rs;
    ws_client_error local;
    s = answers_call(c, &rq, &rs, out, &local);
    if (s == WS_CLIENT_ERR_HTTP && rs.lost && !strcmp(local.code, "step_conflict") &&
        local.current_step == req->expect_step + 1 && recover(c, id, req, out) == WS_CLIENT_OK)
        s = WS_CLIENT_OK;
    else if (s != WS_CLIENT_OK && err)
        *err = local;
    wsc_response_free(&rs);
    free(body);
    return s;
}

/* {"queries":[…]} */
static ws_client_status query_body(const ws_client_fact *queries, int n, char **body, ws_client_error *err)
{
    cJSON *qs = NULL, *o = cJSON_CreateObject();
    ws_client_status s = o ? wsc_facts_to_json(queries, n, &qs, err) : wsc_fail(err, WS_CLIENT_ERR_NOMEM, "out of memory");
    if (s == WS_CLIENT_OK) s = wsc_add_member(o, "queries", qs, err);
    if (s != WS_CLIENT_OK) {
        cJSON_Delete(o);
        return s;
    }
    return wsc_print(o, body, err);
}

ws_client_status ws_client_query(const ws_client *c, const char *id, const ws_client_fact *queries, int n,
                                 ws_client_answers *out, ws_client_error *err)
{
    memset(out, 0, sizeof *out);
    char path[96], *body = NULL;
    ws_client_status s = wsc_check_id(id, err);
    if (s == WS_CLIENT_OK && n < 0) s = wsc_fail(err, WS_CLIENT_ERR_INVALID, "negative query count");
    if (s == WS_CLIENT_OK) s = wsc_path(path, sizeof path, err, "/v1/sessions/%s/queries", id);
    if (s == WS_CLIENT_OK) s = query_body(queries, n, &body, err);
    if (s != WS_CLIENT_OK) return s;
    /* Queries change no state (only the vocabulary may grow): safe to repeat. */
    wsc_request rq = {.method = "POST", .path = path, .body = body, .repeatable = 1};
    wsc_response rs;
    s = answers_call(c, &rq, &rs, out, err);
    wsc_response_free(&rs);
    free(body);
    return s;
}

/* {"labels":[…],"replace":true?} */
static ws_client_status labels_body(const int *labels, int n, int replace, char **body, ws_client_error *err)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *arr = o ? cJSON_AddArrayToObject(o, "labels") : NULL;
    int ok = arr && (!replace || cJSON_AddTrueToObject(o, "replace"));
    for (int i = 0; ok && i < n; i++) {
        cJSON *b = cJSON_CreateBool(labels[i]);
        ok = b && cJSON_AddItemToArray(arr, b);
        if (!ok) cJSON_Delete(b);
    }
    if (!ok) {
        cJSON_Delete(o);
        return wsc_fail(err, WS_CLIENT_ERR_NOMEM, "out of memory");
    }
    return wsc_print(o, body, err);
}

ws_client_status ws_client_labels_put(const ws_client *c, const char *id, int64_t step, const int *labels, int n,
                                      int replace, int *training_example, ws_client_error *err)
{
    char path[128], *body = NULL;
    ws_client_status s = wsc_check_id(id, err);
    if (s == WS_CLIENT_OK && (step < 1 || n < 0 || (n && !labels)))
        s = wsc_fail(err, WS_CLIENT_ERR_INVALID, "step must be >= 1 and labels given");
    if (s == WS_CLIENT_OK)
        s = wsc_path(path, sizeof path, err, "/v1/sessions/%s/steps/%lld/labels", id, (long long)step);
    if (s == WS_CLIENT_OK) s = labels_body(labels, n, replace, &body, err);
    if (s != WS_CLIENT_OK) return s;
    /* The same labels again change nothing; different ones answer labels_conflict. */
    wsc_request rq = {.method = "PUT", .path = path, .body = body, .repeatable = 1};
    wsc_response rs;
    const cJSON *ans;
    s = wsc_call(c, &rq, &rs, err);
    if (s == WS_CLIENT_OK) s = wsc_json_body(&rs, &ans, err);
    const cJSON *te = s == WS_CLIENT_OK ? cJSON_GetObjectItemCaseSensitive(ans, "training_example") : NULL;
    if (s == WS_CLIENT_OK && !cJSON_IsBool(te))
        s = wsc_fail(err, WS_CLIENT_ERR_PROTOCOL, "labels answer lacks \"training_example\"");
    if (s == WS_CLIENT_OK && training_example) *training_example = cJSON_IsTrue(te);
    wsc_response_free(&rs);
    free(body);
    return s;
}
