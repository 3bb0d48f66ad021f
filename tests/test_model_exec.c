/* test_model_exec.c — execution contexts (model.h ws_exec). Two contexts on one
 * model, interleaving batches of different shapes (so that their arenas grow
 * apart), give bit for bit what one context gives running the same steps alone:
 * probabilities, new states and the gradients they accumulate. And a step in one
 * context leaves the other's activations as they were. */
#include <stdlib.h>
#include <string.h>

#include "model_check.h"
#include "model/model_internal.h" /* the plan, to watch a context's activations */

/* One trajectory from W_0: a small batch beside model_check_batch's four. */
static void small_batch(ws_batch *b)
{
    int32_t ids[2] = {2, 5};
    ws_batch_clear(b);
    assert_int_equal(ws_batch_begin_traj(b, 1), WS_OK);
    assert_int_equal(ws_batch_add_instr(b, ids, 2, 1), WS_OK);
    assert_int_equal(ws_batch_add_query(b, ids, 1, 0), WS_OK);
    assert_int_equal(ws_batch_add_query(b, ids, 2, 1), WS_OK);
}

#define N_OPS 6

/* What a run produced: each op's probabilities, the states and the gradients. */
typedef struct {
    float *probs[N_OPS];
    float *w_out, *w2, *grads;
} outcome;

typedef struct {
    model_fixture *f;
    ws_batch *small;
    float *w2; /* one state on f->be */
} rig;

/* A context's logits (device) on the host, to watch them across the other's step. */
static float *logits_of(const rig *r, ws_exec *x)
{
    int n = x->plan.n_query;
    float *h = malloc((size_t)n * sizeof *h);
    assert_non_null(h);
    assert_int_equal(ws_backend_download(r->f->be, h, x->plan.logits, (size_t)n * sizeof *h),
                     WS_OK);
    return h;
}

/* The ops: {context (0 or 1), batch (0 big, 1 small), mode (0 infer, 1 train, 2 query)}. */
static const int OPS[N_OPS][3] = {{0, 0, 1}, {1, 1, 1}, {0, 0, 0}, {1, 1, 2}, {1, 0, 1}, {0, 1, 0}};

static void run(const rig *r, ws_exec *x[2], outcome *o)
{
    model_fixture *f = r->f;
    ws_error err;
    assert_int_equal(ws_model_zero_grads(f->m, &err), WS_OK);
    for (int i = 0; i < N_OPS; i++) {
        ws_exec *cx = x[OPS[i][0]];
        int big = OPS[i][1] == 0, mode = OPS[i][2];
        ws_batch *b = big ? f->b : r->small;
        /* big: from the fixture's states (in place after the first); small: from W_0 */
        const float *w_prev = big ? (i == 0 ? f->w_prev : f->w_out) : NULL;
        float *w_out = big ? f->w_out : r->w2;
        int nq = ws_batch_n_query(b);
        o->probs[i] = malloc((size_t)nq * sizeof(float));
        assert_non_null(o->probs[i]);
        ws_exec *other = x[1 - OPS[i][0]];
        float *before = i > 0 && other != cx ? logits_of(r, other) : NULL;
        ws_status st = mode == 2 ? ws_exec_query(cx, b, r->w2, o->probs[i], NULL, &err)
                                 : ws_exec_step(cx, b, w_prev, w_out,
                                                mode ? WS_STEP_TRAIN : WS_STEP_INFER, 1.0f,
                                                o->probs[i], NULL, &err);
        assert_int_equal(st, WS_OK);
        if (before) {
            float *after = logits_of(r, other);
            assert_memory_equal(before, after, (size_t)other->plan.n_query * sizeof *after);
            free(after);
        }
        free(before);
    }
    size_t sf = ws_model_state_floats(f->m), np = ws_model_n_params(f->m);
    o->w_out = malloc(MODEL_CHECK_N_TRAJ * sf * sizeof(float));
    o->w2 = malloc(sf * sizeof(float));
    o->grads = malloc(np * sizeof(float));
    assert_true(o->w_out && o->w2 && o->grads);
    assert_int_equal(ws_backend_download(f->be, o->w_out, f->w_out,
                                         MODEL_CHECK_N_TRAJ * sf * sizeof(float)),
                     WS_OK);
    assert_int_equal(ws_backend_download(f->be, o->w2, r->w2, sf * sizeof(float)), WS_OK);
    assert_int_equal(ws_backend_download(f->be, o->grads, ws_model_grads(f->m),
                                         np * sizeof(float)),
                     WS_OK);
}

static void outcome_free(outcome *o)
{
    for (int i = 0; i < N_OPS; i++) free(o->probs[i]);
    free(o->w_out);
    free(o->w2);
    free(o->grads);
}

static void test_contexts_share_nothing(void **s)
{
    (void)s;
    model_fixture f;
    ws_model_config c = model_check_tiny_config(1);
    model_fixture_setup(&f, &c);
    ws_error err;
    rig r = {.f = &f};
    assert_int_equal(ws_batch_new(&r.small, &c), WS_OK);
    small_batch(r.small);
    assert_int_equal(ws_model_state_alloc(f.m, 1, &r.w2, &err), WS_OK);

    outcome alone, together;
    ws_exec *one[2] = {f.x, f.x};
    run(&r, one, &alone);
    ws_exec *two[2];
    assert_int_equal(ws_exec_new(&two[0], f.m, &err), WS_OK);
    assert_int_equal(ws_exec_new(&two[1], f.m, &err), WS_OK);
    assert_ptr_equal(ws_exec_model(two[1]), f.m);
    run(&r, two, &together);

    size_t sf = ws_model_state_floats(f.m);
    for (int i = 0; i < N_OPS; i++) {
        int nq = ws_batch_n_query(OPS[i][1] ? r.small : f.b);
        assert_memory_equal(alone.probs[i], together.probs[i], (size_t)nq * sizeof(float));
    }
    assert_memory_equal(alone.w_out, together.w_out, MODEL_CHECK_N_TRAJ * sf * sizeof(float));
    assert_memory_equal(alone.w2, together.w2, sf * sizeof(float));
    assert_memory_equal(alone.grads, together.grads, ws_model_n_params(f.m) * sizeof(float));
    outcome_free(&alone);
    outcome_free(&together);
    ws_exec_free(two[0]);
    ws_exec_free(two[1]);
    ws_backend_release(f.be, r.w2);
    ws_batch_free(r.small);
    model_fixture_teardown(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_contexts_share_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
