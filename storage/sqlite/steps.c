/* steps.c — applying steps (the group-commit path), replacing a state that a
 * replay re-derived, and the step log: labels that arrive later, paged reads,
 * and whole-log replay. */
#include <string.h>

#include "sqlite_internal.h"

/* Sets a session's step, state and state version (inside the caller's unit). */
static ws_status write_state(ws_sqlite *s, int64_t sid, int64_t step, const float *state,
                             int32_t rows, int32_t cols, int64_t version, int64_t now,
                             ws_error *err)
{
    sqlite3_stmt *st = ws_sqlite__stmt(s, WS_ST_SESSION_SET_STATE);
    ws_status r = ws_sqlite__bind_int64(s, st, 1, sid, err);
    if (r == WS_OK) r = ws_sqlite__bind_int64(s, st, 2, step, err);
    if (r == WS_OK)
        r = ws_sqlite__bind_blob(s, st, 3, state, (size_t)rows * (size_t)cols * sizeof(float), err);
    if (r == WS_OK) r = ws_sqlite__bind_int64(s, st, 4, rows, err);
    if (r == WS_OK) r = ws_sqlite__bind_int64(s, st, 5, cols, err);
    if (r == WS_OK) r = ws_sqlite__bind_int64(s, st, 6, version, err);
    if (r == WS_OK) r = ws_sqlite__bind_int64(s, st, 7, now, err);
    if (r == WS_OK) r = ws_sqlite__exec(s, st, err, "storage: writing a session's state");
    ws_sqlite__done(st);
    return r;
}

/* Finds the tenant's session and checks it is at expect_step (under the unit's
 * write lock, so the step cannot change before the caller's write). */
static ws_status find_at_step(ws_sqlite *s, int64_t tenant, const char *session_id,
                              int64_t expect_step, int64_t *sid, int64_t *current_step,
                              ws_error *err)
{
    int64_t step = 0;
    ws_status r = ws_sqlite__session_find(s, tenant, session_id, sid, &step, err);
    if (r == WS_OK && step != expect_step) {
        if (current_step) *current_step = step;
        r = ws_store__step_conflict(session_id, step, expect_step, err);
    }
    return r;
}

ws_status ws_sqlite_apply_step(ws_store *store, int64_t tenant, const char *session_id,
                               int64_t expect_prev_step, const float *state, int32_t rows,
                               int32_t cols, const ws_store_log_entry *entry,
                               int64_t *current_step, ws_error *err)
{
    ws_sqlite *s = ws_sqlite_of(store);
    ws_sqlite_op op;
    WS_TRY(ws_sqlite__op_begin(s, &op, err));
    /* Under the write lock (ours, or the group's) the step read here cannot
     * change before the update below: check-then-write is race-free. */
    int64_t sid = 0;
    ws_status r = find_at_step(s, tenant, session_id, expect_prev_step, &sid, current_step, err);
    int64_t next = expect_prev_step + 1, now = ws_clock_wall_ms();
    if (r == WS_OK)
        r = write_state(s, sid, next, state, rows, cols, entry->model_version, now, err);
    if (r == WS_OK) {
        sqlite3_stmt *st = ws_sqlite__stmt(s, WS_ST_LOG_INSERT);
        r = ws_sqlite__bind_int64(s, st, 1, sid, err);
        if (r == WS_OK) r = ws_sqlite__bind_int64(s, st, 2, next, err);
        if (r == WS_OK) r = ws_sqlite__bind_text(s, st, 3, entry->instructions_json, err);
        if (r == WS_OK) r = ws_sqlite__bind_text(s, st, 4, entry->queries_json, err);
        /* labels may be NULL (not labelled yet): SQL NULL */
        if (r == WS_OK) r = ws_sqlite__bind_text(s, st, 5, entry->labels_json, err);
        if (r == WS_OK) r = ws_sqlite__bind_text(s, st, 6, entry->answers_json, err);
        if (r == WS_OK) r = ws_sqlite__bind_int64(s, st, 7, entry->model_version, err);
        if (r == WS_OK) r = ws_sqlite__bind_int64(s, st, 8, now, err);
        if (r == WS_OK) r = ws_sqlite__exec(s, st, err, "storage: appending to the step log");
        ws_sqlite__done(st);
    }
    /* A conflict or failure undoes only this session's unit. */
    r = ws_sqlite__op_end(s, &op, r, err);
    if (r == WS_OK && current_step) *current_step = next;
    return r;
}

ws_status ws_sqlite_session_set_state(ws_store *store, int64_t tenant, const char *session_id,
                                      int64_t expect_step, const float *state, int32_t rows,
                                      int32_t cols, int64_t state_version, ws_error *err)
{
    ws_sqlite *s = ws_sqlite_of(store);
    ws_sqlite_op op;
    WS_TRY(ws_sqlite__op_begin(s, &op, err));
    int64_t sid = 0;
    ws_status r = find_at_step(s, tenant, session_id, expect_step, &sid, NULL, err);
    if (r == WS_OK)
        r = write_state(s, sid, expect_step, state, rows, cols, state_version, ws_clock_wall_ms(),
                        err);
    return ws_sqlite__op_end(s, &op, r, err);
}

ws_status ws_sqlite_log_set_labels(ws_store *store, int64_t tenant, const char *session_id,
                                   int64_t step, const char *labels_json, int replace,
                                   ws_error *err)
{
    ws_sqlite *s = ws_sqlite_of(store);
    ws_sqlite_op op;
    WS_TRY(ws_sqlite__op_begin(s, &op, err));
    int64_t sid = 0;
    ws_status r = ws_sqlite__session_find(s, tenant, session_id, &sid, NULL, err);
    int same = 0;
    if (r == WS_OK) {
        sqlite3_stmt *st = ws_sqlite__stmt(s, WS_ST_LOG_GET_LABELS);
        r = ws_sqlite__bind_int64(s, st, 1, sid, err);
        if (r == WS_OK) r = ws_sqlite__bind_int64(s, st, 2, step, err);
        if (r == WS_OK) {
            int rc = sqlite3_step(st);
            if (rc == SQLITE_DONE) {
                r = ws_error_set(err, WS_ERR_NOTFOUND, "session %s has no step %lld", session_id,
                                 (long long)step);
            } else if (rc != SQLITE_ROW) {
                r = ws_sqlite__sqlfail(s, rc, err, "storage: reading a step's labels");
            } else if (sqlite3_column_type(st, 0) != SQLITE_NULL) {
                const char *old = (const char *)sqlite3_column_text(st, 0);
                /* A retry with the same labels is fine; different ones would
                 * silently rewrite training data unless asked for. */
                same = old && strcmp(old, labels_json) == 0;
                if (!same && !replace)
                    r = ws_error_set(err, WS_ERR_CONFLICT,
                                     "step %lld of session %s already has different labels",
                                     (long long)step, session_id);
            }
        }
        ws_sqlite__done(st);
    }
    if (r == WS_OK && !same) {
        sqlite3_stmt *st = ws_sqlite__stmt(s, WS_ST_LOG_SET_LABELS);
        r = ws_sqlite__bind_int64(s, st, 1, sid, err);
        if (r == WS_OK) r = ws_sqlite__bind_int64(s, st, 2, step, err);
        if (r == WS_OK) r = ws_sqlite__bind_text(s, st, 3, labels_json, err);
        if (r == WS_OK) r = ws_sqlite__exec(s, st, err, "storage: setting a step's labels");
        ws_sqlite__done(st);
    }
    return ws_sqlite__op_end(s, &op, r, err);
}

/* Streams LOG_PAGE rows of one session to fn. */
static ws_status read_log(ws_sqlite *s, int64_t sid, int64_t after_step, int64_t limit,
                          ws_store_log_fn fn, void *ctx, ws_error *err)
{
    sqlite3_stmt *st = ws_sqlite__stmt(s, WS_ST_LOG_PAGE);
    ws_status r = ws_sqlite__bind_int64(s, st, 1, sid, err);
    if (r == WS_OK) r = ws_sqlite__bind_int64(s, st, 2, after_step, err);
    if (r == WS_OK) r = ws_sqlite__bind_int64(s, st, 3, limit, err);
    while (r == WS_OK) {
        int rc = sqlite3_step(st);
        if (rc == SQLITE_DONE) break;
        if (rc != SQLITE_ROW) {
            r = ws_sqlite__sqlfail(s, rc, err, "storage: reading the step log");
            break;
        }
        ws_store_log_entry e = {
            .step = (int64_t)sqlite3_column_int64(st, 0),
            .instructions_json = (const char *)sqlite3_column_text(st, 1),
            .queries_json = (const char *)sqlite3_column_text(st, 2),
            .labels_json = (const char *)sqlite3_column_text(st, 3), /* NULL: unlabelled */
            .answers_json = (const char *)sqlite3_column_text(st, 4),
            .model_version = (int64_t)sqlite3_column_int64(st, 5),
            .time_ms = (int64_t)sqlite3_column_int64(st, 6),
        };
        if (!e.instructions_json || !e.queries_json || !e.answers_json ||
            (!e.labels_json && sqlite3_column_type(st, 3) != SQLITE_NULL)) {
            r = ws_error_set(err, WS_ERR_NOMEM, "storage: out of memory reading the step log");
            break;
        }
        r = fn(ctx, &e);
    }
    ws_sqlite__done(st);
    return r;
}

ws_status ws_sqlite_log_page(ws_store *store, int64_t tenant, const char *session_id,
                             int64_t after_step, int limit, ws_store_log_fn fn, void *ctx,
                             ws_error *err)
{
    ws_sqlite *s = ws_sqlite_of(store);
    int64_t sid = 0;
    WS_TRY(ws_sqlite__session_find(s, tenant, session_id, &sid, NULL, err));
    return read_log(s, sid, after_step, limit, fn, ctx, err);
}

ws_status ws_sqlite_log_each(ws_store *store, int64_t tenant, const char *session_id,
                             ws_store_log_fn fn, void *ctx, ws_error *err)
{
    ws_sqlite *s = ws_sqlite_of(store);
    int64_t sid = 0;
    WS_TRY(ws_sqlite__session_find(s, tenant, session_id, &sid, NULL, err));
    /* One statement = one read snapshot: concurrent steps appended meanwhile
     * are not seen half-way. LIMIT -1 is SQLite's "no limit". */
    return read_log(s, sid, 0, -1, fn, ctx, err);
}
