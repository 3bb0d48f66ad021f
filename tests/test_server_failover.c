/* test_server_failover.c — a cluster under failure, on loopback (api.md,
 * Running a cluster): a PostgreSQL of its own (scripts/pg-test-server.sh, so
 * that restarting it cannot disturb the other tests' server), three worldstated
 * nodes over it sharing models/, and HAProxy with the shipped configuration
 * (deploy/haproxy/worldstate.cfg) in front.
 *
 * Clients post steps with expect_step through HAProxy, each to sessions of its
 * own, retrying the same body on a transport error or a 5xx; a 409 whose
 * current step is expect_step + 1 is recognised from the step log as their own
 * step applied before (never posted again); every LOSE_EVERY-th answer is
 * dropped by the client as if the connection had broken, so that path is
 * always taken. Under that load one node is
 * kill -9ed (HAProxy moves its sessions to the others), then restarted on its
 * port (it rejoins: its sessions come back to it), then PostgreSQL itself is
 * stopped (the nodes answer 503 storage_busy and /readyz says not ready) and
 * started again (they recover without a restart). Afterwards every session's
 * log has exactly its acknowledged steps, in order, each once. The figures
 * (acknowledged, lost, duplicates, recognised retries, times to recover) are
 * printed. Skipped (77) without HAProxy or PostgreSQL's server programs.
 * No timing is asserted: every wait has a generous deadline. */
#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/daemon_proc.h"
#include "test_server_util.h"
#include "test_util.h"

/* LOSE_EVERY: a client drops every so many answers as if the connection had
 * broken after the commit (a retry must find its step applied, not apply it
 * twice), so the path is taken whether or not a kill lands there. */
enum { NODES = 3, CLIENTS = 4, SESS = 3, WAIT_S = 90, LOSE_EVERY = 8 };

typedef struct {
    int c;
    char id[SESS][33];
    _Atomic int64_t acked[SESS];      /* the last step acknowledged */
    _Atomic int64_t last_ack_us[SESS]; /* when */
    atomic_int recognised;            /* 409s found to be the client's own step */
    int answers;                      /* 200s received: every LOSE_EVERY-th is dropped */
    atomic_int retries;               /* 5xx and transport errors, retried */
    char why[256];                    /* the first thing that must not happen */
} client;

static ws_ts_daemon node[NODES], proxy;
static char dir[NODES][256], pg_dir[300];
static pid_t haproxy_pid;
static client cl[CLIENTS];
static atomic_int stop_clients;

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The tag of a client's n-th step of session s: its instruction's two symbols. */
static void tag_of(int c, int s, int64_t n, char *a, char *b, size_t cap)
{
    snprintf(a, cap, "c%ds%d", c, s);
    snprintf(b, cap, "n%lld", (long long)n);
}

/* 1 when the log entry at `step` of session s is client x's step `step`, 0
 * when it is another, -1 when the log could not be read (retry). */
static int logged_as_ours(const client *x, int s, int64_t step)
{
    char path[200], a[32], b[32];
    snprintf(path, sizeof path, "/v1/sessions/%s/steps?after=%lld&limit=1", x->id[s],
             (long long)step - 1);
    tag_of(x->c, s, step, a, b, sizeof a);
    ws_ts_resp r;
    int ours = -1;
    if (ws_ts_req(&proxy, "GET", path, NULL, NULL, &r) == 200) {
        const cJSON *e = cJSON_GetArrayItem(cJSON_GetObjectItem(r.json, "steps"), 0);
        const cJSON *in = cJSON_GetArrayItem(cJSON_GetObjectItem(e, "instructions"), 0);
        const cJSON *f = cJSON_GetObjectItem(in, "fact");
        ours = cJSON_GetArraySize(f) == 2 && !strcmp(cJSON_GetArrayItem(f, 0)->valuestring, a) &&
               !strcmp(cJSON_GetArrayItem(f, 1)->valuestring, b);
    }
    ws_ts_resp_free(&r);
    return ours;
}

static void fail_client(client *x, const char *what, long st, const ws_ts_resp *r)
{
    if (!x->why[0])
        snprintf(x->why, sizeof x->why, "client %d: %s (HTTP %ld %.150s)", x->c, what, st,
                 r && r->body ? r->body : "");
    atomic_store(&stop_clients, 1);
}

/* Posts the client's next step of session s until it is acknowledged (or
 * recognised as applied); 0 when something that must not happen happened. */
static int post_step(client *x, int s)
{
    int64_t expect = atomic_load(&x->acked[s]);
    char path[128], body[320], a[32], b[32];
    tag_of(x->c, s, expect + 1, a, b, sizeof a);
    snprintf(body, sizeof body,
             "{\"expect_step\":%lld,\"instructions\":[{\"fact\":[\"%s\",\"%s\"],\"value\":true}],"
             "\"queries\":[{\"fact\":[\"%s\",\"%s\"]}]}",
             (long long)expect, a, b, a, b);
    ws_ts_spath(path, sizeof path, x->id[s], "/steps");
    for (int64_t deadline = now_us() + (int64_t)WAIT_S * 1000000; now_us() < deadline;) {
        ws_ts_resp r;
        long st = ws_ts_req(&proxy, "POST", path, NULL, body, &r);
        const cJSON *step = cJSON_GetObjectItem(r.json, st == 409 ? "current_step" : "step");
        int64_t at = cJSON_IsNumber(step) ? (int64_t)step->valuedouble : -1;
        int ok = 1, done = 0;
        if (st == 200 && ++x->answers % LOSE_EVERY == 0) {
            atomic_fetch_add(&x->retries, 1); /* lost on the way: sent again */
        } else if (st == 200) {
            ok = at == expect + 1;
            done = 1;
        } else if (st == 409) { /* an attempt whose answer was lost was applied */
            int ours = at == expect + 1 ? logged_as_ours(x, s, at) : 0;
            ok = ours != 0;
            done = ours == 1;
            if (done) atomic_fetch_add(&x->recognised, 1);
            if (ours < 0) atomic_fetch_add(&x->retries, 1); /* the log unreadable: ask again */
        } else if (st == 400 || st == 404) {
            ok = 0;
        } else {
            atomic_fetch_add(&x->retries, 1);
        }
        if (!ok) fail_client(x, "unexpected answer", st, &r);
        ws_ts_resp_free(&r);
        if (!ok) return 0;
        if (done) {
            atomic_store(&x->acked[s], expect + 1);
            atomic_store(&x->last_ack_us[s], now_us());
            return 1;
        }
        sleep_ms(20);
    }
    fail_client(x, "a step not acknowledged within the deadline", 0, NULL);
    return 0;
}

static void *run_client(void *arg)
{
    client *x = arg;
    while (!atomic_load(&stop_clients))
        for (int s = 0; s < SESS; s++)
            if (!post_step(x, s)) return NULL;
    return NULL;
}

static int64_t total_acked(void)
{
    int64_t n = 0;
    for (int c = 0; c < CLIENTS; c++)
        for (int s = 0; s < SESS; s++) n += atomic_load(&cl[c].acked[s]);
    return n;
}

/* Seconds until every session acknowledged a step after t0 (µs); -1 past the
 * deadline or when a client failed. */
static double all_acked_after(int64_t t0)
{
    for (int64_t deadline = t0 + (int64_t)WAIT_S * 1000000; now_us() < deadline;) {
        int all = 1;
        for (int c = 0; c < CLIENTS && all; c++)
            for (int s = 0; s < SESS && all; s++) all = atomic_load(&cl[c].last_ack_us[s]) > t0;
        if (all) return (double)(now_us() - t0) / 1e6;
        if (atomic_load(&stop_clients)) return -1;
        sleep_ms(20);
    }
    return -1;
}

static void wait_acked(int64_t n)
{
    for (int64_t deadline = now_us() + (int64_t)WAIT_S * 1000000;
         total_acked() < n && now_us() < deadline && !atomic_load(&stop_clients);)
        sleep_ms(20);
    assert_true(total_acked() >= n);
}

/* worldstate_steps_total of a node (-1 when it does not answer). */
static long steps_served(const ws_ts_daemon *d)
{
    ws_ts_resp r;
    long n = -1;
    if (ws_ts_req(d, "GET", "/metrics", NULL, NULL, &r) == 200) {
        const char *p = strstr(r.body, "\nworldstate_steps_total ");
        if (p) n = atol(p + strlen("\nworldstate_steps_total "));
    }
    ws_ts_resp_free(&r);
    return n;
}

static int pg_script(const char *cmd)
{
    char line[800];
    snprintf(line, sizeof line, "bash '%s/scripts/pg-test-server.sh' %s '%s' >/dev/null", WS_SOURCE_DIR,
             cmd, pg_dir);
    return system(line) == 0 ? 0 : -1;
}

static int start_haproxy(void)
{
    char log[320];
    int ports[NODES];
    proxy.port = daemon_free_port();
    snprintf(log, sizeof log, "%s/haproxy.log", pg_dir);
    for (int i = 0; i < NODES; i++) ports[i] = node[i].port;
    pid_t pid =
        daemon_haproxy_start(WS_SOURCE_DIR "/deploy/haproxy/worldstate.cfg", proxy.port, ports, NODES, log);
    if (pid < 0) return -1;
    haproxy_pid = pid;
    for (int i = 0; i < 600; i++) { /* up to 60 s: it answers through a node */
        ws_ts_resp r;
        long st = ws_ts_req(&proxy, "GET", "/readyz", NULL, NULL, &r);
        ws_ts_resp_free(&r);
        if (st == 200) return 0;
        sleep_ms(100);
    }
    fprintf(stderr, "haproxy did not answer; see %s\n", log);
    return -1;
}

static int setup(void **state)
{
    (void)state;
#ifndef WS_HAVE_POSTGRESQL
    printf("[  SKIPPED ] a build without the PostgreSQL backend\n");
    exit(77);
#endif
    if (system("command -v haproxy >/dev/null 2>&1") != 0) {
        printf("[  SKIPPED ] no haproxy (Debian package haproxy: scripts/install-deps.sh)\n");
        exit(77);
    }
    ws_ts_tmpdir(pg_dir, sizeof pg_dir);
    char uri[320];
    snprintf(uri, sizeof uri, "%s/uri", pg_dir);
    if (pg_script("start") != 0) return -1;
    if (access(uri, R_OK) != 0) {
        printf("[  SKIPPED ] no PostgreSQL server programs\n");
        exit(77);
    }
    /* the nodes keep their data on this server (test_server_util.h) */
    setenv("WS_TEST_STORE", "postgresql", 1);
    setenv("WS_TEST_POSTGRES_FILE", uri, 1);
    for (int i = 0; i < NODES; i++) {
        ws_ts_tmpdir(dir[i], sizeof dir[i]);
        if (i > 0) { /* one schema and one models/ folder: the first node's */
            char models[300], link[300];
            snprintf(models, sizeof models, "%s/models", dir[0]);
            snprintf(link, sizeof link, "%s/models", dir[i]);
            if (symlink(models, link) != 0) return -1;
        }
        if (ws_ts_start_node(&node[i], dir[i], dir[0], NULL) != 0) return -1;
    }
    return start_haproxy();
}

static int teardown(void **state)
{
    (void)state;
    if (haproxy_pid > 0) {
        kill(haproxy_pid, SIGTERM);
        waitpid(haproxy_pid, NULL, 0);
    }
    int rc = 0;
    for (int i = NODES - 1; i >= 0; i--)
        if (node[i].pid > 0 && ws_ts_stop(&node[i]) != 0) rc = -1;
    for (int i = NODES - 1; rc == 0 && i >= 0; i--) ws_ts_cleanup(dir[i]);
    pg_script("stop");
    if (rc == 0) ws_ts_cleanup(pg_dir);
    return rc;
}

/* Every session's log holds its acknowledged steps, in order, each once: the
 * lost and duplicated ones counted. */
static void verify(int64_t *acked, int64_t *lost, int64_t *dups)
{
    *acked = *lost = *dups = 0;
    for (int c = 0; c < CLIENTS; c++)
        for (int s = 0; s < SESS; s++) {
            int64_t n = atomic_load(&cl[c].acked[s]), seen = 0;
            *acked += n;
            char path[200], a[32], b[32];
            snprintf(path, sizeof path, "/v1/sessions/%s/steps?after=0&limit=1000", cl[c].id[s]);
            ws_ts_resp r;
            assert_int_equal(ws_ts_req(&node[0], "GET", path, NULL, NULL, &r), 200);
            const cJSON *e;
            cJSON_ArrayForEach(e, cJSON_GetObjectItem(r.json, "steps"))
            {
                int64_t step = (int64_t)cJSON_GetObjectItem(e, "step")->valuedouble;
                const cJSON *f = cJSON_GetObjectItem(
                    cJSON_GetArrayItem(cJSON_GetObjectItem(e, "instructions"), 0), "fact");
                tag_of(c, s, step, a, b, sizeof a);
                int ours = step == seen + 1 && !strcmp(cJSON_GetArrayItem(f, 0)->valuestring, a) &&
                           !strcmp(cJSON_GetArrayItem(f, 1)->valuestring, b);
                if (ours && step <= n)
                    seen = step;
                else
                    (*dups)++; /* a step twice, out of order, or never acknowledged */
            }
            ws_ts_resp_free(&r);
            *lost += n - seen;
        }
}

static void test_kill_node_and_restart_postgresql(void **state)
{
    (void)state;
    for (int c = 0; c < CLIENTS; c++) {
        cl[c].c = c;
        for (int s = 0; s < SESS; s++) /* created through any node */
            assert_int_equal(ws_ts_session(&proxy, NULL, "default", cl[c].id[s]), 201);
    }
    pthread_t th[CLIENTS];
    for (int c = 0; c < CLIENTS; c++)
        assert_int_equal(pthread_create(&th[c], NULL, run_client, &cl[c]), 0);
    wait_acked(CLIENTS * SESS * 3);

    /* a node dies under load: HAProxy moves its sessions. The one that served
     * most: it has sessions of its own to take back when it rejoins. */
    int k = 0;
    long served_before = -1;
    for (int i = 0; i < NODES; i++) {
        long n = steps_served(&node[i]);
        if (n > served_before) served_before = n, k = i;
    }
    ws_ts_daemon *victim = &node[k];
    int port = victim->port;
    int64_t t_kill = now_us();
    ws_ts_kill9(victim);
    double recover_kill = all_acked_after(t_kill);

    /* it restarts on its port and rejoins: its sessions come back to it */
    char listen[64];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    const char *const on_port[] = {"--listen", listen, NULL};
    assert_int_equal(ws_ts_start_node(victim, dir[k], dir[0], on_port), 0);
    long served_after = 0;
    for (int64_t deadline = now_us() + (int64_t)WAIT_S * 1000000;
         (served_after = steps_served(victim)) <= 0 && now_us() < deadline;)
        sleep_ms(100);

    /* PostgreSQL restarts under load: 503 storage_busy meanwhile, then recovery */
    assert_int_equal(pg_script("halt"), 0);
    char path[128];
    ws_ts_resp r;
    long st = ws_ts_req(&node[0], "POST", ws_ts_spath(path, sizeof path, cl[0].id[0], "/queries"),
                        NULL, "{\"queries\":[{\"fact\":[\"a\",\"b\"]}]}", &r);
    const cJSON *code = cJSON_GetObjectItem(cJSON_GetObjectItem(r.json, "error"), "code");
    assert_int_equal(st, 503);
    assert_string_equal(cJSON_IsString(code) ? code->valuestring : "", "storage_busy");
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_req(&node[0], "GET", "/readyz", NULL, NULL, &r), 503);
    ws_ts_resp_free(&r);
    int64_t down = total_acked();
    assert_int_equal(pg_script("resume"), 0);
    int64_t t_pg = now_us();
    double recover_pg = all_acked_after(t_pg);

    atomic_store(&stop_clients, 1);
    for (int c = 0; c < CLIENTS; c++) pthread_join(th[c], NULL);
    for (int c = 0; c < CLIENTS; c++)
        if (cl[c].why[0]) fail_msg("%s", cl[c].why);
    int64_t acked, lost, dups;
    verify(&acked, &lost, &dups);
    int recognised = 0, retries = 0;
    for (int c = 0; c < CLIENTS; c++)
        recognised += atomic_load(&cl[c].recognised), retries += atomic_load(&cl[c].retries);
    printf("failover: acknowledged=%lld lost=%lld duplicates=%lld recognised_retries=%d "
           "retried_5xx_or_transport=%d; node kill -9: every session acknowledged again after "
           "%.2f s, the node served %ld steps before and %ld after its restart; PostgreSQL "
           "restart: %lld acknowledged before it stopped, every session again %.2f s after it "
           "started\n",
           (long long)acked, (long long)lost, (long long)dups, recognised, retries, recover_kill,
           served_before, served_after, (long long)down, recover_pg);
    assert_true(recover_kill >= 0);
    assert_true(served_after > 0); /* rejoined: HAProxy sends it its sessions again */
    assert_true(recover_pg >= 0);
    assert_true(recognised > 0);
    assert_int_equal(lost, 0);
    assert_int_equal(dups, 0);
}

int main(void)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) return 1; /* before the client threads */
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_kill_node_and_restart_postgresql)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
