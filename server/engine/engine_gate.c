/* engine_gate.c — the publication gate (DESIGN §3): a candidate version made by
 * online training is scored before it is published, beside the version served,
 * on the same two things:
 * - a fixed probe of the built-in task `memory` (model/probe.h): 8 episodes of
 *   8 facts over fresh symbols (no vocabulary ids: codes alone, so the probe
 *   never grows the model's vocabulary), told, overridden, then asked after 1
 *   and after 10 silent steps, 256 answers in all — a fixed seed, so both
 *   versions answer the same questions (the served version's score is kept
 *   from its own gate: the same parameters answer the same), one batch of 8
 *   trajectories per step, the training pass's shape;
 * - the trainer's held-out examples (ws_online_replay): recent steps of real
 *   sessions, never trained on, replayed from their W_{t-1} with their known
 *   answers (recall facts at their last value, never-told facts, client labels).
 * The candidate is published only if neither accuracy drops by more than the
 * model's gate_tolerance; a replay of fewer than GATE_MIN_REPLAY answers is too
 * noisy to judge and is not held against it. */
#include <stdio.h>

#include "model/probe.h"
#include "engine_impl.h"

#define GATE_SEED       0x6761746550524f42ull
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

ws_status ws_eng_gate_score(ws_eng_model *em, int probe, ws_engine_gate_score *out, ws_error *err)
{
    if (probe) out->probe = -1;
    if (probe && em->cfg.max_fact_len >= WS_PROBE_ARITY) {
        ws_probe_config pc = gate_probe();
        ws_probe_result r;
        WS_TRY(ws_probe_run(em->x, &pc, &r, err));
        long n = 0, right = 0;
        for (int di = 0; di < pc.n_delays; di++)
            for (int k = 0; k < WS_PROBE_KINDS; k++) n += r.n[0][di][k], right += r.right[0][di][k];
        out->probe = n ? (double)right / (double)n : -1;
    }
    return ws_online_replay(em->trainer, em->x, &out->replay_right, &out->replay_n, err);
}

int ws_eng_gate_pass(const ws_srv_training *tr, const ws_engine_gate_score *served,
                     const ws_engine_gate_score *cand, char *why, size_t cap)
{
    double tol = tr->gate_tolerance;
    snprintf(why, cap, "%s", "");
    if (served->probe >= 0 && cand->probe >= 0 && cand->probe < served->probe - tol) {
        snprintf(why, cap, "memory probe accuracy %.4f, served version %.4f (tolerance %g)",
                 cand->probe, served->probe, tol);
        return 0;
    }
    if (served->replay_n >= GATE_MIN_REPLAY && cand->replay_n == served->replay_n) {
        double a = (double)cand->replay_right / (double)cand->replay_n;
        double b = (double)served->replay_right / (double)served->replay_n;
        if (a < b - tol) {
            snprintf(why, cap,
                     "held-out replay accuracy %.4f, served version %.4f over %ld answers "
                     "(tolerance %g)",
                     a, b, cand->replay_n, tol);
            return 0;
        }
    }
    return 1;
}
