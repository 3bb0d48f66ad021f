/* test_model_grad.c — the whole model on tiny configs: every parameter tensor's
 * gradient against central finite differences of the loss, the ragged-batch
 * isolation (no trajectory sees another's data), the query-only path, and
 * empty_steps "hold" (a step that tells nothing keeps the state). */
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

/* Trajectory 1 of the check batch (a state, no instructions) holds: its queries
 * still train the Extractor, and nothing of it reaches the Updater. */
static void test_gradients_hold(void **s)
{
    (void)s;
    ws_model_config c = model_check_tiny_config(1);
    c.empty_steps = WS_EMPTY_HOLD;
    model_check_config_gradients(&c, 1e-2f, 2e-2, "empty_steps=hold");
}

/* Two views (model/views.c): the loss is the BCE of the mean of each query's
 * views' logits, its gradient reaching every view; the batch's symbol known by
 * its hash alone is the one that differs between the views. */
static void test_gradients_views(void **s)
{
    (void)s;
    ws_model_config c = model_check_tiny_config(1);
    c.views = 2;
    model_check_config_gradients(&c, 1e-2f, 2e-2, "views=2");
    model_check_isolation(&c);
}

static float *download_states(model_fixture *f, const float *dev)
{
    size_t n = MODEL_CHECK_N_TRAJ * ws_model_state_floats(f->m);
    float *h = malloc(n * sizeof *h);
    assert_non_null(h);
    assert_int_equal(ws_backend_download(f->be, h, dev, n * sizeof *h), WS_OK);
    return h;
}

/* One INFER step of the check batch: the new states (downloaded) and answers. */
static float *step_of(model_fixture *f, float *w_out, float *probs)
{
    ws_error err;
    assert_int_equal(ws_exec_step(f->x, f->b, f->w_prev, w_out, WS_STEP_INFER, 1, probs, NULL,
                                  &err),
                     WS_OK);
    return download_states(f, w_out);
}

/* Under "hold" the trajectory that is told nothing keeps W_{t-1} bit for bit and
 * answers from it as a query would; every other trajectory gets exactly what
 * "update" gives (same parameters), in place or not; a batch in which every
 * trajectory holds changes no state. */
static void test_hold_keeps_state(void **s)
{
    (void)s;
    model_fixture h, u;
    ws_model_config c = model_check_tiny_config(1);
    model_fixture_setup(&u, &c);
    c.empty_steps = WS_EMPTY_HOLD;
    model_fixture_setup(&h, &c);
    size_t per = ws_model_state_floats(h.m), nq = (size_t)ws_batch_n_query(h.b);
    float *ph = malloc(nq * sizeof *ph), *pu = malloc(nq * sizeof *pu);
    float *pq = malloc(nq * sizeof *pq);
    assert_true(ph && pu && pq);
    float *prev = download_states(&h, h.w_prev);
    float *wu = step_of(&u, u.w_out, pu), *wh = step_of(&h, h.w_out, ph);
    assert_memory_equal(wh + per, prev + per, per * sizeof *wh); /* held */
    assert_memory_not_equal(wu + per, prev + per, per * sizeof *wu); /* "update" moves it */
    assert_memory_equal(wh, wu, per * sizeof *wh);
    assert_memory_equal(wh + 2 * per, wu + 2 * per, 2 * per * sizeof *wh);
    ws_error err;
    assert_int_equal(ws_exec_query(h.x, h.b, h.w_prev, pq, NULL, &err), WS_OK);
    int q1 = ws_batch_query_off(h.b, 1), n1 = ws_batch_query_count(h.b, 1);
    assert_true(n1 > 0);
    assert_memory_equal(ph + q1, pq + q1, (size_t)n1 * sizeof *ph);
    assert_memory_equal(ph, pu, (size_t)q1 * sizeof *ph);
    assert_memory_equal(ph + q1 + n1, pu + q1 + n1, (nq - q1 - n1) * sizeof *ph);
    /* in place */
    float *wi = step_of(&h, h.w_prev, NULL);
    assert_memory_equal(wi, wh, MODEL_CHECK_N_TRAJ * per * sizeof *wi);
    free(wi);
    /* every trajectory held: no state changes */
    int32_t id = 2;
    ws_batch_clear(h.b);
    for (int t = 0; t < 2; t++) {
        assert_int_equal(ws_batch_begin_traj(h.b, 0), WS_OK);
        assert_int_equal(ws_batch_add_query(h.b, &id, 1, 1), WS_OK);
    }
    assert_int_equal(ws_exec_step(h.x, h.b, h.w_out, h.w_out, WS_STEP_TRAIN, 1, ph, NULL, &err),
                     WS_OK);
    float *after = download_states(&h, h.w_out);
    assert_memory_equal(after, wh, 2 * per * sizeof *after);
    free(after), free(prev), free(wu), free(wh), free(ph), free(pu), free(pq);
    model_fixture_teardown(&h);
    model_fixture_teardown(&u);
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
        cmocka_unit_test(test_gradients_hold),
        cmocka_unit_test(test_gradients_views),
        cmocka_unit_test(test_hold_keeps_state),
        cmocka_unit_test(test_trajectories_isolated),
        cmocka_unit_test(test_query_matches_step),
        cmocka_unit_test(test_rejects_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
