/* test_model_rmc.c — the whole model with the relational-memory-core Updater
 * (upd_mixer = rmc, model/updater_rmc.c):
 *   - every parameter tensor's gradient against finite differences, with and
 *     without LN_w, on a batch with trajectories from W_0 (which gets gradient
 *     through X_0 and through the gates) and from previous states, with and
 *     without instructions;
 *   - the in-place step (w_out == w_prev, as the trainer runs it) gives the same
 *     state and gradients as out of place, bit for bit;
 *   - ragged-batch isolation;
 *   - reductions of the RMC's gated update (state_norm = 0, W_t = M_t), exact in
 *     float: a closed input gate and open forget gate hold the memory bit for
 *     bit over 10,000 steps of instructions; i = 1, f = 0 makes W_t = tanh(M̃),
 *     and with no blocks that is tanh(LN_c(W_{t-1} + P)) (against double, to the
 *     op's tanh accuracy); σ(0) = ½ on both gates (input bias 0, forget bias +1)
 *     gives exactly the mean of the held and the overwritten state;
 *   - the new state does not depend on the order of a step's instructions. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_check.h"

static ws_model_config rmc_config(int state_norm, int layers)
{
    ws_model_config c = model_check_tiny_config(state_norm);
    c.upd_mixer = WS_MIXER_RMC;
    c.n_upd_layers = layers;
    return c;
}

static void test_gradients_state_norm(void **s)
{
    (void)s;
    ws_model_config c = rmc_config(1, 2);
    model_check_config_gradients(&c, 1e-2f, 2e-2, "rmc, state_norm=1");
}

static void test_gradients_no_state_norm(void **s)
{
    (void)s;
    ws_model_config c = rmc_config(0, 2);
    model_check_config_gradients(&c, 1e-2f, 2e-2, "rmc, state_norm=0");
}

static void test_trajectories_isolated(void **s)
{
    (void)s;
    ws_model_config c = rmc_config(1, 2);
    model_check_isolation(&c);
}

static float *download_all(ws_model *m, int grads)
{
    size_t n = ws_model_n_params(m);
    float *h = malloc(n * sizeof *h);
    assert_non_null(h);
    ws_backend *be = ws_model_backend(m);
    float *src = grads ? ws_model_grads(m) : ws_model_params(m);
    assert_int_equal(ws_backend_download(be, h, src, n * sizeof *h), WS_OK);
    return h;
}

/* A training step in place reads M_{t-1} before overwriting it. */
static void test_in_place_step(void **s)
{
    (void)s;
    ws_model_config c = rmc_config(1, 2);
    model_fixture f;
    model_fixture_setup(&f, &c);
    ws_error err;
    size_t n = 4 * ws_model_state_floats(f.m);
    float *prev = malloc(n * sizeof *prev), *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    assert_true(prev && a && b);
    assert_int_equal(ws_backend_download(f.be, prev, f.w_prev, n * sizeof *prev), WS_OK);
    assert_int_equal(ws_model_zero_grads(f.m, &err), WS_OK);
    assert_int_equal(ws_exec_step(f.x, f.b, f.w_prev, f.w_out, WS_STEP_TRAIN, 1, NULL, NULL, &err),
                     WS_OK);
    assert_int_equal(ws_backend_download(f.be, a, f.w_out, n * sizeof *a), WS_OK);
    float *g1 = download_all(f.m, 1);
    assert_int_equal(ws_model_zero_grads(f.m, &err), WS_OK);
    assert_int_equal(ws_exec_step(f.x, f.b, f.w_prev, f.w_prev, WS_STEP_TRAIN, 1, NULL, NULL,
                                   &err),
                     WS_OK);
    assert_int_equal(ws_backend_download(f.be, b, f.w_prev, n * sizeof *b), WS_OK);
    float *g2 = download_all(f.m, 1);
    assert_memory_equal(a, b, n * sizeof *a);
    assert_memory_equal(g1, g2, ws_model_n_params(f.m) * sizeof *g1);
    assert_true(memcmp(prev, b, n * sizeof *b) != 0); /* the state did move */
    free(prev), free(a), free(b), free(g1), free(g2);
    model_fixture_teardown(&f);
}

/* ---- reductions of the gated update ------------------------------------------- */

/* Gate weights zero, so i = σ(b_i) and f = σ(b_f + 1) on every element. */
static void set_gates(ws_model *m, float b_i, float b_f)
{
    int d = ws_model_config_of(m)->d;
    float *w = calloc((size_t)2 * d * d, sizeof *w), *b = calloc((size_t)2 * d, sizeof *b);
    assert_true(w && b);
    assert_int_equal(ws_model_set_tensor(m, "upd.gate.m.w", w, (size_t)2 * d * d, NULL), WS_OK);
    assert_int_equal(ws_model_set_tensor(m, "upd.gate.x.w", w, (size_t)2 * d * d, NULL), WS_OK);
    assert_int_equal(ws_model_set_tensor(m, "upd.gate.x.b", b, (size_t)2 * d, NULL), WS_OK);
    for (int j = 0; j < d; j++) b[j] = b_i, b[d + j] = b_f;
    assert_int_equal(ws_model_set_tensor(m, "upd.gate.m.b", b, (size_t)2 * d, NULL), WS_OK);
    free(w), free(b);
}

/* The fixture's batch on its states; returns W_t (host, 4 states). */
static float *step_states(model_fixture *f)
{
    ws_error err;
    size_t n = 4 * ws_model_state_floats(f->m);
    float *w = malloc(n * sizeof *w);
    assert_non_null(w);
    assert_int_equal(ws_exec_step(f->x, f->b, f->w_prev, f->w_out, WS_STEP_INFER, 1, NULL, NULL,
                                   &err),
                     WS_OK);
    assert_int_equal(ws_backend_download(f->be, w, f->w_out, n * sizeof *w), WS_OK);
    return w;
}

/* M_{t-1} of the fixture's batch: W_0 for trajectory 0, the previous states else. */
static float *prev_memory(model_fixture *f)
{
    size_t sf = ws_model_state_floats(f->m);
    float *m = malloc(4 * sf * sizeof *m);
    assert_non_null(m);
    assert_int_equal(ws_backend_download(f->be, m, f->w_prev, 4 * sf * sizeof *m), WS_OK);
    assert_int_equal(ws_model_get_tensor(f->m, "state.w0", m, sf, 0, NULL), WS_OK);
    return m;
}

static void test_gate_reductions(void **s)
{
    (void)s;
    ws_model_config c = rmc_config(0, 2); /* W_t = M_t: the RMC's update itself */
    model_fixture f;
    model_fixture_setup(&f, &c);
    size_t n = 4 * ws_model_state_floats(f.m);
    float *m_prev = prev_memory(&f);
    set_gates(f.m, -100.0f, 100.0f); /* i = σ(-100) < 1e-38, f = σ(101) = 1 */
    float *hold = step_states(&f);
    set_gates(f.m, 100.0f, -101.0f); /* i = 1, f = σ(-100) */
    float *over = step_states(&f);
    set_gates(f.m, 0.0f, -1.0f); /* i = f = σ(0) = ½ */
    float *half = step_states(&f);
    assert_memory_equal(hold, m_prev, n * sizeof *hold);
    for (size_t i = 0; i < n; i++) {
        assert_true(fabsf(over[i]) < 1.0f); /* tanh(M̃) */
        float want = 0.5f * over[i] + 0.5f * m_prev[i];
        if (half[i] != want)
            fail_msg("i = f = 1/2: W[%zu] = %.9g, want exactly %.9g", i, (double)half[i],
                     (double)want);
    }
    free(m_prev), free(hold), free(over), free(half);
    model_fixture_teardown(&f);

    /* No blocks: M̃ = LN_c(X_0) = LN_c(M_{t-1} + P), so i = 1, f = 0 gives tanh of
     * that (double reference; the op's tanh is within 4e-7). */
    c = rmc_config(0, 0);
    model_fixture_setup(&f, &c);
    size_t sf = ws_model_state_floats(f.m);
    int d = c.d;
    m_prev = prev_memory(&f);
    float *pos = malloc(sf * sizeof *pos), *g = malloc(d * sizeof *g), *b = malloc(d * sizeof *b);
    assert_true(pos && g && b);
    assert_int_equal(ws_model_get_tensor(f.m, "state.pos", pos, sf, 0, NULL), WS_OK);
    assert_int_equal(ws_model_get_tensor(f.m, "upd.ln_cand.g", g, d, 0, NULL), WS_OK);
    assert_int_equal(ws_model_get_tensor(f.m, "upd.ln_cand.b", b, d, 0, NULL), WS_OK);
    set_gates(f.m, 100.0f, -101.0f);
    over = step_states(&f);
    for (size_t r = 0; r < n / d; r++) {
        double x[64], mean = 0.0, var = 0.0;
        for (int j = 0; j < d; j++) x[j] = (double)(m_prev[r * d + j] + pos[(r * d + j) % sf]);
        for (int j = 0; j < d; j++) mean += x[j] / d;
        for (int j = 0; j < d; j++) var += (x[j] - mean) * (x[j] - mean) / d;
        for (int j = 0; j < d; j++) {
            double want = tanh((x[j] - mean) / sqrt(var + 1e-5) * g[j] + b[j]);
            if (!(fabs(over[r * d + j] - want) <= 2e-6))
                fail_msg("no blocks, i = 1, f = 0: W[%zu] = %.9g, want tanh(LN_c(M + P)) = %.9g",
                         r * d + j, (double)over[r * d + j], want);
        }
    }
    free(m_prev), free(pos), free(g), free(b), free(over);
    model_fixture_teardown(&f);
}

/* Holding gates keep W_0 bit for bit through 10,000 steps of instructions
 * (in place, as the trainer and the server step). */
static void test_hold_10000_steps(void **s)
{
    (void)s;
    ws_model_config c = rmc_config(0, 1);
    model_fixture f;
    model_fixture_setup(&f, &c);
    set_gates(f.m, -100.0f, 100.0f);
    size_t sf = ws_model_state_floats(f.m);
    float *w0 = malloc(sf * sizeof *w0), *w = malloc(2 * sf * sizeof *w);
    assert_true(w0 && w);
    assert_int_equal(ws_model_get_tensor(f.m, "state.w0", w0, sf, 0, NULL), WS_OK);
    ws_test_rng r = {4242};
    ws_error err;
    for (int t = 0; t < 10000; t++) {
        ws_batch_clear(f.b);
        for (int k = 0; k < 2; k++) {
            assert_int_equal(ws_batch_begin_traj(f.b, t == 0), WS_OK);
            for (int j = ws_test_int(&r, 0, 3); j > 0; j--) {
                int32_t ids[2] = {ws_test_int(&r, 0, 7), ws_test_int(&r, 0, 7)};
                assert_int_equal(ws_batch_add_instr(f.b, ids, 2, ws_test_int(&r, 0, 1)), WS_OK);
            }
        }
        assert_int_equal(ws_exec_step(f.x, f.b, f.w_prev, f.w_prev, WS_STEP_INFER, 1, NULL, NULL,
                                       &err),
                         WS_OK);
    }
    assert_int_equal(ws_backend_download(f.be, w, f.w_prev, 2 * sf * sizeof *w), WS_OK);
    assert_memory_equal(w, w0, sf * sizeof *w);
    assert_memory_equal(w + sf, w0, sf * sizeof *w);
    free(w0), free(w);
    model_fixture_teardown(&f);
}

/* Attention over the memory rows and the mean x̄ are set functions of the
 * instructions: reversing their order changes W_t by rounding only. */
static void test_instruction_order(void **s)
{
    (void)s;
    ws_model_config c = rmc_config(1, 2);
    model_fixture f;
    model_fixture_setup(&f, &c);
    float *w[2];
    for (int order = 0; order < 2; order++) {
        ws_batch_clear(f.b);
        assert_int_equal(ws_batch_begin_traj(f.b, 1), WS_OK);
        for (int k = 0; k < 5; k++) {
            int i = order ? 4 - k : k;
            int32_t ids[3] = {i, (2 * i + 1) % 8, (5 * i + 3) % 8};
            assert_int_equal(ws_batch_add_instr(f.b, ids, 1 + i % 3, i % 2), WS_OK);
        }
        w[order] = step_states(&f);
    }
    size_t sf = ws_model_state_floats(f.m);
    double e = ws_test_max_rel_err(w[1], w[0], sf, 1e-3);
    printf("instruction order: max relative change of W_t %.3e\n", e);
    assert_true(e <= 1e-5);
    free(w[0]), free(w[1]);
    model_fixture_teardown(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradients_state_norm),
        cmocka_unit_test(test_gradients_no_state_norm),
        cmocka_unit_test(test_trajectories_isolated),
        cmocka_unit_test(test_in_place_step),
        cmocka_unit_test(test_gate_reductions),
        cmocka_unit_test(test_hold_10000_steps),
        cmocka_unit_test(test_instruction_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
