/* config.c — the model configuration: its field table (JSON keys, ranges,
 * worldstate-train flags), defaults and validation. */
#include "model.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mixer.h"

_Static_assert(sizeof(float) == sizeof(int) && sizeof(ws_model_config) % sizeof(int) == 0,
               "every ws_model_config field is an int or a float (N_FIELDS counts them so)");

static const char *const mixer_names[WS_MIXER_COUNT] = {
#define WS_MIXER(KIND, name, role) #name,
#include "mixer_list.h"
#undef WS_MIXER
};
static const char *const symbol_code_names[WS_SYMBOLS_COUNT] = {"table", "hashed"};
static const char *const empty_steps_names[WS_EMPTY_COUNT] = {"update", "hold"};

/* Bounds keep every buffer size far inside size_t and int row counts. */
#define INT_FIELD(f, alias, def, lo, hi, req) \
    {#f, alias, offsetof(ws_model_config, f), WS_CFG_INT, def, lo, hi, req, 0, NULL, 0}
#define NAME_FIELD(f, def, req, zero, names, n) \
    {#f, NULL, offsetof(ws_model_config, f), WS_CFG_NAME, def, 0, (n) - 1, req, zero, names, n}
const ws_model_config_field ws_model_config_fields[] = {
    INT_FIELD(d, NULL, 128, 2, 4096, 1),
    INT_FIELD(n_heads, "heads", 4, 1, 4096, 1),
    INT_FIELD(n_state, "state-tokens", 32, 1, 1024, 1),
    INT_FIELD(n_upd_layers, "upd-layers", 2, 0, WS_MAX_LAYERS, 1),
    INT_FIELD(n_ext_layers, "ext-layers", 2, 0, WS_MAX_LAYERS, 1),
    INT_FIELD(max_fact_len, "fact-len", 4, 1, WS_MAX_FACT_LEN, 1),
    INT_FIELD(vocab_cap, "vocab", 4096, 0, 1 << 24, 1),
    INT_FIELD(n_overflow, "overflow", 256, 1, 1 << 20, 1),
    INT_FIELD(d_raw, NULL, 0, 0, 65536, 1),
    INT_FIELD(state_norm, NULL, 1, 0, 1, 1),
    NAME_FIELD(upd_mixer, WS_MIXER_MHA, 0, 0, mixer_names, WS_MIXER_COUNT),
    NAME_FIELD(ext_mixer, WS_MIXER_MHA, 0, 0, mixer_names, WS_MIXER_COUNT),
    INT_FIELD(s2_virtual, NULL, 2, 1, 64, 0),
    INT_FIELD(s2_heads, NULL, 1, 0, 16, 0),
    INT_FIELD(s2_dim, NULL, 32, 1, 1024, 0),
    {"s2_tau", NULL, offsetof(ws_model_config, s2_tau), WS_CFG_FLOAT, 1, 0, 1e4, 0, 0, NULL, 0},
    INT_FIELD(comp_searches, NULL, 4, 1, 64, 0),
    INT_FIELD(comp_retrievals, NULL, 2, 1, 64, 0),
    INT_FIELD(comp_dim, NULL, 16, 1, 1024, 0),
    INT_FIELD(rn_width, NULL, 64, 1, 4096, 0),
    INT_FIELD(rn_layers, NULL, 2, 1, 8, 0),
    NAME_FIELD(symbol_code, WS_SYMBOLS_HASHED, 0, 1, symbol_code_names, WS_SYMBOLS_COUNT),
    NAME_FIELD(empty_steps, WS_EMPTY_HOLD, 0, 1, empty_steps_names, WS_EMPTY_COUNT),
    INT_FIELD(views, NULL, 1, 1, 8, 0),
};
#undef INT_FIELD
#undef NAME_FIELD
/* A field added to ws_model_config without a row would be dropped from
 * checkpoints, the API and the flags. */
_Static_assert(sizeof ws_model_config_fields / sizeof *ws_model_config_fields ==
                   WS_MODEL_CONFIG_N_FIELDS,
               "ws_model_config_fields must list every ws_model_config field");

double ws_model_config_get(const ws_model_config *c, int i)
{
    const void *p = (const char *)c + ws_model_config_fields[i].off;
    /* Not `?:`, which would make every int a float (2^24 + 1 reads as 2^24). */
    if (ws_model_config_fields[i].type == WS_CFG_FLOAT) return *(const float *)p;
    return *(const int *)p;
}

void ws_model_config_set(ws_model_config *c, int i, double v)
{
    void *p = (char *)c + ws_model_config_fields[i].off;
    if (ws_model_config_fields[i].type == WS_CFG_FLOAT) *(float *)p = (float)v;
    else *(int *)p = (int)v;
}

static ws_status not_a_name(const ws_model_config_field *f, const char *as, ws_error *err)
{
    char list[160] = "";
    for (int k = 0; k < f->n_names; k++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s\"%s\"", k ? ", " : "",
                 f->names[k]);
    return ws_error_set(err, WS_ERR_INVALID, "%s must be one of %s", as, list);
}

ws_status ws_model_config_check(const ws_model_config *c, int i, const char *as, ws_error *err)
{
    const ws_model_config_field *f = &ws_model_config_fields[i];
    double v = ws_model_config_get(c, i);
    if (f->type == WS_CFG_NAME) return v >= f->lo && v <= f->hi ? WS_OK : not_a_name(f, as, err);
    if (f->type == WS_CFG_FLOAT) {
        if (isfinite(v) && v > f->lo && v <= f->hi) return WS_OK;
        return ws_error_set(err, WS_ERR_INVALID, "%s must be in (%g, %g], got %g", as, f->lo,
                            f->hi, v);
    }
    if (v >= f->lo && v <= f->hi) return WS_OK;
    return ws_error_set(err, WS_ERR_INVALID, "%s must be in [%.0f, %.0f], got %.0f", as, f->lo,
                        f->hi, v);
}

ws_status ws_model_config_parse(ws_model_config *c, int i, const char *text, const char *as,
                                ws_error *err)
{
    const ws_model_config_field *f = &ws_model_config_fields[i];
    ws_model_config t = *c; /* c keeps its value when text is refused */
    char *end = NULL;
    errno = 0;
    if (f->type == WS_CFG_NAME) {
        int k = 0;
        while (k < f->n_names && strcmp(text, f->names[k])) k++;
        if (k == f->n_names) return not_a_name(f, as, err);
        ws_model_config_set(&t, i, k);
    } else {
        /* As JSON reads it: 1e3 is an integer, 2.5 is not. */
        double v = strtod(text, &end);
        if (!*text || *end || errno || !isfinite(v) ||
            (f->type == WS_CFG_INT && !(v >= INT_MIN && v <= INT_MAX && v == (double)(int)v)))
            return ws_error_set(err, WS_ERR_INVALID, "%s wants %s, got '%.40s'", as,
                                f->type == WS_CFG_INT ? "an integer" : "a number", text);
        ws_model_config_set(&t, i, v);
    }
    WS_TRY(ws_model_config_check(&t, i, as, err));
    *c = t;
    return WS_OK;
}

const char *ws_mixer_name(int kind)
{
    return kind >= 0 && kind < WS_MIXER_COUNT ? mixer_names[kind] : NULL;
}

ws_model_config ws_model_config_default(void)
{
    ws_model_config c;
    for (int i = 0; i < WS_MODEL_CONFIG_N_FIELDS; i++)
        ws_model_config_set(&c, i, ws_model_config_fields[i].def);
    return c;
}

/* What the chosen mixers themselves require. */
static ws_status validate_mixers(const ws_model_config *c, ws_error *err)
{
    if (ws_mixer_find(c->upd_mixer)) {
        WS_TRY(ws_mixer_find(c->upd_mixer)->validate(c, WS_MIX_SELF, err));
    } else if (ws_updater_variant_find(c->upd_mixer)) {
        WS_TRY(ws_updater_variant_find(c->upd_mixer)->validate(c, err));
    } else {
        return ws_error_set(err, WS_ERR_INVALID, "config: upd_mixer %s cannot mix the Updater",
                            ws_mixer_name(c->upd_mixer) ? ws_mixer_name(c->upd_mixer)
                                                        : "(unknown)");
    }
    if (ws_mixer_find(c->ext_mixer)) {
        WS_TRY(ws_mixer_find(c->ext_mixer)->validate(c, WS_MIX_CROSS, err));
    } else if (ws_readout_variant_find(c->ext_mixer)) {
        WS_TRY(ws_readout_variant_find(c->ext_mixer)->validate(c, err));
    } else {
        return ws_error_set(err, WS_ERR_INVALID, "config: ext_mixer %s cannot read the Extractor",
                            ws_mixer_name(c->ext_mixer) ? ws_mixer_name(c->ext_mixer)
                                                        : "(unknown)");
    }
    return WS_OK;
}

ws_status ws_model_config_validate(const ws_model_config *c, ws_error *err)
{
    /* Every field in range, also the fields of a mixer not in use: no stored
     * config is out of range. */
    for (int i = 0; i < WS_MODEL_CONFIG_N_FIELDS; i++) {
        char as[64];
        snprintf(as, sizeof as, "config: %s", ws_model_config_fields[i].key);
        WS_TRY(ws_model_config_check(c, i, as, err));
    }
    if (c->d % c->n_heads != 0)
        return ws_error_set(err, WS_ERR_INVALID, "config: n_heads (%d) must divide d (%d)",
                            c->n_heads, c->d);
    return validate_mixers(c, err);
}

int ws_model_config_state_rows(const ws_model_config *c)
{
    return c->views * c->n_state;
}

size_t ws_model_config_state_floats(const ws_model_config *c)
{
    return (size_t)ws_model_config_state_rows(c) * (size_t)c->d;
}
