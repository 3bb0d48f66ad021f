/* connection.c — connecting to PostgreSQL and staying connected: the session
 * settings each connection gets, reconnecting after a lost connection, and the
 * admin checks (settings, integrity, checkpoint).
 *
 * A location is "postgresql://..." or "postgres://..." (a libpq URI), or
 * "postgresql:KEY=VALUE ..." (a libpq keyword string). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_internal.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "storage/ stores world states as little-endian float32 and copies them as is"
#endif

/* What every connection gets: the durability as synchronous_commit (FULL: the
 * commit waits for the WAL flush; NORMAL: it does not, so a commit survives a
 * crash of the daemon but not of the PostgreSQL server or machine, which may
 * lose its last fraction of a second of commits: SQLite's NORMAL in kind), and
 * the lock wait bounded as SQLite's busy timeout is. UTC: no time zone from
 * the server's configuration matters to millisecond integers, but be exact. */
static ws_status configure(ws_pg *s, ws_error *err)
{
    char sql[160];
    snprintf(sql, sizeof sql,
             "SET synchronous_commit = %s; SET lock_timeout = %d; SET client_min_messages = "
             "warning",
             s->durability == WS_STORE_DURABILITY_FULL ? "on" : "off", WS_STORE_BUSY_TIMEOUT_MS);
    return ws_pg__exec(s, sql, err, "storage: configuring the connection");
}

/* Connects with libpq's defaults under ours: the keyword arrays are read in
 * order and a later value wins, so what the location says overrides a
 * connect_timeout or application_name given first. */
static PGconn *connect_to(const char *conninfo)
{
    const char *const keys[] = {"connect_timeout", "application_name", "dbname", NULL};
    const char *const values[] = {"10", "worldstated", conninfo, NULL};
    return PQconnectdbParams(keys, values, 1);
}

/* Starts a connection's life: settings, and no statement prepared yet. */
static ws_status connected(ws_pg *s, ws_error *err)
{
    memset(s->prepared, 0, sizeof s->prepared);
    /* JSON and symbols are UTF-8 on the daemon's side, whatever the
     * database's encoding is (states are bytea, never recoded). */
    if (PQsetClientEncoding(s->conn, "UTF8") != 0)
        return ws_pg__fail(s, NULL, err, "storage: setting the client encoding");
    return configure(s, err);
}

ws_status ws_pg__ensure(ws_pg *s, ws_error *err)
{
    if (PQstatus(s->conn) == CONNECTION_OK) return WS_OK;
    if (s->in_txn) /* the transaction went with the connection */
        return ws_error_set(err, WS_ERR_STORAGE,
                            "storage: lost the connection to PostgreSQL inside a transaction; "
                            "nothing of it was committed: roll back and retry");
    PQreset(s->conn);
    if (PQstatus(s->conn) != CONNECTION_OK)
        return ws_pg__fail(s, NULL, err, "storage: reconnecting");
    return connected(s, err);
}

ws_status ws_pg_open(const char *target, ws_store_durability durability, int create,
                     ws_store **out, ws_error *err)
{
    *out = NULL;
    /* "//host/db" is the rest of a URI, anything else a keyword string */
    size_t n = strlen(target);
    char *conninfo = malloc(n + 16);
    if (!conninfo) return ws_error_set(err, WS_ERR_NOMEM, "storage: out of memory");
    snprintf(conninfo, n + 16, "%s%s", strncmp(target, "//", 2) ? "" : "postgresql:", target);
    ws_pg *s = calloc(1, sizeof *s);
    if (!s) {
        free(conninfo);
        return ws_error_set(err, WS_ERR_NOMEM, "storage: out of memory");
    }
    s->durability = durability;
    s->conn = connect_to(conninfo);
    free(conninfo);
    ws_status st = WS_OK;
    if (!s->conn)
        st = ws_error_set(err, WS_ERR_NOMEM, "storage: out of memory connecting to PostgreSQL");
    else if (PQstatus(s->conn) != CONNECTION_OK)
        st = ws_pg__fail(s, NULL, err, "storage: opening the database");
    if (st == WS_OK) st = connected(s, err);
    if (st == WS_OK) st = ws_pg__migrate(s, create, err);
    if (st != WS_OK) {
        ws_pg_close(&s->base);
        return st;
    }
    *out = &s->base;
    return WS_OK;
}

void ws_pg_close(ws_store *store)
{
    ws_pg *s = ws_pg_of(store);
    /* closing the connection ends an open transaction: the server rolls it back */
    PQfinish(s->conn);
    free(s);
}

ws_status ws_pg_get_info(ws_store *store, ws_store_info *out, ws_error *err)
{
    ws_pg *s = ws_pg_of(store);
    memset(out, 0, sizeof *out);
    PGresult *res;
    WS_TRY(ws_pg__run(s, WS_PG_INFO, NULL, &res, err, "storage: reading the settings"));
    /* PostgreSQL writes ahead too: "wal" says the same as for SQLite. */
    snprintf(out->journal_mode, sizeof out->journal_mode, "wal");
    const char *sync = ws_pg__text(res, 0, 0);
    /* off waits for no flush (NORMAL); local, on, remote_* wait (FULL) */
    out->synchronous = sync && !strcmp(sync, "off") ? 1 : 2;
    out->foreign_keys = 1; /* always enforced */
    out->busy_timeout_ms = (int)ws_pg__int(res, 0, 1);
    out->schema_version = (int)ws_pg__int(res, 0, 2);
    PQclear(res);
    return WS_OK;
}

/* The server checks pages (checksums where enabled) and every constraint as it
 * goes; what it cannot know is that each tenant's session counter matches its
 * rows. */
ws_status ws_pg_integrity_check(ws_store *store, ws_error *err)
{
    ws_pg *s = ws_pg_of(store);
    PGresult *res;
    WS_TRY(ws_pg__run(s, WS_PG_COUNTERS_CHECK, NULL, &res, err, "storage: integrity check"));
    int64_t bad = ws_pg__int(res, 0, 0);
    PQclear(res);
    if (bad)
        return ws_error_set(err, WS_ERR_FORMAT,
                            "storage: integrity check: %lld tenants' session counters differ "
                            "from their sessions",
                            (long long)bad);
    return WS_OK;
}

/* The server checkpoints by itself (and CHECKPOINT is a superuser's command):
 * there is no WAL of ours to fold. */
ws_status ws_pg_checkpoint(ws_store *store, ws_error *err)
{
    ws_pg *s = ws_pg_of(store);
    if (s->in_txn)
        return ws_error_set(err, WS_ERR_INVALID, "storage: checkpoint inside a transaction");
    return WS_OK;
}

/* A consistent copy of a PostgreSQL database is its server's business
 * (pg_dump, pg_basebackup, continuous archiving), not a file this process can
 * write: refused, saying what to use (api.md, Backup and restore). */
ws_status ws_pg_backup(ws_store *store, const char *dest, int step_pages, ws_store_backup_fn fn,
                       void *ctx, ws_error *err)
{
    (void)store, (void)dest, (void)step_pages, (void)fn, (void)ctx;
    return ws_error_set(err, WS_ERR_UNSUPPORTED,
                        "storage: PostgreSQL is backed up with its own tools (pg_dump, "
                        "pg_basebackup); copy <data-dir>/models/ beside it");
}
