/* output.c — error reports with exit codes, and the output helpers every
 * subcommand uses (JSON lines, times, answer tables). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli.h"

/* --json: errors are JSON too (cli_errors_json); process-wide, as --json is:
 * set once by main before any command runs. */
static int errors_json;

void cli_errors_json(int on)
{
    errors_json = on;
}

int cli_json_errors(void)
{
    return errors_json;
}

/* {"error":{"code","message"[,"status"][,"current_step"][,"usage"]}} on one
 * line of stderr; plain text when it cannot be built. */
static void error_json(const char *code, const char *message, long status, int64_t current_step,
                       const char *usage)
{
    cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
    int ok =
        e && cJSON_AddStringToObject(e, "code", code) &&
        cJSON_AddStringToObject(e, "message", message) &&
        (!status || cJSON_AddNumberToObject(e, "status", (double)status)) &&
        (current_step < 0 || cJSON_AddNumberToObject(e, "current_step", (double)current_step)) &&
        (!usage || cJSON_AddStringToObject(e, "usage", usage));
    char *text = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (text)
        fprintf(stderr, "%s\n", text);
    else
        fprintf(stderr, "worldstate: %s\n", message);
    cJSON_free(text);
}

/* One error, as text or JSON; `usage` (may be NULL) follows it. */
static void report(const char *code, long status, int64_t current_step, const char *usage,
                   const char *fmt, va_list ap)
{
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (errors_json) return error_json(code, msg, status, current_step, usage);
    fprintf(stderr, "worldstate: %s\n", msg);
    if (usage) fprintf(stderr, "usage: %s\n", usage);
}

int cli_error(int exit_code, const char *code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    report(code, 0, -1, NULL, fmt, ap);
    va_end(ap);
    return exit_code;
}

int cli_usage(const char *usage, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    report("usage", 0, -1, usage, fmt, ap);
    va_end(ap);
    return CLI_EXIT_USAGE;
}

/* cli_fail's report of an HTTP error (its own function: a va_list to pass). */
static void http_error(const ws_client_error *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void http_error(const ws_client_error *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    report(e->code[0] ? e->code : "http_error", e->status, e->current_step, NULL, fmt, ap);
    va_end(ap);
}

int cli_fail(const ws_client_error *e, const char *what)
{
    switch (e->kind) {
    case WS_CLIENT_ERR_HTTP:
        if (errors_json)
            http_error(e, "%s: %s", what, e->message);
        else
            http_error(e, "%s: %s [%s, HTTP %ld]", what, e->message,
                       e->code[0] ? e->code : "no code", e->status);
        return CLI_EXIT_SERVER;
    case WS_CLIENT_ERR_TRANSPORT:
        return cli_error(CLI_EXIT_TRANSPORT, "unreachable",
                         "%s: cannot reach the server: %s (after %d attempt%s)", what, e->message,
                         e->attempts, e->attempts == 1 ? "" : "s");
    case WS_CLIENT_ERR_INVALID:
        return cli_error(CLI_EXIT_USAGE, "usage", "%s: %s", what, e->message);
    case WS_CLIENT_ERR_IO: return cli_error(CLI_EXIT_INPUT, "io", "%s: %s", what, e->message);
    default:
        return cli_error(CLI_EXIT_OTHER, ws_client_status_name(e->kind), "%s: %s (%s)", what,
                         e->message, ws_client_status_name(e->kind));
    }
}

int cli_print_json(cJSON *obj)
{
    char *text = obj ? cJSON_PrintUnformatted(obj) : NULL;
    cJSON_Delete(obj);
    if (!text) return cli_error(CLI_EXIT_OTHER, "out_of_memory", "out of memory");
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
    return cli_error(CLI_EXIT_INPUT, "io", "cannot write the output");
}
