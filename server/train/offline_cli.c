/* offline_cli.c — the options of `worldstate-train export|retrain|rederive`
 * (train_main.c hands these commands over) and what the commands share. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "offline.h"
#include "../common/versions.h"

void ws_off_usage(FILE *f, int alone)
{
    fprintf(f,
            "%s worldstate-train export   --data-dir D [--model NAME] [--session ID] > steps.jsonl\n"
            "       worldstate-train retrain  --data-dir D --model NAME [--epochs N] [--jsonl FILE]...\n"
            "                                 [--session ID] [--lr X] [--batch N] [--update-every N]\n"
            "                                 [--warmup N] [--min-lr-ratio X] [--clip X] [--wd X]\n"
            "                                 [--rollout N] [--recall N] [--seed N] [--threads N]\n"
            "       worldstate-train rederive --data-dir D --model NAME [--version V] [--session ID]\n"
            "                                 [--batch N] [--threads N] [--dry-run]\n"
            "export writes each session's step log as JSON Lines (the API's step-log items plus\n"
            "\"session\" and \"model\"); retrain replays the logs (or --jsonl files) from W_0 with\n"
            "truncated gradients for N epochs and publishes a new version, which a running daemon\n"
            "serves within about a second; rederive replays every session under one version\n"
            "(default: the current one) and stores the states it ends in (not while the daemon runs).\n"
            "--rollout N replays only each session's first N steps; --recall N recall queries per\n"
            "step (default: the model's recall_queries).\n",
            alone ? "usage:" : "      ");
}

ws_status ws_off_open_store(const char *data_dir, ws_store **out, ws_error *err)
{
    char path[WS_SRV_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/worldstate.db", data_dir);
    ws_status s = ws_store_open(path, WS_STORE_DURABILITY_NORMAL, 0, out, err);
    if (s == WS_ERR_NOTFOUND) ws_error_set(err, s, "no database at %s", path);
    return s;
}

ws_status ws_off_work_open(ws_off_work *w, const ws_off_options *o, int64_t version, ws_error *err)
{
    memset(w, 0, sizeof *w);
    w->corpus.model_name = o->model;
    WS_TRY(ws_off_open_store(o->data_dir, &w->corpus.st, err));
    WS_TRY(ws_store_model_find(w->corpus.st, o->model, &w->row, err));
    w->version = version > 0 ? version : w->row.current_version;
    WS_TRY(ws_backend_cpu_new(&w->be, o->threads, err));
    return ws_srv_version_load(w->corpus.st, w->row.id, w->version, w->be, &w->corpus.m, err);
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

/* Parses a number in [lo, hi]; 0 when s is not one. */
static int number(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !(v >= lo && v <= hi)) return 0;
    *out = v;
    return 1;
}

typedef struct {
    const char *flag;
    char kind; /* i int, l int64, f float */
    size_t off;
    double lo, hi;
    const char *commands; /* initials of the commands that take it: e export, t retrain, r rederive */
} num_opt;

#define OFF(f) offsetof(ws_off_options, f)
static const num_opt nums[] = {
    {"--epochs", 'i', OFF(epochs), 1, 1e6, "t"},
    {"--recall", 'i', OFF(recall), 0, 64, "t"},
    {"--threads", 'i', OFF(threads), 0, 256, "tr"},
    {"--version", 'l', OFF(version), 1, 1e15, "r"},
    {"--rollout", 'l', OFF(rollout), 1, 1e15, "t"},
    {"--batch", 'i', OFF(tc.batch), 1, 4096, "tr"},
    {"--update-every", 'i', OFF(tc.update_every), 1, 1e6, "t"},
    {"--warmup", 'i', OFF(tc.warmup), 0, 1e9, "t"},
    {"--lr", 'f', OFF(tc.lr), 1e-8, 10, "t"},
    {"--min-lr-ratio", 'f', OFF(tc.min_lr_ratio), 0, 1, "t"},
    {"--clip", 'f', OFF(tc.clip_norm), 0, 1e9, "t"},
    {"--wd", 'f', OFF(tc.weight_decay), 0, 10, "t"},
};
#undef OFF

/* Fills o from argv (argv[1] is the command); 0 on a usage error (printed). */
static int parse(int argc, char **argv, ws_off_options *o)
{
    char cmd = !strcmp(argv[1], "export") ? 'e' : !strcmp(argv[1], "retrain") ? 't' : 'r';
    memset(o, 0, sizeof *o);
    o->epochs = 1, o->recall = -1;
    o->tc = ws_train_config_default();
    o->tc.batch = 64;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        size_t k = 0;
        while (k < sizeof nums / sizeof *nums && strcmp(a, nums[k].flag) != 0) k++;
        double x;
        if (k < sizeof nums / sizeof *nums && strchr(nums[k].commands, cmd) && v &&
            number(v, nums[k].lo, nums[k].hi, &x)) {
            char *dst = (char *)o + nums[k].off;
            if (nums[k].kind == 'i') *(int *)dst = (int)x;
            else if (nums[k].kind == 'l') *(int64_t *)dst = (int64_t)x;
            else *(float *)dst = (float)x;
            i++;
        } else if (!strcmp(a, "--data-dir") && v) o->data_dir = argv[++i];
        else if (!strcmp(a, "--model") && v) o->model = argv[++i];
        else if (!strcmp(a, "--session") && v) o->session = argv[++i];
        else if (!strcmp(a, "--seed") && v && cmd == 't' && number(v, 0, 1e15, &x)) o->tc.seed = (uint64_t)x, i++;
        else if (!strcmp(a, "--jsonl") && v && cmd == 't' && o->n_jsonl < 16) o->jsonl[o->n_jsonl++] = argv[++i];
        else if (!strcmp(a, "--dry-run") && cmd == 'r') o->dry_run = 1;
        else {
            fprintf(stderr, "worldstate-train %s: unknown, misplaced or bad option '%s'%s%s\n", argv[1], a,
                    v ? " " : "", v ? v : "");
            return 0;
        }
    }
    if (!o->data_dir || (cmd != 'e' && !o->model)) {
        fprintf(stderr, "worldstate-train %s: --data-dir%s is required\n", argv[1], cmd != 'e' ? " and --model are" : "");
        return 0;
    }
    return 1;
}

int ws_off_main(int argc, char **argv)
{
    ws_off_options o;
    if (!parse(argc, argv, &o)) {
        ws_off_usage(stderr, 1);
        return 2;
    }
    ws_error err = {0};
    ws_status s = !strcmp(argv[1], "export")  ? ws_off_export(&o, stdout, &err)
                  : !strcmp(argv[1], "retrain") ? ws_off_retrain(&o, &err)
                                                : ws_off_rederive(&o, &err);
    if (s == WS_OK) return 0;
    fprintf(stderr, "worldstate-train %s: %s\n", argv[1], err.msg);
    return 1;
}
