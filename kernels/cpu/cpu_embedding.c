/* cpu_embedding.c — embedding gather-sum and its scatter-add gradient. */
#include <string.h>

#include "cpu_internal.h"
#include "cpu_par.h"

/* y += e, as vectors (a row of the output and one of the table never overlap):
 * the loop inside the row loop's region was scalar, 5% of a serving pass. */
static void add_row(float *restrict y, const float *restrict e, int d)
{
#pragma omp simd
    for (int i = 0; i < d; i++) y[i] += e[i];
}

ws_status ws_cpu_embedding_forward(ws_backend *be, float *out, const float *table,
                                   const int32_t *ids, int n_rows, int k, int d, int accumulate)
{
    WS_CPU_FOR(n_rows >= 256 ? ws_cpu_threads(be) : 1, , for (int r = 0; r < n_rows; r++) {
        float *y = out + (long)r * d;
        if (!accumulate) memset(y, 0, (size_t)d * sizeof *y);
        for (int j = 0; j < k; j++) {
            int32_t id = ids[(long)r * k + j];
            if (id < 0) continue;
            add_row(y, table + (long)id * d, d);
        }
    });
    return WS_OK;
}

ws_status ws_cpu_embedding_backward(ws_backend *be, float *dtable, const float *dout,
                                    const int32_t *ids, int n_rows, int k, int d)
{
    /* Rows may share an id, so threads split the width instead of the rows. */
    int threads = d >= 64 ? ws_cpu_threads(be) : 1;
    WS_CPU_FOR(threads, , for (int t = 0; t < threads; t++) {
        int i0 = d * t / threads, i1 = d * (t + 1) / threads;
        for (int r = 0; r < n_rows; r++) {
            const float *dy = dout + (long)r * d;
            for (int j = 0; j < k; j++) {
                int32_t id = ids[(long)r * k + j];
                if (id < 0) continue;
                float *g = dtable + (long)id * d;
                for (int i = i0; i < i1; i++) g[i] += dy[i];
            }
        }
    });
    return WS_OK;
}
