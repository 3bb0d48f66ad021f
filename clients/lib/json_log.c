/* json_log.c — answers, step-log entries and the JSON Lines records that
 * export writes and replay reads (a log entry plus its session id). */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void ws_client_answers_free(ws_client_answers *a)
{
    free(a->answers);
    memset(a, 0, sizeof *a);
}

void ws_client_log_entry_free(ws_client_log_entry *e)
{
    ws_client_step_req_free(&e->req);
    free(e->answers);
    memset(e, 0, sizeof *e);
    e->step = WS_CLIENT_NO_STEP;
}

void ws_client_log_page_free(ws_client_log_page *p)
{
    for (int i = 0; i < p->n; i++) ws_client_log_entry_free(&p->steps[i]);
    free(p->steps);
    memset(p, 0, sizeof *p);
}

static ws_client_status answer_list(const cJSON *arr, ws_client_answer **out, int *n,
                                    ws_client_error *err)
{
    static const wsc_field fields[] = {
        {"p", WSC_DBL, offsetof(ws_client_answer, p), 0, 1},
        {"holds", WSC_BOOL, offsetof(ws_client_answer, holds), 0, 1}};
    *n = 0;
    if (!cJSON_IsArray(arr))
        return wsc_fail(err, WS_CLIENT_ERR_PROTOCOL, "answers must be an array");
    *out = calloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof **out);
    if (!*out) return wsc_fail(err, WS_CLIENT_ERR_NOMEM, "out of memory");
    const cJSON *it;
    cJSON_ArrayForEach(it, arr)
    {
        ws_client_status s = wsc_decode_fields(it, fields, 2, &(*out)[*n], err);
        if (s != WS_CLIENT_OK) return s;
        (*n)++;
    }
    return WS_CLIENT_OK;
}

ws_client_status wsc_answers_from_json(const cJSON *obj, ws_client_answers *out,
                                       ws_client_error *err)
{
    static const wsc_field fields[] = {
        {"step", WSC_I64, offsetof(ws_client_answers, step), 0, 1},
        {"model_version", WSC_I64, offsetof(ws_client_answers, model_version), 0, 1}};
    memset(out, 0, sizeof *out);
    ws_client_status s = wsc_decode_fields(obj, fields, 2, out, err);
    if (s == WS_CLIENT_OK)
        s = answer_list(cJSON_GetObjectItemCaseSensitive(obj, "answers"), &out->answers,
                        &out->n_answers, err);
    if (s != WS_CLIENT_OK) ws_client_answers_free(out);
    return s;
}

/* The members a record may have; anything else is a typo worth reporting. */
static ws_client_status check_members(const cJSON *obj, ws_client_error *err)
{
    /* "model" is the session's model, written by `worldstate-train export`. */
    static const char *const known[] = {"session",      "model",         "step",
                                        "instructions", "queries",       "labels",
                                        "answers",      "model_version", "time_ms"};
    for (const cJSON *m = obj->child; m; m = m->next) {
        size_t k = 0;
        while (k < sizeof known / sizeof known[0] && strcmp(known[k], m->string) != 0) k++;
        if (k == sizeof known / sizeof known[0])
            return wsc_fail(err, WS_CLIENT_ERR_INVALID, "unknown field \"%s\"", m->string);
        for (const cJSON *p = obj->child; p != m; p = p->next)
            if (!strcmp(p->string, m->string))
                return wsc_fail(err, WS_CLIENT_ERR_INVALID, "duplicate field \"%s\"", m->string);
    }
    return WS_CLIENT_OK;
}

static ws_client_status metadata(const cJSON *obj, ws_client_log_entry *e, ws_client_error *err)
{
    static const wsc_field fields[] = {
        {"session", WSC_STR, offsetof(ws_client_log_entry, session), WS_CLIENT_ID_LEN + 1, 0},
        {"step", WSC_I64, offsetof(ws_client_log_entry, step), 0, 0},
        {"model_version", WSC_I64, offsetof(ws_client_log_entry, model_version), 0, 0},
        {"time_ms", WSC_I64, offsetof(ws_client_log_entry, time_ms), 0, 0}};
    ws_client_status s = wsc_decode_fields(obj, fields, 4, e, err);
    if (s != WS_CLIENT_OK) return s;
    const cJSON *ans = cJSON_GetObjectItemCaseSensitive(obj, "answers");
    return ans ? answer_list(ans, &e->answers, &e->n_answers, err) : WS_CLIENT_OK;
}

ws_client_status wsc_log_entry_from_json(const cJSON *obj, int reject_unknown,
                                         ws_client_log_entry *out, ws_client_error *err)
{
    memset(out, 0, sizeof *out);
    out->step = WS_CLIENT_NO_STEP;
    out->req.expect_step = WS_CLIENT_NO_STEP;
    if (!cJSON_IsObject(obj))
        return wsc_fail(err, WS_CLIENT_ERR_INVALID, "a step record must be a JSON object");
    ws_client_status s = reject_unknown ? check_members(obj, err) : WS_CLIENT_OK;
    if (s == WS_CLIENT_OK) s = wsc_step_req_from_json(obj, &out->req, err);
    if (s == WS_CLIENT_OK) s = metadata(obj, out, err);
    if (s != WS_CLIENT_OK) ws_client_log_entry_free(out);
    return s;
}

ws_client_status ws_client_log_entry_from_json(const char *text, size_t len,
                                               ws_client_log_entry *out, ws_client_error *err)
{
    const char *end = NULL;
    cJSON *obj = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    while (obj && end < text + len && strchr(" \t\r\n", *end)) end++;
    if (!obj || end != text + len) {
        cJSON_Delete(obj);
        memset(out, 0, sizeof *out);
        return wsc_fail(err, WS_CLIENT_ERR_INVALID, "not one JSON object (error near byte %ld)",
                        (long)((obj ? end : cJSON_GetErrorPtr()) - text));
    }
    ws_client_status s = wsc_log_entry_from_json(obj, 1, out, err);
    cJSON_Delete(obj);
    return s;
}

static ws_client_status answers_to_json(const ws_client_log_entry *e, cJSON **out,
                                        ws_client_error *err)
{
    cJSON *arr = cJSON_CreateArray();
    ws_client_status s = arr ? WS_CLIENT_OK : wsc_fail(err, WS_CLIENT_ERR_NOMEM, "out of memory");
    for (int i = 0; s == WS_CLIENT_OK && i < e->n_answers; i++) {
        cJSON *o = cJSON_CreateObject();
        int ok = o && cJSON_AddNumberToObject(o, "p", e->answers[i].p) &&
                 cJSON_AddBoolToObject(o, "holds", e->answers[i].holds) &&
                 cJSON_AddItemToArray(arr, o);
        if (!ok) {
            cJSON_Delete(o);
            s = wsc_fail(err, WS_CLIENT_ERR_NOMEM, "out of memory");
        }
    }
    if (s != WS_CLIENT_OK) cJSON_Delete(arr);
    *out = s == WS_CLIENT_OK ? arr : NULL;
    return s;
}

/* Moves the step object's members after the metadata, for records that read
 * session, step, instructions, queries, labels, answers, model_version, time. */
static ws_client_status take_members(cJSON *dst, cJSON *req, ws_client_error *err)
{
    while (req->child) {
        cJSON *m = cJSON_DetachItemViaPointer(req, req->child);
        if (!cJSON_AddItemToObject(dst, m->string, m)) {
            cJSON_Delete(m);
            return wsc_fail(err, WS_CLIENT_ERR_NOMEM, "out of memory");
        }
    }
    return WS_CLIENT_OK;
}

ws_client_status ws_client_log_entry_to_json(const ws_client_log_entry *e, char **out,
                                             ws_client_error *err)
{
    *out = NULL;
    cJSON *req = NULL, *ans = NULL, *o = cJSON_CreateObject();
    /* Metadata only where known, so a record read from a bare step object
     * prints back without invented values. */
    int ok = o != NULL;
    if (ok && e->session[0]) ok = cJSON_AddStringToObject(o, "session", e->session) != NULL;
    if (ok && e->step >= 0) ok = cJSON_AddNumberToObject(o, "step", (double)e->step) != NULL;
    ws_client_status s = ok ? wsc_step_req_to_json(&e->req, 0, &req, err)
                            : wsc_fail(err, WS_CLIENT_ERR_NOMEM, "out of memory");
    if (s == WS_CLIENT_OK) s = take_members(o, req, err);
    if (s == WS_CLIENT_OK && !e->req.has_labels && !cJSON_AddNullToObject(o, "labels"))
        s = wsc_fail(err, WS_CLIENT_ERR_NOMEM, "out of memory");
    if (s == WS_CLIENT_OK) s = answers_to_json(e, &ans, err);
    if (s == WS_CLIENT_OK) s = wsc_add_member(o, "answers", ans, err);
    ok = s == WS_CLIENT_OK;
    if (ok && e->model_version > 0)
        ok = cJSON_AddNumberToObject(o, "model_version", (double)e->model_version) != NULL;
    if (ok && e->time_ms > 0)
        ok = cJSON_AddNumberToObject(o, "time_ms", (double)e->time_ms) != NULL;
    if (s == WS_CLIENT_OK && !ok) s = wsc_fail(err, WS_CLIENT_ERR_NOMEM, "out of memory");
    cJSON_Delete(req);
    if (s != WS_CLIENT_OK) {
        cJSON_Delete(o);
        return s;
    }
    return wsc_print(o, out, err);
}
