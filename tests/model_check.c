/* model_check.c — see model_check.h. */
#include "model_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ws_model_config model_check_tiny_config(int state_norm)
{
    ws_model_config c = ws_model_config_default();
    c.d = 8, c.n_heads = 2, c.n_state = 3, c.n_upd_layers = 2, c.n_ext_layers = 2;
    c.max_fact_len = 3, c.vocab_cap = 6, c.n_overflow = 2, c.d_raw = 3;
    c.state_norm = state_norm;
    /* Trajectory 1 (a state, no instructions) then runs the Updater too, so the
     * checks cover it on every path; test_model_grad checks "hold" on its own. */
    c.empty_steps = WS_EMPTY_UPDATE;
    return c;
}

static void randomize(ws_model *m, ws_test_rng *r)
{
    for (int i = 0; i < ws_model_n_tensors(m); i++) {
        const ws_tensor_info *t = ws_model_tensor(m, i);
        float *h = malloc(t->numel * sizeof *h);
        assert_non_null(h);
        int gain = t->init == WS_INIT_ONE; /* LayerNorm gains stay near 1 */
        for (size_t j = 0; j < t->numel; j++)
            h[j] = gain ? 1.0f + 0.2f * ws_test_normal(r) : 0.4f * ws_test_normal(r);
        assert_int_equal(ws_model_set_tensor(m, t->name, h, t->numel, NULL), WS_OK);
        free(h);
    }
}

/* dst's parameters := src's (same config). */
static void copy_params(ws_model *dst, ws_model *src)
{
    ws_error err;
    for (int i = 0; i < ws_model_n_tensors(src); i++) {
        const ws_tensor_info *t = ws_model_tensor(src, i);
        float *h = malloc(t->numel * sizeof *h);
        assert_non_null(h);
        assert_int_equal(ws_model_get_tensor(src, t->name, h, t->numel, 0, &err), WS_OK);
        assert_int_equal(ws_model_set_tensor(dst, t->name, h, t->numel, &err), WS_OK);
        free(h);
    }
}

void model_check_batch(ws_batch *b, int variant)
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
    /* a symbol known by its hash alone (no vocabulary id) beside a named one */
    ws_sym syms[2] = {{-1, 0x9E3779B97F4A7C15ULL}, {3, 0}};
    assert_int_equal(ws_batch_add_query_syms(b, syms, 2, 1), WS_OK);
}

/* A model and a context on its own backend, with n states uploaded to *w_prev
 * and room in *w_out. */
static void new_model(ws_backend **be, int threads, ws_model **m, ws_exec **x,
                      const ws_model_config *c, float **w_prev, float **w_out,
                      const float *states, size_t n)
{
    ws_error err;
    assert_int_equal(ws_backend_cpu_new(be, threads, &err), WS_OK);
    if (ws_model_new(m, c, *be, 7, &err) != WS_OK) fail_msg("model: %s", err.msg);
    assert_int_equal(ws_exec_new(x, *m, &err), WS_OK);
    assert_int_equal(ws_model_state_alloc(*m, MODEL_CHECK_N_TRAJ, w_prev, &err), WS_OK);
    assert_int_equal(ws_model_state_alloc(*m, MODEL_CHECK_N_TRAJ, w_out, &err), WS_OK);
    assert_int_equal(ws_backend_upload(*be, *w_prev, states, n * sizeof *states), WS_OK);
}

void model_fixture_setup(model_fixture *f, const ws_model_config *c)
{
    memset(f, 0, sizeof *f);
    f->r.s = 12345;
    size_t n = MODEL_CHECK_N_TRAJ * ws_model_config_state_floats(c);
    float *h = malloc(n * sizeof *h);
    assert_non_null(h);
    ws_test_fill_normal(&f->r, h, n, 1.0f);
    new_model(&f->be, 2, &f->m, &f->x, c, &f->w_prev, &f->w_out, h, n);
    new_model(&f->fd_be, 1, &f->fd_m, &f->fd_x, c, &f->fd_w_prev, &f->fd_w_out, h, n);
    free(h);
    randomize(f->m, &f->r);
    copy_params(f->fd_m, f->m);
    assert_int_equal(ws_batch_new(&f->b, c), WS_OK);
    model_check_batch(f->b, 0);
}

void model_fixture_teardown(model_fixture *f)
{
    ws_backend_release(f->be, f->w_prev);
    ws_backend_release(f->be, f->w_out);
    ws_backend_release(f->fd_be, f->fd_w_prev);
    ws_backend_release(f->fd_be, f->fd_w_out);
    ws_batch_free(f->b);
    ws_exec_free(f->x);
    ws_exec_free(f->fd_x);
    ws_model_free(f->m);
    ws_model_free(f->fd_m);
    ws_backend_free(f->be);
    ws_backend_free(f->fd_be);
}

static double fd_loss(model_fixture *f)
{
    ws_step_result res;
    ws_error err;
    assert_int_equal(ws_exec_step(f->fd_x, f->b, f->fd_w_prev, f->fd_w_out, WS_STEP_INFER, 1.0f,
                                  NULL, &res, &err),
                     WS_OK);
    return res.loss;
}

/* Loss with element j of tensor name (host copy p) moved by dx, then restored. */
static double loss_at(model_fixture *f, const char *name, float *p, size_t numel, size_t j,
                      float dx)
{
    ws_error err;
    float keep = p[j];
    p[j] = keep + dx;
    assert_int_equal(ws_model_set_tensor(f->fd_m, name, p, numel, &err), WS_OK);
    double l = fd_loss(f);
    p[j] = keep;
    assert_int_equal(ws_model_set_tensor(f->fd_m, name, p, numel, &err), WS_OK);
    return l;
}

/* Central difference at step h, and whether a ReLU kink within h spoils it.
 * A kink of slope jump J at distance δ < h gives central differences that
 * average the two slopes, wrong by up to J/2. Two signs of one, from the
 * stencils at h and h/2 and the loss l0 at the point:
 *   the central differences disagree (by J·δ/2h; a smooth loss: O(h²)), or
 *   the one-sided slope gap (L(x+s) − 2L(x) + L(x−s))/s does not halve with s
 *   (smooth: s·L''; a kink: J(1 − δ/s), off by J(1/2 − 3δ/2h)).
 * One of the two exceeds J/8 at every δ; the floor is the loss's float noise
 * (~6e-8) over the step. */
static double central(model_fixture *f, const char *name, float *p, size_t numel, size_t j,
                      float h, double l0, int *kink)
{
    double p1 = loss_at(f, name, p, numel, j, h), m1 = loss_at(f, name, p, numel, j, -h);
    double p2 = loss_at(f, name, p, numel, j, h / 2), m2 = loss_at(f, name, p, numel, j, -h / 2);
    double fd1 = (p1 - m1) / (2.0 * h), fd2 = (p2 - m2) / h;
    double gap1 = (p1 - 2.0 * l0 + m1) / h, gap2 = (p2 - 2.0 * l0 + m2) / (h / 2.0);
    double sign = fmax(fabs(fd1 - fd2), fabs(gap2 - gap1 / 2.0));
    *kink = sign > 5e-7 / h + 5e-3 * fmax(fabs(fd1), fabs(fd2));
    return fd1;
}

double model_check_gradients(model_fixture *f, float h, double tol, const char *label)
{
    ws_error err;
    ws_step_result res;
    assert_int_equal(ws_model_zero_grads(f->m, &err), WS_OK);
    assert_int_equal(ws_exec_step(f->x, f->b, f->w_prev, f->w_out, WS_STEP_TRAIN, 1.0f, NULL,
                                  &res, &err),
                     WS_OK);
    assert_int_equal(res.n_labelled, 7);
    double l0 = fd_loss(f), worst = 0.0;
    const char *worst_name = "";
    size_t total = 0, kinked = 0;
    for (int i = 0; i < ws_model_n_tensors(f->m); i++) {
        const ws_tensor_info *t = ws_model_tensor(f->m, i);
        float *p = malloc(t->numel * sizeof *p), *g = malloc(t->numel * sizeof *g);
        float *fd = malloc(t->numel * sizeof *fd);
        assert_true(p && g && fd);
        assert_int_equal(ws_model_get_tensor(f->fd_m, t->name, p, t->numel, 0, &err), WS_OK);
        assert_int_equal(ws_model_get_tensor(f->m, t->name, g, t->numel, 1, &err), WS_OK);
        /* Elements whose stencil crosses a kink are left out (the rest packed to the front). */
        size_t n = 0;
        for (size_t j = 0; j < t->numel; j++) {
            int kink;
            double v = central(f, t->name, p, t->numel, j, h, l0, &kink);
            if (kink) continue;
            g[n] = g[j], fd[n] = (float)v, n++;
        }
        kinked += t->numel - n;
        total += t->numel;
        /* A tensor whose gradient is exactly zero in exact arithmetic (the
         * compositional retrieval-key bias) holds only noise on both sides: its
         * gradient must be ~0 and the differences must see nothing. */
        size_t off, len;
        int d = ws_model_config_of(f->m)->d;
        if (ws_test_key_bias_slice(t->name, d, t->numel, &off, &len) && len == t->numel) {
            double gg = 0.0, ff = 0.0;
            for (size_t j = 0; j < n; j++) gg += (double)g[j] * g[j], ff += (double)fd[j] * fd[j];
            printf("  %-22s zero-gradient tensor: |g| %.1e, |fd| %.1e\n", t->name, sqrt(gg),
                   sqrt(ff));
            assert_true(sqrt(gg) <= 1e-6 && sqrt(ff) <= 1e-3);
            free(p);
            free(g);
            free(fd);
            continue;
        }
        double e = ws_test_norm_rel_err(g, fd, n, 1e-3);
        if (e > worst) worst = e, worst_name = t->name;
        if (e > tol) printf("  %-22s rel err %.3e\n", t->name, e);
        assert_true(e <= tol);
        assert_true(n > 0); /* every tensor keeps checked elements */
        free(p);
        free(g);
        free(fd);
    }
    printf("%s: worst tensor %s, finite-difference rel err %.3e; %zu of %zu elements skipped "
           "(finite-difference stencil across a ReLU kink)\n",
           label, worst_name, worst, kinked, total);
    return worst;
}

double model_check_config_gradients(const ws_model_config *c, float h, double tol,
                                    const char *label)
{
    model_fixture f;
    model_fixture_setup(&f, c);
    double worst = model_check_gradients(&f, h, tol, label);
    model_fixture_teardown(&f);
    return worst;
}

/* Changing trajectory 2's instructions must not change any other trajectory's
 * new state or answers — bit for bit. */
void model_check_isolation(const ws_model_config *c)
{
    model_fixture f;
    model_fixture_setup(&f, c);
    ws_error err;
    size_t sf = ws_model_state_floats(f.m);
    int nq = ws_batch_n_query(f.b);
    float *w1 = malloc(4 * sf * sizeof *w1), *w2 = malloc(4 * sf * sizeof *w2);
    float *p1 = malloc(nq * sizeof *p1), *p2 = malloc(nq * sizeof *p2);
    assert_true(w1 && w2 && p1 && p2);
    assert_int_equal(ws_exec_step(f.x, f.b, f.w_prev, f.w_out, WS_STEP_INFER, 1, p1, NULL, &err),
                     WS_OK);
    assert_int_equal(ws_backend_download(f.be, w1, f.w_out, 4 * sf * sizeof *w1), WS_OK);
    model_check_batch(f.b, 3); /* same except trajectory 2's instructions */
    assert_int_equal(ws_exec_step(f.x, f.b, f.w_prev, f.w_out, WS_STEP_INFER, 1, p2, NULL, &err),
                     WS_OK);
    assert_int_equal(ws_backend_download(f.be, w2, f.w_out, 4 * sf * sizeof *w2), WS_OK);
    for (int t = 0; t < 4; t++) {
        int same = memcmp(w1 + t * sf, w2 + t * sf, sf * sizeof *w1) == 0;
        assert_int_equal(same, t != 2); /* only trajectory 2 moved */
    }
    /* Trajectory 2 has no queries, so every answer is unchanged. */
    assert_memory_equal(p1, p2, nq * sizeof *p1);
    free(w1);
    free(w2);
    free(p1);
    free(p2);
    model_fixture_teardown(&f);
}
