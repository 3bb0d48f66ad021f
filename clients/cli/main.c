/* main.c — `worldstate`, the command-line client of worldstated: global
 * flags, the client handle, and dispatch to the subcommands. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ws_version.h"
#include "cli.h"

static const char HELP[] =
    "usage: worldstate [--url URL] [--key KEY] [--json] [--timeout-ms N] [--retries N] COMMAND "
    "...\n"
    "       worldstate --help | --version\n"
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
    "  model versions NAME                    recorded versions: current, still available\n"
    "  model rollback NAME VERSION            make an earlier version current again (admin)\n"
    "  model delete NAME                      a model with its versions and files (admin; not\n"
    "                                         default, nor a model sessions still use)\n"
    "  training NAME [--enable|--disable] [--lr X] [--update-every N] [--recall-queries N]\n"
    "        [--self-supervised|--no-self-supervised] [--negative-queries N] [--holdout X]\n"
    "        [--gate|--no-gate] [--gate-tolerance X] [--rehearsal N] [--scope all|symbols]\n"
    "        [--rules|--no-rules]\n"
    "  health                                 liveness and readiness\n"
    "\n"
    "command flags (default when absent):\n"
    "  --model NAME    session create: the session's model (default)\n"
    "  --limit N       session list: at most N sessions (every page)\n"
    "  --expect N      step: apply only at step N, else 409 (any step)\n"
    "  --base N        step --file: the file's first step becomes step N + 1 (0)\n"
    "  --only-session  step --file: only that session's records (every record)\n"
    "  --after N       export: the steps after step N (0: all)\n"
    "  --replace       labels: overwrite different labels given before (409 instead)\n"
    "  --config JSON   model create: the model's config (the server's defaults)\n"
    "  --seed N        model create: initialisation seed (1)\n"
    "  training flags  model create, training: unchanged when absent\n"
    "\n"
    "global flags:\n"
    "  --url         default $WORLDSTATE_URL, else http://127.0.0.1:8080\n"
    "  --key         API key (default $WORLDSTATE_API_KEY)\n"
    "  --json        machine-readable output (one JSON document per command); errors as\n"
    "                {\"error\":{\"code\",\"message\",...}} on stderr\n"
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

/* A bad command line: the message and the help (with --json, one JSON error). */
static int usage_error(const char *msg)
{
    cli_error(CLI_EXIT_USAGE, "usage", "%s", msg);
    if (!cli_json_errors()) fputs(HELP, stderr);
    return CLI_EXIT_USAGE;
}

/* v as an integer in [lo, hi], else 0 with why (cap bytes). */
static int number(const char *flag, const char *v, long lo, long hi, long *out, char *why,
                  size_t cap)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (!*v || *end || errno || x < lo || x > hi) {
        snprintf(why, cap, "%s needs an integer in [%ld, %ld]", flag, lo, hi);
        return 0;
    }
    *out = x;
    return 1;
}

/* Takes the global flags out of argv (they may stand anywhere); the rest is
 * the command and its arguments. A bad one is reported once all are read, so
 * that --json after it still makes the report JSON. */
static int globals(int *argc, char **argv, ws_client_config *cfg, int *json)
{
    int n = 1;
    char why[160] = "";
    for (int i = 1; i < *argc; i++) {
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
            if (!why[0]) snprintf(why, sizeof why, "%s needs a value", a);
            continue;
        }
        const char *v = argv[++i];
        long x;
        if (!strcmp(a, "--url"))
            cfg->url = v;
        else if (!strcmp(a, "--key"))
            cfg->api_key = v;
        else if (!strcmp(a, "--timeout-ms") && !why[0] &&
                 number(a, v, 1, 86400000L, &x, why, sizeof why))
            cfg->timeout_ms = x;
        else if (!strcmp(a, "--retries") && !why[0] && number(a, v, 0, 100, &x, why, sizeof why))
            cfg->retries = (int)x;
    }
    *argc = n;
    cli_errors_json(*json);
    return why[0] ? usage_error(why) : CLI_EXIT_OK;
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
    if (!strcmp(argv[1], "--version")) {
        ws_version_print(stdout, "worldstate");
        return cli_flush_stdout();
    }
    const command *cmd = NULL;
    for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
        if (!strcmp(argv[1], COMMANDS[i].name)) cmd = &COMMANDS[i];
    if (!cmd) {
        char msg[160];
        snprintf(msg, sizeof msg, "unknown command \"%.100s\"", argv[1]);
        return usage_error(msg);
    }
    ws_client_error e;
    if (ws_client_new(&cfg, &ctx.client, &e) != WS_CLIENT_OK) return cli_fail(&e, "setup");
    rc = cmd->run(&ctx, argc - 2, argv + 2);
    ws_client_free(ctx.client);
    int out = cli_flush_stdout();
    return rc != CLI_EXIT_OK ? rc : out;
}
