/* bench_memory.c — what a model remembers: accuracy on told-true, overridden
 * (told false after true) and never-told facts, for K live facts × delay steps of
 * silence since the last instruction (or, with --chatter N, steps that each tell N
 * other facts), on symbols no model has seen (model/probe.h).
 *
 *   build/bench/bench_memory [--checkpoint PATH] [--ks 4,16,64,256]
 *       [--delays 1,10,100,1000,10000] [--traj N] [--instr-per-step N] [--max-arity N] [--seed N]
 *       [--chatter N] [--threads N] [--grow-vocab] [--http] [--http-ks 8] [--http-delays 1,10,100]
 *       [--http-traj N]
 *
 * The checkpoint defaults to the shipped default model (models/default.safetensors).
 * Episodes of every K run in one batch on the model library (CPU backend); with
 * --http the slice --http-ks x --http-delays also runs end to end through a fresh
 * daemon (the one built beside this benchmark, on a temporary data dir, whose
 * "default" is the shipped model) with the same episodes, one session each, and
 * both are printed side by side. --traj N episodes per K (default: 512/K, at
 * least 8). --grow-vocab gives the symbols vocabulary ids as a daemon does (new
 * ids, rows the model never trained on); without it a symbol has no id (its code
 * alone; under the table encoding its overflow bucket, as in training). Prints
 * a table per path and one JSON line. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/checkpoint.h"
#include "model/probe.h"
#ifdef WS_DAEMON_PATH
#include "daemon_proc.h"
#include "probe_http.h"
#include "tmp_dir.h"
#include "base/ws_clock.h"
#endif

typedef struct {
    const char *checkpoint;
    ws_probe_config lib, http;
    int traj, http_traj, threads, with_http;
    int views; /* 0: the checkpoint's; else the library's model runs with these views */
} options;

static int parse_list(const char *s, int *out, int max, int lo)
{
    int n = 0;
    while (*s && n < max) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < lo || v > 10000000) return -1;
        out[n++] = (int)v;
        if (*end && *end != ',') return -1;
        s = *end ? end + 1 : end;
    }
    return *s ? -1 : n;
}

static void set_traj(ws_probe_config *pc, int traj)
{
    for (int i = 0; i < pc->n_ks; i++) {
        int t = traj > 0 ? traj : 512 / pc->ks[i];
        pc->n_traj[i] = t < 8 ? 8 : t;
    }
}

static int parse(int argc, char **argv, options *o)
{
    static const char *def = WS_SOURCE_DIR "/models/default.safetensors";
    *o = (options){.checkpoint = def, .threads = 1};
    o->lib = (ws_probe_config){.n_ks = 4, .ks = {4, 16, 64, 256}, .n_delays = 5,
                               .delays = {1, 10, 100, 1000, 10000}, .instr_per_step = 4,
                               .seed = 0x5EED0001ULL};
    o->http = (ws_probe_config){.n_ks = 1, .ks = {8}, .n_delays = 3, .delays = {1, 10, 100},
                                .instr_per_step = 4};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(a, "--http") || !strcmp(a, "--grow-vocab")) {
            *(a[2] == 'h' ? &o->with_http : &o->lib.grow_vocab) = 1;
            continue;
        }
        if (!v) return -1;
        i++;
        if (!strcmp(a, "--checkpoint")) o->checkpoint = v;
        else if (!strcmp(a, "--ks")) bad = (o->lib.n_ks = parse_list(v, o->lib.ks, WS_PROBE_MAX_KS, 1)) < 1;
        else if (!strcmp(a, "--delays"))
            bad = (o->lib.n_delays = parse_list(v, o->lib.delays, WS_PROBE_MAX_DELAYS, 0)) < 1;
        else if (!strcmp(a, "--http-ks"))
            bad = (o->http.n_ks = parse_list(v, o->http.ks, WS_PROBE_MAX_KS, 1)) < 1;
        else if (!strcmp(a, "--http-delays"))
            bad = (o->http.n_delays = parse_list(v, o->http.delays, WS_PROBE_MAX_DELAYS, 0)) < 1;
        else if (!strcmp(a, "--traj")) o->traj = atoi(v);
        else if (!strcmp(a, "--http-traj")) o->http_traj = atoi(v);
        else if (!strcmp(a, "--instr-per-step")) bad = (o->lib.instr_per_step = atoi(v)) < 1;
        else if (!strcmp(a, "--max-arity"))
            bad = (o->lib.max_arity = atoi(v)) < 1 || o->lib.max_arity > WS_PROBE_ARITY;
        else if (!strcmp(a, "--seed")) o->lib.seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--chatter"))
            bad = (o->lib.chatter = atoi(v)) < 0 || o->lib.chatter > 64;
        else if (!strcmp(a, "--threads")) o->threads = atoi(v);
        else if (!strcmp(a, "--views"))
            bad = (o->views = atoi(v)) < 1;
        else return -1;
        if (bad) return -1;
    }
    o->http.instr_per_step = o->lib.instr_per_step;
    o->http.max_arity = o->lib.max_arity;
    o->http.seed = o->lib.seed;
    o->http.chatter = o->lib.chatter;
    o->http.grow_vocab = 1; /* the library slice beside the daemon's: ids as it gives them */
    set_traj(&o->lib, o->traj);
    set_traj(&o->http, o->http_traj > 0 ? o->http_traj : 8);
    return 0;
}

static const unsigned KIND_MASK[WS_PROBE_KINDS] = {1u << WS_PROBE_TOLD_TRUE,
                                                   1u << WS_PROBE_OVERRIDDEN,
                                                   1u << WS_PROBE_NEVER_TOLD};
static const char *const KIND_NAME[WS_PROBE_KINDS] = {"told-true", "overridden", "never-told"};

static void print_table(const char *title, const ws_probe_config *pc, const ws_probe_result *r)
{
    printf("\n%s\n%6s %-11s", title, "K", "facts");
    for (int di = 0; di < pc->n_delays; di++) printf(" %9d", pc->delays[di]);
    printf("   (delay, steps)\n");
    for (int ki = 0; ki < pc->n_ks; ki++)
        for (int kind = 0; kind <= WS_PROBE_KINDS; kind++) {
            unsigned mask = kind < WS_PROBE_KINDS ? KIND_MASK[kind] : 7u;
            printf("%6d %-11s", pc->ks[ki], kind < WS_PROBE_KINDS ? KIND_NAME[kind] : "all");
            for (int di = 0; di < pc->n_delays; di++) {
                double a = ws_probe_acc(r, ki, di, mask);
                if (a < 0) printf(" %9s", "-");
                else printf(" %8.2f%%", 100.0 * a);
            }
            printf("\n");
        }
}

static void print_json(const char *name, const ws_probe_config *pc, const ws_probe_result *r)
{
    printf("\"%s\":[", name);
    for (int ki = 0; ki < pc->n_ks; ki++)
        for (int di = 0; di < pc->n_delays; di++) {
            printf("%s{\"k\":%d,\"delay\":%d,\"episodes\":%d", ki || di ? "," : "", pc->ks[ki],
                   pc->delays[di], pc->n_traj[ki]);
            for (int kind = 0; kind < WS_PROBE_KINDS; kind++)
                printf(",\"%s\":%.5f,\"n_%s\":%ld", KIND_NAME[kind],
                       ws_probe_acc(r, ki, di, KIND_MASK[kind]), KIND_NAME[kind],
                       r->n[ki][di][kind]);
            printf(",\"all\":%.5f}", ws_probe_acc(r, ki, di, 7u));
        }
    printf("]");
}

#ifdef WS_DAEMON_PATH
static int run_http(const options *o, ws_probe_result *res, double *secs)
{
    char base[] = "/tmp/ws-bench-memory-XXXXXX", dir[64], err[512];
    if (!mkdtemp(base)) return -1;
    snprintf(dir, sizeof dir, "%s/data", base);
    daemon_proc d;
    const char *flags[] = {"--backend", "cpu", NULL};
    if (daemon_start(&d, WS_DAEMON_PATH, dir, flags) != 0) {
        fprintf(stderr, "bench_memory: the daemon did not start (log %s.log)\n", dir);
        return -1;
    }
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", d.port);
    double t0 = ws_clock_mono_s();
    int rc = ws_probe_http_run(url, NULL, &o->http, NULL, res, err, sizeof err);
    *secs = ws_clock_mono_s() - t0;
    daemon_stop(&d);
    if (rc)
        fprintf(stderr, "bench_memory: http: %s (daemon log %s.log)\n", err, dir);
    else
        tmp_dir_remove("bench_memory", base);
    return rc;
}
#endif

int main(int argc, char **argv)
{
    options o;
    if (parse(argc, argv, &o)) {
        fprintf(stderr,
                "usage: bench_memory [--checkpoint PATH] [--ks 4,16,64,256] "
                "[--delays 1,10,100,1000,10000] [--traj N] [--instr-per-step N] [--max-arity N] "
                "[--seed N] [--chatter N] [--threads N] [--views N] [--grow-vocab] [--http] "
                "[--http-ks 8] [--http-delays 1,10,100] [--http-traj N]\n");
        return 2;
    }
    ws_error err = {0};
    ws_backend *be;
    ws_model *m;
    ws_exec *x;
    if (ws_backend_cpu_new(&be, o.threads, &err) != WS_OK ||
        ws_checkpoint_load(&m, o.checkpoint, be, &err) != WS_OK ||
        (o.views && ws_model_set_views(m, o.views, &err) != WS_OK) ||
        ws_exec_new(&x, m, &err) != WS_OK) {
        fprintf(stderr, "bench_memory: %s\n", err.msg);
        return 1;
    }
    const ws_model_config *c = ws_model_config_of(m);
    printf("bench_memory: %s (d=%d, %d heads, T=%d, %d+%d layers, symbol_code %s, %d views), "
           "%d instructions/step, seed %llu, symbols %s, %d chatter instructions/step after\n",
           o.checkpoint, c->d, c->n_heads, c->n_state, c->n_upd_layers, c->n_ext_layers,
           c->symbol_code == WS_SYMBOLS_HASHED ? "hashed" : "table", c->views, o.lib.instr_per_step,
           (unsigned long long)o.lib.seed,
           o.lib.grow_vocab ? "with new vocabulary ids" : "without ids", o.lib.chatter);
    double t0 = ws_clock_mono_s();
    ws_probe_result lib;
    if (ws_probe_run(x, &o.lib, &lib, &err) != WS_OK) {
        fprintf(stderr, "bench_memory: %s\n", err.msg);
        return 1;
    }
    double lib_s = ws_clock_mono_s() - t0;
    print_table("model library (accuracy)", &o.lib, &lib);
    printf("(%.1f s)\n", lib_s);
    int http_ok = 0;
    ws_probe_result http, slice;
    double http_s = 0;
#ifdef WS_DAEMON_PATH
    if (o.with_http) {
        http_ok = run_http(&o, &http, &http_s) == 0;
        if (!http_ok) return 1;
        /* the same slice through the library, episode for episode */
        if (ws_probe_run(x, &o.http, &slice, &err) != WS_OK) {
            fprintf(stderr, "bench_memory: %s\n", err.msg);
            return 1;
        }
        print_table("slice through the daemon over HTTP", &o.http, &http);
        print_table("the same slice through the model library", &o.http, &slice);
        printf("(HTTP %.1f s)\n", http_s);
    }
#else
    if (o.with_http) fprintf(stderr, "bench_memory: built without the daemon: no --http\n");
#endif
    printf("{\"bench\":\"memory\",\"checkpoint\":\"%s\",\"grow_vocab\":%d,\"chatter\":%d,"
           "\"seconds\":%.1f,",
           o.checkpoint, o.lib.grow_vocab, o.lib.chatter, lib_s);
    print_json("library", &o.lib, &lib);
    if (http_ok) {
        printf(",");
        print_json("http", &o.http, &http);
        printf(",");
        print_json("http_slice_library", &o.http, &slice);
    }
    printf("}\n");
    ws_exec_free(x);
    ws_model_free(m);
    ws_backend_free(be);
    return 0;
}
