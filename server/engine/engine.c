/* engine.c — the engine thread (DESIGN §4): one thread owns the backend and
 * every loaded model. It takes up to max_batch queued jobs, with each session
 * at most once per batch and never a session of the batch still being
 * committed (a later job of the session stays queued for a later batch, so a
 * session's steps apply strictly in order); computes them (engine_run.c) and
 * hands them to the commit stage (engine_commit.c), which commits and answers
 * them while this thread computes the next batch (up to WS_ENG_FLIGHTS batches
 * computed wait for their commit, in order); between batches it publishes
 * the candidate versions that the models' training threads made
 * (engine_train.c: online training never runs here) and, about once a second,
 * adopts model versions that another process recorded in SQLite
 * (engine_models.c). Whatever writes SQLite or changes a model here waits for
 * the flights in hand to complete first (ws_eng_commit_wait).
 *
 * Continuous batching: an idle engine runs what is queued the moment it comes,
 * so a lone client never waits for a batch to fill; what arrives while a batch
 * runs is queued and forms the next batch. When a flight of several jobs has
 * been answered and nothing is in hand (their clients will be back within a
 * round trip), the engine waits at most batch_wait_us for half as many jobs to
 * be queued: load keeps batches large, and the two halves of a closed loop of
 * clients alternate, one computed while the other is committed. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine_impl.h"
#include "base/ws_clock.h"
#include "base/ws_thread_name.h"

/* How often the engine looks for versions recorded by other processes: one
 * SELECT over the models table, so a retrained version is served within ~1 s. */
#define SYNC_EVERY_US 1000000

ws_engine_config ws_engine_config_default(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    /* Unknown (sysconf failed): 4 GiB, the half of a small server. */
    size_t half = pages > 0 && page > 0 ? (size_t)pages * (size_t)page / 2 : (size_t)4 << 30;
    return (ws_engine_config){.durability = WS_STORE_DURABILITY_NORMAL,
                              .max_batch = 64,
                              .batch_wait_us = 2000,
                              .max_queue = 4096,
                              .job_timeout_ms = 30000,
                              .max_model_memory = half,
                              .state_cache_bytes = (size_t)64 << 20,
                              .idle_spin_us = 0};
}

void ws_eng_finish(ws_job *j)
{
    j->done(j, j->user); /* the caller's from here on */
}

void ws_eng_fail(ws_job *j, ws_status s, const ws_error *err)
{
    j->result.status = s;
    j->result.why = WS_JOB_FAILED;
    j->result.err = *err;
    j->result.err.code = s;
    ws_eng_finish(j);
}

void ws_eng_refuse(ws_job *j, ws_job_why why, ws_status s, const char *fmt, ...)
{
    j->result.status = s;
    j->result.why = why;
    j->result.err.code = s;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(j->result.err.msg, sizeof j->result.err.msg, fmt, ap);
    va_end(ap);
    ws_eng_finish(j);
}

static int in_batch(ws_engine *e, ws_job **jobs, int n, const ws_job *j)
{
    if (!j->session[0]) return 0;
    for (int i = 0; i < n; i++)
        if (!strcmp(jobs[i]->session, j->session)) return 1;
    return ws_eng_commit_holds(e, j->session);
}

/* Takes up to max jobs off the queue (mu held). */
static int take(ws_engine *e, ws_job **jobs, int max)
{
    int n = 0;
    ws_job *prev = NULL, *j = e->head;
    while (j && n < max) {
        ws_job *next = j->next;
        if (in_batch(e, jobs, n, j)) {
            prev = j;
        } else {
            if (prev)
                prev->next = next;
            else
                e->head = next;
            if (e->tail == j) e->tail = prev;
            j->next = NULL;
            jobs[n++] = j;
            e->depth--;
        }
        j = next;
    }
    return n;
}

/* WS_JOB_TRAINING_SET: the new settings are recorded, then served. */
static void training_job(ws_engine *e, ws_job *j)
{
    ws_error err = {0};
    ws_eng_model *em = ws_eng_model_by_name(e, j->model_name);
    if (!em) return ws_eng_refuse(j, WS_JOB_FAILED, WS_ERR_NOTFOUND, "no such model");
    ws_srv_training t = em->tr;
    ws_srv_training_apply(&t, &j->training, j->training_fields);
    cJSON *tj = ws_srv_training_json(&t);
    char *text = tj ? cJSON_PrintUnformatted(tj) : NULL;
    cJSON_Delete(tj);
    ws_status s = text ? ws_store_model_set_training(e->st, em->id, text, &err)
                       : ws_error_set(&err, WS_ERR_NOMEM, "out of memory");
    free(text);
    if (s != WS_OK) return ws_eng_fail(j, s, &err);
    pthread_mutex_lock(&e->mu);
    em->tr = t;
    pthread_mutex_unlock(&e->mu);
    if (em->train) ws_eng_trainer_settings(em->train, &t);
    j->result.training = t;
    ws_eng_finish(j);
}

static void admin_job(ws_engine *e, ws_job *j)
{
    if (j->kind == WS_JOB_TRAINING_SET) return training_job(e, j);
    if (j->kind == WS_JOB_MODEL_ROLLBACK) return ws_eng_rollback_job(e, j);
    if (j->kind == WS_JOB_MODEL_DELETE) return ws_eng_model_delete_job(e, j);
    if (j->kind == WS_JOB_SESSION_CREATE || j->kind == WS_JOB_SESSION_DELETE)
        return ws_eng_session_job(e, j);
    ws_eng_build_start(e, j); /* MODEL_CREATE, MODEL_IMPORT: complete when installed */
}

void ws_eng_signal(ws_engine *e)
{
    atomic_fetch_add(&e->signals, 1);
    pthread_cond_signal(&e->cv);
}

void ws_eng_wake(void *ctx)
{
    ws_engine *e = ctx;
    pthread_mutex_lock(&e->mu);
    ws_eng_signal(e);
    pthread_mutex_unlock(&e->mu);
}

int64_t ws_eng_idle_us(void *ctx)
{
    ws_engine *e = ctx;
    int64_t since = atomic_load(&e->idle_since), done = atomic_load(&e->idle_us);
    return done + (since ? ws_clock_mono_us() - since : 0);
}

/* Waits on the engine's condition (mu held) until signalled or until the
 * monotonic time `until` (µs). */
static void wait_until(ws_engine *e, int64_t until)
{
    int64_t left = until - ws_clock_mono_us();
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t ns = ts.tv_nsec + (left > 0 ? left : 0) * 1000;
    ts.tv_sec += ns / 1000000000;
    ts.tv_nsec = ns % 1000000000;
    pthread_cond_timedwait(&e->cv, &e->mu, &ts);
}

/* A spin-wait's pause: the core's other hardware thread, if any, runs meanwhile. */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* Waits with nothing to run (mu held): counted as idle time. The total is
 * added before the wait under way is cleared, so a reader in between counts
 * this wait twice for a moment, never misses it.
 * It first polls for idle_spin_us: a lone client's next request then finds
 * the engine thread awake, and neither the HTTP thread pays a futex wake nor
 * the request a thread's wakeup (bench_server --default-model, 1 client, 2
 * cores: p50 0.34-0.35 ms at 0, 0.34 at 50 µs, 0.28-0.29 at 100 and 200; 64
 * clients alike with 0 and 100, where the queue is never empty). Not while a
 * training thread is in a pass: on the other core, it is what the client's,
 * the HTTP and the commit threads would have to preempt (the same bench with
 * training on: p50 0.41-0.42 ms polling, 0.32-0.39 not). Off by default: a
 * polling thread takes a core from whatever else runs on the machine (two
 * daemons and PostgreSQL on 2 cores, test_server_cluster: 2 failures in 22
 * runs polling, none in 14 without). */
static void idle_until(ws_engine *e, int64_t until)
{
    int64_t t0 = ws_clock_mono_us();
    atomic_store(&e->idle_since, t0);
    /* Jobs may be queued that cannot run yet (their session is in a flight
     * in hand): what ends the wait is a signal (a new job, a flight
     * completed, a wake), polled for unlocked, then waited for; a signal
     * given between the two is seen under mu, so none is lost. */
    unsigned seen = atomic_load(&e->signals);
    if (e->cfg.idle_spin_us > 0 && !atomic_load(&e->training_now)) {
        pthread_mutex_unlock(&e->mu);
        int64_t end = t0 + e->cfg.idle_spin_us;
        while (atomic_load(&e->signals) == seen && ws_clock_mono_us() < end) cpu_relax();
        pthread_mutex_lock(&e->mu);
    }
    if (atomic_load(&e->signals) == seen) wait_until(e, until);
    atomic_fetch_add(&e->idle_us, ws_clock_mono_us() - t0);
    atomic_store(&e->idle_since, 0);
}

/* Runs fn between batches with no flight in hand (mu held on entry and exit). */
static void drained(ws_engine *e, void (*fn)(ws_engine *))
{
    ws_eng_commit_wait(e);
    pthread_mutex_unlock(&e->mu);
    fn(e);
    pthread_mutex_lock(&e->mu);
}

static void *engine_main(void *arg)
{
    ws_engine *e = arg;
    ws_thread_name("ws-engine");
    int max = e->cfg.max_batch;
    ws_job **jobs = calloc((size_t)max, sizeof *jobs);
    int64_t next_sync = ws_clock_mono_us() + SYNC_EVERY_US;
    pthread_mutex_lock(&e->mu);
    while (jobs && !e->stop) {
        /* between batches: versions other processes recorded */
        if (e->sync_due || ws_clock_mono_us() >= next_sync) {
            e->sync_due = 0;
            drained(e, ws_eng_models_sync);
            next_sync = ws_clock_mono_us() + SYNC_EVERY_US;
            continue;
        }
        /* between batches: versions the training threads made */
        if (ws_eng_models_waiting(e)) {
            drained(e, ws_eng_models_publish);
            continue;
        }
        /* between batches: models built off this thread */
        if (ws_eng_builds_ready(e)) {
            drained(e, ws_eng_builds_finish);
            continue;
        }
        if (e->refill > 1 && !e->n_flight) { /* a flight's clients are coming back */
            int64_t until = ws_clock_mono_us() + e->cfg.batch_wait_us;
            while (!e->stop && e->depth < (e->refill + 1) / 2 && ws_clock_mono_us() < until)
                wait_until(e, until);
            e->refill = 0;
            continue;
        }
        int n = take(e, jobs, max); /* what is queued now, at once */
        if (!n) { /* until a job comes, a flight in hand completes, or the next sync */
            idle_until(e, next_sync);
            continue;
        }
        pthread_mutex_unlock(&e->mu);
        int m = 0;
        int64_t now = ws_clock_mono_us();
        for (int i = 0; i < n; i++) {
            ws_job *j = jobs[i];
            if (now > j->deadline_us) { /* the client's wait is over: answer without running */
                ws_eng_refuse(j, WS_JOB_DEADLINE, WS_ERR_UNSUPPORTED,
                              "the job waited too long in the queue");
            } else if (j->kind != WS_JOB_STEP && j->kind != WS_JOB_QUERY &&
                       j->kind != WS_JOB_LABELS) { /* one at a time, outside the batch */
                pthread_mutex_lock(&e->mu);
                ws_eng_commit_wait(e);
                pthread_mutex_unlock(&e->mu);
                admin_job(e, j);
            } else {
                jobs[m++] = j;
            }
        }
        if (m) ws_eng_run_batch(e, jobs, m);
        pthread_mutex_lock(&e->mu);
    }
    ws_eng_commit_wait(e); /* every job handed over is answered */
    /* Shutdown: queued jobs complete (WS_JOB_SHUTTING_DOWN), never dropped: no leaks, no
     * hung clients. */
    while (e->head) {
        ws_job *j = e->head;
        e->head = j->next;
        e->depth--;
        ws_eng_refuse(j, WS_JOB_SHUTTING_DOWN, WS_ERR_UNSUPPORTED, "the server is shutting down");
    }
    e->tail = NULL;
    pthread_mutex_unlock(&e->mu);
    free(jobs);
    return NULL;
}

int ws_eng_requeue(ws_engine *e, ws_job *j)
{
    if (++j->tries >= WS_ENG_STEP_TRIES) return 0;
    free(j->result.p); /* the answers of the state it lost to */
    j->result = (ws_job_result){0};
    pthread_mutex_lock(&e->mu);
    j->next = e->head; /* first: it came before what is queued */
    e->head = j;
    if (!e->tail) e->tail = j;
    e->depth++;
    ws_eng_signal(e);
    pthread_mutex_unlock(&e->mu);
    return 1;
}

ws_status ws_engine_submit(ws_engine *e, ws_job *job, ws_error *err)
{
    pthread_mutex_lock(&e->mu);
    ws_status s = WS_OK;
    if (e->stop)
        s = ws_error_set(err, WS_ERR_UNSUPPORTED, "the server is shutting down");
    else if (e->depth >= e->cfg.max_queue)
        s = ws_error_set(err, WS_ERR_CONFLICT, "engine queue full, retry later");
    if (s == WS_OK) {
        job->next = NULL;
        job->deadline_us = ws_clock_mono_us() + (int64_t)e->cfg.job_timeout_ms * 1000;
        if (e->tail)
            e->tail->next = job;
        else
            e->head = job;
        e->tail = job;
        e->depth++;
        ws_eng_signal(e);
    }
    pthread_mutex_unlock(&e->mu);
    return s;
}

int ws_engine_state_cache(ws_engine *e, ws_state_cache_stats *out)
{
    if (!e->cache) return 0;
    *out = ws_state_cache_stats_of(e->cache);
    return 1;
}

int ws_engine_queue_depth(ws_engine *e)
{
    pthread_mutex_lock(&e->mu);
    int d = e->depth;
    pthread_mutex_unlock(&e->mu);
    return d;
}

double ws_engine_idle_seconds(ws_engine *e)
{
    return (double)ws_eng_idle_us(e) / 1e6;
}

ws_status ws_engine_start(const ws_engine_config *cfg, ws_engine **out, ws_error *err)
{
    *out = NULL;
    ws_engine *e = calloc(1, sizeof *e);
    if (!e) return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    e->cfg = *cfg;
    pthread_condattr_t ca;
    int ok = pthread_condattr_init(&ca) == 0 &&
             pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
             pthread_cond_init(&e->cv, &ca) == 0 && pthread_cond_init(&e->commit_cv, NULL) == 0;
    if (!ok || pthread_mutex_init(&e->mu, NULL) != 0) {
        free(e);
        return ws_error_set(err, WS_ERR_NOMEM, "cannot create engine locks");
    }
    ws_status s = ws_eng_history_new(&e->hist, err);
    if (s == WS_OK) s = ws_store_open(cfg->db_path, cfg->durability, 1, &e->st, err);
    if (s == WS_OK) e->shared = ws_store_shared(e->st);
    /* on a shared store another daemon may step a session: its state is read each time */
    if (s == WS_OK && !e->shared && cfg->state_cache_bytes)
        s = ws_state_cache_new(&e->cache, cfg->state_cache_bytes, err);
    if (s == WS_OK)
        s = cfg->force_cpu
                ? ws_backend_cpu_new(&e->be, 0, err)
                : ws_backend_auto_why(&e->be, e->backend_why, sizeof e->backend_why, err);
    if (s == WS_OK && !strcmp(e->be->ops->name, "cpu"))
        s = ws_exec_crew_new(&e->crew, ws_backend_threads(e->be, 0), err);
    if (s == WS_OK) s = ws_eng_models_load(e, err);
    if (s == WS_OK) s = ws_eng_commit_start(e, err);
    if (s == WS_OK && pthread_create(&e->thread, NULL, engine_main, e) != 0)
        s = ws_error_set(err, WS_ERR_NOMEM, "cannot start the engine thread");
    if (s != WS_OK) {
        ws_engine_free(e);
        return s;
    }
    e->started = 1;
    *out = e;
    return WS_OK;
}

const char *ws_engine_backend_name(ws_engine *e)
{
    return e->be ? e->be->ops->name : "none";
}

const char *ws_engine_backend_why(ws_engine *e)
{
    return e->backend_why;
}

void ws_engine_stop(ws_engine *e)
{
    if (!e || !e->started) return;
    pthread_mutex_lock(&e->mu);
    e->stop = 1;
    ws_eng_signal(e);
    pthread_mutex_unlock(&e->mu);
    pthread_join(e->thread, NULL);
    e->started = 0;
    ws_eng_builds_stop(e); /* the engine thread is gone: builds are this thread's */
    ws_eng_commit_stop(e);
}

void ws_engine_free(ws_engine *e)
{
    if (!e) return;
    ws_engine_stop(e);
    ws_eng_commit_stop(e); /* also when the engine thread never started */
    ws_eng_models_free(e);
    ws_exec_crew_free(e->crew); /* after the models' pools, made on it */
    ws_backend_free(e->be);
    if (e->st) {
        ws_store_checkpoint(e->st, NULL); /* fold the WAL into the file on a clean stop */
        ws_store_close(e->st);
    }
    ws_eng_history_free(e->hist);
    ws_state_cache_free(e->cache);
    pthread_cond_destroy(&e->cv);
    pthread_cond_destroy(&e->commit_cv);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

/* em's public picture (mu held; the counters are read under the examples'
 * lock, the gate under its training thread's). */
static ws_engine_model_info info_of(const ws_eng_model *em)
{
    ws_online_stats st = ws_online_stats_of(em->trainer);
    ws_engine_model_info m = {.id = em->id,
                              .version = em->version,
                              .examples_ready = st.ready,
                              .examples_held_out = st.held_out,
                              .examples_labelled = st.examples_labelled,
                              .examples_self = st.examples_self,
                              .examples_trained = st.examples_trained,
                              .examples_dropped = st.examples_dropped,
                              .unloadable = em->unloadable,
                              .updates = st.updates,
                              .last_loss = st.last_loss,
                              .memory_bytes = em->bytes};
    if (em->train)
        ws_eng_trainer_gate(em->train, &m.gate);
    else
        ws_eng_gate_reset(&m.gate, em->version);
    memcpy(m.name, em->name, sizeof m.name);
    return m;
}

int ws_engine_model_info_of(ws_engine *e, int64_t model_id, ws_engine_model_info *out)
{
    pthread_mutex_lock(&e->mu);
    ws_eng_model *em = ws_eng_model_by_id(e, model_id);
    if (em) *out = info_of(em);
    pthread_mutex_unlock(&e->mu);
    return em != NULL;
}

int ws_engine_model_rules(ws_engine *e, int64_t model_id, ws_engine_rule *out, int max)
{
    pthread_mutex_lock(&e->mu);
    ws_eng_model *em = ws_eng_model_by_id(e, model_id);
    int n = em ? ws_rules_list(em->rules, out, max) : 0;
    pthread_mutex_unlock(&e->mu);
    return n;
}

void ws_engine_models_each(ws_engine *e, void (*fn)(void *ctx, const ws_engine_model_info *m),
                           void *ctx)
{
    pthread_mutex_lock(&e->mu);
    for (int i = 0; i < e->n_models; i++) {
        ws_engine_model_info m = info_of(&e->models[i]);
        fn(ctx, &m);
    }
    pthread_mutex_unlock(&e->mu);
}

static void facts_free(ws_job_fact *f, int n)
{
    for (int i = 0; f && i < n; i++) {
        for (int k = 0; k < f[i].n_sym; k++) free(f[i].sym[k]);
        free(f[i].vec);
    }
    free(f);
}

ws_status ws_job_fact_syms(ws_job_fact *f, const char *const *syms, const int *lens, int n,
                           ws_error *err)
{
    for (; f->n_sym < n; f->n_sym++) {
        int k = f->n_sym;
        if (!(f->sym[k] = malloc((size_t)lens[k] + 1)))
            return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
        memcpy(f->sym[k], syms[k], (size_t)lens[k]);
        f->sym[k][lens[k]] = '\0';
    }
    return WS_OK;
}

void ws_job_free(ws_job *j)
{
    if (!j) return;
    facts_free(j->instr, j->n_instr);
    facts_free(j->query, j->n_query);
    free(j->labels);
    if (j->upload) unlink(j->upload); /* an import that never ran: its file goes */
    free(j->upload);
    free(j->result.p);
    free(j->instr_json);
    free(j->query_json);
    free(j->labels_json);
    free(j);
}
