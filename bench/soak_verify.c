/* soak_verify.c — what must hold after every restart: each step a client saw
 * applied is in its session's step log as it was told (instructions, queries,
 * labels in the step or acknowledged after it, and the answers acknowledged),
 * the session's step counter is not behind it, every model whose creation was
 * acknowledged is still there and serves its recorded current version, the
 * daemon says it is ready, and no temporary file of a killed writer is left in
 * models/. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/ws_clock.h"
#include "soak.h"

void soak_snapshot(soak *s)
{
    int n = atomic_load(&s->n_sessions);
    for (int i = 0; i < n; i++) {
        soak_session *ss = s->sessions[i];
        pthread_mutex_lock(&ss->mu);
        ss->snapshot = ss->n;
        pthread_mutex_unlock(&ss->mu);
    }
}

/* Step t as logged against what the client told and was told. */
static void check_entry(const soak_session *ss, int64_t t, soak_mark m, const ws_client_log_entry *e, soak_check *out)
{
    soak_step_body b;
    soak_step_body_of(ss->salt, t, &b);
    if (t % 3 == 1) { /* labelled by a PUT after the step, if that PUT got through */
        if ((m.flags & SOAK_LABELLED) && !e->req.has_labels) out->labels_lost++;
        b.req.has_labels = e->req.has_labels;
    }
    int same = ws_client_step_req_equal(&e->req, &b.req);
    if (same && (m.flags & SOAK_ACKED)) same = e->n_answers == 2 && fabsf((float)e->answers[0].p - m.p0) <= 1e-6f;
    if (!same) out->mismatched++;
    out->steps_checked++;
}

/* The checks run while the daemon is up: a request gets an answer within a
 * minute, or the daemon has stopped answering (a finding). */
#define CHECK_PATIENCE_S 60

/* Reads the step counter (*step) or a log page until answered; 0, or -1 (tallied). */
static int get_session(soak *s, ws_client **c, int *gen, const char *id, int64_t *step)
{
    for (double until = ws_clock_mono_s() + CHECK_PATIENCE_S; ws_clock_mono_s() < until;) {
        if (!(*c = soak_client(s, *c, gen, NULL))) return -1;
        ws_client_session out;
        ws_client_error e = {0};
        double t0 = ws_clock_mono_s();
        ws_client_status st = ws_client_session_get(*c, id, &out, &e);
        if (st == WS_CLIENT_OK) *step = out.step;
        if (!soak_retry(s, SOAK_session, st, &e, t0)) return st == WS_CLIENT_OK ? 0 : -1;
    }
    return -1;
}

static int get_page(soak *s, ws_client **c, int *gen, const char *id, int64_t after, ws_client_log_page *p)
{
    for (double until = ws_clock_mono_s() + CHECK_PATIENCE_S; ws_clock_mono_s() < until;) {
        if (!(*c = soak_client(s, *c, gen, NULL))) return -1;
        ws_client_error e = {0};
        double t0 = ws_clock_mono_s();
        ws_client_status st = ws_client_step_log(*c, id, after, 1000, p, &e);
        if (!soak_retry(s, SOAK_log, st, &e, t0)) return st == WS_CLIENT_OK ? 0 : -1;
    }
    return -1;
}

static void verify_session(soak *s, ws_client **c, int *gen, soak_session *ss, int from_zero, soak_check *out)
{
    pthread_mutex_lock(&ss->mu);
    int64_t from = from_zero ? 0 : ss->verified, upto = from_zero ? ss->n : ss->snapshot;
    soak_mark *marks = upto > from ? malloc(sizeof *marks * (size_t)(upto - from)) : NULL;
    if (marks) memcpy(marks, ss->marks + from, sizeof *marks * (size_t)(upto - from));
    pthread_mutex_unlock(&ss->mu);
    if (!marks) {
        if (upto > from) out->failed++;
        return;
    }
    int64_t step = 0, next = from + 1; /* the next step the log must hold */
    if (get_session(s, c, gen, ss->id, &step) != 0) {
        out->failed++;
    } else if (step < upto) {
        out->sessions_behind++;
    }
    for (int done = 0; !done && next <= upto;) {
        ws_client_log_page p;
        if (get_page(s, c, gen, ss->id, next - 1, &p) != 0) {
            out->failed++;
            break;
        }
        for (int i = 0; i < p.n && next <= upto; i++, next++) {
            if (p.steps[i].step != next) { /* a gap: the steps from `next` on count as lost */
                done = 1;
                break;
            }
            check_entry(ss, next, marks[next - 1 - from], &p.steps[i], out);
        }
        done |= p.n == 0 || p.next_after == WS_CLIENT_NO_STEP;
        ws_client_log_page_free(&p);
    }
    if (next <= upto) out->lost += upto - next + 1;
    free(marks);
    ss->verified = upto;
}

/* models/<name>-v<N>.safetensors: 1 with name and N, else 0. */
static int ckpt_file(const char *file, char *name, size_t cap, int64_t *v)
{
    size_t n = strlen(file), ext = strlen(".safetensors");
    if (n <= ext || strcmp(file + n - ext, ".safetensors") != 0) return 0;
    const char *dash = NULL;
    for (const char *p = file; p + 1 < file + n - ext; p++)
        if (p[0] == '-' && p[1] == 'v') dash = p;
    char *end;
    *v = dash ? strtoll(dash + 2, &end, 10) : 0;
    if (!dash || end != file + n - ext || *v < 1 || (size_t)(dash - file) >= cap) return 0;
    memcpy(name, file, (size_t)(dash - file));
    name[dash - file] = '\0';
    return 1;
}

/* A temporary file whose writer is gone: an upload (the soak imports nothing)
 * or a checkpoint's "<file>.tmp.<pid>.<seq>" of a pid not the running daemon's. */
static int stray_file(const char *file, int pid)
{
    const char *t = strstr(file, ".tmp.");
    return !strncmp(file, ".upload-", 8) || (t && atoi(t + 5) != pid);
}

/* The version a model serves in the list; -1 when it is not there. */
static int64_t listed_version(const ws_client_model_list *ml, const char *name)
{
    for (int i = 0; i < ml->n; i++)
        if (!strcmp(ml->items[i].name, name)) return ml->items[i].version;
    return -1;
}

static void scan_models(soak *s, ws_client **c, int *gen, int last, soak_check *out)
{
    ws_client_model_list ml = {0};
    ws_client_error e = {0};
    if (last && (!(*c = soak_client(s, *c, gen, NULL)) || ws_client_model_list_get(*c, &ml, &e) != WS_CLIENT_OK)) {
        out->failed++;
        return;
    }
    char dir[128];
    snprintf(dir, sizeof dir, "%s/models", s->dir);
    DIR *d = opendir(dir);
    for (struct dirent *de; d && (de = readdir(d));) {
        char name[WS_CLIENT_NAME_MAX + 1];
        int64_t v, served;
        if (stray_file(de->d_name, atomic_load(&s->pid))) {
            out->stray_files++;
            fprintf(stderr, "soak: left in models/ after a restart: %s\n", de->d_name);
        } else if (last && ckpt_file(de->d_name, name, sizeof name, &v)) {
            served = listed_version(&ml, name);
            int orphan = served < 0 || v > served, excess = !orphan && v > 1 && v <= served - 4;
            out->orphan_files += orphan;
            out->excess_files += excess;
            if (orphan || excess)
                fprintf(stderr, "soak: %s in models/: %s\n", orphan ? "of no model (version)" : "past retention",
                        de->d_name);
        }
    }
    if (d)
        closedir(d);
    else
        out->failed++;
    ws_client_model_list_free(&ml);
}

/* /readyz answers ready within 10 s of the restart. */
static void check_ready(soak *s, ws_client **c, int *gen, soak_check *out)
{
    for (double until = ws_clock_mono_s() + 10; ws_clock_mono_s() < until; usleep(100000)) {
        ws_client_ready r;
        ws_client_error e = {0};
        if ((*c = soak_client(s, *c, gen, NULL)) && ws_client_readyz(*c, &r, &e) == WS_CLIENT_OK && r.ready) return;
    }
    out->not_ready++;
}

void soak_disk(const soak *s, long *files, long *db_kb)
{
    char path[160];
    snprintf(path, sizeof path, "%s/models", s->dir);
    DIR *d = opendir(path);
    *files = 0;
    for (struct dirent *de; d && (de = readdir(d));) *files += de->d_name[0] != '.';
    if (d) closedir(d);
    *db_kb = 0;
    static const char *const parts[] = {"worldstate.db", "worldstate.db-wal"};
    for (int i = 0; i < 2; i++) {
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", s->dir, parts[i]);
        if (stat(path, &sb) == 0) *db_kb += (long)(sb.st_size / 1024);
    }
}

void soak_verify(soak *s, int last, soak_check *out)
{
    ws_client *c = NULL;
    int gen = -1;
    check_ready(s, &c, &gen, out);
    scan_models(s, &c, &gen, last, out);
    int n = atomic_load(&s->n_sessions);
    for (int i = 0; i < n; i++) verify_session(s, &c, &gen, s->sessions[i], last, out);
    int m = atomic_load(&s->n_models);
    for (int i = 0; i < m; i++) {
        for (double until = ws_clock_mono_s() + CHECK_PATIENCE_S;;) {
            if (!(c = soak_client(s, c, &gen, NULL))) break;
            ws_client_model model;
            ws_client_error e = {0};
            double t0 = ws_clock_mono_s();
            ws_client_status st = ws_client_model_get(c, s->models[i], &model, &e);
            if (st == WS_CLIENT_OK) {
                out->unserved += model.status.serving_version != model.version;
                ws_client_model_free(&model);
            }
            if (soak_retry(s, SOAK_model_get, st, &e, t0) && ws_clock_mono_s() < until) continue;
            if (st != WS_CLIENT_OK) out->models_lost++;
            break;
        }
    }
    ws_client_free(c);
}
