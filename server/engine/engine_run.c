/* engine_run.c — one batch of session jobs: load each session's W_{t-1}, check
 * the job against its model, map symbols to ids, then per model one ws_exec_step
 * (updater + extractor for every step job) and one ws_exec_query (query-only
 * jobs), and ONE SQLite transaction for all the steps (group commit: new
 * vocabulary, each session's W_t and log entry). Step jobs complete only after
 * the commit, so an acknowledged step is durable per the store's durability. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_impl.h"

typedef struct {
    ws_job *j;
    ws_store_session sess;
    ws_eng_model *em;
    int32_t *ids;   /* (n_instr + n_query) rows of S ids, -1 padded (vector rows all -1) */
    uint64_t *hash; /* the same rows: each symbol's hash of its bytes (its fixed code, also
                       for a symbol past the vocabulary's capacity), 0 padded */
    int row;        /* trajectory in the model's batch */
    int q_off;      /* first answer in the probs array */
    int live;       /* still to be answered by the run */
} item;

static void fail_item(item *it, ws_job_why why, ws_status s, const char *msg)
{
    it->live = 0;
    ws_eng_refuse(it->j, why, s, "%s", msg);
}

static int check_facts(item *it, const ws_job_fact *f, int n, const char *what)
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

/* Loads the session and checks the job against it (phase 1). */
static void prepare(ws_engine *e, item *it)
{
    ws_job *j = it->j;
    ws_error err = {0};
    ws_status s = ws_store_session_get(e->st, j->tenant, j->session, 1, &it->sess, &err);
    if (s != WS_OK) return ws_eng_fail(j, s, &err);
    it->em = ws_eng_model_by_id(e, it->sess.model);
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

/* Row r of the item's facts as symbols (id and hash). */
static const ws_sym *row_syms(const item *it, int r, int S, ws_sym *out)
{
    for (int k = 0; k < S; k++)
        out[k] = (ws_sym){it->ids[(size_t)r * S + k], it->hash[(size_t)r * S + k]};
    return out;
}

static ws_status add_facts(ws_batch *b, const item *it, int S)
{
    const ws_job *j = it->j;
    ws_sym syms[WS_MAX_FACT_LEN];
    for (int i = 0; i < j->n_instr; i++) {
        const ws_job_fact *f = &j->instr[i];
        WS_TRY(f->n_sym ? ws_batch_add_instr_syms(b, row_syms(it, i, S, syms), f->n_sym, f->value)
                        : ws_batch_add_instr_raw(b, f->vec, f->value));
    }
    for (int i = 0; i < j->n_query; i++) {
        const ws_job_fact *f = &j->query[i];
        WS_TRY(f->n_sym
                   ? ws_batch_add_query_syms(b, row_syms(it, j->n_instr + i, S, syms), f->n_sym, -1)
                   : ws_batch_add_query_raw(b, f->vec, -1));
    }
    return WS_OK;
}

/* Builds and runs the model on the live items of kind `kind` of one model. */
static ws_status run_model(ws_engine *e, ws_eng_model *em, item *items, int n, ws_job_kind kind,
                           float **probs, int *n_traj, ws_error *err)
{
    ws_batch *b = em->batch;
    size_t T = ws_model_state_floats(em->m);
    int S = em->cfg.max_fact_len;
    ws_batch_clear(b);
    *n_traj = 0;
    for (int i = 0; i < n; i++) {
        item *it = &items[i];
        if (!it->live || it->em != em || it->j->kind != kind) continue;
        it->row = (*n_traj)++;
        it->q_off = ws_batch_n_query(b);
        int from_w0 = it->sess.rows == 0;
        WS_TRY(ws_batch_begin_traj(b, kind == WS_JOB_STEP && from_w0));
        WS_TRY(add_facts(b, it, S));
        float *dst = em->w_dev + (size_t)it->row * T;
        if (!from_w0)
            WS_TRY(ws_backend_upload(e->be, dst, it->sess.state, sizeof(float) * T));
        else if (kind == WS_JOB_QUERY)
            WS_TRY(ws_model_state_init(em->m, em->w_dev, it->row, 1, err));
    }
    if (!*n_traj) return WS_OK;
    int nq = ws_batch_n_query(b);
    *probs = malloc(sizeof(float) * (size_t)(nq ? nq : 1));
    if (!*probs) return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    ws_step_result res;
    if (kind == WS_JOB_QUERY)
        return nq ? ws_exec_query(em->x, b, em->w_dev, *probs, &res, err) : WS_OK;
    WS_TRY(ws_exec_step(em->x, b, em->w_dev, em->w_dev, WS_STEP_INFER, 1.0f, *probs, &res, err));
    return ws_backend_download(e->be, em->w_host, em->w_dev, sizeof(float) * T * (size_t)*n_traj);
}

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

/* Appends symbols the vocabulary gained since the last commit (inside a transaction). */
static ws_status flush_vocab(ws_engine *e, ws_eng_model *em, ws_error *err)
{
    ws_vocab *v = ws_model_vocab(em->m);
    int n = ws_vocab_size(v) - em->vocab_stored;
    if (n <= 0) return WS_OK;
    const char **syms = malloc(sizeof(char *) * (size_t)n);
    if (!syms) return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) syms[i] = ws_vocab_symbol(v, em->vocab_stored + i);
    ws_status s = ws_store_vocab_append(e->st, em->id, em->vocab_stored, (size_t)n, syms, err);
    free(syms);
    return s;
}

/* Ends the transaction of a group of em: commits it when s is WS_OK (the
 * vocabulary up to vocab_now is then stored), else rolls it back. */
static ws_status end_commit(ws_engine *e, ws_eng_model *em, int vocab_now, ws_status s,
                            ws_error *err)
{
    if (s == WS_OK)
        s = ws_store_commit(e->st, err);
    else
        ws_store_rollback(e->st, NULL);
    if (s == WS_OK) em->vocab_stored = vocab_now;
    return s;
}

static void observe(ws_eng_model *em, item *it, int64_t step)
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

/* Group commit of the step items of one model, then the completions. */
static void commit_steps(ws_engine *e, ws_eng_model *em, item *items, int n, const float *probs)
{
    ws_error err = {0};
    size_t T = ws_model_state_floats(em->m);
    int vocab_now = ws_vocab_size(ws_model_vocab(em->m));
    ws_status s = ws_store_begin(e->st, &err);
    if (s == WS_OK) s = flush_vocab(e, em, &err);
    for (int i = 0; s == WS_OK && i < n; i++) {
        item *it = &items[i];
        if (!it->live || it->em != em || it->j->kind != WS_JOB_STEP) continue;
        cJSON *ans = ws_srv_answers_json(probs + it->q_off, it->j->n_query);
        char *ans_text = ans ? cJSON_PrintUnformatted(ans) : NULL;
        cJSON_Delete(ans);
        ws_store_log_entry entry = {.instructions_json = it->j->instr_json,
                                    .queries_json = it->j->query_json,
                                    .labels_json = it->j->labels_json,
                                    .answers_json = ans_text,
                                    .model_version = em->version};
        int64_t cur = 0;
        ws_error e1 = {0};
        /* The answers go into the result first: a step applied is a step answered. */
        ws_status s1 = ans_text ? set_answers(it->j, probs + it->q_off, em->version, &e1)
                                : ws_error_set(&e1, WS_ERR_NOMEM, "out of memory");
        if (s1 == WS_OK)
            s1 = ws_store_apply_step(e->st, it->j->tenant, it->j->session, it->sess.step,
                                     em->w_host + (size_t)it->row * T, (int32_t)em->cfg.n_state,
                                     (int32_t)em->cfg.d, &entry, &cur, &e1);
        free(ans_text);
        if (s1 == WS_OK) {
            it->j->result.step = cur;
            continue;
        }
        it->live = 0;
        if (s1 == WS_ERR_CONFLICT) { /* another step got there first (only this job is undone) */
            it->j->result.step = cur;
            ws_eng_refuse(it->j, WS_JOB_STEP_CONFLICT, WS_ERR_CONFLICT, "session is at step %lld",
                          (long long)cur);
        } else {
            ws_eng_fail(it->j, s1, &e1);
        }
    }
    s = end_commit(e, em, vocab_now, s, &err);
    for (int i = 0; i < n; i++) {
        item *it = &items[i];
        if (!it->live || it->em != em || it->j->kind != WS_JOB_STEP) continue;
        if (s != WS_OK) { /* nothing of the group was kept: nobody is acknowledged */
            it->live = 0;
            ws_eng_fail(it->j, s, &err);
            continue;
        }
        /* Before any reply: a client that has its step acknowledged sees its
         * example counted (GET /v1/models, /metrics). */
        observe(em, it, it->sess.step + 1);
        if (it->sess.rows) /* the console's change chart (a step from W_0 has none) */
            ws_eng_history_change(e->hist, it->j->session, it->sess.step + 1, em->version,
                                  (int)em->cfg.n_state, (int)em->cfg.d, it->sess.state,
                                  em->w_host + (size_t)it->row * T);
    }
    for (int i = 0; i < n; i++) {
        item *it = &items[i];
        if (!it->live || it->em != em || it->j->kind != WS_JOB_STEP) continue;
        it->live = 0;
        ws_eng_finish(it->j);
    }
}

static void answer_queries(ws_engine *e, ws_eng_model *em, item *items, int n, const float *probs)
{
    ws_error err = {0};
    ws_status s = WS_OK;
    if (ws_vocab_size(ws_model_vocab(em->m)) >
        em->vocab_stored) { /* queries may name new symbols */
        int vocab_now = ws_vocab_size(ws_model_vocab(em->m));
        s = ws_store_begin(e->st, &err);
        if (s == WS_OK) s = flush_vocab(e, em, &err);
        s = end_commit(e, em, vocab_now, s, &err);
    }
    for (int i = 0; i < n; i++) {
        item *it = &items[i];
        if (!it->live || it->em != em || it->j->kind != WS_JOB_QUERY) continue;
        it->live = 0;
        ws_error e1 = err;
        ws_status s1 = s == WS_OK ? set_answers(it->j, probs + it->q_off, em->version, &e1) : s;
        it->j->result.step = it->sess.step;
        if (s1 != WS_OK)
            ws_eng_fail(it->j, s1, &e1);
        else
            ws_eng_finish(it->j);
    }
}

static void fail_group(ws_eng_model *em, item *items, int n, ws_job_kind kind, ws_status s,
                       const ws_error *err)
{
    for (int i = 0; i < n; i++) {
        item *it = &items[i];
        if (!it->live || it->em != em || it->j->kind != kind) continue;
        it->live = 0;
        ws_eng_fail(it->j, s, err);
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
    int n_query = -2;
    ws_status s = ws_store_session_get(e->st, j->tenant, j->session, 0, &sess, &err);
    if (s == WS_OK)
        s = ws_store_log_page(e->st, j->tenant, j->session, j->label_step - 1, 1, count_queries,
                              &n_query, &err);
    if (s == WS_OK && n_query == -2) s = ws_error_set(&err, WS_ERR_NOTFOUND, "no such step");
    if (s == WS_OK && n_query != j->n_labels)
        s = ws_error_set(&err, WS_ERR_INVALID, "step %lld has %d queries: send one label each",
                         (long long)j->label_step, n_query);
    if (s == WS_OK)
        s = ws_store_log_set_labels(e->st, j->tenant, j->session, j->label_step, j->labels_json,
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

void ws_eng_run_batch(ws_engine *e, ws_job **jobs, int n)
{
    item *items = calloc((size_t)n, sizeof *items);
    if (!items) {
        ws_error err;
        ws_error_set(&err, WS_ERR_NOMEM, "out of memory");
        for (int i = 0; i < n; i++) ws_eng_fail(jobs[i], WS_ERR_NOMEM, &err);
        return;
    }
    int n_steps = 0, n_queries = 0;
    for (int i = 0; i < n; i++) {
        items[i].j = jobs[i];
        if (jobs[i]->kind == WS_JOB_LABELS)
            label_job(e, jobs[i]);
        else
            prepare(e, &items[i]);
        if (items[i].live) {
            n_steps += jobs[i]->kind == WS_JOB_STEP;
            n_queries += jobs[i]->n_query;
        }
    }
    for (int mi = 0; mi < e->n_models; mi++) {
        ws_eng_model *em = &e->models[mi];
        for (int k = 0; k < 2; k++) {
            ws_job_kind kind = k == 0 ? WS_JOB_STEP : WS_JOB_QUERY;
            float *probs = NULL;
            int n_traj = 0;
            ws_error err = {0};
            ws_status s = run_model(e, em, items, n, kind, &probs, &n_traj, &err);
            if (s != WS_OK)
                fail_group(em, items, n, kind, s, &err);
            else if (n_traj && kind == WS_JOB_STEP)
                commit_steps(e, em, items, n, probs);
            else if (n_traj)
                answer_queries(e, em, items, n, probs);
            free(probs);
        }
    }
    if (e->cfg.on_batch) e->cfg.on_batch(n, n_steps, n_queries);
    for (int i = 0; i < n; i++) {
        ws_store_session_clear(&items[i].sess);
        free(items[i].ids);
        free(items[i].hash);
    }
    free(items);
}
