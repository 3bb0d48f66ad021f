/* test_engine_gate.c — the publication gate's verdicts (engine_gate.c) on
 * scores made up here, a line of candidates at a time, as engine_train.c
 * records them: a candidate a little worse than the version it would replace
 * passes, but a run of them cannot walk the model down — not on the memory
 * probe (the best served accuracy is the bar) and not on the held-out replay,
 * whose set moves with the sessions (the anchor, a version kept apart and
 * replayed beside the candidate on each set, is the bar). A replay too small
 * to judge is not held against a candidate; a new line starts again. A served
 * version that trails the anchor beyond the tolerance and chance gives way to
 * it (ws_eng_gate_restores). The told-moves worlds are judged as a kind of
 * probe answer of their own. */
#include <stdio.h>
#include <string.h>

#include "server/engine/engine_impl.h"
#include "test_util.h"

/* A score: probe accuracy p (each kind alike, 100 answers of each) and replay
 * right of n. */
static ws_engine_gate_score score(double p, long right, long n)
{
    ws_engine_gate_score s = {.probe = p, .replay_right = right, .replay_n = n};
    for (int k = 0; k < WS_ENGINE_GATE_KINDS; k++) s.probe_kind[k] = p, s.probe_kind_n[k] = 100;
    return s;
}

/* A line as engine_train.c keeps it: the gate, and whether the anchor is a
 * version apart from the served one. */
typedef struct {
    ws_engine_gate_info g;
    int apart;
} line;

/* The gate's verdict on cand beside served (and the anchor, when apart, whose
 * replay of this set is anchor_right; sure: cand's lead over it is beyond
 * chance, ws_eng_gate_leads), recorded as engine_train.c does. */
static int judge(const ws_srv_training *tr, line *l, const ws_engine_gate_score *served,
                 long anchor_right, const ws_engine_gate_score *cand, int sure)
{
    char why[160];
    ws_engine_gate_score anchor = *served;
    anchor.replay_right = anchor_right;
    const ws_engine_gate_score *a = l->apart ? &anchor : NULL;
    int pass = ws_eng_gate_pass(tr, &l->g, served, a, cand, why, sizeof why);
    if (!pass) printf("rejected: %s\n", why);
    assert_true(pass ? why[0] == '\0' : why[0] != '\0');
    int anchors = ws_eng_gate_served(tr, &l->g, served, a, cand, pass, sure);
    if (pass) l->apart = !anchors;
    return pass;
}

/* A gate at the start of a served line. */
static line new_line(void)
{
    line l;
    memset(&l, 0, sizeof l);
    ws_eng_gate_reset(&l.g, 1);
    return l;
}

static ws_srv_training tolerance(double tol)
{
    ws_srv_training tr = ws_srv_training_default();
    tr.gate_tolerance = (float)tol;
    return tr;
}

/* One gate of a line on the replay: the served version's, the anchor's (when
 * apart) and the candidate's answers right of n (the candidate's of cand_n),
 * the verdict and whether the anchor is apart after it. */
typedef struct {
    long served, anchor, cand, n, cand_n;
    int sure, pass, apart;
    const char *why;
} replay_gate;

/* Each candidate loses 1.5% of the replay against the version it replaces
 * (tolerance 2%), on a set that moves: the first passes and the line's first
 * version stays the anchor; the second is 3% under it on its set and is
 * refused. A candidate that beats the anchor by the tolerance is the anchor
 * from then on. A new line (a load, an adoption, a rollback): its version is
 * the anchor. */
static void test_replay_cannot_creep(void **state)
{
    (void)state;
    static const replay_gate gates[] = {
        {900, 0, 885, 1000, 1000, 0, 1, 1, "885 < 900: version 1 stays the anchor, apart"},
        {700, 715, 685, 1000, 1000, 0, 0, 1, "another set: 3% under the anchor"},
        {800, 790, 770, 1000, 1000, 0, 0, 1, "the served version, better here, is the bar"},
        {500, 530, 540, 1000, 1000, 1, 1, 1, "beating the anchor by less than 2% does not move it"},
        {500, 530, 560, 1000, 1000, 0, 1, 1, "nor by 2% when the lead may be chance"},
        {500, 530, 560, 1000, 1000, 1, 1, 0, "by 2%, sure: the anchor is served"},
        {800, 0, 785, 1000, 1000, 0, 1, 1, "then the same loss is judged from it"},
        {600, 615, 585, 1000, 1000, 0, 0, 1, "and refused the next time"},
        {60, 70, 10, 100, 100, 1, 1, 1, "a replay too small to judge"},
        {800, 810, 600, 1000, 900, 1, 1, 1, "replays of different sets"},
    };
    ws_srv_training tr = tolerance(0.02);
    line l = new_line();
    for (size_t i = 0; i < sizeof gates / sizeof gates[0]; i++) {
        const replay_gate *r = &gates[i];
        printf("gate %zu: %s\n", i, r->why);
        ws_engine_gate_score served = score(0.99, r->served, r->n);
        ws_engine_gate_score cand = score(0.99, r->cand, r->cand_n);
        assert_int_equal(judge(&tr, &l, &served, r->anchor, &cand, r->sure), r->pass);
        assert_int_equal(l.apart, r->apart);
        assert_true(l.g.served.replay_right == (r->pass ? r->cand : r->served));
    }
    ws_eng_gate_reset(&l.g, 7);
    l.apart = 0;
    assert_true(l.g.anchor_version == 7);
    ws_engine_gate_score served = score(0.99, 600, 1000), cand = score(0.99, 585, 1000);
    assert_true(judge(&tr, &l, &served, 0, &cand, 1));
}

/* The probe's bar is the best served accuracy, the line's first version's
 * among them (scored at the line's first gate only): two candidates each 1.5%
 * below the last (tolerance 2%) — the second is refused. */
static void test_probe_cannot_creep(void **state)
{
    (void)state;
    ws_srv_training tr = tolerance(0.02);
    line l = new_line();
    ws_engine_gate_score served = score(0.97, 0, 0), cand = score(0.955, 0, 0);
    assert_true(judge(&tr, &l, &served, 0, &cand, 1));
    served = l.g.served, cand = score(0.94, 0, 0);
    assert_false(judge(&tr, &l, &served, 0, &cand, 1));
    cand = score(0.96, 0, 0);
    assert_true(judge(&tr, &l, &served, 0, &cand, 1));
}

/* A candidate that keeps the memory probe but loses the told-moves worlds
 * (WS_ENGINE_GATE_MOVES, 2,048 answers: its tolerance is gate_tolerance) by
 * more than the tolerance is refused, and the reason names them; within it, it
 * passes, and the bar is then the best told-moves accuracy served. A model
 * whose gate did not run them (-1) is not judged on them. */
static void test_told_moves_kind(void **state)
{
    (void)state;
    ws_srv_training tr = tolerance(0.02);
    line l = new_line();
    ws_engine_gate_score served = score(0.99, 0, 0), cand = score(0.99, 0, 0);
    served.probe_kind[WS_ENGINE_GATE_MOVES] = 0.96;
    cand.probe_kind[WS_ENGINE_GATE_MOVES] = 0.93;
    served.probe_kind_n[WS_ENGINE_GATE_MOVES] = cand.probe_kind_n[WS_ENGINE_GATE_MOVES] = 2048;
    char why[160];
    assert_false(ws_eng_gate_pass(&tr, &l.g, &served, NULL, &cand, why, sizeof why));
    printf("rejected: %s\n", why);
    assert_non_null(strstr(why, "told-moves accuracy 0.9300, served version 0.9600"));
    cand.probe_kind[WS_ENGINE_GATE_MOVES] = 0.945;
    assert_true(judge(&tr, &l, &served, 0, &cand, 1));
    assert_true(l.g.best_kind[WS_ENGINE_GATE_MOVES] == 0.96);
    served = l.g.served, cand.probe_kind[WS_ENGINE_GATE_MOVES] = 0.935;
    assert_false(judge(&tr, &l, &served, 0, &cand, 1));
    cand.probe_kind[WS_ENGINE_GATE_MOVES] = -1;
    assert_true(judge(&tr, &l, &served, 0, &cand, 1));
}

/* The sign test: 60 answers only the candidate got right against 30 only the
 * bar did is a lead of 30 > 3 x sqrt(90) = 28.5; 55 against 35 (20 < 28.5)
 * is not, whatever the answers both got right or wrong. */
static void test_leads(void **state)
{
    (void)state;
    enum { N = 1000 };
    static uint8_t mine[N], bar[N];
    for (int i = 0; i < N; i++) mine[i] = bar[i] = i % 3 != 0; /* agree */
    for (int i = 0; i < 60; i++) mine[i] = 1, bar[i] = 0;
    for (int i = 60; i < 90; i++) mine[i] = 0, bar[i] = 1;
    assert_true(ws_eng_gate_leads(mine, bar, N));
    assert_false(ws_eng_gate_leads(bar, mine, N));
    for (int i = 55; i < 60; i++) mine[i] = 0, bar[i] = 1;
    assert_false(ws_eng_gate_leads(mine, bar, N));
    assert_false(ws_eng_gate_leads(mine, mine, N)); /* no answer apart: no lead */
}

/* The anchor is served again when the served version trails it on the same
 * replay set by the tolerance or more and its lead answer by answer is beyond
 * chance (anchor_leads) — not on less, not when the anchor is the served
 * version, not on different or too small sets. */
static void test_restores(void **state)
{
    (void)state;
    static const struct {
        long served, anchor, n, anchor_n;
        int leads, apart, restores;
        const char *why;
    } rows[] = {
        {600, 630, 1000, 1000, 1, 1, 1, "3% under the anchor, beyond chance"},
        {600, 620, 1000, 1000, 1, 1, 1, "the tolerance exactly"},
        {600, 615, 1000, 1000, 1, 1, 0, "1.5%: within the tolerance"},
        {600, 630, 1000, 1000, 0, 1, 0, "3%, but the lead may be chance"},
        {600, 630, 1000, 1000, 1, 0, 0, "the anchor is the served version"},
        {600, 630, 1000, 900, 1, 1, 0, "replays of different sets"},
        {60, 80, 100, 100, 1, 1, 0, "a replay too small to judge"},
    };
    ws_srv_training tr = tolerance(0.02);
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        printf("row %zu: %s\n", i, rows[i].why);
        ws_engine_gate_score served = score(0.99, rows[i].served, rows[i].n);
        ws_engine_gate_score anchor = score(0.99, rows[i].anchor, rows[i].anchor_n);
        assert_int_equal(
            ws_eng_gate_restores(&tr, &served, rows[i].apart ? &anchor : NULL, rows[i].leads),
            rows[i].restores);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_replay_cannot_creep), cmocka_unit_test(test_probe_cannot_creep),
        cmocka_unit_test(test_told_moves_kind), cmocka_unit_test(test_leads),
        cmocka_unit_test(test_restores)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
