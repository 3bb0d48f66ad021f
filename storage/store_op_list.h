/* store_op_list.h — the operations of a storage backend, one entry each:
 * WS_STORE_OP(return type, name, (parameters)). The list generates the fields
 * of ws_store_ops (store_ops.h), each backend's declarations of
 * ws_<backend>_<name> (sqlite_internal.h) and each backend's table (ops.c).
 * Contracts: store_ops.h (what the wrappers already did) and the ws_store_*
 * call of the same name in storage.h. No include guard: the includer defines
 * WS_STORE_OP first. */
/* clang-format off */
/* ---- connection ---- */
/* Opens target (the location without "scheme:"), allocating the backend's
 * handle (base zeroed); on failure *out is NULL. target is non-empty and
 * durability valid. */
WS_STORE_OP(ws_status, open, (const char *target, ws_store_durability durability, int create,
                              ws_store **out, ws_error *err))
/* Frees the handle; an open transaction is rolled back. Never NULL. */
WS_STORE_OP(void, close, (ws_store *s))
WS_STORE_OP(ws_status, get_info, (ws_store *s, ws_store_info *out, ws_error *err))
WS_STORE_OP(ws_status, integrity_check, (ws_store *s, ws_error *err))
WS_STORE_OP(ws_status, checkpoint, (ws_store *s, ws_error *err))
/* A consistent copy of the whole database into the new file dest, as of one
 * commit, while other connections go on writing (storage.h, ws_store_backup):
 * dest is non-empty, step_pages >= 1, s is outside a transaction, and fn
 * (never NULL) may not call into s. On any failure the backend removes what it
 * wrote of dest; a backend that cannot write a copy of itself into a file
 * answers WS_ERR_UNSUPPORTED naming its own tool (pg_dump). */
WS_STORE_OP(ws_status, backup, (ws_store *s, const char *dest, int step_pages,
                                ws_store_backup_fn fn, void *ctx, ws_error *err))

/* ---- transactions ---- */
WS_STORE_OP(ws_status, begin, (ws_store *s, ws_error *err))
WS_STORE_OP(ws_status, commit, (ws_store *s, ws_error *err))
WS_STORE_OP(ws_status, rollback, (ws_store *s, ws_error *err))
WS_STORE_OP(int, in_transaction, (const ws_store *s))
/* *held = 1 when this connection holds the cluster-wide lock `key` (>= 0), taking
 * it now if no other connection has it; 0 when another one does. Held until the
 * connection closes or is lost (storage.h, ws_store_leader_try). */
WS_STORE_OP(ws_status, leader_try, (ws_store *s, int64_t key, int *held, ws_error *err))

/* ---- tenants and API keys ---- */
WS_STORE_OP(ws_status, tenant_ensure, (ws_store *s, const char *name, int64_t *id, ws_error *err))
WS_STORE_OP(ws_status, tenant_find, (ws_store *s, const char *name, int64_t *id, ws_error *err))
/* Stores a key by its SHA-256 (hex) and display prefix for tenant_name
 * (created if new); key_id may be NULL, note is never NULL. */
WS_STORE_OP(ws_status, key_insert, (ws_store *s, const char *tenant_name, int admin,
                                    const char *note, const char *hash, const char *prefix,
                                    int64_t *key_id, ws_error *err))
/* The active key with this hash; WS_ERR_NOTFOUND when none (the wrapper
 * gives every bad key the same message). */
WS_STORE_OP(ws_status, key_find, (ws_store *s, const char *hash, ws_store_principal *out,
                                  ws_error *err))
WS_STORE_OP(ws_status, key_list, (ws_store *s, ws_store_key_fn fn, void *ctx, ws_error *err))
WS_STORE_OP(ws_status, key_revoke, (ws_store *s, int64_t key_id, ws_error *err))
WS_STORE_OP(ws_status, key_count_active, (ws_store *s, int64_t *n, ws_error *err))

/* ---- models and versions ---- */
/* tenant is 0 (shared) or > 0. */
WS_STORE_OP(ws_status, model_create, (ws_store *s, const char *name, int64_t tenant,
                                      const char *config_json, const char *training_json,
                                      int64_t *id, ws_error *err))
WS_STORE_OP(ws_status, model_get, (ws_store *s, int64_t id, ws_store_model *out, ws_error *err))
WS_STORE_OP(ws_status, model_find, (ws_store *s, const char *name, ws_store_model *out,
                                    ws_error *err))
WS_STORE_OP(ws_status, model_list, (ws_store *s, ws_store_model_fn fn, void *ctx, ws_error *err))
WS_STORE_OP(ws_status, model_set_training, (ws_store *s, int64_t id, const char *training_json,
                                            ws_error *err))
WS_STORE_OP(ws_status, model_delete, (ws_store *s, int64_t id, ws_error *err))
WS_STORE_OP(ws_status, version_add, (ws_store *s, int64_t model, int64_t version, const char *path,
                                     const char *sha256, const char *note, ws_error *err))
WS_STORE_OP(ws_status, version_max, (ws_store *s, int64_t model, int64_t *max, ws_error *err))
WS_STORE_OP(ws_status, version_get, (ws_store *s, int64_t model, int64_t version,
                                     ws_store_version *out, ws_error *err))
WS_STORE_OP(ws_status, version_list, (ws_store *s, int64_t model, ws_store_version_fn fn, void *ctx,
                                      ws_error *err))
WS_STORE_OP(ws_status, model_set_current, (ws_store *s, int64_t model, int64_t version,
                                           ws_error *err))

/* ---- vocabulary ---- */
WS_STORE_OP(ws_status, vocab_count, (ws_store *s, int64_t model, int64_t *n, ws_error *err))
/* n >= 1 and no symbol is NULL; others NULL: the strict append (a count
 * other than first_id is WS_ERR_CONFLICT), else ws_store_vocab_merge; *count
 * the stored count after it. */
WS_STORE_OP(ws_status, vocab_append, (ws_store *s, int64_t model, int64_t first_id, size_t n,
                                      const char *const *symbols, int64_t limit,
                                      ws_store_vocab_fn others, void *ctx, int64_t *count,
                                      ws_error *err))
WS_STORE_OP(ws_status, vocab_load, (ws_store *s, int64_t model, ws_store_vocab_fn fn, void *ctx,
                                    ws_error *err))

/* ---- sessions ---- */
WS_STORE_OP(ws_status, session_create, (ws_store *s, int64_t tenant, int64_t model,
                                        const float *state, int32_t rows, int32_t cols,
                                        int64_t state_version, int64_t max_sessions,
                                        char id_out[WS_STORE_ID_LEN + 1], ws_error *err))
/* id is well-formed. */
WS_STORE_OP(ws_status, session_get, (ws_store *s, int64_t tenant, const char *id, int with_state,
                                     ws_store_session *out, ws_error *err))
/* id is well-formed. */
WS_STORE_OP(ws_status, session_delete, (ws_store *s, int64_t tenant, const char *id, ws_error *err))
WS_STORE_OP(ws_status, session_count, (ws_store *s, int64_t tenant, int64_t *n, ws_error *err))
WS_STORE_OP(ws_status, session_list, (ws_store *s, int64_t tenant, const char *after_id, int limit,
                                      ws_store_session_fn fn, void *ctx, ws_error *err))
WS_STORE_OP(ws_status, session_each_of_model, (ws_store *s, int64_t model, ws_store_session_fn fn,
                                               void *ctx, ws_error *err))

/* ---- steps and the step log ---- */
WS_STORE_OP(ws_status, apply_step, (ws_store *s, int64_t tenant, const char *session_id,
                                    int64_t expect_prev_step, const float *state, int32_t rows,
                                    int32_t cols, const ws_store_log_entry *entry,
                                    int64_t *current_step, ws_error *err))
WS_STORE_OP(ws_status, session_set_state, (ws_store *s, int64_t tenant, const char *session_id,
                                           int64_t expect_step, const float *state, int32_t rows,
                                           int32_t cols, int64_t state_version, ws_error *err))
WS_STORE_OP(ws_status, log_set_labels, (ws_store *s, int64_t tenant, const char *session_id,
                                        int64_t step, const char *labels_json, int replace,
                                        ws_error *err))
WS_STORE_OP(ws_status, log_page, (ws_store *s, int64_t tenant, const char *session_id,
                                  int64_t after_step, int limit, ws_store_log_fn fn, void *ctx,
                                  ws_error *err))
WS_STORE_OP(ws_status, log_each, (ws_store *s, int64_t tenant, const char *session_id,
                                  ws_store_log_fn fn, void *ctx, ws_error *err))
/* clang-format on */
