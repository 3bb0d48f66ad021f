/* symcode.h — the fixed code of a symbol (DESIGN §2, Facts): a unit-variance
 * Gaussian vector drawn from a generator seeded by a 64-bit hash of the symbol's
 * bytes, so a symbol means something the first time a model sees it.
 *
 * One definition for the CPU backend, the CUDA backend (host and device) and the
 * PyTorch reference (tests/reference/symcode.py spells the same arithmetic):
 *   hash(bytes)  = mix64(FNV-1a-64(bytes)), with 0 mapped to 1 (0 means "no symbol")
 *   pair p of a code: a = mix64(h + G·(2p+1)), b = mix64(h + G·(2p+2)),
 *                     u1 = ((a >> 11) + 0.5)·2⁻⁵³ ∈ (0,1), u2 = (b >> 11)·2⁻⁵³,
 *                     r = sqrt(−2 ln u1): element 2p = r cos(2π u2), 2p+1 = r sin(2π u2)
 *   (Box–Muller in double precision, rounded to float; G = 0x9E3779B97F4A7C15,
 *   mix64 = the splitmix64 finaliser).
 * In slot j of a fact the code is rolled by j (column c gets element (c + j) mod d),
 * so ("alice","bob") and ("bob","alice") differ while a symbol keeps one code up
 * to a fixed permutation across slots. */
#ifndef WS_SYMCODE_H
#define WS_SYMCODE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "base/ws_rng.h" /* ws_mix64 */

#ifdef __CUDACC__
#define WS_SYMCODE_FN static inline __host__ __device__
#else
#define WS_SYMCODE_FN static inline
#endif

#define WS_SYMCODE_GOLDEN WS_RNG_GOLDEN

/* FNV-1a-64 of bytes (also the vocabulary's table hash, model/vocab.c). */
WS_SYMCODE_FN uint64_t ws_fnv1a64(const char *s, size_t len)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

/* The symbol hash from its bytes' FNV-1a-64; never 0. */
WS_SYMCODE_FN uint64_t ws_sym_hash_of_fnv(uint64_t fnv)
{
    uint64_t h = ws_mix64(fnv);
    return h ? h : 1;
}

/* The hash of a symbol's bytes; never 0. */
WS_SYMCODE_FN uint64_t ws_sym_hash(const char *s, size_t len)
{
    return ws_sym_hash_of_fnv(ws_fnv1a64(s, len));
}

/* Elements 2p and 2p+1 of the code of hash h. */
WS_SYMCODE_FN void ws_sym_code_pair(uint64_t h, int p, float *g0, float *g1)
{
    uint64_t a = ws_mix64(h + WS_SYMCODE_GOLDEN * (2 * (uint64_t)p + 1));
    uint64_t b = ws_mix64(h + WS_SYMCODE_GOLDEN * (2 * (uint64_t)p + 2));
    double u1 = ((double)(a >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    double u2 = (double)(b >> 11) * (1.0 / 9007199254740992.0);
    double r = sqrt(-2.0 * log(u1)), t = 6.283185307179586 * u2;
    *g0 = (float)(r * cos(t));
    *g1 = (float)(r * sin(t));
}

/* Element e of the code of hash h. */
WS_SYMCODE_FN float ws_sym_code(uint64_t h, int e)
{
    float g0, g1;
    ws_sym_code_pair(h, e / 2, &g0, &g1);
    return (e & 1) ? g1 : g0;
}

#endif
