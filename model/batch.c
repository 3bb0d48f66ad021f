/* batch.c — building ragged batches on the host, with validation. */
#include "batch.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Grows *p (elements of size sz) to hold at least need; doubles capacity. */
static ws_status grow(void **p, int *cap, int need, size_t sz)
{
    if (need <= *cap) return WS_OK;
    int c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *q = realloc(*p, (size_t)c * sz);
    if (!q) return WS_ERR_NOMEM;
    *p = q;
    *cap = c;
    return WS_OK;
}

ws_status ws_batch_new(ws_batch **out, const ws_model_config *cfg)
{
    *out = calloc(1, sizeof **out);
    if (!*out) return WS_ERR_NOMEM;
    (*out)->S = cfg->max_fact_len;
    (*out)->d_raw = cfg->d_raw;
    (*out)->n_ids = cfg->vocab_cap + cfg->n_overflow;
    return WS_OK;
}

static void fact_list_free(ws_fact_list *f)
{
    free(f->ids);
    free(f->hash);
    free(f->raw_row);
    free(f->raw);
    free(f->value);
}

void ws_batch_free(ws_batch *b)
{
    if (!b) return;
    free(b->from_w0);
    free(b->n_instr);
    free(b->n_query);
    free(b->instr_off);
    free(b->query_off);
    fact_list_free(&b->instr);
    fact_list_free(&b->query);
    free(b->labels);
    free(b);
}

void ws_batch_clear(ws_batch *b)
{
    b->n_traj = 0;
    b->instr.n = b->instr.n_raw = 0;
    b->query.n = b->query.n_raw = 0;
    b->n_labelled = 0;
}

ws_status ws_batch_begin_traj(ws_batch *b, int from_w0)
{
    int cap = b->traj_cap, need = b->n_traj + 1;
    int32_t **arrays[] = {&b->from_w0, &b->n_instr, &b->n_query, &b->instr_off, &b->query_off};
    for (size_t i = 0; i < sizeof arrays / sizeof *arrays; i++) {
        int c = cap;
        WS_TRY(grow((void **)arrays[i], &c, need, sizeof(int32_t)));
        if (i + 1 == sizeof arrays / sizeof *arrays) b->traj_cap = c;
    }
    int t = b->n_traj++;
    b->from_w0[t] = from_w0 ? 1 : 0;
    b->n_instr[t] = b->n_query[t] = 0;
    b->instr_off[t] = b->instr.n;
    b->query_off[t] = b->query.n;
    return WS_OK;
}

/* Appends one fact row with its value: symbolic when x == NULL, with ids or syms
 * (exactly one of them given). */
static ws_status add_fact(ws_batch *b, ws_fact_list *f, const int32_t *ids, const ws_sym *syms,
                          int n_ids, const float *x, int value)
{
    if (b->n_traj == 0) return WS_ERR_INVALID;
    if (x) {
        if (b->d_raw <= 0) return WS_ERR_INVALID;
        for (int i = 0; i < b->d_raw; i++)
            if (!isfinite(x[i])) return WS_ERR_INVALID;
    } else {
        if (n_ids < 1 || n_ids > b->S) return WS_ERR_INVALID;
        for (int i = 0; i < n_ids; i++) {
            int32_t id = ids ? ids[i] : syms[i].id;
            /* A symbol without an id needs its hash: it is nothing else. */
            if (id < -1 || id >= b->n_ids || (id < 0 && (ids || !syms[i].hash)))
                return WS_ERR_INVALID;
        }
    }
    WS_TRY(grow((void **)&f->ids, &f->ids_cap, (f->n + 1) * b->S, sizeof(int32_t)));
    WS_TRY(grow((void **)&f->hash, &f->hash_cap, (f->n + 1) * b->S, sizeof(uint64_t)));
    /* raw_row and value share one capacity: grow both before recording it. */
    int cap = f->cap;
    WS_TRY(grow((void **)&f->raw_row, &cap, f->n + 1, sizeof(int32_t)));
    cap = f->cap;
    WS_TRY(grow((void **)&f->value, &cap, f->n + 1, sizeof(int32_t)));
    f->cap = cap;
    int32_t *row = f->ids + (long)f->n * b->S;
    uint64_t *hrow = f->hash + (long)f->n * b->S;
    for (int i = 0; i < b->S; i++) {
        int sym = !x && i < n_ids;
        row[i] = sym ? (ids ? ids[i] : syms[i].id) : -1;
        hrow[i] = sym && syms ? syms[i].hash : 0;
    }
    f->raw_row[f->n] = -1;
    if (x) {
        WS_TRY(grow((void **)&f->raw, &f->raw_cap, (f->n_raw + 1) * b->d_raw, sizeof(float)));
        memcpy(f->raw + (long)f->n_raw * b->d_raw, x, (size_t)b->d_raw * sizeof(float));
        f->raw_row[f->n] = f->n_raw++;
    }
    f->value[f->n++] = value;
    return WS_OK;
}

static ws_status add_instr(ws_batch *b, const int32_t *ids, const ws_sym *syms, int n_ids,
                           const float *x, int value)
{
    if (value != 0 && value != 1) return WS_ERR_INVALID;
    WS_TRY(add_fact(b, &b->instr, ids, syms, n_ids, x, value));
    b->n_instr[b->n_traj - 1]++;
    return WS_OK;
}

static ws_status add_query(ws_batch *b, const int32_t *ids, const ws_sym *syms, int n_ids,
                           const float *x, int label)
{
    if (label < -1 || label > 1) return WS_ERR_INVALID;
    WS_TRY(grow((void **)&b->labels, &b->labels_cap, b->query.n + 1, sizeof(float)));
    WS_TRY(add_fact(b, &b->query, ids, syms, n_ids, x, label));
    b->labels[b->query.n - 1] = (float)label;
    b->n_query[b->n_traj - 1]++;
    if (label >= 0) b->n_labelled++;
    return WS_OK;
}

ws_status ws_batch_add_instr(ws_batch *b, const int32_t *ids, int n_ids, int value)
{
    return ids ? add_instr(b, ids, NULL, n_ids, NULL, value) : WS_ERR_INVALID;
}

ws_status ws_batch_add_instr_syms(ws_batch *b, const ws_sym *syms, int n_syms, int value)
{
    return syms ? add_instr(b, NULL, syms, n_syms, NULL, value) : WS_ERR_INVALID;
}

ws_status ws_batch_add_instr_raw(ws_batch *b, const float *x, int value)
{
    return x ? add_instr(b, NULL, NULL, 0, x, value) : WS_ERR_INVALID;
}

ws_status ws_batch_add_query(ws_batch *b, const int32_t *ids, int n_ids, int label)
{
    return ids ? add_query(b, ids, NULL, n_ids, NULL, label) : WS_ERR_INVALID;
}

ws_status ws_batch_add_query_syms(ws_batch *b, const ws_sym *syms, int n_syms, int label)
{
    return syms ? add_query(b, NULL, syms, n_syms, NULL, label) : WS_ERR_INVALID;
}

ws_status ws_batch_add_query_raw(ws_batch *b, const float *x, int label)
{
    return x ? add_query(b, NULL, NULL, 0, x, label) : WS_ERR_INVALID;
}

int ws_batch_n_traj(const ws_batch *b) { return b->n_traj; }
int ws_batch_n_instr(const ws_batch *b) { return b->instr.n; }
int ws_batch_n_query(const ws_batch *b) { return b->query.n; }
int ws_batch_n_labelled(const ws_batch *b) { return b->n_labelled; }
int ws_batch_query_off(const ws_batch *b, int traj) { return b->query_off[traj]; }
int ws_batch_query_count(const ws_batch *b, int traj) { return b->n_query[traj]; }
const float *ws_batch_labels(const ws_batch *b) { return b->labels; }
