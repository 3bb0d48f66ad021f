/* exec_pool.c — see exec_pool.h. */
#include "exec_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/ws_thread_name.h"
#include "model_internal.h"

#define POOL_MAX 64

/* Helpers are threads of the pool's own, not OpenMP's: the CPU ops index their
 * scratch by omp_get_thread_num(), which in a worker of an enclosing OpenMP
 * region is that worker's number even where the op opens no region of its own
 * (one thread), and would run past its scratch. */
struct ws_exec_pool {
    ws_model *m;
    int n;                    /* threads, the caller's included */
    int cpu;                  /* m is on the CPU backend */
    ws_exec *x[POOL_MAX];     /* per thread; x[0] on m */
    ws_batch *b[POOL_MAX];    /* per thread */
    ws_backend *be[POOL_MAX]; /* threads past the first: a CPU backend of one thread */
    ws_model *view[POOL_MAX]; /* threads past the first: m on be[t] */
    pthread_t th[POOL_MAX];
    int started; /* helpers running */
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    unsigned pass_no; /* bumped for each pass with helpers (under mu) */
    int stop, busy;   /* under mu: helpers to end; helpers still in the pass */
    /* the pass under way */
    ws_exec_chunk_fn fn;
    void *ctx;
    int n_rows, chunk, chunks, threads;
    atomic_int next, failed;
    ws_status first;
    ws_error first_err;
};

/* Thread t's share of the pass: chunks claimed in order until none is left or
 * one failed. */
static void work(ws_exec_pool *p, int t)
{
    ws_error e1 = {0};
    for (;;) {
        int c = atomic_fetch_add(&p->next, 1);
        if (c >= p->chunks || atomic_load(&p->failed)) return;
        int r0 = c * p->chunk, r1 = r0 + p->chunk < p->n_rows ? r0 + p->chunk : p->n_rows;
        ws_status s = p->fn(p->ctx, p->x[t], p->b[t], r0, r1, &e1);
        if (s == WS_OK) continue;
        if (!atomic_exchange(&p->failed, 1)) p->first = s, p->first_err = e1;
        return;
    }
}

typedef struct {
    ws_exec_pool *p;
    int t;
} helper_arg;

static void *helper_main(void *arg)
{
    helper_arg *h = arg;
    ws_exec_pool *p = h->p;
    ws_thread_name("ws-pass");
    int t = h->t;
    free(h);
    unsigned seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->pass_no == seen && !p->stop) pthread_cond_wait(&p->go, &p->mu);
        if (p->stop) break;
        seen = p->pass_no;
        if (t >= p->threads) continue;
        pthread_mutex_unlock(&p->mu);
        work(p, t);
        pthread_mutex_lock(&p->mu);
        if (--p->busy == 0) pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

ws_status ws_exec_pool_new(ws_exec_pool **out, ws_model *m, int threads, ws_error *err)
{
    *out = NULL;
    ws_exec_pool *p = calloc(1, sizeof *p);
    if (!p) return ws_error_set(err, WS_ERR_NOMEM, "model: out of memory");
    p->m = m;
    p->cpu = !strcmp(m->be->ops->name, "cpu");
    if (threads <= 0) threads = ws_backend_threads(m->be, 0);
    p->n = !p->cpu || threads < 1 ? 1 : threads > POOL_MAX ? POOL_MAX : threads;
    ws_status s = WS_OK;
    if (pthread_mutex_init(&p->mu, NULL) || pthread_cond_init(&p->go, NULL) ||
        pthread_cond_init(&p->done, NULL)) {
        free(p); /* (none of them holds anything on Linux) */
        return ws_error_set(err, WS_ERR_NOMEM, "model: cannot make a pool's lock");
    }
    for (int t = 0; s == WS_OK && t < p->n; t++) {
        ws_model *on = m;
        if (t > 0) {
            s = ws_backend_cpu_new(&p->be[t], 1, err);
            if (s == WS_OK && !(on = p->view[t] = malloc(sizeof *on)))
                s = ws_error_set(err, WS_ERR_NOMEM, "model: out of memory");
            if (s != WS_OK) break;
            *on = *m;
            on->be = p->be[t];
        }
        s = ws_exec_new(&p->x[t], on, err);
        if (s == WS_OK && ws_batch_new(&p->b[t], &m->cfg) != WS_OK)
            s = ws_error_set(err, WS_ERR_NOMEM, "model: out of memory");
    }
    for (int t = 1; s == WS_OK && t < p->n; t++) {
        helper_arg *h = malloc(sizeof *h);
        if (h) *h = (helper_arg){p, t};
        if (!h || pthread_create(&p->th[t], NULL, helper_main, h) != 0) {
            free(h);
            s = ws_error_set(err, WS_ERR_NOMEM, "model: cannot start a pool's thread");
        } else {
            p->started = t;
        }
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
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int t = 1; t <= p->started; t++) pthread_join(p->th[t], NULL);
    for (int t = 0; t < p->n; t++) {
        ws_exec_free(p->x[t]); /* before its backend: its arena is that backend's */
        ws_batch_free(p->b[t]);
        free(p->view[t]);
        if (p->be[t]) ws_backend_free(p->be[t]);
    }
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
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

ws_status ws_exec_pool_run(ws_exec_pool *p, int n_rows, int chunk, int threads, ws_exec_chunk_fn fn,
                           void *ctx, ws_error *err)
{
    if (chunk < 1) chunk = 1;
    int chunks = (n_rows + chunk - 1) / chunk;
    if (threads > p->n) threads = p->n;
    if (threads > chunks) threads = chunks;
    if (threads <= 1) {
        for (int r0 = 0; r0 < n_rows; r0 += chunk)
            WS_TRY(fn(ctx, p->x[0], p->b[0], r0, r0 + chunk < n_rows ? r0 + chunk : n_rows, err));
        return WS_OK;
    }
    pthread_mutex_lock(&p->mu);
    /* The views again: the model's fields may have moved since the last pass. */
    for (int t = 1; t < threads; t++) {
        *p->view[t] = *p->m;
        p->view[t]->be = p->be[t];
    }
    p->fn = fn, p->ctx = ctx, p->n_rows = n_rows, p->chunk = chunk, p->chunks = chunks;
    p->threads = threads, p->busy = threads - 1, p->first = WS_OK;
    atomic_store(&p->next, 0);
    atomic_store(&p->failed, 0);
    p->pass_no++;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    /* the caller's share, its ops on one thread */
    ws_backend_threads(p->m->be, 1);
    work(p, 0);
    ws_backend_threads(p->m->be, 0);
    pthread_mutex_lock(&p->mu);
    while (p->busy) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
    if (p->first != WS_OK) *err = p->first_err;
    return p->first;
}
