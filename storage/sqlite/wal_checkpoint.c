/* wal_checkpoint.c — WAL checkpoints off the committing thread.
 *
 * SQLite's automatic checkpoint runs inside the COMMIT that takes the WAL past
 * 1000 pages, on the committing thread, and copies pages into the database file
 * and syncs it there: under the engine's group commits one step in a few hundred
 * waited 10-70 ms for it (issue 15, one session's p99). Every connection turns
 * that off (its own WAL hook replaces SQLite's) and, past WS_SQLITE_CKPT_PAGES,
 * starts a thread that runs a PASSIVE checkpoint on a connection of its own: it
 * never waits for writers or readers nor blocks them, and syncs as SQLite's own
 * does, so what a commit promises (storage.h) is unchanged. One such thread at a
 * time per connection, joined before the next and at close, and one per
 * WS_SQLITE_CKPT_PAGES the WAL grew. SQLite's own hook checkpoints after every
 * commit while the WAL is past its threshold, which on the committing thread
 * leaves the WAL wholly copied when the next write begins, so that write starts
 * it over; beside the commits it seldom is, and a thread per commit went on:
 * with one client, 4,484 threads in 4 s (a third of the commits), each syncing
 * the database file; one per 1,000 pages: 68, and 4 catch-ups (below). The
 * daemon's steps per CPU second went from 2,153 to 3,344, one client's p50
 * from 0.39 to 0.28 ms (bench_server --default-model --clients 1; 64 clients:
 * the same steps/s, 198 threads in 4 s before). The first opens
 * that checkpoint connection and the later ones reuse it: under steady steps a
 * checkpoint is due a few times a second, and opening a connection (reading
 * the schema) each time cost as much as the checkpoint (perf, issue 15).
 *
 * SQLite starts a WAL over only when a write begins with every frame of it
 * copied, and a checkpoint running beside the commits is seldom done when the
 * next one begins: under steady steps the WAL grew by some 60% of all that was
 * written (test_wal_bounded: 110 MB after 192 MB of states; the daemon's at 8
 * clients, 154 MB within 45 s). So past
 * WS_SQLITE_WAL_MAX_PAGES the committing thread, between two of its commits,
 * copies what the thread left and starts the WAL over itself (RESTART: the
 * file is written again from its start, not shrunk), without waiting for
 * anyone: with no busy handler, a reader still in the WAL makes it a passive
 * checkpoint, tried again when the WAL has grown by another
 * WS_SQLITE_CKPT_PAGES. */
#include <pthread.h>

#include "base/ws_thread_name.h"
#include "sqlite_internal.h"

#define WS_SQLITE_CKPT_PAGES 1000 /* SQLite's own threshold */
/* 64 MB of 4 KB pages: at 16 MB the catching up took 8-13% of the steps/s of
 * 60 clients (bench_server); at 64 MB no loss stood out of the noise */
#define WS_SQLITE_WAL_MAX_PAGES (16 * WS_SQLITE_CKPT_PAGES)

enum { CKPT_NONE, CKPT_RUNNING, CKPT_DONE }; /* DONE: finished, not joined yet */

static void *ckpt_main(void *arg)
{
    ws_sqlite *s = arg;
    ws_thread_name("ws-checkpoint");
    /* A new connection finds the WAL on its first read: until then it would
     * checkpoint nothing ("not in WAL mode"). Not opened: the next thread tries
     * again. Busy (another checkpoint, a reader at the WAL's end): the next one
     * catches up. */
    if (!s->ckpt_db &&
        (sqlite3_open_v2(s->ckpt_path, &s->ckpt_db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                         NULL) != SQLITE_OK ||
         sqlite3_exec(s->ckpt_db, "PRAGMA journal_mode", NULL, NULL, NULL) != SQLITE_OK)) {
        (void)sqlite3_close(s->ckpt_db); /* never the last connection: the WAL stays */
        s->ckpt_db = NULL;
    }
    if (s->ckpt_db)
        (void)sqlite3_wal_checkpoint_v2(s->ckpt_db, "main", SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    atomic_store(&s->ckpt_state, CKPT_DONE);
    return NULL;
}

/* The WAL copied and started over on the committing thread (see the top). */
static void catch_up(sqlite3 *db, const char *name)
{
    (void)sqlite3_busy_timeout(db, 0);
    (void)sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_RESTART, NULL, NULL);
    (void)sqlite3_busy_timeout(db, WS_STORE_BUSY_TIMEOUT_MS);
}

/* Runs after every commit on s's connection, with the WAL's size in pages. */
static int wal_hook(void *arg, sqlite3 *db, const char *name, int pages)
{
    ws_sqlite *s = arg;
    if (pages < WS_SQLITE_CKPT_PAGES || atomic_load(&s->ckpt_state) == CKPT_RUNNING)
        return SQLITE_OK;
    /* the WAL grown by CKPT_PAGES since the last checkpoint began, or started over */
    if (pages >= s->ckpt_at && pages < s->ckpt_at + WS_SQLITE_CKPT_PAGES) return SQLITE_OK;
    ws_sqlite__ckpt_join(s);
    s->ckpt_at = pages;
    if (pages >= WS_SQLITE_WAL_MAX_PAGES) {
        catch_up(db, name);
        return SQLITE_OK;
    }
    atomic_store(&s->ckpt_state, CKPT_RUNNING);
    if (pthread_create(&s->ckpt_thread, NULL, ckpt_main, s) != 0) {
        atomic_store(&s->ckpt_state, CKPT_NONE);
        /* no thread to be had: here, as SQLite would */
        (void)sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    }
    return SQLITE_OK;
}

void ws_sqlite__ckpt_init(ws_sqlite *s)
{
    /* the file name stays valid while the connection is open, which outlasts the thread */
    s->ckpt_path = sqlite3_db_filename(s->db, "main");
    if (s->ckpt_path && *s->ckpt_path) sqlite3_wal_hook(s->db, wal_hook, s);
}

void ws_sqlite__ckpt_join(ws_sqlite *s)
{
    if (atomic_load(&s->ckpt_state) != CKPT_NONE) pthread_join(s->ckpt_thread, NULL);
    atomic_store(&s->ckpt_state, CKPT_NONE);
}

void ws_sqlite__ckpt_stop(ws_sqlite *s)
{
    ws_sqlite__ckpt_join(s);
    (void)sqlite3_close(s->ckpt_db); /* before s->db: that one stays the last, which
                                        checkpoints and removes the WAL */
    s->ckpt_db = NULL;
}
