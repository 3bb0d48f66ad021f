/* exec_pool.c — see exec_pool.h. */
#include "exec_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/ws_thread_name.h"
#include "model_internal.h"

#define POOL_MAX 64

/* Runs chunk c of a training pass on x: its gradients are added to those of
 * x's model. */
typedef ws_status (*ws_exec_train_fn)(void *ctx, ws_exec *x, int c, ws_error *err);

/* Helpers are threads of the crew's own, not OpenMP's: the CPU ops index their
 * scratch by omp_get_thread_num(), which in a worker of an enclosing OpenMP
 * region is that worker's number even where the op opens no region of its own
 * (one thread), and would run past its scratch. */
struct ws_exec_crew {
    int n;                    /* threads, the caller's included */
    ws_backend *be[POOL_MAX]; /* threads past the first: a CPU backend of one thread */
    pthread_t th[POOL_MAX];
    int started, ready;      /* helpers running; of them, named and waiting (under mu) */
    pthread_mutex_t pass_mu; /* held for a pass with helpers: one at a time */
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    unsigned pass_no; /* bumped for each pass with helpers (under mu) */
    int stop, busy;   /* under mu: helpers to end; helpers still in the pass */
    /* the pass under way (under mu): its pool and threads; 0 threads between
     * passes, when a helper that a pass did not need may wake at last */
    ws_exec_pool *pool;
    int threads;
};

struct ws_exec_pool {
    ws_model *m;
    ws_exec_crew *crew;       /* NULL: one thread */
    int n;                    /* threads, the caller's included */
    int cpu;                  /* m is on the CPU backend */
    ws_exec *x[POOL_MAX];     /* per thread; x[0] on m */
    ws_batch *b[POOL_MAX];    /* per thread */
    ws_model *view[POOL_MAX]; /* threads past the first: m on the crew's be[t] */
    float *grads[POOL_MAX];   /* training, threads past the first: their own gradients */
    /* the pass under way: rows in chunks claimed in order (fn), or a training
     * pass (train_fn): thread t's share of the chunks in order */
    ws_exec_chunk_fn fn;
    ws_exec_train_fn train_fn;
    void *ctx;
    int n_rows, chunk, chunks, threads;
    atomic_int next, failed;
    ws_status first;
    ws_error first_err;
};

static void fail(ws_exec_pool *p, ws_status s, const ws_error *e1)
{
    if (!atomic_exchange(&p->failed, 1)) p->first = s, p->first_err = *e1;
}

/* Thread t's share of a training pass: its gradients zeroed (thread 0 adds to
 * the model's own), then chunks [t·n/T, (t+1)·n/T) in order. */
static void train_share(ws_exec_pool *p, int t)
{
    ws_error e1 = {0};
    if (t > 0) memset(p->grads[t], 0, sizeof(float) * p->m->n_params);
    int c0 = (int)((long)p->chunks * t / p->threads),
        c1 = (int)((long)p->chunks * (t + 1) / p->threads);
    for (int c = c0; c < c1 && !atomic_load(&p->failed); c++) {
        ws_status s = p->train_fn(p->ctx, p->x[t], c, &e1);
        if (s != WS_OK) return fail(p, s, &e1);
    }
}

/* Thread t's share of the pass: chunks claimed in order until none is left or
 * one failed. */
static void work(ws_exec_pool *p, int t)
{
    if (p->train_fn) return train_share(p, t);
    ws_error e1 = {0};
    for (;;) {
        int c = atomic_fetch_add(&p->next, 1);
        if (c >= p->chunks || atomic_load(&p->failed)) return;
        int r0 = c * p->chunk, r1 = r0 + p->chunk < p->n_rows ? r0 + p->chunk : p->n_rows;
        ws_status s = p->fn(p->ctx, p->x[t], p->b[t], r0, r1, &e1);
        if (s != WS_OK) return fail(p, s, &e1);
    }
}

typedef struct {
    ws_exec_crew *c;
    int t;
} helper_arg;

static void *helper_main(void *arg)
{
    helper_arg *h = arg;
    ws_exec_crew *c = h->c;
    ws_thread_name("ws-pass");
    int t = h->t;
    free(h);
    unsigned seen = 0;
    pthread_mutex_lock(&c->mu);
    c->ready++;
    pthread_cond_signal(&c->done);
    for (;;) {
        while (c->pass_no == seen && !c->stop) pthread_cond_wait(&c->go, &c->mu);
        if (c->stop) break;
        seen = c->pass_no;
        if (t >= c->threads) continue;
        ws_exec_pool *p = c->pool;
        pthread_mutex_unlock(&c->mu);
        work(p, t);
        pthread_mutex_lock(&c->mu);
        if (--c->busy == 0) pthread_cond_signal(&c->done);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

ws_status ws_exec_crew_new(ws_exec_crew **out, int threads, ws_error *err)
{
    *out = NULL;
    ws_exec_crew *c = calloc(1, sizeof *c);
    if (!c) return ws_error_set(err, WS_ERR_NOMEM, "model: out of memory");
    c->n = threads < 1 ? 1 : threads > POOL_MAX ? POOL_MAX : threads;
    if (pthread_mutex_init(&c->pass_mu, NULL) || pthread_mutex_init(&c->mu, NULL) ||
        pthread_cond_init(&c->go, NULL) || pthread_cond_init(&c->done, NULL)) {
        free(c); /* (none of them holds anything on Linux) */
        return ws_error_set(err, WS_ERR_NOMEM, "model: cannot make a crew's lock");
    }
    ws_status s = WS_OK;
    for (int t = 1; s == WS_OK && t < c->n; t++) s = ws_backend_cpu_new(&c->be[t], 1, err);
    for (int t = 1; s == WS_OK && t < c->n; t++) {
        helper_arg *h = malloc(sizeof *h);
        if (h) *h = (helper_arg){c, t};
        if (!h || pthread_create(&c->th[t], NULL, helper_main, h) != 0) {
            free(h);
            s = ws_error_set(err, WS_ERR_NOMEM, "model: cannot start a crew's thread");
        } else {
            c->started = t;
        }
    }
    if (s != WS_OK) {
        ws_exec_crew_free(c);
        return s;
    }
    /* Every helper carries its name once the crew is made (top -H, tests). */
    pthread_mutex_lock(&c->mu);
    while (c->ready < c->started) pthread_cond_wait(&c->done, &c->mu);
    pthread_mutex_unlock(&c->mu);
    *out = c;
    return WS_OK;
}

void ws_exec_crew_free(ws_exec_crew *c)
{
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    c->stop = 1;
    pthread_cond_broadcast(&c->go);
    pthread_mutex_unlock(&c->mu);
    for (int t = 1; t <= c->started; t++) pthread_join(c->th[t], NULL);
    for (int t = 1; t < c->n; t++)
        if (c->be[t]) ws_backend_free(c->be[t]);
    pthread_mutex_destroy(&c->pass_mu);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->go);
    pthread_cond_destroy(&c->done);
    free(c);
}

ws_status ws_exec_pool_new(ws_exec_pool **out, ws_model *m, ws_exec_crew *crew, ws_error *err)
{
    *out = NULL;
    ws_exec_pool *p = calloc(1, sizeof *p);
    if (!p) return ws_error_set(err, WS_ERR_NOMEM, "model: out of memory");
    p->m = m;
    p->cpu = !strcmp(m->be->ops->name, "cpu");
    p->crew = p->cpu ? crew : NULL;
    p->n = p->crew ? p->crew->n : 1;
    ws_status s = WS_OK;
    for (int t = 0; s == WS_OK && t < p->n; t++) {
        ws_model *on = m;
        if (t > 0) {
            if (!(on = p->view[t] = malloc(sizeof *on)))
                s = ws_error_set(err, WS_ERR_NOMEM, "model: out of memory");
            if (s != WS_OK) break;
            *on = *m;
            on->be = p->crew->be[t];
        }
        s = ws_exec_new(&p->x[t], on, err);
        if (s == WS_OK && ws_batch_new(&p->b[t], &m->cfg) != WS_OK)
            s = ws_error_set(err, WS_ERR_NOMEM, "model: out of memory");
    }
    if (s != WS_OK) {
        ws_exec_pool_free(p);
        return s;
    }
    *out = p;
    return WS_OK;
}

void ws_exec_pool_free(ws_exec_pool *p)
{
    if (!p) return;
    for (int t = 0; t < p->n; t++) {
        ws_exec_free(p->x[t]); /* its arena is on the crew's backend, which outlives it */
        ws_batch_free(p->b[t]);
        free(p->view[t]);
        free(p->grads[t]);
    }
    free(p);
}

int ws_exec_pool_threads(const ws_exec_pool *p)
{
    return p->n;
}

int ws_exec_pool_chunk(const ws_exec_pool *p, int n_rows, int threads)
{
    if (!p->cpu) return n_rows;
    int even = (n_rows + threads - 1) / (threads > 0 ? threads : 1);
    return even < WS_EXEC_POOL_CHUNK ? even : WS_EXEC_POOL_CHUNK;
}

/* The threads a pass of `chunks` chunks takes when `threads` are asked: at
 * most the pool's and one per chunk. */
static int pass_threads(const ws_exec_pool *p, int threads, int chunks)
{
    if (threads > p->n) threads = p->n;
    return threads > chunks ? chunks : threads;
}

/* Runs the pass set in p on `threads` (>= 2) threads: the crew's and the caller's. */
static ws_status run_pass(ws_exec_pool *p, int threads, ws_error *err)
{
    ws_exec_crew *c = p->crew;
    pthread_mutex_lock(&c->pass_mu);
    /* The views again: the model's fields may have moved since the last pass. */
    for (int t = 1; t < threads; t++) {
        *p->view[t] = *p->m;
        p->view[t]->be = c->be[t];
        if (p->train_fn) p->view[t]->grads = p->grads[t];
    }
    p->threads = threads;
    p->first = WS_OK;
    atomic_store(&p->next, 0);
    atomic_store(&p->failed, 0);
    pthread_mutex_lock(&c->mu);
    c->pool = p, c->threads = threads, c->busy = threads - 1;
    c->pass_no++;
    pthread_cond_broadcast(&c->go);
    pthread_mutex_unlock(&c->mu);
    /* the caller's share, its ops on one thread */
    ws_backend_threads(p->m->be, 1);
    work(p, 0);
    ws_backend_threads(p->m->be, 0);
    pthread_mutex_lock(&c->mu);
    while (c->busy) pthread_cond_wait(&c->done, &c->mu);
    c->pool = NULL, c->threads = 0;
    pthread_mutex_unlock(&c->mu);
    pthread_mutex_unlock(&c->pass_mu);
    if (p->first != WS_OK) *err = p->first_err;
    return p->first;
}

ws_status ws_exec_pool_run(ws_exec_pool *p, int n_rows, int chunk, int threads, ws_exec_chunk_fn fn,
                           void *ctx, ws_error *err)
{
    if (chunk < 1) chunk = 1;
    int chunks = (n_rows + chunk - 1) / chunk;
    threads = pass_threads(p, threads, chunks);
    if (threads <= 1) {
        for (int r0 = 0; r0 < n_rows; r0 += chunk)
            WS_TRY(fn(ctx, p->x[0], p->b[0], r0, r0 + chunk < n_rows ? r0 + chunk : n_rows, err));
        return WS_OK;
    }
    p->fn = fn, p->train_fn = NULL, p->ctx = ctx;
    p->n_rows = n_rows, p->chunk = chunk, p->chunks = chunks;
    return run_pass(p, threads, err);
}

/* A training pass of `chunks` chunks (ws_exec_chunks_step). */
static ws_status pool_train(ws_exec_pool *p, int chunks, int threads, ws_exec_train_fn fn,
                            void *ctx, ws_error *err)
{
    threads = pass_threads(p, threads, chunks);
    if (threads <= 1) {
        for (int c = 0; c < chunks; c++) WS_TRY(fn(ctx, p->x[0], c, err));
        return WS_OK;
    }
    for (int t = 1; t < threads; t++)
        if (!p->grads[t] && !(p->grads[t] = malloc(sizeof(float) * p->m->n_params)))
            return ws_error_set(err, WS_ERR_NOMEM, "model: out of memory");
    p->fn = NULL, p->train_fn = fn, p->ctx = ctx, p->chunks = chunks;
    WS_TRY(run_pass(p, threads, err));
    /* the shares' gradients into the model's, in thread order: the same bits
     * whichever core ran which share; on the model backend's threads, not
     * on this one while the others wait */
    ws_backend *be = p->m->be;
    for (int t = 1; t < threads; t++)
        if (be->ops->add_forward(be, p->m->grads, p->m->grads, p->grads[t], p->m->n_params) !=
            WS_OK)
            return ws_error_set(err, WS_ERR_BACKEND, "model: cannot add a share's gradients");
    return WS_OK;
}

typedef struct {
    ws_batch *const *b;
    float *w;
    size_t chunk_floats; /* the states of a chunk */
    ws_step_mode mode;
    float loss_scale;
    int n_labelled; /* over all the chunks */
    ws_step_result *res;
} pool_step;

static ws_status step_chunk(void *ctx, ws_exec *x, int c, ws_error *err)
{
    const pool_step *ps = ctx;
    const ws_batch *b = ps->b[c];
    float *w = ps->w + (size_t)c * ps->chunk_floats;
    /* each chunk's loss is the mean over its own labels: weighted by its share */
    int n = ws_batch_n_labelled(b);
    float scale = ps->n_labelled ? ps->loss_scale * (float)n / (float)ps->n_labelled : 0.0f;
    return ws_exec_step(x, b, w, w, ps->mode, scale, NULL, &ps->res[c], err);
}

/* ws_exec_pool_run's chunk of one "row", chunk r0, forward. */
static ws_status run_chunk_rows(void *ctx, ws_exec *x, ws_batch *unused, int r0, int r1,
                                ws_error *err)
{
    (void)unused, (void)r1;
    return step_chunk(ctx, x, r0, err);
}

struct ws_exec_chunks {
    ws_exec_crew *crew;
    ws_exec_pool *pool;
    int threads, n;
    ws_batch **b;
};

ws_status ws_exec_chunks_new(ws_exec_chunks **out, ws_model *m, int rows, int threads,
                             ws_error *err)
{
    *out = NULL;
    ws_exec_chunks *k = calloc(1, sizeof *k);
    if (!k) return ws_error_set(err, WS_ERR_NOMEM, "model: out of memory");
    k->threads = threads;
    k->n = (rows + WS_EXEC_POOL_CHUNK - 1) / WS_EXEC_POOL_CHUNK;
    ws_status s = (k->b = calloc((size_t)k->n, sizeof *k->b))
                      ? WS_OK
                      : ws_error_set(err, WS_ERR_NOMEM, "model: out of memory");
    for (int c = 0; s == WS_OK && c < k->n; c++)
        if (ws_batch_new(&k->b[c], &m->cfg) != WS_OK)
            s = ws_error_set(err, WS_ERR_NOMEM, "model: out of memory");
    if (s == WS_OK) s = ws_exec_crew_new(&k->crew, threads, err);
    if (s == WS_OK) s = ws_exec_pool_new(&k->pool, m, k->crew, err);
    if (s != WS_OK) {
        ws_exec_chunks_free(k);
        return s;
    }
    *out = k;
    return WS_OK;
}

void ws_exec_chunks_free(ws_exec_chunks *k)
{
    if (!k) return;
    ws_exec_pool_free(k->pool);
    ws_exec_crew_free(k->crew); /* after the pool, made on it */
    for (int c = 0; k->b && c < k->n; c++) ws_batch_free(k->b[c]);
    free(k->b);
    free(k);
}

void ws_exec_chunks_clear(ws_exec_chunks *k)
{
    for (int c = 0; c < k->n; c++) ws_batch_clear(k->b[c]);
}

ws_batch *ws_exec_chunks_batch(ws_exec_chunks *k, int row)
{
    return k->b[row / WS_EXEC_POOL_CHUNK];
}

ws_status ws_exec_chunks_step(ws_exec_chunks *k, int n_rows, float *w, ws_step_mode mode,
                              float loss_scale, ws_step_result *res, ws_error *err)
{
    ws_exec_pool *p = k->pool;
    int chunks = (n_rows + WS_EXEC_POOL_CHUNK - 1) / WS_EXEC_POOL_CHUNK;
    size_t chunk_floats = (size_t)WS_EXEC_POOL_CHUNK * ws_model_state_floats(p->m);
    pool_step ps = {.b = k->b,
                    .w = w,
                    .chunk_floats = chunk_floats,
                    .mode = mode,
                    .loss_scale = loss_scale,
                    .res = calloc((size_t)chunks, sizeof *ps.res)};
    if (!ps.res) return ws_error_set(err, WS_ERR_NOMEM, "model: out of memory");
    for (int c = 0; c < chunks; c++) ps.n_labelled += ws_batch_n_labelled(k->b[c]);
    ws_status s = mode == WS_STEP_TRAIN
                      ? pool_train(p, chunks, k->threads, step_chunk, &ps, err)
                      : ws_exec_pool_run(p, chunks, 1, k->threads, run_chunk_rows, &ps, err);
    if (s == WS_OK && res) {
        memset(res, 0, sizeof *res);
        for (int c = 0; c < chunks; c++) {
            const ws_step_result *r = &ps.res[c];
            res->loss += r->n_labelled ? r->loss * (float)r->n_labelled / (float)ps.n_labelled : 0;
            res->n_correct += r->n_correct;
            res->n_labelled += r->n_labelled;
        }
    }
    free(ps.res);
    return s;
}
