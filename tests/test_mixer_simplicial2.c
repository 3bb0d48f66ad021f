/* test_mixer_simplicial2.c — the simplicial2 mixer (model/mixer_simplicial2.c)
 * inside the whole model, and its reduction to multi-head attention:
 *   - every parameter tensor's gradient against central finite differences of
 *     the loss, with the mixer in the Updater (SELF, virtual entities) and,
 *     separately, in the Extractor (CROSS);
 *   - ragged-batch isolation with the mixer in both slots;
 *   - s2_heads = 0 in CROSS mode is exactly the mha mixer: same tensors, and a
 *     training step gives bit-identical states, answers, loss and gradients;
 *   - s2_heads = 0 in SELF mode is MHA under the virtual-entity mask: with the
 *     mha mixer's weights, the standard rows' outputs equal MHA over the
 *     standard rows alone, the virtual rows' outputs equal MHA over all T rows,
 *     and the gradients (x and every tensor) are the sum of those two MHAs'
 *     gradients with ∂L/∂out split between them by rows. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/mixer.h"
#include "model_check.h"

/* The tiny config with 5 state tokens, 2 of them virtual in SELF mode. */
static ws_model_config s2_config(int upd, int ext)
{
    ws_model_config c = model_check_tiny_config(1);
    c.n_state = 5;
    c.s2_virtual = 2;
    if (upd) c.upd_mixer = WS_MIXER_SIMPLICIAL2;
    if (ext) c.ext_mixer = WS_MIXER_SIMPLICIAL2;
    return c;
}

static void check_gradients(const ws_model_config *c, const char *label)
{
    model_fixture f;
    model_fixture_setup(&f, c);
    model_check_gradients(&f, 1e-2f, 2e-2, label);
    model_fixture_teardown(&f);
}

/* Updater: two layers of two 2-simplicial heads of δ = 3 over the M² = 4
 * virtual pairs (one Extractor layer keeps the check short). */
static void test_gradients_updater(void **s)
{
    (void)s;
    ws_model_config c = s2_config(1, 0);
    c.s2_heads = 2, c.s2_dim = 6, c.s2_tau = 0.5f, c.n_ext_layers = 1;
    check_gradients(&c, "upd_mixer=simplicial2 (K2=2, d2=6, M=2)");
}

/* Extractor: two layers of one 2-simplicial head of δ = 5 over the T² = 25
 * state pairs (one Updater layer). */
static void test_gradients_extractor(void **s)
{
    (void)s;
    ws_model_config c = s2_config(0, 1);
    c.s2_heads = 1, c.s2_dim = 5, c.s2_tau = 0.7f, c.n_upd_layers = 1;
    check_gradients(&c, "ext_mixer=simplicial2 (K2=1, d2=5, T=5)");
}

/* Changing trajectory 2's instructions changes nothing else, bit for bit. */
static void test_isolation(void **s)
{
    (void)s;
    ws_model_config c = s2_config(1, 1);
    model_fixture f;
    model_fixture_setup(&f, &c);
    ws_error err;
    size_t sf = ws_model_state_floats(f.m);
    int nq = ws_batch_n_query(f.b);
    float *w[2], *p[2];
    for (int v = 0; v < 2; v++) {
        w[v] = malloc(4 * sf * sizeof *w[v]), p[v] = malloc(nq * sizeof *p[v]);
        assert_true(w[v] && p[v]);
        model_check_batch(f.b, 3 * v);
        assert_int_equal(ws_exec_step(f.x, f.b, f.w_prev, f.w_out, WS_STEP_INFER, 1, p[v], NULL,
                                       &err),
                         WS_OK);
        assert_int_equal(ws_backend_download(f.be, w[v], f.w_out, 4 * sf * sizeof(float)), WS_OK);
    }
    for (int t = 0; t < 4; t++)
        assert_int_equal(memcmp(w[0] + t * sf, w[1] + t * sf, sf * sizeof(float)) == 0, t != 2);
    assert_memory_equal(p[0], p[1], nq * sizeof(float));
    for (int v = 0; v < 2; v++) free(w[v]), free(p[v]);
    model_fixture_teardown(&f);
}

/* dst's parameters := src's, tensor by tensor (the same names must exist). */
static void copy_params(ws_model *dst, ws_model *src)
{
    ws_error err;
    assert_int_equal(ws_model_n_tensors(dst), ws_model_n_tensors(src));
    for (int i = 0; i < ws_model_n_tensors(src); i++) {
        const ws_tensor_info *t = ws_model_tensor(src, i);
        assert_string_equal(t->name, ws_model_tensor(dst, i)->name);
        float *h = malloc(t->numel * sizeof *h);
        assert_non_null(h);
        assert_int_equal(ws_model_get_tensor(src, t->name, h, t->numel, 0, &err), WS_OK);
        assert_int_equal(ws_model_set_tensor(dst, t->name, h, t->numel, &err), WS_OK);
        free(h);
    }
}

/* Downloads every gradient of m into one host array of n_params floats. */
static size_t n_params(ws_model *m)
{
    size_t total = 0;
    for (int i = 0; i < ws_model_n_tensors(m); i++) total += ws_model_tensor(m, i)->numel;
    return total;
}

static float *all_grads(ws_model *m)
{
    ws_error err;
    float *g = malloc(n_params(m) * sizeof *g);
    assert_non_null(g);
    size_t at = 0;
    for (int i = 0; i < ws_model_n_tensors(m); i++) {
        const ws_tensor_info *t = ws_model_tensor(m, i);
        assert_int_equal(ws_model_get_tensor(m, t->name, g + at, t->numel, 1, &err), WS_OK);
        at += t->numel;
    }
    return g;
}

/* K2 = 0 in the Extractor: the same model as ext_mixer = mha, to the bit. */
static void test_cross_k2_zero_is_mha(void **s)
{
    (void)s;
    ws_model_config cm = s2_config(0, 0), cs = s2_config(0, 1);
    cs.s2_heads = 0;
    model_fixture fm, fs;
    model_fixture_setup(&fm, &cm);
    model_fixture_setup(&fs, &cs);
    copy_params(fs.m, fm.m);
    ws_error err;
    int nq = ws_batch_n_query(fm.b);
    size_t sf = 4 * ws_model_state_floats(fm.m);
    float *p[2], *w[2], *g[2];
    double loss[2];
    model_fixture *fx[2] = {&fm, &fs};
    for (int k = 0; k < 2; k++) {
        ws_step_result res;
        p[k] = malloc(nq * sizeof *p[k]), w[k] = malloc(sf * sizeof *w[k]);
        assert_true(p[k] && w[k]);
        assert_int_equal(ws_model_zero_grads(fx[k]->m, &err), WS_OK);
        assert_int_equal(ws_exec_step(fx[k]->x, fx[k]->b, fx[k]->w_prev, fx[k]->w_out,
                                       WS_STEP_TRAIN, 1, p[k], &res, &err),
                         WS_OK);
        assert_int_equal(ws_backend_download(fx[k]->be, w[k], fx[k]->w_out, sf * sizeof(float)),
                         WS_OK);
        loss[k] = res.loss;
        g[k] = all_grads(fx[k]->m);
    }
    assert_memory_equal(w[0], w[1], sf * sizeof(float));
    assert_memory_equal(p[0], p[1], nq * sizeof(float));
    assert_true(loss[0] == loss[1]);
    assert_memory_equal(g[0], g[1], n_params(fm.m) * sizeof(float));
    for (int k = 0; k < 2; k++) free(p[k]), free(w[k]), free(g[k]);
    model_fixture_teardown(&fm);
    model_fixture_teardown(&fs);
}

/* ---- SELF mode, K2 = 0: the mixer called directly ---------------------------- */

enum { B_TRAJ = 3 };

/* n_traj trajectories of T rows; each segment's queries and keys are its first
 * len rows. */
static ws_mix_shape self_shape(ws_attn_seg *segs, int T, int len, int H)
{
    for (int t = 0; t < B_TRAJ; t++)
        segs[t] = (ws_attn_seg){t * T, len, t * T, len, t * H * len * len};
    ws_mix_shape s = {B_TRAJ * T, B_TRAJ * T, segs, segs, B_TRAJ, len, len,
                      (size_t)B_TRAJ * len * len};
    return s;
}

/* Forward of m's Updater layer-0 mixer into out; then, with dy given, its
 * backward into dx (+=) and m's gradients (+=). */
static void run_self(ws_model *m, const ws_mix_shape *s, const float *x, float *out,
                     const float *dy, float *dx)
{
    const ws_mixer *mx = ws_mixer_find(m->cfg.upd_mixer);
    size_t na = mx->act_floats(&m->cfg, WS_MIX_SELF, s);
    size_t ns = mx->scratch_floats(&m->cfg, WS_MIX_SELF, s);
    float *act = calloc(na ? na : 1, sizeof *act), *scr = malloc((ns ? ns : 1) * sizeof *scr);
    assert_true(act && scr);
    ws_mix_call call = {.m = m, .p = &m->off.upd[0].self.p, .mode = WS_MIX_SELF, .s = *s,
                        .act = act, .scratch = scr, .x = x, .keys = x, .out = out, .d_out = dy,
                        .d_x = dx, .d_keys = dx};
    assert_int_equal(mx->forward(&call), WS_OK);
    if (dy) assert_int_equal(mx->backward(&call), WS_OK);
    free(act), free(scr);
}

/* Max relative error of rows (of width d) of got against want, over the rows
 * whose virtual flag is virt. */
static double rows_err(const float *got, const float *want, int n, int T, int M, int d, int virt)
{
    double worst = 0.0;
    for (int row = 0; row < n; row++)
        if ((row % T >= T - M) == virt)
            worst = fmax(worst, ws_test_max_rel_err(got + (size_t)row * d, want + (size_t)row * d,
                                                    d, 1e-6));
    return worst;
}

static void check_rel(const char *what, double e, int want_small)
{
    if (getenv("WS_TEST_VERBOSE")) printf("  %-44s max rel err %.2e\n", what, e);
    if (want_small ? !(e <= 1e-5) : !(e > 1e-3)) fail_msg("%s: max rel err %.3e", what, e);
}

static void test_self_k2_zero_is_masked_mha(void **state)
{
    (void)state;
    ws_model_config cm = s2_config(0, 0), cs = s2_config(1, 0);
    cs.s2_heads = 0;
    int T = cs.n_state, M = cs.s2_virtual, d = cs.d, H = cs.n_heads, n = B_TRAJ * T;
    model_fixture fm, fs;
    model_fixture_setup(&fm, &cm);
    model_fixture_setup(&fs, &cs);
    copy_params(fs.m, fm.m);
    ws_error err;
    assert_int_equal(ws_model_zero_grads(fm.m, &err), WS_OK);
    assert_int_equal(ws_model_zero_grads(fs.m, &err), WS_OK);
    size_t nd = (size_t)n * d;
    float *x = malloc(nd * sizeof *x), *dy = malloc(nd * sizeof *dy);
    float *dy_part[2] = {calloc(nd, sizeof(float)), calloc(nd, sizeof(float))};
    float *out_s = malloc(nd * sizeof(float)), *out_m[2] = {malloc(nd * sizeof(float)),
                                                            malloc(nd * sizeof(float))};
    float *dx_s = calloc(nd, sizeof(float)), *dx_m = calloc(nd, sizeof(float));
    assert_true(x && dy && dy_part[0] && dy_part[1] && out_s && out_m[0] && out_m[1] && dx_s &&
                dx_m);
    ws_test_rng r = {77};
    ws_test_fill_normal(&r, x, nd, 1.0f);
    ws_test_fill_normal(&r, dy, nd, 1.0f);
    for (int row = 0; row < n; row++) /* standard rows to part 0, virtual rows to part 1 */
        memcpy(dy_part[row % T >= T - M] + (size_t)row * d, dy + (size_t)row * d,
               d * sizeof(float));

    ws_attn_seg segs[B_TRAJ];
    ws_mix_shape full = self_shape(segs, T, T, H);
    run_self(fs.m, &full, x, out_s, dy, dx_s);
    ws_attn_seg std_segs[B_TRAJ];
    ws_mix_shape std_only = self_shape(std_segs, T, T - M, H);
    run_self(fm.m, &std_only, x, out_m[0], dy_part[0], dx_m);
    run_self(fm.m, &full, x, out_m[1], dy_part[1], dx_m);

    check_rel("standard rows = MHA over the standard rows",
              rows_err(out_s, out_m[0], n, T, M, d, 0), 1);
    check_rel("virtual rows = MHA over all rows", rows_err(out_s, out_m[1], n, T, M, d, 1), 1);
    /* the mask matters: unmasked MHA gives the standard rows something else */
    check_rel("standard rows != MHA over all rows", rows_err(out_s, out_m[1], n, T, M, d, 0), 0);
    check_rel("dx", ws_test_max_rel_err(dx_s, dx_m, nd, 1e-6), 1);
    float *gs = all_grads(fs.m), *gm = all_grads(fm.m);
    check_rel("every parameter gradient", ws_test_max_rel_err(gs, gm, n_params(fs.m), 1e-6), 1);
    free(gs), free(gm), free(x), free(dy), free(dy_part[0]), free(dy_part[1]);
    free(out_s), free(out_m[0]), free(out_m[1]), free(dx_s), free(dx_m);
    model_fixture_teardown(&fm);
    model_fixture_teardown(&fs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradients_updater),
        cmocka_unit_test(test_gradients_extractor),
        cmocka_unit_test(test_isolation),
        cmocka_unit_test(test_cross_k2_zero_is_mha),
        cmocka_unit_test(test_self_k2_zero_is_masked_mha),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
