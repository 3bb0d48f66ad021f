/* files.h — files in <data-dir>/models (files.c): the temporary files that
 * checkpoints arrive in (an import's body, the shipped default model) and
 * their durable rename into place. The daemon's HTTP edge spools into them
 * too, so this header is part of the engine's interface. */
#ifndef WS_ENGINE_FILES_H
#define WS_ENGINE_FILES_H

#include <stddef.h>

#include "base/ws_status.h"

#define WS_SRV_UPLOAD_PREFIX ".upload-" /* temporary files: removed at start */
/* A new empty temporary file <data-dir>/models/.upload-XXXXXX (mode 0600),
 * open for writing; its path into path[cap]. */
ws_status ws_srv_upload_create(const char *data_dir, char *path, size_t cap, int *fd,
                               ws_error *err);
/* Writes all of buf[0..n) to fd (retrying short writes); errno on failure. */
ws_status ws_srv_write_all(int fd, const void *buf, size_t n, ws_error *err);
/* fsync of path: a file (flags O_RDONLY), or a folder (O_RDONLY | O_DIRECTORY:
 * the names created or renamed in it; a file system that cannot sync folders
 * passes). */
ws_status ws_srv_sync_path(const char *path, int flags, ws_error *err);
/* Makes the finished temporary file tmp durable under the name dst: fsync,
 * rename, fsync of the folder (a crash leaves the old dst or the whole new one). */
ws_status ws_srv_file_commit(const char *tmp, const char *dst, ws_error *err);
/* The same for a tmp its writer already synced: rename, fsync of the folder. */
ws_status ws_srv_file_place(const char *tmp, const char *dst, ws_error *err);

#endif
