/* cli.h — the `worldstate` command-line client: what the subcommands share
 * (context, option parsing, error reporting and output helpers). */
#ifndef WS_CLI_H
#define WS_CLI_H

#include <cjson/cJSON.h>

#include "clients/ws_client.h"

/* Exit codes (clients/README.md). */
enum {
    CLI_EXIT_OK = 0,
    CLI_EXIT_SERVER = 1,    /* the server answered an error, or is not ready */
    CLI_EXIT_USAGE = 2,     /* bad command line */
    CLI_EXIT_TRANSPORT = 3, /* no answer: connection refused, timeout */
    CLI_EXIT_INPUT = 4,     /* a bad input line, or a local file that cannot be read or written */
    CLI_EXIT_OTHER = 5      /* an answer the client does not understand, out of memory */
};

typedef struct {
    ws_client *client;
    int json; /* --json: machine-readable output on stdout */
} cli_ctx;

/* ---- options (args.c) ----------------------------------------------------------- */

typedef enum { CLI_FLAG, CLI_STR, CLI_INT, CLI_NUM, CLI_LIST } cli_opt_kind;

typedef struct {
    const char **items;
    int n;
} cli_list;

/* dst: int* (CLI_FLAG: set to 1), const char ** (CLI_STR), long long * (CLI_INT),
 * double * (CLI_NUM), cli_list * (CLI_LIST: repeatable, values in order). */
typedef struct {
    const char *name;
    cli_opt_kind kind;
    void *dst;
} cli_opt;

/* Parses argv[0..argc) against opts (NULL-name terminated); positional
 * arguments go to pos (n_min..n_max of them). Returns CLI_EXIT_OK or, after
 * printing why and `usage`, CLI_EXIT_USAGE. Lists are freed with cli_opts_free. */
int cli_parse(int argc, char **argv, const cli_opt *opts, const char **pos, int n_min, int n_max,
              int *n_pos, const char *usage);
void cli_opts_free(const cli_opt *opts);
/* Prints "worldstate: <message>" and `usage` to stderr (with --json, one JSON
 * error: cli_error); returns CLI_EXIT_USAGE. (output.c) */
int cli_usage(const char *usage, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- facts from flags (facts.c) ---------------------------------------------------- */

/* "sym1,sym2,…" into a symbolic fact; "sym1,…=true|false" with value. Returns 0,
 * or -1 after printing why. Strings are malloc'd (ws_client_step_req_free frees them). */
int cli_fact_parse(const char *text, ws_client_fact *f, int *value);
/* Labels "true,false,…" (repeatable flags concatenate). */
int cli_labels_parse(const cli_list *l, int **out, int *n);
/* Fills req from --instr/--query/--label lists. */
int cli_step_req_build(const cli_list *instr, const cli_list *query, const cli_list *labels,
                       ws_client_step_req *req);

/* ---- output (output.c) -------------------------------------------------------------- */

/* With on (--json), every error below is one line of JSON on stderr,
 * {"error":{"code","message"[,"status"][,"current_step"][,"usage"]}}, the
 * server's error code where there is one; else "worldstate: message". */
void cli_errors_json(int on);
int cli_json_errors(void);
/* Reports an error with its code (for --json) and returns exit_code. */
int cli_error(int exit_code, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Reports a failed call ("worldstate: what: message [code, HTTP n]") and maps
 * its kind to an exit code. */
int cli_fail(const ws_client_error *e, const char *what);
/* Prints obj on one line and deletes it. */
int cli_print_json(cJSON *obj);
/* "2024-05-01 12:00:00Z" (UTC) from Unix milliseconds. */
void cli_time(int64_t ms, char *buf, size_t cap);
/* Answers: a table (human) or {"step","answers","model_version"} (--json). */
int cli_print_answers(const cli_ctx *ctx, const ws_client_answers *a, const ws_client_fact *queries,
                      int n_queries);
/* stdout flushed without a write error, else CLI_EXIT_INPUT (disk full, closed pipe). */
int cli_flush_stdout(void);

/* ---- JSON of typed results for --json (encode.c) ------------------------------------ */

/* Chainable: add name: value to o and return o; with o NULL do nothing; on
 * failure delete o (and value) and return NULL — cli_print_json(NULL) then
 * reports out of memory. */
cJSON *cli_json_num(cJSON *o, const char *name, double value);
cJSON *cli_json_str(cJSON *o, const char *name, const char *value);
cJSON *cli_json_item(cJSON *o, const char *name, cJSON *value);

cJSON *cli_session_json(const ws_client_session *s, int listing);
cJSON *cli_training_json(const ws_client_training *t);
cJSON *cli_model_json(const ws_client_model *m);

/* ---- subcommands (cmd_*.c): argv starts after the subcommand's name ------------------ */

int cli_cmd_session(cli_ctx *ctx, int argc, char **argv);
int cli_cmd_step(cli_ctx *ctx, int argc, char **argv);
int cli_cmd_query(cli_ctx *ctx, int argc, char **argv);
int cli_cmd_labels(cli_ctx *ctx, int argc, char **argv);
int cli_cmd_export(cli_ctx *ctx, int argc, char **argv);
int cli_cmd_model(cli_ctx *ctx, int argc, char **argv);
int cli_cmd_training(cli_ctx *ctx, int argc, char **argv);
int cli_cmd_health(cli_ctx *ctx, int argc, char **argv);
/* step --file: posts a JSON Lines file (cmd_file.c). */
int cli_step_file(cli_ctx *ctx, const char *id, const char *path, long long base,
                  const char *only_session);

#endif
