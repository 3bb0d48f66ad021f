/* model_check.c — whole-model checks shared by the model tests (model_check.h). */
#include "model_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ws_model_config ws_mc_tiny_config(int state_norm)
{
    ws_model_config c = ws_model_config_default();
    c.d = 8, c.n_heads = 2, c.n_state = 3, c.n_upd_layers = 2, c.n_ext_layers = 2;
    c.max_fact_len = 3, c.vocab_cap = 6, c.n_overflow = 2, c.d_raw = 3;
    c.state_norm = state_norm;
    return c;
}

void ws_mc_randomize(ws_model *m, ws_test_rng *r)
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

void ws_mc_build_batch(ws_batch *b, int variant)
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

void ws_mc_setup(ws_mc_fixture *f, const ws_model_config *c)
{
    ws_error err;
    f->r.s = 12345;
    assert_int_equal(ws_backend_cpu_new(&f->be, 2, &err), WS_OK);
    if (ws_model_new(&f->m, c, f->be, 7, &err) != WS_OK) fail_msg("model: %s", err.msg);
    ws_mc_randomize(f->m, &f->r);
    assert_int_equal(ws_batch_new(&f->b, c), WS_OK);
    ws_mc_build_batch(f->b, 0);
    assert_int_equal(ws_model_state_alloc(f->m, 4, &f->w_prev, &err), WS_OK);
    assert_int_equal(ws_model_state_alloc(f->m, 4, &f->w_out, &err), WS_OK);
    size_t n = 4 * ws_model_state_floats(f->m);
    float *h = malloc(n * sizeof *h);
    assert_non_null(h);
    ws_test_fill_normal(&f->r, h, n, 1.0f);
    assert_int_equal(ws_backend_upload(f->be, f->w_prev, h, n * sizeof *h), WS_OK);
    free(h);
}

void ws_mc_teardown(ws_mc_fixture *f)
{
    ws_backend_release(f->be, f->w_prev);
    ws_backend_release(f->be, f->w_out);
    ws_batch_free(f->b);
    ws_model_free(f->m);
    ws_backend_free(f->be);
}

double ws_mc_loss(ws_mc_fixture *f)
{
    ws_step_result res;
    ws_error err;
    assert_int_equal(ws_model_step(f->m, f->b, f->w_prev, f->w_out, WS_STEP_INFER, 1.0f, NULL,
                                   &res, &err),
                     WS_OK);
    return res.loss;
}

void ws_mc_check_all_gradients(const ws_model_config *c, const char *label, double tol)
{
    ws_mc_fixture f;
    ws_mc_setup(&f, c);
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
            double lp = ws_mc_loss(&f);
            p[j] = keep - h;
            assert_int_equal(ws_model_set_tensor(f.m, t->name, p, t->numel, &err), WS_OK);
            double lm = ws_mc_loss(&f);
            p[j] = keep;
            fd[j] = (float)((lp - lm) / (2.0 * h));
        }
        assert_int_equal(ws_model_set_tensor(f.m, t->name, p, t->numel, &err), WS_OK);
        double e = ws_test_norm_rel_err(g, fd, t->numel, 1e-3);
        if (e > worst) worst = e, worst_name = t->name;
        if (e > tol) printf("  %-22s rel err %.3e\n", t->name, e);
        assert_true(e <= tol);
        free(p);
        free(g);
        free(fd);
    }
    printf("%s: worst tensor %s, finite-difference rel err %.3e\n", label, worst_name, worst);
    ws_mc_teardown(&f);
}

void ws_mc_check_isolation(const ws_model_config *c)
{
    ws_mc_fixture f;
    ws_mc_setup(&f, c);
    ws_error err;
    size_t sf = ws_model_state_floats(f.m);
    int nq = ws_batch_n_query(f.b);
    float *w1 = malloc(4 * sf * sizeof *w1), *w2 = malloc(4 * sf * sizeof *w2);
    float *p1 = malloc(nq * sizeof *p1), *p2 = malloc(nq * sizeof *p2);
    assert_true(w1 && w2 && p1 && p2);
    assert_int_equal(ws_model_step(f.m, f.b, f.w_prev, f.w_out, WS_STEP_INFER, 1, p1, NULL, &err),
                     WS_OK);
    assert_int_equal(ws_backend_download(f.be, w1, f.w_out, 4 * sf * sizeof *w1), WS_OK);
    ws_mc_build_batch(f.b, 3); /* same except trajectory 2's instructions */
    assert_int_equal(ws_model_step(f.m, f.b, f.w_prev, f.w_out, WS_STEP_INFER, 1, p2, NULL, &err),
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
    ws_mc_teardown(&f);
}
