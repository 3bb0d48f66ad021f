/* test_util.h — helpers shared by the cmocka tests: seeded random data, error
 * measures, the model's zero-gradient slices, the whole-model gradient check and
 * scratch-folder cleanup. */
#ifndef WS_TEST_UTIL_H
#define WS_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "model.h"

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

/* The whole-model harness of test_model_grad.c and the mixer tests. */

/* The tiny config they share (d 8, 2 heads, 3 state tokens, 2 + 2 layers,
 * facts of up to 3 symbols over 6 + 2 ids, raw facts of 3 floats); a test may
 * change the width and the mixer fields, not the fact shape (the batch needs it). */
ws_model_config ws_test_tiny_config(int state_norm);

/* Four ragged trajectories: from W_0 with a raw fact; from a state with no
 * instructions; from a state with instructions and no queries (variant changes
 * only these); and one with both, so every path carries gradient. */
void ws_test_model_batch(ws_batch *b, int variant);

/* A model of config c on a CPU backend of that many threads, with random
 * parameters large enough that gradients are well above float noise, the batch
 * above (variant 0), and a random W_{t-1} for its 4 trajectories. */
typedef struct {
    ws_backend *be;
    ws_model *m;
    ws_batch *b;
    float *w_prev, *w_out;
    ws_test_rng r;
} ws_test_model_fixture;

void ws_test_model_setup(ws_test_model_fixture *f, const ws_model_config *c, int threads);
void ws_test_model_teardown(ws_test_model_fixture *f);
/* The fixture's loss after one inference step. */
double ws_test_model_loss(ws_test_model_fixture *f);
/* Every parameter tensor's gradient against central differences of the loss
 * (step 1e-2), on one thread (thousands of tiny steps: on a loaded machine each
 * OpenMP barrier can cost a scheduler tick); asserts each tensor's
 * ‖g − fd‖/max(‖fd‖, 1e-3) <= 2e-2, prints the worst under label and returns it. A tensor whose whole gradient is zero in
 * exact arithmetic (ws_test_key_bias_slice) has only noise on both sides: its
 * gradient must be ~0 (‖g‖ <= 1e-6) and the differences see nothing (<= 1e-3). */
double ws_test_model_grad_check(const ws_model_config *c, const char *label);

/* Removes path and, for a folder, everything below it (a test's scratch folder).
 * 0 when done or when path does not exist, else -1 (errno set). */
int ws_test_rm_tree(const char *path);

#endif
