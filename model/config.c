/* config.c — model configuration defaults and validation. */
#include "model.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "mixer.h"

/* A field added to ws_model_config without a key here would be silently dropped
 * from checkpoints. */
_Static_assert(sizeof(ws_model_config) == WS_MODEL_CONFIG_N_FIELDS * sizeof(int) &&
                   sizeof(float) == sizeof(int),
               "ws_model_config_fields must list every ws_model_config field");

static const char *const mixer_names[WS_MIXER_COUNT] = {"mha", "simplicial2", "compositional",
                                                        "rmc", "rn"};
static const char *const symbol_code_names[WS_SYMBOLS_COUNT] = {"table", "hashed"};

#define INT_FIELD(f, req) {#f, offsetof(ws_model_config, f), WS_CFG_INT, req, 0, NULL, 0}
#define MIXER_FIELD(f) \
    {#f, offsetof(ws_model_config, f), WS_CFG_NAME, 0, 0, mixer_names, WS_MIXER_COUNT}
const ws_model_config_field ws_model_config_fields[WS_MODEL_CONFIG_N_FIELDS] = {
    INT_FIELD(d, 1),
    INT_FIELD(n_heads, 1),
    INT_FIELD(n_state, 1),
    INT_FIELD(n_upd_layers, 1),
    INT_FIELD(n_ext_layers, 1),
    INT_FIELD(max_fact_len, 1),
    INT_FIELD(vocab_cap, 1),
    INT_FIELD(n_overflow, 1),
    INT_FIELD(d_raw, 1),
    INT_FIELD(state_norm, 1),
    MIXER_FIELD(upd_mixer),
    MIXER_FIELD(ext_mixer),
    INT_FIELD(s2_virtual, 0),
    INT_FIELD(s2_heads, 0),
    INT_FIELD(s2_dim, 0),
    {"s2_tau", offsetof(ws_model_config, s2_tau), WS_CFG_FLOAT, 0, 0, NULL, 0},
    INT_FIELD(comp_searches, 0),
    INT_FIELD(comp_retrievals, 0),
    INT_FIELD(comp_dim, 0),
    INT_FIELD(rn_width, 0),
    INT_FIELD(rn_layers, 0),
    {"symbol_code", offsetof(ws_model_config, symbol_code), WS_CFG_NAME, 0, 1, symbol_code_names,
     WS_SYMBOLS_COUNT},
};
#undef INT_FIELD
#undef MIXER_FIELD

const char *ws_mixer_name(int kind)
{
    return kind >= 0 && kind < WS_MIXER_COUNT ? mixer_names[kind] : NULL;
}

int ws_mixer_kind_of(const char *name)
{
    for (int k = 0; name && k < WS_MIXER_COUNT; k++)
        if (strcmp(name, mixer_names[k]) == 0) return k;
    return -1;
}

ws_model_config ws_model_config_default(void)
{
    return (ws_model_config){
        .d = 128, .n_heads = 4, .n_state = 32, .n_upd_layers = 2, .n_ext_layers = 2,
        .max_fact_len = 4, .vocab_cap = 4096, .n_overflow = 256, .d_raw = 0, .state_norm = 1,
        .upd_mixer = WS_MIXER_MHA, .ext_mixer = WS_MIXER_MHA, .s2_virtual = 2, .s2_heads = 1,
        .s2_dim = 32, .s2_tau = 1.0f, .comp_searches = 4, .comp_retrievals = 2, .comp_dim = 16,
        .rn_width = 64, .rn_layers = 2, .symbol_code = WS_SYMBOLS_HASHED,
    };
}

/* Ranges of every mixer field (so no stored config is out of range), then what
 * the chosen mixers themselves require. */
static ws_status validate_mixers(const ws_model_config *c, ws_error *err)
{
    if (c->s2_virtual < 1 || c->s2_virtual > 64 || c->s2_heads < 0 || c->s2_heads > 16 ||
        c->s2_dim < 1 || c->s2_dim > 1024 || c->comp_searches < 1 || c->comp_searches > 64 ||
        c->comp_retrievals < 1 || c->comp_retrievals > 64 || c->comp_dim < 1 ||
        c->comp_dim > 1024 || c->rn_width < 1 || c->rn_width > 4096 || c->rn_layers < 1 ||
        c->rn_layers > 8)
        return ws_error_set(err, WS_ERR_INVALID,
                            "config: a mixer field is out of range (s2_virtual 1..64, s2_heads "
                            "0..16, s2_dim 1..1024, comp_searches/comp_retrievals 1..64, "
                            "comp_dim 1..1024, rn_width 1..4096, rn_layers 1..8)");
    if (!isfinite(c->s2_tau) || c->s2_tau <= 0.0f || c->s2_tau > 1e4f)
        return ws_error_set(err, WS_ERR_INVALID, "config: s2_tau must be in (0, 1e4]");
    if (ws_mixer_find(c->upd_mixer)) {
        WS_TRY(ws_mixer_find(c->upd_mixer)->validate(c, WS_MIX_SELF, err));
    } else if (ws_updater_variant_find(c->upd_mixer)) {
        WS_TRY(ws_updater_variant_find(c->upd_mixer)->validate(c, err));
    } else {
        return ws_error_set(err, WS_ERR_INVALID, "config: upd_mixer %s cannot mix the Updater",
                            ws_mixer_name(c->upd_mixer) ? ws_mixer_name(c->upd_mixer) : "(unknown)");
    }
    if (ws_mixer_find(c->ext_mixer)) {
        WS_TRY(ws_mixer_find(c->ext_mixer)->validate(c, WS_MIX_CROSS, err));
    } else if (ws_readout_variant_find(c->ext_mixer)) {
        WS_TRY(ws_readout_variant_find(c->ext_mixer)->validate(c, err));
    } else {
        return ws_error_set(err, WS_ERR_INVALID, "config: ext_mixer %s cannot read the Extractor",
                            ws_mixer_name(c->ext_mixer) ? ws_mixer_name(c->ext_mixer) : "(unknown)");
    }
    return WS_OK;
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
    if (c->symbol_code < 0 || c->symbol_code >= WS_SYMBOLS_COUNT)
        return ws_error_set(err, WS_ERR_INVALID, "config: symbol_code must be table or hashed");
    return validate_mixers(c, err);
}
