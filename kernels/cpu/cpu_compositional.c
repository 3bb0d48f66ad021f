/* cpu_compositional.c — compositional attention's ops (mixer_ops_compositional.h).
 *
 * The search is the attention kernel with shared value blocks (cpu_attention.c).
 * The retrieval selection works per (row, search) on R scores: tiny dot products
 * and a softmax over R, so it is plain loops split over rows (each row reads and
 * writes only its own S·R entries, and the backward needs no atomics). */
#include <math.h>

#include "cpu_internal.h"
#include "cpu_par.h"

/* Rows below which threads cost more than they save. */
#define WS_SELECT_PAR_ROWS 64

static float dot(const float *a, const float *b, int n)
{
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* y += alpha · x */
static void axpy(float *y, float alpha, const float *x, int n)
{
#pragma omp simd
    for (int i = 0; i < n; i++) y[i] += alpha * x[i];
}

static ws_status select_forward(ws_backend *be, const ws_comp_select_args *a)
{
    int S = a->n_searches, R = a->n_retrievals;
    int threads = a->n >= WS_SELECT_PAR_ROWS ? ws_cpu_threads(be) : 1;
    WS_CPU_FOR(threads, , for (int n = 0; n < a->n; n++) {
        for (int s = 0; s < S; s++) {
            long base = ((long)n * S + s) * R;
            const float *q = a->q + (long)n * a->ldq + (long)s * a->dr;
            for (int r = 0; r < R; r++)
                a->rho[base + r] = a->scale * dot(q, a->k + (base + r) * a->dr, a->dr);
        }
        ws_cpu_softmax_rows(a->rho + (long)n * S * R, S, R, NULL, 0); /* one row per search */
        for (int s = 0; s < S; s++) {
            long base = ((long)n * S + s) * R;
            const float *rho = a->rho + base;
            float *y = a->y + (long)n * a->ldy + (long)s * a->dv;
            for (int c = 0; c < a->dv; c++) y[c] = 0.0f;
            for (int r = 0; r < R; r++) axpy(y, rho[r], a->o + (base + r) * a->dv, a->dv);
        }
    });
    return WS_OK;
}

static ws_status select_backward(ws_backend *be, const ws_comp_select_args *a,
                                 const ws_comp_select_grads *g)
{
    int S = a->n_searches, R = a->n_retrievals;
    /* ∂L/∂ρ, then in place ∂L/∂e, of every (row, search, retrieval) */
    float *de_all = ws_cpu_scratch(be, (size_t)a->n * S * R);
    if (!de_all) return WS_ERR_NOMEM;
    int threads = a->n >= WS_SELECT_PAR_ROWS ? ws_cpu_threads(be) : 1;
    WS_CPU_FOR(threads, , for (int n = 0; n < a->n; n++) {
        for (int s = 0; s < S; s++) {
            long base = ((long)n * S + s) * R;
            const float *dy = g->d_y + (long)n * a->ldy + (long)s * a->dv;
            const float *q = a->q + (long)n * a->ldq + (long)s * a->dr;
            float *dq = g->d_q + (long)n * a->ldq + (long)s * a->dr;
            const float *rho = a->rho + base;
            float *de = de_all + base;
            for (int r = 0; r < R; r++) {
                de[r] = dot(dy, a->o + (base + r) * a->dv, a->dv);
                /* the direct path: y = Σ_r ρ_r O_r */
                axpy(g->d_o + (base + r) * a->dv, rho[r], dy, a->dv);
            }
            ws_cpu_softmax_rows_backward(rho, de, 1, R, a->scale);
            for (int r = 0; r < R; r++) {
                axpy(g->d_k + (base + r) * a->dr, de[r], q, a->dr);
                axpy(dq, de[r], a->k + (base + r) * a->dr, a->dr);
            }
        }
    });
    return WS_OK;
}

const struct ws_compositional_ops ws_cpu_compositional_ops = {
    .search_forward = ws_cpu_search_forward,
    .search_backward = ws_cpu_search_backward,
    .select_forward = select_forward,
    .select_backward = select_backward,
};
