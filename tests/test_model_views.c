/* test_model_views.c — a model of several views (model/views.c) is its model of
 * one view run once per view, view v on the codes of the symbols' hashes mixed
 * with v: its states are the views' states one after another, bit for bit,
 * and its answers σ of the mean of the views' logits. Symbols come by hash
 * alone, by vocabulary id alone (view v > 0 takes the vocabulary's hash) and
 * with both; raw facts are alike in every view. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "model/vocab.h"
#include "test_util.h"

uint64_t ws_view_hash(uint64_t hash, int view); /* model_internal.h */

#define VIEWS  3
#define N_TRAJ 2

typedef struct {
    ws_backend *be;
    ws_model *m;
    ws_exec *x;
    ws_sym named[4]; /* symbols of the vocabulary: id and hash */
} rig;

static ws_model_config config(void)
{
    ws_model_config c = ws_model_config_default();
    c.d = 16, c.n_heads = 2, c.n_state = 4, c.n_upd_layers = 1, c.n_ext_layers = 1;
    c.max_fact_len = 3, c.vocab_cap = 8, c.n_overflow = 2, c.d_raw = 3;
    return c;
}

/* Trajectory 0 from W_0: instructions by hash, by id and raw; trajectory 1 from
 * a state: an instruction with both, queries of every kind, labelled or not.
 * view: the view whose hashes the batch carries (-1: as a client gives them). */
static void build(const rig *r, ws_batch *b, int view)
{
    static const uint64_t hashes[3] = {0x1234567ULL, 0xABCDEF01ULL, 0x5555AAAA3333ULL};
    ws_sym s[3];
    float raw[3] = {0.5f, -1.0f, 2.0f};
    /* what view `view` sees of a symbol: a hash alone as it is in view 0 */
    for (int i = 0; i < 3; i++)
        s[i] = (ws_sym){-1, view < 0 ? hashes[i] : ws_view_hash(hashes[i], view)};
    ws_sym id[2], both[2];
    for (int i = 0; i < 2; i++) {
        /* by id alone: the client sends no hash; a view's batch carries the
         * vocabulary's hash mixed */
        id[i] = view < 0 ? (ws_sym){r->named[i].id, 0}
                         : (ws_sym){r->named[i].id, ws_view_hash(r->named[i].hash, view)};
        both[i] = view < 0 ? r->named[2 + i]
                           : (ws_sym){r->named[2 + i].id, ws_view_hash(r->named[2 + i].hash, view)};
    }
    ws_batch_clear(b);
    assert_int_equal(ws_batch_begin_traj(b, 1), WS_OK);
    assert_int_equal(ws_batch_add_instr_syms(b, s, 3, 1), WS_OK);
    assert_int_equal(ws_batch_add_instr_syms(b, id, 2, 1), WS_OK);
    assert_int_equal(ws_batch_add_instr_raw(b, raw, 0), WS_OK);
    assert_int_equal(ws_batch_add_query_syms(b, s, 2, 1), WS_OK);
    assert_int_equal(ws_batch_add_query_syms(b, id, 1, 0), WS_OK);
    assert_int_equal(ws_batch_begin_traj(b, 0), WS_OK);
    assert_int_equal(ws_batch_add_instr_syms(b, both, 2, 0), WS_OK);
    assert_int_equal(ws_batch_add_query_syms(b, both, 2, 1), WS_OK);
    assert_int_equal(ws_batch_add_query_syms(b, s + 1, 2, -1), WS_OK);
    assert_int_equal(ws_batch_add_query_raw(b, raw, 0), WS_OK);
}

static void rig_up(rig *r, int views)
{
    ws_error err;
    ws_model_config c = config();
    c.views = views;
    assert_int_equal(ws_backend_cpu_new(&r->be, 1, &err), WS_OK);
    assert_int_equal(ws_model_new(&r->m, &c, r->be, 3, &err), WS_OK);
    assert_int_equal(ws_exec_new(&r->x, r->m, &err), WS_OK);
    /* parameters far from their init, so that the views' answers differ */
    ws_test_rng g = {77};
    for (int i = 0; i < ws_model_n_tensors(r->m); i++) {
        const ws_tensor_info *t = ws_model_tensor(r->m, i);
        float *h = malloc(t->numel * sizeof *h);
        assert_non_null(h);
        ws_test_fill_normal(&g, h, t->numel, 0.5f);
        assert_int_equal(ws_model_set_tensor(r->m, t->name, h, t->numel, &err), WS_OK);
        free(h);
    }
    static const char *const names[4] = {"anna", "kitchen", "bob", "garden"};
    for (int i = 0; i < 4; i++)
        r->named[i] = ws_vocab_sym(ws_model_vocab(r->m), names[i], strlen(names[i]), 1);
}

static void rig_down(rig *r)
{
    ws_exec_free(r->x);
    ws_model_free(r->m);
    ws_backend_free(r->be);
}

static float logit(float p)
{
    return logf(p) - log1pf(-p);
}

static void test_views_are_the_model_per_view(void **s)
{
    (void)s;
    rig r;
    ws_error err;
    rig_up(&r, VIEWS);
    size_t view = ws_model_state_floats(r.m) / VIEWS;
    ws_batch *b;
    assert_int_equal(ws_batch_new(&b, ws_model_config_of(r.m)), WS_OK);
    build(&r, b, -1);
    int nq = ws_batch_n_query(b);
    /* the model of VIEWS views: trajectory 1 from a random state of its own */
    float *w, *host = malloc(N_TRAJ * ws_model_state_floats(r.m) * sizeof *host), probs[16];
    assert_non_null(host);
    assert_int_equal(ws_model_state_alloc(r.m, N_TRAJ, &w, &err), WS_OK);
    ws_test_rng g = {5};
    ws_test_fill_normal(&g, host, N_TRAJ * ws_model_state_floats(r.m), 1.0f);
    assert_int_equal(ws_backend_upload(r.be, w, host, N_TRAJ * view * VIEWS * sizeof *host), WS_OK);
    float *prev = malloc(N_TRAJ * view * VIEWS * sizeof *prev);
    memcpy(prev, host, N_TRAJ * view * VIEWS * sizeof *prev);
    ws_step_result res;
    assert_int_equal(ws_exec_step(r.x, b, w, w, WS_STEP_INFER, 1, probs, &res, &err), WS_OK);
    assert_int_equal(ws_backend_download(r.be, host, w, N_TRAJ * view * VIEWS * sizeof *host),
                     WS_OK);
    /* the same parameters as one view, each view's batch on its own */
    assert_int_equal(ws_model_set_views(r.m, 1, &err), WS_OK);
    double mean[16] = {0};
    float *one, got[16], *out = malloc(N_TRAJ * view * sizeof *out);
    assert_int_equal(ws_model_state_alloc(r.m, N_TRAJ, &one, &err), WS_OK);
    for (int v = 0; v < VIEWS; v++) {
        for (int t = 0; t < N_TRAJ; t++)
            assert_int_equal(ws_backend_upload(r.be, one + t * view,
                                               prev + ((size_t)t * VIEWS + v) * view,
                                               view * sizeof *prev),
                             WS_OK);
        build(&r, b, v);
        assert_int_equal(ws_exec_step(r.x, b, one, one, WS_STEP_INFER, 1, got, NULL, &err), WS_OK);
        assert_int_equal(ws_backend_download(r.be, out, one, N_TRAJ * view * sizeof *out), WS_OK);
        for (int t = 0; t < N_TRAJ; t++) /* the view's state, bit for bit */
            assert_memory_equal(out + t * view, host + ((size_t)t * VIEWS + v) * view,
                                view * sizeof *out);
        for (int q = 0; q < nq; q++) mean[q] += logit(got[q]) / VIEWS;
    }
    int differ = 0, right = 0;
    const float *labels = ws_batch_labels(b);
    for (int q = 0; q < nq; q++) {
        float want = 1.0f / (1.0f + expf(-(float)mean[q]));
        if (fabsf(probs[q] - want) > 1e-4f) fail_msg("query %d: %.6f, not %.6f", q, probs[q], want);
        differ += fabs(mean[q] - logit(got[q])) > 1e-3; /* the views do not all agree */
        right += labels[q] >= 0 && (probs[q] >= 0.5f) == (labels[q] >= 0.5f);
    }
    assert_true(differ > 0);
    assert_int_equal(res.n_labelled, 4);
    assert_int_equal(res.n_correct, right);
    ws_backend_release(r.be, w);
    ws_backend_release(r.be, one);
    free(host);
    free(prev);
    free(out);
    ws_batch_free(b);
    rig_down(&r);
}

/* A query reads the views' states as a step's queries do, and changes nothing. */
static void test_query_matches_step(void **s)
{
    (void)s;
    rig r;
    ws_error err;
    rig_up(&r, 2);
    ws_batch *b;
    assert_int_equal(ws_batch_new(&b, ws_model_config_of(r.m)), WS_OK);
    build(&r, b, -1);
    float *w, p_step[16], p_query[16];
    assert_int_equal(ws_model_state_alloc(r.m, N_TRAJ, &w, &err), WS_OK);
    assert_int_equal(ws_model_state_init(r.m, w, 0, N_TRAJ, &err), WS_OK);
    assert_int_equal(ws_exec_step(r.x, b, w, w, WS_STEP_INFER, 1, p_step, NULL, &err), WS_OK);
    assert_int_equal(ws_exec_query(r.x, b, w, p_query, NULL, &err), WS_OK);
    /* the state after the step answers the step's own queries */
    assert_memory_equal(p_step, p_query, (size_t)ws_batch_n_query(b) * sizeof *p_step);
    ws_backend_release(r.be, w);
    ws_batch_free(b);
    rig_down(&r);
}

/* views out of [1, 8] are refused and change nothing */
static void test_views_range(void **s)
{
    (void)s;
    rig r;
    ws_error err;
    rig_up(&r, 2);
    assert_int_equal(ws_model_set_views(r.m, 0, &err), WS_ERR_INVALID);
    assert_int_equal(ws_model_set_views(r.m, 9, &err), WS_ERR_INVALID);
    assert_int_equal(ws_model_config_of(r.m)->views, 2);
    rig_down(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_views_are_the_model_per_view),
        cmocka_unit_test(test_query_matches_step),
        cmocka_unit_test(test_views_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
