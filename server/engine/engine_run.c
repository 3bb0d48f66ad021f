/* engine_run.c — the compute of one batch of session jobs, on the engine
 * thread: load each session's W_{t-1}, check the job against its model, map
 * symbols to ids (on a shared store, new symbols are stored first, so that
 * every daemon of a cluster gives them the same ids), then per model one
 * ws_exec_step (updater + extractor for every step job) and one ws_exec_query
 * (query-only jobs). The batch then goes to the commit stage as a flight
 * (engine_commit.c: one SQLite transaction per model, the replies), which runs
 * while this thread computes the next batch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ws_clock.h"
#include "engine_impl.h"
#include "server/common/versions.h"

static void fail_item(ws_eng_item *it, ws_job_why why, ws_status s, const char *msg)
{
    it->live = 0;
    ws_eng_refuse(it->j, why, s, "%s", msg);
}

static int check_facts(ws_eng_item *it, const ws_job_fact *f, int n, const char *what)
{
    const ws_model_config *c = &it->em->cfg;
    char msg[160];
    for (int i = 0; i < n; i++) {
        if (f[i].n_sym > c->max_fact_len) {
            snprintf(msg, sizeof msg, "%s[%d]: this model takes at most %d symbols per fact", what,
                     i, c->max_fact_len);
            return fail_item(it, WS_JOB_FAILED, WS_ERR_INVALID, msg), 0;
        }
        if (!f[i].n_sym && f[i].n_vec != c->d_raw) {
            if (c->d_raw)
                snprintf(msg, sizeof msg, "%s[%d]: vectors must have %d numbers, got %d", what, i,
                         c->d_raw, f[i].n_vec);
            else
                snprintf(msg, sizeof msg, "%s[%d]: this model takes no vectors (d_raw = 0)", what,
                         i);
            return fail_item(it, WS_JOB_FAILED, WS_ERR_INVALID, msg), 0;
        }
    }
    return 1;
}

/* The item's facts' symbols as ids and hashes (new symbols join the vocabulary). */
static void map_ids(ws_eng_item *it)
{
    const ws_job *j = it->j;
    int S = it->em->cfg.max_fact_len, rows = j->n_instr + j->n_query;
    ws_vocab *v = ws_model_vocab(it->em->m);
    for (int r = 0; r < rows; r++) {
        const ws_job_fact *f = r < j->n_instr ? &j->instr[r] : &j->query[r - j->n_instr];
        for (int k = 0; k < S; k++) {
            ws_sym s =
                k < f->n_sym ? ws_vocab_sym(v, f->sym[k], strlen(f->sym[k]), 1) : (ws_sym){-1, 0};
            it->ids[(size_t)r * S + k] = s.id;
            it->hash[(size_t)r * S + k] = s.hash;
        }
    }
}

/* The session with its state: as this engine committed it last when it still
 * has it (state_cache.h), else from the store. A step whose expect_step is
 * not the cached step is checked against the store: the cache never refuses. */
static ws_status read_session(ws_engine *e, const ws_job *j, ws_store_session *out,
                              ws_error *err)
{
    if (e->cache && ws_state_cache_get(e->cache, j->tenant, j->session, out)) {
        if (j->kind != WS_JOB_STEP || j->expect_step < 0 || j->expect_step == out->step)
            return WS_OK;
        ws_store_session_clear(out);
    }
    return ws_store_session_get(e->st, j->tenant, j->session, 1, out, err);
}

/* Loads the session and checks the job against it (phase 1). */
static void prepare(ws_engine *e, ws_eng_item *it)
{
    ws_job *j = it->j;
    ws_error err = {0};
    ws_status s = read_session(e, j, &it->sess, &err);
    if (s != WS_OK) return ws_eng_fail(j, s, &err);
    it->em = ws_eng_model_by_id(e, it->sess.model);
    if (!it->em && e->shared) { /* created by another daemon: loaded between batches */
        e->sync_due = 1;
        ws_error_set(&err, WS_ERR_STORAGE,
                     "the session's model was created by another daemon and is being loaded "
                     "here: retry");
        return ws_eng_fail(j, WS_ERR_STORAGE, &err);
    }
    if (!it->em)
        return ws_eng_refuse(j, WS_JOB_INCONSISTENT, WS_ERR_NOTFOUND,
                             "the session's model is not loaded");
    it->live = 1;
    if (it->sess.rows &&
        (size_t)it->sess.rows * (size_t)it->sess.cols != ws_model_state_floats(it->em->m))
        return fail_item(it, WS_JOB_INCONSISTENT, WS_ERR_FORMAT,
                         "stored state does not fit the model");
    if (j->kind == WS_JOB_STEP && j->expect_step >= 0 && j->expect_step != it->sess.step) {
        it->live = 0;
        j->result.step = it->sess.step;
        return ws_eng_refuse(j, WS_JOB_STEP_CONFLICT, WS_ERR_CONFLICT,
                             "session is at step %lld, not %lld", (long long)it->sess.step,
                             (long long)j->expect_step);
    }
    if (!check_facts(it, j->instr, j->n_instr, "instructions") ||
        !check_facts(it, j->query, j->n_query, "queries"))
        return;
    int S = it->em->cfg.max_fact_len, rows = j->n_instr + j->n_query;
    it->ids = malloc(sizeof(int32_t) * (size_t)S * (size_t)(rows ? rows : 1));
    it->hash = malloc(sizeof(uint64_t) * (size_t)S * (size_t)(rows ? rows : 1));
    if (!it->ids || !it->hash) return fail_item(it, WS_JOB_FAILED, WS_ERR_NOMEM, "out of memory");
    map_ids(it);
    /* rules work from what the session was told, kept in the state cache: only
     * where this daemon is the store's one writer */
    if (j->kind == WS_JOB_STEP && it->em->tr.rules && e->cache &&
        (s = ws_eng_rules_apply(e, it, &err)) != WS_OK)
        fail_item(it, WS_JOB_FAILED, s, err.msg);
}

/* The ids of the live items of em again, after its vocabulary was rebuilt. */
static void remap(ws_eng_item *items, int n, const ws_eng_model *em)
{
    for (int i = 0; i < n; i++)
        if (items[i].live && items[i].em == em && items[i].j->kind != WS_JOB_LABELS)
            map_ids(&items[i]);
}

/* The symbols of em's vocabulary from ids `from` on (copies; NULL when out of memory). */
static char **symbols_from(ws_vocab *v, int from, int n)
{
    char **out = calloc((size_t)(n ? n : 1), sizeof *out);
    for (int i = 0; out && i < n; i++)
        if (!(out[i] = strdup(ws_vocab_symbol(v, from + i)))) {
            while (i--) free(out[i]);
            free(out), out = NULL;
        }
    return out;
}

ws_status ws_eng_vocab_refresh(ws_engine *e, ws_eng_model *em, ws_error *err)
{
    ws_vocab *v = ws_model_vocab(em->m);
    int stored = em->vocab_stored;
    ws_vocab_truncate(v, stored);
    ws_status s = ws_srv_vocab_extend(e->st, em->id, em->m, err);
    if (s == WS_OK)
        em->vocab_stored = ws_vocab_size(v);
    else
        ws_vocab_truncate(v, stored); /* a partial load is not kept */
    return s;
}

/* The merge's callback: the symbols other daemons stored from `stored` on
 * take the same ids here, in id order (the vocabulary cut back to `stored` at
 * the first of them). */
typedef struct {
    ws_eng_model *em;
    int stored, n;
    ws_error *err;
} others_seen;

static ws_status take_other(void *ctx, int64_t id, const char *symbol, size_t len)
{
    others_seen *o = ctx;
    ws_vocab *v = ws_model_vocab(o->em->m);
    if (!o->n++) ws_vocab_truncate(v, o->stored);
    if (ws_vocab_id(v, symbol, len, 1) != id)
        return ws_error_set(o->err, WS_ERR_STORAGE,
                            "vocabulary: the database's symbol %lld of model %lld does not fit "
                            "here, retry",
                            (long long)id, (long long)o->em->id);
    return WS_OK;
}

/* On a shared store (several daemons, one database): the symbols this batch
 * added to em's vocabulary are stored now, in a transaction of their own, so
 * that their ids are the cluster's before anything is computed with them.
 * When other daemons appended first, the store merges ours after theirs under
 * the model's lock (so no daemon has to try again, however busy the others),
 * and the vocabulary takes the same order, checked against the stored count;
 * *rebuilt says the items' ids must be mapped again. Symbols the store could
 * not take stay for the next batch to store. */
static ws_status share_vocab(ws_engine *e, ws_eng_model *em, int *rebuilt, ws_error *err)
{
    ws_vocab *v = ws_model_vocab(em->m);
    int stored = em->vocab_stored, n = ws_vocab_size(v) - stored;
    if (n <= 0) return WS_OK;
    char **mine = symbols_from(v, stored, n);
    if (!mine) return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    others_seen o = {em, stored, 0, err};
    int64_t count = 0;
    ws_status s = ws_store_vocab_merge(e->st, em->id, stored, (size_t)n, (const char *const *)mine,
                                       ws_vocab_capacity(v), take_other, &o, &count, err);
    if (s == WS_OK) /* this daemon's own after the others', as the store put them */
        for (int i = 0; o.n && i < n; i++) ws_vocab_id(v, mine[i], strlen(mine[i]), 1);
    int differs = s == WS_OK && count != ws_vocab_size(v);
    if (differs)
        s = ws_error_set(err, WS_ERR_STORAGE,
                         "vocabulary of model %lld: %lld symbols stored, %d here, retry",
                         (long long)em->id, (long long)count, ws_vocab_size(v));
    if (s == WS_OK)
        em->vocab_stored = (int)count;
    else if (o.n || differs) /* what is stored comes back with the next merge */
        ws_vocab_truncate(v, stored);
    if (o.n || differs) *rebuilt = 1;
    for (int i = 0; i < n; i++) free(mine[i]);
    free(mine);
    return s;
}

/* share_vocab for every model of the batch; a model whose symbols could not be
 * stored fails its items (503 storage_busy when PostgreSQL is away). */
static void share_vocabs(ws_engine *e, ws_eng_flight *f)
{
    for (int mi = 0; mi < e->n_models; mi++) {
        ws_eng_model *em = &e->models[mi];
        ws_error err = {0};
        int rebuilt = 0;
        ws_status s = share_vocab(e, em, &rebuilt, &err);
        if (rebuilt) remap(f->items, f->n, em);
        for (int i = 0; s != WS_OK && i < f->n; i++) {
            ws_eng_item *it = &f->items[i];
            if (!it->live || it->em != em || it->j->kind == WS_JOB_LABELS) continue;
            it->live = 0;
            ws_eng_fail(it->j, s, &err);
        }
    }
}

const ws_sym *ws_eng_row_syms(const ws_eng_item *it, int r, int S, ws_sym *out)
{
    for (int k = 0; k < S; k++)
        out[k] = (ws_sym){it->ids[(size_t)r * S + k], it->hash[(size_t)r * S + k]};
    return out;
}

static ws_status add_facts(ws_batch *b, const ws_eng_item *it, int S)
{
    const ws_job *j = it->j;
    ws_sym syms[WS_MAX_FACT_LEN];
    for (int i = 0; i < j->n_instr; i++) {
        const ws_job_fact *f = &j->instr[i];
        WS_TRY(f->n_sym ? ws_batch_add_instr_syms(b, ws_eng_row_syms(it, i, S, syms), f->n_sym, f->value)
                        : ws_batch_add_instr_raw(b, f->vec, f->value));
    }
    for (int i = 0; i < j->n_query; i++) {
        const ws_job_fact *f = &j->query[i];
        WS_TRY(f->n_sym
                   ? ws_batch_add_query_syms(b, ws_eng_row_syms(it, j->n_instr + i, S, syms), f->n_sym, -1)
                   : ws_batch_add_query_raw(b, f->vec, -1));
    }
    return WS_OK;
}

/* A pass over the live items of g, in chunks (model/exec_pool.h). */
typedef struct {
    ws_engine *e;
    ws_eng_item *items;
    int n;
    ws_eng_group *g;
} pass;

/* Runs the model on rows [r0, r1) of the pass's items (rows as run_model
 * numbered them) on x, built in b; their answers into g->probs at their q_off. */
static ws_status run_rows(void *ctx, ws_exec *x, ws_batch *b, int r0, int r1, ws_error *err)
{
    const pass *ps = ctx;
    ws_eng_group *g = ps->g;
    ws_eng_model *em = g->em;
    size_t T = ws_model_state_floats(em->m);
    int S = em->cfg.max_fact_len, q0 = -1;
    ws_batch_clear(b);
    for (int i = 0; i < ps->n; i++) {
        ws_eng_item *it = &ps->items[i];
        if (!ws_eng_in_group(it, g) || it->row < r0 || it->row >= r1) continue;
        if (q0 < 0) q0 = it->q_off; /* rows run in order of items: the first answer */
        int from_w0 = it->sess.rows == 0;
        WS_TRY(ws_batch_begin_traj(b, g->kind == WS_JOB_STEP && from_w0));
        WS_TRY(add_facts(b, it, S));
        float *dst = em->w_dev + (size_t)it->row * T;
        if (!from_w0)
            WS_TRY(ws_backend_upload(ps->e->be, dst, it->sess.state, sizeof(float) * T));
        else if (g->kind == WS_JOB_QUERY)
            WS_TRY(ws_model_state_init(em->m, em->w_dev, it->row, 1, err));
    }
    float *w = em->w_dev + (size_t)r0 * T, *probs = g->probs + (q0 < 0 ? 0 : q0);
    if (g->kind == WS_JOB_QUERY && !ws_batch_n_query(b)) return WS_OK;
    if (g->kind == WS_JOB_QUERY) return ws_exec_query(x, b, w, probs, NULL, err);
    return ws_exec_step(x, b, w, w, WS_STEP_INFER, 1.0f, probs, NULL, err);
}

/* Builds and runs the model on the live items of g's model and kind; the new
 * states into w (STEP). */
static ws_status run_model(ws_engine *e, ws_eng_item *items, int n, ws_eng_group *g, float *w)
{
    ws_eng_model *em = g->em;
    size_t T = ws_model_state_floats(em->m);
    int n_traj = 0, nq = 0;
    for (int i = 0; i < n; i++) {
        ws_eng_item *it = &items[i];
        if (!ws_eng_in_group(it, g)) continue;
        it->row = n_traj++;
        it->q_off = nq;
        nq += it->j->n_query;
    }
    g->probs = malloc(sizeof(float) * (size_t)(nq ? nq : 1));
    if (!g->probs) return ws_error_set(&g->err, WS_ERR_NOMEM, "out of memory");
    if (g->kind == WS_JOB_QUERY && !nq) return WS_OK;
    /* the parallelism of the pass from its size and what such passes took: one
     * thread, or chunks on each of several (ws_exec_pool_chunk) */
    ws_threads_pick *par = &em->par[g->kind == WS_JOB_QUERY];
    int threads = ws_threads_choose(par, n_traj);
    int chunk = ws_exec_pool_chunk(em->pool, n_traj, threads);
    ws_backend_threads(e->be, 1);
    double t0 = ws_clock_mono_s();
    pass ps = {e, items, n, g};
    ws_status s = ws_exec_pool_run(em->pool, n_traj, chunk, threads, run_rows, &ps, &g->err);
    ws_threads_record(par, n_traj, threads, ws_clock_mono_s() - t0);
    ws_backend_threads(e->be, 0); /* training passes on this thread choose their own */
    if (s != WS_OK || g->kind == WS_JOB_QUERY) return s;
    return ws_backend_download(e->be, w, em->w_dev, sizeof(float) * T * (size_t)n_traj);
}

static int has_group(const ws_eng_item *items, int n, const ws_eng_model *em, ws_job_kind kind)
{
    for (int i = 0; i < n; i++)
        if (items[i].live && items[i].em == em && items[i].j->kind == kind) return 1;
    return 0;
}

/* The flight of jobs: every job prepared (refused ones are answered here),
 * then computed per model and kind. NULL when out of memory (every job failed). */
static ws_eng_flight *compute(ws_engine *e, ws_job **jobs, int n)
{
    ws_eng_flight *f = calloc(1, sizeof *f);
    if (f) {
        f->items = calloc((size_t)n, sizeof *f->items);
        f->groups = calloc(2 * (size_t)e->n_models, sizeof *f->groups);
        f->sessions = calloc((size_t)n, sizeof *f->sessions);
    }
    if (!f || !f->items || (e->n_models && !f->groups) || !f->sessions) {
        ws_error err;
        ws_error_set(&err, WS_ERR_NOMEM, "out of memory");
        for (int i = 0; i < n; i++) ws_eng_fail(jobs[i], WS_ERR_NOMEM, &err);
        ws_eng_flight_free(f);
        return NULL;
    }
    f->n = n;
    for (int i = 0; i < n; i++) {
        ws_eng_item *it = &f->items[i];
        it->j = jobs[i];
        memcpy(f->sessions[i], jobs[i]->session, sizeof f->sessions[i]);
        if (jobs[i]->kind == WS_JOB_LABELS) {
            it->live = 1; /* labelled on the commit thread, which writes SQLite */
            ws_eng_rules_labels(e, jobs[i]);
        } else
            prepare(e, it);
    }
    if (e->shared) share_vocabs(e, f);
    for (int i = 0; i < n; i++) {
        const ws_eng_item *it = &f->items[i];
        if (it->live) {
            f->n_steps += jobs[i]->kind == WS_JOB_STEP;
            f->n_queries += jobs[i]->kind == WS_JOB_LABELS ? 0 : jobs[i]->n_query;
        }
    }
    unsigned buf = e->flights++ % (WS_ENG_FLIGHTS + 1); /* not a flight's in hand */
    for (int mi = 0; mi < e->n_models; mi++) {
        ws_eng_model *em = &e->models[mi];
        for (int k = 0; k < 2; k++) {
            ws_job_kind kind = k == 0 ? WS_JOB_STEP : WS_JOB_QUERY;
            if (!has_group(f->items, n, em, kind)) continue;
            ws_eng_group *g = &f->groups[f->n_groups++];
            *g = (ws_eng_group){
                .em = em, .kind = kind, .version = em->version, .w = em->w_host[buf]};
            g->s = run_model(e, f->items, n, g, em->w_host[buf]);
            g->vocab_now = ws_vocab_size(ws_model_vocab(em->m));
        }
    }
    return f;
}

void ws_eng_run_batch(ws_engine *e, ws_job **jobs, int n)
{
    ws_eng_flight *f = compute(e, jobs, n);
    if (f) ws_eng_commit_hand(e, f);
}
