/* readout_rn.c — the relation-network readout (Santoro et al. 2017; MIXERS.md §5),
 * a ws_readout_variant in place of ext.head (cfg.ext_mixer = rn).
 *
 * Per query q = LN_o(Q) row of trajectory b with state rows w_1..w_T:
 *     logit = f( (1/T²) Σ_{i,j} g(w_i, w_j, q) )   over all ordered pairs, i = j too.
 * g: rn_layers ReLU layers of width w = rn_width; f: w → w (ReLU) → 1.
 * g's first layer is split per token (MIXERS §5 "cheap trick"):
 *     W₁[w_i; w_j; q] + b₁ = A w_i + B w_j + (C q + b₁),
 * so A w and B w are computed once per state row, C q + b₁ once per query, and
 * each pair costs an add and a ReLU (backend rn ops); layers 2.. of g are
 * linear ops over the n_query·T² pair rows.
 *
 * The pair sum is scaled by 1/T² (the mean over pairs). T is fixed per model,
 * so this is the paper's sum with f's first weight scaled by T²; it keeps f's
 * input O(1) under the generic N(0, 1/in) init. With the plain sum of T² = 256
 * rectified vectors (T = 16, w = 64, LN'd inputs) the initial logits have mean
 * |logit| ≈ 73 (up to ~200: saturated, huge BCE); with the mean, ≈ 0.3.
 *
 * Tensors (registered in place of ext.head):
 *   ext.rn.g.0.obj.w   [2w, d]  rows [0, w): A (on w_i), rows [w, 2w): B (on w_j)
 *   ext.rn.g.0.query.w [w, d]   C      ext.rn.g.0.query.b [w]  b₁
 *   ext.rn.g.{l}.w [w, w] .b [w]       l = 1 .. rn_layers−1
 *   ext.rn.f.0.w [w, w] .b [w]         ext.rn.f.1.w [1, w] .b [1]
 *
 * Cost (forward FLOPs, MIXERS §7 "RN (first-layer split)" with N = T, d_o = d_q = d;
 * a multiply-add is 2): per trajectory 4·T·d·w (A w_i, B w_j), per query
 *   2·d·w (C q) + 2·T²·w (add, ReLU) + 2·T²·(L_g−1)·w² (layers 2..) + T²·w (sum)
 *   + 2·w² + 2·w (f).
 * The naive form would instead spend 2·T²·3d·w per query on the first layer.
 * Memory: activations n_query·T²·w·L_g floats (every layer's pair rows, kept for
 * the backward), plus O((n_state_rows + n_query)·w); backward scratch two more
 * n_query·T²·w buffers when L_g > 1 (one otherwise). */
#include <stdio.h>

#include "kernels/mixer_ops_rn.h"
#include "mixer.h"

#define WS_RN_MAX_STATE 64 /* T² pair rows per query: 4096 at most */
#define WS_RN_MAX_LAYERS 8 /* of g: config.c's bound, and the slots they take */

typedef struct {
    size_t ns, nq, w, pair_floats; /* pair_floats: nq·T²·w, one layer */
    int layers;
} rn_dims;

static rn_dims dims(const ws_exec *x)
{
    const ws_model *m = x->m;
    const ws_plan *p = &x->plan;
    size_t T = (size_t)m->cfg.n_state;
    rn_dims s = {(size_t)p->n_state_rows, (size_t)p->n_query, (size_t)m->cfg.rn_width, 0,
                 m->cfg.rn_layers};
    s.pair_floats = s.nq * T * T * s.w;
    return s;
}

/* The per-row buffers, laid out alike in the activations (values) and the
 * backward scratch (their gradients), each region going on after them:
 *   act:     obj [ns, 2w] | qry [nq, w] | sum [nq, w] | f0 [nq, w] | L_g × [nq·T², w] pairs
 *   scratch: ∂obj | ∂qry | ∂sum | ∂f0 | ∂z0 [nq, w] | x, y [nq·T², w] (y only if L_g > 1) */
typedef struct {
    float *obj, *qry, *sum, *f0;
    float *pairs;        /* act */
    float *d_z0, *x, *y; /* scratch */
} rn_bufs;

/* Carves act or scratch; base NULL measures: *floats receives the size. */
static rn_bufs carve(float *base, rn_dims s, int act, size_t *floats)
{
    ws_carve c = ws_carve_at(base, sizeof(float));
    rn_bufs b = {0};
    b.obj = ws_carve_f(&c, s.ns * 2 * s.w);
    b.qry = ws_carve_f(&c, s.nq * s.w);
    b.sum = ws_carve_f(&c, s.nq * s.w);
    b.f0 = ws_carve_f(&c, s.nq * s.w);
    if (act) {
        b.pairs = ws_carve_f(&c, (size_t)s.layers * s.pair_floats);
    } else {
        b.d_z0 = ws_carve_f(&c, s.nq * s.w);
        b.x = ws_carve_f(&c, s.pair_floats);
        if (s.layers > 1) b.y = ws_carve_f(&c, s.pair_floats);
    }
    if (floats) *floats = ws_carve_floats(&c);
    return b;
}

static size_t act_floats(const ws_exec *x)
{
    size_t n;
    carve(NULL, dims(x), 1, &n);
    return n;
}

static size_t scratch_floats(const ws_exec *x)
{
    size_t n;
    carve(NULL, dims(x), 0, &n);
    return n;
}

static ws_status validate(const ws_model_config *c, ws_error *err)
{
    if (c->n_state > WS_RN_MAX_STATE)
        return ws_error_set(err, WS_ERR_INVALID,
                            "config: ext_mixer rn keeps n_state² pair rows per query; n_state "
                            "must be <= %d, got %d",
                            WS_RN_MAX_STATE, c->n_state);
    return WS_OK;
}

static int supported(const ws_backend *be) { return be->ops->rn != NULL; }

/* Its slots: g's split first layer (A and B in one weight, C with b₁), g's
 * layers 1 .. rn_layers−1, then f's two. */
enum { G0_OBJ, G0_QUERY, G1, F0 = G1 + WS_RN_MAX_LAYERS - 1, F1 };
_Static_assert(F1 < WS_MIX_SLOTS, "rn: more slots than ws_mix_params holds");

static void layout(ws_param_layout *L, const ws_model_config *c, ws_mix_params *p)
{
    char name[48];
    int d = c->d, w = c->rn_width;
    p->at[G0_OBJ] = ws_layout_add_weight(L, "ext.rn.g.0.obj", 2 * w, d);
    p->at[G0_QUERY] = ws_layout_add_linear(L, "ext.rn.g.0.query", w, d);
    for (int l = 1; l < c->rn_layers; l++) {
        snprintf(name, sizeof name, "ext.rn.g.%d", l);
        p->at[G1 + l - 1] = ws_layout_add_linear(L, name, w, w);
    }
    p->at[F0] = ws_layout_add_linear(L, "ext.rn.f.0", w, w);
    p->at[F1] = ws_layout_add_linear(L, "ext.rn.f.1", 1, w);
}

static ws_rn_args rn_args(const ws_exec *x)
{
    const ws_plan *p = &x->plan;
    return (ws_rn_args){.segs = p->seg_ext, .n_segs = p->n_ext_segs, .n_obj = x->m->cfg.n_state,
                        .width = x->m->cfg.rn_width, .max_q_len = p->max_query};
}

static ws_status forward(ws_exec *x, float *act, const float *q, const float *w,
                         float *logits)
{
    ws_model *m = x->m;
    ws_backend *be = m->be;
    const struct ws_rn_ops *rn = be->ops->rn;
    rn_dims s = dims(x);
    rn_bufs a = carve(act, s, 1, NULL);
    float *pairs = a.pairs;
    int d = m->cfg.d, W = (int)s.w, K = m->cfg.n_state, nq = (int)s.nq;
    int n_pairs = nq * K * K;
    const ws_lin_off *P = m->off.readout.at;
    WS_TRY(ws_mix_linear_forward(m, P[G0_OBJ], a.obj, w, (int)s.ns, d, 2 * W));
    WS_TRY(ws_mix_linear_forward(m, P[G0_QUERY], a.qry, q, nq, d, W));
    ws_rn_args args = rn_args(x);
    WS_TRY(rn->pair_forward(be, pairs, a.obj, a.qry, &args));
    for (int l = 1; l < s.layers; l++) {
        float *h = pairs + (size_t)l * s.pair_floats;
        WS_TRY(ws_mix_linear_forward(m, P[G1 + l - 1], h, h - s.pair_floats, n_pairs, W, W));
        WS_TRY(rn->relu_forward(be, h, h, s.pair_floats));
    }
    const float *top = pairs + (size_t)(s.layers - 1) * s.pair_floats;
    WS_TRY(rn->pair_sum_forward(be, a.sum, top, nq, K * K, W, 1.0f / (float)(K * K)));
    WS_TRY(ws_mix_linear_forward(m, P[F0], a.f0, a.sum, nq, W, W));
    WS_TRY(rn->relu_forward(be, a.f0, a.f0, s.nq * s.w));
    return ws_mix_linear_forward(m, P[F1], logits, a.f0, nq, W, 1);
}

/* f backward: d_logits → d_sum. */
static ws_status backward_f(ws_model *m, const rn_bufs *a, const rn_bufs *g, float *d_z0,
                            const float *d_logits, int nq, int W)
{
    ws_backend *be = m->be;
    const ws_lin_off *P = m->off.readout.at;
    WS_TRY(ws_mix_linear_backward(m, P[F1], g->f0, d_logits, a->f0, nq, W, 1));
    WS_TRY(be->ops->rn->relu_backward(be, d_z0, a->f0, g->f0, (size_t)nq * W));
    return ws_mix_linear_backward(m, P[F0], g->sum, d_z0, a->sum, nq, W, W);
}

/* g's layers L_g−1 .. 1, from x = ∂L/∂ of layer L_g−1's pre-activations down to
 * ∂L/∂h_0, the split layer's output; *dh0 receives the buffer that holds it. */
static ws_status backward_g(ws_model *m, const float *pairs, const rn_bufs *g,
                            rn_dims s, const float **dh0)
{
    ws_backend *be = m->be;
    int W = (int)s.w, n_pairs = (int)(s.pair_floats / s.w);
    float *dz = g->x, *dh = g->y;
    for (int l = s.layers - 1; l >= 1; l--) {
        const float *h_in = pairs + (size_t)(l - 1) * s.pair_floats;
        ws_lin_off lw = m->off.readout.at[G1 + l - 1];
        /* dW_l, db_l from dz; then ∂L/∂h_{l−1} = dz·W_l, written (beta 0) rather
         * than accumulated, so the buffer needs no clearing. */
        ws_gemm_args back = {.m = n_pairs, .n = W, .k = W, .alpha = 1.0f, .beta = 0.0f,
                             .a = dz, .lda = W, .b = WS_P(m, lw.w), .ldb = W, .c = dh, .ldc = W,
                             .batch = 1};
        WS_TRY(ws_mix_linear_backward(m, lw, NULL, dz, h_in, n_pairs, W, W));
        WS_TRY(be->ops->gemm(be, &back));
        if (l == 1) break; /* h_0's ReLU is folded into pair_backward */
        /* ∂L/∂z_{l−1} into dz, which is free again. */
        WS_TRY(be->ops->fill(be, dz, 0.0f, s.pair_floats));
        WS_TRY(be->ops->rn->relu_backward(be, dz, h_in, dh, s.pair_floats));
    }
    *dh0 = s.layers > 1 ? dh : dz;
    return WS_OK;
}

static ws_status backward(ws_exec *x, float *act, float *scratch, const float *q,
                          const float *w, const float *d_logits, float *d_q, float *d_w)
{
    ws_model *m = x->m;
    ws_backend *be = m->be;
    const struct ws_rn_ops *rn = be->ops->rn;
    rn_dims s = dims(x);
    rn_bufs a = carve(act, s, 1, NULL), g = carve(scratch, s, 0, NULL);
    int d = m->cfg.d, W = (int)s.w, K = m->cfg.n_state, nq = (int)s.nq;
    /* The small buffers and x start from zero (the ops accumulate). */
    WS_TRY(be->ops->fill(be, scratch, 0.0f, (size_t)(g.x - scratch) + s.pair_floats));
    WS_TRY(backward_f(m, &a, &g, g.d_z0, d_logits, nq, W));
    /* The sum's backward broadcasts ∂L/∂sum to every pair row; with L_g > 1 it
     * also applies the top layer's ReLU (its split layer's ReLU, when L_g = 1,
     * is pair_backward's). */
    const float *top = a.pairs + (size_t)(s.layers - 1) * s.pair_floats;
    WS_TRY(rn->pair_sum_backward(be, g.x, g.sum, s.layers > 1 ? top : NULL, nq, K * K, W,
                                 1.0f / (float)(K * K)));
    const float *dh0;
    WS_TRY(backward_g(m, a.pairs, &g, s, &dh0));
    ws_rn_args args = rn_args(x);
    WS_TRY(rn->pair_backward(be, g.obj, g.qry, dh0, a.pairs, &args));
    const ws_lin_off *P = m->off.readout.at;
    WS_TRY(ws_mix_linear_backward(m, P[G0_OBJ], d_w, g.obj, w, (int)s.ns, d, 2 * W));
    return ws_mix_linear_backward(m, P[G0_QUERY], d_q, g.qry, q, nq, d, W);
}

const ws_readout_variant ws_readout_rn = {
    .validate = validate, .supported = supported,
    .layout = layout, .act_floats = act_floats, .scratch_floats = scratch_floats,
    .forward = forward, .backward = backward,
};
