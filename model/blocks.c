/* blocks.c — the pre-LN sub-blocks every layer is built from:
 *   mixer: x + mixer(LN(x), keys)   (mixer.h: MHA by default; SELF for the Updater's
 *                                    state tokens, CROSS for Updater → context and
 *                                    Extractor → state)
 *   mlp:   x + proj(gelu(fc(LN(x))))
 * Backward passes reuse the context's gradient scratch, zeroing what they accumulate. */
#include "mixer.h"

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

static ws_mix_call mix_call(ws_exec *x, const ws_mix_off *o, ws_mix_act *a, const float *keys)
{
    ws_mix_call call = {
        .m = x->m, .p = &o->p, .mode = (ws_mix_mode)o->mode, .s = a->shape,
        .act = a->mix, .scratch = x->plan.scratch.mix, .x = a->ln.out,
        .keys = o->mode == WS_MIX_SELF ? a->ln.out : keys, .out = a->x_out,
        .forward_only = !x->plan.train,
    };
    return call;
}

ws_status ws_mix_forward(ws_exec *x, const ws_mix_off *o, ws_mix_act *a, const float *x_in,
                         const float *keys)
{
    ws_model *m = x->m;
    int n = a->shape.n;
    WS_TRY(ws_ln_forward(m, &o->ln, &a->ln, a->ln.out, x_in, n));
    ws_mix_call call = mix_call(x, o, a, keys);
    WS_TRY(o->mixer->forward(&call));
    return m->be->ops->add_forward(m->be, a->x_out, a->x_out, x_in, (size_t)n * m->cfg.d);
}

ws_status ws_mix_backward(ws_exec *x, const ws_mix_off *o, ws_mix_act *a, const float *x_in,
                          float *d_x, const float *keys, float *d_keys)
{
    ws_model *m = x->m;
    float *d_ln = x->plan.scratch.d_ln;
    int n = a->shape.n;
    WS_TRY(zero(m, d_ln, (size_t)n * m->cfg.d));
    ws_mix_call call = mix_call(x, o, a, keys);
    call.d_out = d_x;
    call.d_x = d_ln;
    call.d_keys = o->mode == WS_MIX_SELF ? d_ln : d_keys;
    WS_TRY(o->mixer->backward(&call));
    return ws_ln_backward(m, &o->ln, &a->ln, d_x, d_ln, x_in, n);
}

ws_status ws_mlp_forward(ws_exec *x, const ws_mlp_off *o, ws_mlp_act *a, const float *x_in,
                         int n)
{
    ws_model *m = x->m;
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

ws_status ws_mlp_backward(ws_exec *x, const ws_mlp_off *o, ws_mlp_act *a, const float *x_in,
                          float *d_x, int n)
{
    ws_model *m = x->m;
    ws_backend *be = m->be;
    ws_grad_scratch *s = &x->plan.scratch;
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
