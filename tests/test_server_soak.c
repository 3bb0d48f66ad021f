/* test_server_soak.c — a short soak (bench/soak_run.c, the run behind
 * bench_soak): 20 s of mixed load on a live daemon stopped every 4 s (kill -9,
 * every third time SIGTERM) and restarted on the same data dir, online
 * training on for half of it. What it covers beyond test_server_crash (steps
 * only, one kill): kills landing in online-training publishes and in model
 * creations; labels PUT after a step surviving a kill; queries never answering
 * below an acknowledged step after a restart; API keys created and revoked with
 * the daemon binary beside the running daemon (a fresh key works at once, the
 * admin's tenant cannot see its session, a revoked key is refused); a clean
 * SIGTERM exit under load with training on; every session's whole log and
 * PRAGMA integrity_check after several restarts. Nothing acknowledged may be
 * lost and no error may come back but the documented 503s and transport
 * errors while the daemon is down. */
#include <stdio.h>
#include <stdlib.h>

#include "bench/soak.h"
#include "test_util.h"

static void test_soak(void **state)
{
    (void)state;
    const char *daemon = getenv("WS_DAEMON");
    assert_non_null(daemon);
    soak_options o = {.daemon_path = daemon,
                      .seconds = 20,
                      .kill_every = 4,
                      .term_every = 3,
                      .clients = 2,
                      .model_every = 2,
                      .key_every = 2};
    soak_result r;
    int ran = soak_run(&o, &r);
    assert_non_null(r.s);
    soak_report(stderr, &o, &r);
    assert_int_equal(ran, 0);
    assert_int_equal(soak_failures(&r), 0);
    /* The soak did what it says: steps, stops of both kinds, models, keys, training. */
    assert_true(atomic_load(&r.s->acked) > 0);
    assert_true(r.n_cycles >= 4);
    assert_true(atomic_load(&r.s->models_created) >= 1);
    assert_true(atomic_load(&r.s->keys_revoked) >= 1);
    assert_true(r.versions[0] > 1);
    soak_result_free(&r, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_soak)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
