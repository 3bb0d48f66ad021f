/* files.c — temporary files in <data-dir>/models: a checkpoint posted to
 * POST /v1/models/{name}/import is spooled into one as it arrives, and the
 * shipped default model is written into one before it is loaded. A finished
 * file becomes a checkpoint by ws_srv_file_commit (fsync, rename, fsync of the
 * folder), so a version's path never holds a partial file. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/common/limits.h"
#include "files.h"

ws_status ws_srv_upload_create(const char *data_dir, char *path, size_t cap, int *fd, ws_error *err)
{
    int n = snprintf(path, cap, "%s/models/" WS_SRV_UPLOAD_PREFIX "XXXXXX", data_dir);
    if (n < 0 || (size_t)n >= cap) {
        path[0] = '\0';
        return ws_error_set(err, WS_ERR_INVALID, "data directory path too long");
    }
    *fd = mkstemp(path); /* O_EXCL, mode 0600: a name of our own */
    if (*fd < 0) {
        ws_status s = ws_error_set(err, WS_ERR_IO, "cannot create a file in %s/models: %s",
                                   data_dir, strerror(errno));
        path[0] = '\0';
        return s;
    }
    return WS_OK;
}

ws_status ws_srv_write_all(int fd, const void *buf, size_t n, ws_error *err)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0)
            return ws_error_set(err, WS_ERR_IO, "cannot write: %s",
                                k < 0 ? strerror(errno) : "no progress");
        p += k;
        n -= (size_t)k;
    }
    return WS_OK;
}

ws_status ws_srv_sync_path(const char *path, int flags, ws_error *err)
{
    int fd = open(path, flags | O_CLOEXEC);
    if (fd < 0) return ws_error_set(err, WS_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    int rc = fsync(fd);
    int e = errno;
    if (rc != 0 && e == EINVAL) rc = 0; /* a file system that cannot sync folders */
    if (close(fd) != 0 && rc == 0) rc = -1, e = errno;
    if (rc != 0) return ws_error_set(err, WS_ERR_IO, "cannot sync %s: %s", path, strerror(e));
    return WS_OK;
}

ws_status ws_srv_file_commit(const char *tmp, const char *dst, ws_error *err)
{
    /* mkstemp made it 0600, and so it stays: a checkpoint is the daemon's alone */
    WS_TRY(ws_srv_sync_path(tmp, O_RDONLY, err));
    return ws_srv_file_place(tmp, dst, err);
}

ws_status ws_srv_file_place(const char *tmp, const char *dst, ws_error *err)
{
    if (rename(tmp, dst) != 0)
        return ws_error_set(err, WS_ERR_IO, "cannot rename %s to %s: %s", tmp, dst,
                            strerror(errno));
    char dir[WS_SRV_PATH_MAX + 128];
    snprintf(dir, sizeof dir, "%s", dst);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    return ws_srv_sync_path(slash ? dir : ".", O_RDONLY | O_DIRECTORY, err);
}
