/* ops_check.h — the harness of the op-level proof tests (test_ops_*.c): device
 * buffers that cross through ws_backend_alloc/upload/download only, tolerance
 * checks against double-precision references, and central finite differences
 * of L = Σ out ⊙ R. One copy, so every op test measures error the same way. */
#ifndef WS_OPS_CHECK_H
#define WS_OPS_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/backend.h"
#include "test_util.h"

#define SENTINEL 7777.0f /* padding that an op must leave alone */
#define N_OF(x) ((int)(sizeof(x) / sizeof((x)[0])))

extern ws_backend *g_be; /* the backend under test (2 threads) */
/* Finite differences run thousands of tiny forwards; on a loaded 2-core machine
 * each OpenMP team barrier can cost a scheduler tick, so fd_grad runs them on a
 * one-thread CPU backend (the forward itself is checked on g_be). A device
 * backend would serve as both. Forward callbacks call ops on g_run. */
extern ws_backend *g_fd_be, *g_run;

/* cmocka group fixtures: create and free the backends above. */
int ops_group_setup(void **state);
int ops_group_teardown(void **state);

void *xmalloc(size_t bytes); /* never NULL (fails the test instead) */

/* Device buffers on g_be, in floats unless named _bytes. */
float *dev_alloc(size_t n);
void *dev_alloc_bytes(size_t bytes);
void put(float *dev, const float *host, size_t n);
void put_bytes(void *dev, const void *host, size_t bytes);
void get(float *host, const float *dev, size_t n);
float *dev_from(const float *host, size_t n);
void dev_set(float *dev, float value, size_t n);
void dev_free(void *p);

int verbose(void); /* WS_TEST_VERBOSE set: print how close each check came */

/* |got − want| <= atol + rtol·max|want| over mask (nullable: all); NaN fails. */
void check_close(const char *what, const float *got, const double *want, size_t n,
                 const uint8_t *mask, double atol, double rtol);
/* Elements outside mask must still hold SENTINEL (bit-exact). */
void check_untouched(const char *what, const float *got, const uint8_t *mask, size_t n);
/* The += contract: got == prefill + fresh, where fresh was computed from zero. */
void check_accumulated(const char *what, const float *got, const float *prefill,
                       const float *fresh, size_t n, const uint8_t *mask);

/* Loss L = Σ_i out[i]·r[i] (double) after running a forward; r[i] == 0 skips. */
typedef struct {
    void (*forward)(void *ctx);
    void *ctx;
    const float *out; /* device */
    size_t n_out;
    const double *r;
    float *scratch; /* host, n_out */
} loss_fn;

double eval_loss(loss_fn *l);
/* Central differences of L w.r.t. each element of device x (mask nullable), with
 * step steps[i] (or h where steps is NULL). The step actually taken is measured
 * in double, so float quantisation of x ± h does not bias the quotient. */
void fd_grad_steps(loss_fn *l, float *x, size_t n, const uint8_t *mask, float h,
                   const float *steps, double *g);
/* fd_grad_steps with one step h for every element. */
void fd_grad(loss_fn *l, float *x, size_t n, const uint8_t *mask, float h, double *g);
/* Random R over mask (nullable: all; never exactly 0 where the mask is set). */
double *random_weights(ws_test_rng *rng, const uint8_t *mask, size_t n);

#endif
