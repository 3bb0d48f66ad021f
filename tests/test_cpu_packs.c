/* test_cpu_packs.c — the CPU backends' table of packed weights (cpu_packs.c)
 * under threads that use it at once, as the engine and training threads do.
 *
 * Readers take the table without a lock, so what can go wrong is a race: a
 * product that uses another thread's pack, a pack of weights as they were
 * before a rewrite, an entry torn while it moves. Each thread owns a backend
 * and a few weight matrices (several of one shape, so that a pack found for the
 * wrong matrix gives wrong numbers), and in a loop rewrites one of them (upload,
 * fill or AdamW: the writes that drop packs), then computes with each and checks
 * every output against its own double-precision product of the weights as they
 * now are. Meanwhile the other threads add and drop entries, so the table's
 * entries move under every reader. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "test_util.h"

enum { THREADS = 4, MATS = 3, ROWS = 5, IN = 24, OUT = 40, ROUNDS = 2000 };

typedef struct {
    int id;
    uint64_t seed;
    int failures, products;
    char why[320];
} worker;

static void product(double *want, const float *x, const float *w, const float *b)
{
    for (int r = 0; r < ROWS; r++)
        for (int o = 0; o < OUT; o++) {
            double s = b[o];
            for (int i = 0; i < IN; i++) s += (double)x[r * IN + i] * w[o * IN + i];
            want[r * OUT + o] = s;
        }
}

/* The weights of matrix k on the host after a rewrite of kind `how`. */
static ws_status rewrite(ws_backend *be, float *d_w, float *host_w, float *d_g, float *d_m,
                         float *d_v, int how, int step, ws_test_rng *rng)
{
    size_t n = (size_t)OUT * IN;
    if (how == 0) {
        ws_test_fill_normal(rng, host_w, n, 1.0f);
        return ws_backend_upload(be, d_w, host_w, n * sizeof(float));
    }
    if (how == 1) {
        float v = (float)ws_test_int(rng, -4, 4) * 0.25f;
        for (size_t i = 0; i < n; i++) host_w[i] = v;
        return be->ops->fill(be, d_w, v, n);
    }
    ws_adamw_args a = {.lr = 0.05f,
                       .beta1 = 0.9f,
                       .beta2 = 0.999f,
                       .eps = 1e-8f,
                       .weight_decay = 0.0f,
                       .step = step,
                       .grad_scale = 1.0f};
    ws_status s = be->ops->adamw(be, d_w, d_g, d_m, d_v, n, &a);
    if (s == WS_OK) s = ws_backend_download(be, host_w, d_w, n * sizeof(float));
    return s;
}

/* cmocka's asserts belong to the test's own thread: a worker records its first
 * failure and stops. */
#define CHECK(me, cond, ...)                                   \
    do {                                                       \
        if (!(cond)) {                                         \
            snprintf((me)->why, sizeof(me)->why, __VA_ARGS__); \
            (me)->failures++;                                  \
            goto done;                                         \
        }                                                      \
    } while (0)

/* A thread's buffers on its backend: inputs, bias, output, a gradient, and per
 * matrix its weights and AdamW moments. */
typedef struct {
    float *x, *b, *out, *g, *w[MATS], *m[MATS], *v[MATS];
} buffers;

static ws_status buffers_new(ws_backend *be, buffers *d)
{
    size_t nw = (size_t)OUT * IN * sizeof(float);
    ws_status s = ws_backend_alloc(be, ROWS * IN * sizeof(float), (void **)&d->x);
    if (s == WS_OK) s = ws_backend_alloc(be, OUT * sizeof(float), (void **)&d->b);
    if (s == WS_OK) s = ws_backend_alloc(be, ROWS * OUT * sizeof(float), (void **)&d->out);
    if (s == WS_OK) s = ws_backend_alloc(be, nw, (void **)&d->g);
    for (int k = 0; k < MATS && s == WS_OK; k++) {
        s = ws_backend_alloc(be, nw, (void **)&d->w[k]);
        if (s == WS_OK) s = ws_backend_alloc(be, nw, (void **)&d->m[k]);
        if (s == WS_OK) s = ws_backend_alloc(be, nw, (void **)&d->v[k]);
        if (s == WS_OK) s = be->ops->fill(be, d->m[k], 0.0f, (size_t)OUT * IN);
        if (s == WS_OK) s = be->ops->fill(be, d->v[k], 0.0f, (size_t)OUT * IN);
    }
    return s;
}

static void buffers_free(ws_backend *be, buffers *d)
{
    float *all[] = {d->x, d->b, d->out, d->g};
    for (int i = 0; i < 4; i++) ws_backend_release(be, all[i]);
    for (int k = 0; k < MATS; k++) {
        ws_backend_release(be, d->w[k]);
        ws_backend_release(be, d->m[k]);
        ws_backend_release(be, d->v[k]);
    }
}

static void *work(void *arg)
{
    worker *me = arg;
    ws_test_rng rng = {me->seed};
    ws_backend *be = NULL;
    ws_error err = {0};
    buffers d = {0};
    size_t nw = (size_t)OUT * IN;
    float x[ROWS * IN], b[OUT], got[ROWS * OUT], g[OUT * IN], host_w[MATS][OUT * IN];
    double want[ROWS * OUT];
    CHECK(me, ws_backend_cpu_new(&be, 1, &err) == WS_OK, "no backend: %s", err.msg);
    CHECK(me, buffers_new(be, &d) == WS_OK, "thread %d: cannot allocate", me->id);
    ws_test_fill_normal(&rng, x, ROWS * IN, 1.0f);
    ws_test_fill_normal(&rng, b, OUT, 1.0f);
    ws_test_fill_normal(&rng, g, nw, 1.0f);
    CHECK(me, ws_backend_upload(be, d.x, x, sizeof x) == WS_OK, "upload");
    CHECK(me, ws_backend_upload(be, d.b, b, sizeof b) == WS_OK, "upload");
    CHECK(me, ws_backend_upload(be, d.g, g, sizeof g) == WS_OK, "upload");
    for (int k = 0; k < MATS; k++) {
        ws_test_fill_normal(&rng, host_w[k], nw, 1.0f);
        CHECK(me, ws_backend_upload(be, d.w[k], host_w[k], nw * sizeof(float)) == WS_OK, "upload");
    }
    for (int round = 1; round <= ROUNDS; round++) {
        int k = ws_test_int(&rng, 0, MATS - 1), how = ws_test_int(&rng, 0, 2);
        CHECK(me, rewrite(be, d.w[k], host_w[k], d.g, d.m[k], d.v[k], how, round, &rng) == WS_OK,
              "thread %d: rewrite %d failed", me->id, how);
        for (int j = 0; j < MATS; j++) {
            CHECK(me,
                  be->ops->linear_forward(be, d.out, d.x, d.w[j], d.b, ROWS, IN, OUT) == WS_OK &&
                      ws_backend_download(be, got, d.out, sizeof got) == WS_OK,
                  "thread %d: linear_forward failed", me->id);
            product(want, x, host_w[j], b);
            me->products++;
            for (int i = 0; i < ROWS * OUT; i++)
                CHECK(me, fabs(got[i] - want[i]) <= 1e-4 * (1.0 + fabs(want[i])),
                      "thread %d round %d matrix %d (rewrite %d) output %d: %g, want %g", me->id,
                      round, j, how, i, (double)got[i], want[i]);
        }
    }
done:
    if (be) buffers_free(be, &d);
    ws_backend_free(be);
    return NULL;
}

static void test_packs_under_threads(void **state)
{
    (void)state;
    pthread_t th[THREADS];
    worker w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker){.id = i, .seed = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1)};
        assert_int_equal(pthread_create(&th[i], NULL, work, &w[i]), 0);
    }
    int failures = 0, products = 0;
    for (int i = 0; i < THREADS; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        if (w[i].failures) fprintf(stderr, "%s\n", w[i].why);
        failures += w[i].failures, products += w[i].products;
    }
    assert_int_equal(failures, 0);
    assert_int_equal(products, THREADS * ROUNDS * MATS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_packs_under_threads)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
