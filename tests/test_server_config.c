/* test_server_config.c — a real worldstated ($WS_DAEMON) and its settings,
 * log, signals and keys: a bad config file starts nothing; the settings say
 * where each came from (flag > env > file); SIGHUP reloads the file (the log's
 * settings at once, the rest reported as needing a restart, --log-file
 * reopened) while the daemon keeps serving; every request is an access-log
 * line that parses as JSON; a key made while the daemon runs ends open mode,
 * and the sessions made in open mode are tenant "default"'s; the key commands
 * refuse a data directory without a database unless --create. */
#include <cjson/cJSON.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "test_server_util.h"
#include "test_util.h"

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

/* The first JSON line of the log whose fields hold every key=value pair of
 * want (NULL-terminated, string values compared as text); NULL if none (or
 * no log file yet). */
static cJSON *json_line(const char *log, const char *const *want)
{
    FILE *f = fopen(log, "r");
    if (!f) return NULL;
    static char line[1 << 14];
    cJSON *found = NULL;
    while (!found && fgets(line, sizeof line, f)) {
        if (line[0] != '{') continue; /* stdout's "listening on" line */
        cJSON *j = cJSON_Parse(line);
        if (!j) fail_msg("a log line that is not JSON: %s", line);
        int all = 1;
        for (int i = 0; want[i] && all; i += 2) {
            const cJSON *v = cJSON_GetObjectItem(j, want[i]);
            char text[256] = "";
            if (cJSON_IsString(v)) snprintf(text, sizeof text, "%s", v->valuestring);
            if (cJSON_IsNumber(v)) snprintf(text, sizeof text, "%g", v->valuedouble);
            all = v && !strcmp(text, want[i + 1]);
        }
        if (all)
            found = j;
        else
            cJSON_Delete(j);
    }
    fclose(f);
    return found;
}

/* json_line, waiting up to 15 s for it. */
static cJSON *wait_line(const char *log, const char *const *want)
{
    for (int i = 0; i < 150; i++) {
        cJSON *j = json_line(log, want);
        if (j) return j;
        struct timespec ts = {0, 100000000L};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static void expect_line(const char *log, const char *const *want)
{
    cJSON *j = wait_line(log, want);
    if (!j) fail_msg("no log line with %s=%s (%s)", want[0], want[1], log);
    cJSON_Delete(j);
}

/* A bad config file, or a bad variable: a message naming where, exit 2, and
 * nothing started (the data directory is not even made). */
static void test_bad_settings_start_nothing(void **state)
{
    (void)state;
    char top[256], conf[320], data[320], args[1024];
    static char out[1 << 14];
    ws_ts_tmpdir(top, sizeof top);
    snprintf(conf, sizeof conf, "%s/worldstated.conf", top);
    snprintf(data, sizeof data, "%s/data", top);
    write_text(conf, "# settings\n[worldstated]\nthreads = 4\nmax-batch = lots\n");
    snprintf(args, sizeof args, "--config '%s' --data-dir '%s' --listen 127.0.0.1:0", conf, data);
    assert_int_equal(ws_test_run_prog("WS_DAEMON", args, 1, out, sizeof out), 2);
    char where[400];
    snprintf(where, sizeof where, "%s:4: max-batch wants an integer in [1, 1024], got 'lots'",
             conf);
    if (!strstr(out, where)) fail_msg("wanted \"%s\" in: %s", where, out);
    struct stat sb;
    assert_int_not_equal(stat(data, &sb), 0);

    write_text(conf, "threads = 4\nmax-batchh = 8\n");
    assert_int_equal(ws_test_run_prog("WS_DAEMON", args, 1, out, sizeof out), 2);
    assert_non_null(strstr(out, ":2: unknown setting 'max-batchh'"));
    assert_int_not_equal(stat(data, &sb), 0);

    /* --check-config says the same without starting; --version works all the same */
    snprintf(args, sizeof args, "--config '%s' --check-config", conf);
    assert_int_equal(ws_test_run_prog("WS_DAEMON", args, 1, out, sizeof out), 2);
    assert_non_null(strstr(out, ":2: unknown setting 'max-batchh'"));
    snprintf(args, sizeof args, "--config '%s' --version", conf);
    assert_int_equal(ws_test_run_prog("WS_DAEMON", args, 1, out, sizeof out), 0);

    write_text(conf, "threads = 4\n");
    setenv("WORLDSTATE_MAX_BATCH", "9", 1);
    snprintf(args, sizeof args, "--config '%s' --check-config --durability full", conf);
    assert_int_equal(ws_test_run_prog("WS_DAEMON", args, 1, out, sizeof out), 0);
    unsetenv("WORLDSTATE_MAX_BATCH");
    assert_non_null(strstr(out, "\nthreads = 4 ; file\n"));
    assert_non_null(strstr(out, "\nmax-batch = 9 ; env\n"));
    assert_non_null(strstr(out, "\ndurability = full ; flag\n"));
    assert_non_null(strstr(out, "\nbatch-wait-us = 2000 ; default\n"));
    assert_non_null(strstr(out, "\nidle-spin-us = 0 ; default\n"));

    snprintf(args, sizeof args, "--config '%s' --data-dir '%s' --listen 127.0.0.1:0", conf, data);
    setenv("WORLDSTATE_DURABILITY", "sometimes", 1);
    assert_int_equal(ws_test_run_prog("WS_DAEMON", args, 1, out, sizeof out), 2);
    unsetenv("WORLDSTATE_DURABILITY");
    assert_non_null(strstr(out, "WORLDSTATE_DURABILITY: "));
    assert_int_not_equal(stat(data, &sb), 0);
    ws_test_rm_tree(top);
}

/* flag > env > file > default, printed at start; SIGHUP: the log's settings
 * change at once, another is reported as needing a restart, a bad file changes
 * nothing, and the daemon serves throughout; one access line per request. */
static void test_settings_reload_and_access_log(void **state)
{
    (void)state;
    char top[256], conf[320], data[320];
    ws_ts_tmpdir(top, sizeof top);
    snprintf(conf, sizeof conf, "%s/worldstated.conf", top);
    snprintf(data, sizeof data, "%s/data", top);
    write_text(conf, "[worldstated]\nlog-format = json\nmax-batch = 5\nmax_sessions = 50\n");
    setenv("WORLDSTATE_MAX_BATCH", "7", 1);
    ws_ts_daemon d;
    const char *extra[] = {"--config", conf, NULL};
    int started = ws_ts_start(&d, data, extra);
    unsetenv("WORLDSTATE_MAX_BATCH");
    assert_int_equal(started, 0);
    expect_line(d.log, (const char *[]){"msg", "config file", "file", conf, NULL});
    expect_line(d.log, (const char *[]){"msg", "setting", "name", "max-batch", "value", "7", "from",
                                        "env", NULL});
    expect_line(d.log, (const char *[]){"msg", "setting", "name", "max-sessions", "value", "50",
                                        "from", "file", NULL});
    expect_line(d.log, (const char *[]){"msg", "setting", "name", "threads", "value", "2", "from",
                                        "flag", NULL});
    expect_line(d.log, (const char *[]){"msg", "setting", "name", "durability", "value", "normal",
                                        "from", "default", NULL});

    /* an access line per request: method, route pattern, status, ms, tenant, session */
    char id[33], path[128];
    assert_int_equal(ws_ts_session(&d, NULL, "default", id), 201);
    ws_ts_resp r;
    snprintf(path, sizeof path, "/v1/sessions/%s/steps", id);
    assert_int_equal(ws_ts_req(&d, "POST", path, NULL,
                               "{\"instructions\":[{\"fact\":[\"a\",\"b\"],\"value\":true}]}", &r),
                     200);
    ws_ts_resp_free(&r);
    cJSON *j = wait_line(
        d.log, (const char *[]){"msg", "request", "route", "/v1/sessions/{id}/steps", NULL});
    assert_non_null(j);
    assert_string_equal(cJSON_GetObjectItem(j, "level")->valuestring, "info");
    assert_string_equal(cJSON_GetObjectItem(j, "method")->valuestring, "POST");
    assert_int_equal(cJSON_GetObjectItem(j, "status")->valueint, 200);
    assert_true(cJSON_IsNumber(cJSON_GetObjectItem(j, "ms")));
    assert_string_equal(cJSON_GetObjectItem(j, "tenant")->valuestring, "default");
    assert_string_equal(cJSON_GetObjectItem(j, "session")->valuestring, id);
    cJSON_Delete(j);
    /* probes are debug lines: not at info */
    assert_int_equal(ws_ts_req(&d, "GET", "/healthz", NULL, NULL, &r), 200);
    ws_ts_resp_free(&r);
    assert_null(json_line(d.log, (const char *[]){"route", "/healthz", NULL}));

    /* SIGHUP: debug now, and a setting that needs a restart */
    write_text(conf, "log-format = json\nlog-level = debug\nmax-batch = 5\nthreads = 3\n");
    assert_int_equal(kill(d.pid, SIGHUP), 0);
    expect_line(d.log, (const char *[]){"msg", "reload: done", NULL});
    expect_line(d.log, (const char *[]){"msg", "reload: setting changed", "name", "log-level",
                                        "was", "info", "now", "debug", "applied", "yes", NULL});
    /* the flag still wins over the file */
    assert_null(json_line(d.log, (const char *[]){"name", "threads", "now", "3", NULL}));
    /* the environment is the one the daemon started with: max-batch stays 7 */
    assert_null(json_line(d.log, (const char *[]){"name", "max-batch", "now", "5", NULL}));
    expect_line(d.log,
                (const char *[]){"msg", "reload: setting changed", "name", "max-sessions", "was",
                                 "50", "now", "100000", "applied", "no: needs a restart", NULL});
    assert_int_equal(ws_ts_req(&d, "GET", "/healthz", NULL, NULL, &r), 200);
    ws_ts_resp_free(&r);
    expect_line(d.log, (const char *[]){"level", "debug", "route", "/healthz", NULL});

    /* a bad file on SIGHUP: an error line, the settings in force stay */
    write_text(conf, "log-format = json\nlog-level = loud\n");
    assert_int_equal(kill(d.pid, SIGHUP), 0);
    j = wait_line(d.log, (const char *[]){"level", "error", NULL});
    assert_non_null(j);
    assert_non_null(strstr(cJSON_GetObjectItem(j, "msg")->valuestring, ":2: log-level: "));
    cJSON_Delete(j);
    assert_int_equal(ws_ts_req(&d, "GET", "/v1/sessions", NULL, NULL, &r), 200);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_stop(&d), 0);
    expect_line(d.log, (const char *[]){"msg", "stopped", NULL});
    ws_ts_cleanup(data);
    ws_test_rm_tree(top);
}

/* Open mode to keyed mode while the daemon runs: the first key ends open mode
 * within about a second (logged); the sessions made in open mode are tenant
 * "default"'s; in keyed mode a revoked key fails and a new key works at once. */
static void test_keys_live(void **state)
{
    (void)state;
    char dir[256], id[33], path[128], key[128], acme[128], later[128];
    static char out[4096];
    ws_ts_tmpdir(dir, sizeof dir);
    ws_ts_daemon d;
    assert_int_equal(ws_ts_start(&d, dir, NULL), 0);
    assert_int_equal(ws_ts_session(&d, NULL, "default", id), 201);
    assert_int_equal(ws_ts_key_create(dir, "default", 0, key, sizeof key), 0);
    assert_int_equal(ws_ts_key_create(dir, "acme", 0, acme, sizeof acme), 0);
    ws_ts_resp r;
    long st = 0;
    for (int i = 0; i < 100 && st != 401; i++) { /* the daemon looks once a second */
        st = ws_ts_req(&d, "GET", "/v1/sessions", NULL, NULL, &r);
        ws_ts_resp_free(&r);
        if (st != 401) {
            struct timespec ts = {0, 100000000L};
            nanosleep(&ts, NULL);
        }
    }
    assert_int_equal(st, 401);
    FILE *f = fopen(d.log, "r");
    assert_non_null(f);
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = '\0';
    fclose(f);
    assert_non_null(strstr(out, "open mode ends"));
    assert_non_null(strstr(out, "tenant \"default\""));
    snprintf(path, sizeof path, "/v1/sessions/%s", id);
    assert_int_equal(ws_ts_req(&d, "GET", path, key, NULL, &r), 200); /* default's session */
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_req(&d, "GET", path, acme, NULL, &r), 404); /* not acme's */
    ws_ts_resp_free(&r);
    /* revoked: refused at once; a new key: accepted at once */
    char args[512];
    snprintf(args, sizeof args, "key revoke 2 --data-dir '%s'", dir);
    assert_int_equal(ws_test_run_prog("WS_DAEMON", args, 1, out, sizeof out), 0);
    assert_int_equal(ws_ts_req(&d, "GET", "/v1/sessions", acme, NULL, &r), 401);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_key_create(dir, "acme", 0, later, sizeof later), 0);
    assert_int_equal(ws_ts_req(&d, "GET", "/v1/sessions", later, NULL, &r), 200);
    ws_ts_resp_free(&r);
    /* every key revoked: still keyed (open mode comes back only with a restart) */
    for (int k = 1; k <= 3; k++) {
        snprintf(args, sizeof args, "key revoke %d --data-dir '%s'", k, dir);
        assert_int_equal(ws_test_run_prog("WS_DAEMON", args, 1, out, sizeof out), 0);
    }
    struct timespec ts = {1, 500000000L};
    nanosleep(&ts, NULL);
    assert_int_equal(ws_ts_req(&d, "GET", "/v1/sessions", NULL, NULL, &r), 401);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_stop(&d), 0);
    ws_ts_cleanup(dir);
}

/* --log-file: the log goes there (stderr keeps nothing but stdout's line), and
 * SIGHUP reopens it: after logrotate moved it, a new file takes the lines. */
static void test_log_file_reopened(void **state)
{
    (void)state;
    char top[256], data[320], logf[320], moved[330];
    ws_ts_tmpdir(top, sizeof top);
    snprintf(data, sizeof data, "%s/data", top);
    snprintf(logf, sizeof logf, "%s/worldstated.log", top);
    snprintf(moved, sizeof moved, "%s.1", logf);
    ws_ts_daemon d;
    const char *extra[] = {"--log-file", logf, "--log-format", "json", NULL};
    assert_int_equal(ws_ts_start(&d, data, extra), 0);
    expect_line(logf, (const char *[]){"msg", "listening", NULL});
    assert_null(json_line(d.log, (const char *[]){"msg", "listening", NULL}));
    struct stat sb;
    assert_int_equal(stat(logf, &sb), 0);
    assert_int_equal(sb.st_mode & 077, 0);
    assert_int_equal(rename(logf, moved), 0);
    assert_int_equal(kill(d.pid, SIGHUP), 0);
    expect_line(logf, (const char *[]){"msg", "reload: done", NULL});
    ws_ts_resp r;
    assert_int_equal(ws_ts_req(&d, "GET", "/v1/models", NULL, NULL, &r), 200);
    ws_ts_resp_free(&r);
    expect_line(logf, (const char *[]){"msg", "request", "route", "/v1/models", NULL});
    assert_null(json_line(moved, (const char *[]){"route", "/v1/models", NULL}));
    assert_int_equal(ws_ts_stop(&d), 0);
    ws_ts_cleanup(data);
    ws_test_rm_tree(top);
}

/* `worldstated key` on a data directory without a database: refused, nothing
 * made, unless --create; `key list` has a header, creation times and notes. */
static void test_key_commands(void **state)
{
    (void)state;
    char top[256], args[1024];
    static char out[1 << 14];
    ws_ts_tmpdir(top, sizeof top);
    snprintf(args, sizeof args, "key list --data-dir '%s/typo'", top);
    assert_int_equal(ws_test_run_prog("WS_DAEMON", args, 1, out, sizeof out), 1);
    assert_non_null(strstr(out, "no database at"));
    assert_non_null(strstr(out, "--create"));
    snprintf(args, sizeof args, "key create --tenant t --data-dir '%s/typo'", top);
    assert_int_equal(ws_test_run_prog("WS_DAEMON", args, 1, out, sizeof out), 1);
    char path[400];
    snprintf(path, sizeof path, "%s/typo", top);
    struct stat sb;
    assert_int_not_equal(stat(path, &sb), 0);

    snprintf(args, sizeof args, "key list --create --data-dir '%s/new'", top);
    assert_int_equal(ws_test_run_prog("WS_DAEMON", args, 1, out, sizeof out), 0);
    assert_non_null(strstr(out, "no API keys"));
    snprintf(args, sizeof args,
             "key create --tenant ops --admin --note 'ops laptop' --data-dir '%s/new'", top);
    assert_int_equal(ws_test_run_prog("WS_DAEMON", args, 0, out, sizeof out), 0);
    assert_non_null(strstr(out, "wsk_"));
    snprintf(args, sizeof args, "key list --data-dir '%s/new'", top);
    assert_int_equal(ws_test_run_prog("WS_DAEMON", args, 0, out, sizeof out), 0);
    assert_non_null(strstr(out, "ID\tTENANT\tPREFIX\tADMIN\tSTATE\tCREATED\tNOTE\n"));
    char year[8];
    time_t now = time(NULL);
    strftime(year, sizeof year, "\t%Y-", gmtime(&now));
    assert_non_null(strstr(out, "NOTE\n1\tops\twsk_"));
    assert_non_null(strstr(out, year)); /* the creation time */
    assert_non_null(strstr(out, "\tadmin\tactive\t"));
    assert_non_null(strstr(out, "\tops laptop\n"));
    ws_test_rm_tree(top);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_settings_start_nothing),
        cmocka_unit_test(test_settings_reload_and_access_log),
        cmocka_unit_test(test_keys_live),
        cmocka_unit_test(test_log_file_reopened),
        cmocka_unit_test(test_key_commands),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
