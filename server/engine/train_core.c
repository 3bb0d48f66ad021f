/* train_core.c — see train_core.h. */
#define _GNU_SOURCE
#include "train_core.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/ws_clock.h"
#include "server/common/log.h"

#define LOOK_EVERY_US 1000000
#define STAT_MAX      (64 * 1024) /* /proc/stat's text read: the per-core lines come first */

static int64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int ws_train_core_parse(const char *text, int64_t *busy, int n)
{
    int seen = 0;
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        int k;
        long long v[8] = {0}; /* user nice system idle iowait irq softirq steal */
        if (strncmp(p, "cpu", 3) || p[3] < '0' || p[3] > '9' || /* not the machine's total */
            sscanf(p, "cpu%d %lld %lld %lld %lld %lld %lld %lld %lld", &k, &v[0], &v[1], &v[2],
                   &v[3], &v[4], &v[5], &v[6], &v[7]) < 5 ||
            k < 0)
            continue;
        if (k < n) busy[k] = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
        if (k + 1 > seen) seen = k + 1;
    }
    return seen;
}

int ws_train_core_pick(const int64_t *others, int n, const cpu_set_t *allowed, int core,
                       int64_t window)
{
    int best = -1;
    for (int k = n - 1; k >= 0; k--)
        if (CPU_ISSET(k, allowed) && (best < 0 || others[k] < others[best])) best = k;
    if (best < 0 || core < 0 || core >= n) return core;
    return 4 * (others[core] - others[best]) >= window ? best : core;
}

/* c's stat file into busy[] (c->n of them); 0, or -1. */
static int read_stat(ws_train_core *c, int64_t *busy)
{
    FILE *f = fopen(c->stat_path, "r");
    if (!f) return -1;
    char *text = malloc(STAT_MAX);
    size_t got = text ? fread(text, 1, STAT_MAX - 1, f) : 0;
    fclose(f);
    if (!text) return -1;
    text[got] = '\0';
    int n = ws_train_core_parse(text, busy, c->n);
    free(text);
    return n > 0 ? 0 : -1;
}

static int keep_to(int core)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(core, &one);
    return pthread_setaffinity_np(pthread_self(), sizeof one, &one);
}

int ws_train_core_init(ws_train_core *c, int nth, const char *who, const char *stat_path)
{
    memset(c, 0, sizeof *c);
    c->core = -1;
    c->stat_path = stat_path ? stat_path : "/proc/stat";
    if (sched_getaffinity(0, sizeof c->allowed, &c->allowed) != 0 || CPU_COUNT(&c->allowed) < 2)
        return -1;
    int k = nth % CPU_COUNT(&c->allowed), core = CPU_SETSIZE;
    while (core-- > 0)
        if (CPU_ISSET(core, &c->allowed) && k-- == 0) break;
    int rc = keep_to(core);
    if (rc != 0) {
        ws_log(WS_LOG_WARN, "%s: training thread not kept to core %d: %s", who, core, strerror(rc));
        return -1;
    }
    c->core = core;
    c->n = core + 1;
    for (int i = core + 1; i < CPU_SETSIZE; i++)
        if (CPU_ISSET(i, &c->allowed)) c->n = i + 1;
    c->busy = calloc((size_t)c->n, sizeof *c->busy);
    if (c->busy && read_stat(c, c->busy) != 0) free(c->busy), c->busy = NULL; /* not looked at */
    c->at_us = ws_clock_mono_us();
    c->own_ns = thread_cpu_ns();
    return 0;
}

void ws_train_core_look(ws_train_core *c, const char *who)
{
    int64_t now = ws_clock_mono_us();
    if (!c->busy || now - c->at_us < LOOK_EVERY_US) return;
    int64_t own = thread_cpu_ns();
    int64_t *busy = calloc((size_t)c->n, sizeof *busy);
    if (!busy || read_stat(c, busy) != 0) {
        free(busy);
        return;
    }
    double tick = (double)sysconf(_SC_CLK_TCK);
    int64_t window = (int64_t)((double)(now - c->at_us) * tick / 1e6);
    for (int k = 0; k < c->n; k++) { /* busy[] now what the rest of the machine did */
        int64_t was = c->busy[k];
        c->busy[k] = busy[k];
        busy[k] -= was;
    }
    busy[c->core] -= (int64_t)((double)(own - c->own_ns) * tick / 1e9);
    c->at_us = now, c->own_ns = own;
    int to = ws_train_core_pick(busy, c->n, &c->allowed, c->core, window);
    free(busy);
    if (to == c->core) return;
    int rc = keep_to(to);
    if (rc == 0) {
        ws_log(WS_LOG_INFO, "%s: training thread moved from core %d, busy with other work, to %d",
               who, c->core, to);
        c->core = to;
    }
}

void ws_train_core_free(ws_train_core *c)
{
    free(c->busy);
    c->busy = NULL;
}
