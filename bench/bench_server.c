/* bench_server.c — worldstated under load over loopback.
 *
 * Starts the daemon (built beside this benchmark) on a temporary data dir,
 * creates a small model over the API, and runs `clients` concurrent sessions,
 * each a thread posting steps (2 instructions, 2 queries) back to back on a
 * keep-alive connection (http_raw.c: no HTTP library, whose CPU the daemon
 * would lose on a small machine), for `seconds`; once with batching off (--max-batch 1)
 * and once on (--max-batch 64). Prints steps/s and p50/p99 latency per mode,
 * next to the SQLite group-commit ceiling measured in the same run (the same
 * state blob size: 1 step per transaction vs 64), and one JSON line.
 *
 *   build/bench/bench_server [--clients 64] [--seconds 5] [--durability normal|full]
 *                            [--wait-us 2000]   (--batch-wait-us of the batching-on mode)
 *                            [--store LOCATION] (the daemon's --store, e.g. postgresql://...;
 *                                                the ceiling rows then measure it too)
 * On a --store that outlives the run, each run's model has a name of its own.
 *                            [--default-model]  (issue 15's shape: the shipped default
 *                              model, steps of 4 instructions + 8 queries of 2-3 symbols)
 *                            [--on-only]        (skip the batching-off mode)
 *                            [--training on|off] (with --default-model: its online
 *                              training, PATCH /v1/models/default/training; default off)
 *                            [--d N]            (with --default-model: instead of the shipped
 *                              model, one of its shape with width N and random parameters,
 *                              created over the API: e.g. 128, the shape issue 15 measured)
 * Also prints the HTTP floor: the p50 of GET /healthz on one connection, and
 * each mode's mean engine batch (jobs per batch, from the daemon's /metrics).
 */
#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon_proc.h"
#include "http_raw.h"
#include "latencies.h"
#include "storage/storage.h"
#include "tmp_dir.h"
#include "base/ws_clock.h"

#define MODEL_D 32
#define MODEL_T 8
#define MODEL_JSON \
    "{\"name\":\"%s\",\"config\":{\"d\":32,\"n_heads\":2,\"n_state\":8,\"n_upd_layers\":1,\"n_ext_layers\":1," \
    "\"vocab_cap\":256},\"training\":{\"enabled\":false}}"

static size_t sink(char *p, size_t sz, size_t n, void *ctx)
{
    (void)p;
    (void)ctx;
    return sz * n;
}

/* A reply kept in a caller's buffer, as much as fits. */
typedef struct {
    char *p;
    size_t cap;
} text_buf;

static size_t keep(char *p, size_t sz, size_t n, void *ctx)
{
    text_buf *b = ctx;
    size_t have = strlen(b->p), k = sz * n;
    if (have + k < b->cap) {
        memcpy(b->p + have, p, k);
        b->p[have + k] = '\0';
    }
    return k;
}

static long post(CURL *c, int port, const char *path, const char *body, char *out)
{
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    text_buf b = {out, 4096};
    if (out) out[0] = '\0';
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, out ? keep : sink);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    long st = 0;
    if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &st);
    return st;
}

static char model_name[48] = "bench"; /* the running load's model */
static const char *store;              /* --store, or NULL: the data directory's SQLite file */
/* --default-model: sessions on the shipped model, steps of issue 15's shape;
 * --training on: with its online training */
static int default_model, training;
static int wide_d; /* --d: the default's shape at this width; 0: the shipped model itself */
/* The shipped default's shape (models/default.safetensors' config) at width %d. */
#define WIDE_JSON \
    "{\"name\":\"%s\",\"config\":{\"d\":%d,\"n_heads\":4,\"n_state\":32,\"n_upd_layers\":2," \
    "\"n_ext_layers\":2,\"max_fact_len\":4,\"vocab_cap\":4096,\"symbol_code\":\"hashed\"," \
    "\"empty_steps\":\"hold\",\"views\":2},\"training\":{\"enabled\":false}}"

/* Step t's body: 2 instructions + 2 queries of 2 symbols, or (default_model) 4
 * instructions + 8 queries of 2-3 symbols. */
static void step_body(char *body, size_t cap, int t)
{
    if (!default_model) {
        snprintf(body, cap,
                 "{\"instructions\":[{\"fact\":[\"e%d\",\"p%d\"],\"value\":true},{\"fact\":[\"e%d\",\"p%d\"],\"value\":false}],"
                 "\"queries\":[{\"fact\":[\"e%d\",\"p%d\"]},{\"fact\":[\"e%d\",\"p%d\"]}]}",
                 t % 8, t % 5, t % 8, (t + 1) % 5, t % 8, t % 5, (t + 3) % 8, t % 5);
        return;
    }
    size_t n = (size_t)snprintf(body, cap, "{\"instructions\":[");
    for (int i = 0; i < 12 && n < cap; i++) {
        int a = (t + i) % 16, b = (t * 3 + i) % 7;
        const char *third = i % 2 ? ",\"kitchen\"" : "";
        if (i == 4) n += (size_t)snprintf(body + n, cap - n, "],\"queries\":[");
        n += (size_t)snprintf(body + n, cap - n, "%s{\"fact\":[\"e%d\",\"p%d\"%s]%s}",
                              i == 0 || i == 4 ? "" : ",", a, b, third,
                              i < 4 ? (i % 3 ? ",\"value\":true" : ",\"value\":false") : "");
    }
    if (n < cap) snprintf(body + n, cap - n, "]}");
}

typedef struct {
    int port;
    double until;
    ws_bench_lat lat;
    atomic_int *errors;
} client;

static void *client_main(void *arg)
{
    client *cl = arg;
    http_raw c;
    http_raw_init(&c, cl->port);
    char id[4096], resp[4096], path[128], body[1024];
    snprintf(body, sizeof body, "{\"model\":\"%s\"}", default_model && !wide_d ? "default" : model_name);
    long created = http_raw_request(&c, "POST", "/v1/sessions", body, id, sizeof id);
    if (created != 201) {
        if (atomic_fetch_add(cl->errors, 1) == 0) fprintf(stderr, "bench_server: session create: HTTP %ld\n", created);
        http_raw_close(&c);
        return NULL;
    }
    char *q = strstr(id, "\"id\":\"");
    snprintf(path, sizeof path, "/v1/sessions/%.32s/steps", q ? q + 6 : "");
    for (int t = 0; ws_clock_mono_s() < cl->until; t++) {
        step_body(body, sizeof body, t);
        double t0 = ws_clock_mono_s();
        long st = http_raw_request(&c, "POST", path, body, resp, sizeof resp);
        double dt = ws_clock_mono_s() - t0;
        if (st != 200) {
            if (atomic_fetch_add(cl->errors, 1) == 0)
                fprintf(stderr, "bench_server: first failed step: HTTP %ld after %.1f ms: %s\n", st, 1e3 * dt, resp);
            continue;
        }
        if (ws_bench_lat_push(&cl->lat, dt) != 0) break;
    }
    http_raw_close(&c);
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    double steps_per_s, p50_ms, p99_ms, floor_ms;
    double steps_per_cpu_s; /* per CPU second of the daemon: on a shared machine
                               wall time counts the waits for a core, this the work */
    long steps, errors;
    double jobs_per_batch; /* the engine's mean batch, from /metrics; 0 unknown */
} load_result;

/* CPU seconds (user + system) the process has used, from /proc; -1 unknown. */
static double proc_cpu_s(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the name may hold spaces: fields follow it */
    unsigned long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* The p50 of GET /healthz on one keep-alive connection of the load's client:
 * what HTTP alone costs. */
static double http_floor_ms(int port)
{
    enum { N = 200 };
    double lat[N];
    http_raw c;
    http_raw_init(&c, port);
    for (int i = 0; i < N; i++) {
        double t0 = ws_clock_mono_s();
        if (http_raw_request(&c, "GET", "/healthz", NULL, NULL, 0) != 200) {
            http_raw_close(&c);
            return 0;
        }
        lat[i] = ws_clock_mono_s() - t0;
    }
    http_raw_close(&c);
    qsort(lat, N, sizeof *lat, cmp_double);
    return 1e3 * lat[N / 2];
}

/* Jobs per engine batch over the daemon's life: worldstate_batch_jobs' sum / count. */
static double jobs_per_batch(int port)
{
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics", port);
    static char text[1 << 16];
    text_buf b = {text, sizeof text};
    text[0] = '\0';
    CURL *c = curl_easy_init();
    if (!c) return 0;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, keep);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    int ok = curl_easy_perform(c) == CURLE_OK;
    curl_easy_cleanup(c);
    const char *sum = ok ? strstr(text, "\nworldstate_batch_jobs_sum ") : NULL;
    const char *count = ok ? strstr(text, "\nworldstate_batch_jobs_count ") : NULL;
    double r = sum && count ? atof(strchr(sum + 1, ' ')) / atof(strchr(count + 1, ' ')) : 0;
    return r > 0 ? r : 0;
}

static int run_load(const char *base, const char *max_batch, const char *wait_us, const char *durability, int clients,
                    double seconds, load_result *out)
{
    char dir[300]; /* one data directory per mode; one for both on a shared --store, whose
                    * model rows name their checkpoint files in it */
    snprintf(dir, sizeof dir, "%s/%s%s", base, store ? "data" : "mb", store ? "" : max_batch);
    daemon_proc d;
    const char *flags[] = {"--max-batch", max_batch, "--batch-wait-us", wait_us, "--durability",
                           durability, "--threads", "4", store ? "--store" : NULL, store, NULL};
    if (daemon_start(&d, WS_DAEMON_PATH, dir, flags) != 0) return -1;
    snprintf(model_name, sizeof model_name, "bench-%ld-mb%s", (long)getpid(), max_batch);
    CURL *c = curl_easy_init();
    char resp[4096], model[512];
    if (wide_d)
        snprintf(model, sizeof model, WIDE_JSON, model_name, wide_d);
    else
        snprintf(model, sizeof model, MODEL_JSON, model_name);
    int ok = c && ((default_model && !wide_d) || post(c, d.port, "/v1/models", model, resp) == 201);
    if (ok && default_model) {
        char path[128];
        snprintf(path, sizeof path, "/v1/models/%s/training", wide_d ? model_name : "default");
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "PATCH");
        ok = post(c, d.port, path, training ? "{\"enabled\":true}" : "{\"enabled\":false}",
                  resp) == 200;
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, NULL);
    }
    if (c) curl_easy_cleanup(c);
    out->floor_ms = ok ? http_floor_ms(d.port) : 0;
    client *cl = calloc((size_t)clients, sizeof *cl);
    pthread_t *th = calloc((size_t)clients, sizeof *th);
    atomic_int errors = 0;
    double cpu0 = proc_cpu_s(d.pid);
    double t0 = ws_clock_mono_s(), until = t0 + seconds;
    for (int i = 0; ok && cl && th && i < clients; i++) {
        cl[i] = (client){.port = d.port, .until = until, .errors = &errors};
        if (pthread_create(&th[i], NULL, client_main, &cl[i]) != 0) ok = 0;
    }
    long n = 0;
    for (int i = 0; ok && i < clients; i++) {
        pthread_join(th[i], NULL);
        n += cl[i].lat.n;
    }
    double elapsed = ws_clock_mono_s() - t0, cpu = proc_cpu_s(d.pid) - cpu0;
    out->steps_per_cpu_s = cpu0 >= 0 && cpu > 0 ? (double)n / cpu : 0;
    double *all = ok ? malloc(sizeof *all * (size_t)(n ? n : 1)) : NULL;
    long k = 0;
    for (int i = 0; cl && i < clients; i++) {
        if (all) memcpy(all + k, cl[i].lat.v, sizeof *all * (size_t)cl[i].lat.n);
        k += cl[i].lat.n;
        free(cl[i].lat.v);
    }
    if (all && n) {
        qsort(all, (size_t)n, sizeof *all, cmp_double);
        out->p50_ms = 1e3 * all[n / 2];
        out->p99_ms = 1e3 * all[(n * 99) / 100];
    }
    out->steps = n;
    out->errors = atomic_load(&errors);
    out->steps_per_s = (double)n / elapsed;
    out->jobs_per_batch = jobs_per_batch(d.port);
    free(all);
    free(cl);
    free(th);
    daemon_stop(&d);
    return ok && all ? 0 : -1;
}

/* The store alone: steps (state blob + log row) committed per second, `group` per transaction. */
static double commit_ceiling(const char *base, ws_store_durability dur, int group, double seconds)
{
    char path[320], name[48];
    snprintf(path, sizeof path, "%s/ceiling-%d.db", base, group);
    snprintf(name, sizeof name, "ceiling-%ld-%d", (long)getpid(), group);
    ws_store *st;
    ws_error err = {0};
    if (ws_store_open(store ? store : path, dur, 1, &st, &err) != WS_OK) {
        fprintf(stderr, "ceiling: %s\n", err.msg);
        return -1;
    }
    int64_t tenant, model;
    char ids[64][WS_STORE_ID_LEN + 1];
    int64_t steps[64] = {0};
    float state[MODEL_D * MODEL_T];
    for (int i = 0; i < MODEL_D * MODEL_T; i++) state[i] = (float)i * 1e-3f;
    ws_status s = ws_store_tenant_ensure(st, "bench", &tenant, &err);
    if (s == WS_OK) s = ws_store_model_create(st, name, 0, "{}", NULL, &model, &err);
    for (int i = 0; s == WS_OK && i < 64; i++) s = ws_store_session_create(st, tenant, model, NULL, 0, 0, 0, 0, ids[i], &err);
    ws_store_log_entry e = {.instructions_json = "[{\"fact\":[\"e1\",\"p1\"],\"value\":true}]",
                            .queries_json = "[{\"fact\":[\"e1\",\"p1\"]}]",
                            .answers_json = "[{\"p\":0.5,\"holds\":true}]", .model_version = 1};
    long n = 0;
    double t0 = ws_clock_mono_s();
    while (s == WS_OK && ws_clock_mono_s() - t0 < seconds) {
        s = ws_store_begin(st, &err);
        for (int i = 0; s == WS_OK && i < group; i++, n++) {
            int k = (int)(n % 64);
            s = ws_store_apply_step(st, tenant, ids[k], steps[k], state, MODEL_T, MODEL_D, &e, &steps[k], &err);
        }
        if (s == WS_OK) s = ws_store_commit(st, &err);
    }
    double rate = (double)n / (ws_clock_mono_s() - t0);
    ws_store_close(st);
    if (s != WS_OK) fprintf(stderr, "ceiling: %s\n", err.msg);
    return s == WS_OK ? rate : -1;
}

int main(int argc, char **argv)
{
    int clients = 64;
    double seconds = 5;
    const char *durability = "normal", *wait_us = "2000";
    int on_only = 0;
    for (int i = 1; i < argc; i += 2) {
        if (!strcmp(argv[i], "--default-model")) default_model = 1, i--;
        else if (!strcmp(argv[i], "--on-only")) on_only = 1, i--;
        else if (i + 1 >= argc) clients = 0; /* a flag without its value: usage */
        else if (!strcmp(argv[i], "--clients")) clients = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--training")) training = !strcmp(argv[i + 1], "on");
        else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--d")) wide_d = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--durability")) durability = argv[i + 1];
        else if (!strcmp(argv[i], "--wait-us")) wait_us = argv[i + 1];
        else if (!strcmp(argv[i], "--store")) store = argv[i + 1];
        else {
            fprintf(stderr, "usage: bench_server [--clients N] [--seconds S] [--durability normal|full] [--wait-us N] "
                            "[--store LOCATION] [--default-model] [--on-only] [--training on|off] [--d N]\n");
            return 2;
        }
    }
    if (clients < 1 || clients > 1024 || seconds <= 0 || wide_d < 0 || wide_d > 1024 ||
        (wide_d && !default_model))
        return 2;
    signal(SIGPIPE, SIG_IGN);
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) return 1;
    char base[] = "/tmp/ws-bench-XXXXXX";
    if (!mkdtemp(base)) return 1;
    ws_store_durability dur;
    ws_error err;
    if (ws_store_durability_parse(durability, &dur, &err) != WS_OK) return 2;

    load_result off = {0}, on = {0};
    if ((!on_only && run_load(base, "1", "0", durability, clients, seconds, &off) != 0) ||
        run_load(base, "64", wait_us, durability, clients, seconds, &on) != 0) {
        fprintf(stderr, "bench_server: the daemon did not start or failed (logs under %s)\n", base);
        return 1;
    }
    double c1 = commit_ceiling(base, dur, 1, 2), c64 = commit_ceiling(base, dur, 64, 2);
    if (default_model)
        printf("worldstated over loopback: %d concurrent sessions, %.0f s per mode, %s%.0d, "
               "steps of 4 instructions + 8 queries, durability %s, %ld CPU cores\n",
               clients, seconds, wide_d ? "the default's shape at d=" : "the shipped default model",
               wide_d, durability, sysconf(_SC_NPROCESSORS_ONLN));
    else
        printf("worldstated over loopback: %d concurrent sessions, %.0f s per mode, model d=%d T=%d 1+1 layers, "
               "durability %s, %ld CPU cores\n", clients, seconds, MODEL_D, MODEL_T, durability, sysconf(_SC_NPROCESSORS_ONLN));
    printf("%-26s %12s %10s %10s %8s %14s %11s\n", "mode", "steps/s", "p50 ms", "p99 ms", "errors", "steps/CPU s",
           "jobs/batch");
    printf("%-26s %12.0f %10.2f %10.2f %8ld %14.0f %11.1f\n", "batching off (max 1)", off.steps_per_s, off.p50_ms,
           off.p99_ms, off.errors, off.steps_per_cpu_s, off.jobs_per_batch);
    char on_mode[64];
    snprintf(on_mode, sizeof on_mode, "batching on (64, %s us)", wait_us);
    printf("%-26s %12.0f %10.2f %10.2f %8ld %14.0f %11.1f\n", on_mode, on.steps_per_s, on.p50_ms, on.p99_ms,
           on.errors, on.steps_per_cpu_s, on.jobs_per_batch);
    printf("%-26s %12s %10.2f\n", "HTTP floor (GET /healthz)", "", on.floor_ms);
    const char *backend = store && strncmp(store, "sqlite:", 7) ? "PostgreSQL" : "SQLite";
    printf("%-11s alone, 1/commit  %12.0f\n", backend, c1);
    printf("%-11s alone, 64/commit %12.0f\n", backend, c64);
    printf("{\"bench\":\"server\",\"store\":\"%s\",\"clients\":%d,\"seconds\":%.1f,\"durability\":\"%s\","
           "\"off\":{\"steps_per_s\":%.1f,\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"errors\":%ld},"
           "\"wait_us\":%d,\"on\":{\"steps_per_s\":%.1f,\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"errors\":%ld,"
           "\"steps_per_cpu_s\":%.1f,\"jobs_per_batch\":%.2f},"
           "\"http_floor_ms\":%.3f,\"default_model\":%d,\"d\":%d,\"training\":%d,"
           "\"sqlite_commit_1_per_s\":%.1f,\"sqlite_commit_64_per_s\":%.1f}\n",
           backend, clients, seconds, durability, off.steps_per_s, off.p50_ms, off.p99_ms, off.errors, atoi(wait_us), on.steps_per_s, on.p50_ms,
           on.p99_ms, on.errors, on.steps_per_cpu_s, on.jobs_per_batch, on.floor_ms, default_model, wide_d, training, c1, c64);
    tmp_dir_remove("bench_server", base);
    curl_global_cleanup();
    return 0;
}
