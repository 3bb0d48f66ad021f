/* bench_mixer_rmc.c — the cost of one Updater step: the plain Updater (MHA self +
 * MHA cross + MLP per layer, LN_w) against the gated relational-memory one
 * (upd_mixer = rmc: MHA over [state; context] + MLP per block, then the gates),
 * next to their forward FLOPs (../shared/MIXERS.md §7).
 *
 * Config: d 64, 4 heads, T 16, 1 Updater layer/block, 1 Extractor layer, 64
 * trajectories from previous states, 4 instructions each (5 context rows with
 * c_null) and one labelled query each (so the Extractor costs next to nothing).
 * Measures, per trajectory step, the inference step (embed + Updater + the
 * one-query Extractor) and the training step (the same plus backward), on the
 * CPU backend, in process CPU time (use --threads 1: with more, CPU time sums
 * the threads). The two models alternate, round after round, and each keeps its
 * best round: the machine is shared, and the minimum is the least disturbed.
 * Prints a table and one JSON line.
 * Usage: bench_mixer_rmc [--rounds N] [--seconds S] [--threads N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ws_clock.h"
#include "model/model.h"

#define BATCH 64
#define N_INSTR 4

static ws_model_config bench_config(int mixer)
{
    ws_model_config c = ws_model_config_default();
    c.d = 64, c.n_heads = 4, c.n_state = 16, c.n_upd_layers = 1, c.n_ext_layers = 1;
    c.vocab_cap = 256, c.n_overflow = 16;
    c.upd_mixer = mixer;
    return c;
}

/* Forward FLOPs of the Updater per trajectory step (MIXERS §7; multiply-add = 2),
 * with T state rows, n_c = 1 + instructions context rows, L layers. */
static double updater_flops(const ws_model_config *c, int n_c)
{
    double T = c->n_state, d = c->d, h = c->n_heads, L = c->n_upd_layers;
    double mlp = 16 * T * d * d;
    if (c->upd_mixer != WS_MIXER_RMC) {
        double self = 8 * T * d * d + 4 * T * T * d + 5 * h * T * T;
        double cross = 4 * T * d * d + 4 * n_c * d * d + 4 * T * n_c * d + 5 * h * T * n_c;
        return L * (self + cross + mlp);
    }
    double k = T + n_c; /* memory rows */
    double att = 4 * T * d * d + 4 * k * d * d + 4 * T * k * d + 5 * h * T * k;
    double gates = 4 * T * d * d + 4 * d * d; /* tanh(M) W_gm, x̄ W_gx */
    return L * (att + mlp) + gates;
}

static size_t updater_params(const ws_model *m)
{
    size_t n = 0;
    for (int i = 0; i < ws_model_n_tensors(m); i++)
        if (strncmp(ws_model_tensor(m, i)->name, "upd.", 4) == 0) n += ws_model_tensor(m, i)->numel;
    return n;
}

typedef struct {
    const char *name;
    ws_model_config cfg;
    ws_model *m;
    ws_exec *x;
    ws_batch *b;
    float *states;
    double best_infer, best_train; /* seconds per step */
} contender;

static void setup(contender *k, ws_backend *be)
{
    ws_error err;
    if (ws_model_new(&k->m, &k->cfg, be, 1, &err) != WS_OK ||
        ws_exec_new(&k->x, k->m, &err) != WS_OK ||
        ws_batch_new(&k->b, &k->cfg) != WS_OK ||
        ws_model_state_alloc(k->m, BATCH, &k->states, &err) != WS_OK ||
        ws_model_state_init(k->m, k->states, 0, BATCH, &err) != WS_OK) {
        fprintf(stderr, "bench_mixer_rmc: %s: %s\n", k->name, err.msg);
        exit(1);
    }
    uint32_t r = 12345;
    for (int t = 0; t < BATCH; t++) {
        int32_t ids[2];
        if (ws_batch_begin_traj(k->b, 0) != WS_OK) abort();
        for (int i = 0; i <= N_INSTR; i++) {
            r = r * 1664525u + 1013904223u;
            ids[0] = (int32_t)(r >> 8) % k->cfg.vocab_cap, ids[1] = (int32_t)(r >> 20) % 64;
            ws_status st = i < N_INSTR ? ws_batch_add_instr(k->b, ids, 2, (int)(r >> 31))
                                       : ws_batch_add_query(k->b, ids, 2, (int)(r >> 30) & 1);
            if (st != WS_OK) abort();
        }
    }
    k->best_infer = k->best_train = 1e30;
}

/* Steps for about `seconds` of CPU time (with one thread the steps' own work, not
 * the waits for a shared core); returns CPU seconds per step. */
static double time_steps(contender *k, ws_step_mode mode, double seconds)
{
    ws_error err;
    int n = 0;
    double t0 = ws_clock_cpu_s(), t;
    do {
        if ((mode == WS_STEP_TRAIN && ws_model_zero_grads(k->m, &err) != WS_OK) ||
            ws_exec_step(k->x, k->b, k->states, k->states, mode, 1.0f, NULL, NULL, &err) !=
                WS_OK) {
            fprintf(stderr, "bench_mixer_rmc: %s\n", err.msg);
            exit(1);
        }
        n++;
        t = ws_clock_cpu_s() - t0;
    } while (t < seconds);
    return t / n;
}

int main(int argc, char **argv)
{
    ws_backend_prefer_passive_waits(argv);
    int rounds = 7, threads = 1;
    double seconds = 1.0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--rounds")) rounds = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: bench_mixer_rmc [--rounds N] [--seconds S] [--threads N]\n");
            return 2;
        }
    }
    ws_error err;
    ws_backend *be;
    if (ws_backend_cpu_new(&be, threads, &err) != WS_OK) {
        fprintf(stderr, "bench_mixer_rmc: %s\n", err.msg);
        return 1;
    }
    contender ks[2] = {{.name = "plain", .cfg = bench_config(WS_MIXER_MHA)},
                       {.name = "rmc", .cfg = bench_config(WS_MIXER_RMC)}};
    for (int i = 0; i < 2; i++) setup(&ks[i], be);
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < 2; i++) {
            double inf = time_steps(&ks[i], WS_STEP_INFER, seconds / 2);
            double tr = time_steps(&ks[i], WS_STEP_TRAIN, seconds / 2);
            if (inf < ks[i].best_infer) ks[i].best_infer = inf;
            if (tr < ks[i].best_train) ks[i].best_train = tr;
        }
    printf("Updater step cost: d %d, heads %d, T %d, 1 layer/block, %d trajectories x %d "
           "instructions, CPU %d thread(s), CPU time, best of %d rounds\n",
           ks[0].cfg.d, ks[0].cfg.n_heads, ks[0].cfg.n_state, BATCH, N_INSTR, threads, rounds);
    printf("%-6s %10s %14s %16s %10s %16s\n", "", "upd params", "upd MFLOP fwd", "infer us/traj",
           "GFLOP/s*", "train us/traj");
    for (int i = 0; i < 2; i++) {
        contender *k = &ks[i];
        double fl = updater_flops(&k->cfg, 1 + N_INSTR);
        printf("%-6s %10zu %14.3f %16.2f %10.2f %16.2f\n", k->name, updater_params(k->m),
               fl * 1e-6, k->best_infer / BATCH * 1e6, fl / (k->best_infer / BATCH) * 1e-9,
               k->best_train / BATCH * 1e6);
    }
    printf("* the Updater's FLOPs over the whole inference step's time (embedding and a "
           "one-query Extractor included)\n");
    printf("rmc / plain: FLOPs %.3f, inference time %.3f, training time %.3f\n",
           updater_flops(&ks[1].cfg, 1 + N_INSTR) / updater_flops(&ks[0].cfg, 1 + N_INSTR),
           ks[1].best_infer / ks[0].best_infer, ks[1].best_train / ks[0].best_train);
    printf("{\"bench\":\"mixer_rmc\",\"threads\":%d,\"plain\":{\"mflop\":%.4f,\"infer_us\":%.3f,"
           "\"train_us\":%.3f},\"rmc\":{\"mflop\":%.4f,\"infer_us\":%.3f,\"train_us\":%.3f}}\n",
           threads, updater_flops(&ks[0].cfg, 1 + N_INSTR) * 1e-6, ks[0].best_infer / BATCH * 1e6,
           ks[0].best_train / BATCH * 1e6, updater_flops(&ks[1].cfg, 1 + N_INSTR) * 1e-6,
           ks[1].best_infer / BATCH * 1e6, ks[1].best_train / BATCH * 1e6);
    for (int i = 0; i < 2; i++) {
        ws_backend_release(be, ks[i].states);
        ws_batch_free(ks[i].b);
        ws_exec_free(ks[i].x);
        ws_model_free(ks[i].m);
    }
    ws_backend_free(be);
    return 0;
}
