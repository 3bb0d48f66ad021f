/* cpu_gemm.c — matrix products on OpenBLAS, split across OpenMP threads. */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"
#include "cpu_par.h"

/* Row blocks smaller than this are not worth a thread of their own. */
#define WS_MIN_ROWS_PER_THREAD 32

static void sgemm_rows(const ws_gemm_args *g, int b, int i0, int i1)
{
    const float *a = g->a + (long)b * g->stride_a;
    const float *bm = g->b + (long)b * g->stride_b;
    float *c = g->c + (long)b * g->stride_c;
    /* Rows i0..i1 of op(A): for a transposed A they are columns of the stored A. */
    const float *a_rows = g->trans_a ? a + i0 : a + (long)i0 * g->lda;
    cblas_sgemm(CblasRowMajor, g->trans_a ? CblasTrans : CblasNoTrans,
                g->trans_b ? CblasTrans : CblasNoTrans, i1 - i0, g->n, g->k, g->alpha, a_rows,
                g->lda, bm, g->ldb, g->beta, c + (long)i0 * g->ldc, g->ldc);
}

static int row_chunks(int rows, int threads)
{
    int chunks = rows / WS_MIN_ROWS_PER_THREAD;
    if (chunks > threads) chunks = threads;
    return chunks < 1 ? 1 : chunks;
}

ws_status ws_cpu_gemm(ws_backend *be, const ws_gemm_args *g)
{
    if (g->m <= 0 || g->n <= 0 || g->batch <= 0) return WS_OK;
    int threads = ws_cpu_threads(be);
    /* Batches run in parallel only when their C blocks are disjoint: with a smaller
     * stride (0 in the dA of an A shared by every batch) they accumulate into the
     * same elements and must run in order. */
    long c_span = (long)(g->m - 1) * g->ldc + g->n;
    if (g->batch >= threads && (g->batch == 1 || labs(g->stride_c) >= c_span)) {
        WS_CPU_FOR(threads, schedule(dynamic, 1),
                   for (int b = 0; b < g->batch; b++) sgemm_rows(g, b, 0, g->m););
        return WS_OK;
    }
    int chunks = row_chunks(g->m, threads);
    for (int b = 0; b < g->batch; b++) {
        WS_CPU_FOR(chunks, , for (int t = 0; t < chunks; t++) {
            int i0 = (int)((long)g->m * t / chunks), i1 = (int)((long)g->m * (t + 1) / chunks);
            sgemm_rows(g, b, i0, i1);
        });
    }
    return WS_OK;
}
