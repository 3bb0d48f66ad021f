/* cmd_session.c — worldstate session create|list|show|delete. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

#define USAGE "worldstate session create [--model NAME] | list [--limit N] | show ID | delete ID"

static void print_session(const ws_client_session *s)
{
    char created[32], updated[32];
    cli_time(s->created_ms, created, sizeof created);
    cli_time(s->updated_ms, updated, sizeof updated);
    printf("id             %s\nmodel          %s\nstep           %lld\nstate_version  %lld\n"
           "state_shape    %d x %d\ncreated        %s\nupdated        %s\n",
           s->id, s->model, (long long)s->step, (long long)s->state_version, s->state_rows,
           s->state_cols, created, updated);
}

static int create(cli_ctx *ctx, int argc, char **argv)
{
    const char *model = NULL;
    const cli_opt opts[] = {{"--model", CLI_STR, &model}, {NULL, CLI_FLAG, NULL}};
    int rc = cli_parse(argc, argv, opts, NULL, 0, 0, NULL, USAGE);
    if (rc != CLI_EXIT_OK) return rc;
    ws_client_session s;
    ws_client_error e;
    if (ws_client_session_create(ctx->client, model, &s, &e) != WS_CLIENT_OK)
        return cli_fail(&e, "session create");
    if (ctx->json) return cli_print_json(cli_session_json(&s, 0));
    printf("%s\n", s.id); /* bare id: SID=$(worldstate session create) */
    return CLI_EXIT_OK;
}

/* Follows next_after through every page, or stops after `limit` sessions. */
static int list(cli_ctx *ctx, int argc, char **argv)
{
    long long limit = 0;
    const cli_opt opts[] = {{"--limit", CLI_INT, &limit}, {NULL, CLI_FLAG, NULL}};
    int rc = cli_parse(argc, argv, opts, NULL, 0, 0, NULL, USAGE);
    if (rc != CLI_EXIT_OK) return rc;
    if (limit < 0) return cli_usage(USAGE, "--limit must be >= 1");
    cJSON *arr = ctx->json ? cJSON_CreateArray() : NULL;
    if (ctx->json && !arr) return cli_print_json(NULL);
    if (!ctx->json) printf("%-32s %10s  %s\n", "ID", "STEP", "UPDATED");
    char after[WS_CLIENT_ID_LEN + 1] = "";
    long long shown = 0;
    do {
        int page = limit && limit - shown < 1000 ? (int)(limit - shown) : 1000;
        ws_client_session_page p;
        ws_client_error e;
        if (ws_client_session_list(ctx->client, after, page, &p, &e) != WS_CLIENT_OK) {
            cJSON_Delete(arr);
            return cli_fail(&e, "session list");
        }
        for (int i = 0; i < p.n; i++, shown++) {
            char updated[32];
            cli_time(p.items[i].updated_ms, updated, sizeof updated);
            if (!ctx->json)
                printf("%-32s %10lld  %s\n", p.items[i].id, (long long)p.items[i].step, updated);
            else if (!cJSON_AddItemToArray(arr, cli_session_json(&p.items[i], 1)))
                rc = CLI_EXIT_OTHER;
        }
        memcpy(after, p.next_after, sizeof after);
        ws_client_session_page_free(&p);
    } while (after[0] && (!limit || shown < limit) && rc == CLI_EXIT_OK);
    if (rc != CLI_EXIT_OK) {
        cJSON_Delete(arr);
        return cli_print_json(NULL);
    }
    return ctx->json ? cli_print_json(cli_json_item(cJSON_CreateObject(), "sessions", arr))
                     : CLI_EXIT_OK;
}

/* show ID / delete ID */
static int one(cli_ctx *ctx, int argc, char **argv, int del)
{
    const char *id;
    const cli_opt opts[] = {{NULL, CLI_FLAG, NULL}};
    int rc = cli_parse(argc, argv, opts, &id, 1, 1, NULL, USAGE);
    if (rc != CLI_EXIT_OK) return rc;
    ws_client_error e;
    if (del) {
        if (ws_client_session_delete(ctx->client, id, &e) != WS_CLIENT_OK)
            return cli_fail(&e, "session delete");
        if (!ctx->json) {
            printf("deleted %s\n", id);
            return CLI_EXIT_OK;
        }
        return cli_print_json(cli_json_item(cli_json_str(cJSON_CreateObject(), "id", id), "deleted",
                                            cJSON_CreateTrue()));
    }
    ws_client_session s;
    if (ws_client_session_get(ctx->client, id, &s, &e) != WS_CLIENT_OK)
        return cli_fail(&e, "session show");
    if (ctx->json) return cli_print_json(cli_session_json(&s, 0));
    print_session(&s);
    return CLI_EXIT_OK;
}

int cli_cmd_session(cli_ctx *ctx, int argc, char **argv)
{
    if (argc < 1) return cli_usage(USAGE, "session needs a subcommand");
    const char *sub = argv[0];
    if (!strcmp(sub, "create")) return create(ctx, argc - 1, argv + 1);
    if (!strcmp(sub, "list")) return list(ctx, argc - 1, argv + 1);
    if (!strcmp(sub, "show")) return one(ctx, argc - 1, argv + 1, 0);
    if (!strcmp(sub, "delete")) return one(ctx, argc - 1, argv + 1, 1);
    return cli_usage(USAGE, "unknown session subcommand \"%s\"", sub);
}
