/* test_cpu_par.c — kernels/cpu/cpu_par.h: a loop on one thread runs outside any
 * OpenMP region (what makes a batch-1 serving step twice as fast: a region costs a
 * system call even for one thread), on more threads inside one (omp_get_level
 * counts a region of one thread too, omp_in_parallel does not), and both give the
 * same results, reductions included; the element-wise threshold. */
#include <omp.h>

#include "kernels/cpu/cpu_par.h"
#include "test_util.h"

#define N 1000

static void test_for_one_thread_has_no_region(void **state)
{
    (void)state;
    int in_region = 0, out[N];
    WS_CPU_FOR(1, , for (int i = 0; i < N; i++) {
        in_region |= omp_get_level();
        out[i] = 3 * i;
    });
    assert_int_equal(in_region, 0);
    for (int i = 0; i < N; i++) assert_int_equal(out[i], 3 * i);
}

static void test_for_two_threads_share_the_loop(void **state)
{
    (void)state;
    int regions = 0, out[N];
    WS_CPU_FOR(2, schedule(static) reduction(+ : regions), for (int i = 0; i < N; i++) {
        regions += omp_get_level();
        out[i] = 3 * i;
    });
    assert_int_equal(regions, N); /* every iteration ran inside the region */
    for (int i = 0; i < N; i++) assert_int_equal(out[i], 3 * i);
}

static void test_reduction_is_the_same_either_way(void **state)
{
    (void)state;
    double x[N], one = 0.0, two = 0.0;
    for (int i = 0; i < N; i++) x[i] = 1.0 / (i + 1); /* rounded: the order of the sum shows */
    WS_CPU_FOR(1, reduction(+ : one), for (int i = 0; i < N; i++) one += x[i];);
    double serial = 0.0;
    for (int i = 0; i < N; i++) serial += x[i];
    assert_true(one == serial); /* one thread: the plain loop's order, bit for bit */
    WS_CPU_FOR(2, reduction(+ : two), for (int i = 0; i < N; i++) two += x[i];);
    assert_true(two > serial - 1e-12 && two < serial + 1e-12);
}

static void test_simd_for(void **state)
{
    (void)state;
    float a[N], b[N];
    for (int i = 0; i < N; i++) a[i] = (float)i;
    for (int t = 1; t <= 2; t++) {
        WS_CPU_FOR_SIMD(t, for (int i = 0; i < N; i++) b[i] = a[i] * 2.0f + 1.0f;);
        for (int i = 0; i < N; i++) assert_true(b[i] == (float)i * 2.0f + 1.0f);
    }
}

static void test_region_runs_once_per_thread(void **state)
{
    (void)state;
    for (int t = 1; t <= 2; t++) {
        int runs = 0, in_region = 0;
        WS_CPU_REGION(t, {
            int mine = omp_get_level();
            _Pragma("omp atomic") runs++;
            _Pragma("omp atomic") in_region += mine;
        });
        assert_int_equal(runs, t);
        assert_int_equal(in_region, t > 1 ? t : 0);
    }
}

static void test_threads_for_elementwise_work(void **state)
{
    (void)state;
    ws_backend *be;
    ws_error err = {0};
    assert_int_equal(ws_backend_cpu_new(&be, 2, &err), WS_OK);
    assert_int_equal(ws_cpu_threads_for(be, WS_CPU_PAR_MIN - 1), 1);
    assert_int_equal(ws_cpu_threads_for(be, WS_CPU_PAR_MIN), ws_cpu_threads(be));
    ws_backend_free(be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_for_one_thread_has_no_region),
        cmocka_unit_test(test_for_two_threads_share_the_loop),
        cmocka_unit_test(test_reduction_is_the_same_either_way),
        cmocka_unit_test(test_simd_for),
        cmocka_unit_test(test_region_runs_once_per_thread),
        cmocka_unit_test(test_threads_for_elementwise_work),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
