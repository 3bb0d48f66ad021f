/* pg_internal.h — what the files of the PostgreSQL backend share: its handle,
 * the table of statements, the helpers that run them, and the operations its
 * ops table (ops.c) points to. Not for other modules.
 *
 * One ws_store is one libpq connection. Statements are prepared on the
 * connection the first time each runs (and again after a reconnect); integer
 * and text parameters go as text, world states as binary bytea, and every
 * result comes back in binary (an integer column is read by its width, a text
 * column is its bytes, a bytea the state's bytes as stored). */
#ifndef WS_PG_INTERNAL_H
#define WS_PG_INTERNAL_H

#include <libpq-fe.h>

#include "storage/store_ops.h"
#include "storage/store_util.h"

/* Column lists are spelled out (never *): readers use indexes. */
#define WS_PG_SESSION_COLS \
    "id, tenant, model, step, state_version, state_rows, state_cols, created_ms, updated_ms"
#define WS_PG_MODEL_COLS                                                                    \
    "m.id, m.name, m.config, m.training, m.current_version, m.created_ms, m.tenant, t.name " \
    "FROM models m LEFT JOIN tenants t ON t.id = m.tenant"
#define WS_PG_VERSION_COLS "model, version, path, note, created_ms, sha256"
/* Row locks: FOR NO KEY UPDATE serializes writers of one row (a session's step,
 * a tenant's session count, a model's vocabulary and versions) without
 * blocking the FOR KEY SHARE locks that inserts referencing the row take. */
#define WS_PG_STATEMENTS(X)                                                                  \
    /* tenants and keys */                                                                   \
    X(TENANT_FIND, "SELECT id FROM tenants WHERE name = $1")                                 \
    /* ON CONFLICT: another connection may create the same tenant at once */                 \
    X(TENANT_INSERT, "INSERT INTO tenants(name, created_ms) VALUES($1, $2) "                 \
                     "ON CONFLICT (name) DO NOTHING RETURNING id")                            \
    X(TENANT_EXISTS, "SELECT 1 FROM tenants WHERE id = $1")                                  \
    X(TENANT_LOCK, "SELECT n_sessions FROM tenants WHERE id = $1 FOR NO KEY UPDATE")         \
    X(KEY_INSERT, "INSERT INTO api_keys(tenant, hash, prefix, admin, note, created_ms) "     \
                  "VALUES($1, $2, $3, $4, $5, $6) RETURNING id")                             \
    X(KEY_VERIFY, "SELECT k.id, k.tenant, t.name, k.admin FROM api_keys k "                  \
                  "JOIN tenants t ON t.id = k.tenant "                                       \
                  "WHERE k.hash = $1 AND k.revoked_ms IS NULL")                              \
    X(KEY_LIST, "SELECT k.id, t.name, k.prefix, k.admin, k.note, k.created_ms, "             \
                "k.revoked_ms FROM api_keys k JOIN tenants t ON t.id = k.tenant "            \
                "ORDER BY k.id")                                                             \
    X(KEY_REVOKE, "UPDATE api_keys SET revoked_ms = coalesce(revoked_ms, $2) WHERE id = $1") \
    X(KEY_COUNT_ACTIVE, "SELECT count(*) FROM api_keys WHERE revoked_ms IS NULL")            \
    /* models and versions */                                                                \
    X(MODEL_INSERT, "INSERT INTO models(name, config, training, created_ms, tenant) "       \
                    "VALUES($1, $2, $3, $4, $5) ON CONFLICT (name) DO NOTHING RETURNING id") \
    X(MODEL_GET, "SELECT " WS_PG_MODEL_COLS " WHERE m.id = $1")                              \
    X(MODEL_FIND, "SELECT " WS_PG_MODEL_COLS " WHERE m.name = $1")                           \
    X(MODEL_LIST, "SELECT " WS_PG_MODEL_COLS " ORDER BY m.id")                               \
    X(MODEL_EXISTS, "SELECT 1 FROM models WHERE id = $1")                                    \
    X(MODEL_LOCK, "SELECT 1 FROM models WHERE id = $1 FOR NO KEY UPDATE")                    \
    X(MODEL_USABLE, "SELECT 1 FROM models WHERE id = $1 AND (tenant IS NULL OR tenant = $2)") \
    X(MODEL_SET_TRAINING, "UPDATE models SET training = $2 WHERE id = $1")                   \
    X(MODEL_SET_CURRENT, "UPDATE models SET current_version = $2 WHERE id = $1")             \
    X(MODEL_DELETE, "DELETE FROM models WHERE id = $1")                                      \
    X(MODEL_SESSIONS, "SELECT count(*) FROM sessions WHERE model = $1")                      \
    X(VERSION_MAX, "SELECT coalesce(max(version), 0) FROM model_versions WHERE model = $1")  \
    X(VERSION_INSERT, "INSERT INTO model_versions(model, version, path, note, created_ms, "  \
                      "sha256) VALUES($1, $2, $3, $4, $5, $6)")                              \
    X(VERSION_GET, "SELECT " WS_PG_VERSION_COLS " FROM model_versions "                      \
                   "WHERE model = $1 AND version = $2")                                      \
    X(VERSION_LIST, "SELECT " WS_PG_VERSION_COLS " FROM model_versions WHERE model = $1 "    \
                    "ORDER BY version")                                                      \
    /* vocabulary: ids are dense, so max(id)+1 is the count in one index probe; an append \
     * is one statement over a text array */                                                 \
    X(VOCAB_NEXT, "SELECT coalesce(max(id) + 1, 0) FROM vocab WHERE model = $1")             \
    X(VOCAB_INSERT, "INSERT INTO vocab(model, id, symbol) SELECT $1::bigint, $2::bigint + u.o - 1, "\
                    "u.sym FROM unnest($3::text[]) WITH ORDINALITY AS u(sym, o)")            \
    X(VOCAB_LOAD, "SELECT id, symbol FROM vocab WHERE model = $1 AND id >= $2 "              \
                  "ORDER BY id")                                                             \
    /* sessions */                                                                           \
    X(SESSION_FIND, "SELECT sid, step FROM sessions WHERE id = $1 AND tenant = $2")          \
    X(SESSION_LOCK, "SELECT sid, step FROM sessions WHERE id = $1 AND tenant = $2 "          \
                    "FOR NO KEY UPDATE")                                                     \
    X(SESSION_INSERT, "INSERT INTO sessions(id, tenant, model, step, state, state_rows, "    \
                      "state_cols, state_version, created_ms, updated_ms) "                  \
                      "VALUES($1, $2, $3, 0, $4, $5, $6, $7, $8, $8) "                       \
                      "ON CONFLICT (id) DO NOTHING RETURNING sid")                           \
    X(SESSION_GET, "SELECT " WS_PG_SESSION_COLS ", state FROM sessions "                     \
                   "WHERE id = $1 AND tenant = $2")                                          \
    X(SESSION_DELETE, "DELETE FROM sessions WHERE id = $1 AND tenant = $2")                  \
    X(SESSION_COUNT, "SELECT coalesce((SELECT n_sessions FROM tenants WHERE id = $1), 0)")   \
    X(SESSION_LIST, "SELECT " WS_PG_SESSION_COLS " FROM sessions "                           \
                    "WHERE tenant = $1 AND id > $2 ORDER BY id LIMIT $3")                    \
    X(SESSION_OF_MODEL, "SELECT " WS_PG_SESSION_COLS " FROM sessions WHERE model = $1 "      \
                        "ORDER BY sid")                                                      \
    X(SESSION_SET_STATE, "UPDATE sessions SET state = $2, state_rows = $3, state_cols = $4, " \
                         "state_version = $5, updated_ms = $6 WHERE sid = $1")               \
    /* a step in one statement: the session moves from $3 to $3 + 1 only if it is the \
     * tenant's and at $3 (the UPDATE's row lock makes the check and the write one), \
     * and its log row goes in with it; no row back: missing or not at $3 */                 \
    X(STEP_APPLY, "WITH u AS (UPDATE sessions SET step = step + 1, state = $4, "            \
                  "state_rows = $5, state_cols = $6, state_version = $7, updated_ms = $8 "   \
                  "WHERE id = $1 AND tenant = $2 AND step = $3 RETURNING sid, step) "        \
                  "INSERT INTO step_log(session, step, instructions, queries, labels, "      \
                  "answers, model_version, time_ms) "                                        \
                  "SELECT sid, step, $9, $10, $11, $12, $7, $8 FROM u RETURNING step")       \
    /* step log */                                                                           \
    X(LOG_GET_LABELS, "SELECT labels FROM step_log WHERE session = $1 AND step = $2 "        \
                      "FOR NO KEY UPDATE")                                                   \
    X(LOG_SET_LABELS, "UPDATE step_log SET labels = $3 WHERE session = $1 AND step = $2")    \
    /* LIMIT NULL is no limit (the whole log) */                                             \
    X(LOG_PAGE, "SELECT step, instructions, queries, labels, answers, model_version, "       \
                "time_ms FROM step_log WHERE session = $1 AND step > $2 "                    \
                "ORDER BY step LIMIT $3")                                                    \
    /* admin: the tenants' session counters against the rows */                              \
    X(COUNTERS_CHECK, "SELECT count(*) FROM tenants t WHERE t.n_sessions <> "                \
                      "(SELECT count(*) FROM sessions s WHERE s.tenant = t.id)")             \
    /* the cluster lock of key $1 (ws_store_leader_try): an advisory lock's two ints, a \
     * hash of the schema and the key (advisory locks are the whole database's: the     \
     * deployments in its other schemas have their own); held already by this          \
     * connection, or taken */                                                         \
    X(LEADER_TRY, "SELECT CASE WHEN EXISTS (SELECT 1 FROM pg_locks WHERE "                   \
                  "locktype = 'advisory' AND pid = pg_backend_pid() AND granted AND "        \
                  "classid = hashtext('worldstate.' || current_schema())::oid AND "          \
                  "objid = $1::bigint::oid AND objsubid = 2) THEN 1 ELSE "                   \
                  "pg_try_advisory_lock(hashtext('worldstate.' || current_schema()), "       \
                  "$1::bigint::int)::int END")                                               \
    X(INFO, "SELECT current_setting('synchronous_commit'), "                                 \
            "(SELECT setting::bigint FROM pg_settings WHERE name = 'lock_timeout'), "        \
            "(SELECT max(version) FROM worldstate_schema)")

typedef enum {
#define WS_PG_X_ENUM(name, sql) WS_PG_##name,
    WS_PG_STATEMENTS(WS_PG_X_ENUM)
#undef WS_PG_X_ENUM
    WS_PG_COUNT
} ws_pg_stmt_id;

/* The backend's handle: struct ws_store first, so a ws_store * is one. */
typedef struct {
    ws_store base;
    PGconn *conn;
    ws_store_durability durability;
    char prepared[WS_PG_COUNT]; /* prepared on this connection (cleared on reconnect) */
    int in_txn;                 /* between ws_store_begin and commit/rollback */
    int in_unit;                /* inside a write unit (its savepoint undoes a failure) */
    int txn_poisoned;           /* a failure outside any unit aborted the group: commit refuses */
    char sqlstate[6];           /* of the latest failed statement ("" if none) */
} ws_pg;

static inline ws_pg *ws_pg_of(ws_store *s) { return (ws_pg *)s; }

/* ---- exec.c: parameters, statements, results ---- */
enum { WS_PG_MAX_ARGS = 12 };
typedef struct {
    int n;
    const char *value[WS_PG_MAX_ARGS];
    int length[WS_PG_MAX_ARGS];
    int format[WS_PG_MAX_ARGS]; /* 0 text, 1 binary */
    char num[WS_PG_MAX_ARGS][24];
} ws_pg_args;
void ws_pg__arg_int(ws_pg_args *a, int64_t v);
/* NULL is SQL NULL. The text is not copied: run before it goes away. */
void ws_pg__arg_text(ws_pg_args *a, const char *t);
/* NULL p is SQL NULL. Not copied either. */
void ws_pg__arg_blob(ws_pg_args *a, const void *p, size_t n);

/* Maps a failed statement (res, or the connection's error when res is NULL) to
 * a ws_status by its SQLSTATE and fills err with "<what>: <message>". A lost
 * connection is WS_ERR_STORAGE (retry: the next call reconnects). A failure
 * inside a group transaction but outside a unit poisons the group. */
ws_status ws_pg__fail(ws_pg *s, const PGresult *res, ws_error *err, const char *what);
/* Runs simple SQL (transaction control, schema) with PQexec. */
ws_status ws_pg__exec(ws_pg *s, const char *sql, ws_error *err, const char *what);
/* Runs statement id with a; on success *out is its result (PQclear it). */
ws_status ws_pg__run(ws_pg *s, ws_pg_stmt_id id, const ws_pg_args *a, PGresult **out,
                     ws_error *err, const char *what);
/* Runs a statement for its effect; *rows (may be NULL) gets the rows it
 * changed or returned. */
ws_status ws_pg__run_n(ws_pg *s, ws_pg_stmt_id id, const ws_pg_args *a, int64_t *rows,
                       ws_error *err, const char *what);
/* Runs a statement answering one integer (count, max) with $1 = key. */
ws_status ws_pg__int_by(ws_pg *s, ws_pg_stmt_id id, int64_t key, int64_t *out, ws_error *err,
                        const char *what);
/* Runs a one-row probe: WS_OK when it finds a row, WS_ERR_NOTFOUND "<what> <id>
 * not found" when none. */
ws_status ws_pg__probe(ws_pg *s, ws_pg_stmt_id id, const ws_pg_args *a, const char *what,
                       int64_t key, ws_error *err);
typedef ws_status (*ws_pg_row_fn)(void *ctx, const PGresult *res, int row, ws_error *err);
/* Streams the statement's rows to fn one at a time (libpq's single-row mode:
 * a long step log is never held whole); fn's non-WS_OK stops the calls and is
 * returned once the connection is drained. */
ws_status ws_pg__each(ws_pg *s, ws_pg_stmt_id id, const ws_pg_args *a, ws_pg_row_fn fn, void *ctx,
                      ws_error *err, const char *what);

/* Binary result readers: an integer column of any width (NULL reads 0), a
 * text column (NULL reads NULL), an owned copy of a text column ("" for NULL). */
int64_t ws_pg__int(const PGresult *res, int row, int col);
const char *ws_pg__text(const PGresult *res, int row, int col);
ws_status ws_pg__dup(const PGresult *res, int row, int col, char **out, ws_error *err);

/* ---- connection.c ---- */
/* Reconnects a connection that was lost (outside a transaction); WS_OK when it
 * is up. Called by every statement before it runs. */
ws_status ws_pg__ensure(ws_pg *s, ws_error *err);

/* ---- schema.c ---- */
/* Creates the schema or migrates it to WS_STORE_SCHEMA_VERSION; create == 0
 * refuses a database without one (WS_ERR_NOTFOUND). */
ws_status ws_pg__migrate(ws_pg *s, int create, ws_error *err);

/* ---- txn.c: write units (BEGIN ... COMMIT alone, SAVEPOINT ... RELEASE
 * inside the caller's group) ---- */
typedef struct {
    int own;       /* 1: this unit began (and will end) the transaction */
    int savepoint; /* 1: it took a savepoint inside the caller's group */
} ws_pg_op;
ws_status ws_pg__op_begin(ws_pg *s, ws_pg_op *op, ws_error *err);
/* The same for a unit that writes with one statement (a step): inside a group
 * it takes no savepoint, since a statement that fails changed nothing of its
 * own, but a failing statement (an SQL error, not a conflict) then aborts the
 * group, which commit refuses. Savepoints are subtransactions: 64 of them in
 * a batch overflow each backend's cache of them, and every snapshot of every
 * connection pays for that until the batch commits. */
ws_status ws_pg__op_begin_one(ws_pg *s, ws_pg_op *op, ws_error *err);
ws_status ws_pg__op_end(ws_pg *s, ws_pg_op *op, ws_status status, ws_error *err);

/* ---- lookups several files use ---- */
ws_status ws_pg__tenant_ensure_in(ws_pg *s, const char *name, int64_t *id, ws_error *err);
ws_status ws_pg__model_exists(ws_pg *s, int64_t id, ws_error *err);
/* The tenant's session (locked for the unit when lock): its row id and step;
 * WS_ERR_NOTFOUND for a missing, malformed or another tenant's one. */
ws_status ws_pg__session_find(ws_pg *s, int64_t tenant, const char *id, int lock, int64_t *sid,
                              int64_t *step, ws_error *err);

/* ---- the operations (store_op_list.h), ws_pg_<name> ---- */
#define WS_STORE_OP(ret, name, params) ret ws_pg_##name params;
#include "storage/store_op_list.h"
#undef WS_STORE_OP

#endif
