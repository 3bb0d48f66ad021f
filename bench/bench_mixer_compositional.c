/* bench_mixer_compositional.c — the cost of one compositional sub-block against
 * multi-head attention at the same width: the real mixers (model/mixer.h) in
 * SELF mode on B segments of N rows, forward + backward timed, next to the
 * forward FLOP formulas of ../shared/MIXERS.md §7 (backward ≈ 2× the forward's
 * products, so a step ≈ 3× the forward):
 *   MHA:           8Nd² + 4N²d + 5hN²
 *   compositional: 4NdSd_k + 2NdRd_v + 2SN²d_k + 5SN² + 2SRN²d_v + 2NdSd_r
 *                  + 2SRNd_vd_r + 2SRNd_r + 5SRN + 2SRNd_v + 2NSd_vd
 *
 *   bench_mixer_compositional [--n 16] [--d 64] [--heads 4] [--dr 16] [--batch 1]
 *                             [--reps N] [--threads 1]
 * Each time is the best of 5 rounds of reps steps (on a shared machine load only
 * adds time).
 * Rows: MHA with h heads, compositional with S = h searches and R = 1, 2, 4.
 * Prints a table and one JSON line. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/mixer.h"
#include "base/ws_clock.h"

typedef struct {
    int n, d, heads, dr, batch, reps, threads;
} options;

static double flops_mha(const options *o)
{
    double N = o->n, d = o->d, h = o->heads;
    return 8 * N * d * d + 4 * N * N * d + 5 * h * N * N;
}

static double flops_comp(const options *o, int R)
{
    double N = o->n, d = o->d, S = o->heads, dk = d / S, dv = d / S, dr = o->dr;
    return 4 * N * d * S * dk + 2 * N * d * R * dv + 2 * S * N * N * dk + 5 * S * N * N +
           2 * S * R * N * N * dv + 2 * N * d * S * dr + 2 * S * R * N * dv * dr +
           2 * S * R * N * dr + 5 * S * R * N + 2 * S * R * N * dv + 2 * N * S * dv * d;
}

static ws_status dev_random(ws_backend *be, float **p, size_t n, unsigned seed)
{
    WS_TRY(ws_backend_alloc(be, n * sizeof(float), (void **)p));
    float *h = malloc(n * sizeof *h);
    if (!h) return WS_ERR_NOMEM;
    srand(seed);
    for (size_t i = 0; i < n; i++) h[i] = (float)rand() / RAND_MAX - 0.5f;
    ws_status st = ws_backend_upload(be, *p, h, n * sizeof *h);
    free(h);
    return st;
}

/* Microseconds per forward + backward of the upd.0.self sub-block's mixer. */
static ws_status time_mixer(const options *o, ws_backend *be, int kind, int R, double *us)
{
    ws_model_config c = ws_model_config_default();
    c.d = o->d, c.n_heads = o->heads, c.n_state = o->n, c.n_upd_layers = 1,
    c.n_ext_layers = 1;
    c.upd_mixer = kind, c.comp_searches = o->heads, c.comp_retrievals = R, c.comp_dim = o->dr;
    ws_model *m;
    ws_error err;
    if (ws_model_new(&m, &c, be, 1, &err) != WS_OK) {
        fprintf(stderr, "model: %s\n", err.msg);
        return WS_ERR_INVALID;
    }
    int B = o->batch, N = o->n;
    ws_attn_seg *segs_host = malloc((size_t)B * sizeof *segs_host), *segs;
    if (!segs_host) return WS_ERR_NOMEM;
    for (int b = 0; b < B; b++)
        segs_host[b] = (ws_attn_seg){b * N, N, b * N, N, b * o->heads * N * N};
    WS_TRY(ws_backend_alloc(be, (size_t)B * sizeof *segs, (void **)&segs));
    WS_TRY(ws_backend_upload(be, segs, segs_host, (size_t)B * sizeof *segs));
    ws_mix_shape s = {B * N, B * N, segs, segs_host, B, N, N, (size_t)B * N * N};
    const ws_mixer *mx = ws_mixer_find(kind);
    size_t rows = (size_t)B * N * o->d;
    float *act, *scratch, *x, *out, *d_out, *d_x;
    WS_TRY(ws_backend_alloc(be, mx->act_floats(&c, WS_MIX_SELF, &s) * sizeof(float),
                            (void **)&act));
    WS_TRY(ws_backend_alloc(be, mx->scratch_floats(&c, WS_MIX_SELF, &s) * sizeof(float),
                            (void **)&scratch));
    WS_TRY(dev_random(be, &x, rows, 1));
    WS_TRY(dev_random(be, &d_out, rows, 2));
    WS_TRY(dev_random(be, &out, rows, 3));
    WS_TRY(dev_random(be, &d_x, rows, 4));
    ws_mix_call call = {.m = m, .p = &m->off.upd[0].self.p, .mode = WS_MIX_SELF, .s = s, .act = act,
                        .scratch = scratch, .x = x, .keys = x, .out = out, .d_out = d_out,
                        .d_x = d_x, .d_keys = d_x};
    WS_TRY(mx->forward(&call)); /* warm-up: scratch buffers, caches */
    WS_TRY(mx->backward(&call));
    /* the best of 5 rounds: the machine is shared, and load only adds time */
    *us = INFINITY;
    for (int round = 0; round < 5; round++) {
        double t0 = ws_clock_mono_s();
        for (int r = 0; r < o->reps; r++) {
            WS_TRY(mx->forward(&call));
            WS_TRY(mx->backward(&call));
        }
        WS_TRY(be->ops->sync(be));
        *us = fmin(*us, 1e6 * (ws_clock_mono_s() - t0) / o->reps);
    }
    float *bufs[] = {act, scratch, x, out, d_out, d_x};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) ws_backend_release(be, bufs[i]);
    ws_backend_release(be, segs);
    free(segs_host);
    ws_model_free(m);
    return WS_OK;
}

int main(int argc, char **argv)
{
    ws_backend_prefer_passive_waits(argv);
    options o = {.n = 16, .d = 64, .heads = 4, .dr = 16, .batch = 1, .reps = 500, .threads = 1};
    for (int i = 1; i + 1 < argc; i += 2) {
        struct { const char *flag; int *dst; } f[] = {
            {"--n", &o.n},       {"--d", &o.d},         {"--heads", &o.heads},
            {"--dr", &o.dr},     {"--batch", &o.batch}, {"--reps", &o.reps},
            {"--threads", &o.threads}};
        size_t k = 0;
        while (k < sizeof f / sizeof f[0] && strcmp(argv[i], f[k].flag)) k++;
        if (k == sizeof f / sizeof f[0]) {
            fprintf(stderr, "usage: see the comment at the top of the file\n");
            return 2;
        }
        *f[k].dst = atoi(argv[i + 1]);
    }
    ws_error err;
    ws_backend *be;
    if (ws_backend_cpu_new(&be, o.threads, &err) != WS_OK) return 1;
    static const int Rs[] = {1, 2, 4};
    double us_mha, us[3];
    if (time_mixer(&o, be, WS_MIXER_MHA, 1, &us_mha) != WS_OK) return 1;
    for (int i = 0; i < 3; i++)
        if (time_mixer(&o, be, WS_MIXER_COMPOSITIONAL, Rs[i], &us[i]) != WS_OK) return 1;
    double f_mha = flops_mha(&o);
    printf("sub-block forward+backward, SELF, %d segment(s) of N = %d rows, d = %d, %d thread(s), "
           "best of 5 x %d reps\n",
           o.batch, o.n, o.d, o.threads, o.reps);
    printf("%-28s %12s %10s %12s %9s %9s\n", "mixer", "fwd MFLOP", "vs MHA", "us/step", "vs MHA",
           "GFLOP/s");
    printf("%-28s %12.3f %10.2f %12.1f %9.2f %9.2f\n", "mha", f_mha / 1e6, 1.0, us_mha, 1.0,
           3 * f_mha * o.batch / (us_mha * 1e3));
    for (int i = 0; i < 3; i++) {
        double f = flops_comp(&o, Rs[i]);
        char name[48];
        snprintf(name, sizeof name, "compositional S%d R%d d_r%d", o.heads, Rs[i], o.dr);
        printf("%-28s %12.3f %10.2f %12.1f %9.2f %9.2f\n", name, f / 1e6, f / f_mha, us[i],
               us[i] / us_mha, 3 * f * o.batch / (us[i] * 1e3));
    }
    printf("{\"bench\":\"mixer_compositional\",\"n\":%d,\"d\":%d,\"heads\":%d,\"dr\":%d,"
           "\"batch\":%d,\"threads\":%d,\"mha\":{\"mflop\":%.4f,\"us\":%.2f}",
           o.n, o.d, o.heads, o.dr, o.batch, o.threads, f_mha / 1e6, us_mha);
    for (int i = 0; i < 3; i++)
        printf(",\"comp_r%d\":{\"mflop\":%.4f,\"us\":%.2f}", Rs[i], flops_comp(&o, Rs[i]) / 1e6,
               us[i]);
    printf("}\n");
    ws_backend_free(be);
    return 0;
}
