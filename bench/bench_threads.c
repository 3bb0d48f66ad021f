/* bench_threads.c — the engine's forward pass at 1 and 2 threads, on a quiet
 * machine and beside a competing busy process (issue 15).
 *
 * The model worldstated serves out of the box (models/default.safetensors; the
 * default config with random parameters in a tree without it);
 * a step = 4 instructions + 8 queries of 2-3 symbols per trajectory, updater
 * and extractor in one ws_exec_step, states fed back. A pass runs as the
 * engine runs one (server/engine/engine_run.c): chunks of up to 8 trajectories
 * (fewer where that gives each thread some), on the caller's thread or also on
 * a helper's (model/exec_pool.h), each op on one thread. For batches of 1, 8,
 * 64 and 256 trajectories: steps/s at 1 thread, 2 threads, and "auto" (the
 * engine's choice, kernels/threads_pick.h), first quiet, then with a child
 * process spinning on a core. Prints a table and one JSON line (which
 * bench/serving_targets.py reads for the engine's own rates).
 * Idle OpenMP threads sleep (OMP_WAIT_POLICY=passive, as in worldstated)
 * unless the caller sets it. Also prints what an OpenMP parallel region costs on
 * one thread against the same loop outside one (why kernels/cpu/cpu_par.h runs a
 * one-thread op with no region: a serving step at batch 1 is some 70 ops).
 *
 *   build/bench/bench_threads [--seconds S per cell, default 1] [--quiet-only]
 *                             [--batch N: that batch alone, e.g. under perf record]
 *                             [--d N: the shipped model's shape at width N, random
 *                              parameters; e.g. 128, the shape issue 15 measured] */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/ws_clock.h"
#include "base/ws_rng.h"
#include "kernels/threads_pick.h"
#include "model/checkpoint.h"
#include "model/exec_pool.h"
#include "model/model.h"

#define N_INSTR 4
#define N_QUERY 8
#define MAX_B   256

static const int BATCHES[] = {1, 8, 64, 256};
enum { N_B = 4, MODES = 3 }; /* 1 thread, 2 threads, auto */

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static uint32_t rnd(void) { return (uint32_t)(ws_xorshift64(&rng_state) >> 16); }

/* Each trajectory's facts, drawn once: N_INSTR instructions then N_QUERY queries. */
static struct {
    int32_t ids[N_INSTR + N_QUERY][WS_MAX_FACT_LEN];
    int len[N_INSTR + N_QUERY], value[N_INSTR];
} facts[MAX_B];

static void draw_facts(const ws_model_config *c)
{
    for (int t = 0; t < MAX_B; t++)
        for (int i = 0; i < N_INSTR + N_QUERY; i++) {
            facts[t].len[i] = 2 + (int)(rnd() % 2);
            for (int j = 0; j < facts[t].len[i]; j++)
                facts[t].ids[i][j] = (int32_t)(rnd() % (uint32_t)c->vocab_cap);
            if (i < N_INSTR) facts[t].value[i] = (int)(rnd() & 1);
        }
}

typedef struct {
    ws_backend *be;
    ws_model *m;
    ws_exec_crew *crew;
    ws_exec_pool *pool;
    float *w, *probs;
    ws_threads_pick pick;
} rig;

/* Trajectories [r0, r1) of the pass, built into b and stepped on x. */
static ws_status run_chunk(void *ctx, ws_exec *x, ws_batch *b, int r0, int r1, ws_error *err)
{
    rig *r = ctx;
    ws_batch_clear(b);
    for (int t = r0; t < r1; t++) {
        WS_TRY(ws_batch_begin_traj(b, 0));
        for (int i = 0; i < N_INSTR + N_QUERY; i++)
            WS_TRY(i < N_INSTR ? ws_batch_add_instr(b, facts[t].ids[i], facts[t].len[i],
                                                    facts[t].value[i])
                               : ws_batch_add_query(b, facts[t].ids[i], facts[t].len[i], -1));
    }
    float *w = r->w + ws_model_state_floats(r->m) * (size_t)r0;
    return ws_exec_step(x, b, w, w, WS_STEP_INFER, 1.0f, r->probs + (size_t)r0 * N_QUERY, NULL,
                        err);
}

static void rig_open(rig *r, int d)
{
    ws_error err = {0};
    ws_model_config c = ws_model_config_default();
    if (ws_backend_cpu_new(&r->be, 2, &err) != WS_OK) {
        fprintf(stderr, "bench_threads: %s\n", err.msg);
        exit(1);
    }
    /* the model worldstated serves out of the box, else the default config; at
     * width d (when given), its shape with random parameters */
    if (ws_checkpoint_load(&r->m, WS_SOURCE_DIR "/models/default.safetensors", r->be, &err) ==
        WS_OK) {
        c = *ws_model_config_of(r->m);
        if (d) ws_model_free(r->m);
    }
    if (d) c.d = d;
    if ((d || !r->m) && ws_model_new(&r->m, &c, r->be, 1, &err) != WS_OK) r->m = NULL;
    if (!r->m || ws_exec_crew_new(&r->crew, 2, &err) != WS_OK ||
        ws_exec_pool_new(&r->pool, r->m, r->crew, &err) != WS_OK ||
        ws_model_state_alloc(r->m, MAX_B, &r->w, &err) != WS_OK ||
        ws_model_state_init(r->m, r->w, 0, MAX_B, &err) != WS_OK ||
        !(r->probs = malloc(sizeof(float) * MAX_B * N_QUERY))) {
        fprintf(stderr, "bench_threads: setup: %s\n", err.msg);
        exit(1);
    }
    ws_threads_pick_init(&r->pick, ws_exec_pool_threads(r->pool), WS_THREADS_PICK_SMALL);
    draw_facts(&c);
}

/* Runs batch n at mode (0: 1 thread, 1: 2 threads, 2: auto) for about
 * `seconds` after two warm-up passes; adds the steps, the time and the
 * process's CPU time to *steps, *secs, *cpu. */
static void run_cell(rig *r, int n, int mode, double seconds, double *steps, double *secs,
                     double *cpu)
{
    ws_error err = {0};
    int iters = 0;
    double t0 = ws_clock_mono_s(), t = t0, c0 = 0;
    for (int warm = 2; warm > 0 || t - t0 < seconds || iters < 2;) {
        int th = mode == 2 ? ws_threads_choose(&r->pick, n) : mode + 1;
        int chunk = ws_exec_pool_chunk(r->pool, n, th);
        ws_backend_threads(r->be, 1);
        double s0 = ws_clock_mono_s();
        if (ws_exec_pool_run(r->pool, n, chunk, th, run_chunk, r, &err) != WS_OK) {
            fprintf(stderr, "bench_threads: %s\n", err.msg);
            exit(1);
        }
        t = ws_clock_mono_s();
        if (mode == 2) ws_threads_record(&r->pick, n, th, t - s0);
        if (warm > 0 && --warm == 0) t0 = t, c0 = ws_clock_cpu_s(); /* warm-up not counted */
        else if (!warm) iters++;
    }
    *steps += (double)n * iters;
    *secs += t - t0;
    *cpu += ws_clock_cpu_s() - c0;
}

/* Steps/s of every cell; the cells take turns in short slices (ROUNDS of
 * them), so that a shared machine's changing load falls on all alike. */
#define ROUNDS 5
/* cpu1: steps per CPU second at 1 thread (the work alone, whatever the load). */
static int only_batch; /* --batch: 0 for all */

static void run_all(rig *r, double seconds, double out[N_B][MODES], double cpu1[N_B])
{
    double steps[N_B][MODES] = {{0}}, secs[N_B][MODES] = {{0}}, cpu[N_B][MODES] = {{0}};
    for (int round = 0; round < ROUNDS; round++)
        for (int i = 0; i < N_B; i++)
            for (int k = 0; k < MODES && (!only_batch || only_batch == BATCHES[i]); k++)
                run_cell(r, BATCHES[i], k, seconds / ROUNDS, &steps[i][k], &secs[i][k],
                         &cpu[i][k]);
    for (int i = 0; i < N_B; i++) {
        for (int k = 0; k < MODES; k++) out[i][k] = secs[i][k] > 0 ? steps[i][k] / secs[i][k] : 0;
        cpu1[i] = cpu[i][0] > 0 ? steps[i][0] / cpu[i][0] : 0;
    }
}

static pid_t busy_start(void)
{
    pid_t p = fork();
    if (p == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlives the benchmark */
        volatile unsigned long x = 0;
        for (;;) x++;
    }
    return p;
}

/* µs per round of a small loop (64 floats): inside a one-thread OpenMP region,
 * and plain. Returns a sum of the results (so that no round is optimised away). */
static float region_cost(double *region_us, double *plain_us)
{
    enum { N_ROUNDS = 100000 };
    float a[64] = {0};
    double t0 = ws_clock_mono_s();
    for (int k = 0; k < N_ROUNDS; k++) {
#pragma omp parallel for num_threads(1)
        for (int i = 0; i < 64; i++) a[i] += 1.0f;
    }
    double t1 = ws_clock_mono_s();
    float sum = 0.0f;
    for (int k = 0; k < N_ROUNDS; k++) {
        for (int i = 0; i < 64; i++) a[i] += 1.0f;
        sum += a[k & 63]; /* each round's loop stays */
    }
    double t2 = ws_clock_mono_s();
    *region_us = (t1 - t0) / N_ROUNDS * 1e6;
    *plain_us = (t2 - t1) / N_ROUNDS * 1e6;
    return sum;
}

int main(int argc, char **argv)
{
    ws_backend_prefer_passive_waits(argv);
    double seconds = 1.0;
    int quiet_only = 0, d = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--quiet-only")) quiet_only = 1;
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) only_batch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--d") && i + 1 < argc) d = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--seconds S] [--quiet-only] [--batch N] [--d N]\n",
                    argv[0]);
            return 2;
        }
    }
    if (d < 0 || d > 1024) return 2;
    rig r = {0};
    rig_open(&r, d);
    double quiet[N_B][MODES], busy[N_B][MODES] = {{0}}, cpu1[N_B], busy_cpu1[N_B];
    run_all(&r, seconds, quiet, cpu1);
    if (!quiet_only) {
        pid_t p = busy_start();
        if (p < 0) return 1;
        run_all(&r, seconds, busy, busy_cpu1);
        kill(p, SIGKILL);
        waitpid(p, NULL, 0);
    }
    double region_us, plain_us;
    if (region_cost(&region_us, &plain_us) < 0.0f) return 1; /* never: the sum is positive */
    const ws_model_config *mc = ws_model_config_of(r.m);
    printf("engine forward pass (d=%d, T=%d, %d+%d layers; %d instructions + %d queries per "
           "trajectory), steps/s, %ld cores, OMP_WAIT_POLICY=%s\n",
           mc->d, mc->n_state, mc->n_upd_layers, mc->n_ext_layers, N_INSTR, N_QUERY,
           sysconf(_SC_NPROCESSORS_ONLN), getenv("OMP_WAIT_POLICY"));
    printf("%6s | %9s %9s %9s | %9s %9s %9s | %s\n", "batch", "quiet 1t", "2t", "auto",
           "busy 1t", "2t", "auto", "1t per CPU s");
    for (int i = 0; i < N_B; i++)
        printf("%6d | %9.0f %9.0f %9.0f | %9.0f %9.0f %9.0f | %9.0f\n", BATCHES[i], quiet[i][0],
               quiet[i][1], quiet[i][2], busy[i][0], busy[i][1], busy[i][2], cpu1[i]);
    printf("(busy: a process spinning on a core; per CPU s: the work alone, whatever the load)\n");
    printf("a loop of 64 floats: %.3f us in a one-thread OpenMP region, %.3f us outside one\n",
           region_us, plain_us);
    printf("{\"bench\":\"threads\",\"d\":%d,\"instr\":%d,\"queries\":%d,\"omp_wait_policy\":\"%s\"",
           mc->d, N_INSTR, N_QUERY, getenv("OMP_WAIT_POLICY"));
    const char *modes[MODES] = {"1t", "2t", "auto"};
    for (int load = 0; load < 2; load++)
        for (int i = 0; i < N_B; i++)
            for (int k = 0; k < MODES; k++)
                printf(",\"%s_b%d_%s\":%.1f", load ? "busy" : "quiet", BATCHES[i], modes[k],
                       load ? busy[i][k] : quiet[i][k]);
    for (int i = 0; i < N_B; i++) printf(",\"cpu_b%d_1t\":%.1f", BATCHES[i], cpu1[i]);
    printf(",\"omp_region_1t_us\":%.3f,\"plain_loop_us\":%.3f}\n", region_us, plain_us);
    return 0;
}
