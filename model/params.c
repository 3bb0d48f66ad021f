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
 * Linear weights are [out, in] (y = x Wᵀ + b). In qkv/kv the rows are Q, K, V in
 * that order; head h owns columns [h·d_h, (h+1)·d_h) of each. Weight decay applies
 * to the .w of projections (qkv, q, kv, out, fc, proj, raw, head). */
#include "params.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    ws_tensor_info *table;
    int n;
    size_t total;
} layout;

static void add(layout *L, const char *name, int rows, int cols, int decay)
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

static void add_ln(layout *L, const char *prefix, int d)
{
    char name[48];
    snprintf(name, sizeof name, "%s.g", prefix);
    add(L, name, 0, d, 0);
    snprintf(name, sizeof name, "%s.b", prefix);
    add(L, name, 0, d, 0);
}

static void add_linear(layout *L, const char *prefix, int out, int in)
{
    char name[48];
    snprintf(name, sizeof name, "%s.w", prefix);
    add(L, name, out, in, 1);
    snprintf(name, sizeof name, "%s.b", prefix);
    add(L, name, 0, out, 0);
}

/* Cross-attention and MLP sub-blocks, shared by Updater and Extractor layers. */
static void add_cross(layout *L, const char *prefix, int d)
{
    char name[48];
    snprintf(name, sizeof name, "%s.cross.q", prefix);
    add_linear(L, name, d, d);
    snprintf(name, sizeof name, "%s.cross.kv", prefix);
    add_linear(L, name, 2 * d, d);
    snprintf(name, sizeof name, "%s.cross.out", prefix);
    add_linear(L, name, d, d);
}

static void add_mlp(layout *L, const char *prefix, int d)
{
    char name[48];
    snprintf(name, sizeof name, "%s.mlp.fc", prefix);
    add_linear(L, name, 4 * d, d);
    snprintf(name, sizeof name, "%s.mlp.proj", prefix);
    add_linear(L, name, d, 4 * d);
}

static void add_sub(layout *L, const char *prefix, const char *what, int d)
{
    char name[48];
    snprintf(name, sizeof name, "%s.%s", prefix, what);
    add_ln(L, name, d);
}

int ws_params_layout(const ws_model_config *c, ws_tensor_info *table, size_t *total)
{
    layout L = {.table = table};
    int d = c->d;
    char p[32], name[48];
    add(&L, "embed.sym", c->vocab_cap + c->n_overflow, d, 0);
    add(&L, "embed.slot", c->max_fact_len, d, 0);
    add(&L, "embed.val", 2, d, 0);
    if (c->d_raw > 0) add(&L, "embed.raw", d, c->d_raw, 1);
    add_ln(&L, "embed.ln", d);
    add(&L, "state.w0", c->n_state, d, 0);
    add(&L, "state.pos", c->n_state, d, 0);
    add(&L, "ctx.null", 1, d, 0);
    for (int l = 0; l < c->n_upd_layers; l++) {
        snprintf(p, sizeof p, "upd.%d", l);
        add_sub(&L, p, "ln1", d);
        snprintf(name, sizeof name, "%s.self.qkv", p);
        add_linear(&L, name, 3 * d, d);
        snprintf(name, sizeof name, "%s.self.out", p);
        add_linear(&L, name, d, d);
        add_sub(&L, p, "ln2", d);
        add_cross(&L, p, d);
        add_sub(&L, p, "ln3", d);
        add_mlp(&L, p, d);
    }
    if (c->state_norm) add_ln(&L, "upd.ln", d);
    for (int l = 0; l < c->n_ext_layers; l++) {
        snprintf(p, sizeof p, "ext.%d", l);
        add_sub(&L, p, "ln1", d);
        add_cross(&L, p, d);
        add_sub(&L, p, "ln2", d);
        add_mlp(&L, p, d);
    }
    add_ln(&L, "ext.ln", d);
    add_linear(&L, "ext.head", 1, d);
    if (total) *total = L.total;
    return L.n;
}
