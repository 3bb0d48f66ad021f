/* checkpoint.c — model checkpoints as safetensors files (see checkpoint.h). */
#include "checkpoint.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ws_utf8.h"
#include "safetensors.h"

#define ADAM_M "adam.m."
#define ADAM_V "adam.v."
/* Table names are < 48 bytes (ws_tensor_info.name); room for a prefix. */
#define NAME_MAX_LEN 64

/* Index of the first non-finite value, or n when all are finite. */
static size_t first_non_finite(const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return i;
    return n;
}

/* ======================================================================== */
/* save                                                                     */
/* ======================================================================== */

static char *config_json(const ws_model_config *cfg)
{
    cJSON *o = ws_model_config_to_json(cfg);
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

static ws_status vocab_json(ws_vocab *v, char **out, ws_error *err)
{
    *out = NULL;
    cJSON *a = cJSON_CreateArray();
    if (!a) return ws_error_set(err, WS_ERR_NOMEM, "checkpoint: out of memory");
    int n = ws_vocab_size(v);
    for (int i = 0; i < n; i++) {
        const char *s = ws_vocab_symbol(v, i);
        if (!s) {
            cJSON_Delete(a);
            return ws_error_set(err, WS_ERR_INVALID, "checkpoint: vocabulary id %d has no symbol",
                                i);
        }
        /* The JSON header must be UTF-8 (safetensors readers reject anything else),
         * but vocabulary symbols are arbitrary byte strings; check before writing
         * so the error can name the symbol. */
        if (!ws_utf8_valid((const unsigned char *)s, strlen(s))) {
            cJSON_Delete(a);
            return ws_error_set(err, WS_ERR_INVALID,
                                "checkpoint: vocabulary symbol %d is not valid UTF-8 and cannot "
                                "be saved",
                                i);
        }
        cJSON *item = cJSON_CreateString(s);
        if (!item || !cJSON_AddItemToArray(a, item)) {
            cJSON_Delete(item);
            cJSON_Delete(a);
            return ws_error_set(err, WS_ERR_NOMEM, "checkpoint: out of memory");
        }
    }
    *out = cJSON_PrintUnformatted(a);
    cJSON_Delete(a);
    return *out ? WS_OK : ws_error_set(err, WS_ERR_NOMEM, "checkpoint: out of memory");
}

/* Adds one tensor (host data laid out like the parameters) under prefix+name. */
static ws_status add_tensor(ws_st_writer *w, const char *prefix, const ws_tensor_info *t,
                            const float *data, ws_error *err)
{
    char name[NAME_MAX_LEN];
    snprintf(name, sizeof name, "%s%s", prefix, t->name);
    size_t bad = first_non_finite(data, t->numel);
    if (bad < t->numel)
        return ws_error_set(err, WS_ERR_INVALID,
                            "checkpoint: tensor '%s' has a non-finite value at index %zu; "
                            "refusing to save",
                            name, bad);
    int64_t shape[2] = {t->shape[0], t->ndim > 1 ? t->shape[1] : 0};
    return ws_st_writer_add(w, name, WS_ST_F32, t->ndim, shape, data, err);
}

ws_status ws_checkpoint_save(ws_model *m, const char *path, int with_optim, ws_error *err)
{
    size_t n_params = ws_model_n_params(m);
    int n_tensors = ws_model_n_tensors(m);
    ws_backend *be = ws_model_backend(m);
    ws_st_writer *w = NULL;
    char *cfg_s = NULL, *vocab_s = NULL;
    float *host = malloc((n_params > 0 ? n_params : 1) * sizeof *host);
    ws_status st;
    if (!host || ws_st_writer_new(&w) != WS_OK) {
        st = ws_error_set(err, WS_ERR_NOMEM, "checkpoint: out of memory for %zu parameters",
                          n_params);
        goto done;
    }

    for (int i = 0; i < n_tensors; i++) {
        const ws_tensor_info *t = ws_model_tensor(m, i);
        float *dst = host + t->offset;
        st = ws_model_get_tensor(m, t->name, dst, t->numel, 0, err);
        if (st != WS_OK) goto done;
        st = add_tensor(w, "", t, dst, err);
        if (st != WS_OK) goto done;
    }
    if (with_optim) {
        /* The moments live in one device buffer each, laid out like the parameters:
         * one download each, then slice by the table's offsets. */
        for (int k = 0; k < 2; k++) {
            const float *dev = k == 0 ? ws_model_adam_m(m) : ws_model_adam_v(m);
            if (ws_backend_download(be, host, dev, n_params * sizeof *host) != WS_OK) {
                st = ws_error_set(err, WS_ERR_BACKEND, "checkpoint: download of AdamW %s failed",
                                  k == 0 ? "m" : "v");
                goto done;
            }
            for (int i = 0; i < n_tensors; i++) {
                const ws_tensor_info *t = ws_model_tensor(m, i);
                st = add_tensor(w, k == 0 ? ADAM_M : ADAM_V, t, host + t->offset, err);
                if (st != WS_OK) goto done;
            }
        }
        char steps[24];
        snprintf(steps, sizeof steps, "%d", ws_model_optim_steps(m));
        st = ws_st_writer_meta(w, "optim_steps", steps, err);
        if (st != WS_OK) goto done;
    }

    cfg_s = config_json(ws_model_config_of(m));
    if (!cfg_s) {
        st = ws_error_set(err, WS_ERR_NOMEM, "checkpoint: out of memory");
        goto done;
    }
    st = vocab_json(ws_model_vocab(m), &vocab_s, err);
    if (st != WS_OK) goto done;
    if ((st = ws_st_writer_meta(w, "format", WS_CHECKPOINT_FORMAT, err)) != WS_OK ||
        (st = ws_st_writer_meta(w, "config", cfg_s, err)) != WS_OK ||
        (st = ws_st_writer_meta(w, "vocab", vocab_s, err)) != WS_OK)
        goto done;
    st = ws_st_writer_write(w, path, err);
done:
    free(cfg_s);
    free(vocab_s);
    free(host);
    ws_st_writer_free(w);
    return st;
}

/* ======================================================================== */
/* load                                                                     */
/* ======================================================================== */

static ws_status parse_config(const char *path, const char *s, ws_model_config *c,
                              ws_error *err)
{
    cJSON *o = cJSON_ParseWithOpts(s, NULL, 1); /* 1: no trailing garbage */
    if (!o || !cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return ws_error_set(err, WS_ERR_FORMAT, "%s: config is not a JSON object", path);
    }
    ws_error cerr = {0};
    ws_status st = ws_model_config_from_json(o, 1, c, &cerr);
    cJSON_Delete(o);
    if (st != WS_OK) return ws_error_set(err, WS_ERR_FORMAT, "%s: %s", path, cerr.msg);
    return WS_OK;
}

/* The file's tensor for prefix+table entry t, checked for dtype, shape and
 * finite values; *out NULL when absent (the caller decides if that is fatal). */
static ws_status find_tensor(const char *path, const ws_st_file *f, const char *prefix,
                             const ws_tensor_info *t, const ws_st_tensor **out, ws_error *err)
{
    char name[NAME_MAX_LEN];
    snprintf(name, sizeof name, "%s%s", prefix, t->name);
    const ws_st_tensor *x = ws_st_find(f, name);
    *out = NULL;
    if (!x) return WS_OK;
    if (x->dtype != WS_ST_F32)
        return ws_error_set(err, WS_ERR_FORMAT, "%s: tensor '%s' has dtype I32, expected F32",
                            path, name);
    int ok = x->ndim == t->ndim;
    for (int k = 0; ok && k < t->ndim; k++) ok = x->shape[k] == t->shape[k];
    if (!ok) {
        char got[96] = "", want[64] = "";
        size_t g = 0, wl = 0;
        for (int k = 0; k < x->ndim && g < sizeof got; k++)
            g += (size_t)snprintf(got + g, sizeof got - g, "%s%lld", k ? "," : "",
                                  (long long)x->shape[k]);
        for (int k = 0; k < t->ndim && wl < sizeof want; k++)
            wl += (size_t)snprintf(want + wl, sizeof want - wl, "%s%d", k ? "," : "",
                                   t->shape[k]);
        return ws_error_set(err, WS_ERR_FORMAT, "%s: tensor '%s' has shape [%s], expected [%s]",
                            path, name, got, want);
    }
    const float *v = x->data;
    size_t bad = first_non_finite(v, x->numel);
    if (bad < x->numel)
        return ws_error_set(err, WS_ERR_FORMAT,
                            "%s: tensor '%s' has a non-finite value at index %zu", path, name,
                            bad);
    *out = x;
    return WS_OK;
}

static ws_status restore_vocab(const char *path, const char *s, ws_model *m, ws_error *err)
{
    cJSON *a = cJSON_ParseWithOpts(s, NULL, 1);
    if (!a || !cJSON_IsArray(a)) {
        cJSON_Delete(a);
        return ws_error_set(err, WS_ERR_FORMAT, "%s: vocab is not a JSON array", path);
    }
    ws_vocab *v = ws_model_vocab(m);
    int cap = ws_model_config_of(m)->vocab_cap;
    int n = cJSON_GetArraySize(a);
    ws_status st = WS_OK;
    if (n > cap)
        st = ws_error_set(err, WS_ERR_FORMAT, "%s: vocab has %d symbols, capacity is %d", path,
                          n, cap);
    int i = 0;
    for (const cJSON *it = a->child; it && st == WS_OK; it = it->next, i++) {
        if (!cJSON_IsString(it)) {
            st = ws_error_set(err, WS_ERR_FORMAT, "%s: vocab[%d] is not a string", path, i);
            break;
        }
        int32_t id = ws_vocab_id(v, it->valuestring, strlen(it->valuestring), 1);
        if (id == i) continue;
        if (id >= 0 && id < i)
            st = ws_error_set(err, WS_ERR_FORMAT,
                              "%s: vocab[%d] '%.40s' duplicates vocab[%d]", path, i,
                              it->valuestring, (int)id);
        else /* an overflow id: the symbol could not be added (out of memory) */
            st = ws_error_set(err, WS_ERR_NOMEM, "%s: cannot add vocab[%d] '%.40s'", path, i,
                              it->valuestring);
    }
    cJSON_Delete(a);
    return st;
}

/* Parses a decimal step count in [0, INT_MAX]. */
static int parse_steps(const char *s, int *out)
{
    if (!*s) return 0;
    long long v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9') return 0;
        v = v * 10 + (*p - '0');
        if (v > INT_MAX) return 0;
    }
    *out = (int)v;
    return 1;
}

/* Restores AdamW moments and the step count when the file has them. */
static ws_status restore_optim(const char *path, const ws_st_file *f, ws_model *m, int n_adam,
                               ws_error *err)
{
    const char *steps_s = ws_st_meta(f, "optim_steps");
    if (n_adam == 0 && !steps_s) return WS_OK; /* parameters only */
    if (!steps_s)
        return ws_error_set(err, WS_ERR_FORMAT,
                            "%s: AdamW moments present but __metadata__ 'optim_steps' is missing",
                            path);
    int steps;
    if (!parse_steps(steps_s, &steps))
        return ws_error_set(err, WS_ERR_FORMAT,
                            "%s: __metadata__ 'optim_steps' is not a non-negative integer: "
                            "'%.32s'",
                            path, steps_s);
    int n_tensors = ws_model_n_tensors(m);
    size_t n_params = ws_model_n_params(m);
    float *host = malloc((n_params > 0 ? n_params : 1) * sizeof *host);
    if (!host) return ws_error_set(err, WS_ERR_NOMEM, "%s: out of memory", path);
    ws_status st = WS_OK;
    for (int k = 0; k < 2 && st == WS_OK; k++) {
        const char *prefix = k == 0 ? ADAM_M : ADAM_V;
        for (int i = 0; i < n_tensors && st == WS_OK; i++) {
            const ws_tensor_info *t = ws_model_tensor(m, i);
            const ws_st_tensor *x;
            st = find_tensor(path, f, prefix, t, &x, err);
            if (st != WS_OK) break;
            if (!x) {
                st = ws_error_set(err, WS_ERR_FORMAT,
                                  "%s: optimizer state incomplete: tensor '%s%s' is missing",
                                  path, prefix, t->name);
                break;
            }
            const float *src = x->data;
            /* A negative second moment would make AdamW's sqrt(v) NaN. */
            for (size_t j = 0; k == 1 && j < t->numel; j++)
                if (src[j] < 0.0f) {
                    st = ws_error_set(err, WS_ERR_FORMAT,
                                      "%s: tensor '%s%s' has a negative value at index %zu",
                                      path, prefix, t->name, j);
                    break;
                }
            if (st == WS_OK) memcpy(host + t->offset, src, t->numel * sizeof *host);
        }
        if (st == WS_OK) {
            float *dev = k == 0 ? ws_model_adam_m(m) : ws_model_adam_v(m);
            if (ws_backend_upload(ws_model_backend(m), dev, host, n_params * sizeof *host) !=
                WS_OK)
                st = ws_error_set(err, WS_ERR_BACKEND, "%s: upload of AdamW %s failed", path,
                                  k == 0 ? "m" : "v");
        }
    }
    free(host);
    if (st == WS_OK) ws_model_set_optim_steps(m, steps);
    return st;
}

ws_status ws_checkpoint_load(ws_model **out, const char *path, ws_backend *be, ws_error *err)
{
    return ws_checkpoint_load_admit(out, path, be, NULL, NULL, err);
}

ws_status ws_checkpoint_load_admit(ws_model **out, const char *path, ws_backend *be,
                                   ws_checkpoint_admit_fn *admit, void *ctx, ws_error *err)
{
    *out = NULL;
    ws_st_file *f = NULL;
    ws_model *m = NULL;
    WS_TRY(ws_st_read(path, &f, err));
    ws_status st;
    const char *fmt = ws_st_meta(f, "format");
    const char *cfg_s = ws_st_meta(f, "config");
    const char *vocab_s = ws_st_meta(f, "vocab");
    if (!fmt) {
        st = ws_error_set(err, WS_ERR_FORMAT, "%s: __metadata__ 'format' is missing", path);
        goto fail;
    }
    if (strcmp(fmt, WS_CHECKPOINT_FORMAT) != 0) {
        st = ws_error_set(err, WS_ERR_FORMAT, "%s: format is '%.40s', expected '%s'", path, fmt,
                          WS_CHECKPOINT_FORMAT);
        goto fail;
    }
    if (!cfg_s || !vocab_s) {
        st = ws_error_set(err, WS_ERR_FORMAT, "%s: __metadata__ '%s' is missing", path,
                          !cfg_s ? "config" : "vocab");
        goto fail;
    }
    ws_model_config cfg;
    st = parse_config(path, cfg_s, &cfg, err);
    if (st == WS_OK && admit) st = admit(ctx, &cfg, err);
    if (st != WS_OK) goto fail;
    st = ws_model_new(&m, &cfg, be, 0, err);
    if (st != WS_OK) goto fail;

    /* No tensor the model does not know: a stray tensor means the file was made
     * for a different layout, and silently dropping weights is worse than failing. */
    int n_adam = 0;
    for (int i = 0; i < ws_st_count(f); i++) {
        const char *name = ws_st_at(f, i)->name;
        const char *base = name;
        if (strncmp(name, ADAM_M, strlen(ADAM_M)) == 0 ||
            strncmp(name, ADAM_V, strlen(ADAM_V)) == 0) {
            base = name + strlen(ADAM_M);
            n_adam++;
        }
        if (!ws_model_tensor_by_name(m, base)) {
            st = ws_error_set(err, WS_ERR_FORMAT, "%s: unknown tensor '%.64s'", path, name);
            goto fail;
        }
    }
    for (int i = 0; i < ws_model_n_tensors(m); i++) {
        const ws_tensor_info *t = ws_model_tensor(m, i);
        const ws_st_tensor *x;
        st = find_tensor(path, f, "", t, &x, err);
        if (st != WS_OK) goto fail;
        if (!x) {
            st = ws_error_set(err, WS_ERR_FORMAT, "%s: tensor '%s' is missing", path, t->name);
            goto fail;
        }
        st = ws_model_set_tensor(m, t->name, x->data, t->numel, err);
        if (st != WS_OK) goto fail;
    }
    st = restore_optim(path, f, m, n_adam, err);
    if (st != WS_OK) goto fail;
    st = restore_vocab(path, vocab_s, m, err);
    if (st != WS_OK) goto fail;
    ws_st_close(f);
    *out = m;
    return WS_OK;
fail:
    ws_model_free(m);
    ws_st_close(f);
    return st;
}
