/* restore.c — a backup (backup.h) restored into a new data directory: the
 * manifest's files, each checked against its size and SHA-256 as it is
 * copied, then the restored database's integrity check. A failure removes
 * what was written, so the target is left as it was found. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backup.h"
#include "backup_files.h"
#include "server/common/limits.h"
#include "storage/storage.h"

#define MANIFEST_MAX (16u << 20) /* a manifest larger than this is not one of ours */

/* The manifest of the backup in dir, parsed into *out. */
static ws_status manifest_read(const char *dir, cJSON **out, ws_error *err)
{
    char path[WS_SRV_PATH_MAX + 64];
    *out = NULL;
    WS_TRY(ws_bk_path_join(path, sizeof path, dir, WS_SRV_BACKUP_MANIFEST, err));
    FILE *f = fopen(path, "rb");
    if (!f)
        return ws_error_set(err, errno == ENOENT ? WS_ERR_NOTFOUND : WS_ERR_IO,
                            "%s: %s (not a complete worldstated backup)", path, strerror(errno));
    char *text = malloc(MANIFEST_MAX + 1);
    size_t n = text ? fread(text, 1, MANIFEST_MAX + 1, f) : 0;
    int bad = ferror(f);
    fclose(f);
    ws_status s = WS_OK;
    if (!text)
        s = ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    else if (bad || n > MANIFEST_MAX)
        s = ws_error_set(err, WS_ERR_FORMAT, "%s: unreadable or too large", path);
    else if (!(*out = cJSON_ParseWithLength(text, n)))
        s = ws_error_set(err, WS_ERR_FORMAT, "%s: not JSON", path);
    free(text);
    return s;
}

/* The manifest's files, checked: a known format, a schema this build opens,
 * and entries of paths a backup may hold (the database among them). */
static ws_status manifest_files(const cJSON *m, ws_bk_entries *out, ws_error *err)
{
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(m, "format");
    const cJSON *fv = cJSON_GetObjectItemCaseSensitive(m, "format_version");
    const cJSON *sv = cJSON_GetObjectItemCaseSensitive(m, "schema_version");
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(m, "files");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, WS_SRV_BACKUP_FORMAT) ||
        !cJSON_IsNumber(fv) || !cJSON_IsNumber(sv) || !cJSON_IsArray(files))
        return ws_error_set(err, WS_ERR_FORMAT, "the manifest is not a worldstated backup's");
    if (fv->valuedouble != 1)
        return ws_error_set(err, WS_ERR_UNSUPPORTED, "backup format %g: this build reads 1",
                            fv->valuedouble);
    if (sv->valuedouble > WS_STORE_SCHEMA_VERSION)
        return ws_error_set(err, WS_ERR_UNSUPPORTED,
                            "the backup's database has schema %g, from a newer build (this one "
                            "opens up to %d)",
                            sv->valuedouble, WS_STORE_SCHEMA_VERSION);
    int db = 0;
    const cJSON *f;
    cJSON_ArrayForEach(f, files)
    {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(f, "path");
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(f, "bytes");
        const cJSON *h = cJSON_GetObjectItemCaseSensitive(f, "sha256");
        if (!cJSON_IsString(p) || !ws_bk_rel_ok(p->valuestring) || !cJSON_IsNumber(n) ||
            n->valuedouble < 0 || !cJSON_IsString(h) || strlen(h->valuestring) != 64)
            return ws_error_set(err, WS_ERR_FORMAT, "the manifest's files[%d] is malformed",
                                out->n);
        ws_bk_entry *e = ws_bk_entries_add(out, p->valuestring);
        if (!e) return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
        e->bytes = (uint64_t)n->valuedouble;
        snprintf(e->sha256, sizeof e->sha256, "%s", h->valuestring);
        db += !strcmp(e->rel, WS_BK_DB_FILE);
    }
    if (db != 1) return ws_error_set(err, WS_ERR_FORMAT, "the manifest names no database");
    return WS_OK;
}

/* The restored database opens and passes its integrity check. */
static ws_status check_restored(const char *data_dir, ws_error *err)
{
    char path[WS_SRV_PATH_MAX + 32];
    WS_TRY(ws_bk_path_join(path, sizeof path, data_dir, WS_BK_DB_FILE, err));
    ws_store *st = NULL;
    WS_TRY(ws_store_open(path, WS_STORE_DURABILITY_NORMAL, 0, &st, err));
    ws_status s = ws_store_integrity_check(st, err);
    ws_store_close(st);
    return s;
}

ws_status ws_srv_restore(const char *from, const char *data_dir, ws_srv_backup_report *rep,
                         ws_error *err)
{
    memset(rep, 0, sizeof *rep);
    ws_bk_entries want = {0};
    cJSON *m = NULL;
    ws_status s = manifest_read(from, &m, err);
    if (s == WS_OK) s = manifest_files(m, &want, err);
    cJSON_Delete(m);
    ws_bk_target t;
    if (s == WS_OK) s = ws_bk_target_open(&t, data_dir, err);
    if (s != WS_OK) {
        ws_bk_entries_free(&want);
        return s;
    }
    for (int i = 0; s == WS_OK && i < want.n; i++) {
        const ws_bk_entry *w = &want.v[i];
        char src[WS_SRV_PATH_MAX + 128];
        ws_bk_entry got = {0};
        s = ws_bk_path_join(src, sizeof src, from, w->rel, err);
        if (s == WS_OK) s = ws_bk_copy_file(&t, src, w->rel, w->sha256, &got, err);
        if (s == WS_OK && got.bytes != w->bytes)
            s = ws_error_set(err, WS_ERR_FORMAT, "%s: %llu bytes, the manifest says %llu", src,
                             (unsigned long long)got.bytes, (unsigned long long)w->bytes);
        if (s == WS_OK) rep->files++, rep->bytes += got.bytes;
    }
    if (s == WS_OK) s = check_restored(data_dir, err);
    if (s == WS_OK) s = ws_bk_target_sync(&t, err);
    if (s != WS_OK) ws_bk_target_discard(&t);
    ws_bk_entries_free(&t.written);
    ws_bk_entries_free(&want);
    return s;
}
