/* updater.c — W_t = U(W_{t-1}, I_t) (DESIGN §2):
 *   X = W_{t-1} + P  (W_0 for trajectories that start from it)
 *   per layer: X += mixer(LN X) (MHA by default); X += MHA(LN X, C); X += MLP(LN X)
 *   W_t = LN_w(X)    (keeps the state bounded over long rollouts)
 * or, for an Updater variant (rmc, mixer.h), W_t = variant(X, C, W_{t-1}).
 * W_{t-1} is a constant: no gradient flows into it, except into W_0. */
#include "mixer.h"

/* The residual stream after the last layer. */
static const float *stream_out(const ws_exec *x)
{
    const ws_plan *p = &x->plan;
    int L = x->m->cfg.n_upd_layers;
    return L > 0 ? p->upd[L - 1].mlp.x_out : p->x0;
}

ws_status ws_updater_forward(ws_exec *x, const float *w_prev, float *w_out)
{
    ws_model *m = x->m;
    ws_backend *be = m->be;
    ws_plan *p = &x->plan;
    const ws_param_offsets *o = &m->off;
    int d = m->cfg.d, n = p->n_state_rows;
    if (w_prev)
        WS_TRY(be->ops->embedding_forward(be, p->x0, w_prev, p->ids_prev, n, 1, d, 0));
    else
        WS_TRY(be->ops->fill(be, p->x0, 0.0f, (size_t)n * d));
    WS_TRY(be->ops->embedding_forward(be, p->x0, WS_P(m, o->w0), p->ids_w0, n, 1, d, 1));
    WS_TRY(be->ops->embedding_forward(be, p->x0, WS_P(m, o->pos), p->ids_pos, n, 1, d, 1));
    if (m->upd_variant) return m->upd_variant->forward(x, p->upd_variant_act, w_prev, w_out);
    const float *h = p->x0;
    for (int l = 0; l < m->cfg.n_upd_layers; l++) {
        const ws_upd_layer_off *lo = &o->upd[l];
        ws_upd_layer_act *la = &p->upd[l];
        WS_TRY(ws_mix_forward(x, &lo->self, &la->self, h, NULL));
        WS_TRY(ws_mix_forward(x, &lo->cross, &la->cross, la->self.x_out, p->ctx));
        WS_TRY(ws_mlp_forward(x, &lo->mlp, &la->mlp, la->cross.x_out, n));
        h = la->mlp.x_out;
    }
    if (m->cfg.state_norm) return ws_ln_forward(m, &o->state_ln, &p->state_ln, w_out, h, n);
    return be->ops->copy(be, w_out, h, (size_t)n * d * sizeof(float));
}

/* ∂L/∂W_t (p->d_w) back through LN_w and the layers into ∂L/∂X_0 (p->d_x). */
static ws_status layers_backward(ws_exec *x)
{
    ws_model *m = x->m;
    ws_backend *be = m->be;
    ws_plan *p = &x->plan;
    const ws_param_offsets *o = &m->off;
    int d = m->cfg.d, n = p->n_state_rows;
    if (m->cfg.state_norm)
        WS_TRY(ws_ln_backward(m, &o->state_ln, &p->state_ln, p->d_x, p->d_w, stream_out(x), n));
    else
        WS_TRY(be->ops->add_backward(be, p->d_x, NULL, p->d_w, (size_t)n * d));
    for (int l = m->cfg.n_upd_layers - 1; l >= 0; l--) {
        const ws_upd_layer_off *lo = &o->upd[l];
        ws_upd_layer_act *la = &p->upd[l];
        const float *x_in = l > 0 ? p->upd[l - 1].mlp.x_out : p->x0;
        WS_TRY(ws_mlp_backward(x, &lo->mlp, &la->mlp, la->cross.x_out, p->d_x, n));
        WS_TRY(ws_mix_backward(x, &lo->cross, &la->cross, la->self.x_out, p->d_x, p->ctx,
                               p->d_ctx));
        WS_TRY(ws_mix_backward(x, &lo->self, &la->self, x_in, p->d_x, NULL, NULL));
    }
    return WS_OK;
}

/* The variant (rmc) fills p->d_x = ∂L/∂X_0 itself; both paths end in W_0 and P. */
ws_status ws_updater_backward(ws_exec *x)
{
    ws_model *m = x->m;
    ws_backend *be = m->be;
    ws_plan *p = &x->plan;
    const ws_param_offsets *o = &m->off;
    int d = m->cfg.d, n = p->n_state_rows;
    if (m->upd_variant)
        WS_TRY(m->upd_variant->backward(x, p->upd_variant_act, p->scratch.mix));
    else
        WS_TRY(layers_backward(x));
    WS_TRY(be->ops->embedding_backward(be, WS_G(m, o->w0), p->d_x, p->ids_w0, n, 1, d));
    return be->ops->embedding_backward(be, WS_G(m, o->pos), p->d_x, p->ids_pos, n, 1, d);
}
