/* embed.c — facts to tokens (DESIGN §2, Facts):
 *   u = Σ_i (code_i(sym_i) + E_sym[id_i] + E_slot[i])  or  u = W_raw x;   f = LN_f(u)
 * (code_i: the fixed code of the symbol's bytes rolled by slot i, hashed encoding
 * only; E_sym is skipped for a symbol without a vocabulary id)
 *   instruction token = f + E_val[value]; query token = f
 * and the per-trajectory context C_b = [c_null; instruction tokens of b]. */
#include "model_internal.h"

ws_status ws_embed_forward(ws_exec *x)
{
    ws_model *m = x->m;
    ws_backend *be = m->be;
    ws_plan *p = &x->plan;
    const ws_param_offsets *o = &m->off;
    int d = m->cfg.d, S = m->cfg.max_fact_len, n = p->n_facts;
    if (n > 0) {
        if (p->has_raw)
            WS_TRY(be->ops->linear_forward(be, p->u, p->raw, WS_P(m, o->raw), NULL, n,
                                           m->cfg.d_raw, d));
        WS_TRY(be->ops->embedding_forward(be, p->u, WS_P(m, o->sym), p->sym_ids, n, S, d,
                                          p->has_raw));
        if (p->sym_hash) WS_TRY(be->ops->symcode_forward(be, p->u, p->sym_hash, n, S, d, 1));
        WS_TRY(be->ops->embedding_forward(be, p->u, WS_P(m, o->slot), p->slot_ids, n, S, d, 1));
        WS_TRY(ws_ln_forward(m, &o->fact_ln, &p->fact_ln, p->tok, p->u, n));
        WS_TRY(be->ops->embedding_forward(be, p->tok, WS_P(m, o->val), p->val_ids, n, 1, d, 1));
    }
    /* The context gathers instruction tokens and c_null into per-trajectory runs. */
    WS_TRY(be->ops->embedding_forward(be, p->ctx, p->tok, p->ctx_tok, p->n_ctx, 1, d, 0));
    return be->ops->embedding_forward(be, p->ctx, WS_P(m, o->null), p->ctx_null, p->n_ctx, 1, d,
                                      1);
}

ws_status ws_embed_backward(ws_exec *x)
{
    ws_model *m = x->m;
    ws_backend *be = m->be;
    ws_plan *p = &x->plan;
    const ws_param_offsets *o = &m->off;
    int d = m->cfg.d, S = m->cfg.max_fact_len, n = p->n_facts;
    WS_TRY(be->ops->embedding_backward(be, p->d_tok, p->d_ctx, p->ctx_tok, p->n_ctx, 1, d));
    WS_TRY(be->ops->embedding_backward(be, WS_G(m, o->null), p->d_ctx, p->ctx_null, p->n_ctx, 1,
                                       d));
    if (n == 0) return WS_OK;
    WS_TRY(be->ops->embedding_backward(be, WS_G(m, o->val), p->d_tok, p->val_ids, n, 1, d));
    WS_TRY(ws_ln_backward(m, &o->fact_ln, &p->fact_ln, p->d_u, p->d_tok, p->u, n));
    WS_TRY(be->ops->embedding_backward(be, WS_G(m, o->sym), p->d_u, p->sym_ids, n, S, d));
    WS_TRY(be->ops->embedding_backward(be, WS_G(m, o->slot), p->d_u, p->slot_ids, n, S, d));
    if (p->has_raw)
        WS_TRY(be->ops->linear_backward(be, NULL, WS_G(m, o->raw), NULL, p->d_u, p->raw,
                                        WS_P(m, o->raw), n, m->cfg.d_raw, d));
    return WS_OK;
}
