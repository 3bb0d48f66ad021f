/* ws_rng.h — the random generators, one copy each. Deterministic training,
 * the built-in tasks, the symbol codes and the golden files depend on these
 * exact sequences: change none of them. Header-only and usable from CUDA.
 *
 *   ws_mix64        the splitmix64 finaliser (a bijective 64-bit mix)
 *   ws_splitmix64   splitmix64: state += WS_RNG_GOLDEN, output mix64(state)
 *   ws_xorshift64   Marsaglia's xorshift64 (13, 7, 17): state never 0
 *   ws_normal_from_bits  Box–Muller: one N(0, 1) draw from two 64-bit draws
 * (xoshiro256**, the tasks' generator, is model/tasks/task_rng.c, seeded here.) */
#ifndef WS_RNG_H
#define WS_RNG_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define WS_RNG_FN static inline __host__ __device__
#else
#define WS_RNG_FN static inline
#endif

#define WS_RNG_GOLDEN 0x9E3779B97F4A7C15ULL /* 2^64 / golden ratio, odd */

WS_RNG_FN uint64_t ws_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

WS_RNG_FN uint64_t ws_splitmix64(uint64_t *state) { return ws_mix64(*state += WS_RNG_GOLDEN); }

WS_RNG_FN uint64_t ws_xorshift64(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return *state = x;
}

/* u1 in (0, 1] from a (never 0, so log is finite), u2 in [0, 1) from b; the
 * cosine branch, in double precision, rounded to float. Draw a before b in
 * separate statements: argument order is unspecified in C. */
WS_RNG_FN float ws_normal_from_bits(uint64_t a, uint64_t b)
{
    double u1 = ((a >> 11) + 1.0) * (1.0 / 9007199254740994.0);
    double u2 = (b >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

#endif
