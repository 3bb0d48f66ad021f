/* cpu_linear.c — the linear layer, forward pass row-deterministic, backward on the
 * same tiles.
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
 * compiler use the widest SIMD -march allows (AVX-512: one register per vector;
 * narrower, the tile goes in quarters of half-width vectors, same bits), and
 * contraction into FMA is the same for every element. On the SSE2 baseline of a
 * portable build these vectors spill: the tile is built per x86-64 level there
 * (WS_CPU_CLONES). The backward pass's products run on the same tile, accumulating
 * into din and dW, every element in a fixed order (bit-identical at any thread
 * count). */
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"
#include "cpu_par.h"

#define LIN_ROWS 8  /* rows per tile */
#define LIN_VEC 16  /* floats per vector */
#define LIN_COLS 32 /* columns per tile: two vectors */
#define LIN_TILE ((size_t)LIN_ROWS * LIN_COLS)

typedef float lin_vec __attribute__((vector_size(LIN_VEC * sizeof(float)), aligned(4)));
typedef float lin_half __attribute__((vector_size(LIN_VEC / 2 * sizeof(float)), aligned(4)));

/* One row of a tile out: y = a + (y, accumulating; else the bias; else 0),
 * whole vectors loaded and stored where they are. Not through an array on the
 * stack: GCC copied such arrays in halves of a vector and read them back whole,
 * a store-forwarding stall per vector (a third of the forward pass's time in
 * the tile at d = 128, by perf annotate). */
static inline __attribute__((always_inline)) void
tile_row_out(float *y, lin_vec a0, lin_vec a1, const float *bias, int accumulate)
{
    lin_vec b0 = {0}, b1 = {0};
    if (accumulate) b0 = *(const lin_vec *)y, b1 = *(const lin_vec *)(y + LIN_VEC);
    else if (bias) b0 = *(const lin_vec *)bias, b1 = *(const lin_vec *)(bias + LIN_VEC);
    *(lin_vec *)y = a0 + b0;
    *(lin_vec *)(y + LIN_VEC) = a1 + b1;
}

/* tile_row_out in half-width vectors. */
static inline __attribute__((always_inline)) void
half_row_out(float *y, lin_half a0, lin_half a1, const float *bias, int accumulate)
{
    lin_half b0 = {0}, b1 = {0};
    if (accumulate) b0 = *(const lin_half *)y, b1 = *(const lin_half *)(y + LIN_VEC / 2);
    else if (bias) b0 = *(const lin_half *)bias, b1 = *(const lin_half *)(bias + LIN_VEC / 2);
    *(lin_half *)y = a0 + b0;
    *(lin_half *)(y + LIN_VEC / 2) = a1 + b1;
}

/* One LIN_ROWS x LIN_COLS tile: y[i][c] = Σ_k x_i[k·xk]·wt[k·ldw + c] + bias[c]
 * (or, accumulating, y[i][c] += the sum) for every column c of the tile, the sum in
 * order of k from 0. x_i: the tile's rows (xk: the stride along one); wt: rows of
 * at least LIN_COLS readable floats. The accumulators are named, not an array, so
 * that they stay in registers: 16 chains of multiply-adds in flight, two loads of
 * wt per eight broadcasts of x. Inlined into each caller with its constants. */
static inline __attribute__((always_inline)) void
tile_core(float *y, int ldy, const float *const *x, long xk, const float *wt, long ldw,
          const float *bias, int accumulate, int k_len)
{
    const float *x0 = x[0], *x1 = x[1], *x2 = x[2], *x3 = x[3];
    const float *x4 = x[4], *x5 = x[5], *x6 = x[6], *x7 = x[7];
    lin_vec a00 = {0}, a01 = {0}, a10 = {0}, a11 = {0}, a20 = {0}, a21 = {0}, a30 = {0},
            a31 = {0}, a40 = {0}, a41 = {0}, a50 = {0}, a51 = {0}, a60 = {0}, a61 = {0},
            a70 = {0}, a71 = {0};
    for (int k = 0; k < k_len; k++) {
        lin_vec w0 = *(const lin_vec *)(wt + k * ldw);
        lin_vec w1 = *(const lin_vec *)(wt + k * ldw + LIN_VEC);
        long e = k * xk;
        a00 += x0[e] * w0, a01 += x0[e] * w1;
        a10 += x1[e] * w0, a11 += x1[e] * w1;
        a20 += x2[e] * w0, a21 += x2[e] * w1;
        a30 += x3[e] * w0, a31 += x3[e] * w1;
        a40 += x4[e] * w0, a41 += x4[e] * w1;
        a50 += x5[e] * w0, a51 += x5[e] * w1;
        a60 += x6[e] * w0, a61 += x6[e] * w1;
        a70 += x7[e] * w0, a71 += x7[e] * w1;
    }
    tile_row_out(y, a00, a01, bias, accumulate);
    tile_row_out(y + ldy, a10, a11, bias, accumulate);
    tile_row_out(y + 2L * ldy, a20, a21, bias, accumulate);
    tile_row_out(y + 3L * ldy, a30, a31, bias, accumulate);
    tile_row_out(y + 4L * ldy, a40, a41, bias, accumulate);
    tile_row_out(y + 5L * ldy, a50, a51, bias, accumulate);
    tile_row_out(y + 6L * ldy, a60, a61, bias, accumulate);
    tile_row_out(y + 7L * ldy, a70, a71, bias, accumulate);
}

/* tile_core's sums for a quarter of the tile, LIN_ROWS / 2 rows of LIN_VEC columns
 * in vectors of half the width, each element's operations the same. On AVX2 a
 * lin_vec is two registers: the whole tile's accumulators spilled on every
 * multiply-add, and GCC splits such vectors through the stack; these 8 fit
 * (lin_half). */
static inline __attribute__((always_inline)) void
tile_quarter(float *y, int ldy, const float *const *x, long xk, const float *wt, long ldw,
             const float *bias, int accumulate, int k_len)
{
    const float *x0 = x[0], *x1 = x[1], *x2 = x[2], *x3 = x[3];
    lin_half a00 = {0}, a01 = {0}, a10 = {0}, a11 = {0}, a20 = {0}, a21 = {0}, a30 = {0},
             a31 = {0};
    for (int k = 0; k < k_len; k++) {
        lin_half w0 = *(const lin_half *)(wt + k * ldw);
        lin_half w1 = *(const lin_half *)(wt + k * ldw + LIN_VEC / 2);
        long e = k * xk;
        a00 += x0[e] * w0, a01 += x0[e] * w1;
        a10 += x1[e] * w0, a11 += x1[e] * w1;
        a20 += x2[e] * w0, a21 += x2[e] * w1;
        a30 += x3[e] * w0, a31 += x3[e] * w1;
    }
    half_row_out(y, a00, a01, bias, accumulate);
    half_row_out(y + ldy, a10, a11, bias, accumulate);
    half_row_out(y + 2L * ldy, a20, a21, bias, accumulate);
    half_row_out(y + 3L * ldy, a30, a31, bias, accumulate);
}

/* Whether the code is built for AVX-512, a vector one register: else the tile goes
 * in quarters. In a portable build the loader runs the x86-64-v4 clone of a
 * WS_CPU_CLONES function where the CPU has AVX-512. Both paths give the same bits. */
#if defined(__AVX512F__)
#define LIN_WHOLE_TILE() 1
#elif defined(__x86_64__) && !defined(__AVX2__)
#define LIN_WHOLE_TILE() __builtin_cpu_supports("avx512f")
#else
#define LIN_WHOLE_TILE() 0
#endif

static inline __attribute__((always_inline)) void
tile_any(float *y, int ldy, const float *const *x, long xk, const float *wt, long ldw,
         const float *bias, int accumulate, int k_len)
{
    if (LIN_WHOLE_TILE()) {
        tile_core(y, ldy, x, xk, wt, ldw, bias, accumulate, k_len);
        return;
    }
    for (int r = 0; r < LIN_ROWS; r += LIN_ROWS / 2)
        for (int c = 0; c < LIN_COLS; c += LIN_VEC)
            tile_quarter(y + (long)r * ldy + c, ldy, x + r, xk, wt + c, ldw,
                         bias ? bias + c : NULL, accumulate, k_len);
}

/* The forward pass's tile: x rows of unit stride, + bias. */
WS_CPU_CLONES static void tile(float *y, int ldy, const float *const *x, const float *wt,
                               int ldw, const float *bias, int k_len)
{
    tile_any(y, ldy, x, 1, wt, ldw, bias, 0, k_len);
}

/* The backward pass's tile: x of any stride, added into y. */
WS_CPU_CLONES static void tile_add(float *y, int ldy, const float *const *x, long xk,
                                   const float *wt, int ldw, int k_len)
{
    tile_any(y, ldy, x, xk, wt, ldw, NULL, 1, k_len);
}

/* Pointers to the LIN_ROWS rows of a tile from row r0 of x (row stride xi); rows
 * at or past n repeat the last (their results are never stored). */
static void tile_rows(const float **rows, const float *x, long xi, int r0, int n)
{
    for (int i = 0; i < LIN_ROWS; i++) rows[i] = x + (r0 + i < n ? r0 + i : n - 1) * xi;
}

/* tile_add into the rows x w corner of y: an edge (rows < LIN_ROWS or w < LIN_COLS)
 * through e, a whole tile of scratch. */
static void add_tile(float *y, int ldy, int rows, int w, const float *const *x, long xk,
                     const float *b, int ldb, int k_len, float *e)
{
    if (rows == LIN_ROWS && w == LIN_COLS) {
        tile_add(y, ldy, x, xk, b, ldb, k_len);
        return;
    }
    memset(e, 0, LIN_TILE * sizeof *e);
    for (int r = 0; r < rows; r++)
        memcpy(e + r * LIN_COLS, y + (long)r * ldy, (size_t)w * sizeof *e);
    tile_add(e, LIN_COLS, x, xk, b, ldb, k_len);
    for (int r = 0; r < rows; r++)
        memcpy(y + (long)r * ldy, e + r * LIN_COLS, (size_t)w * sizeof *e);
}

/* W transposed in panels of LIN_COLS columns (W's rows), panel p at
 * wt + p·in_dim·LIN_COLS holding [in_dim][LIN_COLS], zero-padded past out_dim
 * (ldw: the panels' columns together), then the padded bias: what the tiles
 * read, each tile its panel in order. (One [in_dim][ldw] transpose, a tile's
 * rows ldw floats apart, ran the forward pass's products 8-10% slower: 134-144
 * against 146-156 GF/s, one thread, 256 or 512 rows, in and out 128 to 512.)
 * Packing costs as much as the products of a few rows, so packs are kept while
 * W and the bias are unchanged (cpu_packs.c). */
static void pack(float *wt, const float *w, const float *bias, int in_dim, int out_dim, int ldw)
{
    /* in blocks of LIN_VEC rows of W: each of them is read in order, a line at a time */
    for (int o0 = 0; o0 < ldw; o0 += LIN_VEC) {
        float *panel = wt + (long)(o0 / LIN_COLS) * in_dim * LIN_COLS + o0 % LIN_COLS;
        for (int k = 0; k < in_dim; k++) {
            float *row = panel + (long)k * LIN_COLS;
            for (int o = 0; o < LIN_VEC; o++)
                row[o] = o0 + o < out_dim ? w[(long)(o0 + o) * in_dim + k] : 0.0f;
        }
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
    const float *kept = ws_cpu_pack_find(w, bias, in_dim, out_dim);
    if (kept) return kept;
    size_t floats = (size_t)(in_dim + 1) * ldw;
    float *wt = malloc(floats * sizeof *wt);
    if (wt) {
        pack(wt, w, bias, in_dim, out_dim, ldw);
        if ((kept = ws_cpu_pack_keep(wt, floats, w, bias, in_dim, out_dim))) return kept;
        free(wt); /* the table is full */
    }
    pack(scratch, w, bias, in_dim, out_dim, ldw);
    return scratch;
}

ws_status ws_cpu_linear_forward(ws_backend *be, float *out, const float *in, const float *w,
                                const float *bias, int n, int in_dim, int out_dim)
{
    if (n <= 0) return WS_OK;
    int ldw = (out_dim + LIN_COLS - 1) / LIN_COLS * LIN_COLS;
    int row_tiles = (n + LIN_ROWS - 1) / LIN_ROWS, col_tiles = ldw / LIN_COLS;
    int threads = ws_cpu_threads(be);
    /* scratch: per thread one output tile for the edges, then room for a pack
     * should the table be full */
    float *edges = ws_cpu_scratch(be, LIN_TILE * threads + (size_t)(in_dim + 1) * ldw);
    if (!edges) return WS_ERR_NOMEM;
    const float *wt = pack_of(edges + LIN_TILE * threads, w, bias, in_dim, out_dim, ldw);
    const float *bpad = wt + (size_t)in_dim * ldw;
    int chunks = row_tiles < threads * 4 ? (row_tiles + 3) / 4 : threads;
    if (chunks > threads) chunks = threads;
    WS_CPU_FOR(chunks, schedule(static), for (int rt = 0; rt < row_tiles; rt++) {
        float *yout = edges + LIN_TILE * (size_t)omp_get_thread_num();
        int r0 = rt * LIN_ROWS, rows = n - r0 < LIN_ROWS ? n - r0 : LIN_ROWS;
        const float *x[LIN_ROWS];
        tile_rows(x, in, in_dim, r0, n);
        for (int ct = 0; ct < col_tiles; ct++) {
            int c0 = ct * LIN_COLS, cols = out_dim - c0 < LIN_COLS ? out_dim - c0 : LIN_COLS;
            const float *b = bias ? bpad + c0 : NULL, *panel = wt + (long)c0 * in_dim;
            if (rows == LIN_ROWS && cols == LIN_COLS) {
                tile(out + (long)r0 * out_dim + c0, out_dim, x, panel, LIN_COLS, b, in_dim);
                continue;
            }
            tile(yout, LIN_COLS, x, panel, LIN_COLS, b, in_dim);
            for (int r = 0; r < rows; r++)
                memcpy(out + (long)(r0 + r) * out_dim + c0, yout + (long)r * LIN_COLS,
                       (size_t)cols * sizeof *out);
        }
    });
    return WS_OK;
}

/* Threads for `units` work units of `work` multiply-add vectors in all: one per
 * some thousands of vectors, at most one per unit and per thread, at least one. */
static int chunks_for(long work, int threads, long units)
{
    long chunks = work / 2048;
    if (chunks > threads) chunks = threads;
    if (chunks > units) chunks = units;
    return chunks < 1 ? 1 : (int)chunks;
}

/* y[i][c] += Σ_k x[i·xi + k]·b[k·ldb + c] for i < m, c < cols (y's row stride),
 * in tiles (b's rows readable to ldb, a multiple of LIN_COLS): every element summed
 * in order of k alone, whatever the tiles beside it or the threads. The tiles of
 * one row block follow each other, so its rows of x are read from memory once (b,
 * a weight matrix here, stays in cache; strip after strip instead read all of x
 * once per strip: 130 against 195 GF/s on two threads at in 128 x out 128);
 * threads only where each gets some thousands of multiply-add vectors. */
static void add_products(float *y, int m, int cols, const float *x, long xi, const float *b,
                         int ldb, int k_len, float *edges, int threads)
{
    int row_tiles = (m + LIN_ROWS - 1) / LIN_ROWS, col_tiles = ldb / LIN_COLS;
    int tiles = row_tiles * col_tiles;
    int chunks = chunks_for((long)tiles * k_len, threads, tiles);
    WS_CPU_FOR(chunks, schedule(static), for (int t = 0; t < tiles; t++) {
        int r0 = t / col_tiles * LIN_ROWS, c0 = t % col_tiles * LIN_COLS;
        int rows = m - r0 < LIN_ROWS ? m - r0 : LIN_ROWS;
        int w = cols - c0 < LIN_COLS ? cols - c0 : LIN_COLS;
        const float *xr[LIN_ROWS];
        tile_rows(xr, x, xi, r0, m);
        add_tile(y + (long)r0 * cols + c0, cols, rows, w, xr, 1, b + c0, ldb, k_len,
                 edges + LIN_TILE * (size_t)omp_get_thread_num());
    });
}

/* a [rows][cols] (rows lda floats apart) copied into p with rows of ldp floats,
 * zero-padded */
static const float *pad_rows(float *p, const float *a, int rows, int cols, long lda, int ldp)
{
    for (long r = 0; r < rows; r++) {
        memcpy(p + r * ldp, a + r * lda, (size_t)cols * sizeof *p);
        memset(p + r * ldp + cols, 0, (size_t)(ldp - cols) * sizeof *p);
    }
    return p;
}

/* dW[o][c] += Σ_r dout[r][o]·in[r][c]: a sum over all n rows. A tile takes
 * LIN_ROWS columns of dout as its rows (read in place with stride out_dim: 32
 * contiguous bytes of each row of dout) against a strip of LIN_COLS columns of in
 * as its weights (in place with stride in_dim; the last strip, when narrower, a
 * zero-padded copy). The rows go in blocks of WG_BLOCK: every tile of a thread's
 * unit takes a block while it is in cache, so dout is read from memory about once.
 * Each element of dW gets the sums of its blocks in order of the block: the same
 * bits whatever the threads. (Packing both operands into panels first, and a unit
 * per strip that streamed all of dout again, held this at 105-120 GF/s on one and
 * two threads, in 128 x out 384 x 3072 rows; now 120 and 218.) */
#define WG_BLOCK 128

static ws_status add_weight_grads(ws_backend *be, float *dw, const float *dout, const float *in,
                                  int n, int in_dim, int out_dim, int threads)
{
    int strips = (in_dim + LIN_COLS - 1) / LIN_COLS, groups = (out_dim + LIN_ROWS - 1) / LIN_ROWS;
    int full_strips = in_dim / LIN_COLS;
    size_t tail_p = full_strips < strips ? (size_t)n * LIN_COLS : 0;
    float *edges = ws_cpu_scratch(be, LIN_TILE * threads + tail_p);
    if (!edges) return WS_ERR_NOMEM;
    float *tail = edges + LIN_TILE * threads;
    if (tail_p) pad_rows(tail, in + full_strips * LIN_COLS, n, in_dim - full_strips * LIN_COLS,
                         in_dim, LIN_COLS);
    /* units: a run of groups x a run of strips, as many as threads (groups split
     * first); each block of rows is read once per unit, all of its strips and
     * groups taking it from cache */
    int g_parts = groups < threads ? groups : threads;
    int s_parts = (threads + g_parts - 1) / g_parts;
    if (s_parts > strips) s_parts = strips;
    int units = g_parts * s_parts;
    int chunks = chunks_for((long)groups * strips * n, threads, units);
    WS_CPU_FOR(chunks, schedule(static), for (int u = 0; u < units; u++) {
        int gp = u / s_parts, sp = u % s_parts;
        int g0 = groups * gp / g_parts, g1 = groups * (gp + 1) / g_parts;
        int s0 = strips * sp / s_parts, s1 = strips * (sp + 1) / s_parts;
        float *e = edges + LIN_TILE * (size_t)omp_get_thread_num();
        for (int r0 = 0; r0 < n; r0 += WG_BLOCK) {
            int len = n - r0 < WG_BLOCK ? n - r0 : WG_BLOCK;
            for (int st = s0; st < s1; st++) {
                int c0 = st * LIN_COLS, w = in_dim - c0 < LIN_COLS ? in_dim - c0 : LIN_COLS;
                const float *strip = st < full_strips ? in + c0 : tail;
                int ld = st < full_strips ? in_dim : LIN_COLS;
                for (int g = g0; g < g1; g++) {
                    int o0 = g * LIN_ROWS, h = out_dim - o0 < LIN_ROWS ? out_dim - o0 : LIN_ROWS;
                    const float *xr[LIN_ROWS];
                    for (int i = 0; i < LIN_ROWS; i++)
                        xr[i] = dout + (long)r0 * out_dim + o0 + (i < h ? i : h - 1);
                    add_tile(dw + (long)o0 * in_dim + c0, in_dim, h, w, xr, out_dim,
                             strip + (long)r0 * ld, ld, len, e);
                }
            }
        }
    });
    return WS_OK;
}

/* din += dout·W and dW += doutᵀ·in on the tiles of the forward pass (no BLAS: at
 * these shapes its packing and per-call costs weigh, and its kernel for this CPU may
 * be narrower), each element summed in a fixed order: the same bits at any thread
 * count. W and in are read in place when their rows are whole tiles wide, else
 * zero-padded copies. */
ws_status ws_cpu_linear_backward(ws_backend *be, float *din, float *dw, float *dbias,
                                 const float *dout, const float *in, const float *w, int n,
                                 int in_dim, int out_dim)
{
    if (n <= 0) return WS_OK;
    int threads = ws_cpu_threads(be);
    if (din) {
        /* din[r][c] += Σ_o dout[r][o]·W[o][c] */
        int ldp = (in_dim + LIN_COLS - 1) / LIN_COLS * LIN_COLS;
        size_t pad_n = ldp == in_dim ? 0 : (size_t)ldp * out_dim;
        float *edges = ws_cpu_scratch(be, LIN_TILE * threads + pad_n);
        if (!edges) return WS_ERR_NOMEM;
        float *padded = edges + LIN_TILE * threads;
        const float *wp = ldp == in_dim ? w : pad_rows(padded, w, out_dim, in_dim, in_dim, ldp);
        add_products(din, n, in_dim, dout, out_dim, wp, ldp, out_dim, edges, threads);
    }
    if (dw) WS_TRY(add_weight_grads(be, dw, dout, in, n, in_dim, out_dim, threads));
    if (dbias) {
        /* Column sums, row by row so memory is read in order; threads own columns. */
        int chunks = out_dim >= 256 ? threads : 1;
        WS_CPU_FOR(chunks, , for (int t = 0; t < chunks; t++) {
            int o0 = out_dim * t / chunks, o1 = out_dim * (t + 1) / chunks;
            for (int r = 0; r < n; r++) {
                const float *row = dout + (long)r * out_dim;
                _Pragma("omp simd")
                for (int o = o0; o < o1; o++) dbias[o] += row[o];
            }
        });
    }
    return WS_OK;
}
