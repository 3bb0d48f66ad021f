/* tmp_dir.h — removing a benchmark's temporary data dir (its SQLite file,
 * checkpoints, daemon logs: tens of MB a run) when the benchmark is done. */
#ifndef WS_BENCH_TMP_DIR_H
#define WS_BENCH_TMP_DIR_H

#include <stdio.h>

#include "base/ws_rm_tree.h"

/* ws_rm_tree, saying so on stderr, naming `who`, when path stays. */
static inline int tmp_dir_remove(const char *who, const char *path)
{
    if (ws_rm_tree(path) == 0) return 0;
    fprintf(stderr, "%s: could not remove %s\n", who, path);
    return -1;
}

#endif
