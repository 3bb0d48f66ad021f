/* training_settings.c — a model's online-training settings (the "training"
 * object of the API and of the models table): defaults, strict parsing, JSON. */
#include <stdio.h>
#include <stdlib.h>

#include "common.h"

ws_srv_training ws_srv_training_default(void)
{
    return (ws_srv_training){.enabled = 1, .lr = 1e-3f, .update_every = 32, .recall_queries = 4};
}

void ws_srv_training_apply(ws_srv_training *t, const ws_srv_training *from, unsigned fields)
{
    if (fields & WS_SRV_TRAINING_ENABLED) t->enabled = from->enabled;
    if (fields & WS_SRV_TRAINING_LR) t->lr = from->lr;
    if (fields & WS_SRV_TRAINING_UPDATE_EVERY) t->update_every = from->update_every;
    if (fields & WS_SRV_TRAINING_RECALL_QUERIES) t->recall_queries = from->recall_queries;
}

/* The lr as stored (ws_srv_training_json): the float's shortest decimal form,
 * not its double expansion. */
static double lr_as_stored(float lr)
{
    char text[32];
    snprintf(text, sizeof text, "%.7g", (double)lr);
    return strtod(text, NULL);
}

ws_status ws_srv_training_parse(const cJSON *obj, ws_srv_training *t, ws_error *err)
{
    unsigned fields;
    return ws_srv_training_parse_fields(obj, t, &fields, err);
}

ws_status ws_srv_training_parse_fields(const cJSON *obj, ws_srv_training *t, unsigned *fields,
                                       ws_error *err)
{
    static const char *const names[] = {"enabled", "lr", "update_every", "recall_queries", NULL};
    if (!cJSON_IsObject(obj))
        return ws_error_set(err, WS_ERR_INVALID, "training must be an object");
    WS_TRY(ws_json_only(obj, names, err));
    ws_srv_training n = *t;
    unsigned got = 0;
    const cJSON *v;
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "enabled"))) {
        if (!cJSON_IsBool(v)) return ws_error_set(err, WS_ERR_INVALID, "enabled must be a boolean");
        n.enabled = cJSON_IsTrue(v);
        got |= WS_SRV_TRAINING_ENABLED;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "lr"))) {
        /* The range holds for what is kept (a float, stored as JSON), not for the
         * double parsed: 1e-46 is 0 as a float, and a start would then refuse
         * the setting this accepted. */
        double kept = cJSON_IsNumber(v) ? lr_as_stored((float)v->valuedouble) : 0;
        if (!cJSON_IsNumber(v) || !(v->valuedouble > 0 && v->valuedouble <= 1) ||
            !(kept > 0 && kept <= 1))
            return ws_error_set(err, WS_ERR_INVALID,
                                "lr must be a number in (0, 1] that is not 0 as a 32-bit float "
                                "(at least 1.4e-45)");
        n.lr = (float)v->valuedouble;
        got |= WS_SRV_TRAINING_LR;
    }
    int64_t x;
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "update_every"))) {
        WS_TRY(ws_json_int(v, 1, 100000, &x, "update_every", err));
        n.update_every = (int)x;
        got |= WS_SRV_TRAINING_UPDATE_EVERY;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(obj, "recall_queries"))) {
        WS_TRY(ws_json_int(v, 0, WS_SRV_RECALL_MAX, &x, "recall_queries", err));
        n.recall_queries = (int)x;
        got |= WS_SRV_TRAINING_RECALL_QUERIES;
    }
    *t = n;
    *fields = got;
    return WS_OK;
}

cJSON *ws_srv_training_json(const ws_srv_training *t)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddBoolToObject(o, "enabled", t->enabled);
    cJSON_AddNumberToObject(o, "lr", lr_as_stored(t->lr));
    cJSON_AddNumberToObject(o, "update_every", t->update_every);
    cJSON_AddNumberToObject(o, "recall_queries", t->recall_queries);
    return o;
}
