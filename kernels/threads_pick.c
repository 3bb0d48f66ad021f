/* threads_pick.c — see threads_pick.h. */
#include "threads_pick.h"

#include <string.h>

#define FIRST_INTERVAL 16
#define MAX_INTERVAL   1024

void ws_threads_pick_init(ws_threads_pick *p, int max, int small)
{
    memset(p, 0, sizeof *p);
    p->max = max > 1 ? max : 1;
    p->small = small;
    for (int i = 0; i < WS_THREADS_PICK_BUCKETS; i++) p->b[i].interval = FIRST_INTERVAL;
}

static int bucket_of(int work)
{
    int b = 0;
    while (work > 1 && b < WS_THREADS_PICK_BUCKETS - 1) work >>= 1, b++;
    return b;
}

int ws_threads_choose(ws_threads_pick *p, int work)
{
    if (p->max == 1 || work < p->small) return 1;
    const ws_threads_bucket *b = &p->b[bucket_of(work)];
    if (b->secs[1] == 0) return p->max; /* each choice measured once, all threads first */
    if (b->secs[0] == 0) return 1;
    int many = b->secs[1] < b->secs[0];
    if (b->passes >= b->next_try) many = !many; /* a try of the slower one */
    return many ? p->max : 1;
}

void ws_threads_record(ws_threads_pick *p, int work, int threads, double seconds)
{
    if (p->max == 1 || work < p->small) return;
    ws_threads_bucket *b = &p->b[bucket_of(work)];
    int k = threads > 1, tried = b->passes++ >= b->next_try && b->secs[0] > 0 && b->secs[1] > 0;
    /* A try replaces its choice's average, which is as old as its last try. */
    b->secs[k] = b->secs[k] == 0 || tried ? seconds : 0.75 * b->secs[k] + 0.25 * seconds;
    if (!tried) return;
    /* The slower choice ran: if it lost again, it runs more seldom. */
    if (b->secs[k] <= b->secs[!k])
        b->interval = FIRST_INTERVAL;
    else if (b->interval < MAX_INTERVAL)
        b->interval *= 2;
    b->next_try = b->passes + b->interval;
}
