/* bench_mixers.c — cost per step of every mixer against multi-head attention
 * (issue 7; ../shared/MIXERS.md §7), on the CPU backend.
 *
 * One common small config: d=64, 4 heads, T=16, 2 Updater + 1 Extractor layers,
 * a batch of 32 trajectories x 8 instructions x 16 queries (mixer fields at their
 * defaults). For every mixer kind the model knows (ws_mixer_name), the model is
 * built with that kind in the slots it accepts — both the Updater's state mixing
 * and the Extractor's reading of W_t, else the one that takes it (rmc: Updater,
 * rn: readout) — and kinds that ws_model_new refuses are listed as skipped. Each
 * is timed for a TRAIN step (forward, backward, AdamW) and an INFER step (forward
 * with queries). Next to the times: the analytic forward FLOPs of the mixer slots
 * (MIXERS §7 formulas, the functions below) — every state-mixing use of the
 * Updater (or the RMC update) and every Extractor use of W_t (cross mixers plus
 * the head or readout); the Updater's attention to instructions stays MHA and is
 * not counted. Prints a table and one JSON line.
 * Usage: bench_mixers [--seconds S] [--threads N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "base/ws_clock.h"
#include "base/ws_rng.h"

#define BATCH 32
#define N_INSTR 8
#define N_QUERY 16

static ws_model_config bench_config(void)
{
    ws_model_config c = ws_model_config_default();
    c.d = 64, c.n_heads = 4, c.n_state = 16, c.n_upd_layers = 2, c.n_ext_layers = 1;
    c.vocab_cap = 1000, c.n_overflow = 64;
    return c;
}

/* ---- MIXERS §7 forward FLOPs (a multiply-add is 2), per set of rows ----------- */

/* MHA self over N rows; cross from N queries to Nk keys. */
static double mha_self(double N, const ws_model_config *c)
{
    double d = c->d;
    return 8 * N * d * d + 4 * N * N * d + 5 * c->n_heads * N * N;
}

static double mha_cross(double N, double Nk, const ws_model_config *c)
{
    double d = c->d;
    return 4 * N * d * d + 4 * Nk * d * d + 4 * N * Nk * d + 5 * c->n_heads * N * Nk;
}

/* 2-simplicial block: the 2-simplicial part over M virtual entities (minimal
 * projections) and the 1-simplicial part with the virtual masks, plus our
 * W_O [(d + d2) -> d]. SELF: N = T − M standard rows of the T; CROSS (our
 * reading): N queries, the T state rows as the M entities. */
static double s2_block(double N, double M, const ws_model_config *c)
{
    double d = c->d, d2 = c->s2_dim, K2 = c->s2_heads, dl = K2 > 0 ? d2 / K2 : 0;
    double one = 6 * (N + M) * d * d + 4 * N * N * d + 4 * M * (N + M) * d +
                 2 * (N + M) * (d + (K2 > 0 ? d2 : 0)) * d;
    if (K2 <= 0) return one;
    double two = 2 * d * d2 * (N + 3 * M) + 4 * N * M * d2 + 2 * M * M * d2 + 15 * N * M * M +
                 K2 * (2 * M * dl * dl * dl + 2 * M * M * dl * dl) + 2 * N * M * M * d2 +
                 8 * (N + M) * d2;
    return one + two;
}

/* Compositional attention from N queries to Nk keys (S searches of width d/S,
 * R retrievals, retrieval width d_r); N = Nk gives MIXERS §7's self formula. */
static double comp_block(double N, double Nk, const ws_model_config *c)
{
    double d = c->d, S = c->comp_searches, R = c->comp_retrievals, dr = c->comp_dim;
    double dk = d / S, dv = d / S;
    return 2 * N * d * S * dk + 2 * Nk * d * S * dk + 2 * Nk * d * R * dv +
           2 * S * N * Nk * dk + 5 * S * N * Nk + 2 * S * R * N * Nk * dv + 2 * N * d * S * dr +
           2 * S * R * N * dv * dr + 2 * S * R * N * dr + 5 * S * R * N + 2 * S * R * N * dv +
           2 * N * S * dv * d;
}

/* RMC, one block per Updater layer: memory N_m = T rows of d_m = d, H heads of
 * d/H, the n_x context rows (c_null + instructions) appended to memory, a 2-layer
 * MLP, unit gates. */
static double rmc_layer(double n_x, const ws_model_config *c)
{
    double d = c->d, H = c->n_heads, dk = d / H, N = c->n_state, R = N + n_x;
    return 2 * n_x * d * d + 2 * R * d * H * (3 * dk) + 2 * R * R * H * (2 * dk) + 5 * H * R * R +
           2 * 2 * R * d * d + 4 * d * d + 4 * N * d * d;
}

/* The rn readout with g's first layer split (model/readout_rn.c): A, B once per
 * state row; per query C q, the pair add + ReLU, g's later layers, the sum, f. */
static double rn_readout(double n_traj, double n_query, const ws_model_config *c)
{
    double d = c->d, T = c->n_state, w = c->rn_width, L = c->rn_layers;
    return n_traj * 4 * T * d * w +
           n_query * (2 * d * w + 2 * T * T * w + 2 * T * T * (L - 1) * w * w + T * T * w +
                      2 * w * w + 2 * w);
}

typedef struct {
    double upd, ext; /* forward FLOPs of a step in the two slots */
} slot_flops;

static slot_flops mixer_flops(const ws_model_config *c)
{
    double B = BATCH, T = c->n_state, nq = (double)BATCH * N_QUERY;
    slot_flops f = {0, 0};
    double self;
    switch (c->upd_mixer) {
    case WS_MIXER_SIMPLICIAL2: self = s2_block(T - c->s2_virtual, c->s2_virtual, c); break;
    case WS_MIXER_COMPOSITIONAL: self = comp_block(T, T, c); break;
    case WS_MIXER_RMC: self = rmc_layer(1 + N_INSTR, c); break;
    default: self = mha_self(T, c); break;
    }
    f.upd = c->n_upd_layers * B * self;
    double cross;
    switch (c->ext_mixer) {
    case WS_MIXER_SIMPLICIAL2: cross = s2_block(N_QUERY, T, c); break;
    case WS_MIXER_COMPOSITIONAL: cross = comp_block(N_QUERY, T, c); break;
    default: cross = mha_cross(N_QUERY, T, c); break; /* rn keeps MHA layers */
    }
    f.ext = c->n_ext_layers * B * cross +
            (c->ext_mixer == WS_MIXER_RN ? rn_readout(B, nq, c) : 2 * nq * c->d);
    return f;
}

/* ---- timing -------------------------------------------------------------------- */

static void build_batch(ws_batch *b, const ws_model_config *c)
{
    uint64_t s = 88172645463325252ULL;
    int32_t ids[WS_MAX_FACT_LEN];
    ws_batch_clear(b);
    for (int t = 0; t < BATCH; t++) {
        if (ws_batch_begin_traj(b, 0) != WS_OK) abort();
        for (int i = 0; i < N_INSTR + N_QUERY; i++) {
            ws_xorshift64(&s);
            int n = 1 + (int)(s % (uint64_t)c->max_fact_len);
            for (int j = 0; j < n; j++) ids[j] = (int32_t)((s >> (8 + 10 * j)) % c->vocab_cap);
            ws_status st = i < N_INSTR ? ws_batch_add_instr(b, ids, n, (int)(s >> 60) & 1)
                                       : ws_batch_add_query(b, ids, n, (int)(s >> 61) & 1);
            if (st != WS_OK) abort();
        }
    }
}

/* Mean milliseconds per step (train: step + AdamW) over at least `seconds`. */
static double time_steps(ws_exec *x, ws_batch *b, float *w, int train, double seconds)
{
    ws_model *m = ws_exec_model(x);
    ws_error err;
    ws_optim_config oc = ws_optim_config_default();
    int iters = 0;
    double t0 = ws_clock_mono_s(), t;
    do {
        ws_status st = ws_exec_step(x, b, w, w, train ? WS_STEP_TRAIN : WS_STEP_INFER, 1.0f,
                                    NULL, NULL, &err);
        if (st == WS_OK && train) st = ws_model_adamw_step(m, &oc, NULL, &err);
        if (st != WS_OK) {
            fprintf(stderr, "bench_mixers: %s\n", err.msg);
            exit(1);
        }
        iters++;
        t = ws_clock_mono_s();
    } while (t - t0 < seconds || iters < 3);
    return 1e3 * (t - t0) / iters;
}

typedef struct {
    int kind;
    char slots[16]; /* "upd+ext", "upd", "ext" */
    size_t params;
    double train_ms, infer_ms;
    slot_flops flops;
} row;

/* Builds the model with kind in the first slot combination it accepts; 0 and a
 * message when every one is refused. */
static int build(ws_backend *be, int kind, ws_model **m, ws_model_config *c, row *r,
                 char *why, size_t why_n)
{
    static const struct { int upd, ext; const char *name; } tries[] = {
        {1, 1, "upd+ext"}, {1, 0, "upd"}, {0, 1, "ext"}};
    ws_error err = {0};
    for (int i = 0; i < 3; i++) {
        *c = bench_config();
        if (tries[i].upd) c->upd_mixer = kind;
        if (tries[i].ext) c->ext_mixer = kind;
        if (ws_model_new(m, c, be, 1, &err) == WS_OK) {
            snprintf(r->slots, sizeof r->slots, "%s", kind == WS_MIXER_MHA ? "all" : tries[i].name);
            return 1;
        }
        snprintf(why, why_n, "%s", err.msg);
    }
    return 0;
}

static int measure(ws_backend *be, int kind, double seconds, row *r, char *why, size_t why_n)
{
    ws_model *m;
    ws_model_config c;
    memset(r, 0, sizeof *r);
    r->kind = kind;
    if (!build(be, kind, &m, &c, r, why, why_n)) return 0;
    ws_error err;
    ws_batch *b;
    ws_exec *x;
    float *w;
    if (ws_exec_new(&x, m, &err) != WS_OK || ws_batch_new(&b, &c) != WS_OK ||
        ws_model_state_alloc(m, BATCH, &w, &err) != WS_OK ||
        ws_model_state_init(m, w, 0, BATCH, &err) != WS_OK) {
        fprintf(stderr, "bench_mixers: setup failed\n");
        exit(1);
    }
    build_batch(b, &c);
    r->params = ws_model_n_params(m);
    r->flops = mixer_flops(&c);
    time_steps(x, b, w, 1, 0.3); /* warm the arena and caches */
    r->train_ms = time_steps(x, b, w, 1, seconds);
    r->infer_ms = time_steps(x, b, w, 0, seconds);
    ws_backend_release(be, w);
    ws_batch_free(b);
    ws_exec_free(x);
    ws_model_free(m);
    return 1;
}

int main(int argc, char **argv)
{
    ws_backend_prefer_passive_waits(argv);
    double seconds = 2.0;
    int threads = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--seconds S] [--threads N]\n", argv[0]);
            return 2;
        }
    }
    ws_error err;
    ws_backend *be;
    if (ws_backend_cpu_new(&be, threads, &err) != WS_OK) {
        fprintf(stderr, "bench_mixers: %s\n", err.msg);
        return 1;
    }
    ws_model_config c = bench_config();
    printf("mixers on the CPU backend (%d thread%s): d=%d, %d heads, T=%d, %d+%d layers, batch "
           "%d trajectories x %d instructions x %d queries\n",
           threads, threads > 1 ? "s" : "", c.d, c.n_heads, c.n_state, c.n_upd_layers,
           c.n_ext_layers, BATCH, N_INSTR, N_QUERY);
    printf("%-14s %-8s %9s %10s %6s %10s %6s %11s %11s %11s %6s\n", "mixer", "slots", "params",
           "train ms", "x mha", "infer ms", "x mha", "upd MFLOP", "ext MFLOP", "mix MFLOP",
           "x mha");
    row rows[WS_MIXER_COUNT];
    int n = 0;
    for (int k = 0; k < WS_MIXER_COUNT; k++) {
        char why[256] = "";
        if (!measure(be, k, seconds, &rows[n], why, sizeof why)) {
            printf("%-14s skipped: %s\n", ws_mixer_name(k), why);
            continue;
        }
        const row *r = &rows[n], *base = &rows[0]; /* mha comes first */
        double mix = r->flops.upd + r->flops.ext, base_mix = base->flops.upd + base->flops.ext;
        printf("%-14s %-8s %9zu %10.1f %6.2f %10.1f %6.2f %11.2f %11.2f %11.2f %6.2f\n",
               ws_mixer_name(k), r->slots, r->params, r->train_ms, r->train_ms / base->train_ms,
               r->infer_ms, r->infer_ms / base->infer_ms, r->flops.upd / 1e6, r->flops.ext / 1e6,
               mix / 1e6, mix / base_mix);
        n++;
    }
    printf("(FLOPs: forward, MIXERS.md §7 formulas over the mixer slots of one step; a "
           "backward costs about 2x the forward's products)\n");
    printf("{\"bench\":\"mixers\",\"threads\":%d,\"config\":{\"d\":%d,\"heads\":%d,\"T\":%d,"
           "\"upd_layers\":%d,\"ext_layers\":%d,\"batch\":%d,\"instr\":%d,\"queries\":%d},"
           "\"mixers\":[",
           threads, c.d, c.n_heads, c.n_state, c.n_upd_layers, c.n_ext_layers, BATCH, N_INSTR,
           N_QUERY);
    for (int i = 0; i < n; i++)
        printf("%s{\"mixer\":\"%s\",\"slots\":\"%s\",\"params\":%zu,\"train_ms\":%.3f,"
               "\"infer_ms\":%.3f,\"train_ratio\":%.3f,\"infer_ratio\":%.3f,"
               "\"upd_mflop\":%.3f,\"ext_mflop\":%.3f}",
               i ? "," : "", ws_mixer_name(rows[i].kind), rows[i].slots, rows[i].params,
               rows[i].train_ms, rows[i].infer_ms, rows[i].train_ms / rows[0].train_ms,
               rows[i].infer_ms / rows[0].infer_ms, rows[i].flops.upd / 1e6,
               rows[i].flops.ext / 1e6);
    printf("]}\n");
    ws_backend_free(be);
    return 0;
}
