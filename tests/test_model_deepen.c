/* test_model_deepen.c — ws_model_deepen (model/deepen.c): a model with layers
 * added answers bit for bit as the model it came from, on every path of the
 * ragged check batch (new states and probabilities), keeps its vocabulary ids,
 * and trains: the new layers' zero output projections get gradient. Models it
 * cannot deepen without changing their answers are refused. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/vocab.h"
#include "model_check.h"

/* One INFER step of the fixture's batch on model m (a context of its own):
 * the probabilities and the new states, on the host. */
static void answers(model_fixture *f, ws_model *m, float *probs, float *states)
{
    ws_error err = {0};
    ws_exec *x;
    assert_int_equal(ws_exec_new(&x, m, &err), WS_OK);
    assert_int_equal(ws_exec_step(x, f->b, f->w_prev, f->w_out, WS_STEP_INFER, 1.0f, probs, NULL,
                                  &err),
                     WS_OK);
    size_t n = MODEL_CHECK_N_TRAJ * ws_model_state_floats(m);
    assert_int_equal(ws_backend_download(f->be, states, f->w_out, n * sizeof *states), WS_OK);
    ws_exec_free(x);
}

static void test_deeper_model_answers_the_same(void **state)
{
    (void)state;
    ws_model_config c = model_check_tiny_config(1);
    model_fixture f;
    model_fixture_setup(&f, &c);
    ws_vocab *v = ws_model_vocab(f.m);
    assert_int_equal(ws_vocab_id(v, "mary", 4, 1), 0);
    assert_int_equal(ws_vocab_id(v, "garden", 6, 1), 1);
    int nq = ws_batch_n_query(f.b);
    size_t ns = MODEL_CHECK_N_TRAJ * ws_model_state_floats(f.m);
    float *p0 = malloc(nq * sizeof *p0), *p1 = malloc(nq * sizeof *p1);
    float *s0 = malloc(ns * sizeof *s0), *s1 = malloc(ns * sizeof *s1);
    assert_true(p0 && p1 && s0 && s1);
    answers(&f, f.m, p0, s0);

    ws_error err = {0};
    ws_model *deep;
    assert_int_equal(ws_model_deepen(&deep, f.m, 1, 2, 7, &err), WS_OK);
    const ws_model_config *dc = ws_model_config_of(deep);
    assert_int_equal(dc->n_upd_layers, c.n_upd_layers + 1);
    assert_int_equal(dc->n_ext_layers, c.n_ext_layers + 2);
    assert_true(ws_model_n_params(deep) > ws_model_n_params(f.m));
    answers(&f, deep, p1, s1);
    assert_memory_equal(p0, p1, nq * sizeof *p0);
    assert_memory_equal(s0, s1, ns * sizeof *s0);
    assert_int_equal(ws_vocab_size(ws_model_vocab(deep)), 2);
    assert_string_equal(ws_vocab_symbol(ws_model_vocab(deep), 1), "garden");

    /* training reaches the new layers: their zero projections get gradient */
    ws_exec *x;
    assert_int_equal(ws_exec_new(&x, deep, &err), WS_OK);
    assert_int_equal(ws_model_zero_grads(deep, &err), WS_OK);
    assert_int_equal(ws_exec_step(x, f.b, f.w_prev, f.w_out, WS_STEP_TRAIN, 1.0f, NULL, NULL, &err),
                     WS_OK);
    const char *grown[] = {"upd.2.self.out.w", "upd.2.mlp.proj.w", "ext.3.cross.out.w",
                           "ext.3.mlp.proj.w"};
    for (size_t i = 0; i < sizeof grown / sizeof *grown; i++) {
        const ws_tensor_info *t = ws_model_tensor_by_name(deep, grown[i]);
        assert_non_null(t);
        float *g = malloc(t->numel * sizeof *g), *w = malloc(t->numel * sizeof *w);
        assert_true(g && w);
        assert_int_equal(ws_model_get_tensor(deep, grown[i], w, t->numel, 0, &err), WS_OK);
        assert_int_equal(ws_model_get_tensor(deep, grown[i], g, t->numel, 1, &err), WS_OK);
        double sum_w = 0, sum_g = 0;
        for (size_t k = 0; k < t->numel; k++) sum_w += fabs(w[k]), sum_g += fabs(g[k]);
        if (sum_w != 0 || !(sum_g > 0)) fail_msg("%s: |w| %g, |grad| %g", grown[i], sum_w, sum_g);
        free(g);
        free(w);
    }
    ws_exec_free(x);
    ws_model_free(deep);
    free(p0), free(p1), free(s0), free(s1);
    model_fixture_teardown(&f);
}

static void test_refuses(void **state)
{
    (void)state;
    ws_error err = {0};
    ws_backend *be;
    assert_int_equal(ws_backend_cpu_new(&be, 1, &err), WS_OK);
    ws_model_config c = model_check_tiny_config(1);
    ws_model *m, *deep = (ws_model *)&err;
    assert_int_equal(ws_model_new(&m, &c, be, 3, &err), WS_OK);
    assert_int_equal(ws_model_deepen(&deep, m, -1, 1, 1, &err), WS_ERR_INVALID);
    assert_null(deep);
    ws_model_free(m);
    /* a gated updater's new layer would not be the identity */
    c.upd_mixer = WS_MIXER_RMC;
    assert_int_equal(ws_model_new(&m, &c, be, 3, &err), WS_OK);
    assert_int_equal(ws_model_deepen(&deep, m, 1, 1, 1, &err), WS_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "mha"));
    assert_null(deep);
    ws_model_free(m);
    ws_backend_free(be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deeper_model_answers_the_same),
        cmocka_unit_test(test_refuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
