/* test_util.c — see test_util.h. */
#include "test_util.h"

#include <dirent.h>
#include <stdlib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

uint64_t ws_test_next(ws_test_rng *r)
{
    uint64_t x = r->s ? r->s : 0x9E3779B97F4A7C15ULL;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

float ws_test_uniform(ws_test_rng *r) { return (float)((ws_test_next(r) >> 40) * (1.0 / 16777216.0)); }

float ws_test_normal(ws_test_rng *r)
{
    double u1 = ((ws_test_next(r) >> 11) + 1.0) * (1.0 / 9007199254740994.0);
    double u2 = (ws_test_next(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

int ws_test_int(ws_test_rng *r, int lo, int hi)
{
    return lo + (int)(ws_test_next(r) % (uint64_t)(hi - lo + 1));
}

void ws_test_fill_normal(ws_test_rng *r, float *x, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++) x[i] = scale * ws_test_normal(r);
}

double ws_test_max_rel_err(const float *a, const float *b, size_t n, double floor)
{
    double worst = 0.0, mag = floor;
    for (size_t i = 0; i < n; i++) {
        worst = fmax(worst, fabs((double)a[i] - b[i]));
        mag = fmax(mag, fabs((double)b[i]));
    }
    return worst / mag;
}

double ws_test_norm_rel_err(const float *a, const float *b, size_t n, double floor)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)a[i] - b[i];
        num += e * e;
        den += (double)b[i] * b[i];
    }
    return sqrt(num) / fmax(sqrt(den), floor);
}

static int ends_with(const char *name, const char *suffix)
{
    size_t n = strlen(name), k = strlen(suffix);
    return n >= k && strcmp(name + n - k, suffix) == 0;
}

int ws_test_key_bias_slice(const char *name, int d, size_t numel, size_t *off, size_t *len)
{
    if (ends_with(name, ".self.qkv.b")) {
        *off = (size_t)d, *len = (size_t)d;
        return 1;
    }
    if (ends_with(name, ".cross.kv.b")) {
        *off = 0, *len = (size_t)d;
        return 1;
    }
    if (ends_with(name, ".rk.b")) {
        *off = 0, *len = numel;
        return 1;
    }
    return 0;
}

int ws_test_rm_tree(const char *p)
{
    struct stat st;
    if (lstat(p, &st) != 0) return 0;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(p);
        if (!d) return -1;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char sub[512];
            snprintf(sub, sizeof sub, "%s/%s", p, e->d_name);
            ws_test_rm_tree(sub);
        }
        closedir(d);
        return rmdir(p);
    }
    return unlink(p);
}

/* ---- the whole-model harness ---------------------------------------------- */

ws_model_config ws_test_tiny_config(int state_norm)
{
    ws_model_config c = ws_model_config_default();
    c.d = 8, c.n_heads = 2, c.n_state = 3, c.n_upd_layers = 2, c.n_ext_layers = 2;
    c.max_fact_len = 3, c.vocab_cap = 6, c.n_overflow = 2, c.d_raw = 3;
    c.state_norm = state_norm;
    return c;
}

/* Random parameters large enough that gradients are well above float noise. */
static void randomize(ws_model *m, ws_test_rng *r)
{
    for (int i = 0; i < ws_model_n_tensors(m); i++) {
        const ws_tensor_info *t = ws_model_tensor(m, i);
        float *h = malloc(t->numel * sizeof *h);
        assert_non_null(h);
        int gain = strstr(t->name, "ln") && t->name[strlen(t->name) - 1] == 'g';
        for (size_t j = 0; j < t->numel; j++)
            h[j] = gain ? 1.0f + 0.2f * ws_test_normal(r) : 0.4f * ws_test_normal(r);
        assert_int_equal(ws_model_set_tensor(m, t->name, h, t->numel, NULL), WS_OK);
        free(h);
    }
}

void ws_test_model_batch(ws_batch *b, int variant)
{
    ws_test_rng rng = {99}, *r = &rng; /* raw vectors identical across variants */
    float x[3];
    int32_t ids[3];
    ws_batch_clear(b);
    assert_int_equal(ws_batch_begin_traj(b, 1), WS_OK);
    ids[0] = 1, ids[1] = 4;
    assert_int_equal(ws_batch_add_instr(b, ids, 2, 1), WS_OK);
    ws_test_fill_normal(r, x, 3, 1.0f);
    assert_int_equal(ws_batch_add_instr_raw(b, x, 0), WS_OK);
    ids[0] = 7;
    assert_int_equal(ws_batch_add_query(b, ids, 1, 1), WS_OK);
    ids[0] = 2, ids[1] = 3, ids[2] = 5;
    assert_int_equal(ws_batch_add_query(b, ids, 3, 0), WS_OK);
    assert_int_equal(ws_batch_add_query(b, ids, 2, -1), WS_OK);

    assert_int_equal(ws_batch_begin_traj(b, 0), WS_OK);
    ids[0] = 0;
    assert_int_equal(ws_batch_add_query(b, ids, 1, 0), WS_OK);
    ws_test_fill_normal(r, x, 3, 1.0f);
    assert_int_equal(ws_batch_add_query_raw(b, x, 1), WS_OK);

    assert_int_equal(ws_batch_begin_traj(b, 0), WS_OK);
    for (int i = 0; i < 4; i++) {
        ids[0] = (i + variant) % 8, ids[1] = (3 * i + 1) % 8;
        assert_int_equal(ws_batch_add_instr(b, ids, 1 + i % 2, i % 2), WS_OK);
    }

    assert_int_equal(ws_batch_begin_traj(b, 0), WS_OK);
    ids[0] = 6, ids[1] = 0, ids[2] = 1;
    assert_int_equal(ws_batch_add_instr(b, ids, 3, 0), WS_OK);
    assert_int_equal(ws_batch_add_query(b, ids, 3, 1), WS_OK);
    ids[0] = 5;
    assert_int_equal(ws_batch_add_query(b, ids, 1, 0), WS_OK);
}

void ws_test_model_setup(ws_test_model_fixture *f, const ws_model_config *c, int threads)
{
    ws_error err;
    f->r.s = 12345;
    assert_int_equal(ws_backend_cpu_new(&f->be, threads, &err), WS_OK);
    if (ws_model_new(&f->m, c, f->be, 7, &err) != WS_OK) fail_msg("model: %s", err.msg);
    randomize(f->m, &f->r);
    assert_int_equal(ws_batch_new(&f->b, c), WS_OK);
    ws_test_model_batch(f->b, 0);
    assert_int_equal(ws_model_state_alloc(f->m, 4, &f->w_prev, &err), WS_OK);
    assert_int_equal(ws_model_state_alloc(f->m, 4, &f->w_out, &err), WS_OK);
    size_t n = 4 * ws_model_state_floats(f->m);
    float *h = malloc(n * sizeof *h);
    assert_non_null(h);
    ws_test_fill_normal(&f->r, h, n, 1.0f);
    assert_int_equal(ws_backend_upload(f->be, f->w_prev, h, n * sizeof *h), WS_OK);
    free(h);
}

void ws_test_model_teardown(ws_test_model_fixture *f)
{
    ws_backend_release(f->be, f->w_prev);
    ws_backend_release(f->be, f->w_out);
    ws_batch_free(f->b);
    ws_model_free(f->m);
    ws_backend_free(f->be);
}

double ws_test_model_loss(ws_test_model_fixture *f)
{
    ws_step_result res;
    ws_error err;
    assert_int_equal(ws_model_step(f->m, f->b, f->w_prev, f->w_out, WS_STEP_INFER, 1.0f, NULL,
                                   &res, &err),
                     WS_OK);
    return res.loss;
}

double ws_test_model_grad_check(const ws_model_config *c, const char *label)
{
    ws_test_model_fixture f;
    ws_test_model_setup(&f, c, 1);
    ws_error err;
    ws_step_result res;
    assert_int_equal(ws_model_zero_grads(f.m, &err), WS_OK);
    assert_int_equal(ws_model_step(f.m, f.b, f.w_prev, f.w_out, WS_STEP_TRAIN, 1.0f, NULL, &res,
                                   &err),
                     WS_OK);
    assert_int_equal(res.n_labelled, 6);
    double worst = 0.0;
    const char *worst_name = "";
    for (int i = 0; i < ws_model_n_tensors(f.m); i++) {
        const ws_tensor_info *t = ws_model_tensor(f.m, i);
        float *p = malloc(t->numel * sizeof *p), *g = malloc(t->numel * sizeof *g);
        float *fd = malloc(t->numel * sizeof *fd);
        assert_true(p && g && fd);
        assert_int_equal(ws_model_get_tensor(f.m, t->name, p, t->numel, 0, &err), WS_OK);
        assert_int_equal(ws_model_get_tensor(f.m, t->name, g, t->numel, 1, &err), WS_OK);
        const float h = 1e-2f;
        for (size_t j = 0; j < t->numel; j++) {
            float keep = p[j];
            p[j] = keep + h;
            assert_int_equal(ws_model_set_tensor(f.m, t->name, p, t->numel, &err), WS_OK);
            double lp = ws_test_model_loss(&f);
            p[j] = keep - h;
            assert_int_equal(ws_model_set_tensor(f.m, t->name, p, t->numel, &err), WS_OK);
            double lm = ws_test_model_loss(&f);
            p[j] = keep;
            fd[j] = (float)((lp - lm) / (2.0 * h));
        }
        assert_int_equal(ws_model_set_tensor(f.m, t->name, p, t->numel, &err), WS_OK);
        size_t zoff, zlen;
        if (ws_test_key_bias_slice(t->name, c->d, t->numel, &zoff, &zlen) && zlen == t->numel) {
            /* A gradient that is zero in exact arithmetic: the analytic one is
             * rounding noise, the difference quotient the loss's rounding / 2h. */
            double ng = 0.0, nf = 0.0;
            for (size_t j = 0; j < t->numel; j++) {
                ng += (double)g[j] * g[j];
                nf += (double)fd[j] * fd[j];
            }
            if (!(sqrt(ng) <= 1e-6 && sqrt(nf) <= 1e-3))
                fail_msg("%s: gradient norm %.3e, finite differences %.3e, not ~0", t->name,
                         sqrt(ng), sqrt(nf));
        } else {
            double e = ws_test_norm_rel_err(g, fd, t->numel, 1e-3);
            if (e > worst) worst = e, worst_name = t->name;
            if (e > 2e-2) printf("  %-22s rel err %.3e\n", t->name, e);
            assert_true(e <= 2e-2);
        }
        free(p);
        free(g);
        free(fd);
    }
    printf("%s: worst tensor %s, finite-difference rel err %.3e\n", label, worst_name, worst);
    ws_test_model_teardown(&f);
    return worst;
}
