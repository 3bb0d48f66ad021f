/* bench_train_serving.c — does online training stall serving? (issue 12 item 4)
 *
 * Starts worldstated (built beside this benchmark) on a temporary data dir with
 * its default model and, for 1 and for 64 concurrent clients, runs the same
 * load twice: online training off, then on (the model's default settings).
 * Each client is a thread with its own session posting labelled steps back to
 * back — 4 instructions and 8 queries of 2-3 symbols, the true answers as
 * labels — on a keep-alive connection of its own (http_raw.c), for `seconds`
 * per round; the settings and counts go through the C client library. Prints step p50/p99
 * (ms) and steps/s side by side, the ratio on/off, and, with training on, the
 * examples the training thread trained per second and those it dropped (its
 * buffer full), from GET /v1/models/default; then one JSON line.
 *
 * Off and on alternate for `rounds` rounds (latencies pooled per load), so a
 * machine whose load drifts meanwhile weighs on both alike.
 *
 * --toggle rules: the same for the training setting `rules` (exclusive relations
 * learned from the labels and applied to every step: its cost to serving),
 * with the network's training off in both loads.
 *
 *   build/bench/bench_train_serving [--seconds 5] [--rounds 3] [--clients 1,64]
 *                                   [--train-priority low|idle|normal]  (the daemon's flag)
 *                                   [--toggle enabled|rules]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/ws_clock.h"
#include "clients/ws_client.h"
#include "daemon_proc.h"
#include "http_raw.h"
#include "latencies.h"
#include "tmp_dir.h"

#define N_INSTR 4
#define N_QUERY 8
#define MAX_PHASES 8

typedef struct {
    int port;
    char session[WS_CLIENT_ID_LEN + 1];
    int index;
    double until;
    ws_bench_lat lat;
    int errors;
} load_client;

/* Appends the fact (symbols sym[0..arity)) to body at *n as a JSON array. */
static void put_fact(char *body, size_t cap, size_t *n, char sym[3][24], int arity)
{
    for (int s = 0; s < arity && *n < cap; s++)
        *n += (size_t)snprintf(body + *n, cap - *n, "%s\"%s\"", s ? "," : "[", sym[s]);
    if (*n < cap) *n += (size_t)snprintf(body + *n, cap - *n, "]");
}

/* The setting off and on: training's `enabled`, or `rules` (the network's
 * training off). */
static int toggle_rules;

/* Step t of client k as the JSON body of POST .../steps: entity e moves to a
 * new place (told: the new one true, the old one false), a colour is told;
 * queries ask the told facts and some never told, labelled with the truth.
 * With --toggle rules, the first never-told query asks instead where e was
 * told it is 5 steps before (labelled false): the evidence a rule is learned
 * from, so that, once it holds, each move has that place made false. */
static void step_body(int k, int t, char *body, size_t cap)
{
    int e = t % 5, place = t % 7, old = (t + 6) % 7;
    char sym[N_INSTR + N_QUERY][3][24];
    int arity[N_INSTR + N_QUERY], value[N_INSTR];
    for (int i = 0; i < N_INSTR; i++) {
        arity[i] = i < 2 ? 3 : 2;
        value[i] = i != 1;
        snprintf(sym[i][0], 24, "c%de%d", k, (e + i) % 5);
        if (i < 2)
            snprintf(sym[i][1], 24, "at");
        else
            snprintf(sym[i][1], 24, "colour%d", t % 3);
        snprintf(sym[i][2], 24, "p%d", i == 1 ? old : place);
    }
    for (int i = 0; i < N_QUERY; i++) {
        int r = N_INSTR + i, told = i < N_INSTR;
        arity[r] = told ? arity[i] : 2 + i % 2;
        for (int s = 0; s < 3; s++)
            if (told)
                snprintf(sym[r][s], 24, "%s", sym[i][s]);
            else
                snprintf(sym[r][s], 24, "c%dn%d_%d", k, t % 97, i * 3 + s); /* never told */
    }
    if (toggle_rules && t >= 5) { /* e's place 5 steps before */
        int r = 2 * N_INSTR;
        arity[r] = 3;
        snprintf(sym[r][0], 24, "c%de%d", k, e);
        snprintf(sym[r][1], 24, "at");
        snprintf(sym[r][2], 24, "p%d", (t - 5) % 7);
    }
    size_t n = (size_t)snprintf(body, cap, "{\"instructions\":[");
    for (int i = 0; i < N_INSTR && n < cap; i++) {
        n += (size_t)snprintf(body + n, cap - n, "%s{\"fact\":", i ? "," : "");
        put_fact(body, cap, &n, sym[i], arity[i]);
        if (n < cap)
            n += (size_t)snprintf(body + n, cap - n, ",\"value\":%s}", value[i] ? "true" : "false");
    }
    if (n < cap) n += (size_t)snprintf(body + n, cap - n, "],\"queries\":[");
    for (int i = 0; i < N_QUERY && n < cap; i++) {
        n += (size_t)snprintf(body + n, cap - n, "%s{\"fact\":", i ? "," : "");
        put_fact(body, cap, &n, sym[N_INSTR + i], arity[N_INSTR + i]);
        if (n < cap) n += (size_t)snprintf(body + n, cap - n, "}");
    }
    if (n < cap) n += (size_t)snprintf(body + n, cap - n, "],\"labels\":[");
    for (int i = 0; i < N_QUERY && n < cap; i++)
        n += (size_t)snprintf(body + n, cap - n, "%s%s", i ? "," : "",
                              i < N_INSTR && value[i] ? "true" : "false");
    if (n < cap) snprintf(body + n, cap - n, "]}");
}

/* A client's steps over raw HTTP (http_raw.c, as bench_server's): the load's
 * own CPU is taken from the daemon on the same cores, and a library's share
 * of it would weigh on both loads' latencies. */
static void *client_main(void *arg)
{
    load_client *cl = arg;
    http_raw h;
    http_raw_init(&h, cl->port);
    char path[96], body[2048], resp[4096];
    snprintf(path, sizeof path, "/v1/sessions/%s/steps", cl->session);
    for (int t = 0; ws_clock_mono_s() < cl->until; t++) {
        step_body(cl->index, t, body, sizeof body);
        double t0 = ws_clock_mono_s();
        long st = http_raw_request(&h, "POST", path, body, resp, sizeof resp);
        double dt = ws_clock_mono_s() - t0;
        if (st != 200) {
            if (cl->errors++ == 0)
                fprintf(stderr, "bench_train_serving: step: HTTP %ld: %s\n", st, resp);
            continue;
        }
        if (ws_bench_lat_push(&cl->lat, dt) != 0) break;
    }
    http_raw_close(&h);
    return NULL;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One load (a client count, training on or off) over all rounds. */
typedef struct {
    int clients, training;
    double *lat, seconds;
    long steps, errors;
    int64_t trained, dropped, updates, published;
} phase;

/* The rules that held at the last look (GET /v1/models/default). */
static char rules_holding[256];

static int model_counts(const ws_client *c, int64_t *trained, int64_t *dropped, int64_t *updates,
                        int64_t *published)
{
    ws_client_model m = {0};
    ws_client_error err = {0};
    if (ws_client_model_get(c, "default", &m, &err) != WS_CLIENT_OK) {
        fprintf(stderr, "bench_train_serving: GET /v1/models/default: %s\n", err.message);
        return -1;
    }
    *trained = m.status.examples_trained, *dropped = m.status.examples_dropped;
    *updates = m.status.updates, *published = m.gate.published;
    snprintf(rules_holding, sizeof rules_holding, "%s", m.rules_holding);
    ws_client_model_free(&m);
    return 0;
}

static int set_training(const ws_client *c, int on)
{
    ws_client_training_patch p = WS_CLIENT_TRAINING_KEEP;
    ws_client_training out;
    ws_client_error err = {0};
    p.enabled = toggle_rules ? 0 : on;
    if (toggle_rules) p.rules = on;
    if (ws_client_training_set(c, "default", &p, &out, &err) == WS_CLIENT_OK) return 0;
    fprintf(stderr, "bench_train_serving: PATCH training: %s\n", err.message);
    return -1;
}

/* One round of ph's load: `clients` new sessions for `seconds`; its step
 * latencies are added to ph's. */
static int run_round(const ws_client *c, int port, phase *ph, double seconds)
{
    int k = ph->clients;
    load_client *cl = calloc((size_t)k, sizeof *cl);
    pthread_t *th = calloc((size_t)k, sizeof *th);
    int ok = cl && th && set_training(c, ph->training) == 0;
    for (int i = 0; ok && i < k; i++) {
        ws_client_session s = {0};
        ws_client_error err = {0};
        ok = ws_client_session_create(c, NULL, &s, &err) == WS_CLIENT_OK;
        if (!ok) fprintf(stderr, "bench_train_serving: session: %s\n", err.message);
        cl[i] = (load_client){.port = port, .index = i}; /* lat grows as it fills */
        snprintf(cl[i].session, sizeof cl[i].session, "%s", s.id);
    }
    int64_t tr0 = 0, dr0 = 0, up0 = 0, pu0 = 0, tr1 = 0, dr1 = 0, up1 = 0, pu1 = 0;
    ok = ok && model_counts(c, &tr0, &dr0, &up0, &pu0) == 0;
    double t0 = ws_clock_mono_s();
    int started = 0;
    for (; ok && started < k; started++) {
        cl[started].until = t0 + seconds;
        if (pthread_create(&th[started], NULL, client_main, &cl[started]) != 0) ok = 0;
    }
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    ph->seconds += ws_clock_mono_s() - t0;
    ok = ok && model_counts(c, &tr1, &dr1, &up1, &pu1) == 0;
    long n = ph->steps;
    for (int i = 0; cl && i < k; i++) n += cl[i].lat.n, ph->errors += cl[i].errors;
    double *all = realloc(ph->lat, sizeof *all * (size_t)(n ? n : 1));
    if (all) ph->lat = all;
    for (int i = 0; all && cl && i < k; i++) {
        memcpy(all + ph->steps, cl[i].lat.v, sizeof *all * (size_t)cl[i].lat.n);
        ph->steps += cl[i].lat.n;
    }
    ph->trained += tr1 - tr0, ph->dropped += dr1 - dr0;
    ph->updates += up1 - up0, ph->published += pu1 - pu0;
    for (int i = 0; cl && i < k; i++) free(cl[i].lat.v);
    free(cl);
    free(th);
    return ok && all && ph->steps ? 0 : -1;
}

/* The q-quantile of ph's step latencies, in ms (sorts them). */
static double quantile_ms(phase *ph, double q)
{
    qsort(ph->lat, (size_t)ph->steps, sizeof *ph->lat, by_value);
    return 1e3 * ph->lat[(long)(q * (double)ph->steps)];
}

/* "1,64" into counts[]; how many. */
static int parse_clients(const char *text, int *counts, int max)
{
    int n = 0;
    for (const char *p = text; *p && n < max;) {
        counts[n] = atoi(p);
        if (counts[n] < 1 || counts[n] > 1024) return -1;
        n++;
        p = strchr(p, ',');
        if (!p) break;
        p++;
    }
    return n;
}

int main(int argc, char **argv)
{
    double seconds = 5;
    int counts[MAX_PHASES / 2] = {1, 64}, n_counts = 2, rounds = 3;
    const char *priority = "low";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
            seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--clients") && i + 1 < argc)
            n_counts = parse_clients(argv[++i], counts, MAX_PHASES / 2);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--train-priority") && i + 1 < argc)
            priority = argv[++i];
        else if (!strcmp(argv[i], "--toggle") && i + 1 < argc && !strcmp(argv[i + 1], "rules"))
            toggle_rules = 1, i++;
        else if (!strcmp(argv[i], "--toggle") && i + 1 < argc && !strcmp(argv[i + 1], "enabled"))
            toggle_rules = 0, i++;
        else
            n_counts = -1;
        if (n_counts < 1 || seconds <= 0 || rounds < 1) {
            fprintf(stderr, "usage: bench_train_serving [--seconds S] [--rounds R] "
                            "[--clients 1,64] [--train-priority low|idle|normal] "
                            "[--toggle enabled|rules]\n");
            return 2;
        }
    }
    char base[] = "/tmp/ws_bench_train_XXXXXX", dir[300];
    if (!mkdtemp(base)) return perror("mkdtemp"), 1;
    snprintf(dir, sizeof dir, "%s/data", base);
    daemon_proc d;
    /* a connection per step and client (the C client library): all from one address */
    const char *flags[] = {"--threads", "4", "--max-connections-per-ip", "4096",
                           "--train-priority", priority, NULL};
    if (daemon_start(&d, WS_DAEMON_PATH, dir, flags) != 0) {
        fprintf(stderr, "bench_train_serving: the daemon did not start (log: %s.log)\n", dir);
        return 1;
    }
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", d.port);
    ws_client_config cc = ws_client_config_default();
    cc.url = url;
    cc.retries = 0;
    ws_client *c = NULL;
    ws_client_error err = {0};
    if (ws_client_new(&cc, &c, &err) != WS_CLIENT_OK) {
        daemon_stop(&d);
        return 1;
    }
    phase ph[MAX_PHASES] = {0};
    int n = 2 * n_counts, failed = 0;
    for (int i = 0; i < n; i++) ph[i].clients = counts[i / 2], ph[i].training = i % 2;
    /* off and on alternate, round after round, so that a machine whose load
     * changes meanwhile weighs on both alike */
    for (int i = 0; i < n && !failed; i += 2)
        for (int r = 0; r < rounds && !failed; r++)
            failed = run_round(c, d.port, &ph[i], seconds) != 0 ||
                     run_round(c, d.port, &ph[i + 1], seconds) != 0;
    ws_client_free(c);
    daemon_stop(&d);
    if (failed) {
        fprintf(stderr, "bench_train_serving: a load failed (daemon log: %s.log)\n", dir);
        return 1;
    }
    tmp_dir_remove("bench_train_serving", base);
    const char *setting = toggle_rules ? "rules" : "training";
    printf("default model, steps of %d instructions + %d queries with labels, %d rounds of %.0f s "
           "per load, %s off and on alternating%s, --train-priority %s\n",
           N_INSTR, N_QUERY, rounds, seconds, setting,
           toggle_rules ? " (the network's training off)" : "", priority);
    double p50[MAX_PHASES], p99[MAX_PHASES], rate[MAX_PHASES];
    for (int i = 0; i < n; i++) {
        p50[i] = quantile_ms(&ph[i], 0.5), p99[i] = quantile_ms(&ph[i], 0.99);
        rate[i] = (double)ph[i].steps / ph[i].seconds;
    }
    printf("%8s %9s %9s %9s %9s %14s %9s %8s %10s\n", "clients", setting, "p50 ms", "p99 ms",
           "steps/s", "trained ex/s", "dropped", "updates", "published");
    for (int i = 0; i < n; i++)
        printf("%8d %9s %9.2f %9.2f %9.1f %14.1f %9lld %8lld %10lld\n", ph[i].clients,
               ph[i].training ? "on" : "off", p50[i], p99[i], rate[i],
               (double)ph[i].trained / ph[i].seconds, (long long)ph[i].dropped,
               (long long)ph[i].updates, (long long)ph[i].published);
    if (toggle_rules)
        printf("rules that hold at the end: %s\n", *rules_holding ? rules_holding : "none");
    printf("on / off: ");
    for (int i = 0; i + 1 < n; i += 2)
        printf("%s%d client%s p50 %.2fx, p99 %.2fx, steps/s %.2fx", i ? "; " : "", ph[i].clients,
               ph[i].clients == 1 ? "" : "s", p50[i + 1] / p50[i], p99[i + 1] / p99[i],
               rate[i + 1] / rate[i]);
    printf("%s\n{\"bench\":\"train_serving\",\"seconds\":%.0f,"
           "\"rounds\":%d,\"train_priority\":\"%s\",\"toggle\":\"%s\",\"loads\":[",
           toggle_rules ? "" : " (target: p50 and p99 within 1.20x)", seconds, rounds, priority,
           toggle_rules ? "rules" : "enabled");
    for (int i = 0; i < n; i++)
        printf("%s{\"clients\":%d,\"on\":%s,\"p50_ms\":%.3f,\"p99_ms\":%.3f,"
               "\"steps_per_s\":%.1f,\"errors\":%ld,\"trained_per_s\":%.1f,\"dropped\":%lld,"
               "\"updates\":%lld,\"published\":%lld}",
               i ? "," : "", ph[i].clients, ph[i].training ? "true" : "false", p50[i], p99[i],
               rate[i], ph[i].errors, (double)ph[i].trained / ph[i].seconds,
               (long long)ph[i].dropped, (long long)ph[i].updates, (long long)ph[i].published);
    printf("]}\n");
    for (int i = 0; i < n; i++) free(ph[i].lat);
    return 0;
}
