/* test_memory_shipped.c — the default model that ships (models/default.safetensors,
 * the checkpoint the daemon embeds and serves as "default" on first start)
 * remembers: a slice of the memory benchmark (bench/bench_memory, model/probe.h)
 * on symbols it has never seen — K = 4 and 8 live facts (a quarter overridden),
 * asked 1 and 1,000 silent steps after the last instruction. The shipped model
 * holds its state on steps that tell nothing (empty_steps "hold"), so both
 * delays must get the very same answers. The floors are a little below what the
 * shipped model measures (in the comments), so a broken, untrained or worse
 * model cannot land; they are not issue 11's targets (>= 99% for K <= 16 at
 * every delay up to 10,000 steps), which it does not reach yet. An untrained
 * model answers one way for everything and fails the per-kind floors. */
#include <stdio.h>
#include <stdlib.h>

#include "model/checkpoint.h"
#include "model/probe.h"
#include "test_util.h"

static const char *const KIND_NAME[WS_PROBE_KINDS] = {"told-true", "overridden", "never-told"};

static void test_shipped_default_remembers(void **state)
{
    (void)state;
    const char *path = WS_SOURCE_DIR "/models/default.safetensors";
    ws_error err = {0};
    ws_backend *be;
    ws_model *m;
    assert_int_equal(ws_backend_cpu_new(&be, 2, &err), WS_OK);
    ws_exec *x;
    if (ws_checkpoint_load(&m, path, be, &err) != WS_OK) fail_msg("%s", err.msg);
    assert_int_equal(ws_exec_new(&x, m, &err), WS_OK);
    const ws_model_config *c = ws_model_config_of(m);
    assert_int_equal(c->symbol_code, WS_SYMBOLS_HASHED); /* open vocabulary */
    assert_int_equal(c->empty_steps, WS_EMPTY_HOLD);     /* silence keeps the state */
    ws_probe_config pc = {.n_ks = 2, .ks = {4, 8}, .n_traj = {64, 32}, .n_delays = 2,
                          .delays = {1, 1000}, .instr_per_step = 4, .grow_vocab = 1,
                          .seed = 0xC1C1C1ULL};
    /* floors per K: all kinds together, and each kind (the shipped model: K 4 all
     * 99.4%, kinds 98.4 / 100 / 100%; K 8 all 99.0%, kinds 98.4 / 100 / 99.2%) */
    static const double floor_all[2] = {0.95, 0.95}, floor_kind[2] = {0.93, 0.93};
    ws_probe_result r;
    if (ws_probe_run(x, &pc, &r, &err) != WS_OK) fail_msg("%s", err.msg);
    for (int ki = 0; ki < pc.n_ks; ki++) {
        for (int kind = 0; kind < WS_PROBE_KINDS; kind++) {
            double acc = ws_probe_acc(&r, ki, 0, 1u << kind);
            printf("K %d, delay 1, %-10s: %.2f%% of %ld\n", pc.ks[ki], KIND_NAME[kind],
                   100.0 * acc, r.n[ki][0][kind]);
            assert_true(r.n[ki][0][kind] >= 32);
            assert_int_equal(r.n[ki][1][kind], r.n[ki][0][kind]);
            if (r.right[ki][1][kind] != r.right[ki][0][kind])
                fail_msg("K %d, %s: %ld right after 1,000 silent steps, %ld after 1", pc.ks[ki],
                         KIND_NAME[kind], r.right[ki][1][kind], r.right[ki][0][kind]);
            if (!(acc >= floor_kind[ki]))
                fail_msg("K %d: %s facts %.2f%% < %.0f%%", pc.ks[ki], KIND_NAME[kind],
                         100.0 * acc, 100.0 * floor_kind[ki]);
        }
        double all = ws_probe_acc(&r, ki, 0, 7u);
        printf("K %d, delay 1, all       : %.2f%%\n", pc.ks[ki], 100.0 * all);
        if (!(all >= floor_all[ki]))
            fail_msg("K %d: %.2f%% < %.0f%%", pc.ks[ki], 100.0 * all, 100.0 * floor_all[ki]);
    }
    ws_exec_free(x);
    ws_model_free(m);
    ws_backend_free(be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_shipped_default_remembers)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
