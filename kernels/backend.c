/* backend.c — what every backend shares: ops composed of others. Selection:
 * backend_plugin.c. */
#include "backend.h"

#include <stdlib.h>
#include <unistd.h>

void ws_backend_free(ws_backend *be)
{
    if (be) be->ops->destroy(be);
}

ws_status ws_gemm_backward(ws_backend *be, const ws_gemm_args *g, const float *dc, float *da,
                           float *db)
{
    if (da) {
        /* d op(A) = alpha · dC · op(B)ᵀ; stored A wants its transpose when trans_a. */
        ws_gemm_args d = {.alpha = g->alpha, .beta = 1.0f, .c = da, .ldc = g->lda,
                          .stride_c = g->stride_a, .batch = g->batch};
        if (!g->trans_a) { /* dA[m,k] = dC[m,n] · op(B)ᵀ[n,k] */
            d.m = g->m, d.n = g->k, d.k = g->n;
            d.a = dc, d.lda = g->ldc, d.stride_a = g->stride_c;
            d.b = g->b, d.ldb = g->ldb, d.stride_b = g->stride_b, d.trans_b = !g->trans_b;
        } else { /* dA[k,m] = op(B)[k,n] · dCᵀ[n,m] */
            d.m = g->k, d.n = g->m, d.k = g->n;
            d.a = g->b, d.lda = g->ldb, d.stride_a = g->stride_b, d.trans_a = g->trans_b;
            d.b = dc, d.ldb = g->ldc, d.stride_b = g->stride_c, d.trans_b = 1;
        }
        WS_TRY(be->ops->gemm(be, &d));
    }
    if (db) {
        ws_gemm_args d = {.alpha = g->alpha, .beta = 1.0f, .c = db, .ldc = g->ldb,
                          .stride_c = g->stride_b, .batch = g->batch};
        if (!g->trans_b) { /* dB[k,n] = op(A)ᵀ[k,m] · dC[m,n] */
            d.m = g->k, d.n = g->n, d.k = g->m;
            d.a = g->a, d.lda = g->lda, d.stride_a = g->stride_a, d.trans_a = !g->trans_a;
            d.b = dc, d.ldb = g->ldc, d.stride_b = g->stride_c;
        } else { /* dB[n,k] = dCᵀ[n,m] · op(A)[m,k] */
            d.m = g->n, d.n = g->k, d.k = g->m;
            d.a = dc, d.lda = g->ldc, d.stride_a = g->stride_c, d.trans_a = 1;
            d.b = g->a, d.ldb = g->lda, d.stride_b = g->stride_a, d.trans_b = g->trans_a;
        }
        WS_TRY(be->ops->gemm(be, &d));
    }
    return WS_OK;
}

void ws_backend_prefer_passive_waits(char **argv)
{
    if (getenv("OMP_WAIT_POLICY") || setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
    execv("/proc/self/exe", argv); /* returns only on failure: run on as we are */
}
