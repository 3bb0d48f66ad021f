/* versions.c — see versions.h. */
#include "versions.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model/checkpoint.h"

static ws_status collect(void *ctx, const ws_store_model *m)
{
    ws_srv_model_rows *r = ctx;
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 8;
        ws_srv_model_row *t = realloc(r->rows, sizeof *t * (size_t)cap);
        if (!t) return WS_ERR_NOMEM;
        r->rows = t, r->cap = cap;
    }
    ws_srv_model_row *row = &r->rows[r->n];
    row->id = m->id, row->version = m->current_version;
    strcpy(row->name, m->name);
    row->training = strdup(m->training_json ? m->training_json : "{}");
    if (!row->training) return WS_ERR_NOMEM;
    r->n++;
    return WS_OK;
}

ws_status ws_srv_model_rows_read(ws_store *st, ws_srv_model_rows *out, ws_error *err)
{
    memset(out, 0, sizeof *out);
    ws_status s = ws_store_model_list(st, collect, out, err);
    if (s == WS_ERR_NOMEM) ws_error_set(err, s, "out of memory");
    return s;
}

void ws_srv_model_rows_free(ws_srv_model_rows *r)
{
    for (int i = 0; i < r->n; i++) free(r->rows[i].training);
    free(r->rows);
    memset(r, 0, sizeof *r);
}

void ws_srv_ckpt_path(const char *data_dir, const char *name, int64_t version, char *out,
                      size_t cap)
{
    snprintf(out, cap, "%s/models/%s-v%lld.safetensors", data_dir, name, (long long)version);
}

typedef struct {
    ws_vocab *v;
    ws_error *err;
} vocab_ctx;

static ws_status vocab_one(void *ctx, int64_t id, const char *sym, size_t len)
{
    vocab_ctx *c = ctx;
    if (ws_vocab_id(c->v, sym, len, 1) != id)
        return ws_error_set(c->err, WS_ERR_FORMAT,
                            "vocabulary of the checkpoint disagrees with the database at id %lld",
                            (long long)id);
    return WS_OK;
}

ws_status ws_srv_version_load(ws_store *st, int64_t model_id, int64_t version, ws_backend *be,
                              ws_model **out, ws_error *err)
{
    *out = NULL;
    ws_store_version v = {0};
    WS_TRY(ws_store_version_get(st, model_id, version, &v, err));
    ws_model *m = NULL;
    ws_status s = ws_checkpoint_load(&m, v.path, be, err);
    ws_store_version_clear(&v);
    vocab_ctx vc = {m ? ws_model_vocab(m) : NULL, err};
    if (s == WS_OK) s = ws_store_vocab_load(st, model_id, vocab_one, &vc, err);
    if (s != WS_OK) {
        ws_model_free(m);
        return s;
    }
    *out = m;
    return WS_OK;
}

ws_status ws_srv_version_publish(ws_store *st, const char *data_dir, const char *name,
                                 int64_t model_id, ws_model *m, int64_t expect_prev,
                                 const char *note, int64_t *version_out, ws_error *err)
{
    int64_t max = 0;
    WS_TRY(ws_store_begin(st, err));
    ws_status s = ws_store_version_max(st, model_id, &max, err);
    if (s == WS_OK && expect_prev >= 0 && max != expect_prev)
        s = ws_error_set(err, WS_ERR_CONFLICT,
                         "model %s: version %lld was published meanwhile (expected %lld)", name,
                         (long long)max, (long long)expect_prev);
    char path[4096];
    ws_srv_ckpt_path(data_dir, name, max + 1, path, sizeof path);
    if (s == WS_OK) s = ws_checkpoint_save(m, path, 1, err);
    if (s == WS_OK) s = ws_store_version_add(st, model_id, max + 1, path, note, err);
    if (s == WS_OK) s = ws_store_commit(st, err);
    else ws_store_rollback(st, NULL); /* the failure in err is the one to report */
    if (s == WS_OK) *version_out = max + 1;
    return s;
}
