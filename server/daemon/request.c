/* request.c — request bodies into engine jobs: the strict parse (json.c) and
 * every field's check, with no HTTP and no storage, so that a route only adds
 * who asks and where (tenant, session, model from the path) and the fuzz
 * targets (fuzz/) run exactly what the daemon runs on a client's bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "routes.h"

int ws_http_model_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > WS_STORE_NAME_MAX) return 0;
    for (size_t i = 0; i < n; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", s[i]))
            return 0;
    return 1;
}

ws_status ws_http_session_create_parse(const char *body, size_t len, ws_job *j, ws_error *err)
{
    static const char *const fields[] = {"model", NULL};
    snprintf(j->model_name, sizeof j->model_name, "%s", "default");
    if (!len) return WS_OK;
    cJSON *root = NULL;
    ws_status s = ws_json_parse_object(body, len, &root, err);
    if (s == WS_OK) s = ws_json_only(root, fields, err);
    const cJSON *mn = root ? cJSON_GetObjectItemCaseSensitive(root, "model") : NULL;
    if (s == WS_OK && mn && !cJSON_IsString(mn))
        s = ws_error_set(err, WS_ERR_INVALID, "model must be a string");
    if (s == WS_OK && mn) s = ws_srv_text_check(mn->valuestring, WS_STORE_NAME_MAX, "model", err);
    if (s == WS_OK && mn) snprintf(j->model_name, sizeof j->model_name, "%s", mn->valuestring);
    cJSON_Delete(root);
    return s;
}

/* The job's own copy of parsed facts: their vectors move over (src keeps
 * none), their symbols, which borrow the body, are copied. */
static ws_status facts_take(ws_srv_fact *src, int n, ws_job_fact **out, ws_error *err)
{
    ws_job_fact *f = n ? calloc((size_t)n, sizeof *f) : NULL;
    *out = f;
    if (n && !f) return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        f[i].value = src[i].value;
        f[i].vec = src[i].vec, f[i].n_vec = src[i].n_vec;
        src[i].vec = NULL;
    }
    for (int i = 0; i < n; i++)
        WS_TRY(ws_job_fact_syms(&f[i], src[i].sym, src[i].sym_len, src[i].n_sym, err));
    return WS_OK;
}

static void srv_facts_free(ws_srv_fact *f, int n)
{
    for (int i = 0; i < n; i++) free(f[i].vec);
    free(f);
}

/* The labels of a LABELS job (ls: checked booleans). */
static ws_status labels_take(const cJSON *ls, ws_job *j, ws_error *err)
{
    j->labels = malloc(sizeof(int) * (size_t)cJSON_GetArraySize(ls));
    if (!j->labels) return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    for (const cJSON *l = ls->child; l; l = l->next) j->labels[j->n_labels++] = cJSON_IsTrue(l);
    return WS_OK;
}

/* The step log's JSON text of a job (engine.h): what was sent, normalised. */
static ws_status log_text(ws_job *j, const cJSON *ins, const cJSON *qs, const cJSON *ls,
                          ws_error *err)
{
    j->labels_json = ls ? cJSON_PrintUnformatted(ls) : NULL;
    int ok = !ls || j->labels_json;
    if (j->kind == WS_JOB_STEP) {
        cJSON *empty = cJSON_CreateArray();
        j->instr_json = cJSON_PrintUnformatted(ins ? ins : empty);
        j->query_json = cJSON_PrintUnformatted(qs ? qs : empty);
        cJSON_Delete(empty);
        ok = ok && j->instr_json && j->query_json;
    }
    return ok ? WS_OK : ws_error_set(err, WS_ERR_NOMEM, "out of memory");
}

ws_status ws_http_session_job_parse(const char *body, size_t len, ws_job *j, ws_error *err)
{
    static const char *const step_fields[] = {"expect_step", "instructions", "queries", "labels",
                                              NULL};
    static const char *const query_fields[] = {"queries", NULL};
    static const char *const label_fields[] = {"labels", "replace", NULL};
    ws_job_kind kind = j->kind;
    j->expect_step = -1;
    cJSON *root = NULL;
    ws_srv_fact *instr = NULL, *query = NULL;
    int n_instr = 0, n_query = 0;
    ws_status s = ws_json_parse_object(body, len, &root, err);
    const char *const *fields = kind == WS_JOB_STEP    ? step_fields
                                : kind == WS_JOB_QUERY ? query_fields
                                                       : label_fields;
    if (s == WS_OK) s = ws_json_only(root, fields, err);
    const cJSON *ins = cJSON_GetObjectItemCaseSensitive(root, "instructions");
    const cJSON *qs = cJSON_GetObjectItemCaseSensitive(root, "queries");
    const cJSON *ls = cJSON_GetObjectItemCaseSensitive(root, "labels");
    const cJSON *es = cJSON_GetObjectItemCaseSensitive(root, "expect_step");
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(root, "replace");
    if (s == WS_OK && es)
        s = ws_json_int(es, 0, INT64_MAX / 2, &j->expect_step, "expect_step", err);
    if (s == WS_OK) s = ws_json_facts(ins, 1, &instr, &n_instr, err);
    if (s == WS_OK) s = ws_json_facts(qs, 0, &query, &n_query, err);
    if (s == WS_OK && kind == WS_JOB_QUERY && !qs)
        s = ws_error_set(err, WS_ERR_INVALID, "queries is required");
    if (s == WS_OK && kind == WS_JOB_LABELS) {
        if (!ls)
            s = ws_error_set(err, WS_ERR_INVALID, "labels is required");
        else if (!cJSON_IsArray(ls) || cJSON_GetArraySize(ls) < 1 ||
                 cJSON_GetArraySize(ls) > WS_SRV_MAX_ITEMS)
            s = ws_error_set(err, WS_ERR_INVALID, "labels must be an array of 1..%d booleans",
                             WS_SRV_MAX_ITEMS);
        else
            s = ws_json_labels(ls, NULL, cJSON_GetArraySize(ls), err);
        if (s == WS_OK && rp && !cJSON_IsBool(rp))
            s = ws_error_set(err, WS_ERR_INVALID, "replace must be a boolean");
        j->replace = rp && cJSON_IsTrue(rp);
        if (s == WS_OK) s = labels_take(ls, j, err);
    } else if (s == WS_OK && ls) {
        s = ws_json_labels(ls, query, n_query, err);
        j->has_labels = 1;
    }
    if (s == WS_OK && kind != WS_JOB_QUERY) s = log_text(j, ins, qs, ls, err);
    j->n_instr = n_instr, j->n_query = n_query;
    if (s == WS_OK) s = facts_take(instr, n_instr, &j->instr, err);
    if (s == WS_OK) s = facts_take(query, n_query, &j->query, err);
    srv_facts_free(instr, n_instr);
    srv_facts_free(query, n_query);
    cJSON_Delete(root);
    return s;
}

ws_status ws_http_model_create_parse(const char *body, size_t len, ws_job *j, char *tenant,
                                     ws_error *err)
{
    static const char *const fields[] = {"name", "config", "training", "seed", "tenant", NULL};
    cJSON *root = NULL;
    ws_status s = ws_json_parse_object(body, len, &root, err);
    if (s == WS_OK) s = ws_json_only(root, fields, err);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(root, "name");
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(root, "config");
    const cJSON *seed = cJSON_GetObjectItemCaseSensitive(root, "seed");
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(root, "training");
    const cJSON *tn = cJSON_GetObjectItemCaseSensitive(root, "tenant");
    tenant[0] = '\0';
    if (s == WS_OK && (!cJSON_IsString(name) || !ws_http_model_name_ok(name->valuestring)))
        s = ws_error_set(err, WS_ERR_INVALID, "name must be 1..64 characters of [A-Za-z0-9._-]");
    /* The config's memory is the engine's to bound (--max-model-memory): it
     * knows the models loaded beside it. */
    j->cfg = ws_model_config_default();
    if (s == WS_OK && cfg) s = ws_model_config_from_json(cfg, 0, &j->cfg, err);
    int64_t sd = 1;
    if (s == WS_OK && seed) s = ws_json_int(seed, 0, INT64_MAX / 2, &sd, "seed", err);
    j->seed = (uint64_t)sd;
    j->training = ws_srv_training_default();
    if (s == WS_OK && tr) s = ws_srv_training_parse(tr, &j->training, err);
    if (s == WS_OK && tn && !cJSON_IsNull(tn) && !cJSON_IsString(tn))
        s = ws_error_set(err, WS_ERR_INVALID, "tenant must be a string or null");
    if (s == WS_OK && cJSON_IsString(tn) && !ws_http_model_name_ok(tn->valuestring))
        s = ws_error_set(err, WS_ERR_INVALID,
                         "tenant must be a tenant name: 1..64 characters of [A-Za-z0-9._-]");
    if (s == WS_OK && cJSON_IsString(tn)) strcpy(tenant, tn->valuestring);
    if (s == WS_OK) strcpy(j->model_name, name->valuestring);
    cJSON_Delete(root);
    return s;
}

ws_status ws_http_training_patch_parse(const char *body, size_t len, ws_job *j, ws_error *err)
{
    j->training = ws_srv_training_default();
    cJSON *root = NULL;
    ws_status s = ws_json_parse_object(body, len, &root, err);
    /* The fields sent, checked here; the engine applies them to the settings in force. */
    if (s == WS_OK) s = ws_srv_training_parse_fields(root, &j->training, &j->training_fields, err);
    cJSON_Delete(root);
    return s;
}
