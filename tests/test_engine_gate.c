/* test_engine_gate.c — the publication gate's verdicts (engine_gate.c) on
 * scores made up here, a line of candidates at a time, as engine_train.c
 * records them: a candidate a little worse than the version it would replace
 * passes, but a run of them cannot walk the model down — not on the memory
 * probe (the best served accuracy is the bar) and not on the held-out replay,
 * whose set moves with the sessions (the published candidates' gains, each
 * scored beside the version it replaced, are summed). A replay too small to
 * judge is not held against a candidate; a new line starts the sums again. */
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

/* The gate's verdict on cand beside served, recorded as engine_train.c does. */
static int judge(const ws_srv_training *tr, ws_engine_gate_info *g,
                 const ws_engine_gate_score *served, const ws_engine_gate_score *cand)
{
    char why[160];
    int pass = ws_eng_gate_pass(tr, g, served, cand, why, sizeof why);
    if (!pass) printf("rejected: %s\n", why);
    assert_true(pass ? why[0] == '\0' : why[0] != '\0');
    ws_eng_gate_served(g, served, cand, pass);
    return pass;
}

/* A gate at the start of a served line. */
static ws_engine_gate_info new_line(void)
{
    ws_engine_gate_info g;
    memset(&g, 0, sizeof g);
    ws_eng_gate_reset(&g);
    return g;
}

static ws_srv_training tolerance(double tol)
{
    ws_srv_training tr = ws_srv_training_default();
    tr.gate_tolerance = (float)tol;
    return tr;
}

/* Each candidate loses 1.5% of the replay against the version it replaces
 * (tolerance 2%), on a set that moves: the first passes, the second would take
 * the line 3% below its best and is refused; one that gains raises the best. */
static void test_replay_cannot_creep(void **state)
{
    (void)state;
    ws_srv_training tr = tolerance(0.02);
    ws_engine_gate_info g = new_line();
    ws_engine_gate_score served = score(0.99, 900, 1000), cand = score(0.99, 885, 1000);
    assert_true(judge(&tr, &g, &served, &cand));
    served = score(0.99, 700, 1000), cand = score(0.99, 685, 1000); /* another set */
    assert_false(judge(&tr, &g, &served, &cand));
    assert_true(g.served.replay_right == 700); /* the served version stays */
    /* the same loss after a gain of 5%: within the tolerance of the best */
    served = score(0.99, 500, 1000), cand = score(0.99, 550, 1000);
    assert_true(judge(&tr, &g, &served, &cand));
    served = score(0.99, 800, 1000), cand = score(0.99, 785, 1000);
    assert_true(judge(&tr, &g, &served, &cand));
    served = score(0.99, 600, 1000), cand = score(0.99, 585, 1000);
    assert_false(judge(&tr, &g, &served, &cand));
    /* a replay too small to judge, or of another set, is not held against it */
    served = score(0.99, 60, 100), cand = score(0.99, 10, 100);
    assert_true(judge(&tr, &g, &served, &cand));
    served = score(0.99, 800, 1000), cand = score(0.99, 600, 900);
    assert_true(judge(&tr, &g, &served, &cand));
    /* a new line (a load, an adoption, a rollback) sums again from 0 */
    ws_eng_gate_reset(&g);
    served = score(0.99, 600, 1000), cand = score(0.99, 585, 1000);
    assert_true(judge(&tr, &g, &served, &cand));
}

/* The probe's bar is the best served accuracy, the line's first version's
 * among them (scored at the line's first gate only): two candidates each 1.5%
 * below the last (tolerance 2%) — the second is refused. */
static void test_probe_cannot_creep(void **state)
{
    (void)state;
    ws_srv_training tr = tolerance(0.02);
    ws_engine_gate_info g = new_line();
    ws_engine_gate_score served = score(0.97, 0, 0), cand = score(0.955, 0, 0);
    assert_true(judge(&tr, &g, &served, &cand));
    served = g.served, cand = score(0.94, 0, 0);
    assert_false(judge(&tr, &g, &served, &cand));
    cand = score(0.96, 0, 0);
    assert_true(judge(&tr, &g, &served, &cand));
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_replay_cannot_creep),
                                       cmocka_unit_test(test_probe_cannot_creep)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
