/* bench_soak.c — worldstated under mixed load, killed and restarted, for a
 * bounded time.
 *
 * Starts the daemon (built beside this benchmark) with --backend cpu on a
 * temporary data dir holding one admin API key, and runs: `clients` threads
 * stepping two sessions each (one on a small model "soak", one on the shipped
 * "default") with expect_step, labels in a third of the steps and PUT after
 * another third, queries between steps; a thread creating a small model (every
 * mixer in turn) every `model-every` seconds and stepping a session on it; a
 * thread creating an API key for a new tenant every `key-every` seconds with
 * `worldstated key create`, using it, checking the admin's tenant cannot see
 * its session, revoking it and checking it is refused. Online training is on
 * for "soak" and "default" from 25% to 75% of the run. Every `kill-every`
 * seconds the daemon is killed (SIGKILL; every `term-every`-th time SIGTERM,
 * which must exit 0) and restarted on the same data dir; after each restart
 * every step a client saw applied must be in its session's log as told, with
 * the answers acknowledged (lost must be 0), every model created must serve its
 * recorded version, /readyz must say ready and no temporary file of the killed
 * daemon may be left in models/ (soak_verify.c). The daemon's RSS
 * and open descriptors are sampled every second. At the end: a clean stop, a
 * restart checking every session's whole log, and PRAGMA integrity_check.
 *
 * The run is soak_run.c (the short soak of the test suite runs it too). Prints
 * a table per cycle, latency per request kind, errors by status, and one JSON
 * line (soak_report.c); exits 1 when anything was lost or an undocumented error
 * came back, keeping the data dir and the daemon's log for a look.
 *
 *   build/bench/bench_soak [--seconds 300] [--kill-every 20] [--term-every 5] [--clients 4]
 *                          [--model-every 10] [--key-every 5] [--keep]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "soak.h"

static const char usage[] = "usage: bench_soak [--seconds 300] [--kill-every 20] [--term-every 5] [--clients 4] "
                            "[--model-every 10] [--key-every 5] [--keep]\n";

/* 0, 1 for --help, -1 for bad flags. */
static int parse(int argc, char **argv, soak_options *o, int *keep)
{
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--help"))
            return 1;
        else if (!strcmp(argv[i], "--keep"))
            *keep = 1;
        else if (!strcmp(argv[i], "--seconds") && v)
            o->seconds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--kill-every") && v)
            o->kill_every = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--term-every") && v)
            o->term_every = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--clients") && v)
            o->clients = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--model-every") && v)
            o->model_every = atof(argv[++i]);
        else if (!strcmp(argv[i], "--key-every") && v)
            o->key_every = atof(argv[++i]);
        else
            return -1;
    }
    return o->seconds >= 1 && o->kill_every >= 1 && o->term_every >= 0 && o->clients >= 1 && o->clients <= 256 &&
                   o->model_every > 0 && o->key_every > 0
               ? 0
               : -1;
}

int main(int argc, char **argv)
{
    soak_options o = {.daemon_path = WS_DAEMON_PATH,
                      .seconds = 300,
                      .kill_every = 20,
                      .term_every = 5,
                      .clients = 4,
                      .model_every = 10,
                      .key_every = 5};
    int keep = 0, p = parse(argc, argv, &o, &keep);
    if (p != 0) {
        fputs(usage, p > 0 ? stdout : stderr);
        return p > 0 ? 0 : 2;
    }
    soak_result r;
    int ran = soak_run(&o, &r) == 0;
    if (!r.s || !r.cycles) {
        fprintf(stderr, "bench_soak: out of memory\n");
        return 1;
    }
    fflush(stderr);
    soak_report(stdout, &o, &r);
    int ok = ran && soak_failures(&r) == 0;
    fflush(stdout);
    if (!ok || keep) fprintf(stderr, "bench_soak: data dir and daemon log kept in %s\n", r.base);
    soak_result_free(&r, ok && !keep);
    return ok ? 0 : 1;
}
