/* engine_build.c — WS_JOB_MODEL_CREATE off the engine thread. Drawing a large
 * model's random parameters and writing its checkpoint takes seconds; on the
 * engine thread every other session's step would wait behind it. So the engine
 * thread only checks the name and reserves the model's memory (ws_eng_memory_
 * reserve: a model that does not fit is refused before anything is allocated),
 * a thread of the build's own makes the model and writes version 1, and the
 * engine thread, between batches, records and installs it (model_attach and one
 * SQLite transaction: the cheap part) and completes the job. A build holds its
 * name, so a second creation of it is refused as if the model existed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine_impl.h"
#include "server/common/versions.h"

struct ws_eng_build {
    ws_engine *e;
    ws_job *job;
    size_t bytes; /* reserved in mem_used */
    pthread_t thread;
    int done; /* under e->mu: the fields below are written */
    ws_model *m;
    ws_status status;
    ws_error err;
    char path[WS_ENG_CKPT_PATH];
    char sha256[65]; /* of the file at path */
    ws_eng_build *next;
};

static void *build_main(void *arg)
{
    ws_eng_build *b = arg;
    ws_job *j = b->job;
    b->status = ws_eng_model_build(b->e, j->model_name, &j->cfg, j->seed, &b->m, b->path, b->sha256,
                                   &b->err);
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

void ws_eng_build_start(ws_engine *e, ws_job *j)
{
    if (ws_eng_model_by_name(e, j->model_name) || ws_eng_building(e, j->model_name))
        return ws_eng_refuse(j, WS_JOB_FAILED, WS_ERR_CONFLICT, "model \"%s\" exists",
                             j->model_name);
    ws_error err = {0};
    ws_status s = ws_model_config_validate(&j->cfg, &err); /* so a refusal below is its size */
    if (s != WS_OK) return ws_eng_fail(j, s, &err);
    ws_eng_build *b = calloc(1, sizeof *b);
    if (!b) return ws_eng_fail(j, ws_error_set(&err, WS_ERR_NOMEM, "out of memory"), &err);
    s = ws_eng_memory_reserve(e, &j->cfg, &b->bytes, &err);
    if (s != WS_OK) {
        free(b);
        return ws_eng_refuse(j, WS_JOB_MODEL_TOO_LARGE, s, "%s", err.msg);
    }
    b->e = e;
    b->job = j;
    if (pthread_create(&b->thread, NULL, build_main, b) != 0) {
        ws_eng_memory_release(e, b->bytes);
        free(b);
        return ws_eng_fail(j, ws_error_set(&err, WS_ERR_NOMEM, "cannot start a build thread"),
                           &err);
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

void ws_eng_builds_finish(ws_engine *e)
{
    for (ws_eng_build *b; (b = take_done(e));) {
        ws_job *j = b->job;
        ws_status s = b->status;
        if (s == WS_OK) {
            ws_eng_model *em;
            s = ws_eng_model_install(e, j->model_name, j->model_tenant, b->m, b->bytes,
                                     &j->training, b->path, b->sha256, WS_SRV_NOTE_CREATED, &em,
                                     &b->err);
        } else {
            ws_eng_memory_release(e, b->bytes);
        }
        if (s != WS_OK)
            ws_eng_fail(j, s, &b->err);
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
            if (unlink(b->path) != 0 && errno != ENOENT)
                fprintf(stderr, "worldstated: cannot remove %s: %s\n", b->path, strerror(errno));
        }
        ws_eng_memory_release(e, b->bytes);
        ws_eng_refuse(b->job, WS_JOB_SHUTTING_DOWN, WS_ERR_UNSUPPORTED,
                      "the server is shutting down");
        free(b);
    }
}
