/* store.c — the ws_store_* API (storage.h) as thin wrappers over the open
 * store's backend (store_ops.h): each checks what storage.h promises for every
 * backend alike, then dispatches through s->ops. */
#include <string.h>

#include "store_ops.h"
#include "store_util.h"

ws_status ws_store__enter(ws_store *s, ws_error *err)
{
    if (!s) return ws_error_set(err, WS_ERR_INVALID, "storage: no store (NULL handle)");
    if (s->in_callback)
        return ws_error_set(err, WS_ERR_INVALID,
                            "storage: called from inside one of its own listing callbacks "
                            "(collect first, or use another ws_store)");
    return WS_OK;
}

/* Runs a listing op with s->in_callback set, so that its callbacks cannot
 * re-enter s (the backend's statement is still running). */
#define WS_STORE_LISTING(s, call)          \
    do {                                   \
        (s)->in_callback = 1;              \
        ws_status listing_ = (call);       \
        (s)->in_callback = 0;              \
        return listing_;                   \
    } while (0)

static ws_status check_page(int limit, ws_error *err)
{
    if (limit < 1 || limit > WS_STORE_PAGE_MAX)
        return ws_error_set(err, WS_ERR_INVALID, "page limit must be 1..%d", WS_STORE_PAGE_MAX);
    return WS_OK;
}

/* ---- connection ------------------------------------------------------------ */

ws_status ws_store_open(const char *location, ws_store_durability durability, int create,
                        ws_store **out, ws_error *err)
{
    *out = NULL;
    const ws_store_ops *ops = NULL;
    const char *target = NULL;
    if (!location || !*location)
        return ws_error_set(err, WS_ERR_INVALID, "storage: empty database path");
    WS_TRY(ws_store__resolve(location, &ops, &target, err));
    if (!*target) return ws_error_set(err, WS_ERR_INVALID, "storage: empty database path");
    if (durability != WS_STORE_DURABILITY_NORMAL && durability != WS_STORE_DURABILITY_FULL)
        return ws_error_set(err, WS_ERR_INVALID, "storage: unknown durability %d", (int)durability);
    WS_TRY(ops->open(target, durability, create, out, err));
    (*out)->ops = ops;
    return WS_OK;
}

void ws_store_close(ws_store *s)
{
    if (s) s->ops->close(s);
}

ws_status ws_store_get_info(ws_store *s, ws_store_info *out, ws_error *err)
{
    WS_STORE_ENTER(s, err);
    return s->ops->get_info(s, out, err);
}

ws_status ws_store_integrity_check(ws_store *s, ws_error *err)
{
    WS_STORE_ENTER(s, err);
    return s->ops->integrity_check(s, err);
}

ws_status ws_store_checkpoint(ws_store *s, ws_error *err)
{
    WS_STORE_ENTER(s, err);
    return s->ops->checkpoint(s, err);
}

static ws_status backup_no_progress(void *ctx, int64_t done, int64_t total)
{
    (void)ctx, (void)done, (void)total;
    return WS_OK;
}

ws_status ws_store_backup(ws_store *s, const char *dest, int step_pages, ws_store_backup_fn fn,
                          void *ctx, ws_error *err)
{
    WS_STORE_ENTER(s, err);
    if (!dest || !*dest) return ws_error_set(err, WS_ERR_INVALID, "storage: backup: empty path");
    if (step_pages < 1)
        return ws_error_set(err, WS_ERR_INVALID, "storage: backup: %d pages per step", step_pages);
    if (ws_store_in_transaction(s))
        return ws_error_set(err, WS_ERR_INVALID, "storage: backup inside a transaction");
    /* fn runs between the backend's steps, with the copy's snapshot open */
    WS_STORE_LISTING(s, s->ops->backup(s, dest, step_pages, fn ? fn : backup_no_progress,
                                       fn ? ctx : NULL, err));
}

/* ---- transactions ---------------------------------------------------------- */

ws_status ws_store_begin(ws_store *s, ws_error *err)
{
    WS_STORE_ENTER(s, err);
    return s->ops->begin(s, err);
}

ws_status ws_store_commit(ws_store *s, ws_error *err)
{
    WS_STORE_ENTER(s, err);
    return s->ops->commit(s, err);
}

ws_status ws_store_rollback(ws_store *s, ws_error *err)
{
    WS_STORE_ENTER(s, err);
    return s->ops->rollback(s, err);
}

int ws_store_in_transaction(const ws_store *s) { return s && s->ops->in_transaction(s); }

int ws_store_shared(const ws_store *s) { return s && s->ops->shared; }

ws_status ws_store_leader_try(ws_store *s, int64_t key, int *held, ws_error *err)
{
    *held = 0;
    WS_STORE_ENTER(s, err);
    if (key < 0) return ws_error_set(err, WS_ERR_INVALID, "storage: lock key must be >= 0");
    return s->ops->leader_try(s, key, held, err);
}

/* ---- tenants and API keys (creation and verification: keys.c) --------------- */

ws_status ws_store_tenant_ensure(ws_store *s, const char *name, int64_t *id, ws_error *err)
{
    WS_STORE_ENTER(s, err);
    WS_TRY(ws_store__check_name("tenant", name, err));
    return s->ops->tenant_ensure(s, name, id, err);
}

ws_status ws_store_tenant_find(ws_store *s, const char *name, int64_t *id, ws_error *err)
{
    WS_STORE_ENTER(s, err);
    WS_TRY(ws_store__check_name("tenant", name, err));
    return s->ops->tenant_find(s, name, id, err);
}

ws_status ws_store_key_list(ws_store *s, ws_store_key_fn fn, void *ctx, ws_error *err)
{
    WS_STORE_ENTER(s, err);
    WS_STORE_LISTING(s, s->ops->key_list(s, fn, ctx, err));
}

ws_status ws_store_key_revoke(ws_store *s, int64_t key_id, ws_error *err)
{
    WS_STORE_ENTER(s, err);
    return s->ops->key_revoke(s, key_id, err);
}

ws_status ws_store_key_count_active(ws_store *s, int64_t *n, ws_error *err)
{
    WS_STORE_ENTER(s, err);
    return s->ops->key_count_active(s, n, err);
}

/* ---- models and versions ---------------------------------------------------- */

ws_status ws_store_model_create(ws_store *s, const char *name, int64_t tenant,
                                const char *config_json, const char *training_json, int64_t *id,
                                ws_error *err)
{
    WS_STORE_ENTER(s, err);
    WS_TRY(ws_store__check_name("model", name, err));
    if (!config_json) return ws_error_set(err, WS_ERR_INVALID, "model config is missing");
    if (tenant < 0) return ws_error_set(err, WS_ERR_INVALID, "tenant id %lld", (long long)tenant);
    return s->ops->model_create(s, name, tenant, config_json, training_json, id, err);
}

ws_status ws_store_model_get(ws_store *s, int64_t id, ws_store_model *out, ws_error *err)
{
    WS_STORE_ENTER(s, err);
    return s->ops->model_get(s, id, out, err);
}

ws_status ws_store_model_find(ws_store *s, const char *name, ws_store_model *out, ws_error *err)
{
    WS_STORE_ENTER(s, err);
    WS_TRY(ws_store__check_name("model", name, err));
    return s->ops->model_find(s, name, out, err);
}

ws_status ws_store_model_list(ws_store *s, ws_store_model_fn fn, void *ctx, ws_error *err)
{
    WS_STORE_ENTER(s, err);
    WS_STORE_LISTING(s, s->ops->model_list(s, fn, ctx, err));
}

ws_status ws_store_model_set_training(ws_store *s, int64_t id, const char *training_json,
                                      ws_error *err)
{
    WS_STORE_ENTER(s, err);
    return s->ops->model_set_training(s, id, training_json, err);
}

ws_status ws_store_model_delete(ws_store *s, int64_t id, ws_error *err)
{
    WS_STORE_ENTER(s, err);
    return s->ops->model_delete(s, id, err);
}

ws_status ws_store_version_add(ws_store *s, int64_t model, int64_t version, const char *path,
                               const char *sha256, const char *note, ws_error *err)
{
    WS_STORE_ENTER(s, err);
    if (!path || !*path) return ws_error_set(err, WS_ERR_INVALID, "checkpoint path is missing");
    if (!sha256 || strlen(sha256) != 64)
        return ws_error_set(err, WS_ERR_INVALID, "checkpoint SHA-256 must be 64 hex digits");
    if (version < 1) return ws_error_set(err, WS_ERR_INVALID, "model versions start at 1");
    return s->ops->version_add(s, model, version, path, sha256, note, err);
}

ws_status ws_store_version_max(ws_store *s, int64_t model, int64_t *max, ws_error *err)
{
    WS_STORE_ENTER(s, err);
    *max = 0;
    return s->ops->version_max(s, model, max, err);
}

ws_status ws_store_version_get(ws_store *s, int64_t model, int64_t version,
                               ws_store_version *out, ws_error *err)
{
    WS_STORE_ENTER(s, err);
    return s->ops->version_get(s, model, version, out, err);
}

ws_status ws_store_version_list(ws_store *s, int64_t model, ws_store_version_fn fn, void *ctx,
                                ws_error *err)
{
    WS_STORE_ENTER(s, err);
    WS_STORE_LISTING(s, s->ops->version_list(s, model, fn, ctx, err));
}

ws_status ws_store_model_set_current(ws_store *s, int64_t model, int64_t version,
                                     ws_error *err)
{
    WS_STORE_ENTER(s, err);
    return s->ops->model_set_current(s, model, version, err);
}

/* ---- vocabulary ------------------------------------------------------------- */

ws_status ws_store_vocab_count(ws_store *s, int64_t model, int64_t *n, ws_error *err)
{
    WS_STORE_ENTER(s, err);
    return s->ops->vocab_count(s, model, n, err);
}

static ws_status check_symbols(size_t n, const char *const *symbols, ws_error *err)
{
    if (!symbols) return ws_error_set(err, WS_ERR_INVALID, "vocabulary: no symbols given");
    for (size_t i = 0; i < n; i++)
        if (!symbols[i])
            return ws_error_set(err, WS_ERR_INVALID, "vocabulary: symbol %zu is NULL", i);
    return WS_OK;
}

ws_status ws_store_vocab_append(ws_store *s, int64_t model, int64_t first_id, size_t n,
                                const char *const *symbols, ws_error *err)
{
    WS_STORE_ENTER(s, err);
    if (n == 0) return WS_OK;
    WS_TRY(check_symbols(n, symbols, err));
    int64_t count;
    return s->ops->vocab_append(s, model, first_id, n, symbols, INT64_MAX, NULL, NULL, &count,
                                err);
}

ws_status ws_store_vocab_merge(ws_store *s, int64_t model, int64_t first_id, size_t n,
                               const char *const *symbols, int64_t limit,
                               ws_store_vocab_fn others, void *ctx, int64_t *count,
                               ws_error *err)
{
    WS_STORE_ENTER(s, err);
    if (!others || !count)
        return ws_error_set(err, WS_ERR_INVALID, "vocabulary: a merge needs a callback and a count");
    if (n == 0) return ws_store_vocab_count(s, model, count, err);
    WS_TRY(check_symbols(n, symbols, err));
    WS_STORE_LISTING(s, s->ops->vocab_append(s, model, first_id, n, symbols, limit, others, ctx,
                                             count, err));
}

ws_status ws_store_vocab_load(ws_store *s, int64_t model, ws_store_vocab_fn fn, void *ctx,
                              ws_error *err)
{
    WS_STORE_ENTER(s, err);
    WS_STORE_LISTING(s, s->ops->vocab_load(s, model, fn, ctx, err));
}

/* ---- sessions --------------------------------------------------------------- */

ws_status ws_store_session_create(ws_store *s, int64_t tenant, int64_t model, const float *state,
                                  int32_t rows, int32_t cols, int64_t state_version,
                                  int64_t max_sessions, char id_out[WS_STORE_ID_LEN + 1],
                                  ws_error *err)
{
    WS_STORE_ENTER(s, err);
    WS_TRY(ws_store__check_state(state, rows, cols, 1, err));
    return s->ops->session_create(s, tenant, model, state, rows, cols, state_version,
                                  max_sessions, id_out, err);
}

ws_status ws_store_session_get(ws_store *s, int64_t tenant, const char *id, int with_state,
                               ws_store_session *out, ws_error *err)
{
    WS_STORE_ENTER(s, err);
    memset(out, 0, sizeof *out);
    if (!ws_store_session_id_valid(id)) return ws_store__session_not_found(id, err);
    return s->ops->session_get(s, tenant, id, with_state, out, err);
}

ws_status ws_store_session_delete(ws_store *s, int64_t tenant, const char *id, ws_error *err)
{
    WS_STORE_ENTER(s, err);
    if (!ws_store_session_id_valid(id)) return ws_store__session_not_found(id, err);
    return s->ops->session_delete(s, tenant, id, err);
}

ws_status ws_store_session_count(ws_store *s, int64_t tenant, int64_t *n, ws_error *err)
{
    WS_STORE_ENTER(s, err);
    return s->ops->session_count(s, tenant, n, err);
}

ws_status ws_store_session_list(ws_store *s, int64_t tenant, const char *after_id, int limit,
                                ws_store_session_fn fn, void *ctx, ws_error *err)
{
    WS_STORE_ENTER(s, err);
    WS_TRY(check_page(limit, err));
    WS_STORE_LISTING(s, s->ops->session_list(s, tenant, after_id, limit, fn, ctx, err));
}

ws_status ws_store_session_each_of_model(ws_store *s, int64_t model, ws_store_session_fn fn,
                                         void *ctx, ws_error *err)
{
    WS_STORE_ENTER(s, err);
    WS_STORE_LISTING(s, s->ops->session_each_of_model(s, model, fn, ctx, err));
}

/* ---- steps and the step log ------------------------------------------------- */

ws_status ws_store_apply_step(ws_store *s, int64_t tenant, const char *session_id,
                              int64_t expect_prev_step, const float *state, int32_t rows,
                              int32_t cols, const ws_store_log_entry *entry,
                              int64_t *current_step, ws_error *err)
{
    WS_STORE_ENTER(s, err);
    /* Argument checks first: bad input never opens a unit. */
    WS_TRY(ws_store__check_state(state, rows, cols, 0, err));
    if (!entry || !entry->instructions_json || !entry->queries_json || !entry->answers_json)
        return ws_error_set(err, WS_ERR_INVALID,
                            "step log entry needs instructions, queries and answers");
    if (expect_prev_step < 0)
        return ws_error_set(err, WS_ERR_INVALID, "expected step %lld is negative",
                            (long long)expect_prev_step);
    return s->ops->apply_step(s, tenant, session_id, expect_prev_step, state, rows, cols, entry,
                              current_step, err);
}

ws_status ws_store_session_set_state(ws_store *s, int64_t tenant, const char *session_id,
                                     int64_t expect_step, const float *state, int32_t rows,
                                     int32_t cols, int64_t state_version, ws_error *err)
{
    WS_STORE_ENTER(s, err);
    WS_TRY(ws_store__check_state(state, rows, cols, 0, err));
    return s->ops->session_set_state(s, tenant, session_id, expect_step, state, rows, cols,
                                     state_version, err);
}

ws_status ws_store_log_set_labels(ws_store *s, int64_t tenant, const char *session_id,
                                  int64_t step, const char *labels_json, int replace,
                                  ws_error *err)
{
    WS_STORE_ENTER(s, err);
    if (!labels_json) return ws_error_set(err, WS_ERR_INVALID, "labels are missing");
    return s->ops->log_set_labels(s, tenant, session_id, step, labels_json, replace, err);
}

ws_status ws_store_log_page(ws_store *s, int64_t tenant, const char *session_id,
                            int64_t after_step, int limit, ws_store_log_fn fn, void *ctx,
                            ws_error *err)
{
    WS_STORE_ENTER(s, err);
    WS_TRY(check_page(limit, err));
    WS_STORE_LISTING(s, s->ops->log_page(s, tenant, session_id, after_step, limit, fn, ctx, err));
}

ws_status ws_store_log_each(ws_store *s, int64_t tenant, const char *session_id,
                            ws_store_log_fn fn, void *ctx, ws_error *err)
{
    WS_STORE_ENTER(s, err);
    WS_STORE_LISTING(s, s->ops->log_each(s, tenant, session_id, fn, ctx, err));
}
