/* bench_mixer_simplicial2.c — the simplicial2 mixer next to MHA (issue 7):
 *
 * 1. Cost: one forward and one forward+backward of each mixer sub-block (the
 *    branch mixer(LN(x), keys), called through model/mixer.h), SELF (Updater, N
 *    state rows of which M are virtual) and CROSS (Extractor, N queries reading
 *    N state rows), at N = 16, d = 64 by default, batched over B trajectories;
 *    the forward FLOPs of MIXERS.md §7 printed beside the measured time.
 * 2. Scale at init (MIXERS.md §2.5): the 2-simplicial logits and the entropy
 *    of the softmax over pairs on the model's real initialisation (generic
 *    init, ws_model_new) and real inputs: SELF at the Updater's first layer on
 *    LN(W_0 + P), CROSS at the Extractor's first layer on the W_t of one step
 *    and the task's query embeddings; for τ = 1 (the authors), 1/√d2 and 1/d2.
 * Prints tables and one JSON line.
 *   bench_mixer_simplicial2 [--n N] [--d D] [--batch B] [--virtual M] [--heads2 K2]
 *                           [--dim2 D2] [--seconds S] [--threads T]
 * Idle OpenMP threads sleep (OMP_WAIT_POLICY=passive) unless the caller sets it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/mixer.h"
#include "kernels/mixer_ops_simplicial2.h"
#include "model/tasks/task.h"
#include "base/ws_clock.h"
#include "base/ws_rng.h"

typedef struct {
    int n, d, batch, virt, heads, k2, d2, threads;
    double seconds;
} opts;

static void die(const char *what, const ws_error *err)
{
    fprintf(stderr, "bench_mixer_simplicial2: %s: %s\n", what, err ? err->msg : "failed");
    exit(1);
}

static void ok(ws_status st, const char *what)
{
    if (st != WS_OK) die(what, NULL);
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static float gauss(void)
{
    double u[2];
    for (int k = 0; k < 2; k++) {
        u[k] = ((ws_xorshift64(&rng_state) >> 11) + 1.0) * (1.0 / 9007199254740994.0);
    }
    return (float)(sqrt(-2.0 * log(u[0])) * cos(6.283185307179586 * u[1]));
}

static ws_model_config config(const opts *o, int upd, int ext, float tau)
{
    ws_model_config c = ws_model_config_default();
    c.d = o->d, c.n_heads = o->heads, c.n_state = o->n, c.n_upd_layers = 1, c.n_ext_layers = 1;
    c.vocab_cap = 64, c.n_overflow = 4;
    c.s2_virtual = o->virt, c.s2_heads = o->k2, c.s2_dim = o->d2, c.s2_tau = tau;
    c.upd_mixer = upd, c.ext_mixer = ext;
    return c;
}

/* ---- 1. cost --------------------------------------------------------------- */

/* Forward FLOPs of MIXERS.md §7 (a multiply-add is 2). */
static double flops_mha(const opts *o, int self)
{
    double N = o->n, d = o->d, h = o->heads;
    return self ? 8 * N * d * d + 4 * N * N * d + 5 * h * N * N
                : 4 * N * d * d + 4 * N * d * d + 4 * N * N * d + 5 * h * N * N;
}

/* MIXERS.md §7 "1-simplicial part with virtuals" (SELF; N counts the virtual
 * rows too, M of them) or cross MHA without its out-projection (CROSS), plus
 * our W_O of (d + d2) × d; then the "2-simplicial part" with the authors'
 * projections (all four for every row: 8·N·d·d2) and, in CROSS mode, all N²
 * key pairs (M → N). */
static double flops_s2(const opts *o, int self)
{
    double N = o->n, d = o->d, d2 = o->d2, K2 = o->k2, dl = d2 / K2, h = o->heads;
    double M = self ? o->virt : N, Nq = self ? N - M : N;
    double one = self ? 6 * N * d * d + 4 * Nq * Nq * d + 4 * M * N * d + 5 * h * (Nq * Nq + M * N)
                      : 6 * N * d * d + 4 * N * N * d + 5 * h * N * N;
    one += 2 * N * (d + d2) * d;
    double two = 8 * N * d * d2 + 4 * Nq * M * d2 + 2 * M * M * d2 + 15 * Nq * M * M +
                 K2 * (2 * M * dl * dl * dl + 2 * M * M * dl * dl) + 2 * Nq * M * M * d2 +
                 8 * N * d2;
    return one + two;
}

typedef struct {
    ws_model *m;
    const ws_mixer *mx;
    ws_mix_call call;
    ws_attn_seg *segs;
    float *bufs[7];
} mix_bench;

/* A model with the mixer in the slot, random inputs and one segment per
 * trajectory (N queries, N keys). */
static void bench_open(mix_bench *b, ws_backend *be, const opts *o, int kind, ws_mix_mode mode)
{
    ws_error err;
    ws_model_config c = config(o, mode == WS_MIX_SELF ? kind : WS_MIXER_MHA,
                               mode == WS_MIX_CROSS ? kind : WS_MIXER_MHA, 1.0f);
    if (ws_model_new(&b->m, &c, be, 1, &err) != WS_OK) die("model", &err);
    b->mx = ws_mixer_find(kind);
    int B = o->batch, N = o->n, rows = B * N;
    b->segs = malloc((size_t)B * sizeof *b->segs);
    if (!b->segs) die("out of memory", NULL);
    for (int t = 0; t < B; t++)
        b->segs[t] = (ws_attn_seg){t * N, N, t * N, N, t * o->heads * N * N};
    ws_mix_shape s = {rows, rows, b->segs, b->segs, B, N, N, (size_t)B * N * N};
    size_t nd = (size_t)rows * o->d;
    size_t sizes[7] = {nd, nd, nd, nd, nd, b->mx->act_floats(&c, mode, &s),
                       b->mx->scratch_floats(&c, mode, &s)};
    for (int k = 0; k < 7; k++) {
        ok(ws_backend_alloc(be, (sizes[k] ? sizes[k] : 1) * sizeof(float), (void **)&b->bufs[k]),
           "alloc");
        float *h = malloc((sizes[k] ? sizes[k] : 1) * sizeof *h);
        if (!h) die("out of memory", NULL);
        for (size_t i = 0; i < sizes[k]; i++) h[i] = k < 5 ? gauss() : 0.0f;
        ok(ws_backend_upload(be, b->bufs[k], h, sizes[k] * sizeof *h), "upload");
        free(h);
    }
    b->call = (ws_mix_call){.m = b->m,
                            .p = mode == WS_MIX_SELF ? &b->m->off.upd[0].self.p
                                                     : &b->m->off.ext[0].cross.p,
                            .mode = mode, .s = s, .act = b->bufs[5], .scratch = b->bufs[6],
                            .x = b->bufs[0], .keys = mode == WS_MIX_SELF ? b->bufs[0] : b->bufs[1],
                            .out = b->bufs[2], .d_out = b->bufs[3], .d_x = b->bufs[4],
                            .d_keys = b->bufs[4]};
}

static void bench_close(mix_bench *b)
{
    for (int k = 0; k < 7; k++) ws_backend_release(b->m->be, b->bufs[k]);
    free(b->segs);
    ws_model_free(b->m);
}

/* Seconds per call of forward (with_backward 0) or forward+backward: the
 * fastest of the calls made in `seconds` (at least 3), since on a shared
 * machine the mean mostly measures the neighbours. */
static double time_mixer(mix_bench *b, int with_backward, double seconds)
{
    long reps = 0;
    double t0 = ws_clock_mono_s(), best = INFINITY;
    do {
        double t1 = ws_clock_mono_s();
        ok(b->mx->forward(&b->call), "forward");
        if (with_backward) ok(b->mx->backward(&b->call), "backward");
        ok(b->m->be->ops->sync(b->m->be), "sync");
        best = fmin(best, ws_clock_mono_s() - t1);
        reps++;
    } while (ws_clock_mono_s() - t0 < seconds || reps < 3);
    return best;
}

/* ---- 2. scale at init -------------------------------------------------------- */

typedef struct {
    double mean, sd, entropy, max_entropy, top;
} s2_scale;

/* Statistics of the logits and probabilities of one 2-simplicial attention. */
static s2_scale scale_of(ws_backend *be, const ws_s2_args *a, const ws_s2_seg *segs)
{
    size_t n = 0;
    for (int i = 0; i < a->n_segs; i++)
        n += (size_t)a->n_heads * segs[i].q_len * segs[i].k_len * segs[i].k_len;
    float *lg = malloc(n * sizeof *lg), *pr = malloc(n * sizeof *pr);
    if (!lg || !pr) die("out of memory", NULL);
    ok(ws_backend_download(be, lg, a->logits, n * sizeof *lg), "download");
    ok(ws_backend_download(be, pr, a->probs, n * sizeof *pr), "download");
    s2_scale s = {0};
    double sq = 0.0;
    for (size_t i = 0; i < n; i++) s.mean += lg[i], sq += (double)lg[i] * lg[i];
    s.mean /= n;
    s.sd = sqrt(fmax(sq / n - s.mean * s.mean, 0.0));
    long rows = 0;
    for (int i = 0; i < a->n_segs; i++) {
        int pairs = segs[i].k_len * segs[i].k_len;
        s.max_entropy = log(pairs);
        for (long r = 0; r < (long)a->n_heads * segs[i].q_len; r++, rows++) {
            const float *p = pr + segs[i].p_off + r * pairs;
            double h = 0.0, top = 0.0;
            for (int t = 0; t < pairs; t++) {
                if (p[t] > 0) h -= p[t] * log(p[t]);
                top = fmax(top, p[t]);
            }
            s.entropy += h, s.top += top;
        }
    }
    s.entropy /= rows, s.top /= rows;
    free(lg), free(pr);
    return s;
}

/* The 2-simplicial logits of the model's first simplicial2 sub-block after one
 * step of B conj trajectories from W_0 (x: the sub-block's LN'd input from the
 * plan; keys: x in SELF mode, W_t in CROSS mode), computed by the backend ops
 * from the model's own tensors. */
/* Offset of tensor "<prefix><suffix>" (the mixer's slots are its own). */
static size_t tensor_off(const ws_model *m, const char *prefix, const char *suffix)
{
    char name[64];
    snprintf(name, sizeof name, "%s%s", prefix, suffix);
    const ws_tensor_info *t = ws_model_tensor_by_name(m, name);
    if (!t) die(name, NULL);
    return t->offset;
}

static s2_scale init_scale(ws_backend *be, const opts *o, ws_mix_mode mode, float tau)
{
    ws_error err;
    int self = mode == WS_MIX_SELF;
    ws_model_config c = config(o, self ? WS_MIXER_SIMPLICIAL2 : WS_MIXER_MHA,
                               self ? WS_MIXER_MHA : WS_MIXER_SIMPLICIAL2, tau);
    ws_model *m;
    ws_exec *ex;
    if (ws_model_new(&m, &c, be, 1, &err) != WS_OK) die("model", &err);
    if (ws_exec_new(&ex, m, &err) != WS_OK) die("context", &err);
    ws_task_params tp;
    ws_task_params_default("conj", &tp);
    ws_task *task;
    ws_batch *batch;
    if (ws_task_new(&task, &tp, o->batch, ws_model_vocab(m), &err) != WS_OK) die("task", &err);
    if (ws_batch_new(&batch, &c) != WS_OK) die("batch", NULL);
    for (int t = 0; t < o->batch; t++) {
        ok(ws_batch_begin_traj(batch, 1), "batch");
        ok(ws_task_reset(task, t, 1000 + t), "task");
        if (ws_task_step(task, t, batch, NULL, &err) != WS_OK) die("task step", &err);
    }
    float *w;
    ok(ws_model_state_alloc(m, o->batch, &w, &err), "state");
    if (ws_exec_step(ex, batch, NULL, w, WS_STEP_INFER, 1.0f, NULL, NULL, &err) != WS_OK)
        die("step", &err);

    const ws_mix_act *act = self ? &ex->plan.upd[0].self : &ex->plan.ext[0].cross;
    const ws_mix_shape *s = &act->shape;
    const char *prefix = self ? "upd.0.self" : "ext.0.cross";
    const float *x = act->ln.out, *keys = self ? x : w;
    int d = c.d, d2 = c.s2_dim, M = c.s2_virtual;
    ws_s2_seg *segs = malloc((size_t)s->n_segs * sizeof *segs);
    if (!segs) die("out of memory", NULL);
    size_t pairs = 0, probs = 0;
    int max_q = 0, max_k = 0;
    for (int i = 0; i < s->n_segs; i++) { /* SELF: standard rows over virtual pairs */
        const ws_attn_seg *g = &s->segs_host[i];
        int ql = self ? g->q_len - M : g->q_len, kl = self ? M : g->k_len;
        segs[i] = (ws_s2_seg){g->q_off, ql, self ? g->k_off + g->k_len - M : g->k_off, kl,
                              (int32_t)probs, (int32_t)pairs};
        pairs += (size_t)kl * kl, probs += (size_t)c.s2_heads * ql * kl * kl;
        max_q = ql > max_q ? ql : max_q, max_k = kl > max_k ? kl : max_k;
    }
    float *p, *luv, *lg, *pr, *pair, *out;
    ws_s2_seg *dsegs;
    ok(ws_backend_alloc(be, (size_t)s->n * d2 * sizeof(float), (void **)&p), "alloc");
    ok(ws_backend_alloc(be, (size_t)s->n_keys * 3 * d2 * sizeof(float), (void **)&luv), "alloc");
    ok(ws_backend_alloc(be, probs * sizeof(float), (void **)&lg), "alloc");
    ok(ws_backend_alloc(be, probs * sizeof(float), (void **)&pr), "alloc");
    ok(ws_backend_alloc(be, pairs * d2 * sizeof(float), (void **)&pair), "alloc");
    ok(ws_backend_alloc(be, (size_t)s->n * d2 * sizeof(float), (void **)&out), "alloc");
    ok(ws_backend_alloc(be, (size_t)s->n_segs * sizeof *segs, (void **)&dsegs), "alloc");
    ok(ws_backend_upload(be, dsegs, segs, (size_t)s->n_segs * sizeof *segs), "upload");
    ok(be->ops->linear_forward(be, p, x, WS_P(m, tensor_off(m, prefix, ".s2.p.w")), NULL, s->n,
                               d, d2), "p");
    ok(be->ops->linear_forward(be, luv, keys, WS_P(m, tensor_off(m, prefix, ".s2.luv.w")), NULL,
                               s->n_keys, d, 3 * d2), "luv");
    ws_s2_args a = {.out = out, .ldo = d2, .logits = lg, .probs = pr, .pair = pair, .p = p,
                    .l1 = luv, .l2 = luv + d2, .u = luv + 2 * d2, .ldp = d2, .ldl1 = 3 * d2,
                    .ldl2 = 3 * d2, .ldu = 3 * d2,
                    .b = WS_P(m, tensor_off(m, prefix, ".s2.B")), .segs = dsegs,
                    .n_segs = s->n_segs, .n_heads = c.s2_heads, .d2 = d2, .tau = tau,
                    .max_q_len = max_q, .max_k_len = max_k};
    ok(be->ops->simplicial->pair_forward(be, &a), "pairs");
    ok(be->ops->simplicial->attention_forward(be, &a), "attention");
    s2_scale r = scale_of(be, &a, segs);
    void *bufs[] = {p, luv, lg, pr, pair, out, dsegs, w};
    for (size_t k = 0; k < sizeof bufs / sizeof *bufs; k++) ws_backend_release(be, bufs[k]);
    free(segs);
    ws_batch_free(batch);
    ws_task_free(task);
    ws_exec_free(ex);
    ws_model_free(m);
    return r;
}

static int parse(int argc, char **argv, opts *o)
{
    *o = (opts){.n = 16, .d = 64, .batch = 32, .virt = 4, .heads = 4, .k2 = 1, .d2 = 32,
                .threads = 1, .seconds = 1.0};
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *f = argv[i];
        double v = atof(argv[i + 1]);
        if (!strcmp(f, "--n")) o->n = (int)v;
        else if (!strcmp(f, "--d")) o->d = (int)v;
        else if (!strcmp(f, "--batch")) o->batch = (int)v;
        else if (!strcmp(f, "--virtual")) o->virt = (int)v;
        else if (!strcmp(f, "--heads")) o->heads = (int)v;
        else if (!strcmp(f, "--heads2")) o->k2 = (int)v;
        else if (!strcmp(f, "--dim2")) o->d2 = (int)v;
        else if (!strcmp(f, "--seconds")) o->seconds = v;
        else if (!strcmp(f, "--threads")) o->threads = (int)v;
        else return -1;
    }
    return argc % 2 == 1 && o->k2 >= 1 && o->d2 % o->k2 == 0 && o->virt < o->n ? 0 : -1;
}

int main(int argc, char **argv)
{
    ws_backend_prefer_passive_waits(argv);
    opts o;
    if (parse(argc, argv, &o)) {
        fprintf(stderr, "usage: bench_mixer_simplicial2 [--n N] [--d D] [--batch B] [--virtual M] "
                        "[--heads H] [--heads2 K2] [--dim2 D2] [--seconds S] [--threads T]\n");
        return 2;
    }
    ws_error err;
    ws_backend *be;
    if (ws_backend_cpu_new(&be, o.threads, &err) != WS_OK) die("backend", &err);
    printf("mixer sub-blocks, %d trajectories x N=%d rows, d=%d, h=%d, K2=%d, d2=%d, M=%d "
           "(SELF), %d thread(s)\n", o.batch, o.n, o.d, o.heads, o.k2, o.d2, o.virt, o.threads);
    printf("  %-22s %14s %12s %12s %10s\n", "sub-block", "fwd MFLOP/traj", "fwd ms", "fwd+bwd ms",
           "vs mha");
    double ms[2][2][2];
    for (int mode = 0; mode < 2; mode++)
        for (int k = 0; k < 2; k++) {
            mix_bench b;
            ws_mix_mode md = mode ? WS_MIX_CROSS : WS_MIX_SELF;
            bench_open(&b, be, &o, k ? WS_MIXER_SIMPLICIAL2 : WS_MIXER_MHA, md);
            ms[mode][k][0] = 1e3 * time_mixer(&b, 0, o.seconds);
            ms[mode][k][1] = 1e3 * time_mixer(&b, 1, o.seconds);
            bench_close(&b);
            double fl = k ? flops_s2(&o, !mode) : flops_mha(&o, !mode);
            char name[32];
            snprintf(name, sizeof name, "%s %s", k ? "simplicial2" : "mha",
                     mode ? "cross" : "self");
            printf("  %-22s %14.3f %12.3f %12.3f %9.2fx\n", name, fl / 1e6, ms[mode][k][0],
                   ms[mode][k][1], ms[mode][k][1] / ms[mode][0][1]);
        }

    printf("\n2-simplicial logits at init (generic init, one conj step from W_0, %d "
           "trajectories)\n", o.batch);
    printf("  %-7s %-12s %10s %10s %12s %12s %10s\n", "slot", "tau", "logit mean", "logit sd",
           "entropy", "max entropy", "top prob");
    s2_scale sc[2][3];
    for (int mode = 0; mode < 2; mode++)
        for (int t = 0; t < 3; t++) {
            float tau = t == 0 ? 1.0f : t == 1 ? 1.0f / sqrtf((float)o.d2) : 1.0f / (float)o.d2;
            sc[mode][t] = init_scale(be, &o, mode ? WS_MIX_CROSS : WS_MIX_SELF, tau);
            char tn[16];
            snprintf(tn, sizeof tn, t == 0 ? "1" : t == 1 ? "1/sqrt(%d)" : "1/%d", o.d2);
            printf("  %-7s %-12s %10.3f %10.3f %12.3f %12.3f %10.3f\n", mode ? "cross" : "self", tn,
                   sc[mode][t].mean, sc[mode][t].sd, sc[mode][t].entropy, sc[mode][t].max_entropy,
                   sc[mode][t].top);
        }
    printf("{\"bench\":\"mixer_simplicial2\",\"n\":%d,\"d\":%d,\"batch\":%d,\"k2\":%d,\"d2\":%d,"
           "\"virtual\":%d,\"threads\":%d,"
           "\"ms_fwd_bwd\":{\"mha_self\":%.4f,\"s2_self\":%.4f,\"mha_cross\":%.4f,"
           "\"s2_cross\":%.4f},"
           "\"mflop_fwd_per_traj\":{\"mha_self\":%.4f,\"s2_self\":%.4f,\"mha_cross\":%.4f,"
           "\"s2_cross\":%.4f},"
           "\"init_entropy\":{\"self_tau1\":%.4f,\"self_tau_inv_sqrt_d2\":%.4f,"
           "\"self_tau_inv_d2\":%.4f,\"cross_tau1\":%.4f,\"cross_tau_inv_sqrt_d2\":%.4f,"
           "\"cross_tau_inv_d2\":%.4f},"
           "\"init_logit_mean\":{\"self_tau1\":%.4f,\"cross_tau1\":%.4f}}\n",
           o.n, o.d, o.batch, o.k2, o.d2, o.virt, o.threads, ms[0][0][1], ms[0][1][1],
           ms[1][0][1], ms[1][1][1], flops_mha(&o, 1) / 1e6, flops_s2(&o, 1) / 1e6,
           flops_mha(&o, 0) / 1e6, flops_s2(&o, 0) / 1e6, sc[0][0].entropy, sc[0][1].entropy,
           sc[0][2].entropy, sc[1][0].entropy, sc[1][1].entropy, sc[1][2].entropy, sc[0][0].mean,
           sc[1][0].mean);
    ws_backend_free(be);
    return 0;
}
