/* cmd_step.c — worldstate step | query | labels: one request built from flags
 * (step --file streams a JSON Lines file: cmd_file.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define STEP_USAGE                                                                      \
    "worldstate step ID [--instr SYM,SYM=true|false]... [--query SYM,SYM]... [--label " \
    "true|false]...\n"                                                                  \
    "                   [--expect N]\n"                                                 \
    "       worldstate step ID --file STEPS.jsonl [--base N] [--only-session OLD_ID]"
#define QUERY_USAGE  "worldstate query ID --query SYM,SYM [--query ...]"
#define LABELS_USAGE "worldstate labels ID STEP --label true|false [--label ...] [--replace]"

/* Posts req as a step (step = 1) or asks its queries alone, and prints the answers. */
static int answer(cli_ctx *ctx, const char *id, const ws_client_step_req *req, int step)
{
    ws_client_answers a;
    ws_client_error e;
    ws_client_status s =
        step ? ws_client_step(ctx->client, id, req, &a, &e)
             : ws_client_query(ctx->client, id, req->queries, req->n_queries, &a, &e);
    if (s != WS_CLIENT_OK) return cli_fail(&e, step ? "step" : "query");
    int rc = cli_print_answers(ctx, &a, req->queries, req->n_queries);
    ws_client_answers_free(&a);
    return rc;
}

int cli_cmd_step(cli_ctx *ctx, int argc, char **argv)
{
    cli_list instr = {0}, query = {0}, labels = {0};
    const char *id, *file = NULL, *only = NULL;
    long long expect = WS_CLIENT_NO_STEP, base = 0;
    const cli_opt opts[] = {{"--instr", CLI_LIST, &instr},      {"--query", CLI_LIST, &query},
                            {"--label", CLI_LIST, &labels},     {"--expect", CLI_INT, &expect},
                            {"--file", CLI_STR, &file},         {"--base", CLI_INT, &base},
                            {"--only-session", CLI_STR, &only}, {NULL, CLI_FLAG, NULL}};
    int rc = cli_parse(argc, argv, opts, &id, 1, 1, NULL, STEP_USAGE);
    if (rc == CLI_EXIT_OK && file &&
        (instr.n || query.n || labels.n || expect != WS_CLIENT_NO_STEP))
        rc = cli_usage(STEP_USAGE,
                       "--file takes the steps from the file: no --instr/--query/--label/--expect");
    if (rc == CLI_EXIT_OK && !file && (base || only))
        rc = cli_usage(STEP_USAGE, "--base and --only-session go with --file");
    if (rc == CLI_EXIT_OK && (expect < WS_CLIENT_NO_STEP || base < 0))
        rc = cli_usage(STEP_USAGE, "--expect and --base must be >= 0");
    if (rc == CLI_EXIT_OK && file)
        rc = cli_step_file(ctx, id, file, base, only);
    else if (rc == CLI_EXIT_OK) {
        ws_client_step_req req;
        rc = cli_step_req_build(&instr, &query, &labels, &req) == 0 ? CLI_EXIT_OK : CLI_EXIT_USAGE;
        req.expect_step = expect;
        if (rc == CLI_EXIT_OK) rc = answer(ctx, id, &req, 1);
        ws_client_step_req_free(&req);
    }
    cli_opts_free(opts);
    return rc;
}

int cli_cmd_query(cli_ctx *ctx, int argc, char **argv)
{
    cli_list none = {0}, query = {0};
    const char *id;
    const cli_opt opts[] = {{"--query", CLI_LIST, &query}, {NULL, CLI_FLAG, NULL}};
    int rc = cli_parse(argc, argv, opts, &id, 1, 1, NULL, QUERY_USAGE);
    if (rc == CLI_EXIT_OK && !query.n) rc = cli_usage(QUERY_USAGE, "give at least one --query");
    ws_client_step_req req = {0};
    if (rc == CLI_EXIT_OK && cli_step_req_build(&none, &query, &none, &req) != 0)
        rc = CLI_EXIT_USAGE;
    if (rc == CLI_EXIT_OK) rc = answer(ctx, id, &req, 0);
    ws_client_step_req_free(&req);
    cli_opts_free(opts);
    return rc;
}

/* The server's 409 labels_conflict names the API's field ("replace": true);
 * here it is a flag. */
static void replace_hint(ws_client_error *e)
{
    char *p = strstr(e->message, "(send \"replace\": true");
    if (p)
        snprintf(p, sizeof e->message - (size_t)(p - e->message), "(add --replace to change them)");
}

int cli_cmd_labels(cli_ctx *ctx, int argc, char **argv)
{
    cli_list labels = {0};
    const char *pos[2];
    int replace = 0;
    const cli_opt opts[] = {
        {"--label", CLI_LIST, &labels}, {"--replace", CLI_FLAG, &replace}, {NULL, CLI_FLAG, NULL}};
    int rc = cli_parse(argc, argv, opts, pos, 2, 2, NULL, LABELS_USAGE);
    char *end = NULL;
    long long step = rc == CLI_EXIT_OK ? strtoll(pos[1], &end, 10) : 0;
    if (rc == CLI_EXIT_OK && (*end || step < 1))
        rc = cli_usage(LABELS_USAGE, "STEP must be a step number >= 1");
    if (rc == CLI_EXIT_OK && !labels.n)
        rc = cli_usage(LABELS_USAGE, "give the labels with --label");
    int *vals = NULL, n = 0, queued = 0;
    if (rc == CLI_EXIT_OK && cli_labels_parse(&labels, &vals, &n) != 0) rc = CLI_EXIT_USAGE;
    ws_client_error e;
    if (rc == CLI_EXIT_OK && ws_client_labels_put(ctx->client, pos[0], step, vals, n, replace,
                                                  &queued, &e) != WS_CLIENT_OK) {
        replace_hint(&e);
        rc = cli_fail(&e, "labels");
    } else if (rc == CLI_EXIT_OK && ctx->json) {
        cJSON *o = cli_json_num(cJSON_CreateObject(), "step", (double)step);
        o = cli_json_item(o, "stored", cJSON_CreateTrue());
        rc = cli_print_json(cli_json_item(o, "training_example", cJSON_CreateBool(queued)));
    } else if (rc == CLI_EXIT_OK) {
        printf("step %lld labelled%s\n", step,
               queued ? " (became an online training example)" : "");
    }
    free(vals);
    cli_opts_free(opts);
    return rc;
}
