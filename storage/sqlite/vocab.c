/* vocab.c — per-model vocabularies: symbols with dense ids 0..n-1 in
 * order of first sight, appended as the model meets new symbols (merged after
 * what other daemons appended first: ws_store_vocab_merge) and loaded whole at
 * startup. */
#include <stdlib.h>
#include <string.h>

#include "sqlite_internal.h"

static ws_status next_id(void *b, int64_t model, int64_t *n, ws_error *err)
{
    ws_sqlite *s = b;
    return ws_sqlite__query_int64_by(s, WS_ST_VOCAB_NEXT, model, n, err,
                                     "storage: counting vocabulary");
}

ws_status ws_sqlite_vocab_count(ws_store *store, int64_t model, int64_t *n, ws_error *err)
{
    ws_sqlite *s = ws_sqlite_of(store);
    WS_TRY(ws_sqlite__model_exists(s, model, err));
    return next_id(s, model, n, err);
}

/* The model's symbols from id `from` on, in id order, to fn. */
static ws_status load_from(void *b, int64_t model, int64_t from, ws_store_vocab_fn fn,
                           void *ctx, ws_error *err)
{
    ws_sqlite *s = b;
    sqlite3_stmt *st = ws_sqlite__stmt(s, WS_ST_VOCAB_LOAD);
    ws_status r = ws_sqlite__bind_int64(s, st, 1, model, err);
    if (r == WS_OK) r = ws_sqlite__bind_int64(s, st, 2, from, err);
    for (int64_t want = from; r == WS_OK; want++) {
        int rc = sqlite3_step(st);
        if (rc == SQLITE_DONE) break;
        if (rc != SQLITE_ROW) {
            r = ws_sqlite__sqlfail(s, rc, err, "storage: loading the vocabulary");
            break;
        }
        int64_t id = (int64_t)sqlite3_column_int64(st, 0);
        const char *sym = (const char *)sqlite3_column_text(st, 1);
        size_t len = (size_t)sqlite3_column_bytes(st, 1);
        if (id != want) { /* append keeps ids dense; a gap means the file was edited */
            r = ws_error_set(err, WS_ERR_FORMAT,
                             "vocabulary of model %lld: expected id %lld, found %lld",
                             (long long)model, (long long)want, (long long)id);
            break;
        }
        if (!sym) {
            r = ws_error_set(err, WS_ERR_NOMEM, "storage: out of memory loading the vocabulary");
            break;
        }
        r = fn(ctx, id, sym, len);
    }
    ws_sqlite__done(st);
    return r;
}

static ws_status insert(void *b, int64_t model, int64_t first_id, size_t n,
                        const char *const *symbols, ws_error *err)
{
    ws_sqlite *s = b;
    sqlite3_stmt *st = ws_sqlite__stmt(s, WS_ST_VOCAB_INSERT);
    ws_status r = WS_OK;
    for (size_t i = 0; r == WS_OK && i < n; i++) {
        r = ws_sqlite__bind_int64(s, st, 1, model, err);
        if (r == WS_OK) r = ws_sqlite__bind_int64(s, st, 2, first_id + (int64_t)i, err);
        if (r == WS_OK) r = ws_sqlite__bind_text(s, st, 3, symbols[i], err);
        if (r == WS_OK) {
            int rc = sqlite3_step(st);
            /* the only constraint an append can break is UNIQUE(model, symbol) */
            if (rc == SQLITE_CONSTRAINT_UNIQUE)
                r = ws_error_set(err, WS_ERR_CONFLICT,
                                 "vocabulary of model %lld already has symbol \"%.64s\"",
                                 (long long)model, symbols[i]);
            else if (rc != SQLITE_DONE)
                r = ws_sqlite__sqlfail(s, rc, err, "storage: appending to the vocabulary");
        }
        ws_sqlite__done(st);
    }
    return r;
}

static const ws_store__vocab_io io = {next_id, load_from, insert};

ws_status ws_sqlite_vocab_append(ws_store *store, int64_t model, int64_t first_id, size_t n,
                                 const char *const *symbols, int64_t limit,
                                 ws_store_vocab_fn others, void *ctx, int64_t *count, ws_error *err)
{
    ws_sqlite *s = ws_sqlite_of(store);
    ws_sqlite_op op; /* a write transaction: one appender at a time reads the count */
    WS_TRY(ws_sqlite__op_begin(s, &op, err));
    ws_status r = ws_sqlite__model_exists(s, model, err);
    if (r == WS_OK)
        r = ws_store__vocab_append(&io, s, model, first_id, n, symbols, limit, others, ctx,
                                   count, err);
    return ws_sqlite__op_end(s, &op, r, err);
}

ws_status ws_sqlite_vocab_load(ws_store *store, int64_t model, ws_store_vocab_fn fn, void *ctx,
                               ws_error *err)
{
    ws_sqlite *s = ws_sqlite_of(store);
    WS_TRY(ws_sqlite__model_exists(s, model, err));
    return load_from(s, model, 0, fn, ctx, err);
}
