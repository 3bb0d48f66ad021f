/* facts.c — facts, instructions and labels written as flags:
 *   --instr mary,kitchen=true   --query mary,kitchen   --label true,false
 * Symbols are separated by ','; an instruction's value follows the last '='.
 * Facts whose symbols contain ',' (or raw vectors) go through --file. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static int bool_of(const char *s, size_t n)
{
    if ((n == 4 && !strncmp(s, "true", 4)) || (n == 1 && s[0] == '1')) return 1;
    if ((n == 5 && !strncmp(s, "false", 5)) || (n == 1 && s[0] == '0')) return 0;
    return -1;
}

static int fact_fail(ws_client_fact *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fact_fail(ws_client_fact *f, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cli_error(CLI_EXIT_USAGE, "usage", "%s", msg);
    for (int i = 0; i < f->n_symbols; i++) free(f->symbols[i]);
    free(f->symbols);
    memset(f, 0, sizeof *f);
    return -1;
}

int cli_fact_parse(const char *text, ws_client_fact *f, int *value)
{
    memset(f, 0, sizeof *f);
    size_t len = strlen(text);
    if (value) {
        const char *eq = strrchr(text, '=');
        *value = eq ? bool_of(eq + 1, strlen(eq + 1)) : -1;
        if (*value < 0) return fact_fail(f, "instruction \"%s\" must end in =true or =false", text);
        len = (size_t)(eq - text);
    }
    int n = 1;
    for (size_t i = 0; i < len; i++) n += text[i] == ',';
    f->symbols = calloc((size_t)n, sizeof *f->symbols);
    if (!f->symbols) return fact_fail(f, "out of memory");
    for (const char *p = text, *end = text + len; f->n_symbols < n; p++) {
        const char *c = memchr(p, ',', (size_t)(end - p));
        size_t k = (size_t)((c ? c : end) - p);
        if (k == 0) return fact_fail(f, "fact \"%s\" has an empty symbol", text);
        if (!(f->symbols[f->n_symbols] = strndup(p, k))) return fact_fail(f, "out of memory");
        f->n_symbols++;
        p += k;
    }
    return 0;
}

int cli_labels_parse(const cli_list *l, int **out, int *n)
{
    int cap = 0;
    for (int i = 0; i < l->n; i++) {
        cap++;
        for (const char *p = l->items[i]; *p; p++) cap += *p == ',';
    }
    *n = 0;
    *out = calloc((size_t)cap + 1, sizeof **out);
    if (!*out) {
        cli_error(CLI_EXIT_OTHER, "out_of_memory", "out of memory");
        return -1;
    }
    for (int i = 0; i < l->n; i++)
        for (const char *p = l->items[i];; p++) {
            size_t k = strcspn(p, ",");
            int v = bool_of(p, k);
            if (v < 0) {
                cli_error(CLI_EXIT_USAGE, "usage", "label \"%.*s\" must be true or false", (int)k,
                          p);
                return -1;
            }
            (*out)[(*n)++] = v;
            p += k;
            if (!*p) break;
        }
    return 0;
}

int cli_step_req_build(const cli_list *instr, const cli_list *query, const cli_list *labels,
                       ws_client_step_req *req)
{
    memset(req, 0, sizeof *req);
    req->expect_step = WS_CLIENT_NO_STEP;
    req->instructions = calloc((size_t)instr->n + 1, sizeof *req->instructions);
    req->queries = calloc((size_t)query->n + 1, sizeof *req->queries);
    if (!req->instructions || !req->queries) {
        cli_error(CLI_EXIT_OTHER, "out_of_memory", "out of memory");
        return -1;
    }
    /* Counted as they succeed, so ws_client_step_req_free frees what was made. */
    for (int i = 0; i < instr->n; i++, req->n_instructions++)
        if (cli_fact_parse(instr->items[i], &req->instructions[i].fact,
                           &req->instructions[i].value) != 0)
            return -1;
    for (int i = 0; i < query->n; i++, req->n_queries++)
        if (cli_fact_parse(query->items[i], &req->queries[i], NULL) != 0) return -1;
    if (labels->n == 0) return 0;
    int n;
    if (cli_labels_parse(labels, &req->labels, &n) != 0) return -1;
    if (n != req->n_queries) {
        cli_error(CLI_EXIT_USAGE, "usage", "%d labels for %d queries (one each)", n,
                  req->n_queries);
        return -1;
    }
    req->has_labels = 1;
    return 0;
}
