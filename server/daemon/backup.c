/* backup.c — a whole data directory backed up online, and restored (backup.h).
 *
 * Backup: the database through ws_store_backup (one consistent snapshot,
 * copied while the daemon commits), then the checkpoints the copy's version
 * rows record, each checked against its recorded SHA-256 as it is copied,
 * then the manifest, written last and atomically. Restore: the manifest's
 * files, each checked against its size and SHA-256 as it is copied, then the
 * restored database's integrity check. Either one, failing, removes what it
 * wrote, so a target is left as it was found. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backup.h"
#include "base/ws_clock.h"
#include "base/ws_version.h"
#include "server/common/limits.h"
#include "server/common/versions.h"
#include "server/engine/files.h"
#include "storage/sha256.h"

#define DB_FILE      "worldstate.db"
#define STEP_PAGES   256         /* pages per step of the database copy: 1 MiB of 4 KiB */
#define MANIFEST_MAX (16u << 20) /* a manifest larger than this is not one of ours */

typedef struct {
    char *rel; /* path relative to the data directory */
    uint64_t bytes;
    char sha256[65];
    char *why; /* a skipped file: why (the manifest's "skipped") */
} entry;

typedef struct {
    entry *v;
    int n, cap;
} entries;

static void entries_free(entries *e)
{
    for (int i = 0; i < e->n; i++) free(e->v[i].rel), free(e->v[i].why);
    free(e->v);
    memset(e, 0, sizeof *e);
}

/* A new zeroed entry for rel (copied); NULL when out of memory. */
static entry *entries_add(entries *e, const char *rel)
{
    if (e->n == e->cap) {
        int cap = e->cap ? 2 * e->cap : 16;
        entry *v = realloc(e->v, sizeof *v * (size_t)cap);
        if (!v) return NULL;
        e->v = v, e->cap = cap;
    }
    entry *x = &e->v[e->n];
    memset(x, 0, sizeof *x);
    if (!(x->rel = strdup(rel))) return NULL;
    e->n++;
    return x;
}

/* A path inside a data directory that a backup may hold: the database, or a
 * file directly in models/ (never an absolute path, a '..' or a subfolder:
 * a manifest or a version row cannot make a copy land outside its target). */
static int rel_ok(const char *rel)
{
    if (!strcmp(rel, DB_FILE)) return 1;
    if (strncmp(rel, "models/", 7) != 0) return 0;
    const char *f = rel + 7;
    return *f && !strchr(f, '/') && strcmp(f, ".") && strcmp(f, "..");
}

static ws_status path_join(char *out, size_t cap, const char *dir, const char *rel, ws_error *err)
{
    int n = snprintf(out, cap, "%s/%s", dir, rel);
    if (n < 0 || (size_t)n >= cap)
        return ws_error_set(err, WS_ERR_INVALID, "path too long: %s/%s", dir, rel);
    return WS_OK;
}

/* ---- the target directory ------------------------------------------------ */

typedef struct {
    const char *dir;
    int made;        /* 1: the directory is ours (removed on failure), 0: it was empty */
    entries written; /* files created in it so far */
} target;

/* dir, made 0700 or found empty, with a models/ folder of ours. */
static ws_status target_open(target *t, const char *dir, ws_error *err)
{
    memset(t, 0, sizeof *t);
    t->dir = dir;
    if (mkdir(dir, 0700) == 0) {
        t->made = 1;
    } else if (errno != EEXIST) {
        return ws_error_set(err, WS_ERR_IO, "cannot create %s: %s", dir, strerror(errno));
    } else {
        DIR *d = opendir(dir);
        if (!d)
            return ws_error_set(err, errno == ENOTDIR ? WS_ERR_CONFLICT : WS_ERR_IO,
                                "%s exists and cannot be used: %s", dir, strerror(errno));
        struct dirent *de;
        int empty = 1;
        while (empty && (de = readdir(d)))
            empty = !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..");
        closedir(d);
        if (!empty) return ws_error_set(err, WS_ERR_CONFLICT, "%s is not empty", dir);
    }
    char models[WS_SRV_PATH_MAX + 16];
    ws_status s = path_join(models, sizeof models, dir, "models", err);
    if (s == WS_OK && mkdir(models, 0700) != 0)
        s = ws_error_set(err, WS_ERR_IO, "cannot create %s: %s", models, strerror(errno));
    if (s != WS_OK && t->made) (void)rmdir(dir);
    return s;
}

/* Undoes target_open and every file written since (a failed run). */
static void target_discard(target *t)
{
    char p[WS_SRV_PATH_MAX + 128];
    for (int i = t->written.n - 1; i >= 0; i--)
        if (path_join(p, sizeof p, t->dir, t->written.v[i].rel, NULL) == WS_OK) (void)unlink(p);
    if (path_join(p, sizeof p, t->dir, "models", NULL) == WS_OK) (void)rmdir(p);
    if (t->made) (void)rmdir(t->dir);
}

/* The target's folders synced: the names of everything written are durable. */
static ws_status target_sync(const target *t, ws_error *err)
{
    char models[WS_SRV_PATH_MAX + 16];
    WS_TRY(path_join(models, sizeof models, t->dir, "models", err));
    WS_TRY(ws_srv_sync_path(models, O_RDONLY | O_DIRECTORY, err));
    return ws_srv_sync_path(t->dir, O_RDONLY | O_DIRECTORY, err);
}

/* Copies src to the new file t->dir/rel (0600, synced), its SHA-256 and size
 * into got. A missing src is WS_ERR_NOTFOUND, and nothing is created; a copy
 * whose SHA-256 is not expect (64 hex digits; NULL or "": anything goes) is
 * WS_ERR_FORMAT, and removed. */
static ws_status copy_file(target *t, const char *src, const char *rel, const char *expect,
                           entry *got, ws_error *err)
{
    char dst[WS_SRV_PATH_MAX + 128];
    WS_TRY(path_join(dst, sizeof dst, t->dir, rel, err));
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return ws_error_set(err, errno == ENOENT ? WS_ERR_NOTFOUND : WS_ERR_IO,
                            "cannot open %s: %s", src, strerror(errno));
    int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (out < 0) {
        ws_status s = ws_error_set(err, errno == EEXIST ? WS_ERR_CONFLICT : WS_ERR_IO,
                                   "cannot create %s: %s", dst, strerror(errno));
        close(in);
        return s;
    }
    enum { CHUNK = 1 << 20 };
    unsigned char *buf = malloc(CHUNK), digest[WS_STORE_SHA256_BYTES];
    ws_store_sha256_ctx c;
    ws_store_sha256_init(&c);
    ws_status s = buf ? WS_OK : ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    got->bytes = 0;
    for (ssize_t n = 1; s == WS_OK && n > 0;) {
        n = read(in, buf, CHUNK);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) s = ws_error_set(err, WS_ERR_IO, "cannot read %s: %s", src, strerror(errno));
        if (n <= 0) break;
        ws_store_sha256_update(&c, buf, (size_t)n);
        got->bytes += (uint64_t)n;
        s = ws_srv_write_all(out, buf, (size_t)n, err);
    }
    free(buf);
    close(in);
    ws_store_sha256_final(&c, digest);
    for (int i = 0; i < WS_STORE_SHA256_BYTES; i++)
        snprintf(got->sha256 + 2 * i, 3, "%02x", digest[i]);
    if (s == WS_OK && expect && expect[0] && strcmp(expect, got->sha256) != 0)
        s = ws_error_set(err, WS_ERR_FORMAT, "%s: its SHA-256 %.16s... differs from %.16s...", src,
                         got->sha256, expect);
    if (s == WS_OK && fsync(out) != 0)
        s = ws_error_set(err, WS_ERR_IO, "cannot sync %s: %s", dst, strerror(errno));
    if (close(out) != 0 && s == WS_OK)
        s = ws_error_set(err, WS_ERR_IO, "cannot write %s: %s", dst, strerror(errno));
    if (s == WS_OK && !entries_add(&t->written, rel))
        s = ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    if (s != WS_OK) (void)unlink(dst);
    return s;
}

/* ---- backup ---------------------------------------------------------------- */

typedef struct {
    target t;
    ws_srv_backup_fn fn;
    void *ctx;
    ws_srv_backup_report *rep;
    entries files, skipped;
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
    if (!db) WS_TRY(path_join(src, sizeof src, data_dir, DB_FILE, err));
    WS_TRY(path_join(dst, sizeof dst, b->t.dir, DB_FILE, err));
    ws_store *st = NULL;
    WS_TRY(ws_store_open(db ? db : src, WS_STORE_DURABILITY_NORMAL, 0, &st, err));
    ws_status s = ws_store_backup(st, dst, STEP_PAGES, db_step, b, err);
    ws_store_close(st);
    if (s != WS_OK && b->fn_err.msg[0]) *err = b->fn_err;
    if (s != WS_OK) return s;
    entry *e = entries_add(&b->t.written, DB_FILE);
    return e ? WS_OK : ws_error_set(err, WS_ERR_NOMEM, "out of memory");
}

static ws_status version_collect(void *ctx, const ws_store_version *v)
{
    entry *e = entries_add(ctx, v->path);
    if (!e) return WS_ERR_NOMEM;
    snprintf(e->sha256, sizeof e->sha256, "%s", v->sha256);
    return WS_OK;
}

/* What the copy records: its integrity checked, its schema version, and every
 * version's checkpoint path with its SHA-256 (into vers). */
static ws_status inspect_copy(backup_run *b, entries *vers, ws_error *err)
{
    char path[WS_SRV_PATH_MAX + 32];
    WS_TRY(path_join(path, sizeof path, b->t.dir, DB_FILE, err));
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
    entry *e = entries_add(&b->skipped, rel);
    if (!e || !(e->why = strdup(why))) return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    b->rep->skipped++;
    return WS_OK;
}

static ws_status count_file(backup_run *b, const entry *e, ws_error *err)
{
    entry *f = entries_add(&b->files, e->rel);
    if (!f) return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    f->bytes = e->bytes;
    memcpy(f->sha256, e->sha256, sizeof f->sha256);
    b->rep->files++;
    b->rep->bytes += e->bytes;
    return report(b, err);
}

/* One recorded checkpoint into the target; a missing or damaged one is left
 * out and noted (the source daemon cannot serve it either). */
static ws_status backup_checkpoint(backup_run *b, const char *data_dir, const entry *v,
                                   ws_error *err)
{
    if (!rel_ok(v->rel)) /* rows of builds before relative paths */
        return skip(b, v->rel, "recorded outside the data directory: copy it by hand", err);
    char src[WS_SRV_PATH_MAX + 128];
    WS_TRY(path_join(src, sizeof src, data_dir, v->rel, err));
    entry got = {0};
    ws_error why = {0};
    ws_status s = copy_file(&b->t, src, v->rel, v->sha256, &got, &why);
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

static cJSON *entries_json(const entries *e, int skipped)
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
    ws_status s = path_join(tmp, sizeof tmp, b->t.dir, "." WS_SRV_BACKUP_MANIFEST ".tmp", err);
    if (s == WS_OK) s = path_join(dst, sizeof dst, b->t.dir, WS_SRV_BACKUP_MANIFEST, err);
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
    if (s == WS_OK && !entries_add(&b->t.written, WS_SRV_BACKUP_MANIFEST))
        s = ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    return s;
}

ws_status ws_srv_backup(const char *data_dir, const char *db, const char *dest, ws_srv_backup_fn fn,
                        void *ctx, ws_srv_backup_report *rep, ws_error *err)
{
    memset(rep, 0, sizeof *rep);
    backup_run b = {.fn = fn, .ctx = ctx, .rep = rep};
    entries vers = {0};
    WS_TRY(target_open(&b.t, dest, err));
    ws_status s = backup_database(&b, data_dir, db, err);
    if (s == WS_OK) s = inspect_copy(&b, &vers, err);
    if (s == WS_OK) { /* the copy's own bytes, now that it is closed */
        entry db = {.rel = DB_FILE};
        char path[WS_SRV_PATH_MAX + 32];
        s = path_join(path, sizeof path, dest, DB_FILE, err);
        if (s == WS_OK) s = ws_srv_file_sha256(path, db.sha256, err);
        struct stat sb;
        if (s == WS_OK && stat(path, &sb) != 0)
            s = ws_error_set(err, WS_ERR_IO, "cannot stat %s: %s", path, strerror(errno));
        if (s == WS_OK) db.bytes = (uint64_t)sb.st_size, s = count_file(&b, &db, err);
    }
    for (int i = 0; s == WS_OK && i < vers.n; i++)
        s = backup_checkpoint(&b, data_dir, &vers.v[i], err);
    if (s == WS_OK) s = target_sync(&b.t, err);
    if (s == WS_OK) s = write_manifest(&b, err);
    if (s != WS_OK) target_discard(&b.t);
    entries_free(&vers);
    entries_free(&b.files);
    entries_free(&b.skipped);
    entries_free(&b.t.written);
    return s;
}

/* ---- restore --------------------------------------------------------------- */

/* The manifest of the backup in dir, parsed into *out. */
static ws_status manifest_read(const char *dir, cJSON **out, ws_error *err)
{
    char path[WS_SRV_PATH_MAX + 64];
    *out = NULL;
    WS_TRY(path_join(path, sizeof path, dir, WS_SRV_BACKUP_MANIFEST, err));
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
static ws_status manifest_files(const cJSON *m, entries *out, ws_error *err)
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
        if (!cJSON_IsString(p) || !rel_ok(p->valuestring) || !cJSON_IsNumber(n) ||
            n->valuedouble < 0 || !cJSON_IsString(h) || strlen(h->valuestring) != 64)
            return ws_error_set(err, WS_ERR_FORMAT, "the manifest's files[%d] is malformed",
                                out->n);
        entry *e = entries_add(out, p->valuestring);
        if (!e) return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
        e->bytes = (uint64_t)n->valuedouble;
        snprintf(e->sha256, sizeof e->sha256, "%s", h->valuestring);
        db += !strcmp(e->rel, DB_FILE);
    }
    if (db != 1) return ws_error_set(err, WS_ERR_FORMAT, "the manifest names no database");
    return WS_OK;
}

/* The restored database opens and passes its integrity check. */
static ws_status check_restored(const char *data_dir, ws_error *err)
{
    char path[WS_SRV_PATH_MAX + 32];
    WS_TRY(path_join(path, sizeof path, data_dir, DB_FILE, err));
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
    entries want = {0};
    cJSON *m = NULL;
    ws_status s = manifest_read(from, &m, err);
    if (s == WS_OK) s = manifest_files(m, &want, err);
    cJSON_Delete(m);
    target t;
    if (s == WS_OK) s = target_open(&t, data_dir, err);
    if (s != WS_OK) {
        entries_free(&want);
        return s;
    }
    for (int i = 0; s == WS_OK && i < want.n; i++) {
        const entry *w = &want.v[i];
        char src[WS_SRV_PATH_MAX + 128];
        entry got = {0};
        s = path_join(src, sizeof src, from, w->rel, err);
        if (s == WS_OK) s = copy_file(&t, src, w->rel, w->sha256, &got, err);
        if (s == WS_OK && got.bytes != w->bytes)
            s = ws_error_set(err, WS_ERR_FORMAT, "%s: %llu bytes, the manifest says %llu", src,
                             (unsigned long long)got.bytes, (unsigned long long)w->bytes);
        if (s == WS_OK) rep->files++, rep->bytes += got.bytes;
    }
    if (s == WS_OK) s = check_restored(data_dir, err);
    if (s == WS_OK) s = target_sync(&t, err);
    if (s != WS_OK) target_discard(&t);
    entries_free(&t.written);
    entries_free(&want);
    return s;
}
