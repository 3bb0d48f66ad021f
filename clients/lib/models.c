/* models.c — /v1/models: list, create, get, training settings, checkpoint
 * download and import, versions, rollback and delete. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static ws_client_status decode_model(const cJSON *body, void *out, ws_client_error *err)
{
    return wsc_model_from_json(body, out, err);
}

static ws_client_status decode_training(const cJSON *body, void *out, ws_client_error *err)
{
    return wsc_training_from_json(body, out, err);
}

static ws_client_status decode_models(const cJSON *body, void *dst, ws_client_error *err)
{
    ws_client_model_list *out = dst;
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(body, "models");
    if (!cJSON_IsArray(arr))
        return wsc_fail(err, WS_CLIENT_ERR_PROTOCOL, "answer lacks \"models\"");
    out->items = calloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof *out->items);
    if (!out->items) return wsc_fail(err, WS_CLIENT_ERR_NOMEM, "out of memory");
    const cJSON *it;
    cJSON_ArrayForEach(it, arr)
    {
        ws_client_status s = wsc_model_from_json(it, &out->items[out->n], err);
        if (s != WS_CLIENT_OK) return s;
        out->n++;
    }
    return WS_CLIENT_OK;
}

ws_client_status ws_client_model_list_get(const ws_client *c, ws_client_model_list *out,
                                          ws_client_error *err)
{
    memset(out, 0, sizeof *out);
    ws_client_status s = wsc_get(c, WS_CLIENT_OK, "/v1/models", decode_models, out, err);
    if (s != WS_CLIENT_OK) ws_client_model_list_free(out);
    return s;
}

static ws_client_status spec_body(const ws_client_model_spec *spec, char **body,
                                  ws_client_error *err)
{
    ws_client_status s = wsc_check_name(spec->name, err);
    if (s != WS_CLIENT_OK) return s;
    cJSON *o = cJSON_CreateObject(), *cfg = NULL, *tr = NULL;
    if (!o || !cJSON_AddStringToObject(o, "name", spec->name))
        s = wsc_fail(err, WS_CLIENT_ERR_NOMEM, "out of memory");
    if (s == WS_CLIENT_OK && spec->config_json) {
        cfg = cJSON_ParseWithOpts(spec->config_json, NULL, 1); /* 1: no trailing data */
        if (cJSON_IsObject(cfg)) {
            s = wsc_add_member(o, "config", cfg, err);
        } else {
            cJSON_Delete(cfg);
            s = wsc_fail(err, WS_CLIENT_ERR_INVALID, "config must be one JSON object");
        }
    }
    if (s == WS_CLIENT_OK && spec->training)
        s = wsc_training_patch_to_json(spec->training, &tr, err);
    if (s == WS_CLIENT_OK && spec->training) s = wsc_add_member(o, "training", tr, err);
    if (s == WS_CLIENT_OK && spec->seed >= 0 &&
        !cJSON_AddNumberToObject(o, "seed", (double)spec->seed))
        s = wsc_fail(err, WS_CLIENT_ERR_NOMEM, "out of memory");
    if (s == WS_CLIENT_OK && spec->tenant) s = wsc_check_name(spec->tenant, err);
    if (s == WS_CLIENT_OK && spec->tenant && !cJSON_AddStringToObject(o, "tenant", spec->tenant))
        s = wsc_fail(err, WS_CLIENT_ERR_NOMEM, "out of memory");
    if (s != WS_CLIENT_OK) {
        cJSON_Delete(o);
        return s;
    }
    return wsc_print(o, body, err);
}

ws_client_status ws_client_model_create(const ws_client *c, const ws_client_model_spec *spec,
                                        ws_client_model *out, ws_client_error *err)
{
    memset(out, 0, sizeof *out);
    char *body = NULL;
    ws_client_status s = spec_body(spec, &body, err);
    /* Not repeatable: after a lost reply the retry would answer 409 conflict. */
    return wsc_send(c, s, "POST", "/v1/models", body, 0, decode_model, out, err);
}

ws_client_status ws_client_model_get(const ws_client *c, const char *name, ws_client_model *out,
                                     ws_client_error *err)
{
    memset(out, 0, sizeof *out);
    char path[128];
    return wsc_get(c, wsc_model_path(path, sizeof path, name, "", err), path, decode_model, out,
                   err);
}

ws_client_status ws_client_training_set(const ws_client *c, const char *name,
                                        const ws_client_training_patch *patch,
                                        ws_client_training *out, ws_client_error *err)
{
    char path[128], *body = NULL;
    cJSON *o;
    ws_client_status s = wsc_model_path(path, sizeof path, name, "/training", err);
    if (s == WS_CLIENT_OK) s = wsc_training_patch_to_json(patch, &o, err);
    if (s == WS_CLIENT_OK) s = wsc_print(o, &body, err);
    /* Setting the same values twice is harmless. */
    return wsc_send(c, s, "PATCH", path, body, 1, decode_training, out, err);
}

ws_client_status ws_client_model_rollback(const ws_client *c, const char *name, int64_t version,
                                          ws_client_model *out, ws_client_error *err)
{
    memset(out, 0, sizeof *out);
    char path[160], tail[48];
    snprintf(tail, sizeof tail, "/versions/%lld/current", (long long)version);
    ws_client_status s = wsc_model_path(path, sizeof path, name, tail, err);
    if (s == WS_CLIENT_OK && version < 1)
        s = wsc_fail(err, WS_CLIENT_ERR_INVALID, "version must be at least 1");
    /* Making the same version current twice is harmless. */
    return wsc_send(c, s, "POST", path, NULL, 1, decode_model, out, err);
}

void ws_client_version_list_free(ws_client_version_list *l)
{
    for (int i = 0; i < l->n; i++) free(l->items[i].note);
    free(l->items);
    memset(l, 0, sizeof *l);
}

static ws_client_status decode_versions(const cJSON *body, void *dst, ws_client_error *err)
{
    static const wsc_field fields[] = {
        {"version", WSC_I64, offsetof(ws_client_version, version), 0, 1},
        {"created_ms", WSC_I64, offsetof(ws_client_version, created_ms), 0, 1},
        {"current", WSC_BOOL, offsetof(ws_client_version, current), 0, 1},
        {"available", WSC_BOOL, offsetof(ws_client_version, available), 0, 1}};
    ws_client_version_list *out = dst;
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(body, "versions");
    if (!cJSON_IsArray(arr))
        return wsc_fail(err, WS_CLIENT_ERR_PROTOCOL, "answer lacks \"versions\"");
    out->items = calloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof *out->items);
    if (!out->items) return wsc_fail(err, WS_CLIENT_ERR_NOMEM, "out of memory");
    const cJSON *it;
    cJSON_ArrayForEach(it, arr)
    {
        ws_client_version *v = &out->items[out->n];
        ws_client_status s =
            wsc_decode_fields(it, fields, (int)(sizeof fields / sizeof fields[0]), v, err);
        const cJSON *note = cJSON_GetObjectItemCaseSensitive(it, "note");
        if (s == WS_CLIENT_OK && !cJSON_IsString(note))
            s = wsc_fail(err, WS_CLIENT_ERR_PROTOCOL, "a version lacks its \"note\"");
        if (s == WS_CLIENT_OK && !(v->note = strdup(note->valuestring)))
            s = wsc_fail(err, WS_CLIENT_ERR_NOMEM, "out of memory");
        if (s != WS_CLIENT_OK) return s;
        out->n++;
    }
    return WS_CLIENT_OK;
}

ws_client_status ws_client_model_versions(const ws_client *c, const char *name,
                                          ws_client_version_list *out, ws_client_error *err)
{
    memset(out, 0, sizeof *out);
    char path[160];
    ws_client_status s = wsc_get(c, wsc_model_path(path, sizeof path, name, "/versions", err), path,
                                 decode_versions, out, err);
    if (s != WS_CLIENT_OK) ws_client_version_list_free(out);
    return s;
}

ws_client_status ws_client_model_delete(const ws_client *c, const char *name, ws_client_error *err)
{
    char path[160];
    return wsc_delete(c, wsc_model_path(path, sizeof path, name, "", err), path, err);
}

ws_client_status ws_client_model_import(const ws_client *c, const char *name, const char *tenant,
                                        const char *path, ws_client_model *out, int *created,
                                        ws_client_error *err)
{
    memset(out, 0, sizeof *out);
    char url_path[256], suffix[96] = "/import";
    ws_client_status s = tenant ? wsc_check_name(tenant, err) : WS_CLIENT_OK;
    /* a checked name needs no escaping in a query */
    if (s == WS_CLIENT_OK && tenant) snprintf(suffix, sizeof suffix, "/import?tenant=%s", tenant);
    if (s == WS_CLIENT_OK) s = wsc_model_path(url_path, sizeof url_path, name, suffix, err);
    if (s == WS_CLIENT_OK && (!path || !*path))
        s = wsc_fail(err, WS_CLIENT_ERR_INVALID, "no checkpoint file");
    if (s != WS_CLIENT_OK) return s;
    FILE *f = fopen(path, "rb");
    if (!f) return wsc_fail(err, WS_CLIENT_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    int64_t len = -1;
    if (fseeko(f, 0, SEEK_END) == 0) len = (int64_t)ftello(f);
    if (len < 0) {
        s = wsc_fail(err, WS_CLIENT_ERR_IO, "cannot read %s: %s", path, strerror(errno));
        fclose(f);
        return s;
    }
    /* Not repeatable: a lost reply may hide a model or version that was made. */
    wsc_request rq = {.method = "POST", .path = url_path, .source = f, .source_len = len};
    wsc_response rs;
    const cJSON *body;
    s = wsc_call(c, &rq, &rs, err);
    if (s == WS_CLIENT_OK) s = wsc_json_body(&rs, &body, err);
    if (s == WS_CLIENT_OK) s = wsc_model_from_json(body, out, err);
    if (s == WS_CLIENT_OK && created) *created = rs.status == 201;
    wsc_response_free(&rs);
    fclose(f);
    return s;
}

ws_client_status ws_client_checkpoint_download(const ws_client *c, const char *name,
                                               const char *path, int64_t *version,
                                               ws_client_error *err)
{
    char url_path[128], *part = NULL;
    ws_client_status s = wsc_model_path(url_path, sizeof url_path, name, "/checkpoint", err);
    if (s == WS_CLIENT_OK && (!path || !*path))
        s = wsc_fail(err, WS_CLIENT_ERR_INVALID, "no output path");
    if (s != WS_CLIENT_OK) return s;
    size_t cap = strlen(path) + 6;
    if (!(part = malloc(cap))) return wsc_fail(err, WS_CLIENT_ERR_NOMEM, "out of memory");
    snprintf(part, cap, "%s.part", path);
    /* Into path.part, renamed when complete: a failed download never leaves a
     * truncated checkpoint under the real name. */
    FILE *f = fopen(part, "w+b");
    if (!f) {
        s = wsc_fail(err, WS_CLIENT_ERR_IO, "cannot create %s: %s", part, strerror(errno));
        free(part);
        return s;
    }
    wsc_request rq = {.method = "GET", .path = url_path, .repeatable = 1, .sink = f};
    wsc_response rs;
    s = wsc_call(c, &rq, &rs, err);
    long long v = 0;
    char tail;
    if (s == WS_CLIENT_OK && sscanf(rs.x_model_version, "%lld%c", &v, &tail) != 1)
        s = wsc_fail(err, WS_CLIENT_ERR_PROTOCOL, "checkpoint answer lacks X-Model-Version");
    if (fclose(f) != 0 && s == WS_CLIENT_OK)
        s = wsc_fail(err, WS_CLIENT_ERR_IO, "cannot write %s: %s", part, strerror(errno));
    if (s == WS_CLIENT_OK && rename(part, path) != 0)
        s = wsc_fail(err, WS_CLIENT_ERR_IO, "cannot rename %s to %s: %s", part, path,
                     strerror(errno));
    if (s != WS_CLIENT_OK) remove(part);
    if (s == WS_CLIENT_OK && version) *version = v;
    wsc_response_free(&rs);
    free(part);
    return s;
}
