/* engine_fixture.c — what the engine tests share (engine_fixture.h). */
#include "engine_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

char EF_DIR[256];
int64_t EF_TENANT;

static void on_done(ws_job *j, void *user)
{
    (void)j;
    ef_waiter *w = user;
    pthread_mutex_lock(&w->mu);
    w->done = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

int ef_waiter_done(ef_waiter *w)
{
    pthread_mutex_lock(&w->mu);
    int done = w->done;
    pthread_mutex_unlock(&w->mu);
    return done;
}

/* Submits j to e; its callback marks w. */
void ef_submit_on(ws_engine *e, ws_job *j, ef_waiter *w)
{
    ws_error err = {0};
    j->done = on_done;
    j->user = w;
    assert_int_equal(ws_engine_submit(e, j, &err), WS_OK);
}

/* Submits j to e and returns once its callback ran; the result is in j->result. */
void ef_run_on(ws_engine *e, ws_job *j)
{
    ef_waiter w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    ef_submit_on(e, j, &w);
    pthread_mutex_lock(&w.mu);
    while (!w.done) pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
}

ws_job *ef_job_new(ws_job_kind kind, const char *session)
{
    ws_job *j = calloc(1, sizeof *j);
    assert_non_null(j);
    j->kind = kind;
    j->tenant = EF_TENANT;
    j->expect_step = -1;
    snprintf(j->session, sizeof j->session, "%s", session);
    return j;
}

/* facts[i] = "sym sym ..." (space-separated symbols), value as given. */
ws_job_fact *ef_facts(const char *const *text, const int *value, int n)
{
    ws_job_fact *f = calloc((size_t)n, sizeof *f);
    assert_non_null(f);
    for (int i = 0; i < n; i++) {
        char buf[128];
        const char *syms[WS_MAX_FACT_LEN];
        int lens[WS_MAX_FACT_LEN], k = 0;
        snprintf(buf, sizeof buf, "%s", text[i]);
        char *save = NULL;
        for (char *p = strtok_r(buf, " ", &save); p; p = strtok_r(NULL, " ", &save)) {
            syms[k] = p;
            lens[k++] = (int)strlen(p);
        }
        ws_error err = {0};
        assert_int_equal(ws_job_fact_syms(&f[i], syms, lens, k, &err), WS_OK);
        f[i].value = value ? value[i] : -1;
    }
    return f;
}

const char *const EF_QUERIES[2] = {"mary kitchen", "john garden"};
const char EF_QUERIES_JSON[] =
    "[{\"fact\":[\"mary\",\"kitchen\"]},{\"fact\":[\"john\",\"garden\"]}]";

ws_job *ef_step_job(const char *session, int64_t expect_step)
{
    static const char *const instr[] = {"mary kitchen"};
    static const int val[] = {1};
    ws_job *j = ef_job_new(WS_JOB_STEP, session);
    j->expect_step = expect_step;
    j->instr = ef_facts(instr, val, 1), j->n_instr = 1;
    j->query = ef_facts(EF_QUERIES, NULL, 2), j->n_query = 2;
    j->instr_json = strdup("[{\"fact\":[\"mary\",\"kitchen\"],\"value\":true}]");
    j->query_json = strdup(EF_QUERIES_JSON);
    assert_true(j->instr_json && j->query_json);
    return j;
}

ws_status ef_keep_row(void *ctx, const ws_store_log_entry *e)
{
    ef_log_row *r = ctx;
    r->step = e->step, r->model_version = e->model_version;
    snprintf(r->answers, sizeof r->answers, "%s", e->answers_json);
    snprintf(r->labels, sizeof r->labels, "%s", e->labels_json ? e->labels_json : "");
    return WS_OK;
}

ws_job *ef_create_job(const char *name, const ws_model_config *c)
{
    ws_job *j = ef_job_new(WS_JOB_MODEL_CREATE, "");
    snprintf(j->model_name, sizeof j->model_name, "%s", name);
    j->cfg = *c;
    j->training = ws_srv_training_default();
    j->seed = 7;
    return j;
}

/* d=16, 2 heads, T=4, 1+1 layers, 64 symbols */
ws_model_config ef_tiny_config(void)
{
    ws_model_config c = ws_model_config_default();
    c.d = 16, c.n_heads = 2, c.n_state = 4;
    c.n_upd_layers = 1, c.n_ext_layers = 1, c.vocab_cap = 64;
    return c;
}

/* ---- setup: an engine, a small random model, a session on it ----------------- */
ws_engine_config ef_engine_config(const char *dir)
{
    ws_engine_config cfg = ws_engine_config_default();
    snprintf(cfg.data_dir, sizeof cfg.data_dir, "%s", dir);
    snprintf(cfg.db_path, sizeof cfg.db_path, "%s/worldstate.db", dir);
    cfg.force_cpu = 1;
    cfg.max_batch = 8;
    cfg.batch_wait_us = 0;
    cfg.idle_spin_us = 100; /* the engine's poll before it sleeps (off by default) runs here */
    return cfg;
}
