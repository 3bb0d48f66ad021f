/* test_server_files.c — what worldstated ($WS_DAEMON) creates in its data
 * directory is its user's alone: the directory 0700 when the daemon creates it,
 * every file in it 0600 (the database, its -wal and -shm, the lock, the
 * checkpoint of the default model), whatever the umask it was started with; a
 * directory that others may read gets a warning at start. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "test_server_util.h"

/* Every file under dir (recursively) has no bit for group or others; returns
 * how many files it saw, and the names it saw into seen (space-separated). */
static int files_private(const char *dir, char *seen, size_t cap)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat sb;
        assert_int_equal(stat(path, &sb), 0);
        if ((sb.st_mode & 077) != 0) fail_msg("%s has mode %04o", path, (unsigned)(sb.st_mode & 07777));
        if (S_ISDIR(sb.st_mode)) {
            n += files_private(path, seen, cap);
            continue;
        }
        snprintf(seen + strlen(seen), cap - strlen(seen), "%s ", e->d_name);
        n++;
    }
    closedir(d);
    return n;
}

static int log_has(const char *log, const char *what)
{
    FILE *f = fopen(log, "r");
    assert_non_null(f);
    char line[1024];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) found = strstr(line, what) != NULL;
    fclose(f);
    return found;
}

/* One step, so that the WAL and its index exist. */
static void step_once(const ws_ts_daemon *d)
{
    char id[33], path[128];
    assert_int_equal(ws_ts_session(d, NULL, "default", id), 201);
    ws_ts_resp r;
    assert_int_equal(ws_ts_req(d, "POST", ws_ts_spath(path, sizeof path, id, "/steps"), NULL,
                               "{\"instructions\":[{\"fact\":[\"a\",\"b\"],\"value\":true}],"
                               "\"queries\":[{\"fact\":[\"a\",\"b\"]}]}",
                               &r),
                     200);
    ws_ts_resp_free(&r);
}

/* A data directory the daemon creates: 0700, every file 0600, with the umask
 * of a usual shell (022) around it. */
static void test_fresh_data_dir_is_private(void **state)
{
    (void)state;
    char top[256], dir[300], seen[2048] = "";
    ws_ts_tmpdir(top, sizeof top);
    snprintf(dir, sizeof dir, "%s/data", top);
    mode_t old = umask(022); /* inherited by the daemon */
    ws_ts_daemon d;
    int started = ws_ts_start(&d, dir, NULL);
    umask(old);
    assert_int_equal(started, 0);
    step_once(&d);
    struct stat sb;
    assert_int_equal(stat(dir, &sb), 0);
    assert_int_equal(sb.st_mode & 07777, 0700);
    /* while it runs: the database, -wal, -shm, the lock, the model's checkpoint */
    int n = files_private(dir, seen, sizeof seen);
    assert_true(n >= 4);
    assert_non_null(strstr(seen, "worldstate.db "));
    assert_non_null(strstr(seen, "worldstate.db-wal "));
    assert_non_null(strstr(seen, "worldstate.db-shm "));
    assert_non_null(strstr(seen, ".safetensors "));
    assert_false(log_has(d.log, "warn data directory"));
    assert_int_equal(ws_ts_stop(&d), 0);
    seen[0] = '\0';
    files_private(dir, seen, sizeof seen);
    ws_ts_cleanup(top);
}

/* A directory made beforehand with mode 0755: a warning at start, and the
 * files the daemon makes in it are 0600 all the same. */
static void test_open_data_dir_warns(void **state)
{
    (void)state;
    char dir[256], seen[2048] = "";
    ws_ts_tmpdir(dir, sizeof dir);
    assert_int_equal(chmod(dir, 0755), 0);
    ws_ts_daemon d;
    assert_int_equal(ws_ts_start(&d, dir, NULL), 0);
    step_once(&d);
    assert_true(log_has(d.log, "warn data directory"));
    assert_true(log_has(d.log, "mode 0755"));
    assert_int_equal(ws_ts_stop(&d), 0);
    /* the top directory is the user's choice (0755); the files in it are not */
    assert_int_equal(chmod(dir, 0700), 0);
    assert_true(files_private(dir, seen, sizeof seen) >= 2);
    assert_non_null(strstr(seen, "worldstate.db "));
    ws_ts_cleanup(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fresh_data_dir_is_private),
        cmocka_unit_test(test_open_data_dir_warns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
