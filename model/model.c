/* model.c — the model's lifecycle, parameter table (laid out and resolved by
 * params.c) and initialisation: the weights (exec.c runs them). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/ws_rng.h"
#include "mixer.h"
#include "params.h"

int ws_model_config_supported(const ws_model_config *c, const ws_backend *be)
{
    const ws_mixer *self = ws_mixer_find(c->upd_mixer), *cross = ws_mixer_find(c->ext_mixer);
    const ws_updater_variant *upd = ws_updater_variant_find(c->upd_mixer);
    const ws_readout_variant *readout = ws_readout_variant_find(c->ext_mixer);
    return (!self || self->supported(be)) && (!cross || cross->supported(be)) &&
           (!upd || upd->supported(be)) && (!readout || readout->supported(be));
}

/* ---- initialisation ------------------------------------------------------- */

static float normal(uint64_t *s)
{
    uint64_t a = ws_splitmix64(s);
    uint64_t b = ws_splitmix64(s);
    return ws_normal_from_bits(a, b);
}

/* Each tensor as its init kind says (the layout, params.c, chose it). Linear
 * weights N(0, 1/fan_in) so that products keep their input's scale and
 * attention logits are not all ~0 at the start (which stalls learning for
 * small d); embeddings, W_0, positions and c_null N(0, 1), the scale of the
 * LayerNorm'd tokens they sit beside; zero biases, unit LN gains. Under the
 * hashed symbol code E_sym is a correction to the fixed codes and starts at 0:
 * a symbol no one has trained on is its code alone. The random tensors draw
 * from one stream in table order, so the layout's order is the draws' order. */
static ws_status init_params(ws_model *m, uint64_t seed, ws_error *err)
{
    float *host = malloc(m->n_params * sizeof *host);
    if (!host) return ws_error_set(err, WS_ERR_NOMEM, "model: out of memory initialising");
    uint64_t s = seed;
    for (int i = 0; i < m->n_tensors; i++) {
        const ws_tensor_info *t = &m->tensors[i];
        float *p = host + t->offset;
        float std = t->init == WS_INIT_FAN_IN ? 1.0f / sqrtf((float)t->shape[1]) : 1.0f;
        for (size_t j = 0; j < t->numel; j++) {
            if (t->init == WS_INIT_ONE || t->init == WS_INIT_ZERO)
                p[j] = t->init == WS_INIT_ONE ? 1.0f : 0.0f;
            else
                p[j] = std * normal(&s);
        }
    }
    ws_status st = ws_backend_upload(m->be, m->params, host, m->n_params * sizeof *host);
    free(host);
    return st == WS_OK ? WS_OK : ws_error_set(err, st, "model: parameter upload failed");
}

/* ---- lifecycle ------------------------------------------------------------ */

ws_status ws_model_new(ws_model **out, const ws_model_config *cfg, ws_backend *be,
                       uint64_t seed, ws_error *err)
{
    *out = NULL;
    WS_TRY(ws_model_config_validate(cfg, err));
    ws_model *m = calloc(1, sizeof *m);
    if (!m) return ws_error_set(err, WS_ERR_NOMEM, "model: out of memory");
    m->cfg = *cfg;
    m->be = be;
    m->upd_variant = ws_updater_variant_find(cfg->upd_mixer);
    m->readout = ws_readout_variant_find(cfg->ext_mixer);
    if (!ws_model_config_supported(cfg, be)) {
        free(m);
        return ws_error_set(err, WS_ERR_INVALID,
                            "model: backend %s has no ops for mixers upd=%s ext=%s",
                            be->ops->name, ws_mixer_name(cfg->upd_mixer),
                            ws_mixer_name(cfg->ext_mixer));
    }
    ws_status st = WS_ERR_NOMEM;
    m->off.upd = calloc((size_t)cfg->n_upd_layers + 1, sizeof *m->off.upd);
    m->off.ext = calloc((size_t)cfg->n_ext_layers + 1, sizeof *m->off.ext);
    if (!m->off.upd || !m->off.ext) goto fail;
    m->n_tensors = ws_params_layout(cfg, NULL, &m->n_params, &m->off);
    m->tensors = calloc((size_t)m->n_tensors, sizeof *m->tensors);
    if (!m->tensors || ws_vocab_new(&m->vocab, cfg->vocab_cap, cfg->n_overflow) != WS_OK)
        goto fail;
    ws_params_layout(cfg, m->tensors, NULL, &m->off); /* the table; the same offsets */
    size_t bytes = m->n_params * sizeof(float);
    if (ws_backend_alloc(be, bytes, (void **)&m->params) != WS_OK ||
        ws_backend_alloc(be, bytes, (void **)&m->grads) != WS_OK ||
        ws_backend_alloc(be, bytes, (void **)&m->adam_m) != WS_OK ||
        ws_backend_alloc(be, bytes, (void **)&m->adam_v) != WS_OK ||
        ws_backend_alloc(be, sizeof(float), (void **)&m->scalar_dev) != WS_OK)
        goto fail;
    if (be->ops->fill(be, m->grads, 0.0f, m->n_params) != WS_OK ||
        be->ops->fill(be, m->adam_m, 0.0f, m->n_params) != WS_OK ||
        be->ops->fill(be, m->adam_v, 0.0f, m->n_params) != WS_OK) {
        st = WS_ERR_BACKEND;
        goto fail;
    }
    st = init_params(m, seed, err);
    if (st != WS_OK) goto fail_quiet;
    *out = m;
    return WS_OK;
fail:
    ws_error_set(err, st, "model: cannot allocate %zu parameters", m->n_params);
fail_quiet:
    ws_model_free(m);
    return st;
}

void ws_model_free(ws_model *m)
{
    if (!m) return;
    ws_backend_release(m->be, m->params);
    ws_backend_release(m->be, m->grads);
    ws_backend_release(m->be, m->adam_m);
    ws_backend_release(m->be, m->adam_v);
    ws_backend_release(m->be, m->scalar_dev);
    free(m->tensors);
    free(m->off.upd);
    free(m->off.ext);
    ws_vocab_free(m->vocab);
    free(m);
}

const ws_model_config *ws_model_config_of(const ws_model *m) { return &m->cfg; }

ws_status ws_model_set_empty_steps(ws_model *m, int empty_steps, ws_error *err)
{
    if (empty_steps < 0 || empty_steps >= WS_EMPTY_COUNT)
        return ws_error_set(err, WS_ERR_INVALID, "model: no empty_steps value %d", empty_steps);
    m->cfg.empty_steps = empty_steps;
    return WS_OK;
}

ws_status ws_model_set_views(ws_model *m, int views, ws_error *err)
{
    ws_model_config c = m->cfg;
    c.views = views;
    WS_TRY(ws_model_config_validate(&c, err));
    m->cfg.views = views;
    return WS_OK;
}
ws_backend *ws_model_backend(const ws_model *m) { return m->be; }
ws_vocab *ws_model_vocab(ws_model *m) { return m->vocab; }
int ws_model_n_tensors(const ws_model *m) { return m->n_tensors; }
const ws_tensor_info *ws_model_tensor(const ws_model *m, int i) { return &m->tensors[i]; }
size_t ws_model_n_params(const ws_model *m) { return m->n_params; }
float *ws_model_params(ws_model *m) { return m->params; }
float *ws_model_grads(ws_model *m) { return m->grads; }
float *ws_model_adam_m(ws_model *m) { return m->adam_m; }
float *ws_model_adam_v(ws_model *m) { return m->adam_v; }
int ws_model_optim_steps(const ws_model *m) { return m->optim_steps; }
void ws_model_set_optim_steps(ws_model *m, int steps) { m->optim_steps = steps; }

const ws_tensor_info *ws_model_tensor_by_name(const ws_model *m, const char *name)
{
    for (int i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0) return &m->tensors[i];
    return NULL;
}

static ws_status find_sized(const ws_model *m, const char *name, size_t numel,
                            const ws_tensor_info **t, ws_error *err)
{
    *t = ws_model_tensor_by_name(m, name);
    if (!*t) return ws_error_set(err, WS_ERR_NOTFOUND, "model: no tensor named %s", name);
    if ((*t)->numel != numel)
        return ws_error_set(err, WS_ERR_INVALID, "model: tensor %s has %zu elements, not %zu",
                            name, (*t)->numel, numel);
    return WS_OK;
}

ws_status ws_model_get_tensor(ws_model *m, const char *name, float *host, size_t numel,
                              int grads, ws_error *err)
{
    const ws_tensor_info *t;
    WS_TRY(find_sized(m, name, numel, &t, err));
    const float *src = (grads ? m->grads : m->params) + t->offset;
    if (ws_backend_download(m->be, host, src, numel * sizeof(float)) != WS_OK)
        return ws_error_set(err, WS_ERR_BACKEND, "model: download of %s failed", name);
    return WS_OK;
}

ws_status ws_model_set_tensor(ws_model *m, const char *name, const float *host, size_t numel,
                              ws_error *err)
{
    const ws_tensor_info *t;
    WS_TRY(find_sized(m, name, numel, &t, err));
    if (ws_backend_upload(m->be, m->params + t->offset, host, numel * sizeof(float)) != WS_OK)
        return ws_error_set(err, WS_ERR_BACKEND, "model: upload of %s failed", name);
    return WS_OK;
}

/* ---- world states --------------------------------------------------------- */

size_t ws_model_state_floats(const ws_model *m)
{
    return ws_model_config_state_floats(&m->cfg);
}

ws_status ws_model_state_alloc(ws_model *m, int n, float **out, ws_error *err)
{
    size_t bytes = (size_t)(n > 0 ? n : 1) * ws_model_state_floats(m) * sizeof(float);
    if (ws_backend_alloc(m->be, bytes, (void **)out) != WS_OK)
        return ws_error_set(err, WS_ERR_NOMEM, "model: cannot allocate %d states", n);
    return WS_OK;
}

ws_status ws_model_state_init(ws_model *m, float *states, int first, int n, ws_error *err)
{
    /* W_0 in every view of every state */
    size_t view = (size_t)m->cfg.n_state * m->cfg.d;
    float *at = states + (size_t)first * ws_model_state_floats(m);
    for (long i = 0; i < (long)n * m->cfg.views; i++)
        if (m->be->ops->copy(m->be, at + (size_t)i * view, m->params + m->off.w0,
                             view * sizeof(float)) != WS_OK)
            return ws_error_set(err, WS_ERR_BACKEND, "model: state init failed");
    return WS_OK;
}

ws_status ws_model_zero_grads(ws_model *m, ws_error *err)
{
    if (m->be->ops->fill(m->be, m->grads, 0.0f, m->n_params) != WS_OK)
        return ws_error_set(err, WS_ERR_BACKEND, "model: cannot zero gradients");
    return WS_OK;
}
