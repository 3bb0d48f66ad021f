/* cpu_math.h — branch-free exp and sigmoid that the compiler can vectorise.
 *
 * glibc's expf/tanhf are scalar calls (no libmvec without -ffast-math), and GELU's
 * tanh took a third of a training step. ws_expf: Cody-Waite reduction
 * x = n·ln2 + r, |r| <= ln2/2, a degree-6 polynomial for e^r, and 2^n put into the
 * exponent bits; relative error ~2e-7 over the clamped range [-87, 88]. */
#ifndef WS_CPU_MATH_H
#define WS_CPU_MATH_H

#include <stdint.h>
#include <string.h>

#pragma omp declare simd notinbranch
static inline float ws_expf(float x)
{
    x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
    /* Round to nearest by the 1.5·2^23 trick: roundf would be a library call. */
    float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - n * 0.693145751953125f; /* ln2 split in two for exact n·ln2_hi */
    r = r - n * 1.428606765330187045e-06f;
    float p = 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

#pragma omp declare simd notinbranch
static inline float ws_sigmoidf(float x)
{
    return 1.0f / (1.0f + ws_expf(-x));
}

#endif
