/* test_threads_pick.c — the engine's choice of threads per pass
 * (kernels/threads_pick.h), fed made-up pass times: no timing of its own. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernels/backend.h"
#include "kernels/threads_pick.h"

/* Runs `passes` passes of `work` with a pass taking one_s at 1 thread and
 * many_s at all; returns how many ran at all threads. */
static int run(ws_threads_pick *p, int work, int passes, double one_s, double many_s)
{
    int many = 0;
    for (int i = 0; i < passes; i++) {
        int t = ws_threads_choose(p, work);
        assert_true(t == 1 || t == p->max);
        many += t > 1;
        ws_threads_record(p, work, t, t > 1 ? many_s : one_s);
    }
    return many;
}

static void test_small_work_one_thread(void **state)
{
    (void)state;
    ws_threads_pick p;
    ws_threads_pick_init(&p, 2, 8);
    /* even when all threads would be faster, a pass of under 8 never forks */
    assert_int_equal(run(&p, 1, 100, 1.0, 0.1), 0);
    assert_int_equal(run(&p, 7, 100, 1.0, 0.1), 0);
    ws_threads_pick_init(&p, 1, 8); /* one thread is all there is */
    assert_int_equal(run(&p, 256, 100, 1.0, 0.1), 0);
}

static void test_faster_choice_wins(void **state)
{
    (void)state;
    ws_threads_pick p;
    ws_threads_pick_init(&p, 2, 8);
    /* all threads measured first, then one, then mostly the faster */
    assert_int_equal(ws_threads_choose(&p, 64), 2);
    ws_threads_record(&p, 64, 2, 0.5);
    assert_int_equal(ws_threads_choose(&p, 64), 1);
    ws_threads_record(&p, 64, 1, 1.0);
    int many = run(&p, 64, 200, 1.0, 0.5);
    assert_true(many > 180 && many < 200); /* the slower one is still tried */
    /* another size learns on its own: at 8, one thread is faster */
    assert_true(run(&p, 8, 200, 0.1, 0.3) < 20);
}

static void test_busy_machine_falls_back(void **state)
{
    (void)state;
    ws_threads_pick p;
    ws_threads_pick_init(&p, 2, 8);
    run(&p, 64, 100, 1.0, 0.5); /* quiet: all threads */
    /* another process takes a core: all threads now 10x slower; within a few
     * passes one thread runs, and the tries of all threads grow rarer */
    int early = run(&p, 64, 20, 1.0, 5.0), late = run(&p, 64, 2000, 1.0, 5.0);
    assert_true(early < 20);
    assert_true(late < 2000 / 16);
    /* quiet again: all threads are tried, win, and run again */
    assert_true(run(&p, 64, 3000, 1.0, 0.5) > 2000);
}

static void test_backend_threads(void **state)
{
    (void)state;
    ws_backend *be = NULL;
    ws_error err = {0};
    assert_int_equal(ws_backend_cpu_new(&be, 2, &err), WS_OK);
    assert_int_equal(ws_backend_threads(be, 1), 2); /* the count at creation */
    assert_int_equal(ws_backend_threads(be, 0), 2);
    ws_backend_free(be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_work_one_thread),
        cmocka_unit_test(test_faster_choice_wins),
        cmocka_unit_test(test_busy_machine_falls_back),
        cmocka_unit_test(test_backend_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
