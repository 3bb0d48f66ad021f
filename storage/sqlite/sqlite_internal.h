/* sqlite_internal.h — what the files of the SQLite backend share: its handle,
 * the table of prepared statements, small helpers, and the operations its
 * ops table (ops.c) points to. Not for other modules. */
#ifndef WS_SQLITE_INTERNAL_H
#define WS_SQLITE_INTERNAL_H

#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>

#include "storage/store_ops.h"
#include "storage/store_util.h"

/* Every statement the backend runs more than once, prepared once at open.
 * Column lists are spelled out (never *) so that a later migration adding a
 * column cannot shift the indexes the readers use. */
#define WS_SQLITE_SESSION_COLS \
    "id, tenant, model, step, state_version, state_rows, state_cols, created_ms, updated_ms"
/* A model with its tenant's name (NULL when shared). */
#define WS_SQLITE_MODEL_COLS                                                                \
    "m.id, m.name, m.config, m.training, m.current_version, m.created_ms, m.tenant, t.name " \
    "FROM models m LEFT JOIN tenants t ON t.id = m.tenant"
#define WS_SQLITE_STATEMENTS(X)                                                             \
    X(BEGIN, "BEGIN IMMEDIATE")                                                             \
    X(COMMIT, "COMMIT")                                                                     \
    X(ROLLBACK, "ROLLBACK")                                                                 \
    X(SAVEPOINT, "SAVEPOINT ws_op")                                                         \
    X(RELEASE, "RELEASE ws_op")                                                             \
    X(ROLLBACK_TO, "ROLLBACK TO ws_op")                                                     \
    /* tenants and keys */                                                                  \
    X(TENANT_FIND, "SELECT id FROM tenants WHERE name = ?1")                                \
    X(TENANT_INSERT, "INSERT INTO tenants(name, created_ms) VALUES(?1, ?2)")                \
    X(TENANT_EXISTS, "SELECT 1 FROM tenants WHERE id = ?1")                                 \
    X(KEY_INSERT, "INSERT INTO api_keys(tenant, hash, prefix, admin, note, created_ms) "    \
                  "VALUES(?1, ?2, ?3, ?4, ?5, ?6)")                                          \
    X(KEY_VERIFY, "SELECT k.id, k.tenant, t.name, k.admin FROM api_keys k "                 \
                  "JOIN tenants t ON t.id = k.tenant "                                      \
                  "WHERE k.hash = ?1 AND k.revoked_ms IS NULL")                             \
    X(KEY_LIST, "SELECT k.id, t.name, k.prefix, k.admin, k.note, k.created_ms, "            \
                "k.revoked_ms FROM api_keys k JOIN tenants t ON t.id = k.tenant "           \
                "ORDER BY k.id")                                                            \
    X(KEY_REVOKE, "UPDATE api_keys SET revoked_ms = coalesce(revoked_ms, ?2) WHERE id = ?1") \
    X(KEY_COUNT_ACTIVE, "SELECT count(*) FROM api_keys WHERE revoked_ms IS NULL")           \
    /* models and versions */                                                               \
    X(MODEL_INSERT, "INSERT INTO models(name, config, training, created_ms, tenant) "      \
                    "VALUES(?1, ?2, ?3, ?4, ?5)")                                            \
    X(MODEL_GET, "SELECT " WS_SQLITE_MODEL_COLS " WHERE m.id = ?1")                        \
    X(MODEL_FIND, "SELECT " WS_SQLITE_MODEL_COLS " WHERE m.name = ?1")                     \
    X(MODEL_LIST, "SELECT " WS_SQLITE_MODEL_COLS " ORDER BY m.id")                         \
    X(MODEL_EXISTS, "SELECT 1 FROM models WHERE id = ?1")                                   \
    X(MODEL_USABLE, "SELECT 1 FROM models WHERE id = ?1 AND (tenant IS NULL OR tenant = ?2)") \
    X(MODEL_SET_TRAINING, "UPDATE models SET training = ?2 WHERE id = ?1")                  \
    X(MODEL_SET_CURRENT, "UPDATE models SET current_version = ?2 WHERE id = ?1")            \
    X(MODEL_DELETE, "DELETE FROM models WHERE id = ?1")                                     \
    X(MODEL_SESSIONS, "SELECT count(*) FROM sessions WHERE model = ?1")                     \
    X(VERSION_MAX, "SELECT coalesce(max(version), 0) FROM model_versions WHERE model = ?1") \
    X(VERSION_INSERT, "INSERT INTO model_versions(model, version, path, note, created_ms, " \
                      "sha256) VALUES(?1, ?2, ?3, ?4, ?5, ?6)")                              \
    X(VERSION_GET, "SELECT model, version, path, note, created_ms, sha256 "                 \
                   "FROM model_versions WHERE model = ?1 AND version = ?2")                 \
    X(VERSION_LIST, "SELECT model, version, path, note, created_ms, sha256 "                \
                    "FROM model_versions WHERE model = ?1 ORDER BY version")                \
    /* vocabulary: ids are dense, so max(id)+1 is the count in one index probe */          \
    X(VOCAB_NEXT, "SELECT coalesce(max(id) + 1, 0) FROM vocab WHERE model = ?1")            \
    X(VOCAB_INSERT, "INSERT INTO vocab(model, id, symbol) VALUES(?1, ?2, ?3)")              \
    X(VOCAB_LOAD, "SELECT id, symbol FROM vocab WHERE model = ?1 AND id >= ?2 "             \
                  "ORDER BY id")                                                            \
    /* sessions */                                                                          \
    X(SESSION_FIND, "SELECT sid, step FROM sessions WHERE id = ?1 AND tenant = ?2")         \
    X(SESSION_INSERT, "INSERT INTO sessions(id, tenant, model, step, state, state_rows, "   \
                      "state_cols, state_version, created_ms, updated_ms) "                 \
                      "VALUES(?1, ?2, ?3, 0, ?4, ?5, ?6, ?7, ?8, ?8)")                       \
    X(SESSION_GET, "SELECT " WS_SQLITE_SESSION_COLS ", state FROM sessions "                \
                   "WHERE id = ?1 AND tenant = ?2")                                         \
    X(SESSION_DELETE, "DELETE FROM sessions WHERE id = ?1 AND tenant = ?2")                 \
    /* the count the schema's triggers keep (0 for an unknown tenant, as count(*) gave) */ \
    X(SESSION_COUNT, "SELECT coalesce((SELECT n_sessions FROM tenants WHERE id = ?1), 0)")  \
    X(SESSION_LIST, "SELECT " WS_SQLITE_SESSION_COLS " FROM sessions "                      \
                    "WHERE tenant = ?1 AND id > ?2 ORDER BY id LIMIT ?3")                   \
    X(SESSION_OF_MODEL, "SELECT " WS_SQLITE_SESSION_COLS " FROM sessions "                  \
                        "WHERE model = ?1 ORDER BY sid")                                    \
    X(SESSION_SET_STATE, "UPDATE sessions SET step = ?2, state = ?3, state_rows = ?4, "     \
                         "state_cols = ?5, state_version = ?6, updated_ms = ?7 "            \
                         "WHERE sid = ?1")                                                  \
    /* step log */                                                                          \
    X(LOG_INSERT, "INSERT INTO step_log(session, step, instructions, queries, labels, "     \
                  "answers, model_version, time_ms) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)") \
    X(LOG_GET_LABELS, "SELECT labels FROM step_log WHERE session = ?1 AND step = ?2")       \
    X(LOG_SET_LABELS, "UPDATE step_log SET labels = ?3 WHERE session = ?1 AND step = ?2")   \
    X(LOG_PAGE, "SELECT step, instructions, queries, labels, answers, model_version, "      \
                "time_ms FROM step_log WHERE session = ?1 AND step > ?2 "                   \
                "ORDER BY step LIMIT ?3")                                                   \
    /* admin */                                                                             \
    X(INTEGRITY, "PRAGMA integrity_check")                                                  \
    X(FK_CHECK, "PRAGMA foreign_key_check")                                                 \
    X(CHECKPOINT, "PRAGMA wal_checkpoint(TRUNCATE)")

typedef enum {
#define WS_SQLITE_X_ENUM(name, sql) WS_ST_##name,
    WS_SQLITE_STATEMENTS(WS_SQLITE_X_ENUM)
#undef WS_SQLITE_X_ENUM
    WS_ST_COUNT
} ws_sqlite_stmt_id;

/* The backend's handle: struct ws_store first, so a ws_store * is one. */
typedef struct {
    ws_store base;
    sqlite3 *db;
    sqlite3_stmt *st[WS_ST_COUNT];
    ws_store_durability durability;
    int in_txn;       /* between ws_store_begin and commit/rollback */
    int txn_poisoned; /* a unit inside it could not be undone: commit must refuse */
    /* the WAL checkpoint thread (wal_checkpoint.c) */
    const char *ckpt_path;
    pthread_t ckpt_thread;
    atomic_int ckpt_state;
    sqlite3 *ckpt_db; /* the checkpoint threads' connection: opened by the first, kept */
    int ckpt_at;      /* the WAL's pages when the last checkpoint (thread or catch-up) began */
} ws_sqlite;

/* The handle of an op's ws_store (every ws_store the ops see is a ws_sqlite). */
static inline ws_sqlite *ws_sqlite_of(ws_store *s) { return (ws_sqlite *)s; }

/* A unit of writes: BEGIN IMMEDIATE ... COMMIT when no transaction is open, or
 * SAVEPOINT ... RELEASE inside the caller's group transaction, so that a
 * failing unit undoes only itself. */
typedef struct {
    int own; /* 1: this unit began (and will end) the transaction */
} ws_sqlite_op;

/* ---- wal_checkpoint.c ---- */
/* Moves s's WAL checkpoints to a thread of their own (at open). */
void ws_sqlite__ckpt_init(ws_sqlite *s);
/* Waits for s's checkpoint thread, if any. */
void ws_sqlite__ckpt_join(ws_sqlite *s);
/* At close: waits for it and closes the checkpoint connection. */
void ws_sqlite__ckpt_stop(ws_sqlite *s);

/* ---- statements.c ---- */
ws_status ws_sqlite__prepare_all(ws_sqlite *s, ws_error *err);
void ws_sqlite__finalize_all(ws_sqlite *s);
/* The prepared statement id, ready to bind (reset, no bindings). */
sqlite3_stmt *ws_sqlite__stmt(ws_sqlite *s, ws_sqlite_stmt_id id);
/* Resets st and clears its bindings so that it holds no read snapshot and no
 * pointer into the caller's memory. */
void ws_sqlite__done(sqlite3_stmt *st);

/* ---- schema.c ---- */
/* Creates or migrates the schema to WS_STORE_SCHEMA_VERSION; create == 0
 * refuses an empty (uninitialised) database. */
ws_status ws_sqlite__migrate(ws_sqlite *s, int create, ws_error *err);

/* ---- util.c ---- */
/* Maps a SQLite result code to a ws_status and fills err with "<what>: <sqlite
 * message> (sqlite <code>)". */
ws_status ws_sqlite__sqlfail(ws_sqlite *s, int rc, ws_error *err, const char *what);
ws_status ws_sqlite__bind_int64(ws_sqlite *s, sqlite3_stmt *st, int i, int64_t v, ws_error *err);
/* NULL text binds SQL NULL. The text is not copied: step before the caller's
 * memory goes away (every caller here does). */
ws_status ws_sqlite__bind_text(ws_sqlite *s, sqlite3_stmt *st, int i, const char *t, ws_error *err);
ws_status ws_sqlite__bind_text_n(ws_sqlite *s, sqlite3_stmt *st, int i, const char *t, size_t n,
                                 ws_error *err);
/* NULL p binds SQL NULL. */
ws_status ws_sqlite__bind_blob(ws_sqlite *s, sqlite3_stmt *st, int i, const void *p, size_t n,
                               ws_error *err);

/* Steps a statement that returns one integer in column 0 (count, max, ...). */
ws_status ws_sqlite__query_int64(ws_sqlite *s, sqlite3_stmt *st, int64_t *out, ws_error *err,
                                 const char *what);
/* The same for statement id with ?1 bound to key (a count or max per model,
 * per tenant). */
ws_status ws_sqlite__query_int64_by(ws_sqlite *s, ws_sqlite_stmt_id id, int64_t key, int64_t *out,
                                    ws_error *err, const char *what);
/* Steps an existence probe (a one-row SELECT, bound by the caller; r: the
 * binding's status, returned as it is when not WS_OK): WS_OK when it finds a
 * row, WS_ERR_NOTFOUND "<what> <id> not found" when none. Resets st. */
ws_status ws_sqlite__probe(ws_sqlite *s, sqlite3_stmt *st, ws_status r, const char *what,
                           int64_t id, ws_error *err);
/* Steps a write statement to completion (SQLITE_DONE). */
ws_status ws_sqlite__exec(ws_sqlite *s, sqlite3_stmt *st, ws_error *err, const char *what);

/* Copies a column's text into a fresh allocation ("" for NULL). */
ws_status ws_sqlite__dup_column(sqlite3_stmt *st, int col, char **out, ws_error *err);

/* ---- txn.c ---- */
ws_status ws_sqlite__op_begin(ws_sqlite *s, ws_sqlite_op *op, ws_error *err);
/* Ends the unit: commit/release when status is WS_OK, otherwise roll it back.
 * Returns status, or the commit failure. */
ws_status ws_sqlite__op_end(ws_sqlite *s, ws_sqlite_op *op, ws_status status, ws_error *err);

/* ---- tenants.c ---- */
/* The tenant's id, created if new, inside the caller's write unit. */
ws_status ws_sqlite__tenant_ensure_in(ws_sqlite *s, const char *name, int64_t *id, ws_error *err);
/* WS_OK if the tenant exists, WS_ERR_NOTFOUND otherwise. */
ws_status ws_sqlite__tenant_exists(ws_sqlite *s, int64_t tenant, ws_error *err);

/* ---- models.c ---- */
/* WS_OK if the model exists, WS_ERR_NOTFOUND otherwise. */
ws_status ws_sqlite__model_exists(ws_sqlite *s, int64_t id, ws_error *err);
/* WS_OK if the model exists and the tenant may use it (shared, or the
 * tenant's own), WS_ERR_NOTFOUND otherwise: the same answer either way. */
ws_status ws_sqlite__model_usable(ws_sqlite *s, int64_t id, int64_t tenant, ws_error *err);

/* ---- sessions.c ---- */
/* The internal row id and step of the tenant's session; WS_ERR_NOTFOUND (also
 * for a malformed id or another tenant's session). */
ws_status ws_sqlite__session_find(ws_sqlite *s, int64_t tenant, const char *id, int64_t *sid,
                                  int64_t *step, ws_error *err);

/* ---- the operations (store_op_list.h), ws_sqlite_<name>: connection.c, txn.c,
 * tenants.c, keys.c, models.c, vocab.c, sessions.c, steps.c ---- */
#define WS_STORE_OP(ret, name, params) ret ws_sqlite_##name params;
#include "storage/store_op_list.h"
#undef WS_STORE_OP

#endif
