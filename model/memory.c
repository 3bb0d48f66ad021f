/* memory.c — the bytes a model takes (model.h ws_model_memory_of), from its
 * config alone: the parameter table's size, the vocabulary's tables and the
 * arena the plan would lay out (plan.c measures it with its own layout, so the
 * bound and the allocation cannot disagree). */
#include <stdint.h>

#include "model_internal.h"

ws_status ws_model_memory_of(const ws_model_config *cfg, const ws_batch_shape *shapes,
                             int n_shapes, size_t n_states, ws_model_memory *out, ws_error *err)
{
    *out = (ws_model_memory){0};
    WS_TRY(ws_model_config_validate(cfg, err));
    size_t n_params = 0;
    ws_upd_layer_off upd[WS_MAX_LAYERS + 1]; /* the config's range bounds both stacks */
    ws_ext_layer_off ext[WS_MAX_LAYERS + 1];
    ws_param_offsets off = {.upd = upd, .ext = ext};
    ws_params_layout(cfg, NULL, &n_params, &off);
    out->params = 4 * n_params * sizeof(float) + sizeof(float); /* + the reduction scalar */
    out->vocab = ws_vocab_bytes(cfg->vocab_cap);
    for (int i = 0; i < n_shapes; i++) {
        size_t arena = 0, staging = 0;
        WS_TRY(ws_plan_bound(cfg, &shapes[i], &arena, &staging, err));
        if (arena + staging > out->arena) out->arena = arena + staging;
    }
    out->states = n_states * ws_model_config_state_floats(cfg) * sizeof(float);
    out->total = out->params + out->vocab + out->arena + out->states;
    return WS_OK;
}
