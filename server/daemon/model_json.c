/* model_json.c — a model as the API shows it: name, version, config, training,
 * created_ms, and where its parameters come from, so that a user can tell a
 * trained model from a random one: "origin" (how version 1 was made: random,
 * shipped, imported) and "version_note" (what made the current version: e.g.
 * "online training", "imported", a retrain's summary). Both come from the
 * notes of model_versions, read after the listing (a listing's callback may not
 * call into the store). "tenant" names the tenant a model belongs to (null:
 * shared), and a key sees only the models it may use (visible). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "server/common/versions.h"

static cJSON *base_json(const ws_store_model *m)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    int ok = cJSON_AddStringToObject(o, "name", m->name) &&
             cJSON_AddNumberToObject(o, "version", (double)m->current_version) &&
             cJSON_AddItemToObject(o, "config", cJSON_Parse(m->config_json)) &&
             cJSON_AddItemToObject(o, "training", cJSON_Parse(m->training_json)) &&
             cJSON_AddNumberToObject(o, "created_ms", (double)m->created_ms) &&
             (m->tenant ? cJSON_AddStringToObject(o, "tenant", m->tenant_name)
                        : cJSON_AddNullToObject(o, "tenant"));
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* The note of one version; "" when it has none (or no such version). */
static ws_status note_of(ws_store *st, int64_t id, int64_t version, char *out, size_t cap,
                         ws_error *err)
{
    ws_store_version v = {0};
    out[0] = '\0';
    ws_status s = ws_store_version_get(st, id, version, &v, err);
    if (s == WS_ERR_NOTFOUND) return WS_OK;
    if (s == WS_OK) snprintf(out, cap, "%s", v.note ? v.note : "");
    ws_store_version_clear(&v);
    return s;
}

static ws_status add_origin(ws_store *st, cJSON *o, int64_t id, int64_t version, ws_error *err)
{
    char first[192], current[192];
    WS_TRY(note_of(st, id, 1, first, sizeof first, err));
    WS_TRY(note_of(st, id, version, current, sizeof current, err));
    if (!cJSON_AddStringToObject(o, "origin", ws_srv_origin_of_note(first)) ||
        !cJSON_AddStringToObject(o, "version_note", current))
        return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    return WS_OK;
}

/* daemon.h ws_srv_model_json says who sees what. */
int ws_srv_model_visible(const ws_store_principal *who, const ws_store_model *m)
{
    return !who || who->admin || !m->tenant || m->tenant == who->tenant;
}

ws_status ws_srv_model_json(ws_store *st, const char *name, const ws_store_principal *who,
                            cJSON **out, int64_t *id, ws_error *err)
{
    *out = NULL;
    ws_store_model m = {0};
    WS_TRY(ws_store_model_find(st, name, &m, err));
    if (!ws_srv_model_visible(who, &m)) { /* answered as a missing one, word for word */
        ws_store_model_clear(&m);
        return ws_error_set(err, WS_ERR_NOTFOUND, "model %s not found", name);
    }
    cJSON *o = base_json(&m);
    ws_status s = o ? add_origin(st, o, m.id, m.current_version, err)
                    : ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    if (id) *id = m.id;
    ws_store_model_clear(&m);
    if (s != WS_OK) {
        cJSON_Delete(o);
        return s;
    }
    *out = o;
    return WS_OK;
}

typedef struct {
    const ws_store_principal *who;
    cJSON *arr;
    int64_t *ids, *versions;
    int n, cap;
} listing;

static ws_status list_one(void *ctx, const ws_store_model *m)
{
    listing *l = ctx;
    if (!ws_srv_model_visible(l->who, m)) return WS_OK;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 8;
        int64_t *ids = realloc(l->ids, sizeof *ids * (size_t)cap);
        if (ids) l->ids = ids;
        int64_t *vs = ids ? realloc(l->versions, sizeof *vs * (size_t)cap) : NULL;
        if (!vs) return WS_ERR_NOMEM;
        l->versions = vs;
        l->cap = cap;
    }
    cJSON *o = base_json(m);
    if (!o || !cJSON_AddItemToArray(l->arr, o)) {
        cJSON_Delete(o);
        return WS_ERR_NOMEM;
    }
    l->ids[l->n] = m->id, l->versions[l->n] = m->current_version;
    l->n++;
    return WS_OK;
}

ws_status ws_srv_models_json(ws_store *st, const ws_store_principal *who, cJSON **out,
                             ws_error *err)
{
    listing l = {.who = who, .arr = cJSON_CreateArray()};
    ws_status s = l.arr ? ws_store_model_list(st, list_one, &l, err) : WS_ERR_NOMEM;
    if (s == WS_ERR_NOMEM) ws_error_set(err, s, "out of memory");
    int i = 0;
    for (cJSON *o = l.arr ? l.arr->child : NULL; s == WS_OK && o; o = o->next, i++)
        s = add_origin(st, o, l.ids[i], l.versions[i], err);
    free(l.ids);
    free(l.versions);
    if (s != WS_OK) {
        cJSON_Delete(l.arr);
        return s;
    }
    *out = l.arr;
    return WS_OK;
}
