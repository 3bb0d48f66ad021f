/* mixer_mha.c — multi-head dot-product attention, the default mixer
 * (MIXERS.md §1): SELF out(MHA(qkv(x))) with one fused [3d, d] projection,
 * CROSS out(MHA(q(x), kv(keys))) with q [d, d] and kv [2d, d].
 *
 * Activations: q ([n, 3d] fused qkv in SELF mode, [n, d] in CROSS), kv
 * ([n_keys, 2d], CROSS only), att [n, d] (heads before the out-projection) and
 * the softmax probabilities (n_heads · n_pairs). Backward scratch: d_q, d_kv
 * (CROSS), d_att, in the same shapes. */
#include "mixer.h"

#include <stdio.h>

typedef struct {
    float *q, *kv, *att, *probs;
} mha_bufs;

/* Carves the activation region (with probs) or the scratch (without); base
 * NULL measures: *floats receives the size. */
static mha_bufs carve(float *base, const ws_model_config *c, ws_mix_mode mode,
                      const ws_mix_shape *s, int with_probs, size_t *floats)
{
    size_t d = (size_t)c->d;
    ws_carve k = ws_carve_at(base, sizeof(float));
    mha_bufs b = {0};
    b.q = ws_carve_f(&k, (size_t)s->n * (mode == WS_MIX_SELF ? 3 : 1) * d);
    if (mode == WS_MIX_CROSS) b.kv = ws_carve_f(&k, (size_t)s->n_keys * 2 * d);
    b.att = ws_carve_f(&k, (size_t)s->n * d);
    if (with_probs) b.probs = ws_carve_f(&k, (size_t)c->n_heads * s->n_pairs);
    if (floats) *floats = ws_carve_floats(&k);
    return b;
}

static size_t act_floats(const ws_model_config *c, ws_mix_mode mode, const ws_mix_shape *s)
{
    size_t n;
    carve(NULL, c, mode, s, 1, &n);
    return n;
}

static size_t scratch_floats(const ws_model_config *c, ws_mix_mode mode, const ws_mix_shape *s)
{
    size_t n;
    carve(NULL, c, mode, s, 0, &n);
    return n;
}

static ws_status validate(const ws_model_config *c, ws_mix_mode mode, ws_error *err)
{
    (void)c, (void)mode, (void)err; /* n_heads | d is checked for every config */
    return WS_OK;
}

static int supported(const ws_backend *be)
{
    (void)be; /* every backend has attention */
    return 1;
}

enum { OUT = WS_MIX_OWN }; /* slots: the shared q/kv (or fused qkv), then out */

static void layout(ws_param_layout *L, const char *prefix, const ws_model_config *c,
                   ws_mix_mode mode, ws_mix_params *p)
{
    char name[48];
    ws_mix_qkv_layout(L, prefix, c->d, mode, c->d, 2 * c->d, p);
    snprintf(name, sizeof name, "%s.out", prefix);
    p->at[OUT] = ws_layout_add_linear(L, name, c->d, c->d);
}

/* Attention arguments over the carved buffers: Q, K, V views and their strides. */
static ws_attn_args attn_args(const ws_mix_call *call, const mha_bufs *b)
{
    int d = call->m->cfg.d, self = call->mode == WS_MIX_SELF;
    ws_attn_args args = {
        .out = b->att, .ldo = d, .probs = b->probs,
        .q = b->q, .ldq = self ? 3 * d : d,
        .k = self ? b->q + d : b->kv, .ldk = self ? 3 * d : 2 * d,
        .v = self ? b->q + 2 * d : b->kv + d, .ldv = self ? 3 * d : 2 * d,
        .segs = call->s.segs, .n_segs = call->s.n_segs, .n_heads = call->m->cfg.n_heads, .d = d,
        .max_q_len = call->s.max_q, .max_k_len = call->s.max_k,
        .forward_only = call->forward_only,
    };
    return args;
}

static ws_status forward(const ws_mix_call *call)
{
    ws_model *m = call->m;
    ws_backend *be = m->be;
    int d = m->cfg.d;
    mha_bufs b = carve(call->act, &m->cfg, call->mode, &call->s, 1, NULL);
    WS_TRY(ws_mix_qkv_forward(call, d, 2 * d, b.q, b.kv));
    ws_attn_args args = attn_args(call, &b);
    WS_TRY(be->ops->attention_forward(be, &args));
    return ws_mix_linear_forward(m, call->p->at[OUT], call->out, b.att, call->s.n, d, d);
}

static ws_status backward(const ws_mix_call *call)
{
    ws_model *m = call->m;
    ws_backend *be = m->be;
    int d = m->cfg.d, self = call->mode == WS_MIX_SELF;
    mha_bufs b = carve(call->act, &m->cfg, call->mode, &call->s, 1, NULL);
    size_t g_floats;
    mha_bufs g = carve(call->scratch, &m->cfg, call->mode, &call->s, 0, &g_floats);
    WS_TRY(be->ops->fill(be, g.q, 0.0f, g_floats));
    WS_TRY(ws_mix_linear_backward(m, call->p->at[OUT], g.att, call->d_out, b.att, call->s.n, d,
                                  d));
    ws_attn_args args = attn_args(call, &b);
    ws_attn_grads ag = {.dq = g.q, .dk = self ? g.q + d : g.kv, .dv = self ? g.q + 2 * d : g.kv + d,
                        .dout = g.att};
    WS_TRY(be->ops->attention_backward(be, &args, &ag));
    return ws_mix_qkv_backward(call, d, 2 * d, g.q, g.kv);
}

const ws_mixer ws_mixer_mha = {
    .modes = WS_MIX_SELF | WS_MIX_CROSS,
    .validate = validate, .supported = supported, .layout = layout, .act_floats = act_floats,
    .scratch_floats = scratch_floats, .forward = forward, .backward = backward,
};
