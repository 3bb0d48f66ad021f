/* soak.h — the soak: worldstated under mixed load, killed and restarted on the
 * same data dir, with every acknowledged step checked after each restart. Its
 * run (soak_run.c) and report (soak_report.c) serve bench_soak and the short
 * soak of the test suite (tests/test_server_soak.c); inside: the daemon as the
 * clients see it, the sessions whose applied steps are tracked, the tallies of
 * latency and errors by request kind (soak_stats.c), the workload threads
 * (soak_load.c) and the checks run after each restart (soak_verify.c). */
#ifndef WS_SOAK_H
#define WS_SOAK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "clients/ws_client.h"

/* ---- tallies (soak_stats.c) ------------------------------------------------------- */

/* Request kinds, each with its own latencies and errors. */
#define SOAK_KINDS(X) \
    X(step) X(query) X(labels) X(session) X(log) X(model_create) X(model_get) X(training) X(key_cli) X(key_http)
#define SOAK_KIND_ENUM(name) SOAK_##name,
typedef enum { SOAK_KINDS(SOAK_KIND_ENUM) SOAK_N_KINDS } soak_kind;
extern const char *const soak_kind_names[SOAK_N_KINDS];

enum { SOAK_MAX_ERR_ROWS = 128 };

/* Failed requests of one kind with one status and error code; status 0: no HTTP
 * answer (the daemon was down), -1: a key command that failed. `expected`: an
 * answer the API documents for the moment it came (a 503 while stopping, a 409
 * after a lost reply); the others are findings. */
typedef struct {
    soak_kind kind;
    long status;
    char code[48];
    int expected;
    long n;
} soak_err_row;

typedef struct {
    double *v;
    long n, cap;
} soak_lat;

typedef struct {
    pthread_mutex_t mu;
    soak_lat lat[SOAK_N_KINDS]; /* seconds, answered requests (2xx) */
    soak_lat *step_by_cycle;    /* the steps' latencies again, by daemon run */
    int n_cycles;
    atomic_int cycle; /* the daemon run now */
    soak_err_row err[SOAK_MAX_ERR_ROWS];
    int n_err;
    long err_overflow; /* rows that did not fit */
} soak_tally;

/* n_cycles: daemon runs at most. 0, or -1 out of memory. */
int soak_tally_init(soak_tally *t, int n_cycles);
void soak_tally_free(soak_tally *t);
void soak_tally_ok(soak_tally *t, soak_kind k, double seconds);
/* e: the request's error; expected as above. */
void soak_tally_err(soak_tally *t, soak_kind k, const ws_client_error *e, int expected);
/* p in [0, 1] of kind k's latencies, in ms (sorts them); -1 when none. */
double soak_tally_pct(soak_tally *t, soak_kind k, double p);
/* The same of the steps of daemon run `cycle`. */
double soak_tally_cycle_pct(soak_tally *t, int cycle, double p);
/* 5xx not documented for the moment (a 500, a 503 storage_unavailable) and 4xx
 * the workload should never get. */
long soak_tally_unexpected(const soak_tally *t);

/* /proc/PID/status VmRSS in KiB and the entries of /proc/PID/fd; -1 when unreadable. */
long soak_rss_kb(int pid);
long soak_fd_count(int pid);
/* The 1-minute load average (/proc/loadavg): the machine may be shared. -1 when unknown. */
double soak_loadavg(void);

/* ---- a run (soak_run.c) and its report (soak_report.c) --------------------------------- */

typedef struct {
    const char *daemon_path;       /* the worldstated binary */
    int seconds, kill_every;       /* the run; the daemon's time up between stops */
    int term_every;                /* every term_every-th stop is SIGTERM (0: never), else SIGKILL */
    int clients;                   /* stepping threads, two sessions each */
    double model_every, key_every; /* seconds between model creations / key rounds */
} soak_options;

typedef struct soak soak;

/* What the checks after a restart found (soak_verify.c). */
typedef struct {
    long steps_checked, lost, mismatched, labels_lost, sessions_behind, models_lost, failed;
    long unserved;    /* a model serving another version than its recorded current one */
    long not_ready;   /* /readyz not 200 within 10 s of the restart */
    long stray_files; /* temporary files of a dead writer in models/ after the restart */
    /* The last check only (no load, no training): checkpoint files of no model,
     * and files the retention rule (version 1 and the newest 4) should have removed. */
    long orphan_files, excess_files;
} soak_check;

/* One daemon run, from its start to the signal that ended it. */
typedef struct {
    double start_ms, up_s; /* from exec to listening; from then to the stop */
    const char *end;       /* "kill -9", "SIGTERM", "crashed" (it exited by itself), "no start", "setup" */
    int exit_status;       /* 128 + signal for a kill; a SIGTERM's must be 0 */
    long acked;            /* steps acknowledged meanwhile */
    long rss_first, rss_max, rss_last, fd_min, fd_max; /* sampled every second; RSS in KiB */
    soak_check check;                                  /* the checks after the restart that followed it */
} soak_cycle;

typedef struct {
    soak *s; /* tallies and counters */
    soak_cycle *cycles;
    int n_cycles;
    soak_check final; /* after the last clean stop: every session's whole log */
    double final_start_ms, elapsed;
    int integrity;           /* PRAGMA integrity_check ok at the end */
    int64_t versions[2];     /* versions "soak" and "default" serve at the end (-1: unknown) */
    long model_files, db_kb; /* at the end: files in models/, worldstate.db and its WAL */
    double load[2];          /* the machine's 1-minute load average at the start and the end */
    char base[64];           /* the temporary directory: data/ and data.log */
} soak_result;

/* Runs the soak on a fresh temporary directory (r->base). 0 when it ran to the
 * end, -1 when the daemon did not start or the setup failed; r is filled either
 * way and is freed with soak_result_free. */
int soak_run(const soak_options *o, soak_result *r);
/* What must be 0: lost or mismatched steps and labels, sessions or queries behind,
 * lost models, failed checks, undocumented errors, client anomalies, key faults,
 * SIGTERM exits not 0, crashes, a failed integrity check. */
long soak_failures(const soak_result *r);
/* The table per cycle, latency per request kind, errors by status, and one JSON line. */
void soak_report(FILE *out, const soak_options *o, soak_result *r);
/* remove_dir: delete r->base too. */
void soak_result_free(soak_result *r, int remove_dir);

/* ---- the soaked daemon and its sessions ---------------------------------------------- */

/* What a session's step `t` is known to be, kept from its acknowledgement on. */
enum {
    SOAK_ACKED = 1,     /* answered 200: it must be in the log with these answers */
    SOAK_RECOVERED = 2, /* its reply was lost, a retry answered 409 current_step = t */
    SOAK_LABELLED = 4   /* labels PUT after the step were acknowledged */
};

typedef struct {
    float p0; /* the first answer's p, as acknowledged */
    uint8_t flags;
} soak_mark;

typedef struct {
    char id[WS_CLIENT_ID_LEN + 1];
    int salt;           /* makes this session's facts its own */
    pthread_mutex_t mu; /* marks: appended by the session's client, read by checks */
    soak_mark *marks;   /* marks[t - 1] for steps 1..n */
    int64_t n, cap;
    int64_t snapshot; /* n when the daemon last went down (checks' thread only) */
    int64_t verified; /* steps 1..verified checked (checks' thread only) */
} soak_session;

enum { SOAK_MAX_SESSIONS = 4096, SOAK_MAX_MODELS = 1024 };

struct soak {
    const soak_options *o;
    char dir[80]; /* the data dir */
    char admin_key[128];
    /* The daemon as clients see it: its port (0 while none was started), bumped
     * with gen on each restart. */
    atomic_int port, gen, pid;
    atomic_int stop;
    pthread_mutex_t reg_mu; /* registering a session or a model */
    soak_tally tally;
    soak_session *sessions[SOAK_MAX_SESSIONS];
    atomic_int n_sessions;
    char models[SOAK_MAX_MODELS][WS_CLIENT_NAME_MAX + 1]; /* "soak", "default", acknowledged creations */
    atomic_int n_models;
    atomic_long acked, recovered, labels_acked, queries_behind, anomalies;
    atomic_long models_created, keys_created, keys_revoked, key_faults;
};

/* A client of the running daemon (key NULL: the admin key), remade when the
 * daemon restarted on another port: *gen is the generation it was made for. */
ws_client *soak_client(soak *s, ws_client *old, int *gen, const char *key);

/* ---- workload (soak_load.c) ---------------------------------------------------------- */

/* Tallies a finished call (t0: when it began); 1 when it should be repeated: no
 * answer (the daemon is down or being killed) or a documented 503, after a pause. */
int soak_retry(soak *s, soak_kind k, ws_client_status st, const ws_client_error *e, double t0);

/* Adds a model to those the checks look at. */
void soak_model_register(soak *s, const char *name);
/* Creates a session on model (retrying while the daemon is down) and registers it. */
soak_session *soak_session_new(soak *s, ws_client **c, int *gen, const char *model);
/* One step of session ss with expect_step, retried until it is applied or the soak
 * stops; its facts and labels are a function of (salt, step). 0 when applied. */
int soak_step(soak *s, ws_client **c, int *gen, soak_session *ss);
/* What step t of a session told: instructions, queries and, for t % 3 == 0, labels
 * (into storage the caller provides). Labels for a PUT after a step with t % 3 == 1. */
typedef struct {
    char sym[6][24];
    char *facts[4][3];
    ws_client_instruction ins[2];
    ws_client_fact q[2];
    int labels[2];
    ws_client_step_req req;
} soak_step_body;
void soak_step_body_of(int salt, int64_t t, soak_step_body *b);

/* Workload threads (arg: the soak): steps, queries and labels on two sessions
 * each (one on "soak", one on "default"); model creation; key create/use/revoke. */
void *soak_client_main(void *arg);
void *soak_models_main(void *arg);
void *soak_keys_main(void *arg);

/* ---- checks (soak_verify.c) ------------------------------------------------------------ */

/* Each session's snapshot := its steps known applied now (the daemon just went down). */
void soak_snapshot(soak *s);
/* Every session's marked steps from `verified` to its snapshot are in its step log as
 * told (answers and labels as acknowledged) and its step counter is >= the snapshot;
 * every acknowledged model answers GET; /readyz answers ready; models/ holds no
 * temporary file of a dead writer. last (the daemon idle after a clean restart):
 * check every session's whole log, and count orphan and excess checkpoint files. */
void soak_verify(soak *s, int last, soak_check *out);
/* Files in models/, and the KiB of worldstate.db with its WAL. */
void soak_disk(const soak *s, long *files, long *db_kb);

#endif
