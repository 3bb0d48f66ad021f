/* soak_run.c — one soak run (soak.h): the daemon started with --backend cpu on
 * a temporary data dir holding one admin API key; the workload threads
 * (soak_load.c) started once it listens; online training on for "soak" and
 * "default" from 25% to 75% of the run; every kill_every seconds the daemon is
 * stopped (SIGKILL, or SIGTERM every term_every-th time), restarted on the same
 * data dir and checked (soak_verify.c); its RSS and open descriptors sampled
 * every second. At the end: the clients stop, the daemon stops cleanly, a last
 * start checks every session's whole log, and PRAGMA integrity_check. */
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
#include "tmp_dir.h"

typedef struct {
    soak *s;
    atomic_int pid; /* the daemon sampled (0: none), in the run s->tally.cycle */
    soak_cycle *cycles;
    pthread_mutex_t mu;
} sampler;

static void sample(sampler *sm, int pid, int ci)
{
    long rss = soak_rss_kb(pid), fds = soak_fd_count(pid);
    if (rss < 0 || fds < 0) return; /* it is exiting */
    pthread_mutex_lock(&sm->mu);
    soak_cycle *cy = &sm->cycles[ci];
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
        int pid = atomic_load(&sm->pid), ci = atomic_load(&sm->s->tally.cycle);
        if (pid > 0) sample(sm, pid, ci);
        usleep(1000000);
    }
    return NULL;
}

/* ---- setup through the API and the daemon binary ------------------------------------- */

static int make_admin_key(soak *s)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' key create --create --tenant soak --admin --data-dir '%s' 2>/dev/null", s->o->daemon_path,
             s->dir);
    FILE *p = popen(cmd, "r");
    int ok = p && fgets(s->admin_key, sizeof s->admin_key, p) != NULL;
    if (p && pclose(p) != 0) ok = 0;
    s->admin_key[strcspn(s->admin_key, "\n")] = '\0';
    return ok ? 0 : -1;
}

/* The model the clients' first sessions use: small, online training off until the
 * training phase, an AdamW step (a new version) every 8 examples. */
static int create_soak_model(soak *s)
{
    int gen = -1;
    ws_client *c = soak_client(s, NULL, &gen, NULL);
    ws_client_training_patch tr = WS_CLIENT_TRAINING_KEEP;
    tr.enabled = 0;
    tr.update_every = 8;
    tr.publish_every = 1; /* each a candidate: publishes for the kills to land in */
    ws_client_model_spec spec = {.name = "soak",
                                 .config_json =
                                     "{\"d\":32,\"n_heads\":2,\"n_state\":8,\"n_upd_layers\":1,\"n_ext_layers\":1}",
                                 .training = &tr,
                                 .seed = 7};
    ws_client_model m;
    ws_client_error e = {0};
    ws_client_status st = c ? ws_client_model_create(c, &spec, &m, &e) : WS_CLIENT_ERR_NOMEM;
    if (st == WS_CLIENT_OK)
        ws_client_model_free(&m);
    else
        fprintf(stderr, "soak: creating the model soak: %s\n", e.message);
    ws_client_free(c);
    return st == WS_CLIENT_OK ? 0 : -1;
}

static const char *const trained[] = {"soak", "default"};

/* Online training on or off for the trained models; 0 once both answered. */
static int set_training(soak *s, int enabled)
{
    int gen = -1, ok = 1;
    ws_client *c = NULL;
    for (int i = 0; i < 2 && ok; i++) {
        ws_client_training_patch p = WS_CLIENT_TRAINING_KEEP;
        p.enabled = enabled;
        ws_client_training out;
        ws_client_error e = {0};
        double t0 = ws_clock_mono_s();
        c = soak_client(s, c, &gen, NULL);
        ws_client_status st = c ? ws_client_training_set(c, trained[i], &p, &out, &e) : WS_CLIENT_ERR_NOMEM;
        soak_retry(s, SOAK_training, st, &e, t0);
        ok = st == WS_CLIENT_OK;
    }
    ws_client_free(c);
    return ok ? 0 : -1;
}

/* The versions the trained models serve (online training published them). */
static void served_versions(soak *s, int64_t out[2])
{
    int gen = -1;
    ws_client *c = NULL;
    for (int i = 0; i < 2; i++) {
        ws_client_model m;
        ws_client_error e = {0};
        out[i] = -1;
        if ((c = soak_client(s, c, &gen, NULL)) && ws_client_model_get(c, trained[i], &m, &e) == WS_CLIENT_OK) {
            out[i] = m.version;
            ws_client_model_free(&m);
        }
    }
    ws_client_free(c);
}

static int integrity_ok(const char *dir)
{
    char db[128];
    snprintf(db, sizeof db, "%s/worldstate.db", dir);
    ws_store *st;
    ws_error err = {0};
    if (ws_store_open(db, WS_STORE_DURABILITY_NORMAL, 0, &st, &err) != WS_OK) return 0;
    int ok = ws_store_integrity_check(st, &err) == WS_OK;
    if (!ok) fprintf(stderr, "soak: integrity_check: %s\n", err.msg);
    ws_store_close(st);
    return ok;
}

/* ---- the cycles --------------------------------------------------------------------- */

/* Waits until `until`, switching training at the phase edges; 1 when the daemon
 * exited by itself meanwhile (*exit_status says how). */
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

static void daemon_up(soak *s, const daemon_proc *d)
{
    atomic_store(&s->pid, d->pid);
    atomic_store(&s->port, d->port);
    atomic_fetch_add(&s->gen, 1);
}

/* Cycles until the end of the run; the index of the last one (its daemon still
 * running unless it crashed), or -1 - index when one failed to start or set up. */
static int run_cycles(soak *s, sampler *sm, daemon_proc *d, int max_cycles, pthread_t *th, int *threads)
{
    static const char *const flags[] = {"--backend", "cpu", NULL};
    const soak_options *o = s->o;
    double begin = ws_clock_mono_s(), end = begin + o->seconds;
    double train_on = begin + 0.25 * o->seconds, train_off = begin + 0.75 * o->seconds;
    int training = 0;
    for (int n = 0; n < max_cycles; n++) {
        soak_cycle *cy = &sm->cycles[n];
        double t0 = ws_clock_mono_s();
        if (daemon_start(d, o->daemon_path, s->dir, flags) != 0) {
            fprintf(stderr, "soak: the daemon did not start (log: %s.log)\n", s->dir);
            cy->end = "no start";
            return -1 - n;
        }
        double up = ws_clock_mono_s();
        cy->start_ms = 1e3 * (up - t0);
        daemon_up(s, d);
        atomic_store(&s->tally.cycle, n);
        long acked0 = atomic_load(&s->acked);
        atomic_store(&sm->pid, d->pid);
        if (n > 0) {
            soak_verify(s, 0, &sm->cycles[n - 1].check);
        } else if (create_soak_model(s) != 0 || set_training(s, 0) != 0) {
            cy->end = "setup";
            return -1 - n;
        } else {
            for (int i = 0; i < 2; i++) soak_model_register(s, trained[i]);
            for (; *threads < o->clients + 2; (*threads)++) {
                void *(*fn)(void *) = *threads == 0   ? soak_models_main
                                      : *threads == 1 ? soak_keys_main
                                                      : soak_client_main;
                if (pthread_create(&th[*threads], NULL, fn, s) != 0) break;
            }
        }
        int crashed = wait_cycle(s, d, up + o->kill_every < end ? up + o->kill_every : end, train_on, train_off,
                                 &training, &cy->exit_status);
        atomic_store(&sm->pid, 0);
        if (!crashed) sample(sm, d->pid, n);
        cy->up_s = ws_clock_mono_s() - up;
        cy->end = crashed ? "crashed" : "SIGTERM"; /* the last one: the clean stop after the clients stop */
        if (!crashed && ws_clock_mono_s() < end) {
            int term = o->term_every > 0 && (n + 1) % o->term_every == 0;
            cy->end = term ? "SIGTERM" : "kill -9";
            cy->exit_status = daemon_signal(d, term ? SIGTERM : SIGKILL);
        }
        cy->acked = atomic_load(&s->acked) - acked0;
        soak_snapshot(s);
        if (ws_clock_mono_s() >= end) return n;
    }
    return max_cycles - 1;
}

int soak_run(const soak_options *o, soak_result *r)
{
    memset(r, 0, sizeof *r);
    r->versions[0] = r->versions[1] = -1;
    char base[] = "/tmp/ws-soak-XXXXXX";
    int max_cycles = o->seconds / o->kill_every + 2;
    soak *s = r->s = calloc(1, sizeof *s);
    sampler sm = {.s = s, .cycles = r->cycles = calloc((size_t)max_cycles, sizeof(soak_cycle))};
    pthread_t *th = calloc((size_t)o->clients + 2, sizeof *th), samp;
    if (!s || !sm.cycles || !th || !mkdtemp(base)) {
        free(th);
        return -1;
    }
    memcpy(r->base, base, sizeof base);
    /* Clients write to daemons that get killed: a broken pipe is an error value, not a signal. */
    signal(SIGPIPE, SIG_IGN);
    s->o = o;
    snprintf(s->dir, sizeof s->dir, "%s/data", r->base);
    pthread_mutex_init(&s->reg_mu, NULL);
    pthread_mutex_init(&sm.mu, NULL);
    if (soak_tally_init(&s->tally, max_cycles) != 0 || make_admin_key(s) != 0 ||
        pthread_create(&samp, NULL, sampler_main, &sm) != 0) {
        fprintf(stderr, "soak: setup failed (%s)\n", r->base);
        free(th);
        return -1;
    }
    double begin = ws_clock_mono_s();
    r->load[0] = soak_loadavg();
    daemon_proc d = {0};
    int threads = 0, last = run_cycles(s, &sm, &d, max_cycles, th, &threads);
    int failed = last < 0;
    r->n_cycles = (failed ? -1 - last : last) + 1;
    /* The clients stop, then the daemon stops cleanly (under no load), and a last
     * start checks everything. */
    atomic_store(&s->stop, 1);
    for (int i = 0; i < threads; i++) pthread_join(th[i], NULL);
    pthread_join(samp, NULL);
    free(th);
    if (d.pid > 0) r->cycles[r->n_cycles - 1].exit_status = daemon_signal(&d, SIGTERM);
    static const char *const flags[] = {"--backend", "cpu", NULL};
    double t0 = ws_clock_mono_s();
    if (!failed && daemon_start(&d, o->daemon_path, s->dir, flags) == 0) {
        r->final_start_ms = 1e3 * (ws_clock_mono_s() - t0);
        daemon_up(s, &d);
        soak_verify(s, 1, &r->final);
        served_versions(s, r->versions);
        soak_disk(s, &r->model_files, &r->db_kb);
        if (daemon_signal(&d, SIGTERM) != 0) r->final.failed++;
        r->integrity = integrity_ok(s->dir);
    } else {
        r->final.failed++;
    }
    r->elapsed = ws_clock_mono_s() - begin;
    r->load[1] = soak_loadavg();
    pthread_mutex_destroy(&sm.mu);
    return failed ? -1 : 0;
}

void soak_result_free(soak_result *r, int remove_dir)
{
    soak *s = r->s;
    if (remove_dir && r->base[0]) tmp_dir_remove("soak", r->base); /* set once mkdtemp made it */
    int n = s ? atomic_load(&s->n_sessions) : 0;
    for (int i = 0; i < n; i++) {
        pthread_mutex_destroy(&s->sessions[i]->mu);
        free(s->sessions[i]->marks);
        free(s->sessions[i]);
    }
    if (s) {
        soak_tally_free(&s->tally);
        pthread_mutex_destroy(&s->reg_mu);
    }
    free(s);
    free(r->cycles);
    memset(r, 0, sizeof *r);
}
