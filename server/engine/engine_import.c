/* engine_import.c — models from checkpoint files: WS_JOB_MODEL_IMPORT (a new
 * model, or the next version of one; the daemon's POST /v1/models/{name}/import)
 * and, on a fresh data directory,
 * the model "default" from the checkpoint shipped inside worldstated.
 *
 * Order of writes, as everywhere (versions.h): the checkpoint file first, in
 * full (temporary file, fsync, rename), then the SQLite rows in one
 * transaction; a failure after the file was placed removes it again, so a
 * refused or failed import leaves no file, row or vocabulary entry behind.
 * An import's expensive part (loading and checking up to 256 MiB, placing and
 * hashing the file) runs on a build's thread (engine_build.c); the engine
 * thread checks before it and records after it. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/checkpoint.h"
#include "engine_impl.h"
#include "shipped.h"
#include "server/common/versions.h"

/* The loader's message names the temporary file: drop that prefix, the client
 * never saw the name. */
static void strip_path(ws_error *err, const char *file)
{
    size_t n = strlen(file);
    if (strncmp(err->msg, file, n) == 0 && err->msg[n] == ':' && err->msg[n + 1] == ' ')
        memmove(err->msg, err->msg + n + 2, strlen(err->msg + n + 2) + 1);
}

/* What a checkpoint's config must pass before its model is built: a new model
 * fits in the memory left (its bytes are then reserved, or at start counted);
 * a new version has the model's config. Runs on a build's thread. */
typedef struct {
    ws_engine *e;
    const ws_model_config *model_cfg; /* NULL: a new model */
    int at_start;                     /* the shipped default on first start: counted, not refused */
    const char *name;
    size_t bytes; /* reserved or counted */
    ws_job_why why;
} admit_ctx;

static ws_status admit(void *ctx, const ws_model_config *cfg, ws_error *err)
{
    admit_ctx *a = ctx;
    if (a->model_cfg) {
        char diff[256];
        if (ws_srv_config_diff(cfg, "the checkpoint", a->model_cfg, "the model", diff, sizeof diff))
            return WS_OK;
        a->why = WS_JOB_CONFIG_MISMATCH;
        return ws_error_set(err, WS_ERR_CONFLICT,
                            "the checkpoint's config differs from model %s's: %s (import it "
                            "under a new name, or train it with the model's config)",
                            a->name, diff);
    }
    if (a->at_start) return ws_eng_memory_count(a->e, a->name, cfg, &a->bytes, err);
    size_t need = 0;
    ws_status s = ws_eng_memory_reserve(a->e, cfg, &need, err);
    if (s == WS_OK) a->bytes = need;
    if (s == WS_ERR_INVALID) a->why = WS_JOB_MODEL_TOO_LARGE; /* cfg is valid: the loader said */
    return s;
}

/* Loads and checks the checkpoint; refusals of the file are WS_JOB_BAD_CHECKPOINT,
 * of its config as admit says. Reserved bytes stay reserved on success only. */
static ws_status load_checked(ws_engine *e, const char *file, admit_ctx *a, ws_model **out,
                              ws_job_why *why, ws_error *err)
{
    ws_status s = ws_checkpoint_load_admit(out, file, e->be, admit, a, err);
    if (s != WS_OK && a->bytes) ws_eng_memory_release(e, a->bytes);
    if (s != WS_OK && a->why != WS_JOB_FAILED) {
        *why = a->why;
        return s;
    }
    if (s != WS_OK) {
        strip_path(err, file);
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        ws_error_set(err, s, "bad checkpoint: %s", msg);
    }
    /* A file the loader cannot make sense of, or a model this backend cannot
     * run, is the client's to fix; out of memory and I/O are ours. */
    if (s == WS_ERR_FORMAT || s == WS_ERR_INVALID || s == WS_ERR_UNSUPPORTED)
        *why = WS_JOB_BAD_CHECKPOINT;
    return s;
}

static void remove_file(const char *file)
{
    if (unlink(file) != 0 && errno != ENOENT)
        ws_log(WS_LOG_WARN, "cannot remove %s: %s", file, strerror(errno));
}

ws_status ws_eng_import_load(ws_engine *e, const char *name, const char *file,
                             const ws_model_config *model_cfg, int at_start, ws_model **out,
                             size_t *bytes, char *path, char sha256[65], ws_job_why *why,
                             ws_error *err)
{
    *why = WS_JOB_FAILED;
    *bytes = 0;
    path[0] = '\0';
    admit_ctx a = {
        .e = e, .model_cfg = model_cfg, .at_start = at_start, .name = name, .why = WS_JOB_FAILED};
    ws_status s = load_checked(e, file, &a, out, why, err);
    if (s == WS_OK && !model_cfg) {
        /* The file as sent becomes version 1: the bytes just validated. */
        ws_srv_ckpt_path(e->cfg.data_dir, name, 1, path, WS_ENG_CKPT_PATH);
        s = ws_srv_file_commit(file, path, err);
        if (s == WS_OK) s = ws_srv_file_sha256(path, sha256, err);
        if (s != WS_OK) {
            ws_model_free(*out);
            *out = NULL;
            ws_eng_memory_release(e, a.bytes);
            unlink(path); /* renamed but not synced, or a stale file: nobody refers to it */
            path[0] = '\0';
        }
    }
    if (s == WS_OK) *bytes = a.bytes;
    remove_file(file); /* renamed into place (then this finds nothing), or refused */
    return s;
}

void ws_eng_upload_drop(ws_job *j)
{
    if (!j->upload) return;
    remove_file(j->upload);
    free(j->upload);
    j->upload = NULL;
}

/* m's vocabulary made the model's: the stored symbols and the checkpoint's
 * must agree where both have one; the model's further symbols are added to m
 * (they keep their ids), the checkpoint's further ones are stored from
 * *store_from on (-1: none). */
static ws_status vocab_merge(ws_eng_model *em, ws_model *m, int *store_from, ws_job_why *why,
                             ws_error *err)
{
    ws_vocab *cv = ws_model_vocab(m), *ev = ws_model_vocab(em->m);
    int nc = ws_vocab_size(cv), ns = em->vocab_stored;
    for (int i = 0; i < nc && i < ns; i++) {
        const char *a = ws_vocab_symbol(cv, i), *b = ws_vocab_symbol(ev, i);
        if (strcmp(a, b) == 0) continue;
        *why = WS_JOB_VOCAB_MISMATCH;
        return ws_error_set(err, WS_ERR_CONFLICT,
                            "symbol id %d is \"%.40s\" in the checkpoint but \"%.40s\" in model "
                            "%s's vocabulary (a checkpoint's vocabulary must agree with the "
                            "model's where both have symbols)",
                            i, a, b, em->name);
    }
    for (int i = nc; i < ns; i++) {
        const char *sym = ws_vocab_symbol(ev, i);
        if (ws_vocab_id(cv, sym, strlen(sym), 1) != i)
            return ws_error_set(err, WS_ERR_NOMEM, "out of memory extending the vocabulary");
    }
    *store_from = nc > ns ? ns : -1;
    return WS_OK;
}

/* A version keeps its model's tenant: an import naming another is refused. */
static ws_status tenant_check(ws_engine *e, const ws_eng_model *em, int64_t tenant, ws_error *err)
{
    ws_store_model row = {0};
    ws_status s = tenant ? ws_store_model_get(e->st, em->id, &row, err) : WS_OK;
    if (s == WS_OK && tenant && row.tenant != tenant)
        s = ws_error_set(
            err, WS_ERR_CONFLICT, "model %s is %s%s%s: a version keeps its model's tenant",
            em->name, row.tenant ? "tenant " : "shared", row.tenant_name, row.tenant ? "'s" : "");
    ws_store_model_clear(&row);
    return s;
}

ws_status ws_eng_import_check(ws_engine *e, const char *name, int64_t tenant, ws_eng_model **em,
                              ws_error *err)
{
    *em = ws_eng_model_by_name(e, name);
    if (!*em && ws_eng_building(e, name)) /* its version 1 is being written */
        return ws_error_set(err, WS_ERR_CONFLICT, "model \"%s\" is being created", name);
    return *em ? tenant_check(e, *em, tenant, err) : WS_OK;
}

ws_status ws_eng_import_version(ws_engine *e, ws_eng_model *em, ws_model *m, ws_job_why *why,
                                ws_error *err)
{
    int store_from = -1;
    /* other daemons' symbols first: the checkpoint's are compared with them */
    ws_status s = e->shared ? ws_eng_vocab_refresh(e, em, err) : WS_OK;
    if (s == WS_OK) s = vocab_merge(em, m, &store_from, why, err);
    /* The way every version is published (retrain's too): the next number,
     * written and recorded under SQLite's write lock. */
    int64_t v = 0;
    if (s == WS_OK)
        s = ws_srv_version_publish_vocab(e->st, e->cfg.data_dir, em->name, em->id, m, -1,
                                         WS_SRV_NOTE_IMPORTED, store_from, &v, err);
    if (s != WS_OK) {
        ws_model_free(m);
        return s;
    }
    return ws_eng_model_adopt(e, em, m, v, err); /* served from the next batch on */
}

/* Writes the shipped checkpoint into a temporary file of models/. */
static ws_status shipped_to_file(ws_engine *e, const unsigned char *bytes, size_t len, char *path,
                                 size_t cap, ws_error *err)
{
    int fd;
    WS_TRY(ws_srv_upload_create(e->cfg.data_dir, path, cap, &fd, err));
    ws_status s = ws_srv_write_all(fd, bytes, len, err);
    if (close(fd) != 0 && s == WS_OK)
        s = ws_error_set(err, WS_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    if (s != WS_OK) unlink(path);
    return s;
}

ws_status ws_eng_default_create(ws_engine *e, ws_error *err)
{
    size_t len = 0;
    const unsigned char *bytes = ws_srv_shipped_default(&len);
    ws_srv_training tr = ws_srv_training_default();
    if (len == 0) {
        ws_log(WS_LOG_WARN,
               "this build ships no trained default model "
               "(models/default.safetensors was absent when it was built): the model "
               "\"default\" gets random parameters and is UNTRAINED, its answers mean "
               "nothing until it is trained (GET /v1/models shows \"origin\":\"random\")");
        ws_model_config cfg = ws_model_config_default();
        cfg.vocab_cap = 4096;
        return ws_eng_model_create_now(e, "default", &cfg, &tr, 1, err);
    }
    char tmp[WS_SRV_PATH_MAX + 64], path[WS_ENG_CKPT_PATH], sha256[65];
    WS_TRY(shipped_to_file(e, bytes, len, tmp, sizeof tmp, err));
    ws_model *m = NULL;
    size_t mbytes = 0;
    ws_job_why why;
    ws_status s =
        ws_eng_import_load(e, "default", tmp, NULL, 1, &m, &mbytes, path, sha256, &why, err);
    ws_eng_model *em;
    if (s == WS_OK)
        s = ws_eng_model_install(e, "default", 0, m, mbytes, &tr, path, sha256, WS_SRV_NOTE_SHIPPED,
                                 &em, err);
    if (s != WS_OK) {
        /* A build whose shipped model does not load is broken: refuse to start
         * rather than serve a model the user did not expect. */
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        return ws_error_set(err, s, "the shipped default model cannot be created: %s", msg);
    }
    ws_log(WS_LOG_INFO,
           "created the model \"default\" from the shipped checkpoint "
           "(%zu bytes)",
           len);
    return WS_OK;
}

/* A checkpoint's temporary file ("<file>.tmp.<pid>.<seq>": safetensors.c)
 * whose writer is gone. A live pid may be an offline retrain writing now. */
static int stale_checkpoint_tmp(const char *name)
{
    const char *t = strstr(name, ".safetensors.tmp.");
    if (!t) return 0;
    char *end;
    long pid = strtol(t + strlen(".safetensors.tmp."), &end, 10);
    return pid > 0 && *end == '.' && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

void ws_eng_tmp_clean(ws_engine *e)
{
    char dir[WS_SRV_PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/models", e->cfg.data_dir);
    DIR *d = opendir(dir);
    if (!d) return; /* just created by the caller: nothing to clean */
    /* The data-directory lock makes this the only daemon: any upload is stale.
     * Not so on a shared store, whose daemons share models/ (api.md, Running a
     * cluster): there the files may be another node's, being written now. */
    if (e->shared) {
        closedir(d);
        return;
    }
    size_t np = strlen(WS_SRV_UPLOAD_PREFIX);
    for (struct dirent *de; (de = readdir(d));) {
        if (strncmp(de->d_name, WS_SRV_UPLOAD_PREFIX, np) != 0 && !stale_checkpoint_tmp(de->d_name))
            continue;
        char path[WS_SRV_PATH_MAX + 300];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (unlink(path) != 0 && errno != ENOENT)
            ws_log(WS_LOG_WARN, "cannot remove %s: %s", path, strerror(errno));
    }
    closedir(d);
}
