/* bench_sessions.c — session creation against the number of sessions a tenant
 * already has (issue 15: creation at 100,000 sessions as fast as at 1,000).
 *
 * One SQLite database (the storage layer the daemon's engine thread calls):
 * the tenant is filled to `small` sessions, `n` creates are timed, each its own
 * transaction with a session limit set (as the daemon creates them, so the
 * limit is checked), then the tenant is filled to `large` and the same is
 * timed again. Prints the mean and p99 per create at both sizes, their ratio,
 * and one JSON line.
 *
 *   build/bench/bench_sessions [--small 1000] [--large 100000] [--n 500]
 *                              [--durability normal|full]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "storage/storage.h"
#include "base/ws_clock.h"
#include "tmp_dir.h"

#define FILL_PER_TXN 10000
#define LIMIT        (1 << 30) /* a limit that is checked but never reached */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Fills the tenant up to `to` sessions, FILL_PER_TXN per transaction. */
static ws_status fill(ws_store *st, int64_t tenant, int64_t model, int64_t to, ws_error *err)
{
    int64_t have = 0;
    char id[WS_STORE_ID_LEN + 1];
    WS_TRY(ws_store_session_count(st, tenant, &have, err));
    while (have < to) {
        WS_TRY(ws_store_begin(st, err));
        ws_status s = WS_OK;
        for (int i = 0; s == WS_OK && i < FILL_PER_TXN && have < to; i++, have++)
            s = ws_store_session_create(st, tenant, model, NULL, 0, 0, 0, 0, id, err);
        if (s != WS_OK) {
            ws_store_rollback(st, NULL);
            return s;
        }
        WS_TRY(ws_store_commit(st, err));
    }
    return WS_OK;
}

typedef struct {
    double mean_ms, p99_ms;
} timing;

/* n creates, one transaction each, the limit checked. */
static ws_status time_creates(ws_store *st, int64_t tenant, int64_t model, int n, timing *out,
                              ws_error *err)
{
    double *lat = malloc(sizeof *lat * (size_t)n), sum = 0;
    if (!lat) return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    char id[WS_STORE_ID_LEN + 1];
    ws_status s = WS_OK;
    for (int i = 0; s == WS_OK && i < n; i++) {
        double t0 = ws_clock_mono_s();
        s = ws_store_session_create(st, tenant, model, NULL, 0, 0, 0, LIMIT, id, err);
        lat[i] = 1e3 * (ws_clock_mono_s() - t0);
        sum += lat[i];
    }
    if (s == WS_OK) {
        qsort(lat, (size_t)n, sizeof *lat, cmp_double);
        out->mean_ms = sum / n;
        out->p99_ms = lat[(n * 99) / 100];
    }
    free(lat);
    return s;
}

int main(int argc, char **argv)
{
    int64_t small = 1000, large = 100000;
    int n = 500;
    const char *durability = "normal";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--small")) small = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--large")) large = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--n")) n = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--durability")) durability = argv[i + 1];
        else {
            fprintf(stderr, "usage: bench_sessions [--small N] [--large N] [--n N] [--durability normal|full]\n");
            return 2;
        }
    }
    ws_store_durability dur;
    ws_error err = {0};
    if (small < 0 || large < small || n < 1 || ws_store_durability_parse(durability, &dur, &err) != WS_OK) return 2;
    char base[] = "/tmp/ws-bench-sessions-XXXXXX", path[64];
    if (!mkdtemp(base)) return 1;
    snprintf(path, sizeof path, "%s/sessions.db", base);

    ws_store *st = NULL;
    int64_t tenant = 0, model = 0;
    timing at_small = {0}, at_large = {0};
    double t0 = ws_clock_mono_s();
    ws_status s = ws_store_open(path, dur, 1, &st, &err);
    if (s == WS_OK) s = ws_store_tenant_ensure(st, "bench", &tenant, &err);
    if (s == WS_OK) s = ws_store_model_create(st, "m", 0, "{}", NULL, &model, &err);
    if (s == WS_OK) s = fill(st, tenant, model, small, &err);
    if (s == WS_OK) s = time_creates(st, tenant, model, n, &at_small, &err);
    if (s == WS_OK) s = fill(st, tenant, model, large, &err);
    if (s == WS_OK) s = time_creates(st, tenant, model, n, &at_large, &err);
    double elapsed = ws_clock_mono_s() - t0;
    ws_store_close(st);
    tmp_dir_remove("bench_sessions", base);
    if (s != WS_OK) {
        fprintf(stderr, "bench_sessions: %s\n", err.msg);
        return 1;
    }
    double ratio = at_large.mean_ms / at_small.mean_ms;
    printf("session creation (own transaction, limit checked), %d creates per size, durability %s, %.0f s in all\n", n,
           durability, elapsed);
    printf("%-28s %10s %10s\n", "existing sessions", "mean ms", "p99 ms");
    printf("%-28lld %10.3f %10.3f\n", (long long)small, at_small.mean_ms, at_small.p99_ms);
    printf("%-28lld %10.3f %10.3f\n", (long long)large, at_large.mean_ms, at_large.p99_ms);
    printf("%-28s %10.2f\n", "ratio (large / small)", ratio);
    printf("{\"bench\":\"sessions\",\"n\":%d,\"durability\":\"%s\",\"small\":%lld,\"large\":%lld,"
           "\"small_mean_ms\":%.4f,\"small_p99_ms\":%.4f,\"large_mean_ms\":%.4f,\"large_p99_ms\":%.4f,"
           "\"ratio\":%.3f}\n",
           n, durability, (long long)small, (long long)large, at_small.mean_ms, at_small.p99_ms, at_large.mean_ms,
           at_large.p99_ms, ratio);
    return 0;
}
