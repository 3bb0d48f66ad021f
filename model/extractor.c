/* extractor.c — p = E(W_t, Q_t) (DESIGN §2): per layer Q += mixer(LN Q, W_t)
 * (MHA by default), Q += MLP(LN Q) — cross only, so an answer never depends on
 * which other queries share the batch — then logit = w_o·LN_o(Q) + b_o, or a
 * readout variant (rn, mixer.h) on LN_o(Q) and W_t. */
#include "mixer.h"

static float *query_tokens(const ws_exec *x, float *base)
{
    return base + (size_t)x->plan.n_instr * x->m->cfg.d;
}

static const float *stream_out(const ws_exec *x)
{
    int L = x->m->cfg.n_ext_layers;
    return L > 0 ? x->plan.ext[L - 1].mlp.x_out : query_tokens(x, x->plan.tok);
}

ws_status ws_extractor_forward(ws_exec *x, const float *w)
{
    ws_model *m = x->m;
    ws_backend *be = m->be;
    ws_plan *p = &x->plan;
    const ws_param_offsets *o = &m->off;
    int n = p->n_query;
    if (n == 0) return WS_OK;
    const float *q = query_tokens(x, p->tok);
    for (int l = 0; l < m->cfg.n_ext_layers; l++) {
        ws_ext_layer_act *la = &p->ext[l];
        WS_TRY(ws_mix_forward(x, &o->ext[l].cross, &la->cross, q, w));
        WS_TRY(ws_mlp_forward(x, &o->ext[l].mlp, &la->mlp, la->cross.x_out, n));
        q = la->mlp.x_out;
    }
    WS_TRY(ws_ln_forward(m, &o->out_ln, &p->out_ln, p->out_ln.out, q, n));
    if (m->readout) return m->readout->forward(x, p->readout_act, p->out_ln.out, w, p->logits);
    return be->ops->linear_forward(be, p->logits, p->out_ln.out, WS_P(m, o->head.w),
                                   WS_P(m, o->head.b), n, m->cfg.d, 1);
}

ws_status ws_extractor_backward(ws_exec *x, const float *w, float *d_w)
{
    ws_model *m = x->m;
    ws_backend *be = m->be;
    ws_plan *p = &x->plan;
    const ws_param_offsets *o = &m->off;
    int n = p->n_query;
    if (n == 0) return WS_OK;
    /* The query stream's gradient lands in the query rows of d_tok, where the
     * fact embedding's backward expects it. */
    float *d_q = query_tokens(x, p->d_tok);
    if (m->readout)
        WS_TRY(m->readout->backward(x, p->readout_act, p->scratch.mix, p->out_ln.out, w,
                                    p->d_logits, p->d_lno, d_w));
    else
        WS_TRY(be->ops->linear_backward(be, p->d_lno, WS_G(m, o->head.w), WS_G(m, o->head.b),
                                        p->d_logits, p->out_ln.out, WS_P(m, o->head.w), n,
                                        m->cfg.d, 1));
    WS_TRY(ws_ln_backward(m, &o->out_ln, &p->out_ln, d_q, p->d_lno, stream_out(x), n));
    for (int l = m->cfg.n_ext_layers - 1; l >= 0; l--) {
        ws_ext_layer_act *la = &p->ext[l];
        const float *x_in = l > 0 ? p->ext[l - 1].mlp.x_out : query_tokens(x, p->tok);
        WS_TRY(ws_mlp_backward(x, &o->ext[l].mlp, &la->mlp, la->cross.x_out, d_q, n));
        WS_TRY(ws_mix_backward(x, &o->ext[l].cross, &la->cross, x_in, d_q, w, d_w));
    }
    return WS_OK;
}
