/* daemon_proc.h — a worldstated child process for the benchmarks: started on a
 * data dir with extra flags, found by its "listening on" line, stopped with a
 * signal. It dies with the benchmark (PR_SET_PDEATHSIG). */
#ifndef WS_DAEMON_PROC_H
#define WS_DAEMON_PROC_H

#include <sys/types.h>

typedef struct {
    pid_t pid;
    int port;
} daemon_proc;

/* path: the daemon binary; extra: NULL-terminated flags after --data-dir and
 * --listen (may be NULL). Its output is appended to <dir>.log, so a restart on
 * the same dir keeps the earlier runs' lines. 0, or -1 when it exited or did
 * not start listening within 60 s (then it is killed). */
int daemon_start(daemon_proc *d, const char *path, const char *dir, const char *const *extra);
/* Sends sig and waits for the exit: the exit status, 128 + the signal that
 * ended it, or -1 when there was no daemon. */
int daemon_signal(daemon_proc *d, int sig);
void daemon_stop(daemon_proc *d);

/* A loopback port free now (bound, read, closed), for a process that must be
 * told its port: HAProxy. -1 when none could be had. */
int daemon_free_port(void);
/* HAProxy (from PATH) on the shipped cluster config cfg (deploy/haproxy/
 * worldstate.cfg), listening on 127.0.0.1:port, in front of n <= 3 nodes on
 * loopback node_ports (the config's other nodes name a port nothing listens
 * on), its output appended to log; it dies with the caller. Its pid, or -1. */
pid_t daemon_haproxy_start(const char *cfg, int port, const int *node_ports, int n, const char *log);

#endif
