/* train_main.c — worldstate-train: train a model on a built-in task with
 * truncated gradients, or evaluate a checkpoint at long horizons; and, on a
 * daemon's data directory, export step logs, retrain on them, re-derive
 * sessions' states (offline_cli.c takes those three).
 *
 *   worldstate-train train --task facts --seconds 400 --checkpoint facts.safetensors
 *   worldstate-train eval  --task facts --checkpoint facts.safetensors \
 *                          --horizons 8,100,1000,10000
 *   worldstate-train retrain --data-dir worldstate-data --model default --epochs 5
 * A live progress line goes to stderr on a terminal; --log appends JSON lines. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "offline.h"
#include "checkpoint.h"
#include "trainer.h"

typedef struct {
    int eval_only;
    ws_model_config mc;
    ws_task_params tp;
    ws_train_config tc;
    ws_eval_config ec;
    const char *checkpoint, *resume, *log_path, *ship;
    int eval_every, threads, eval_at_end;
} options;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: worldstate-train train|eval [options]\n"
            "task:     --task recall|facts|conj|life|numbers|memory  --entities N --places N\n"
            "          --move-rate X\n"
            "          --live-facts N --live-facts-min N --max-arity N --instr-per-step N\n"
            "          --override-rate X --active-rate X --queries N   (memory)\n"
            "          --density X --intervention-rate X --images N --non-thorough --horizon N\n"
            "          --data-dir DIR\n"
            "model:    --d N --heads N --state-tokens N --upd-layers N --ext-layers N\n"
            "          --fact-len N --vocab N --overflow N --no-state-norm\n"
            "          --symbol-code hashed|table (hashed: fixed codes of the symbols' bytes)\n"
            "          --upd-mixer NAME --ext-mixer NAME (mha|simplicial2|compositional|rmc|rn)\n"
            "          --s2-virtual N --s2-heads N --s2-dim N --s2-tau X --rn-width N --rn-layers N\n"
            "          --comp-searches N --comp-retrievals N --comp-dim N\n"
            "training: --batch N --rollout N --lifetime fixed|pool --max-age N --update-every N\n"
            "          --lr X --min-lr-ratio X --warmup N --iters N --seconds X --clip X --wd X\n"
            "          --seed N --checkpoint PATH --resume PATH --log PATH --eval-every N\n"
            "          --threads N --ship PATH (also write the parameters alone to PATH)\n"
            "eval:     --horizons H1,H2,... --trajectories N --window N --eval-seed N\n"
            "          (train evaluates at the end too, unless --no-eval)\n");
    ws_off_usage(f, 0);
}

/* Parses an integer/float flag value or fails with a message. */
static int parse_num(const char *flag, const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "worldstate-train: %s wants a number in [%g, %g], got '%s'\n", flag, lo,
                hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_horizons(const char *s, ws_eval_config *ec)
{
    ec->n_horizons = 0;
    while (*s) {
        char *end;
        long h = strtol(s, &end, 10);
        if (end == s || h < 1 || h > 10000000 || ec->n_horizons == WS_EVAL_MAX_HORIZONS ||
            (ec->n_horizons && h <= ec->horizons[ec->n_horizons - 1])) {
            fprintf(stderr, "worldstate-train: --horizons wants ascending positive integers\n");
            return -1;
        }
        ec->horizons[ec->n_horizons++] = (int)h;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return -1;
    }
    return ec->n_horizons ? 0 : -1;
}

typedef struct {
    const char *flag;
    char kind; /* i: int, f: float, u: uint64 */
    void *dst;
    double lo, hi;
} num_flag;

static int parse_args(int argc, char **argv, options *o)
{
    if (argc < 2 || (strcmp(argv[1], "train") && strcmp(argv[1], "eval"))) return -1;
    o->eval_only = !strcmp(argv[1], "eval");
    o->mc = ws_model_config_default();
    o->mc.d = 64, o->mc.n_state = 16, o->mc.vocab_cap = 512, o->mc.n_overflow = 16;
    o->tc = ws_train_config_default();
    o->ec = (ws_eval_config){.n_traj = 64, .window = 4, .seed = 0xE7A1ULL, .n_horizons = 4,
                             .horizons = {8, 100, 1000, 10000}};
    o->threads = 0;
    o->eval_at_end = 1;
    const char *task = "facts";
    double seed = 1;
    o->tp.move_rate = o->tp.density = o->tp.intervention_rate = NAN;
    o->tp.override_rate = o->tp.active_rate = NAN;
    num_flag nums[] = {
        {"--entities", 'i', &o->tp.entities, 1, 1024},
        {"--places", 'i', &o->tp.places, 1, 1024},
        {"--move-rate", 'f', &o->tp.move_rate, 0, 1024},
        {"--density", 'f', &o->tp.density, 0, 1},
        {"--intervention-rate", 'f', &o->tp.intervention_rate, 0, 64},
        {"--images", 'i', &o->tp.images, 1, 16},
        {"--horizon", 'i', &o->tp.horizon, 1, 1e6},
        {"--live-facts", 'i', &o->tp.live_facts, 1, 4096},
        {"--live-facts-min", 'i', &o->tp.live_facts_min, 1, 4096},
        {"--max-arity", 'i', &o->tp.max_arity, 1, 4},
        {"--instr-per-step", 'i', &o->tp.instr_per_step, 1, 64},
        {"--override-rate", 'f', &o->tp.override_rate, 0, 1},
        {"--active-rate", 'f', &o->tp.active_rate, 0, 1},
        {"--queries", 'i', &o->tp.n_queries, 0, 4096},
        {"--overflow", 'i', &o->mc.n_overflow, 1, 1 << 20},
        {"--d", 'i', &o->mc.d, 2, 4096},
        {"--heads", 'i', &o->mc.n_heads, 1, 64},
        {"--state-tokens", 'i', &o->mc.n_state, 1, 1024},
        {"--upd-layers", 'i', &o->mc.n_upd_layers, 0, 64},
        {"--ext-layers", 'i', &o->mc.n_ext_layers, 0, 64},
        {"--fact-len", 'i', &o->mc.max_fact_len, 1, WS_MAX_FACT_LEN},
        {"--vocab", 'i', &o->mc.vocab_cap, 0, 1 << 24},
        {"--rn-width", 'i', &o->mc.rn_width, 1, 4096},
        {"--rn-layers", 'i', &o->mc.rn_layers, 1, 8},
        {"--s2-virtual", 'i', &o->mc.s2_virtual, 1, 64},
        {"--s2-heads", 'i', &o->mc.s2_heads, 0, 16},
        {"--s2-dim", 'i', &o->mc.s2_dim, 1, 1024},
        {"--s2-tau", 'f', &o->mc.s2_tau, 1e-6, 1e4},
        {"--comp-searches", 'i', &o->mc.comp_searches, 1, 64},
        {"--comp-retrievals", 'i', &o->mc.comp_retrievals, 1, 64},
        {"--comp-dim", 'i', &o->mc.comp_dim, 1, 1024},
        {"--batch", 'i', &o->tc.batch, 1, 65536},
        {"--rollout", 'i', &o->tc.rollout, 1, 1e6},
        {"--max-age", 'i', &o->tc.max_age, 1, 1e7},
        {"--update-every", 'i', &o->tc.update_every, 1, 1e6},
        {"--lr", 'f', &o->tc.lr, 1e-8, 10},
        {"--min-lr-ratio", 'f', &o->tc.min_lr_ratio, 0, 1},
        {"--warmup", 'i', &o->tc.warmup, 0, 1e9},
        {"--iters", 'l', &o->tc.iters, 0, 1e12},
        {"--seconds", 'd', &o->tc.seconds, 0, 1e9},
        {"--clip", 'f', &o->tc.clip_norm, 0, 1e9},
        {"--wd", 'f', &o->tc.weight_decay, 0, 10},
        {"--seed", 'D', &seed, 0, 1e15},
        {"--eval-every", 'i', &o->eval_every, 0, 1e9},
        {"--threads", 'i', &o->threads, 0, 256},
        {"--trajectories", 'i', &o->ec.n_traj, 1, 65536},
        {"--window", 'i', &o->ec.window, 1, 1e6},
    };
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        size_t k;
        for (k = 0; k < sizeof nums / sizeof *nums; k++)
            if (!strcmp(a, nums[k].flag)) break;
        if (k < sizeof nums / sizeof *nums) {
            double x;
            if (!v || parse_num(a, v, nums[k].lo, nums[k].hi, &x)) return -1;
            switch (nums[k].kind) {
            case 'i': *(int *)nums[k].dst = (int)x; break;
            case 'l': *(long *)nums[k].dst = (long)x; break;
            case 'f': *(float *)nums[k].dst = (float)x; break;
            default: *(double *)nums[k].dst = x; break;
            }
            i++;
        } else if (!strcmp(a, "--task") && v) task = argv[++i];
        else if (!strcmp(a, "--data-dir") && v) o->tp.data_dir = argv[++i];
        else if ((!strcmp(a, "--upd-mixer") || !strcmp(a, "--ext-mixer")) && v) {
            int kind = ws_mixer_kind_of(argv[++i]);
            if (kind < 0) return -1;
            *(a[2] == 'u' ? &o->mc.upd_mixer : &o->mc.ext_mixer) = kind;
        } else if (!strcmp(a, "--symbol-code") && v) {
            const char *c = argv[++i];
            if (strcmp(c, "hashed") && strcmp(c, "table")) return -1;
            o->mc.symbol_code = strcmp(c, "hashed") ? WS_SYMBOLS_TABLE : WS_SYMBOLS_HASHED;
        } else if (!strcmp(a, "--checkpoint") && v) o->checkpoint = argv[++i];
        else if (!strcmp(a, "--ship") && v) o->ship = argv[++i];
        else if (!strcmp(a, "--resume") && v) o->resume = argv[++i];
        else if (!strcmp(a, "--log") && v) o->log_path = argv[++i];
        else if (!strcmp(a, "--horizons") && v) {
            if (parse_horizons(argv[++i], &o->ec)) return -1;
        } else if (!strcmp(a, "--eval-seed") && v) o->ec.seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(a, "--lifetime") && v) {
            const char *l = argv[++i];
            if (strcmp(l, "fixed") && strcmp(l, "pool")) return -1;
            o->tc.lifetime = strcmp(l, "pool") ? WS_LIFETIME_FIXED : WS_LIFETIME_POOL;
        } else if (!strcmp(a, "--no-state-norm")) o->mc.state_norm = 0;
        else if (!strcmp(a, "--non-thorough")) o->tp.thorough = -1;
        else if (!strcmp(a, "--no-eval")) o->eval_at_end = 0;
        else {
            fprintf(stderr, "worldstate-train: unknown or incomplete option '%s'\n", a);
            return -1;
        }
    }
    o->tc.seed = (uint64_t)seed;
    /* Task defaults first, then the flags given override them. */
    ws_task_params given = o->tp;
    if (!ws_task_params_default(task, &o->tp)) {
        fprintf(stderr, "worldstate-train: unknown task '%s'\n", task);
        return -1;
    }
#define OVERRIDE(f) if (given.f) o->tp.f = given.f
    OVERRIDE(entities); OVERRIDE(places); OVERRIDE(images); OVERRIDE(horizon); OVERRIDE(data_dir);
    OVERRIDE(live_facts); OVERRIDE(live_facts_min); OVERRIDE(max_arity);
    OVERRIDE(instr_per_step); OVERRIDE(n_queries);
#undef OVERRIDE
    /* The rates may be 0 (a static world): NaN marks "not given". */
#define OVERRIDE_RATE(f) if (!isnan(given.f)) o->tp.f = given.f
    OVERRIDE_RATE(move_rate); OVERRIDE_RATE(density); OVERRIDE_RATE(intervention_rate);
    OVERRIDE_RATE(override_rate); OVERRIDE_RATE(active_rate);
#undef OVERRIDE_RATE
    if (given.thorough < 0) o->tp.thorough = 0;
    return 0;
}

static void progress_line(const ws_train_stats *s, int tty)
{
    if (!tty) return;
    double eta = s->progress > 0 ? s->elapsed * (1.0 - s->progress) / s->progress : 0;
    fprintf(stderr, "\r  iter %7ld | loss %.4f | acc %6.2f%% | lr %.2e | %7.0f steps/s | ETA %4.0fs ",
            s->iter, s->loss, 100.0 * s->accuracy, s->lr, s->steps_per_s, eta);
}

static void log_line(FILE *log, const ws_train_stats *s)
{
    if (!log) return;
    fprintf(log, "{\"iter\":%ld,\"optim_steps\":%ld,\"elapsed\":%.2f,\"loss\":%.5f,"
                 "\"accuracy\":%.5f,\"lr\":%.3e,\"grad_norm\":%.4f,\"steps_per_s\":%.1f}\n",
            s->iter, s->optim_steps, s->elapsed, s->loss, s->accuracy, s->lr, s->grad_norm,
            s->steps_per_s);
    fflush(log);
}

static int train(options *o, ws_exec *x, FILE *log)
{
    ws_model *m = ws_exec_model(x);
    ws_error err = {0};
    ws_trainer *t;
    if (ws_trainer_new(&t, x, &o->tp, &o->tc, &err) != WS_OK) {
        fprintf(stderr, "worldstate-train: %s\n", err.msg);
        return 1;
    }
    ws_trainer_set_iter(t, ws_model_optim_steps(m) * (long)o->tc.update_every);
    int tty = isatty(2);
    ws_train_stats s = {0};
    ws_status st;
    double loss_avg = 0, acc_avg = 0;
    long n_avg = 0;
    while ((st = ws_trainer_iterate(t, &s, &err)) == WS_OK) {
        loss_avg += s.loss, acc_avg += s.accuracy, n_avg++;
        if (s.iter % 50 == 0) {
            ws_train_stats avg = s;
            avg.loss = (float)(loss_avg / n_avg), avg.accuracy = (float)(acc_avg / n_avg);
            progress_line(&avg, tty);
            log_line(log, &avg);
            loss_avg = acc_avg = 0, n_avg = 0;
        }
        if (o->eval_every && s.iter % o->eval_every == 0) {
            ws_eval_config quick = o->ec;
            quick.n_horizons = 2, quick.horizons[0] = o->tc.rollout, quick.horizons[1] = 100;
            ws_eval_point pts[2];
            if (ws_evaluate(x, &o->tp, &quick, pts, &err) == WS_OK) {
                if (tty) fprintf(stderr, "\n");
                ws_eval_print(stdout, &o->tp, pts, 2, "periodic");
            }
        }
        if (o->checkpoint && s.iter % 2000 == 0 &&
            ws_checkpoint_save(m, o->checkpoint, 1, &err) != WS_OK)
            fprintf(stderr, "\nworldstate-train: checkpoint: %s\n", err.msg);
    }
    if (tty) fprintf(stderr, "\n");
    ws_trainer_free(t);
    if (st != WS_ERR_CONFLICT) {
        fprintf(stderr, "worldstate-train: %s\n", err.msg);
        return 1;
    }
    printf("trained %ld iterations (%ld AdamW steps) in %.1f s, %.0f trajectory steps/s; "
           "last loss %.4f acc %.2f%%\n",
           s.iter, s.optim_steps, s.elapsed, s.steps_per_s, s.loss, 100.0 * s.accuracy);
    if (o->checkpoint && ws_checkpoint_save(m, o->checkpoint, 1, &err) != WS_OK) {
        fprintf(stderr, "worldstate-train: checkpoint: %s\n", err.msg);
        return 1;
    }
    if (o->ship && ws_checkpoint_save(m, o->ship, 0, &err) != WS_OK) {
        fprintf(stderr, "worldstate-train: --ship: %s\n", err.msg);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    ws_backend_prefer_passive_waits(argv);
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help"))) {
        usage(stdout);
        return 0;
    }
    if (argc >= 2 && (!strcmp(argv[1], "export") || !strcmp(argv[1], "retrain") || !strcmp(argv[1], "rederive")))
        return ws_off_main(argc, argv);
    options o;
    memset(&o, 0, sizeof o);
    if (parse_args(argc, argv, &o)) {
        usage(stderr);
        return 2;
    }
    ws_error err = {0};
    ws_backend *be;
    if (ws_backend_cpu_new(&be, o.threads, &err) != WS_OK) {
        fprintf(stderr, "worldstate-train: %s\n", err.msg);
        return 1;
    }
    ws_model *m = NULL;
    const char *load = o.resume ? o.resume : (o.eval_only ? o.checkpoint : NULL);
    ws_status st = load ? ws_checkpoint_load(&m, load, be, &err)
                        : ws_model_new(&m, &o.mc, be, o.tc.seed, &err);
    ws_exec *x = NULL;
    if (st == WS_OK) st = ws_exec_new(&x, m, &err);
    if (st != WS_OK) {
        fprintf(stderr, "worldstate-train: %s\n", err.msg);
        ws_model_free(m);
        ws_backend_free(be);
        return 1;
    }
    FILE *log = o.log_path ? fopen(o.log_path, "a") : NULL;
    if (o.log_path && !log) {
        fprintf(stderr, "worldstate-train: cannot open %s: %s\n", o.log_path, strerror(errno));
        ws_exec_free(x);
        ws_model_free(m);
        ws_backend_free(be);
        return 1;
    }
    int rc = o.eval_only ? 0 : train(&o, x, log);
    if (rc == 0 && (o.eval_only || o.eval_at_end)) {
        ws_eval_point pts[WS_EVAL_MAX_HORIZONS];
        if (ws_evaluate(x, &o.tp, &o.ec, pts, &err) != WS_OK) {
            fprintf(stderr, "worldstate-train: evaluation: %s\n", err.msg);
            rc = 1;
        } else {
            ws_eval_print(stdout, &o.tp, pts, o.ec.n_horizons, o.eval_only ? "eval" : "final");
        }
    }
    if (log) fclose(log);
    ws_exec_free(x);
    ws_model_free(m);
    ws_backend_free(be);
    return rc;
}
