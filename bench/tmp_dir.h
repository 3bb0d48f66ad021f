/* tmp_dir.h — removing a benchmark's temporary data dir (its SQLite file,
 * checkpoints, daemon logs: tens of MB a run) when the benchmark is done. */
#ifndef WS_BENCH_TMP_DIR_H
#define WS_BENCH_TMP_DIR_H

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Removes path and all it holds; a symbolic link is removed, never followed.
 * 0 or -1 (what could be removed is). */
static inline int tmp_dir_remove_tree(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) != 0) return -1;
    if (!S_ISDIR(sb.st_mode)) return unlink(path);
    DIR *d = opendir(path);
    if (!d) return -1;
    int rc = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char child[4096];
        if (snprintf(child, sizeof child, "%s/%s", path, e->d_name) >= (int)sizeof child ||
            tmp_dir_remove_tree(child) != 0)
            rc = -1;
    }
    closedir(d);
    return rmdir(path) == 0 ? rc : -1;
}

/* The same, saying so on stderr, naming `who`, when path stays. */
static inline int tmp_dir_remove(const char *who, const char *path)
{
    if (tmp_dir_remove_tree(path) == 0) return 0;
    fprintf(stderr, "%s: could not remove %s\n", who, path);
    return -1;
}

#endif
