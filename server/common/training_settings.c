/* training_settings.c — a model's online-training settings (the "training"
 * object of the API and of the models table): defaults, strict parsing, JSON. */
#include <stdio.h>
#include <stdlib.h>

#include "common.h"

ws_srv_training ws_srv_training_default(void)
{
    return (ws_srv_training){.enabled = 1, .lr = 1e-3f, .update_every = 32, .recall_queries = 4};
}

ws_status ws_srv_training_parse(const cJSON *obj, ws_srv_training *t, ws_error *err)
{
    static const char *const fields[] = {"enabled", "lr", "update_every", "recall_queries", NULL};
    if (!cJSON_IsObject(obj)) return ws_error_set(err, WS_ERR_INVALID, "training must be an object");
    WS_TRY(ws_json_only(obj, fields, err));
    ws_srv_training n = *t;
    const cJSON *v;
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "enabled"))) {
        if (!cJSON_IsBool(v)) return ws_error_set(err, WS_ERR_INVALID, "enabled must be a boolean");
        n.enabled = cJSON_IsTrue(v);
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "lr"))) {
        if (!cJSON_IsNumber(v) || !(v->valuedouble > 0 && v->valuedouble <= 1))
            return ws_error_set(err, WS_ERR_INVALID, "lr must be a number in (0, 1]");
        n.lr = (float)v->valuedouble;
    }
    int64_t x;
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "update_every"))) {
        WS_TRY(ws_json_int(v, 1, 100000, &x, "update_every", err));
        n.update_every = (int)x;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "recall_queries"))) {
        WS_TRY(ws_json_int(v, 0, 64, &x, "recall_queries", err));
        n.recall_queries = (int)x;
    }
    *t = n;
    return WS_OK;
}

cJSON *ws_srv_training_json(const ws_srv_training *t)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddBoolToObject(o, "enabled", t->enabled);
    char lr[32]; /* the float's shortest decimal form, not its double expansion */
    snprintf(lr, sizeof lr, "%.7g", (double)t->lr);
    cJSON_AddNumberToObject(o, "lr", strtod(lr, NULL));
    cJSON_AddNumberToObject(o, "update_every", t->update_every);
    cJSON_AddNumberToObject(o, "recall_queries", t->recall_queries);
    return o;
}
