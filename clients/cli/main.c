/* main.c — `worldstate`, the command-line client of worldstated: global
 * flags, the client handle, and dispatch to the subcommands. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char HELP[] =
    "usage: worldstate [--url URL] [--key KEY] [--json] [--timeout-ms N] [--retries N] COMMAND "
    "...\n"
    "\n"
    "  session create [--model NAME]          create a session (prints its id)\n"
    "  session list [--limit N]               the tenant's sessions\n"
    "  session show ID | session delete ID\n"
    "  step ID [--instr S,S=true|false]... [--query S,S]... [--label true|false]... [--expect N]\n"
    "  step ID --file STEPS.jsonl [--base N] [--only-session OLD_ID]\n"
    "                                         post one step per line; re-running resumes\n"
    "  query ID --query S,S [--query ...]     answer queries without changing the state\n"
    "  labels ID STEP --label true|false... [--replace]\n"
    "  export ID [--after N] | export --all   step logs as JSON Lines (input of step --file)\n"
    "  model list | model status NAME | model checkpoint NAME --out FILE\n"
    "  model create NAME [--config JSON] [--seed N] [--tenant T] [training flags]\n"
    "                                         (admin; --tenant: only T's sessions use it)\n"
    "  model import NAME FILE [--tenant T]    a trained checkpoint (safetensors) becomes model\n"
    "                                         NAME (T's own with --tenant), or its next version\n"
    "                                         when NAME exists\n"
    "  model rollback NAME VERSION            make an earlier version current again (admin)\n"
    "  training NAME [--enable|--disable] [--lr X] [--update-every N] [--recall-queries N]\n"
    "        [--self-supervised|--no-self-supervised] [--negative-queries N] [--holdout X]\n"
    "        [--gate|--no-gate] [--gate-tolerance X]\n"
    "  health                                 liveness and readiness\n"
    "\n"
    "  --url         default $WORLDSTATE_URL, else http://127.0.0.1:8080\n"
    "  --key         API key (default $WORLDSTATE_API_KEY)\n"
    "  --json        machine-readable output (one JSON document per command)\n"
    "  --timeout-ms  per request attempt (default 30000); --retries N (default 3)\n"
    "exit codes: 0 ok, 1 server error, 2 usage, 3 server unreachable, 4 input/output file, 5 "
    "other\n";

typedef struct {
    const char *name;
    int (*run)(cli_ctx *, int, char **);
} command;

static const command COMMANDS[] = {{"session", cli_cmd_session},   {"step", cli_cmd_step},
                                   {"query", cli_cmd_query},       {"labels", cli_cmd_labels},
                                   {"export", cli_cmd_export},     {"model", cli_cmd_model},
                                   {"training", cli_cmd_training}, {"health", cli_cmd_health}};

static int number(const char *flag, const char *v, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (!*v || *end || errno || x < lo || x > hi) {
        fprintf(stderr, "worldstate: %s needs an integer in [%ld, %ld]\n%s", flag, lo, hi, HELP);
        return CLI_EXIT_USAGE;
    }
    *out = x;
    return CLI_EXIT_OK;
}

/* Takes the global flags out of argv (they may stand anywhere); the rest is
 * the command and its arguments. */
static int globals(int *argc, char **argv, ws_client_config *cfg, int *json)
{
    int n = 1, rc = CLI_EXIT_OK;
    for (int i = 1; i < *argc && rc == CLI_EXIT_OK; i++) {
        const char *a = argv[i];
        int takes = !strcmp(a, "--url") || !strcmp(a, "--key") || !strcmp(a, "--timeout-ms") ||
                    !strcmp(a, "--retries");
        if (!strcmp(a, "--json")) {
            *json = 1;
            continue;
        }
        if (!takes) {
            argv[n++] = argv[i];
            continue;
        }
        if (i + 1 == *argc) {
            fprintf(stderr, "worldstate: %s needs a value\n%s", a, HELP);
            return CLI_EXIT_USAGE;
        }
        const char *v = argv[++i];
        long x;
        if (!strcmp(a, "--url"))
            cfg->url = v;
        else if (!strcmp(a, "--key"))
            cfg->api_key = v;
        else if (!strcmp(a, "--timeout-ms") && (rc = number(a, v, 1, 86400000L, &x)) == CLI_EXIT_OK)
            cfg->timeout_ms = x;
        else if (!strcmp(a, "--retries") && (rc = number(a, v, 0, 100, &x)) == CLI_EXIT_OK)
            cfg->retries = (int)x;
    }
    *argc = n;
    return rc;
}

int main(int argc, char **argv)
{
    ws_client_config cfg = ws_client_config_default();
    const char *env_url = getenv("WORLDSTATE_URL"), *env_key = getenv("WORLDSTATE_API_KEY");
    if (env_url && *env_url) cfg.url = env_url;
    if (env_key && *env_key) cfg.api_key = env_key;
    cli_ctx ctx = {0};
    int rc = globals(&argc, argv, &cfg, &ctx.json);
    if (rc != CLI_EXIT_OK) return rc;
    if (argc < 2 || !strcmp(argv[1], "help") || !strcmp(argv[1], "--help") ||
        !strcmp(argv[1], "-h")) {
        fputs(HELP, argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
    }
    const command *cmd = NULL;
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        if (!strcmp(argv[1], COMMANDS[i].name)) cmd = &COMMANDS[i];
    if (!cmd) {
        fprintf(stderr, "worldstate: unknown command \"%s\"\n%s", argv[1], HELP);
        return CLI_EXIT_USAGE;
    }
    ws_client_error e;
    if (ws_client_new(&cfg, &ctx.client, &e) != WS_CLIENT_OK) return cli_fail(&e, "setup");
    rc = cmd->run(&ctx, argc - 2, argv + 2);
    ws_client_free(ctx.client);
    int out = cli_flush_stdout();
    return rc != CLI_EXIT_OK ? rc : out;
}
