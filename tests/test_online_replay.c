/* test_online_replay.c — the publication gate's replay (online_trainer.c):
 * held-out examples come in runs of consecutive steps of a session, and the
 * replay runs each run from its first step's stored W_{t-1}, every later step
 * from the state the model being scored made — not from the states stored
 * with them (another version made those). A session of 32 labelled steps is
 * observed with holdout 0.5 (windows of 16 steps from the first, every second
 * held out: steps 17 to 32), the labels being the model's own answers, and the
 * states stored with steps 18 to 32 damaged: the replay must answer all 48
 * held-out queries as the model did, where a replay from the stored states
 * answers some wrong. And the held-out share is the holdout's whatever the
 * sessions' lengths; and unlabelled client queries are answered by the closed
 * world. */
#include <stdio.h>
#include <string.h>

#include "base/ws_rng.h"
#include "model/model.h"
#include "server/engine/online_trainer.h"
#include "test_util.h"

enum { STEPS = 32, N_INSTR = 2, N_QUERY = 3, S = 3, FIRST_HELD = 17, RUN = 16 };

typedef struct {
    int32_t ids[(N_INSTR + N_QUERY) * S];
    uint64_t hash[(N_INSTR + N_QUERY) * S];
    int instr_val[N_INSTR], labels[N_QUERY];
} step_rows;

/* Symbol id's hash in these tests (0: padding). */
static uint64_t id_hash(int32_t id)
{
    return id < 0 ? 0 : 0x51ed27ull * (uint64_t)(id + 1);
}

/* A fact of two symbols drawn from 8 ids, padded to S. */
static void fact(uint64_t *rng, int32_t *ids, uint64_t *hash)
{
    for (int k = 0; k < S; k++) {
        ids[k] = k < 2 ? (int32_t)(ws_xorshift64(rng) % 8) : -1;
        hash[k] = id_hash(ids[k]);
    }
}

static void add_rows(ws_batch *b, const step_rows *r)
{
    for (int i = 0; i < N_INSTR + N_QUERY; i++) {
        ws_sym syms[S];
        for (int k = 0; k < 2; k++) syms[k] = (ws_sym){r->ids[i * S + k], r->hash[i * S + k]};
        if (i < N_INSTR)
            assert_int_equal(ws_batch_add_instr_syms(b, syms, 2, r->instr_val[i]), WS_OK);
        else
            assert_int_equal(ws_batch_add_query_syms(b, syms, 2, -1), WS_OK);
    }
}

/* A small model on the CPU backend, an online trainer attached to it, and
 * what runs its steps here: an exec, a batch, one device state of T floats. */
typedef struct {
    ws_model_config c;
    ws_backend *be;
    ws_model *m;
    ws_online_trainer *ot;
    ws_exec *x;
    ws_batch *b;
    float *dev;
    size_t T;
} rig;

static void rig_open(rig *g)
{
    ws_error err = {0};
    g->c = ws_model_config_default();
    g->c.d = 16, g->c.n_heads = 2, g->c.n_state = 4, g->c.n_upd_layers = 1, g->c.n_ext_layers = 1;
    g->c.max_fact_len = S, g->c.vocab_cap = 64, g->c.n_overflow = 4;
    assert_int_equal(ws_backend_cpu_new(&g->be, 0, &err), WS_OK);
    assert_int_equal(ws_model_new(&g->m, &g->c, g->be, 7, &err), WS_OK);
    assert_int_equal(ws_online_new(&g->ot, &g->c, &err), WS_OK);
    assert_int_equal(ws_online_attach(g->ot, g->m, &err), WS_OK);
    assert_int_equal(ws_exec_new(&g->x, g->m, &err), WS_OK);
    assert_int_equal(ws_batch_new(&g->b, &g->c), WS_OK);
    assert_int_equal(ws_model_state_alloc(g->m, 1, &g->dev, &err), WS_OK);
    g->T = ws_model_state_floats(g->m);
}

static void rig_close(rig *g)
{
    ws_online_detach(g->ot, g->m);
    ws_online_free(g->ot);
    ws_backend_release(g->be, g->dev);
    ws_batch_free(g->b);
    ws_exec_free(g->x);
    ws_model_free(g->m);
    ws_backend_free(g->be);
}

/* One step of r from host state w (from_w0: from W_0): the answers, the new
 * state into w. */
static void run_step(const rig *g, float *w, int from_w0, const step_rows *r, float *probs)
{
    ws_error err = {0};
    ws_batch_clear(g->b);
    assert_int_equal(ws_batch_begin_traj(g->b, from_w0), WS_OK);
    add_rows(g->b, r);
    size_t bytes = sizeof(float) * g->T;
    if (!from_w0) assert_int_equal(ws_backend_upload(g->be, g->dev, w, bytes), WS_OK);
    assert_int_equal(
        ws_exec_step(g->x, g->b, g->dev, g->dev, WS_STEP_INFER, 1.0f, probs, NULL, &err), WS_OK);
    assert_int_equal(ws_backend_download(g->be, w, g->dev, bytes), WS_OK);
}

/* Step `step` of session, rows r (labels: NULL for none), W_{t-1} w_prev
 * (NULL: W_0), observed by the online trainer. */
static void observe(ws_online_trainer *ot, const ws_srv_training *tr, const char *session,
                    int64_t step, const float *w_prev, const step_rows *r, const int *labels)
{
    ws_online_step st = {.session = session,
                         .step = step,
                         .w_prev = w_prev,
                         .instr_ids = r->ids,
                         .instr_hash = r->hash,
                         .instr_val = r->instr_val,
                         .n_instr = N_INSTR,
                         .query_ids = r->ids + N_INSTR * S,
                         .query_hash = r->hash + N_INSTR * S,
                         .labels = labels,
                         .n_query = N_QUERY};
    ws_online_observe(ot, tr, &st);
}

static void test_replay_chains_runs(void **state)
{
    (void)state;
    ws_error err = {0};
    rig g;
    rig_open(&g);

    /* The session as the model runs it: each step's W_{t-1} and answers. */
    static step_rows rows[STEPS];
    static float prev[STEPS][4 * 16], w[4 * 16];
    uint64_t rng = 99;
    for (int t = 0; t < STEPS; t++) {
        step_rows *r = &rows[t];
        for (int i = 0; i < N_INSTR + N_QUERY; i++) fact(&rng, r->ids + i * S, r->hash + i * S);
        for (int i = 0; i < N_INSTR; i++) r->instr_val[i] = (int)(ws_xorshift64(&rng) & 1);
        float probs[N_QUERY];
        memcpy(prev[t], w, sizeof w);
        run_step(&g, w, !t, r, probs);
        for (int q = 0; q < N_QUERY; q++) r->labels[q] = probs[q] >= 0.5f;
    }

    /* The damaged states the later steps of the run are stored with answer
     * some queries otherwise (or the test would not tell the two replays apart). */
    static float damaged[4 * 16];
    for (size_t i = 0; i < g.T; i++) damaged[i] = (i % 3 ? 25.0f : -25.0f);
    int differ = 0;
    for (int t = FIRST_HELD; t < FIRST_HELD + RUN - 1; t++) {
        float probs[N_QUERY], tmp[4 * 16];
        memcpy(tmp, damaged, sizeof tmp);
        run_step(&g, tmp, 0, &rows[t], probs);
        for (int q = 0; q < N_QUERY; q++) differ += (probs[q] >= 0.5f) != rows[t].labels[q];
    }
    printf("answers from the damaged states: %d of %d differ\n", differ, (RUN - 1) * N_QUERY);
    assert_true(differ > 0);

    ws_srv_training tr = ws_srv_training_default();
    tr.enabled = 1, tr.holdout = 0.5f, tr.recall_queries = 0, tr.negative_queries = 0;
    for (int t = 0; t < STEPS; t++) {
        const step_rows *r = &rows[t];
        int later = t > FIRST_HELD - 1 && t < FIRST_HELD + RUN - 1;
        observe(g.ot, &tr, "s", t + 1, !t ? NULL : later ? damaged : prev[t], r, r->labels);
    }
    ws_online_stats s = ws_online_stats_of(g.ot);
    assert_int_equal(s.examples_held_out, RUN);
    assert_int_equal(s.examples_labelled, STEPS);
    ws_online_take_held(g.ot);
    long right = 0, n = 0;
    assert_int_equal(ws_online_replay(g.ot, g.x, &right, &n, NULL, &err), WS_OK);
    printf("replay: %ld of %ld right\n", right, n);
    assert_int_equal(n, RUN * N_QUERY);
    assert_int_equal(right, n);

    rig_close(&g);
}

/* The held-out share holds whatever the sessions' lengths: 64 sessions of 8
 * labelled steps with holdout 0.125 hold out 8 of them whole (64 examples).
 * (Runs of 4 begun every 32nd example held out 16: each run began at a
 * session's last step, nothing of the session followed it.) */
static void test_holdout_share(void **state)
{
    (void)state;
    rig g;
    rig_open(&g);
    ws_srv_training tr = ws_srv_training_default();
    tr.enabled = 1, tr.holdout = 0.125f, tr.recall_queries = 0, tr.negative_queries = 0;
    static step_rows r;
    static float w[4 * 16];
    uint64_t rng = 5;
    for (int i = 0; i < N_INSTR + N_QUERY; i++) fact(&rng, r.ids + i * S, r.hash + i * S);
    for (int sess = 0; sess < 64; sess++) {
        char name[16];
        snprintf(name, sizeof name, "s%d", sess);
        for (int t = 0; t < 8; t++) {
            observe(g.ot, &tr, name, t + 1, t ? w : NULL, &r, r.labels);
        }
    }
    ws_online_stats st = ws_online_stats_of(g.ot);
    printf("held out %lld of %lld\n", (long long)st.examples_held_out,
           (long long)st.examples_labelled);
    assert_int_equal(st.examples_labelled, 64 * 8);
    assert_int_equal(st.examples_held_out, 64);
    rig_close(&g);
}

/* Row i of r: the fact (id a, id b). */
static void set_fact(step_rows *r, int i, int32_t a, int32_t b)
{
    const int32_t ids[S] = {a, b, -1};
    for (int k = 0; k < S; k++) {
        r->ids[i * S + k] = ids[k];
        r->hash[i * S + k] = id_hash(ids[k]);
    }
}

/* Unlabelled steps, self-supervision on (no recall or negative queries of
 * the engine's own): the client's own queries are answered by the closed world
 * — a fact told at the value told last, a fact never told false — and so
 * scored by the replay. Session "s", seen from its first step: told A true, B
 * false, asked A, B, C; then told A false, D true, asked the same: 6 answers.
 * Session "late", first seen at its step 5 (its earlier steps went elsewhere),
 * the same steps: C may have been told before, so only A and B are answered:
 * 4. The replay runs both from W_0, as the model ran them here. */
static void test_closed_world_queries(void **state)
{
    (void)state;
    ws_error err = {0};
    rig g;
    rig_open(&g);
    enum { A, B, C, D };
    static const int32_t sym[4][2] = {{1, 2}, {1, 3}, {1, 4}, {5, 2}};
    static const int told[2][N_INSTR][2] = {{{A, 1}, {B, 0}}, {{A, 0}, {D, 1}}};
    static const int truth[2][N_QUERY] = {{1, 0, 0}, {0, 0, 0}};
    step_rows rows[2];
    static float w[4 * 16];
    long want_s = 0, want_late = 0;
    for (int t = 0; t < 2; t++) {
        for (int i = 0; i < N_INSTR; i++) {
            set_fact(&rows[t], i, sym[told[t][i][0]][0], sym[told[t][i][0]][1]);
            rows[t].instr_val[i] = told[t][i][1];
        }
        for (int q = 0; q < N_QUERY; q++) set_fact(&rows[t], N_INSTR + q, sym[q][0], sym[q][1]);
        float probs[N_QUERY];
        run_step(&g, w, !t, &rows[t], probs);
        for (int q = 0; q < N_QUERY; q++) {
            int right = (probs[q] >= 0.5f) == truth[t][q];
            want_s += right, want_late += q != C && right;
        }
    }
    ws_srv_training tr = ws_srv_training_default();
    tr.enabled = 1, tr.holdout = 1.0f, tr.recall_queries = 0, tr.negative_queries = 0;
    static const char *const sessions[2] = {"s", "late"};
    for (int k = 0; k < 2; k++)
        for (int t = 0; t < 2; t++) /* w: the state stored; the replay makes its own */
            observe(g.ot, &tr, sessions[k], (k ? 5 : 1) + t, t ? w : NULL, &rows[t], NULL);
    ws_online_stats st = ws_online_stats_of(g.ot);
    assert_int_equal(st.examples_self, 4);
    assert_int_equal(st.examples_held_out, 4);
    ws_online_take_held(g.ot);
    long right = 0, n = 0;
    assert_int_equal(ws_online_replay(g.ot, g.x, &right, &n, NULL, &err), WS_OK);
    printf("replay: %ld of %ld right (the model's answers against the closed world: %ld)\n", right,
           n, want_s + want_late);
    assert_int_equal(n, 2 * N_QUERY + 2 * 2);
    assert_int_equal(right, want_s + want_late);
    rig_close(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_replay_chains_runs),
                                       cmocka_unit_test(test_holdout_share),
                                       cmocka_unit_test(test_closed_world_queries)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
