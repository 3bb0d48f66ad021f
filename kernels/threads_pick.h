/* threads_pick.h — how many threads a pass of ws_backend_threads should use,
 * chosen from its work and from what earlier passes of that much work took.
 *
 * One thread below `small` units of work (a pass of a few rows is a string of
 * tiny ops: a fork/join per op costs more than it saves, and on a machine where
 * another process holds a core each join waits for a descheduled thread —
 * 5-15x slower than one thread). From `small` on, per power of two of work,
 * the pass runs at whichever of 1 and all threads has been faster lately (a
 * moving average of wall time per pass), and now and then at the other (that
 * pass's time replaces the other's average): more seldom each time the other
 * loses, so a machine that became busy (or quiet) is noticed without paying
 * for the slow choice often. */
#ifndef WS_THREADS_PICK_H
#define WS_THREADS_PICK_H

#define WS_THREADS_PICK_BUCKETS 16
/* Units of work (trajectories of a model pass) below which one thread runs. */
#define WS_THREADS_PICK_SMALL 8

typedef struct {
    double secs[2];    /* moving average of a pass at 1 and at max threads; 0: none yet */
    unsigned passes;   /* passes of this much work */
    unsigned next_try; /* pass at which the slower choice runs again */
    unsigned interval; /* passes between such tries */
} ws_threads_bucket;

typedef struct {
    int max;   /* the backend's threads */
    int small; /* work below this runs on one thread */
    ws_threads_bucket b[WS_THREADS_PICK_BUCKETS]; /* by power of two of work */
} ws_threads_pick;

/* max: the backend's threads (ws_backend_threads(be, 0)); small: see above. */
void ws_threads_pick_init(ws_threads_pick *p, int max, int small);
/* The threads for a pass of `work` units (rows, trajectories). */
int ws_threads_choose(ws_threads_pick *p, int work);
/* What a pass of `work` units at `threads` threads took, in seconds. */
void ws_threads_record(ws_threads_pick *p, int work, int threads, double seconds);

#endif
