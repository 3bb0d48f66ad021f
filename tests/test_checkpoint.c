/* test_checkpoint.c — model checkpoints: bit-exact round trips (with and without
 * AdamW state), rejection of damaged or mismatching files, and a cross-check of
 * the file against an independent reader of the safetensors format
 * (tests/reference/check_safetensors.py, when /usr/bin/python3 exists). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model/checkpoint.h"
#include "model/model.h"
#include "model/safetensors.h"
#include "test_util.h"

static char tmpdir[64];
static ws_backend *be;

static const char *const SYMBOLS[] = {"mary", "location", "kitchen", "küche", "", "3"};
#define N_SYMBOLS ((int)(sizeof SYMBOLS / sizeof SYMBOLS[0]))

static ws_model_config small_config(void)
{
    ws_model_config c = ws_model_config_default();
    c.d = 16;
    c.n_heads = 2;
    c.n_state = 4;
    c.n_upd_layers = 1;
    c.n_ext_layers = 1;
    c.max_fact_len = 3;
    c.vocab_cap = 8;
    c.n_overflow = 4;
    c.d_raw = 3; /* so that embed.raw exists */
    c.state_norm = 1;
    /* Mixer fields away from their defaults: the checkpoint must carry them all. */
    c.s2_virtual = 3, c.s2_heads = 2, c.s2_dim = 6, c.s2_tau = 0.1f, c.comp_searches = 2;
    c.comp_retrievals = 3, c.comp_dim = 5, c.rn_width = 7, c.rn_layers = 3;
    return c;
}

static void path_in(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", tmpdir, name);
}

static void check(ws_status st, const ws_error *err)
{
    if (st != WS_OK) fail_msg("%s: %s", ws_status_name(st), err->msg);
}

/* A small model with random parameters and a few vocabulary symbols. */
static ws_model *make_model(uint64_t seed)
{
    ws_model_config c = small_config();
    ws_model *m;
    ws_error err = {0};
    check(ws_model_new(&m, &c, be, seed, &err), &err);
    ws_test_rng rng = {seed * 7919 + 1};
    for (int i = 0; i < ws_model_n_tensors(m); i++) {
        const ws_tensor_info *t = ws_model_tensor(m, i);
        float *x = malloc(t->numel * sizeof *x);
        assert_non_null(x);
        ws_test_fill_normal(&rng, x, t->numel, 0.5f);
        x[0] = -0.0f; /* sign of zero must survive too */
        check(ws_model_set_tensor(m, t->name, x, t->numel, &err), &err);
        free(x);
    }
    for (int i = 0; i < N_SYMBOLS; i++)
        assert_int_equal(ws_vocab_id(ws_model_vocab(m), SYMBOLS[i], strlen(SYMBOLS[i]), 1), i);
    return m;
}

/* Fills the AdamW moments with random values (v >= 0) and sets the step count. */
static void set_optim_state(ws_model *m, uint64_t seed, int steps)
{
    size_t n = ws_model_n_params(m);
    float *x = malloc(n * sizeof *x);
    assert_non_null(x);
    ws_test_rng rng = {seed};
    ws_test_fill_normal(&rng, x, n, 1e-3f);
    assert_int_equal(ws_backend_upload(be, ws_model_adam_m(m), x, n * sizeof *x), WS_OK);
    for (size_t i = 0; i < n; i++) x[i] = x[i] * x[i] * 0.5f;
    assert_int_equal(ws_backend_upload(be, ws_model_adam_v(m), x, n * sizeof *x), WS_OK);
    ws_model_set_optim_steps(m, steps);
    free(x);
}

static float *download_all(ws_model *m, const float *dev)
{
    size_t n = ws_model_n_params(m);
    float *x = malloc(n * sizeof *x);
    assert_non_null(x);
    assert_int_equal(ws_backend_download(be, x, dev, n * sizeof *x), WS_OK);
    return x;
}

/* Everything that a checkpoint carries must be identical, bit for bit. */
static void assert_same_model(ws_model *a, ws_model *b, int with_optim)
{
    const ws_model_config *ca = ws_model_config_of(a), *cb = ws_model_config_of(b);
    /* every field, the float s2_tau included, bit for bit */
    assert_memory_equal(ca, cb, sizeof *ca);
    assert_int_equal(ws_model_n_tensors(a), ws_model_n_tensors(b));
    ws_error err = {0};
    for (int i = 0; i < ws_model_n_tensors(a); i++) {
        const ws_tensor_info *t = ws_model_tensor(a, i);
        float *x = malloc(t->numel * sizeof *x), *y = malloc(t->numel * sizeof *y);
        assert_non_null(x);
        assert_non_null(y);
        check(ws_model_get_tensor(a, t->name, x, t->numel, 0, &err), &err);
        check(ws_model_get_tensor(b, t->name, y, t->numel, 0, &err), &err);
        if (memcmp(x, y, t->numel * sizeof *x) != 0) fail_msg("tensor %s differs", t->name);
        free(x);
        free(y);
    }
    ws_vocab *va = ws_model_vocab(a), *vb = ws_model_vocab(b);
    assert_int_equal(ws_vocab_size(va), ws_vocab_size(vb));
    for (int i = 0; i < ws_vocab_size(va); i++)
        assert_string_equal(ws_vocab_symbol(va, i), ws_vocab_symbol(vb, i));
    /* Lookups agree too (the hash table was rebuilt, not just the list). */
    for (int i = 0; i < N_SYMBOLS; i++)
        assert_int_equal(ws_vocab_id(vb, SYMBOLS[i], strlen(SYMBOLS[i]), 0), i);
    assert_int_equal(ws_vocab_id(va, "unseen", 6, 0), ws_vocab_id(vb, "unseen", 6, 0));
    if (with_optim) {
        assert_int_equal(ws_model_optim_steps(a), ws_model_optim_steps(b));
        size_t n = ws_model_n_params(a);
        for (int k = 0; k < 2; k++) {
            float *x = download_all(a, k ? ws_model_adam_v(a) : ws_model_adam_m(a));
            float *y = download_all(b, k ? ws_model_adam_v(b) : ws_model_adam_m(b));
            if (memcmp(x, y, n * sizeof *x) != 0) fail_msg("AdamW %s differs", k ? "v" : "m");
            free(x);
            free(y);
        }
    }
}

/* ---- round trips ---------------------------------------------------------- */

static void test_roundtrip_params(void **state)
{
    (void)state;
    char path[128];
    path_in(path, sizeof path, "params.safetensors");
    ws_model *a = make_model(1), *b = NULL;
    set_optim_state(a, 5, 3);
    ws_error err = {0};
    check(ws_checkpoint_save(a, path, 0, &err), &err);
    check(ws_checkpoint_load(&b, path, be, &err), &err);
    assert_non_null(b);
    assert_same_model(a, b, 0);
    /* Without optimizer state the loaded model starts fresh. */
    assert_int_equal(ws_model_optim_steps(b), 0);
    float *mv = download_all(b, ws_model_adam_m(b));
    for (size_t i = 0; i < ws_model_n_params(b); i++) assert_true(mv[i] == 0.0f);
    free(mv);

    ws_st_file *f;
    check(ws_st_read(path, &f, &err), &err);
    assert_int_equal(ws_st_count(f), ws_model_n_tensors(a));
    assert_string_equal(ws_st_meta(f, "format"), WS_CHECKPOINT_FORMAT);
    assert_null(ws_st_meta(f, "optim_steps"));
    assert_string_equal(ws_st_meta(f, "vocab"),
                        "[\"mary\",\"location\",\"kitchen\",\"küche\",\"\",\"3\"]");
    /* Tensors in table order, named and shaped as in the table. */
    for (int i = 0; i < ws_model_n_tensors(a); i++) {
        const ws_tensor_info *t = ws_model_tensor(a, i);
        const ws_st_tensor *x = ws_st_at(f, i);
        assert_string_equal(x->name, t->name);
        assert_int_equal(x->dtype, WS_ST_F32);
        assert_int_equal(x->ndim, t->ndim);
        for (int k = 0; k < t->ndim; k++) assert_int_equal(x->shape[k], t->shape[k]);
    }
    ws_st_close(f);
    ws_model_free(a);
    ws_model_free(b);
}

static void test_roundtrip_optim(void **state)
{
    (void)state;
    char path[128];
    path_in(path, sizeof path, "optim.safetensors");
    ws_model *a = make_model(2), *b = NULL;
    set_optim_state(a, 9, 17);
    ws_error err = {0};
    check(ws_checkpoint_save(a, path, 1, &err), &err);
    check(ws_checkpoint_load(&b, path, be, &err), &err);
    assert_same_model(a, b, 1);

    ws_st_file *f;
    check(ws_st_read(path, &f, &err), &err);
    assert_int_equal(ws_st_count(f), 3 * ws_model_n_tensors(a));
    assert_string_equal(ws_st_meta(f, "optim_steps"), "17");
    assert_non_null(ws_st_find(f, "adam.m.embed.sym"));
    assert_non_null(ws_st_find(f, "adam.v.ext.head.b"));
    ws_st_close(f);

    /* Training resumes identically: one AdamW step on each (zero gradients, so
     * only the restored moments and step count drive the update). */
    ws_optim_config oc = ws_optim_config_default();
    check(ws_model_zero_grads(a, &err), &err);
    check(ws_model_zero_grads(b, &err), &err);
    check(ws_model_adamw_step(a, &oc, NULL, &err), &err);
    check(ws_model_adamw_step(b, &oc, NULL, &err), &err);
    assert_same_model(a, b, 1);
    ws_model_free(a);
    ws_model_free(b);
}

/* Saving refuses a diverged model and leaves the previous checkpoint alone. */
static void test_save_refuses(void **state)
{
    (void)state;
    char path[128];
    path_in(path, sizeof path, "refuse.safetensors");
    ws_model *a = make_model(3);
    ws_error err = {0};
    check(ws_checkpoint_save(a, path, 0, &err), &err);
    struct stat before, after;
    assert_int_equal(stat(path, &before), 0);

    const ws_tensor_info *t = ws_model_tensor(a, 5);
    float *x = malloc(t->numel * sizeof *x);
    assert_non_null(x);
    check(ws_model_get_tensor(a, t->name, x, t->numel, 0, &err), &err);
    x[t->numel - 1] = NAN;
    check(ws_model_set_tensor(a, t->name, x, t->numel, &err), &err);
    free(x);
    assert_int_equal(ws_checkpoint_save(a, path, 0, &err), WS_ERR_INVALID);
    assert_non_null(strstr(err.msg, t->name));
    assert_int_equal(stat(path, &after), 0);
    assert_int_equal(before.st_ino, after.st_ino); /* not replaced */

    /* A symbol that is not UTF-8 cannot go into the JSON header. */
    ws_model *b = make_model(4);
    assert_int_equal(ws_vocab_id(ws_model_vocab(b), "\xff\xfe", 2, 1), N_SYMBOLS);
    assert_int_equal(ws_checkpoint_save(b, path, 0, &err), WS_ERR_INVALID);
    assert_non_null(strstr(err.msg, "UTF-8"));

    ws_model_free(a);
    ws_model_free(b);

    /* An unwritable place gives WS_ERR_IO. */
    char bad[160];
    path_in(bad, sizeof bad, "no-such-dir/m.safetensors");
    ws_model *c = make_model(5);
    assert_int_equal(ws_checkpoint_save(c, bad, 1, &err), WS_ERR_IO);
    ws_model_free(c);
}

/* ---- rejection ------------------------------------------------------------ */

/* How to damage a checkpoint when copying it (NULL fields: leave alone). */
typedef struct {
    const char *what;
    const char *drop;        /* leave this tensor out */
    const char *nan_in;      /* set the last value of this tensor to NaN */
    const char *inf_in;      /* set the first value to -inf */
    const char *neg_in;      /* set the first value to -1 */
    const char *reshape;     /* 2-D: transpose the shape; 1-D [n]: [1, n] */
    const char *grow;        /* one more row (data zero-extended) */
    const char *as_i32;      /* write this tensor with dtype I32 */
    const char *extra;       /* add this extra tensor ([1] F32) */
    const char *meta_key;    /* replace (or with meta_value NULL, drop) this key */
    const char *meta_value;
    int optim;               /* damage the with_optim checkpoint */
    ws_status code;
    const char *needle;      /* must occur in the message */
} damage;

static void write_damaged(const char *src, const char *dst, const damage *d)
{
    ws_st_file *f;
    ws_error err = {0};
    check(ws_st_read(src, &f, &err), &err);
    ws_st_writer *w;
    assert_int_equal(ws_st_writer_new(&w), WS_OK);
    for (int i = 0; i < ws_st_count(f); i++) {
        const ws_st_tensor *t = ws_st_at(f, i);
        if (d->drop && !strcmp(t->name, d->drop)) continue;
        size_t bytes = t->numel * 4;
        int64_t shape[WS_ST_MAX_DIMS];
        int ndim = t->ndim;
        memcpy(shape, t->shape, sizeof shape);
        float *x = calloc(t->numel + 64, sizeof *x);
        assert_non_null(x);
        memcpy(x, t->data, bytes);
        if (d->nan_in && !strcmp(t->name, d->nan_in)) x[t->numel - 1] = NAN;
        if (d->inf_in && !strcmp(t->name, d->inf_in)) x[0] = -INFINITY;
        if (d->neg_in && !strcmp(t->name, d->neg_in)) x[0] = -1.0f;
        if (d->reshape && !strcmp(t->name, d->reshape)) {
            if (ndim == 2) {
                shape[0] = t->shape[1];
                shape[1] = t->shape[0];
            } else {
                ndim = 2;
                shape[0] = 1;
                shape[1] = t->shape[0];
            }
        }
        if (d->grow && !strcmp(t->name, d->grow)) {
            assert_true(ndim == 2 && shape[1] <= 64);
            shape[0]++;
        }
        ws_st_dtype dt = (d->as_i32 && !strcmp(t->name, d->as_i32)) ? WS_ST_I32 : WS_ST_F32;
        check(ws_st_writer_add(w, t->name, dt, ndim, shape, x, &err), &err);
        free(x);
    }
    if (d->extra) {
        float one = 1.0f;
        int64_t s1[1] = {1};
        check(ws_st_writer_add(w, d->extra, WS_ST_F32, 1, s1, &one, &err), &err);
    }
    const char *keys[] = {"format", "config", "vocab", "optim_steps"};
    int replaced = 0;
    for (int k = 0; k < 4; k++) {
        const char *v = ws_st_meta(f, keys[k]);
        if (d->meta_key && !strcmp(d->meta_key, keys[k])) {
            v = d->meta_value;
            replaced = 1;
        }
        if (v) check(ws_st_writer_meta(w, keys[k], v, &err), &err);
    }
    if (d->meta_key && !replaced && d->meta_value)
        check(ws_st_writer_meta(w, d->meta_key, d->meta_value, &err), &err);
    check(ws_st_writer_write(w, dst, &err), &err);
    ws_st_writer_free(w);
    ws_st_close(f);
}

#define CFG_OK                                                                               \
    "{\"d\":16,\"n_heads\":2,\"n_state\":4,\"n_upd_layers\":1,\"n_ext_layers\":1,"           \
    "\"max_fact_len\":3,\"vocab_cap\":8,\"n_overflow\":4,\"d_raw\":3,\"state_norm\":1}"

static const damage damages[] = {
    {.what = "control: undamaged", .code = WS_OK},
    {.what = "control: undamaged, optim", .optim = 1, .code = WS_OK},
    {.what = "control: config reordered", .meta_key = "config",
     .meta_value = "{\"rn_layers\":3,\"rn_width\":7,\"comp_dim\":5,\"comp_retrievals\":3,"
                   "\"comp_searches\":2,\"s2_tau\":0.1,\"s2_dim\":6,\"s2_heads\":2,"
                   "\"s2_virtual\":3,\"ext_mixer\":\"mha\",\"upd_mixer\":\"mha\","
                   "\"state_norm\":1,\"d_raw\":3,\"n_overflow\":4,\"vocab_cap\":8,"
                   "\"max_fact_len\":3,\"n_ext_layers\":1,\"n_upd_layers\":1,\"n_state\":4,"
                   "\"n_heads\":2,\"d\":16,\"empty_steps\":\"hold\",\"symbol_code\":\"hashed\"}",
     .code = WS_OK},
    {.what = "missing tensor", .drop = "ext.head.b", .code = WS_ERR_FORMAT,
     .needle = "'ext.head.b' is missing"},
    {.what = "missing first tensor", .drop = "embed.sym", .code = WS_ERR_FORMAT,
     .needle = "embed.sym"},
    {.what = "transposed shape", .reshape = "upd.0.mlp.fc.w", .code = WS_ERR_FORMAT,
     .needle = "'upd.0.mlp.fc.w' has shape [16,64], expected [64,16]"},
    {.what = "1-D as 2-D", .reshape = "embed.ln.g", .code = WS_ERR_FORMAT,
     .needle = "'embed.ln.g' has shape [1,16], expected [16]"},
    {.what = "extra row", .grow = "embed.slot", .code = WS_ERR_FORMAT, .needle = "embed.slot"},
    {.what = "NaN value", .nan_in = "ext.0.cross.kv.w", .code = WS_ERR_FORMAT,
     .needle = "'ext.0.cross.kv.w' has a non-finite value at index 511"},
    {.what = "-inf value", .inf_in = "state.w0", .code = WS_ERR_FORMAT,
     .needle = "'state.w0' has a non-finite value at index 0"},
    {.what = "I32 dtype", .as_i32 = "ctx.null", .code = WS_ERR_FORMAT,
     .needle = "'ctx.null' has dtype I32"},
    {.what = "unknown tensor", .extra = "bogus.w", .code = WS_ERR_FORMAT,
     .needle = "unknown tensor 'bogus.w'"},
    {.what = "unknown adam tensor", .extra = "adam.m.bogus", .optim = 1, .code = WS_ERR_FORMAT,
     .needle = "unknown tensor 'adam.m.bogus'"},
    {.what = "format missing", .meta_key = "format", .code = WS_ERR_FORMAT,
     .needle = "'format' is missing"},
    {.what = "format wrong", .meta_key = "format", .meta_value = "worldstate-model-0",
     .code = WS_ERR_FORMAT, .needle = "worldstate-model-0"},
    {.what = "config missing", .meta_key = "config", .code = WS_ERR_FORMAT,
     .needle = "'config' is missing"},
    {.what = "config not JSON", .meta_key = "config", .meta_value = "{\"d\":16",
     .code = WS_ERR_FORMAT, .needle = "config is not a JSON object"},
    {.what = "config trailing garbage", .meta_key = "config", .meta_value = CFG_OK "x",
     .code = WS_ERR_FORMAT, .needle = "config is not a JSON object"},
    {.what = "config an array", .meta_key = "config", .meta_value = "[16]",
     .code = WS_ERR_FORMAT, .needle = "config is not a JSON object"},
    {.what = "config missing key", .meta_key = "config",
     .meta_value = "{\"d\":16,\"n_heads\":2,\"n_state\":4,\"n_upd_layers\":1,"
                   "\"n_ext_layers\":1,\"max_fact_len\":3,\"vocab_cap\":8,\"n_overflow\":4,"
                   "\"state_norm\":1}",
     .code = WS_ERR_FORMAT, .needle = "missing field \"d_raw\""},
    {.what = "config string value", .meta_key = "config",
     .meta_value = "{\"d\":\"16\",\"n_heads\":2,\"n_state\":4,\"n_upd_layers\":1,"
                   "\"n_ext_layers\":1,\"max_fact_len\":3,\"vocab_cap\":8,\"n_overflow\":4,"
                   "\"d_raw\":3,\"state_norm\":1}",
     .code = WS_ERR_FORMAT, .needle = "d must be an integer"},
    {.what = "config fractional value", .meta_key = "config",
     .meta_value = "{\"d\":16,\"n_heads\":2.5,\"n_state\":4,\"n_upd_layers\":1,"
                   "\"n_ext_layers\":1,\"max_fact_len\":3,\"vocab_cap\":8,\"n_overflow\":4,"
                   "\"d_raw\":3,\"state_norm\":1}",
     .code = WS_ERR_FORMAT, .needle = "n_heads must be an integer"},
    {.what = "config huge value", .meta_key = "config",
     .meta_value = "{\"d\":1e12,\"n_heads\":2,\"n_state\":4,\"n_upd_layers\":1,"
                   "\"n_ext_layers\":1,\"max_fact_len\":3,\"vocab_cap\":8,\"n_overflow\":4,"
                   "\"d_raw\":3,\"state_norm\":1}",
     .code = WS_ERR_FORMAT, .needle = "d must be an integer"},
    {.what = "config unknown key", .meta_key = "config",
     .meta_value = "{\"d\":16,\"n_heads\":2,\"n_state\":4,\"n_upd_layers\":1,"
                   "\"n_ext_layers\":1,\"max_fact_len\":3,\"vocab_cap\":8,\"n_overflow\":4,"
                   "\"d_raw\":3,\"state_norm\":1,\"rope\":1}",
     .code = WS_ERR_FORMAT, .needle = "unknown field \"rope\""},
    {.what = "config duplicate key", .meta_key = "config",
     .meta_value = "{\"d\":16,\"d\":16,\"n_heads\":2,\"n_state\":4,\"n_upd_layers\":1,"
                   "\"n_ext_layers\":1,\"max_fact_len\":3,\"vocab_cap\":8,\"n_overflow\":4,"
                   "\"d_raw\":3,\"state_norm\":1}",
     .code = WS_ERR_FORMAT, .needle = "field \"d\" appears twice"},
    {.what = "config unknown mixer", .meta_key = "config",
     .meta_value = "{\"d\":16,\"n_heads\":2,\"n_state\":4,\"n_upd_layers\":1,"
                   "\"n_ext_layers\":1,\"max_fact_len\":3,\"vocab_cap\":8,\"n_overflow\":4,"
                   "\"d_raw\":3,\"state_norm\":1,\"upd_mixer\":\"lstm\"}",
     .code = WS_ERR_FORMAT, .needle = "upd_mixer must be one of"},
    {.what = "config mixer in wrong slot", .meta_key = "config",
     .meta_value = "{\"d\":16,\"n_heads\":2,\"n_state\":4,\"n_upd_layers\":1,"
                   "\"n_ext_layers\":1,\"max_fact_len\":3,\"vocab_cap\":8,\"n_overflow\":4,"
                   "\"d_raw\":3,\"state_norm\":1,\"ext_mixer\":\"rmc\"}",
     .code = WS_ERR_FORMAT, .needle = "ext_mixer rmc cannot"},
    {.what = "config infinite tau", .meta_key = "config",
     .meta_value = "{\"d\":16,\"n_heads\":2,\"n_state\":4,\"n_upd_layers\":1,"
                   "\"n_ext_layers\":1,\"max_fact_len\":3,\"vocab_cap\":8,\"n_overflow\":4,"
                   "\"d_raw\":3,\"state_norm\":1,\"s2_tau\":1e999}",
     .code = WS_ERR_FORMAT, .needle = "s2_tau must be a finite number"},
    {.what = "config invalid (heads)", .meta_key = "config",
     .meta_value = "{\"d\":16,\"n_heads\":3,\"n_state\":4,\"n_upd_layers\":1,"
                   "\"n_ext_layers\":1,\"max_fact_len\":3,\"vocab_cap\":8,\"n_overflow\":4,"
                   "\"d_raw\":3,\"state_norm\":1}",
     .code = WS_ERR_FORMAT, .needle = "n_heads"},
    {.what = "config for another model", .meta_key = "config",
     .meta_value = "{\"d\":16,\"n_heads\":2,\"n_state\":4,\"n_upd_layers\":1,"
                   "\"n_ext_layers\":1,\"max_fact_len\":3,\"vocab_cap\":8,\"n_overflow\":4,"
                   "\"d_raw\":0,\"state_norm\":1}",
     .code = WS_ERR_FORMAT, .needle = "unknown tensor 'embed.raw'"},
    {.what = "vocab missing", .meta_key = "vocab", .code = WS_ERR_FORMAT,
     .needle = "'vocab' is missing"},
    {.what = "vocab not an array", .meta_key = "vocab", .meta_value = "{\"a\":0}",
     .code = WS_ERR_FORMAT, .needle = "vocab is not a JSON array"},
    {.what = "vocab non-string", .meta_key = "vocab", .meta_value = "[\"a\",2]",
     .code = WS_ERR_FORMAT, .needle = "vocab[1] is not a string"},
    {.what = "vocab duplicate", .meta_key = "vocab", .meta_value = "[\"a\",\"b\",\"a\"]",
     .code = WS_ERR_FORMAT, .needle = "vocab[2] 'a' duplicates vocab[0]"},
    {.what = "vocab over capacity", .meta_key = "vocab",
     .meta_value = "[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\"]",
     .code = WS_ERR_FORMAT, .needle = "9 symbols, capacity is 8"},
    {.what = "adam moment missing", .optim = 1, .drop = "adam.v.ext.ln.b",
     .code = WS_ERR_FORMAT, .needle = "'adam.v.ext.ln.b' is missing"},
    {.what = "adam moment NaN", .optim = 1, .nan_in = "adam.m.embed.val",
     .code = WS_ERR_FORMAT, .needle = "'adam.m.embed.val' has a non-finite"},
    {.what = "adam v negative", .optim = 1, .neg_in = "adam.v.upd.0.ln2.g",
     .code = WS_ERR_FORMAT, .needle = "'adam.v.upd.0.ln2.g' has a negative value"},
    {.what = "adam moment reshaped", .optim = 1, .reshape = "adam.m.state.pos",
     .code = WS_ERR_FORMAT, .needle = "'adam.m.state.pos' has shape"},
    {.what = "optim_steps missing", .optim = 1, .meta_key = "optim_steps",
     .code = WS_ERR_FORMAT, .needle = "'optim_steps' is missing"},
    {.what = "optim_steps not a number", .optim = 1, .meta_key = "optim_steps",
     .meta_value = "12a", .code = WS_ERR_FORMAT, .needle = "'optim_steps' is not"},
    {.what = "optim_steps negative", .optim = 1, .meta_key = "optim_steps", .meta_value = "-1",
     .code = WS_ERR_FORMAT, .needle = "'optim_steps' is not"},
    {.what = "optim_steps without moments", .meta_key = "optim_steps", .meta_value = "3",
     .code = WS_ERR_FORMAT, .needle = "'adam.m.embed.sym' is missing"},
};

/* A checkpoint written before symbol_code and empty_steps existed has no such
 * keys: it loads as the table encoding and the Updater on every step it was
 * trained with (not the defaults), parameters unchanged; a spelling this build
 * does not know is refused. */
static void test_symbol_code_of_old_checkpoints(void **state)
{
    (void)state;
    char good[128], old[128];
    path_in(good, sizeof good, "hashed.safetensors");
    path_in(old, sizeof old, "old.safetensors");
    ws_model *a = make_model(8), *m = NULL;
    assert_int_equal(ws_model_config_of(a)->symbol_code, WS_SYMBOLS_HASHED);
    assert_int_equal(ws_model_config_of(a)->empty_steps, WS_EMPTY_HOLD);
    ws_error err = {0};
    check(ws_checkpoint_save(a, good, 0, &err), &err);
    write_damaged(good, old, &(damage){.meta_key = "config", .meta_value = CFG_OK});
    check(ws_checkpoint_load(&m, old, be, &err), &err);
    assert_int_equal(ws_model_config_of(m)->symbol_code, WS_SYMBOLS_TABLE);
    assert_int_equal(ws_model_config_of(m)->empty_steps, WS_EMPTY_UPDATE);
    float *x = download_all(a, ws_model_params(a)), *y = download_all(m, ws_model_params(m));
    assert_memory_equal(x, y, ws_model_n_params(a) * sizeof *x);
    free(x), free(y);
    ws_model_free(m);
    write_damaged(good, old, &(damage){.meta_key = "config",
                                       .meta_value = "{\"d\":16,\"n_heads\":2,\"n_state\":4,"
                                                     "\"n_upd_layers\":1,\"n_ext_layers\":1,"
                                                     "\"max_fact_len\":3,\"vocab_cap\":8,"
                                                     "\"n_overflow\":4,\"d_raw\":3,"
                                                     "\"state_norm\":1,\"symbol_code\":\"bpe\"}"});
    m = (ws_model *)0x1;
    assert_int_equal(ws_checkpoint_load(&m, old, be, &err), WS_ERR_FORMAT);
    assert_null(m);
    assert_non_null(strstr(err.msg, "symbol_code must be one of \"table\", \"hashed\""));
    ws_model_free(a);
}

static void test_rejects_damaged(void **state)
{
    (void)state;
    char plain[128], optim[128], bad[128];
    path_in(plain, sizeof plain, "good.safetensors");
    path_in(optim, sizeof optim, "good-optim.safetensors");
    path_in(bad, sizeof bad, "damaged.safetensors");
    ws_model *a = make_model(6);
    set_optim_state(a, 11, 4);
    ws_error err = {0};
    check(ws_checkpoint_save(a, plain, 0, &err), &err);
    check(ws_checkpoint_save(a, optim, 1, &err), &err);
    for (size_t i = 0; i < sizeof damages / sizeof damages[0]; i++) {
        const damage *d = &damages[i];
        write_damaged(d->optim ? optim : plain, bad, d);
        ws_model *m = (ws_model *)0x1; /* must be reset */
        memset(&err, 0, sizeof err);
        ws_status st = ws_checkpoint_load(&m, bad, be, &err);
        if (d->code == WS_OK) {
            if (st != WS_OK) fail_msg("%s: %s", d->what, err.msg);
            assert_same_model(a, m, d->optim);
            ws_model_free(m);
            continue;
        }
        if (st == WS_OK) {
            ws_model_free(m);
            fail_msg("%s: accepted", d->what);
        }
        assert_null(m);
        if (st != d->code) fail_msg("%s: status %s (%s)", d->what, ws_status_name(st), err.msg);
        if (!strstr(err.msg, d->needle))
            fail_msg("%s: message '%s' lacks '%s'", d->what, err.msg, d->needle);
        const char *msg = strstr(err.msg, ": ");
        print_message("  %-28s -> %s\n", d->what, msg ? msg + 2 : err.msg);
    }
    ws_model_free(a);
}

static void test_rejects_other_files(void **state)
{
    (void)state;
    char path[128];
    ws_error err = {0};
    ws_model *m = NULL;
    path_in(path, sizeof path, "absent.safetensors");
    assert_int_equal(ws_checkpoint_load(&m, path, be, &err), WS_ERR_IO);
    assert_null(m);

    path_in(path, sizeof path, "text.safetensors");
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs("this is not a checkpoint at all\n", fp);
    assert_int_equal(fclose(fp), 0);
    assert_int_equal(ws_checkpoint_load(&m, path, be, &err), WS_ERR_FORMAT);
    assert_null(m);

    /* A valid safetensors file that is not a checkpoint. */
    ws_st_writer *w;
    assert_int_equal(ws_st_writer_new(&w), WS_OK);
    float x[2] = {1, 2};
    int64_t s[1] = {2};
    check(ws_st_writer_add(w, "weight", WS_ST_F32, 1, s, x, &err), &err);
    check(ws_st_writer_write(w, path, &err), &err);
    ws_st_writer_free(w);
    assert_int_equal(ws_checkpoint_load(&m, path, be, &err), WS_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "format"));
    assert_null(m);
}

/* ---- independent reader ---------------------------------------------------- */

static int script_path(char *out, size_t n)
{
    const char *golden = getenv("WS_GOLDEN_DIR");
    if (golden && golden[0]) {
        snprintf(out, n, "%s/../reference/check_safetensors.py", golden);
        if (access(out, R_OK) == 0) return 1;
    }
    /* Fall back to this source file's directory (CMake compiles absolute paths). */
    snprintf(out, n, "%s", __FILE__);
    char *slash = strrchr(out, '/');
    if (!slash) return 0;
    snprintf(slash + 1, n - (size_t)(slash + 1 - out), "reference/check_safetensors.py");
    return access(out, R_OK) == 0;
}

/* Runs the checker on path; returns its exit status and its stdout (caller frees).
 * quiet: drop its stderr (for files it is expected to reject). */
static int run_checker(const char *script, const char *path, int quiet, char **out)
{
    assert_null(strchr(script, '\''));
    assert_null(strchr(path, '\''));
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s' '%s' --ours --json%s", script, path,
             quiet ? " 2>/dev/null" : "");
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    size_t r;
    while ((r = fread(buf + len, 1, cap - len - 1, p)) > 0) {
        len += r;
        if (len + 1 == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
    }
    buf[len] = '\0';
    int status = pclose(p);
    *out = buf;
    return status == -1 ? -1 : WEXITSTATUS(status);
}

static void test_reference_reader(void **state)
{
    (void)state;
    if (access("/usr/bin/python3", X_OK) != 0) {
        print_message("  /usr/bin/python3 not found: reference check skipped\n");
        skip();
    }
    char script[512];
    if (!script_path(script, sizeof script)) fail_msg("tests/reference/check_safetensors.py not found");
    char path[128];
    path_in(path, sizeof path, "reference.safetensors");
    ws_model *a = make_model(8);
    set_optim_state(a, 13, 21);
    ws_error err = {0};
    check(ws_checkpoint_save(a, path, 1, &err), &err);

    char *out;
    int rc = run_checker(script, path, 0, &out);
    if (rc != 0) fail_msg("checker rejected our checkpoint (rc %d): %s", rc, out);
    cJSON *j = cJSON_Parse(out);
    assert_non_null(j);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "ok")));
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(j, "metadata");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(md, "format")->valuestring,
                        WS_CHECKPOINT_FORMAT);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(md, "optim_steps")->valuestring, "21");
    /* The vocabulary reads back through Python's JSON parser as the same list. */
    cJSON *vocab = cJSON_Parse(cJSON_GetObjectItemCaseSensitive(md, "vocab")->valuestring);
    assert_int_equal(cJSON_GetArraySize(vocab), N_SYMBOLS);
    for (int i = 0; i < N_SYMBOLS; i++)
        assert_string_equal(cJSON_GetArrayItem(vocab, i)->valuestring, SYMBOLS[i]);
    cJSON_Delete(vocab);

    const cJSON *tensors = cJSON_GetObjectItemCaseSensitive(j, "tensors");
    assert_int_equal(cJSON_GetArraySize(tensors), 3 * ws_model_n_tensors(a));
    int used_numpy = 1;
    for (int k = 0; k < 3; k++) {
        const char *prefix = k == 0 ? "" : k == 1 ? "adam.m." : "adam.v.";
        float *all = k == 0 ? NULL : download_all(a, k == 1 ? ws_model_adam_m(a) : ws_model_adam_v(a));
        for (int i = 0; i < ws_model_n_tensors(a); i++) {
            const ws_tensor_info *t = ws_model_tensor(a, i);
            char name[80];
            snprintf(name, sizeof name, "%s%s", prefix, t->name);
            const cJSON *e = cJSON_GetObjectItemCaseSensitive(tensors, name);
            if (!e) fail_msg("checker did not list %s", name);
            assert_string_equal(cJSON_GetObjectItemCaseSensitive(e, "dtype")->valuestring, "F32");
            const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
            assert_int_equal(cJSON_GetArraySize(shape), t->ndim);
            for (int d = 0; d < t->ndim; d++)
                assert_int_equal(cJSON_GetArrayItem(shape, d)->valueint, t->shape[d]);
            used_numpy &= cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "numpy"));
            float *x = malloc(t->numel * sizeof *x);
            assert_non_null(x);
            if (k == 0)
                check(ws_model_get_tensor(a, t->name, x, t->numel, 0, &err), &err);
            else
                memcpy(x, all + t->offset, t->numel * sizeof *x);
            /* First and last values exactly (Python prints the float64 repr of
             * the float32, which strtod turns back into the same value). */
            double first = strtod(cJSON_GetObjectItemCaseSensitive(e, "first")->valuestring, NULL);
            double last = strtod(cJSON_GetObjectItemCaseSensitive(e, "last")->valuestring, NULL);
            if ((float)first != x[0] || (float)last != x[t->numel - 1])
                fail_msg("%s: first/last %g/%g, expected %g/%g", name, first, last, x[0],
                         x[t->numel - 1]);
            double sum = 0, mag = 0;
            for (size_t q = 0; q < t->numel; q++) sum += x[q], mag += fabs(x[q]);
            double rsum = strtod(cJSON_GetObjectItemCaseSensitive(e, "sum")->valuestring, NULL);
            if (fabs(rsum - sum) > 1e-12 * mag + 1e-300)
                fail_msg("%s: sum %.17g, expected %.17g", name, rsum, sum);
            assert_int_equal(cJSON_GetObjectItemCaseSensitive(e, "non_finite")->valueint, 0);
            free(x);
        }
        free(all);
    }
    if (!used_numpy) print_message("  numpy missing: the checker loaded tensors with 'array'\n");
    cJSON_Delete(j);
    free(out);

    /* The checker is not a rubber stamp: it rejects a file with a trailing byte. */
    FILE *fp = fopen(path, "ab");
    assert_non_null(fp);
    assert_int_equal(fputc(0, fp), 0);
    assert_int_equal(fclose(fp), 0);
    rc = run_checker(script, path, 1, &out);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(out, "MetadataIncompleteBuffer"));
    free(out);
    ws_model_free(a);
}

/* ---- fixture ------------------------------------------------------------- */

static int setup(void **state)
{
    (void)state;
    ws_error err = {0};
    if (ws_backend_cpu_new(&be, 1, &err) != WS_OK) return -1;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ws_test_ckpt_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    ws_backend_free(be);
    return ws_test_rm_tree(tmpdir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_params),  cmocka_unit_test(test_roundtrip_optim),
        cmocka_unit_test(test_save_refuses),      cmocka_unit_test(test_rejects_damaged),
        cmocka_unit_test(test_rejects_other_files), cmocka_unit_test(test_reference_reader),
        cmocka_unit_test(test_symbol_code_of_old_checkpoints),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
