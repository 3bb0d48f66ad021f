/* statements.c — the prepared statements: compiled once per connection at open
 * (parsing and planning SQL per request would cost more than the lookups
 * themselves), reset after every use. */
#include <stdio.h>

#include "sqlite_internal.h"

static const char *const stmt_sql[WS_ST_COUNT] = {
#define WS_SQLITE_X_SQL(name, sql) [WS_ST_##name] = sql,
    WS_SQLITE_STATEMENTS(WS_SQLITE_X_SQL)
#undef WS_SQLITE_X_SQL
};

static const char *const stmt_name[WS_ST_COUNT] = {
#define WS_SQLITE_X_NAME(name, sql) [WS_ST_##name] = #name,
    WS_SQLITE_STATEMENTS(WS_SQLITE_X_NAME)
#undef WS_SQLITE_X_NAME
};

ws_status ws_sqlite__prepare_all(ws_sqlite *s, ws_error *err)
{
    for (int i = 0; i < WS_ST_COUNT; i++) {
        /* PERSISTENT: these live as long as the connection, so SQLite should not
         * take their memory from its short-lived lookaside pool. */
        int rc = sqlite3_prepare_v3(s->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
                                    &s->st[i], NULL);
        if (rc != SQLITE_OK) {
            /* name the statement: a failure here is a schema/SQL bug */
            char what[96];
            snprintf(what, sizeof what, "storage: preparing statement %s", stmt_name[i]);
            ws_status st = ws_sqlite__sqlfail(s, rc, err, what);
            ws_sqlite__finalize_all(s);
            return st;
        }
    }
    return WS_OK;
}

void ws_sqlite__finalize_all(ws_sqlite *s)
{
    for (int i = 0; i < WS_ST_COUNT; i++) {
        /* sqlite3_finalize returns the last step's error, already reported by
         * whoever stepped it; finalizing itself cannot fail. */
        (void)sqlite3_finalize(s->st[i]);
        s->st[i] = NULL;
    }
}

sqlite3_stmt *ws_sqlite__stmt(ws_sqlite *s, ws_sqlite_stmt_id id) { return s->st[id]; }

void ws_sqlite__done(sqlite3_stmt *st)
{
    /* Both return the previous step's error code (already handled by the
     * caller) or SQLITE_OK; neither can fail on its own. */
    (void)sqlite3_reset(st);
    (void)sqlite3_clear_bindings(st);
}
