/* routes_admin.c — POST /v1/admin/backup starts an online backup of the data
 * directory (backup.h) on a thread of its own and answers 202 at once;
 * GET /v1/admin/backup says how the latest one goes. Admin keys only.
 *
 * What a request may choose is a name, never a path: the backup goes to
 * <--backup-dir>/<name>, a new folder, name being [A-Za-z0-9._-]{1,64} not
 * starting with '.', so no request can write outside the folder the operator
 * named, nor over anything in it. Without --backup-dir the route is off. One
 * backup runs at a time (a second is 409 backup_running); it runs on its own
 * database connection, so the engine goes on committing meanwhile; a
 * shutdown stops it and removes its partial copy. One daemon per process (the
 * data-directory lock), so the backup's state is this file's. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backup.h"
#include "base/ws_clock.h"
#include "base/ws_thread_name.h"
#include "routes.h"
#include "server/common/log.h"

static struct {
    pthread_mutex_t mu;
    pthread_t th;
    int joinable; /* th is to be joined */
    int running, has;
    atomic_int cancel; /* shutting down: the running backup stops */
    char name[WS_STORE_NAME_MAX + 1];
    char path[WS_SRV_PATH_MAX + WS_STORE_NAME_MAX + 2];
    char data_dir[WS_SRV_PATH_MAX], db[WS_SRV_PATH_MAX + 32];
    int64_t started_ms, finished_ms;
    ws_srv_backup_report rep;
    ws_status status;
    ws_error err;
} bk = {.mu = PTHREAD_MUTEX_INITIALIZER};

static ws_status on_progress(void *ctx, const ws_srv_backup_report *r, ws_error *err)
{
    (void)ctx;
    pthread_mutex_lock(&bk.mu);
    bk.rep = *r;
    pthread_mutex_unlock(&bk.mu);
    if (atomic_load(&bk.cancel))
        return ws_error_set(err, WS_ERR_UNAVAILABLE, "stopped: the daemon is shutting down");
    return WS_OK;
}

static void *backup_main(void *arg)
{
    (void)arg;
    ws_thread_name("ws-backup");
    ws_srv_backup_report rep;
    ws_error err = {0};
    /* bk.path, data_dir and db do not change while running is set */
    ws_status s = ws_srv_backup(bk.data_dir, bk.db, bk.path, on_progress, NULL, &rep, &err);
    if (s != WS_OK) (void)rmdir(bk.path); /* the folder the route made, left empty */
    pthread_mutex_lock(&bk.mu);
    if (s == WS_OK) bk.rep = rep;
    bk.status = s, bk.err = err;
    bk.finished_ms = ws_clock_wall_ms();
    if (s == WS_OK)
        ws_log(WS_LOG_INFO, "backup %s done: %s, %d files, %llu bytes", bk.name, bk.path, rep.files,
               (unsigned long long)rep.bytes);
    else
        ws_log(WS_LOG_ERROR, "backup %s failed: %s", bk.name, err.msg);
    bk.running = 0; /* from here on a new backup may take bk over */
    pthread_mutex_unlock(&bk.mu);
    return NULL;
}

void ws_srv_backup_stop(void)
{
    atomic_store(&bk.cancel, 1);
    pthread_mutex_lock(&bk.mu);
    int join = bk.joinable;
    bk.joinable = 0;
    pthread_mutex_unlock(&bk.mu);
    if (join) pthread_join(bk.th, NULL);
}

/* The backup's state as the API shows it (under bk.mu); NULL when out of memory. */
static cJSON *status_json(void)
{
    cJSON *o = cJSON_CreateObject(), *db = cJSON_CreateObject();
    const char *state = bk.running ? "running" : bk.status == WS_OK ? "done" : "failed";
    int ok = o && db && cJSON_AddStringToObject(o, "name", bk.name) &&
             cJSON_AddStringToObject(o, "path", bk.path) &&
             cJSON_AddStringToObject(o, "state", state) &&
             cJSON_AddNumberToObject(o, "started_ms", (double)bk.started_ms) &&
             (bk.running || cJSON_AddNumberToObject(o, "finished_ms", (double)bk.finished_ms)) &&
             cJSON_AddNumberToObject(db, "pages_done", (double)bk.rep.db_pages_done) &&
             cJSON_AddNumberToObject(db, "pages_total", (double)bk.rep.db_pages_total);
    if (ok) {
        cJSON_AddItemToObject(o, "database", db);
        db = NULL;
        ok = cJSON_AddNumberToObject(o, "files", bk.rep.files) &&
             cJSON_AddNumberToObject(o, "bytes", (double)bk.rep.bytes) &&
             cJSON_AddNumberToObject(o, "skipped", bk.rep.skipped) &&
             cJSON_AddNumberToObject(o, "schema_version", bk.rep.schema_version);
    }
    if (ok && !bk.running && bk.status != WS_OK) {
        const char *code;
        (void)ws_http_status_of(bk.status, &code);
        cJSON *e = cJSON_AddObjectToObject(o, "error");
        ok = e &&
             cJSON_AddStringToObject(e, "code", atomic_load(&bk.cancel) ? "shutting_down" : code) &&
             cJSON_AddStringToObject(e, "message", bk.err.msg);
    }
    cJSON_Delete(db);
    if (!ok) cJSON_Delete(o);
    return ok ? o : NULL;
}

/* {"backup": the latest backup's state, or null before the first} */
static void answer_status(ws_http_answer *a, int status)
{
    a->json = cJSON_CreateObject();
    cJSON *b = bk.has ? status_json() : cJSON_CreateNull();
    if (!a->json || !b || !cJSON_AddItemToObject(a->json, "backup", b)) {
        cJSON_Delete(b);
        cJSON_Delete(a->json);
        a->json = NULL; /* a bodiless 500 */
    }
    a->status = status;
}

void ws_route_backup_status(ws_http_ctx *c, ws_http_answer *a)
{
    (void)c;
    pthread_mutex_lock(&bk.mu);
    answer_status(a, 200);
    pthread_mutex_unlock(&bk.mu);
}

/* The body's name (or one from the clock: backup-YYYYMMDD-HHMMSS-mmm, UTC). */
static ws_status backup_name(const ws_http_ctx *c, char name[WS_STORE_NAME_MAX + 1], ws_error *err)
{
    static const char *const fields[] = {"name", NULL};
    int64_t ms = ws_clock_wall_ms();
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    snprintf(name, WS_STORE_NAME_MAX + 1, "backup-%04d%02d%02d-%02d%02d%02d-%03d",
             tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
             (int)(ms % 1000));
    if (!c->body_len) return WS_OK;
    cJSON *root = NULL;
    ws_status s = ws_json_parse_object(c->body, c->body_len, &root, err);
    if (s == WS_OK) s = ws_json_only(root, fields, err);
    const cJSON *n = root ? cJSON_GetObjectItemCaseSensitive(root, "name") : NULL;
    if (s == WS_OK && n &&
        (!cJSON_IsString(n) || !ws_http_model_name_ok(n->valuestring) || n->valuestring[0] == '.'))
        s = ws_error_set(err, WS_ERR_INVALID,
                         "name must be 1 to %d characters of A-Z a-z 0-9 . _ - and not start "
                         "with '.'",
                         WS_STORE_NAME_MAX);
    if (s == WS_OK && n) snprintf(name, WS_STORE_NAME_MAX + 1, "%s", n->valuestring);
    cJSON_Delete(root);
    return s;
}

/* Makes the backup's folder, root/name, into path[cap] (the root made 0700
 * if missing): a name taken is WS_ERR_CONFLICT. */
static ws_status reserve(const char *root, const char *name, char *path, size_t cap, ws_error *err)
{
    if (mkdir(root, 0700) != 0 && errno != EEXIST)
        return ws_error_set(err, WS_ERR_IO, "cannot create the backup folder %s: %s", root,
                            strerror(errno));
    int n = snprintf(path, cap, "%s/%s", root, name);
    if (n < 0 || (size_t)n >= cap) return ws_error_set(err, WS_ERR_INVALID, "backup path too long");
    if (mkdir(path, 0700) != 0)
        return ws_error_set(err, errno == EEXIST ? WS_ERR_CONFLICT : WS_ERR_IO,
                            "cannot make %s: %s", path,
                            errno == EEXIST ? "a backup of that name exists" : strerror(errno));
    return WS_OK;
}

void ws_route_backup_start(ws_http_ctx *c, ws_http_answer *a)
{
    const char *root = c->srv->cfg.backup_dir;
    if (!root[0]) {
        a->status = 409;
        a->json = ws_http_error("backup_not_configured",
                                "backups are off: start worldstated with --backup-dir DIR, the "
                                "folder backups are written under");
        return;
    }
    ws_error err = {0};
    char name[WS_STORE_NAME_MAX + 1], path[sizeof bk.path];
    ws_status s = backup_name(c, name, &err);
    const char *code = NULL;
    pthread_mutex_lock(&bk.mu);
    if (s == WS_OK && bk.running) {
        a->status = 409;
        a->json =
            ws_http_error("backup_running", "backup %s is running (GET /v1/admin/backup)", bk.name);
        pthread_mutex_unlock(&bk.mu);
        return;
    }
    if (s == WS_OK && bk.joinable) { /* the previous one has finished: reap it */
        pthread_join(bk.th, NULL);
        bk.joinable = 0;
    }
    if (s == WS_OK) s = reserve(root, name, path, sizeof path, &err);
    if (s == WS_OK) {
        snprintf(bk.name, sizeof bk.name, "%s", name);
        snprintf(bk.path, sizeof bk.path, "%s", path);
        snprintf(bk.data_dir, sizeof bk.data_dir, "%s", c->srv->cfg.data_dir);
        snprintf(bk.db, sizeof bk.db, "%s", c->srv->db_path);
        memset(&bk.rep, 0, sizeof bk.rep);
        bk.status = WS_OK, bk.started_ms = ws_clock_wall_ms(), bk.finished_ms = 0;
        bk.running = 1, bk.has = 1;
        if (pthread_create(&bk.th, NULL, backup_main, NULL) != 0) {
            bk.running = 0, bk.status = WS_ERR_IO;
            s = ws_error_set(&err, WS_ERR_IO, "cannot start the backup thread");
            bk.err = err;
            (void)rmdir(bk.path);
        } else {
            bk.joinable = 1;
        }
    }
    if (s == WS_OK) answer_status(a, 202);
    pthread_mutex_unlock(&bk.mu);
    if (s == WS_OK) return;
    a->status = ws_http_status_of(s, &code);
    a->json = ws_http_error(code, "%s", err.msg);
}
