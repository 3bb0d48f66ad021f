/* engine_build.c — WS_JOB_MODEL_CREATE and WS_JOB_MODEL_IMPORT off the engine
 * thread. Drawing a large model's random parameters and writing its checkpoint,
 * or loading and checking an imported one (up to 256 MiB), takes seconds; on
 * the engine thread every other session's step would wait behind it. So the
 * engine thread only checks the name (a creation also reserves the model's
 * memory, ws_eng_memory_reserve: a model that does not fit is refused before
 * anything is allocated; an import reserves once the loader has read its
 * config), a thread of the build's own makes or loads the model and writes
 * version 1 of a new one, and the engine thread, between batches, records and
 * installs it (model_attach and one SQLite transaction, or an import's next
 * version: the cheap part) and completes the job. A build holds its name, so
 * a second creation of it is refused as if the model existed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/ws_thread_name.h"
#include "engine_impl.h"
#include "server/common/versions.h"

struct ws_eng_build {
    ws_engine *e;
    ws_job *job;
    int version;               /* an import of an existing model's next version */
    ws_model_config model_cfg; /* its model's config, which the checkpoint must have */
    size_t bytes;              /* reserved in mem_used */
    pthread_t thread;
    int done; /* under e->mu: the fields below are written */
    ws_model *m;
    ws_status status;
    ws_job_why why; /* of a refusal */
    ws_error err;
    char path[WS_ENG_CKPT_PATH];
    char sha256[65]; /* of the file at path */
    ws_eng_build *next;
};

static void *build_main(void *arg)
{
    ws_eng_build *b = arg;
    ws_thread_name("ws-build");
    ws_job *j = b->job;
    if (j->kind == WS_JOB_MODEL_IMPORT)
        b->status =
            ws_eng_import_load(b->e, j->model_name, j->upload, b->version ? &b->model_cfg : NULL, 0,
                               &b->m, &b->bytes, b->path, b->sha256, &b->why, &b->err);
    else
        b->status = ws_eng_model_build(b->e, j->model_name, &j->cfg, j->seed, &b->m, b->path,
                                       b->sha256, &b->err);
    pthread_mutex_lock(&b->e->mu);
    b->done = 1;
    pthread_cond_signal(&b->e->cv); /* the engine thread installs it */
    pthread_mutex_unlock(&b->e->mu);
    return NULL;
}

int ws_eng_building(ws_engine *e, const char *name)
{
    for (ws_eng_build *b = e->builds; b; b = b->next)
        if (!strcmp(b->job->model_name, name)) return 1;
    return 0;
}

/* What refuses a creation before its thread starts; its memory is reserved. */
static ws_status create_check(ws_engine *e, ws_eng_build *b, ws_error *err)
{
    ws_job *j = b->job;
    if (ws_eng_model_by_name(e, j->model_name) || ws_eng_building(e, j->model_name))
        return ws_error_set(err, WS_ERR_CONFLICT, "model \"%s\" exists", j->model_name);
    WS_TRY(ws_model_config_validate(&j->cfg, err)); /* so a refusal below is its size */
    ws_status s = ws_eng_memory_reserve(e, &j->cfg, &b->bytes, err);
    if (s != WS_OK) b->why = WS_JOB_MODEL_TOO_LARGE;
    return s;
}

/* What refuses an import before its file is read. */
static ws_status import_check(ws_engine *e, ws_eng_build *b, ws_error *err)
{
    ws_job *j = b->job;
    ws_eng_model *em;
    WS_TRY(ws_eng_import_check(e, j->model_name, j->model_tenant, &em, err));
    b->version = em != NULL;
    if (em) b->model_cfg = em->cfg;
    j->result.created = em == NULL;
    return WS_OK;
}

void ws_eng_build_start(ws_engine *e, ws_job *j)
{
    ws_error err = {0};
    ws_eng_build *b = calloc(1, sizeof *b);
    ws_status s = b ? WS_OK : ws_error_set(&err, WS_ERR_NOMEM, "out of memory");
    if (b) {
        b->e = e;
        b->job = j;
        b->why = WS_JOB_FAILED;
        s = j->kind == WS_JOB_MODEL_IMPORT ? import_check(e, b, &err) : create_check(e, b, &err);
    }
    if (s == WS_OK && pthread_create(&b->thread, NULL, build_main, b) != 0) {
        ws_eng_memory_release(e, b->bytes);
        s = ws_error_set(&err, WS_ERR_NOMEM, "cannot start a build thread");
        b->why = WS_JOB_FAILED;
    }
    if (s != WS_OK) {
        ws_job_why why = b ? b->why : WS_JOB_FAILED;
        free(b);
        ws_eng_upload_drop(j); /* a refused import leaves no file */
        return ws_eng_refuse(j, why, s, "%s", err.msg);
    }
    b->next = e->builds;
    e->builds = b;
}

int ws_eng_builds_ready(ws_engine *e)
{
    for (ws_eng_build *b = e->builds; b; b = b->next)
        if (b->done) return 1;
    return 0;
}

/* Takes the first finished build off the list (NULL: none), its thread joined. */
static ws_eng_build *take_done(ws_engine *e)
{
    pthread_mutex_lock(&e->mu);
    ws_eng_build **at = &e->builds;
    while (*at && !(*at)->done) at = &(*at)->next;
    ws_eng_build *b = *at;
    if (b) *at = b->next;
    pthread_mutex_unlock(&e->mu);
    if (b) pthread_join(b->thread, NULL); /* it has returned, or is returning */
    return b;
}

/* What was built or loaded becomes a model, or an import its model's next version. */
static ws_status install(ws_engine *e, ws_eng_build *b)
{
    ws_job *j = b->job;
    if (b->version) {
        ws_eng_model *em = ws_eng_model_by_name(e, j->model_name);
        if (em) return ws_eng_import_version(e, em, b->m, &b->why, &b->err);
        ws_model_free(b->m);
        return ws_error_set(&b->err, WS_ERR_NOTFOUND, "no such model");
    }
    int import = j->kind == WS_JOB_MODEL_IMPORT;
    ws_srv_training tr = import ? ws_srv_training_default() : j->training;
    ws_eng_model *em;
    return ws_eng_model_install(e, j->model_name, j->model_tenant, b->m, b->bytes, &tr, b->path,
                                b->sha256, import ? WS_SRV_NOTE_IMPORTED : WS_SRV_NOTE_CREATED, &em,
                                &b->err);
}

void ws_eng_builds_finish(ws_engine *e)
{
    for (ws_eng_build *b; (b = take_done(e));) {
        ws_job *j = b->job;
        ws_status s = b->status;
        if (s == WS_OK)
            s = install(e, b);
        else
            ws_eng_memory_release(e, b->bytes);
        ws_eng_upload_drop(j); /* consumed by the load: only its name is left */
        if (s != WS_OK)
            ws_eng_refuse(j, b->why, s, "%s", b->err.msg);
        else
            ws_eng_finish(j);
        free(b);
    }
}

void ws_eng_builds_stop(ws_engine *e)
{
    while (e->builds) {
        ws_eng_build *b = e->builds;
        e->builds = b->next;
        pthread_join(b->thread, NULL);
        if (b->m) {
            ws_model_free(b->m);
            if (b->path[0] && unlink(b->path) != 0 && errno != ENOENT)
                ws_log(WS_LOG_WARN, "cannot remove %s: %s", b->path, strerror(errno));
        }
        ws_eng_memory_release(e, b->bytes);
        ws_eng_upload_drop(b->job);
        ws_eng_refuse(b->job, WS_JOB_SHUTTING_DOWN, WS_ERR_UNSUPPORTED,
                      "the server is shutting down");
        free(b);
    }
}
