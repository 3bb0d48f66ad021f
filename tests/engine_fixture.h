/* engine_fixture.h — what the engine tests (test_engine.c,
 * test_engine_concurrency.c) share: jobs submitted to an engine and waited
 * for, jobs built from text, the log rows storage holds, a tiny model and an
 * engine config on a directory. Every failure is a cmocka assertion. */
#ifndef WS_TEST_ENGINE_FIXTURE_H
#define WS_TEST_ENGINE_FIXTURE_H

#include <pthread.h>
#include <stdint.h>

#include "server/common/versions.h"
#include "server/engine/engine.h"
#include "storage/storage.h"

/* The test's temporary directory and the "default" tenant's id, set by each
 * test program's setup. */
extern char EF_DIR[256];
extern int64_t EF_TENANT;

/* ---- submitting a job and waiting for its callback ---- */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
} ef_waiter;

int ef_waiter_done(ef_waiter *w);
/* Submits j to e; its callback marks w. */
void ef_submit_on(ws_engine *e, ws_job *j, ef_waiter *w);
/* Submits j to e and returns once its callback ran; the result is in j->result. */
void ef_run_on(ws_engine *e, ws_job *j);

/* ---- jobs ---- */
ws_job *ef_job_new(ws_job_kind kind, const char *session);
/* facts[i] = "sym sym ..." (space-separated symbols), value as given (NULL: -1). */
ws_job_fact *ef_facts(const char *const *text, const int *value, int n);
/* The two queries every step asks, and their JSON. */
extern const char *const EF_QUERIES[2];
extern const char EF_QUERIES_JSON[];
/* A step of session telling "mary kitchen" true and asking EF_QUERIES. */
ws_job *ef_step_job(const char *session, int64_t expect_step);
ws_job *ef_create_job(const char *name, const ws_model_config *c);
/* d=16, 2 heads, T=4, 1+1 layers, 64 symbols */
ws_model_config ef_tiny_config(void);
/* An engine on dir: CPU, max_batch 8, no batch wait, a 100 µs poll before it sleeps. */
ws_engine_config ef_engine_config(const char *dir);

/* ---- what storage holds ---- */
typedef struct {
    int64_t step, model_version;
    char answers[512], labels[64];
} ef_log_row;
/* A ws_store_log_page callback that keeps the row in ctx (an ef_log_row). */
ws_status ef_keep_row(void *ctx, const ws_store_log_entry *e);

#endif
