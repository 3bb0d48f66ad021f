/* cmd_export.c — worldstate export ID [--after N] | --all: step logs as JSON
 * Lines on stdout, one record per step in step order (a session's records
 * together, sessions in id order). Each record is the step object
 * {instructions, queries, labels} that `step --file` posts again, plus the
 * metadata session, step, answers, model_version, time_ms. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#define USAGE "worldstate export ID [--after N] | worldstate export --all"
#define PAGE  1000

static int export_session(cli_ctx *ctx, const char *id, long long after, long long *n)
{
    int64_t next = after;
    while (next != WS_CLIENT_NO_STEP) {
        ws_client_log_page p;
        ws_client_error e;
        if (ws_client_step_log(ctx->client, id, next, PAGE, &p, &e) != WS_CLIENT_OK)
            return cli_fail(&e, "export");
        for (int i = 0; i < p.n; i++) {
            char *line;
            if (ws_client_log_entry_to_json(&p.steps[i], &line, &e) != WS_CLIENT_OK) {
                ws_client_log_page_free(&p);
                return cli_fail(&e, "export");
            }
            puts(line);
            free(line);
        }
        *n += p.n;
        next = p.next_after;
        ws_client_log_page_free(&p);
    }
    return CLI_EXIT_OK;
}

/* Every session of the tenant: the ids first (a listing cannot stay open while
 * we read logs), then each log. */
static int export_all(cli_ctx *ctx, long long *n, long long *sessions)
{
    char(*ids)[WS_CLIENT_ID_LEN + 1] = NULL;
    size_t count = 0;
    char after[WS_CLIENT_ID_LEN + 1] = "";
    int rc = CLI_EXIT_OK;
    do {
        ws_client_session_page p;
        ws_client_error e;
        if (ws_client_session_list(ctx->client, after, PAGE, &p, &e) != WS_CLIENT_OK) {
            rc = cli_fail(&e, "export --all");
            break;
        }
        void *grown = realloc(ids, sizeof *ids * (count + (size_t)p.n + 1));
        if (!grown) {
            ws_client_session_page_free(&p);
            rc = cli_error(CLI_EXIT_OTHER, "out_of_memory", "out of memory");
            break;
        }
        ids = grown;
        for (int i = 0; i < p.n; i++) memcpy(ids[count++], p.items[i].id, sizeof ids[0]);
        memcpy(after, p.next_after, sizeof after);
        ws_client_session_page_free(&p);
    } while (after[0]);
    for (size_t i = 0; rc == CLI_EXIT_OK && i < count; i++) rc = export_session(ctx, ids[i], 0, n);
    *sessions = (long long)count;
    free(ids);
    return rc;
}

int cli_cmd_export(cli_ctx *ctx, int argc, char **argv)
{
    const char *id = NULL;
    long long after = 0, n = 0, sessions = 1;
    int all = 0, n_pos = 0;
    const cli_opt opts[] = {
        {"--after", CLI_INT, &after}, {"--all", CLI_FLAG, &all}, {NULL, CLI_FLAG, NULL}};
    int rc = cli_parse(argc, argv, opts, &id, 0, 1, &n_pos, USAGE);
    if (rc != CLI_EXIT_OK) return rc;
    if (all == (n_pos == 1)) return cli_usage(USAGE, "give a session id or --all (not both)");
    if (after < 0 || (all && after))
        return cli_usage(USAGE, "--after takes a step >= 0, with one session");
    rc = all ? export_all(ctx, &n, &sessions) : export_session(ctx, id, after, &n);
    int out = cli_flush_stdout();
    if (rc == CLI_EXIT_OK && out == CLI_EXIT_OK && !ctx->json && isatty(STDERR_FILENO))
        fprintf(stderr, "exported %lld steps of %lld session%s\n", n, sessions,
                sessions == 1 ? "" : "s");
    return rc != CLI_EXIT_OK ? rc : out;
}
