/* test_server_import.c — models from checkpoints, end to end over HTTP (the
 * real worldstated): a fresh daemon's "default" is the shipped checkpoint when
 * the build embedded one; POST /v1/models/{name}/import of a checkpoint made
 * by the model library serves the same answers as that checkpoint run
 * directly, both as a new model and as the next version of one; and every
 * refusal (key, body, config, vocabulary, size, name) changes nothing. */
#include <curl/curl.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model/checkpoint.h"
#include "test_server_util.h"
#include "test_util.h"

/* The daemon the tests share (started by setup, stopped by ws_ts_shared_teardown). */
static ws_ts_daemon *const D = &ws_ts_shared;
static const char *const DIR_ = ws_ts_shared_dir;
static char ADMIN[128], USER[128];

static const char *const SYMS[] = {"anna", "hall", "bob", "attic", "carl"};

static int setup(void **state)
{
    (void)state;
    ws_ts_tmpdir(ws_ts_shared_dir, sizeof ws_ts_shared_dir);
    /* Keys from the start: the refusals need a key that is not an admin's. */
    if (ws_ts_key_create(DIR_, "ops", 1, ADMIN, sizeof ADMIN) != 0) return -1;
    if (ws_ts_key_create(DIR_, "acme", 0, USER, sizeof USER) != 0) return -1;
    return ws_ts_start(D, DIR_, NULL);
}

static ws_model_config tiny_config(int d)
{
    ws_model_config c = ws_model_config_default();
    c.d = d, c.n_heads = 2, c.n_state = 4, c.n_upd_layers = 1, c.n_ext_layers = 1;
    c.vocab_cap = 64, c.n_overflow = 4;
    return c;
}

/* A checkpoint of a fresh model (cfg, seed) whose vocabulary is syms[0..n). */
static void make_ckpt(const char *path, ws_model_config cfg, uint64_t seed, const char *const *syms,
                      int n, int with_optim)
{
    ws_error err = {0};
    ws_backend *be;
    ws_model *m;
    assert_int_equal(ws_backend_cpu_new(&be, 1, &err), WS_OK);
    assert_int_equal(ws_model_new(&m, &cfg, be, seed, &err), WS_OK);
    for (int i = 0; i < n; i++)
        assert_int_equal(ws_vocab_id(ws_model_vocab(m), syms[i], strlen(syms[i]), 1), i);
    assert_int_equal(ws_checkpoint_save(m, path, with_optim, &err), WS_OK);
    ws_model_free(m);
    ws_backend_free(be);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    assert_true(n >= 0);
    rewind(f);
    char *b = malloc((size_t)n + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

static void spit(const char *path, const char *b, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static long import_bytes(const char *name, const char *key, const char *body, size_t len,
                         ws_ts_resp *r)
{
    char p[256];
    snprintf(p, sizeof p, "/v1/models/%s/import", name);
    return ws_ts_http(D, "POST", p, key, body, len, r);
}

static long import_file(const char *name, const char *path, ws_ts_resp *r)
{
    size_t len;
    char *b = slurp(path, &len);
    long st = import_bytes(name, ADMIN, b, len, r);
    free(b);
    return st;
}

static const char *str_of(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItem(o, k);
    assert_true(cJSON_IsString(v));
    return v->valuestring;
}

static double num_of(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItem(o, k);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

static const char *error_code(const ws_ts_resp *r)
{
    return str_of(cJSON_GetObjectItem(r->json, "error"), "code");
}

/* The current checkpoint of a model, downloaded and loaded (CPU). */
static ws_model *download(const char *name, ws_backend *be, long *version)
{
    char p[256], file[320];
    snprintf(p, sizeof p, "/v1/models/%s/checkpoint", name);
    ws_ts_resp r;
    assert_int_equal(ws_ts_req(D, "GET", p, ADMIN, NULL, &r), 200);
    snprintf(file, sizeof file, "%s.download", DIR_);
    spit(file, r.body, r.len);
    ws_ts_resp_free(&r);
    ws_model *m;
    ws_error err = {0};
    assert_int_equal(ws_checkpoint_load(&m, file, be, &err), WS_OK);
    remove(file);
    if (version) { /* the model's current version, as listed */
        snprintf(p, sizeof p, "/v1/models/%s", name);
        assert_int_equal(ws_ts_req(D, "GET", p, ADMIN, NULL, &r), 200);
        *version = (long)num_of(r.json, "version");
        ws_ts_resp_free(&r);
    }
    return m;
}

/* Same configuration and bit-identical parameters. */
static void assert_same_params(ws_model *a, ws_model *b)
{
    assert_memory_equal(ws_model_config_of(a), ws_model_config_of(b), sizeof(ws_model_config));
    assert_int_equal(ws_model_n_tensors(a), ws_model_n_tensors(b));
    ws_error err = {0};
    for (int i = 0; i < ws_model_n_tensors(a); i++) {
        const ws_tensor_info *t = ws_model_tensor(a, i);
        float *x = malloc(sizeof(float) * t->numel), *y = malloc(sizeof(float) * t->numel);
        assert_int_equal(ws_model_get_tensor(a, t->name, x, t->numel, 0, &err), WS_OK);
        assert_int_equal(ws_model_get_tensor(b, t->name, y, t->numel, 0, &err), WS_OK);
        assert_memory_equal(x, y, sizeof(float) * t->numel);
        free(x);
        free(y);
    }
}

/* ---- the shipped default ---------------------------------------------------- */

/* Runs first: the daemon is fresh, so "default" is as the first start made it. */
static void test_shipped_default(void **state)
{
    (void)state;
    const char *blob = getenv("WS_SHIPPED_DEFAULT");
    struct stat sb;
    ws_ts_resp r;
    assert_int_equal(ws_ts_req(D, "GET", "/v1/models/default", ADMIN, NULL, &r), 200);
    if (!blob || stat(blob, &sb) != 0 || sb.st_size == 0) {
        assert_string_equal(str_of(r.json, "origin"), "random");
        ws_ts_resp_free(&r);
        printf("skipped: no shipped default model (models/default.safetensors was absent at "
               "build time; the default model is random and untrained)\n");
        skip();
    }
    assert_string_equal(str_of(r.json, "origin"), "shipped");
    assert_string_equal(str_of(r.json, "version_note"), "shipped");
    assert_int_equal((int)num_of(r.json, "version"), 1);
    ws_ts_resp_free(&r);
    ws_error err = {0};
    ws_backend *be;
    ws_model *shipped, *served;
    assert_int_equal(ws_backend_cpu_new(&be, 1, &err), WS_OK);
    assert_int_equal(ws_checkpoint_load(&shipped, blob, be, &err), WS_OK);
    served = download("default", be, NULL);
    assert_same_params(shipped, served);
    ws_model_free(shipped);
    ws_model_free(served);
    ws_backend_free(be);
}

/* ---- import as a new model, and as a new version -------------------------- */

static long step(const char *id, const char *body, ws_ts_resp *r)
{
    char p[128];
    return ws_ts_req(D, "POST", ws_ts_spath(p, sizeof p, id, "/steps"), ADMIN, body, r);
}

static float *fetch_state(const char *id, size_t n)
{
    char p[128];
    ws_ts_resp r;
    assert_int_equal(ws_ts_req(D, "GET", ws_ts_spath(p, sizeof p, id, "/state"), ADMIN, NULL, &r),
                     200);
    assert_int_equal(r.len, n * sizeof(float));
    float *w = malloc(r.len);
    memcpy(w, r.body, r.len);
    ws_ts_resp_free(&r);
    return w;
}

/* One step of m run directly: instructions (a,b)=true for pairs instr[0..ni),
 * then queries q[0..nq); from W_0 when w_prev is NULL, else from w_prev. The
 * probabilities must equal the daemon's answers in r; returns W_t (host). */
static float *direct_step(ws_model *m, const float *w_prev, const int (*instr)[2], int ni,
                          const int (*q)[2], int nq, const ws_ts_resp *r)
{
    ws_error err = {0};
    ws_backend *be = ws_model_backend(m);
    ws_vocab *v = ws_model_vocab(m);
    size_t T = ws_model_state_floats(m);
    float *w, probs[8];
    ws_batch *b;
    ws_exec *x;
    ws_step_result res;
    assert_int_equal(ws_exec_new(&x, m, &err), WS_OK);
    assert_int_equal(ws_model_state_alloc(m, 1, &w, &err), WS_OK);
    assert_int_equal(ws_batch_new(&b, ws_model_config_of(m)), WS_OK);
    assert_int_equal(ws_batch_begin_traj(b, w_prev == NULL), WS_OK);
    for (int i = 0; i < ni + nq; i++) {
        const int *pair = i < ni ? instr[i] : q[i - ni];
        int32_t ids[2];
        for (int k = 0; k < 2; k++)
            ids[k] = ws_vocab_id(v, SYMS[pair[k]], strlen(SYMS[pair[k]]), 0);
        if (i < ni) assert_int_equal(ws_batch_add_instr(b, ids, 2, 1), WS_OK);
        else assert_int_equal(ws_batch_add_query(b, ids, 2, -1), WS_OK);
    }
    if (w_prev) assert_int_equal(ws_backend_upload(be, w, w_prev, sizeof(float) * T), WS_OK);
    assert_int_equal(ws_exec_step(x, b, w, w, WS_STEP_INFER, 1, probs, &res, &err), WS_OK);
    const cJSON *answers = cJSON_GetObjectItem(r->json, "answers");
    assert_int_equal(cJSON_GetArraySize(answers), nq);
    for (int i = 0; i < nq; i++)
        assert_true(fabs(num_of(cJSON_GetArrayItem(answers, i), "p") - probs[i]) < 1e-5);
    float *out = malloc(sizeof(float) * T);
    assert_int_equal(ws_backend_download(be, out, w, sizeof(float) * T), WS_OK);
    ws_batch_free(b);
    ws_exec_free(x);
    ws_backend_release(be, w);
    return out;
}

static char SID[33]; /* the session on "tiny", kept for the version test */

static void test_import_new_model(void **state)
{
    (void)state;
    char path[320];
    snprintf(path, sizeof path, "%s.a.safetensors", DIR_);
    make_ckpt(path, tiny_config(16), 7, SYMS, 4, 0); /* parameters only */
    ws_ts_resp r;
    assert_int_equal(import_file("tiny", path, &r), 201);
    assert_string_equal(str_of(r.json, "name"), "tiny");
    assert_int_equal((int)num_of(r.json, "version"), 1);
    assert_string_equal(str_of(r.json, "origin"), "imported");
    assert_int_equal((int)num_of(cJSON_GetObjectItem(r.json, "config"), "d"), 16);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(r.json, "training"),
                                                 "enabled"))); /* default settings */
    ws_ts_resp_free(&r);

    assert_int_equal(ws_ts_session(D, ADMIN, "tiny", SID), 201);
    static const int in1[][2] = {{0, 1}, {2, 3}}, q1[][2] = {{0, 1}, {0, 3}};
    static const int in2[][2] = {{0, 3}}, q2[][2] = {{0, 3}, {2, 3}};
    ws_ts_resp r1, r2;
    assert_int_equal(step(SID, "{\"instructions\":[{\"fact\":[\"anna\",\"hall\"],\"value\":true},"
                               "{\"fact\":[\"bob\",\"attic\"],\"value\":true}],\"queries\":"
                               "[{\"fact\":[\"anna\",\"hall\"]},{\"fact\":[\"anna\",\"attic\"]}]}",
                          &r1),
                     200);
    ws_error err = {0};
    ws_backend *be;
    ws_model *m;
    assert_int_equal(ws_backend_cpu_new(&be, 1, &err), WS_OK);
    assert_int_equal(ws_checkpoint_load(&m, path, be, &err), WS_OK);
    size_t T = ws_model_state_floats(m);
    float *w1 = fetch_state(SID, T);
    assert_int_equal(step(SID, "{\"instructions\":[{\"fact\":[\"anna\",\"attic\"],\"value\":true}],"
                               "\"queries\":[{\"fact\":[\"anna\",\"attic\"]},"
                               "{\"fact\":[\"bob\",\"attic\"]}]}",
                          &r2),
                     200);
    float *mine = direct_step(m, NULL, in1, 2, q1, 2, &r1);
    for (size_t i = 0; i < T; i++) assert_true(fabsf(mine[i] - w1[i]) < 1e-4f);
    free(direct_step(m, w1, in2, 1, q2, 2, &r2)); /* from the daemon's W_1 */
    free(mine);
    free(w1);
    ws_model_free(m);
    ws_backend_free(be);
    ws_ts_resp_free(&r1);
    ws_ts_resp_free(&r2);
    remove(path);
}

static void test_import_new_version(void **state)
{
    (void)state;
    assert_true(SID[0]); /* test_import_new_model ran */
    char path[320];
    snprintf(path, sizeof path, "%s.b.safetensors", DIR_);
    /* Other parameters, AdamW state, and one symbol the model has not stored. */
    make_ckpt(path, tiny_config(16), 8, SYMS, 5, 1);
    ws_ts_resp r;
    assert_int_equal(import_file("tiny", path, &r), 200);
    assert_int_equal((int)num_of(r.json, "version"), 2);
    assert_string_equal(str_of(r.json, "origin"), "imported");
    assert_string_equal(str_of(r.json, "version_note"), "imported");
    ws_ts_resp_free(&r);

    ws_error err = {0};
    ws_backend *be;
    ws_model *m;
    assert_int_equal(ws_backend_cpu_new(&be, 1, &err), WS_OK);
    assert_int_equal(ws_checkpoint_load(&m, path, be, &err), WS_OK);
    long version;
    ws_model *served = download("tiny", be, &version);
    assert_int_equal(version, 2);
    assert_same_params(m, served);
    ws_vocab *sv = ws_model_vocab(served);
    assert_int_equal(ws_vocab_size(sv), 5);
    for (int i = 0; i < 5; i++) assert_string_equal(ws_vocab_symbol(sv, i), SYMS[i]);
    ws_model_free(served);

    /* The next step runs under version 2, from the state version 1 made. */
    float *w2 = fetch_state(SID, ws_model_state_floats(m));
    static const int in[][2] = {{4, 1}}, q[][2] = {{4, 1}, {0, 1}};
    assert_int_equal(step(SID, "{\"instructions\":[{\"fact\":[\"carl\",\"hall\"],\"value\":true}],"
                               "\"queries\":[{\"fact\":[\"carl\",\"hall\"]},"
                               "{\"fact\":[\"anna\",\"hall\"]}]}",
                          &r),
                     200);
    assert_int_equal((int)num_of(r.json, "model_version"), 2);
    free(direct_step(m, w2, in, 1, q, 2, &r));
    ws_ts_resp_free(&r);
    free(w2);
    ws_model_free(m);
    ws_backend_free(be);
    remove(path);
}

/* ---- refusals change nothing ------------------------------------------------- */

/* The model listing (versions included) and the files of models/. */
static char *snapshot(void)
{
    ws_ts_resp r;
    assert_int_equal(ws_ts_req(D, "GET", "/v1/models", ADMIN, NULL, &r), 200);
    char dir[320];
    snprintf(dir, sizeof dir, "%s/models", DIR_);
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort);
    assert_true(n >= 0);
    size_t cap = r.len + 64 * (size_t)(n + 1), len = 0;
    char *s = malloc(cap);
    len += (size_t)snprintf(s, cap, "%s\n", r.body);
    for (int i = 0; i < n; i++) {
        char p[700];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s", dir, names[i]->d_name);
        assert_int_equal(stat(p, &sb), 0);
        if (len < cap)
            len += (size_t)snprintf(s + len, cap - len, "%.40s %lld\n", names[i]->d_name,
                                    (long long)sb.st_size);
        free(names[i]);
    }
    free(names);
    ws_ts_resp_free(&r);
    return s;
}

/* POST with Content-Length over the cap and "Expect: 100-continue": the
 * daemon answers before any of the body is sent. */
static size_t zeros(char *p, size_t sz, size_t n, void *ctx)
{
    (void)ctx;
    memset(p, 0, sz * n);
    return sz * n;
}

static size_t sink(char *p, size_t sz, size_t n, void *ctx)
{
    ws_ts_resp *r = ctx;
    char *b = realloc(r->body, r->len + sz * n + 1);
    assert_non_null(b);
    memcpy(b + r->len, p, sz * n);
    r->body = b;
    r->len += sz * n;
    b[r->len] = '\0';
    return sz * n;
}

static long import_too_large(ws_ts_resp *r)
{
    memset(r, 0, sizeof *r);
    char url[256], auth[200];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/models/huge/import", D->port);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", ADMIN);
    CURL *c = curl_easy_init();
    assert_non_null(c);
    struct curl_slist *h = curl_slist_append(NULL, auth);
    h = curl_slist_append(h, "Expect: 100-continue");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_READFUNCTION, zeros);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)((256 << 20) + 1));
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    curl_off_t sent = 0;
    curl_easy_getinfo(c, CURLINFO_SIZE_UPLOAD_T, &sent);
    assert_true(sent < (1 << 20)); /* refused before the body went out */
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    r->json = r->len ? cJSON_ParseWithLength(r->body, r->len) : NULL;
    return r->status;
}

static void test_refusals_change_nothing(void **state)
{
    (void)state;
    char good[320], wide[320], other_vocab[320];
    snprintf(good, sizeof good, "%s.good.safetensors", DIR_);
    snprintf(wide, sizeof wide, "%s.wide.safetensors", DIR_);
    snprintf(other_vocab, sizeof other_vocab, "%s.vocab.safetensors", DIR_);
    make_ckpt(good, tiny_config(16), 9, SYMS, 2, 0);
    make_ckpt(wide, tiny_config(32), 9, SYMS, 2, 0);
    static const char *const zed[] = {"zed"};
    make_ckpt(other_vocab, tiny_config(16), 9, zed, 1, 0);
    ws_ts_resp r;
    assert_int_equal(ws_ts_req(D, "GET", "/v1/models/tiny", ADMIN, NULL, &r), 200);
    ws_ts_resp_free(&r);
    size_t len;
    char *bytes = slurp(good, &len);
    char *before = snapshot();
    struct {
        const char *name, *key, *body;
        size_t len;
        long status;
        const char *code;
    } cases[] = {
        {"new1", USER, bytes, len, 403, "forbidden"},
        {"new1", NULL, bytes, len, 401, "unauthorized"},
        {"new1", ADMIN, "not a checkpoint", 16, 400, "bad_checkpoint"},
        {"new1", ADMIN, "", 0, 400, "bad_checkpoint"},
        {"new1", ADMIN, bytes, len / 2, 400, "bad_checkpoint"}, /* truncated */
        {"tiny", ADMIN, bytes, len - 1, 400, "bad_checkpoint"},
        {"b@d", ADMIN, bytes, len, 400, "invalid_request"},
        {"x12345678901234567890123456789012345678901234567890123456789012345", ADMIN, bytes, len,
         400, "invalid_request"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        long st = import_bytes(cases[i].name, cases[i].key, cases[i].body, cases[i].len, &r);
        if (st != cases[i].status) fprintf(stderr, "case %zu: %ld %s\n", i, st, r.body);
        assert_int_equal(st, cases[i].status);
        assert_string_equal(error_code(&r), cases[i].code);
        ws_ts_resp_free(&r);
        char *now = snapshot();
        assert_string_equal(now, before);
        free(now);
    }
    assert_int_equal(import_file("tiny", wide, &r), 409);
    assert_string_equal(error_code(&r), "config_mismatch");
    assert_non_null(strstr(str_of(cJSON_GetObjectItem(r.json, "error"), "message"), "d is 32"));
    ws_ts_resp_free(&r);
    assert_int_equal(import_file("tiny", other_vocab, &r), 409);
    assert_string_equal(error_code(&r), "vocab_mismatch");
    ws_ts_resp_free(&r);
    assert_int_equal(import_too_large(&r), 413);
    assert_string_equal(error_code(&r), "too_large");
    ws_ts_resp_free(&r);
    char *after = snapshot();
    assert_string_equal(after, before);
    free(after);
    free(before);
    free(bytes);
    remove(good);
    remove(wide);
    remove(other_vocab);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shipped_default),
        cmocka_unit_test(test_import_new_model),
        cmocka_unit_test(test_import_new_version),
        cmocka_unit_test(test_refusals_change_nothing),
    };
    return cmocka_run_group_tests(tests, setup, ws_ts_shared_teardown);
}
