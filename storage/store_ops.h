/* store_ops.h — the seam between the ws_store_* API (storage.h) and a storage
 * backend, in the shape of SQLite's VFS: a backend is one table of function
 * pointers, one per operation, and its handle embeds struct ws_store as its
 * first member (struct ws_sqlite { ws_store base; sqlite3 *db; ... }), so the
 * wrappers in store.c dispatch through s->ops without knowing the backend.
 *
 * A backend lives in its own folder (storage/sqlite/) and joins with one line
 * in registry.c; tests/test_storage.c then runs every case against it.
 *
 * The contract of each operation is that of the ws_store_* call of the same
 * name in storage.h (statuses, messages' meaning, transactions, tenant
 * isolation), with these parts already done by the wrapper, never by the
 * backend:
 *   - s is not NULL and is not inside one of its own listings: a listing op
 *     runs with s->in_callback set, so a callback re-entering the store is
 *     refused before it reaches the backend (the backend needs no guard);
 *   - the arguments storage.h restricts are checked (tenant and model names,
 *     state shapes, page limits, log entry fields, version numbers, symbols),
 *     except a session id, which the backend checks as part of finding the
 *     session (ws_store__session_not_found gives the one answer for both);
 *   - what is not backend-specific: API keys are generated and hashed before
 *     key_insert and key_find (a backend sees only hashes), session ids come
 *     from ws_store__new_id (store_util.h), and _get results are zeroed.
 * Every write op joins an open group transaction (ws_store_begin) and undoes
 * only its own part when it fails; outside one it is its own transaction. */
#ifndef WS_STORE_OPS_H
#define WS_STORE_OPS_H

#include "storage.h"

typedef struct ws_store_ops ws_store_ops;

/* The part of every backend's handle the wrappers use. */
struct ws_store {
    const ws_store_ops *ops; /* set by ws_store_open */
    int in_callback;         /* a listing op is running: calls into s are refused */
};

struct ws_store_ops {
    /* The location prefix that picks the backend: "sqlite" for "sqlite:PATH". */
    const char *scheme;

    /* ---- connection ---- */
    /* Opens target (the location without "scheme:"), allocating the backend's
     * handle (base zeroed); on failure *out is NULL. target is non-empty and
     * durability valid. */
    ws_status (*open)(const char *target, ws_store_durability durability, int create,
                      ws_store **out, ws_error *err);
    /* Frees the handle; an open transaction is rolled back. Never NULL. */
    void (*close)(ws_store *s);
    ws_status (*get_info)(ws_store *s, ws_store_info *out, ws_error *err);
    ws_status (*integrity_check)(ws_store *s, ws_error *err);
    ws_status (*checkpoint)(ws_store *s, ws_error *err);

    /* ---- transactions ---- */
    ws_status (*begin)(ws_store *s, ws_error *err);
    ws_status (*commit)(ws_store *s, ws_error *err);
    ws_status (*rollback)(ws_store *s, ws_error *err);
    int (*in_transaction)(const ws_store *s);

    /* ---- tenants and API keys ---- */
    ws_status (*tenant_ensure)(ws_store *s, const char *name, int64_t *id, ws_error *err);
    ws_status (*tenant_find)(ws_store *s, const char *name, int64_t *id, ws_error *err);
    /* Stores a key by its SHA-256 (hex) and display prefix for tenant_name
     * (created if new); key_id may be NULL, note is never NULL. */
    ws_status (*key_insert)(ws_store *s, const char *tenant_name, int admin, const char *note,
                            const char *hash, const char *prefix, int64_t *key_id,
                            ws_error *err);
    /* The active key with this hash; WS_ERR_NOTFOUND when none (the wrapper
     * gives every bad key the same message). */
    ws_status (*key_find)(ws_store *s, const char *hash, ws_store_principal *out,
                          ws_error *err);
    ws_status (*key_list)(ws_store *s, ws_store_key_fn fn, void *ctx, ws_error *err);
    ws_status (*key_revoke)(ws_store *s, int64_t key_id, ws_error *err);
    ws_status (*key_count_active)(ws_store *s, int64_t *n, ws_error *err);

    /* ---- models and versions ---- */
    ws_status (*model_create)(ws_store *s, const char *name, const char *config_json,
                              const char *training_json, int64_t *id, ws_error *err);
    ws_status (*model_get)(ws_store *s, int64_t id, ws_store_model *out, ws_error *err);
    ws_status (*model_find)(ws_store *s, const char *name, ws_store_model *out, ws_error *err);
    ws_status (*model_list)(ws_store *s, ws_store_model_fn fn, void *ctx, ws_error *err);
    ws_status (*model_set_training)(ws_store *s, int64_t id, const char *training_json,
                                    ws_error *err);
    ws_status (*model_delete)(ws_store *s, int64_t id, ws_error *err);
    ws_status (*version_add)(ws_store *s, int64_t model, int64_t version, const char *path,
                             const char *note, ws_error *err);
    ws_status (*version_max)(ws_store *s, int64_t model, int64_t *max, ws_error *err);
    ws_status (*version_get)(ws_store *s, int64_t model, int64_t version,
                             ws_store_version *out, ws_error *err);
    ws_status (*version_list)(ws_store *s, int64_t model, ws_store_version_fn fn, void *ctx,
                              ws_error *err);
    ws_status (*model_set_current)(ws_store *s, int64_t model, int64_t version, ws_error *err);

    /* ---- vocabulary ---- */
    ws_status (*vocab_count)(ws_store *s, int64_t model, int64_t *n, ws_error *err);
    /* n >= 1 and no symbol is NULL. */
    ws_status (*vocab_append)(ws_store *s, int64_t model, int64_t first_id, size_t n,
                              const char *const *symbols, ws_error *err);
    ws_status (*vocab_load)(ws_store *s, int64_t model, ws_store_vocab_fn fn, void *ctx,
                            ws_error *err);

    /* ---- sessions ---- */
    ws_status (*session_create)(ws_store *s, int64_t tenant, int64_t model, const float *state,
                                int32_t rows, int32_t cols, int64_t state_version,
                                int64_t max_sessions, char id_out[WS_STORE_ID_LEN + 1],
                                ws_error *err);
    /* id is well-formed. */
    ws_status (*session_get)(ws_store *s, int64_t tenant, const char *id, int with_state,
                             ws_store_session *out, ws_error *err);
    /* id is well-formed. */
    ws_status (*session_delete)(ws_store *s, int64_t tenant, const char *id, ws_error *err);
    ws_status (*session_count)(ws_store *s, int64_t tenant, int64_t *n, ws_error *err);
    ws_status (*session_list)(ws_store *s, int64_t tenant, const char *after_id, int limit,
                              ws_store_session_fn fn, void *ctx, ws_error *err);
    ws_status (*session_each_of_model)(ws_store *s, int64_t model, ws_store_session_fn fn,
                                       void *ctx, ws_error *err);

    /* ---- steps and the step log ---- */
    ws_status (*apply_step)(ws_store *s, int64_t tenant, const char *session_id,
                            int64_t expect_prev_step, const float *state, int32_t rows,
                            int32_t cols, const ws_store_log_entry *entry,
                            int64_t *current_step, ws_error *err);
    ws_status (*session_set_state)(ws_store *s, int64_t tenant, const char *session_id,
                                   int64_t expect_step, const float *state, int32_t rows,
                                   int32_t cols, int64_t state_version, ws_error *err);
    ws_status (*log_set_labels)(ws_store *s, int64_t tenant, const char *session_id,
                                int64_t step, const char *labels_json, int replace,
                                ws_error *err);
    ws_status (*log_page)(ws_store *s, int64_t tenant, const char *session_id,
                          int64_t after_step, int limit, ws_store_log_fn fn, void *ctx,
                          ws_error *err);
    ws_status (*log_each)(ws_store *s, int64_t tenant, const char *session_id,
                          ws_store_log_fn fn, void *ctx, ws_error *err);
};

/* ---- registry.c ---- */
/* The backend a location names and the target it gets: "scheme:target" for a
 * registered scheme, a bare path for the first backend (SQLite). An unknown
 * scheme is WS_ERR_INVALID naming the known ones. */
ws_status ws_store__resolve(const char *location, const ws_store_ops **ops, const char **target,
                            ws_error *err);

#endif
