/* engine.c — the engine thread (DESIGN §4): one thread owns the backend and
 * every loaded model. It takes up to max_batch queued jobs, waiting at most
 * batch_wait_us for the batch to fill, with each session at most once per
 * batch (a later job of the same session stays queued for the next batch, so a
 * session's steps apply strictly in order); runs them (engine_run.c); and,
 * when no serving work waits — or at least every 8th batch under sustained
 * load, so training is slowed, never starved — one online-training pass; and
 * about once a second, between batches, it adopts model versions that another
 * process recorded in SQLite (engine_models.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine.h"

#define TRAIN_EVERY_BATCHES 8
/* How often the engine looks for versions recorded by other processes: one
 * SELECT over the models table, so a retrained version is served within ~1 s. */
#define SYNC_EVERY_US 1000000

void ws_eng_finish(ws_job *j, int status, cJSON *reply)
{
    j->status = status;
    j->reply = reply;
    struct MHD_Connection *conn = j->conn;
    atomic_store_explicit(&j->done, 1, memory_order_release);
    /* After this the HTTP thread owns (and frees) the job. */
    MHD_resume_connection(conn);
}

void ws_eng_fail(ws_job *j, ws_status s, const ws_error *err)
{
    const char *code;
    int status = ws_http_status_of(s, &code);
    ws_eng_finish(j, status, ws_http_error(code, "%s", err->msg));
}

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int in_batch(ws_job **jobs, int n, const ws_job *j)
{
    if (!j->session[0]) return 0;
    for (int i = 0; i < n; i++)
        if (!strcmp(jobs[i]->session, j->session)) return 1;
    return 0;
}

/* Takes up to max jobs off the queue (mu held). */
static int take(ws_engine *e, ws_job **jobs, int max)
{
    int n = 0;
    ws_job *prev = NULL, *j = e->head;
    while (j && n < max) {
        ws_job *next = j->next;
        if (in_batch(jobs, n, j)) {
            prev = j;
        } else {
            if (prev) prev->next = next;
            else e->head = next;
            if (e->tail == j) e->tail = prev;
            j->next = NULL;
            jobs[n++] = j;
            e->depth--;
        }
        j = next;
    }
    return n;
}

/* Answers a created or imported model as GET /v1/models lists it. */
static void model_reply(ws_engine *e, ws_job *j, int status)
{
    ws_error err = {0};
    cJSON *r;
    ws_status s = ws_srv_model_json(e->st, j->model_name, &r, NULL, &err);
    if (s != WS_OK) return ws_eng_fail(j, s, &err);
    ws_eng_finish(j, status, r);
}

static void import_job(ws_engine *e, ws_job *j)
{
    ws_error err = {0};
    int created, status;
    const char *code;
    ws_status s = ws_eng_model_import(e, j->model_name, j->upload, &created, &status, &code,
                                      &err);
    free(j->upload); /* the file is gone or in place: not the job's any more */
    j->upload = NULL;
    if (s == WS_OK) return model_reply(e, j, created ? 201 : 200);
    if (status) return ws_eng_finish(j, status, ws_http_error(code, "%s", err.msg));
    ws_eng_fail(j, s, &err);
}

static void admin_job(ws_engine *e, ws_job *j)
{
    ws_error err = {0};
    ws_status s;
    if (j->kind == WS_JOB_MODEL_CREATE) {
        ws_eng_model *em;
        s = ws_eng_model_create(e, j->model_name, &j->cfg, &j->training, j->seed, &em, &err);
        if (s != WS_OK) return ws_eng_fail(j, s, &err);
        return model_reply(e, j, 201);
    }
    if (j->kind == WS_JOB_MODEL_IMPORT) return import_job(e, j);
    /* WS_JOB_TRAINING_SET */
    ws_eng_model *em = ws_eng_model_by_name(e, j->model_name);
    if (!em) return ws_eng_finish(j, 404, ws_http_error("not_found", "no such model"));
    ws_srv_training t = em->tr;
    s = ws_srv_training_parse(j->body, &t, &err);
    cJSON *tj = s == WS_OK ? ws_srv_training_json(&t) : NULL;
    char *text = tj ? cJSON_PrintUnformatted(tj) : NULL;
    if (s == WS_OK && !text) s = ws_error_set(&err, WS_ERR_NOMEM, "out of memory");
    if (s == WS_OK) s = ws_store_model_set_training(e->st, em->id, text, &err);
    free(text);
    if (s != WS_OK) {
        cJSON_Delete(tj);
        return ws_eng_fail(j, s, &err);
    }
    pthread_mutex_lock(&e->mu);
    em->tr = t;
    pthread_mutex_unlock(&e->mu);
    ws_eng_finish(j, 200, tj);
}

void ws_eng_model_stats_publish(ws_engine *e, ws_eng_model *em)
{
    ws_trainer_stats st = ws_trainer_stats_of(em->trainer);
    pthread_mutex_lock(&e->mu);
    em->stats = st;
    pthread_mutex_unlock(&e->mu);
}

static void train_some(ws_engine *e)
{
    for (int i = 0; i < e->n_models; i++) {
        ws_eng_model *em = &e->models[i];
        if (!ws_trainer_ready(em->trainer)) continue;
        ws_error err = {0};
        int updated = 0;
        ws_status s = ws_trainer_run(em->trainer, em->x, &em->tr, &updated, &err);
        if (s == WS_OK && updated) {
            ws_metrics_training_update();
            s = ws_eng_model_new_version(e, em, &err);
        }
        if (s != WS_OK) fprintf(stderr, "worldstated: training %s: %s\n", em->name, err.msg);
        /* Another process published first: its version wins, serve it now. */
        if (s == WS_ERR_CONFLICT) ws_eng_models_sync(e);
        ws_eng_model_stats_publish(e, em);
    }
}

static int training_ready(ws_engine *e)
{
    for (int i = 0; i < e->n_models; i++)
        if (e->models[i].tr.enabled && ws_trainer_ready(e->models[i].trainer)) return 1;
    return 0;
}

/* Waits on the engine's condition (mu held) until signalled or until the
 * monotonic time `until` (µs). */
static void wait_until(ws_engine *e, int64_t until)
{
    int64_t left = until - mono_us();
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t ns = ts.tv_nsec + (left > 0 ? left : 0) * 1000;
    ts.tv_sec += ns / 1000000000;
    ts.tv_nsec = ns % 1000000000;
    pthread_cond_timedwait(&e->cv, &e->mu, &ts);
}

static void *engine_main(void *arg)
{
    ws_engine *e = arg;
    int max = e->srv->cfg.max_batch, batches = 0;
    ws_job **jobs = calloc((size_t)max, sizeof *jobs);
    int64_t next_sync = mono_us() + SYNC_EVERY_US;
    pthread_mutex_lock(&e->mu);
    while (jobs && !e->stop) {
        if (mono_us() >= next_sync) { /* between batches: versions other processes recorded */
            pthread_mutex_unlock(&e->mu);
            ws_eng_models_sync(e);
            pthread_mutex_lock(&e->mu);
            next_sync = mono_us() + SYNC_EVERY_US;
            continue;
        }
        if (!e->head) {
            if (training_ready(e)) {
                pthread_mutex_unlock(&e->mu);
                train_some(e);
                pthread_mutex_lock(&e->mu);
                continue;
            }
            wait_until(e, next_sync);
            continue;
        }
        /* Let the batch fill: wait until max jobs or batch_wait_us has passed. */
        int64_t until = mono_us() + e->srv->cfg.batch_wait_us;
        while (!e->stop && e->depth < max && mono_us() < until) wait_until(e, until);
        int n = take(e, jobs, max);
        pthread_mutex_unlock(&e->mu);
        int m = 0;
        int64_t now = ws_srv_now_ms();
        for (int i = 0; i < n; i++) {
            ws_job *j = jobs[i];
            if (now > j->deadline_ms) /* the client's wait is over: answer without running */
                ws_eng_finish(j, 503, ws_http_error("deadline_exceeded", "the job waited too long in the queue"));
            else if (j->kind == WS_JOB_MODEL_CREATE || j->kind == WS_JOB_TRAINING_SET ||
                     j->kind == WS_JOB_MODEL_IMPORT)
                admin_job(e, j);
            else
                jobs[m++] = j;
        }
        if (m) ws_eng_run_batch(e, jobs, m);
        if (++batches % TRAIN_EVERY_BATCHES == 0) train_some(e);
        pthread_mutex_lock(&e->mu);
    }
    /* Shutdown: queued jobs are answered 503, never dropped (no leaks, no hung clients). */
    while (e->head) {
        ws_job *j = e->head;
        e->head = j->next;
        e->depth--;
        ws_eng_finish(j, 503, ws_http_error("shutting_down", "the server is shutting down"));
    }
    e->tail = NULL;
    pthread_mutex_unlock(&e->mu);
    free(jobs);
    return NULL;
}

ws_status ws_engine_submit(ws_engine *e, ws_job *job, ws_error *err)
{
    pthread_mutex_lock(&e->mu);
    ws_status s = WS_OK;
    if (e->stop) s = ws_error_set(err, WS_ERR_UNSUPPORTED, "the server is shutting down");
    else if (e->depth >= e->srv->cfg.max_queue) s = ws_error_set(err, WS_ERR_CONFLICT, "engine queue full, retry later");
    if (s == WS_OK) {
        job->next = NULL;
        if (e->tail) e->tail->next = job;
        else e->head = job;
        e->tail = job;
        e->depth++;
        pthread_cond_signal(&e->cv);
    }
    pthread_mutex_unlock(&e->mu);
    return s;
}

int ws_engine_queue_depth(ws_engine *e)
{
    pthread_mutex_lock(&e->mu);
    int d = e->depth;
    pthread_mutex_unlock(&e->mu);
    return d;
}

ws_status ws_engine_start(ws_srv *srv, ws_engine **out, ws_error *err)
{
    *out = NULL;
    ws_engine *e = calloc(1, sizeof *e);
    if (!e) return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    e->srv = srv;
    pthread_condattr_t ca;
    int ok = pthread_condattr_init(&ca) == 0 && pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
             pthread_cond_init(&e->cv, &ca) == 0;
    if (!ok || pthread_mutex_init(&e->mu, NULL) != 0) {
        free(e);
        return ws_error_set(err, WS_ERR_NOMEM, "cannot create engine locks");
    }
    ws_status s = ws_store_open(srv->db_path, srv->cfg.durability, 1, &e->st, err);
    if (s == WS_OK) s = srv->cfg.force_cpu ? ws_backend_cpu_new(&e->be, 0, err) : ws_backend_auto(&e->be, err);
    if (s == WS_OK) s = ws_eng_models_load(e, err);
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

void ws_engine_stop(ws_engine *e)
{
    if (!e || !e->started) return;
    pthread_mutex_lock(&e->mu);
    e->stop = 1;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    pthread_join(e->thread, NULL);
    e->started = 0;
}

void ws_engine_free(ws_engine *e)
{
    if (!e) return;
    ws_engine_stop(e);
    ws_eng_models_free(e);
    ws_backend_free(e->be);
    if (e->st) {
        ws_store_checkpoint(e->st, NULL); /* fold the WAL into the file on a clean stop */
        ws_store_close(e->st);
    }
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
    free(e);
}

cJSON *ws_engine_model_status(ws_engine *e, int64_t model_id)
{
    pthread_mutex_lock(&e->mu);
    ws_eng_model *em = ws_eng_model_by_id(e, model_id);
    cJSON *o = NULL;
    if (em && (o = cJSON_CreateObject())) {
        const ws_trainer_stats st = em->stats;
        cJSON_AddStringToObject(o, "state", "loaded");
        cJSON_AddNumberToObject(o, "serving_version", (double)em->version);
        cJSON_AddNumberToObject(o, "examples_ready", st.ready);
        cJSON_AddNumberToObject(o, "examples_labelled", (double)st.examples_labelled);
        cJSON_AddNumberToObject(o, "examples_trained", (double)st.examples_trained);
        cJSON_AddNumberToObject(o, "examples_dropped", (double)st.examples_dropped);
        cJSON_AddNumberToObject(o, "updates", (double)st.updates);
        cJSON_AddNumberToObject(o, "last_loss", st.last_loss);
    }
    pthread_mutex_unlock(&e->mu);
    return o;
}

void ws_engine_metrics(ws_engine *e, char **buf, size_t *len, size_t *cap)
{
    pthread_mutex_lock(&e->mu);
    ws_metrics_printf(buf, len, cap, "# TYPE worldstate_queue_depth gauge\nworldstate_queue_depth %d\n", e->depth);
    ws_metrics_printf(buf, len, cap, "# TYPE worldstate_model_version gauge\n");
    for (int i = 0; i < e->n_models; i++)
        ws_metrics_printf(buf, len, cap, "worldstate_model_version{model=\"%s\"} %lld\n", e->models[i].name,
                          (long long)e->models[i].version);
    ws_metrics_printf(buf, len, cap, "# TYPE worldstate_training_examples_ready gauge\n");
    for (int i = 0; i < e->n_models; i++)
        ws_metrics_printf(buf, len, cap, "worldstate_training_examples_ready{model=\"%s\"} %d\n", e->models[i].name,
                          e->models[i].stats.ready);
    pthread_mutex_unlock(&e->mu);
}
