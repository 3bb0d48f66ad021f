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

/* Carves the activation (or scratch) region; probs is NULL for scratch. */
static mha_bufs carve(float *base, const ws_model_config *c, ws_mix_mode mode,
                      const ws_mix_shape *s, int with_probs)
{
    size_t d = (size_t)c->d;
    mha_bufs b = {0};
    b.q = base;
    base += (size_t)s->n * (mode == WS_MIX_SELF ? 3 : 1) * d;
    if (mode == WS_MIX_CROSS) {
        b.kv = base;
        base += (size_t)s->n_keys * 2 * d;
    }
    b.att = base;
    base += (size_t)s->n * d;
    if (with_probs) b.probs = base;
    return b;
}

static size_t act_floats(const ws_model_config *c, ws_mix_mode mode, const ws_mix_shape *s)
{
    size_t d = (size_t)c->d;
    size_t q = (size_t)s->n * (mode == WS_MIX_SELF ? 3 : 1) * d;
    size_t kv = mode == WS_MIX_CROSS ? (size_t)s->n_keys * 2 * d : 0;
    return q + kv + (size_t)s->n * d + (size_t)c->n_heads * s->n_pairs;
}

static size_t scratch_floats(const ws_model_config *c, ws_mix_mode mode, const ws_mix_shape *s)
{
    return act_floats(c, mode, s) - (size_t)c->n_heads * s->n_pairs;
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

static void layout(ws_param_layout *L, const char *prefix, const ws_model_config *c,
                   ws_mix_mode mode)
{
    char name[48];
    int d = c->d;
    if (mode == WS_MIX_SELF) {
        snprintf(name, sizeof name, "%s.qkv", prefix);
        ws_layout_add_linear(L, name, 3 * d, d);
    } else {
        snprintf(name, sizeof name, "%s.q", prefix);
        ws_layout_add_linear(L, name, d, d);
        snprintf(name, sizeof name, "%s.kv", prefix);
        ws_layout_add_linear(L, name, 2 * d, d);
    }
    snprintf(name, sizeof name, "%s.out", prefix);
    ws_layout_add_linear(L, name, d, d);
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
    };
    return args;
}

static ws_status forward(const ws_mix_call *call)
{
    ws_model *m = call->m;
    ws_backend *be = m->be;
    int d = m->cfg.d, n = call->s.n;
    const char *p = call->prefix;
    mha_bufs b = carve(call->act, &m->cfg, call->mode, &call->s, 1);
    if (call->mode == WS_MIX_SELF) {
        WS_TRY(be->ops->linear_forward(be, b.q, call->x, WS_P(m, ws_model_param_off(m, p, ".qkv.w")),
                                       WS_P(m, ws_model_param_off(m, p, ".qkv.b")), n, d, 3 * d));
    } else {
        WS_TRY(be->ops->linear_forward(be, b.q, call->x, WS_P(m, ws_model_param_off(m, p, ".q.w")),
                                       WS_P(m, ws_model_param_off(m, p, ".q.b")), n, d, d));
        WS_TRY(be->ops->linear_forward(be, b.kv, call->keys,
                                       WS_P(m, ws_model_param_off(m, p, ".kv.w")),
                                       WS_P(m, ws_model_param_off(m, p, ".kv.b")), call->s.n_keys,
                                       d, 2 * d));
    }
    ws_attn_args args = attn_args(call, &b);
    WS_TRY(be->ops->attention_forward(be, &args));
    return be->ops->linear_forward(be, call->out, b.att, WS_P(m, ws_model_param_off(m, p, ".out.w")),
                                   WS_P(m, ws_model_param_off(m, p, ".out.b")), n, d, d);
}

static ws_status backward(const ws_mix_call *call)
{
    ws_model *m = call->m;
    ws_backend *be = m->be;
    int d = m->cfg.d, n = call->s.n, self = call->mode == WS_MIX_SELF;
    const char *p = call->prefix;
    mha_bufs b = carve(call->act, &m->cfg, call->mode, &call->s, 1);
    mha_bufs g = carve(call->scratch, &m->cfg, call->mode, &call->s, 0);
    WS_TRY(be->ops->fill(be, g.q, 0.0f, scratch_floats(&m->cfg, call->mode, &call->s)));
    size_t out_w = ws_model_param_off(m, p, ".out.w");
    WS_TRY(be->ops->linear_backward(be, g.att, WS_G(m, out_w),
                                    WS_G(m, ws_model_param_off(m, p, ".out.b")), call->d_out,
                                    b.att, WS_P(m, out_w), n, d, d));
    ws_attn_args args = attn_args(call, &b);
    ws_attn_grads ag = {.dq = g.q, .dk = self ? g.q + d : g.kv, .dv = self ? g.q + 2 * d : g.kv + d,
                        .dout = g.att};
    WS_TRY(be->ops->attention_backward(be, &args, &ag));
    if (self) {
        size_t w = ws_model_param_off(m, p, ".qkv.w");
        return be->ops->linear_backward(be, call->d_x, WS_G(m, w),
                                        WS_G(m, ws_model_param_off(m, p, ".qkv.b")), g.q, call->x,
                                        WS_P(m, w), n, d, 3 * d);
    }
    size_t kv_w = ws_model_param_off(m, p, ".kv.w"), q_w = ws_model_param_off(m, p, ".q.w");
    WS_TRY(be->ops->linear_backward(be, call->d_keys, WS_G(m, kv_w),
                                    WS_G(m, ws_model_param_off(m, p, ".kv.b")), g.kv, call->keys,
                                    WS_P(m, kv_w), call->s.n_keys, d, 2 * d));
    return be->ops->linear_backward(be, call->d_x, WS_G(m, q_w),
                                    WS_G(m, ws_model_param_off(m, p, ".q.b")), g.q, call->x,
                                    WS_P(m, q_w), n, d, d);
}

const ws_mixer ws_mixer_mha = {
    .kind = WS_MIXER_MHA, .name = "mha", .modes = WS_MIX_SELF | WS_MIX_CROSS,
    .validate = validate, .supported = supported, .layout = layout, .act_floats = act_floats,
    .scratch_floats = scratch_floats, .forward = forward, .backward = backward,
};
