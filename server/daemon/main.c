/* main.c — worldstated: flags, admin subcommands, startup and graceful shutdown.
 *
 *   worldstated [--data-dir D] [--listen host:port] [--threads N] [--max-batch N]
 *               [--batch-wait-us N] [--durability normal|full] [--backend auto|cpu]
 *               [--max-sessions N] [--request-timeout-ms N]
 *   worldstated key create --tenant T [--admin] [--note TEXT] [--data-dir D]
 *   worldstated key list [--data-dir D]
 *   worldstated key revoke ID [--data-dir D]
 * Shutdown on SIGTERM/SIGINT: stop accepting, answer or fail every queued job
 * (the engine finishes the batch in hand and commits it), then close. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon.h"

ws_srv_config ws_srv_config_default(void)
{
    ws_srv_config c = {.port = 8080, .threads = 4, .max_batch = 64, .batch_wait_us = 2000,
                       .durability = WS_STORE_DURABILITY_NORMAL, .max_sessions = 100000,
                       .request_timeout_ms = 30000, .max_queue = 4096};
    strcpy(c.data_dir, "./worldstate-data");
    strcpy(c.host, "127.0.0.1");
    return c;
}

static void close_store(void *p)
{
    ws_store_close(p);
}

ws_store *ws_srv_store(ws_srv *srv, ws_error *err)
{
    ws_store *st = pthread_getspecific(srv->store_key);
    if (st) return st;
    if (ws_store_open(srv->db_path, srv->cfg.durability, 0, &st, err) != WS_OK) return NULL;
    if (pthread_setspecific(srv->store_key, st) != 0) {
        ws_store_close(st);
        ws_error_set(err, WS_ERR_NOMEM, "cannot keep the storage connection");
        return NULL;
    }
    return st;
}

static volatile sig_atomic_t got_signal;
static void on_signal(int sig)
{
    got_signal = sig;
}

static int usage(void)
{
    fprintf(stderr,
            "usage: worldstated [--data-dir D] [--listen host:port] [--threads N] [--max-batch N]\n"
            "                   [--batch-wait-us N] [--durability normal|full] [--backend auto|cpu]\n"
            "                   [--max-sessions N] [--request-timeout-ms N]\n"
            "       worldstated key create --tenant T [--admin] [--note TEXT] [--data-dir D]\n"
            "       worldstated key list [--data-dir D]\n"
            "       worldstated key revoke ID [--data-dir D]\n");
    return 2;
}

static int int_arg(const char *s, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi) return 0;
    *out = (int)v;
    return 1;
}

static ws_status open_db(ws_srv *srv, ws_store **st, ws_error *err)
{
    if (mkdir(srv->cfg.data_dir, 0700) != 0 && errno != EEXIST)
        return ws_error_set(err, WS_ERR_IO, "cannot create %s: %s", srv->cfg.data_dir, strerror(errno));
    snprintf(srv->db_path, sizeof srv->db_path, "%s/worldstate.db", srv->cfg.data_dir);
    return ws_store_open(srv->db_path, srv->cfg.durability, 1, st, err);
}

static ws_status print_key(void *ctx, const ws_store_key_info *k)
{
    (void)ctx;
    printf("%lld\t%s\t%s...\t%s\t%s\n", (long long)k->id, k->tenant_name, k->prefix, k->admin ? "admin" : "-",
           k->revoked_ms ? "revoked" : "active");
    return WS_OK;
}

static int key_command(ws_srv *srv, int argc, char **argv)
{
    const char *tenant = NULL, *note = NULL, *id = NULL;
    int admin = 0;
    if (argc < 1) return usage();
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tenant") && i + 1 < argc) tenant = argv[++i];
        else if (!strcmp(argv[i], "--note") && i + 1 < argc) note = argv[++i];
        else if (!strcmp(argv[i], "--admin")) admin = 1;
        else if (!strcmp(argv[i], "--data-dir") && i + 1 < argc) snprintf(srv->cfg.data_dir, sizeof srv->cfg.data_dir, "%s", argv[++i]);
        else if (argv[i][0] != '-' && !id) id = argv[i];
        else return usage();
    }
    ws_error err = {0};
    ws_store *st = NULL;
    ws_status s = open_db(srv, &st, &err);
    if (s == WS_OK && !strcmp(argv[0], "create")) {
        if (!tenant) {
            ws_store_close(st);
            return usage();
        }
        char key[WS_STORE_KEY_LEN + 1];
        int64_t kid;
        s = ws_store_key_create(st, tenant, admin, note, key, &kid, &err);
        if (s == WS_OK) printf("%s\n", key); /* shown once: only its hash is stored */
        if (s == WS_OK) fprintf(stderr, "key %lld for tenant %s%s (store it now: it is not shown again)\n",
                                (long long)kid, tenant, admin ? " (admin)" : "");
    } else if (s == WS_OK && !strcmp(argv[0], "list")) {
        s = ws_store_key_list(st, print_key, NULL, &err);
    } else if (s == WS_OK && !strcmp(argv[0], "revoke") && id) {
        s = ws_store_key_revoke(st, strtoll(id, NULL, 10), &err);
    } else if (s == WS_OK) {
        ws_store_close(st);
        return usage();
    }
    ws_store_close(st);
    if (s != WS_OK) {
        fprintf(stderr, "worldstated: %s\n", err.msg);
        return 1;
    }
    return 0;
}

static int parse_flags(ws_srv *srv, int argc, char **argv)
{
    ws_srv_config *c = &srv->cfg;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        ws_error err;
        int ok = v != NULL;
        if (!strcmp(a, "--data-dir") && v) snprintf(c->data_dir, sizeof c->data_dir, "%s", v);
        else if (!strcmp(a, "--listen") && v) {
            const char *colon = strrchr(v, ':');
            ok = colon && (size_t)(colon - v) < sizeof c->host && int_arg(colon + 1, 0, 65535, &c->port);
            if (ok) snprintf(c->host, sizeof c->host, "%.*s", (int)(colon - v), v);
        } else if (!strcmp(a, "--threads") && v) ok = int_arg(v, 1, 256, &c->threads);
        else if (!strcmp(a, "--max-batch") && v) ok = int_arg(v, 1, 1024, &c->max_batch);
        else if (!strcmp(a, "--batch-wait-us") && v) ok = int_arg(v, 0, 1000000, &c->batch_wait_us);
        else if (!strcmp(a, "--request-timeout-ms") && v) ok = int_arg(v, 100, 3600000, &c->request_timeout_ms);
        else if (!strcmp(a, "--max-sessions") && v) {
            int n;
            ok = int_arg(v, 1, 1 << 30, &n);
            c->max_sessions = n;
        } else if (!strcmp(a, "--durability") && v) ok = ws_store_durability_parse(v, &c->durability, &err) == WS_OK;
        else if (!strcmp(a, "--backend") && v) {
            ok = !strcmp(v, "auto") || !strcmp(v, "cpu");
            c->force_cpu = !strcmp(v, "cpu");
        } else ok = 0;
        if (!ok) {
            fprintf(stderr, "worldstated: bad flag %s %s\n", a, v ? v : "");
            return 0;
        }
        i++;
    }
    return 1;
}

static int serve(ws_srv *srv)
{
    ws_error err = {0};
    ws_store *st = NULL;
    int64_t n_keys = 0;
    int lock_fd = -1; /* held until exit: one process serves a data directory */
    ws_status s = open_db(srv, &st, &err);
    if (s == WS_OK) s = ws_srv_datadir_lock(srv->cfg.data_dir, "worldstated", &lock_fd, &err);
    if (s == WS_OK) s = ws_store_key_count_active(st, &n_keys, &err);
    if (s == WS_OK) s = ws_store_tenant_ensure(st, "default", &srv->default_tenant, &err);
    ws_store_close(st);
    if (s == WS_OK && n_keys == 0 && !ws_auth_is_loopback(srv->cfg.host))
        s = ws_error_set(&err, WS_ERR_INVALID,
                         "no API keys exist: refusing to listen on %s (create one with `worldstated key create --tenant T "
                         "--admin`, or listen on 127.0.0.1)", srv->cfg.host);
    srv->open_mode = n_keys == 0;
    if (s == WS_OK && pthread_key_create(&srv->store_key, close_store) != 0)
        s = ws_error_set(&err, WS_ERR_NOMEM, "cannot create thread key");
    if (s == WS_OK) s = ws_srv_engine_start(srv, &err);
    if (s == WS_OK) s = ws_http_start(srv, &err);
    if (s != WS_OK) {
        fprintf(stderr, "worldstated: %s\n", err.msg);
        ws_engine_free(srv->engine);
        return 1;
    }
    printf("worldstated: listening on http://%s:%d (data %s, backend %s, %s, durability %s)\n", srv->cfg.host,
           srv->cfg.port, srv->cfg.data_dir, ws_engine_backend_name(srv->engine),
           srv->open_mode ? "no API keys: loopback only, no auth" : "API keys required",
           ws_store_durability_name(srv->cfg.durability));
    fflush(stdout);
    while (!got_signal) usleep(100000);
    fprintf(stderr, "worldstated: signal %d, shutting down\n", (int)got_signal);
    atomic_store(&srv->stopping, 1);
    ws_http_quiesce(srv);        /* 1. no new connections */
    ws_engine_stop(srv->engine); /* 2. finish the batch in hand (committed), fail the queue */
    ws_http_stop(srv);           /* 3. let replies go out, close connections */
    ws_engine_free(srv->engine); /* 4. fold the WAL, close the database */
    srv->engine = NULL;
    return 0;
}

int main(int argc, char **argv)
{
    static ws_srv srv;
    ws_backend_prefer_passive_waits(argv);
    srv.cfg = ws_srv_config_default();
    /* A client that hangs up mid-reply must not kill the daemon. */
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGINT, &sa, NULL) != 0) return 1;
    if (argc > 1 && !strcmp(argv[1], "key")) return key_command(&srv, argc - 2, argv + 2);
    if (!parse_flags(&srv, argc, argv)) return usage();
    return serve(&srv);
}
