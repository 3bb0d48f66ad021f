/* models.c — models (name, config, training settings, current version, the
 * tenant a model belongs to, if any) and the versions online training records
 * (checkpoint path and SHA-256 per version). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_internal.h"

/* Fills m from a MODEL_GET/FIND/LIST row: owned copies of the texts when own,
 * otherwise pointers into the result (valid while it lives). */
static ws_status read_model(const PGresult *res, int row, ws_store_model *m, int own,
                            ws_error *err)
{
    memset(m, 0, sizeof *m);
    m->id = ws_pg__int(res, row, 0);
    snprintf(m->name, sizeof m->name, "%s", ws_pg__text(res, row, 1));
    m->current_version = ws_pg__int(res, row, 4);
    m->created_ms = ws_pg__int(res, row, 5);
    m->tenant = ws_pg__int(res, row, 6); /* NULL reads 0: shared */
    const char *tenant = ws_pg__text(res, row, 7);
    snprintf(m->tenant_name, sizeof m->tenant_name, "%s", tenant ? tenant : "");
    if (!own) {
        m->config_json = (char *)ws_pg__text(res, row, 2);
        m->training_json = (char *)ws_pg__text(res, row, 3);
        return WS_OK;
    }
    ws_status r = ws_pg__dup(res, row, 2, &m->config_json, err);
    if (r == WS_OK) r = ws_pg__dup(res, row, 3, &m->training_json, err);
    if (r != WS_OK) ws_store_model_clear(m);
    return r;
}

/* Runs a statement expected to find one model. */
static ws_status get_one(ws_pg *s, ws_pg_stmt_id id, const ws_pg_args *a, ws_store_model *out,
                         ws_error *err, const char *what_missing)
{
    PGresult *res;
    WS_TRY(ws_pg__run(s, id, a, &res, err, "storage: reading a model"));
    ws_status r = PQntuples(res)
                      ? read_model(res, 0, out, 1, err)
                      : ws_error_set(err, WS_ERR_NOTFOUND, "model %s not found", what_missing);
    PQclear(res);
    return r;
}

ws_status ws_pg_model_create(ws_store *store, const char *name, int64_t tenant,
                             const char *config_json, const char *training_json, int64_t *id,
                             ws_error *err)
{
    ws_pg *s = ws_pg_of(store);
    ws_pg_op op;
    WS_TRY(ws_pg__op_begin(s, &op, err));
    ws_status r = WS_OK;
    if (tenant) {
        ws_pg_args a = {0};
        ws_pg__arg_int(&a, tenant);
        r = ws_pg__probe(s, WS_PG_TENANT_EXISTS, &a, "tenant", tenant, err);
    }
    if (r == WS_OK) {
        ws_pg_args a = {0};
        ws_pg__arg_text(&a, name);
        ws_pg__arg_text(&a, config_json);
        ws_pg__arg_text(&a, training_json ? training_json : "{}");
        ws_pg__arg_int(&a, ws_clock_wall_ms());
        if (tenant)
            ws_pg__arg_int(&a, tenant);
        else
            ws_pg__arg_text(&a, NULL); /* a shared model's tenant is NULL */
        PGresult *res;
        r = ws_pg__run(s, WS_PG_MODEL_INSERT, &a, &res, err, "storage: creating a model");
        /* ON CONFLICT DO NOTHING: a taken name returns no row (no aborted
         * statement, and the name says which constraint) */
        if (r == WS_OK && PQntuples(res) == 0)
            r = ws_error_set(err, WS_ERR_CONFLICT, "a model named \"%s\" already exists", name);
        else if (r == WS_OK && id)
            *id = ws_pg__int(res, 0, 0);
        PQclear(res);
    }
    return ws_pg__op_end(s, &op, r, err);
}

ws_status ws_pg_model_get(ws_store *store, int64_t id, ws_store_model *out, ws_error *err)
{
    ws_pg_args a = {0};
    ws_pg__arg_int(&a, id);
    char what[32];
    snprintf(what, sizeof what, "%lld", (long long)id);
    return get_one(ws_pg_of(store), WS_PG_MODEL_GET, &a, out, err, what);
}

ws_status ws_pg_model_find(ws_store *store, const char *name, ws_store_model *out, ws_error *err)
{
    ws_pg_args a = {0};
    ws_pg__arg_text(&a, name);
    return get_one(ws_pg_of(store), WS_PG_MODEL_FIND, &a, out, err, name);
}

typedef struct {
    ws_store_model_fn fn;
    void *ctx;
} model_list_ctx;

static ws_status model_row(void *ctx, const PGresult *res, int row, ws_error *err)
{
    model_list_ctx *c = ctx;
    ws_store_model m;
    WS_TRY(read_model(res, row, &m, 0, err));
    return c->fn(c->ctx, &m);
}

ws_status ws_pg_model_list(ws_store *store, ws_store_model_fn fn, void *ctx, ws_error *err)
{
    model_list_ctx c = {fn, ctx};
    return ws_pg__each(ws_pg_of(store), WS_PG_MODEL_LIST, NULL, model_row, &c, err,
                       "storage: listing models");
}

/* Runs a one-row write of models keyed by $1 = id; NOTFOUND if no such model. */
static ws_status update_model(ws_pg *s, ws_pg_stmt_id id, ws_pg_args *a, int64_t model,
                              ws_error *err, const char *what)
{
    int64_t n = 0;
    WS_TRY(ws_pg__run_n(s, id, a, &n, err, what));
    return n ? WS_OK : ws_error_set(err, WS_ERR_NOTFOUND, "model %lld not found", (long long)model);
}

ws_status ws_pg_model_set_training(ws_store *store, int64_t id, const char *training_json,
                                   ws_error *err)
{
    ws_pg *s = ws_pg_of(store);
    if (!training_json) return ws_error_set(err, WS_ERR_INVALID, "training settings are missing");
    ws_pg_op op;
    WS_TRY(ws_pg__op_begin(s, &op, err));
    ws_pg_args a = {0};
    ws_pg__arg_int(&a, id);
    ws_pg__arg_text(&a, training_json);
    ws_status r = update_model(s, WS_PG_MODEL_SET_TRAINING, &a, id, err,
                               "storage: setting training settings");
    return ws_pg__op_end(s, &op, r, err);
}

ws_status ws_pg_model_delete(ws_store *store, int64_t id, ws_error *err)
{
    ws_pg *s = ws_pg_of(store);
    ws_pg_op op;
    WS_TRY(ws_pg__op_begin(s, &op, err));
    int64_t n = 0;
    ws_status r = ws_pg__int_by(s, WS_PG_MODEL_SESSIONS, id, &n, err,
                                "storage: counting a model's sessions");
    if (r == WS_OK && n > 0)
        r = ws_error_set(err, WS_ERR_CONFLICT, "model %lld still has %lld sessions", (long long)id,
                         (long long)n);
    /* versions and vocabulary go with it (ON DELETE CASCADE); a session
     * created meanwhile holds its key lock on the row, so the foreign key of
     * sessions refuses the delete rather than leaving it dangling */
    if (r == WS_OK) {
        ws_pg_args a = {0};
        ws_pg__arg_int(&a, id);
        r = update_model(s, WS_PG_MODEL_DELETE, &a, id, err, "storage: deleting a model");
    }
    return ws_pg__op_end(s, &op, r, err);
}

ws_status ws_pg__model_exists(ws_pg *s, int64_t id, ws_error *err)
{
    ws_pg_args a = {0};
    ws_pg__arg_int(&a, id);
    return ws_pg__probe(s, WS_PG_MODEL_EXISTS, &a, "model", id, err);
}

/* The model's row locked for the unit: version numbers and vocabulary ids of
 * one model are chosen by one writer at a time. */
static ws_status model_lock(ws_pg *s, int64_t id, ws_error *err)
{
    ws_pg_args a = {0};
    ws_pg__arg_int(&a, id);
    return ws_pg__probe(s, WS_PG_MODEL_LOCK, &a, "model", id, err);
}

ws_status ws_pg_version_max(ws_store *store, int64_t model, int64_t *max, ws_error *err)
{
    return ws_pg__int_by(ws_pg_of(store), WS_PG_VERSION_MAX, model, max, err,
                         "storage: reading model versions");
}

static ws_status set_current(ws_pg *s, int64_t model, int64_t version, ws_error *err)
{
    ws_pg_args a = {0};
    ws_pg__arg_int(&a, model);
    ws_pg__arg_int(&a, version);
    return update_model(s, WS_PG_MODEL_SET_CURRENT, &a, model, err,
                        "storage: setting the current version");
}

ws_status ws_pg_version_add(ws_store *store, int64_t model, int64_t version, const char *path,
                            const char *sha256, const char *note, ws_error *err)
{
    ws_pg *s = ws_pg_of(store);
    ws_pg_op op;
    WS_TRY(ws_pg__op_begin(s, &op, err));
    ws_status r = model_lock(s, model, err);
    int64_t max = 0;
    if (r == WS_OK) r = ws_pg_version_max(store, model, &max, err);
    if (r == WS_OK && version <= max) r = ws_store__version_conflict(model, max, err);
    if (r == WS_OK) {
        ws_pg_args a = {0};
        ws_pg__arg_int(&a, model);
        ws_pg__arg_int(&a, version);
        ws_pg__arg_text(&a, path);
        ws_pg__arg_text(&a, note ? note : "");
        ws_pg__arg_int(&a, ws_clock_wall_ms());
        ws_pg__arg_text(&a, sha256);
        r = ws_pg__run_n(s, WS_PG_VERSION_INSERT, &a, NULL, err,
                         "storage: recording a model version");
    }
    if (r == WS_OK) r = set_current(s, model, version, err);
    return ws_pg__op_end(s, &op, r, err);
}

/* Fills v from a VERSION_GET/LIST row (owned copies when own). */
static ws_status read_version(const PGresult *res, int row, ws_store_version *v, int own,
                              ws_error *err)
{
    memset(v, 0, sizeof *v);
    v->model = ws_pg__int(res, row, 0);
    v->version = ws_pg__int(res, row, 1);
    v->created_ms = ws_pg__int(res, row, 4);
    if (!own) {
        v->path = (char *)ws_pg__text(res, row, 2);
        v->note = (char *)ws_pg__text(res, row, 3);
        v->sha256 = (char *)ws_pg__text(res, row, 5);
        return WS_OK;
    }
    ws_status r = ws_pg__dup(res, row, 2, &v->path, err);
    if (r == WS_OK) r = ws_pg__dup(res, row, 3, &v->note, err);
    if (r == WS_OK) r = ws_pg__dup(res, row, 5, &v->sha256, err);
    if (r != WS_OK) ws_store_version_clear(v);
    return r;
}

/* The recorded version, read into out when out is not NULL. */
static ws_status version_get(ws_pg *s, int64_t model, int64_t version, ws_store_version *out,
                             ws_error *err)
{
    ws_pg_args a = {0};
    ws_pg__arg_int(&a, model);
    ws_pg__arg_int(&a, version);
    PGresult *res;
    WS_TRY(ws_pg__run(s, WS_PG_VERSION_GET, &a, &res, err, "storage: reading a model version"));
    ws_status r = !PQntuples(res) ? ws_error_set(err, WS_ERR_NOTFOUND,
                                                 "model %lld has no version %lld",
                                                 (long long)model, (long long)version)
                  : out           ? read_version(res, 0, out, 1, err)
                                  : WS_OK;
    PQclear(res);
    return r;
}

ws_status ws_pg_version_get(ws_store *store, int64_t model, int64_t version,
                            ws_store_version *out, ws_error *err)
{
    return version_get(ws_pg_of(store), model, version, out, err);
}

typedef struct {
    ws_store_version_fn fn;
    void *ctx;
} version_list_ctx;

static ws_status version_row(void *ctx, const PGresult *res, int row, ws_error *err)
{
    version_list_ctx *c = ctx;
    ws_store_version v;
    WS_TRY(read_version(res, row, &v, 0, err));
    return c->fn(c->ctx, &v);
}

ws_status ws_pg_version_list(ws_store *store, int64_t model, ws_store_version_fn fn, void *ctx,
                             ws_error *err)
{
    ws_pg_args a = {0};
    ws_pg__arg_int(&a, model);
    version_list_ctx c = {fn, ctx};
    return ws_pg__each(ws_pg_of(store), WS_PG_VERSION_LIST, &a, version_row, &c, err,
                       "storage: listing model versions");
}

ws_status ws_pg_model_set_current(ws_store *store, int64_t model, int64_t version, ws_error *err)
{
    ws_pg *s = ws_pg_of(store);
    ws_pg_op op;
    WS_TRY(ws_pg__op_begin(s, &op, err));
    /* Only a recorded version can become current: its checkpoint exists. */
    ws_status r = version_get(s, model, version, NULL, err);
    if (r == WS_OK) r = set_current(s, model, version, err);
    return ws_pg__op_end(s, &op, r, err);
}
