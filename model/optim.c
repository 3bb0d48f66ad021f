/* optim.c — AdamW over the parameter table, with global-norm clipping
 * (torch.nn.utils.clip_grad_norm_ semantics: coefficient max/(norm+1e-6), capped at 1). */
#include <math.h>

#include "model_internal.h"

ws_optim_config ws_optim_config_default(void)
{
    return (ws_optim_config){.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                             .weight_decay = 0.01f, .clip_norm = 1.0f, .grad_scale = 1.0f};
}

ws_status ws_model_adamw_step(ws_model *m, const ws_optim_config *oc, float *grad_norm_out,
                              ws_error *err)
{
    ws_backend *be = m->be;
    float sumsq = 0.0f;
    const ws_tensor_info *only = oc->only ? ws_model_tensor_by_name(m, oc->only) : NULL;
    if (oc->only && !only)
        return ws_error_set(err, WS_ERR_INVALID, "optim: no tensor %s", oc->only);
    ws_status st =
        only ? be->ops->sum_squares(be, m->scalar_dev, m->grads + only->offset, only->numel)
             : be->ops->sum_squares(be, m->scalar_dev, m->grads, m->n_params);
    if (st == WS_OK) st = ws_backend_download(be, &sumsq, m->scalar_dev, sizeof sumsq);
    if (st != WS_OK) return ws_error_set(err, st, "optim: gradient norm failed");
    float norm = sqrtf(sumsq) * oc->grad_scale;
    if (grad_norm_out) *grad_norm_out = norm;
    if (!isfinite(norm)) {
        /* A non-finite gradient would poison every parameter: drop the update. */
        WS_TRY(ws_model_zero_grads(m, err));
        return ws_error_set(err, WS_ERR_INVALID, "optim: non-finite gradient norm, step skipped");
    }
    float scale = oc->grad_scale;
    if (oc->clip_norm > 0.0f) {
        float coef = oc->clip_norm / (norm + 1e-6f);
        if (coef < 1.0f) scale *= coef;
    }
    ws_adamw_args a = {.lr = oc->lr, .beta1 = oc->beta1, .beta2 = oc->beta2, .eps = oc->eps,
                       .step = m->optim_steps + 1, .grad_scale = scale};
    for (int i = 0; i < m->n_tensors; i++) {
        const ws_tensor_info *t = &m->tensors[i];
        if (only && t != only) continue;
        a.weight_decay = t->decay ? oc->weight_decay : 0.0f;
        st = be->ops->adamw(be, m->params + t->offset, m->grads + t->offset,
                            m->adam_m + t->offset, m->adam_v + t->offset, t->numel, &a);
        if (st != WS_OK) return ws_error_set(err, st, "optim: AdamW on %s failed", t->name);
    }
    m->optim_steps++;
    return ws_model_zero_grads(m, err);
}
