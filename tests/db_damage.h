/* db_damage.h — what an outside process or a failing disk does to a SQLite
 * database, for the tests of how storage and the daemon answer it. */
#ifndef WS_TEST_DB_DAMAGE_H
#define WS_TEST_DB_DAMAGE_H

/* Overwrites the first bytes of the root page of table or index `name` in the
 * database file at path with junk (after checkpointing the WAL into the file,
 * so that the damage is what readers see). Nothing else may have it open.
 * Fails the test on any error. */
void ws_test_corrupt_root(const char *path, const char *name);

/* Limits every file this process (and what it starts) writes to `bytes`
 * (RLIMIT_FSIZE, SIGXFSZ ignored): a write past it fails as on a full disk,
 * even as root. bytes 0 restores the limit found on the first call. */
void ws_test_file_limit(unsigned long bytes);

#endif
