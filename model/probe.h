/* probe.h — memory probes: episodes of open-vocabulary facts whose answers are
 * known, for the memory benchmark (bench/bench_memory), the shipped model's CI
 * check and the end-to-end tests.
 *
 * An episode draws fresh random symbols (strings "s" + 12 hex digits: never seen
 * by any model) into a pool of 2K+4 and K distinct facts of 1..max_arity (4) of
 * them (arity uniform). It tells every fact true, instr_per_step instructions a step, then
 * overrides a quarter of them (told false: the last value told wins), again
 * instr_per_step a step; after that, silence (or chatter: see ws_probe_config). Its questions: the K told facts
 * (told-true or overridden) and K never-told facts (half distractors: a told fact
 * with one symbol swapped for another pool symbol; half random pool tuples).
 * Closed world: a never-told or overridden fact does not hold. Deterministic in
 * (k, instr_per_step, max_arity, seed). */
#ifndef WS_PROBE_H
#define WS_PROBE_H

#include <stdint.h>

#include "model.h"

#define WS_PROBE_ARITY 4
#define WS_PROBE_SYM_LEN 13 /* "s" + 12 hex digits */

typedef struct {
    int arity;
    char sym[WS_PROBE_ARITY][WS_PROBE_SYM_LEN + 1];
} ws_probe_fact;

/* What a question's answer should be, and why. */
typedef enum {
    WS_PROBE_TOLD_TRUE = 0, /* told true, never overridden: holds */
    WS_PROBE_OVERRIDDEN = 1, /* told true, then false: does not hold */
    WS_PROBE_NEVER_TOLD = 2  /* does not hold (closed world) */
} ws_probe_kind;
#define WS_PROBE_KINDS 3

typedef struct {
    uint64_t seed;         /* what made it (and its chatter: ws_probe_chatter_fact) */
    int k, n_steps;        /* facts; steps that carry instructions */
    ws_probe_fact *facts;  /* [k] told facts */
    ws_probe_fact *untold; /* [k] never-told facts */
    int *kind;             /* [k] WS_PROBE_TOLD_TRUE or WS_PROBE_OVERRIDDEN per told fact */
    int n_instr;
    int *instr_fact, *instr_value; /* [n_instr]: which told fact, which value */
    int *step_off;         /* [n_steps + 1]: step s carries instructions [off[s], off[s+1]) */
} ws_probe_episode;

typedef struct ws_probe_config ws_probe_config;
/* Episode of k facts with pc's instr_per_step and max_arity. */
ws_status ws_probe_episode_make(ws_probe_episode *e, int k, const ws_probe_config *pc,
                                uint64_t seed, ws_error *err);
void ws_probe_episode_free(ws_probe_episode *e);

/* The 2k questions of an episode: question q < k is told fact q, question k + q
 * never-told fact q. */
const ws_probe_fact *ws_probe_question(const ws_probe_episode *e, int q, int *kind, int *label);

/* Chatter fact j (< pc->chatter) of the step `after` >= 1 steps after episode
 * e's last instruction: symbols of its own ("c" + 12 hex digits), arity
 * 1..max_arity, and its value (true or false alike). The same in every runner,
 * so the library and HTTP paths tell the same chatter. */
void ws_probe_chatter_fact(const ws_probe_config *pc, const ws_probe_episode *e, int after, int j,
                           ws_probe_fact *out, int *value);

/* A fact as a batch takes it: symbols with their vocabulary ids when vocab is
 * given (grown as a daemon grows it), else id -1 (the code alone). */
void ws_probe_syms(const ws_probe_fact *f, ws_vocab *vocab, ws_sym *out);

/* ---- running probes on a model ----------------------------------------------
 * For each K, n_traj episodes (ws_probe_seed) run in one batch:
 * every episode's instructions end on the same step (shorter ones start with
 * silent steps), then silent (or chattering) steps; at each delay d (ascending)
 * all questions are answered on the state d steps after the last instruction
 * (the Extractor alone: asking changes nothing). */
#define WS_PROBE_MAX_KS 8
#define WS_PROBE_MAX_DELAYS 8

struct ws_probe_config {
    int n_ks, ks[WS_PROBE_MAX_KS];
    int n_traj[WS_PROBE_MAX_KS];
    int n_delays, delays[WS_PROBE_MAX_DELAYS];
    int instr_per_step;
    int max_arity;  /* symbols per fact: uniform in 1..max_arity (0: WS_PROBE_ARITY) */
    int grow_vocab; /* 1: symbols get ids in the model's vocabulary as a daemon gives
                       them; 0: id -1, the code alone (the table encoding: overflow) */
    int chatter;    /* instructions on each step after an episode's last: 0, silence;
                       else facts over symbols of their own ("c" + 12 hex digits,
                       fresh each step), so no answer changes but the state must
                       take them in while keeping the episode's facts */
    uint64_t seed;
};

typedef struct {
    long n[WS_PROBE_MAX_KS][WS_PROBE_MAX_DELAYS][WS_PROBE_KINDS];
    long right[WS_PROBE_MAX_KS][WS_PROBE_MAX_DELAYS][WS_PROBE_KINDS];
} ws_probe_result;

ws_status ws_probe_run(ws_exec *x, const ws_probe_config *pc, ws_probe_result *res,
                       ws_error *err);
/* The seed of episode t of K value ki (the same in every runner). */
uint64_t ws_probe_seed(const ws_probe_config *pc, int ki, int t);
/* right / n over the kinds selected by mask (bit i: kind i) at one (K, delay); -1 if none. */
double ws_probe_acc(const ws_probe_result *r, int ki, int di, unsigned kinds_mask);

#endif
