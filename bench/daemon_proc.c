/* daemon_proc.c — a worldstated child process for the benchmarks. */
#include "daemon_proc.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

int daemon_start(daemon_proc *d, const char *path, const char *dir, const char *const *extra)
{
    char log[320];
    snprintf(log, sizeof log, "%.300s.log", dir);
    const char *argv[40] = {path, "--data-dir", dir, "--listen", "127.0.0.1:0"};
    int n = 5;
    for (int i = 0; extra && extra[i] && n < 39; i++) argv[n++] = extra[i];
    argv[n] = NULL;
    /* Only this start's lines name its port: an earlier run's are skipped. */
    struct stat sb;
    long from = stat(log, &sb) == 0 ? (long)sb.st_size : 0;
    fflush(stdout);
    d->pid = fork();
    if (d->pid < 0) return -1;
    if (d->pid == 0) {
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) _exit(127); /* never outlive the benchmark */
        if (!freopen(log, "a", stdout) || !freopen(log, "a", stderr)) _exit(127);
        execv(path, (char *const *)argv);
        _exit(127);
    }
    d->port = 0;
    for (int i = 0; i < 600 && !d->port; i++) {
        usleep(100000);
        FILE *f = fopen(log, "r");
        char line[512];
        if (f && fseek(f, from, SEEK_SET) != 0) {
            fclose(f);
            f = NULL;
        }
        while (f && fgets(line, sizeof line, f)) {
            const char *p = strstr(line, "listening on http://127.0.0.1:");
            if (p) d->port = atoi(p + strlen("listening on http://127.0.0.1:"));
        }
        if (f) fclose(f);
        if (!d->port && waitpid(d->pid, NULL, WNOHANG) == d->pid) {
            d->pid = 0; /* it exited: the log says why */
            return -1;
        }
    }
    if (!d->port) daemon_signal(d, SIGKILL);
    return d->port ? 0 : -1;
}

int daemon_signal(daemon_proc *d, int sig)
{
    if (d->pid <= 0) return -1;
    kill(d->pid, sig);
    int status = 0;
    pid_t got = waitpid(d->pid, &status, 0);
    d->pid = 0;
    if (got < 0) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void daemon_stop(daemon_proc *d)
{
    daemon_signal(d, SIGTERM);
}
