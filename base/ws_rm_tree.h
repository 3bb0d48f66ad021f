/* ws_rm_tree.h — removing a folder and all it holds: the scratch folders of the
 * tests and the temporary data dirs of the benchmarks (one implementation for
 * both). */
#ifndef WS_RM_TREE_H
#define WS_RM_TREE_H

/* Removes path and, for a folder, everything below it; a symbolic link is
 * removed, never followed. 0 when done or when path does not exist; -1 when
 * something stays (errno set; what could be removed is). */
int ws_rm_tree(const char *path);

#endif
