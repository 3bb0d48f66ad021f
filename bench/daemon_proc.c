/* daemon_proc.c — a worldstated child process for the benchmarks. */
#include "daemon_proc.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
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

int daemon_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    return port;
}

pid_t daemon_haproxy_start(const char *cfg, int port, const int *node_ports, int n, const char *log)
{
    char env[4][32];
    snprintf(env[0], sizeof env[0], "127.0.0.1:%d", port);
    for (int i = 0; i < 3; i++) /* port 1: nothing listens there, the node is just down */
        snprintf(env[i + 1], sizeof env[i + 1], "127.0.0.1:%d", i < n ? node_ports[i] : 1);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || !freopen(log, "a", stdout) ||
            !freopen(log, "a", stderr))
            _exit(127);
        setenv("WS_LISTEN", env[0], 1);
        setenv("WS_NODE1", env[1], 1);
        setenv("WS_NODE2", env[2], 1);
        setenv("WS_NODE3", env[3], 1);
        execlp("haproxy", "haproxy", "-db", "-f", cfg, (char *)NULL);
        _exit(127);
    }
    return pid;
}
