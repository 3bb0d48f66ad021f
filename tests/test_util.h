/* test_util.h — helpers shared by the cmocka tests: seeded random data and
 * error measures. */
#ifndef WS_TEST_UTIL_H
#define WS_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

typedef struct {
    uint64_t s;
} ws_test_rng;

/* xorshift64*: deterministic across platforms. */
uint64_t ws_test_next(ws_test_rng *r);
float ws_test_uniform(ws_test_rng *r);        /* [0, 1) */
float ws_test_normal(ws_test_rng *r);         /* N(0, 1) */
int ws_test_int(ws_test_rng *r, int lo, int hi); /* [lo, hi] */
void ws_test_fill_normal(ws_test_rng *r, float *x, size_t n, float scale);

/* max_i |a_i − b_i| / max(max_i |b_i|, floor) */
double ws_test_max_rel_err(const float *a, const float *b, size_t n, double floor);
/* ‖a − b‖₂ / max(‖b‖₂, floor) */
double ws_test_norm_rel_err(const float *a, const float *b, size_t n, double floor);

#endif
