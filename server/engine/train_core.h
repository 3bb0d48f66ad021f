/* train_core.h — the one core a model's training thread keeps to
 * (engine_train.c).
 *
 * Left free to move, the training thread went to whichever core was free when
 * it woke, and the serving threads woken next waited behind it, up to a
 * scheduler tick (perf sched; api.md, Online training, has the figures). Kept
 * to one core, serving learns to leave it that core. But a core may be taken by
 * something else (another process, a second daemon's trainer on the same
 * machine): so once a second the thread looks at what the rest of the machine
 * did on each core it may use (/proc/stat, less its own time) and moves to the
 * least used when that one was used less by a quarter of the second or more. */
#ifndef WS_TRAIN_CORE_H
#define WS_TRAIN_CORE_H

#include <sched.h> /* cpu_set_t: the includer defines _GNU_SOURCE */
#include <stdint.h>

typedef struct {
    int core;       /* the core kept to; -1: none (one core, or none could be had) */
    int64_t at_us;  /* the last look */
    int64_t own_ns; /* the thread's CPU time then */
    int64_t *busy;  /* per core, its busy clock ticks then (/proc/stat); NULL: not read */
    int n;          /* cores in busy[] */
    cpu_set_t allowed;
    const char *stat_path; /* /proc/stat, or a test's file */
} ws_train_core;

/* Keeps the calling thread to the nth highest core it may run on (counted
 * round them: a second model's trainer the next one down). 0, or -1 when it is
 * not kept (one core; or logged with the reason, which names `who`). stat_path:
 * NULL for /proc/stat (a test's file of that format otherwise). */
int ws_train_core_init(ws_train_core *c, int nth, const char *who, const char *stat_path);
/* At most once a second: to the core the rest of the machine used least, when
 * clearly less than its own (above). */
void ws_train_core_look(ws_train_core *c, const char *who);
void ws_train_core_free(ws_train_core *c);

/* The decision, apart for tests: of the allowed cores below n, the one to keep
 * to, now at `core`, given what the rest of the machine used of each in the
 * last `window` clock ticks (others[]): the least used (the highest of equals)
 * when it was used less than `core` by window / 4 or more; else `core`. */
int ws_train_core_pick(const int64_t *others, int n, const cpu_set_t *allowed, int core,
                       int64_t window);
/* /proc/stat's text: each "cpuN" line's busy clock ticks (all but idle and
 * iowait) into busy[N] for N < n (the others untouched). The highest N seen
 * plus one, or 0 when there is none. */
int ws_train_core_parse(const char *text, int64_t *busy, int n);

#endif
