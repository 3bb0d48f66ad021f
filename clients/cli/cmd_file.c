/* cmd_file.c — worldstate step ID --file STEPS.jsonl: posts one step per line.
 *
 * Resume rule. The k-th record (k = 1, 2, …; blank lines and, with
 * --only-session, other sessions' records do not count) becomes step base+k of
 * the session, and is posted with expect_step = base+k-1. Before posting, the
 * session's current step c is read: records with base+k <= c are already
 * applied and are skipped. Re-running the same command after an interruption
 * (Ctrl-C, lost connection, daemon restart) therefore applies exactly the
 * records that are missing; a record is never applied twice, because the
 * server refuses a step whose expect_step is not the session's step (409).
 * Records are checked (JSON, types, unknown fields) even when skipped.
 *
 * On a terminal, stderr shows a progress bar over the file's lines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "base/ws_clock.h"

typedef struct {
    const char *path;
    FILE *f;
    long total;   /* lines in the file (0: unknown, e.g. a pipe) */
    long lineno;  /* lines read so far */
    int bar;      /* draw the progress bar */
    double drawn; /* when it was last drawn (seconds) */
} input;

/* Counts lines of a regular file and rewinds it; pipes stay uncounted. */
static long count_lines(FILE *f)
{
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    long n = 0;
    int c, last = '\n';
    while ((c = getc(f)) != EOF) {
        n += c == '\n';
        last = c;
    }
    n += last != '\n'; /* a last line without a newline */
    return fseek(f, 0, SEEK_SET) == 0 ? n : 0;
}

static void progress(input *in, long applied, int final)
{
    if (!in->bar || (!final && ws_clock_mono_s() - in->drawn < 0.1)) return;
    in->drawn = ws_clock_mono_s();
    enum { WIDTH = 30 };
    int fill = in->total ? (int)(WIDTH * in->lineno / in->total) : 0;
    char bar[WIDTH + 1];
    for (int i = 0; i < WIDTH; i++) bar[i] = i < fill ? '#' : '-';
    bar[WIDTH] = '\0';
    if (in->total)
        fprintf(stderr, "\r[%s] %ld/%ld lines, %ld applied", bar, in->lineno, in->total, applied);
    else
        fprintf(stderr, "\r%ld lines, %ld applied", in->lineno, applied);
    if (final) fputc('\n', stderr);
}

static int blank(const char *s)
{
    return s[strspn(s, " \t\r\n")] == '\0';
}

typedef struct {
    long long records, applied, skipped;
    int64_t step; /* the session's step at the end */
} tally;

/* Reads, checks and posts (or skips) every record. */
static int post_all(cli_ctx *ctx, input *in, const char *id, long long base, const char *only,
                    tally *t)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int rc = CLI_EXIT_OK;
    while (rc == CLI_EXIT_OK && (len = getline(&line, &cap, in->f)) >= 0) {
        in->lineno++;
        if (blank(line)) continue;
        ws_client_log_entry rec;
        ws_client_error e;
        char what[512];
        snprintf(what, sizeof what, "%s:%ld", in->path, in->lineno);
        if (ws_client_log_entry_from_json(line, (size_t)len, &rec, &e) != WS_CLIENT_OK) {
            if (in->bar) fputc('\n', stderr);
            rc = cli_error(CLI_EXIT_INPUT, "bad_input", "%s: %s", what, e.message);
            break;
        }
        if (!only || !strcmp(rec.session, only)) {
            t->records++;
            rec.req.expect_step = base + t->records - 1;
            if (base + t->records <= t->step) {
                t->skipped++;
            } else {
                ws_client_answers a;
                if (ws_client_step(ctx->client, id, &rec.req, &a, &e) == WS_CLIENT_OK) {
                    t->applied++;
                    t->step = a.step;
                    ws_client_answers_free(&a);
                } else {
                    if (in->bar) fputc('\n', stderr);
                    rc = cli_fail(&e, what);
                    if (!strcmp(e.code, "step_conflict") && !ctx->json)
                        fprintf(
                            stderr,
                            "worldstate: this record is step %lld but the session is at step %lld: "
                            "another writer moved it (if that was a second run of this same file, "
                            "run again to resume)\n",
                            base + t->records, (long long)e.current_step);
                }
            }
        }
        ws_client_log_entry_free(&rec);
        progress(in, (long)t->applied, 0);
    }
    if (rc == CLI_EXIT_OK && ferror(in->f)) {
        rc = cli_error(CLI_EXIT_INPUT, "io", "cannot read %s", in->path);
    }
    free(line);
    return rc;
}

int cli_step_file(cli_ctx *ctx, const char *id, const char *path, long long base,
                  const char *only_session)
{
    ws_client_session s;
    ws_client_error e;
    if (ws_client_session_get(ctx->client, id, &s, &e) != WS_CLIENT_OK)
        return cli_fail(&e, "step --file");
    if (s.step < base)
        return cli_error(CLI_EXIT_USAGE, "usage", "session %s is at step %lld, before --base %lld",
                         id, (long long)s.step, base);
    int from_stdin = !strcmp(path, "-");
    input in = {.path = from_stdin ? "stdin" : path, .f = from_stdin ? stdin : fopen(path, "r")};
    if (!in.f) {
        perror(path);
        return CLI_EXIT_INPUT;
    }
    in.total = count_lines(in.f);
    in.bar = !ctx->json && isatty(STDERR_FILENO);
    tally t = {.step = s.step};
    int rc = post_all(ctx, &in, id, base, only_session, &t);
    progress(&in, (long)t.applied, 1);
    if (!from_stdin && fclose(in.f) != 0 && rc == CLI_EXIT_OK) {
        perror(path);
        rc = CLI_EXIT_INPUT;
    }
    if (rc != CLI_EXIT_OK) return rc;
    if (ctx->json) {
        cJSON *o = cli_json_num(cli_json_str(cJSON_CreateObject(), "session", id), "records",
                                (double)t.records);
        o = cli_json_num(cli_json_num(o, "applied", (double)t.applied), "skipped",
                         (double)t.skipped);
        return cli_print_json(cli_json_num(o, "step", (double)t.step));
    }
    printf(
        "%lld records: %lld applied, %lld already applied (skipped); session %s is at step %lld\n",
        t.records, t.applied, t.skipped, id, (long long)t.step);
    return CLI_EXIT_OK;
}
