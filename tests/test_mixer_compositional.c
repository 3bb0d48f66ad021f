/* test_mixer_compositional.c — the compositional mixer (model/mixer_compositional.c)
 * in the whole model:
 *   - every parameter tensor's gradient against central differences, with the
 *     Updater's self-mixing compositional (SELF, S = 3, R = 2) and, separately,
 *     the Extractor's cross-mixing compositional (CROSS, S = 2, R = 3); this
 *     covers both gradient paths into the retrieved values O (direct and through
 *     the shared W̄_k);
 *   - the reduction R = 1: the model equals the multi-head-attention model whose
 *     S heads share one value projection (V rows tiled S times, every other tensor
 *     copied), in W_t, probabilities, loss and gradients (the shared V's gradient
 *     is the sum of the tiles'), and the retrieval tensors rq, rk get gradients
 *     of exactly 0 (softmax over one retrieval is the constant 1);
 *   - configs it cannot serve (S not dividing d) are refused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "model_check.h"

static ws_model_config comp_config(int upd, int ext, int S, int R, int dr)
{
    ws_model_config c = model_check_tiny_config(1);
    c.d = 12;
    c.upd_mixer = upd ? WS_MIXER_COMPOSITIONAL : WS_MIXER_MHA;
    c.ext_mixer = ext ? WS_MIXER_COMPOSITIONAL : WS_MIXER_MHA;
    c.comp_searches = S, c.comp_retrievals = R, c.comp_dim = dr;
    return c;
}

/* Two layers of the mixer under test (uses share the backward scratch), one of
 * the other stack: the check takes two model steps per parameter. */
static void test_grad_self(void **state)
{
    (void)state;
    ws_model_config c = comp_config(1, 0, 3, 2, 5);
    c.n_ext_layers = 1;
    model_check_config_gradients(&c, 1e-2f, 2e-2, "upd_mixer=compositional S3 R2 dr5");
}

static void test_grad_cross(void **state)
{
    (void)state;
    ws_model_config c = comp_config(0, 1, 2, 3, 3);
    c.n_upd_layers = 1;
    model_check_config_gradients(&c, 1e-2f, 2e-2, "ext_mixer=compositional S2 R3 dr3");
}

/* ---- R = 1 against shared-value multi-head attention ----------------------------- */

static int is_retrieval(const char *name)
{
    return strstr(name, ".rq.") != NULL || strstr(name, ".rk.") != NULL;
}

static float *tensor(ws_model *m, const char *name, int grad)
{
    const ws_tensor_info *t = ws_model_tensor_by_name(m, name);
    assert_non_null(t);
    float *h = malloc(t->numel * sizeof *h);
    assert_non_null(h);
    ws_error err;
    assert_int_equal(ws_model_get_tensor(m, name, h, t->numel, grad, &err), WS_OK);
    return h;
}

/* A tensor of the compositional model (rows ra) that the MHA model holds with
 * its last d_v rows tiled S times (rows rb = ra − d_v + S·d_v): the value
 * projection. Everything else has the same shape in both. Returns the number
 * of rows before the values, or -1 when the shapes are equal. */
static int value_split(const ws_tensor_info *a, const ws_tensor_info *b, int dv)
{
    if (a->numel == b->numel) return -1;
    return a->shape[0] - dv; /* rows of a matrix, length of a vector */
}

/* Copies every parameter of comp into mha (tiling the shared V). */
static void copy_params(ws_model *comp, ws_model *mha, int S, int dv)
{
    ws_error err;
    for (int i = 0; i < ws_model_n_tensors(mha); i++) {
        const ws_tensor_info *tb = ws_model_tensor(mha, i);
        const ws_tensor_info *ta = ws_model_tensor_by_name(comp, tb->name);
        assert_non_null(ta);
        float *a = tensor(comp, tb->name, 0), *b = malloc(tb->numel * sizeof *b);
        assert_non_null(b);
        int split = value_split(ta, tb, dv);
        size_t cols = ta->ndim == 2 ? (size_t)ta->shape[1] : 1;
        if (split < 0) {
            memcpy(b, a, tb->numel * sizeof *b);
        } else {
            memcpy(b, a, (size_t)split * cols * sizeof *b);
            for (int h = 0; h < S; h++)
                memcpy(b + ((size_t)split + (size_t)h * dv) * cols, a + (size_t)split * cols,
                       (size_t)dv * cols * sizeof *b);
        }
        assert_int_equal(ws_model_set_tensor(mha, tb->name, b, tb->numel, &err), WS_OK);
        free(a), free(b);
    }
}

static double rel(const float *a, const float *b, size_t n)
{
    return ws_test_norm_rel_err(a, b, n, 1e-12);
}

static void test_reduction_r1(void **state)
{
    (void)state;
    enum { S = 3 };
    ws_model_config cc = comp_config(1, 1, S, 1, 4);
    ws_model_config cm = cc;
    cm.n_heads = S, cc.n_heads = S; /* the Updater's cross-attention alike in both */
    cm.upd_mixer = cm.ext_mixer = WS_MIXER_MHA;
    int dv = cc.d / S;
    model_fixture fc, fm;
    model_fixture_setup(&fc, &cc);
    model_fixture_setup(&fm, &cm);
    copy_params(fc.m, fm.m, S, dv);
    size_t sf = 4 * ws_model_state_floats(fc.m);
    float *w = malloc(sf * sizeof *w);
    assert_non_null(w);
    assert_int_equal(ws_backend_download(fc.be, w, fc.w_prev, sf * sizeof *w), WS_OK);
    assert_int_equal(ws_backend_upload(fm.be, fm.w_prev, w, sf * sizeof *w), WS_OK);

    ws_error err;
    ws_step_result rc, rm;
    int nq = ws_batch_n_query(fc.b);
    float *pc = malloc((size_t)nq * sizeof *pc), *pm = malloc((size_t)nq * sizeof *pm);
    float *wc = malloc(sf * sizeof *wc), *wm = malloc(sf * sizeof *wm);
    assert_true(pc && pm && wc && wm);
    model_fixture *f[2] = {&fc, &fm};
    ws_step_result *res[2] = {&rc, &rm};
    float *probs[2] = {pc, pm}, *ws[2] = {wc, wm};
    for (int k = 0; k < 2; k++) {
        assert_int_equal(ws_model_zero_grads(f[k]->m, &err), WS_OK);
        assert_int_equal(ws_exec_step(f[k]->x, f[k]->b, f[k]->w_prev, f[k]->w_out,
                                       WS_STEP_TRAIN, 1.0f, probs[k], res[k], &err),
                         WS_OK);
        assert_int_equal(ws_backend_download(f[k]->be, ws[k], f[k]->w_out, sf * sizeof *wc),
                         WS_OK);
    }
    double e_w = rel(wc, wm, sf), e_p = rel(pc, pm, (size_t)nq);
    double e_l = fabs((double)rc.loss - rm.loss) / fabs((double)rm.loss);
    printf("R=1 vs shared-V MHA: W_t rel err %.2e, probabilities %.2e, loss %.2e\n", e_w, e_p,
           e_l);
    assert_true(e_w <= 1e-5 && e_p <= 1e-5 && e_l <= 1e-5);

    double worst = 0.0;
    int n_zero = 0;
    for (int i = 0; i < ws_model_n_tensors(fc.m); i++) {
        const ws_tensor_info *ta = ws_model_tensor(fc.m, i);
        float *ga = tensor(fc.m, ta->name, 1);
        if (is_retrieval(ta->name)) {
            for (size_t j = 0; j < ta->numel; j++)
                if (ga[j] != 0.0f) fail_msg("%s[%zu] grad %g, not exactly 0", ta->name, j,
                                            (double)ga[j]);
            n_zero++;
            free(ga);
            continue;
        }
        const ws_tensor_info *tb = ws_model_tensor_by_name(fm.m, ta->name);
        assert_non_null(tb);
        float *gb = tensor(fm.m, ta->name, 1);
        int split = value_split(ta, tb, dv);
        if (split >= 0) { /* the shared V's gradient is the sum over the S tiles */
            size_t cols = ta->ndim == 2 ? (size_t)ta->shape[1] : 1;
            for (size_t j = (size_t)split * cols; j < ta->numel; j++) {
                double s = 0.0;
                for (int h = 1; h < S; h++) s += gb[j + (size_t)h * dv * cols];
                gb[j] += (float)s;
            }
        }
        double e = rel(ga, gb, ta->numel);
        if (e > 1e-4) printf("  %-22s grad rel err %.3e\n", ta->name, e);
        worst = fmax(worst, e);
        free(ga), free(gb);
    }
    printf("R=1 vs shared-V MHA: worst gradient rel err %.2e; %d retrieval tensors exactly 0\n",
           worst, n_zero);
    assert_true(worst <= 1e-4);
    assert_int_equal(n_zero, 4 * (cc.n_upd_layers + cc.n_ext_layers)); /* rq.w/b, rk.w/b */
    free(w), free(pc), free(pm), free(wc), free(wm);
    model_fixture_teardown(&fc);
    model_fixture_teardown(&fm);
}

static void test_refuses_bad_config(void **state)
{
    (void)state;
    ws_error err = {0};
    ws_model_config c = comp_config(1, 0, 5, 2, 4); /* 5 does not divide 12 */
    assert_int_equal(ws_model_config_validate(&c, &err), WS_ERR_INVALID);
    assert_non_null(strstr(err.msg, "comp_searches"));
    c = comp_config(0, 1, 5, 2, 4);
    assert_int_equal(ws_model_config_validate(&c, &err), WS_ERR_INVALID);
    c = comp_config(1, 1, 4, 7, 9);
    assert_int_equal(ws_model_config_validate(&c, &err), WS_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grad_self),
        cmocka_unit_test(test_grad_cross),
        cmocka_unit_test(test_reduction_r1),
        cmocka_unit_test(test_refuses_bad_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
