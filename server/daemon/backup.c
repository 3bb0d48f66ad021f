/* backup.c — a whole data directory backed up online (backup.h): the
 * database through ws_store_backup (one consistent snapshot, copied while the
 * daemon commits), then the checkpoints the copy's version rows record, each
 * checked against its recorded SHA-256 as it is copied, then the manifest,
 * written last and atomically. A failure removes what was written. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backup.h"
#include "backup_files.h"
#include "base/ws_clock.h"
#include "base/ws_version.h"
#include "server/common/limits.h"
#include "server/common/versions.h"
#include "server/engine/files.h"

#define STEP_PAGES 256 /* pages per step of the database copy: 1 MiB of 4 KiB */

typedef struct {
    ws_bk_target t;
    ws_srv_backup_fn fn;
    void *ctx;
    ws_srv_backup_report *rep;
    ws_bk_entries files, skipped;
    ws_error fn_err; /* why fn stopped the database copy */
} backup_run;

static ws_status report(backup_run *b, ws_error *err)
{
    return b->fn ? b->fn(b->ctx, b->rep, err) : WS_OK;
}

static ws_status db_step(void *ctx, int64_t done, int64_t total)
{
    backup_run *b = ctx;
    b->rep->db_pages_done = done, b->rep->db_pages_total = total;
    return report(b, &b->fn_err);
}

/* The database at location db (NULL: the data directory's), as of one
 * commit, into the target. */
static ws_status backup_database(backup_run *b, const char *data_dir, const char *db, ws_error *err)
{
    char src[WS_SRV_PATH_MAX + 32], dst[WS_SRV_PATH_MAX + 32];
    if (!db) WS_TRY(ws_bk_path_join(src, sizeof src, data_dir, WS_BK_DB_FILE, err));
    WS_TRY(ws_bk_path_join(dst, sizeof dst, b->t.dir, WS_BK_DB_FILE, err));
    ws_store *st = NULL;
    WS_TRY(ws_store_open(db ? db : src, WS_STORE_DURABILITY_NORMAL, 0, &st, err));
    ws_status s = ws_store_backup(st, dst, STEP_PAGES, db_step, b, err);
    ws_store_close(st);
    if (s != WS_OK && b->fn_err.msg[0]) *err = b->fn_err;
    if (s != WS_OK) return s;
    ws_bk_entry *e = ws_bk_entries_add(&b->t.written, WS_BK_DB_FILE);
    return e ? WS_OK : ws_error_set(err, WS_ERR_NOMEM, "out of memory");
}

static ws_status version_collect(void *ctx, const ws_store_version *v)
{
    ws_bk_entry *e = ws_bk_entries_add(ctx, v->path);
    if (!e) return WS_ERR_NOMEM;
    snprintf(e->sha256, sizeof e->sha256, "%s", v->sha256);
    return WS_OK;
}

/* What the copy records: its integrity checked, its schema version, and every
 * version's checkpoint path with its SHA-256 (into vers). */
static ws_status inspect_copy(backup_run *b, ws_bk_entries *vers, ws_error *err)
{
    char path[WS_SRV_PATH_MAX + 32];
    WS_TRY(ws_bk_path_join(path, sizeof path, b->t.dir, WS_BK_DB_FILE, err));
    ws_store *st = NULL;
    WS_TRY(ws_store_open(path, WS_STORE_DURABILITY_NORMAL, 0, &st, err));
    ws_store_info info;
    ws_srv_model_rows rows = {0};
    ws_status s = ws_store_integrity_check(st, err);
    if (s == WS_OK) s = ws_store_get_info(st, &info, err);
    if (s == WS_OK) b->rep->schema_version = info.schema_version;
    if (s == WS_OK) s = ws_srv_model_rows_read(st, &rows, err);
    for (int i = 0; s == WS_OK && i < rows.n; i++)
        s = ws_store_version_list(st, rows.rows[i].id, version_collect, vers, err);
    if (s == WS_ERR_NOMEM) ws_error_set(err, s, "out of memory");
    ws_srv_model_rows_free(&rows);
    ws_store_close(st); /* the last connection: the copy is one file again */
    return s;
}

static ws_status skip(backup_run *b, const char *rel, const char *why, ws_error *err)
{
    ws_bk_entry *e = ws_bk_entries_add(&b->skipped, rel);
    if (!e || !(e->why = strdup(why))) return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    b->rep->skipped++;
    return WS_OK;
}

static ws_status count_file(backup_run *b, const ws_bk_entry *e, ws_error *err)
{
    ws_bk_entry *f = ws_bk_entries_add(&b->files, e->rel);
    if (!f) return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    f->bytes = e->bytes;
    memcpy(f->sha256, e->sha256, sizeof f->sha256);
    b->rep->files++;
    b->rep->bytes += e->bytes;
    return report(b, err);
}

/* One recorded checkpoint into the target; a missing or damaged one is left
 * out and noted (the source daemon cannot serve it either). */
static ws_status backup_checkpoint(backup_run *b, const char *data_dir, const ws_bk_entry *v,
                                   ws_error *err)
{
    if (!ws_bk_rel_ok(v->rel)) /* rows of builds before relative paths */
        return skip(b, v->rel, "recorded outside the data directory: copy it by hand", err);
    char src[WS_SRV_PATH_MAX + 128];
    WS_TRY(ws_bk_path_join(src, sizeof src, data_dir, v->rel, err));
    ws_bk_entry got = {0};
    ws_error why = {0};
    ws_status s = ws_bk_copy_file(&b->t, src, v->rel, v->sha256, &got, &why);
    if (s == WS_ERR_NOTFOUND) return skip(b, v->rel, "missing in the data directory", err);
    if (s == WS_ERR_FORMAT)
        return skip(b, v->rel, "damaged: not the file its version records", err);
    if (s != WS_OK) {
        *err = why;
        return s;
    }
    got.rel = v->rel;
    return count_file(b, &got, err);
}

static cJSON *entries_json(const ws_bk_entries *e, int skipped)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < e->n; i++) {
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(a, o) || !cJSON_AddStringToObject(o, "path", e->v[i].rel) ||
            (skipped ? !cJSON_AddStringToObject(o, "reason", e->v[i].why)
                     : !cJSON_AddNumberToObject(o, "bytes", (double)e->v[i].bytes) ||
                           !cJSON_AddStringToObject(o, "sha256", e->v[i].sha256))) {
            cJSON_Delete(a);
            return NULL;
        }
    }
    return a;
}

/* The manifest, written last (temporary file, sync, rename): a backup
 * directory with one is complete. */
static ws_status write_manifest(backup_run *b, ws_error *err)
{
    cJSON *m = cJSON_CreateObject();
    cJSON *files = entries_json(&b->files, 0), *skipped = entries_json(&b->skipped, 1);
    char version[128];
    snprintf(version, sizeof version, "%s%s%s%s", ws_version(), ws_version_git()[0] ? " (git " : "",
             ws_version_git(), ws_version_git()[0] ? ")" : "");
    char *text = NULL;
    if (m && files && skipped && cJSON_AddStringToObject(m, "format", WS_SRV_BACKUP_FORMAT) &&
        cJSON_AddNumberToObject(m, "format_version", 1) &&
        cJSON_AddNumberToObject(m, "schema_version", b->rep->schema_version) &&
        cJSON_AddNumberToObject(m, "created_ms", (double)ws_clock_wall_ms()) &&
        cJSON_AddStringToObject(m, "worldstated", version)) {
        cJSON_AddItemToObject(m, "files", files);
        cJSON_AddItemToObject(m, "skipped", skipped);
        files = skipped = NULL;
        text = cJSON_Print(m);
    }
    cJSON_Delete(m);
    cJSON_Delete(files);
    cJSON_Delete(skipped);
    if (!text) return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    char tmp[WS_SRV_PATH_MAX + 64], dst[WS_SRV_PATH_MAX + 64];
    ws_status s =
        ws_bk_path_join(tmp, sizeof tmp, b->t.dir, "." WS_SRV_BACKUP_MANIFEST ".tmp", err);
    if (s == WS_OK) s = ws_bk_path_join(dst, sizeof dst, b->t.dir, WS_SRV_BACKUP_MANIFEST, err);
    int fd = s == WS_OK ? open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600) : -1;
    if (s == WS_OK && fd < 0)
        s = ws_error_set(err, WS_ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
    if (fd >= 0) {
        s = ws_srv_write_all(fd, text, strlen(text), err);
        if (close(fd) != 0 && s == WS_OK)
            s = ws_error_set(err, WS_ERR_IO, "cannot write %s: %s", tmp, strerror(errno));
        if (s == WS_OK) s = ws_srv_file_commit(tmp, dst, err);
        if (s != WS_OK) (void)unlink(tmp);
    }
    free(text);
    if (s == WS_OK && !ws_bk_entries_add(&b->t.written, WS_SRV_BACKUP_MANIFEST))
        s = ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    return s;
}

ws_status ws_srv_backup(const char *data_dir, const char *db, const char *dest, ws_srv_backup_fn fn,
                        void *ctx, ws_srv_backup_report *rep, ws_error *err)
{
    memset(rep, 0, sizeof *rep);
    backup_run b = {.fn = fn, .ctx = ctx, .rep = rep};
    ws_bk_entries vers = {0};
    WS_TRY(ws_bk_target_open(&b.t, dest, err));
    ws_status s = backup_database(&b, data_dir, db, err);
    if (s == WS_OK) s = inspect_copy(&b, &vers, err);
    if (s == WS_OK) { /* the copy's own bytes, now that it is closed */
        ws_bk_entry db = {.rel = WS_BK_DB_FILE};
        char path[WS_SRV_PATH_MAX + 32];
        s = ws_bk_path_join(path, sizeof path, dest, WS_BK_DB_FILE, err);
        if (s == WS_OK) s = ws_srv_file_sha256(path, db.sha256, err);
        struct stat sb;
        if (s == WS_OK && stat(path, &sb) != 0)
            s = ws_error_set(err, WS_ERR_IO, "cannot stat %s: %s", path, strerror(errno));
        if (s == WS_OK) db.bytes = (uint64_t)sb.st_size, s = count_file(&b, &db, err);
    }
    for (int i = 0; s == WS_OK && i < vers.n; i++)
        s = backup_checkpoint(&b, data_dir, &vers.v[i], err);
    if (s == WS_OK) s = ws_bk_target_sync(&b.t, err);
    if (s == WS_OK) s = write_manifest(&b, err);
    if (s != WS_OK) ws_bk_target_discard(&b.t);
    ws_bk_entries_free(&vers);
    ws_bk_entries_free(&b.files);
    ws_bk_entries_free(&b.skipped);
    ws_bk_entries_free(&b.t.written);
    return s;
}
