/* test_server_memory.c — a fresh daemon remembers what it is told, out of the box:
 * no model created, no labels, no training. Its "default" model (the shipped
 * checkpoint) gets 20 sessions, each told 8 facts over random symbols it has
 * never seen (a quarter of them then overridden: told false after true), then
 * 100 unrelated steps (each asking about some other, never-told fact), then asked
 * every told fact and 8 never-told ones. Every told fact must come back at its
 * last value and every never-told fact "no": at least 99% over all answers, each
 * kind at least 97%. Skipped (not passed) in a build that ships no model. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe_http.h"
#include "test_server_util.h"
#include "test_util.h"

static const char *const KIND_NAME[WS_PROBE_KINDS] = {"told-true", "overridden", "never-told"};

static void test_fresh_daemon_remembers(void **state)
{
    (void)state;
    const char *shipped = getenv("WS_SHIPPED_DEFAULT");
    FILE *f = shipped && *shipped ? fopen(shipped, "rb") : NULL;
    long size = 0;
    if (f && fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (f) fclose(f);
    if (size <= 0) {
        printf("skipped: no shipped default model in this build\n");
        skip();
    }
    char dir[256];
    ws_ts_tmpdir(dir, sizeof dir);
    ws_ts_daemon d;
    assert_int_equal(ws_ts_start(&d, dir, NULL), 0);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", d.port);
    ws_probe_config pc = {.n_ks = 1, .ks = {8}, .n_traj = {20}, .n_delays = 1, .delays = {100},
                          .instr_per_step = 4, .seed = 0xE2E2E2ULL};
    ws_probe_result r;
    char err[512];
    if (ws_probe_http_run(url, NULL, &pc, 1, &r, err, sizeof err) != 0) fail_msg("%s", err);
    long n = 0, right = 0;
    for (int kind = 0; kind < WS_PROBE_KINDS; kind++) {
        double acc = ws_probe_acc(&r, 0, 0, 1u << kind);
        printf("%-10s %.2f%% of %ld\n", KIND_NAME[kind], 100.0 * acc, r.n[0][0][kind]);
        n += r.n[0][0][kind], right += r.right[0][0][kind];
        assert_true(acc >= 0.97);
    }
    printf("all        %.2f%% of %ld answers\n", 100.0 * right / n, n);
    assert_int_equal(n, 20 * (8 + 8 + 100));
    assert_true(right >= 0.99 * n);
    assert_int_equal(ws_ts_stop(&d), 0);
    ws_ts_cleanup(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_fresh_daemon_remembers)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
