/* test_server_util.h — live-daemon harness for the server integration tests:
 * starts the real worldstated binary ($WS_DAEMON) on a free loopback port
 * (--listen 127.0.0.1:0; the port is read from its "listening on" line) with a
 * temporary data directory, and talks HTTP to it with libcurl; runs the offline
 * tool worldstate-train ($WS_TRAIN) on the same directory.
 *
 * With WS_TEST_STORE=postgresql the daemons (and `key create`) keep their data
 * on the test PostgreSQL server instead (WS_TEST_POSTGRES, or the file
 * WS_TEST_POSTGRES_FILE names: scripts/pg-test-server.sh), one schema per data
 * directory (made with psql, dropped by ws_ts_cleanup); without a server the
 * test program exits 77 (skipped) at its first start. Tests that open the
 * SQLite file or run worldstate-train are not registered that way. */
#ifndef WS_TEST_SERVER_UTIL_H
#define WS_TEST_SERVER_UTIL_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct {
    pid_t pid;
    int port;
    char dir[256];
    char log[320];
} ws_ts_daemon;

/* A fresh empty directory under $TMPDIR (or /tmp). */
void ws_ts_tmpdir(char *out, size_t cap);
/* Removes a test's directory and its daemon log (call once the test passed:
 * a failed test leaves them for inspection). */
void ws_ts_cleanup(const char *dir);
/* Starts the daemon on dir with extra flags (NULL-terminated list, may be NULL);
 * returns 0 once /healthz answers, -1 on failure (the log is printed). */
int ws_ts_start(ws_ts_daemon *d, const char *dir, const char *const *extra);
/* ws_ts_start with the store of data directory store_dir (NULL: dir's own):
 * on PostgreSQL the nodes of a cluster, each with a data directory of its own,
 * over the one schema of store_dir (on SQLite each keeps its own file). */
int ws_ts_start_node(ws_ts_daemon *d, const char *dir, const char *store_dir,
                     const char *const *extra);
/* 1 when the daemons keep their data on the test PostgreSQL server
 * (WS_TEST_STORE=postgresql). */
int ws_ts_on_postgresql(void);
/* One daemon shared by the tests of a file: cmocka group fixtures that start it
 * on a fresh directory / stop it and remove the directory. */
extern ws_ts_daemon ws_ts_shared;
extern char ws_ts_shared_dir[256];
int ws_ts_shared_setup(void **state);
int ws_ts_shared_teardown(void **state);
/* SIGTERM and wait: returns the exit status (0 on a clean shutdown). */
int ws_ts_stop(ws_ts_daemon *d);
void ws_ts_kill9(ws_ts_daemon *d);
/* Runs `worldstated key create --create --tenant T [--admin] --data-dir dir` (the
 * database made when missing); the key into out. */
int ws_ts_key_create(const char *dir, const char *tenant, int admin, char *out, size_t cap);

/* Runs $WS_TRAIN (worldstate-train) with args (NULL-terminated, after the
 * program name), OMP_NUM_THREADS=1; its stdout into out (NUL-terminated,
 * truncated to cap), its stderr to ours. Returns the exit status (-1: did not
 * run or died of a signal). */
int ws_ts_train(const char *const *args, char *out, size_t cap);
/* The same for $WS_DAEMON (worldstated) run as a command: `backup`, `restore`. */
int ws_ts_daemon_run(const char *const *args, char *out, size_t cap);

typedef struct {
    long status;
    char *body; /* NUL-terminated, owned */
    size_t len;
    cJSON *json; /* parsed body when it is JSON, else NULL */
    char *headers; /* the response's header lines, as received (owned) */
} ws_ts_resp;

/* The value of response header `name` (case-insensitive) into out; 0 if absent. */
int ws_ts_header(const ws_ts_resp *r, const char *name, char *out, size_t cap);
/* One request; key may be NULL (no Authorization), body may be NULL; HEAD
 * reads no body.
 * Returns the status (0 if the request failed at the transport level). */
long ws_ts_http(const ws_ts_daemon *d, const char *method, const char *path, const char *key, const char *body,
                size_t body_len, ws_ts_resp *r);
/* The same with extra request headers ("Name: value", NULL-terminated list). */
long ws_ts_http_headers(const ws_ts_daemon *d, const char *method, const char *path, const char *key,
                        const char *const *headers, const char *body, size_t body_len, ws_ts_resp *r);
void ws_ts_resp_free(ws_ts_resp *r);
/* Convenience: a JSON request with a NUL-terminated body; frees nothing. */
long ws_ts_req(const ws_ts_daemon *d, const char *method, const char *path, const char *key, const char *body,
               ws_ts_resp *r);
/* Creates a session on model; the id into out (33 bytes). Returns the status. */
long ws_ts_session(const ws_ts_daemon *d, const char *key, const char *model, char *out);
/* Floats of one world state (n_state * d) of a model, as its config says: the
 * default model's shape depends on the checkpoint the build ships. 0 on failure. */
long ws_ts_state_floats(const ws_ts_daemon *d, const char *key, const char *model);
/* Path helper: "/v1/sessions/<id><suffix>" into a static buffer per call site. */
const char *ws_ts_spath(char *buf, size_t cap, const char *id, const char *suffix);

#endif
