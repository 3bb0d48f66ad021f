/* backup.c — the online backup of a SQLite database into a new file
 * (ws_store_backup, storage.h) through SQLite's backup API.
 *
 * sqlite3_backup_step opens a read transaction of its own for each step and
 * starts over whenever another connection committed since the previous one,
 * so under a steady stream of writes a copy made in steps would never finish.
 * Held across all the steps, one read transaction of the source connection
 * fixes the snapshot instead: every step copies pages of the same commit, and
 * in WAL mode the writers go on meanwhile (they append to the WAL). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sqlite_internal.h"

/* Opens the read transaction that fixes the copy's snapshot: BEGIN alone
 * takes no snapshot, the first read does. */
static ws_status snapshot_begin(ws_sqlite *s, ws_error *err)
{
    int rc = sqlite3_exec(s->db, "BEGIN; SELECT count(*) FROM sqlite_master", NULL, NULL, NULL);
    if (rc == SQLITE_OK) return WS_OK;
    ws_status r = ws_sqlite__sqlfail(s, rc, err, "storage: backup: starting the read snapshot");
    if (!sqlite3_get_autocommit(s->db)) (void)sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
    return r;
}

/* Removes what a failed backup wrote: the file and its rollback journal. */
static void discard(const char *dest)
{
    char journal[4096];
    (void)unlink(dest);
    if (snprintf(journal, sizeof journal, "%s-journal", dest) < (int)sizeof journal)
        (void)unlink(journal);
}

/* The copy itself, step by step, from s (inside its snapshot) into dst. */
static ws_status copy_steps(ws_sqlite *s, sqlite3 *dst, const char *dest, int step_pages,
                            ws_store_backup_fn fn, void *ctx, ws_error *err)
{
    char what[160];
    snprintf(what, sizeof what, "storage: backup into %s", dest);
    sqlite3_backup *b = sqlite3_backup_init(dst, "main", s->db, "main");
    if (!b) return ws_sqlite__sqlfail(NULL, sqlite3_extended_errcode(dst), err, what);
    ws_status r = WS_OK;
    /* Neither side should be locked (the source is read in its snapshot, the
     * copy is a file of our own), but a lock is waited out as writers wait. */
    int waited_ms = 0, rc;
    do {
        rc = sqlite3_backup_step(b, step_pages);
        if ((rc == SQLITE_BUSY || rc == SQLITE_LOCKED) && waited_ms < WS_STORE_BUSY_TIMEOUT_MS) {
            sqlite3_sleep(10);
            waited_ms += 10;
            continue;
        }
        if (rc != SQLITE_OK && rc != SQLITE_DONE) break;
        int total = sqlite3_backup_pagecount(b);
        r = fn(ctx, total - sqlite3_backup_remaining(b), total);
    } while (r == WS_OK && rc != SQLITE_DONE);
    int fin = sqlite3_backup_finish(b); /* repeats a step's error */
    if (r != WS_OK) return r;
    if (rc != SQLITE_DONE) return ws_sqlite__sqlfail(NULL, rc, err, what);
    if (fin != SQLITE_OK) return ws_sqlite__sqlfail(NULL, fin, err, what);
    return WS_OK;
}

ws_status ws_sqlite_backup(ws_store *store, const char *dest, int step_pages,
                           ws_store_backup_fn fn, void *ctx, ws_error *err)
{
    ws_sqlite *s = ws_sqlite_of(store);
    /* Created here, exclusively and 0600 (it holds key hashes and every
     * session's log), so that no existing file is ever overwritten. */
    int fd = open(dest, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST)
        return ws_error_set(err, WS_ERR_CONFLICT, "storage: backup: %s exists", dest);
    if (fd < 0)
        return ws_error_set(err, WS_ERR_IO, "storage: backup: cannot create %s: %s", dest,
                            strerror(errno));
    if (close(fd) != 0) {
        ws_status r = ws_error_set(err, WS_ERR_IO, "storage: backup: %s: %s", dest,
                                   strerror(errno));
        discard(dest);
        return r;
    }
    sqlite3 *dst = NULL;
    int rc = sqlite3_open_v2(dest, &dst, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    /* synchronous=FULL: the copy's one commit is on disk before WS_OK. */
    if (rc == SQLITE_OK) rc = sqlite3_exec(dst, "PRAGMA synchronous = FULL", NULL, NULL, NULL);
    ws_status r = rc == SQLITE_OK ? WS_OK
                                  : ws_sqlite__sqlfail(NULL, rc, err, "storage: backup: opening "
                                                                      "the copy");
    if (r == WS_OK) r = snapshot_begin(s, err);
    if (r == WS_OK) {
        r = copy_steps(s, dst, dest, step_pages, fn, ctx, err);
        (void)sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL); /* ends a read: cannot fail */
    }
    rc = sqlite3_close(dst); /* no statement of ours is left open on it */
    if (r == WS_OK && rc != SQLITE_OK)
        r = ws_sqlite__sqlfail(NULL, rc, err, "storage: backup: closing the copy");
    if (r != WS_OK) discard(dest);
    return r;
}
