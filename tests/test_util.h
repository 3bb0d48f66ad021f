/* test_util.h — helpers shared by the cmocka tests: seeded random data, error
 * measures, the model's zero-gradient slices and scratch-folder cleanup. */
#ifndef WS_TEST_UTIL_H
#define WS_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

/* WS_TEST_SANITIZED is 1 in a sanitizer build (WS_SANITIZE; scripts/sanitize.sh),
 * where code runs 5-20 times slower: a test that trains for minutes runs a
 * smaller configuration of the same code there, and asserts what only the
 * full one reaches (an accuracy) only when it is 0. */

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

/* Parameter slices whose gradient is exactly zero in exact arithmetic, so theirs
 * is rounding noise on every backend, which AdamW (eps 1e-8) turns into steps of
 * up to lr in either direction: after an optimizer step those slices agree only
 * within the Adam bound.
 *   The key biases (K rows of *.self.qkv.b and *.cross.kv.b, MHA and
 *   compositional): softmax ignores a constant added to every score of a query.
 *   The compositional retrieval-key bias *.rk.b, the whole tensor: it adds the
 *   same q̄·b̄_k to the R scores of a softmax over the R retrievals.
 * This finds the slice [*off, *off + *len) of tensor name (numel floats) in a
 * model of width d; 0 when the tensor has none. */
int ws_test_key_bias_slice(const char *name, int d, size_t numel, size_t *off, size_t *len);

/* Removes path and, for a folder, everything below it (a test's scratch folder).
 * 0 when done or when path does not exist, else -1 (errno set). */
int ws_test_rm_tree(const char *path);

/* XORs mask into the byte from_end bytes before the end of the file at path
 * (a checkpoint's last tensor: damage its loader alone cannot see). */
void ws_test_flip_byte(const char *path, long from_end, int mask);

/* Runs the program named by environment variable env_var (set by
 * tests/CMakeLists.txt) with args (already quoted) on one OpenMP thread; its
 * stdout, and with merge_stderr its stderr too, into out (cap bytes, ended by
 * NUL). Returns its exit status, -1 if it did not exit. */
int ws_test_run_prog(const char *env_var, const char *args, int merge_stderr, char *out,
                     size_t cap);

#endif
