/* bench_crt.c — multi-head vs compositional attention on the Contextual Retrieval
 * Task (crt_task.h, the authors' recipe and OoD split; crt_model.h, their model),
 * on the CPU backend with the compositional ops.
 *
 * Both models train on the SAME batches (fresh data every step, as the paper:
 * iterations = data), interleaved step by step, with Adam and the L1 loss; the
 * budget is the number of iterations, the same for every row. Each is evaluated
 * on fixed held-out sets: in-distribution (the preference tuples it trains on)
 * and OoD (the held-out tuples), L1 averaged over every object; "predict 0"
 * gives the scale (the paper's multi-head OoD 1.00 is worse than that).
 *
 *   bench_crt [--iters N] [--batch N] [--lr X] [--d N] [--searches S]
 *             [--retrievals R] [--heads H] [--gt-searches S*] [--gt-retrievals R*]
 *             [--objects N] [--eval-batches N] [--final-batches N] [--eval-size N]
 *             [--eval-every N]
 *             [--seed N] [--threads N] [--seconds X] [--all] [--no-coeff]
 *
 * --all trains on every tuple (no OoD split); --seconds caps the wall time (both
 * models stop at the same iteration). The final evaluation uses final-batches
 * batches of eval-size samples per set (the paper: 100 x 256), the progress lines
 * every eval-every iterations the first eval-batches of them. Prints a table and
 * one JSON line. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crt_model.h"
#include "crt_task.h"
#include "base/ws_clock.h"

typedef struct {
    int iters, batch, d, S, R, heads, gs, gr, n_obj, eval_batches, final_batches, eval_size;
    int eval_every;
    int threads, all, coeff;
    float lr;
    double seconds;
    unsigned long long seed;
} options;

typedef struct {
    const char *name;
    crt_model *m;
    double wall, last_train;
} row;

/* A fixed evaluation set: n_batches batches of size samples. */
typedef struct {
    int n_batches, size, rows_per_batch;
    float *x, *y;
    double zero_l1; /* L1 of predicting 0 */
} eval_set;

static int parse(int argc, char **argv, options *o)
{
    *o = (options){.iters = 3000, .batch = 64, .d = 64, .S = 2, .R = 4, .heads = 2, .gs = 2,
                   .gr = 4, .n_obj = 10, .eval_batches = 4, .final_batches = 100, .eval_size = 256,
                   .eval_every = 500, .threads = 1, .coeff = 1, .lr = 1e-4f, .seconds = 1e30,
                   .seed = 1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        struct { const char *flag; int *dst; } ints[] = {
            {"--iters", &o->iters}, {"--batch", &o->batch}, {"--d", &o->d},
            {"--searches", &o->S}, {"--retrievals", &o->R}, {"--heads", &o->heads},
            {"--gt-searches", &o->gs}, {"--gt-retrievals", &o->gr}, {"--objects", &o->n_obj},
            {"--eval-batches", &o->eval_batches}, {"--final-batches", &o->final_batches},
            {"--eval-size", &o->eval_size},
            {"--eval-every", &o->eval_every}, {"--threads", &o->threads}};
        int done = 0;
        for (size_t k = 0; k < sizeof ints / sizeof ints[0] && !done; k++)
            if (!strcmp(a, ints[k].flag) && v) *ints[k].dst = atoi(argv[++i]), done = 1;
        if (done) continue;
        if (!strcmp(a, "--lr") && v) o->lr = (float)atof(argv[++i]);
        else if (!strcmp(a, "--seconds") && v) o->seconds = atof(argv[++i]);
        else if (!strcmp(a, "--seed") && v) o->seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(a, "--all")) o->all = 1;
        else if (!strcmp(a, "--no-coeff")) o->coeff = 0;
        else return -1;
    }
    if (o->iters < 1 || o->batch < 1 || o->d < 1 || o->S < 1 || o->R < 1 || o->heads < 1 ||
        o->d % o->S || o->d % o->R || o->d % o->heads || o->eval_batches < 1 ||
        o->final_batches < o->eval_batches ||
        o->eval_size < 1 || o->eval_every < 1 || o->threads < 1)
        return -1;
    return 0;
}

static int make_eval(eval_set *e, const crt_task *t, int set, int n_batches, int size,
                     unsigned long long seed)
{
    e->n_batches = n_batches, e->size = size, e->rows_per_batch = size * t->n_obj;
    size_t rows = (size_t)n_batches * e->rows_per_batch;
    e->x = malloc(rows * t->in_dim * sizeof *e->x);
    e->y = malloc(rows * sizeof *e->y);
    if (!e->x || !e->y) return -1;
    ws_task_rng r;
    ws_task_rng_seed(&r, seed);
    crt_sample(t, &r, set, n_batches * size, e->x, e->y);
    double s = 0.0;
    for (size_t i = 0; i < rows; i++) s += fabs(e->y[i]);
    e->zero_l1 = s / rows;
    return 0;
}

/* Mean L1 of m over the first n_batches batches of the set, or NAN on a backend
 * error. */
static double evaluate(crt_model *m, const eval_set *e, int n_batches, int in_dim, float *pred)
{
    double s = 0.0;
    for (int b = 0; b < n_batches; b++) {
        size_t r0 = (size_t)b * e->rows_per_batch;
        if (crt_model_forward(m, e->x + r0 * in_dim, e->size, pred) != WS_OK) return NAN;
        for (int i = 0; i < e->rows_per_batch; i++) s += fabs((double)pred[i] - e->y[r0 + i]);
    }
    return s / ((double)n_batches * e->rows_per_batch);
}

/* One training step on (x, y): L1 loss and its gradient sign(pred − y)/rows. */
static ws_status train_step(row *w, const float *x, const float *y, int B, int rows, float lr,
                            float *pred, float *dpred)
{
    double t0 = ws_clock_mono_s();
    WS_TRY(crt_model_forward(w->m, x, B, pred));
    double loss = 0.0;
    for (int i = 0; i < rows; i++) {
        double e = (double)pred[i] - y[i];
        loss += fabs(e);
        dpred[i] = (float)((e > 0) - (e < 0)) / (float)rows;
    }
    WS_TRY(crt_model_backward(w->m, dpred));
    WS_TRY(crt_model_adam(w->m, lr));
    w->last_train = loss / rows;
    w->wall += ws_clock_mono_s() - t0;
    return WS_OK;
}

int main(int argc, char **argv)
{
    ws_backend_prefer_passive_waits(argv);
    options o;
    if (parse(argc, argv, &o) != 0) {
        fprintf(stderr, "usage: see the comment at the top of bench/bench_crt.c\n");
        return 2;
    }
    crt_task task;
    if (crt_task_init(&task, o.n_obj, o.gs, o.gr, o.coeff) != 0) {
        fprintf(stderr, "bench_crt: bad task shape\n");
        return 2;
    }
    ws_error err;
    ws_backend *be;
    if (ws_backend_cpu_new(&be, o.threads, &err) != WS_OK) {
        fprintf(stderr, "bench_crt: %s\n", err.msg);
        return 1;
    }
    int max_batch = o.batch > o.eval_size ? o.batch : o.eval_size;
    char names[2][48];
    snprintf(names[0], sizeof names[0], "multi-head (h=%d)", o.heads);
    snprintf(names[1], sizeof names[1], "compositional (%dSx%dR)", o.S, o.R);
    row rows[2] = {{.name = names[0]}, {.name = names[1]}};
    for (int k = 0; k < 2; k++)
        if (crt_model_new(&rows[k].m, be, k, o.d, k ? o.S : o.heads, o.R, task.in_dim, o.n_obj,
                          max_batch, o.seed * 1000 + (unsigned)k) != WS_OK) {
            fprintf(stderr, "bench_crt: cannot build the models\n");
            return 1;
        }
    eval_set ein, eood;
    if (make_eval(&ein, &task, o.all ? CRT_ALL : CRT_TRAIN, o.final_batches, o.eval_size,
                  o.seed + 7777) != 0 ||
        make_eval(&eood, &task, CRT_TEST, o.final_batches, o.eval_size, o.seed + 8888) != 0) {
        fprintf(stderr, "bench_crt: out of memory\n");
        return 1;
    }
    int brows = o.batch * o.n_obj;
    float *x = malloc((size_t)brows * task.in_dim * sizeof *x), *y = malloc(brows * sizeof *y);
    float *pred = malloc((size_t)max_batch * o.n_obj * sizeof *pred);
    float *dpred = malloc((size_t)brows * sizeof *dpred);
    if (!x || !y || !pred || !dpred) return 1;
    printf("CRT %dS%dR, %d objects, d %d, batch %d, lr %g, %s, %d threads; eval %d (progress "
           "%d) x %d samples per set; tuples train %d / test %d of %d\n",
           o.gs, o.gr, o.n_obj, o.d, o.batch, (double)o.lr,
           o.all ? "trained on all tuples" : "OoD split", o.threads, o.final_batches,
           o.eval_batches, o.eval_size, task.n_train, task.n_test, task.n_tuples);
    ws_task_rng r;
    ws_task_rng_seed(&r, o.seed);
    double t_start = ws_clock_mono_s();
    int it = 0;
    while (it < o.iters && ws_clock_mono_s() - t_start < o.seconds) {
        crt_sample(&task, &r, o.all ? CRT_ALL : CRT_TRAIN, o.batch, x, y);
        for (int k = 0; k < 2; k++)
            if (train_step(&rows[k], x, y, o.batch, brows, o.lr, pred, dpred) != WS_OK) return 1;
        if (++it % o.eval_every == 0)
            for (int k = 0; k < 2; k++) {
                printf("  iter %6d  %-26s train L1 %.3f  in-dist %.3f  OoD %.3f  (%.0f s)\n", it,
                       rows[k].name, rows[k].last_train,
                       evaluate(rows[k].m, &ein, o.eval_batches, task.in_dim, pred),
                       evaluate(rows[k].m, &eood, o.eval_batches, task.in_dim, pred),
                       rows[k].wall);
                fflush(stdout);
            }
    }
    double l1_in[2], l1_ood[2];
    printf("\n%-26s %8s %7s %6s %8s %8s %10s %9s %7s\n", "model", "params", "iters", "batch",
           "wall_s", "ms/step", "train L1", "in-dist", "OoD");
    for (int k = 0; k < 2; k++) {
        l1_in[k] = evaluate(rows[k].m, &ein, o.final_batches, task.in_dim, pred);
        l1_ood[k] = evaluate(rows[k].m, &eood, o.final_batches, task.in_dim, pred);
        printf("%-26s %8zu %7d %6d %8.1f %8.2f %10.3f %9.3f %7.3f\n", rows[k].name,
               crt_model_n_params(rows[k].m), it, o.batch, rows[k].wall,
               1e3 * rows[k].wall / it, rows[k].last_train, l1_in[k], l1_ood[k]);
    }
    printf("%-26s %8s %7s %6s %8s %8s %10s %9.3f %7.3f\n", "predict 0", "-", "-", "-", "-", "-",
           "-", ein.zero_l1, eood.zero_l1);
    printf("paper (Table 6, d 64, 100k iters x 256): multi-head h=2 0.28 / 1.00, "
           "compositional 2x4 0.10 / 0.28\n");
    printf("{\"bench\":\"crt\",\"gt\":\"%dS%dR\",\"d\":%d,\"batch\":%d,\"iters\":%d,\"lr\":%g,"
           "\"ood_split\":%s,\"threads\":%d,\"zero_l1\":[%.4f,%.4f],"
           "\"mha\":{\"heads\":%d,\"params\":%zu,\"wall_s\":%.1f,\"in_l1\":%.4f,\"ood_l1\":%.4f},"
           "\"comp\":{\"S\":%d,\"R\":%d,\"params\":%zu,\"wall_s\":%.1f,\"in_l1\":%.4f,"
           "\"ood_l1\":%.4f}}\n",
           o.gs, o.gr, o.d, o.batch, it, (double)o.lr, o.all ? "false" : "true", o.threads,
           ein.zero_l1, eood.zero_l1, o.heads, crt_model_n_params(rows[0].m), rows[0].wall,
           l1_in[0], l1_ood[0], o.S, o.R, crt_model_n_params(rows[1].m), rows[1].wall, l1_in[1],
           l1_ood[1]);
    for (int k = 0; k < 2; k++) crt_model_free(rows[k].m);
    free(x), free(y), free(pred), free(dpred);
    free(ein.x), free(ein.y), free(eood.x), free(eood.y);
    crt_task_free(&task);
    ws_backend_free(be);
    return 0;
}
