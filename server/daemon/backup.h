/* backup.h — an online backup of a whole data directory, and its restore
 * (backup.c, restore.c): `worldstated backup|restore` (backup_cmd.c) and
 * POST /v1/admin/backup (routes_admin.c).
 *
 * A backup is a directory that is itself a data directory:
 *   worldstate.db                      the database as of one commit (ws_store_backup)
 *   models/<name>-v<N>.safetensors     every checkpoint the copy's versions record
 *   backup-manifest.json               written last: its presence means complete
 * The manifest names every file with its size and SHA-256, the database's
 * schema version and the files left out (a version whose checkpoint is
 * missing or damaged in the source: retention removes old versions' files).
 * The database is copied first, then the files its own version rows name: a
 * checkpoint is never rewritten once recorded, so the files copied after the
 * snapshot are the ones it records, each checked against its recorded SHA-256.
 * Everything is created 0700 / 0600: a backup holds API key hashes and every
 * session's log. */
#ifndef WS_SRV_BACKUP_H
#define WS_SRV_BACKUP_H

#include <stdint.h>

#include "base/ws_status.h"

#define WS_SRV_BACKUP_MANIFEST "backup-manifest.json"
#define WS_SRV_BACKUP_FORMAT   "worldstate-backup"

typedef struct {
    int64_t db_pages_done, db_pages_total; /* the database copy's progress */
    int files;                             /* files written, the database included */
    uint64_t bytes;                        /* their bytes */
    int skipped;                           /* checkpoints left out (the manifest says why) */
    int schema_version;                    /* of the database copied */
} ws_srv_backup_report;

/* Called after each step of the database copy and after each file, with the
 * report so far; a status other than WS_OK (with its message in err) stops the
 * backup, which then removes what it wrote. */
typedef ws_status (*ws_srv_backup_fn)(void *ctx, const ws_srv_backup_report *r, ws_error *err);

/* Backs up data_dir into dest, which must not exist or be an empty directory
 * (WS_ERR_CONFLICT otherwise); a daemon may be serving data_dir meanwhile.
 * db is the database's location (storage.h; NULL: <data_dir>/worldstate.db):
 * a backend that cannot copy itself into a file gives WS_ERR_UNSUPPORTED.
 * fn may be NULL. On failure dest is left as it was found. */
ws_status ws_srv_backup(const char *data_dir, const char *db, const char *dest, ws_srv_backup_fn fn,
                        void *ctx, ws_srv_backup_report *rep, ws_error *err);

/* Restores the backup `from` into data_dir, which must not exist or be an
 * empty directory (WS_ERR_CONFLICT otherwise): checks the manifest (format,
 * a schema this build opens), copies every file it names while checking its
 * size and SHA-256 (WS_ERR_FORMAT naming the first that differs), then opens
 * the restored database and runs its integrity check. On failure data_dir is
 * left as it was found. rep gets the files and bytes restored. */
ws_status ws_srv_restore(const char *from, const char *data_dir, ws_srv_backup_report *rep,
                         ws_error *err);

/* `worldstated backup --data-dir D --to DIR` and `worldstated restore --from
 * DIR --data-dir D` (backup_cmd.c): run one, print what it did (stdout) or why
 * not (stderr); the exit status. */
int ws_srv_backup_command(const char *data_dir, const char *to);
int ws_srv_restore_command(const char *from, const char *data_dir);

/* Shutdown (routes_admin.c): stops a backup that POST /v1/admin/backup
 * started, which removes its partial copy, and waits for its thread. */
void ws_srv_backup_stop(void);

#endif
