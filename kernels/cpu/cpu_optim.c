/* cpu_optim.c — AdamW with decoupled weight decay (as torch.optim.AdamW). */
#include <math.h>

#include "cpu_internal.h"
#include "cpu_par.h"
#include "kernels/op_constants.h"

ws_status ws_cpu_adamw(ws_backend *be, float *param, const float *grad, float *m, float *v,
                       size_t n, const ws_adamw_args *a)
{
    ws_cpu_packs_forget(param, n * sizeof *param);
    ws_adamw_step s = ws_adamw_step_of(a);
    WS_CPU_FOR(ws_cpu_threads_for(be, n), , for (size_t i = 0; i < n; i++) {
        float g = grad[i] * a->grad_scale;
        m[i] = a->beta1 * m[i] + (1.0f - a->beta1) * g;
        v[i] = a->beta2 * v[i] + (1.0f - a->beta2) * g * g;
        float p = param[i] * s.decay;
        param[i] = p - s.step_size * m[i] / (sqrtf(v[i]) / s.bc2_sqrt + a->eps);
    });
    return WS_OK;
}
