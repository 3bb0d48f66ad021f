/* config.c — model configuration defaults and validation. */
#include "model.h"

#include <stddef.h>

/* A field added to ws_model_config without a key here would be silently dropped
 * from checkpoints. */
_Static_assert(sizeof(ws_model_config) == WS_MODEL_CONFIG_N_FIELDS * sizeof(int),
               "ws_model_config_fields must list every ws_model_config field");

const ws_model_config_field ws_model_config_fields[WS_MODEL_CONFIG_N_FIELDS] = {
    {"d", offsetof(ws_model_config, d)},
    {"n_heads", offsetof(ws_model_config, n_heads)},
    {"n_state", offsetof(ws_model_config, n_state)},
    {"n_upd_layers", offsetof(ws_model_config, n_upd_layers)},
    {"n_ext_layers", offsetof(ws_model_config, n_ext_layers)},
    {"max_fact_len", offsetof(ws_model_config, max_fact_len)},
    {"vocab_cap", offsetof(ws_model_config, vocab_cap)},
    {"n_overflow", offsetof(ws_model_config, n_overflow)},
    {"d_raw", offsetof(ws_model_config, d_raw)},
    {"state_norm", offsetof(ws_model_config, state_norm)},
};

ws_model_config ws_model_config_default(void)
{
    return (ws_model_config){
        .d = 128, .n_heads = 4, .n_state = 32, .n_upd_layers = 2, .n_ext_layers = 2,
        .max_fact_len = 4, .vocab_cap = 4096, .n_overflow = 256, .d_raw = 0, .state_norm = 1,
    };
}

ws_status ws_model_config_validate(const ws_model_config *c, ws_error *err)
{
    /* Bounds keep every buffer size far inside size_t and int row counts. */
    if (c->d < 2 || c->d > 4096)
        return ws_error_set(err, WS_ERR_INVALID, "config: d must be in [2, 4096], got %d", c->d);
    if (c->n_heads < 1 || c->d % c->n_heads != 0)
        return ws_error_set(err, WS_ERR_INVALID, "config: n_heads (%d) must divide d (%d)",
                            c->n_heads, c->d);
    if (c->n_state < 1 || c->n_state > 1024)
        return ws_error_set(err, WS_ERR_INVALID, "config: n_state must be in [1, 1024], got %d",
                            c->n_state);
    if (c->n_upd_layers < 0 || c->n_upd_layers > 64 || c->n_ext_layers < 0 ||
        c->n_ext_layers > 64)
        return ws_error_set(err, WS_ERR_INVALID, "config: layer counts must be in [0, 64]");
    if (c->max_fact_len < 1 || c->max_fact_len > WS_MAX_FACT_LEN)
        return ws_error_set(err, WS_ERR_INVALID, "config: max_fact_len must be in [1, %d], got %d",
                            WS_MAX_FACT_LEN, c->max_fact_len);
    if (c->vocab_cap < 0 || c->vocab_cap > (1 << 24))
        return ws_error_set(err, WS_ERR_INVALID, "config: vocab_cap must be in [0, 2^24], got %d",
                            c->vocab_cap);
    if (c->n_overflow < 1 || c->n_overflow > (1 << 20))
        return ws_error_set(err, WS_ERR_INVALID, "config: n_overflow must be in [1, 2^20], got %d",
                            c->n_overflow);
    if (c->d_raw < 0 || c->d_raw > 65536)
        return ws_error_set(err, WS_ERR_INVALID, "config: d_raw must be in [0, 65536], got %d",
                            c->d_raw);
    if (c->state_norm != 0 && c->state_norm != 1)
        return ws_error_set(err, WS_ERR_INVALID, "config: state_norm must be 0 or 1");
    return WS_OK;
}
