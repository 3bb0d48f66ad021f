/* soak_verify.c — what must hold after every restart: each step a client saw
 * applied is in its session's step log as it was told (instructions, queries,
 * labels in the step or acknowledged after it, and the answers acknowledged),
 * the session's step counter is not behind it, and every model whose creation
 * was acknowledged is still there. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
static void check_entry(const soak_session *ss, int64_t t, soak_mark m, const ws_client_log_entry *e,
                        soak_check *out)
{
    soak_step_body b;
    soak_step_body_of(ss->salt, t, &b);
    if (t % 3 == 1) { /* labelled by a PUT after the step, if that PUT got through */
        if ((m.flags & SOAK_LABELLED) && !e->req.has_labels) out->labels_lost++;
        b.req.has_labels = e->req.has_labels;
    }
    int same = ws_client_step_req_equal(&e->req, &b.req);
    if (same && (m.flags & SOAK_ACKED))
        same = e->n_answers == 2 && fabsf((float)e->answers[0].p - m.p0) <= 1e-6f;
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

void soak_verify(soak *s, int from_zero, soak_check *out)
{
    ws_client *c = NULL;
    int gen = -1;
    int n = atomic_load(&s->n_sessions);
    for (int i = 0; i < n; i++) verify_session(s, &c, &gen, s->sessions[i], from_zero, out);
    int m = atomic_load(&s->n_models);
    for (int i = 0; i < m; i++) {
        for (double until = ws_clock_mono_s() + CHECK_PATIENCE_S;;) {
            if (!(c = soak_client(s, c, &gen, NULL))) break;
            ws_client_model model;
            ws_client_error e = {0};
            double t0 = ws_clock_mono_s();
            ws_client_status st = ws_client_model_get(c, s->models[i], &model, &e);
            if (st == WS_CLIENT_OK) ws_client_model_free(&model);
            if (soak_retry(s, SOAK_model_get, st, &e, t0) && ws_clock_mono_s() < until) continue;
            if (st != WS_CLIENT_OK) out->models_lost++;
            break;
        }
    }
    ws_client_free(c);
}
