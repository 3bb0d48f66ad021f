/* offline_rederive.c — `worldstate-train rederive`: recompute sessions' world
 * states by replaying their step logs from W_0 under one model version, and
 * store them with that version as their state_version — how sessions move to a
 * retrained version.
 *
 * Replaying a session under the version that computed its steps reproduces
 * the state the daemon stored bit for bit on the CPU backend: no op's result
 * for one session depends on the others sharing its batch (rows, attention
 * segments, LayerNorm rows are computed alone; kernels/cpu/cpu_linear.c and
 * cpu_attention.c say how). A state that comes out identical is left as it
 * is; the summary counts both kinds.
 *
 * The daemon computes a step from the state it read and writes the result back
 * without looking at what happened in between, so a state rewritten under it
 * could be overwritten with one computed from the old state. Rederive therefore
 * takes the data directory's lock (datadir_lock.c) and refuses to run beside a
 * daemon; a daemon started meanwhile refuses to start until it is done. */
#include <stdlib.h>
#include <string.h>

#include "base/ws_clock.h"
#include "offline.h"
#include "server/common/versions.h"

typedef struct {
    ws_off_corpus *c;
    ws_backend *be;
    int64_t version;
    int dry_run;
    float *host; /* one state */
    const ws_model_config *cfg;
    long identical, rewritten, other_version_steps;
} rederive_ctx;

/* Counts the steps a version other than the chosen one computed. */
static ws_status count_versions(void *ctx, ws_off_row *r, ws_batch *b, ws_error *err)
{
    (void)b, (void)err;
    rederive_ctx *x = ctx;
    x->other_version_steps += r->step->model_version != x->version;
    return WS_OK;
}

static ws_status store_state(void *ctx, ws_off_row *r, const float *w, ws_error *err)
{
    rederive_ctx *x = ctx;
    const ws_off_session *s = &x->c->sessions[r->session];
    size_t n = ws_model_config_state_floats(x->cfg);
    WS_TRY(ws_backend_download(x->be, x->host, w, sizeof(float) * n));
    ws_store_session old = {0};
    WS_TRY(ws_store_session_get(x->c->st, s->tenant, s->id, 1, &old, err));
    int same = old.step == s->n_steps && old.state_version == x->version &&
               (size_t)old.rows * (size_t)old.cols == n &&
               !memcmp(old.state, x->host, sizeof(float) * n);
    ws_store_session_clear(&old);
    if (same) return x->identical++, WS_OK;
    x->rewritten++;
    if (x->dry_run) return WS_OK;
    return ws_store_session_set_state(x->c->st, s->tenant, s->id, s->n_steps, x->host,
                                      ws_model_config_state_rows(x->cfg), x->cfg->d, x->version,
                                      err);
}

static ws_status replay_all(rederive_ctx *x, int batch, ws_error *err)
{
    int *order = malloc(sizeof(int) * (size_t)(x->c->n ? x->c->n : 1));
    x->host = malloc(sizeof(float) * ws_model_state_floats(x->c->m));
    if (!order || !x->host) {
        free(order);
        return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < x->c->n; i++) order[i] = i;
    ws_off_replay *rp = NULL;
    ws_status s = ws_off_replay_new(&rp, x->c, batch, err);
    if (s == WS_OK) ws_off_replay_begin(rp, order, x->c->n);
    for (int n = 1; s == WS_OK && n > 0;) {
        ws_step_result res;
        s = ws_off_replay_step(rp, WS_STEP_INFER, 1.0f, count_versions, store_state, x, &n, &res,
                               err);
    }
    ws_off_replay_free(rp);
    free(order);
    return s;
}

ws_status ws_off_rederive(const ws_off_options *o, ws_error *err)
{
    int lock_fd = -1; /* held until exit: no daemon may serve these sessions meanwhile */
    WS_TRY(ws_srv_datadir_lock(o->data_dir, "worldstate-train rederive", &lock_fd, err));
    ws_off_work w;
    ws_status s = ws_off_work_open(&w, o, o->version, err);
    rederive_ctx x = {.c = &w.corpus, .be = w.be, .version = w.version, .dry_run = o->dry_run};
    if (s == WS_OK) s = ws_off_corpus_from_db(&w.corpus, w.row.id, o->session, 0, err);
    double t0 = ws_clock_mono_s();
    if (s == WS_OK) {
        x.cfg = ws_model_config_of(w.corpus.m);
        s = replay_all(&x, o->tc.batch, err);
    }
    double secs = ws_clock_mono_s() - t0;
    if (s == WS_OK) {
        const ws_off_corpus *c = &w.corpus;
        long at_zero = 0;
        for (int i = 0; i < c->n; i++) at_zero += c->sessions[i].n_steps == 0;
        printf("{\"rederive\":\"%s\",\"version\":%lld,\"sessions\":%d,\"steps\":%lld,\"identical\":"
               "%ld,"
               "\"%s\":%ld,\"at_step_0\":%ld,\"steps_of_other_versions\":%ld,\"seconds\":%.3f}\n",
               o->model, (long long)x.version, c->n, (long long)ws_off_corpus_steps(c), x.identical,
               o->dry_run ? "would_rewrite" : "rewritten", x.rewritten, at_zero,
               x.other_version_steps, secs);
    }
    free(x.host);
    ws_off_work_close(&w);
    return s;
}
