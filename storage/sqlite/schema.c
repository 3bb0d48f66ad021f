/* schema.c — the database schema and its migrations.
 *
 * PRAGMA user_version is the schema version; PRAGMA application_id marks the
 * file as a worldstate database so that a foreign SQLite file is refused
 * rather than "migrated". migrations[v] takes a database from version v to
 * v + 1; all pending ones run in one transaction, so a database is always at
 * exactly one version. A later schema change appends a migration here and
 * bumps WS_STORE_SCHEMA_VERSION; existing entries never change. */
#include <stdio.h>
#include <string.h>

#include "sqlite_internal.h"

#define WS_STORE_APPLICATION_ID 0x77737431 /* "wst1" */

static const char *const migrations[WS_STORE_SCHEMA_VERSION] = {
    /* 0 -> 1: the initial schema. Times are ms since the epoch. */
    "CREATE TABLE tenants("
    "  id INTEGER PRIMARY KEY,"
    "  name TEXT NOT NULL UNIQUE,"
    "  created_ms INTEGER NOT NULL);"

    /* Keys are stored as SHA-256 hex only; prefix is the first 12 characters of
     * the key, for telling keys apart in listings. Revoked keys stay (audit). */
    "CREATE TABLE api_keys("
    "  id INTEGER PRIMARY KEY,"
    "  tenant INTEGER NOT NULL REFERENCES tenants(id),"
    "  hash TEXT NOT NULL UNIQUE CHECK(length(hash) = 64),"
    "  prefix TEXT NOT NULL,"
    "  admin INTEGER NOT NULL CHECK(admin IN (0, 1)),"
    "  note TEXT NOT NULL DEFAULT '',"
    "  created_ms INTEGER NOT NULL,"
    "  revoked_ms INTEGER);"
    "CREATE INDEX api_keys_tenant ON api_keys(tenant);"

    "CREATE TABLE models("
    "  id INTEGER PRIMARY KEY,"
    "  name TEXT NOT NULL UNIQUE,"
    "  config TEXT NOT NULL,"
    "  training TEXT NOT NULL,"
    "  current_version INTEGER NOT NULL DEFAULT 0,"
    "  created_ms INTEGER NOT NULL);"

    "CREATE TABLE model_versions("
    "  model INTEGER NOT NULL REFERENCES models(id) ON DELETE CASCADE,"
    "  version INTEGER NOT NULL CHECK(version >= 1),"
    "  path TEXT NOT NULL,"
    "  note TEXT NOT NULL DEFAULT '',"
    "  created_ms INTEGER NOT NULL,"
    "  PRIMARY KEY(model, version));"

    "CREATE TABLE vocab("
    "  model INTEGER NOT NULL REFERENCES models(id) ON DELETE CASCADE,"
    "  id INTEGER NOT NULL CHECK(id >= 0),"
    "  symbol TEXT NOT NULL,"
    "  PRIMARY KEY(model, id),"
    "  UNIQUE(model, symbol));"

    /* sid is the internal key the log refers to (8 bytes per log row instead of
     * the 32-character public id). The state is float32 little-endian, row
     * major; the CHECK keeps blob and shape consistent. */
    "CREATE TABLE sessions("
    "  sid INTEGER PRIMARY KEY,"
    "  id TEXT NOT NULL UNIQUE CHECK(length(id) = 32),"
    "  tenant INTEGER NOT NULL REFERENCES tenants(id),"
    "  model INTEGER NOT NULL REFERENCES models(id),"
    "  step INTEGER NOT NULL DEFAULT 0 CHECK(step >= 0),"
    "  state BLOB,"
    "  state_rows INTEGER NOT NULL DEFAULT 0,"
    "  state_cols INTEGER NOT NULL DEFAULT 0,"
    "  state_version INTEGER NOT NULL DEFAULT 0,"
    "  created_ms INTEGER NOT NULL,"
    "  updated_ms INTEGER NOT NULL,"
    "  CHECK((state IS NULL AND state_rows = 0 AND state_cols = 0) OR"
    "        (state_rows > 0 AND state_cols > 0 AND"
    "         length(state) = state_rows * state_cols * 4)));"
    "CREATE INDEX sessions_tenant ON sessions(tenant, id);" /* list/count per tenant */
    "CREATE INDEX sessions_model ON sessions(model);"       /* replay; model delete */

    /* Append-only except labels, which may arrive later. A rowid table (not
     * WITHOUT ROWID): rows hold kilobytes of JSON. */
    "CREATE TABLE step_log("
    "  session INTEGER NOT NULL REFERENCES sessions(sid) ON DELETE CASCADE,"
    "  step INTEGER NOT NULL CHECK(step >= 1),"
    "  instructions TEXT NOT NULL,"
    "  queries TEXT NOT NULL,"
    "  labels TEXT,"
    "  answers TEXT NOT NULL,"
    "  model_version INTEGER NOT NULL,"
    "  time_ms INTEGER NOT NULL);"
    /* paging by (session, step), one step per session once, cascade deletes */
    "CREATE UNIQUE INDEX step_log_session_step ON step_log(session, step);",

    /* 1 -> 2: each version's checkpoint SHA-256, checked when it is loaded;
     * versions recorded before have none ('') and load unchecked. */
    "ALTER TABLE model_versions ADD COLUMN sha256 TEXT NOT NULL DEFAULT '';",

    /* 2 -> 3: the tenant a model belongs to: only that tenant's sessions use
     * (and so train) it. NULL, as every model before, is shared by every
     * tenant. */
    "ALTER TABLE models ADD COLUMN tenant INTEGER REFERENCES tenants(id);",

    /* 3 -> 4: each tenant's number of sessions, so that the session limit
     * reads one row instead of counting the tenant's sessions under the write
     * lock (O(n) per create). Triggers keep it in the very statement that
     * inserts or deletes a session, so in its transaction, whatever the
     * caller; a session never changes tenant. Initialised from the rows. */
    "ALTER TABLE tenants ADD COLUMN n_sessions INTEGER NOT NULL DEFAULT 0"
    "  CHECK(n_sessions >= 0);"
    "UPDATE tenants SET n_sessions = (SELECT count(*) FROM sessions s WHERE s.tenant = tenants.id);"
    "CREATE TRIGGER sessions_count_insert AFTER INSERT ON sessions BEGIN"
    "  UPDATE tenants SET n_sessions = n_sessions + 1 WHERE id = NEW.tenant; END;"
    "CREATE TRIGGER sessions_count_delete AFTER DELETE ON sessions BEGIN"
    "  UPDATE tenants SET n_sessions = n_sessions - 1 WHERE id = OLD.tenant; END;",
};

/* Reads an integer PRAGMA (not prepared once: runs only at open). */
static ws_status pragma_int(ws_sqlite *s, const char *sql, int64_t *out, ws_error *err)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK) return ws_sqlite__sqlfail(s, rc, err, sql);
    rc = sqlite3_step(st);
    ws_status r = WS_OK;
    if (rc == SQLITE_ROW)
        *out = (int64_t)sqlite3_column_int64(st, 0);
    else
        r = rc == SQLITE_DONE ? ws_error_set(err, WS_ERR_STORAGE, "%s: no result", sql)
                              : ws_sqlite__sqlfail(s, rc, err, sql);
    (void)sqlite3_finalize(st); /* repeats the step's error, handled above */
    return r;
}

static ws_status exec(ws_sqlite *s, const char *sql, ws_error *err, const char *what)
{
    char *msg = NULL;
    int rc = sqlite3_exec(s->db, sql, NULL, NULL, &msg);
    if (rc == SQLITE_OK) return WS_OK;
    ws_status st = ws_sqlite__sqlfail(s, rc, err, what);
    sqlite3_free(msg); /* the same text sqlite3_errmsg gave sqlfail */
    return st;
}

/* Where the file stands: its version, or a refusal. */
static ws_status check_file(ws_sqlite *s, int create, int64_t *version, ws_error *err)
{
    int64_t app_id, n_objects;
    WS_TRY(pragma_int(s, "PRAGMA user_version", version, err));
    WS_TRY(pragma_int(s, "PRAGMA application_id", &app_id, err));
    WS_TRY(pragma_int(s, "SELECT count(*) FROM sqlite_master", &n_objects, err));
    if (app_id != WS_STORE_APPLICATION_ID && (app_id != 0 || n_objects > 0))
        return ws_error_set(err, WS_ERR_FORMAT,
                            "storage: %s is not a worldstate database (application_id %lld, "
                            "%lld schema objects)",
                            sqlite3_db_filename(s->db, "main"), (long long)app_id,
                            (long long)n_objects);
    if (*version > WS_STORE_SCHEMA_VERSION)
        return ws_error_set(err, WS_ERR_FORMAT,
                            "storage: database schema version %lld is newer than this build "
                            "(%d); upgrade worldstate",
                            (long long)*version, WS_STORE_SCHEMA_VERSION);
    if (*version == 0 && !create)
        return ws_error_set(err, WS_ERR_FORMAT,
                            "storage: %s is empty (not initialised); open it with create",
                            sqlite3_db_filename(s->db, "main"));
    return WS_OK;
}

ws_status ws_sqlite__migrate(ws_sqlite *s, int create, ws_error *err)
{
    int64_t version;
    WS_TRY(check_file(s, create, &version, err));
    if (version == WS_STORE_SCHEMA_VERSION) return WS_OK; /* the common case: no lock taken */

    /* Another connection may be migrating at this very moment: take the write
     * lock, then look again. */
    WS_TRY(exec(s, "BEGIN IMMEDIATE", err, "storage: BEGIN IMMEDIATE (migration)"));
    ws_status st = check_file(s, create, &version, err);
    for (int64_t v = version; st == WS_OK && v < WS_STORE_SCHEMA_VERSION; v++)
        st = exec(s, migrations[v], err, "storage: migrating the schema");
    if (st == WS_OK && version < WS_STORE_SCHEMA_VERSION) {
        char sql[96];
        snprintf(sql, sizeof sql, "PRAGMA application_id = %d; PRAGMA user_version = %d;",
                 WS_STORE_APPLICATION_ID, WS_STORE_SCHEMA_VERSION);
        st = exec(s, sql, err, "storage: setting the schema version");
    }
    if (st == WS_OK) return exec(s, "COMMIT", err, "storage: COMMIT (migration)");
    if (!sqlite3_get_autocommit(s->db)) (void)exec(s, "ROLLBACK", NULL, "storage: ROLLBACK");
    return st;
}
