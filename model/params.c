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
 * to the .w of projections (qkv, q, kv, out, fc, proj, raw, head). */
#include "params.h"

#include <stdio.h>
#include <string.h>

#include "mixer.h"

void ws_layout_add(ws_param_layout *L, const char *name, int rows, int cols, int decay)
{
    if (L->table) {
        ws_tensor_info *t = &L->table[L->n];
        memset(t, 0, sizeof *t);
        snprintf(t->name, sizeof t->name, "%s", name);
        t->ndim = rows > 0 ? 2 : 1;
        t->shape[0] = rows > 0 ? rows : cols;
        t->shape[1] = rows > 0 ? cols : 0;
        t->numel = (size_t)(rows > 0 ? rows : 1) * (size_t)cols;
        t->offset = L->total;
        t->decay = decay;
    }
    L->n++;
    L->total += (size_t)(rows > 0 ? rows : 1) * (size_t)cols;
}

void ws_layout_add_ln(ws_param_layout *L, const char *prefix, int d)
{
    char name[48];
    snprintf(name, sizeof name, "%s.g", prefix);
    ws_layout_add(L, name, 0, d, 0);
    snprintf(name, sizeof name, "%s.b", prefix);
    ws_layout_add(L, name, 0, d, 0);
}

void ws_layout_add_linear(ws_param_layout *L, const char *prefix, int out, int in)
{
    char name[48];
    snprintf(name, sizeof name, "%s.w", prefix);
    ws_layout_add(L, name, out, in, 1);
    snprintf(name, sizeof name, "%s.b", prefix);
    ws_layout_add(L, name, 0, out, 0);
}

static void add_mlp(ws_param_layout *L, const char *prefix, int d)
{
    char name[48];
    snprintf(name, sizeof name, "%s.mlp.fc", prefix);
    ws_layout_add_linear(L, name, 4 * d, d);
    snprintf(name, sizeof name, "%s.mlp.proj", prefix);
    ws_layout_add_linear(L, name, d, 4 * d);
}

/* "<layer>.<what>" LayerNorm, e.g. upd.0.ln1 */
static void add_sub_ln(ws_param_layout *L, const char *layer, const char *what, int d)
{
    char name[48];
    snprintf(name, sizeof name, "%s.%s", layer, what);
    ws_layout_add_ln(L, name, d);
}

/* The mixer of one sub-block, under "<layer>.<what>". */
static void add_mixer(ws_param_layout *L, const ws_mixer *mx, const char *layer,
                      const char *what, const ws_model_config *c, ws_mix_mode mode)
{
    char name[48];
    snprintf(name, sizeof name, "%s.%s", layer, what);
    mx->layout(L, name, c, mode);
}

static void add_updater(ws_param_layout *L, const ws_model_config *c)
{
    const ws_updater_variant *v = ws_updater_variant_find(c->upd_mixer);
    if (v) {
        v->layout(L, c);
        return;
    }
    const ws_mixer *self = ws_mixer_find(c->upd_mixer), *mha = ws_mixer_find(WS_MIXER_MHA);
    char p[32];
    for (int l = 0; l < c->n_upd_layers; l++) {
        snprintf(p, sizeof p, "upd.%d", l);
        add_sub_ln(L, p, "ln1", c->d);
        add_mixer(L, self, p, "self", c, WS_MIX_SELF);
        add_sub_ln(L, p, "ln2", c->d);
        add_mixer(L, mha, p, "cross", c, WS_MIX_CROSS);
        add_sub_ln(L, p, "ln3", c->d);
        add_mlp(L, p, c->d);
    }
    if (c->state_norm) ws_layout_add_ln(L, "upd.ln", c->d);
}

static void add_extractor(ws_param_layout *L, const ws_model_config *c)
{
    const ws_readout_variant *readout = ws_readout_variant_find(c->ext_mixer);
    const ws_mixer *cross = readout ? ws_mixer_find(WS_MIXER_MHA) : ws_mixer_find(c->ext_mixer);
    char p[32];
    for (int l = 0; l < c->n_ext_layers; l++) {
        snprintf(p, sizeof p, "ext.%d", l);
        add_sub_ln(L, p, "ln1", c->d);
        add_mixer(L, cross, p, "cross", c, WS_MIX_CROSS);
        add_sub_ln(L, p, "ln2", c->d);
        add_mlp(L, p, c->d);
    }
    ws_layout_add_ln(L, "ext.ln", c->d);
    if (readout)
        readout->layout(L, c);
    else
        ws_layout_add_linear(L, "ext.head", 1, c->d);
}

int ws_params_layout(const ws_model_config *c, ws_tensor_info *table, size_t *total)
{
    ws_param_layout L = {.table = table};
    int d = c->d;
    ws_layout_add(&L, "embed.sym", c->vocab_cap + c->n_overflow, d, 0);
    ws_layout_add(&L, "embed.slot", c->max_fact_len, d, 0);
    ws_layout_add(&L, "embed.val", 2, d, 0);
    if (c->d_raw > 0) ws_layout_add(&L, "embed.raw", d, c->d_raw, 1);
    ws_layout_add_ln(&L, "embed.ln", d);
    ws_layout_add(&L, "state.w0", c->n_state, d, 0);
    ws_layout_add(&L, "state.pos", c->n_state, d, 0);
    ws_layout_add(&L, "ctx.null", 1, d, 0);
    add_updater(&L, c);
    add_extractor(&L, c);
    if (total) *total = L.total;
    return L.n;
}
