/* config_json.c — ws_model_config to and from JSON, the one spelling that
 * checkpoints ("config" metadata) and the server's API share. */
#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model.h"

cJSON *ws_model_config_to_json(const ws_model_config *c)
{
    cJSON *o = cJSON_CreateObject();
    for (int i = 0; o && i < WS_MODEL_CONFIG_N_FIELDS; i++) {
        const ws_model_config_field *f = &ws_model_config_fields[i];
        double v = ws_model_config_get(c, i);
        cJSON *item = f->type != WS_CFG_NAME ? cJSON_AddNumberToObject(o, f->key, v)
                      : cJSON_AddStringToObject(o, f->key,
                                                v >= 0 && v < f->n_names ? f->names[(int)v] : "?");
        if (!item) {
            cJSON_Delete(o);
            return NULL;
        }
    }
    return o;
}

/* Types here; ranges are ws_model_config_validate's, after every field is read. */
static ws_status set_field(ws_model_config *c, int i, const cJSON *it, ws_error *err)
{
    const ws_model_config_field *f = &ws_model_config_fields[i];
    char as[64];
    snprintf(as, sizeof as, "config: %s", f->key);
    if (f->type == WS_CFG_NAME)
        return ws_model_config_parse(c, i, cJSON_IsString(it) ? it->valuestring : "", as, err);
    if (f->type == WS_CFG_FLOAT) {
        if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble) || fabs(it->valuedouble) > 1e30)
            return ws_error_set(err, WS_ERR_INVALID, "%s must be a finite number", as);
        ws_model_config_set(c, i, it->valuedouble);
    } else {
        if (!cJSON_IsNumber(it) || !(it->valuedouble >= INT_MIN && it->valuedouble <= INT_MAX) ||
            it->valuedouble != (double)(int)it->valuedouble)
            return ws_error_set(err, WS_ERR_INVALID, "%s must be an integer", as);
        ws_model_config_set(c, i, it->valuedouble);
    }
    return WS_OK;
}

ws_status ws_model_config_from_json(const cJSON *o, int need_required, ws_model_config *c,
                                    ws_error *err)
{
    *c = ws_model_config_default();
    if (!cJSON_IsObject(o)) return ws_error_set(err, WS_ERR_INVALID, "config must be an object");
    int seen[WS_MODEL_CONFIG_N_FIELDS] = {0};
    for (const cJSON *it = o->child; it; it = it->next) {
        int i = 0;
        while (i < WS_MODEL_CONFIG_N_FIELDS && strcmp(ws_model_config_fields[i].key, it->string))
            i++;
        /* A field this build does not know describes a different model. */
        if (i == WS_MODEL_CONFIG_N_FIELDS)
            return ws_error_set(err, WS_ERR_INVALID, "config: unknown field \"%.40s\"",
                                it->string);
        if (seen[i])
            return ws_error_set(err, WS_ERR_INVALID, "config: field \"%s\" appears twice",
                                it->string);
        seen[i] = 1;
        WS_TRY(set_field(c, i, it, err));
    }
    for (int i = 0; need_required && i < WS_MODEL_CONFIG_N_FIELDS; i++) {
        if (ws_model_config_fields[i].required && !seen[i])
            return ws_error_set(err, WS_ERR_INVALID, "config: missing field \"%s\"",
                                ws_model_config_fields[i].key);
        if (ws_model_config_fields[i].absent_zero && !seen[i]) ws_model_config_set(c, i, 0);
    }
    return ws_model_config_validate(c, err);
}
