/* cpu_symcode.c — symbol codes (kernels/symcode.h), kept once computed.
 *
 * A code costs d/2 log/sqrt/sincos in double precision, and a session's symbols
 * recur step after step: computing them took about a tenth of a serving step.
 * The backend keeps the codes it computed in a set-associative table keyed by
 * hash (WS_CPU_CODES entries of d floats in sets of WS_CPU_CODE_WAYS, the way
 * unused longest replaced; grow-only scratch like the rest). A code is
 * a pure function of its hash, so a kept one is the same floats, added in the
 * same order: results are unchanged, bit for bit. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/symcode.h"
#include "cpu_internal.h"
#include "cpu_par.h"

/* The whole code of h, element e at code[e]. */
static void code_of(uint64_t h, int d, float *code)
{
    for (int e = 0; e < d; e += 2) {
        float g0, g1;
        ws_sym_code_pair(h, e / 2, &g0, &g1);
        code[e] = g0;
        if (e + 1 < d) code[e + 1] = g1;
    }
}

/* y[c - shift mod d] += code[c] for every c, in two runs without the wrap, as
 * vectors (y and code never overlap): one loop with a select per element was
 * scalar, 3% of a serving pass. Each element gets one addition. */
static void add_rolled(float *restrict y, const float *restrict code, int d, int shift)
{
#pragma omp simd
    for (int c = shift; c < d; c++) y[c - shift] += code[c];
#pragma omp simd
    for (int c = 0; c < shift; c++) y[c - shift + d] += code[c];
}

/* The table for width d (emptied when d changes); WS_ERR_NOMEM if it cannot be had. */
static ws_status table_for(ws_cpu *cpu, int d)
{
    if (cpu->codes && cpu->code_d == d) return WS_OK;
    free(cpu->codes), free(cpu->code_tag), free(cpu->code_stamp);
    cpu->codes = malloc(sizeof(float) * WS_CPU_CODES * (size_t)d);
    cpu->code_tag = calloc(WS_CPU_CODES, sizeof *cpu->code_tag); /* 0: no symbol, empty */
    cpu->code_stamp = calloc(WS_CPU_CODES, sizeof *cpu->code_stamp);
    cpu->code_d = d;
    if (cpu->codes && cpu->code_tag && cpu->code_stamp) return WS_OK;
    free(cpu->codes), free(cpu->code_tag), free(cpu->code_stamp);
    cpu->codes = NULL, cpu->code_tag = NULL, cpu->code_stamp = NULL;
    return WS_ERR_NOMEM;
}

/* The entry for h in its set of WS_CPU_CODE_WAYS: the one holding h, else the
 * way unused longest (empty ways first) that this call (stamp) has not used;
 * -1 when the call uses every way of the set. Direct-mapped (one way), the
 * table lost about 4 in 10 of a 64-session batch's 2,000 symbols to collisions
 * on every pass (1 - e^(-2000/4096)), each computed again. */
static int32_t code_entry(const ws_cpu *cpu, uint64_t h, uint32_t stamp)
{
    uint32_t first = (uint32_t)(h & (WS_CPU_CODES / WS_CPU_CODE_WAYS - 1)) * WS_CPU_CODE_WAYS;
    int32_t victim = -1;
    uint32_t oldest = 0;
    for (uint32_t w = first; w < first + WS_CPU_CODE_WAYS; w++) {
        if (cpu->code_tag[w] == h) return (int32_t)w;
        if (cpu->code_stamp[w] == stamp && cpu->code_tag[w]) continue; /* this call's */
        uint32_t age = cpu->code_tag[w] ? stamp - cpu->code_stamp[w] : UINT32_MAX;
        if (victim < 0 || age > oldest) victim = (int32_t)w, oldest = age;
    }
    return victim;
}

ws_status ws_cpu_symcode_forward(ws_backend *be, float *out, const uint64_t *hashes, int n_rows,
                                 int k, int d, int accumulate)
{
    ws_cpu *cpu = be->impl;
    size_t n = (size_t)n_rows * k;
    WS_TRY(table_for(cpu, d));
    int threads = ws_cpu_threads(be);
    /* the entry of each symbol, then one code per thread for those computed here */
    float *scratch = ws_cpu_scratch(be, n + (size_t)threads * d);
    if (!scratch) return WS_ERR_NOMEM;
    int32_t *slot = (int32_t *)scratch;
    float *own_codes = scratch + n;
    /* Where each symbol's code is, filled in by this thread before the rows are
     * summed in parallel. A symbol whose set this call's symbols fill already
     * is computed where it is used (-1), so that no code a row needs is
     * replaced while the call runs. */
    uint32_t stamp = ++cpu->code_calls ? cpu->code_calls : ++cpu->code_calls;
    for (size_t i = 0; i < n; i++) {
        uint64_t h = hashes[i];
        slot[i] = -1;
        if (!h) continue;
        int32_t e = code_entry(cpu, h, stamp);
        if (e < 0) continue;
        if (cpu->code_tag[e] != h) {
            code_of(h, d, cpu->codes + (size_t)e * d);
            cpu->code_tag[e] = h;
        }
        cpu->code_stamp[e] = stamp;
        slot[i] = e;
    }
    /* A column sums the slots in order, as on CUDA; slot j's code is rolled by j. */
    WS_CPU_FOR(n_rows >= 64 ? threads : 1, , for (int r = 0; r < n_rows; r++) {
        float *y = out + (long)r * d, *own = own_codes + (size_t)omp_get_thread_num() * d;
        if (!accumulate) memset(y, 0, (size_t)d * sizeof *y);
        for (int j = 0; j < k; j++) {
            uint64_t h = hashes[(long)r * k + j];
            if (!h) continue;
            const float *code = own;
            int32_t e = slot[(long)r * k + j];
            if (e >= 0) code = cpu->codes + (size_t)e * d;
            else code_of(h, d, own);
            add_rolled(y, code, d, j % d);
        }
    });
    return WS_OK;
}
