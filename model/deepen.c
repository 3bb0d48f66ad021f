/* deepen.c — a trained model made deeper without changing what it computes.
 *
 * Each block adds its residual branch to its input (x + mixer(LN(x)), x +
 * mlp(LN(x)): DESIGN §2), so a layer whose branches end in zero projections is
 * the identity: appended after the last layer of a stack (before the stack's
 * final LayerNorm) it leaves the model's every answer as it was, and training
 * grows it from there. Its other matrices are the fresh model's random ones, so
 * gradients reach them as soon as the zero projections move. The residual
 * outputs are the tensors named "*.out.w/b" (the MHA mixer's output projection,
 * self and cross) and "*.proj.w/b" (the MLP's second linear map); other mixers
 * name and gate theirs otherwise, so only MHA models are deepened. */
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "vocab.h"

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), k = strlen(tail);
    return n >= k && strcmp(s + n - k, tail) == 0;
}

static int is_residual_output(const char *name)
{
    return ends_with(name, ".out.w") || ends_with(name, ".out.b") || ends_with(name, ".proj.w") ||
           ends_with(name, ".proj.b");
}

/* Every tensor of dst from src where src has it (same name, same size), zero for
 * a new layer's residual outputs, dst's own initialisation for the rest. */
static ws_status copy_tensors(ws_model *dst, ws_model *src, ws_error *err)
{
    size_t most = 0;
    for (int i = 0; i < ws_model_n_tensors(dst); i++)
        if (ws_model_tensor(dst, i)->numel > most) most = ws_model_tensor(dst, i)->numel;
    float *host = malloc(most * sizeof *host);
    if (!host) return ws_error_set(err, WS_ERR_NOMEM, "deepen: out of memory");
    ws_status st = WS_OK;
    for (int i = 0; i < ws_model_n_tensors(dst) && st == WS_OK; i++) {
        const ws_tensor_info *t = ws_model_tensor(dst, i);
        const ws_tensor_info *old = ws_model_tensor_by_name(src, t->name);
        if (old && old->numel != t->numel) {
            st = ws_error_set(err, WS_ERR_INVALID, "deepen: %s changed size", t->name);
        } else if (old) {
            st = ws_model_get_tensor(src, t->name, host, t->numel, 0, err);
            if (st == WS_OK) st = ws_model_set_tensor(dst, t->name, host, t->numel, err);
        } else if (is_residual_output(t->name)) {
            memset(host, 0, t->numel * sizeof *host);
            st = ws_model_set_tensor(dst, t->name, host, t->numel, err);
        }
    }
    free(host);
    return st;
}

/* The named symbols of src into dst's vocabulary, with the same ids. */
static ws_status copy_vocab(ws_model *dst, ws_model *src, ws_error *err)
{
    ws_vocab *from = ws_model_vocab(src), *to = ws_model_vocab(dst);
    for (int32_t id = 0; id < ws_vocab_size(from); id++) {
        const char *sym = ws_vocab_symbol(from, id);
        if (!sym || ws_vocab_id(to, sym, strlen(sym), 1) != id)
            return ws_error_set(err, WS_ERR_INVALID, "deepen: vocabulary id %d not kept", id);
    }
    return WS_OK;
}

ws_status ws_model_deepen(ws_model **out, ws_model *src, int add_upd, int add_ext,
                          uint64_t seed, ws_error *err)
{
    *out = NULL;
    ws_model_config cfg = *ws_model_config_of(src);
    if (cfg.upd_mixer != WS_MIXER_MHA || cfg.ext_mixer != WS_MIXER_MHA)
        return ws_error_set(err, WS_ERR_UNSUPPORTED,
                            "deepen: only a model whose mixers are both mha can be deepened");
    if (add_upd < 0 || add_ext < 0)
        return ws_error_set(err, WS_ERR_INVALID, "deepen: layers can only be added");
    cfg.n_upd_layers += add_upd;
    cfg.n_ext_layers += add_ext;
    ws_model *m;
    WS_TRY(ws_model_new(&m, &cfg, ws_model_backend(src), seed, err));
    ws_status st = copy_tensors(m, src, err);
    if (st == WS_OK) st = copy_vocab(m, src, err);
    if (st != WS_OK) {
        ws_model_free(m);
        return st;
    }
    *out = m;
    return WS_OK;
}
