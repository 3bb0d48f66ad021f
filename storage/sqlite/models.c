/* models.c — models (name, config, training settings, current version, the
 * tenant a model belongs to, if any) and the versions online training records
 * (checkpoint path per version). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite_internal.h"

/* Fills m from a MODEL_GET/FIND/LIST row: owned copies of the texts when own,
 * otherwise pointers into the row (valid until the next step). */
static ws_status read_model(sqlite3_stmt *st, ws_store_model *m, int own, ws_error *err)
{
    memset(m, 0, sizeof *m);
    m->id = (int64_t)sqlite3_column_int64(st, 0);
    const unsigned char *name = sqlite3_column_text(st, 1);
    snprintf(m->name, sizeof m->name, "%s", name ? (const char *)name : "");
    m->current_version = (int64_t)sqlite3_column_int64(st, 4);
    m->created_ms = (int64_t)sqlite3_column_int64(st, 5);
    m->tenant = (int64_t)sqlite3_column_int64(st, 6); /* NULL reads 0: shared */
    const unsigned char *tenant = sqlite3_column_text(st, 7);
    snprintf(m->tenant_name, sizeof m->tenant_name, "%s", tenant ? (const char *)tenant : "");
    if (own) {
        ws_status r = ws_sqlite__dup_column(st, 2, &m->config_json, err);
        if (r == WS_OK) r = ws_sqlite__dup_column(st, 3, &m->training_json, err);
        if (r != WS_OK) ws_store_model_clear(m);
        return r;
    }
    m->config_json = (char *)sqlite3_column_text(st, 2);
    m->training_json = (char *)sqlite3_column_text(st, 3);
    if (!m->config_json || !m->training_json) /* NOT NULL columns: only OOM */
        return ws_error_set(err, WS_ERR_NOMEM, "storage: out of memory reading a model");
    return WS_OK;
}

/* Steps a statement expected to find one model. */
static ws_status get_one(ws_sqlite *s, sqlite3_stmt *st, ws_store_model *out, ws_error *err,
                         const char *what_missing)
{
    int rc = sqlite3_step(st);
    ws_status r;
    if (rc == SQLITE_ROW)
        r = read_model(st, out, 1, err);
    else if (rc == SQLITE_DONE)
        r = ws_error_set(err, WS_ERR_NOTFOUND, "model %s not found", what_missing);
    else
        r = ws_sqlite__sqlfail(s, rc, err, "storage: reading a model");
    ws_sqlite__done(st);
    return r;
}

ws_status ws_sqlite_model_create(ws_store *store, const char *name, int64_t tenant,
                                 const char *config_json, const char *training_json, int64_t *id,
                                 ws_error *err)
{
    ws_sqlite *s = ws_sqlite_of(store);
    ws_sqlite_op op;
    WS_TRY(ws_sqlite__op_begin(s, &op, err));
    /* Explicit lookups turn a taken name into CONFLICT and a missing tenant into
     * NOTFOUND; a constraint failure would not say which constraint. */
    ws_status r = tenant ? ws_sqlite__tenant_exists(s, tenant, err) : WS_OK;
    sqlite3_stmt *st = ws_sqlite__stmt(s, WS_ST_MODEL_FIND);
    if (r == WS_OK) r = ws_sqlite__bind_text(s, st, 1, name, err);
    if (r == WS_OK) {
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
            r = ws_error_set(err, WS_ERR_CONFLICT, "a model named \"%s\" already exists", name);
        else if (rc != SQLITE_DONE)
            r = ws_sqlite__sqlfail(s, rc, err, "storage: looking up a model");
    }
    ws_sqlite__done(st);
    if (r == WS_OK) {
        st = ws_sqlite__stmt(s, WS_ST_MODEL_INSERT);
        r = ws_sqlite__bind_text(s, st, 1, name, err);
        if (r == WS_OK) r = ws_sqlite__bind_text(s, st, 2, config_json, err);
        const char *training = training_json ? training_json : "{}";
        if (r == WS_OK) r = ws_sqlite__bind_text(s, st, 3, training, err);
        if (r == WS_OK) r = ws_sqlite__bind_int64(s, st, 4, ws_clock_wall_ms(), err);
        /* a shared model's tenant is NULL: no tenants row 0 to refer to */
        if (r == WS_OK && tenant) r = ws_sqlite__bind_int64(s, st, 5, tenant, err);
        if (r == WS_OK) r = ws_sqlite__exec(s, st, err, "storage: creating a model");
        ws_sqlite__done(st);
        if (r == WS_OK && id) *id = (int64_t)sqlite3_last_insert_rowid(s->db);
    }
    return ws_sqlite__op_end(s, &op, r, err);
}

ws_status ws_sqlite_model_get(ws_store *store, int64_t id, ws_store_model *out, ws_error *err)
{
    ws_sqlite *s = ws_sqlite_of(store);
    sqlite3_stmt *st = ws_sqlite__stmt(s, WS_ST_MODEL_GET);
    ws_status r = ws_sqlite__bind_int64(s, st, 1, id, err);
    if (r != WS_OK) {
        ws_sqlite__done(st);
        return r;
    }
    char what[32];
    snprintf(what, sizeof what, "%lld", (long long)id);
    return get_one(s, st, out, err, what);
}

ws_status ws_sqlite_model_find(ws_store *store, const char *name, ws_store_model *out,
                               ws_error *err)
{
    ws_sqlite *s = ws_sqlite_of(store);
    sqlite3_stmt *st = ws_sqlite__stmt(s, WS_ST_MODEL_FIND);
    ws_status r = ws_sqlite__bind_text(s, st, 1, name, err);
    if (r != WS_OK) {
        ws_sqlite__done(st);
        return r;
    }
    return get_one(s, st, out, err, name);
}

ws_status ws_sqlite_model_list(ws_store *store, ws_store_model_fn fn, void *ctx, ws_error *err)
{
    ws_sqlite *s = ws_sqlite_of(store);
    sqlite3_stmt *st = ws_sqlite__stmt(s, WS_ST_MODEL_LIST);
    ws_status r = WS_OK;
    for (;;) {
        int rc = sqlite3_step(st);
        if (rc == SQLITE_DONE) break;
        if (rc != SQLITE_ROW) {
            r = ws_sqlite__sqlfail(s, rc, err, "storage: listing models");
            break;
        }
        ws_store_model m;
        if ((r = read_model(st, &m, 0, err)) != WS_OK) break;
        r = fn(ctx, &m);
        if (r != WS_OK) break;
    }
    ws_sqlite__done(st);
    return r;
}

/* Runs a one-row UPDATE of models keyed by ?1 = id; NOTFOUND if no such model. */
static ws_status update_model(ws_sqlite *s, sqlite3_stmt *st, int64_t id, ws_error *err,
                              const char *what)
{
    ws_status r = ws_sqlite__bind_int64(s, st, 1, id, err);
    if (r == WS_OK) r = ws_sqlite__exec(s, st, err, what);
    ws_sqlite__done(st);
    if (r == WS_OK && sqlite3_changes(s->db) == 0)
        r = ws_error_set(err, WS_ERR_NOTFOUND, "model %lld not found", (long long)id);
    return r;
}

ws_status ws_sqlite_model_set_training(ws_store *store, int64_t id, const char *training_json,
                                       ws_error *err)
{
    ws_sqlite *s = ws_sqlite_of(store);
    if (!training_json) return ws_error_set(err, WS_ERR_INVALID, "training settings are missing");
    ws_sqlite_op op;
    WS_TRY(ws_sqlite__op_begin(s, &op, err));
    sqlite3_stmt *st = ws_sqlite__stmt(s, WS_ST_MODEL_SET_TRAINING);
    ws_status r = ws_sqlite__bind_text(s, st, 2, training_json, err);
    if (r == WS_OK)
        r = update_model(s, st, id, err, "storage: setting training settings");
    else
        ws_sqlite__done(st);
    return ws_sqlite__op_end(s, &op, r, err);
}

ws_status ws_sqlite_model_delete(ws_store *store, int64_t id, ws_error *err)
{
    ws_sqlite *s = ws_sqlite_of(store);
    ws_sqlite_op op;
    WS_TRY(ws_sqlite__op_begin(s, &op, err));
    int64_t n = 0;
    ws_status r = ws_sqlite__query_int64_by(s, WS_ST_MODEL_SESSIONS, id, &n, err,
                                            "storage: counting a model's sessions");
    if (r == WS_OK && n > 0)
        r = ws_error_set(err, WS_ERR_CONFLICT, "model %lld still has %lld sessions", (long long)id,
                         (long long)n);
    /* versions and vocabulary go with it (ON DELETE CASCADE) */
    if (r == WS_OK)
        r = update_model(s, ws_sqlite__stmt(s, WS_ST_MODEL_DELETE), id, err,
                         "storage: deleting a model");
    return ws_sqlite__op_end(s, &op, r, err);
}

ws_status ws_sqlite__model_exists(ws_sqlite *s, int64_t id, ws_error *err)
{
    sqlite3_stmt *st = ws_sqlite__stmt(s, WS_ST_MODEL_EXISTS);
    return ws_sqlite__probe(s, st, ws_sqlite__bind_int64(s, st, 1, id, err), "model", id, err);
}

ws_status ws_sqlite__model_usable(ws_sqlite *s, int64_t id, int64_t tenant, ws_error *err)
{
    sqlite3_stmt *st = ws_sqlite__stmt(s, WS_ST_MODEL_USABLE);
    ws_status r = ws_sqlite__bind_int64(s, st, 1, id, err);
    if (r == WS_OK) r = ws_sqlite__bind_int64(s, st, 2, tenant, err);
    return ws_sqlite__probe(s, st, r, "model", id, err);
}

/* Sets models.current_version inside the caller's unit. */
static ws_status set_current(ws_sqlite *s, int64_t model, int64_t version, ws_error *err)
{
    sqlite3_stmt *st = ws_sqlite__stmt(s, WS_ST_MODEL_SET_CURRENT);
    ws_status r = ws_sqlite__bind_int64(s, st, 2, version, err);
    if (r != WS_OK) {
        ws_sqlite__done(st);
        return r;
    }
    return update_model(s, st, model, err, "storage: setting the current version");
}

static ws_status version_max(ws_sqlite *s, int64_t model, int64_t *max, ws_error *err)
{
    return ws_sqlite__query_int64_by(s, WS_ST_VERSION_MAX, model, max, err,
                                     "storage: reading model versions");
}

ws_status ws_sqlite_version_max(ws_store *store, int64_t model, int64_t *max, ws_error *err)
{
    return version_max(ws_sqlite_of(store), model, max, err);
}

ws_status ws_sqlite_version_add(ws_store *store, int64_t model, int64_t version, const char *path,
                                const char *sha256, const char *note, ws_error *err)
{
    ws_sqlite *s = ws_sqlite_of(store);
    ws_sqlite_op op;
    WS_TRY(ws_sqlite__op_begin(s, &op, err));
    ws_status r = ws_sqlite__model_exists(s, model, err);
    int64_t max = 0;
    if (r == WS_OK) r = version_max(s, model, &max, err);
    if (r == WS_OK && version <= max) r = ws_store__version_conflict(model, max, err);
    if (r == WS_OK) {
        sqlite3_stmt *st = ws_sqlite__stmt(s, WS_ST_VERSION_INSERT);
        r = ws_sqlite__bind_int64(s, st, 1, model, err);
        if (r == WS_OK) r = ws_sqlite__bind_int64(s, st, 2, version, err);
        if (r == WS_OK) r = ws_sqlite__bind_text(s, st, 3, path, err);
        if (r == WS_OK) r = ws_sqlite__bind_text(s, st, 4, note ? note : "", err);
        if (r == WS_OK) r = ws_sqlite__bind_int64(s, st, 5, ws_clock_wall_ms(), err);
        if (r == WS_OK) r = ws_sqlite__bind_text(s, st, 6, sha256, err);
        if (r == WS_OK) r = ws_sqlite__exec(s, st, err, "storage: recording a model version");
        ws_sqlite__done(st);
    }
    if (r == WS_OK) r = set_current(s, model, version, err);
    return ws_sqlite__op_end(s, &op, r, err);
}

/* Fills v from a VERSION_GET/LIST row (owned copies when own). */
static ws_status read_version(sqlite3_stmt *st, ws_store_version *v, int own, ws_error *err)
{
    memset(v, 0, sizeof *v);
    v->model = (int64_t)sqlite3_column_int64(st, 0);
    v->version = (int64_t)sqlite3_column_int64(st, 1);
    v->created_ms = (int64_t)sqlite3_column_int64(st, 4);
    if (own) {
        ws_status r = ws_sqlite__dup_column(st, 2, &v->path, err);
        if (r == WS_OK) r = ws_sqlite__dup_column(st, 3, &v->note, err);
        if (r == WS_OK) r = ws_sqlite__dup_column(st, 5, &v->sha256, err);
        if (r != WS_OK) ws_store_version_clear(v);
        return r;
    }
    v->path = (char *)sqlite3_column_text(st, 2);
    v->note = (char *)sqlite3_column_text(st, 3);
    v->sha256 = (char *)sqlite3_column_text(st, 5);
    if (!v->path || !v->note || !v->sha256) /* NOT NULL columns: only OOM */
        return ws_error_set(err, WS_ERR_NOMEM, "storage: out of memory reading a version");
    return WS_OK;
}

ws_status ws_sqlite_version_get(ws_store *store, int64_t model, int64_t version,
                                ws_store_version *out, ws_error *err)
{
    ws_sqlite *s = ws_sqlite_of(store);
    sqlite3_stmt *st = ws_sqlite__stmt(s, WS_ST_VERSION_GET);
    ws_status r = ws_sqlite__bind_int64(s, st, 1, model, err);
    if (r == WS_OK) r = ws_sqlite__bind_int64(s, st, 2, version, err);
    if (r == WS_OK) {
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
            r = read_version(st, out, 1, err);
        else if (rc == SQLITE_DONE)
            r = ws_error_set(err, WS_ERR_NOTFOUND, "model %lld has no version %lld",
                             (long long)model, (long long)version);
        else
            r = ws_sqlite__sqlfail(s, rc, err, "storage: reading a model version");
    }
    ws_sqlite__done(st);
    return r;
}

ws_status ws_sqlite_version_list(ws_store *store, int64_t model, ws_store_version_fn fn, void *ctx,
                                 ws_error *err)
{
    ws_sqlite *s = ws_sqlite_of(store);
    sqlite3_stmt *st = ws_sqlite__stmt(s, WS_ST_VERSION_LIST);
    ws_status r = ws_sqlite__bind_int64(s, st, 1, model, err);
    while (r == WS_OK) {
        int rc = sqlite3_step(st);
        if (rc == SQLITE_DONE) break;
        if (rc != SQLITE_ROW) {
            r = ws_sqlite__sqlfail(s, rc, err, "storage: listing model versions");
            break;
        }
        ws_store_version v;
        if ((r = read_version(st, &v, 0, err)) != WS_OK) break;
        r = fn(ctx, &v);
    }
    ws_sqlite__done(st);
    return r;
}

ws_status ws_sqlite_model_set_current(ws_store *store, int64_t model, int64_t version,
                                      ws_error *err)
{
    ws_sqlite *s = ws_sqlite_of(store);
    ws_sqlite_op op;
    WS_TRY(ws_sqlite__op_begin(s, &op, err));
    /* Only a recorded version can become current: its checkpoint exists. */
    sqlite3_stmt *st = ws_sqlite__stmt(s, WS_ST_VERSION_GET);
    ws_status r = ws_sqlite__bind_int64(s, st, 1, model, err);
    if (r == WS_OK) r = ws_sqlite__bind_int64(s, st, 2, version, err);
    if (r == WS_OK) {
        int rc = sqlite3_step(st);
        if (rc == SQLITE_DONE)
            r = ws_error_set(err, WS_ERR_NOTFOUND, "model %lld has no version %lld",
                             (long long)model, (long long)version);
        else if (rc != SQLITE_ROW)
            r = ws_sqlite__sqlfail(s, rc, err, "storage: reading a model version");
    }
    ws_sqlite__done(st);
    if (r == WS_OK) r = set_current(s, model, version, err);
    return ws_sqlite__op_end(s, &op, r, err);
}
