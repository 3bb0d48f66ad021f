/* offline_export.c — `worldstate-train export`: every session's step log as
 * JSON Lines, one object per step in the API's step-log format (GET
 * /v1/sessions/{id}/steps items) plus "session" and "model". Reads only, so it
 * is safe beside a running daemon; a session's steps are read a page at a time,
 * so steps it takes meanwhile may or may not be included. */
#include <stdlib.h>
#include <string.h>

#include "offline.h"
#include "server/common/versions.h"

#define PAGE 500

typedef struct {
    FILE *out;
    const char *session, *model;
    int64_t last, lines;
    int failed; /* 1: out of memory, 2: write error */
} line_ctx;

static ws_status write_line(void *ctx, const ws_store_log_entry *e)
{
    line_ctx *l = ctx;
    cJSON *o = cJSON_CreateObject();
    int ok = o && cJSON_AddStringToObject(o, "session", l->session) &&
             cJSON_AddStringToObject(o, "model", l->model) && ws_srv_log_item_fill(o, e) == WS_OK;
    char *text = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!text) return l->failed = 1, WS_ERR_NOMEM;
    ok = fputs(text, l->out) >= 0 && fputc('\n', l->out) != EOF;
    free(text);
    if (!ok) return l->failed = 2, WS_ERR_IO;
    l->last = e->step;
    l->lines++;
    return WS_OK;
}

/* Every step of the listed sessions of one model. */
static ws_status export_model(ws_store *st, const ws_srv_model_row *m, const char *only, FILE *out,
                              int64_t *sessions, int64_t *lines, ws_error *err)
{
    ws_off_corpus c = {.st = st, .model_name = m->name};
    ws_status s = ws_off_corpus_from_db(&c, m->id, only, 0, err);
    if (s == WS_ERR_NOTFOUND && only) s = WS_OK; /* the session is another model's */
    for (int i = 0; s == WS_OK && i < c.n; i++) {
        line_ctx l = {out, c.sessions[i].id, m->name, 0, 0, 0};
        int64_t before;
        do {
            before = l.lines;
            s = ws_store_log_page(st, c.sessions[i].tenant, c.sessions[i].id, l.last, PAGE,
                                  write_line, &l, err);
        } while (s == WS_OK && l.lines - before == PAGE);
        if (l.failed)
            s = ws_error_set(err, s, "export: %s",
                             l.failed == 1 ? "out of memory" : "cannot write");
        if (s == WS_ERR_NOTFOUND) s = WS_OK; /* deleted since the listing: gone */
        *lines += l.lines;
        *sessions += l.lines > 0;
    }
    ws_off_corpus_free(&c);
    return s;
}

ws_status ws_off_export(const ws_off_options *o, FILE *out, ws_error *err)
{
    ws_store *st = NULL;
    WS_TRY(ws_off_open_store(o, &st, err));
    ws_srv_model_rows models = {0};
    ws_status s = ws_srv_model_rows_read(st, &models, err);
    int64_t sessions = 0, lines = 0, n_models = 0;
    for (int i = 0; s == WS_OK && i < models.n; i++) {
        if (o->model && strcmp(o->model, models.rows[i].name) != 0) continue;
        n_models++;
        s = export_model(st, &models.rows[i], o->session, out, &sessions, &lines, err);
    }
    if (s == WS_OK && fflush(out) != 0) s = ws_error_set(err, WS_ERR_IO, "export: cannot write");
    if (s == WS_OK && o->model && n_models == 0)
        s = ws_error_set(err, WS_ERR_NOTFOUND, "no model %s", o->model);
    if (s == WS_OK)
        fprintf(stderr, "export: %lld sessions, %lld steps\n", (long long)sessions,
                (long long)lines);
    ws_srv_model_rows_free(&models);
    ws_store_close(st);
    return s;
}
