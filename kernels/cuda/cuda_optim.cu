/* cuda_optim.cu — AdamW with decoupled weight decay (as torch.optim.AdamW), the CPU
 * backend's arithmetic element for element; the step constants are computed on the
 * host exactly as there. */
#include <math.h>

#include "cuda_internal.h"
#include "kernels/op_constants.h"

#define WS_THREADS 256

__global__ void k_adamw(float *param, const float *grad, float *m, float *v, size_t n,
                        float beta1, float beta2, float eps, float grad_scale, float step_size,
                        float decay, float bc2_sqrt)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float g = grad[i] * grad_scale;
        float mi = beta1 * m[i] + (1.0f - beta1) * g;
        float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        float p = param[i] * decay;
        param[i] = p - step_size * mi / (sqrtf(vi) / bc2_sqrt + eps);
    }
}

ws_status ws_cuda_adamw(ws_backend *be, float *param, const float *grad, float *m, float *v,
                        size_t n, const ws_adamw_args *a)
{
    if (!n) return WS_OK;
    WS_CUDA_ENTER(be, c);
    ws_adamw_step s = ws_adamw_step_of(a);
    k_adamw<<<ws_cuda_blocks(n, WS_THREADS, c), WS_THREADS, 0, c->stream>>>(
        param, grad, m, v, n, a->beta1, a->beta2, a->eps, a->grad_scale, s.step_size, s.decay,
        s.bc2_sqrt);
    WS_CUDA_LAUNCHED(c, "k_adamw");
    return WS_OK;
}
