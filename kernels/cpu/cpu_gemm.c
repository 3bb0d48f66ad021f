/* cpu_gemm.c — matrix products on OpenBLAS, split across OpenMP threads. */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

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
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
        for (int b = 0; b < g->batch; b++) sgemm_rows(g, b, 0, g->m);
        return WS_OK;
    }
    int chunks = row_chunks(g->m, threads);
    for (int b = 0; b < g->batch; b++) {
#pragma omp parallel for num_threads(chunks)
        for (int t = 0; t < chunks; t++) {
            int i0 = (int)((long)g->m * t / chunks), i1 = (int)((long)g->m * (t + 1) / chunks);
            sgemm_rows(g, b, i0, i1);
        }
    }
    return WS_OK;
}

ws_status ws_cpu_linear_backward(ws_backend *be, float *din, float *dw, float *dbias,
                                 const float *dout, const float *in, const float *w, int n,
                                 int in_dim, int out_dim)
{
    if (n <= 0) return WS_OK;
    int threads = ws_cpu_threads(be);
    if (din) {
        /* din[n, in] += dout[n, out] · W[out, in], split over rows of din */
        ws_gemm_args g = {.m = n, .n = in_dim, .k = out_dim, .alpha = 1.0f, .beta = 1.0f,
                          .a = dout, .lda = out_dim, .b = w, .ldb = in_dim,
                          .c = din, .ldc = in_dim, .batch = 1};
        WS_TRY(ws_cpu_gemm(be, &g));
    }
    if (dw) {
        /* dW[out, in] += doutᵀ · in, split over rows of dW */
        ws_gemm_args g = {.trans_a = 1, .m = out_dim, .n = in_dim, .k = n, .alpha = 1.0f,
                          .beta = 1.0f, .a = dout, .lda = out_dim, .b = in, .ldb = in_dim,
                          .c = dw, .ldc = in_dim, .batch = 1};
        WS_TRY(ws_cpu_gemm(be, &g));
    }
    if (dbias) {
        /* Column sums, row by row so memory is read in order; threads own columns. */
        int chunks = out_dim >= 256 ? threads : 1;
#pragma omp parallel for num_threads(chunks)
        for (int t = 0; t < chunks; t++) {
            int o0 = out_dim * t / chunks, o1 = out_dim * (t + 1) / chunks;
            for (int r = 0; r < n; r++) {
                const float *row = dout + (long)r * out_dim;
                for (int o = o0; o < o1; o++) dbias[o] += row[o];
            }
        }
    }
    return WS_OK;
}
