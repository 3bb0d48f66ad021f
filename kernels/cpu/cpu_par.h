/* cpu_par.h — an op's loop shared among OpenMP threads, or run by the calling
 * thread with no parallel region at all when it has one thread.
 *
 * Why: a libgomp parallel region ends at a barrier whose last thread wakes the
 * others with a futex system call, in a team of one too. On these (virtual)
 * machines that is about 1.3-1.5 µs a region (bench/bench_threads prints it) and
 * a serving step at batch 1 is some 70 small ops on one thread: the regions took
 * half of its time (bench_threads batch 1: 3,300-3,500 steps/s with them, 6,900
 * without). So an op writes its loop once, inside one of these macros, and the
 * compiler builds it twice: as an OpenMP loop for several threads and as a plain
 * loop for one. The body is the same code either way, and the ops give the same
 * bits at any thread count, so which one runs changes no result.
 *
 * A body may not hold a `#pragma` line (a directive among a macro's arguments is
 * undefined behaviour): write `_Pragma("omp simd")` there. */
#ifndef WS_CPU_PAR_H
#define WS_CPU_PAR_H

#include <stddef.h>

#include "cpu_internal.h"

#define WS_CPU_PRAGMA(x) _Pragma(#x)

/* Elements of element-wise work below which more threads cost more than they save. */
#define WS_CPU_PAR_MIN 4096

/* The threads for `work` elements of element-wise work. */
static inline int ws_cpu_threads_for(const ws_backend *be, size_t work)
{
    return work >= WS_CPU_PAR_MIN ? ws_cpu_threads(be) : 1;
}

/* The statement given last, run by `threads` threads under "omp <directive>
 * <clauses>", or by the calling thread alone under `one` (a directive for one
 * thread, or nothing). */
#define WS_CPU_PAR_(threads, directive, clauses, one, ...)                                         \
    do {                                                                                           \
        int ws_cpu_par_n_ = (threads);                                                             \
        if (ws_cpu_par_n_ > 1) {                                                                   \
            WS_CPU_PRAGMA(omp directive num_threads(ws_cpu_par_n_) clauses)                        \
            __VA_ARGS__                                                                            \
        } else {                                                                                   \
            one __VA_ARGS__                                                                        \
        }                                                                                          \
    } while (0)

/* The `for` statement given after `clauses` (more clauses of "omp parallel for",
 * e.g. schedule(dynamic, 1) or reduction(+ : s); may be empty). */
#define WS_CPU_FOR(threads, clauses, ...) WS_CPU_PAR_(threads, parallel for, clauses, , __VA_ARGS__)

/* The same for a loop that is also vectorised ("omp parallel for simd", and
 * "omp simd" on one thread). */
#define WS_CPU_FOR_SIMD(threads, ...)                                                              \
    WS_CPU_PAR_(threads, parallel for simd, , WS_CPU_PRAGMA(omp simd), __VA_ARGS__)

/* A block that every thread runs ("omp parallel"); outside a region
 * omp_get_thread_num() is 0 and omp_get_num_threads() 1, so a block that shares
 * its work by them does it all. */
#define WS_CPU_REGION(threads, ...) WS_CPU_PAR_(threads, parallel, , , __VA_ARGS__)

#endif
