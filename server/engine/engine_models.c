/* engine_models.c — the engine's table of loaded models: loading every model's
 * current checkpoint and vocabulary at start, creating models (the default one
 * on first start: engine_import.c), recording new versions made by online
 * training, and adopting versions that another process (worldstate-train
 * retrain, another daemon of a cluster) recorded. On a shared store (a cluster
 * over PostgreSQL) it also loads the models other daemons created, and a model
 * is trained and published only by the daemon holding its cluster lock
 * (ws_eng_models_lead).
 *
 * Checkpoints live in <data-dir>/models/<name>-v<version>.safetensors; each
 * version is a new file, on disk (fsync, rename, fsync of the folder) under
 * SQLite's write lock before it is recorded (versions.h), so a crash between
 * the two leaves an unreferenced file, never a referenced missing one. SQLite
 * is the authority on the vocabulary: a checkpoint's vocabulary is a prefix of
 * it.
 *
 * Only a published version is ever served: online training runs on each
 * model's training thread, on a copy of the weights (engine_train.c); a
 * candidate that passed the gate there is published here, on the engine thread
 * between two batches (ws_eng_models_publish: its staged file renamed into
 * place and recorded, its parameters copied into the served model), so the
 * version a step's log entry names is the one whose parameters answered it. A
 * rollback (ws_eng_rollback_job) makes a recorded older version current and
 * serves it; versions go on growing from the greatest recorded (em->latest). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/checkpoint.h"
#include "engine_impl.h"
#include "server/common/versions.h"

#define WS_SRV_KEEP_VERSIONS 4

static ws_status model_attach(ws_engine *e, ws_eng_model *em, ws_error *err)
{
    em->cfg = *ws_model_config_of(em->m);
    int n = e->cfg.max_batch;
    WS_TRY(ws_model_state_alloc(em->m, n, &em->w_dev, err));
    for (int k = 0; k < WS_ENG_FLIGHTS + 1; k++)
        if (!(em->w_host[k] = malloc(sizeof(float) * ws_model_state_floats(em->m) * (size_t)n)))
            return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    WS_TRY(ws_exec_pool_new(&em->pool, em->m, e->crew, err));
    for (int k = 0; k < 2; k++)
        ws_threads_pick_init(&em->par[k], ws_exec_pool_threads(em->pool), WS_THREADS_PICK_SMALL);
    em->leader = !e->shared; /* on a shared store: once ws_eng_models_lead takes the lock */
    WS_TRY(ws_rules_new(&em->rules, err));
    return ws_online_new(&em->trainer, &em->cfg, err);
}

/* The model's training thread, once em has its id, name and version. */
static ws_status train_start(ws_engine *e, ws_eng_model *em, ws_error *err)
{
    ws_eng_trainer_config c = {.data_dir = e->cfg.data_dir,
                               .db_path = e->cfg.db_path,
                               .durability = e->cfg.durability,
                               .name = em->name,
                               .model_id = em->id,
                               .cpu = !strcmp(e->be->ops->name, "cpu"),
                               .priority = e->cfg.train_priority,
                               .on_update = e->cfg.on_training_update,
                               .wake_engine = ws_eng_wake,
                               .wake_ctx = e,
                               .engine_idle_us = ws_eng_idle_us,
                               .training_now = &e->training_now,
                               .history = e->hist};
    return ws_eng_trainer_start(&em->train, &c, em->m, em->version, &em->tr, em->trainer, err);
}

static void model_release(ws_eng_model *em)
{
    if (!em->m) return;
    ws_eng_trainer_free(em->train); /* first: it trains on em->trainer's examples */
    ws_online_free(em->trainer);
    ws_rules_free(em->rules);
    ws_backend_release(ws_model_backend(em->m), em->w_dev);
    for (int k = 0; k < WS_ENG_FLIGHTS + 1; k++) free(em->w_host[k]);
    ws_exec_pool_free(em->pool);
    ws_model_free(em->m);
    memset(em, 0, sizeof *em);
}

/* Makes room for one more model (under mu: status and metrics read the table). */
static ws_status table_reserve(ws_engine *e, ws_error *err)
{
    ws_status s = WS_OK;
    pthread_mutex_lock(&e->mu);
    if (e->n_models == e->cap_models) {
        int cap = e->cap_models ? 2 * e->cap_models : 4;
        ws_eng_model *t = realloc(e->models, sizeof *t * (size_t)cap);
        if (t) {
            e->models = t;
            e->cap_models = cap;
        } else {
            s = ws_error_set(err, WS_ERR_NOMEM, "out of memory");
        }
    }
    pthread_mutex_unlock(&e->mu);
    return s;
}

ws_eng_model *ws_eng_model_by_id(ws_engine *e, int64_t id)
{
    for (int i = 0; i < e->n_models; i++)
        if (e->models[i].id == id) return &e->models[i];
    return NULL;
}

ws_eng_model *ws_eng_model_by_name(ws_engine *e, const char *name)
{
    for (int i = 0; i < e->n_models; i++)
        if (!strcmp(e->models[i].name, name)) return &e->models[i];
    return NULL;
}

/* Loads the model's current version into em or, when that file is damaged
 * (ws_srv_version_load's WS_ERR_FORMAT) or unreadable, the newest older
 * version that is intact, said on stderr and kept in em->unloadable (shown in
 * GET /v1/models/{name} and /metrics). No intact version: the daemon does not
 * start, with the current version's error. */
static ws_status load_intact(ws_engine *e, const ws_srv_model_row *row, ws_eng_model *em,
                             ws_error *err)
{
    const char *dir = e->cfg.data_dir;
    em->version = row->version;
    ws_status s = ws_srv_version_load(e->st, dir, row->id, row->version, e->be, &em->m, err);
    if (s != WS_ERR_FORMAT && s != WS_ERR_IO) return s;
    ws_error current = *err;
    ws_log(WS_LOG_ERROR, "model %s: version %lld cannot be served: %s", row->name,
           (long long)row->version, current.msg);
    for (int64_t v = row->version - 1; v >= 1; v--) {
        ws_error older = {0};
        if (ws_srv_version_load(e->st, dir, row->id, v, e->be, &em->m, &older) != WS_OK) continue;
        ws_log(WS_LOG_WARN, "model %s: serving version %lld, the newest intact one", row->name,
               (long long)v);
        em->version = v, em->unloadable = row->version;
        return WS_OK;
    }
    return ws_error_set(err, s, "model %s has no intact version to serve (version %lld: %s)",
                        row->name, (long long)row->version, current.msg);
}

ws_status ws_engine_model_bytes(const ws_engine_config *cfg, const ws_model_config *mc, size_t *out,
                                ws_error *err)
{
    /* The served weights with the serving context and states (max_batch on the
     * backend, WS_ENG_FLIGHTS + 1 times on the host: the flights in hand and the
     * batch computed), the contexts of the pass's helper threads (one per core
     * past the engine thread's, a chunk each: counted on a GPU too, where there
     * are none), and the training thread's copy of the weights with its own
     * context. */
    ws_batch_shape serve = {cfg->max_batch, WS_SRV_MAX_ITEMS, WS_SRV_MAX_ITEMS, 0};
    ws_batch_shape chunk = {WS_EXEC_POOL_CHUNK, WS_SRV_MAX_ITEMS, WS_SRV_MAX_ITEMS, 0};
    ws_batch_shape train = ws_online_shape();
    ws_model_memory ms, mh, mt;
    size_t states = (WS_ENG_FLIGHTS + 2) * (size_t)cfg->max_batch;
    int cores = ws_backend_cpu_default_threads(); /* the crew's threads (engine.c) */
    WS_TRY(ws_model_memory_of(mc, &serve, 1, states, &ms, err));
    WS_TRY(ws_model_memory_of(mc, &chunk, 1, 0, &mh, err));
    WS_TRY(ws_model_memory_of(mc, &train, 1, 0, &mt, err));
    size_t helpers = cores > 1 ? (size_t)(cores - 1) * mh.arena : 0;
    *out = ms.total + helpers + mt.total + ws_online_bytes(mc);
    return WS_OK;
}

ws_status ws_eng_memory_reserve(ws_engine *e, const ws_model_config *cfg, size_t *bytes,
                                ws_error *err)
{
    WS_TRY(ws_engine_model_bytes(&e->cfg, cfg, bytes, err));
    size_t max = e->cfg.max_model_memory;
    /* Compare and add as one step: an import reserves on its build's thread
     * while the engine thread may reserve for a creation. */
    size_t used = atomic_load(&e->mem_used), left;
    do {
        left = max > used ? max - used : 0;
        if (max && *bytes > left)
            return ws_error_set(err, WS_ERR_INVALID,
                                "model too large: it needs %zu bytes of memory, %zu are left of "
                                "the %zu that loaded models may take (--max-model-memory)",
                                *bytes, left, max);
    } while (!atomic_compare_exchange_weak(&e->mem_used, &used, used + *bytes));
    return WS_OK;
}

void ws_eng_memory_release(ws_engine *e, size_t bytes)
{
    atomic_fetch_sub(&e->mem_used, bytes);
}

ws_status ws_eng_memory_count(ws_engine *e, const char *name, const ws_model_config *cfg,
                              size_t *bytes, ws_error *err)
{
    WS_TRY(ws_engine_model_bytes(&e->cfg, cfg, bytes, err));
    size_t used = atomic_fetch_add(&e->mem_used, *bytes) + *bytes;
    if (e->cfg.max_model_memory && used > e->cfg.max_model_memory)
        ws_log(WS_LOG_WARN,
               "with model %s the loaded models take %zu bytes, over "
               "--max-model-memory %zu: no model can be created or imported",
               name, used, e->cfg.max_model_memory);
    return WS_OK;
}

/* em->latest from SQLite (kept as it was, said on stderr, when it cannot be
 * read: a publish on a stale number is refused as a conflict, not made). */
static void latest_read(ws_engine *e, ws_eng_model *em)
{
    ws_error err = {0};
    int64_t max = 0;
    if (ws_store_version_max(e->st, em->id, &max, &err) == WS_OK)
        em->latest = max;
    else
        ws_log(WS_LOG_ERROR, "model %s: reading its versions: %s", em->name, err.msg);
}

/* Loads a recorded model (its current version, vocabulary and settings) and
 * adds it to the table; on failure nothing of it stays. */
static ws_status load_one(ws_engine *e, const ws_srv_model_row *row, ws_error *err)
{
    ws_eng_model tmp = {0};
    ws_status s = table_reserve(e, err);
    if (s == WS_OK) s = load_intact(e, row, &tmp, err);
    if (s == WS_OK)
        s = ws_eng_memory_count(e, row->name, ws_model_config_of(tmp.m), &tmp.bytes, err);
    tmp.id = row->id;
    snprintf(tmp.name, sizeof tmp.name, "%s", row->name);
    tmp.tr = ws_srv_training_default();
    cJSON *tj = s == WS_OK ? cJSON_Parse(row->training) : NULL;
    if (tj) s = ws_srv_training_parse(tj, &tmp.tr, err);
    cJSON_Delete(tj);
    if (s == WS_OK) s = model_attach(e, &tmp, err);
    if (s == WS_OK) {
        tmp.vocab_stored = ws_vocab_size(ws_model_vocab(tmp.m));
        latest_read(e, &tmp);
        s = train_start(e, &tmp, err);
    }
    if (s != WS_OK) {
        size_t bytes = tmp.bytes;
        model_release(&tmp);
        ws_eng_memory_release(e, bytes);
        return s;
    }
    pthread_mutex_lock(&e->mu); /* readers of the table (status, metrics) hold mu */
    e->models[e->n_models++] = tmp;
    pthread_mutex_unlock(&e->mu);
    return WS_OK;
}

ws_status ws_eng_models_load(ws_engine *e, ws_error *err)
{
    char dir[WS_SRV_PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/models", e->cfg.data_dir);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return ws_error_set(err, WS_ERR_IO, "cannot create %s: %s", dir, strerror(errno));
    ws_srv_model_rows rows = {0};
    ws_status s = ws_srv_model_rows_read(e->st, &rows, err);
    for (int i = 0; s == WS_OK && i < rows.n; i++) s = load_one(e, &rows.rows[i], err);
    ws_srv_model_rows_free(&rows);
    for (int i = 0; s == WS_OK && i < e->n_models; i++) ws_eng_rules_load(e, &e->models[i]);
    if (s == WS_OK) ws_eng_tmp_clean(e); /* temporary files a crash left behind */
    if (s == WS_OK && e->n_models == 0) s = ws_eng_default_create(e, err); /* first start */
    if (s == WS_OK) ws_eng_models_lead(e);
    return s;
}

/* Records a new model (of tenant, 0: shared), its version 1 (the file at its
 * path, with note) and m's vocabulary in one transaction. */
static ws_status record_model(ws_engine *e, const char *name, int64_t tenant, ws_model *m,
                              const ws_srv_training *tr, const char *sha256, const char *note,
                              int64_t *id, ws_error *err)
{
    cJSON *cj = ws_model_config_to_json(ws_model_config_of(m)), *tj = ws_srv_training_json(tr);
    char *ctext = cj ? cJSON_PrintUnformatted(cj) : NULL;
    char *ttext = tj ? cJSON_PrintUnformatted(tj) : NULL;
    cJSON_Delete(cj);
    cJSON_Delete(tj);
    ws_status s = ctext && ttext ? ws_store_begin(e->st, err)
                                 : ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    if (s == WS_OK) s = ws_store_model_create(e->st, name, tenant, ctext, ttext, id, err);
    if (s == WS_OK)
        s = ws_srv_version_record(e->st, e->cfg.data_dir, name, *id, 1, sha256, note, err);
    if (s == WS_OK) s = ws_srv_vocab_store(e->st, *id, m, 0, err);
    if (s == WS_OK)
        s = ws_store_commit(e->st, err);
    else if (ctext && ttext)
        ws_store_rollback(e->st, NULL);
    free(ctext);
    free(ttext);
    return s;
}

ws_status ws_eng_model_install(ws_engine *e, const char *name, int64_t tenant, ws_model *m,
                               size_t bytes, const ws_srv_training *tr, const char *path,
                               const char *sha256, const char *note, ws_eng_model **out,
                               ws_error *err)
{
    if (ws_eng_model_by_name(e, name)) { /* path is that model's version 1: left alone */
        ws_model_free(m);
        ws_eng_memory_release(e, bytes);
        return ws_error_set(err, WS_ERR_CONFLICT, "model \"%s\" exists", name);
    }
    ws_eng_model tmp = {.m = m, .bytes = bytes};
    /* Everything that can fail for want of memory comes before the commit, so a
     * committed model is always served (the training thread needs the id: it
     * starts after, and a model whose thread cannot start is served untrained). */
    ws_status s = model_attach(e, &tmp, err);
    if (s == WS_OK) s = table_reserve(e, err);
    if (s == WS_OK) s = record_model(e, name, tenant, m, tr, sha256, note, &tmp.id, err);
    if (s != WS_OK) {
        model_release(&tmp);
        ws_eng_memory_release(e, bytes);
        /* Not recorded: nobody refers to the file (a crash before this point
         * leaves it unreferenced, and the next creation of the name replaces it). */
        if (unlink(path) != 0 && errno != ENOENT)
            ws_log(WS_LOG_WARN, "cannot remove %s: %s", path, strerror(errno));
        return s;
    }
    tmp.version = 1, tmp.latest = 1;
    tmp.tr = *tr;
    tmp.vocab_stored = ws_vocab_size(ws_model_vocab(m));
    strcpy(tmp.name, name);
    ws_error terr = {0};
    if (train_start(e, &tmp, &terr) != WS_OK)
        ws_log(WS_LOG_WARN, "model %s: no online training: %s", name, terr.msg);
    pthread_mutex_lock(&e->mu); /* readers of the table (status, metrics) hold mu */
    ws_eng_model *em = &e->models[e->n_models++];
    *em = tmp;
    pthread_mutex_unlock(&e->mu);
    *out = em;
    return WS_OK;
}

ws_status ws_eng_model_build(ws_engine *e, const char *name, const ws_model_config *cfg,
                             uint64_t seed, ws_model **out, char *path, char sha256[65],
                             ws_error *err)
{
    WS_TRY(ws_model_new(out, cfg, e->be, seed, err));
    ws_srv_ckpt_path(e->cfg.data_dir, name, 1, path, WS_ENG_CKPT_PATH);
    ws_status s = ws_checkpoint_save(*out, path, 0, err);
    if (s == WS_OK) s = ws_srv_file_sha256(path, sha256, err);
    if (s != WS_OK) {
        ws_model_free(*out);
        *out = NULL;
    }
    return s;
}

ws_status ws_eng_model_create_now(ws_engine *e, const char *name, const ws_model_config *cfg,
                                  const ws_srv_training *tr, uint64_t seed, ws_error *err)
{
    size_t bytes = 0;
    WS_TRY(ws_eng_memory_count(e, name, cfg, &bytes, err));
    ws_model *m = NULL;
    char path[WS_ENG_CKPT_PATH], sha256[65];
    ws_status s = ws_eng_model_build(e, name, cfg, seed, &m, path, sha256, err);
    if (s != WS_OK) {
        ws_eng_memory_release(e, bytes);
        return s;
    }
    ws_eng_model *em;
    return ws_eng_model_install(e, name, 0, m, bytes, tr, path, sha256, WS_SRV_NOTE_CREATED, &em,
                                err);
}

/* Publishes em's candidate c as the version after the greatest recorded one
 * (one that cannot be served, em->unloadable, is superseded: training goes
 * on): its staged file renamed into place, synced, and recorded current in one
 * SQLite transaction. WS_ERR_CONFLICT when another process published
 * meanwhile, or online training was switched off since c was made. */
static ws_status publish(ws_engine *e, ws_eng_model *em, const ws_eng_candidate *c, int64_t *v,
                         ws_error *err)
{
    if (!em->tr.enabled)
        return ws_error_set(err, WS_ERR_CONFLICT, "online training is off: candidate dropped");
    int64_t max = 0, prev = em->unloadable > em->version ? em->unloadable : em->version;
    if (em->latest > prev) prev = em->latest; /* served an older version: a rollback */
    char path[WS_ENG_CKPT_PATH];
    int placed = 0;
    WS_TRY(ws_store_begin(e->st, err));
    ws_status s = ws_store_version_max(e->st, em->id, &max, err);
    if (s == WS_OK && max != prev)
        s = ws_error_set(err, WS_ERR_CONFLICT,
                         "model %s: version %lld was published meanwhile (expected %lld)", em->name,
                         (long long)max, (long long)prev);
    ws_srv_ckpt_path(e->cfg.data_dir, em->name, max + 1, path, sizeof path);
    if (s == WS_OK) s = ws_srv_file_place(c->staged, path, err); /* synced by the trainer */
    placed = s == WS_OK;
    if (s == WS_OK)
        s = ws_srv_version_record(e->st, e->cfg.data_dir, em->name, em->id, max + 1, c->sha256,
                                  "online training", err);
    if (s == WS_OK) s = ws_store_commit(e->st, err);
    if (s != WS_OK) {
        ws_store_rollback(e->st, NULL);
        if (placed && unlink(path) != 0 && errno != ENOENT) /* nobody refers to it */
            ws_log(WS_LOG_WARN, "cannot remove %s: %s", path, strerror(errno));
        return s;
    }
    *v = max + 1;
    return WS_OK;
}

/* Serves em's candidate c, published as version v, from the next batch on;
 * the file of the version it retires is renamed to retired[WS_ENG_RETIRED_PATH]
 * for the training thread to remove ("" when none). */
static void serve_published(ws_engine *e, ws_eng_model *em, const ws_eng_candidate *c, int64_t v,
                            char *retired)
{
    retired[0] = '\0';
    size_t n = ws_model_n_params(em->m);
    if (ws_backend_upload(e->be, ws_model_params(em->m), c->params, sizeof(float) * n) != WS_OK) {
        /* recorded current: the next sync loads it from its file */
        ws_log(WS_LOG_ERROR, "model %s: cannot copy version %lld's parameters", em->name,
               (long long)v);
        return;
    }
    pthread_mutex_lock(&e->mu);
    em->version = v, em->unloadable = 0, em->latest = v;
    pthread_mutex_unlock(&e->mu);
    /* Retention: online training makes a version per AdamW step, so only the
     * newest WS_SRV_KEEP_VERSIONS files are kept (and version 1, the model as
     * created); older version rows stay in SQLite as history without a file.
     * Here the file only leaves its version's name (a rename: 10 µs, where the
     * unlink took 0.9-1.3 ms, between two batches); its name then is a
     * checkpoint's temporary one, which a start after a crash removes
     * (ws_eng_tmp_clean). */
    if (v - WS_SRV_KEEP_VERSIONS > 1) {
        char path[WS_ENG_CKPT_PATH];
        int64_t old = v - WS_SRV_KEEP_VERSIONS;
        ws_srv_ckpt_path(e->cfg.data_dir, em->name, old, path, sizeof path);
        snprintf(retired, WS_ENG_RETIRED_PATH, "%s.tmp.%ld.%lld", path, (long)getpid(),
                 (long long)old);
        if (rename(path, retired) != 0) {
            if (errno != ENOENT)
                ws_log(WS_LOG_WARN, "cannot remove old checkpoint %s: %s", path, strerror(errno));
            retired[0] = '\0';
        }
    }
}

int ws_eng_models_waiting(ws_engine *e)
{
    for (int i = 0; i < e->n_models; i++)
        if (e->models[i].train && ws_eng_trainer_waiting(e->models[i].train)) return 1;
    return 0;
}

void ws_eng_models_publish(ws_engine *e)
{
    int conflict = 0;
    for (int i = 0; i < e->n_models; i++) {
        ws_eng_model *em = &e->models[i];
        const ws_eng_candidate *c = em->train ? ws_eng_trainer_candidate(em->train) : NULL;
        if (!c) continue;
        ws_error err = {0};
        int64_t v = 0;
        char retired[WS_ENG_RETIRED_PATH] = "";
        /* made before another daemon took the lock: that one's versions win */
        ws_status s = em->leader ? publish(e, em, c, &v, &err)
                                 : ws_error_set(&err, WS_ERR_CONFLICT,
                                                "model %s: another daemon trains it now", em->name);
        if (s == WS_OK) serve_published(e, em, c, v, retired);
        conflict |= s == WS_ERR_CONFLICT && em->tr.enabled;
        ws_eng_trainer_verdict(em->train, s, v, &err, retired); /* c is the trainer's again */
    }
    /* Another process published first: its version wins, serve it now. */
    if (conflict) ws_eng_models_sync(e);
}

ws_status ws_eng_model_adopt(ws_engine *e, ws_eng_model *em, ws_model *m, int64_t version,
                             ws_error *err)
{
    ws_exec_pool *pool = NULL;
    ws_status s = ws_exec_pool_new(&pool, m, e->crew, err);
    if (s != WS_OK) {
        ws_model_free(m);
        return s;
    }
    ws_exec_pool_free(em->pool);
    ws_model_free(em->m);
    em->m = m;
    em->pool = pool;
    /* Symbols that never reached SQLite (a failed group commit) are dropped with
     * the old model: no committed step refers to them. */
    em->vocab_stored = ws_vocab_size(ws_model_vocab(m));
    latest_read(e, em);
    pthread_mutex_lock(&e->mu);
    em->version = version, em->unloadable = 0;
    pthread_mutex_unlock(&e->mu);
    /* Training goes on from it (a new gate line); a candidate of the old
     * parameters waiting is dropped. */
    ws_error terr = {0};
    if (em->train && ws_eng_trainer_rebase(em->train, m, version, &terr) != WS_OK)
        ws_log(WS_LOG_ERROR, "model %s: training not moved to version %lld: %s", em->name,
               (long long)version, terr.msg);
    return WS_OK;
}

/* Serves version `version` of em from now on: the checkpoint replaces the
 * model (the model's recorded configuration, checked by the load, so the batch
 * and state buffers stay). */
static ws_status adopt_version(ws_engine *e, ws_eng_model *em, int64_t version, ws_error *err)
{
    ws_model *m = NULL;
    WS_TRY(ws_srv_version_load(e->st, e->cfg.data_dir, em->id, version, e->be, &m, err));
    return ws_eng_model_adopt(e, em, m, version, err);
}

void ws_eng_models_lead(ws_engine *e)
{
    if (!e->shared) return; /* SQLite: one daemon, which leads (model_attach) */
    for (int i = 0; i < e->n_models; i++) {
        ws_eng_model *em = &e->models[i];
        ws_error err = {0};
        int held = 0;
        if (ws_store_leader_try(e->st, em->id, &held, &err) != WS_OK) {
            /* PostgreSQL unreachable: the lock went with the connection */
            held = 0;
            ws_log(WS_LOG_DEBUG, "model %s: cluster lock: %s", em->name, err.msg);
        }
        if (held == em->leader) continue;
        em->leader = held;
        ws_log(WS_LOG_INFO,
               held ? "model %s: this daemon trains and publishes it (it holds the cluster lock)"
                    : "model %s: another daemon trains and publishes it now",
               em->name);
    }
}

/* A model that another daemon of the cluster created (or imported) since this
 * one started: served from now on, as if loaded at start. One whose files are
 * not readable yet is tried again at the next sync (said once). */
static void load_created(ws_engine *e, const ws_srv_model_row *row)
{
    if (ws_eng_model_by_name(e, row->name)) return; /* deleted and made again elsewhere */
    ws_error err = {0};
    if (load_one(e, row, &err) == WS_OK) {
        ws_log(WS_LOG_INFO, "model %s: created by another daemon, served here too", row->name);
    } else if (e->created_unloadable != row->id) {
        e->created_unloadable = row->id;
        ws_log(WS_LOG_WARN, "model %s, created by another daemon, cannot be loaded yet: %s",
               row->name, err.msg);
    }
}

void ws_eng_models_sync(ws_engine *e)
{
    ws_eng_models_lead(e);
    ws_srv_model_rows rows = {0};
    ws_error err = {0};
    if (ws_srv_model_rows_read(e->st, &rows, &err) != WS_OK)
        ws_log(WS_LOG_ERROR, "reading model versions: %s", err.msg);
    for (int i = 0; i < rows.n; i++) {
        ws_eng_model *em = ws_eng_model_by_id(e, rows.rows[i].id);
        int64_t v = rows.rows[i].version;
        if (!em && e->shared) load_created(e, &rows.rows[i]);
        if (em && em->version != v && em->unloadable != v) {
            if (adopt_version(e, em, v, &err) == WS_OK) {
                ws_log(WS_LOG_INFO, "model %s: serving version %lld, recorded by another process",
                       em->name, (long long)v);
            } else { /* keep serving the loaded version; say so once */
                em->unloadable = v;
                ws_log(WS_LOG_WARN, "model %s: cannot load version %lld, still serving %lld: %s",
                       em->name, (long long)v, (long long)em->version, err.msg);
            }
        }
    }
    ws_srv_model_rows_free(&rows);
}

void ws_eng_rollback_job(ws_engine *e, ws_job *j)
{
    ws_error err = {0};
    ws_eng_model *em = ws_eng_model_by_name(e, j->model_name);
    if (!em) return ws_eng_refuse(j, WS_JOB_FAILED, WS_ERR_NOTFOUND, "no such model");
    ws_model *m = NULL;
    ws_status s = ws_srv_version_load(e->st, e->cfg.data_dir, em->id, j->version, e->be, &m, &err);
    if (s == WS_ERR_NOTFOUND)
        return ws_eng_refuse(j, WS_JOB_FAILED, s, "model %s has no version %lld", em->name,
                             (long long)j->version);
    /* Retention removed its file (online training keeps the newest few), or it is damaged. */
    if (s == WS_ERR_IO || s == WS_ERR_FORMAT)
        return ws_eng_refuse(j, WS_JOB_VERSION_UNAVAILABLE, s, "version %lld cannot be served: %s",
                             (long long)j->version, err.msg);
    if (s == WS_OK) s = ws_store_model_set_current(e->st, em->id, j->version, &err);
    if (s != WS_OK) {
        ws_model_free(m);
        return ws_eng_fail(j, s, &err);
    }
    /* Recorded: from here on SQLite names it current, so it is served (an
     * adoption that fails leaves it to the next sync, which retries and logs). */
    s = ws_eng_model_adopt(e, em, m, j->version, &err);
    if (s != WS_OK) return ws_eng_fail(j, s, &err);
    ws_log(WS_LOG_INFO, "model %s: rolled back to version %lld", em->name, (long long)j->version);
    ws_eng_finish(j);
}

/* The recorded checkpoint files of a model's versions (owned strings). */
typedef struct {
    const char *data_dir;
    char **paths;
    int n, cap;
} ckpt_files;

static ws_status ckpt_file_add(void *ctx, const ws_store_version *v)
{
    ckpt_files *f = ctx;
    char path[WS_ENG_CKPT_PATH];
    ws_srv_ckpt_resolve(f->data_dir, v->path, path, sizeof path);
    if (f->n == f->cap) {
        int cap = f->cap ? 2 * f->cap : 8;
        char **p = realloc(f->paths, sizeof *p * (size_t)cap);
        if (!p) return WS_ERR_NOMEM;
        f->paths = p, f->cap = cap;
    }
    if (!(f->paths[f->n] = strdup(path))) return WS_ERR_NOMEM;
    f->n++;
    return WS_OK;
}

/* Removes em from the table (under mu: status and metrics read it), then frees
 * what it held and gives its bytes back to --max-model-memory. */
static void table_remove(ws_engine *e, ws_eng_model *em)
{
    ws_eng_model gone = *em;
    pthread_mutex_lock(&e->mu);
    int i = (int)(em - e->models);
    memmove(em, em + 1, sizeof *em * (size_t)(e->n_models - i - 1));
    e->n_models--;
    pthread_mutex_unlock(&e->mu);
    size_t bytes = gone.bytes;
    ws_eng_history_forget_model(e->hist, gone.id);
    model_release(&gone);
    ws_eng_memory_release(e, bytes);
}

/* Removes a file of deleted model `name` (one already gone is fine). */
static void deleted_file_remove(const char *name, const char *path)
{
    if (unlink(path) != 0 && errno != ENOENT)
        ws_log(WS_LOG_WARN, "model %s deleted, but %s stays: %s", name, path, strerror(errno));
}

void ws_eng_model_delete_job(ws_engine *e, ws_job *j)
{
    ws_error err = {0};
    if (ws_eng_building(e, j->model_name))
        return ws_eng_refuse(j, WS_JOB_FAILED, WS_ERR_CONFLICT,
                             "model \"%s\" is being created or imported", j->model_name);
    ws_eng_model *em = ws_eng_model_by_name(e, j->model_name);
    if (!em) return ws_eng_refuse(j, WS_JOB_FAILED, WS_ERR_NOTFOUND, "no such model");
    if (!strcmp(em->name, "default"))
        return ws_eng_refuse(j, WS_JOB_MODEL_IS_DEFAULT, WS_ERR_CONFLICT,
                             "the model \"default\" cannot be deleted: sessions created without "
                             "a model use it");
    ckpt_files files = {.data_dir = e->cfg.data_dir};
    ws_status s = ws_store_version_list(e->st, em->id, ckpt_file_add, &files, &err);
    if (s == WS_ERR_NOMEM) ws_error_set(&err, s, "out of memory");
    if (s == WS_OK) s = ws_store_model_delete(e->st, em->id, &err);
    if (s == WS_OK) {
        table_remove(e, em); /* its training thread stopped: nothing writes its files now */
        /* The rows are gone: a file left behind only takes space (said below). */
        for (int i = 0; i < files.n; i++) deleted_file_remove(j->model_name, files.paths[i]);
        char file[WS_ENG_CKPT_PATH]; /* its AdamW state, saved as it stopped, and its rules */
        ws_eng_optim_path(e->cfg.data_dir, j->model_name, file, sizeof file);
        deleted_file_remove(j->model_name, file);
        ws_eng_rules_path(e->cfg.data_dir, j->model_name, file, sizeof file);
        deleted_file_remove(j->model_name, file);
        ws_log(WS_LOG_INFO, "model %s deleted", j->model_name);
    }
    for (int i = 0; i < files.n; i++) free(files.paths[i]);
    free(files.paths);
    if (s == WS_ERR_CONFLICT)
        return ws_eng_refuse(j, WS_JOB_MODEL_IN_USE, s,
                             "model \"%s\" is in use: %s; delete its sessions first", j->model_name,
                             err.msg);
    if (s != WS_OK) return ws_eng_fail(j, s, &err);
    ws_eng_finish(j);
}

void ws_eng_models_free(ws_engine *e)
{
    for (int i = 0; i < e->n_models; i++) model_release(&e->models[i]);
    free(e->models);
    e->models = NULL;
    e->n_models = e->cap_models = 0;
}
