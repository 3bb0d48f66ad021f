/* storage_fixture_pg.c — the PostgreSQL half of the storage tests' fixture
 * (storage_fixture.h): the server they use, one schema per test database (a
 * database name maps to a schema of its group, named on the location's
 * search_path), dropped with the group, and ending a store's connection from
 * outside (the reconnect tests). Built only with the PostgreSQL backend. */
#include <ctype.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "storage_fixture.h"

static char uri[512];
static char prefix[48]; /* the running group's schemas: ws_t<pid>_<group>_ */
static PGconn *admin;   /* the fixture's own connection */
/* writer threads name their database too: one statement on admin at a time */
static pthread_mutex_t admin_lock = PTHREAD_MUTEX_INITIALIZER;

const char *pg_test_uri(void)
{
    if (uri[0]) return uri;
    const char *env = getenv("WS_TEST_POSTGRES"), *file = getenv("WS_TEST_POSTGRES_FILE");
    if (env && *env) {
        snprintf(uri, sizeof uri, "%s", env);
    } else if (file && *file) {
        FILE *fp = fopen(file, "r");
        if (fp && fgets(uri, sizeof uri, fp)) uri[strcspn(uri, "\r\n")] = '\0';
        if (fp) fclose(fp);
    }
    return uri[0] ? uri : NULL;
}

static void admin_exec(const char *sql)
{
    pthread_mutex_lock(&admin_lock);
    PGresult *res = PQexec(admin, sql);
    pthread_mutex_unlock(&admin_lock);
    ExecStatusType t = PQresultStatus(res);
    if (t != PGRES_COMMAND_OK && t != PGRES_TUPLES_OK)
        fail_msg("fixture: %s: %s", sql, PQresultErrorMessage(res));
    PQclear(res);
}

int pg_group_setup(void)
{
    static int group;
    snprintf(prefix, sizeof prefix, "ws_t%ld_%d_", (long)getpid(), ++group);
    admin = PQconnectdb(pg_test_uri());
    if (PQstatus(admin) != CONNECTION_OK) {
        fprintf(stderr, "fixture: cannot connect to %s: %s", uri, PQerrorMessage(admin));
        return -1;
    }
    PQclear(PQexec(admin, "SET client_min_messages = warning"));
    return 0;
}

int pg_group_teardown(void)
{
    char sql[512];
    snprintf(sql, sizeof sql,
             "DO $$DECLARE n text; BEGIN FOR n IN SELECT nspname FROM pg_namespace "
             "WHERE starts_with(nspname, '%s') LOOP EXECUTE format('DROP SCHEMA %%I CASCADE', "
             "n); END LOOP; END$$",
             prefix);
    PGresult *res = PQexec(admin, sql);
    int ok = PQresultStatus(res) == PGRES_COMMAND_OK;
    if (!ok) fprintf(stderr, "fixture: %s", PQresultErrorMessage(res));
    PQclear(res);
    PQfinish(admin);
    admin = NULL;
    return ok ? 0 : -1;
}

/* The schema of database `name` in this group: the prefix and the name's
 * letters and digits. */
static void schema_of(const char *name, char *out, size_t n)
{
    size_t at = (size_t)snprintf(out, n, "%s", prefix);
    for (const char *p = name; *p && at + 1 < n; p++)
        out[at++] = isalnum((unsigned char)*p) ? (char)tolower((unsigned char)*p) : '_';
    out[at] = '\0';
}

void pg_location(char *out, size_t n, const char *name)
{
    char schema[128], sql[192];
    schema_of(name, schema, sizeof schema);
    snprintf(sql, sizeof sql, "CREATE SCHEMA IF NOT EXISTS %s", schema);
    admin_exec(sql);
    /* application_name tells this database's connections apart (pg_terminate) */
    snprintf(out, n, "%s%coptions=-csearch_path%%3D%s&application_name=%s", uri,
             strchr(uri, '?') ? '&' : '?', schema, schema);
}

int pg_terminate(const char *name)
{
    char schema[128], sql[256];
    schema_of(name, schema, sizeof schema);
    snprintf(sql, sizeof sql,
             "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
             "WHERE application_name = '%s'",
             schema);
    PGresult *res = PQexec(admin, sql);
    int n = PQresultStatus(res) == PGRES_TUPLES_OK ? atoi(PQgetvalue(res, 0, 0)) : -1;
    PQclear(res);
    return n;
}
