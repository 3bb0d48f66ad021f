/* main.c — worldstated: flags, admin subcommands, startup and graceful shutdown.
 *
 *   worldstated [--data-dir D] [--listen host:port] [--threads N] ...  (--help: the flags)
 *   worldstated key create --tenant T [--admin] [--note TEXT] [--data-dir D] [--store L] [--create]
 *   worldstated key list [--data-dir D] [--store L]
 *   worldstated key revoke ID [--data-dir D] [--store L]
 *   worldstated backup --to DIR [--data-dir D]       (backup.h; beside a running daemon too)
 *   worldstated restore --from DIR [--data-dir D]
 * Settings come from flags, WORLDSTATE_* variables and the config file
 * (config.h). Shutdown on SIGTERM/SIGINT: stop accepting, answer or fail every
 * queued job (the engine finishes the batch in hand and commits it), then
 * close. SIGHUP reloads the settings and counts the API keys (reload, check_keys). */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef WS_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "backup.h"
#include "base/ws_version.h"
#include "config.h"
#include "crash.h"
#include "daemon.h"
#include "server/common/log.h"

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
                       .max_model_memory = ws_engine_config_default().max_model_memory,
                       .state_cache = ws_engine_config_default().state_cache_bytes,
                       .idle_spin_us = ws_engine_config_default().idle_spin_us};
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
    if (rc < 0) ws_log(WS_LOG_WARN, "cannot notify systemd (%s): %s", state, strerror(-rc));
#else
    (void)state;
#endif
}

static volatile sig_atomic_t got_stop, got_hup;
static void on_signal(int sig)
{
    if (sig == SIGHUP)
        got_hup = 1;
    else
        got_stop = sig;
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

/* A folder: into a char[WS_SRV_PATH_MAX]. */
static ws_status parse_dir(void *value, const char *arg, ws_error *err)
{
    if (strlen(arg) >= WS_SRV_PATH_MAX) return ws_error_set(err, WS_ERR_INVALID, "too long");
    snprintf(value, WS_SRV_PATH_MAX, "%s", arg);
    return WS_OK;
}

/* Checked when the store opens (an unknown scheme names the known ones). */
static ws_status parse_store(void *value, const char *arg, ws_error *err)
{
    ws_srv_config *c = value;
    if (!*arg || strlen(arg) >= sizeof c->store)
        return ws_error_set(err, WS_ERR_INVALID, "wants sqlite:PATH or postgresql://...");
    snprintf(c->store, sizeof c->store, "%s", arg);
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

static ws_status parse_log_level(void *value, const char *arg, ws_error *err)
{
    return ws_log_level_parse(arg, value, err);
}

static ws_status parse_log_format(void *value, const char *arg, ws_error *err)
{
    return ws_log_format_parse(arg, value, err);
}

static ws_status parse_backend(void *value, const char *arg, ws_error *err)
{
    if (strcmp(arg, "auto") && strcmp(arg, "cpu"))
        return ws_error_set(err, WS_ERR_INVALID, "wants auto or cpu, got '%s'", arg);
    *(int *)value = !strcmp(arg, "cpu");
    return WS_OK;
}

static ws_status parse_train_priority(void *value, const char *arg, ws_error *err)
{
    static const char *const names[] = {"low", "idle", "normal"}; /* ws_train_priority */
    for (int i = 0; i < 3; i++)
        if (!strcmp(arg, names[i])) return *(int *)value = i, WS_OK;
    return ws_error_set(err, WS_ERR_INVALID, "wants low, idle or normal, got '%s'", arg);
}

/* What the flags set: the daemon's config, and the subcommands' own. */
typedef struct {
    ws_srv_config cfg;
    const char *config; /* the config file named by --config */
    ws_log_level log_level;
    ws_log_format log_format;
    const char *log_file; /* NULL: stderr */
    const char *tenant, *note;
    const char *to, *from; /* backup, restore */
    int admin, create, help, version, check_config;
} flag_values;

enum { SERVE = 1, KEY = 2, BACKUP = 4, RESTORE = 8 }; /* the commands, as ws_cli_opt.only bits */
#define O(f) offsetof(flag_values, f)
/* clang-format off */
#define FN(name, f, fn, arg, only, help) {name, WS_OPT_FN, O(f), 0, 0, arg, help, fn, only}
/* clang-format on */
/* clang-format off */
#define NUM(name, kind, f, lo, hi, arg, only, help) \
    {name, kind, O(f), lo, hi, arg, help, NULL, only}
/* clang-format on */
static const ws_cli_opt flags[] = {
    FN("data-dir", cfg.data_dir, parse_dir, "D", 0,
       "checkpoints, and the SQLite file without --store (default ./worldstate-data)"),
    FN("store", cfg, parse_store, "LOCATION", 0,
       "sessions, logs, models and keys: sqlite:PATH or postgresql://... (api.md, Storage; "
       "default sqlite:<data-dir>/worldstate.db)"),
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
    FN("train-priority", cfg.train_priority, parse_train_priority, "low|idle|normal", SERVE,
       "CPU priority of online training: low (nice 19), idle (SCHED_IDLE), normal (default "
       "low)"),
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
    FN("state-cache", cfg.state_cache, parse_bytes, "BYTES", SERVE,
       "memory for the states of recently stepped sessions, so that their next step reads "
       "nothing from SQLite; 0: none (default 64M)"),
    NUM("idle-spin-us", WS_OPT_INT, cfg.idle_spin_us, 0, 10000, "N", SERVE,
        "after a batch, how long the engine polls for the next request before it sleeps: a "
        "lone client's next step finds it awake; 0: it sleeps at once (default 0)"),
    FN("cors-origin", cfg, parse_cors_origin, "ORIGIN", SERVE,
       "a browser origin allowed to call the API (CORS), e.g. https://app.example.com; "
       "repeatable, or a comma list; * allows any (default: none, no CORS headers)"),
    FN("backup-dir", cfg.backup_dir, parse_dir, "DIR", SERVE,
       "POST /v1/admin/backup writes backups under DIR (default: none, the route is off)"),
    NUM("config", WS_OPT_STR, config, 0, 0, "PATH", 0,
        "config file (INI: a flag's name = value); flags beat WORLDSTATE_* variables, which "
        "beat the file (default " WS_DEFAULT_CONFIG " when it exists)"),
    FN("log-level", log_level, parse_log_level, "error|warn|info|debug", SERVE,
       "least severe log line written; info has a line per request (default info)"),
    FN("log-format", log_format, parse_log_format, "text|json", SERVE,
       "one log line per event as text or as a JSON object (default text)"),
    NUM("log-file", WS_OPT_STR, log_file, 0, 0, "PATH", SERVE,
        "the log, appended; reopened on SIGHUP (default stderr)"),
    NUM("help", WS_OPT_SET, help, 1, 1, NULL, SERVE, "this text"),
    NUM("version", WS_OPT_SET, version, 1, 1, NULL, SERVE, "the version, and the git commit built"),
    NUM("check-config", WS_OPT_SET, check_config, 1, 1, NULL, SERVE,
        "read the settings, print each with where it came from, and exit (2: a bad one)"),
    NUM("tenant", WS_OPT_STR, tenant, 0, 0, "T", KEY, "key create: the key's tenant"),
    NUM("admin", WS_OPT_SET, admin, 1, 1, NULL, KEY, "key create: an admin key"),
    NUM("note", WS_OPT_STR, note, 0, 0, "TEXT", KEY, "key create: a note kept with the key"),
    NUM("create", WS_OPT_SET, create, 1, 1, NULL, KEY,
        "key: make the data directory and its database when missing (else refused)"),
    NUM("to", WS_OPT_STR, to, 0, 0, "DIR", BACKUP, "backup: a new (or empty) folder to write"),
    NUM("from", WS_OPT_STR, from, 0, 0, "DIR", RESTORE, "restore: the backup folder to read"),
};
#undef FN
#undef NUM
#undef O
#define N_FLAGS ((int)(sizeof flags / sizeof *flags))

/* The settings: flags, WORLDSTATE_* variables, the config file (config.h);
 * `cmd` is the command whose flags argv holds. */
static ws_conf_spec settings_spec(unsigned cmd)
{
    return (ws_conf_spec){.prog = "worldstated",
                          .opts = flags,
                          .n_opts = N_FLAGS,
                          .cmd = cmd,
                          .settings = SERVE,
                          .size = sizeof(flag_values),
                          .config_flag = "config",
                          .env_prefix = "WORLDSTATE_",
                          .section = "worldstated",
                          .default_file = WS_DEFAULT_CONFIG};
}

static flag_values defaults(void)
{
    return (flag_values){.cfg = ws_srv_config_default(), .log_level = WS_LOG_INFO};
}

/* To stdout (exit 0) when asked for, else to stderr (exit 2). */
static int usage(FILE *f)
{
    fprintf(f, "usage: worldstated [flags]\n"
               "       worldstated key create --tenant T [--admin] [--note TEXT] [--data-dir D] "
               "[--store L] [--create]\n"
               "       worldstated key list [--data-dir D] [--store L]\n"
               "       worldstated key revoke ID [--data-dir D] [--store L]\n"
               "       worldstated backup --to DIR [--data-dir D]\n"
               "       worldstated restore --from DIR [--data-dir D]\n"
               "Every flag that takes a value may also be set by WORLDSTATE_<FLAG> (upper case,\n"
               "'-' as '_') or in the config file (`flag = value`); a flag beats the variable,\n"
               "which beats the file. SIGHUP re-reads the file and the API keys.\n");
    flag_values d = defaults();
    ws_cli_usage(f, flags, N_FLAGS, ~0u, &d);
    return f == stdout ? 0 : 2;
}

/* The data directory holds API key hashes and every session's log: what the
 * daemon creates there is its user's alone (0700, and umask 077 in main gives
 * 0600 files: the database, its -wal and -shm, checkpoints), and a directory
 * that others may read or enter is worth a warning. Without create, a missing
 * database is refused: a mistyped --data-dir must not become a new, empty one. */
static ws_status open_db(ws_srv *srv, int create, ws_store **st, ws_error *err)
{
    if (srv->cfg.store[0])
        snprintf(srv->db_path, sizeof srv->db_path, "%s", srv->cfg.store);
    else
        snprintf(srv->db_path, sizeof srv->db_path, "%s/worldstate.db", srv->cfg.data_dir);
    /* the data directory's own SQLite file; a --store names a server the admin set up */
    if (!create && !srv->cfg.store[0] && access(srv->db_path, F_OK) != 0)
        return ws_error_set(err, WS_ERR_NOTFOUND,
                            "no database at %s: is --data-dir right? (--create makes a new one)",
                            srv->db_path);
    if (mkdir(srv->cfg.data_dir, 0700) != 0 && errno != EEXIST)
        return ws_error_set(err, WS_ERR_IO, "cannot create %s: %s", srv->cfg.data_dir,
                            strerror(errno));
    struct stat sb;
    if (stat(srv->cfg.data_dir, &sb) != 0)
        return ws_error_set(err, WS_ERR_IO, "cannot stat %s: %s", srv->cfg.data_dir,
                            strerror(errno));
    if (sb.st_mode & 077)
        ws_log(WS_LOG_WARN,
               "data directory %s has mode %04o: other users may read API key hashes and session "
               "logs (chmod 700 %s)",
               srv->cfg.data_dir, (unsigned)(sb.st_mode & 07777), srv->cfg.data_dir);
    return ws_store_open(srv->db_path, srv->cfg.durability, 1, st, err);
}

/* `key list`: a header, then one key a line, tab-separated. */
static ws_status print_key(void *ctx, const ws_store_key_info *k)
{
    int *n = ctx;
    if ((*n)++ == 0) printf("ID\tTENANT\tPREFIX\tADMIN\tSTATE\tCREATED\tNOTE\n");
    char created[32] = "-";
    time_t t = (time_t)(k->created_ms / 1000);
    struct tm tm;
    if (gmtime_r(&t, &tm)) strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &tm);
    printf("%lld\t%s\t%s...\t%s\t%s\t%s\t%s\n", (long long)k->id, k->tenant_name, k->prefix,
           k->admin ? "admin" : "-", k->revoked_ms ? "revoked" : "active", created,
           k->note[0] ? k->note : "-");
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
    ws_status s = WS_OK;
    /* The note is printed by `key list` (tab-separated): strict UTF-8, no control
     * bytes; checked first, so that a refused key makes no database either. */
    if (create && v->note && v->note[0]) s = ws_srv_text_check(v->note, 256, "--note", &err);
    if (s == WS_OK) s = open_db(srv, v->create, &st, &err);
    if (s == WS_OK && create) {
        char key[WS_STORE_KEY_LEN + 1];
        int64_t kid;
        s = ws_store_key_create(st, v->tenant, v->admin, v->note, key, &kid, &err);
        if (s == WS_OK) printf("%s\n", key); /* shown once: only its hash is stored */
        if (s == WS_OK)
            fprintf(stderr,
                    "key %lld for tenant %s%s (store it now: it is not shown again; a running "
                    "daemon takes it within a second)\n",
                    (long long)kid, v->tenant, v->admin ? " (admin)" : "");
    } else if (s == WS_OK && list) {
        int n = 0;
        s = ws_store_key_list(st, print_key, &n, &err);
        if (s == WS_OK && n == 0) fprintf(stderr, "no API keys: the daemon runs in open mode\n");
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

/* ---- serving ---------------------------------------------------------------- */

/* The settings in force: what they are and where each came from. */
typedef struct {
    ws_conf_spec spec;
    int argc;
    char **argv;
    flag_values v;
    ws_conf conf;
} settings;

static ws_status apply_log(const flag_values *v, ws_error *err)
{
    return ws_log_configure(v->log_level, v->log_format, v->log_file, err);
}

/* One line per setting, its value and where it came from: log lines at
 * start, or `name = value ; from` lines on out (--check-config). */
static void show_settings(const settings *s, FILE *out)
{
    const char *file = s->conf.file[0] ? s->conf.file : "none";
    if (out)
        fprintf(out, "; config file: %s\n", file);
    else
        ws_log_kv(WS_LOG_INFO, "config file", (ws_log_field[]){WS_LOG_STR("file", file)}, 1);
    for (int k = 0; k < N_FLAGS; k++) {
        if (!ws_conf_is_setting(&s->spec, k)) continue;
        char val[WS_SRV_PATH_MAX];
        ws_conf_value_text(&s->spec, &s->conf, &s->v, k, val, sizeof val);
        const char *from = ws_conf_source_name(s->conf.source[k]);
        if (out) {
            fprintf(out, "%s = %s ; %s\n", flags[k].name, val, from);
            continue;
        }
        ws_log_field f[] = {WS_LOG_STR("name", flags[k].name), WS_LOG_STR("value", val),
                            WS_LOG_STR("from", from)};
        ws_log_kv(WS_LOG_INFO, "setting", f, 3);
    }
}

/* Settings a reload applies: the log's. The rest are read once at start. */
static int live_setting(const char *name)
{
    return !strncmp(name, "log-", 4);
}

/* SIGHUP: reads the settings again (the flags as given at start, the
 * environment as it was at start, the file as it is now); applies the log's,
 * reports every other change as needing a restart. A bad file changes
 * nothing. The log file is reopened either way (after logrotate). */
static void reload(settings *cur)
{
    settings next = {.spec = cur->spec, .argc = cur->argc, .argv = cur->argv, .v = defaults()};
    ws_error err = {0};
    if (ws_conf_load(&next.spec, next.argc, next.argv, &next.v, &next.conf, &err) != WS_OK) {
        ws_log(WS_LOG_ERROR, "reload: %s; the settings in force stay", err.msg);
        ws_conf_free(&next.conf);
        return;
    }
    int changed = 0;
    for (int k = 0; k < N_FLAGS; k++) {
        if (!ws_conf_is_setting(&cur->spec, k)) continue;
        char was[WS_SRV_PATH_MAX], now[WS_SRV_PATH_MAX];
        ws_conf_value_text(&cur->spec, &cur->conf, &cur->v, k, was, sizeof was);
        ws_conf_value_text(&next.spec, &next.conf, &next.v, k, now, sizeof now);
        if (!strcmp(was, now)) continue;
        changed++;
        int live = live_setting(flags[k].name);
        ws_log_field f[] = {WS_LOG_STR("name", flags[k].name), WS_LOG_STR("was", was),
                            WS_LOG_STR("now", now),
                            WS_LOG_STR("from", ws_conf_source_name(next.conf.source[k])),
                            WS_LOG_STR("applied", live ? "yes" : "no: needs a restart")};
        ws_log_kv(live ? WS_LOG_INFO : WS_LOG_WARN, "reload: setting changed", f, 5);
    }
    /* the log's settings from next, the rest kept as they are in force */
    flag_values v = cur->v;
    v.log_level = next.v.log_level;
    v.log_format = next.v.log_format;
    v.log_file = next.v.log_file;
    if (apply_log(&v, &err) != WS_OK) {
        ws_log(WS_LOG_ERROR, "reload: %s; the log stays as it was", err.msg);
        ws_conf_free(&next.conf);
        return;
    }
    /* keep next's texts (log-file points into them), cur's values for the rest */
    for (int k = 0; k < N_FLAGS; k++)
        if (!live_setting(flags[k].name)) {
            char *t = next.conf.text[k];
            next.conf.text[k] = cur->conf.text[k];
            cur->conf.text[k] = t;
            unsigned char src = next.conf.source[k];
            next.conf.source[k] = cur->conf.source[k];
            cur->conf.source[k] = src;
        }
    ws_conf_free(&cur->conf);
    cur->conf = next.conf;
    cur->v = v;
    ws_log_kv(WS_LOG_INFO, "reload: done",
              (ws_log_field[]){WS_LOG_STR("file", cur->conf.file[0] ? cur->conf.file : "none"),
                               WS_LOG_NUM("changed", changed)},
              2);
}
/* Keys made by `worldstated key create` while the daemon runs. A keyed daemon
 * looks every key up in the database on every request, so a new key works and
 * a revoked one fails at once; what needs noticing is the first key, which
 * ends open mode. The count is read once a second (and on SIGHUP) on the main
 * thread's own connection: no request pays for it. Open mode never comes back
 * while the daemon runs: revoking every key must not open a daemon that may
 * listen beyond loopback. */
static void check_keys(ws_srv *srv, ws_store *st, int64_t *n_keys, int always)
{
    ws_error err = {0};
    int64_t n = 0;
    if (ws_store_key_count_active(st, &n, &err) != WS_OK) {
        ws_log(WS_LOG_WARN, "counting API keys: %s", err.msg);
        return;
    }
    if (n > 0 && atomic_load(&srv->open_mode)) {
        atomic_store(&srv->open_mode, 0);
        ws_log(WS_LOG_WARN,
               "an API key exists now: open mode ends, every request but the probes needs a key; "
               "the sessions made in open mode belong to tenant \"default\" (a key of tenant "
               "default reaches them)");
    } else if (n == 0 && *n_keys > 0) {
        ws_log(WS_LOG_WARN, "every API key is revoked: requests get 401 until a key is created "
                            "(open mode returns only with a restart)");
    }
    if (always || n != *n_keys)
        ws_log_kv(WS_LOG_INFO, "API keys",
                  (ws_log_field[]){WS_LOG_NUM("active", n), WS_LOG_NUM("was", *n_keys)}, 2);
    *n_keys = n;
}

static int serve(ws_srv *srv, settings *set)
{
    ws_error err = {0};
    ws_store *st = NULL; /* the main thread's: the key count */
    int64_t n_keys = 0;
    int lock_fd = -1; /* held until exit: one process serves a data directory */
    show_settings(set, NULL);
    ws_status s = open_db(srv, 1, &st, &err);
    if (s == WS_OK) s = ws_srv_datadir_lock(srv->cfg.data_dir, "worldstated", &lock_fd, &err);
    if (s == WS_OK) s = ws_store_key_count_active(st, &n_keys, &err);
    if (s == WS_OK) s = ws_store_tenant_ensure(st, "default", &srv->default_tenant, &err);
    if (s == WS_OK && n_keys == 0 && !ws_auth_is_loopback(srv->cfg.host))
        s = ws_error_set(&err, WS_ERR_INVALID,
                         "no API keys exist: refusing to listen on %s (create one with "
                         "`worldstated key create --tenant T "
                         "--admin`, or listen on 127.0.0.1)",
                         srv->cfg.host);
    atomic_store(&srv->open_mode, n_keys == 0);
    if (s == WS_OK) s = ws_srv_store_init(srv, &err);
    if (s == WS_OK) s = ws_srv_engine_start(srv, &err);
    if (s == WS_OK) s = ws_http_start(srv, &err);
    if (s != WS_OK) {
        ws_log(WS_LOG_ERROR, "%s", err.msg);
        ws_store_close(st);
        ws_engine_free(srv->engine);
        return 1;
    }
    /* stdout's one line, for scripts that start the daemon on port 0 */
    printf("worldstated: listening on http://%s:%d (data %s, backend %s, %s, durability %s)\n",
           srv->cfg.host, srv->cfg.port, srv->cfg.data_dir, ws_engine_backend_name(srv->engine),
           n_keys == 0 ? "no API keys: loopback only, no auth" : "API keys required",
           ws_store_durability_name(srv->cfg.durability));
    fflush(stdout);
    char url[96];
    snprintf(url, sizeof url, "http://%s:%d", srv->cfg.host, srv->cfg.port);
    ws_log_field f[] = {
        WS_LOG_STR("url", url),
        WS_LOG_STR("data", srv->cfg.data_dir),
        WS_LOG_STR("backend", ws_engine_backend_name(srv->engine)),
        WS_LOG_STR("auth", n_keys == 0 ? "open mode: loopback only, no keys" : "API keys required"),
        WS_LOG_NUM("keys", n_keys),
        WS_LOG_STR("durability", ws_store_durability_name(srv->cfg.durability))};
    ws_log_kv(WS_LOG_INFO, "listening", f, 6);
    if (*ws_engine_backend_why(srv->engine)) /* --backend auto found no GPU: say why */
        ws_log(WS_LOG_INFO, "not on a GPU: %s", ws_engine_backend_why(srv->engine));
    notify_systemd("READY=1");
    for (int tick = 1; !got_stop; tick++) {
        usleep(100000);
        int hup = got_hup;
        if (hup) {
            got_hup = 0;
            ws_log(WS_LOG_INFO, "SIGHUP: reloading the settings and the API keys");
            reload(set);
        }
        if (hup || tick % 10 == 0) check_keys(srv, st, &n_keys, hup);
    }
    notify_systemd("STOPPING=1");
    ws_log(WS_LOG_INFO, "signal %d, shutting down", (int)got_stop);
    atomic_store(&srv->stopping, 1); /* 1. new requests are answered 503 */
    ws_engine_stop(srv->engine);     /* 2. finish the batch in hand (committed), fail the queue */
    ws_http_stop(srv);               /* 3. let replies go out, close connections */
    ws_srv_backup_stop();            /* 4. a backup in progress stops, its copy removed */
    ws_store_close(st);
    ws_engine_free(srv->engine); /* 5. fold the WAL, close the database */
    srv->engine = NULL;
    ws_log(WS_LOG_INFO, "stopped");
    return 0;
}

/* The subcommand argv[1] names, or SERVE. */
static unsigned command_of(int argc, char **argv)
{
    static const struct {
        const char *name;
        unsigned cmd;
    } subs[] = {{"key", KEY}, {"backup", BACKUP}, {"restore", RESTORE}};
    for (size_t i = 0; argc > 1 && i < sizeof subs / sizeof *subs; i++)
        if (!strcmp(argv[1], subs[i].name)) return subs[i].cmd;
    return SERVE;
}

int main(int argc, char **argv)
{
    static ws_srv srv;
    ws_backend_prefer_passive_waits(argv);
    umask(077); /* files in the data directory are 0600 (open_db) */
    /* A client that hangs up mid-reply must not kill the daemon. */
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGINT, &sa, NULL) != 0 ||
        sigaction(SIGHUP, &sa, NULL) != 0)
        return 1;
    ws_error crash_err = {0};
    if (ws_crash_report_install(&crash_err) != WS_OK)
        ws_log(WS_LOG_WARN, "no crash reports: %s", crash_err.msg);
    unsigned cmd = command_of(argc, argv);
    int sub = cmd != SERVE;
    static settings set;
    set = (settings){
        .spec = settings_spec(cmd), .argc = argc - sub, .argv = argv + sub, .v = defaults()};
    /* the flags alone first: --help and --version work whatever the file says */
    flag_values given = defaults();
    int first = ws_cli_parse(set.argc, set.argv, "worldstated", flags, N_FLAGS, cmd, &given, NULL);
    if (first < 0) return usage(stderr);
    if (cmd == SERVE && given.help) return usage(stdout);
    if (cmd == SERVE && given.version) {
        ws_version_print(stdout, "worldstated");
        return 0;
    }
    if (cmd == SERVE && first < argc) return usage(stderr);
    ws_error err = {0};
    ws_status s = ws_conf_load(&set.spec, set.argc, set.argv, &set.v, &set.conf, &err);
    if (s != WS_OK && set.conf.usage_error) return usage(stderr);
    if (s != WS_OK) {
        fprintf(stderr, "worldstated: %s\n", err.msg);
        return 2;
    }
    const flag_values *v = &set.v;
    srv.cfg = v->cfg;
    if (cmd == KEY) return key_command(&srv, v, argc - 1 - first, argv + 1 + first);
    if (cmd == BACKUP)
        return v->to && first == argc - 1 ? ws_srv_backup_command(v->cfg.data_dir, v->to)
                                          : usage(stderr);
    if (cmd == RESTORE)
        return v->from && first == argc - 1 ? ws_srv_restore_command(v->from, v->cfg.data_dir)
                                            : usage(stderr);
    if (v->check_config) {
        show_settings(&set, stdout);
        return 0;
    }
    if (apply_log(&set.v, &err) != WS_OK) {
        fprintf(stderr, "worldstated: %s\n", err.msg);
        return 2;
    }
    return serve(&srv, &set);
}
