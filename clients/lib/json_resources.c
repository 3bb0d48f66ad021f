/* json_resources.c — sessions, models and training settings from JSON, and a
 * training patch to JSON. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* clang-format off */
#define SF(key, kind, member, required) \
    {key, kind, offsetof(ws_client_session, member), 0, required}
/* clang-format on */

ws_client_status wsc_session_from_json(const cJSON *obj, int listing, ws_client_session *out,
                                       ws_client_error *err)
{
    /* A listing carries id, step and updated_ms only. */
    static const wsc_field fields[] = {
        {"id", WSC_STR, offsetof(ws_client_session, id), WS_CLIENT_ID_LEN + 1, 1},
        SF("step", WSC_I64, step, 1),
        SF("updated_ms", WSC_I64, updated_ms, 1),
        {"model", WSC_STR, offsetof(ws_client_session, model), WS_CLIENT_NAME_MAX + 1, 1},
        SF("state_version", WSC_I64, state_version, 1),
        SF("created_ms", WSC_I64, created_ms, 1)};
    memset(out, 0, sizeof *out);
    ws_client_status s = wsc_decode_fields(obj, fields, listing ? 3 : 6, out, err);
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(obj, "state_shape");
    if (s != WS_CLIENT_OK || !shape) return s;
    int64_t dims[2];
    for (int i = 0; i < 2; i++) {
        const cJSON *d = cJSON_GetArrayItem(shape, i);
        if (cJSON_GetArraySize(shape) != 2 ||
            wsc_json_i64(d, 0, 1 << 30, &dims[i], "state_shape", err) != WS_CLIENT_OK)
            return wsc_fail(err, WS_CLIENT_ERR_PROTOCOL,
                            "state_shape must be two non-negative integers");
    }
    out->state_rows = (int)dims[0];
    out->state_cols = (int)dims[1];
    return WS_CLIENT_OK;
}

ws_client_status wsc_training_from_json(const cJSON *obj, ws_client_training *out,
                                        ws_client_error *err)
{
    static const wsc_field fields[] = {
        {"enabled", WSC_BOOL, offsetof(ws_client_training, enabled), 0, 1},
        {"lr", WSC_DBL, offsetof(ws_client_training, lr), 0, 1},
        {"update_every", WSC_INT, offsetof(ws_client_training, update_every), 0, 1},
        {"recall_queries", WSC_INT, offsetof(ws_client_training, recall_queries), 0, 1},
        {"self_supervised", WSC_BOOL, offsetof(ws_client_training, self_supervised), 0, 0},
        {"negative_queries", WSC_INT, offsetof(ws_client_training, negative_queries), 0, 0},
        {"holdout", WSC_DBL, offsetof(ws_client_training, holdout), 0, 0},
        {"gate", WSC_BOOL, offsetof(ws_client_training, gate), 0, 0},
        {"gate_tolerance", WSC_DBL, offsetof(ws_client_training, gate_tolerance), 0, 0},
        {"rehearsal", WSC_INT, offsetof(ws_client_training, rehearsal), 0, 0},
        {"publish_every", WSC_INT, offsetof(ws_client_training, publish_every), 0, 0},
        {"scope", WSC_STR, offsetof(ws_client_training, scope), sizeof out->scope, 0},
        {"rules", WSC_BOOL, offsetof(ws_client_training, rules), 0, 0}};
    *out = WS_CLIENT_TRAINING_KEEP; /* what an older server does not send stays -1 */
    if (!cJSON_IsObject(obj))
        return wsc_fail(err, WS_CLIENT_ERR_PROTOCOL, "training must be an object");
    return wsc_decode_fields(obj, fields, (int)(sizeof fields / sizeof fields[0]), out, err);
}

static ws_client_status config_from_json(const cJSON *obj, ws_client_model *m, ws_client_error *err)
{
/* clang-format off */
#define CF(key) {#key, WSC_INT, offsetof(ws_client_model_config, key), 0, 1}
    /* clang-format on */
    static const wsc_field fields[] = {CF(d),
                                       CF(n_heads),
                                       CF(n_state),
                                       CF(n_upd_layers),
                                       CF(n_ext_layers),
                                       CF(max_fact_len),
                                       CF(vocab_cap),
                                       CF(n_overflow),
                                       CF(d_raw),
                                       {"views", WSC_INT, offsetof(ws_client_model_config, views),
                                        0, 0}};
#undef CF
    if (!cJSON_IsObject(obj))
        return wsc_fail(err, WS_CLIENT_ERR_PROTOCOL, "config must be an object");
    m->config.views = 1; /* a daemon before views */
    ws_client_status s =
        wsc_decode_fields(obj, fields, (int)(sizeof fields / sizeof fields[0]), &m->config, err);
    if (s != WS_CLIENT_OK) return s;
    m->config_json = cJSON_PrintUnformatted(obj);
    return m->config_json ? WS_CLIENT_OK : wsc_fail(err, WS_CLIENT_ERR_NOMEM, "out of memory");
}

static ws_client_status status_from_json(const cJSON *obj, ws_client_model_status *st,
                                         ws_client_error *err)
{
/* clang-format off */
#define MF(key) {#key, WSC_I64, offsetof(ws_client_model_status, key), 0, 1}
    /* clang-format on */
    static const wsc_field fields[] = {
        {"state", WSC_STR, offsetof(ws_client_model_status, state), sizeof st->state, 1},
        MF(serving_version),
        MF(examples_ready),
        MF(examples_labelled),
        MF(examples_trained),
        MF(examples_dropped),
        MF(updates),
        {"last_loss", WSC_DBL, offsetof(ws_client_model_status, last_loss), 0, 1},
        {"examples_self_supervised", WSC_I64,
         offsetof(ws_client_model_status, examples_self_supervised), 0, 0},
        {"examples_held_out", WSC_I64, offsetof(ws_client_model_status, examples_held_out), 0, 0}};
#undef MF
    ws_client_status s =
        wsc_decode_fields(obj, fields, (int)(sizeof fields / sizeof fields[0]), st, err);
    st->present = s == WS_CLIENT_OK;
    return s;
}

/* The gate's counts, anchor and last decision (restored, anchor_version and
 * last optional: servers before them sent none) and served probe accuracy
 * (null: not measured). A reason longer than the struct holds is cut. */
static ws_client_status gate_from_json(const cJSON *obj, ws_client_model_gate *g,
                                       ws_client_error *err)
{
    static const wsc_field fields[] = {
        {"published", WSC_I64, offsetof(ws_client_model_gate, published), 0, 1},
        {"rejected", WSC_I64, offsetof(ws_client_model_gate, rejected), 0, 1},
        {"restored", WSC_I64, offsetof(ws_client_model_gate, restored), 0, 0},
        {"anchor_version", WSC_I64, offsetof(ws_client_model_gate, anchor_version), 0, 0}};
    static const wsc_field last_fields[] = {{"verdict", WSC_STR,
                                             offsetof(ws_client_model_gate, last_verdict),
                                             sizeof g->last_verdict, 1}};
    g->restored = g->anchor_version = 0;
    g->last_verdict[0] = g->last_reason[0] = '\0';
    ws_client_status s =
        wsc_decode_fields(obj, fields, (int)(sizeof fields / sizeof fields[0]), g, err);
    const cJSON *last = cJSON_GetObjectItemCaseSensitive(obj, "last");
    if (s == WS_CLIENT_OK && cJSON_IsObject(last)) {
        s = wsc_decode_fields(last, last_fields, 1, g, err);
        const cJSON *why = cJSON_GetObjectItemCaseSensitive(last, "reason");
        if (cJSON_IsString(why))
            snprintf(g->last_reason, sizeof g->last_reason, "%s", why->valuestring);
    }
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(obj, "served_probe_accuracy");
    g->served_probe_accuracy = cJSON_IsNumber(p) ? p->valuedouble : -1;
    g->present = s == WS_CLIENT_OK;
    return s;
}

/* origin, version_note and tenant, optional (servers before them sent none;
 * a shared model's tenant is null). */
static ws_client_status origin_from_json(const cJSON *obj, ws_client_model *m, ws_client_error *err)
{
    static const wsc_field fields[] = {
        {"origin", WSC_STR, offsetof(ws_client_model, origin), sizeof m->origin, 0}};
    ws_client_status s = wsc_decode_fields(obj, fields, 1, m, err);
    const cJSON *tenant = cJSON_GetObjectItemCaseSensitive(obj, "tenant");
    if (s == WS_CLIENT_OK && tenant && !cJSON_IsNull(tenant)) {
        if (!cJSON_IsString(tenant) || strlen(tenant->valuestring) >= sizeof m->tenant)
            return wsc_fail(err, WS_CLIENT_ERR_PROTOCOL,
                            "answer field \"tenant\" must be null or a tenant name");
        strcpy(m->tenant, tenant->valuestring);
    }
    const cJSON *note = cJSON_GetObjectItemCaseSensitive(obj, "version_note");
    if (s != WS_CLIENT_OK || !note) return s;
    if (!cJSON_IsString(note))
        return wsc_fail(err, WS_CLIENT_ERR_PROTOCOL,
                        "answer field \"version_note\" must be a string");
    m->version_note = strdup(note->valuestring);
    return m->version_note ? WS_CLIENT_OK : wsc_fail(err, WS_CLIENT_ERR_NOMEM, "out of memory");
}

/* The rules that hold, as ws_client_model.rules_holding says (servers before
 * rules sent none). */
static void rules_from_json(const cJSON *arr, ws_client_model *m)
{
    const cJSON *r;
    size_t at = 0;
    cJSON_ArrayForEach(r, arr)
    {
        const cJSON *anchor = cJSON_GetObjectItemCaseSensitive(r, "anchor");
        const cJSON *j = cJSON_GetObjectItemCaseSensitive(r, "anchor_position");
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(r, "position");
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(r, "arity");
        if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "holds")) ||
            !cJSON_IsString(anchor) || !cJSON_IsNumber(j) || !cJSON_IsNumber(k) ||
            !cJSON_IsNumber(n))
            continue;
        int w = snprintf(m->rules_holding + at, sizeof m->rules_holding - at, "%s%s@%d:%d/%d",
                         at ? "," : "", anchor->valuestring, j->valueint, k->valueint, n->valueint);
        if (w < 0 || (size_t)w >= sizeof m->rules_holding - at) {
            m->rules_holding[at] = '\0'; /* what does not fit is left out whole */
            return;
        }
        at += (size_t)w;
    }
}

ws_client_status wsc_model_from_json(const cJSON *obj, ws_client_model *out, ws_client_error *err)
{
    static const wsc_field fields[] = {
        {"name", WSC_STR, offsetof(ws_client_model, name), WS_CLIENT_NAME_MAX + 1, 1},
        {"version", WSC_I64, offsetof(ws_client_model, version), 0, 1},
        {"created_ms", WSC_I64, offsetof(ws_client_model, created_ms), 0, 0}};
    memset(out, 0, sizeof *out);
    ws_client_status s = wsc_decode_fields(obj, fields, 3, out, err);
    if (s == WS_CLIENT_OK)
        s = config_from_json(cJSON_GetObjectItemCaseSensitive(obj, "config"), out, err);
    if (s == WS_CLIENT_OK)
        s = wsc_training_from_json(cJSON_GetObjectItemCaseSensitive(obj, "training"),
                                   &out->training, err);
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(obj, "status");
    if (s == WS_CLIENT_OK && st) s = status_from_json(st, &out->status, err);
    const cJSON *gate = cJSON_GetObjectItemCaseSensitive(obj, "gate");
    if (s == WS_CLIENT_OK && cJSON_IsObject(gate)) s = gate_from_json(gate, &out->gate, err);
    if (s == WS_CLIENT_OK) s = origin_from_json(obj, out, err);
    rules_from_json(cJSON_GetObjectItemCaseSensitive(obj, "rules"), out);
    if (s != WS_CLIENT_OK) ws_client_model_free(out);
    return s;
}

void ws_client_model_free(ws_client_model *m)
{
    free(m->config_json);
    free(m->version_note);
    memset(m, 0, sizeof *m);
}

void ws_client_model_list_free(ws_client_model_list *l)
{
    for (int i = 0; i < l->n; i++) ws_client_model_free(&l->items[i]);
    free(l->items);
    memset(l, 0, sizeof *l);
}

ws_client_status wsc_training_patch_to_json(const ws_client_training_patch *p, cJSON **out,
                                            ws_client_error *err)
{
    cJSON *o = cJSON_CreateObject();
    int ok = o != NULL;
    if (ok && p->enabled >= 0) ok = cJSON_AddBoolToObject(o, "enabled", p->enabled != 0) != NULL;
    if (ok && p->lr > 0) ok = cJSON_AddNumberToObject(o, "lr", p->lr) != NULL;
    if (ok && p->update_every > 0)
        ok = cJSON_AddNumberToObject(o, "update_every", p->update_every) != NULL;
    if (ok && p->recall_queries >= 0)
        ok = cJSON_AddNumberToObject(o, "recall_queries", p->recall_queries) != NULL;
    if (ok && p->self_supervised >= 0)
        ok = cJSON_AddBoolToObject(o, "self_supervised", p->self_supervised != 0) != NULL;
    if (ok && p->negative_queries >= 0)
        ok = cJSON_AddNumberToObject(o, "negative_queries", p->negative_queries) != NULL;
    if (ok && p->holdout >= 0) ok = cJSON_AddNumberToObject(o, "holdout", p->holdout) != NULL;
    if (ok && p->gate >= 0) ok = cJSON_AddBoolToObject(o, "gate", p->gate != 0) != NULL;
    if (ok && p->gate_tolerance >= 0)
        ok = cJSON_AddNumberToObject(o, "gate_tolerance", p->gate_tolerance) != NULL;
    if (ok && p->rehearsal >= 0)
        ok = cJSON_AddNumberToObject(o, "rehearsal", p->rehearsal) != NULL;
    if (ok && p->publish_every > 0)
        ok = cJSON_AddNumberToObject(o, "publish_every", p->publish_every) != NULL;
    if (ok && p->scope[0]) ok = cJSON_AddStringToObject(o, "scope", p->scope) != NULL;
    if (ok && p->rules >= 0) ok = cJSON_AddBoolToObject(o, "rules", p->rules != 0) != NULL;
    if (!ok) {
        cJSON_Delete(o);
        return wsc_fail(err, WS_CLIENT_ERR_NOMEM, "out of memory");
    }
    *out = o;
    return WS_CLIENT_OK;
}
