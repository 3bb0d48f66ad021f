/* backup_cmd.c — the commands `worldstated backup` and `worldstated restore`
 * (backup.h): the same backup as POST /v1/admin/backup, from the command line,
 * beside a running daemon or not; and the restore, which only the command
 * does (a daemon never writes a data directory it does not serve). */
#include <stdio.h>

#include "backup.h"

int ws_srv_backup_command(const char *data_dir, const char *to)
{
    ws_error err = {0};
    ws_srv_backup_report r;
    if (ws_srv_backup(data_dir, NULL, to, NULL, NULL, &r, &err) != WS_OK) {
        fprintf(stderr, "worldstated: backup of %s into %s: %s\n", data_dir, to, err.msg);
        return 1;
    }
    printf("backup of %s in %s: %d files, %llu bytes, database schema %d\n", data_dir, to, r.files,
           (unsigned long long)r.bytes, r.schema_version);
    if (r.skipped) /* usually old versions whose files retention removed */
        fprintf(stderr,
                "worldstated: %d recorded version(s) have no intact file in %s and none in the "
                "backup (\"skipped\" in %s/" WS_SRV_BACKUP_MANIFEST " says why)\n",
                r.skipped, data_dir, to);
    return 0;
}

int ws_srv_restore_command(const char *from, const char *data_dir)
{
    ws_error err = {0};
    ws_srv_backup_report r;
    if (ws_srv_restore(from, data_dir, &r, &err) != WS_OK) {
        fprintf(stderr, "worldstated: restore of %s into %s: %s\n", from, data_dir, err.msg);
        return 1;
    }
    printf("restored %s into %s: %d files, %llu bytes, every checksum and the database's "
           "integrity check ok; start it with worldstated --data-dir %s\n",
           from, data_dir, r.files, (unsigned long long)r.bytes, data_dir);
    return 0;
}
