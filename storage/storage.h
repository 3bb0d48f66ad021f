/* storage.h — the storage layer of worldstated (DESIGN §1, §4): tenants and API
 * keys, models and their versions, per-model vocabularies, sessions with their
 * current world state, and the append-only step log.
 *
 * Backends. This API is one set of thin wrappers (store.c) over a table of
 * operations per backend (store_ops.h, the seam), chosen at ws_store_open by
 * the data location: "sqlite:PATH" or a bare PATH is SQLite (storage/sqlite/),
 * "postgresql://..." or "postgres://..." PostgreSQL (storage/postgresql/, in
 * builds with libpq); the rest of this header describes SQLite where it names
 * it (WAL, PRAGMAs), and storage/postgresql/ says what stands for each there
 * (row locks, synchronous_commit, lock_timeout; a lost connection is
 * WS_ERR_STORAGE and the next call reconnects). An unknown "scheme:" is
 * WS_ERR_INVALID.
 *
 * storage/ knows nothing about HTTP or tensors: a world state is "a blob of
 * float32 with a shape (rows, cols)", and instructions, queries, labels,
 * answers, model configs and training settings are JSON text stored verbatim
 * (the server validates them before they get here).
 *
 * Threading. A ws_store is one SQLite connection. Open one per thread; a handle
 * may move between threads but must never be used by two at once. Any number of
 * handles (threads, processes on the same host) may share one database file:
 * WAL mode lets readers run beside the single writer, and writers wait for each
 * other up to WS_STORE_BUSY_TIMEOUT_MS instead of failing.
 *
 * Durability (--durability):
 *   NORMAL  WAL + synchronous=NORMAL. A committed transaction survives a crash
 *           of the process (kill -9, OOM kill, segfault). On power loss or an OS
 *           crash the most recent commits may be lost (the database comes back
 *           as of an earlier commit, never corrupt).
 *   FULL    WAL + synchronous=FULL. Every commit fsyncs the WAL before it
 *           returns: a committed transaction also survives power loss, provided
 *           the disk honours fsync. Costs one fsync per commit, which group
 *           commit (many steps per transaction) amortises.
 * Either way a step must be acknowledged only after ws_store_commit (or the
 * self-committing call) returned WS_OK. WAL needs a local file system.
 *
 * Errors are values: every function returns a ws_status and fills err with a
 * message. WS_ERR_NOTFOUND is the only answer for a session that does not exist
 * *or belongs to another tenant* (never a different error, so existence does
 * not leak). WS_ERR_CONFLICT means a precondition (expected step, unique name,
 * version order, session limit) did not hold and nothing changed.
 * WS_ERR_STORAGE covers SQLite failures, including "database is locked" after
 * the busy timeout (a server answers 503); WS_ERR_IO disk/file failures;
 * WS_ERR_FORMAT a corrupt or foreign database file.
 *
 * Conventions. *_get fills an owned struct, freed with its *_clear. Listing
 * functions call a callback per row with borrowed pointers valid only during
 * that call; a callback returning non-WS_OK stops the listing and its status is
 * returned. Callbacks must not call into the same ws_store (its statement is
 * still running): such calls fail with WS_ERR_INVALID. Times are milliseconds
 * since the Unix epoch, stamped by storage. */
#ifndef WS_STORAGE_H
#define WS_STORAGE_H

#include <stddef.h>
#include <stdint.h>

#include "base/ws_status.h"

#define WS_STORE_SCHEMA_VERSION 4        /* PRAGMA user_version of this build */
#define WS_STORE_BUSY_TIMEOUT_MS 10000   /* how long a writer waits for the lock */
#define WS_STORE_ID_LEN 32               /* session id: 128 random bits, lowercase hex */
#define WS_STORE_KEY_LEN 68              /* API key: "wsk_" + 256 random bits as hex */
#define WS_STORE_KEY_PREFIX_LEN 12       /* "wsk_" + 8 hex: shown in listings, not secret */
#define WS_STORE_NAME_MAX 64             /* tenant and model names: [A-Za-z0-9._-]{1,64} */
#define WS_STORE_PAGE_MAX 1000           /* largest page a listing returns */
#define WS_STORE_STATE_MAX_BYTES (1u << 28) /* largest world-state blob */

typedef struct ws_store ws_store;

typedef enum {
    WS_STORE_DURABILITY_NORMAL = 1, /* == PRAGMA synchronous value */
    WS_STORE_DURABILITY_FULL = 2
} ws_store_durability;

/* ---- connection ------------------------------------------------------------ */

/* Opens (create != 0: creating if missing) the database at location, a bare
 * path or "scheme:target" (see Backends). SQLite: sets WAL, synchronous per
 * durability, busy_timeout, foreign_keys; creates or migrates the schema to
 * WS_STORE_SCHEMA_VERSION; prepares every statement. A missing file without
 * create gives WS_ERR_NOTFOUND; a file that is not a worldstate database, or
 * one from a newer build, WS_ERR_FORMAT. On failure *out is NULL. */
ws_status ws_store_open(const char *location, ws_store_durability durability, int create,
                        ws_store **out, ws_error *err);
/* Closes the connection; an open transaction is rolled back. NULL is a no-op. */
void ws_store_close(ws_store *s);

/* The registered backends, 0..count-1 (the first also serves bare paths), and
 * the scheme of one ("sqlite"); NULL out of range. For tests and --help. */
int ws_store_backend_count(void);
const char *ws_store_backend_scheme(int i);

/* "normal" / "full" (for --durability); WS_ERR_INVALID otherwise. */
ws_status ws_store_durability_parse(const char *text, ws_store_durability *out, ws_error *err);
const char *ws_store_durability_name(ws_store_durability d);

typedef struct {
    char journal_mode[16]; /* "wal" */
    int synchronous;       /* 1 NORMAL, 2 FULL */
    int foreign_keys;      /* 1 */
    int busy_timeout_ms;
    int schema_version;    /* PRAGMA user_version */
} ws_store_info;
/* The connection's effective settings, read back from SQLite (for tests,
 * /readyz and logs). */
ws_status ws_store_get_info(ws_store *s, ws_store_info *out, ws_error *err);

/* PRAGMA integrity_check is "ok" and PRAGMA foreign_key_check finds nothing;
 * otherwise WS_ERR_FORMAT with the first problem. Reads the whole file: an
 * admin/startup check, not a per-request one. */
ws_status ws_store_integrity_check(ws_store *s, ws_error *err);
/* Copies the WAL into the database file and truncates it (for shutdown and
 * backups). WS_ERR_STORAGE if readers kept it from completing. */
ws_status ws_store_checkpoint(ws_store *s, ws_error *err);

/* ---- online backup ----------------------------------------------------------- */

/* Progress of ws_store_backup after each step: units copied so far and the
 * total (SQLite: pages). A status other than WS_OK stops the backup (its file
 * is removed) and is what ws_store_backup returns. It must not call into the
 * store being copied (WS_ERR_INVALID, as for listings). */
typedef ws_status (*ws_store_backup_fn)(void *ctx, int64_t done, int64_t total);
/* Writes a consistent copy of the whole database into dest, a new file
 * (created 0600; one that exists already is WS_ERR_CONFLICT and is left
 * alone), while other connections and processes go on reading and writing:
 * the copy holds exactly the transactions committed before it began, each
 * whole, and nothing committed after. It goes in steps of step_pages pages
 * (>= 1), calling fn (may be NULL) after each, and is synced to disk before
 * WS_OK; ws_store_open opens the copy as a database like any other. On
 * failure dest is removed. WS_ERR_INVALID inside a transaction of s.
 * SQLite: the online backup API (sqlite3_backup_step) inside one read
 * transaction held across the steps. In WAL mode that snapshot blocks no
 * writer and a writer's commit never restarts the copy (as it would between
 * read transactions); the WAL cannot be checkpointed past the snapshot until
 * the copy ends, so it grows by what is written meanwhile. A backend that
 * cannot copy itself into a file answers WS_ERR_UNSUPPORTED (PostgreSQL: use
 * its own tools, pg_dump or pg_basebackup). */
ws_status ws_store_backup(ws_store *s, const char *dest, int step_pages, ws_store_backup_fn fn,
                          void *ctx, ws_error *err);

/* ---- transactions (group commit) ------------------------------------------- */

/* BEGIN IMMEDIATE: takes the write lock now (waiting up to the busy timeout),
 * so everything up to commit runs without lock upgrades. Keep it short: compute
 * first, then begin / apply every result / commit. Write calls made inside it
 * join it (each undoes only its own part when it fails); outside one, each write
 * call is its own BEGIN IMMEDIATE ... COMMIT. */
ws_status ws_store_begin(ws_store *s, ws_error *err);
/* Commits. On failure nothing of the transaction is kept (it is rolled back)
 * and none of its steps may be acknowledged. */
ws_status ws_store_commit(ws_store *s, ws_error *err);
/* Discards the open transaction; WS_OK (nothing to do) when none is open. */
ws_status ws_store_rollback(ws_store *s, ws_error *err);
/* 1 between ws_store_begin and ws_store_commit/rollback. */
int ws_store_in_transaction(const ws_store *s);

/* ---- several daemons over one database (PostgreSQL) -------------------------- */

/* 1 when the backend lets several daemons serve one database at once
 * (PostgreSQL): a daemon then cannot keep what another may change (vocabulary
 * ids, the served version) as its own, and takes ids from the store before it
 * computes. 0 for SQLite: one daemon per file (the data directory's lock). */
int ws_store_shared(const ws_store *s);
/* A lock of the whole cluster, for work one daemon does for all (a model's
 * online training and publication: key = the model id, >= 0). *held = 1 when
 * this connection holds it, taken now when free; 0 when another connection
 * has it. Non-blocking, and idempotent: ask again at will. It stays held until
 * the connection closes or is lost (a daemon killed frees it at once; after a
 * reconnect it must be taken again, which the next call does). PostgreSQL: a
 * session-level advisory lock. SQLite: always held (one daemon per file). */
ws_status ws_store_leader_try(ws_store *s, int64_t key, int *held, ws_error *err);

/* ---- tenants and API keys --------------------------------------------------- */

/* The id of tenant `name`, creating it if new. */
ws_status ws_store_tenant_ensure(ws_store *s, const char *name, int64_t *id, ws_error *err);
/* The id of an existing tenant; WS_ERR_NOTFOUND otherwise. */
ws_status ws_store_tenant_find(ws_store *s, const char *name, int64_t *id, ws_error *err);

/* Creates an API key for tenant_name (created if new). The plaintext key is
 * written to key_out once and never stored: the database keeps its SHA-256
 * (hex) and its first WS_STORE_KEY_PREFIX_LEN characters for listings.
 * key_id may be NULL; note may be NULL. */
ws_status ws_store_key_create(ws_store *s, const char *tenant_name, int admin, const char *note,
                              char key_out[WS_STORE_KEY_LEN + 1], int64_t *key_id,
                              ws_error *err);

typedef struct {
    int64_t key_id;
    int64_t tenant;
    char tenant_name[WS_STORE_NAME_MAX + 1];
    int admin;
} ws_store_principal;
/* Looks the key up by its hash: an active key fills out; a wrong, malformed or
 * revoked key gives WS_ERR_NOTFOUND (the same for all three). */
ws_status ws_store_key_verify(ws_store *s, const char *key, ws_store_principal *out,
                              ws_error *err);

typedef struct {
    int64_t id;
    const char *tenant_name;
    const char *prefix; /* first WS_STORE_KEY_PREFIX_LEN characters of the key */
    int admin;
    const char *note;
    int64_t created_ms;
    int64_t revoked_ms; /* 0 while active */
} ws_store_key_info;
typedef ws_status (*ws_store_key_fn)(void *ctx, const ws_store_key_info *key);
/* Every key, revoked ones included, by id. */
ws_status ws_store_key_list(ws_store *s, ws_store_key_fn fn, void *ctx, ws_error *err);
/* Revokes a key (kept for the audit trail, never accepted again). Revoking a
 * revoked key is WS_OK; an unknown id WS_ERR_NOTFOUND. */
ws_status ws_store_key_revoke(ws_store *s, int64_t key_id, ws_error *err);
/* Number of active keys (the daemon serves loopback only when it is 0). */
ws_status ws_store_key_count_active(ws_store *s, int64_t *n, ws_error *err);

/* ---- models and versions ---------------------------------------------------- */

typedef struct {
    int64_t id;
    char name[WS_STORE_NAME_MAX + 1];
    char *config_json;   /* owned by a _get result, borrowed in a listing */
    char *training_json;
    int64_t current_version; /* 0: none recorded yet */
    int64_t created_ms;
    int64_t tenant;                          /* its tenant; 0: shared by every tenant */
    char tenant_name[WS_STORE_NAME_MAX + 1]; /* "" when shared */
} ws_store_model;
void ws_store_model_clear(ws_store_model *m);

/* New model; WS_ERR_CONFLICT if the name is taken. training_json NULL = "{}".
 * tenant > 0 makes it that tenant's (WS_ERR_NOTFOUND if there is no such
 * tenant): only its sessions may use it (ws_store_session_create); 0 makes it
 * shared. Names are one namespace across tenants. */
ws_status ws_store_model_create(ws_store *s, const char *name, int64_t tenant,
                                const char *config_json, const char *training_json, int64_t *id,
                                ws_error *err);
ws_status ws_store_model_get(ws_store *s, int64_t id, ws_store_model *out, ws_error *err);
ws_status ws_store_model_find(ws_store *s, const char *name, ws_store_model *out, ws_error *err);
typedef ws_status (*ws_store_model_fn)(void *ctx, const ws_store_model *m);
ws_status ws_store_model_list(ws_store *s, ws_store_model_fn fn, void *ctx, ws_error *err);
ws_status ws_store_model_set_training(ws_store *s, int64_t id, const char *training_json,
                                      ws_error *err);
/* Deletes a model with its versions and vocabulary; WS_ERR_CONFLICT while any
 * session uses it. Checkpoint files are the caller's to remove. */
ws_status ws_store_model_delete(ws_store *s, int64_t id, ws_error *err);

typedef struct {
    int64_t model;
    int64_t version;
    char *path;   /* checkpoint file: relative to the data directory, or absolute */
    char *note;
    char *sha256; /* the file's SHA-256, 64 hex digits; "" for versions recorded before */
    int64_t created_ms;
} ws_store_version;
void ws_store_version_clear(ws_store_version *v);

/* Records a checkpoint (already written atomically by the caller) as `version`
 * with its SHA-256 (64 hex digits) and makes it the model's current version.
 * version must exceed every recorded version of the model (WS_ERR_CONFLICT
 * otherwise). note may be NULL. */
ws_status ws_store_version_add(ws_store *s, int64_t model, int64_t version, const char *path,
                               const char *sha256, const char *note, ws_error *err);
/* The model's greatest recorded version (0: none). Inside ws_store_begin it
 * cannot change before the commit: choose a new version number there. */
ws_status ws_store_version_max(ws_store *s, int64_t model, int64_t *max, ws_error *err);
ws_status ws_store_version_get(ws_store *s, int64_t model, int64_t version,
                               ws_store_version *out, ws_error *err);
typedef ws_status (*ws_store_version_fn)(void *ctx, const ws_store_version *v);
/* The model's versions, oldest first. */
ws_status ws_store_version_list(ws_store *s, int64_t model, ws_store_version_fn fn, void *ctx,
                                ws_error *err);
/* Makes an already recorded version current again (rolling back a bad one). */
ws_status ws_store_model_set_current(ws_store *s, int64_t model, int64_t version,
                                     ws_error *err);

/* ---- vocabulary ------------------------------------------------------------- */

/* Number of stored symbols of the model (ids are 0..n-1). */
ws_status ws_store_vocab_count(ws_store *s, int64_t model, int64_t *n, ws_error *err);
/* Appends symbols[0..n) with ids first_id..first_id+n-1. first_id must equal
 * the stored count (WS_ERR_CONFLICT otherwise: the caller's vocabulary and the
 * database disagree), and a symbol already stored is WS_ERR_CONFLICT. Inside a
 * group transaction it commits together with the steps that named them. */
ws_status ws_store_vocab_append(ws_store *s, int64_t model, int64_t first_id, size_t n,
                                const char *const *symbols, ws_error *err);
typedef ws_status (*ws_store_vocab_fn)(void *ctx, int64_t id, const char *symbol, size_t len);
/* The append of several daemons growing one model's vocabulary at once: in one
 * transaction under the model's lock, so that it never has to be tried again.
 * When others stored symbols from first_id on first, those go to
 * others(ctx, id, symbol, len) in id order, the caller's symbols among them
 * are not stored again, and the rest follow them in the order given, as far as
 * `limit` symbols in all (the caller's vocabulary's capacity): the caller
 * rebuilds its vocabulary alike, from first_id on the others' symbols and then
 * its own. *count: the stored count after it, for the caller to check its
 * vocabulary against. first_id above the stored count is WS_ERR_CONFLICT. */
ws_status ws_store_vocab_merge(ws_store *s, int64_t model, int64_t first_id, size_t n,
                               const char *const *symbols, int64_t limit,
                               ws_store_vocab_fn others, void *ctx, int64_t *count,
                               ws_error *err);
/* Every symbol in id order (ids are checked to be 0, 1, 2, ...: a gap is
 * WS_ERR_FORMAT). */
ws_status ws_store_vocab_load(ws_store *s, int64_t model, ws_store_vocab_fn fn, void *ctx,
                              ws_error *err);

/* ---- sessions --------------------------------------------------------------- */

typedef struct {
    char id[WS_STORE_ID_LEN + 1];
    int64_t tenant;
    int64_t model;
    int64_t step;          /* steps applied so far; the log holds steps 1..step */
    int64_t state_version; /* model version that produced the state */
    int32_t rows, cols;    /* state shape; 0, 0 while the session has no state */
    float *state;          /* rows*cols floats (owned by a _get result), or NULL */
    int64_t created_ms, updated_ms;
} ws_store_session;
void ws_store_session_clear(ws_store_session *sess);

/* 1 if id has the form of a session id (32 lowercase hex digits). */
int ws_store_session_id_valid(const char *id);

/* Creates a session of `tenant` on `model` at step 0 with a fresh random id.
 * state may be NULL (rows = cols = 0: no state yet, e.g. "use the model's
 * W_0"); otherwise rows*cols floats made by model version state_version.
 * max_sessions > 0 caps the tenant's sessions, checked in the same transaction
 * (WS_ERR_CONFLICT "limit" when reached: create is the only call that returns
 * CONFLICT). Unknown model or tenant, or a model of another tenant:
 * WS_ERR_NOTFOUND. */
ws_status ws_store_session_create(ws_store *s, int64_t tenant, int64_t model, const float *state,
                                  int32_t rows, int32_t cols, int64_t state_version,
                                  int64_t max_sessions, char id_out[WS_STORE_ID_LEN + 1],
                                  ws_error *err);
/* Fills out (with the state when with_state != 0); WS_ERR_NOTFOUND when the
 * session does not exist or is not the tenant's. */
ws_status ws_store_session_get(ws_store *s, int64_t tenant, const char *id, int with_state,
                               ws_store_session *out, ws_error *err);
/* Deletes the session and its step log for good: a real delete, not a flag, so
 * that a tenant's "delete" really removes its data, the file does not grow
 * with dead sessions, and no query can forget a "deleted" filter (ids are
 * random 128-bit, never reused). Replay simply no longer sees it. One
 * transaction; a very long log makes it proportionally slow.
 * WS_ERR_NOTFOUND as for get. */
ws_status ws_store_session_delete(ws_store *s, int64_t tenant, const char *id, ws_error *err);
ws_status ws_store_session_count(ws_store *s, int64_t tenant, int64_t *n, ws_error *err);
typedef ws_status (*ws_store_session_fn)(void *ctx, const ws_store_session *sess);
/* Up to limit (1..WS_STORE_PAGE_MAX) of the tenant's sessions with id >
 * after_id (NULL or "" for the first page), in id order, without state. The
 * last id seen is the next page's after_id. */
ws_status ws_store_session_list(ws_store *s, int64_t tenant, const char *after_id, int limit,
                                ws_store_session_fn fn, void *ctx, ws_error *err);
/* Every session of a model, all tenants (replay and retraining), without
 * state. */
ws_status ws_store_session_each_of_model(ws_store *s, int64_t model, ws_store_session_fn fn,
                                         void *ctx, ws_error *err);

/* ---- steps and the step log ------------------------------------------------- */

typedef struct {
    int64_t step;                  /* read: the step; ignored on write */
    const char *instructions_json; /* required */
    const char *queries_json;      /* required */
    const char *labels_json;       /* NULL: not labelled (yet) */
    const char *answers_json;      /* required */
    int64_t model_version;         /* version that ran the step */
    int64_t time_ms;               /* read: when logged; ignored on write */
} ws_store_log_entry;

/* Applies one step to a session: only if it is the tenant's and at
 * expect_prev_step, sets its step to expect_prev_step + 1, its state to
 * state[rows*cols] with state_version = entry->model_version, and appends
 * entry to the log. *current_step (may be NULL) gets the new step, or on
 * WS_ERR_CONFLICT the session's actual step (nothing changed).
 * The engine passes the step of the state it computed from even when the
 * client sent no expect_step, so a stale state can never overwrite a newer one.
 * Inside ws_store_begin it joins the group: a conflict or failure undoes this
 * session's part only, the others still commit. */
ws_status ws_store_apply_step(ws_store *s, int64_t tenant, const char *session_id,
                              int64_t expect_prev_step, const float *state, int32_t rows,
                              int32_t cols, const ws_store_log_entry *entry,
                              int64_t *current_step, ws_error *err);

/* Replaces the state of a session at expect_step (its step and log stay) with
 * state[rows*cols] made by model version state_version: re-deriving a session
 * from its log under another version. WS_ERR_CONFLICT (nothing changed) when
 * the session is no longer at expect_step; WS_ERR_NOTFOUND as for get. */
ws_status ws_store_session_set_state(ws_store *s, int64_t tenant, const char *session_id,
                                     int64_t expect_step, const float *state, int32_t rows,
                                     int32_t cols, int64_t state_version, ws_error *err);

/* Sets the labels of a logged step (labels arrive after the answers). If the
 * step already has labels: identical ones are WS_OK (a retry), different ones
 * WS_ERR_CONFLICT unless replace != 0. Unknown session/step: WS_ERR_NOTFOUND. */
ws_status ws_store_log_set_labels(ws_store *s, int64_t tenant, const char *session_id,
                                  int64_t step, const char *labels_json, int replace,
                                  ws_error *err);

typedef ws_status (*ws_store_log_fn)(void *ctx, const ws_store_log_entry *entry);
/* Up to limit (1..WS_STORE_PAGE_MAX) logged steps with step > after_step, in
 * step order (after_step = t-1, limit = 1 reads step t). */
ws_status ws_store_log_page(ws_store *s, int64_t tenant, const char *session_id,
                            int64_t after_step, int limit, ws_store_log_fn fn, void *ctx,
                            ws_error *err);
/* The whole log in step order, as one consistent snapshot (for replay). */
ws_status ws_store_log_each(ws_store *s, int64_t tenant, const char *session_id,
                            ws_store_log_fn fn, void *ctx, ws_error *err);

#endif
