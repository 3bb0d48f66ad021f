/* vocab.c — per-model vocabularies: symbols with dense ids 0..n-1 in order of
 * first sight, appended as the model meets new symbols (one statement per
 * append: the symbols go as one text array; merged after what other daemons
 * appended first: ws_store_vocab_merge) and loaded whole at startup. */
#include <stdlib.h>
#include <string.h>

#include "pg_internal.h"

static ws_status next_id(void *b, int64_t model, int64_t *n, ws_error *err)
{
    ws_pg *s = b;
    return ws_pg__int_by(s, WS_PG_VOCAB_NEXT, model, n, err, "storage: counting vocabulary");
}

ws_status ws_pg_vocab_count(ws_store *store, int64_t model, int64_t *n, ws_error *err)
{
    ws_pg *s = ws_pg_of(store);
    WS_TRY(ws_pg__model_exists(s, model, err));
    return next_id(s, model, n, err);
}

/* The symbols as a text[] literal: {"a","b\"c"} (every element quoted, " and \
 * escaped). NULL when out of memory. */
static char *array_literal(size_t n, const char *const *symbols)
{
    size_t len = 3;
    for (size_t i = 0; i < n; i++) {
        len += 3;
        for (const char *p = symbols[i]; *p; p++) len += (*p == '"' || *p == '\\') ? 2 : 1;
    }
    char *out = malloc(len), *o = out;
    if (!out) return NULL;
    *o++ = '{';
    for (size_t i = 0; i < n; i++) {
        if (i) *o++ = ',';
        *o++ = '"';
        for (const char *p = symbols[i]; *p; p++) {
            if (*p == '"' || *p == '\\') *o++ = '\\';
            *o++ = *p;
        }
        *o++ = '"';
    }
    *o++ = '}';
    *o = '\0';
    return out;
}

/* symbols[0..n) stored with ids first_id..; the ids checked by the caller. */
static ws_status insert(void *b, int64_t model, int64_t first_id, size_t n,
                        const char *const *symbols, ws_error *err)
{
    ws_pg *s = b;
    char *array = array_literal(n, symbols);
    if (!array) return ws_error_set(err, WS_ERR_NOMEM, "storage: out of memory");
    ws_pg_args a = {0};
    ws_pg__arg_int(&a, model);
    ws_pg__arg_int(&a, first_id);
    ws_pg__arg_text(&a, array);
    ws_status r = ws_pg__run_n(s, WS_PG_VOCAB_INSERT, &a, NULL, err,
                               "storage: appending to the vocabulary");
    /* with the ids checked, the only constraint an append can break is
     * UNIQUE(model, symbol) */
    if (r != WS_OK && !strcmp(s->sqlstate, "23505"))
        r = ws_error_set(err, WS_ERR_CONFLICT,
                         "vocabulary of model %lld already has one of the %zu symbols",
                         (long long)model, n);
    free(array);
    return r;
}

typedef struct {
    int64_t model, want;
    ws_store_vocab_fn fn;
    void *ctx;
} vocab_load_ctx;

static ws_status vocab_row(void *ctx, const PGresult *res, int row, ws_error *err)
{
    vocab_load_ctx *c = ctx;
    int64_t id = ws_pg__int(res, row, 0);
    if (id != c->want) /* append keeps ids dense; a gap means the table was edited */
        return ws_error_set(err, WS_ERR_FORMAT,
                            "vocabulary of model %lld: expected id %lld, found %lld",
                            (long long)c->model, (long long)c->want, (long long)id);
    c->want++;
    return c->fn(c->ctx, id, ws_pg__text(res, row, 1), (size_t)PQgetlength(res, row, 1));
}

/* The model's symbols from id `from` on, in id order, to fn. */
static ws_status load_from(void *b, int64_t model, int64_t from, ws_store_vocab_fn fn, void *ctx,
                           ws_error *err)
{
    ws_pg_args a = {0};
    ws_pg__arg_int(&a, model);
    ws_pg__arg_int(&a, from);
    vocab_load_ctx c = {model, from, fn, ctx};
    return ws_pg__each(b, WS_PG_VOCAB_LOAD, &a, vocab_row, &c, err,
                       "storage: loading the vocabulary");
}

static const ws_store__vocab_io io = {next_id, load_from, insert};

ws_status ws_pg_vocab_append(ws_store *store, int64_t model, int64_t first_id, size_t n,
                             const char *const *symbols, int64_t limit, ws_store_vocab_fn others,
                             void *ctx, int64_t *count, ws_error *err)
{
    ws_pg *s = ws_pg_of(store);
    ws_pg_op op;
    WS_TRY(ws_pg__op_begin(s, &op, err));
    /* the model's row locked: one appender at a time reads the count */
    ws_pg_args a = {0};
    ws_pg__arg_int(&a, model);
    ws_status r = ws_pg__probe(s, WS_PG_MODEL_LOCK, &a, "model", model, err);
    if (r == WS_OK)
        r = ws_store__vocab_append(&io, s, model, first_id, n, symbols, limit, others, ctx,
                                   count, err);
    return ws_pg__op_end(s, &op, r, err);
}

ws_status ws_pg_vocab_load(ws_store *store, int64_t model, ws_store_vocab_fn fn, void *ctx,
                           ws_error *err)
{
    ws_pg *s = ws_pg_of(store);
    WS_TRY(ws_pg__model_exists(s, model, err));
    return load_from(s, model, 0, fn, ctx, err);
}
