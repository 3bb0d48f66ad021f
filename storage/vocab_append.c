/* vocab_append.c — a vocabulary append as every backend does it, inside the
 * backend's transaction with the model locked: the strict append at the stored
 * count, or the merge after what other daemons stored first
 * (ws_store_vocab_merge): their symbols handed to the caller, the caller's
 * symbols among them left out, the rest stored after them. */
#include <stdlib.h>
#include <string.h>

#include "store_util.h"

/* The others' symbols as the load hands them over: kept, and passed on. */
typedef struct {
    ws_store_vocab_fn fn;
    void *ctx;
    ws_error *err;
    char **others;
    size_t n, cap;
} merge;

static ws_status keep_other(void *ctx, int64_t id, const char *symbol, size_t len)
{
    merge *m = ctx;
    if (m->n == m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 16;
        char **grown = realloc(m->others, cap * sizeof *grown);
        if (!grown) return ws_error_set(m->err, WS_ERR_NOMEM, "storage: out of memory merging");
        m->others = grown, m->cap = cap;
    }
    char *copy = malloc(len + 1);
    if (!copy) return ws_error_set(m->err, WS_ERR_NOMEM, "storage: out of memory merging");
    memcpy(copy, symbol, len);
    copy[len] = '\0';
    m->others[m->n++] = copy;
    return m->fn(m->ctx, id, symbol, len);
}

static int by_bytes(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The caller's symbols not among the others', in order, at most room of them. */
static size_t fresh_symbols(merge *m, const char *const *symbols, size_t n, size_t room,
                            const char **out)
{
    /* sorted once: a batch's symbols against all that others stored while this
     * daemon was away cost n log m, not n m */
    if (m->n) qsort(m->others, m->n, sizeof *m->others, by_bytes);
    size_t k = 0;
    for (size_t i = 0; i < n && k < room; i++)
        if (!m->n || !bsearch(&symbols[i], m->others, m->n, sizeof *m->others, by_bytes))
            out[k++] = symbols[i];
    return k;
}

static ws_status merge_after(const ws_store__vocab_io *io, void *b, int64_t model,
                             int64_t first_id, int64_t have, size_t n, const char *const *symbols,
                             int64_t limit, ws_store_vocab_fn others, void *ctx, int64_t *count,
                             ws_error *err)
{
    merge m = {others, ctx, err, NULL, 0, 0};
    const char **fresh = malloc(n * sizeof *fresh);
    ws_status r = fresh ? io->load(b, model, first_id, keep_other, &m, err)
                        : ws_error_set(err, WS_ERR_NOMEM, "storage: out of memory merging");
    if (r == WS_OK) {
        size_t room = limit > have ? (size_t)(limit - have) : 0;
        size_t k = fresh_symbols(&m, symbols, n, room, fresh);
        if (k) r = io->insert(b, model, have, k, fresh, err);
        *count = have + (int64_t)k;
    }
    for (size_t i = 0; i < m.n; i++) free(m.others[i]);
    free(m.others);
    free(fresh);
    return r;
}

ws_status ws_store__vocab_append(const ws_store__vocab_io *io, void *b, int64_t model,
                                 int64_t first_id, size_t n, const char *const *symbols,
                                 int64_t limit, ws_store_vocab_fn others, void *ctx,
                                 int64_t *count, ws_error *err)
{
    int64_t have = 0;
    WS_TRY(io->count(b, model, &have, err));
    if (first_id == have) {
        *count = have + (int64_t)n;
        return io->insert(b, model, first_id, n, symbols, err);
    }
    *count = have;
    if (!others || first_id > have) return ws_store__vocab_conflict(model, have, first_id, err);
    return merge_after(io, b, model, first_id, have, n, symbols, limit, others, ctx, count, err);
}
