/* params.c — the parameter table: every tensor's name, shape and offset.
 *
 * Names (d width, S fact length, V = vocab_cap + n_overflow, T state tokens):
 *   embed.sym [V,d]  embed.slot [S,d]  embed.val [2,d]  embed.raw [d,d_raw] (d_raw>0)
 *   embed.ln.g/.b [d]                      LN_f over fact embeddings
 *   state.w0 [T,d]  state.pos [T,d]  ctx.null [1,d]
 *   upd.{l}.ln1.g/.b  upd.{l}.self.qkv.w [3d,d] .b [3d]  upd.{l}.self.out.w [d,d] .b
 *   upd.{l}.ln2.g/.b  upd.{l}.cross.q.w [d,d] .b  upd.{l}.cross.kv.w [2d,d] .b [2d]
 *                     upd.{l}.cross.out.w [d,d] .b
 *   upd.{l}.ln3.g/.b  upd.{l}.mlp.fc.w [4d,d] .b [4d]  upd.{l}.mlp.proj.w [d,4d] .b [d]
 *   upd.ln.g/.b [d]                        LN_w on the new state (state_norm=1 only)
 *   ext.{l}.ln1.g/.b  ext.{l}.cross.q/.kv/.out as above
 *   ext.{l}.ln2.g/.b  ext.{l}.mlp.fc/.proj as above
 *   ext.ln.g/.b [d]   ext.head.w [1,d]  ext.head.b [1]
 * Mixers (mixer.h) register their own tensors in place of self.qkv/.out (upd.{l}.self.*)
 * and cross.q/.kv/.out (ext.{l}.cross.*); an Updater variant (rmc) registers its
 * own upd.* in place of the layer stack and upd.ln; a readout variant (rn) its own
 * tensors in place of ext.head.
 * Linear weights are [out, in] (y = x Wᵀ + b). In qkv/kv the rows are Q, K, V in
 * that order; head h owns columns [h·d_h, (h+1)·d_h) of each. Weight decay applies
 * to the .w of projections (qkv, q, kv, out, fc, proj, raw, head): the tensors
 * registered with WS_INIT_FAN_IN. */
#include "params.h"

#include <stdio.h>
#include <string.h>

#include "mixer.h"

size_t ws_layout_add(ws_param_layout *L, const char *name, int rows, int cols,
                     ws_init_kind init)
{
    size_t at = L->total;
    if (L->table) {
        ws_tensor_info *t = &L->table[L->n];
        memset(t, 0, sizeof *t);
        snprintf(t->name, sizeof t->name, "%s", name);
        t->ndim = rows > 0 ? 2 : 1;
        t->shape[0] = rows > 0 ? rows : cols;
        t->shape[1] = rows > 0 ? cols : 0;
        t->numel = (size_t)(rows > 0 ? rows : 1) * (size_t)cols;
        t->offset = at;
        t->init = init;
        t->decay = init == WS_INIT_FAN_IN;
    }
    L->n++;
    L->total += (size_t)(rows > 0 ? rows : 1) * (size_t)cols;
    return at;
}

/* "<prefix><suffix>" */
static size_t add_named(ws_param_layout *L, const char *prefix, const char *suffix, int rows,
                        int cols, ws_init_kind init)
{
    char name[48];
    snprintf(name, sizeof name, "%s%s", prefix, suffix);
    return ws_layout_add(L, name, rows, cols, init);
}

ws_ln_off ws_layout_add_ln(ws_param_layout *L, const char *prefix, int d)
{
    ws_ln_off o;
    o.g = add_named(L, prefix, ".g", 0, d, WS_INIT_ONE);
    o.b = add_named(L, prefix, ".b", 0, d, WS_INIT_ZERO);
    return o;
}

ws_lin_off ws_layout_add_linear(ws_param_layout *L, const char *prefix, int out, int in)
{
    ws_lin_off o;
    o.w = add_named(L, prefix, ".w", out, in, WS_INIT_FAN_IN);
    o.b = add_named(L, prefix, ".b", 0, out, WS_INIT_ZERO);
    return o;
}

ws_lin_off ws_layout_add_weight(ws_param_layout *L, const char *prefix, int out, int in)
{
    return (ws_lin_off){add_named(L, prefix, ".w", out, in, WS_INIT_FAN_IN), WS_NO_PARAM};
}

/* "<layer>.<what>", e.g. upd.0.ln1 or upd.0.self: a prefix, in a buffer of
 * PREFIX_CAP bytes so that a suffix (".g", ".w") still fits a tensor's 48-byte
 * name (and -O3's -Wformat-truncation can see that it does). */
#define PREFIX_CAP 40
static const char *sub(char *buf, size_t n, const char *layer, const char *what)
{
    snprintf(buf, n, "%s.%s", layer, what);
    return buf;
}

static ws_mlp_off add_mlp(ws_param_layout *L, const char *layer, const char *ln, int d)
{
    char name[PREFIX_CAP];
    ws_mlp_off o;
    o.ln = ws_layout_add_ln(L, sub(name, sizeof name, layer, ln), d);
    o.fc = ws_layout_add_linear(L, sub(name, sizeof name, layer, "mlp.fc"), 4 * d, d);
    o.proj = ws_layout_add_linear(L, sub(name, sizeof name, layer, "mlp.proj"), d, 4 * d);
    return o;
}

/* A mixer sub-block: its LN "<layer>.<ln>", its mixer's tensors "<layer>.<what>.*". */
static ws_mix_off add_mix(ws_param_layout *L, const char *layer, const char *ln,
                          const char *what, int kind, const ws_model_config *c,
                          ws_mix_mode mode)
{
    char name[PREFIX_CAP];
    ws_mix_off o = {.mixer = ws_mixer_find(kind), .mode = mode};
    o.ln = ws_layout_add_ln(L, sub(name, sizeof name, layer, ln), c->d);
    o.mixer->layout(L, sub(name, sizeof name, layer, what), c, mode, &o.p);
    return o;
}

static void add_updater(ws_param_layout *L, const ws_model_config *c, ws_param_offsets *o)
{
    const ws_updater_variant *v = ws_updater_variant_find(c->upd_mixer);
    if (v) {
        v->layout(L, c, o);
        return;
    }
    char p[32];
    for (int l = 0; l < c->n_upd_layers; l++) {
        ws_upd_layer_off *u = &o->upd[l];
        snprintf(p, sizeof p, "upd.%d", l);
        u->self = add_mix(L, p, "ln1", "self", c->upd_mixer, c, WS_MIX_SELF);
        u->cross = add_mix(L, p, "ln2", "cross", WS_MIXER_MHA, c, WS_MIX_CROSS);
        u->mlp = add_mlp(L, p, "ln3", c->d);
    }
    if (c->state_norm) o->state_ln = ws_layout_add_ln(L, "upd.ln", c->d);
}

static void add_extractor(ws_param_layout *L, const ws_model_config *c, ws_param_offsets *o)
{
    const ws_readout_variant *readout = ws_readout_variant_find(c->ext_mixer);
    int cross = readout ? WS_MIXER_MHA : c->ext_mixer;
    char p[32];
    for (int l = 0; l < c->n_ext_layers; l++) {
        ws_ext_layer_off *e = &o->ext[l];
        snprintf(p, sizeof p, "ext.%d", l);
        e->cross = add_mix(L, p, "ln1", "cross", cross, c, WS_MIX_CROSS);
        e->mlp = add_mlp(L, p, "ln2", c->d);
    }
    o->out_ln = ws_layout_add_ln(L, "ext.ln", c->d);
    if (readout)
        readout->layout(L, c, &o->readout);
    else
        o->head = ws_layout_add_linear(L, "ext.head", 1, c->d);
}

int ws_params_layout(const ws_model_config *c, ws_tensor_info *table, size_t *total,
                     ws_param_offsets *o)
{
    ws_param_layout L = {.table = table};
    int d = c->d;
    o->sym = ws_layout_add(&L, "embed.sym", c->vocab_cap + c->n_overflow, d,
                           c->symbol_code == WS_SYMBOLS_HASHED ? WS_INIT_ZERO : WS_INIT_NORMAL);
    o->slot = ws_layout_add(&L, "embed.slot", c->max_fact_len, d, WS_INIT_NORMAL);
    o->val = ws_layout_add(&L, "embed.val", 2, d, WS_INIT_NORMAL);
    if (c->d_raw > 0) o->raw = ws_layout_add(&L, "embed.raw", d, c->d_raw, WS_INIT_FAN_IN);
    o->fact_ln = ws_layout_add_ln(&L, "embed.ln", d);
    o->w0 = ws_layout_add(&L, "state.w0", c->n_state, d, WS_INIT_NORMAL);
    o->pos = ws_layout_add(&L, "state.pos", c->n_state, d, WS_INIT_NORMAL);
    o->null = ws_layout_add(&L, "ctx.null", 1, d, WS_INIT_NORMAL);
    add_updater(&L, c, o);
    add_extractor(&L, c, o);
    if (total) *total = L.total;
    return L.n;
}
