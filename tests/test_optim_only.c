/* test_optim_only.c — AdamW on one tensor (ws_optim_config.only: what online
 * training's scope "symbols" steps). After a training step leaves a gradient in
 * every tensor, a step restricted to embed.sym moves embed.sym exactly as a full
 * step with the other gradients zeroed would (same clipping: the norm is
 * embed.sym's alone; that step also decays the projections, this one does not), leaves every other tensor and its moments bit for bit as
 * they were, and clears every gradient. A name that is no tensor is refused
 * and changes nothing. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model_check.h"

static float *host_copy(ws_model *m, float *dev)
{
    size_t n = ws_model_n_params(m);
    float *h = malloc(n * sizeof *h);
    assert_non_null(h);
    assert_int_equal(ws_backend_download(ws_model_backend(m), h, dev, n * sizeof *h), WS_OK);
    return h;
}

static void train_step(model_fixture *f)
{
    ws_error err;
    assert_int_equal(ws_model_zero_grads(f->m, &err), WS_OK);
    assert_int_equal(
        ws_exec_step(f->x, f->b, f->w_prev, f->w_out, WS_STEP_TRAIN, 1.0f, NULL, NULL, &err),
        WS_OK);
}

static void test_only_one_tensor(void **state)
{
    (void)state;
    ws_model_config c = model_check_tiny_config(0);
    model_fixture f;
    model_fixture_setup(&f, &c);
    ws_model *m = f.m;
    ws_error err;
    const ws_tensor_info *sym = ws_model_tensor_by_name(m, "embed.sym");
    assert_non_null(sym);
    size_t n = ws_model_n_params(m);
    float *p0 = host_copy(m, ws_model_params(m));

    /* The reference: a full step with every gradient but embed.sym's zeroed. */
    train_step(&f);
    float *g = host_copy(m, ws_model_grads(m));
    double sq = 0, sq_all = 0;
    for (size_t i = 0; i < n; i++) {
        int in_sym = i >= sym->offset && i < sym->offset + sym->numel;
        sq_all += (double)g[i] * g[i];
        if (in_sym)
            sq += (double)g[i] * g[i];
        else
            g[i] = 0;
    }
    assert_true(sq > 0 && sq_all > 2 * sq); /* the other tensors carry gradient too */
    ws_optim_config oc = ws_optim_config_default();
    oc.clip_norm = (float)sqrt(sq) / 2; /* clipping acts, on embed.sym's norm */
    assert_int_equal(ws_backend_upload(ws_model_backend(m), ws_model_grads(m), g, n * sizeof *g),
                     WS_OK);
    float norm;
    assert_int_equal(ws_model_adamw_step(m, &oc, &norm, &err), WS_OK);
    assert_float_equal(norm, sqrt(sq), 1e-4 * sqrt(sq));
    float *want = host_copy(m, ws_model_params(m));

    /* The same from p0 with every gradient in place, restricted to embed.sym. */
    assert_int_equal(ws_backend_upload(ws_model_backend(m), ws_model_params(m), p0, n * sizeof *p0),
                     WS_OK);
    float *zero = calloc(n, sizeof *zero);
    assert_non_null(zero);
    assert_int_equal(ws_backend_upload(ws_model_backend(m), ws_model_adam_m(m), zero, n * 4),
                     WS_OK);
    assert_int_equal(ws_backend_upload(ws_model_backend(m), ws_model_adam_v(m), zero, n * 4),
                     WS_OK);
    ws_model_set_optim_steps(m, 0);
    train_step(&f);
    oc.only = "embed.sym";
    assert_int_equal(ws_model_adamw_step(m, &oc, &norm, &err), WS_OK);
    assert_float_equal(norm, sqrt(sq), 1e-4 * sqrt(sq));
    float *got = host_copy(m, ws_model_params(m));
    assert_memory_equal(got + sym->offset, want + sym->offset, sym->numel * sizeof *got);
    size_t moved = 0;
    for (size_t i = sym->offset; i < sym->offset + sym->numel; i++) moved += got[i] != p0[i];
    assert_true(moved > 0);
    for (size_t i = 0; i < n; i++)
        if (i < sym->offset || i >= sym->offset + sym->numel) assert_true(got[i] == p0[i]);
    float *mom = host_copy(m, ws_model_adam_v(m));
    for (size_t i = 0; i < n; i++)
        if (i < sym->offset || i >= sym->offset + sym->numel) assert_true(mom[i] == 0);
    float *g_after = host_copy(m, ws_model_grads(m));
    assert_memory_equal(g_after, zero, n * sizeof *zero);

    /* No such tensor: refused, nothing moves. */
    train_step(&f);
    oc.only = "embed.nothing";
    assert_int_equal(ws_model_adamw_step(m, &oc, NULL, &err), WS_ERR_INVALID);
    float *still = host_copy(m, ws_model_params(m));
    assert_memory_equal(still, got, n * sizeof *got);

    free(p0), free(g), free(want), free(zero), free(got), free(mom), free(g_after), free(still);
    model_fixture_teardown(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_only_one_tensor)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
