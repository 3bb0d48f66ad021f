/* backup_files.h — what the backup (backup.c) and the restore (restore.c)
 * share: lists of files with their sizes and SHA-256, the paths a backup may
 * hold, and the target directory they write, file by file, checksumming as
 * they copy, and remove again when they fail. Not for other modules. */
#ifndef WS_SRV_BACKUP_FILES_H
#define WS_SRV_BACKUP_FILES_H

#include <stddef.h>
#include <stdint.h>

#include "base/ws_status.h"

#define WS_BK_DB_FILE "worldstate.db" /* the database, in a data directory and a backup */

typedef struct {
    char *rel; /* path relative to the data directory */
    uint64_t bytes;
    char sha256[65];
    char *why; /* a skipped file: why (the manifest's "skipped") */
} ws_bk_entry;

typedef struct {
    ws_bk_entry *v;
    int n, cap;
} ws_bk_entries;

void ws_bk_entries_free(ws_bk_entries *e);
/* A new zeroed entry for rel (copied); NULL when out of memory. */
ws_bk_entry *ws_bk_entries_add(ws_bk_entries *e, const char *rel);

/* 1 for a path inside a data directory that a backup may hold: the database,
 * or a file directly in models/ (never an absolute path, a '..' or a
 * subfolder: a manifest or a version row cannot make a copy land outside its
 * target). */
int ws_bk_rel_ok(const char *rel);
/* dir/rel into out[cap]; WS_ERR_INVALID when it does not fit. */
ws_status ws_bk_path_join(char *out, size_t cap, const char *dir, const char *rel, ws_error *err);

/* The directory a backup or a restore writes. */
typedef struct {
    const char *dir;
    int made;              /* 1: the directory is ours (removed on failure), 0: it was empty */
    ws_bk_entries written; /* files created in it so far */
} ws_bk_target;

/* dir, made 0700 or found empty (else WS_ERR_CONFLICT), with a models/ folder
 * of ours. */
ws_status ws_bk_target_open(ws_bk_target *t, const char *dir, ws_error *err);
/* Undoes ws_bk_target_open and every file written since (a failed run). */
void ws_bk_target_discard(ws_bk_target *t);
/* The target's folders synced: the names of everything written are durable. */
ws_status ws_bk_target_sync(const ws_bk_target *t, ws_error *err);
/* Copies src to the new file t->dir/rel (0600, synced), its SHA-256 and size
 * into got. A missing src is WS_ERR_NOTFOUND, and nothing is created; a copy
 * whose SHA-256 is not expect (64 hex digits; NULL or "": anything goes) is
 * WS_ERR_FORMAT, and removed. */
ws_status ws_bk_copy_file(ws_bk_target *t, const char *src, const char *rel, const char *expect,
                          ws_bk_entry *got, ws_error *err);

#endif
