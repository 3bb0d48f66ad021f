/* cmd_model.c — worldstate model list|create|status|checkpoint|import|versions|rollback|
 * delete, and training. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define MODEL_USAGE                                                                   \
    "worldstate model list | status NAME | checkpoint NAME --out FILE\n"              \
    "       worldstate model import NAME FILE [--tenant T] | rollback NAME VERSION\n" \
    "       worldstate model versions NAME | delete NAME\n"                           \
    "       worldstate model create NAME [--config JSON] [--seed N] [--tenant T] [TRAINING FLAGS]"
#define TRAINING_USAGE                                                                         \
    "worldstate training NAME [--enable | --disable] [--lr X] [--update-every N] "             \
    "[--recall-queries N]\n"                                                                   \
    "       [--self-supervised | --no-self-supervised] [--negative-queries N] [--holdout X]\n" \
    "       [--gate | --no-gate] [--gate-tolerance X] [--rehearsal N] [--scope all|symbols]\n" \
    "       [--publish-every N] [--rules | --no-rules]"

/* The training flags of `model create` and `training`. */
typedef struct {
    int enable, disable, self_sup, no_self_sup, gate, no_gate, rules, no_rules;
    double lr, holdout, gate_tolerance;
    long long update_every, recall_queries, negative_queries, rehearsal, publish_every;
    const char *scope;
} training_flags;

/* clang-format off */
#define TRAINING_OPTS(tf)                                                    \
    {"--enable", CLI_FLAG, &(tf).enable}, {"--disable", CLI_FLAG, &(tf).disable}, \
        {"--lr", CLI_NUM, &(tf).lr}, {"--update-every", CLI_INT, &(tf).update_every}, \
        {"--recall-queries", CLI_INT, &(tf).recall_queries}, \
        {"--self-supervised", CLI_FLAG, &(tf).self_sup}, \
        {"--no-self-supervised", CLI_FLAG, &(tf).no_self_sup}, \
        {"--negative-queries", CLI_INT, &(tf).negative_queries}, \
        {"--holdout", CLI_NUM, &(tf).holdout}, {"--gate", CLI_FLAG, &(tf).gate}, \
        {"--no-gate", CLI_FLAG, &(tf).no_gate}, {"--gate-tolerance", CLI_NUM, &(tf).gate_tolerance}, \
        {"--rehearsal", CLI_INT, &(tf).rehearsal}, {"--scope", CLI_STR, &(tf).scope}, \
        {"--publish-every", CLI_INT, &(tf).publish_every}, \
        {"--rules", CLI_FLAG, &(tf).rules}, {"--no-rules", CLI_FLAG, &(tf).no_rules}
/* clang-format on */

#define UNSET LLONG_MIN

static training_flags training_flags_unset(void)
{
    return (training_flags){.lr = -1,
                            .holdout = -1,
                            .gate_tolerance = -1,
                            .update_every = UNSET,
                            .recall_queries = UNSET,
                            .negative_queries = UNSET,
                            .rehearsal = UNSET,
                            .publish_every = UNSET};
}

/* A switch given as --x or --no-x: 1, 0, or -1 (keep). */
static int either(int on, int off)
{
    return on ? 1 : off ? 0 : -1;
}

/* The server checks the ranges (api.md); here only values a patch cannot carry
 * (they mean "keep"), and int overflow. */
static int patch_of(const training_flags *tf, ws_client_training_patch *p, int *any,
                    const char *usage)
{
    if ((tf->enable && tf->disable) || (tf->self_sup && tf->no_self_sup) ||
        (tf->gate && tf->no_gate) || (tf->rules && tf->no_rules))
        return cli_usage(usage, "a switch and its --no-/--disable form, not both");
    if ((tf->lr != -1 && tf->lr <= 0) ||
        (tf->update_every != UNSET && (tf->update_every < 1 || tf->update_every > INT_MAX)) ||
        (tf->publish_every != UNSET && (tf->publish_every < 1 || tf->publish_every > INT_MAX)) ||
        (tf->recall_queries != UNSET && (tf->recall_queries < 0 || tf->recall_queries > INT_MAX)) ||
        (tf->negative_queries != UNSET &&
         (tf->negative_queries < 0 || tf->negative_queries > INT_MAX)) ||
        (tf->holdout != -1 && tf->holdout < 0) ||
        (tf->gate_tolerance != -1 && tf->gate_tolerance < 0) ||
        (tf->rehearsal != UNSET && (tf->rehearsal < 0 || tf->rehearsal > INT_MAX)))
        return cli_usage(usage, "--lr must be > 0, --update-every and --publish-every >= 1, "
                                "--recall-queries, "
                                "--negative-queries, --holdout, --gate-tolerance and --rehearsal "
                                ">= 0");
    if (tf->scope && strcmp(tf->scope, "all") && strcmp(tf->scope, "symbols"))
        return cli_usage(usage, "--scope is all or symbols");
    *p = WS_CLIENT_TRAINING_KEEP;
    p->enabled = either(tf->enable, tf->disable);
    p->self_supervised = either(tf->self_sup, tf->no_self_sup);
    p->gate = either(tf->gate, tf->no_gate);
    p->rules = either(tf->rules, tf->no_rules);
    if (tf->lr != -1) p->lr = tf->lr;
    if (tf->update_every != UNSET) p->update_every = (int)tf->update_every;
    if (tf->recall_queries != UNSET) p->recall_queries = (int)tf->recall_queries;
    if (tf->negative_queries != UNSET) p->negative_queries = (int)tf->negative_queries;
    if (tf->holdout != -1) p->holdout = tf->holdout;
    if (tf->gate_tolerance != -1) p->gate_tolerance = tf->gate_tolerance;
    if (tf->rehearsal != UNSET) p->rehearsal = (int)tf->rehearsal;
    if (tf->publish_every != UNSET) p->publish_every = (int)tf->publish_every;
    if (tf->scope) snprintf(p->scope, sizeof p->scope, "%s", tf->scope);
    *any = p->enabled >= 0 || p->lr > 0 || p->update_every > 0 || p->recall_queries >= 0 ||
           p->self_supervised >= 0 || p->negative_queries >= 0 || p->holdout >= 0 || p->gate >= 0 ||
           p->gate_tolerance >= 0 || p->rehearsal >= 0 || p->publish_every > 0 || p->scope[0] ||
           p->rules >= 0;
    return CLI_EXIT_OK;
}

static void print_training(const char *label, const ws_client_training *t)
{
    printf("%-14s %s, lr %g, update every %d examples, %d recall queries\n", label,
           t->enabled ? "on" : "off", t->lr, t->update_every, t->recall_queries);
    if (t->self_supervised < 0) return; /* an older server */
    printf("%-14s self-supervised %s, %d negative queries, holdout %g; gate %s, tolerance %g\n", "",
           t->self_supervised ? "on" : "off", t->negative_queries, t->holdout,
           t->gate ? "on" : "off", t->gate_tolerance);
    if (t->rehearsal >= 0)
        printf("%-14s rehearsal: %d trajectories of the task memory a pass\n", "", t->rehearsal);
    if (t->publish_every > 0)
        printf("%-14s a candidate version every %d AdamW steps\n", "", t->publish_every);
    if (t->scope[0])
        printf("%-14s scope: %s\n", "",
               strcmp(t->scope, "symbols") ? "every parameter" : "the symbols' corrections alone");
    if (t->rules >= 0) printf("%-14s rules learned from labels: %s\n", "", t->rules ? "on" : "off");
}

static void print_model(const ws_client_model *m)
{
    char created[32];
    cli_time(m->created_ms, created, sizeof created);
    printf("name           %s\nversion        %lld\ncreated        %s\nconfig         %s\n",
           m->name, (long long)m->version, created, m->config_json);
    /* Whether the parameters were ever trained is what a user asks first. */
    int random = !strcmp(m->origin, "random");
    if (m->origin[0])
        printf("origin         %s%s\n", m->origin,
               random ? " (random parameters: untrained, unless trained since)" : "");
    if (m->version_note) printf("version note   %s\n", m->version_note);
    printf("tenant         %s\n", m->tenant[0] ? m->tenant : "(shared by every tenant)");
    print_training("training", &m->training);
    /* "location@1:2/3": location (at position 1) makes position 2 of 3 exclusive */
    if (m->rules_holding[0])
        printf("rules          %s (anchor@position:exclusive position/symbols)\n",
               m->rules_holding);
    const ws_client_model_status *st = &m->status;
    if (!st->present) return;
    printf("state          %s (serving version %lld)\nexamples       %lld ready, %lld labelled, "
           "%lld self-supervised, %lld held out, %lld trained, "
           "%lld dropped\nupdates        %lld (last loss %.4f)\n",
           st->state, (long long)st->serving_version, (long long)st->examples_ready,
           (long long)st->examples_labelled, (long long)st->examples_self_supervised,
           (long long)st->examples_held_out, (long long)st->examples_trained,
           (long long)st->examples_dropped, (long long)st->updates, st->last_loss);
    const ws_client_model_gate *g = &m->gate;
    if (!g->present) return;
    printf("gate           %lld published, %lld rejected, %lld restored", (long long)g->published,
           (long long)g->rejected, (long long)g->restored);
    if (g->served_probe_accuracy >= 0)
        printf(" (served version's probe accuracy %.4f)", g->served_probe_accuracy);
    printf("\n");
    if (g->anchor_version)
        printf("%-14s replay anchor: version %lld\n", "", (long long)g->anchor_version);
    if (g->last_verdict[0])
        printf("%-14s last decision: %s%s%s\n", "", g->last_verdict, g->last_reason[0] ? ": " : "",
               g->last_reason);
}

/* Prints a model as JSON or text, then frees it. */
static int show_model(cli_ctx *ctx, ws_client_model *m)
{
    int rc = CLI_EXIT_OK;
    if (ctx->json)
        rc = cli_print_json(cli_model_json(m));
    else
        print_model(m);
    ws_client_model_free(m);
    return rc;
}

static int list(cli_ctx *ctx)
{
    ws_client_model_list l;
    ws_client_error e;
    if (ws_client_model_list_get(ctx->client, &l, &e) != WS_CLIENT_OK)
        return cli_fail(&e, "model list");
    int rc = CLI_EXIT_OK;
    cJSON *arr = ctx->json ? cJSON_CreateArray() : NULL;
    if (!ctx->json)
        printf("%-24s %8s %5s %6s %6s %7s  %s\n", "NAME", "VERSION", "D", "HEADS", "STATE",
               "LAYERS", "TRAINING");
    for (int i = 0; i < l.n; i++) {
        const ws_client_model *m = &l.items[i];
        if (ctx->json) {
            if (!arr || !cJSON_AddItemToArray(arr, cli_model_json(m))) rc = CLI_EXIT_OTHER;
            continue;
        }
        printf("%-24s %8lld %5d %6d %6d %3d+%-3d  %s (lr %g)\n", m->name, (long long)m->version,
               m->config.d, m->config.n_heads, m->config.n_state, m->config.n_upd_layers,
               m->config.n_ext_layers, m->training.enabled ? "on" : "off", m->training.lr);
    }
    ws_client_model_list_free(&l);
    if (!ctx->json) return CLI_EXIT_OK;
    if (rc != CLI_EXIT_OK) {
        cJSON_Delete(arr);
        arr = NULL;
    }
    return cli_print_json(cli_json_item(cJSON_CreateObject(), "models", arr));
}

static int create(cli_ctx *ctx, int argc, char **argv)
{
    const char *name, *config = NULL, *tenant = NULL;
    long long seed = -1;
    training_flags tf = training_flags_unset();
    const cli_opt opts[] = {{"--config", CLI_STR, &config},
                            {"--seed", CLI_INT, &seed},
                            {"--tenant", CLI_STR, &tenant},
                            TRAINING_OPTS(tf),
                            {NULL, CLI_FLAG, NULL}};
    int rc = cli_parse(argc, argv, opts, &name, 1, 1, NULL, MODEL_USAGE), any = 0;
    ws_client_training_patch patch;
    if (rc == CLI_EXIT_OK) rc = patch_of(&tf, &patch, &any, MODEL_USAGE);
    if (rc != CLI_EXIT_OK) return rc;
    ws_client_model_spec spec = {.name = name,
                                 .config_json = config,
                                 .training = any ? &patch : NULL,
                                 .seed = seed,
                                 .tenant = tenant};
    ws_client_model m;
    ws_client_error e;
    if (ws_client_model_create(ctx->client, &spec, &m, &e) != WS_CLIENT_OK)
        return cli_fail(&e, "model create");
    return show_model(ctx, &m);
}

/* import NAME FILE [--tenant T] */
static int import(cli_ctx *ctx, int argc, char **argv)
{
    const char *pos[2], *tenant = NULL;
    const cli_opt opts[] = {{"--tenant", CLI_STR, &tenant}, {NULL, CLI_FLAG, NULL}};
    int rc = cli_parse(argc, argv, opts, pos, 2, 2, NULL, MODEL_USAGE);
    if (rc != CLI_EXIT_OK) return rc;
    ws_client_model m;
    ws_client_error e;
    int created = 0;
    if (ws_client_model_import(ctx->client, pos[0], tenant, pos[1], &m, &created, &e) !=
        WS_CLIENT_OK)
        return cli_fail(&e, "model import");
    if (ctx->json) {
        cJSON *o = cli_model_json(&m);
        rc = cli_print_json(o ? cli_json_item(o, "created", cJSON_CreateBool(created)) : NULL);
    } else {
        printf("imported %s as %s\n", pos[1], created ? "a new model" : "the model's next version");
        print_model(&m);
    }
    ws_client_model_free(&m);
    return rc;
}

/* rollback NAME VERSION */
static int rollback(cli_ctx *ctx, int argc, char **argv)
{
    const char *pos[2];
    const cli_opt none[] = {{NULL, CLI_FLAG, NULL}};
    int rc = cli_parse(argc, argv, none, pos, 2, 2, NULL, MODEL_USAGE);
    if (rc != CLI_EXIT_OK) return rc;
    char *end;
    errno = 0;
    long long v = strtoll(pos[1], &end, 10);
    if (errno || end == pos[1] || *end || v < 1)
        return cli_usage(MODEL_USAGE, "rollback: VERSION must be a positive integer, got \"%s\"",
                         pos[1]);
    ws_client_model m;
    ws_client_error e;
    if (ws_client_model_rollback(ctx->client, pos[0], v, &m, &e) != WS_CLIENT_OK)
        return cli_fail(&e, "model rollback");
    return show_model(ctx, &m);
}

/* versions NAME */
static int versions(cli_ctx *ctx, int argc, char **argv)
{
    const char *name;
    const cli_opt none[] = {{NULL, CLI_FLAG, NULL}};
    int rc = cli_parse(argc, argv, none, &name, 1, 1, NULL, MODEL_USAGE);
    if (rc != CLI_EXIT_OK) return rc;
    ws_client_version_list l;
    ws_client_error e;
    if (ws_client_model_versions(ctx->client, name, &l, &e) != WS_CLIENT_OK)
        return cli_fail(&e, "model versions");
    cJSON *arr = ctx->json ? cJSON_CreateArray() : NULL;
    if (!ctx->json)
        printf("%8s %-7s %-9s %-20s  %s\n", "VERSION", "CURRENT", "AVAILABLE", "CREATED", "NOTE");
    for (int i = 0; i < l.n; i++) {
        const ws_client_version *v = &l.items[i];
        if (ctx->json) {
            cJSON *o = cli_json_num(cJSON_CreateObject(), "version", (double)v->version);
            o = cli_json_str(o, "note", v->note);
            o = cli_json_num(o, "created_ms", (double)v->created_ms);
            o = cli_json_item(o, "current", cJSON_CreateBool(v->current));
            o = cli_json_item(o, "available", cJSON_CreateBool(v->available));
            if (!o || !arr || !cJSON_AddItemToArray(arr, o)) {
                cJSON_Delete(o);
                cJSON_Delete(arr);
                arr = NULL;
            }
            continue;
        }
        char when[32];
        cli_time(v->created_ms, when, sizeof when);
        printf("%8lld %-7s %-9s %-20s  %s\n", (long long)v->version, v->current ? "yes" : "",
               v->available ? "yes" : "no", when, v->note);
    }
    ws_client_version_list_free(&l);
    if (!ctx->json) return CLI_EXIT_OK;
    return cli_print_json(cli_json_item(cJSON_CreateObject(), "versions", arr));
}

/* delete NAME */
static int delete_model(cli_ctx *ctx, int argc, char **argv)
{
    const char *name;
    const cli_opt none[] = {{NULL, CLI_FLAG, NULL}};
    int rc = cli_parse(argc, argv, none, &name, 1, 1, NULL, MODEL_USAGE);
    if (rc != CLI_EXIT_OK) return rc;
    ws_client_error e;
    if (ws_client_model_delete(ctx->client, name, &e) != WS_CLIENT_OK)
        return cli_fail(&e, "model delete");
    if (ctx->json)
        return cli_print_json(cli_json_item(cli_json_str(cJSON_CreateObject(), "name", name),
                                            "deleted", cJSON_CreateTrue()));
    printf("deleted model %s\n", name);
    return CLI_EXIT_OK;
}

/* status NAME / checkpoint NAME --out FILE */
static int one(cli_ctx *ctx, int argc, char **argv, int checkpoint)
{
    const char *name, *out = NULL;
    const cli_opt opts[] = {{"--out", CLI_STR, &out}, {NULL, CLI_FLAG, NULL}};
    int rc = cli_parse(argc, argv, checkpoint ? opts : opts + 1, &name, 1, 1, NULL, MODEL_USAGE);
    if (rc != CLI_EXIT_OK) return rc;
    ws_client_error e;
    if (checkpoint) {
        int64_t version;
        if (!out) return cli_usage(MODEL_USAGE, "checkpoint needs --out FILE");
        if (ws_client_checkpoint_download(ctx->client, name, out, &version, &e) != WS_CLIENT_OK)
            return cli_fail(&e, "model checkpoint");
        if (!ctx->json) {
            printf("wrote %s (%s version %lld)\n", out, name, (long long)version);
            return CLI_EXIT_OK;
        }
        cJSON *o = cli_json_num(cli_json_str(cJSON_CreateObject(), "name", name), "version",
                                (double)version);
        return cli_print_json(cli_json_str(o, "path", out));
    }
    ws_client_model m;
    if (ws_client_model_get(ctx->client, name, &m, &e) != WS_CLIENT_OK)
        return cli_fail(&e, "model status");
    return show_model(ctx, &m);
}

int cli_cmd_model(cli_ctx *ctx, int argc, char **argv)
{
    if (argc < 1) return cli_usage(MODEL_USAGE, "model needs a subcommand");
    const char *sub = argv[0];
    if (!strcmp(sub, "list")) {
        const cli_opt none[] = {{NULL, CLI_FLAG, NULL}};
        int rc = cli_parse(argc - 1, argv + 1, none, NULL, 0, 0, NULL, MODEL_USAGE);
        return rc != CLI_EXIT_OK ? rc : list(ctx);
    }
    if (!strcmp(sub, "create")) return create(ctx, argc - 1, argv + 1);
    if (!strcmp(sub, "status")) return one(ctx, argc - 1, argv + 1, 0);
    if (!strcmp(sub, "checkpoint")) return one(ctx, argc - 1, argv + 1, 1);
    if (!strcmp(sub, "import")) return import(ctx, argc - 1, argv + 1);
    if (!strcmp(sub, "rollback")) return rollback(ctx, argc - 1, argv + 1);
    if (!strcmp(sub, "delete")) return delete_model(ctx, argc - 1, argv + 1);
    if (!strcmp(sub, "versions")) return versions(ctx, argc - 1, argv + 1);
    return cli_usage(MODEL_USAGE, "unknown model subcommand \"%s\"", sub);
}

int cli_cmd_training(cli_ctx *ctx, int argc, char **argv)
{
    const char *name;
    training_flags tf = training_flags_unset();
    const cli_opt opts[] = {TRAINING_OPTS(tf), {NULL, CLI_FLAG, NULL}};
    int rc = cli_parse(argc, argv, opts, &name, 1, 1, NULL, TRAINING_USAGE), any;
    ws_client_training_patch patch;
    if (rc == CLI_EXIT_OK) rc = patch_of(&tf, &patch, &any, TRAINING_USAGE);
    if (rc != CLI_EXIT_OK) return rc;
    ws_client_training t;
    ws_client_error e;
    /* No flags: an empty PATCH, which answers the current settings. */
    if (ws_client_training_set(ctx->client, name, &patch, &t, &e) != WS_CLIENT_OK)
        return cli_fail(&e, "training");
    if (ctx->json) return cli_print_json(cli_training_json(&t));
    print_training(name, &t);
    return CLI_EXIT_OK;
}
