/* steps.c — steps (with the expect_step recovery of ws_client.h), the step log,
 * queries and labels. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static ws_client_status decode_answers(const cJSON *body, void *out, ws_client_error *err)
{
    return wsc_answers_from_json(body, out, err);
}

/* The entries' session ids are the caller's to fill. */
static ws_client_status decode_page(const cJSON *body, void *dst, ws_client_error *err)
{
    ws_client_log_page *out = dst;
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(body, "steps");
    const cJSON *next = cJSON_GetObjectItemCaseSensitive(body, "next_after");
    int64_t after = WS_CLIENT_NO_STEP;
    if (!cJSON_IsArray(arr) || !next ||
        (!cJSON_IsNull(next) &&
         wsc_json_i64(next, 0, INT64_MAX / 2, &after, "next_after", err) != WS_CLIENT_OK))
        return wsc_fail(err, WS_CLIENT_ERR_PROTOCOL,
                        "a step-log page needs \"steps\" and \"next_after\"");
    out->next_after = after;
    out->steps = calloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof *out->steps);
    if (!out->steps) return wsc_fail(err, WS_CLIENT_ERR_NOMEM, "out of memory");
    const cJSON *it;
    cJSON_ArrayForEach(it, arr)
    {
        ws_client_log_entry *e = &out->steps[out->n];
        ws_client_error why;
        if (wsc_log_entry_from_json(it, 0, e, &why) != WS_CLIENT_OK)
            return wsc_fail(err, WS_CLIENT_ERR_PROTOCOL, "step log: %s", why.message);
        out->n++;
        if (e->step < 1)
            return wsc_fail(err, WS_CLIENT_ERR_PROTOCOL, "step log entry without a step number");
    }
    return WS_CLIENT_OK;
}

ws_client_status ws_client_step_log(const ws_client *c, const char *id, int64_t after, int limit,
                                    ws_client_log_page *out, ws_client_error *err)
{
    memset(out, 0, sizeof *out);
    out->next_after = WS_CLIENT_NO_STEP;
    char suffix[64], path[160];
    if (after < 0 || limit < 1 || limit > 1000)
        return wsc_fail(err, WS_CLIENT_ERR_INVALID, "after must be >= 0 and limit 1..1000");
    snprintf(suffix, sizeof suffix, "/steps?after=%lld&limit=%d", (long long)after, limit);
    ws_client_status s = wsc_get(c, wsc_session_path(path, sizeof path, id, suffix, err), path,
                                 decode_page, out, err);
    if (s != WS_CLIENT_OK) ws_client_log_page_free(out);
    for (int i = 0; i < out->n; i++) memcpy(out->steps[i].session, id, WS_CLIENT_ID_LEN + 1);
    return s;
}

/* The reply of an applied step was lost: read step expect_step+1 back from the
 * log; it is ours only if it carries what we sent. */
static ws_client_status recover(const ws_client *c, const char *id, const ws_client_step_req *req,
                                ws_client_answers *out)
{
    ws_client_error e2;
    ws_client_log_page page;
    if (ws_client_step_log(c, id, req->expect_step, 1, &page, &e2) != WS_CLIENT_OK)
        return WS_CLIENT_ERR_HTTP;
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
    ws_client_status s = wsc_session_path(path, sizeof path, id, "/steps", err);
    if (s == WS_CLIENT_OK) s = wsc_step_req_to_json(req, 1, &o, err);
    if (s == WS_CLIENT_OK) s = wsc_print(o, &body, err);
    if (s != WS_CLIENT_OK) return s;
    /* With expect_step a repeated POST cannot apply twice (409 instead). */
    wsc_request rq = {
        .method = "POST", .path = path, .body = body, .repeatable = req->expect_step >= 0};
    wsc_response rs;
    const cJSON *ans;
    ws_client_error local;
    s = wsc_call(c, &rq, &rs, &local);
    if (s == WS_CLIENT_OK) s = wsc_json_body(&rs, &ans, &local);
    if (s == WS_CLIENT_OK) s = wsc_answers_from_json(ans, out, &local);
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
static ws_client_status query_body(const ws_client_fact *queries, int n, char **body,
                                   ws_client_error *err)
{
    cJSON *qs = NULL, *o = cJSON_CreateObject();
    ws_client_status s = o ? wsc_facts_to_json(queries, n, &qs, err)
                           : wsc_fail(err, WS_CLIENT_ERR_NOMEM, "out of memory");
    if (s == WS_CLIENT_OK) s = wsc_add_member(o, "queries", qs, err);
    if (s != WS_CLIENT_OK) {
        cJSON_Delete(o);
        return s;
    }
    return wsc_print(o, body, err);
}

ws_client_status ws_client_query(const ws_client *c, const char *id, const ws_client_fact *queries,
                                 int n, ws_client_answers *out, ws_client_error *err)
{
    memset(out, 0, sizeof *out);
    char path[96], *body = NULL;
    ws_client_status s = n < 0 ? wsc_fail(err, WS_CLIENT_ERR_INVALID, "negative query count")
                               : wsc_session_path(path, sizeof path, id, "/queries", err);
    if (s == WS_CLIENT_OK) s = query_body(queries, n, &body, err);
    /* Queries change no state (only the vocabulary may grow): safe to repeat. */
    return wsc_send(c, s, "POST", path, body, 1, decode_answers, out, err);
}

static ws_client_status decode_labelled(const cJSON *body, void *training_example,
                                        ws_client_error *err)
{
    const cJSON *te = cJSON_GetObjectItemCaseSensitive(body, "training_example");
    if (!cJSON_IsBool(te))
        return wsc_fail(err, WS_CLIENT_ERR_PROTOCOL, "labels answer lacks \"training_example\"");
    *(int *)training_example = cJSON_IsTrue(te);
    return WS_CLIENT_OK;
}

/* {"labels":[…],"replace":true?} */
static ws_client_status labels_body(const int *labels, int n, int replace, char **body,
                                    ws_client_error *err)
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

ws_client_status ws_client_labels_put(const ws_client *c, const char *id, int64_t step,
                                      const int *labels, int n, int replace, int *training_example,
                                      ws_client_error *err)
{
    char suffix[64], path[128], *body = NULL;
    if (step < 1 || n < 0 || (n && !labels))
        return wsc_fail(err, WS_CLIENT_ERR_INVALID, "step must be >= 1 and labels given");
    snprintf(suffix, sizeof suffix, "/steps/%lld/labels", (long long)step);
    ws_client_status s = wsc_session_path(path, sizeof path, id, suffix, err);
    if (s == WS_CLIENT_OK) s = labels_body(labels, n, replace, &body, err);
    /* The same labels again change nothing; different ones answer labels_conflict. */
    int queued = 0;
    s = wsc_send(c, s, "PUT", path, body, 1, decode_labelled, &queued, err);
    if (s == WS_CLIENT_OK && training_example) *training_example = queued;
    return s;
}
