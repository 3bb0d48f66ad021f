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
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/ws_version.h"
#include "offline.h"
#include "server/common/cli.h"
#include "model/checkpoint.h"
#include "model/trainer.h"

typedef struct {
    int eval_only;
    ws_model_config mc;
    ws_task_params tp;
    ws_train_config tc;
    ws_eval_config ec;
    const char *task, *checkpoint, *resume, *log_path, *ship;
    int empty_steps_given; /* --empty-steps was given (mc.empty_steps is it) */
    int views_given;       /* --views was given (mc.views is it) */
    int eval_every, threads, eval_at_end;
    int backend;    /* train_backend */
    int add_layers; /* --add-layers: deepen the resumed model (ws_model_deepen) */
} options;

static ws_status parse_horizons(void *value, const char *s, ws_error *err)
{
    ws_eval_config *ec = value;
    ec->n_horizons = 0;
    while (*s) {
        char *end;
        long h = strtol(s, &end, 10);
        if (end == s || h < 1 || h > 10000000 || ec->n_horizons == WS_EVAL_MAX_HORIZONS ||
            (ec->n_horizons && h <= ec->horizons[ec->n_horizons - 1]) || (*end && *end != ','))
            break;
        ec->horizons[ec->n_horizons++] = (int)h;
        s = *end == ',' ? end + 1 : end;
    }
    if (*s || !ec->n_horizons)
        return ws_error_set(err, WS_ERR_INVALID, "wants ascending positive integers");
    return WS_OK;
}

/* Where the model computes. cpu by default: the recipe's figures and bits are
 * the CPU backend's; cuda is asked for by name and fails when no GPU answers
 * (a GPU run that fell back to the CPU would take days, not minutes, to say so). */
enum train_backend { TRAIN_CPU, TRAIN_CUDA, TRAIN_AUTO };

static ws_status parse_backend(void *value, const char *s, ws_error *err)
{
    static const char *const names[] = {"cpu", "cuda", "auto"}; /* train_backend */
    for (int i = 0; i < 3; i++)
        if (!strcmp(s, names[i])) return *(int *)value = i, WS_OK;
    return ws_error_set(err, WS_ERR_INVALID, "wants cpu, cuda or auto, got '%s'", s);
}

static ws_status backend_new(const options *o, ws_backend **out, ws_error *err)
{
    if (o->backend == TRAIN_CUDA) return ws_backend_cuda_load(out, err);
    if (o->backend == TRAIN_AUTO) return ws_backend_auto(out, err);
    return ws_backend_cpu_new(out, o->threads, err);
}

static ws_status parse_lifetime(void *value, const char *s, ws_error *err)
{
    if (strcmp(s, "fixed") && strcmp(s, "pool"))
        return ws_error_set(err, WS_ERR_INVALID, "wants fixed or pool, got '%s'", s);
    *(ws_lifetime *)value = strcmp(s, "pool") ? WS_LIFETIME_FIXED : WS_LIFETIME_POOL;
    return WS_OK;
}

/* The flags that are not model-config fields (those come from the config's
 * field table: cli.h). Task flags left out keep the task's defaults. */
#define O(f) offsetof(options, f)
/* clang-format off */
#define NUM(name, kind, f, lo, hi, arg, help) {name, kind, O(f), lo, hi, arg, help, NULL, 0}
/* clang-format on */
static const ws_cli_opt flags[] = {
    NUM("task", WS_OPT_STR, task, 0, 0, "NAME", "a built-in task (the list is below)"),
    NUM("entities", WS_OPT_INT, tp.entities, 1, 1024, "N", "facts, conj: entities"),
    NUM("places", WS_OPT_INT, tp.places, 1, 1024, "N", "facts, conj: places"),
    NUM("move-rate", WS_OPT_FLOAT, tp.move_rate, 0, 1024, "X", "facts, conj: moves per step"),
    NUM("density", WS_OPT_FLOAT, tp.density, 0, 1, "X", "life: initial density"),
    NUM("intervention-rate", WS_OPT_FLOAT, tp.intervention_rate, 0, 64, "X",
        "life: interventions per step"),
    NUM("images", WS_OPT_INT, tp.images, 1, 16, "N", "numbers: images per episode"),
    NUM("horizon", WS_OPT_INT, tp.horizon, 1, 1e6, "N", "recall: the step that asks for the bit"),
    NUM("non-thorough", WS_OPT_SET, tp.thorough, 0, 0, NULL,
        "recall: query only at --horizon, not every step"),
    NUM("data-dir", WS_OPT_STR, tp.data_dir, 0, 0, "DIR", "numbers: the Fashion-MNIST files"),
    NUM("live-facts", WS_OPT_INT, tp.live_facts, 1, 4096, "N", "memory: most facts an episode"),
    NUM("live-facts-min", WS_OPT_INT, tp.live_facts_min, 1, 4096, "N",
        "memory: least of the most facts"),
    NUM("max-arity", WS_OPT_INT, tp.max_arity, 1, 4, "N", "memory: most symbols a fact"),
    NUM("instr-per-step", WS_OPT_INT, tp.instr_per_step, 1, 64, "N", "memory: instructions a step"),
    NUM("override-rate", WS_OPT_FLOAT, tp.override_rate, 0, 1, "X",
        "memory: how often a told fact is overridden"),
    NUM("active-rate", WS_OPT_FLOAT, tp.active_rate, 0, 1, "X",
        "memory: how often a step tells once all was told"),
    NUM("chatter-rate", WS_OPT_FLOAT, tp.chatter_rate, 0, 1, "X",
        "memory: most often a step also tells an unasked fact of fresh symbols"),
    NUM("exclusive-rate", WS_OPT_FLOAT, tp.exclusive_rate, 0, 1, "X",
        "memory: share of worlds with an exclusive relation"),
    NUM("slot-active", WS_OPT_FLOAT, tp.slot_active, 0, 1, "X",
        "memory: how often a slot world's step tells (default 0.8)"),
    NUM("slot-single", WS_OPT_FLOAT, tp.slot_single, 0, 1, "X",
        "memory: how often a slot world's telling step tells one thing (default 0)"),
    NUM("relational-rate", WS_OPT_FLOAT, tp.relational_rate, 0, 1, "X",
        "memory: share of worlds of entities that move, each move told in full"),
    NUM("queries", WS_OPT_INT, tp.n_queries, 0, 4096, "N", "memory: queries a step"),
    NUM("batch", WS_OPT_INT, tc.batch, 1, 65536, "N", "trajectory slots"),
    NUM("rollout", WS_OPT_INT, tc.rollout, 1, 1e6, "N", "steps a trajectory (fixed lifetime)"),
    {"lifetime", WS_OPT_FN, O(tc.lifetime), 0, 0, "fixed|pool",
     "trajectory lifetime (default fixed)", parse_lifetime, 0},
    NUM("max-age", WS_OPT_INT, tc.max_age, 1, 1e7, "N", "pool: oldest trajectory"),
    NUM("update-every", WS_OPT_INT, tc.update_every, 1, 1e6, "N", "iterations an AdamW step"),
    NUM("lr", WS_OPT_FLOAT, tc.lr, 1e-8, 10, "X", "peak learning rate"),
    NUM("min-lr-ratio", WS_OPT_FLOAT, tc.min_lr_ratio, 0, 1, "X", "cosine decays to lr times X"),
    NUM("warmup", WS_OPT_INT, tc.warmup, 0, 1e9, "N", "warmup iterations"),
    NUM("iters", WS_OPT_LONG, tc.iters, 0, 1e12, "N", "iteration budget (0: time only)"),
    NUM("seconds", WS_OPT_DOUBLE, tc.seconds, 0, 1e9, "X", "time budget (0: iterations only)"),
    NUM("clip", WS_OPT_FLOAT, tc.clip_norm, 0, 1e9, "X", "global-norm clipping (0: none)"),
    NUM("wd", WS_OPT_FLOAT, tc.weight_decay, 0, 10, "X", "AdamW weight decay"),
    NUM("seed", WS_OPT_U64, tc.seed, 0, 1e15, "N", "initialisation and task worlds"),
    NUM("checkpoint", WS_OPT_STR, checkpoint, 0, 0, "PATH",
        "train: save to (every 2000 iterations); eval: load"),
    NUM("resume", WS_OPT_STR, resume, 0, 0, "PATH", "train on from this checkpoint"),
    NUM("add-layers", WS_OPT_INT, add_layers, 0, 8, "N",
        "with --resume: N more Updater and Extractor layers, answering as before (no AdamW state)"),
    NUM("ship", WS_OPT_STR, ship, 0, 0, "PATH",
        "also write the parameters alone to PATH (eval: the model evaluated, e.g. with --views)"),
    NUM("log", WS_OPT_STR, log_path, 0, 0, "PATH", "append progress as JSON lines"),
    NUM("eval-every", WS_OPT_INT, eval_every, 0, 1e9, "N", "a quick evaluation every N (0: no)"),
    NUM("threads", WS_OPT_INT, threads, 0, 256, "N", "CPU threads (0: all)"),
    {"backend", WS_OPT_FN, O(backend), 0, 0, "cpu|cuda|auto",
     "where the model computes (default cpu; cuda: the GPU or an error)", parse_backend, 0},
    {"horizons", WS_OPT_FN, O(ec), 0, 0, "H1,H2,...", "eval: horizons (default 8,100,1000,10000)",
     parse_horizons, 0},
    NUM("trajectories", WS_OPT_INT, ec.n_traj, 1, 65536, "N", "eval: trajectories"),
    NUM("window", WS_OPT_INT, ec.window, 1, 1e6, "N", "eval: steps averaged at a horizon"),
    NUM("eval-seed", WS_OPT_U64, ec.seed, 0, (double)UINT64_MAX, "N", "eval: seed of fresh worlds"),
    NUM("no-eval", WS_OPT_SET, eval_at_end, 0, 0, NULL, "train: no evaluation at the end"),
};
#undef NUM
#undef O
#define N_FLAGS ((int)(sizeof flags / sizeof *flags))

/* The options before any flag, but the task's parameters (set once the task is known). */
static void defaults(options *o)
{
    memset(o, 0, sizeof *o);
    o->mc = ws_model_config_default();
    o->mc.d = 64, o->mc.n_state = 16, o->mc.vocab_cap = 512, o->mc.n_overflow = 16;
    o->tc = ws_train_config_default();
    o->tc.seed = 1;
    o->ec = (ws_eval_config){.n_traj = 64,
                             .window = 4,
                             .seed = 0xE7A1ULL,
                             .n_horizons = 4,
                             .horizons = {8, 100, 1000, 10000}};
    o->threads = 0;
    o->eval_at_end = 1;
    o->task = "facts";
}

/* A task's parameter: its default depends on the task. */
static int is_task_flag(const ws_cli_opt *o)
{
    return o->off >= offsetof(options, tp) &&
           o->off < offsetof(options, tp) + sizeof(ws_task_params);
}

static void usage(FILE *f)
{
    options d;
    defaults(&d);
    fprintf(f, "usage: worldstate-train train|eval [flags]\n"
               "       worldstate-train --help | --version\n"
               "task, training and evaluation (train evaluates at the end too):\n");
    for (int k = 0; k < N_FLAGS; k++)
        ws_cli_usage(f, &flags[k], 1, ~0u, is_task_flag(&flags[k]) ? NULL : &d);
    fprintf(f, "tasks and the defaults of their flags (model/tasks/task.h says what each tells "
               "and asks):\n");
    for (int i = 0; ws_task_name(i) && ws_task_params_default(ws_task_name(i), &d.tp); i++) {
        fprintf(f, "  %-8s", ws_task_name(i));
        char v[64];
        for (int k = 0; k < N_FLAGS; k++)
            if (is_task_flag(&flags[k]) && ws_cli_value_text(&flags[k], &d, v, sizeof v) &&
                strcmp(v, "0"))
                fprintf(f, " --%s %s", flags[k].name, v);
        fprintf(f, "\n");
    }
    fprintf(f, "model: a flag per config field (model/model.h says what each is):\n");
    ws_cli_model_usage(f, &d.mc);
    ws_off_usage(f);
}

/* Fills o from `worldstate-train train|eval ...`; -1 after printing why. */
static int parse_args(int argc, char **argv, options *o)
{
    defaults(o);
    o->eval_only = !strcmp(argv[1], "eval");
    /* -1 until --empty-steps (--views) is given: then a resumed (a loaded)
     * model switches to it. */
    o->mc.empty_steps = o->mc.views = -1;
    /* The first pass finds --task (and checks every flag); the second sets the
     * flags given over that task's defaults. */
    if (ws_cli_parse(argc - 1, argv + 1, "worldstate-train", flags, N_FLAGS, 0, o, &o->mc) < 0)
        return -1;
    if (!ws_task_params_default(o->task, &o->tp)) {
        fprintf(stderr, "worldstate-train: unknown task '%s'\n", o->task);
        return -1;
    }
    int first = ws_cli_parse(argc - 1, argv + 1, "worldstate-train", flags, N_FLAGS, 0, o, &o->mc);
    if (first < 0) return -1;
    if (first < argc - 1) {
        fprintf(stderr, "worldstate-train: unexpected argument '%s'\n", argv[1 + first]);
        return -1;
    }
    o->empty_steps_given = o->mc.empty_steps >= 0;
    if (!o->empty_steps_given) o->mc.empty_steps = ws_model_config_default().empty_steps;
    o->views_given = o->mc.views >= 0;
    if (!o->views_given) o->mc.views = ws_model_config_default().views;
    return 0;
}

static void progress_line(const ws_train_stats *s, int tty)
{
    if (!tty) return;
    double eta = s->progress > 0 ? s->elapsed * (1.0 - s->progress) / s->progress : 0;
    fprintf(stderr,
            "\r  iter %7ld | loss %.4f | acc %6.2f%% | lr %.2e | %7.0f steps/s | ETA %4.0fs ",
            s->iter, s->loss, 100.0 * s->accuracy, s->lr, s->steps_per_s, eta);
}

static void log_line(FILE *log, const ws_train_stats *s)
{
    if (!log) return;
    fprintf(log,
            "{\"iter\":%ld,\"optim_steps\":%ld,\"elapsed\":%.2f,\"loss\":%.5f,"
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
    /* on the CPU, the batch in chunks on the backend's threads (trainer.h) */
    o->tc.threads = ws_backend_threads(ws_model_backend(m), 0);
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
    printf("trained %ld iterations (%ld AdamW steps) in %.1f s on %s, %.0f trajectory steps/s; "
           "last loss %.4f acc %.2f%%\n",
           s.iter, s.optim_steps, s.elapsed, ws_model_backend(m)->ops->name, s.steps_per_s, s.loss,
           100.0 * s.accuracy);
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
    const char *cmd = argc >= 2 ? argv[1] : "";
    if (argc == 2 && (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help"))) {
        usage(stdout);
        return 0;
    }
    if (argc == 2 && !strcmp(cmd, "--version")) {
        ws_version_print(stdout, "worldstate-train");
        return 0;
    }
    if (!strcmp(cmd, "export") || !strcmp(cmd, "retrain") || !strcmp(cmd, "rederive"))
        return ws_off_main(argc, argv);
    if (strcmp(cmd, "train") && strcmp(cmd, "eval")) {
        usage(stderr);
        return 2;
    }
    options o;
    if (parse_args(argc, argv, &o)) {
        fprintf(stderr, "(worldstate-train --help lists the flags)\n");
        return 2;
    }
    ws_error err = {0};
    ws_backend *be;
    if (backend_new(&o, &be, &err) != WS_OK) {
        fprintf(stderr, "worldstate-train: %s\n", err.msg);
        return 1;
    }
    ws_model *m = NULL;
    const char *load = o.resume ? o.resume : (o.eval_only ? o.checkpoint : NULL);
    ws_status st = load ? ws_checkpoint_load(&m, load, be, &err)
                        : ws_model_new(&m, &o.mc, be, o.tc.seed, &err);
    /* The only config fields a loaded model takes from the flags (empty_steps
     * when resumed, views also to be evaluated): the parameters depend on
     * neither. */
    if (st == WS_OK && o.resume && o.empty_steps_given)
        st = ws_model_set_empty_steps(m, o.mc.empty_steps, &err);
    if (st == WS_OK && load && o.views_given) st = ws_model_set_views(m, o.mc.views, &err);
    if (st == WS_OK && o.add_layers > 0) {
        ws_model *deeper = NULL;
        st = o.resume ? ws_model_deepen(&deeper, m, o.add_layers, o.add_layers, o.tc.seed, &err)
                      : ws_error_set(&err, WS_ERR_INVALID, "--add-layers wants --resume");
        ws_model_free(m);
        m = deeper;
    }
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
    /* eval --ship: the model as evaluated (its --views) written as shipped */
    if (rc == 0 && o.eval_only && o.ship && ws_checkpoint_save(m, o.ship, 0, &err) != WS_OK) {
        fprintf(stderr, "worldstate-train: --ship: %s\n", err.msg);
        rc = 1;
    }
    if (log) fclose(log);
    ws_exec_free(x);
    ws_model_free(m);
    ws_backend_free(be);
    return rc;
}
