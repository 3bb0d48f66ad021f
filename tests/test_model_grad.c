/* test_model_grad.c — the whole model on tiny configs: every parameter tensor's
 * gradient against central finite differences of the loss, the ragged-batch
 * isolation (no trajectory sees another's data), and the query-only path. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "test_util.h"

static void check_all_gradients(int state_norm)
{
    ws_model_config c = ws_test_tiny_config(state_norm);
    char label[32];
    snprintf(label, sizeof label, "state_norm=%d", state_norm);
    ws_test_model_grad_check(&c, label);
}

/* The fixture of the other tests: the tiny config with state_norm. */
static void setup_fixture(ws_test_model_fixture *f, int state_norm)
{
    ws_model_config c = ws_test_tiny_config(state_norm);
    ws_test_model_setup(f, &c, 2);
}

static void test_gradients_state_norm(void **s)
{
    (void)s;
    check_all_gradients(1);
}

static void test_gradients_no_state_norm(void **s)
{
    (void)s;
    check_all_gradients(0);
}

/* Changing trajectory 2's instructions must not change any other trajectory's
 * new state or answers — bit for bit. */
static void test_trajectories_isolated(void **s)
{
    (void)s;
    ws_test_model_fixture f;
    setup_fixture(&f, 1);
    ws_error err;
    size_t sf = ws_model_state_floats(f.m);
    int nq = ws_batch_n_query(f.b);
    float *w1 = malloc(4 * sf * sizeof *w1), *w2 = malloc(4 * sf * sizeof *w2);
    float *p1 = malloc(nq * sizeof *p1), *p2 = malloc(nq * sizeof *p2);
    assert_true(w1 && w2 && p1 && p2);
    assert_int_equal(ws_model_step(f.m, f.b, f.w_prev, f.w_out, WS_STEP_INFER, 1, p1, NULL, &err),
                     WS_OK);
    assert_int_equal(ws_backend_download(f.be, w1, f.w_out, 4 * sf * sizeof *w1), WS_OK);
    ws_test_model_batch(f.b, 3); /* same except trajectory 2's instructions */
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
    ws_test_model_teardown(&f);
}

/* ws_model_query on W_t answers exactly what the step answered. */
static void test_query_matches_step(void **s)
{
    (void)s;
    ws_test_model_fixture f;
    setup_fixture(&f, 1);
    ws_error err;
    int nq = ws_batch_n_query(f.b);
    float *p1 = malloc(nq * sizeof *p1), *p2 = malloc(nq * sizeof *p2);
    assert_true(p1 && p2);
    assert_int_equal(ws_model_step(f.m, f.b, f.w_prev, f.w_out, WS_STEP_INFER, 1, p1, NULL, &err),
                     WS_OK);
    assert_int_equal(ws_model_query(f.m, f.b, f.w_out, p2, NULL, &err), WS_OK);
    assert_memory_equal(p1, p2, nq * sizeof *p1);
    /* In place (w_out aliasing w_prev) gives the same new state as out of place. */
    size_t n = 4 * ws_model_state_floats(f.m);
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    assert_true(a && b);
    assert_int_equal(ws_backend_download(f.be, a, f.w_out, n * sizeof *a), WS_OK);
    assert_int_equal(ws_model_step(f.m, f.b, f.w_prev, f.w_prev, WS_STEP_INFER, 1, NULL, NULL,
                                   &err),
                     WS_OK);
    assert_int_equal(ws_backend_download(f.be, b, f.w_prev, n * sizeof *b), WS_OK);
    assert_memory_equal(a, b, n * sizeof *a);
    free(a);
    free(b);
    free(p1);
    free(p2);
    ws_test_model_teardown(&f);
}

/* Bad batches are refused and change nothing. */
static void test_rejects_bad_input(void **s)
{
    (void)s;
    ws_test_model_fixture f;
    setup_fixture(&f, 1);
    ws_error err;
    int32_t ids[4] = {0, 1, 2, 3};
    float x[3] = {0.0f, NAN, 1.0f};
    ws_batch_clear(f.b);
    assert_int_equal(ws_batch_add_instr(f.b, ids, 1, 1), WS_ERR_INVALID); /* no trajectory */
    assert_int_equal(ws_batch_begin_traj(f.b, 0), WS_OK);
    assert_int_equal(ws_batch_add_instr(f.b, ids, 4, 1), WS_ERR_INVALID); /* too long */
    assert_int_equal(ws_batch_add_instr(f.b, ids, 0, 1), WS_ERR_INVALID); /* empty */
    assert_int_equal(ws_batch_add_instr(f.b, ids, 1, 2), WS_ERR_INVALID); /* bad value */
    assert_int_equal(ws_batch_add_query(f.b, ids, 1, 3), WS_ERR_INVALID); /* bad label */
    assert_int_equal(ws_batch_add_instr_raw(f.b, x, 1), WS_ERR_INVALID);  /* NaN */
    ids[0] = 8;                                                           /* V = 6 + 2 */
    assert_int_equal(ws_batch_add_query(f.b, ids, 1, 1), WS_ERR_INVALID);
    ids[0] = -1;
    assert_int_equal(ws_batch_add_query(f.b, ids, 1, 1), WS_ERR_INVALID);
    assert_int_equal(ws_batch_n_instr(f.b), 0);
    assert_int_equal(ws_batch_n_query(f.b), 0);
    /* A trajectory that needs a previous state gets an error without one. */
    assert_int_equal(ws_model_step(f.m, f.b, NULL, f.w_out, WS_STEP_INFER, 1, NULL, NULL, &err),
                     WS_ERR_INVALID);
    ws_test_model_teardown(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradients_state_norm),
        cmocka_unit_test(test_gradients_no_state_norm),
        cmocka_unit_test(test_trajectories_isolated),
        cmocka_unit_test(test_query_matches_step),
        cmocka_unit_test(test_rejects_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
