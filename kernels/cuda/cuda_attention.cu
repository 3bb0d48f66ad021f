/* cuda_attention.cu — multi-head attention over ragged segments, softmax fused.
 *
 * Mapping: grid (segment, head, row tile). A block reads its segment from the device
 * segs array and its warps take one row each (query rows in the forward pass and in
 * the dQ pass, key rows in the dK/dV pass), striding by the grid so any segment
 * length is covered; max_q_len/max_k_len size the grid, and max_q_len also the
 * backward's scratch of D_i (one float per segment, head and query row up to it:
 * like the CPU backend's scratch, it relies on max_q_len bounding every q_len;
 * rows beyond it would be skipped, not overrun). Every warp writes its
 * own row's columns of its own head, and segments' query and key ranges are
 * disjoint, so no two warps write one element: no atomics, a fixed order.
 *
 * Within a warp, lanes split the keys for scores (one dot product of d_h each) and
 * the columns for P·V; values a lane computed for one key reach the others by
 * __shfl_sync. The math is the CPU backend's:
 *   forward  S = QKᵀ/√d_h, P = masked softmax rows (all keys masked: P = 0, out = 0),
 *            out = P V;
 *   backward dV += Pᵀ dO; dP = dO Vᵀ; D_i = Σ_j P_ij dP_ij; dS = P ⊙ (dP − D)/√d_h;
 *            dQ += dS K; dK += dSᵀ Q.
 * The backward runs in two launches: per query row (D_i, saved to scratch, and dQ),
 * then per key row (dK, dV, recomputing dP from dO and V instead of storing it). */
#include "cuda_internal.h"

#define WS_ATT_WARPS 4 /* rows per block */
#define WS_GRID_Z_MAX 65535

static __device__ __forceinline__ float dot_cols(const float *a, const float *b, int n)
{
    float s = 0.0f;
    for (int c = 0; c < n; c++) s += a[c] * b[c];
    return s;
}

__global__ void k_attn_forward(ws_attn_args a, int dh, float scale)
{
    const ws_attn_seg s = a.segs[blockIdx.x];
    const int h = blockIdx.y, lane = threadIdx.x % WS_WARP;
    if (s.q_len <= 0) return;
    const float *qb = a.q + (size_t)s.q_off * a.ldq + h * dh;
    const float *kb = a.k + (size_t)s.k_off * a.ldk + h * dh;
    const float *vb = a.v + (size_t)s.k_off * a.ldv + h * dh;
    float *ob = a.out + (size_t)s.q_off * a.ldo + h * dh;
    float *pb = a.probs + s.p_off + (size_t)h * s.q_len * s.k_len;
    const uint8_t *valid = a.key_valid ? a.key_valid + s.k_off : NULL;

    for (int i = blockIdx.z * WS_ATT_WARPS + threadIdx.x / WS_WARP; i < s.q_len;
         i += gridDim.z * WS_ATT_WARPS) {
        float *o = ob + (size_t)i * a.ldo;
        if (s.k_len <= 0) { /* no keys: a zero output, no probabilities */
            for (int c = lane; c < dh; c += WS_WARP) o[c] = 0.0f;
            continue;
        }
        const float *qi = qb + (size_t)i * a.ldq;
        float *p = pb + (size_t)i * s.k_len;
        /* scores, kept in the probs row; the max over valid keys */
        float mx = -INFINITY;
        for (int j = lane; j < s.k_len; j += WS_WARP) {
            float sc = dot_cols(qi, kb + (size_t)j * a.ldk, dh) * scale;
            p[j] = sc;
            if (!valid || valid[j]) mx = fmaxf(mx, sc);
        }
        mx = ws_warp_max(mx);
        if (mx == -INFINITY) { /* every key masked: no attention at all */
            for (int j = lane; j < s.k_len; j += WS_WARP) p[j] = 0.0f;
            for (int c = lane; c < dh; c += WS_WARP) o[c] = 0.0f;
            continue;
        }
        float sum = 0.0f;
        for (int j = lane; j < s.k_len; j += WS_WARP) {
            float e = (!valid || valid[j]) ? expf(p[j] - mx) : 0.0f;
            p[j] = e;
            sum += e;
        }
        float inv = 1.0f / ws_warp_sum(sum);
        for (int j = lane; j < s.k_len; j += WS_WARP) p[j] *= inv;
        __syncwarp(); /* the row's probabilities, written by all lanes, read by each */
        for (int c = lane; c < dh; c += WS_WARP) {
            float acc = 0.0f;
            for (int j = 0; j < s.k_len; j++) acc += p[j] * vb[(size_t)j * a.ldv + c];
            o[c] = acc;
        }
        __syncwarp();
    }
}

/* Per query row: D_i = Σ_j P_ij (dO_i·V_j) into d_row[(seg·H + h)·max_q + i], and
 * dQ_i += Σ_j dS_ij K_j. */
__global__ void k_attn_backward_q(ws_attn_args a, ws_attn_grads g, float *d_row, int dh,
                                  float scale)
{
    const ws_attn_seg s = a.segs[blockIdx.x];
    const int h = blockIdx.y, lane = threadIdx.x % WS_WARP;
    if (s.q_len <= 0 || s.k_len <= 0) return;
    const float *kb = a.k + (size_t)s.k_off * a.ldk + h * dh;
    const float *vb = a.v + (size_t)s.k_off * a.ldv + h * dh;
    const float *pb = a.probs + s.p_off + (size_t)h * s.q_len * s.k_len;
    float *drow = d_row + ((size_t)blockIdx.x * a.n_heads + h) * a.max_q_len;
    int q_len = s.q_len < a.max_q_len ? s.q_len : a.max_q_len; /* the scratch's bound */

    for (int i = blockIdx.z * WS_ATT_WARPS + threadIdx.x / WS_WARP; i < q_len;
         i += gridDim.z * WS_ATT_WARPS) {
        const float *doi = g.dout + (size_t)(s.q_off + i) * a.ldo + h * dh;
        const float *p = pb + (size_t)i * s.k_len;
        float part = 0.0f;
        for (int j = lane; j < s.k_len; j += WS_WARP)
            part += p[j] * dot_cols(doi, vb + (size_t)j * a.ldv, dh);
        float D = ws_warp_sum(part);
        if (lane == 0) drow[i] = D;
        if (!g.dq) continue;
        float *dqi = g.dq + (size_t)(s.q_off + i) * a.ldq + h * dh;
        for (int c0 = 0; c0 < dh; c0 += WS_WARP) {
            int c = c0 + lane;
            float acc = 0.0f;
            for (int j0 = 0; j0 < s.k_len; j0 += WS_WARP) {
                int j = j0 + lane;
                float ds = 0.0f;
                if (j < s.k_len)
                    ds = p[j] * (dot_cols(doi, vb + (size_t)j * a.ldv, dh) - D) * scale;
                int cnt = min(WS_WARP, s.k_len - j0);
                for (int t = 0; t < cnt; t++) {
                    float dst = __shfl_sync(WS_FULL_MASK, ds, t);
                    if (c < dh) acc += dst * kb[(size_t)(j0 + t) * a.ldk + c];
                }
            }
            if (c < dh) dqi[c] += acc;
        }
    }
}

/* Per key row: dV_j += Σ_i P_ij dO_i and dK_j += Σ_i dS_ij Q_i. */
__global__ void k_attn_backward_kv(ws_attn_args a, ws_attn_grads g, const float *d_row, int dh,
                                   float scale)
{
    const ws_attn_seg s = a.segs[blockIdx.x];
    const int h = blockIdx.y, lane = threadIdx.x % WS_WARP;
    if (s.q_len <= 0 || s.k_len <= 0) return;
    const float *qb = a.q + (size_t)s.q_off * a.ldq + h * dh;
    const float *vb = a.v + (size_t)s.k_off * a.ldv + h * dh;
    const float *dob = g.dout + (size_t)s.q_off * a.ldo + h * dh;
    const float *pb = a.probs + s.p_off + (size_t)h * s.q_len * s.k_len;
    const float *drow = d_row + ((size_t)blockIdx.x * a.n_heads + h) * a.max_q_len;
    int q_len = s.q_len < a.max_q_len ? s.q_len : a.max_q_len;

    for (int j = blockIdx.z * WS_ATT_WARPS + threadIdx.x / WS_WARP; j < s.k_len;
         j += gridDim.z * WS_ATT_WARPS) {
        const float *vj = vb + (size_t)j * a.ldv;
        float *dvj = g.dv ? g.dv + (size_t)(s.k_off + j) * a.ldv + h * dh : NULL;
        float *dkj = g.dk ? g.dk + (size_t)(s.k_off + j) * a.ldk + h * dh : NULL;
        for (int c0 = 0; c0 < dh; c0 += WS_WARP) {
            int c = c0 + lane;
            float acc_v = 0.0f, acc_k = 0.0f;
            for (int i0 = 0; i0 < q_len; i0 += WS_WARP) {
                int i = i0 + lane;
                float pij = 0.0f, ds = 0.0f;
                if (i < q_len) {
                    pij = pb[(size_t)i * s.k_len + j];
                    if (dkj)
                        ds = pij * (dot_cols(dob + (size_t)i * a.ldo, vj, dh) - drow[i]) * scale;
                }
                int cnt = min(WS_WARP, q_len - i0);
                for (int t = 0; t < cnt; t++) {
                    float pt = __shfl_sync(WS_FULL_MASK, pij, t);
                    float dt = __shfl_sync(WS_FULL_MASK, ds, t);
                    if (c < dh) {
                        acc_v += pt * dob[(size_t)(i0 + t) * a.ldo + c];
                        acc_k += dt * qb[(size_t)(i0 + t) * a.ldq + c];
                    }
                }
            }
            if (c < dh) {
                if (dvj) dvj[c] += acc_v;
                if (dkj) dkj[c] += acc_k;
            }
        }
    }
}

static dim3 grid_for(const ws_attn_args *a, int max_rows)
{
    int tiles = (max_rows + WS_ATT_WARPS - 1) / WS_ATT_WARPS;
    if (tiles < 1) tiles = 1;
    if (tiles > WS_GRID_Z_MAX) tiles = WS_GRID_Z_MAX;
    return dim3((unsigned)a->n_segs, (unsigned)a->n_heads, (unsigned)tiles);
}

static ws_status check_args(ws_cuda *c, const ws_attn_args *a)
{
    if (a->n_heads <= 0 || a->n_heads > 65535 || a->d % a->n_heads != 0)
        return ws_cuda_fail(c, WS_ERR_INVALID, "attention", __FILE__, __LINE__,
                            "n_heads must divide d (and be at most 65535)");
    return WS_OK;
}

ws_status ws_cuda_attention_forward(ws_backend *be, const ws_attn_args *a)
{
    if (a->n_segs <= 0) return WS_OK;
    WS_CUDA_ENTER(be, c);
    WS_TRY(check_args(c, a));
    int dh = a->d / a->n_heads;
    float scale = 1.0f / sqrtf((float)dh);
    k_attn_forward<<<grid_for(a, a->max_q_len), WS_ATT_WARPS * WS_WARP, 0, c->stream>>>(*a, dh,
                                                                                       scale);
    WS_CUDA_LAUNCHED(c, "k_attn_forward");
    return WS_OK;
}

ws_status ws_cuda_attention_backward(ws_backend *be, const ws_attn_args *a,
                                     const ws_attn_grads *g)
{
    if (a->n_segs <= 0 || a->max_q_len <= 0 || a->max_k_len <= 0) return WS_OK;
    WS_CUDA_ENTER(be, c);
    WS_TRY(check_args(c, a));
    int dh = a->d / a->n_heads;
    float scale = 1.0f / sqrtf((float)dh);
    void *d_row;
    WS_TRY(ws_cuda_scratch(c, (size_t)a->n_segs * a->n_heads * a->max_q_len * sizeof(float),
                           &d_row));
    k_attn_backward_q<<<grid_for(a, a->max_q_len), WS_ATT_WARPS * WS_WARP, 0, c->stream>>>(
        *a, *g, (float *)d_row, dh, scale);
    WS_CUDA_LAUNCHED(c, "k_attn_backward_q");
    if (g->dk || g->dv) {
        k_attn_backward_kv<<<grid_for(a, a->max_k_len), WS_ATT_WARPS * WS_WARP, 0, c->stream>>>(
            *a, *g, (const float *)d_row, dh, scale);
        WS_CUDA_LAUNCHED(c, "k_attn_backward_kv");
    }
    return WS_OK;
}
