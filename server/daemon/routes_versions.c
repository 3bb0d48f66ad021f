/* routes_versions.c — a model's versions and its publication gate:
 * GET /v1/models/{name}/versions lists the recorded versions (which one is
 * current, which still have a checkpoint file to serve); POST
 * /v1/models/{name}/versions/{version}/current (admin) makes an earlier version
 * current again — a rollback, done by the engine, which owns the loaded models;
 * and the "gate" object of GET /v1/models/{name}. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "routes.h"
#include "server/common/versions.h"

static void fail(ws_http_answer *a, ws_status s, const ws_error *err)
{
    const char *code;
    a->status = ws_http_status_of(s, &code);
    a->json = ws_http_error(code, "%s", err->msg);
}

/* A number, or null where the engine has none (< 0). */
static void add_known(cJSON *o, const char *name, double v)
{
    if (v >= 0)
        cJSON_AddNumberToObject(o, name, v);
    else
        cJSON_AddNullToObject(o, name);
}

cJSON *ws_srv_gate_score_json(const ws_engine_gate_score *s)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    add_known(o, "probe_accuracy", s->probe);
    static const char *const kinds[WS_ENGINE_GATE_KINDS] = {"told_true", "overridden", "never_told",
                                                            "told_moves"};
    cJSON *k = cJSON_AddObjectToObject(o, "probe_by_kind");
    for (int i = 0; k && i < WS_ENGINE_GATE_KINDS; i++) add_known(k, kinds[i], s->probe_kind[i]);
    add_known(o, "replay_accuracy",
              s->replay_n > 0 ? (double)s->replay_right / (double)s->replay_n : -1);
    cJSON_AddNumberToObject(o, "replay_answers", (double)s->replay_n);
    return o;
}

cJSON *ws_srv_gate_json(const ws_engine_gate_info *g)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddNumberToObject(o, "published", (double)g->published);
    cJSON_AddNumberToObject(o, "rejected", (double)g->rejected);
    cJSON_AddNumberToObject(o, "restored", (double)g->restored);
    add_known(o, "served_probe_accuracy", g->served.probe);
    add_known(o, "best_probe_accuracy", g->best_probe);
    cJSON_AddNumberToObject(o, "anchor_version", (double)g->anchor_version);
    if (!g->has_last) {
        cJSON_AddNullToObject(o, "last");
        return o;
    }
    cJSON *l = cJSON_AddObjectToObject(o, "last");
    if (!l) return o;
    cJSON_AddStringToObject(l, "verdict", g->last.published ? "published" : "rejected");
    cJSON_AddNumberToObject(l, "base_version", (double)g->last.base_version);
    if (g->last.published)
        cJSON_AddNumberToObject(l, "version", (double)g->last.version);
    else
        cJSON_AddNullToObject(l, "version");
    if (g->last.restored_version)
        cJSON_AddNumberToObject(l, "restored_version", (double)g->last.restored_version);
    else
        cJSON_AddNullToObject(l, "restored_version");
    cJSON_AddItemToObject(l, "served", ws_srv_gate_score_json(&g->last.served));
    cJSON_AddItemToObject(l, "candidate", ws_srv_gate_score_json(&g->last.candidate));
    cJSON_AddNumberToObject(l, "ms", g->last.ms);
    cJSON_AddStringToObject(l, "reason", g->last.reason);
    return o;
}

int ws_srv_model_of(ws_http_ctx *c, ws_http_answer *a, ws_store **st, ws_store_model *m)
{
    ws_error err = {0};
    *st = ws_srv_store(c->srv, &err);
    if (!*st) return fail(a, err.code, &err), 0;
    if (strlen(c->params[0]) > WS_STORE_NAME_MAX)
        return fail(a, ws_error_set(&err, WS_ERR_NOTFOUND, "no such model"), &err), 0;
    ws_status s = ws_store_model_find(*st, c->params[0], m, &err);
    if (s == WS_OK && !ws_srv_model_visible(&c->who, m)) { /* as a missing one */
        ws_store_model_clear(m);
        s = ws_error_set(&err, WS_ERR_NOTFOUND, "model %s not found", c->params[0]);
    }
    if (s != WS_OK) return fail(a, s, &err), 0;
    return 1;
}

typedef struct {
    cJSON *arr;
    const char *data_dir;
    int64_t current;
} versions_ctx;

static ws_status version_one(void *ctx, const ws_store_version *v)
{
    versions_ctx *vc = ctx;
    char path[WS_SRV_PATH_MAX + 128];
    struct stat sb;
    ws_srv_ckpt_resolve(vc->data_dir, v->path, path, sizeof path);
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddItemToArray(vc->arr, o)) {
        cJSON_Delete(o);
        return WS_ERR_NOMEM;
    }
    cJSON_AddNumberToObject(o, "version", (double)v->version);
    cJSON_AddStringToObject(o, "note", v->note ? v->note : "");
    cJSON_AddNumberToObject(o, "created_ms", (double)v->created_ms);
    cJSON_AddBoolToObject(o, "current", v->version == vc->current);
    /* Online training keeps the newest few files: the others cannot be served. */
    cJSON_AddBoolToObject(o, "available", stat(path, &sb) == 0);
    return WS_OK;
}

void ws_route_versions_list(ws_http_ctx *c, ws_http_answer *a)
{
    ws_error err = {0};
    ws_store *st;
    ws_store_model m = {0};
    if (!ws_srv_model_of(c, a, &st, &m)) return;
    versions_ctx vc = {cJSON_CreateArray(), c->srv->cfg.data_dir, m.current_version};
    ws_status s = vc.arr ? ws_store_version_list(st, m.id, version_one, &vc, &err) : WS_ERR_NOMEM;
    ws_store_model_clear(&m);
    if (s == WS_ERR_NOMEM) ws_error_set(&err, s, "out of memory");
    if (s != WS_OK) {
        cJSON_Delete(vc.arr);
        return fail(a, s, &err);
    }
    a->status = 200;
    a->json = cJSON_CreateObject();
    cJSON_AddItemToObject(a->json, "versions", vc.arr);
}

/* A version number from the path: 1..2^53 in decimal digits. */
static int version_of(const char *s, int64_t *out)
{
    size_t n = strlen(s);
    if (n < 1 || n > 16 || strspn(s, "0123456789") != n || s[0] == '0') return 0;
    *out = strtoll(s, NULL, 10);
    return *out <= ((int64_t)1 << 53);
}

void ws_route_version_current(ws_http_ctx *c, ws_http_answer *a)
{
    static const char *const none[] = {NULL};
    ws_error err = {0};
    int64_t version = 0;
    if (!version_of(c->params[1], &version))
        return fail(a,
                    ws_error_set(&err, WS_ERR_INVALID,
                                 "version must be a positive integer, got \"%.32s\"", c->params[1]),
                    &err);
    if (c->body_len) { /* nothing to say but {} */
        cJSON *body = NULL;
        ws_status s = ws_json_parse_object(c->body, c->body_len, &body, &err);
        if (s == WS_OK) s = ws_json_only(body, none, &err);
        cJSON_Delete(body);
        if (s != WS_OK) return fail(a, s, &err);
    }
    if (strlen(c->params[0]) > WS_STORE_NAME_MAX)
        return fail(a, ws_error_set(&err, WS_ERR_NOTFOUND, "no such model"), &err);
    ws_job *j = calloc(1, sizeof *j);
    if (!j) return fail(a, ws_error_set(&err, WS_ERR_NOMEM, "out of memory"), &err);
    j->kind = WS_JOB_MODEL_ROLLBACK;
    strcpy(j->model_name, c->params[0]);
    j->version = version;
    ws_http_submit(c, j, a);
}
