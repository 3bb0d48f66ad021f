/* test_server_util.c — see test_server_util.h. */
#include "test_server_util.h"

#include <ctype.h>
#include <curl/curl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *daemon_path(void)
{
    const char *p = getenv("WS_DAEMON");
    return p ? p : "worldstated";
}

void ws_ts_tmpdir(char *out, size_t cap)
{
    const char *t = getenv("TMPDIR");
    snprintf(out, cap, "%s/ws-test-XXXXXX", t ? t : "/tmp");
    if (!mkdtemp(out)) {
        perror("mkdtemp");
        abort();
    }
}

/* ---- WS_TEST_STORE=postgresql: a schema per data directory ---- */

static const char *pg_uri(void)
{
    static char uri[512];
    const char *env = getenv("WS_TEST_POSTGRES"), *file = getenv("WS_TEST_POSTGRES_FILE");
    if (!uri[0] && env && *env) snprintf(uri, sizeof uri, "%s", env);
    FILE *fp = !uri[0] && file && *file ? fopen(file, "r") : NULL;
    if (fp && fgets(uri, sizeof uri, fp)) uri[strcspn(uri, "\r\n")] = '\0';
    if (fp) fclose(fp);
    return uri;
}

static int on_postgresql(void)
{
    const char *only = getenv("WS_TEST_STORE");
    return only && !strcmp(only, "postgresql");
}

/* The schema of data directory dir: ws_ and its name's letters and digits. */
static void pg_schema(const char *dir, char *out, size_t cap)
{
    const char *base = strrchr(dir, '/');
    size_t at = (size_t)snprintf(out, cap, "ws_");
    for (const char *p = base ? base + 1 : dir; *p && at + 1 < cap; p++)
        out[at++] = isalnum((unsigned char)*p) ? (char)tolower((unsigned char)*p) : '_';
    out[at] = '\0';
}

/* Runs one statement on the test server with psql; 0 on success. */
static int pg_run(const char *sql)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "psql -qX '%s' -c '%s' >/dev/null", pg_uri(), sql);
    return system(cmd) == 0 ? 0 : -1;
}

/* The --store location of data directory dir ("" on SQLite), its schema made. */
static void store_of(const char *dir, char *out, size_t cap)
{
    out[0] = '\0';
    if (!on_postgresql()) return;
    if (!pg_uri()[0]) {
        printf("[  SKIPPED ] WS_TEST_STORE=postgresql without a server (WS_TEST_POSTGRES)\n");
        exit(77);
    }
    char schema[128], sql[256];
    pg_schema(dir, schema, sizeof schema);
    snprintf(sql, sizeof sql, "SET client_min_messages = warning; CREATE SCHEMA IF NOT EXISTS %s",
             schema);
    if (pg_run(sql) != 0) fprintf(stderr, "could not create schema %s\n", schema);
    snprintf(out, cap, "%s%coptions=-csearch_path%%3D%s", pg_uri(), strchr(pg_uri(), '?') ? '&' : '?',
             schema);
}

void ws_ts_cleanup(const char *dir)
{
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s.log'", dir, dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    if (on_postgresql() && pg_uri()[0]) {
        char schema[128], sql[256];
        pg_schema(dir, schema, sizeof schema);
        snprintf(sql, sizeof sql, "SET client_min_messages = warning; DROP SCHEMA IF EXISTS %s CASCADE",
                 schema);
        if (pg_run(sql) != 0) fprintf(stderr, "could not drop schema %s\n", schema);
    }
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The daemon's log on stderr, after why: what a failing test shows. */
static void show_log(const ws_ts_daemon *d, const char *why)
{
    fprintf(stderr, "%s; its log:\n", why);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "cat %s >&2", d->log);
    if (system(cmd) != 0) fprintf(stderr, "(no log)\n");
}

int ws_ts_start(ws_ts_daemon *d, const char *dir, const char *const *extra)
{
    return ws_ts_start_node(d, dir, NULL, extra);
}

int ws_ts_on_postgresql(void) { return on_postgresql(); }

int ws_ts_start_node(ws_ts_daemon *d, const char *dir, const char *store_dir,
                     const char *const *extra)
{
    memset(d, 0, sizeof *d);
    snprintf(d->dir, sizeof d->dir, "%s", dir);
    snprintf(d->log, sizeof d->log, "%s.log", dir);
    /* --config /dev/null: no config file of the machine's (an installed package's)
     * changes what a test runs; a test's own --config comes later and wins */
    const char *argv[32] = {daemon_path(), "--data-dir", dir, "--listen", "127.0.0.1:0", "--backend", "cpu",
                            "--threads", "2", "--config", "/dev/null"};
    int n = 11;
    char store[1024];
    store_of(store_dir ? store_dir : dir, store, sizeof store);
    if (store[0]) argv[n++] = "--store", argv[n++] = store;
    for (int i = 0; extra && extra[i] && n < 31; i++) argv[n++] = extra[i];
    argv[n] = NULL;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        /* A test that fails an assertion never reaches its stop: the daemon must
         * not outlive it (and keep a core busy). */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() == 1) _exit(127);
        /* Emptied, then both streams appending: a line on stderr before stdout's
         * first is not overwritten by it. */
        if (!freopen(d->log, "w", stdout) || !freopen(d->log, "a", stdout) ||
            !freopen(d->log, "a", stderr))
            _exit(127);
        setenv("OMP_NUM_THREADS", "1", 1);
        setenv("LIBC_FATAL_STDERR_", "1", 1); /* glibc's fatal messages into the log, not a tty */
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    d->pid = pid;
    for (int i = 0; i < 600; i++) { /* up to 60 s: the first start creates the model */
        FILE *f = fopen(d->log, "r");
        char line[512];
        while (f && fgets(line, sizeof line, f)) {
            const char *p = strstr(line, "listening on http://127.0.0.1:");
            if (p) d->port = atoi(p + strlen("listening on http://127.0.0.1:"));
        }
        if (f) fclose(f);
        if (d->port) {
            ws_ts_resp r;
            long st = ws_ts_req(d, "GET", "/healthz", NULL, NULL, &r);
            ws_ts_resp_free(&r);
            if (st == 200) return 0;
        }
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) break;
        sleep_ms(100);
    }
    show_log(d, "daemon did not start");
    return -1;
}

int ws_ts_stop(ws_ts_daemon *d)
{
    if (d->pid <= 0) return -1;
    kill(d->pid, SIGTERM);
    int status = 0;
    waitpid(d->pid, &status, 0);
    d->pid = 0;
    int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (rc != 0) show_log(d, "the daemon's stop was not clean");
    return rc;
}

ws_ts_daemon ws_ts_shared;
char ws_ts_shared_dir[256];

int ws_ts_shared_setup(void **state)
{
    (void)state;
    ws_ts_tmpdir(ws_ts_shared_dir, sizeof ws_ts_shared_dir);
    return ws_ts_start(&ws_ts_shared, ws_ts_shared_dir, NULL);
}

int ws_ts_shared_teardown(void **state)
{
    (void)state;
    if (ws_ts_stop(&ws_ts_shared) != 0) return -1;
    ws_ts_cleanup(ws_ts_shared_dir);
    return 0;
}

void ws_ts_kill9(ws_ts_daemon *d)
{
    if (d->pid <= 0) return;
    kill(d->pid, SIGKILL);
    waitpid(d->pid, NULL, 0);
    d->pid = 0;
}

int ws_ts_key_create(const char *dir, const char *tenant, int admin, char *out, size_t cap)
{
    char cmd[2048], store[1024];
    store_of(dir, store, sizeof store);
    snprintf(cmd, sizeof cmd, "'%s' key create --create --tenant '%s' %s --data-dir '%s' %s%s%s 2>/dev/null",
             daemon_path(), tenant, admin ? "--admin" : "", dir, store[0] ? "--store '" : "", store,
             store[0] ? "'" : "");
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    int ok = fgets(out, (int)cap, p) != NULL;
    int rc = pclose(p);
    if (!ok || rc != 0) return -1;
    out[strcspn(out, "\n")] = '\0';
    return 0;
}

/* Runs prog with args (ws_ts_train, ws_ts_daemon_run). */
static int run_prog(const char *prog, const char *const *args, char *out, size_t cap)
{
    const char *argv[40] = {prog};
    int n = 1;
    for (int i = 0; args[i] && n < 39; i++) argv[n++] = args[i];
    argv[n] = NULL;
    int fds[2];
    if (pipe(fds) != 0) return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        if (dup2(fds[1], 1) < 0) _exit(127);
        close(fds[0]);
        setenv("OMP_NUM_THREADS", "1", 1);
        execv(prog, (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    size_t len = 0;
    ssize_t got;
    char sinkbuf[4096];
    while ((got = read(fds[0], len + 1 < cap ? out + len : sinkbuf,
                       len + 1 < cap ? cap - 1 - len : sizeof sinkbuf)) > 0)
        if (len + 1 < cap) len += (size_t)got;
    close(fds[0]);
    out[len] = '\0';
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
}

int ws_ts_train(const char *const *args, char *out, size_t cap)
{
    return run_prog(getenv("WS_TRAIN") ? getenv("WS_TRAIN") : "worldstate-train", args, out, cap);
}

int ws_ts_daemon_run(const char *const *args, char *out, size_t cap)
{
    return run_prog(daemon_path(), args, out, cap);
}

typedef struct {
    char *buf;
    size_t len;
} sink;

static size_t on_data(char *p, size_t sz, size_t n, void *ctx)
{
    sink *s = ctx;
    char *b = realloc(s->buf, s->len + sz * n + 1);
    if (!b) return 0;
    memcpy(b + s->len, p, sz * n);
    s->buf = b;
    s->len += sz * n;
    b[s->len] = '\0';
    return sz * n;
}

long ws_ts_http(const ws_ts_daemon *d, const char *method, const char *path, const char *key, const char *body,
                size_t body_len, ws_ts_resp *r)
{
    return ws_ts_http_headers(d, method, path, key, NULL, body, body_len, r);
}

long ws_ts_http_headers(const ws_ts_daemon *d, const char *method, const char *path, const char *key,
                        const char *const *headers, const char *body, size_t body_len, ws_ts_resp *r)
{
    memset(r, 0, sizeof *r);
    CURL *c = curl_easy_init();
    if (!c) return 0;
    char url[1024], auth[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", d->port, path);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    if (key) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", key);
        h = curl_slist_append(h, auth);
    }
    for (int i = 0; headers && headers[i]; i++) h = curl_slist_append(h, headers[i]);
    sink s = {0}, hs = {0};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &hs);
    if (!strcmp(method, "HEAD")) curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
    }
    if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    r->body = s.buf ? s.buf : calloc(1, 1);
    r->len = s.len;
    r->headers = hs.buf ? hs.buf : calloc(1, 1);
    r->json = r->len ? cJSON_ParseWithLength(r->body, r->len) : NULL;
    return r->status;
}

int ws_ts_header(const ws_ts_resp *r, const char *name, char *out, size_t cap)
{
    size_t n = strlen(name);
    for (const char *l = r->headers; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : "") {
        if (strncasecmp(l, name, n) != 0 || l[n] != ':') continue;
        const char *v = l + n + 1;
        while (*v == ' ') v++;
        size_t len = strcspn(v, "\r\n");
        snprintf(out, cap, "%.*s", (int)len, v);
        return 1;
    }
    return 0;
}

void ws_ts_resp_free(ws_ts_resp *r)
{
    free(r->body);
    free(r->headers);
    cJSON_Delete(r->json);
    memset(r, 0, sizeof *r);
}

long ws_ts_req(const ws_ts_daemon *d, const char *method, const char *path, const char *key, const char *body,
               ws_ts_resp *r)
{
    return ws_ts_http(d, method, path, key, body, body ? strlen(body) : 0, r);
}

long ws_ts_session(const ws_ts_daemon *d, const char *key, const char *model, char *out)
{
    char body[128];
    snprintf(body, sizeof body, "{\"model\":\"%s\"}", model);
    ws_ts_resp r;
    long st = ws_ts_req(d, "POST", "/v1/sessions", key, body, &r);
    const cJSON *id = cJSON_GetObjectItem(r.json, "id");
    out[0] = '\0';
    if (st == 201 && cJSON_IsString(id)) snprintf(out, 33, "%s", id->valuestring);
    ws_ts_resp_free(&r);
    return st;
}

long ws_ts_state_floats(const ws_ts_daemon *d, const char *key, const char *model)
{
    char path[160];
    snprintf(path, sizeof path, "/v1/models/%s", model);
    ws_ts_resp r;
    long n = 0;
    if (ws_ts_req(d, "GET", path, key, NULL, &r) == 200) {
        const cJSON *c = cJSON_GetObjectItem(r.json, "config");
        const cJSON *t = cJSON_GetObjectItem(c, "n_state"), *w = cJSON_GetObjectItem(c, "d");
        const cJSON *v = cJSON_GetObjectItem(c, "views");
        if (cJSON_IsNumber(t) && cJSON_IsNumber(w))
            n = (long)t->valuedouble * (long)w->valuedouble * (cJSON_IsNumber(v) ? v->valueint : 1);
    }
    ws_ts_resp_free(&r);
    return n;
}

const char *ws_ts_spath(char *buf, size_t cap, const char *id, const char *suffix)
{
    snprintf(buf, cap, "/v1/sessions/%s%s", id, suffix ? suffix : "");
    return buf;
}
