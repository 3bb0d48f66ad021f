/* metrics.c — Prometheus text exposition: requests by route and status,
 * request latency histograms (all requests, and per route pattern and
 * method), engine batch sizes, steps, queries, training updates; the engine
 * adds queue depth and model versions; the process's own from /proc
 * (metrics_process.c). Every family has its # HELP and # TYPE lines. Counters
 * are process-wide atomics: cheap on every request, no locks. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ws_version.h"
#include "routes.h"

static const int statuses[] = {200, 201, 204, 400, 401, 403, 404, 405, 409, 413, 500, 503};
#define N_STATUS ((int)(sizeof statuses / sizeof statuses[0]))
static const double lat_bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                    0.1,    0.25,  0.5,    1,     2.5,  5};
#define N_LAT ((int)(sizeof lat_bounds / sizeof lat_bounds[0]))
static const int batch_bounds[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
#define N_BATCH ((int)(sizeof batch_bounds / sizeof batch_bounds[0]))

static const char *const methods[] = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"};
#define N_METHOD ((int)(sizeof methods / sizeof methods[0]))

static atomic_llong requests[WS_ROUTE_LABELS][N_STATUS + 1]; /* last column: any other status */
static atomic_llong lat_bucket[N_LAT + 1];
static atomic_llong lat_sum_us;
/* per route pattern and method (last: any other method); the sum in µs */
static atomic_llong route_bucket[WS_ROUTE_LABELS][N_METHOD + 1][N_LAT + 1];
static atomic_llong route_sum_us[WS_ROUTE_LABELS][N_METHOD + 1];
static atomic_llong batch_bucket[N_BATCH + 1], batch_jobs;
static atomic_llong steps_total, queries_total, train_updates;

int ws_metrics_method(const char *method)
{
    int m = 0;
    while (m < N_METHOD && strcmp(methods[m], method) != 0) m++;
    return m;
}

void ws_metrics_request(int label, int pattern, int method, int status, double seconds)
{
    int si = 0;
    while (si < N_STATUS && statuses[si] != status) si++;
    if (label < 0 || label >= WS_ROUTE_LABELS) label = WS_ROUTE_LABELS - 1;
    if (pattern < 0 || pattern >= WS_ROUTE_LABELS) pattern = WS_ROUTE_LABELS - 1;
    if (method < 0 || method > N_METHOD) method = N_METHOD;
    atomic_fetch_add(&requests[label][si], 1);
    int b = 0;
    while (b < N_LAT && seconds > lat_bounds[b]) b++;
    long long us = (long long)(seconds * 1e6);
    atomic_fetch_add(&lat_bucket[b], 1);
    atomic_fetch_add(&lat_sum_us, us);
    atomic_fetch_add(&route_bucket[pattern][method][b], 1);
    atomic_fetch_add(&route_sum_us[pattern][method], us);
}

void ws_metrics_batch(int n_jobs, int n_steps, int n_queries)
{
    int b = 0;
    while (b < N_BATCH && n_jobs > batch_bounds[b]) b++;
    atomic_fetch_add(&batch_bucket[b], 1);
    atomic_fetch_add(&batch_jobs, n_jobs);
    atomic_fetch_add(&steps_total, n_steps);
    atomic_fetch_add(&queries_total, n_queries);
}

void ws_metrics_training_update(void)
{
    atomic_fetch_add(&train_updates, 1);
}

int ws_metrics_printf(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
{
    if (!*buf) return 0;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(*buf + *len, *cap - *len, fmt, ap);
        va_end(ap);
        if (n < 0) return 0;
        if ((size_t)n < *cap - *len) {
            *len += (size_t)n;
            return 1;
        }
        char *b = realloc(*buf, *cap * 2);
        if (!b) {
            free(*buf);
            *buf = NULL;
            return 0;
        }
        *buf = b;
        *cap *= 2;
    }
}

void ws_metrics_family(char **buf, size_t *len, size_t *cap, const char *name, const char *type,
                       const char *help)
{
    ws_metrics_printf(buf, len, cap, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* The per-model series: name, type, help, and the value of one model (NAN: no
 * sample for that model, e.g. a probe accuracy not measured yet). */
typedef struct {
    const char *name, *type, *help;
    double (*value)(const ws_engine_model_info *m);
} model_series;

static double m_version(const ws_engine_model_info *m)
{
    return (double)m->version;
}
static double m_unloadable(const ws_engine_model_info *m)
{
    return (double)m->unloadable;
}
static double m_ready(const ws_engine_model_info *m)
{
    return m->examples_ready;
}
static double m_trained(const ws_engine_model_info *m)
{
    return (double)m->examples_trained;
}
static double m_dropped(const ws_engine_model_info *m)
{
    return (double)m->examples_dropped;
}
static double m_self(const ws_engine_model_info *m)
{
    return (double)m->examples_self;
}
static double m_published(const ws_engine_model_info *m)
{
    return (double)m->gate.published;
}
static double m_rejected(const ws_engine_model_info *m)
{
    return (double)m->gate.rejected;
}
static double m_restored(const ws_engine_model_info *m)
{
    return (double)m->gate.restored;
}
static double m_probe(const ws_engine_model_info *m)
{
    return m->gate.served.probe >= 0 ? m->gate.served.probe : NAN;
}
static double m_gate_seconds(const ws_engine_model_info *m)
{
    return m->gate.has_last ? m->gate.last.ms / 1000.0 : NAN;
}

static const model_series series[] = {
    {"model_version", "gauge", "The model version served.", m_version},
    {"model_unloadable_version", "gauge",
     "The recorded current version when it cannot be served (0: none).", m_unloadable},
    {"training_examples_ready", "gauge",
     "Online-training examples waiting for the training thread.", m_ready},
    {"training_examples_trained_total", "counter",
     "Online-training examples trained on since the start.", m_trained},
    {"training_examples_dropped_total", "counter",
     "Online-training examples dropped unused since the start (the training thread behind).",
     m_dropped},
    {"training_examples_self_supervised_total", "counter",
     "Examples made from unlabelled steps since the start.", m_self},
    {"gate_published_total", "counter", "Candidate versions the publication gate published.",
     m_published},
    {"gate_rejected_total", "counter", "Candidate versions the publication gate rejected.",
     m_rejected},
    {"gate_restored_total", "counter",
     "Times the publication gate served the replay's anchor again (the served version trailed it).",
     m_restored},
    {"gate_served_probe_accuracy", "gauge",
     "Memory-probe accuracy of the served version (absent until measured).", m_probe},
    {"gate_last_seconds", "gauge", "Wall time of the publication gate's last evaluation.",
     m_gate_seconds},
};

typedef struct {
    char **buf;
    size_t *len, *cap;
    const model_series *s;
} model_lines;

static void model_line(void *ctx, const ws_engine_model_info *m)
{
    model_lines *l = ctx;
    double v = l->s->value(m);
    if (!isnan(v))
        ws_metrics_printf(l->buf, l->len, l->cap, "worldstate_%s{model=\"%s\"} %.17g\n", l->s->name,
                          m->name, v);
}

/* Queue depth and, per loaded model, the series above. */
static void engine_metrics(ws_engine *e, char **buf, size_t *len, size_t *cap)
{
    ws_metrics_family(buf, len, cap, "worldstate_queue_depth", "gauge",
                      "Jobs waiting in the engine queue.");
    ws_metrics_printf(buf, len, cap, "worldstate_queue_depth %d\n", ws_engine_queue_depth(e));
    ws_metrics_family(buf, len, cap, "worldstate_engine_idle_seconds_total", "counter",
                      "Time the engine thread waited with nothing to run (busy share: 1 - its "
                      "rate); online training waits while it is busy.");
    ws_metrics_printf(buf, len, cap, "worldstate_engine_idle_seconds_total %.6f\n",
                      ws_engine_idle_seconds(e));
    ws_state_cache_stats sc;
    if (ws_engine_state_cache(e, &sc)) {
        ws_metrics_family(buf, len, cap, "worldstate_state_cache_hits_total", "counter",
                          "Steps and queries that found their session's state in memory.");
        ws_metrics_printf(buf, len, cap, "worldstate_state_cache_hits_total %llu\n",
                          (unsigned long long)sc.hits);
        ws_metrics_family(buf, len, cap, "worldstate_state_cache_misses_total", "counter",
                          "Steps and queries that read their session's state from the store.");
        ws_metrics_printf(buf, len, cap, "worldstate_state_cache_misses_total %llu\n",
                          (unsigned long long)sc.misses);
        ws_metrics_family(buf, len, cap, "worldstate_state_cache_bytes", "gauge",
                          "Bytes of session states held in memory (--state-cache).");
        ws_metrics_printf(buf, len, cap, "worldstate_state_cache_bytes %zu\n", sc.bytes);
    }
    for (size_t i = 0; i < sizeof series / sizeof series[0]; i++) {
        model_lines l = {buf, len, cap, &series[i]};
        char name[96];
        snprintf(name, sizeof name, "worldstate_%s", series[i].name);
        ws_metrics_family(buf, len, cap, name, series[i].type, series[i].help);
        ws_engine_models_each(e, model_line, &l);
    }
}

/* One histogram's buckets (counts per bucket, the last +Inf), sum and count;
 * labels: "" or `k="v"` pairs, comma-separated, that go before le. */
static void histogram(char **buf, size_t *len, size_t *cap, const char *name, const char *labels,
                      atomic_llong *bucket, const double *bounds, int n, double sum)
{
    const char *sep = *labels ? "," : "";
    long long cum = 0;
    for (int b = 0; b <= n; b++) {
        cum += atomic_load(&bucket[b]);
        if (b < n)
            ws_metrics_printf(buf, len, cap, "%s_bucket{%s%sle=\"%g\"} %lld\n", name, labels, sep,
                              bounds[b], cum);
        else
            ws_metrics_printf(buf, len, cap, "%s_bucket{%s%sle=\"+Inf\"} %lld\n", name, labels, sep,
                              cum);
    }
    if (*labels)
        ws_metrics_printf(buf, len, cap, "%s_sum{%s} %.6f\n%s_count{%s} %lld\n", name, labels, sum,
                          name, labels, cum);
    else
        ws_metrics_printf(buf, len, cap, "%s_sum %.6f\n%s_count %lld\n", name, sum, name, cum);
}

static void request_metrics(char **buf, size_t *len, size_t *cap)
{
    ws_metrics_family(buf, len, cap, "worldstate_http_requests_total", "counter",
                      "HTTP requests answered, by route name and status.");
    for (int r = 0; r < WS_ROUTE_LABELS; r++)
        for (int s = 0; s <= N_STATUS; s++) {
            long long v = atomic_load(&requests[r][s]);
            if (!v) continue;
            if (s < N_STATUS)
                ws_metrics_printf(
                    buf, len, cap,
                    "worldstate_http_requests_total{route=\"%s\",status=\"%d\"} %lld\n",
                    ws_route_label_name(r), statuses[s], v);
            else
                ws_metrics_printf(
                    buf, len, cap,
                    "worldstate_http_requests_total{route=\"%s\",status=\"other\"} %lld\n",
                    ws_route_label_name(r), v);
        }
    ws_metrics_family(buf, len, cap, "worldstate_http_request_seconds", "histogram",
                      "Time from a request's arrival to its answer, all routes.");
    histogram(buf, len, cap, "worldstate_http_request_seconds", "", lat_bucket, lat_bounds, N_LAT,
              (double)atomic_load(&lat_sum_us) * 1e-6);
    ws_metrics_family(buf, len, cap, "worldstate_http_request_duration_seconds", "histogram",
                      "Time from a request's arrival to its answer, by route pattern and method.");
    for (int p = 0; p < WS_ROUTE_LABELS; p++)
        for (int m = 0; m <= N_METHOD; m++) {
            long long n = 0;
            for (int b = 0; b <= N_LAT; b++) n += atomic_load(&route_bucket[p][m][b]);
            if (!n) continue;
            char labels[160];
            snprintf(labels, sizeof labels, "route=\"%s\",method=\"%s\"", ws_route_pattern_name(p),
                     m < N_METHOD ? methods[m] : "other");
            histogram(buf, len, cap, "worldstate_http_request_duration_seconds", labels,
                      route_bucket[p][m], lat_bounds, N_LAT,
                      (double)atomic_load(&route_sum_us[p][m]) * 1e-6);
        }
}

static void engine_counters(char **buf, size_t *len, size_t *cap)
{
    ws_metrics_family(buf, len, cap, "worldstate_batch_jobs", "histogram",
                      "Jobs per engine batch.");
    double bounds[N_BATCH];
    for (int b = 0; b < N_BATCH; b++) bounds[b] = batch_bounds[b];
    histogram(buf, len, cap, "worldstate_batch_jobs", "", batch_bucket, bounds, N_BATCH,
              (double)atomic_load(&batch_jobs));
    ws_metrics_family(buf, len, cap, "worldstate_steps_total", "counter", "Steps committed.");
    ws_metrics_printf(buf, len, cap, "worldstate_steps_total %lld\n",
                      (long long)atomic_load(&steps_total));
    ws_metrics_family(buf, len, cap, "worldstate_queries_total", "counter", "Queries answered.");
    ws_metrics_printf(buf, len, cap, "worldstate_queries_total %lld\n",
                      (long long)atomic_load(&queries_total));
    ws_metrics_family(buf, len, cap, "worldstate_training_updates_total", "counter",
                      "Online-training AdamW updates taken.");
    ws_metrics_printf(buf, len, cap, "worldstate_training_updates_total %lld\n",
                      (long long)atomic_load(&train_updates));
}

struct MHD_Response *ws_metrics_render(ws_srv *srv)
{
    size_t cap = 8192, len = 0;
    char *buf = malloc(cap);
    if (buf) buf[0] = '\0';
    ws_metrics_family(&buf, &len, &cap, "worldstate_build_info", "gauge",
                      "Always 1: the labels say which build serves.");
    ws_metrics_printf(
        &buf, &len, &cap, "worldstate_build_info{version=\"%s\",git=\"%s\",backend=\"%s\"} 1\n",
        ws_version(), ws_version_git(), srv->engine ? ws_engine_backend_name(srv->engine) : "none");
    request_metrics(&buf, &len, &cap);
    engine_counters(&buf, &len, &cap);
    if (srv->engine) engine_metrics(srv->engine, &buf, &len, &cap);
    ws_metrics_process(&buf, &len, &cap);
    if (!buf) return NULL;
    struct MHD_Response *r = MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(buf);
        return NULL;
    }
    if (MHD_add_response_header(r, "Content-Type", "text/plain; version=0.0.4") != MHD_YES) {
        MHD_destroy_response(r);
        return NULL;
    }
    return r;
}
