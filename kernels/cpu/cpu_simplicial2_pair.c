/* cpu_simplicial2_pair.c — the pair values of 2-simplicial attention,
 * T_jk = B_h(u_j ⊗ u_k) (mixer_ops_simplicial2.h), and their backward.
 *
 * B_h [δ, δ·δ] is the linear map H⊗H → H with in-index r·δ + s. Contracting u_j
 * first, Ū_j[q, s] = Σ_r B_h[q, r·δ + s] u_j[r] (one δ×δ matrix per key), gives
 * T_jk = Ū_j u_k at O(k_len·δ³ + k_len²·δ²) instead of O(k_len²·δ³)
 * (MIXERS.md §2.3 step 6). The backward reuses the same factorisation:
 *   dŪ_j = Σ_k dT_jk ⊗ u_k           (then du_j and dB through Ū_j = B_h u_j)
 *   du_k += Σ_j Ū_jᵀ dT_jk           (u in the second slot)
 * dB is shared by every segment: phase 1 (over segment, head) writes each key's
 * dŪ to scratch, phase 2 (over head, output index q) sums them into dB in a
 * fixed order, so the result does not depend on the thread count. */
#include <cblas.h>
#include <omp.h>

#include "../mixer_ops_simplicial2.h"
#include "cpu_internal.h"
#include "cpu_simplicial2.h"

/* Ū[j][q][s] for the k keys of u (stride ldu) under bh = B_h: one product per q. */
static void contract_first(float *ubar, const float *u, int ldu, const float *bh, int k,
                           int dl)
{
    for (int q = 0; q < dl; q++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, k, dl, dl, 1.0f, u, ldu,
                    bh + (long)q * dl * dl, dl, 0.0f, ubar + (long)q * dl, dl * dl);
}

ws_status ws_cpu_s2_pair_forward(ws_backend *be, const ws_s2_args *a)
{
    int dl = a->d2 / a->n_heads, units = a->n_segs * a->n_heads, threads = ws_cpu_threads(be);
    size_t per_thread = (size_t)(a->max_k_len > 0 ? a->max_k_len : 1) * dl * dl;
    float *scratch = ws_cpu_scratch(be, (size_t)threads * per_thread);
    if (!scratch) return WS_ERR_NOMEM;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int t = 0; t < units; t++) {
        const ws_s2_seg *s = &a->segs[t / a->n_heads];
        int h = t % a->n_heads, k = s->k_len;
        if (k <= 0) continue;
        float *ubar = scratch + (size_t)omp_get_thread_num() * per_thread;
        const float *u = a->u + (long)s->k_off * a->ldu + h * dl;
        contract_first(ubar, u, a->ldu, a->b + (long)h * dl * dl * dl, k, dl);
        /* rows j·k .. j·k + k − 1 of T: T_jk[q] = Σ_s u_k[s] Ū_j[q][s] */
        for (int j = 0; j < k; j++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, k, dl, dl, 1.0f, u, a->ldu,
                        ubar + (long)j * dl * dl, dl, 0.0f,
                        a->pair + ((long)s->t_off + (long)j * k) * a->d2 + h * dl, a->d2);
    }
    return WS_OK;
}

ws_status ws_cpu_s2_pair_backward(ws_backend *be, const ws_s2_args *a, const ws_s2_grads *g)
{
    int dl = a->d2 / a->n_heads, heads = a->n_heads, units = a->n_segs * heads;
    int threads = ws_cpu_threads(be);
    /* dŪ of every (segment, head, key) at a fixed stride of max_k_len keys (the
     * model's segments all have the same key count), then per-thread Ū */
    size_t cube = (size_t)dl * dl, kmax = (size_t)(a->max_k_len > 0 ? a->max_k_len : 1);
    size_t shared = (size_t)units * kmax * cube, per_thread = kmax * cube;
    float *scratch = ws_cpu_scratch(be, shared + (size_t)threads * per_thread);
    if (!scratch) return WS_ERR_NOMEM;
    float *dubar_all = scratch, *ubar_all = scratch + shared;

#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int t = 0; t < units; t++) {
        const ws_s2_seg *s = &a->segs[t / heads];
        int h = t % heads, k = s->k_len;
        if (k <= 0) continue;
        float *ubar = ubar_all + (size_t)omp_get_thread_num() * per_thread;
        float *dubar = dubar_all + (size_t)t * per_thread;
        const float *u = a->u + (long)s->k_off * a->ldu + h * dl;
        const float *bh = a->b + (long)h * dl * cube;
        float *du = g->du + (long)s->k_off * a->ldu + h * dl;
        const float *gp = g->dpair + (long)s->t_off * a->d2 + h * dl;
        contract_first(ubar, u, a->ldu, bh, k, dl);
        for (int j = 0; j < k; j++) {
            const float *gj = gp + (long)j * k * a->d2; /* dT_j· [k, δ] */
            /* second slot: du_k[s] += Σ_q dT_jk[q] Ū_j[q][s] */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, k, dl, dl, 1.0f, gj, a->d2,
                        ubar + (long)j * cube, dl, 1.0f, du, a->ldu);
            /* dŪ_j[q][s] = Σ_k dT_jk[q] u_k[s] */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, dl, dl, k, 1.0f, gj, a->d2, u,
                        a->ldu, 0.0f, dubar + (long)j * cube, dl);
        }
        /* first slot: du_j[r] += Σ_{q,s} dŪ_j[q][s] B_h[q, r·δ + s] */
        for (int q = 0; q < dl; q++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, k, dl, dl, 1.0f,
                        dubar + (long)q * dl, (int)cube, bh + (long)q * cube, dl, 1.0f, du,
                        a->ldu);
    }

    /* dB_h[q, r·δ + s] += Σ_seg Σ_j u_j[r] dŪ_j[q][s] */
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int t = 0; t < heads * dl; t++) {
        int h = t / dl, q = t % dl;
        float *db = g->db + ((long)h * dl + q) * cube;
        for (int i = 0; i < a->n_segs; i++) {
            const ws_s2_seg *s = &a->segs[i];
            if (s->k_len <= 0) continue;
            const float *dubar = dubar_all + ((size_t)i * heads + h) * per_thread;
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, dl, dl, s->k_len, 1.0f,
                        a->u + (long)s->k_off * a->ldu + h * dl, a->ldu, dubar + (long)q * dl,
                        (int)cube, 1.0f, db, dl);
        }
    }
    return WS_OK;
}
