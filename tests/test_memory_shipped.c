/* test_memory_shipped.c — the default model that ships (models/default.safetensors,
 * the checkpoint the daemon embeds and serves as "default" on first start)
 * remembers: a slice of the memory benchmark (bench/bench_memory, model/probe.h)
 * on symbols it has never seen — K = 8 live facts (a quarter overridden), asked
 * 1 and 100 silent steps after the last instruction, every told-true,
 * overridden and never-told fact answered right at least 99% of the time. A
 * broken or untrained shipped model cannot land. */
#include <stdio.h>
#include <stdlib.h>

#include "checkpoint.h"
#include "probe.h"
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
    if (ws_checkpoint_load(&m, path, be, &err) != WS_OK) fail_msg("%s", err.msg);
    const ws_model_config *c = ws_model_config_of(m);
    assert_int_equal(c->symbol_code, WS_SYMBOLS_HASHED); /* open vocabulary */
    ws_probe_config pc = {.n_ks = 1, .ks = {8}, .n_traj = {32}, .n_delays = 2,
                          .delays = {1, 100}, .instr_per_step = 4, .grow_vocab = 1,
                          .seed = 0xC1C1C1ULL};
    ws_probe_result r;
    if (ws_probe_run(m, &pc, &r, &err) != WS_OK) fail_msg("%s", err.msg);
    for (int di = 0; di < pc.n_delays; di++)
        for (int kind = 0; kind < WS_PROBE_KINDS; kind++) {
            double acc = ws_probe_acc(&r, 0, di, 1u << kind);
            printf("K 8, delay %3d, %-10s: %.2f%% of %ld\n", pc.delays[di], KIND_NAME[kind],
                   100.0 * acc, r.n[0][di][kind]);
            assert_true(r.n[0][di][kind] >= 32);
            if (!(acc >= 0.99))
                fail_msg("%s facts at delay %d: %.2f%% < 99%%", KIND_NAME[kind], pc.delays[di],
                         100.0 * acc);
        }
    ws_model_free(m);
    ws_backend_free(be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_shipped_default_remembers)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
