/* mixer_compositional.c — compositional attention (Mittal et al., ICLR 2022;
 * MIXERS.md §3) in the layout of the authors' Sort-of-CLEVR code:
 * S = comp_searches searches of width d_k = d/S, R = comp_retrievals retrievals
 * of width d_v = d/S (values d → R·d_v), retrieval queries d → S·d_r and ONE
 * retrieval-key matrix W̄_k (d_v → d_r) shared by every search and retrieval,
 * d_r = comp_dim, every linear with a bias:
 *
 *   α_s = softmax_keys(Q_s K_sᵀ/√d_k)            O_{s,r} = α_s V_r
 *   k̄_{n,s,r} = O_{s,r}[n] W̄_kᵀ + b̄_k           q̄_{n,s} = (x W̄_qᵀ + b̄_q)[n, s]
 *   ρ_{n,s,·} = softmax_r(q̄·k̄/√d_r)             y_{n,s} = Σ_r ρ O_{s,r}[n]
 *   out = concat_s(y) W_oᵀ + b_o                  (S·d_v = d)
 *
 * Tensors: SELF "<p>.qkv" [2d + R·d_v, d] (rows Q, K, V); CROSS "<p>.q" [d, d]
 * and "<p>.kv" [d + R·d_v, d] (rows K, V); both "<p>.rq" [S·d_r, d], "<p>.rk"
 * [d_r, d_v] and "<p>.out" [d, d]. The retrieval query reads the query-side
 * stream x in both modes (as fairseq's cross attention). K sits where MHA's
 * does (rows d..2d of qkv, 0..d of kv): its bias has an exactly zero gradient,
 * and so has rk.b (a constant added to all R keys moves every score of a
 * softmax over R alike) — see tests/test_util.h.
 *
 * Activations: the input projections, rq [n, S·d_r], O [n, S, R, d_v],
 * k̄ [n·S·R, d_r], y [n, d], then ρ [n·S·R], the search probabilities
 * (S·n_pairs) and the segments with their probabilities placed for S searches
 * (the plan's place n_heads heads). Backward scratch: the gradients of
 * everything before ρ, in the same shapes. */
#include "mixer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/mixer_ops_compositional.h"

typedef struct {
    int d, S, R, dv, dr, n, n_keys, n_segs, self;
    size_t in_q, in_kv; /* floats of the query-side and key-side projections */
    size_t n_pairs;     /* Σ_seg q_len·k_len */
} comp_dims;

static comp_dims dims_of(const ws_model_config *c, ws_mix_mode mode, const ws_mix_shape *s)
{
    comp_dims k = {.d = c->d, .S = c->comp_searches, .R = c->comp_retrievals,
                   .dv = c->d / c->comp_searches, .dr = c->comp_dim, .n = s->n,
                   .n_keys = s->n_keys, .n_segs = s->n_segs, .self = mode == WS_MIX_SELF,
                   .n_pairs = s->n_pairs};
    size_t d = (size_t)k.d, rv = (size_t)k.R * k.dv;
    k.in_q = (size_t)k.n * (k.self ? 2 * d + rv : d);
    k.in_kv = k.self ? 0 : (size_t)k.n_keys * (d + rv);
    return k;
}

typedef struct {
    float *q, *kv, *rq, *o, *kbar, *y; /* the first six also carve the scratch */
    float *rho, *probs;
    ws_attn_seg *segs;
} comp_bufs;

static size_t rows_sr(const comp_dims *k) { return (size_t)k->n * k->S * k->R; }

/* Carves act (with ρ, the probabilities and the segments) or scratch (without);
 * base NULL measures: *floats receives the size. */
static comp_bufs carve(float *base, const comp_dims *k, int with_probs, size_t *floats)
{
    ws_carve c = ws_carve_at(base, sizeof(float));
    comp_bufs b = {0};
    b.q = ws_carve_f(&c, k->in_q);
    if (!k->self) b.kv = ws_carve_f(&c, k->in_kv);
    b.rq = ws_carve_f(&c, (size_t)k->n * k->S * k->dr);
    b.o = ws_carve_f(&c, rows_sr(k) * k->dv);
    b.kbar = ws_carve_f(&c, rows_sr(k) * k->dr);
    b.y = ws_carve_f(&c, (size_t)k->n * k->d);
    if (with_probs) {
        b.rho = ws_carve_f(&c, rows_sr(k));
        b.probs = ws_carve_f(&c, (size_t)k->S * k->n_pairs);
        /* int32 fields: float alignment suffices */
        b.segs = ws_carve_take(&c, (size_t)k->n_segs * sizeof(ws_attn_seg));
    }
    if (floats) *floats = ws_carve_floats(&c);
    return b;
}

static size_t scratch_floats(const ws_model_config *c, ws_mix_mode mode, const ws_mix_shape *s)
{
    comp_dims k = dims_of(c, mode, s);
    size_t n;
    carve(NULL, &k, 0, &n);
    return n;
}

static size_t act_floats(const ws_model_config *c, ws_mix_mode mode, const ws_mix_shape *s)
{
    comp_dims k = dims_of(c, mode, s);
    size_t n;
    carve(NULL, &k, 1, &n);
    return n;
}

static ws_status validate(const ws_model_config *c, ws_mix_mode mode, ws_error *err)
{
    (void)mode; /* the same in both modes; the field ranges are checked by config.c */
    if (c->d % c->comp_searches != 0)
        return ws_error_set(err, WS_ERR_INVALID,
                            "config: compositional needs comp_searches (%d) to divide d (%d)",
                            c->comp_searches, c->d);
    return WS_OK;
}

static int supported(const ws_backend *be) { return be->ops->compositional != NULL; }

enum { RQ = WS_MIX_OWN, RK, OUT }; /* slots after the shared q/kv (or fused qkv) */

static void layout(ws_param_layout *L, const char *prefix, const ws_model_config *c,
                   ws_mix_mode mode, ws_mix_params *p)
{
    char name[48];
    int d = c->d, dv = d / c->comp_searches, rv = c->comp_retrievals * dv;
    ws_mix_qkv_layout(L, prefix, d, mode, d, d + rv, p);
    snprintf(name, sizeof name, "%s.rq", prefix);
    p->at[RQ] = ws_layout_add_linear(L, name, c->comp_searches * c->comp_dim, d);
    snprintf(name, sizeof name, "%s.rk", prefix);
    p->at[RK] = ws_layout_add_linear(L, name, c->comp_dim, dv);
    snprintf(name, sizeof name, "%s.out", prefix);
    p->at[OUT] = ws_layout_add_linear(L, name, d, d);
}

/* Where Q, K and V sit in carved buffers b (activations or their gradients). */
typedef struct {
    float *q, *k, *v;
    int ldq, ldkv;
} qkv_views;

static qkv_views views(const comp_dims *k, const comp_bufs *b)
{
    int d = k->d, rv = k->R * k->dv;
    qkv_views w = {.ldq = k->self ? 2 * d + rv : d, .ldkv = k->self ? 2 * d + rv : d + rv};
    w.q = b->q;
    w.k = k->self ? b->q + d : b->kv;
    w.v = k->self ? b->q + 2 * d : b->kv + d;
    return w;
}

static ws_comp_search_args search_args(const ws_mix_call *call, const comp_dims *k,
                                       const comp_bufs *b)
{
    qkv_views w = views(k, b);
    int rv = k->R * k->dv;
    ws_comp_search_args a = {
        .a = {.out = b->o, .ldo = k->S * rv, .probs = b->probs, .q = w.q, .ldq = w.ldq,
              .k = w.k, .ldk = w.ldkv, .v = w.v, .ldv = w.ldkv, .segs = b->segs,
              .n_segs = call->s.n_segs, .n_heads = k->S, .d = k->d,
              .max_q_len = call->s.max_q, .max_k_len = call->s.max_k,
              .forward_only = call->forward_only},
        .dv = rv, .v_step = 0, /* every search reads all R retrievals' values */
    };
    return a;
}

static ws_comp_select_args select_args(const comp_dims *k, const comp_bufs *b)
{
    ws_comp_select_args a = {
        .n = k->n, .n_searches = k->S, .n_retrievals = k->R, .dv = k->dv, .dr = k->dr,
        .scale = 1.0f / sqrtf((float)k->dr), .o = b->o, .k = b->kbar, .q = b->rq,
        .ldq = k->S * k->dr, .rho = b->rho, .y = b->y, .ldy = k->d,
    };
    return a;
}

/* The plan's segments place each segment's probabilities for n_heads heads;
 * S searches need S: the same segments with p_off the running Σ S·q_len·k_len,
 * written to the activations (backward reads them there). */
static ws_status place_segments(const ws_mix_call *call, const comp_dims *k, ws_attn_seg *dev)
{
    int n = call->s.n_segs;
    ws_attn_seg *h = malloc((size_t)(n > 0 ? n : 1) * sizeof *h);
    if (!h) return WS_ERR_NOMEM;
    size_t p = 0;
    for (int i = 0; i < n; i++) {
        h[i] = call->s.segs_host[i];
        h[i].p_off = (int32_t)p;
        p += (size_t)k->S * h[i].q_len * h[i].k_len;
    }
    ws_status st = ws_backend_upload(call->m->be, dev, h, (size_t)n * sizeof *h);
    free(h);
    return st;
}

static ws_status forward(const ws_mix_call *call)
{
    const ws_model *m = call->m;
    const ws_lin_off *P = call->p->at;
    ws_backend *be = m->be;
    comp_dims k = dims_of(&call->m->cfg, call->mode, &call->s);
    comp_bufs b = carve(call->act, &k, 1, NULL);
    int d = k.d, rv = k.R * k.dv, n_sr = (int)rows_sr(&k);
    WS_TRY(ws_mix_qkv_forward(call, d, d + rv, b.q, b.kv));
    WS_TRY(ws_mix_linear_forward(m, P[RQ], b.rq, call->x, k.n, d, k.S * k.dr));
    WS_TRY(place_segments(call, &k, b.segs));
    ws_comp_search_args sa = search_args(call, &k, &b);
    WS_TRY(be->ops->compositional->search_forward(be, &sa));
    /* k̄: one shared W̄_k over all S·R·n retrieved rows */
    WS_TRY(ws_mix_linear_forward(m, P[RK], b.kbar, b.o, n_sr, k.dv, k.dr));
    ws_comp_select_args se = select_args(&k, &b);
    WS_TRY(be->ops->compositional->select_forward(be, &se));
    return ws_mix_linear_forward(m, P[OUT], call->out, b.y, k.n, d, d);
}

static ws_status backward(const ws_mix_call *call)
{
    const ws_model *m = call->m;
    const ws_lin_off *P = call->p->at;
    ws_backend *be = m->be;
    comp_dims k = dims_of(&call->m->cfg, call->mode, &call->s);
    size_t g_floats;
    comp_bufs b = carve(call->act, &k, 1, NULL), g = carve(call->scratch, &k, 0, &g_floats);
    int d = k.d, rv = k.R * k.dv, n_sr = (int)rows_sr(&k);
    WS_TRY(be->ops->fill(be, g.q, 0.0f, g_floats));
    WS_TRY(ws_mix_linear_backward(m, P[OUT], g.y, call->d_out, b.y, k.n, d, d));
    /* O gets two paths: directly through y (select) and through the keys k̄ (rk) */
    ws_comp_select_args se = select_args(&k, &b);
    ws_comp_select_grads sg = {.d_o = g.o, .d_k = g.kbar, .d_q = g.rq, .d_y = g.y};
    WS_TRY(be->ops->compositional->select_backward(be, &se, &sg));
    WS_TRY(ws_mix_linear_backward(m, P[RK], g.o, g.kbar, b.o, n_sr, k.dv, k.dr));
    ws_comp_search_args sa = search_args(call, &k, &b);
    qkv_views dw = views(&k, &g);
    ws_attn_grads ag = {.dq = dw.q, .dk = dw.k, .dv = dw.v, .dout = g.o};
    WS_TRY(be->ops->compositional->search_backward(be, &sa, &ag));
    WS_TRY(ws_mix_linear_backward(m, P[RQ], call->d_x, g.rq, call->x, k.n, d, k.S * k.dr));
    return ws_mix_qkv_backward(call, d, d + rv, g.q, g.kv);
}

const ws_mixer ws_mixer_compositional = {
    .modes = WS_MIX_SELF | WS_MIX_CROSS,
    .validate = validate, .supported = supported, .layout = layout, .act_floats = act_floats,
    .scratch_floats = scratch_floats, .forward = forward, .backward = backward,
};
