/* op_constants.h — the numbers the CPU and CUDA backends must share for their
 * results to agree: GELU's tanh form, LayerNorm's epsilon, and AdamW's
 * per-step factors (computed on the host, the same way for both). Plain C,
 * included by the .c files of kernels/cpu and the .cu files of kernels/cuda. */
#ifndef WS_OP_CONSTANTS_H
#define WS_OP_CONSTANTS_H

#include <math.h>

#include "backend.h"

/* GELU, tanh form: x/2·(1 + tanh u), u = WS_GELU_K·(x + WS_GELU_C·x³). */
#define WS_GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define WS_GELU_C 0.044715f

/* LayerNorm: rstd = 1/sqrt(var + WS_LN_EPS), biased variance (as PyTorch). */
#define WS_LN_EPS 1e-5f

/* AdamW (decoupled decay, as torch.optim.AdamW): the factors of step a->step,
 * computed once on the host in float. */
typedef struct {
    float step_size; /* lr / (1 - beta1^step) */
    float decay;     /* 1 - lr·weight_decay: params are scaled by it first */
    float bc2_sqrt;  /* sqrt(1 - beta2^step) */
} ws_adamw_step;

static inline ws_adamw_step ws_adamw_step_of(const ws_adamw_args *a)
{
    float bc1 = 1.0f - powf(a->beta1, (float)a->step);
    ws_adamw_step s;
    s.bc2_sqrt = sqrtf(1.0f - powf(a->beta2, (float)a->step));
    s.step_size = a->lr / bc1;
    s.decay = 1.0f - a->lr * a->weight_decay;
    return s;
}

#endif
