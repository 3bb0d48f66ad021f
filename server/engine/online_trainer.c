/* online_trainer.c — online training of one model inside the engine (DESIGN §3, §4).
 *
 * Every committed step of a session is observed: its instructions update the
 * session's recent-facts cache (recall.h: the last value told for each fact,
 * newest 64 facts per session, for the newest 512 sessions; in memory only, so it
 * refills from new steps after a restart rather than re-reading the log), and
 * the step becomes a record (W_{t-1}, I_t, Q_t, recall queries). The recall
 * queries are drawn from the cache *after* I_t was applied, labelled with the
 * last value told — exactly "told earlier and not overridden since" — which
 * keeps the truncated-gradient training thorough without the client's help.
 * A step posted with labels becomes a ready example at once; an unlabelled one
 * waits in a ring of the newest 256 for labels to arrive by PUT (older ones
 * only get their labels stored, for offline retraining). Steps with raw vector
 * facts are not trained on online (their vectors are not kept).
 * The engine calls ws_online_run when it has no serving work: one TRAIN pass
 * over up to 8 ready examples; every update_every examples it applies the
 * summed gradients (ws_online_update) as part of publishing a version. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/common/recall.h"
#include "online_trainer.h"

#define RING           256
#define CACHE_SESSIONS 512
#define TRAIN_CHUNK    8

typedef struct {
    char session[WS_STORE_ID_LEN + 1];
    int64_t step;
    float *w_prev; /* NULL: the trajectory starts from W_0 */
    int n_instr, n_query, n_recall;
    int32_t *ids; /* (n_instr + n_query + n_recall) rows of S ids */
    int8_t *vals; /* instruction values, query labels (-1 unknown), recall labels */
} example;

typedef struct {
    char session[WS_STORE_ID_LEN + 1];
    uint64_t last_use;
    ws_recall_facts facts;
} fact_cache;

struct ws_online_trainer {
    int S;
    size_t state_floats;
    example *pending[RING], *ready[RING];
    int n_pending, pending_head, n_ready;
    fact_cache *cache; /* [CACHE_SESSIONS] */
    uint64_t tick, rng;
    ws_batch *batch;
    float *w_in, *w_out; /* device, TRAIN_CHUNK states each */
    int since_update, calls;
    float loss_sum;
    int loss_n;
    ws_online_stats stats;
};

ws_batch_shape ws_online_shape(void)
{
    return (ws_batch_shape){TRAIN_CHUNK, WS_SRV_MAX_ITEMS, WS_SRV_MAX_ITEMS + WS_SRV_RECALL_MAX, 1};
}

size_t ws_online_bytes(const ws_model_config *c)
{
    size_t state = (size_t)c->n_state * (size_t)c->d * sizeof(float);
    size_t rows = 2 * WS_SRV_MAX_ITEMS + WS_SRV_RECALL_MAX;
    size_t one = sizeof(example) + state + rows * ((size_t)c->max_fact_len * sizeof(int32_t) + 1);
    return 2 * TRAIN_CHUNK * state + 2 * RING * one + CACHE_SESSIONS * sizeof(fact_cache);
}

static void example_free(example *e)
{
    if (!e) return;
    free(e->w_prev);
    free(e->ids);
    free(e->vals);
    free(e);
}

ws_status ws_online_new(ws_online_trainer **out, ws_model *m, ws_error *err)
{
    *out = NULL;
    ws_online_trainer *t = calloc(1, sizeof *t);
    if (!t) return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    t->S = ws_model_config_of(m)->max_fact_len;
    t->state_floats = ws_model_state_floats(m);
    t->rng = 0x9E3779B97F4A7C15ull;
    t->cache = calloc(CACHE_SESSIONS, sizeof *t->cache);
    ws_status s = t->cache ? ws_batch_new(&t->batch, ws_model_config_of(m))
                           : ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    if (s == WS_OK) s = ws_model_state_alloc(m, TRAIN_CHUNK, &t->w_in, err);
    if (s == WS_OK) s = ws_model_state_alloc(m, TRAIN_CHUNK, &t->w_out, err);
    if (s != WS_OK) {
        ws_online_free(t, m);
        return s == WS_ERR_NOMEM ? ws_error_set(err, s, "out of memory") : s;
    }
    *out = t;
    return WS_OK;
}

void ws_online_free(ws_online_trainer *t, ws_model *m)
{
    if (!t) return;
    for (int i = 0; i < RING; i++) example_free(t->pending[i]);
    for (int i = 0; i < t->n_ready; i++)
        example_free(t->ready[i]); /* the tail holds stale pointers */
    free(t->cache);
    ws_batch_free(t->batch);
    ws_backend_release(ws_model_backend(m), t->w_in);
    ws_backend_release(ws_model_backend(m), t->w_out);
    free(t);
}

/* Symbols in a -1 padded id row. */
static int row_len(const int32_t *ids, int S)
{
    int n = 0;
    while (n < S && ids[n] >= 0) n++;
    return n;
}

static fact_cache *cache_of(ws_online_trainer *t, const char *session)
{
    fact_cache *oldest = &t->cache[0];
    for (int i = 0; i < CACHE_SESSIONS; i++) {
        fact_cache *c = &t->cache[i];
        if (!strcmp(c->session, session)) return c;
        if (c->last_use < oldest->last_use) oldest = c;
    }
    memset(oldest, 0, sizeof *oldest); /* evict the least recently stepped session */
    strcpy(oldest->session, session);
    return oldest;
}

void ws_online_observe(ws_online_trainer *t, const ws_srv_training *tr, const ws_online_step *st)
{
    fact_cache *c = cache_of(t, st->session);
    c->last_use = ++t->tick;
    int S = t->S;
    for (int i = 0; i < st->n_instr; i++)
        ws_recall_tell(&c->facts, S, st->instr_ids + (size_t)i * S, st->instr_val[i]);
    if (!tr->enabled || st->has_vectors) return;
    int n_recall = c->facts.n < tr->recall_queries ? c->facts.n : tr->recall_queries;
    example *e = calloc(1, sizeof *e);
    int rows = st->n_instr + st->n_query + n_recall;
    if (!e) return; /* training is best effort: serving never fails for it */
    e->ids = malloc(sizeof(int32_t) * (size_t)(rows ? rows : 1) * S);
    e->vals = malloc((size_t)(rows ? rows : 1));
    e->w_prev = st->w_prev ? malloc(sizeof(float) * t->state_floats) : NULL;
    if (!e->ids || !e->vals || (st->w_prev && !e->w_prev)) return example_free(e);
    strcpy(e->session, st->session);
    e->step = st->step;
    e->n_instr = st->n_instr, e->n_query = st->n_query, e->n_recall = n_recall;
    if (st->w_prev) memcpy(e->w_prev, st->w_prev, sizeof(float) * t->state_floats);
    size_t row = (size_t)S;
    memcpy(e->ids, st->instr_ids, sizeof(int32_t) * row * (size_t)st->n_instr);
    memcpy(e->ids + row * (size_t)st->n_instr, st->query_ids,
           sizeof(int32_t) * row * (size_t)st->n_query);
    for (int i = 0; i < st->n_instr; i++) e->vals[i] = (int8_t)st->instr_val[i];
    for (int i = 0; i < st->n_query; i++)
        e->vals[st->n_instr + i] = (int8_t)(st->labels ? st->labels[i] : -1);
    for (int i = 0; i < n_recall; i++) {
        int k = ws_recall_draw(&c->facts, &t->rng);
        int r = st->n_instr + st->n_query + i;
        memcpy(e->ids + row * (size_t)r, c->facts.ids[k], sizeof(int32_t) * row);
        e->vals[r] = c->facts.val[k];
    }
    if (st->labels) {
        t->stats.examples_labelled++;
        if (t->n_ready == RING) { /* bounded: drop the oldest waiting example */
            example_free(t->ready[0]);
            memmove(&t->ready[0], &t->ready[1], sizeof(example *) * (RING - 1));
            t->n_ready--;
            t->stats.examples_dropped++;
        }
        t->ready[t->n_ready++] = e;
        return;
    }
    /* Unlabelled: wait for labels; the ring overwrites the oldest. */
    int slot = (t->pending_head + t->n_pending) % RING;
    if (t->n_pending == RING) {
        slot = t->pending_head;
        t->pending_head = (t->pending_head + 1) % RING;
        t->n_pending--;
    }
    example_free(t->pending[slot]);
    t->pending[slot] = e;
    t->n_pending++;
}

int ws_online_label(ws_online_trainer *t, const char *session, int64_t step, const int *labels,
                    int n)
{
    for (int i = 0; i < t->n_pending; i++) {
        int slot = (t->pending_head + i) % RING;
        example *e = t->pending[slot];
        if (!e || e->step != step || strcmp(e->session, session) != 0) continue;
        if (n != e->n_query || t->n_ready == RING) return 0;
        for (int q = 0; q < n; q++) e->vals[e->n_instr + q] = (int8_t)labels[q];
        t->pending[slot] = NULL; /* its slot stays in the ring as an empty record */
        t->ready[t->n_ready++] = e;
        t->stats.examples_labelled++;
        return 1;
    }
    return 0;
}

void ws_online_discard_gradients(ws_online_trainer *t)
{
    t->since_update = 0, t->calls = 0, t->loss_sum = 0, t->loss_n = 0;
}

int ws_online_ready(const ws_online_trainer *t)
{
    return t->n_ready;
}

ws_online_stats ws_online_stats_of(const ws_online_trainer *t)
{
    ws_online_stats s = t->stats;
    s.ready = t->n_ready;
    s.last_loss = t->loss_n ? t->loss_sum / (float)t->loss_n : s.last_loss;
    return s;
}

ws_status ws_online_run(ws_online_trainer *t, ws_exec *x, const ws_srv_training *tr, int *due,
                        ws_error *err)
{
    ws_model *m = ws_exec_model(x);
    *due = 0;
    int n = t->n_ready < TRAIN_CHUNK ? t->n_ready : TRAIN_CHUNK;
    if (n == 0 || !tr->enabled) return WS_OK;
    ws_batch *b = t->batch;
    ws_backend *be = ws_model_backend(m);
    ws_batch_clear(b);
    ws_status s = WS_OK;
    int S = t->S;
    for (int i = 0; i < n && s == WS_OK; i++) {
        example *e = t->ready[i];
        s = ws_batch_begin_traj(b, e->w_prev == NULL);
        for (int k = 0; k < e->n_instr && s == WS_OK; k++)
            s = ws_batch_add_instr(b, e->ids + (size_t)k * S, row_len(e->ids + (size_t)k * S, S),
                                   e->vals[k]);
        for (int k = e->n_instr; k < e->n_instr + e->n_query + e->n_recall && s == WS_OK; k++)
            s = ws_batch_add_query(b, e->ids + (size_t)k * S, row_len(e->ids + (size_t)k * S, S),
                                   e->vals[k]);
        if (s == WS_OK && e->w_prev)
            s = ws_backend_upload(be, t->w_in + (size_t)i * t->state_floats, e->w_prev,
                                  sizeof(float) * t->state_floats);
    }
    ws_step_result res = {0};
    if (s == WS_OK && ws_batch_n_labelled(b) > 0)
        s = ws_exec_step(x, b, t->w_in, t->w_out, WS_STEP_TRAIN, 1.0f, NULL, &res, err);
    for (int i = 0; i < n; i++) example_free(t->ready[i]);
    memmove(&t->ready[0], &t->ready[n], sizeof(example *) * (size_t)(t->n_ready - n));
    t->n_ready -= n;
    if (s != WS_OK) return s;
    t->stats.examples_trained += n;
    t->loss_sum += res.loss;
    t->loss_n++;
    t->since_update += n;
    t->calls++;
    *due = t->since_update >= tr->update_every;
    return WS_OK;
}

ws_status ws_online_update(ws_online_trainer *t, ws_model *m, const ws_srv_training *tr,
                           ws_error *err)
{
    ws_optim_config oc = ws_optim_config_default();
    oc.lr = tr->lr;
    oc.grad_scale = 1.0f / (float)t->calls; /* the mean over the accumulated passes */
    float gn = 0;
    WS_TRY(ws_model_adamw_step(m, &oc, &gn, err));
    t->stats.last_loss = t->loss_sum / (float)t->loss_n;
    t->stats.updates++;
    t->loss_sum = 0, t->loss_n = 0, t->since_update = 0, t->calls = 0;
    return WS_OK;
}
