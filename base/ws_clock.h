/* ws_clock.h — the clocks the tree reads: monotonic time for durations and
 * deadlines, wall-clock time for stamps that outlive the process. */
#ifndef WS_CLOCK_H
#define WS_CLOCK_H

#include <stdint.h>

/* Monotonic seconds (CLOCK_MONOTONIC): durations, benchmarks, time budgets. */
double ws_clock_mono_s(void);
/* Monotonic microseconds: scheduler deadlines. */
int64_t ws_clock_mono_us(void);
/* CPU seconds this process has used (CLOCK_PROCESS_CPUTIME_ID): what a
 * one-thread benchmark measures on a shared machine, where wall time also counts
 * the waits for a core. */
double ws_clock_cpu_s(void);
/* Milliseconds since the Unix epoch (CLOCK_REALTIME): stored and logged times. */
int64_t ws_clock_wall_ms(void);

#endif
