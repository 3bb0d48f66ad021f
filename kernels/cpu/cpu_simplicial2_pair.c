/* cpu_simplicial2_pair.c — the pair values of 2-simplicial attention,
 * T_jk = B_h(u_j ⊗ u_k) (mixer_ops_simplicial2.h), and their backward.
 *
 * B_h [δ, δ·δ] (in-index r·δ + s) read as a [δ², δ] matrix Bm (row q·δ + r,
 * column s) lets one product contract the second slot of every key at once:
 * Ũ_k[q][r] = Σ_s B_h[q, r·δ + s] u_k[s], i.e. Ũ = U Bmᵀ [k, δ²]; then
 * T_jk = Ũ_k u_j (MIXERS.md §2.3 step 6): O(k·δ³ + k²·δ²) instead of O(k²·δ³).
 * The backward uses the same factorisation:
 *   du_j += Σ_k Ũ_kᵀ dT_jk          (u in the first slot)
 *   dŨ_k = Σ_j dT_jk ⊗ u_j,  du += dŨ Bm,  dBm += dŨᵀ U   (the second slot)
 * dB is shared by every segment: phase 1 (over segment, head) writes each
 * segment's dŨ and U rows to scratch, phase 2 sums them into dB with one product
 * per head, split over row blocks of Bm, in a fixed order — the result does not
 * depend on the thread count. */
#include <cblas.h>
#include <string.h>

#include "kernels/mixer_ops_simplicial2.h"
#include "cpu_internal.h"
#include "cpu_par.h"
#include "cpu_simplicial2.h"

/* Ũ [k, δ²] of the k keys of u (stride ldu) under head h's B. */
static void contract_second(float *ut, const float *u, int ldu, const float *bh, int k, int dl)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, k, dl * dl, dl, 1.0f, u, ldu, bh, dl,
                0.0f, ut, dl * dl);
}

static int head_width(const ws_s2_args *a) { return a->d2 / a->n_heads; }
static size_t max_keys(const ws_s2_args *a)
{
    return (size_t)(a->max_k_len > 0 ? a->max_k_len : 1);
}

static void forward_unit(const ws_s2_args *a, const void *ctx, int t, float *ut)
{
    (void)ctx;
    const ws_s2_seg *s = &a->segs[t / a->n_heads];
    int h = t % a->n_heads, k = s->k_len, dl = head_width(a);
    if (k <= 0) return;
    const float *u = a->u + (long)s->k_off * a->ldu + h * dl;
    contract_second(ut, u, a->ldu, a->b + (long)h * dl * dl * dl, k, dl);
    /* T_jk[q] = Σ_r u_j[r] Ũ_k[q][r]: for each k, the rows j·k_len + k */
    for (int kk = 0; kk < k; kk++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, k, dl, dl, 1.0f, u, a->ldu,
                    ut + (long)kk * dl * dl, dl, 0.0f,
                    a->pair + ((long)s->t_off + kk) * a->d2 + h * dl, k * a->d2);
}

ws_status ws_cpu_s2_pair_forward(ws_backend *be, const ws_s2_args *a)
{
    size_t dl = (size_t)head_width(a);
    return ws_cpu_s2_for_units(be, a, max_keys(a) * dl * dl, forward_unit, NULL);
}

/* Phase 1's shared output: per head, every segment's dŨ [kmax, δ²] and U
 * [kmax, δ] rows (zero past k_len). */
typedef struct {
    const ws_s2_grads *g;
    float *dut, *u;
} pair_shared;

static void backward_unit(const ws_s2_args *a, const void *ctx, int t, float *ut)
{
    const pair_shared *sh = ctx;
    const ws_s2_grads *g = sh->g;
    int i = t / a->n_heads, h = t % a->n_heads, dl = head_width(a);
    const ws_s2_seg *s = &a->segs[i];
    int k = s->k_len > 0 ? s->k_len : 0;
    size_t sq = (size_t)dl * dl, kmax = max_keys(a), row0 = ((size_t)h * a->n_segs + i) * kmax;
    float *dut = sh->dut + row0 * sq, *ug = sh->u + row0 * dl;
    memset(dut + (size_t)k * sq, 0, (kmax - k) * sq * sizeof *dut);
    memset(ug + (size_t)k * dl, 0, (kmax - k) * dl * sizeof *ug);
    if (k == 0) return;
    const float *u = a->u + (long)s->k_off * a->ldu + h * dl;
    const float *bh = a->b + (long)h * dl * sq;
    float *du = g->du + (long)s->k_off * a->ldu + h * dl;
    const float *gp = g->dpair + (long)s->t_off * a->d2 + h * dl;
    contract_second(ut, u, a->ldu, bh, k, dl);
    for (int kk = 0; kk < k; kk++) {
        const float *gk = gp + (long)kk * a->d2; /* dT_·k: rows j·k_len + kk */
        /* first slot: du_j[r] += Σ_q dT_jk[q] Ũ_k[q][r] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, k, dl, dl, 1.0f, gk, k * a->d2,
                    ut + (long)kk * sq, dl, 1.0f, du, a->ldu);
        /* dŨ_k[q][r] = Σ_j dT_jk[q] u_j[r] */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, dl, dl, k, 1.0f, gk, k * a->d2, u,
                    a->ldu, 0.0f, dut + (long)kk * sq, dl);
    }
    /* second slot: du_k[s] += Σ_{q,r} dŨ_k[q][r] B_h[q, r·δ + s] */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, k, dl, (int)sq, 1.0f, dut, (int)sq,
                bh, dl, 1.0f, du, a->ldu);
    for (int j = 0; j < k; j++) memcpy(ug + (size_t)j * dl, u + (long)j * a->ldu, dl * sizeof *ug);
}

ws_status ws_cpu_s2_pair_backward(ws_backend *be, const ws_s2_args *a, const ws_s2_grads *g)
{
    int dl = head_width(a), heads = a->n_heads, threads = ws_cpu_threads(be);
    size_t sq = (size_t)dl * dl, rows = (size_t)a->n_segs * max_keys(a);
    /* the shared buffers live past ws_cpu_s2_for_units' per-thread scratch */
    size_t per_thread = max_keys(a) * sq, local = (size_t)threads * per_thread;
    float *scratch = ws_cpu_scratch(be, local + (size_t)heads * rows * (sq + dl));
    if (!scratch) return WS_ERR_NOMEM;
    pair_shared sh = {g, scratch + local, scratch + local + (size_t)heads * rows * sq};
    WS_TRY(ws_cpu_s2_for_units(be, a, per_thread, backward_unit, &sh));

    /* dBm_h += dŨ_hᵀ U_h over all segments, in blocks of Bm rows */
    int block = 256, blocks = (int)((sq + block - 1) / block);
    WS_CPU_FOR(threads, schedule(dynamic, 1), for (int t = 0; t < heads * blocks; t++) {
        int h = t / blocks, r0 = (t % blocks) * block;
        int nr = (int)sq - r0 < block ? (int)sq - r0 : block;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nr, dl, (int)rows, 1.0f,
                    sh.dut + (size_t)h * rows * sq + r0, (int)sq, sh.u + (size_t)h * rows * dl,
                    dl, 1.0f, g->db + ((long)h * sq + r0) * dl, dl);
    });
    return WS_OK;
}
