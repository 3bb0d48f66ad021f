/* routes_history.c — what the web console charts, from the engine's bounded
 * in-memory history (engine.h, history.c): a model's online-training updates
 * (GET /v1/models/{name}/training/history) and a session's per-token state
 * change norms over its newest steps (GET /v1/sessions/{id}/state/changes).
 * Both are read under the key's visibility rules, like the model and the
 * session themselves. */
#include <stdio.h>
#include <stdlib.h>

#include "routes.h"

static void fail(ws_http_answer *a, ws_status s, const ws_error *err)
{
    const char *code;
    a->status = ws_http_status_of(s, &code);
    a->json = ws_http_error(code, "%s", err->msg);
}

/* x to 6 significant digits: charts need no more, and the JSON stays short. */
static double short_num(double x)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%.6g", x);
    return strtod(buf, NULL);
}

static cJSON *point_json(const ws_engine_train_point *p)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddNumberToObject(o, "time_ms", (double)p->time_ms);
    cJSON_AddNumberToObject(o, "version", (double)p->version);
    cJSON_AddNumberToObject(o, "updates", (double)p->updates);
    cJSON_AddNumberToObject(o, "examples_trained", (double)p->examples_trained);
    cJSON_AddNumberToObject(o, "loss", short_num(p->loss));
    if (!p->gated) {
        cJSON_AddNullToObject(o, "gate");
        return o;
    }
    cJSON *g = cJSON_AddObjectToObject(o, "gate");
    if (!g) return o;
    cJSON_AddStringToObject(g, "verdict", p->published ? "published" : "rejected");
    cJSON_AddItemToObject(g, "served", ws_srv_gate_score_json(&p->served));
    cJSON_AddItemToObject(g, "candidate", ws_srv_gate_score_json(&p->candidate));
    return o;
}

void ws_route_training_history(ws_http_ctx *c, ws_http_answer *a)
{
    ws_error err = {0};
    ws_store *st;
    ws_store_model m = {0};
    if (!ws_srv_model_of(c, a, &st, &m)) return;
    ws_engine_train_point *pts = malloc(sizeof *pts * WS_ENGINE_HISTORY_POINTS);
    cJSON *arr = cJSON_CreateArray();
    if (!pts || !arr) {
        free(pts);
        cJSON_Delete(arr);
        ws_store_model_clear(&m);
        return fail(a, ws_error_set(&err, WS_ERR_NOMEM, "out of memory"), &err);
    }
    int n = ws_engine_training_history(c->srv->engine, m.id, pts);
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(arr, point_json(&pts[i]));
    free(pts);
    a->status = 200;
    a->json = cJSON_CreateObject();
    cJSON_AddStringToObject(a->json, "model", m.name);
    cJSON_AddNumberToObject(a->json, "capacity", WS_ENGINE_HISTORY_POINTS);
    cJSON_AddItemToObject(a->json, "points", arr);
    ws_store_model_clear(&m);
}

static cJSON *changes_json(const ws_engine_state_changes *ch)
{
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && i < ch->n; i++) {
        cJSON *o = cJSON_CreateObject(), *norms = NULL;
        if (o && cJSON_AddItemToArray(arr, o)) {
            cJSON_AddNumberToObject(o, "step", (double)ch->step[i]);
            cJSON_AddNumberToObject(o, "model_version", (double)ch->version[i]);
            norms = cJSON_AddArrayToObject(o, "norms");
        } else {
            cJSON_Delete(o);
        }
        if (!norms) {
            cJSON_Delete(arr);
            return NULL;
        }
        for (int k = 0; k < ch->n_state; k++)
            cJSON_AddItemToArray(
                norms, cJSON_CreateNumber(short_num(ch->norm[(size_t)i * ch->n_state + k])));
    }
    return arr;
}

void ws_route_state_changes(ws_http_ctx *c, ws_http_answer *a)
{
    ws_error err = {0};
    ws_store *st = ws_srv_store(c->srv, &err);
    if (!st) return fail(a, err.code, &err);
    if (!ws_store_session_id_valid(c->params[0])) /* malformed ids are unknown sessions */
        return fail(a, ws_error_set(&err, WS_ERR_NOTFOUND, "no such session"), &err);
    ws_store_session sess = {0};
    ws_status s = ws_store_session_get(st, c->who.tenant, c->params[0], 0, &sess, &err);
    if (s != WS_OK) return fail(a, s, &err);
    ws_engine_state_changes ch;
    s = ws_engine_state_changes_of(c->srv->engine, c->params[0], &ch, &err);
    cJSON *arr = s == WS_OK ? changes_json(&ch) : NULL;
    free(ch.norm);
    if (s == WS_OK && !arr) s = ws_error_set(&err, WS_ERR_NOMEM, "out of memory");
    if (s != WS_OK) {
        ws_store_session_clear(&sess);
        return fail(a, s, &err);
    }
    a->status = 200;
    a->json = cJSON_CreateObject();
    cJSON_AddNumberToObject(a->json, "step", (double)sess.step);
    cJSON_AddItemToObject(a->json, "state_shape",
                          cJSON_CreateIntArray((int[]){sess.rows, sess.cols}, 2));
    cJSON_AddNumberToObject(a->json, "window", WS_ENGINE_CHANGE_STEPS);
    cJSON_AddItemToObject(a->json, "changes", arr);
    ws_store_session_clear(&sess);
}
