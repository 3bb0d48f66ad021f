/* ws_clock.c — clock_gettime behind the four readings the tree uses. Neither
 * clock can fail with a valid pointer on Linux; a zero reading is the harmless
 * fallback rather than an error every caller would have to carry. */
#include "ws_clock.h"

#include <time.h>

static struct timespec read_clock(clockid_t id)
{
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0) ts.tv_sec = 0, ts.tv_nsec = 0;
    return ts;
}

double ws_clock_mono_s(void)
{
    struct timespec ts = read_clock(CLOCK_MONOTONIC);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int64_t ws_clock_mono_us(void)
{
    struct timespec ts = read_clock(CLOCK_MONOTONIC);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

double ws_clock_cpu_s(void)
{
    struct timespec ts = read_clock(CLOCK_PROCESS_CPUTIME_ID);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int64_t ws_clock_wall_ms(void)
{
    struct timespec ts = read_clock(CLOCK_REALTIME);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
