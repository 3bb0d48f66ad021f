/* cpu_linear.c — the linear layer's forward pass, row-deterministic.
 *
 * out[r] = W·in[r] + b must not depend on which other rows share the call: a
 * session's rows are computed alone when it steps by itself and among other
 * sessions' rows in a batch, and replaying its log must reproduce its stored
 * state bit for bit. BLAS sgemm does not promise that: OpenBLAS picks kernels
 * by call shape and CPU, and on some (an AVX-512 Xeon with 0.3.21) a row's
 * result depends on its position inside a 64-row call. So the forward pass is
 * this small kernel: every output element is Σ_k in[r,k]·W[o,k] summed in k
 * order from 0 by the same instructions (tail rows and columns go through
 * padded tiles, never through other code), then + b. The vector type lets the
 * compiler use the widest SIMD -march allows (AVX-512: one register per vector),
 * and contraction into FMA is the same for every element. On the SSE2 baseline of
 * a portable build these vectors spill: the tile is built per x86-64 level there
 * (WS_CPU_CLONES). */
#include <omp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"

#define LIN_ROWS 8  /* rows per tile */
#define LIN_VEC 16  /* floats per vector */
#define LIN_COLS 32 /* columns per tile: two vectors */

typedef float lin_vec __attribute__((vector_size(LIN_VEC * sizeof(float)), aligned(4)));

/* One LIN_ROWS x LIN_COLS tile: x rows (stride ldx), wt [in_dim][ldw] (transposed W,
 * zero-padded columns), into y rows (stride ldy), every column of the tile. The
 * accumulators are named, not an array, so that they stay in registers: 16 chains
 * of multiply-adds in flight, two loads of W per eight broadcasts of x. */
WS_CPU_CLONES static void tile(float *y, int ldy, const float *x, int ldx, const float *wt,
                               int ldw, const float *bias, int in_dim)
{
    const float *x0 = x, *x1 = x + ldx, *x2 = x + 2L * ldx, *x3 = x + 3L * ldx;
    const float *x4 = x + 4L * ldx, *x5 = x + 5L * ldx, *x6 = x + 6L * ldx, *x7 = x + 7L * ldx;
    lin_vec a00 = {0}, a01 = {0}, a10 = {0}, a11 = {0}, a20 = {0}, a21 = {0}, a30 = {0},
            a31 = {0}, a40 = {0}, a41 = {0}, a50 = {0}, a51 = {0}, a60 = {0}, a61 = {0},
            a70 = {0}, a71 = {0};
    for (int k = 0; k < in_dim; k++) {
        lin_vec w0 = *(const lin_vec *)(wt + (long)k * ldw);
        lin_vec w1 = *(const lin_vec *)(wt + (long)k * ldw + LIN_VEC);
        a00 += x0[k] * w0, a01 += x0[k] * w1;
        a10 += x1[k] * w0, a11 += x1[k] * w1;
        a20 += x2[k] * w0, a21 += x2[k] * w1;
        a30 += x3[k] * w0, a31 += x3[k] * w1;
        a40 += x4[k] * w0, a41 += x4[k] * w1;
        a50 += x5[k] * w0, a51 += x5[k] * w1;
        a60 += x6[k] * w0, a61 += x6[k] * w1;
        a70 += x7[k] * w0, a71 += x7[k] * w1;
    }
    lin_vec b0 = {0}, b1 = {0};
    if (bias) b0 = *(const lin_vec *)bias, b1 = *(const lin_vec *)(bias + LIN_VEC);
    lin_vec out[LIN_ROWS][2] = {{a00 + b0, a01 + b1}, {a10 + b0, a11 + b1},
                                {a20 + b0, a21 + b1}, {a30 + b0, a31 + b1},
                                {a40 + b0, a41 + b1}, {a50 + b0, a51 + b1},
                                {a60 + b0, a61 + b1}, {a70 + b0, a71 + b1}};
    for (int r = 0; r < LIN_ROWS; r++) memcpy(y + (long)r * ldy, out[r], sizeof out[r]);
}

/* W transposed and zero-padded to ldw columns ([in_dim][ldw]), then the padded
 * bias: what the tiles read. Packing costs as much as the products of a few
 * rows, so packs are kept while W and the bias are unchanged: one table for
 * every CPU backend (their memory is one, and a test writes through one backend
 * what another reads), under a lock (the engine's and the training thread's
 * backends run at once). A pack is freed only when its weights are written or
 * freed, which no thread does while another computes with them; when the table
 * is full, weights are packed into the caller's scratch for each call. */
typedef struct {
    const float *w, *bias;
    int in_dim, out_dim;
    float *wt;
    size_t floats;
} lin_pack;

#define LIN_PACKS      256
#define LIN_PACK_FLOATS ((size_t)16 << 20) /* 64 MB */

static pthread_mutex_t packs_lock = PTHREAD_MUTEX_INITIALIZER;
static lin_pack packs[LIN_PACKS];
static int n_packs;
static size_t pack_floats;

static void pack(float *wt, const float *w, const float *bias, int in_dim, int out_dim, int ldw)
{
    /* in blocks of LIN_VEC rows of W: each of them is read in order, a line at a time */
    for (int o0 = 0; o0 < ldw; o0 += LIN_VEC)
        for (int k = 0; k < in_dim; k++) {
            float *row = wt + (long)k * ldw + o0;
            for (int o = 0; o < LIN_VEC; o++)
                row[o] = o0 + o < out_dim ? w[(long)(o0 + o) * in_dim + k] : 0.0f;
        }
    float *bpad = wt + (size_t)in_dim * ldw;
    memset(bpad, 0, (size_t)ldw * sizeof *bpad);
    if (bias) memcpy(bpad, bias, (size_t)out_dim * sizeof *bpad);
}

/* The pack of (w, bias): a kept one, a new one kept, or (table full, or no
 * memory) one packed into scratch. */
static const float *pack_of(float *scratch, const float *w, const float *bias, int in_dim,
                            int out_dim, int ldw)
{
    size_t floats = (size_t)(in_dim + 1) * ldw;
    pthread_mutex_lock(&packs_lock);
    for (int i = 0; i < n_packs; i++) {
        const lin_pack *p = &packs[i];
        if (p->w == w && p->bias == bias && p->in_dim == in_dim && p->out_dim == out_dim) {
            pthread_mutex_unlock(&packs_lock);
            return p->wt;
        }
    }
    float *wt = NULL;
    if (n_packs < LIN_PACKS && pack_floats + floats <= LIN_PACK_FLOATS &&
        (wt = malloc(floats * sizeof *wt))) {
        pack(wt, w, bias, in_dim, out_dim, ldw);
        packs[n_packs++] = (lin_pack){.w = w, .bias = bias, .in_dim = in_dim,
                                      .out_dim = out_dim, .wt = wt, .floats = floats};
        pack_floats += floats;
    }
    pthread_mutex_unlock(&packs_lock);
    if (wt) return wt;
    pack(scratch, w, bias, in_dim, out_dim, ldw);
    return scratch;
}

static int overlaps(const void *a, size_t a_bytes, const void *b, size_t b_bytes)
{
    uintptr_t a0 = (uintptr_t)a, b0 = (uintptr_t)b;
    return a0 < b0 + b_bytes && b0 < a0 + a_bytes;
}

void ws_cpu_packs_forget(const void *p, size_t bytes)
{
    pthread_mutex_lock(&packs_lock);
    for (int i = 0; i < n_packs;) {
        lin_pack *k = &packs[i];
        if (!overlaps(p, bytes, k->w, (size_t)k->in_dim * k->out_dim * sizeof(float)) &&
            !(k->bias && overlaps(p, bytes, k->bias, (size_t)k->out_dim * sizeof(float)))) {
            i++;
            continue;
        }
        pack_floats -= k->floats;
        free(k->wt);
        *k = packs[--n_packs];
    }
    pthread_mutex_unlock(&packs_lock);
}

ws_status ws_cpu_linear_forward(ws_backend *be, float *out, const float *in, const float *w,
                                const float *bias, int n, int in_dim, int out_dim)
{
    if (n <= 0) return WS_OK;
    int ldw = (out_dim + LIN_COLS - 1) / LIN_COLS * LIN_COLS;
    int row_tiles = (n + LIN_ROWS - 1) / LIN_ROWS, col_tiles = ldw / LIN_COLS;
    int threads = ws_cpu_threads(be);
    /* scratch: per thread one padded input tile and one output tile for the edges,
     * then room for a pack should the table be full */
    size_t edge_n = (size_t)LIN_ROWS * (in_dim + LIN_COLS);
    float *edges = ws_cpu_scratch(be, edge_n * threads + (size_t)(in_dim + 1) * ldw);
    if (!edges) return WS_ERR_NOMEM;
    const float *wt = pack_of(edges + edge_n * threads, w, bias, in_dim, out_dim, ldw);
    const float *bpad = wt + (size_t)in_dim * ldw;
    int chunks = row_tiles < threads * 4 ? (row_tiles + 3) / 4 : threads;
    if (chunks > threads) chunks = threads;
#pragma omp parallel for num_threads(chunks) schedule(static)
    for (int rt = 0; rt < row_tiles; rt++) {
        float *xin = edges + edge_n * (size_t)omp_get_thread_num();
        float *yout = xin + LIN_ROWS * in_dim;
        int r0 = rt * LIN_ROWS, rows = n - r0 < LIN_ROWS ? n - r0 : LIN_ROWS;
        const float *x = in + (long)r0 * in_dim;
        if (rows < LIN_ROWS) { /* the last rows, zero-padded */
            memcpy(xin, x, (size_t)rows * in_dim * sizeof *xin);
            memset(xin + (size_t)rows * in_dim, 0,
                   (size_t)(LIN_ROWS - rows) * in_dim * sizeof *xin);
            x = xin;
        }
        for (int ct = 0; ct < col_tiles; ct++) {
            int c0 = ct * LIN_COLS, cols = out_dim - c0 < LIN_COLS ? out_dim - c0 : LIN_COLS;
            const float *b = bias ? bpad + c0 : NULL;
            if (rows == LIN_ROWS && cols == LIN_COLS) {
                tile(out + (long)r0 * out_dim + c0, out_dim, x, in_dim, wt + c0, ldw, b, in_dim);
                continue;
            }
            tile(yout, LIN_COLS, x, in_dim, wt + c0, ldw, b, in_dim);
            for (int r = 0; r < rows; r++)
                memcpy(out + (long)(r0 + r) * out_dim + c0, yout + (long)r * LIN_COLS,
                       (size_t)cols * sizeof *out);
        }
    }
    return WS_OK;
}
