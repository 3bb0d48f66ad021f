/* engine_train.c — a model's training thread (DESIGN §4: training never stalls
 * serving).
 *
 * Each loaded model has one, beside the engine thread, with everything it
 * computes on of its own: a backend (on the CPU one thread: the engine's
 * threads keep the cores), a copy of the weights (parameters, gradients, AdamW
 * state; made when there is first something to train), its contexts and its
 * store connection. It takes the examples the
 * engine thread makes from committed steps (online_trainer.c), runs training
 * passes, and every update_every examples an AdamW step and the publication
 * gate (engine_gate.c) on its copy. A candidate the gate passes is written as
 * a parameters-only checkpoint and synced (staged), then handed to the engine
 * thread, which between two batches gives it its version number, renames it
 * into place, records it in SQLite and copies its parameters into the served
 * model (engine_models.c, ws_eng_models_publish): never mid-batch, so every
 * step is answered by the parameters of the version its log entry names, and
 * a version is on disk before it is recorded. Meanwhile this thread waits for
 * the verdict; when the candidate is not published (the gate rejected it, the
 * served version changed meanwhile, the publish failed) the copy goes back to
 * the served version's parameters and AdamW state.
 *
 * The served parameters change by other means too (an adopted version, a
 * rollback, an import): the engine thread then rebases the trainer on them
 * (ws_eng_trainer_rebase), dropping a waiting candidate and the gradients
 * summed on the old parameters; the AdamW moments go on.
 *
 * The AdamW state is not in the version files: this thread saves it, with the
 * parameters it belongs to, to <data-dir>/models/<name>.optim.safetensors at
 * most once a minute after it changed and when it stops; a crash loses the
 * AdamW steps since the last save (api.md, Online training), never a version.
 *
 * The thread runs at a low CPU priority (nice 19, or SCHED_IDLE: the
 * engine's train_priority), kept to one core (train_core.h), so that on a busy
 * machine the engine thread and the HTTP threads go first; it trains with what
 * is left, and when it falls behind the oldest examples are dropped (counted:
 * examples_dropped). */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/ws_clock.h"
#include "base/ws_thread_name.h"
#include "model/checkpoint.h"
#include "engine_impl.h"
#include "server/common/versions.h"
#include "train_core.h"

#define OPTIM_SAVE_EVERY_US 60000000 /* the AdamW state's save, at most once a minute */
#define TRAIN_NICE          19
/* yield_to_serving: a pass waits, YIELD_WINDOW_US at a time and YIELD_MAX_US
 * at most, while the engine thread was idle less than YIELD_IDLE_MIN of the
 * time since the last look. */
#define YIELD_WINDOW_US 5000
#define YIELD_IDLE_MIN  0.2
#define YIELD_MAX_US    250000

enum { CAND_NONE, CAND_WAITING, CAND_ANSWERED };

/* A model's parameters and AdamW state in host memory. */
typedef struct {
    float *host; /* parameters, first moments, second moments */
    int optim_steps;
} weights_copy;

struct ws_eng_trainer {
    ws_eng_trainer_config cfg;
    char data_dir[WS_SRV_PATH_MAX], db_path[WS_SRV_PATH_MAX + 32], name[WS_STORE_NAME_MAX + 1];
    ws_online_trainer *ex;
    ws_backend *be;
    ws_model *m; /* the copy trained on */
    ws_exec *x;
    ws_store *st;
    pthread_t thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* under mu */
    int stop;
    ws_srv_training tr;
    float *rebase;          /* posted parameters to go on from (owned), or NULL */
    int64_t rebase_version; /* ... and their version */
    int64_t line;           /* rebases so far: a gate decision of an older line is not noted */
    int64_t yield_at, yield_idle; /* yield_to_serving's last look: when, the engine's idle µs */
    ws_engine_gate_info gate;
    int cand_state;
    ws_eng_candidate cand;
    ws_status verdict;
    int64_t verdict_version;
    ws_error verdict_err;
    _Atomic int waiting; /* cand_state == CAND_WAITING, read without mu */
    weights_copy start;  /* the served weights it starts from (until the thread has its copy) */
    ws_model_config mcfg;
    size_t n_params;
    /* the training thread's */
    int64_t version;  /* the served version the copy's parameters are */
    int64_t m_line;   /* the line those parameters are of (line, when rebased) */
    float *anchor;    /* the replay's anchor's parameters, when anchor_apart */
    int anchor_apart; /* the anchor is not the served version (engine_gate.c) */
    /* The candidate under way: AdamW steps taken on the copy since the served
     * version (a candidate is gated and published every publish_every), and
     * the served version's weights and AdamW state from before the first. */
    int steps;
    weights_copy from;
    int optim_dirty;  /* AdamW state changed since it was saved */
    int64_t saved_us; /* when it was last saved */
    unsigned staged_seq;
};

static ws_status weights_take(ws_model *m, weights_copy *c, ws_error *err)
{
    size_t n = ws_model_n_params(m);
    ws_backend *be = ws_model_backend(m);
    c->optim_steps = ws_model_optim_steps(m);
    c->host = calloc(3 * n, sizeof(float));
    if (!c->host) return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    ws_status s = ws_backend_download(be, c->host, ws_model_params(m), sizeof(float) * n);
    /* No AdamW step yet: the moments are zero (calloc), not worth a copy. */
    if (s == WS_OK && c->optim_steps)
        s = ws_backend_download(be, c->host + n, ws_model_adam_m(m), sizeof(float) * n);
    if (s == WS_OK && c->optim_steps)
        s = ws_backend_download(be, c->host + 2 * n, ws_model_adam_v(m), sizeof(float) * n);
    return s == WS_OK ? WS_OK : ws_error_set(err, s, "cannot copy the model's parameters");
}

/* Puts c into m: its parameters, and its AdamW state when with_optim. */
static ws_status weights_put(ws_model *m, const weights_copy *c, int with_optim, ws_error *err)
{
    size_t n = ws_model_n_params(m);
    ws_backend *be = ws_model_backend(m);
    ws_status s = ws_backend_upload(be, ws_model_params(m), c->host, sizeof(float) * n);
    if (with_optim) {
        ws_model_set_optim_steps(m, c->optim_steps);
        if (s == WS_OK)
            s = ws_backend_upload(be, ws_model_adam_m(m), c->host + n, sizeof(float) * n);
        if (s == WS_OK)
            s = ws_backend_upload(be, ws_model_adam_v(m), c->host + 2 * n, sizeof(float) * n);
    }
    return s == WS_OK ? WS_OK : ws_error_set(err, s, "cannot set the model's parameters");
}

void ws_eng_optim_path(const char *data_dir, const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "%s/models/%s.optim.safetensors", data_dir, name);
}

/* The AdamW state saved last, into the copy, when it is of this model's
 * configuration (a file of another model of the name, deleted and created
 * again, is not). Absent: the copy keeps the served model's. */
static void optim_load(ws_eng_trainer *t)
{
    char path[WS_SRV_PATH_MAX + 160], why[256];
    ws_eng_optim_path(t->data_dir, t->name, path, sizeof path);
    if (access(path, F_OK) != 0) return;
    ws_model *saved = NULL;
    ws_error err = {0};
    weights_copy c = {0};
    ws_status s = ws_checkpoint_load(&saved, path, t->be, &err);
    if (s == WS_OK && !ws_srv_config_diff(ws_model_config_of(saved), "the file",
                                          ws_model_config_of(t->m), "the model", why, sizeof why))
        s = ws_error_set(&err, WS_ERR_FORMAT, "%s", why);
    if (s == WS_OK) s = weights_take(saved, &c, &err);
    if (s == WS_OK) {
        /* its moments with the served parameters */
        size_t n = ws_model_n_params(t->m);
        s = ws_backend_download(t->be, c.host, ws_model_params(t->m), sizeof(float) * n);
    }
    if (s == WS_OK) s = weights_put(t->m, &c, 1, &err);
    if (s != WS_OK)
        ws_log(WS_LOG_WARN, "model %s: AdamW state not restored from %s: %s", t->name, path,
               err.msg);
    free(c.host);
    ws_model_free(saved);
}

static void optim_save(ws_eng_trainer *t)
{
    char path[WS_SRV_PATH_MAX + 160];
    ws_eng_optim_path(t->data_dir, t->name, path, sizeof path);
    ws_error err = {0};
    if (ws_checkpoint_save(t->m, path, 1, &err) != WS_OK)
        ws_log(WS_LOG_ERROR, "model %s: cannot save the AdamW state: %s", t->name, err.msg);
    t->optim_dirty = 0;
    t->saved_us = ws_clock_mono_us();
}

/* Records the gate's decision (mu: status and metrics read it) and says it,
 * unless the served line changed meanwhile (sure: ws_eng_gate_served's). 1 when
 * the published candidate is the replay's anchor from now on. */
static int gate_note(ws_eng_trainer *t, const ws_srv_training *tr, int64_t line, int published,
                     int sure, int64_t version, const ws_engine_gate_score *served,
                     const ws_engine_gate_score *anchor, const ws_engine_gate_score *cand,
                     double ms, const char *why)
{
    int anchors = 0;
    pthread_mutex_lock(&t->mu);
    int same = t->line == line;
    if (same) {
        ws_engine_gate_info *g = &t->gate;
        g->has_last = 1;
        g->last.published = published;
        g->last.base_version = t->version;
        g->last.version = published ? version : 0;
        g->last.restored_version = 0;
        g->last.served = *served, g->last.candidate = *cand;
        g->last.ms = ms;
        snprintf(g->last.reason, sizeof g->last.reason, "%s", why);
        g->published += published, g->rejected += !published;
        anchors = ws_eng_gate_served(tr, g, served, anchor, cand, published, sure);
        if (anchors) g->anchor_version = version;
    }
    pthread_mutex_unlock(&t->mu);
    if (same && !published)
        ws_log(WS_LOG_INFO,
               "model %s: gate rejected the candidate trained from version %lld: "
               "%s; serving version %lld, training goes on from it",
               t->name, (long long)t->version, why, (long long)t->version);
    return anchors;
}

/* params (the copy's size) scored in the copy: its probe when probe is
 * non-zero, its replay (the AdamW state is not touched). */
static ws_status score_params(ws_eng_trainer *t, float *params, int probe,
                              ws_engine_gate_score *out, uint8_t *answers, ws_error *err)
{
    weights_copy c = {params, 0};
    WS_TRY(weights_put(t->m, &c, 0, err));
    return ws_eng_gate_score(t->x, t->ex, probe, out, answers, err);
}

/* The gate's scores on one replay set: the served version's (before; its
 * probe only when not known yet), the anchor's when apart, the candidate's
 * (after); *sure: the candidate leads the anchor (ws_eng_gate_leads); *back:
 * the anchor, apart, leads the served version. The copy holds the candidate
 * again when it returns WS_OK. */
static ws_status score_gate(ws_eng_trainer *t, const weights_copy *served,
                            ws_engine_gate_score *before, ws_engine_gate_score *anchor,
                            ws_engine_gate_score *after, int *sure, int *back, ws_error *err)
{
    size_t cap = ws_online_replay_cap();
    float *cand = malloc(sizeof(float) * t->n_params);
    uint8_t *srv = malloc(cap), *anc = anchor ? malloc(cap) : NULL, *mine = malloc(cap);
    ws_status s = cand && srv && (anc || !anchor) && mine
                      ? WS_OK
                      : ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    if (s == WS_OK && ws_backend_download(t->be, cand, ws_model_params(t->m),
                                          sizeof(float) * t->n_params) != WS_OK)
        s = ws_error_set(err, WS_ERR_BACKEND, "cannot copy the candidate's parameters");
    if (s == WS_OK) s = score_params(t, served->host, before->probe < 0, before, srv, err);
    if (s == WS_OK && anchor) s = score_params(t, t->anchor, 0, anchor, anc, err);
    if (s == WS_OK) s = score_params(t, cand, 1, after, mine, err);
    const ws_engine_gate_score *a = anchor ? anchor : before;
    *sure = s == WS_OK && a->replay_n == after->replay_n &&
            ws_eng_gate_leads(mine, anchor ? anc : srv, after->replay_n);
    *back = s == WS_OK && anchor && anchor->replay_n == before->replay_n &&
            ws_eng_gate_leads(anc, srv, before->replay_n);
    free(cand);
    free(srv);
    free(anc);
    free(mine);
    return s;
}

/* After a publication (mu not held): when the candidate did not become the
 * anchor, the version it replaced stays it, kept apart unless it is so
 * already; gate off, the version published is the anchor (no gate judged it,
 * none holds it back later). */
static void anchor_after(ws_eng_trainer *t, int64_t line, const ws_srv_training *tr, int anchors,
                         const weights_copy *served, int64_t version)
{
    if (!tr->gate) {
        pthread_mutex_lock(&t->mu);
        if (t->line == line) t->gate.anchor_version = version;
        pthread_mutex_unlock(&t->mu);
    }
    if (anchors || !tr->gate) {
        t->anchor_apart = 0;
        return;
    }
    if (t->anchor_apart) return;
    if (!t->anchor) t->anchor = malloc(sizeof(float) * t->n_params);
    if (!t->anchor) { /* no anchor apart: the served version is the bar */
        ws_log(WS_LOG_WARN, "model %s: out of memory for the gate's anchor", t->name);
        return;
    }
    memcpy(t->anchor, served->host, sizeof(float) * t->n_params);
    t->anchor_apart = 1;
}

/* Writes the copy's parameters as a checkpoint at a path of its own, synced,
 * and hands it to the engine thread unless the served line changed since the
 * update began (line); waits for the verdict. WS_OK with *version when
 * published. */
static ws_status propose(ws_eng_trainer *t, int64_t line, int64_t *version, ws_error *err)
{
    ws_eng_candidate *c = &t->cand;
    size_t n = ws_model_n_params(t->m);
    /* "<name>-next.safetensors.tmp.<pid>.<n>": removed at start if a crash
     * leaves it (ws_eng_tmp_clean) */
    snprintf(c->staged, sizeof c->staged, "%s/models/%s-next.safetensors.tmp.%ld.%u", t->data_dir,
             t->name, (long)getpid(), t->staged_seq++);
    c->params = malloc(sizeof(float) * n);
    if (!c->params) return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    /* The file's vocabulary: SQLite's (the model's authority) as it is now. */
    ws_status s = ws_srv_vocab_extend(t->st, t->cfg.model_id, t->m, err);
    if (s == WS_OK) s = ws_checkpoint_save(t->m, c->staged, 0, err);
    if (s == WS_OK) s = ws_srv_file_sha256(c->staged, c->sha256, err);
    if (s == WS_OK &&
        ws_backend_download(t->be, c->params, ws_model_params(t->m), sizeof(float) * n) != WS_OK)
        s = ws_error_set(err, WS_ERR_BACKEND, "cannot copy the candidate's parameters");
    if (s == WS_OK) {
        pthread_mutex_lock(&t->mu);
        if (t->line != line)
            s = ws_error_set(err, WS_ERR_CONFLICT,
                             "the served version changed: the candidate is dropped");
        else
            t->cand_state = CAND_WAITING, atomic_store(&t->waiting, 1);
        pthread_mutex_unlock(&t->mu);
    }
    if (s == WS_OK) {
        t->cfg.wake_engine(t->cfg.wake_ctx);
        pthread_mutex_lock(&t->mu);
        while (t->cand_state == CAND_WAITING && !t->stop) pthread_cond_wait(&t->cv, &t->mu);
        if (t->cand_state == CAND_WAITING) /* stopping: the engine thread is gone */
            s = ws_error_set(err, WS_ERR_UNSUPPORTED, "the server is shutting down");
        else if ((s = t->verdict) == WS_OK)
            *version = t->verdict_version;
        else
            *err = t->verdict_err;
        t->cand_state = CAND_NONE;
        atomic_store(&t->waiting, 0);
        pthread_mutex_unlock(&t->mu);
    }
    free(c->params);
    c->params = NULL;
    if (s != WS_OK && unlink(c->staged) != 0 && errno != ENOENT)
        ws_log(WS_LOG_WARN, "cannot remove %s: %s", c->staged, strerror(errno));
    if (c->retired[0] && unlink(c->retired) != 0 && errno != ENOENT)
        ws_log(WS_LOG_WARN, "cannot remove old checkpoint %s: %s", c->retired, strerror(errno));
    c->retired[0] = '\0';
    return s;
}

/* The served version trails the anchor (ws_eng_gate_restores): the anchor's
 * parameters, with the served version's AdamW state (the moments go on, as on
 * a rebase), are proposed as a new version, and training goes on from them.
 * WS_OK with *version when published; else the caller puts the served version
 * back. */
static ws_status restore_anchor(ws_eng_trainer *t, const weights_copy *served, int64_t line,
                                int64_t *version, ws_error *err)
{
    weights_copy a = {t->anchor, 0};
    ws_status s = weights_put(t->m, served, 1, err);
    if (s == WS_OK) s = weights_put(t->m, &a, 0, err);
    if (s == WS_OK) s = propose(t, line, version, err);
    return s;
}

/* The anchor was served again as version (mu not held): it is the anchor under
 * that number, kept in the copy (no longer apart); its probe is measured at
 * the next gate. */
static void restored_note(ws_eng_trainer *t, int64_t line, int64_t version)
{
    int64_t was = 0;
    pthread_mutex_lock(&t->mu);
    if (t->line == line) {
        ws_engine_gate_info *g = &t->gate;
        was = g->anchor_version;
        g->restored++;
        g->last.restored_version = version;
        g->anchor_version = version;
        g->served.probe = -1;
        for (int k = 0; k < WS_ENGINE_GATE_KINDS; k++) g->served.probe_kind[k] = -1;
    }
    pthread_mutex_unlock(&t->mu);
    t->anchor_apart = 0;
    ws_log(WS_LOG_INFO,
           "model %s: version %lld trailed the replay's anchor (version %lld) beyond chance: "
           "the anchor is served again as version %lld, training goes on from it",
           t->name, (long long)t->version, (long long)was, (long long)version);
}

/* The candidate under way is never decided: its steps are forgotten. */
static void candidate_drop(ws_eng_trainer *t)
{
    free(t->from.host);
    t->from.host = NULL, t->steps = 0;
}

/* The candidate the copy is now (the AdamW steps since the served version):
 * its gate and its publish. Not published, the copy is again the served
 * version's, parameters and AdamW state. */
static void decide(ws_eng_trainer *t, const ws_srv_training *tr)
{
    weights_copy served = t->from;
    t->from.host = NULL, t->steps = 0;
    ws_engine_gate_score before, after = {0}, anchor = {0};
    ws_engine_gate_info g;
    /* The line of the parameters trained: one that began since (a rollback
     * during the training pass) refuses the candidate (propose). */
    int64_t line = t->m_line;
    pthread_mutex_lock(&t->mu);
    g = t->gate;
    pthread_mutex_unlock(&t->mu);
    ws_error err = {0};
    int64_t t0 = ws_clock_mono_us(), version = 0;
    int pass = 1, published = 0;
    char why[160] = "";
    /* The served version's probe score is known once measured (the same
     * parameters answer the same fixed probe). */
    before = g.served;
    ws_online_take_held(t->ex); /* one replay set for all */
    ws_engine_gate_score *apart = tr->gate && t->anchor_apart ? &anchor : NULL;
    ws_status s = WS_OK;
    int sure = 0, back = 0;
    if (tr->gate) s = score_gate(t, &served, &before, apart, &after, &sure, &back, &err);
    if (s == WS_OK && tr->gate)
        pass = ws_eng_gate_pass(tr, &g, &before, apart, &after, why, sizeof why);
    double ms = (double)(ws_clock_mono_us() - t0) / 1000.0;
    int restore = s == WS_OK && !pass && ws_eng_gate_restores(tr, &before, apart, back);
    if (s == WS_OK && pass) s = propose(t, line, &version, &err);
    published = s == WS_OK && pass;
    int anchors = 0;
    if (tr->gate && (published || (s == WS_OK && !pass)))
        anchors = gate_note(t, tr, line, published, sure, version, &before, apart, &after, ms, why);
    if (published) anchor_after(t, line, tr, anchors, &served, version);
    if (restore && (s = restore_anchor(t, &served, line, &version, &err)) == WS_OK)
        restored_note(t, line, version);
    if (s != WS_OK && s != WS_ERR_UNSUPPORTED) /* not when the server stops */
        ws_log(WS_LOG_ERROR, "training %s: %s", t->name, err.msg);
    ws_error put_err = {0};
    if (published || (restore && s == WS_OK)) {
        t->version = version;
        t->optim_dirty = 1;
    } else if (weights_put(t->m, &served, 1, &put_err) != WS_OK) {
        ws_log(WS_LOG_ERROR, "model %s: %s", t->name, put_err.msg);
    }
    free(served.host);
}

/* The AdamW step of the summed gradients; every publish_every of them, the
 * candidate they made is decided. */
static void update(ws_eng_trainer *t, const ws_srv_training *tr)
{
    if (t->cfg.on_update) t->cfg.on_update();
    ws_error err = {0};
    ws_status s = t->from.host ? WS_OK : weights_take(t->m, &t->from, &err);
    if (s == WS_OK) s = ws_online_update(t->ex, t->m, tr, &err);
    if (s != WS_OK) { /* the candidate under way is dropped: the served version again */
        ws_log(WS_LOG_ERROR, "training %s: %s", t->name, err.msg);
        ws_error put_err = {0};
        if (t->from.host && weights_put(t->m, &t->from, 1, &put_err) != WS_OK)
            ws_log(WS_LOG_ERROR, "model %s: %s", t->name, put_err.msg);
        candidate_drop(t);
    } else if (++t->steps >= tr->publish_every) {
        decide(t, tr);
    }
    ws_online_update_done(t->ex, s == WS_OK);
    if (t->cfg.history) { /* a point for the console: this update, and its verdict */
        ws_online_stats st = ws_online_stats_of(t->ex);
        pthread_mutex_lock(&t->mu);
        ws_engine_gate_info gate = t->gate;
        pthread_mutex_unlock(&t->mu);
        ws_eng_history_train(t->cfg.history, t->cfg.model_id, t->version, &st, &gate);
    }
}

/* Goes on from the posted parameters of line (mu not held; the buffer is
 * ours): they are the replay's anchor too. */
static void rebase_apply(ws_eng_trainer *t, float *params, int64_t version, int64_t line)
{
    ws_error err = {0};
    weights_copy c = {params, 0};
    ws_status s = WS_OK;
    t->version = version;
    t->m_line = line;
    t->anchor_apart = 0;
    candidate_drop(t); /* of the old line */
    if (!t->m) { /* no copy yet: it will start from these */
        memcpy(t->start.host, params, sizeof(float) * t->n_params);
        free(params);
        return;
    }
    s = weights_put(t->m, &c, 0, &err);
    if (s == WS_OK) s = ws_model_zero_grads(t->m, &err);
    ws_online_discard_gradients(t->ex);
    if (s != WS_OK) ws_log(WS_LOG_ERROR, "training %s: %s", t->name, err.msg);
    free(params);
}

/* One training pass, and the update when it is due; counted in training_now
 * while it runs. */
static void train_pass(ws_eng_trainer *t, const ws_srv_training *tr)
{
    ws_error err = {0};
    int due = 0;
    if (t->cfg.training_now) atomic_fetch_add(t->cfg.training_now, 1);
    if (ws_online_run(t->ex, t->x, tr, &due, &err) != WS_OK)
        ws_log(WS_LOG_ERROR, "training %s: %s", t->name, err.msg);
    else if (due)
        update(t, tr);
    if (t->cfg.training_now) atomic_fetch_sub(t->cfg.training_now, 1);
}

/* Serving first, beyond the CPU priority. A thread of nice 19, or even
 * SCHED_IDLE, that computes on one core while the engine thread is busy on the
 * other still slows serving: bench_server, 64 clients, 2 cores, the default
 * model, training off, beside a spinning process of nice 19: 4,866 steps/s
 * against 6,066 without it; SCHED_IDLE: 5,201. Every wakeup of a serving
 * thread (HTTP, commit, the engine) must take a core back from it. So before
 * each pass, while the engine thread was idle less than a fifth of the time
 * since the last look (the last pass, then each 5 ms waited: it has work back
 * to back), training waits; after 250 ms it runs one pass anyway, so that it
 * still moves under a load that never lets up (examples that wait meanwhile
 * may be dropped, counted). bench_train_serving, 64 clients: p50 and p99 1.56x
 * and 1.42x of training off before, 1.02-1.06x and 1.04-1.17x after, with 419
 * and 30-32 examples trained a second. Called and returns with mu held. */
static void yield_to_serving(ws_eng_trainer *t)
{
    if (!t->cfg.engine_idle_us) return;
    int64_t start = ws_clock_mono_us();
    for (;;) {
        /* since the last look: the last pass, or the last wait */
        int64_t now = ws_clock_mono_us(), idle = t->cfg.engine_idle_us(t->cfg.wake_ctx);
        int slack = (double)(idle - t->yield_idle) >= YIELD_IDLE_MIN * (double)(now - t->yield_at);
        t->yield_at = now, t->yield_idle = idle;
        if (slack || now - start >= YIELD_MAX_US || t->stop || t->rebase) return;
        /* not on cv: every example made signals it */
        pthread_mutex_unlock(&t->mu);
        struct timespec ts = {0, YIELD_WINDOW_US * 1000L};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&t->mu);
    }
}

/* nice 19 (the default): a small share of a busy core, so the engine thread
 * and the HTTP threads go first while training still moves and a lock it
 * holds is soon let go; SCHED_IDLE runs only on a core nothing else wants
 * (refused: nice 19). bench_train_serving, 2 quiet cores, before
 * yield_to_serving: 1 client, p99 0.93x of training off with nice 19 and
 * 3.7-4.2x with SCHED_IDLE (a lock it holds waits for a free core); 64
 * clients, p50 1.56x and 1.23x. */
static void lower_priority(const ws_eng_trainer *t)
{
    struct sched_param sp = {0};
    if (t->cfg.priority == WS_TRAIN_PRIORITY_NORMAL) return;
    if (t->cfg.priority == WS_TRAIN_PRIORITY_IDLE &&
        pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp) == 0)
        return;
    /* On Linux a nice value is per thread: this one only. */
    if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), TRAIN_NICE) != 0)
        ws_log(WS_LOG_WARN, "model %s: training thread keeps its priority: %s", t->name,
               strerror(errno));
}

static void wait_until_us(ws_eng_trainer *t, int64_t until)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t left = until - ws_clock_mono_us();
    int64_t ns = ts.tv_nsec + (left > 0 ? left : 0) * 1000;
    ts.tv_sec += ns / 1000000000;
    ts.tv_nsec = ns % 1000000000;
    pthread_cond_timedwait(&t->cv, &t->mu, &ts);
}

/* ws_online_on_ready's callback: examples wait. */
static void examples_ready(void *ctx)
{
    ws_eng_trainer *t = ctx;
    pthread_mutex_lock(&t->mu);
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

/* The thread's copy of the weights it started from, its vocabulary, its
 * contexts, its store connection (on the training thread: a large model takes
 * a while to build, and the engine thread serves meanwhile). */
static ws_status copy_model(ws_eng_trainer *t, ws_error *err)
{
    WS_TRY(t->cfg.cpu ? ws_backend_cpu_new(&t->be, 1, err) : ws_backend_auto(&t->be, err));
    WS_TRY(ws_model_new(&t->m, &t->mcfg, t->be, 0, err));
    ws_status s = weights_put(t->m, &t->start, 1, err);
    free(t->start.host);
    t->start.host = NULL;
    if (s == WS_OK) s = ws_store_open(t->db_path, t->cfg.durability, 0, &t->st, err);
    if (s == WS_OK) s = ws_srv_vocab_extend(t->st, t->cfg.model_id, t->m, err);
    if (s == WS_OK) s = ws_exec_new(&t->x, t->m, err);
    if (s == WS_OK) s = ws_online_attach(t->ex, t->m, err);
    return s;
}

/* The copy is made when there is first something to train (a model that is
 * never trained online takes no more than its served weights). */
static int ensure_copy(ws_eng_trainer *t)
{
    if (t->m) return 1;
    ws_error err = {0};
    if (copy_model(t, &err) != WS_OK) {
        ws_log(WS_LOG_WARN, "model %s: no online training: %s", t->name, err.msg);
        return 0;
    }
    optim_load(t);
    return 1;
}

static void *train_main(void *arg)
{
    ws_eng_trainer *t = arg;
    ws_thread_name("ws-train");
    lower_priority(t);
    static _Atomic int trainers; /* started so far: each its own core while there are some */
    ws_train_core core;
    ws_train_core_init(&core, atomic_fetch_add(&trainers, 1), t->name, NULL);
    ws_online_on_ready(t->ex, examples_ready, t);
    pthread_mutex_lock(&t->mu);
    while (!t->stop) {
        if (t->rebase) {
            float *p = t->rebase;
            int64_t v = t->rebase_version, line = t->line;
            t->rebase = NULL;
            pthread_mutex_unlock(&t->mu);
            rebase_apply(t, p, v, line);
            pthread_mutex_lock(&t->mu);
            continue;
        }
        int64_t save_at = t->saved_us + OPTIM_SAVE_EVERY_US;
        if (t->optim_dirty && ws_clock_mono_us() >= save_at) {
            pthread_mutex_unlock(&t->mu);
            optim_save(t);
            pthread_mutex_lock(&t->mu);
            continue;
        }
        if (t->tr.enabled && ws_online_ready(t->ex)) {
            yield_to_serving(t);
            if (t->stop || t->rebase) continue;
            ws_srv_training tr = t->tr;
            pthread_mutex_unlock(&t->mu);
            ws_train_core_look(&core, t->name);
            int ok = ensure_copy(t);
            if (ok) train_pass(t, &tr);
            pthread_mutex_lock(&t->mu);
            if (!ok) break;
            continue;
        }
        if (t->optim_dirty)
            wait_until_us(t, save_at);
        else
            pthread_cond_wait(&t->cv, &t->mu);
    }
    pthread_mutex_unlock(&t->mu);
    if (t->optim_dirty) optim_save(t);
    ws_train_core_free(&core);
    return NULL;
}

ws_status ws_eng_trainer_start(ws_eng_trainer **out, const ws_eng_trainer_config *c,
                               ws_model *served, int64_t version, const ws_srv_training *tr,
                               ws_online_trainer *ex, ws_error *err)
{
    *out = NULL;
    ws_eng_trainer *t = calloc(1, sizeof *t);
    if (!t) return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    pthread_condattr_t ca;
    int ok = pthread_condattr_init(&ca) == 0 &&
             pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
             pthread_cond_init(&t->cv, &ca) == 0;
    if (!ok || pthread_mutex_init(&t->mu, NULL) != 0) {
        free(t);
        return ws_error_set(err, WS_ERR_NOMEM, "cannot create training locks");
    }
    t->cfg = *c;
    snprintf(t->data_dir, sizeof t->data_dir, "%s", c->data_dir);
    snprintf(t->db_path, sizeof t->db_path, "%s", c->db_path);
    snprintf(t->name, sizeof t->name, "%s", c->name);
    t->ex = ex;
    t->tr = *tr;
    t->version = version;
    t->saved_us = ws_clock_mono_us();
    t->mcfg = *ws_model_config_of(served);
    t->n_params = ws_model_n_params(served);
    ws_eng_gate_reset(&t->gate, version);
    ws_status s = weights_take(served, &t->start, err);
    if (s == WS_OK && pthread_create(&t->thread, NULL, train_main, t) != 0)
        s = ws_error_set(err, WS_ERR_NOMEM, "cannot start the training thread");
    if (s != WS_OK) {
        ws_eng_trainer_free(t);
        return s;
    }
    t->started = 1;
    *out = t;
    return WS_OK;
}

void ws_eng_trainer_free(ws_eng_trainer *t)
{
    if (!t) return;
    if (t->started) {
        ws_online_on_ready(t->ex, NULL, NULL);
        pthread_mutex_lock(&t->mu);
        t->stop = 1;
        pthread_cond_broadcast(&t->cv);
        pthread_mutex_unlock(&t->mu);
        pthread_join(t->thread, NULL);
    }
    if (t->m) ws_online_detach(t->ex, t->m);
    free(t->start.host);
    free(t->rebase);
    free(t->anchor);
    free(t->from.host);
    ws_exec_free(t->x);
    ws_model_free(t->m);
    ws_store_close(t->st);
    ws_backend_free(t->be);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

void ws_eng_trainer_settings(ws_eng_trainer *t, const ws_srv_training *tr)
{
    pthread_mutex_lock(&t->mu);
    t->tr = *tr;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

ws_status ws_eng_trainer_rebase(ws_eng_trainer *t, ws_model *served, int64_t version, ws_error *err)
{
    size_t n = ws_model_n_params(served);
    float *p = malloc(sizeof(float) * n);
    if (!p) return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    if (ws_backend_download(ws_model_backend(served), p, ws_model_params(served),
                            sizeof(float) * n) != WS_OK) {
        free(p);
        return ws_error_set(err, WS_ERR_BACKEND, "cannot copy the served parameters");
    }
    pthread_mutex_lock(&t->mu);
    free(t->rebase); /* an older one not yet taken */
    t->rebase = p;
    t->rebase_version = version;
    t->line++;
    ws_eng_gate_reset(&t->gate, version); /* a new line: measured at its next gate */
    if (t->cand_state == CAND_WAITING) { /* trained from parameters no longer served */
        t->verdict = ws_error_set(&t->verdict_err, WS_ERR_CONFLICT,
                                  "the served version changed: the candidate is dropped");
        t->cand_state = CAND_ANSWERED;
        atomic_store(&t->waiting, 0);
    }
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    return WS_OK;
}

int ws_eng_trainer_waiting(ws_eng_trainer *t)
{
    return atomic_load(&t->waiting);
}

const ws_eng_candidate *ws_eng_trainer_candidate(ws_eng_trainer *t)
{
    pthread_mutex_lock(&t->mu);
    const ws_eng_candidate *c = t->cand_state == CAND_WAITING ? &t->cand : NULL;
    pthread_mutex_unlock(&t->mu);
    return c;
}

void ws_eng_trainer_verdict(ws_eng_trainer *t, ws_status s, int64_t version, const ws_error *err,
                            const char *retired)
{
    pthread_mutex_lock(&t->mu);
    t->verdict = s;
    t->verdict_version = version;
    if (err) t->verdict_err = *err;
    snprintf(t->cand.retired, sizeof t->cand.retired, "%s", retired ? retired : "");
    t->cand_state = CAND_ANSWERED;
    atomic_store(&t->waiting, 0);
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

void ws_eng_trainer_gate(ws_eng_trainer *t, ws_engine_gate_info *out)
{
    pthread_mutex_lock(&t->mu);
    *out = t->gate;
    pthread_mutex_unlock(&t->mu);
}
