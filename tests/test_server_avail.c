/* test_server_avail.c — worldstated stays available under abuse and storage
 * failure (issue 14, items 7-9): a flood of idle connections from one client
 * neither starves /healthz nor steps, and idle ones are closed; /healthz
 * answers while another process holds SQLite's write lock; a storage that
 * cannot write answers 503 storage_unavailable and /readyz says not ready; a
 * corrupt page answers 500 storage_corrupt. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "db_damage.h"
#include "test_server_util.h"
#include "test_util.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A GET timed: its status, and its seconds into *secs. */
static long timed_get(const ws_ts_daemon *d, const char *path, double *secs)
{
    ws_ts_resp r;
    double t0 = now_s();
    long st = ws_ts_req(d, "GET", path, NULL, NULL, &r);
    *secs = now_s() - t0;
    ws_ts_resp_free(&r);
    return st;
}

static const char *step_body =
    "{\"instructions\":[{\"fact\":[\"anna\",\"at\",\"home\"],\"value\":true}],"
    "\"queries\":[{\"fact\":[\"anna\",\"at\",\"home\"]}]}";

/* A step on session id: its status; the error code into code (may be NULL). */
static long step(const ws_ts_daemon *d, const char *id, char *code, size_t cap)
{
    char path[128];
    ws_ts_resp r;
    long st =
        ws_ts_req(d, "POST", ws_ts_spath(path, sizeof path, id, "/steps"), NULL, step_body, &r);
    const cJSON *e = r.json ? cJSON_GetObjectItem(r.json, "error") : NULL;
    const cJSON *c = e ? cJSON_GetObjectItem(e, "code") : NULL;
    if (code) snprintf(code, cap, "%s", cJSON_IsString(c) ? c->valuestring : "");
    ws_ts_resp_free(&r);
    return st;
}

/* ---- item 7: connection exhaustion ---------------------------------------- */

/* A TCP connection from source address src to the daemon, which sends the
 * start of a request and never finishes it; -1 if it cannot connect. */
static int dial_slow(const ws_ts_daemon *d, const char *src)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a = {.sin_family = AF_INET};
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)d->port)};
    inet_pton(AF_INET, src, &a.sin_addr);
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    static const char part[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n";
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        connect(fd, (struct sockaddr *)&to, sizeof to) != 0) {
        close(fd);
        return -1;
    }
    (void)send(fd, part, sizeof part - 1, MSG_NOSIGNAL); /* a refused one may be closed already */
    return fd;
}

/* 1 when the server closed fd (EOF or reset), 0 while it is still open. */
static int closed_by_server(int fd)
{
    char b[256];
    for (;;) {
        ssize_t n = recv(fd, b, sizeof b, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno == ECONNRESET)) return 1;
        if (n < 0) return 0; /* EAGAIN: open, nothing sent */
    }
}

enum { FLOOD = 300, PER_IP = 16 };

/* How many of fds the server still holds open, polled every 50 ms for up to
 * `within` seconds until at most `want` are. */
static int still_open(const int *fds, int n, int want, double within)
{
    double until = now_s() + within;
    for (;;) {
        int open = 0;
        for (int i = 0; i < n; i++) open += !closed_by_server(fds[i]);
        if (open <= want || now_s() >= until) return open;
        usleep(50000);
    }
}

static void test_connection_flood(void **state)
{
    (void)state;
    char dir[256];
    ws_ts_tmpdir(dir, sizeof dir);
    ws_ts_daemon d;
    const char *flags[] = {"--max-connections",
                           "128",
                           "--max-connections-per-ip",
                           "16", /* PER_IP */
                           "--connection-timeout-s",
                           "1",
                           NULL};
    assert_int_equal(ws_ts_start(&d, dir, flags), 0);
    char id[33];
    assert_int_equal(ws_ts_session(&d, NULL, "default", id), 201);

    /* One client (127.0.0.2) opens FLOOD connections and leaves each mid-header. */
    static int fds[FLOOD];
    for (int i = 0; i < FLOOD; i++) assert_true((fds[i] = dial_slow(&d, "127.0.0.2")) >= 0);
    /* All but PER_IP of them are closed at once, long before the idle timeout. */
    assert_true(still_open(fds, FLOOD, PER_IP, 0.5) <= PER_IP);

    /* Another client is served at once: its slots are its own. */
    double secs;
    assert_int_equal(timed_get(&d, "/healthz", &secs), 200);
    assert_true(secs < 0.5);
    double t0 = now_s();
    assert_int_equal(step(&d, id, NULL, 0), 200);
    assert_true(now_s() - t0 < 5.0);

    /* Idle connections are closed after the timeout (1 s; MHD checks about
     * once a second): the PER_IP it kept too. */
    assert_int_equal(still_open(fds, FLOOD, 0, 6.0), 0);
    for (int i = 0; i < FLOOD; i++) close(fds[i]);
    assert_int_equal(timed_get(&d, "/healthz", &secs), 200);
    assert_int_equal(ws_ts_stop(&d), 0);
    ws_ts_cleanup(dir);
}

/* ---- item 8: /healthz while another process holds the write lock ---------- */

typedef struct {
    const ws_ts_daemon *d;
    long status;
} create_arg;

static void *create_session(void *p)
{
    create_arg *a = p;
    char id[33];
    a->status = ws_ts_session(a->d, NULL, "default", id);
    return NULL;
}

static void test_healthz_under_write_lock(void **state)
{
    (void)state;
    char dir[256], db[320];
    ws_ts_tmpdir(dir, sizeof dir);
    ws_ts_daemon d;
    /* One HTTP thread: a request waiting on the lock there would hold up
     * every other connection that thread serves. */
    const char *flags[] = {"--threads", "1", NULL};
    assert_int_equal(ws_ts_start(&d, dir, flags), 0);
    char id[33], path[128];
    assert_int_equal(ws_ts_session(&d, NULL, "default", id), 201);

    snprintf(db, sizeof db, "%s/worldstate.db", dir);
    sqlite3 *h = NULL;
    assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
    assert_int_equal(sqlite3_busy_timeout(h, 5000), SQLITE_OK);
    assert_int_equal(sqlite3_exec(h, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);

    /* A session is created (a write) while the lock is held... */
    create_arg ca = {.d = &d};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, create_session, &ca), 0);
    usleep(300000);
    /* ...and health, readiness and reads still answer at once. */
    double secs;
    assert_int_equal(timed_get(&d, "/healthz", &secs), 200);
    assert_true(secs < 0.2);
    assert_int_equal(timed_get(&d, ws_ts_spath(path, sizeof path, id, ""), &secs), 200);
    assert_true(secs < 0.5);
    usleep(700000);
    assert_int_equal(sqlite3_exec(h, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(h);
    pthread_join(th, NULL);
    assert_int_equal(ca.status, 201); /* it waited for the lock, then went through */
    assert_int_equal(ws_ts_stop(&d), 0);
    ws_ts_cleanup(dir);
}

/* ---- item 9: storage errors by kind ---------------------------------------- */

/* The daemon's /readyz status and reason. */
static long readyz(const ws_ts_daemon *d, char *reason, size_t cap)
{
    ws_ts_resp r;
    long st = ws_ts_req(d, "GET", "/readyz", NULL, NULL, &r);
    const cJSON *why = r.json ? cJSON_GetObjectItem(r.json, "reason") : NULL;
    snprintf(reason, cap, "%s", cJSON_IsString(why) ? why->valuestring : "");
    ws_ts_resp_free(&r);
    return st;
}

/* A disk that fills up: the daemon runs under a file-size limit, so writes
 * past it fail as on a full disk (even as root, where a read-only file would
 * still be writable). */
static void test_storage_full(void **state)
{
    (void)state;
    char dir[256], why[256], code[64];
    ws_ts_tmpdir(dir, sizeof dir);
    ws_ts_daemon d;
    assert_int_equal(ws_ts_start(&d, dir, NULL), 0); /* a fresh directory: its files */
    char id[33];
    assert_int_equal(ws_ts_session(&d, NULL, "default", id), 201);
    assert_int_equal(ws_ts_stop(&d), 0);

    ws_test_file_limit(256 << 10); /* the daemon inherits it */
    int started = ws_ts_start(&d, dir, NULL);
    ws_test_file_limit(0);
    assert_int_equal(started, 0);
    assert_int_equal(readyz(&d, why, sizeof why), 200);

    long st = 200;
    for (int i = 0; i < 400 && st == 200; i++) st = step(&d, id, code, sizeof code);
    assert_int_equal(st, 503);
    assert_string_equal(code, "storage_unavailable");
    assert_int_equal(readyz(&d, why, sizeof why), 503);
    assert_non_null(strstr(why, "cannot commit"));
    /* reads still answer */
    double secs;
    char path[128];
    assert_int_equal(timed_get(&d, ws_ts_spath(path, sizeof path, id, ""), &secs), 200);
    ws_ts_kill9(&d);
    ws_ts_cleanup(dir);
}

static void test_storage_corrupt(void **state)
{
    (void)state;
    char dir[256], db[320], why[256], code[64];
    ws_ts_tmpdir(dir, sizeof dir);
    ws_ts_daemon d;
    assert_int_equal(ws_ts_start(&d, dir, NULL), 0);
    char id[33];
    assert_int_equal(ws_ts_session(&d, NULL, "default", id), 201);
    assert_int_equal(step(&d, id, NULL, 0), 200);
    assert_int_equal(ws_ts_stop(&d), 0);
    snprintf(db, sizeof db, "%s/worldstate.db", dir);
    ws_test_corrupt_root(db, "sessions");

    assert_int_equal(ws_ts_start(&d, dir, NULL), 0);
    assert_int_equal(step(&d, id, code, sizeof code), 500);
    assert_string_equal(code, "storage_corrupt"); /* never 400: not the request's fault */
    assert_int_equal(readyz(&d, why, sizeof why), 503);
    ws_ts_kill9(&d);
    ws_ts_cleanup(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_connection_flood),
        cmocka_unit_test(test_healthz_under_write_lock),
        cmocka_unit_test(test_storage_full),
        cmocka_unit_test(test_storage_corrupt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
