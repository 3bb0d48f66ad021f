/* backup_files.c — the files of a backup or a restore (backup_files.h): lists
 * of them, their paths, and the target directory they are copied into. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backup_files.h"
#include "server/common/limits.h"
#include "server/engine/files.h"
#include "storage/sha256.h"

void ws_bk_entries_free(ws_bk_entries *e)
{
    for (int i = 0; i < e->n; i++) free(e->v[i].rel), free(e->v[i].why);
    free(e->v);
    memset(e, 0, sizeof *e);
}

ws_bk_entry *ws_bk_entries_add(ws_bk_entries *e, const char *rel)
{
    if (e->n == e->cap) {
        int cap = e->cap ? 2 * e->cap : 16;
        ws_bk_entry *v = realloc(e->v, sizeof *v * (size_t)cap);
        if (!v) return NULL;
        e->v = v, e->cap = cap;
    }
    ws_bk_entry *x = &e->v[e->n];
    memset(x, 0, sizeof *x);
    if (!(x->rel = strdup(rel))) return NULL;
    e->n++;
    return x;
}

int ws_bk_rel_ok(const char *rel)
{
    if (!strcmp(rel, WS_BK_DB_FILE)) return 1;
    if (strncmp(rel, "models/", 7) != 0) return 0;
    const char *f = rel + 7;
    return *f && !strchr(f, '/') && strcmp(f, ".") && strcmp(f, "..");
}

ws_status ws_bk_path_join(char *out, size_t cap, const char *dir, const char *rel, ws_error *err)
{
    int n = snprintf(out, cap, "%s/%s", dir, rel);
    if (n < 0 || (size_t)n >= cap)
        return ws_error_set(err, WS_ERR_INVALID, "path too long: %s/%s", dir, rel);
    return WS_OK;
}

ws_status ws_bk_target_open(ws_bk_target *t, const char *dir, ws_error *err)
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
    ws_status s = ws_bk_path_join(models, sizeof models, dir, "models", err);
    if (s == WS_OK && mkdir(models, 0700) != 0)
        s = ws_error_set(err, WS_ERR_IO, "cannot create %s: %s", models, strerror(errno));
    if (s != WS_OK && t->made) (void)rmdir(dir);
    return s;
}

void ws_bk_target_discard(ws_bk_target *t)
{
    char p[WS_SRV_PATH_MAX + 128];
    for (int i = t->written.n - 1; i >= 0; i--)
        if (ws_bk_path_join(p, sizeof p, t->dir, t->written.v[i].rel, NULL) == WS_OK)
            (void)unlink(p);
    if (ws_bk_path_join(p, sizeof p, t->dir, "models", NULL) == WS_OK) (void)rmdir(p);
    if (t->made) (void)rmdir(t->dir);
}

ws_status ws_bk_target_sync(const ws_bk_target *t, ws_error *err)
{
    char models[WS_SRV_PATH_MAX + 16];
    WS_TRY(ws_bk_path_join(models, sizeof models, t->dir, "models", err));
    WS_TRY(ws_srv_sync_path(models, O_RDONLY | O_DIRECTORY, err));
    return ws_srv_sync_path(t->dir, O_RDONLY | O_DIRECTORY, err);
}

ws_status ws_bk_copy_file(ws_bk_target *t, const char *src, const char *rel, const char *expect,
                          ws_bk_entry *got, ws_error *err)
{
    char dst[WS_SRV_PATH_MAX + 128];
    WS_TRY(ws_bk_path_join(dst, sizeof dst, t->dir, rel, err));
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
    if (s == WS_OK && !ws_bk_entries_add(&t->written, rel))
        s = ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    if (s != WS_OK) (void)unlink(dst);
    return s;
}
