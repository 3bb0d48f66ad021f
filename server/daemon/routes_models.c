/* routes_models.c — /v1/models...: listings and the checkpoint download answer
 * from storage; creating or importing a model and changing its training
 * settings go through the engine, which owns the loaded models. */
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "routes.h"
#include "server/common/versions.h"

static void fail(ws_http_answer *a, ws_status s, const ws_error *err)
{
    const char *code;
    a->status = ws_http_status_of(s, &code);
    a->json = ws_http_error(code, "%s", err->msg);
}

/* The id of the tenant a model is for, named by name (NULL: a shared model, 0). */
static ws_status tenant_id(ws_http_ctx *c, const char *name, int64_t *id, ws_error *err)
{
    *id = 0;
    if (!name) return WS_OK;
    if (!ws_http_model_name_ok(name))
        return ws_error_set(err, WS_ERR_INVALID,
                            "tenant must be a tenant name: 1..64 characters of [A-Za-z0-9._-]");
    ws_store *st = ws_srv_store(c->srv, err);
    if (!st) return err->code;
    ws_status s = ws_store_tenant_find(st, name, id, err);
    if (s == WS_ERR_NOTFOUND) /* tenants come with their first key */
        return ws_error_set(err, WS_ERR_INVALID,
                            "no tenant named \"%s\" (worldstated key create --tenant %s makes it)",
                            name, name);
    return s;
}

/* An import's ?tenant=NAME (absent: a shared model). */
static ws_status import_tenant(ws_http_ctx *c, int64_t *id, ws_error *err)
{
    return tenant_id(c, MHD_lookup_connection_value(c->conn, MHD_GET_ARGUMENT_KIND, "tenant"), id,
                     err);
}

void ws_route_model_create(ws_http_ctx *c, ws_http_answer *a)
{
    ws_error err = {0};
    ws_job *j = calloc(1, sizeof *j);
    if (!j) return fail(a, ws_error_set(&err, WS_ERR_NOMEM, "out of memory"), &err);
    j->kind = WS_JOB_MODEL_CREATE;
    char tenant[WS_STORE_NAME_MAX + 1];
    ws_status s = ws_http_model_create_parse(c->body, c->body_len, j, tenant, &err);
    if (s == WS_OK) s = tenant_id(c, tenant[0] ? tenant : NULL, &j->model_tenant, &err);
    if (s != WS_OK) {
        ws_job_free(j);
        return fail(a, s, &err);
    }
    ws_http_submit(c, j, a);
}

void ws_route_training_patch(ws_http_ctx *c, ws_http_answer *a)
{
    ws_error err = {0};
    ws_job *j = calloc(1, sizeof *j);
    if (!j) return fail(a, ws_error_set(&err, WS_ERR_NOMEM, "out of memory"), &err);
    j->kind = WS_JOB_TRAINING_SET;
    ws_status s = ws_http_training_patch_parse(c->body, c->body_len, j, &err);
    if (s == WS_OK && !ws_http_model_name_ok(c->params[0]))
        s = ws_error_set(&err, WS_ERR_NOTFOUND, "no such model");
    if (s != WS_OK) {
        ws_job_free(j);
        return fail(a, s, &err);
    }
    strcpy(j->model_name, c->params[0]);
    ws_http_submit(c, j, a);
}

/* DELETE /v1/models/{name}: the engine refuses "default" and a model in use. */
void ws_route_model_delete(ws_http_ctx *c, ws_http_answer *a)
{
    ws_error err = {0};
    if (!ws_http_model_name_ok(c->params[0]))
        return fail(a, ws_error_set(&err, WS_ERR_NOTFOUND, "no such model"), &err);
    ws_job *j = calloc(1, sizeof *j);
    if (!j) return fail(a, ws_error_set(&err, WS_ERR_NOMEM, "out of memory"), &err);
    j->kind = WS_JOB_MODEL_DELETE;
    strcpy(j->model_name, c->params[0]);
    ws_http_submit(c, j, a);
}

/* POST /v1/models/{name}/import: the body is already in the file c->upload;
 * the engine loads it, checks it and makes it a model or a version. */
void ws_route_model_import(ws_http_ctx *c, ws_http_answer *a)
{
    ws_error err = {0};
    if (!c->upload) /* http.c spools every import's body: a bug if not */
        return fail(a, ws_error_set(&err, WS_ERR_IO, "the body was not stored"), &err);
    ws_job *j = calloc(1, sizeof *j);
    if (!j) return fail(a, ws_error_set(&err, WS_ERR_NOMEM, "out of memory"), &err);
    j->kind = WS_JOB_MODEL_IMPORT;
    ws_status s = import_tenant(c, &j->model_tenant, &err); /* checked by the begin hook too */
    if (s != WS_OK) {
        ws_job_free(j);
        return fail(a, s, &err);
    }
    strcpy(j->model_name, c->params[0]); /* checked by ws_route_model_import_begin */
    j->upload = c->upload;               /* the job owns the file from here on */
    c->upload = NULL;
    ws_http_submit(c, j, a);
}

/* The name and tenant are checked before a body of up to 256 MiB is read. */
int ws_route_model_import_begin(ws_http_ctx *c, ws_http_answer *a)
{
    ws_error err = {0};
    int64_t tenant;
    ws_status s =
        ws_http_model_name_ok(c->params[0])
            ? import_tenant(c, &tenant, &err)
            : ws_error_set(&err, WS_ERR_INVALID, "name must be 1..64 characters of [A-Za-z0-9._-]");
    if (s == WS_OK) return 1;
    fail(a, s, &err);
    return 0;
}

static void checkpoint(ws_store *st, const char *data_dir, const ws_store_model *m,
                       ws_http_answer *a)
{
    ws_error err = {0};
    ws_store_version v = {0};
    ws_status s = ws_store_version_get(st, m->id, m->current_version, &v, &err);
    if (s != WS_OK) return fail(a, s, &err);
    char path[WS_SRV_PATH_MAX + 128];
    ws_srv_ckpt_resolve(data_dir, v.path, path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        if (fd >= 0) close(fd);
        ws_store_version_clear(&v);
        a->status = 500;
        a->json = ws_http_error("internal", "checkpoint file unreadable");
        return;
    }
    ws_store_version_clear(&v);
    /* Checkpoints are never rewritten in place (each version is a new file), so
     * streaming from the fd is consistent even while training goes on. */
    a->raw = MHD_create_response_from_fd((uint64_t)sb.st_size, fd);
    if (!a->raw) {
        close(fd);
        a->status = 500;
        a->json = ws_http_error("internal", "out of memory");
        return;
    }
    char ver[32];
    snprintf(ver, sizeof ver, "%lld", (long long)m->current_version);
    if (MHD_add_response_header(a->raw, "Content-Type", "application/octet-stream") != MHD_YES ||
        MHD_add_response_header(a->raw, "X-Model-Version", ver) != MHD_YES) {
        MHD_destroy_response(a->raw);
        a->raw = NULL;
        a->status = 500;
        a->json = ws_http_error("internal", "out of memory");
        return;
    }
    a->status = 200;
}

void ws_route_models_list(ws_http_ctx *c, ws_http_answer *a)
{
    ws_error err = {0};
    ws_store *st = ws_srv_store(c->srv, &err);
    cJSON *arr;
    ws_status s = st ? ws_srv_models_json(st, &c->who, &arr, &err) : err.code;
    if (s != WS_OK) return fail(a, s, &err);
    a->status = 200;
    a->json = cJSON_CreateObject();
    cJSON_AddItemToObject(a->json, "models", arr);
}

/* The engine's picture of a loaded model: GET /v1/models/{name}'s "status". */
static cJSON *status_json(const ws_engine_model_info *m)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddStringToObject(o, "state", "loaded");
    cJSON_AddNumberToObject(o, "serving_version", (double)m->version);
    cJSON_AddNumberToObject(o, "unloadable_version", (double)m->unloadable);
    cJSON_AddNumberToObject(o, "examples_ready", m->examples_ready);
    cJSON_AddNumberToObject(o, "examples_labelled", (double)m->examples_labelled);
    cJSON_AddNumberToObject(o, "examples_self_supervised", (double)m->examples_self);
    cJSON_AddNumberToObject(o, "examples_held_out", (double)m->examples_held_out);
    cJSON_AddNumberToObject(o, "examples_trained", (double)m->examples_trained);
    cJSON_AddNumberToObject(o, "examples_dropped", (double)m->examples_dropped);
    cJSON_AddNumberToObject(o, "updates", (double)m->updates);
    cJSON_AddNumberToObject(o, "last_loss", m->last_loss);
    return o;
}

/* The calling thread's store, with the route's model name checked; NULL with
 * the answer in a. */
static ws_store *model_store(ws_http_ctx *c, ws_http_answer *a)
{
    ws_error err = {0};
    ws_store *st = ws_srv_store(c->srv, &err);
    if (!st)
        fail(a, err.code, &err);
    else if (!ws_http_model_name_ok(c->params[0]))
        fail(a, ws_error_set(&err, WS_ERR_NOTFOUND, "no such model"), &err);
    return st && ws_http_model_name_ok(c->params[0]) ? st : NULL;
}

/* The rules learned from the model's labels (rules.h), most evidence first.
 * Their anchors are symbols a tenant posted: on a model shared by every
 * tenant only an admin sees them, others see the counts. */
static cJSON *rules_json(const ws_http_ctx *c, int64_t id, const cJSON *model)
{
    enum { MAX_SHOWN = 32 };
    ws_engine_rule r[MAX_SHOWN];
    int n = ws_engine_model_rules(c->srv->engine, id, r, MAX_SHOWN);
    /* a tenant's own model: whoever sees it is that tenant or an admin */
    int named = c->who.admin || cJSON_IsString(cJSON_GetObjectItemCaseSensitive(model, "tenant"));
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(a, o)) break;
        cJSON_AddNumberToObject(o, "arity", r[i].arity);
        cJSON_AddNumberToObject(o, "position", r[i].position);
        cJSON_AddNumberToObject(o, "anchor_position", r[i].anchor_position);
        cJSON_AddStringToObject(o, "anchor", named ? r[i].anchor : "");
        cJSON_AddNumberToObject(o, "exclusive", r[i].exclusive);
        cJSON_AddNumberToObject(o, "not_exclusive", r[i].not_exclusive);
        cJSON_AddNumberToObject(o, "contexts", r[i].contexts);
        cJSON_AddBoolToObject(o, "holds", r[i].holds);
    }
    return a;
}

void ws_route_model_get(ws_http_ctx *c, ws_http_answer *a)
{
    ws_error err = {0};
    ws_store *st = model_store(c, a);
    if (!st) return;
    int64_t id;
    ws_status s = ws_srv_model_json(st, c->params[0], &c->who, &a->json, &id, &err);
    if (s != WS_OK) return fail(a, s, &err);
    a->status = 200;
    ws_engine_model_info m;
    if (ws_engine_model_info_of(c->srv->engine, id, &m)) {
        cJSON_AddItemToObject(a->json, "status", status_json(&m));
        cJSON_AddItemToObject(a->json, "gate", ws_srv_gate_json(&m.gate));
        cJSON_AddItemToObject(a->json, "rules", rules_json(c, id, a->json));
    }
}

void ws_route_checkpoint_get(ws_http_ctx *c, ws_http_answer *a)
{
    ws_error err = {0};
    ws_store *st = model_store(c, a);
    if (!st) return;
    ws_store_model model = {0};
    ws_status s = ws_store_model_find(st, c->params[0], &model, &err);
    if (s != WS_OK) return fail(a, s, &err);
    checkpoint(st, c->srv->cfg.data_dir, &model, a);
    ws_store_model_clear(&model);
}
