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
 * the answers acknowledged (lost must be 0; soak_verify.c). The daemon's RSS
 * and open descriptors are sampled every second. At the end: a clean stop, a
 * restart checking every session's whole log, and PRAGMA integrity_check.
 *
 * Prints a table per cycle, latency per request kind, errors by status, and one
 * JSON line; exits 1 when anything was lost or an undocumented error came back.
 *
 *   build/bench/bench_soak [--seconds 300] [--kill-every 20] [--term-every 5] [--clients 4]
 *                          [--model-every 10] [--key-every 5] [--keep]
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/ws_clock.h"
#include "daemon_proc.h"
#include "soak.h"
#include "storage/storage.h"

/* One daemon run, from its start to the signal that ended it. */
typedef struct {
    double start_ms, up_s;
    const char *end; /* "kill -9", "SIGTERM", "crashed", "end" */
    int exit_status;
    long acked, rss_first, rss_max, rss_last, fd_min, fd_max; /* RSS in KiB */
    soak_check check; /* the checks after the restart that followed it */
} cycle;

typedef struct {
    soak *s;
    atomic_int pid, cur; /* the daemon sampled (0: none) and its cycle */
    cycle *cycles;
    pthread_mutex_t mu;
} sampler;

static void sample(sampler *sm, int pid, int ci)
{
    long rss = soak_rss_kb(pid), fds = soak_fd_count(pid);
    if (rss < 0 || fds < 0) return; /* it is exiting */
    pthread_mutex_lock(&sm->mu);
    cycle *cy = &sm->cycles[ci];
    if (cy->rss_first == 0) cy->rss_first = rss, cy->fd_min = fds;
    cy->rss_last = rss;
    if (rss > cy->rss_max) cy->rss_max = rss;
    if (fds > cy->fd_max) cy->fd_max = fds;
    if (fds < cy->fd_min) cy->fd_min = fds;
    pthread_mutex_unlock(&sm->mu);
}

static void *sampler_main(void *arg)
{
    sampler *sm = arg;
    while (!atomic_load(&sm->s->stop)) {
        int pid = atomic_load(&sm->pid), ci = atomic_load(&sm->cur);
        if (pid > 0) sample(sm, pid, ci);
        usleep(1000000);
    }
    return NULL;
}

/* ---- setup through the API ---------------------------------------------------------- */

/* The model the clients' first sessions use: small, online training off until the
 * training phase, an AdamW step (a new version) every 8 examples. */
static int create_soak_model(soak *s)
{
    ws_client *c = NULL;
    int gen = -1;
    ws_client_training_patch tr = WS_CLIENT_TRAINING_KEEP;
    tr.enabled = 0;
    tr.update_every = 8;
    ws_client_model_spec spec = {
        .name = "soak",
        .config_json = "{\"d\":32,\"n_heads\":2,\"n_state\":8,\"n_upd_layers\":1,\"n_ext_layers\":1}",
        .training = &tr,
        .seed = 7};
    ws_client_model m;
    ws_client_error e = {0};
    ws_client_status st = (c = soak_client(s, c, &gen, NULL)) ? ws_client_model_create(c, &spec, &m, &e)
                                                               : WS_CLIENT_ERR_NOMEM;
    if (st == WS_CLIENT_OK) ws_client_model_free(&m);
    else fprintf(stderr, "bench_soak: creating the model soak: %s\n", e.message);
    ws_client_free(c);
    return st == WS_CLIENT_OK ? 0 : -1;
}

/* Online training on or off for "soak" and "default"; 0 once both answered. */
static int set_training(soak *s, int enabled)
{
    ws_client *c = NULL;
    int gen = -1, ok = 1;
    static const char *const names[] = {"soak", "default"};
    for (int i = 0; i < 2 && ok; i++) {
        ws_client_training_patch p = WS_CLIENT_TRAINING_KEEP;
        p.enabled = enabled;
        ws_client_training out;
        ws_client_error e = {0};
        double t0 = ws_clock_mono_s();
        ws_client_status st = (c = soak_client(s, c, &gen, NULL)) ? ws_client_training_set(c, names[i], &p, &out, &e)
                                                                   : WS_CLIENT_ERR_NOMEM;
        soak_retry(s, SOAK_training, st, &e, t0);
        ok = st == WS_CLIENT_OK;
    }
    ws_client_free(c);
    return ok ? 0 : -1;
}

/* The versions "soak" and "default" serve at the end (online training published them). */
static void served_versions(soak *s, int64_t out[2])
{
    ws_client *c = NULL;
    int gen = -1;
    static const char *const names[] = {"soak", "default"};
    for (int i = 0; i < 2; i++) {
        ws_client_model m;
        ws_client_error e = {0};
        out[i] = -1;
        if ((c = soak_client(s, c, &gen, NULL)) && ws_client_model_get(c, names[i], &m, &e) == WS_CLIENT_OK) {
            out[i] = m.version;
            ws_client_model_free(&m);
        }
    }
    ws_client_free(c);
}

static int make_admin_key(soak *s)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' key create --tenant soak --admin --data-dir '%s' 2>/dev/null", s->daemon_path,
             s->dir);
    FILE *p = popen(cmd, "r");
    int ok = p && fgets(s->admin_key, sizeof s->admin_key, p) != NULL;
    if (p && pclose(p) != 0) ok = 0;
    s->admin_key[strcspn(s->admin_key, "\n")] = '\0';
    return ok ? 0 : -1;
}

static int integrity_ok(const char *dir)
{
    char db[400];
    snprintf(db, sizeof db, "%s/worldstate.db", dir);
    ws_store *st;
    ws_error err = {0};
    if (ws_store_open(db, WS_STORE_DURABILITY_NORMAL, 0, &st, &err) != WS_OK) return 0;
    int ok = ws_store_integrity_check(st, &err) == WS_OK;
    if (!ok) fprintf(stderr, "bench_soak: integrity_check: %s\n", err.msg);
    ws_store_close(st);
    return ok;
}

/* ---- report ------------------------------------------------------------------------- */

typedef struct {
    int seconds, kill_every, term_every, clients;
    double model_every, key_every;
} options;

static void check_add(soak_check *sum, const soak_check *c)
{
    sum->steps_checked += c->steps_checked;
    sum->lost += c->lost;
    sum->mismatched += c->mismatched;
    sum->labels_lost += c->labels_lost;
    sum->sessions_behind += c->sessions_behind;
    sum->models_lost += c->models_lost;
    sum->failed += c->failed;
}

static long check_bad(const soak_check *c)
{
    return c->lost + c->mismatched + c->labels_lost + c->sessions_behind + c->models_lost + c->failed;
}

static int report(soak *s, const options *o, cycle *cy, int n, const soak_check *final, double final_start_ms,
                  int integrity, const int64_t versions[2], double elapsed)
{
    printf("worldstated soak: %.0f s, kill every %d s (SIGTERM every %d), %d step clients, a model every %.0f s, "
           "a key round every %.0f s, online training %.0f..%.0f s; backend cpu, %ld CPU cores\n",
           elapsed, o->kill_every, o->term_every, o->clients, o->model_every, o->key_every, 0.25 * o->seconds,
           0.75 * o->seconds, sysconf(_SC_NPROCESSORS_ONLN));
    printf("%5s %-8s %6s %8s %7s %21s %8s %9s %8s %5s\n", "cycle", "ended", "up s", "start ms", "acked",
           "RSS MB start/max/end", "growth", "fds", "checked", "lost");
    soak_check sum = *final;
    long rss_max = 0, growth_max = 0, fd_min = -1, fd_max = 0, kills = 0, terms = 0, term_bad = 0, crashes = 0;
    double start_max = 0;
    for (int i = 0; i < n; i++) {
        cycle *c = &cy[i];
        long growth = c->rss_last - c->rss_first;
        printf("%5d %-8s %6.1f %8.0f %7ld %6.1f/%6.1f/%6.1f %8.1f %4ld/%-4ld %8ld %5ld\n", i + 1, c->end, c->up_s,
               c->start_ms, c->acked, c->rss_first / 1024.0, c->rss_max / 1024.0, c->rss_last / 1024.0,
               growth / 1024.0, c->fd_min, c->fd_max, c->check.steps_checked, c->check.lost);
        check_add(&sum, &c->check);
        if (c->rss_max > rss_max) rss_max = c->rss_max;
        if (growth > growth_max) growth_max = growth;
        if (c->fd_max > fd_max) fd_max = c->fd_max;
        if (c->rss_first && (fd_min < 0 || c->fd_min < fd_min)) fd_min = c->fd_min;
        if (c->start_ms > start_max) start_max = c->start_ms;
        kills += !strcmp(c->end, "kill -9");
        terms += !strcmp(c->end, "SIGTERM");
        term_bad += !strcmp(c->end, "SIGTERM") && c->exit_status != 0;
        crashes += !strcmp(c->end, "crashed");
    }
    printf("%5s %-8s %6s %8.0f %7s %21s %8s %9s %8ld %5ld\n", "last", "checks", "", final_start_ms, "", "", "",
           "", final->steps_checked, final->lost);
    printf("\n%-13s %8s %9s %9s\n", "request", "ok", "p50 ms", "p99 ms");
    for (int k = 0; k < SOAK_N_KINDS; k++)
        printf("%-13s %8ld %9.2f %9.2f\n", soak_kind_names[k], s->tally.lat[k].n, soak_tally_pct(&s->tally, k, 0.5),
               soak_tally_pct(&s->tally, k, 0.99));
    printf("\n%-13s %6s %-22s %-10s %8s\n", "errors", "status", "code", "expected", "count");
    for (int i = 0; i < s->tally.n_err; i++) {
        soak_err_row *r = &s->tally.err[i];
        printf("%-13s %6ld %-22s %-10s %8ld\n", soak_kind_names[r->kind], r->status, r->code, r->expected ? "yes" : "NO",
               r->n);
    }
    long unexpected = soak_tally_unexpected(&s->tally);
    long bad = check_bad(&sum) + unexpected + atomic_load(&s->anomalies) + atomic_load(&s->key_faults) +
               atomic_load(&s->queries_behind) + term_bad + crashes + !integrity;
    printf("\nacknowledged steps %ld (+%ld applied with the reply lost), checked %ld; lost %ld, mismatched %ld, "
           "labels lost %ld (of %ld PUT), sessions behind %ld, queries behind %ld, check failures %ld\n",
           atomic_load(&s->acked), atomic_load(&s->recovered), sum.steps_checked, sum.lost, sum.mismatched,
           sum.labels_lost, atomic_load(&s->labels_acked), sum.sessions_behind, atomic_load(&s->queries_behind),
           sum.failed);
    printf("models created %d (lost %ld); keys created %ld, revoked %ld, faults %ld; online training versions: "
           "soak v%lld, default v%lld\n",
           atomic_load(&s->n_models), sum.models_lost, atomic_load(&s->keys_created), atomic_load(&s->keys_revoked),
           atomic_load(&s->key_faults), (long long)versions[0], (long long)versions[1]);
    printf("restarts %d (kill -9 %ld, SIGTERM %ld), SIGTERM exits not 0 %ld, crashes %ld, client anomalies %ld, unexpected errors %ld, "
           "integrity_check %s; RSS max %.1f MB, largest growth in a cycle %.1f MB, fds %ld..%ld, start max %.0f ms\n",
           n, kills, terms, term_bad, crashes, atomic_load(&s->anomalies), unexpected, integrity ? "ok" : "FAILED", rss_max / 1024.0,
           growth_max / 1024.0, fd_min, fd_max, start_max);
    printf("{\"bench\":\"soak\",\"seconds\":%.1f,\"kill_every\":%d,\"term_every\":%d,\"clients\":%d,\"restarts\":%d,\"kills\":%ld,\"sigterms\":%ld,"
           "\"acked_steps\":%ld,\"recovered_steps\":%ld,\"checked\":%ld,\"lost\":%ld,\"mismatched\":%ld,"
           "\"labels_lost\":%ld,\"sessions_behind\":%ld,\"queries_behind\":%ld,\"models_created\":%d,"
           "\"models_lost\":%ld,\"keys_created\":%ld,\"keys_revoked\":%ld,\"key_faults\":%ld,\"crashes\":%ld,"
           "\"sigterm_not_0\":%ld,\"unexpected_errors\":%ld,\"integrity\":%s,\"rss_mb\":{\"first\":%.1f,\"max\":%.1f,"
           "\"last\":%.1f,\"max_growth_in_cycle\":%.1f},\"fds\":{\"min\":%ld,\"max\":%ld},\"latency_ms\":{",
           elapsed, o->kill_every, o->term_every, o->clients, n, kills, terms, atomic_load(&s->acked),
           atomic_load(&s->recovered), sum.steps_checked, sum.lost, sum.mismatched, sum.labels_lost,
           sum.sessions_behind, atomic_load(&s->queries_behind), atomic_load(&s->n_models), sum.models_lost,
           atomic_load(&s->keys_created), atomic_load(&s->keys_revoked), atomic_load(&s->key_faults), crashes,
           term_bad, unexpected, integrity ? "true" : "false", cy[0].rss_first / 1024.0, rss_max / 1024.0,
           cy[n - 1].rss_last / 1024.0, growth_max / 1024.0, fd_min, fd_max);
    for (int k = 0; k < SOAK_N_KINDS; k++)
        printf("%s\"%s\":{\"n\":%ld,\"p50\":%.3f,\"p99\":%.3f}", k ? "," : "", soak_kind_names[k],
               s->tally.lat[k].n, soak_tally_pct(&s->tally, k, 0.5), soak_tally_pct(&s->tally, k, 0.99));
    printf("},\"errors\":{");
    for (int i = 0; i < s->tally.n_err; i++)
        printf("%s\"%s %ld %s\":%ld", i ? "," : "", soak_kind_names[s->tally.err[i].kind], s->tally.err[i].status,
               s->tally.err[i].code, s->tally.err[i].n);
    printf("},\"ok\":%s}\n", bad ? "false" : "true");
    return bad ? 1 : 0;
}

/* ---- the run ------------------------------------------------------------------------ */

static int parse(int argc, char **argv, options *o, int *keep)
{
    *o = (options){.seconds = 300, .kill_every = 20, .term_every = 5, .clients = 4, .model_every = 10, .key_every = 5};
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--keep")) *keep = 1;
        else if (!strcmp(argv[i], "--seconds") && v) o->seconds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--kill-every") && v) o->kill_every = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--term-every") && v) o->term_every = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--clients") && v) o->clients = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--model-every") && v) o->model_every = atof(argv[++i]);
        else if (!strcmp(argv[i], "--key-every") && v) o->key_every = atof(argv[++i]);
        else return -1;
    }
    return o->seconds >= 1 && o->kill_every >= 1 && o->term_every >= 0 && o->clients >= 1 && o->clients <= 256 &&
                   o->model_every > 0 && o->key_every > 0
               ? 0
               : -1;
}

/* Waits until `until` (or the daemon's own death: 1), switching training at the phase edges. */
static int wait_cycle(soak *s, daemon_proc *d, double until, double train_on, double train_off, int *training,
                      int *exit_status)
{
    while (ws_clock_mono_s() < until) {
        double now = ws_clock_mono_s();
        int want = now >= train_on && now < train_off;
        if (want != *training && set_training(s, want) == 0) *training = want;
        int status;
        if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
            *exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            d->pid = 0;
            return 1;
        }
        usleep(100000);
    }
    return 0;
}

int main(int argc, char **argv)
{
    options o;
    int keep = 0;
    if (parse(argc, argv, &o, &keep) != 0) {
        fprintf(stderr, "usage: bench_soak [--seconds 300] [--kill-every 20] [--term-every 5] [--clients 4] "
                        "[--model-every 10] [--key-every 5] [--keep]\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    char base[] = "/tmp/ws-soak-XXXXXX", dir[64];
    if (!mkdtemp(base)) return 1;
    snprintf(dir, sizeof dir, "%s/data", base);
    static soak s;
    s.daemon_path = WS_DAEMON_PATH;
    s.dir = dir;
    s.model_every = o.model_every;
    s.key_every = o.key_every;
    soak_tally_init(&s.tally);
    pthread_mutex_init(&s.reg_mu, NULL);
    int max_cycles = o.seconds / o.kill_every + 3;
    sampler sm = {.s = &s, .cycles = calloc((size_t)max_cycles, sizeof(cycle))};
    pthread_mutex_init(&sm.mu, NULL);
    pthread_t *th = calloc((size_t)o.clients + 2, sizeof *th), samp;
    if (!sm.cycles || !th || make_admin_key(&s) != 0 || pthread_create(&samp, NULL, sampler_main, &sm) != 0) {
        fprintf(stderr, "bench_soak: setup failed (%s)\n", base);
        return 1;
    }
    static const char *const flags[] = {"--backend", "cpu", NULL};
    daemon_proc d = {0};
    double begin = ws_clock_mono_s(), end = begin + o.seconds;
    double train_on = begin + 0.25 * o.seconds, train_off = begin + 0.75 * o.seconds;
    int n = 0, training = 0, threads = 0, failed = 0;
    for (; n < max_cycles - 1; n++) {
        cycle *cy = &sm.cycles[n];
        double t0 = ws_clock_mono_s();
        if (daemon_start(&d, WS_DAEMON_PATH, dir, flags) != 0) {
            fprintf(stderr, "bench_soak: the daemon did not start (log: %s.log)\n", dir);
            cy->end = "no start";
            failed = 1;
            break;
        }
        cy->start_ms = 1e3 * (ws_clock_mono_s() - t0);
        atomic_store(&s.port, d.port);
        atomic_fetch_add(&s.gen, 1);
        atomic_store(&sm.cur, n);
        atomic_store(&sm.pid, d.pid);
        double up = ws_clock_mono_s();
        if (n == 0) {
            if (create_soak_model(&s) != 0 || set_training(&s, 0) != 0) {
                cy->end = "setup";
                failed = 1;
                break;
            }
            for (; threads < o.clients + 2; threads++) {
                void *(*fn)(void *) = threads == 0 ? soak_models_main : threads == 1 ? soak_keys_main : soak_client_main;
                if (pthread_create(&th[threads], NULL, fn, &s) != 0) break;
            }
        } else {
            soak_verify(&s, 0, &sm.cycles[n - 1].check);
        }
        long acked0 = atomic_load(&s.acked);
        double until = up + o.kill_every < end ? up + o.kill_every : end;
        int crashed = wait_cycle(&s, &d, until, train_on, train_off, &training, &cy->exit_status);
        atomic_store(&sm.pid, 0);
        if (!crashed) sample(&sm, d.pid, n);
        cy->up_s = ws_clock_mono_s() - up;
        if (crashed) {
            cy->end = "crashed";
        } else if (ws_clock_mono_s() >= end) {
            cy->end = "end";
        } else {
            int term = o.term_every > 0 && (n + 1) % o.term_every == 0;
            cy->end = term ? "SIGTERM" : "kill -9";
            cy->exit_status = daemon_signal(&d, term ? SIGTERM : SIGKILL);
        }
        cy->acked = atomic_load(&s.acked) - acked0;
        soak_snapshot(&s);
        if (!strcmp(cy->end, "end")) break;
    }
    /* The end: the clients stop, the daemon stops cleanly, and a last start checks everything. */
    atomic_store(&s.stop, 1);
    for (int i = 0; i < threads; i++) pthread_join(th[i], NULL);
    pthread_join(samp, NULL);
    int last = n < max_cycles ? n : max_cycles - 1;
    if (!failed && d.pid > 0) {
        sm.cycles[last].end = "SIGTERM";
        sm.cycles[last].exit_status = daemon_signal(&d, SIGTERM);
    }
    soak_check final = {0};
    int64_t versions[2] = {-1, -1};
    int integrity = 0;
    double t0 = ws_clock_mono_s(), final_start_ms = 0;
    if (!failed && daemon_start(&d, WS_DAEMON_PATH, dir, flags) == 0) {
        final_start_ms = 1e3 * (ws_clock_mono_s() - t0);
        atomic_store(&s.port, d.port);
        atomic_fetch_add(&s.gen, 1);
        soak_verify(&s, 1, &final);
        served_versions(&s, versions);
        if (daemon_signal(&d, SIGTERM) != 0) final.failed++;
        integrity = integrity_ok(dir);
    } else {
        final.failed++;
    }
    int rc = report(&s, &o, sm.cycles, last + 1, &final, final_start_ms, integrity, versions, ws_clock_mono_s() - begin);
    if (rc == 0 && !keep) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
        if (system(cmd) != 0) fprintf(stderr, "bench_soak: could not remove %s\n", base);
    } else {
        fprintf(stderr, "bench_soak: data and daemon log kept in %s\n", base);
    }
    return rc;
}
