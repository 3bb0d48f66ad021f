/* offline_cli.c — the options of `worldstate-train export|retrain|rederive`
 * (train_main.c hands these commands over) and what the commands share. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "offline.h"
#include "server/common/cli.h"
#include "server/common/versions.h"

ws_status ws_off_open_store(const ws_off_options *o, ws_store **out, ws_error *err)
{
    char path[WS_SRV_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/worldstate.db", o->data_dir);
    ws_status s =
        ws_store_open(o->store ? o->store : path, WS_STORE_DURABILITY_NORMAL, 0, out, err);
    if (s == WS_ERR_NOTFOUND && !o->store) ws_error_set(err, s, "no database at %s", path);
    return s;
}

ws_status ws_off_work_open(ws_off_work *w, const ws_off_options *o, int64_t version, ws_error *err)
{
    memset(w, 0, sizeof *w);
    w->corpus.model_name = o->model;
    WS_TRY(ws_off_open_store(o, &w->corpus.st, err));
    WS_TRY(ws_store_model_find(w->corpus.st, o->model, &w->row, err));
    w->version = version > 0 ? version : w->row.current_version;
    WS_TRY(ws_backend_cpu_new(&w->be, o->threads, err));
    return ws_srv_version_load(w->corpus.st, o->data_dir, w->row.id, w->version, w->be,
                               &w->corpus.m, err);
}

void ws_off_work_close(ws_off_work *w)
{
    ws_off_corpus_free(&w->corpus);
    ws_model_free(w->corpus.m);
    ws_backend_free(w->be);
    ws_store_model_clear(&w->row);
    ws_store_close(w->corpus.st);
    memset(w, 0, sizeof *w);
}

/* --jsonl's value is the whole ws_off_options (offset 0): it appends. */
static ws_status add_jsonl(void *value, const char *path, ws_error *err)
{
    ws_off_options *o = value;
    if (o->n_jsonl == (int)(sizeof o->jsonl / sizeof *o->jsonl))
        return ws_error_set(err, WS_ERR_INVALID, "at most %d files", o->n_jsonl);
    o->jsonl[o->n_jsonl++] = path;
    return WS_OK;
}

/* The commands, as the bits of ws_cli_opt.only. */
enum { EXPORT = 1, RETRAIN = 2, REDERIVE = 4 };

#define O(f) offsetof(ws_off_options, f)
/* clang-format off */
#define NUM(name, kind, f, lo, hi, arg, only, help) \
    {name, kind, O(f), lo, hi, arg, help, NULL, only}
/* clang-format on */
static const ws_cli_opt flags[] = {
    NUM("data-dir", WS_OPT_STR, data_dir, 0, 0, "D", 0, "the daemon's data directory"),
    NUM("store", WS_OPT_STR, store, 0, 0, "LOCATION", 0,
        "the daemon's --store, when not the SQLite file in the data directory"),
    NUM("model", WS_OPT_STR, model, 0, 0, "NAME", 0, "the model (export: every model when absent)"),
    NUM("session", WS_OPT_STR, session, 0, 0, "ID", 0, "only this session"),
    NUM("epochs", WS_OPT_INT, epochs, 1, 1e6, "N", RETRAIN, "retrain: passes over the sessions"),
    {"jsonl", WS_OPT_FN, 0, 0, 0, "FILE", "retrain: on an export (repeatable)", add_jsonl, RETRAIN},
    NUM("recall", WS_OPT_INT, recall, 0, 64, "N", RETRAIN,
        "retrain: recall queries a step (default: the model's)"),
    NUM("rollout", WS_OPT_I64, rollout, 1, 1e15, "N", RETRAIN,
        "retrain: only each session's first N steps (default: all)"),
    NUM("lr", WS_OPT_FLOAT, tc.lr, 1e-8, 10, "X", RETRAIN, "retrain: peak learning rate"),
    NUM("batch", WS_OPT_INT, tc.batch, 1, 4096, "N", RETRAIN | REDERIVE,
        "retrain, rederive: sessions at once"),
    NUM("update-every", WS_OPT_INT, tc.update_every, 1, 1e6, "N", RETRAIN,
        "retrain: steps an AdamW step"),
    NUM("warmup", WS_OPT_INT, tc.warmup, 0, 1e9, "N", RETRAIN, "retrain: warmup steps"),
    NUM("min-lr-ratio", WS_OPT_FLOAT, tc.min_lr_ratio, 0, 1, "X", RETRAIN,
        "retrain: cosine decays to lr times X"),
    NUM("clip", WS_OPT_FLOAT, tc.clip_norm, 0, 1e9, "X", RETRAIN, "retrain: global-norm clipping"),
    NUM("wd", WS_OPT_FLOAT, tc.weight_decay, 0, 10, "X", RETRAIN, "retrain: AdamW weight decay"),
    NUM("seed", WS_OPT_U64, tc.seed, 0, 1e15, "N", RETRAIN, "retrain: recall sampling and order"),
    NUM("threads", WS_OPT_INT, threads, 0, 256, "N", RETRAIN | REDERIVE,
        "retrain, rederive: CPU threads (0: all)"),
    NUM("version", WS_OPT_I64, version, 1, 1e15, "V", REDERIVE,
        "rederive: under version V (default: the current one)"),
    NUM("dry-run", WS_OPT_SET, dry_run, 1, 1, NULL, REDERIVE, "rederive: replay, store nothing"),
};
#undef NUM
#undef O

/* The options before any flag. */
static void defaults(ws_off_options *o)
{
    memset(o, 0, sizeof *o);
    o->epochs = 1, o->recall = -1;
    o->tc = ws_train_config_default();
    o->tc.batch = 64;
}

void ws_off_usage(FILE *f)
{
    fprintf(f, "on a daemon's data directory:\n"
               "       worldstate-train export   --data-dir D [--model NAME] [--session ID] >F\n"
               "       worldstate-train retrain  --data-dir D --model NAME [flags]\n"
               "       worldstate-train rederive --data-dir D --model NAME [flags]\n"
               "export writes each session's step log as JSON Lines (the API's step-log items\n"
               "plus \"session\" and \"model\"); retrain replays the logs (or --jsonl files) from\n"
               "W_0 with truncated gradients for N epochs and publishes a new version, which a\n"
               "running daemon serves within about a second; rederive replays every session\n"
               "under one version (default: the current one) and stores the states it ends in\n"
               "(not while the daemon runs).\n");
    ws_off_options d;
    defaults(&d);
    ws_cli_usage(f, flags, (int)(sizeof flags / sizeof *flags), ~0u, &d);
}

/* Fills o from argv (argv[1] is the command); 0 on a usage error (printed). */
static int parse(int argc, char **argv, ws_off_options *o)
{
    unsigned cmd = !strcmp(argv[1], "export")    ? EXPORT
                   : !strcmp(argv[1], "retrain") ? RETRAIN
                                                 : REDERIVE;
    defaults(o);
    char prog[40];
    snprintf(prog, sizeof prog, "worldstate-train %s", argv[1]);
    int n_flags = (int)(sizeof flags / sizeof *flags);
    int first = ws_cli_parse(argc - 1, argv + 1, prog, flags, n_flags, cmd, o, NULL);
    if (first < 0) return 0;
    if (first < argc - 1) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", prog, argv[1 + first]);
        return 0;
    }
    if (!o->data_dir || (cmd != EXPORT && !o->model)) {
        fprintf(stderr, "%s: --data-dir%s is required\n", prog,
                cmd != EXPORT ? " and --model are" : "");
        return 0;
    }
    return 1;
}

int ws_off_main(int argc, char **argv)
{
    ws_off_options o;
    if (!parse(argc, argv, &o)) {
        fprintf(stderr, "(worldstate-train --help lists the flags)\n");
        return 2;
    }
    umask(077); /* checkpoints and SQLite files in the data directory are 0600, as the daemon's */
    ws_error err = {0};
    ws_status s = !strcmp(argv[1], "export")    ? ws_off_export(&o, stdout, &err)
                  : !strcmp(argv[1], "retrain") ? ws_off_retrain(&o, &err)
                                                : ws_off_rederive(&o, &err);
    if (s == WS_OK) return 0;
    fprintf(stderr, "worldstate-train %s: %s\n", argv[1], err.msg);
    return 1;
}
