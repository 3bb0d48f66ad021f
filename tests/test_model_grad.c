/* test_model_grad.c — the whole model on tiny configs: every parameter tensor's
 * gradient against central finite differences of the loss, the ragged-batch
 * isolation (no trajectory sees another's data), and the query-only path. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_check.h"

static void check_all_gradients(int state_norm)
{
    ws_model_config c = model_check_tiny_config(state_norm);
    char label[32];
    snprintf(label, sizeof label, "state_norm=%d", state_norm);
    model_check_config_gradients(&c, 1e-2f, 2e-2, label);
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

static void test_trajectories_isolated(void **s)
{
    (void)s;
    ws_model_config c = model_check_tiny_config(1);
    model_check_isolation(&c);
}

/* ws_exec_query on W_t answers exactly what the step answered. */
static void test_query_matches_step(void **s)
{
    (void)s;
    model_fixture f;
    ws_model_config c = model_check_tiny_config(1);
    model_fixture_setup(&f, &c);
    ws_error err;
    int nq = ws_batch_n_query(f.b);
    float *p1 = malloc(nq * sizeof *p1), *p2 = malloc(nq * sizeof *p2);
    assert_true(p1 && p2);
    assert_int_equal(ws_exec_step(f.x, f.b, f.w_prev, f.w_out, WS_STEP_INFER, 1, p1, NULL, &err),
                     WS_OK);
    assert_int_equal(ws_exec_query(f.x, f.b, f.w_out, p2, NULL, &err), WS_OK);
    assert_memory_equal(p1, p2, nq * sizeof *p1);
    /* In place (w_out aliasing w_prev) gives the same new state as out of place. */
    size_t n = 4 * ws_model_state_floats(f.m);
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    assert_true(a && b);
    assert_int_equal(ws_backend_download(f.be, a, f.w_out, n * sizeof *a), WS_OK);
    assert_int_equal(ws_exec_step(f.x, f.b, f.w_prev, f.w_prev, WS_STEP_INFER, 1, NULL, NULL,
                                   &err),
                     WS_OK);
    assert_int_equal(ws_backend_download(f.be, b, f.w_prev, n * sizeof *b), WS_OK);
    assert_memory_equal(a, b, n * sizeof *a);
    free(a);
    free(b);
    free(p1);
    free(p2);
    model_fixture_teardown(&f);
}

/* Bad batches are refused and change nothing. */
static void test_rejects_bad_input(void **s)
{
    (void)s;
    model_fixture f;
    ws_model_config c = model_check_tiny_config(1);
    model_fixture_setup(&f, &c);
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
    assert_int_equal(ws_exec_step(f.x, f.b, NULL, f.w_out, WS_STEP_INFER, 1, NULL, NULL, &err),
                     WS_ERR_INVALID);
    model_fixture_teardown(&f);
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
