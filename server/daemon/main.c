/* main.c — worldstated: flags, admin subcommands, startup and graceful shutdown.
 *
 *   worldstated [--data-dir D] [--listen host:port] [--threads N] ...  (--help: the flags)
 *   worldstated key create --tenant T [--admin] [--note TEXT] [--data-dir D]
 *   worldstated key list [--data-dir D]
 *   worldstated key revoke ID [--data-dir D]
 * Shutdown on SIGTERM/SIGINT: stop accepting, answer or fail every queued job
 * (the engine finishes the batch in hand and commits it), then close. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef WS_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "base/ws_version.h"
#include "daemon.h"
#include "server/common/cli.h"

ws_srv_config ws_srv_config_default(void)
{
    ws_srv_config c = {.port = 8080,
                       .threads = 4,
                       .max_batch = 64,
                       .batch_wait_us = 2000,
                       .durability = WS_STORE_DURABILITY_NORMAL,
                       .max_sessions = 100000,
                       .request_timeout_ms = 30000,
                       .max_queue = 4096,
                       .max_connections = 4096,
                       .max_connections_per_ip = 64,
                       .connection_timeout_s = 10,
                       .max_model_memory = ws_engine_config_default().max_model_memory};
    strcpy(c.data_dir, "./worldstate-data");
    strcpy(c.host, "127.0.0.1");
    return c;
}

/* Tells systemd (a Type=notify unit, $NOTIFY_SOCKET) what the daemon is doing:
 * READY=1 once it listens, STOPPING=1 when it begins to shut down. Nothing when
 * not run by systemd, or built without libsystemd. */
static void notify_systemd(const char *state)
{
#ifdef WS_HAVE_SYSTEMD
    int rc = sd_notify(0, state);
    if (rc < 0)
        fprintf(stderr, "worldstated: cannot notify systemd (%s): %s\n", state, strerror(-rc));
#else
    (void)state;
#endif
}

static volatile sig_atomic_t got_signal;
static void on_signal(int sig)
{
    got_signal = sig;
}

static ws_status parse_listen(void *value, const char *arg, ws_error *err)
{
    ws_srv_config *c = value;
    const char *colon = strrchr(arg, ':');
    char *end = NULL;
    errno = 0;
    long port = colon ? strtol(colon + 1, &end, 10) : -1;
    if (!colon || (size_t)(colon - arg) >= sizeof c->host || !colon[1] || *end || errno ||
        port < 0 || port > 65535)
        return ws_error_set(err, WS_ERR_INVALID, "wants host:port, got '%s'", arg);
    snprintf(c->host, sizeof c->host, "%.*s", (int)(colon - arg), arg);
    c->port = (int)port;
    return WS_OK;
}

static ws_status parse_data_dir(void *value, const char *arg, ws_error *err)
{
    ws_srv_config *c = value;
    if (strlen(arg) >= sizeof c->data_dir) return ws_error_set(err, WS_ERR_INVALID, "too long");
    snprintf(c->data_dir, sizeof c->data_dir, "%s", arg);
    return WS_OK;
}

/* Bytes: an integer, optionally with K, M, G or T (powers of 1024). */
static ws_status parse_bytes(void *value, const char *arg, ws_error *err)
{
    static const char units[] = "KMGT";
    char *end = NULL;
    errno = 0;
    unsigned long long n = strtoull(arg, &end, 10);
    const char *u = *end ? strchr(units, *end) : NULL;
    int shift = u ? 10 * (int)(u - units + 1) : 0;
    if (!*arg || *arg == '-' || errno || (*end && (!u || end[1])) || n > (SIZE_MAX >> shift))
        return ws_error_set(err, WS_ERR_INVALID, "wants bytes, e.g. 4096, 512M or 4G, got '%s'",
                            arg);
    *(size_t *)value = (size_t)n << shift;
    return WS_OK;
}

static ws_status parse_cors_origin(void *value, const char *arg, ws_error *err)
{
    return ws_cors_origin_add(value, arg, err);
}

static ws_status parse_durability(void *value, const char *arg, ws_error *err)
{
    return ws_store_durability_parse(arg, value, err);
}

static ws_status parse_backend(void *value, const char *arg, ws_error *err)
{
    if (strcmp(arg, "auto") && strcmp(arg, "cpu"))
        return ws_error_set(err, WS_ERR_INVALID, "wants auto or cpu, got '%s'", arg);
    *(int *)value = !strcmp(arg, "cpu");
    return WS_OK;
}

/* What the flags set: the daemon's config, and `worldstated key`'s own. */
typedef struct {
    ws_srv_config cfg;
    const char *tenant, *note;
    int admin, help, version;
} flag_values;

enum { SERVE = 1, KEY = 2 }; /* the commands, as the bits of ws_cli_opt.only */
#define O(f) offsetof(flag_values, f)
/* clang-format off */
#define FN(name, f, fn, arg, only, help) {name, WS_OPT_FN, O(f), 0, 0, arg, help, fn, only}
/* clang-format on */
/* clang-format off */
#define NUM(name, kind, f, lo, hi, arg, only, help) \
    {name, kind, O(f), lo, hi, arg, help, NULL, only}
/* clang-format on */
static const ws_cli_opt flags[] = {
    FN("data-dir", cfg, parse_data_dir, "D", 0,
       "SQLite file and checkpoints (default ./worldstate-data)"),
    FN("listen", cfg, parse_listen, "HOST:PORT", SERVE,
       "IPv4 address and port; :0 picks one (default 127.0.0.1:8080)"),
    NUM("threads", WS_OPT_INT, cfg.threads, 1, 256, "N", SERVE, "HTTP threads"),
    NUM("max-batch", WS_OPT_INT, cfg.max_batch, 1, 1024, "N", SERVE,
        "most jobs in one engine batch; 1: no batching"),
    NUM("batch-wait-us", WS_OPT_INT, cfg.batch_wait_us, 0, 1000000, "N", SERVE,
        "after a batch of several requests, the longest wait for as many again; never when idle"),
    FN("durability", cfg.durability, parse_durability, "normal|full", SERVE,
       "see api.md, Durability (default normal)"),
    FN("backend", cfg.force_cpu, parse_backend, "auto|cpu", SERVE,
       "auto: CUDA when built with it and a GPU is present (default auto)"),
    NUM("max-sessions", WS_OPT_I64, cfg.max_sessions, 1, 1 << 30, "N", SERVE,
        "sessions per tenant"),
    NUM("request-timeout-ms", WS_OPT_INT, cfg.request_timeout_ms, 100, 3600000, "N", SERVE,
        "longest a request waits in the engine queue"),
    NUM("max-connections", WS_OPT_INT, cfg.max_connections, 16, 65536, "N", SERVE,
        "open connections in all; more are refused at accept"),
    NUM("max-connections-per-ip", WS_OPT_INT, cfg.max_connections_per_ip, 1, 65536, "N", SERVE,
        "open connections from one client address"),
    NUM("connection-timeout-s", WS_OPT_INT, cfg.connection_timeout_s, 1, 3600, "N", SERVE,
        "a connection idle this long (no byte in or out) is closed"),
    FN("max-model-memory", cfg.max_model_memory, parse_bytes, "BYTES", SERVE,
       "memory all loaded models may take together, e.g. 512M, 4G; a model past it is "
       "refused; 0: no bound (default: half the RAM)"),
    FN("cors-origin", cfg, parse_cors_origin, "ORIGIN", SERVE,
       "a browser origin allowed to call the API (CORS), e.g. https://app.example.com; "
       "repeatable, or a comma list; * allows any (default: none, no CORS headers)"),
    NUM("help", WS_OPT_SET, help, 1, 1, NULL, SERVE, "this text"),
    NUM("version", WS_OPT_SET, version, 1, 1, NULL, SERVE, "the version, and the git commit built"),
    NUM("tenant", WS_OPT_STR, tenant, 0, 0, "T", KEY, "key create: the key's tenant"),
    NUM("admin", WS_OPT_SET, admin, 1, 1, NULL, KEY, "key create: an admin key"),
    NUM("note", WS_OPT_STR, note, 0, 0, "TEXT", KEY, "key create: a note kept with the key"),
};
#undef FN
#undef NUM
#undef O
#define N_FLAGS ((int)(sizeof flags / sizeof *flags))

/* To stdout (exit 0) when asked for, else to stderr (exit 2). */
static int usage(FILE *f)
{
    fprintf(f, "usage: worldstated [flags]\n"
               "       worldstated key create --tenant T [--admin] [--note TEXT] [--data-dir D]\n"
               "       worldstated key list [--data-dir D]\n"
               "       worldstated key revoke ID [--data-dir D]\n");
    flag_values defaults = {.cfg = ws_srv_config_default()};
    ws_cli_usage(f, flags, N_FLAGS, ~0u, &defaults);
    return f == stdout ? 0 : 2;
}

/* The data directory holds API key hashes and every session's log: what the
 * daemon creates there is its user's alone (0700, and umask 077 in main gives
 * 0600 files: the database, its -wal and -shm, checkpoints), and a directory
 * that others may read or enter is worth a warning. */
static ws_status open_db(ws_srv *srv, ws_store **st, ws_error *err)
{
    if (mkdir(srv->cfg.data_dir, 0700) != 0 && errno != EEXIST)
        return ws_error_set(err, WS_ERR_IO, "cannot create %s: %s", srv->cfg.data_dir,
                            strerror(errno));
    struct stat sb;
    if (stat(srv->cfg.data_dir, &sb) != 0)
        return ws_error_set(err, WS_ERR_IO, "cannot stat %s: %s", srv->cfg.data_dir,
                            strerror(errno));
    if (sb.st_mode & 077)
        fprintf(stderr,
                "worldstated: warning: data directory %s has mode %04o: other users may read "
                "API key hashes and session logs (chmod 700 %s)\n",
                srv->cfg.data_dir, (unsigned)(sb.st_mode & 07777), srv->cfg.data_dir);
    snprintf(srv->db_path, sizeof srv->db_path, "%s/worldstate.db", srv->cfg.data_dir);
    return ws_store_open(srv->db_path, srv->cfg.durability, 1, st, err);
}

static ws_status print_key(void *ctx, const ws_store_key_info *k)
{
    (void)ctx;
    printf("%lld\t%s\t%s...\t%s\t%s\n", (long long)k->id, k->tenant_name, k->prefix,
           k->admin ? "admin" : "-", k->revoked_ms ? "revoked" : "active");
    return WS_OK;
}

/* `worldstated key create|list|revoke [ID]`: the operands after the flags. */
static int key_command(ws_srv *srv, const flag_values *v, int argc, char **argv)
{
    const char *verb = argc > 0 ? argv[0] : "", *id = argc > 1 ? argv[1] : NULL;
    int create = !strcmp(verb, "create"), list = !strcmp(verb, "list");
    int revoke = !strcmp(verb, "revoke");
    if (argc > 2 || (!create && !list && !revoke) || (create && !v->tenant) || (revoke && !id))
        return usage(stderr);
    ws_error err = {0};
    ws_store *st = NULL;
    ws_status s = open_db(srv, &st, &err);
    /* The note is printed by `key list` (tab-separated): strict UTF-8, no control bytes. */
    if (s == WS_OK && create && v->note && v->note[0])
        s = ws_srv_text_check(v->note, 256, "--note", &err);
    if (s == WS_OK && create) {
        char key[WS_STORE_KEY_LEN + 1];
        int64_t kid;
        s = ws_store_key_create(st, v->tenant, v->admin, v->note, key, &kid, &err);
        if (s == WS_OK) printf("%s\n", key); /* shown once: only its hash is stored */
        if (s == WS_OK)
            fprintf(stderr, "key %lld for tenant %s%s (store it now: it is not shown again)\n",
                    (long long)kid, v->tenant, v->admin ? " (admin)" : "");
    } else if (s == WS_OK && list) {
        s = ws_store_key_list(st, print_key, NULL, &err);
    } else if (s == WS_OK) {
        s = ws_store_key_revoke(st, strtoll(id, NULL, 10), &err);
    }
    ws_store_close(st);
    if (s != WS_OK) {
        fprintf(stderr, "worldstated: %s\n", err.msg);
        return 1;
    }
    return 0;
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
                         "no API keys exist: refusing to listen on %s (create one with "
                         "`worldstated key create --tenant T "
                         "--admin`, or listen on 127.0.0.1)",
                         srv->cfg.host);
    srv->open_mode = n_keys == 0;
    if (s == WS_OK) s = ws_srv_store_init(srv, &err);
    if (s == WS_OK) s = ws_srv_engine_start(srv, &err);
    if (s == WS_OK) s = ws_http_start(srv, &err);
    if (s != WS_OK) {
        fprintf(stderr, "worldstated: %s\n", err.msg);
        ws_engine_free(srv->engine);
        return 1;
    }
    printf("worldstated: listening on http://%s:%d (data %s, backend %s, %s, durability %s)\n",
           srv->cfg.host, srv->cfg.port, srv->cfg.data_dir, ws_engine_backend_name(srv->engine),
           srv->open_mode ? "no API keys: loopback only, no auth" : "API keys required",
           ws_store_durability_name(srv->cfg.durability));
    fflush(stdout);
    notify_systemd("READY=1");
    while (!got_signal) usleep(100000);
    notify_systemd("STOPPING=1");
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
    umask(077); /* files in the data directory are 0600 (open_db) */
    /* A client that hangs up mid-reply must not kill the daemon. */
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGINT, &sa, NULL) != 0) return 1;
    flag_values v = {.cfg = srv.cfg};
    int key = argc > 1 && !strcmp(argv[1], "key");
    int first = ws_cli_parse(argc - key, argv + key, "worldstated", flags, N_FLAGS,
                             key ? KEY : SERVE, &v, NULL);
    srv.cfg = v.cfg;
    if (first < 0) return usage(stderr);
    if (key) return key_command(&srv, &v, argc - 1 - first, argv + 1 + first);
    if (v.help) return usage(stdout);
    if (v.version) {
        ws_version_print(stdout, "worldstated");
        return 0;
    }
    if (first < argc) return usage(stderr);
    return serve(&srv);
}
