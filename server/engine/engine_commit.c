/* engine_commit.c — the commit stage of the pipeline (engine_impl.h): a
 * thread of its own that takes each flight the engine thread computed and, per
 * model, commits its steps in ONE SQLite transaction (group commit: new
 * vocabulary, each session's W_t and log entry), answers its queries and
 * labels, feeds the online trainer, then completes the jobs. A step that
 * another daemon of a cluster got to first (its session moved since it was
 * read) runs again, unless it named expect_step (409). Step jobs
 * complete only after the commit, so an acknowledged step is durable per the
 * store's durability; meanwhile the engine thread computes the next batch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ws_thread_name.h"
#include "engine_impl.h"

/* The answers of a step or query job into its result. */
static ws_status set_answers(ws_job *j, const float *p, int64_t version, ws_error *err)
{
    j->result.model_version = version;
    j->result.n_p = j->n_query;
    j->result.p = malloc(sizeof(float) * (size_t)(j->n_query ? j->n_query : 1));
    if (!j->result.p) return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    memcpy(j->result.p, p, sizeof(float) * (size_t)j->n_query);
    return WS_OK;
}

/* Appends the symbols the vocabulary gained, up to vocab_now, since the last
 * commit (inside a transaction). The engine thread may be adding symbols past
 * vocab_now meanwhile: a symbol's string never moves once added. */
static ws_status flush_vocab(ws_engine *e, ws_eng_model *em, int vocab_now, ws_error *err)
{
    if (e->shared) return WS_OK; /* stored before the compute (engine_run.c) */
    ws_vocab *v = ws_model_vocab(em->m);
    int n = vocab_now - em->vocab_stored;
    if (n <= 0) return WS_OK;
    const char **syms = malloc(sizeof(char *) * (size_t)n);
    if (!syms) return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) syms[i] = ws_vocab_symbol_added(v, em->vocab_stored + i);
    ws_status s =
        ws_store_vocab_append(e->commit_st, em->id, em->vocab_stored, (size_t)n, syms, err);
    free(syms);
    return s;
}

/* Ends the transaction of a group of em: commits it when s is WS_OK (the
 * vocabulary up to vocab_now is then stored), else rolls it back. */
static ws_status end_commit(ws_engine *e, ws_eng_model *em, int vocab_now, ws_status s,
                            ws_error *err)
{
    if (s == WS_OK)
        s = ws_store_commit(e->commit_st, err);
    else
        ws_store_rollback(e->commit_st, NULL);
    if (s == WS_OK && !e->shared) em->vocab_stored = vocab_now;
    return s;
}

static void observe(ws_eng_model *em, ws_eng_item *it, int64_t step)
{
    ws_job *j = it->j;
    int iv[WS_SRV_MAX_ITEMS], lb[WS_SRV_MAX_ITEMS], vec = 0;
    for (int i = 0; i < j->n_instr; i++) iv[i] = j->instr[i].value, vec |= !j->instr[i].n_sym;
    for (int i = 0; i < j->n_query; i++) lb[i] = j->query[i].value, vec |= !j->query[i].n_sym;
    int S = em->cfg.max_fact_len;
    ws_online_step ts = {.session = j->session,
                         .step = step,
                         .w_prev = it->sess.rows ? it->sess.state : NULL,
                         .instr_ids = it->ids,
                         .instr_hash = it->hash,
                         .instr_val = iv,
                         .n_instr = j->n_instr,
                         .query_ids = it->ids + (size_t)j->n_instr * S,
                         .query_hash = it->hash + (size_t)j->n_instr * S,
                         .labels = j->has_labels ? lb : NULL,
                         .n_query = j->n_query,
                         .has_vectors = vec};
    ws_online_observe(em->trainer, &em->tr, &ts);
}

/* Group commit of a group of steps, then the completions. */
static void commit_steps(ws_engine *e, ws_eng_flight *f, const ws_eng_group *g)
{
    ws_error err = {0};
    ws_eng_model *em = g->em;
    size_t T = ws_model_state_floats(em->m);
    ws_status s = ws_store_begin(e->commit_st, &err);
    if (s == WS_OK) s = flush_vocab(e, em, g->vocab_now, &err);
    for (int i = 0; s == WS_OK && i < f->n; i++) {
        ws_eng_item *it = &f->items[i];
        if (!ws_eng_in_group(it, g)) continue;
        cJSON *ans = ws_srv_answers_json(g->probs + it->q_off, it->j->n_query);
        char *ans_text = ans ? cJSON_PrintUnformatted(ans) : NULL;
        cJSON_Delete(ans);
        ws_store_log_entry entry = {.instructions_json = it->j->instr_json,
                                    .queries_json = it->j->query_json,
                                    .labels_json = it->j->labels_json,
                                    .answers_json = ans_text,
                                    .model_version = g->version};
        int64_t cur = 0;
        ws_error e1 = {0};
        /* The answers go into the result first: a step applied is a step answered. */
        ws_status s1 = ans_text ? set_answers(it->j, g->probs + it->q_off, g->version, &e1)
                                : ws_error_set(&e1, WS_ERR_NOMEM, "out of memory");
        if (s1 == WS_OK)
            s1 = ws_store_apply_step(e->commit_st, it->j->tenant, it->j->session, it->sess.step,
                                     g->w + (size_t)it->row * T,
                                     (int32_t)ws_model_config_state_rows(&em->cfg),
                                     (int32_t)em->cfg.d, &entry, &cur, &e1);
        free(ans_text);
        if (s1 == WS_OK) {
            it->j->result.step = cur;
            continue;
        }
        it->live = 0;
        if (e->cache) ws_state_cache_drop(e->cache, it->j->session); /* the store decides */
        /* Another daemon stepped the session since it was read (a cluster:
         * api.md): a step that named no expect_step runs again on the state now
         * stored; one that did is answered 409, as expect_step says. */
        if (s1 == WS_ERR_CONFLICT && it->j->expect_step < 0 && ws_eng_requeue(e, it->j)) continue;
        if (s1 == WS_ERR_CONFLICT) { /* another step got there first (only this job is undone) */
            it->j->result.step = cur;
            ws_eng_refuse(it->j, WS_JOB_STEP_CONFLICT, WS_ERR_CONFLICT, "session is at step %lld",
                          (long long)cur);
        } else {
            ws_eng_fail(it->j, s1, &e1);
        }
    }
    s = end_commit(e, em, g->vocab_now, s, &err);
    for (int i = 0; i < f->n; i++) {
        ws_eng_item *it = &f->items[i];
        if (!ws_eng_in_group(it, g)) continue;
        if (s != WS_OK) { /* nothing of the group was kept: nobody is acknowledged */
            it->live = 0;
            if (e->cache) ws_state_cache_drop(e->cache, it->j->session);
            ws_eng_fail(it->j, s, &err);
            continue;
        }
        if (e->cache) /* the session's next step starts from here without a read */
            ws_state_cache_put(e->cache, it->j->tenant, it->j->session, em->id, it->j->result.step,
                               (int32_t)ws_model_config_state_rows(&em->cfg), (int32_t)em->cfg.d,
                               g->w + (size_t)it->row * T);
        if (e->cache && it->told)
            ws_state_cache_put_told(e->cache, it->j->session, it->j->result.step, it->told);
        /* Before any reply: a client that has its step acknowledged sees its
         * example counted (GET /v1/models, /metrics). In a cluster the daemon
         * that holds the model's lock trains it, on the steps it serves. */
        if (em->leader) observe(em, it, it->sess.step + 1);
        if (it->sess.rows) /* the console's change chart (a step from W_0 has none) */
            ws_eng_history_change(e->hist, it->j->session, it->sess.step + 1, g->version,
                                  ws_model_config_state_rows(&em->cfg), (int)em->cfg.d,
                                  it->sess.state, g->w + (size_t)it->row * T);
    }
    for (int i = 0; i < f->n; i++) {
        ws_eng_item *it = &f->items[i];
        if (!ws_eng_in_group(it, g)) continue;
        it->live = 0;
        ws_eng_finish(it->j);
    }
}

static void answer_queries(ws_engine *e, ws_eng_flight *f, const ws_eng_group *g)
{
    ws_error err = {0};
    ws_status s = WS_OK;
    if (!e->shared && g->vocab_now > g->em->vocab_stored) { /* queries may name new symbols */
        s = ws_store_begin(e->commit_st, &err);
        if (s == WS_OK) s = flush_vocab(e, g->em, g->vocab_now, &err);
        s = end_commit(e, g->em, g->vocab_now, s, &err);
    }
    for (int i = 0; i < f->n; i++) {
        ws_eng_item *it = &f->items[i];
        if (!ws_eng_in_group(it, g)) continue;
        it->live = 0;
        ws_error e1 = err;
        ws_status s1 = s == WS_OK ? set_answers(it->j, g->probs + it->q_off, g->version, &e1) : s;
        it->j->result.step = it->sess.step;
        if (s1 != WS_OK)
            ws_eng_fail(it->j, s1, &e1);
        else
            ws_eng_finish(it->j);
    }
}

static void fail_group(ws_eng_flight *f, const ws_eng_group *g)
{
    for (int i = 0; i < f->n; i++) {
        ws_eng_item *it = &f->items[i];
        if (!ws_eng_in_group(it, g)) continue;
        it->live = 0;
        ws_eng_fail(it->j, g->s, &g->err);
    }
}

static ws_status count_queries(void *ctx, const ws_store_log_entry *entry)
{
    cJSON *q = cJSON_Parse(entry->queries_json);
    *(int *)ctx = q ? cJSON_GetArraySize(q) : -1;
    cJSON_Delete(q);
    return WS_OK;
}

static void label_job(ws_engine *e, ws_job *j)
{
    ws_error err = {0};
    ws_store_session sess = {0};
    ws_store *st = e->commit_st;
    int n_query = -2;
    ws_status s = ws_store_session_get(st, j->tenant, j->session, 0, &sess, &err);
    if (s == WS_OK)
        s = ws_store_log_page(st, j->tenant, j->session, j->label_step - 1, 1, count_queries,
                              &n_query, &err);
    if (s == WS_OK && n_query == -2) s = ws_error_set(&err, WS_ERR_NOTFOUND, "no such step");
    if (s == WS_OK && n_query != j->n_labels)
        s = ws_error_set(&err, WS_ERR_INVALID, "step %lld has %d queries: send one label each",
                         (long long)j->label_step, n_query);
    if (s == WS_OK)
        s = ws_store_log_set_labels(st, j->tenant, j->session, j->label_step, j->labels_json,
                                    j->replace, &err);
    if (s != WS_OK) {
        ws_store_session_clear(&sess);
        if (s == WS_ERR_CONFLICT) return ws_eng_refuse(j, WS_JOB_LABELS_CONFLICT, s, "%s", err.msg);
        return ws_eng_fail(j, s, &err);
    }
    ws_eng_model *em = ws_eng_model_by_id(e, sess.model);
    ws_store_session_clear(&sess);
    j->result.training_example =
        em && em->tr.enabled &&
        ws_online_label(em->trainer, j->session, j->label_step, j->labels, j->n_labels);
    j->result.step = j->label_step;
    ws_eng_finish(j);
}

static void commit_flight(ws_engine *e, ws_eng_flight *f)
{
    for (int i = 0; i < f->n; i++) {
        ws_eng_item *it = &f->items[i];
        if (!it->live || it->j->kind != WS_JOB_LABELS) continue;
        it->live = 0;
        label_job(e, it->j);
    }
    for (int k = 0; k < f->n_groups; k++) {
        const ws_eng_group *g = &f->groups[k];
        if (g->s != WS_OK)
            fail_group(f, g);
        else if (g->kind == WS_JOB_STEP)
            commit_steps(e, f, g);
        else
            answer_queries(e, f, g);
    }
    if (e->cfg.on_batch) e->cfg.on_batch(f->n, f->n_steps, f->n_queries);
}

void ws_eng_flight_free(ws_eng_flight *f)
{
    if (!f) return;
    for (int i = 0; f->items && i < f->n; i++) {
        ws_store_session_clear(&f->items[i].sess);
        free(f->items[i].ids);
        free(f->items[i].hash);
        free(f->items[i].told);
    }
    for (int k = 0; f->groups && k < f->n_groups; k++) free(f->groups[k].probs);
    free(f->items);
    free(f->groups);
    free(f->sessions);
    free(f);
}

static void *commit_main(void *arg)
{
    ws_engine *e = arg;
    ws_thread_name("ws-commit");
    pthread_mutex_lock(&e->mu);
    for (;;) {
        while (!e->n_flight && !e->commit_stop) pthread_cond_wait(&e->commit_cv, &e->mu);
        if (!e->n_flight) break;
        ws_eng_flight *f = e->flight[0]; /* stays in hand (its sessions held) until done */
        pthread_mutex_unlock(&e->mu);
        commit_flight(e, f);
        pthread_mutex_lock(&e->mu);
        memmove(e->flight, e->flight + 1, sizeof *e->flight * (size_t)--e->n_flight);
        e->refill = f->n;
        ws_eng_signal(e); /* the engine thread may wait for it */
        pthread_mutex_unlock(&e->mu);
        ws_eng_flight_free(f);
        pthread_mutex_lock(&e->mu);
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

ws_status ws_eng_commit_start(ws_engine *e, ws_error *err)
{
    WS_TRY(ws_store_open(e->cfg.db_path, e->cfg.durability, 0, &e->commit_st, err));
    if (pthread_create(&e->commit_thread, NULL, commit_main, e) != 0)
        return ws_error_set(err, WS_ERR_NOMEM, "cannot start the commit thread");
    e->commit_started = 1;
    return WS_OK;
}

void ws_eng_commit_wait(ws_engine *e)
{
    while (e->n_flight) pthread_cond_wait(&e->cv, &e->mu);
}

void ws_eng_commit_hand(ws_engine *e, ws_eng_flight *f)
{
    pthread_mutex_lock(&e->mu);
    while (e->n_flight == WS_ENG_FLIGHTS) pthread_cond_wait(&e->cv, &e->mu);
    e->flight[e->n_flight++] = f;
    pthread_cond_signal(&e->commit_cv);
    pthread_mutex_unlock(&e->mu);
}

int ws_eng_commit_holds(const ws_engine *e, const char *session)
{
    if (!session[0]) return 0;
    for (int k = 0; k < e->n_flight; k++) {
        const ws_eng_flight *f = e->flight[k];
        for (int i = 0; i < f->n; i++)
            if (!strcmp(f->sessions[i], session)) return 1;
    }
    return 0;
}

void ws_eng_commit_stop(ws_engine *e)
{
    if (e->commit_started) {
        pthread_mutex_lock(&e->mu);
        e->commit_stop = 1;
        pthread_cond_signal(&e->commit_cv);
        pthread_mutex_unlock(&e->mu);
        pthread_join(e->commit_thread, NULL);
        e->commit_started = 0;
    }
    ws_store_close(e->commit_st);
    e->commit_st = NULL;
}
