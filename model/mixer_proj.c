/* mixer_proj.c — the linear maps every mixer is built around (mixer.h): its
 * input projections, SELF one fused qkv over x, CROSS q over x and kv over the
 * keys, and a single linear by its resolved offsets. */
#include <stdio.h>

#include "mixer.h"

void ws_mix_qkv_layout(ws_param_layout *L, const char *prefix, int d, ws_mix_mode mode,
                       int q_dim, int kv_dim, ws_mix_params *p)
{
    char name[48];
    if (mode == WS_MIX_SELF) {
        snprintf(name, sizeof name, "%s.qkv", prefix);
        p->at[WS_MIX_Q] = ws_layout_add_linear(L, name, q_dim + kv_dim, d);
        return;
    }
    snprintf(name, sizeof name, "%s.q", prefix);
    p->at[WS_MIX_Q] = ws_layout_add_linear(L, name, q_dim, d);
    snprintf(name, sizeof name, "%s.kv", prefix);
    p->at[WS_MIX_KV] = ws_layout_add_linear(L, name, kv_dim, d);
}

ws_status ws_mix_qkv_forward(const ws_mix_call *call, int q_dim, int kv_dim, float *q,
                             float *kv)
{
    const ws_model *m = call->m;
    int d = m->cfg.d, n = call->s.n;
    if (call->mode == WS_MIX_SELF)
        return ws_mix_linear_forward(m, call->p->at[WS_MIX_Q], q, call->x, n, d, q_dim + kv_dim);
    WS_TRY(ws_mix_linear_forward(m, call->p->at[WS_MIX_Q], q, call->x, n, d, q_dim));
    return ws_mix_linear_forward(m, call->p->at[WS_MIX_KV], kv, call->keys, call->s.n_keys, d,
                                 kv_dim);
}

ws_status ws_mix_qkv_backward(const ws_mix_call *call, int q_dim, int kv_dim, const float *dq,
                              const float *dkv)
{
    const ws_model *m = call->m;
    int d = m->cfg.d, n = call->s.n;
    if (call->mode == WS_MIX_SELF)
        return ws_mix_linear_backward(m, call->p->at[WS_MIX_Q], call->d_x, dq, call->x, n, d,
                                      q_dim + kv_dim);
    WS_TRY(ws_mix_linear_backward(m, call->p->at[WS_MIX_KV], call->d_keys, dkv, call->keys,
                                  call->s.n_keys, d, kv_dim));
    return ws_mix_linear_backward(m, call->p->at[WS_MIX_Q], call->d_x, dq, call->x, n, d, q_dim);
}

ws_status ws_mix_linear_forward(const ws_model *m, ws_lin_off o, float *y, const float *x,
                                int n, int in, int out)
{
    const float *b = o.b == WS_NO_PARAM ? NULL : WS_P(m, o.b);
    return m->be->ops->linear_forward(m->be, y, x, WS_P(m, o.w), b, n, in, out);
}

ws_status ws_mix_linear_backward(const ws_model *m, ws_lin_off o, float *dx, const float *dy,
                                 const float *x, int n, int in, int out)
{
    float *db = o.b == WS_NO_PARAM ? NULL : WS_G(m, o.b);
    return m->be->ops->linear_backward(m->be, dx, WS_G(m, o.w), db, dy, x, WS_P(m, o.w), n, in,
                                       out);
}
