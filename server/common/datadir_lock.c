/* datadir_lock.c — one process at a time owns a data directory's sessions:
 * worldstated while it serves (it reads a session's state, computes, and writes
 * the next one), worldstate-train rederive while it rewrites states. An
 * advisory lock (flock) on <data-dir>/worldstated.lock says who; the kernel
 * drops it when the holder exits, however it exits, so a crash never leaves a
 * stale lock behind. Readers (export) and version publishers (retrain) need
 * no lock: SQLite orders their writes. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "common.h"

ws_status ws_srv_datadir_lock(const char *data_dir, const char *who, int *fd_out, ws_error *err)
{
    char path[WS_SRV_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/worldstated.lock", data_dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return ws_error_set(err, WS_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int busy = errno == EWOULDBLOCK;
        ws_status s =
            busy ? ws_error_set(err, WS_ERR_CONFLICT,
                                "%s is in use by another process (a running worldstated, or "
                                "worldstate-train rederive): %s needs it alone",
                                data_dir, who)
                 : ws_error_set(err, WS_ERR_IO, "cannot lock %s: %s", path, strerror(errno));
        close(fd);
        return s;
    }
    *fd_out = fd;
    return WS_OK;
}
