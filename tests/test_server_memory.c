/* test_server_memory.c — a fresh daemon serves the shipped default model exactly
 * as the model library computes it, with no model created, no labels and no
 * training (switched off: unlabelled steps would train it): its "default" gets 20 sessions, each told 8 facts over random
 * symbols it has never seen (a quarter of them then overridden: told false after
 * true), asked every told fact and 8 never-told ones 1 step later, then 100
 * unrelated steps (each asking about some other, never-told fact: that changes
 * nothing), then asked again. The answers through HTTP must be those of the same
 * episodes run on models/default.safetensors through the library, kind by kind,
 * at both delays; the unrelated questions must mostly be answered "no"; at
 * delay 1 every told fact at its last value and every never-told fact "no" in
 * at least 99% of the answers (what issue 11 asks of this scenario; the shipped
 * model, stage O of scripts/train-default.sh in 2 views, answers 100%, and the
 * 2,020 unrelated questions all "no"; stage O in one view 99.7%: one never-told
 * fact "yes" of 320; stages N and M 100%, stage L 99.4%),
 * and after the 100 unrelated steps exactly what it answered at delay 1 (steps
 * that tell nothing keep the state). These 20 sessions are a small sample: over
 * 1,024 episodes of 8 facts bench_memory measures the same model at 99.99%.
 * Skipped (not passed) in a build that ships no model. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/checkpoint.h"
#include "bench/probe_http.h"
#include "test_server_util.h"
#include "test_util.h"

static const char *const KIND_NAME[WS_PROBE_KINDS] = {"told-true", "overridden", "never-told"};

static void test_fresh_daemon_answers_as_the_library(void **state)
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
    ws_probe_config pc = {.n_ks = 1, .ks = {8}, .n_traj = {20}, .n_delays = 2,
                          .delays = {1, 101}, .instr_per_step = 4, .grow_vocab = 1,
                          .seed = 0xE2E2E2ULL};
    /* the library on the file the daemon embeds */
    ws_error err = {0};
    ws_backend *be;
    ws_model *m;
    assert_int_equal(ws_backend_cpu_new(&be, 1, &err), WS_OK);
    ws_exec *x;
    if (ws_checkpoint_load(&m, shipped, be, &err) != WS_OK) fail_msg("%s", err.msg);
    assert_int_equal(ws_exec_new(&x, m, &err), WS_OK);
    ws_probe_result lib;
    if (ws_probe_run(x, &pc, &lib, &err) != WS_OK) fail_msg("%s", err.msg);
    ws_exec_free(x);
    ws_model_free(m);
    ws_backend_free(be);
    /* the daemon, fresh */
    char dir[256], url[64], msg[512];
    ws_ts_tmpdir(dir, sizeof dir);
    ws_ts_daemon d;
    assert_int_equal(ws_ts_start(&d, dir, NULL), 0);
    /* Unlabelled steps train "default" too (self-supervised): off, so that the
     * daemon serves exactly the shipped parameters the library runs. */
    ws_ts_resp r;
    assert_int_equal(ws_ts_req(&d, "PATCH", "/v1/models/default/training", NULL,
                               "{\"enabled\":false}", &r),
                     200);
    ws_ts_resp_free(&r);
    snprintf(url, sizeof url, "http://127.0.0.1:%d", d.port);
    ws_probe_result http;
    long chatter[2];
    if (ws_probe_http_run(url, NULL, &pc, chatter, &http, msg, sizeof msg) != 0)
        fail_msg("%s", msg);
    for (int di = 0; di < pc.n_delays; di++)
        for (int kind = 0; kind < WS_PROBE_KINDS; kind++) {
            printf("delay %3d %-10s http %5.1f%% library %5.1f%% of %ld\n", pc.delays[di],
                   KIND_NAME[kind], 100.0 * ws_probe_acc(&http, 0, di, 1u << kind),
                   100.0 * ws_probe_acc(&lib, 0, di, 1u << kind), http.n[0][di][kind]);
            assert_int_equal(http.n[0][di][kind], lib.n[0][di][kind]);
            assert_int_equal(http.right[0][di][kind], lib.right[0][di][kind]);
        }
    printf("unrelated never-told questions answered no: %ld of %ld\n", chatter[1], chatter[0]);
    assert_int_equal(chatter[0], 20 * 101);
    assert_true(chatter[1] >= 0.95 * chatter[0]);       /* the shipped model: 100% */
    assert_true(ws_probe_acc(&http, 0, 0, 7u) >= 0.99); /* the shipped model: 100% */
    for (int kind = 0; kind < WS_PROBE_KINDS; kind++)
        assert_int_equal(http.right[0][1][kind], http.right[0][0][kind]);
    assert_int_equal(ws_ts_stop(&d), 0);
    ws_ts_cleanup(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_fresh_daemon_answers_as_the_library)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
