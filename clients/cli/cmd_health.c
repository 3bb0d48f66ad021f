/* cmd_health.c — worldstate health: /healthz and /readyz in one line. Exit 0
 * when ready, 1 when the daemon answers but is not ready, 3 when unreachable. */
#include <stdio.h>

#include "cli.h"

#define USAGE "worldstate health"

int cli_cmd_health(cli_ctx *ctx, int argc, char **argv)
{
    const cli_opt none[] = {{NULL, CLI_FLAG, NULL}};
    int rc = cli_parse(argc, argv, none, NULL, 0, 0, NULL, USAGE);
    if (rc != CLI_EXIT_OK) return rc;
    ws_client_ready r;
    ws_client_error e;
    if (ws_client_healthz(ctx->client, &e) != WS_CLIENT_OK) return cli_fail(&e, "healthz");
    if (ws_client_readyz(ctx->client, &r, &e) != WS_CLIENT_OK) return cli_fail(&e, "readyz");
    rc = r.ready ? CLI_EXIT_OK : CLI_EXIT_SERVER;
    if (!ctx->json) {
        if (r.ready)
            printf("ok: ready (durability %s, queue depth %lld)\n", r.durability,
                   (long long)r.queue_depth);
        else
            printf("up, not ready: %s\n", r.reason);
        return rc;
    }
    cJSON *o = cli_json_item(cJSON_CreateObject(), "healthy", cJSON_CreateTrue());
    o = cli_json_item(o, "ready", cJSON_CreateBool(r.ready));
    o = r.ready ? cli_json_num(cli_json_str(o, "durability", r.durability), "queue_depth",
                               (double)r.queue_depth)
                : cli_json_str(o, "reason", r.reason);
    int out = cli_print_json(o);
    return out != CLI_EXIT_OK ? out : rc;
}
