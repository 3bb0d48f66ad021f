/* task_rng.c — xoshiro256** with splitmix64 seeding, and the draws tasks need. */
#include "task_rng.h"

#include <math.h>

#include "base/ws_rng.h"

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void ws_task_rng_seed(ws_task_rng *r, uint64_t seed)
{
    /* splitmix64 never yields four zero words in a row, which xoshiro forbids. */
    for (int i = 0; i < 4; i++) r->s[i] = ws_splitmix64(&seed);
}

uint64_t ws_task_rng_next(ws_task_rng *r)
{
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

uint32_t ws_task_rng_below(ws_task_rng *r, uint32_t n)
{
    /* Lemire's multiply-shift, rejecting the few low products that would bias it. */
    uint64_t m = (ws_task_rng_next(r) >> 32) * (uint64_t)n;
    if ((uint32_t)m < n) {
        uint32_t threshold = (uint32_t)(-n) % n;
        while ((uint32_t)m < threshold) m = (ws_task_rng_next(r) >> 32) * (uint64_t)n;
    }
    return (uint32_t)(m >> 32);
}

double ws_task_rng_uniform(ws_task_rng *r)
{
    return (double)(ws_task_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

int ws_task_rng_bit(ws_task_rng *r) { return (int)(ws_task_rng_next(r) >> 63); }

uint64_t ws_task_rng_symbol(ws_task_rng *r)
{
    uint64_t h = ws_task_rng_next(r);
    return h ? h : 1;
}

/* Knuth's product of uniforms: exact, and cheap for the small means tasks use. */
static int poisson_small(ws_task_rng *r, double mean)
{
    double limit = exp(-mean), p = ws_task_rng_uniform(r);
    int k = 0;
    while (p > limit) {
        k++;
        p *= ws_task_rng_uniform(r);
    }
    return k;
}

int ws_task_rng_poisson(ws_task_rng *r, double mean, int cap)
{
    /* Poisson(a + b) = Poisson(a) + Poisson(b): chunks of 16 keep exp(-mean) far
     * from underflow, and stopping at the cap bounds the work for huge means. */
    int k = 0;
    while (mean > 16.0 && k < cap) {
        k += poisson_small(r, 16.0);
        mean -= 16.0;
    }
    if (k < cap) k += poisson_small(r, mean);
    return k < cap ? k : cap;
}

void ws_task_rng_sample(ws_task_rng *r, int *idx, int n, int k)
{
    for (int i = 0; i < n; i++) idx[i] = i;
    /* Partial Fisher–Yates: position i takes a uniform pick of what is left. */
    for (int i = 0; i < k; i++) {
        int j = i + (int)ws_task_rng_below(r, (uint32_t)(n - i));
        int tmp = idx[i];
        idx[i] = idx[j];
        idx[j] = tmp;
    }
}
