/* metrics.c — Prometheus text exposition: requests by route and status,
 * request latency histogram, engine batch sizes, steps, queries, training
 * updates; the engine adds queue depth and model versions. Counters are
 * process-wide atomics: cheap on every request, no locks. */
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

static atomic_llong requests[WS_ROUTE_LABELS][N_STATUS + 1]; /* last column: any other status */
static atomic_llong lat_bucket[N_LAT + 1];
static atomic_llong lat_sum_us;
static atomic_llong batch_bucket[N_BATCH + 1], batch_count, batch_jobs;
static atomic_llong steps_total, queries_total, train_updates;

void ws_metrics_request(int label, int status, double seconds)
{
    int si = 0;
    while (si < N_STATUS && statuses[si] != status) si++;
    if (label < 0 || label >= WS_ROUTE_LABELS) label = WS_ROUTE_LABELS - 1;
    atomic_fetch_add(&requests[label][si], 1);
    int b = 0;
    while (b < N_LAT && seconds > lat_bounds[b]) b++;
    atomic_fetch_add(&lat_bucket[b], 1);
    atomic_fetch_add(&lat_sum_us, (long long)(seconds * 1e6));
}

void ws_metrics_batch(int n_jobs, int n_steps, int n_queries)
{
    int b = 0;
    while (b < N_BATCH && n_jobs > batch_bounds[b]) b++;
    atomic_fetch_add(&batch_bucket[b], 1);
    atomic_fetch_add(&batch_count, 1);
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

/* The per-model series: name, type, and the value of one model (NAN: no
 * sample for that model, e.g. a probe accuracy not measured yet). */
typedef struct {
    const char *name, *type;
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
static double m_probe(const ws_engine_model_info *m)
{
    return m->gate.served.probe >= 0 ? m->gate.served.probe : NAN;
}
static double m_gate_seconds(const ws_engine_model_info *m)
{
    return m->gate.has_last ? m->gate.last.ms / 1000.0 : NAN;
}

static const model_series series[] = {
    {"model_version", "gauge", m_version},
    {"model_unloadable_version", "gauge", m_unloadable},
    {"training_examples_ready", "gauge", m_ready},
    {"training_examples_trained_total", "counter", m_trained},
    {"training_examples_dropped_total", "counter", m_dropped},
    {"training_examples_self_supervised_total", "counter", m_self},
    {"gate_published_total", "counter", m_published},
    {"gate_rejected_total", "counter", m_rejected},
    {"gate_served_probe_accuracy", "gauge", m_probe},
    {"gate_last_seconds", "gauge", m_gate_seconds},
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
    ws_metrics_printf(buf, len, cap,
                      "# TYPE worldstate_queue_depth gauge\nworldstate_queue_depth %d\n",
                      ws_engine_queue_depth(e));
    for (size_t i = 0; i < sizeof series / sizeof series[0]; i++) {
        model_lines l = {buf, len, cap, &series[i]};
        ws_metrics_printf(buf, len, cap, "# TYPE worldstate_%s %s\n", series[i].name,
                          series[i].type);
        ws_engine_models_each(e, model_line, &l);
    }
}

struct MHD_Response *ws_metrics_render(ws_srv *srv)
{
    size_t cap = 8192, len = 0;
    char *buf = malloc(cap);
    if (buf) buf[0] = '\0';
    ws_metrics_printf(&buf, &len, &cap,
                      "# TYPE worldstate_build_info gauge\n"
                      "worldstate_build_info{version=\"%s\",git=\"%s\",backend=\"%s\"} 1\n",
                      ws_version(), ws_version_git(),
                      srv->engine ? ws_engine_backend_name(srv->engine) : "none");
    ws_metrics_printf(&buf, &len, &cap, "# TYPE worldstate_http_requests_total counter\n");
    for (int r = 0; r < WS_ROUTE_LABELS; r++)
        for (int s = 0; s <= N_STATUS; s++) {
            long long v = atomic_load(&requests[r][s]);
            if (!v) continue;
            if (s < N_STATUS)
                ws_metrics_printf(
                    &buf, &len, &cap,
                    "worldstate_http_requests_total{route=\"%s\",status=\"%d\"} %lld\n",
                    ws_route_label_name(r), statuses[s], v);
            else
                ws_metrics_printf(
                    &buf, &len, &cap,
                    "worldstate_http_requests_total{route=\"%s\",status=\"other\"} %lld\n",
                    ws_route_label_name(r), v);
        }
    ws_metrics_printf(&buf, &len, &cap, "# TYPE worldstate_http_request_seconds histogram\n");
    long long cum = 0;
    for (int b = 0; b <= N_LAT; b++) {
        cum += atomic_load(&lat_bucket[b]);
        if (b < N_LAT)
            ws_metrics_printf(&buf, &len, &cap,
                              "worldstate_http_request_seconds_bucket{le=\"%g\"} %lld\n",
                              lat_bounds[b], cum);
        else
            ws_metrics_printf(&buf, &len, &cap,
                              "worldstate_http_request_seconds_bucket{le=\"+Inf\"} %lld\n", cum);
    }
    ws_metrics_printf(
        &buf, &len, &cap,
        "worldstate_http_request_seconds_sum %.6f\nworldstate_http_request_seconds_count %lld\n",
        (double)atomic_load(&lat_sum_us) * 1e-6, cum);
    ws_metrics_printf(&buf, &len, &cap, "# TYPE worldstate_batch_jobs histogram\n");
    cum = 0;
    for (int b = 0; b <= N_BATCH; b++) {
        cum += atomic_load(&batch_bucket[b]);
        if (b < N_BATCH)
            ws_metrics_printf(&buf, &len, &cap, "worldstate_batch_jobs_bucket{le=\"%d\"} %lld\n",
                              batch_bounds[b], cum);
        else
            ws_metrics_printf(&buf, &len, &cap, "worldstate_batch_jobs_bucket{le=\"+Inf\"} %lld\n",
                              cum);
    }
    ws_metrics_printf(&buf, &len, &cap,
                      "worldstate_batch_jobs_sum %lld\nworldstate_batch_jobs_count %lld\n",
                      (long long)atomic_load(&batch_jobs), (long long)atomic_load(&batch_count));
    ws_metrics_printf(&buf, &len, &cap,
                      "# TYPE worldstate_steps_total counter\nworldstate_steps_total %lld\n"
                      "# TYPE worldstate_queries_total counter\nworldstate_queries_total %lld\n"
                      "# TYPE worldstate_training_updates_total "
                      "counter\nworldstate_training_updates_total %lld\n",
                      (long long)atomic_load(&steps_total), (long long)atomic_load(&queries_total),
                      (long long)atomic_load(&train_updates));
    if (srv->engine) engine_metrics(srv->engine, &buf, &len, &cap);
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
