/* test_memory_shipped.c — the default model that ships (models/default.safetensors,
 * the checkpoint the daemon embeds and serves as "default" on first start)
 * remembers: a slice of the memory benchmark (bench/bench_memory, model/probe.h)
 * on symbols it has never seen — K = 4, 8 and 16 live facts (a quarter
 * overridden), asked 1 and 1,000 silent steps after the last instruction. The
 * shipped model holds its state on steps that tell nothing (empty_steps
 * "hold"), so both delays must get the very same answers. The floors are issue
 * 11's target (>= 99% of the facts told and of those never told, for K <= 16,
 * at every delay), a little below what the shipped model measures (in the
 * comments), so a broken, untrained or worse model cannot land; the shipped
 * model reaches them with its 2 views (model/views.c; one view: K 16 97.0%). An
 * untrained model answers one way for everything and fails the per-kind floors.
 * It also keeps facts that differ in one symbol with opposite values, told as
 * an app that does not know a rule tells them (the memory task's told-moves
 * worlds: a household's `mary,location,kitchen` false and `mary,location,garden`
 * true in one step). */
#include <stdio.h>
#include <stdlib.h>

#include "model/checkpoint.h"
#include "model/probe.h"
#include "model/trainer.h"
#include "test_util.h"

#define TOLD_MOVES_FLOOR 0.99

static const char *const KIND_NAME[WS_PROBE_KINDS] = {"told-true", "overridden", "never-told"};

typedef struct {
    ws_backend *be;
    ws_model *m;
    ws_exec *x;
} shipped;

static void shipped_load(shipped *s)
{
    ws_error err = {0};
    assert_int_equal(ws_backend_cpu_new(&s->be, 2, &err), WS_OK);
    if (ws_checkpoint_load(&s->m, WS_SOURCE_DIR "/models/default.safetensors", s->be, &err) !=
        WS_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(ws_exec_new(&s->x, s->m, &err), WS_OK);
}

static void shipped_free(shipped *s)
{
    ws_exec_free(s->x);
    ws_model_free(s->m);
    ws_backend_free(s->be);
}

static void test_shipped_default_remembers(void **state)
{
    (void)state;
    shipped s;
    shipped_load(&s);
    ws_exec *x = s.x;
    ws_error err = {0};
    const ws_model_config *c = ws_model_config_of(s.m);
    assert_int_equal(c->symbol_code, WS_SYMBOLS_HASHED); /* open vocabulary */
    assert_int_equal(c->empty_steps, WS_EMPTY_HOLD);     /* silence keeps the state */
    ws_probe_config pc = {.n_ks = 3, .ks = {4, 8, 16}, .n_traj = {64, 32, 64}, .n_delays = 2,
                          .delays = {1, 1000}, .instr_per_step = 4, .grow_vocab = 1,
                          .seed = 0xC1C1C1ULL};
    /* floors per K: all kinds together, and each kind (the shipped model, stage
     * O in 2 views: K 4 and 8 100% every kind; K 16 told-true 99.35%, overridden
     * 100%, never-told 99.61%, all 99.56%) */
    static const double floor_all[3] = {0.99, 0.99, 0.99}, floor_kind[3] = {0.99, 0.99, 0.99};
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
    shipped_free(&s);
}

/* Told-moves worlds of 8 to 16 live facts (worldstate-train eval --task memory
 * --relational-rate 1): every answer of steps 5 to 8. */
static void test_shipped_default_told_moves(void **state)
{
    (void)state;
    shipped s;
    shipped_load(&s);
    ws_task_params p;
    assert_true(ws_task_params_default("memory", &p));
    p.relational_rate = 1.0f;
    p.live_facts_min = 8, p.live_facts = 16;
    ws_eval_config ec = {
        .n_traj = 256, .window = 4, .seed = 0xC2C2C2ULL, .n_horizons = 1, .horizons = {8}};
    ws_eval_point pt;
    ws_error err = {0};
    if (ws_evaluate(s.x, &p, &ec, &pt, &err) != WS_OK) fail_msg("%s", err.msg);
    printf("told-moves worlds, steps 5-8: %.2f%% of %ld (the value held %.2f%%, a value left "
           "%.2f%%)\n",
           100.0 * pt.acc, pt.n_queries, 100.0 * pt.slot_acc[WS_QS_CURRENT],
           100.0 * pt.slot_acc[WS_QS_LEFT]);
    assert_true(pt.n_queries > 10000);
    /* the shipped model: 99.88% (the value held 99.59%); in one view 98.6% (97.3%) */
    if (!(pt.acc >= TOLD_MOVES_FLOOR))
        fail_msg("told-moves worlds: %.2f%% < %.0f%%", 100.0 * pt.acc, 100.0 * TOLD_MOVES_FLOOR);
    shipped_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_shipped_default_remembers),
                                       cmocka_unit_test(test_shipped_default_told_moves)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
