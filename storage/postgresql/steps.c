/* steps.c — applying steps (the group-commit path), replacing a state that a
 * replay re-derived, and the step log: labels that arrive later, paged reads,
 * and whole-log replay. */
#include <string.h>

#include "pg_internal.h"

ws_status ws_pg_apply_step(ws_store *store, int64_t tenant, const char *session_id,
                           int64_t expect_prev_step, const float *state, int32_t rows,
                           int32_t cols, const ws_store_log_entry *entry, int64_t *current_step,
                           ws_error *err)
{
    ws_pg *s = ws_pg_of(store);
    if (!ws_store_session_id_valid(session_id))
        return ws_store__session_not_found(session_id, err);
    ws_pg_op op;
    WS_TRY(ws_pg__op_begin_one(s, &op, err));
    /* One statement checks the step and writes state and log (STEP_APPLY): the
     * UPDATE locks the row, and a concurrent writer's commit is re-checked
     * against "step = expect" before this one writes, so two writers of one
     * session cannot both move it from the same step. */
    ws_pg_args a = {0};
    ws_pg__arg_text(&a, session_id);
    ws_pg__arg_int(&a, tenant);
    ws_pg__arg_int(&a, expect_prev_step);
    ws_pg__arg_blob(&a, state, (size_t)rows * (size_t)cols * sizeof(float));
    ws_pg__arg_int(&a, rows);
    ws_pg__arg_int(&a, cols);
    ws_pg__arg_int(&a, entry->model_version);
    ws_pg__arg_int(&a, ws_clock_wall_ms());
    ws_pg__arg_text(&a, entry->instructions_json);
    ws_pg__arg_text(&a, entry->queries_json);
    ws_pg__arg_text(&a, entry->labels_json); /* NULL: not labelled (yet) */
    ws_pg__arg_text(&a, entry->answers_json);
    int64_t n = 0;
    ws_status r = ws_pg__run_n(s, WS_PG_STEP_APPLY, &a, &n, err, "storage: applying a step");
    if (r == WS_OK && n == 0) {
        /* nothing moved: the session is missing, another tenant's, or elsewhere */
        int64_t step = 0;
        r = ws_pg__session_find(s, tenant, session_id, 0, NULL, &step, err);
        if (r == WS_OK) {
            if (current_step) *current_step = step;
            r = ws_store__step_conflict(session_id, step, expect_prev_step, err);
        }
    }
    /* A conflict or failure undoes only this session's unit. */
    r = ws_pg__op_end(s, &op, r, err);
    if (r == WS_OK && current_step) *current_step = expect_prev_step + 1;
    return r;
}

ws_status ws_pg_session_set_state(ws_store *store, int64_t tenant, const char *session_id,
                                  int64_t expect_step, const float *state, int32_t rows,
                                  int32_t cols, int64_t state_version, ws_error *err)
{
    ws_pg *s = ws_pg_of(store);
    ws_pg_op op;
    WS_TRY(ws_pg__op_begin(s, &op, err));
    int64_t sid = 0, step = 0;
    ws_status r = ws_pg__session_find(s, tenant, session_id, 1, &sid, &step, err);
    if (r == WS_OK && step != expect_step)
        r = ws_store__step_conflict(session_id, step, expect_step, err);
    if (r == WS_OK) {
        ws_pg_args a = {0};
        ws_pg__arg_int(&a, sid);
        ws_pg__arg_blob(&a, state, (size_t)rows * (size_t)cols * sizeof(float));
        ws_pg__arg_int(&a, rows);
        ws_pg__arg_int(&a, cols);
        ws_pg__arg_int(&a, state_version);
        ws_pg__arg_int(&a, ws_clock_wall_ms());
        r = ws_pg__run_n(s, WS_PG_SESSION_SET_STATE, &a, NULL, err,
                         "storage: writing a session's state");
    }
    return ws_pg__op_end(s, &op, r, err);
}

ws_status ws_pg_log_set_labels(ws_store *store, int64_t tenant, const char *session_id,
                               int64_t step, const char *labels_json, int replace, ws_error *err)
{
    ws_pg *s = ws_pg_of(store);
    ws_pg_op op;
    WS_TRY(ws_pg__op_begin(s, &op, err));
    int64_t sid = 0;
    ws_status r = ws_pg__session_find(s, tenant, session_id, 0, &sid, NULL, err);
    int same = 0;
    ws_pg_args a = {0};
    ws_pg__arg_int(&a, sid);
    ws_pg__arg_int(&a, step);
    if (r == WS_OK) {
        PGresult *res; /* the log row locked: a concurrent labelling waits */
        r = ws_pg__run(s, WS_PG_LOG_GET_LABELS, &a, &res, err, "storage: reading a step's labels");
        if (r == WS_OK && !PQntuples(res)) {
            r = ws_error_set(err, WS_ERR_NOTFOUND, "session %s has no step %lld", session_id,
                             (long long)step);
        } else if (r == WS_OK && !PQgetisnull(res, 0, 0)) {
            /* A retry with the same labels is fine; different ones would
             * silently rewrite training data unless asked for. */
            same = !strcmp(ws_pg__text(res, 0, 0), labels_json);
            if (!same && !replace)
                r = ws_error_set(err, WS_ERR_CONFLICT,
                                 "step %lld of session %s already has different labels",
                                 (long long)step, session_id);
        }
        PQclear(res);
    }
    if (r == WS_OK && !same) {
        ws_pg__arg_text(&a, labels_json);
        r = ws_pg__run_n(s, WS_PG_LOG_SET_LABELS, &a, NULL, err,
                         "storage: setting a step's labels");
    }
    return ws_pg__op_end(s, &op, r, err);
}

typedef struct {
    ws_store_log_fn fn;
    void *ctx;
} log_ctx;

static ws_status log_row(void *ctx, const PGresult *res, int row, ws_error *err)
{
    (void)err;
    log_ctx *c = ctx;
    ws_store_log_entry e = {
        .step = ws_pg__int(res, row, 0),
        .instructions_json = ws_pg__text(res, row, 1),
        .queries_json = ws_pg__text(res, row, 2),
        .labels_json = ws_pg__text(res, row, 3), /* NULL: unlabelled */
        .answers_json = ws_pg__text(res, row, 4),
        .model_version = ws_pg__int(res, row, 5),
        .time_ms = ws_pg__int(res, row, 6),
    };
    return c->fn(c->ctx, &e);
}

/* Streams the log rows of one session after after_step (limit < 0: all). */
static ws_status read_log(ws_pg *s, int64_t tenant, const char *session_id, int64_t after_step,
                          int limit, ws_store_log_fn fn, void *ctx, ws_error *err)
{
    int64_t sid = 0;
    WS_TRY(ws_pg__session_find(s, tenant, session_id, 0, &sid, NULL, err));
    ws_pg_args a = {0};
    ws_pg__arg_int(&a, sid);
    ws_pg__arg_int(&a, after_step);
    if (limit >= 0)
        ws_pg__arg_int(&a, limit);
    else
        ws_pg__arg_text(&a, NULL); /* LIMIT NULL: no limit */
    log_ctx c = {fn, ctx};
    return ws_pg__each(s, WS_PG_LOG_PAGE, &a, log_row, &c, err, "storage: reading the step log");
}

ws_status ws_pg_log_page(ws_store *store, int64_t tenant, const char *session_id,
                         int64_t after_step, int limit, ws_store_log_fn fn, void *ctx,
                         ws_error *err)
{
    return read_log(ws_pg_of(store), tenant, session_id, after_step, limit, fn, ctx, err);
}

/* One statement, one snapshot: steps appended meanwhile are not seen half-way. */
ws_status ws_pg_log_each(ws_store *store, int64_t tenant, const char *session_id,
                         ws_store_log_fn fn, void *ctx, ws_error *err)
{
    return read_log(ws_pg_of(store), tenant, session_id, 0, -1, fn, ctx, err);
}
