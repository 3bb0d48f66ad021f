/* blocks.c — the pre-LN sub-blocks every layer is built from:
 *   self:  x + out(MHA(qkv(LN(x))))           (Updater state tokens)
 *   cross: x + out(MHA(q(LN(x)), kv(keys)))   (Updater → context, Extractor → state)
 *   mlp:   x + proj(gelu(fc(LN(x))))
 * Backward passes reuse the plan's gradient scratch, zeroing what they accumulate. */
#include "model_internal.h"

static ws_status zero(ws_model *m, float *p, size_t n)
{
    return m->be->ops->fill(m->be, p, 0.0f, n);
}

ws_status ws_ln_forward(ws_model *m, const ws_ln_off *o, ws_ln_act *a, float *out,
                        const float *in, int n)
{
    return m->be->ops->layernorm_forward(m->be, out, a->mean, a->rstd, in, WS_P(m, o->g),
                                         WS_P(m, o->b), n, m->cfg.d);
}

ws_status ws_ln_backward(ws_model *m, const ws_ln_off *o, const ws_ln_act *a, float *d_in,
                         const float *d_out, const float *in, int n)
{
    return m->be->ops->layernorm_backward(m->be, d_in, WS_G(m, o->g), WS_G(m, o->b), d_out, in,
                                          WS_P(m, o->g), a->mean, a->rstd, n, m->cfg.d);
}

static ws_attn_args attn_args(const ws_model *m, const ws_attn_act *a, const float *q, int ldq,
                              const float *k, const float *v, int ldkv)
{
    ws_attn_args args = {
        .out = a->att, .ldo = m->cfg.d, .probs = a->probs, .q = q, .ldq = ldq,
        .k = k, .ldk = ldkv, .v = v, .ldv = ldkv, .segs = a->segs, .n_segs = a->n_segs,
        .n_heads = m->cfg.n_heads, .d = m->cfg.d, .max_q_len = a->max_q, .max_k_len = a->max_k,
    };
    return args;
}

/* out-projection and residual: x_out = x_in + out(att) */
static ws_status out_proj_forward(ws_model *m, const ws_lin_off *o, ws_attn_act *a,
                                  const float *x_in, int n)
{
    ws_backend *be = m->be;
    int d = m->cfg.d;
    WS_TRY(be->ops->linear_forward(be, a->x_out, a->att, WS_P(m, o->w), WS_P(m, o->b), n, d, d));
    return be->ops->add_forward(be, a->x_out, a->x_out, x_in, (size_t)n * d);
}

/* d_att = ∂L/∂att from d_x through the out-projection (d_x itself passes on). */
static ws_status out_proj_backward(ws_model *m, const ws_lin_off *o, ws_attn_act *a,
                                   const float *d_x, int n)
{
    ws_backend *be = m->be;
    int d = m->cfg.d;
    float *d_att = m->plan.scratch.d_att;
    WS_TRY(zero(m, d_att, (size_t)n * d));
    return be->ops->linear_backward(be, d_att, WS_G(m, o->w), WS_G(m, o->b), d_x, a->att,
                                    WS_P(m, o->w), n, d, d);
}

ws_status ws_self_forward(ws_model *m, const ws_self_off *o, ws_attn_act *a, const float *x_in,
                          int n)
{
    ws_backend *be = m->be;
    int d = m->cfg.d;
    WS_TRY(ws_ln_forward(m, &o->ln, &a->ln, a->ln.out, x_in, n));
    WS_TRY(be->ops->linear_forward(be, a->q, a->ln.out, WS_P(m, o->qkv.w), WS_P(m, o->qkv.b), n,
                                   d, 3 * d));
    ws_attn_args args = attn_args(m, a, a->q, 3 * d, a->q + d, a->q + 2 * d, 3 * d);
    WS_TRY(be->ops->attention_forward(be, &args));
    return out_proj_forward(m, &o->out, a, x_in, n);
}

ws_status ws_self_backward(ws_model *m, const ws_self_off *o, ws_attn_act *a,
                           const float *x_in, float *d_x, int n)
{
    ws_backend *be = m->be;
    ws_grad_scratch *s = &m->plan.scratch;
    int d = m->cfg.d;
    WS_TRY(out_proj_backward(m, &o->out, a, d_x, n));
    WS_TRY(zero(m, s->d_q, (size_t)n * 3 * d));
    ws_attn_args args = attn_args(m, a, a->q, 3 * d, a->q + d, a->q + 2 * d, 3 * d);
    ws_attn_grads g = {.dq = s->d_q, .dk = s->d_q + d, .dv = s->d_q + 2 * d, .dout = s->d_att};
    WS_TRY(be->ops->attention_backward(be, &args, &g));
    WS_TRY(zero(m, s->d_ln, (size_t)n * d));
    WS_TRY(be->ops->linear_backward(be, s->d_ln, WS_G(m, o->qkv.w), WS_G(m, o->qkv.b), s->d_q,
                                    a->ln.out, WS_P(m, o->qkv.w), n, d, 3 * d));
    return ws_ln_backward(m, &o->ln, &a->ln, d_x, s->d_ln, x_in, n);
}

ws_status ws_cross_forward(ws_model *m, const ws_cross_off *o, ws_attn_act *a, const float *x_in,
                           int n, const float *keys, int n_keys)
{
    ws_backend *be = m->be;
    int d = m->cfg.d;
    WS_TRY(ws_ln_forward(m, &o->ln, &a->ln, a->ln.out, x_in, n));
    WS_TRY(be->ops->linear_forward(be, a->q, a->ln.out, WS_P(m, o->q.w), WS_P(m, o->q.b), n, d,
                                   d));
    WS_TRY(be->ops->linear_forward(be, a->kv, keys, WS_P(m, o->kv.w), WS_P(m, o->kv.b), n_keys,
                                   d, 2 * d));
    ws_attn_args args = attn_args(m, a, a->q, d, a->kv, a->kv + d, 2 * d);
    WS_TRY(be->ops->attention_forward(be, &args));
    return out_proj_forward(m, &o->out, a, x_in, n);
}

ws_status ws_cross_backward(ws_model *m, const ws_cross_off *o, ws_attn_act *a,
                            const float *x_in, float *d_x, int n, const float *keys,
                            float *d_keys, int n_keys)
{
    ws_backend *be = m->be;
    ws_grad_scratch *s = &m->plan.scratch;
    int d = m->cfg.d;
    WS_TRY(out_proj_backward(m, &o->out, a, d_x, n));
    WS_TRY(zero(m, s->d_q, (size_t)n * d));
    WS_TRY(zero(m, s->d_kv, (size_t)n_keys * 2 * d));
    ws_attn_args args = attn_args(m, a, a->q, d, a->kv, a->kv + d, 2 * d);
    ws_attn_grads g = {.dq = s->d_q, .dk = s->d_kv, .dv = s->d_kv + d, .dout = s->d_att};
    WS_TRY(be->ops->attention_backward(be, &args, &g));
    WS_TRY(be->ops->linear_backward(be, d_keys, WS_G(m, o->kv.w), WS_G(m, o->kv.b), s->d_kv,
                                    keys, WS_P(m, o->kv.w), n_keys, d, 2 * d));
    WS_TRY(zero(m, s->d_ln, (size_t)n * d));
    WS_TRY(be->ops->linear_backward(be, s->d_ln, WS_G(m, o->q.w), WS_G(m, o->q.b), s->d_q,
                                    a->ln.out, WS_P(m, o->q.w), n, d, d));
    return ws_ln_backward(m, &o->ln, &a->ln, d_x, s->d_ln, x_in, n);
}

ws_status ws_mlp_forward(ws_model *m, const ws_mlp_off *o, ws_mlp_act *a, const float *x_in,
                         int n)
{
    ws_backend *be = m->be;
    int d = m->cfg.d;
    WS_TRY(ws_ln_forward(m, &o->ln, &a->ln, a->ln.out, x_in, n));
    WS_TRY(be->ops->linear_forward(be, a->fc, a->ln.out, WS_P(m, o->fc.w), WS_P(m, o->fc.b), n,
                                   d, 4 * d));
    WS_TRY(be->ops->gelu_forward(be, a->act, a->fc, (size_t)n * 4 * d));
    WS_TRY(be->ops->linear_forward(be, a->x_out, a->act, WS_P(m, o->proj.w),
                                   WS_P(m, o->proj.b), n, 4 * d, d));
    return be->ops->add_forward(be, a->x_out, a->x_out, x_in, (size_t)n * d);
}

ws_status ws_mlp_backward(ws_model *m, const ws_mlp_off *o, ws_mlp_act *a, const float *x_in,
                          float *d_x, int n)
{
    ws_backend *be = m->be;
    ws_grad_scratch *s = &m->plan.scratch;
    int d = m->cfg.d;
    size_t hidden = (size_t)n * 4 * d;
    WS_TRY(zero(m, s->d_act, hidden));
    WS_TRY(be->ops->linear_backward(be, s->d_act, WS_G(m, o->proj.w), WS_G(m, o->proj.b), d_x,
                                    a->act, WS_P(m, o->proj.w), n, 4 * d, d));
    WS_TRY(zero(m, s->d_fc, hidden));
    WS_TRY(be->ops->gelu_backward(be, s->d_fc, a->fc, s->d_act, hidden));
    WS_TRY(zero(m, s->d_ln, (size_t)n * d));
    WS_TRY(be->ops->linear_backward(be, s->d_ln, WS_G(m, o->fc.w), WS_G(m, o->fc.b), s->d_fc,
                                    a->ln.out, WS_P(m, o->fc.w), n, d, 4 * d));
    return ws_ln_backward(m, &o->ln, &a->ln, d_x, s->d_ln, x_in, n);
}
