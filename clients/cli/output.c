/* output.c — error reports with exit codes, and the output helpers every
 * subcommand uses (JSON lines, times, answer tables). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli.h"

int cli_fail(const ws_client_error *e, const char *what)
{
    switch (e->kind) {
    case WS_CLIENT_ERR_HTTP:
        fprintf(stderr, "worldstate: %s: %s [%s, HTTP %ld]\n", what, e->message,
                e->code[0] ? e->code : "no code", e->status);
        return CLI_EXIT_SERVER;
    case WS_CLIENT_ERR_TRANSPORT:
        fprintf(stderr, "worldstate: %s: cannot reach the server: %s (after %d attempt%s)\n", what,
                e->message, e->attempts, e->attempts == 1 ? "" : "s");
        return CLI_EXIT_TRANSPORT;
    case WS_CLIENT_ERR_INVALID:
        fprintf(stderr, "worldstate: %s: %s\n", what, e->message);
        return CLI_EXIT_USAGE;
    case WS_CLIENT_ERR_IO:
        fprintf(stderr, "worldstate: %s: %s\n", what, e->message);
        return CLI_EXIT_INPUT;
    default:
        fprintf(stderr, "worldstate: %s: %s (%s)\n", what, e->message,
                ws_client_status_name(e->kind));
        return CLI_EXIT_OTHER;
    }
}

int cli_print_json(cJSON *obj)
{
    char *text = obj ? cJSON_PrintUnformatted(obj) : NULL;
    cJSON_Delete(obj);
    if (!text) {
        fprintf(stderr, "worldstate: out of memory\n");
        return CLI_EXIT_OTHER;
    }
    puts(text);
    cJSON_free(text);
    return CLI_EXIT_OK;
}

void cli_time(int64_t ms, char *buf, size_t cap)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    if (ms <= 0 || !gmtime_r(&t, &tm) || !strftime(buf, cap, "%Y-%m-%d %H:%M:%SZ", &tm))
        snprintf(buf, cap, "-");
}

static void print_fact(const ws_client_fact *f)
{
    for (int i = 0; i < f->n_symbols; i++) printf("%s%s", i ? "," : "", f->symbols[i]);
    if (f->n_vector) printf("(vector of %d)", f->n_vector);
}

int cli_print_answers(const cli_ctx *ctx, const ws_client_answers *a, const ws_client_fact *queries,
                      int n_queries)
{
    if (ctx->json) {
        cJSON *arr = cJSON_CreateArray();
        for (int i = 0; arr && i < a->n_answers; i++) {
            cJSON *x = cli_json_num(cJSON_CreateObject(), "p", a->answers[i].p);
            x = cli_json_item(x, "holds", cJSON_CreateBool(a->answers[i].holds));
            if (!x || !cJSON_AddItemToArray(arr, x)) {
                cJSON_Delete(x);
                cJSON_Delete(arr);
                arr = NULL;
            }
        }
        cJSON *o = cli_json_num(cJSON_CreateObject(), "step", (double)a->step);
        o = cli_json_item(o, "answers", arr);
        return cli_print_json(cli_json_num(o, "model_version", (double)a->model_version));
    }
    printf("step %lld (model version %lld)%s\n", (long long)a->step, (long long)a->model_version,
           a->recovered ? " [reply recovered from the step log]" : "");
    if (a->n_answers) printf("%-8s %-6s %s\n", "P", "HOLDS", "QUERY");
    for (int i = 0; i < a->n_answers; i++) {
        printf("%-8.4f %-6s ", a->answers[i].p, a->answers[i].holds ? "yes" : "no");
        if (i < n_queries) print_fact(&queries[i]);
        putchar('\n');
    }
    return CLI_EXIT_OK;
}

int cli_flush_stdout(void)
{
    if (fflush(stdout) == 0 && !ferror(stdout)) return CLI_EXIT_OK;
    fprintf(stderr, "worldstate: cannot write the output\n");
    return CLI_EXIT_INPUT;
}
