/* log_json.c — a step-log entry as JSON: the items of GET
 * /v1/sessions/{id}/steps, and the lines of `worldstate-train export`, which
 * add the session (and model) to the same fields; and the answers as both the
 * log and the API's replies write them. */
#include "common.h"

cJSON *ws_srv_answers_json(const float *p, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(a, o)) {
            cJSON_Delete(o);
            cJSON_Delete(a);
            return NULL;
        }
        if (!cJSON_AddNumberToObject(o, "p", p[i]) ||
            !cJSON_AddBoolToObject(o, "holds", p[i] >= 0.5f)) {
            cJSON_Delete(a); /* o with it */
            return NULL;
        }
    }
    return a;
}

ws_status ws_srv_log_item_fill(cJSON *o, const ws_store_log_entry *e)
{
    /* The log holds JSON this server wrote: embed it as JSON, not as strings. */
    cJSON *ins = cJSON_Parse(e->instructions_json), *qs = cJSON_Parse(e->queries_json);
    cJSON *ls = e->labels_json ? cJSON_Parse(e->labels_json) : cJSON_CreateNull();
    cJSON *ans = cJSON_Parse(e->answers_json);
    int ok = ins && qs && ls && ans && cJSON_AddNumberToObject(o, "step", (double)e->step);
    if (ok) {
        cJSON_AddItemToObject(o, "instructions", ins);
        cJSON_AddItemToObject(o, "queries", qs);
        cJSON_AddItemToObject(o, "labels", ls);
        cJSON_AddItemToObject(o, "answers", ans);
        ok = cJSON_AddNumberToObject(o, "model_version", (double)e->model_version) &&
             cJSON_AddNumberToObject(o, "time_ms", (double)e->time_ms);
        return ok ? WS_OK : WS_ERR_NOMEM;
    }
    cJSON_Delete(ins);
    cJSON_Delete(qs);
    cJSON_Delete(ls);
    cJSON_Delete(ans);
    return WS_ERR_NOMEM;
}
