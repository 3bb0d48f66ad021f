/* state_cache.c — see state_cache.h. A hash table of sessions (chained,
 * by session id) threaded on a list from most to least recently used. */
#include "state_cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/symcode.h"

typedef struct entry {
    char id[WS_STORE_ID_LEN + 1];
    int64_t tenant, model, step;
    int32_t rows, cols;
    float *state;                /* rows * cols */
    ws_recall_facts *told;       /* what the session was told (rules.h); NULL none */
    struct entry *chain;         /* the next of its bucket */
    struct entry *newer, *older; /* the use list */
} entry;

struct ws_state_cache {
    pthread_mutex_t mu;
    size_t max_bytes, bytes, entries;
    entry **bucket;
    size_t n_bucket; /* a power of two */
    entry *newest, *oldest;
    uint64_t hits, misses;
};

/* session ids are random hex: the project's FNV-1a mixes them well enough */
static size_t bucket_of(const ws_state_cache *c, const char *id)
{
    return (size_t)ws_fnv1a64(id, strlen(id)) & (c->n_bucket - 1);
}

ws_status ws_state_cache_new(ws_state_cache **out, size_t max_bytes, ws_error *err)
{
    *out = NULL;
    ws_state_cache *c = calloc(1, sizeof *c);
    /* about one bucket per 8 KiB state (d=64, 32 tokens), at least 256 */
    size_t n = 256;
    while (n < max_bytes / 8192 && n < ((size_t)1 << 24)) n <<= 1;
    if (c) c->bucket = calloc(n, sizeof *c->bucket);
    if (!c || !c->bucket || pthread_mutex_init(&c->mu, NULL) != 0) {
        if (c) free(c->bucket);
        free(c);
        return ws_error_set(err, WS_ERR_NOMEM, "out of memory for the state cache");
    }
    c->n_bucket = n;
    c->max_bytes = max_bytes;
    *out = c;
    return WS_OK;
}

static entry *find(const ws_state_cache *c, const char *id)
{
    for (entry *e = c->bucket[bucket_of(c, id)]; e; e = e->chain)
        if (!strcmp(e->id, id)) return e;
    return NULL;
}

static void unlink_use(ws_state_cache *c, entry *e)
{
    if (e->newer) e->newer->older = e->older;
    else c->newest = e->older;
    if (e->older) e->older->newer = e->newer;
    else c->oldest = e->newer;
    e->newer = e->older = NULL;
}

static void link_newest(ws_state_cache *c, entry *e)
{
    e->older = c->newest;
    e->newer = NULL;
    if (c->newest) c->newest->newer = e;
    c->newest = e;
    if (!c->oldest) c->oldest = e;
}

static size_t state_bytes(const entry *e)
{
    return sizeof(float) * (size_t)e->rows * (size_t)e->cols;
}

static size_t told_bytes(const entry *e)
{
    return e->told ? sizeof *e->told : 0;
}

/* Takes e out of the table and frees it (mu held). */
static void remove_entry(ws_state_cache *c, entry *e)
{
    entry **p = &c->bucket[bucket_of(c, e->id)];
    while (*p != e) p = &(*p)->chain;
    *p = e->chain;
    unlink_use(c, e);
    c->bytes -= state_bytes(e) + told_bytes(e);
    c->entries--;
    free(e->state);
    free(e->told);
    free(e);
}

void ws_state_cache_free(ws_state_cache *c)
{
    if (!c) return;
    while (c->oldest) remove_entry(c, c->oldest);
    free(c->bucket);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

int ws_state_cache_get(ws_state_cache *c, int64_t tenant, const char *id, ws_store_session *out)
{
    pthread_mutex_lock(&c->mu);
    entry *e = find(c, id);
    float *copy = e && e->tenant == tenant ? malloc(state_bytes(e)) : NULL;
    if (copy) {
        memcpy(copy, e->state, state_bytes(e));
        *out = (ws_store_session){.tenant = e->tenant, .model = e->model, .step = e->step,
                                  .rows = e->rows, .cols = e->cols, .state = copy};
        memcpy(out->id, e->id, sizeof out->id);
        unlink_use(c, e);
        link_newest(c, e);
        c->hits++;
    } else {
        c->misses++;
    }
    pthread_mutex_unlock(&c->mu);
    return copy != NULL;
}

void ws_state_cache_put(ws_state_cache *c, int64_t tenant, const char *id, int64_t model,
                        int64_t step, int32_t rows, int32_t cols, const float *state)
{
    size_t n = sizeof(float) * (size_t)rows * (size_t)cols;
    pthread_mutex_lock(&c->mu);
    entry *e = find(c, id);
    if (e && state_bytes(e) != n) remove_entry(c, e), e = NULL; /* another shape: anew */
    int fresh = !e; /* then no older state of the session is left either */
    if (fresh && n && n <= c->max_bytes && strlen(id) <= WS_STORE_ID_LEN &&
        (e = calloc(1, sizeof *e)) && !(e->state = malloc(n)))
        free(e), e = NULL;
    if (e) {
        if (fresh) {
            memcpy(e->id, id, strlen(id) + 1);
            size_t b = bucket_of(c, id);
            e->chain = c->bucket[b];
            c->bucket[b] = e;
            c->entries++;
            c->bytes += n;
        } else {
            unlink_use(c, e);
            c->bytes -= told_bytes(e);
            free(e->told), e->told = NULL; /* a new step: ws_state_cache_put_told's again */
        }
        e->tenant = tenant, e->model = model, e->step = step, e->rows = rows, e->cols = cols;
        memcpy(e->state, state, n);
        link_newest(c, e);
        while (c->bytes > c->max_bytes) remove_entry(c, c->oldest);
    }
    pthread_mutex_unlock(&c->mu);
}

void ws_state_cache_put_told(ws_state_cache *c, const char *id, int64_t step,
                             const ws_recall_facts *told)
{
    pthread_mutex_lock(&c->mu);
    entry *e = find(c, id);
    if (e && e->step == step && !e->told && (e->told = malloc(sizeof *e->told))) {
        *e->told = *told;
        c->bytes += sizeof *e->told;
        while (c->bytes > c->max_bytes && c->oldest != e) remove_entry(c, c->oldest);
    }
    pthread_mutex_unlock(&c->mu);
}

int ws_state_cache_told(ws_state_cache *c, int64_t tenant, const char *id, int64_t step,
                        ws_recall_facts *out, int64_t *model)
{
    pthread_mutex_lock(&c->mu);
    entry *e = find(c, id);
    int have = e && e->tenant == tenant && e->step == step && e->told;
    if (have) *out = *e->told;
    if (have && model) *model = e->model;
    pthread_mutex_unlock(&c->mu);
    return have;
}

void ws_state_cache_drop(ws_state_cache *c, const char *id)
{
    pthread_mutex_lock(&c->mu);
    entry *e = find(c, id);
    if (e) remove_entry(c, e);
    pthread_mutex_unlock(&c->mu);
}

ws_state_cache_stats ws_state_cache_stats_of(ws_state_cache *c)
{
    pthread_mutex_lock(&c->mu);
    ws_state_cache_stats s = {.hits = c->hits, .misses = c->misses, .entries = c->entries,
                              .bytes = c->bytes};
    pthread_mutex_unlock(&c->mu);
    return s;
}
