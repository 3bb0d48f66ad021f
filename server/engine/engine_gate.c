/* engine_gate.c — the publication gate (DESIGN §3): a candidate version made by
 * online training is scored before it is published, beside the version served,
 * on the model's training thread (engine_train.c: its own copy of the weights,
 * so serving goes on meanwhile), on the same two things:
 * - a fixed probe of the built-in task `memory` (model/probe.h): 8 episodes of
 *   8 facts over fresh symbols (no vocabulary ids: codes alone, so the probe
 *   never grows the model's vocabulary), told, overridden, then asked after 1
 *   and after 10 silent steps, 256 answers in all — a fixed seed, so both
 *   versions answer the same questions (the served version's score is kept
 *   from its own gate: the same parameters answer the same), one batch of 8
 *   trajectories per step, the training pass's shape;
 * - told-moves worlds of the same task (model/tasks/memory_slots.h): 16
 *   households of entities moving between values of a relation, each move
 *   told in full (the value left false beside the new one true), over fresh
 *   symbols, answered on their last 8 of 16 steps (2,048 answers, a fixed
 *   seed) — facts that differ in one symbol and change often, as an app tells
 *   a person's places, which the probe's random facts rarely are: a candidate
 *   that kept the probe could lose them unseen;
 * - the trainer's held-out examples (ws_online_replay): recent steps of real
 *   sessions, never trained on, in runs of consecutive steps replayed from the
 *   first one's W_{t-1}, with their known answers (recall facts at their last
 *   value, never-told facts, client labels).
 * The candidate is published only if neither accuracy drops by more than the
 * model's gate_tolerance. On the probe, overall and for each kind of answer
 * (told true, overridden, never told: a model that learns to say "no" to
 * everything must not pass by gaining on never-told facts what it loses on told
 * ones; a kind of n answers is allowed at least 1.5/n, a lost answer and a
 * half), and below the best accuracy of the versions served since the served
 * line began (a load, an adoption or a rollback), so a run of candidates each a
 * little worse cannot walk the model down. The replay set moves with the
 * sessions, so no two gates' replay accuracies compare: its bar is a version
 * kept for it, the anchor, replayed on each gate's set beside the candidate —
 * the line's first version, then each published candidate that answered its
 * set better than the anchor by the tolerance, with a lead beyond chance
 * (ws_eng_gate_leads). A candidate more than the tolerance
 * under the better of the served version and the anchor is refused; and when
 * the served version itself trails the anchor on that set by the tolerance,
 * beyond chance, the anchor is served again (restored, engine_train.c): a
 * version published on a kind draw of its set can sit under the anchor on the
 * sets that follow (api.md, the rules stream). (Summing
 * each published candidate's gain over the version it replaced, as before, did
 * not hold: the candidates that pass are those whose noise was kind, so the
 * sum rose while the versions got worse; api.md, bench/rules_learn.py.) A
 * replay of fewer than GATE_MIN_REPLAY answers is too noisy to judge and is
 * not held against a candidate. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/probe.h"
#include "model/trainer.h"
#include "engine_impl.h"

#define GATE_SEED       0x6761746550524f42ull
#define GATE_MOVES_SEED 0x6d6f766573ull
#define GATE_MIN_REPLAY 128

static ws_probe_config gate_probe(void)
{
    return (ws_probe_config){.n_ks = 1,
                             .ks = {8},
                             .n_traj = {8},
                             .n_delays = 2,
                             .delays = {1, 10},
                             .instr_per_step = 4,
                             .max_arity = WS_PROBE_ARITY,
                             .grow_vocab = 0,
                             .seed = GATE_SEED};
}

/* The told-moves worlds' accuracy into out's last kind (not run: -1). */
static ws_status gate_moves(ws_exec *x, ws_engine_gate_score *out, ws_error *err)
{
    ws_task_params tp;
    ws_task_params_default("memory", &tp);
    tp.relational_rate = 1.0f, tp.live_facts = 16, tp.live_facts_min = 8;
    ws_eval_config ec = {
        .n_traj = 16, .window = 8, .seed = GATE_MOVES_SEED, .n_horizons = 1, .horizons = {16}};
    ws_eval_point pt;
    WS_TRY(ws_evaluate(x, &tp, &ec, &pt, err));
    out->probe_kind[WS_ENGINE_GATE_MOVES] = pt.acc;
    out->probe_kind_n[WS_ENGINE_GATE_MOVES] = pt.n_queries;
    return WS_OK;
}

ws_status ws_eng_gate_score(ws_exec *x, ws_online_trainer *t, int probe, ws_engine_gate_score *out,
                            uint8_t *answers, ws_error *err)
{
    if (probe) {
        out->probe = -1;
        for (int k = 0; k < WS_ENGINE_GATE_KINDS; k++)
            out->probe_kind[k] = -1, out->probe_kind_n[k] = 0;
    }
    if (probe && ws_model_config_of(ws_exec_model(x))->max_fact_len >= WS_PROBE_ARITY) {
        ws_probe_config pc = gate_probe();
        ws_probe_result r;
        WS_TRY(ws_probe_run(x, &pc, &r, err));
        long n = 0, right = 0;
        for (int k = 0; k < WS_PROBE_KINDS; k++) {
            long nk = 0, rk = 0;
            for (int di = 0; di < pc.n_delays; di++) nk += r.n[0][di][k], rk += r.right[0][di][k];
            out->probe_kind[k] = nk ? (double)rk / (double)nk : -1;
            out->probe_kind_n[k] = nk;
            n += nk, right += rk;
        }
        out->probe = n ? (double)right / (double)n : -1;
        WS_TRY(gate_moves(x, out, err));
    }
    return ws_online_replay(t, x, &out->replay_right, &out->replay_n, answers, err);
}

static const char *const KIND_NAME[WS_ENGINE_GATE_KINDS] = {"told-true", "overridden", "never-told",
                                                            "told-moves"};

/* 1 when a and b replayed the same set, large enough to judge. */
static int same_replay(const ws_engine_gate_score *a, const ws_engine_gate_score *b)
{
    return a->replay_n >= GATE_MIN_REPLAY && a->replay_n == b->replay_n;
}

static double replay_accuracy(const ws_engine_gate_score *s)
{
    return (double)s->replay_right / (double)s->replay_n;
}

/* 0 with why when cand falls below the bar (the better of served and best)
 * by more than tol. */
static int above(const char *what, double cand, double served, double best, double tol, char *why,
                 size_t cap)
{
    double bar = served > best ? served : best;
    if (served < 0 || cand < 0 || cand >= bar - tol) return 1;
    snprintf(why, cap,
             "memory probe %s accuracy %.4f, served version %.4f, best served %.4f "
             "(tolerance %.3g)",
             what, cand, served, bar, tol);
    return 0;
}

int ws_eng_gate_pass(const ws_srv_training *tr, const ws_engine_gate_info *g,
                     const ws_engine_gate_score *served, const ws_engine_gate_score *anchor,
                     const ws_engine_gate_score *cand, char *why, size_t cap)
{
    double tol = tr->gate_tolerance;
    snprintf(why, cap, "%s", "");
    if (!above("overall", cand->probe, served->probe, g->best_probe, tol, why, cap)) return 0;
    for (int k = 0; k < WS_ENGINE_GATE_KINDS; k++) {
        double n = (double)cand->probe_kind_n[k], tk = n > 0 && 1.5 / n > tol ? 1.5 / n : tol;
        if (!above(KIND_NAME[k], cand->probe_kind[k], served->probe_kind[k], g->best_kind[k], tk,
                   why, cap))
            return 0;
    }
    if (!same_replay(served, cand)) return 1;
    int by_anchor =
        anchor && same_replay(anchor, cand) && anchor->replay_right > served->replay_right;
    const ws_engine_gate_score *bar = by_anchor ? anchor : served;
    double a = replay_accuracy(cand), b = replay_accuracy(bar);
    if (a >= b - tol) return 1;
    snprintf(why, cap, "held-out replay accuracy %.4f, %s %.4f over %ld answers (tolerance %g)", a,
             by_anchor ? "the replay's anchor (the version kept as its bar)" : "served version", b,
             cand->replay_n, tol);
    return 0;
}

int ws_eng_gate_restores(const ws_srv_training *tr, const ws_engine_gate_score *served,
                         const ws_engine_gate_score *anchor, int anchor_leads)
{
    return anchor && anchor_leads && same_replay(anchor, served) &&
           replay_accuracy(anchor) >= replay_accuracy(served) + tr->gate_tolerance;
}

int ws_eng_gate_leads(const uint8_t *mine, const uint8_t *bar, long n)
{
    long wins = 0, losses = 0;
    for (long i = 0; i < n; i++) wins += mine[i] && !bar[i], losses += !mine[i] && bar[i];
    return wins > losses && (double)(wins - losses) >= 3.0 * sqrt((double)(wins + losses));
}

void ws_eng_gate_reset(ws_engine_gate_info *g, int64_t version)
{
    g->served.probe = g->best_probe = -1;
    for (int k = 0; k < WS_ENGINE_GATE_KINDS; k++) g->best_kind[k] = -1;
    g->anchor_version = version;
}

/* s was served: its probe accuracies raise the bests. */
static void raise_best(ws_engine_gate_info *g, const ws_engine_gate_score *s)
{
    if (s->probe > g->best_probe) g->best_probe = s->probe;
    for (int k = 0; k < WS_ENGINE_GATE_KINDS; k++)
        if (s->probe_kind[k] > g->best_kind[k]) g->best_kind[k] = s->probe_kind[k];
}

int ws_eng_gate_served(const ws_srv_training *tr, ws_engine_gate_info *g,
                       const ws_engine_gate_score *served, const ws_engine_gate_score *anchor,
                       const ws_engine_gate_score *cand, int published, int sure)
{
    /* served too: a line's first version is scored at its first gate only */
    raise_best(g, served);
    const ws_engine_gate_score *a = anchor ? anchor : served;
    int anchors = published && sure && same_replay(a, cand) &&
                  replay_accuracy(cand) >= replay_accuracy(a) + tr->gate_tolerance;
    if (published) raise_best(g, cand);
    g->served = published ? *cand : *served;
    return anchors;
}
