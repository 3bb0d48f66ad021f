/* db_damage.c — a damaged page and a full disk for the storage-error tests. */
#include "db_damage.h"

#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "test_util.h"

void ws_test_corrupt_root(const char *path, const char *name)
{
    sqlite3 *h = NULL;
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_open(path, &h), SQLITE_OK);
    assert_int_equal(sqlite3_exec(h, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(h,
                                        "SELECT rootpage, (SELECT page_size FROM pragma_page_size)"
                                        " FROM sqlite_master WHERE name = ?",
                                        -1, &st, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    long page = (long)sqlite3_column_int64(st, 0), size = (long)sqlite3_column_int64(st, 1);
    assert_int_equal(sqlite3_finalize(st), SQLITE_OK);
    assert_int_equal(sqlite3_close(h), SQLITE_OK);
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    char junk[512];
    memset(junk, 0x5a, sizeof junk); /* not a b-tree page type */
    assert_int_equal(fseek(f, (page - 1) * size, SEEK_SET), 0);
    assert_int_equal(fwrite(junk, 1, sizeof junk, f), sizeof junk);
    assert_int_equal(fclose(f), 0);
}

void ws_test_file_limit(unsigned long bytes)
{
    static struct rlimit saved;
    static int have;
    if (!have) {
        assert_int_equal(getrlimit(RLIMIT_FSIZE, &saved), 0);
        have = 1;
    }
    struct rlimit lim = saved;
    if (bytes) lim.rlim_cur = bytes;
    /* the default action of SIGXFSZ kills; ignored, the write fails with EFBIG */
    assert_true(signal(SIGXFSZ, SIG_IGN) != SIG_ERR);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
}
