/* task_rng.h — the small PRNG behind every task world (internal to tasks/).
 *
 * xoshiro256** seeded through splitmix64: fast, good statistics, and the same
 * stream on every platform, so a world is a pure function of its seed. Each slot
 * owns one generator; nothing here touches global state (never rand()). */
#ifndef WS_TASK_RNG_H
#define WS_TASK_RNG_H

#include <stdint.h>

typedef struct {
    uint64_t s[4];
} ws_task_rng;

/* Any seed, 0 included, gives a valid (nonzero) state. */
void ws_task_rng_seed(ws_task_rng *r, uint64_t seed);
uint64_t ws_task_rng_next(ws_task_rng *r);
/* Uniform in [0, n), n >= 1, without modulo bias. */
uint32_t ws_task_rng_below(ws_task_rng *r, uint32_t n);
/* Uniform in [0, 1) with 53 random bits. */
double ws_task_rng_uniform(ws_task_rng *r);
/* A fair coin: 0 or 1. */
int ws_task_rng_bit(ws_task_rng *r);
/* A fresh symbol's hash: any value but 0 (which a batch reads as "take it from
 * the vocabulary"). */
uint64_t ws_task_rng_symbol(ws_task_rng *r);
/* min(Poisson(mean), cap) for a finite mean >= 0; the cap also bounds the work. */
int ws_task_rng_poisson(ws_task_rng *r, double mean, int cap);
/* Uniform sample of k distinct values of [0, n) (k <= n), in random order, in
 * idx[0..k); idx is scratch of n ints. It is refilled first, so the result
 * depends on the generator alone, never on what idx held before. */
void ws_task_rng_sample(ws_task_rng *r, int *idx, int n, int k);

#endif
