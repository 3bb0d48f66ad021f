/* latencies.h — a load benchmark client's step latencies, in an array that
 * grows as it fills (bench_server, bench_cluster, bench_train_serving). */
#ifndef WS_BENCH_LATENCIES_H
#define WS_BENCH_LATENCIES_H

#include <stdlib.h>

typedef struct {
    double *v; /* seconds, n of them, room for cap */
    long n, cap;
} ws_bench_lat;

/* Appends x: 0, or -1 out of memory (x is then not kept). */
static inline int ws_bench_lat_push(ws_bench_lat *l, double x)
{
    if (l->n == l->cap) {
        long cap = l->cap ? 2 * l->cap : 1024;
        double *v = realloc(l->v, sizeof *v * (size_t)cap);
        if (!v) return -1;
        l->v = v, l->cap = cap;
    }
    l->v[l->n++] = x;
    return 0;
}

#endif
