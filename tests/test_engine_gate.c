/* test_engine_gate.c — the publication gate's verdicts (engine_gate.c) on
 * scores made up here, a line of candidates at a time, as engine_train.c
 * records them: a candidate a little worse than the version it would replace
 * passes, but a run of them cannot walk the model down — not on the memory
 * probe (the best served accuracy is the bar) and not on the held-out replay,
 * whose set moves with the sessions (the anchor, a version kept apart and
 * replayed beside the candidate on each set, is the bar). A replay too small
 * to judge is not held against a candidate; a new line starts again. */
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
 * replay of this set is anchor_right), recorded as engine_train.c does. */
static int judge(const ws_srv_training *tr, line *l, const ws_engine_gate_score *served,
                 long anchor_right, const ws_engine_gate_score *cand)
{
    char why[160];
    ws_engine_gate_score anchor = *served;
    anchor.replay_right = anchor_right;
    const ws_engine_gate_score *a = l->apart ? &anchor : NULL;
    int pass = ws_eng_gate_pass(tr, &l->g, served, a, cand, why, sizeof why);
    if (!pass) printf("rejected: %s\n", why);
    assert_true(pass ? why[0] == '\0' : why[0] != '\0');
    int anchors = ws_eng_gate_served(tr, &l->g, served, a, cand, pass);
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

/* Each candidate loses 1.5% of the replay against the version it replaces
 * (tolerance 2%), on a set that moves: the first passes and the line's first
 * version stays the anchor; the second is 3% under it on its set and is
 * refused. A candidate that beats the anchor by the tolerance is the anchor
 * from then on. */
static void test_replay_cannot_creep(void **state)
{
    (void)state;
    ws_srv_training tr = tolerance(0.02);
    line l = new_line();
    ws_engine_gate_score served = score(0.99, 900, 1000), cand = score(0.99, 885, 1000);
    assert_true(judge(&tr, &l, &served, 0, &cand));
    assert_true(l.apart); /* 885 < 900: version 1 stays the anchor, apart */
    served = score(0.99, 700, 1000), cand = score(0.99, 685, 1000); /* another set */
    assert_false(judge(&tr, &l, &served, 715, &cand));
    assert_true(l.g.served.replay_right == 700); /* the served version stays */
    /* a served version better than the anchor on a set is the bar there */
    served = score(0.99, 800, 1000), cand = score(0.99, 770, 1000);
    assert_false(judge(&tr, &l, &served, 790, &cand));
    /* beating the anchor by less than the tolerance does not move it (a
     * version of many gates later wins a set now and then by chance); by the
     * tolerance or more it does, and the same loss is judged from it */
    served = score(0.99, 500, 1000), cand = score(0.99, 540, 1000);
    assert_true(judge(&tr, &l, &served, 530, &cand));
    assert_true(l.apart);
    served = score(0.99, 500, 1000), cand = score(0.99, 560, 1000);
    assert_true(judge(&tr, &l, &served, 530, &cand));
    assert_false(l.apart);
    served = score(0.99, 800, 1000), cand = score(0.99, 785, 1000);
    assert_true(judge(&tr, &l, &served, 0, &cand));
    assert_true(l.apart);
    served = score(0.99, 600, 1000), cand = score(0.99, 585, 1000);
    assert_false(judge(&tr, &l, &served, 615, &cand));
    /* a replay too small to judge, or of another set, is not held against it,
     * and does not move the anchor */
    served = score(0.99, 60, 100), cand = score(0.99, 10, 100);
    assert_true(judge(&tr, &l, &served, 70, &cand));
    assert_true(l.apart);
    served = score(0.99, 800, 1000), cand = score(0.99, 600, 900);
    assert_true(judge(&tr, &l, &served, 810, &cand));
    /* a new line (a load, an adoption, a rollback): its version is the anchor */
    ws_eng_gate_reset(&l.g, 7);
    l.apart = 0;
    assert_true(l.g.anchor_version == 7);
    served = score(0.99, 600, 1000), cand = score(0.99, 585, 1000);
    assert_true(judge(&tr, &l, &served, 0, &cand));
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
    assert_true(judge(&tr, &l, &served, 0, &cand));
    served = l.g.served, cand = score(0.94, 0, 0);
    assert_false(judge(&tr, &l, &served, 0, &cand));
    cand = score(0.96, 0, 0);
    assert_true(judge(&tr, &l, &served, 0, &cand));
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_replay_cannot_creep),
                                       cmocka_unit_test(test_probe_cannot_creep)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
