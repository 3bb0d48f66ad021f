/* daemon_proc.h — a worldstated child process for the benchmarks: started on a
 * data dir with extra flags, found by its "listening on" line, stopped with
 * SIGTERM. It dies with the benchmark (PR_SET_PDEATHSIG). */
#ifndef WS_DAEMON_PROC_H
#define WS_DAEMON_PROC_H

#include <sys/types.h>

typedef struct {
    pid_t pid;
    int port;
} daemon_proc;

/* path: the daemon binary; extra: NULL-terminated flags after --data-dir and
 * --listen (may be NULL). Its output goes to <dir>.log. 0, or -1 when it did not
 * start listening within 60 s. */
int daemon_start(daemon_proc *d, const char *path, const char *dir, const char *const *extra);
void daemon_stop(daemon_proc *d);

#endif
