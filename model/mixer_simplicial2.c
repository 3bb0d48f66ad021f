/* mixer_simplicial2.c — 2-simplicial attention with virtual entities (Clift et
 * al., ICLR 2020; ../shared/MIXERS.md §2) as a ws_mixer, in both slots.
 *
 * The branch is Y = [a1, LN(a2)] W_O + b_O, with
 *   a1: K1 = n_heads heads of 1-simplicial attention (our MHA projections: fused
 *       qkv [3d, d] with bias in SELF mode, q [d, d] and kv [2d, d] in CROSS mode;
 *       scale 1/√(d/K1));
 *   a2: K2 = s2_heads heads of 2-simplicial attention of width δ = d2/K2
 *       (kernels/mixer_ops_simplicial2.h): queries p = x W_P, keys l1, l2 and
 *       values u = keys·W_LUV, all without bias (as the authors' E²); pair values
 *       T_jk = B_h(u_j ⊗ u_k) with one learned B_h [δ, δ²] per head; logits
 *       τ·‖w_ijk‖ (τ = s2_tau, 1 = the authors); softmax over the key pairs;
 *   LN(a2) with its own gain and bias over d2.
 * W_O [d, d + d2] is stored as out.w [d, d] (+ out.b) and s2.out.w [d, d2], so
 * that the 1-simplicial tensors are exactly the mha mixer's; the generic init
 * then draws each part N(0, 1/its fan-in) (the two halves add, each with unit
 * scale, instead of one N(0, 1/(d + d2))). B registers as a linear map
 * [δ, δ²] (weight decay; init N(0, 1/δ²), the variance of the authors'
 * Glorot-uniform B). Deviation from the paper (forced by the pre-LN residual
 * interface): the authors feed [a1, LN(a2)] to their FFN under a post-LN block
 * and have no W_O.
 *
 * SELF mode (the Updater's T state tokens of a trajectory): the last M =
 * s2_virtual tokens are the trajectory's virtual entities (MIXERS §9 option B,
 * our deviation: they are ordinary rows of W_t, so they persist from step to
 * step, an RMC-like recurrence, and W_t keeps its shape and storage format; the
 * paper appends learned rows at entry and drops them at exit). The first T − M
 * (standard) rows attend, 1-simplicially, to the standard rows only and,
 * 2-simplicially, to the M² pairs of virtual rows; virtual rows attend
 * 1-simplicially to all T rows and output their own value u as a2 (the paper's
 * "recurrence"). Only the standard rows' p and the virtual rows' l1, l2, u are
 * read; the projections run over all rows as the authors' code does. With
 * M = 1 there is one pair: its probability is 1, so W_P, l1 and l2 get no
 * gradient (valid, but the 2-simplicial part is then a constant per step).
 * CROSS mode (the Extractor's queries on W_t): the 1-simplicial part is plain
 * cross MHA, the 2-simplicial part attends to all T² pairs of state rows (no
 * virtual entities: MIXERS §9).
 * With K2 = 0 the block is exactly MHA in CROSS mode, and in SELF mode MHA under
 * the virtual-entity mask (tests/test_mixer_simplicial2.c).
 *
 * Activations: 1-simplicial q (fused qkv in SELF) / kv, a1, probabilities, and
 * the attention segments (SELF: standard then virtual); 2-simplicial p [n, d2],
 * luv [n_keys, 3d2], pair values, logits, probabilities, a2, LN stats, LN(a2)
 * and the 2-simplicial segments. Backward scratch: the gradients of the
 * projections, a1, p, luv, pair values, a2 and LN(a2). */
#include "mixer.h"

#include <stdio.h>
#include <stdlib.h>

#include "kernels/mixer_ops_simplicial2.h"

/* Segment counts and sizes of one use (from the host segments). */
typedef struct {
    int self, n_segs, d, d2, k1, k2;
    size_t probs1, pair_rows, probs2; /* floats */
    int max_q1[2], max_k1[2];         /* attention calls: SELF standard, virtual */
    int max_q2, max_k2;
} s2_dims;

/* Builds the segments (arrays nullable: sizes only). SELF: att[0..n) standard
 * rows over standard keys, att[n..2n) virtual rows over all keys. */
static s2_dims segments(const ws_model_config *c, ws_mix_mode mode, const ws_mix_shape *s,
                        ws_attn_seg *att, ws_s2_seg *s2)
{
    s2_dims n = {.self = mode == WS_MIX_SELF, .n_segs = s->n_segs, .d = c->d, .d2 = c->s2_dim,
                 .k1 = c->n_heads, .k2 = c->s2_heads};
    int M = c->s2_virtual;
    for (int i = 0; i < s->n_segs; i++) {
        const ws_attn_seg *g = &s->segs_host[i];
        int q_off = g->q_off, q_len = n.self ? g->q_len - M : g->q_len;
        int k_off = n.self ? g->k_off + g->k_len - M : g->k_off, k_len = n.self ? M : g->k_len;
        if (n.self) {
            int std = g->q_len - M;
            ws_attn_seg a = {g->q_off, std, g->k_off, std, (int32_t)n.probs1};
            n.probs1 += (size_t)n.k1 * std * std;
            ws_attn_seg v = {g->q_off + std, M, g->k_off, g->k_len, (int32_t)n.probs1};
            n.probs1 += (size_t)n.k1 * M * g->k_len;
            if (att) att[i] = a, att[s->n_segs + i] = v;
        }
        if (s2)
            s2[i] = (ws_s2_seg){q_off, q_len, k_off, k_len, (int32_t)n.probs2,
                                (int32_t)n.pair_rows};
        n.pair_rows += (size_t)k_len * k_len;
        n.probs2 += (size_t)n.k2 * q_len * k_len * k_len;
        if (q_len > n.max_q2) n.max_q2 = q_len;
        if (k_len > n.max_k2) n.max_k2 = k_len;
    }
    if (n.self) {
        n.max_q1[0] = n.max_k1[0] = s->max_q - M;
        n.max_q1[1] = M, n.max_k1[1] = s->max_k;
    } else {
        n.probs1 = (size_t)n.k1 * s->n_pairs;
        n.max_q1[0] = s->max_q, n.max_k1[0] = s->max_k;
    }
    return n;
}

/* Every buffer of a call's act region or, where it has one, of its scratch
 * (act and scratch differ in what they hold). */
typedef struct {
    float *q, *kv, *att, *probs1, *p, *luv, *pair, *logits, *probs2, *a2, *mean, *rstd, *a2n;
    ws_attn_seg *segs1;
    ws_s2_seg *segs2;
    size_t total; /* floats */
} s2_layout;

/* base NULL measures (total only). The segments' int32 fields need no more
 * than float alignment. */
static s2_layout layout_of(float *base, const s2_dims *n, const ws_mix_shape *s, int act)
{
    ws_carve c = ws_carve_at(base, sizeof(float));
    s2_layout L = {0};
    size_t d = (size_t)n->d, d2 = (size_t)n->d2, rows = (size_t)s->n;
    L.q = ws_carve_f(&c, rows * (n->self ? 3 : 1) * d);
    L.kv = ws_carve_f(&c, n->self ? 0 : (size_t)s->n_keys * 2 * d);
    L.att = ws_carve_f(&c, rows * d);
    if (act) {
        L.probs1 = ws_carve_f(&c, n->probs1);
        L.segs1 = ws_carve_take(&c, n->self ? 2 * (size_t)n->n_segs * sizeof(ws_attn_seg) : 0);
    }
    if (n->k2 > 0) {
        L.p = ws_carve_f(&c, rows * d2);
        L.luv = ws_carve_f(&c, (size_t)s->n_keys * 3 * d2);
        L.pair = ws_carve_f(&c, n->pair_rows * d2);
        L.a2 = ws_carve_f(&c, rows * d2);
        L.a2n = ws_carve_f(&c, rows * d2);
    }
    if (n->k2 > 0 && act) {
        L.logits = ws_carve_f(&c, n->probs2);
        L.probs2 = ws_carve_f(&c, n->probs2);
        L.mean = ws_carve_f(&c, rows);
        L.rstd = ws_carve_f(&c, rows);
        L.segs2 = ws_carve_take(&c, (size_t)n->n_segs * sizeof(ws_s2_seg));
    }
    L.total = ws_carve_floats(&c);
    return L;
}

static size_t act_floats(const ws_model_config *c, ws_mix_mode mode, const ws_mix_shape *s)
{
    s2_dims n = segments(c, mode, s, NULL, NULL);
    return layout_of(NULL, &n, s, 1).total;
}

static size_t scratch_floats(const ws_model_config *c, ws_mix_mode mode, const ws_mix_shape *s)
{
    s2_dims n = segments(c, mode, s, NULL, NULL);
    return layout_of(NULL, &n, s, 0).total;
}

static ws_status validate(const ws_model_config *c, ws_mix_mode mode, ws_error *err)
{
    if (c->s2_heads > 0 && c->s2_dim % c->s2_heads != 0)
        return ws_error_set(err, WS_ERR_INVALID,
                            "config: simplicial2 needs s2_heads (%d) to divide s2_dim (%d)",
                            c->s2_heads, c->s2_dim);
    if (mode == WS_MIX_SELF && c->s2_virtual >= c->n_state)
        return ws_error_set(err, WS_ERR_INVALID,
                            "config: simplicial2 in the Updater needs s2_virtual (%d) < n_state "
                            "(%d): the last s2_virtual state tokens are the virtual entities",
                            c->s2_virtual, c->n_state);
    return WS_OK;
}

static int supported(const ws_backend *be) { return be->ops->simplicial != NULL; }

/* Slots after the shared q/kv (or fused qkv): the 1-simplicial out, then the
 * 2-simplicial tensors (B, LN and the out-projection's half alone: no bias). */
enum { OUT = WS_MIX_OWN, S2_P, S2_LUV, S2_B, S2_LN, S2_OUT };

/* The 1-simplicial tensors are MHA's (same names, shapes and init, in MHA's
 * order), so that with s2_heads = 0 the mixer has exactly the mha mixer's
 * parameters. */
static void layout(ws_param_layout *L, const char *prefix, const ws_model_config *c,
                   ws_mix_mode mode, ws_mix_params *p)
{
    char name[48];
    int d = c->d, d2 = c->s2_dim;
    ws_mix_qkv_layout(L, prefix, d, mode, d, 2 * d, p);
    snprintf(name, sizeof name, "%s.out", prefix);
    p->at[OUT] = ws_layout_add_linear(L, name, d, d);
    if (c->s2_heads == 0) return;
    int dl = d2 / c->s2_heads;
    snprintf(name, sizeof name, "%s.s2.p", prefix);
    p->at[S2_P] = ws_layout_add_weight(L, name, d2, d);
    snprintf(name, sizeof name, "%s.s2.luv", prefix);
    p->at[S2_LUV] = ws_layout_add_weight(L, name, 3 * d2, d);
    /* a linear map H⊗H → H [δ, δ²] per head (so weight-decayed); the fan-in
     * init N(0, 1/δ²) has the variance of the authors' Glorot-uniform B */
    snprintf(name, sizeof name, "%s.s2.B", prefix);
    p->at[S2_B] = (ws_lin_off){ws_layout_add(L, name, d2, dl * dl, WS_INIT_FAN_IN), WS_NO_PARAM};
    snprintf(name, sizeof name, "%s.s2.ln", prefix);
    ws_ln_off ln = ws_layout_add_ln(L, name, d2);
    p->at[S2_LN] = (ws_lin_off){ln.g, ln.b};
    snprintf(name, sizeof name, "%s.s2.out", prefix);
    p->at[S2_OUT] = ws_layout_add_weight(L, name, d, d2);
}

/* The buffers of a call over its act (or scratch) region. */
typedef struct {
    s2_dims n;
    s2_layout A, S; /* act, scratch */
} s2_call;

static s2_call call_of(const ws_mix_call *call)
{
    s2_call c = {.n = segments(&call->m->cfg, call->mode, &call->s, NULL, NULL)};
    c.A = layout_of(call->act, &c.n, &call->s, 1);
    c.S = layout_of(call->scratch, &c.n, &call->s, 0);
    return c;
}

/* 1-simplicial attention call `which` (SELF: 0 standard, 1 virtual rows). */
static ws_attn_args attn1(const ws_mix_call *call, const s2_call *c, int which)
{
    int d = c->n.d, self = c->n.self;
    float *q = c->A.q, *kv = self ? q + d : c->A.kv;
    ws_attn_args a = {
        .out = c->A.att, .ldo = d, .probs = c->A.probs1,
        .q = q, .ldq = self ? 3 * d : d,
        .k = kv, .ldk = self ? 3 * d : 2 * d,
        .v = kv + d, .ldv = self ? 3 * d : 2 * d,
        .segs = self ? c->A.segs1 + which * c->n.n_segs
                     : call->s.segs,
        .n_segs = c->n.n_segs, .n_heads = c->n.k1, .d = d,
        .max_q_len = c->n.max_q1[which], .max_k_len = c->n.max_k1[which],
    };
    return a;
}

static ws_s2_args attn2(const ws_mix_call *call, const s2_call *c)
{
    int d2 = c->n.d2;
    float *luv = c->A.luv;
    ws_s2_args a = {
        .out = c->A.a2, .ldo = d2,
        .logits = c->A.logits, .probs = c->A.probs2,
        .pair = c->A.pair,
        .p = c->A.p, .l1 = luv, .l2 = luv + d2, .u = luv + 2 * d2,
        .ldp = d2, .ldl1 = 3 * d2, .ldl2 = 3 * d2, .ldu = 3 * d2,
        .b = WS_P(call->m, call->p->at[S2_B].w),
        .segs = c->A.segs2, .n_segs = c->n.n_segs,
        .n_heads = c->n.k2, .d2 = d2, .tau = call->m->cfg.s2_tau, .values_out = c->n.self,
        .max_q_len = c->n.max_q2, .max_k_len = c->n.max_k2,
    };
    return a;
}

/* Builds the segments on the host and uploads them into the act region. */
static ws_status upload_segments(const ws_mix_call *call, const s2_call *c)
{
    ws_backend *be = call->m->be;
    size_t n_att = c->n.self ? 2 * (size_t)c->n.n_segs : 0, n_s2 = (size_t)c->n.n_segs;
    ws_attn_seg *att = malloc((n_att ? n_att : 1) * sizeof *att);
    ws_s2_seg *s2 = malloc((n_s2 ? n_s2 : 1) * sizeof *s2);
    ws_status st = att && s2 ? WS_OK : WS_ERR_NOMEM;
    if (st == WS_OK) segments(&call->m->cfg, call->mode, &call->s, att, s2);
    if (st == WS_OK && n_att)
        st = ws_backend_upload(be, c->A.segs1, att, n_att * sizeof *att);
    if (st == WS_OK && c->n.k2 > 0)
        st = ws_backend_upload(be, c->A.segs2, s2, n_s2 * sizeof *s2);
    free(att);
    free(s2);
    return st;
}

static ws_status forward(const ws_mix_call *call)
{
    ws_model *m = call->m;
    ws_backend *be = m->be;
    const ws_lin_off *P = call->p->at;
    s2_call c = call_of(call);
    int d = c.n.d, d2 = c.n.d2, n = call->s.n, n_keys = call->s.n_keys;
    WS_TRY(upload_segments(call, &c));
    WS_TRY(ws_mix_qkv_forward(call, d, 2 * d, c.A.q, c.A.kv));
    for (int which = 0; which < 1 + c.n.self; which++) {
        ws_attn_args a = attn1(call, &c, which);
        WS_TRY(be->ops->attention_forward(be, &a));
    }
    WS_TRY(ws_mix_linear_forward(m, P[OUT], call->out, c.A.att, n, d, d));
    if (c.n.k2 == 0) return WS_OK;

    const struct ws_simplicial_ops *s2 = be->ops->simplicial;
    WS_TRY(ws_mix_linear_forward(m, P[S2_P], c.A.p, call->x, n, d, d2));
    WS_TRY(ws_mix_linear_forward(m, P[S2_LUV], c.A.luv, call->keys, n_keys, d, 3 * d2));
    ws_s2_args a = attn2(call, &c);
    WS_TRY(s2->pair_forward(be, &a));
    WS_TRY(s2->attention_forward(be, &a));
    WS_TRY(be->ops->layernorm_forward(be, c.A.a2n, c.A.mean, c.A.rstd,
                                      c.A.a2, WS_P(m, P[S2_LN].w), WS_P(m, P[S2_LN].b),
                                      n, d2));
    /* out += LN(a2) · s2.out.wᵀ */
    ws_gemm_args g = {.trans_b = 1, .m = n, .n = d, .k = d2, .alpha = 1.0f, .beta = 1.0f,
                      .a = c.A.a2n, .lda = d2, .b = WS_P(m, P[S2_OUT].w),
                      .ldb = d2, .c = call->out, .ldc = d, .batch = 1};
    return be->ops->gemm(be, &g);
}

/* The 1-simplicial part's backward: out-projection, attention, projections. */
static ws_status backward1(const ws_mix_call *call, const s2_call *c)
{
    ws_model *m = call->m;
    ws_backend *be = m->be;
    int d = c->n.d, n = call->s.n, self = c->n.self;
    float *gq = c->S.q, *gkv = self ? gq + d : c->S.kv;
    WS_TRY(ws_mix_linear_backward(m, call->p->at[OUT], c->S.att, call->d_out,
                                  c->A.att, n, d, d));
    for (int which = 0; which < 1 + self; which++) {
        ws_attn_args a = attn1(call, c, which);
        ws_attn_grads g = {.dq = gq, .dk = gkv, .dv = gkv + d, .dout = c->S.att};
        WS_TRY(be->ops->attention_backward(be, &a, &g));
    }
    return ws_mix_qkv_backward(call, d, 2 * d, gq, gkv);
}

/* The 2-simplicial part's backward, from ∂L/∂out to x, keys and its tensors. */
static ws_status backward2(const ws_mix_call *call, const s2_call *c)
{
    ws_model *m = call->m;
    ws_backend *be = m->be;
    const struct ws_simplicial_ops *s2 = be->ops->simplicial;
    const ws_lin_off *P = call->p->at;
    int d = c->n.d, d2 = c->n.d2, n = call->s.n;
    float *dluv = c->S.luv;
    WS_TRY(ws_mix_linear_backward(m, P[S2_OUT], c->S.a2n, call->d_out,
                                  c->A.a2n, n, d2, d));
    WS_TRY(be->ops->layernorm_backward(be, c->S.a2, WS_G(m, P[S2_LN].w),
                                       WS_G(m, P[S2_LN].b), c->S.a2n,
                                       c->A.a2, WS_P(m, P[S2_LN].w),
                                       c->A.mean, c->A.rstd, n, d2));
    ws_s2_args a = attn2(call, c);
    ws_s2_grads g = {.dp = c->S.p, .dl1 = dluv, .dl2 = dluv + d2, .du = dluv + 2 * d2,
                     .db = WS_G(m, P[S2_B].w), .dpair = c->S.pair,
                     .dout = c->S.a2};
    WS_TRY(s2->attention_backward(be, &a, &g));
    WS_TRY(s2->pair_backward(be, &a, &g));
    WS_TRY(ws_mix_linear_backward(m, P[S2_P], call->d_x, c->S.p, call->x, n, d, d2));
    return ws_mix_linear_backward(m, P[S2_LUV], call->d_keys, dluv, call->keys, call->s.n_keys,
                                  d, 3 * d2);
}

static ws_status backward(const ws_mix_call *call)
{
    s2_call c = call_of(call);
    WS_TRY(call->m->be->ops->fill(call->m->be, c.S.q, 0.0f, c.S.total));
    WS_TRY(backward1(call, &c));
    return c.n.k2 > 0 ? backward2(call, &c) : WS_OK;
}

const ws_mixer ws_mixer_simplicial2 = {
    .modes = WS_MIX_SELF | WS_MIX_CROSS,
    .validate = validate, .supported = supported, .layout = layout, .act_floats = act_floats,
    .scratch_floats = scratch_floats, .forward = forward, .backward = backward,
};
