/* exec.c — an execution context (model.h ws_exec): the step that runs a batch
 * through Updater and Extractor (and back, when training) on its model's
 * weights, in its own arena. */
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

ws_status ws_exec_new(ws_exec **out, ws_model *m, ws_error *err)
{
    *out = NULL;
    ws_exec *x = calloc(1, sizeof *x);
    if (!x) return ws_error_set(err, WS_ERR_NOMEM, "model: out of memory");
    x->m = m;
    x->plan.upd = calloc((size_t)m->cfg.n_upd_layers + 1, sizeof *x->plan.upd);
    x->plan.ext = calloc((size_t)m->cfg.n_ext_layers + 1, sizeof *x->plan.ext);
    if (!x->plan.upd || !x->plan.ext) {
        ws_exec_free(x);
        return ws_error_set(err, WS_ERR_NOMEM, "model: out of memory");
    }
    *out = x;
    return WS_OK;
}

void ws_exec_free(ws_exec *x)
{
    if (!x) return;
    ws_backend_release(x->m->be, x->arena);
    free(x->staging);
    ws_batch_free(x->views);
    free(x->view_logits);
    free(x->plan.upd);
    free(x->plan.ext);
    free(x);
}

ws_model *ws_exec_model(const ws_exec *x) { return x->m; }
size_t ws_exec_arena_bytes(const ws_exec *x) { return x->arena_bytes; }

static ws_status check_batch(const ws_model *m, const ws_batch *b, const float *w_prev,
                             ws_error *err)
{
    if (b->S != m->cfg.max_fact_len || b->d_raw != m->cfg.d_raw ||
        b->n_ids != m->cfg.vocab_cap + m->cfg.n_overflow)
        return ws_error_set(err, WS_ERR_INVALID, "model: batch was built for another config");
    if (b->n_traj == 0) return ws_error_set(err, WS_ERR_INVALID, "model: empty batch");
    if (!w_prev)
        for (int t = 0; t < b->n_traj; t++)
            if (!b->from_w0[t])
                return ws_error_set(err, WS_ERR_INVALID,
                                    "model: trajectory %d needs a previous state", t);
    return WS_OK;
}

/* Downloads σ(logits) and scores them against the labels. */
static ws_status finish_queries(ws_exec *x, const ws_batch *b, float *probs_host,
                                ws_step_result *res, ws_error *err)
{
    ws_backend *be = x->m->be;
    ws_plan *p = &x->plan;
    int n = p->n_query;
    memset(res, 0, sizeof *res);
    res->n_labelled = b->n_labelled;
    if (n == 0) return WS_OK;
    float *probs = probs_host ? probs_host : malloc((size_t)n * sizeof *probs);
    if (!probs) return ws_error_set(err, WS_ERR_NOMEM, "model: out of memory");
    ws_status st = be->ops->sigmoid(be, p->probs, p->logits, (size_t)n);
    if (st == WS_OK && b->n_labelled > 0)
        st = be->ops->bce_forward(be, p->loss, p->logits, p->labels, (size_t)n,
                                  1.0f / (float)b->n_labelled);
    if (st == WS_OK) st = ws_backend_download(be, probs, p->probs, (size_t)n * sizeof *probs);
    if (st == WS_OK && b->n_labelled > 0)
        st = ws_backend_download(be, &res->loss, p->loss, sizeof res->loss);
    for (int i = 0; st == WS_OK && i < n; i++)
        if (b->labels[i] >= 0.0f && (probs[i] >= 0.5f) == (b->labels[i] >= 0.5f))
            res->n_correct++;
    if (probs != probs_host) free(probs);
    return st == WS_OK ? WS_OK : ws_error_set(err, st, "model: reading answers failed");
}

/* Under empty_steps "hold" a step that tells a trajectory nothing leaves its
 * state as it was, W_t = W_{t-1} bit for bit, however many such steps come: a
 * fact memory then keeps what it was told through any silence (the Updater
 * would rewrite it every step, and a small error compounds over thousands).
 * A trajectory that starts from W_0 has no state of its own to hold yet. */
static int holds(const ws_exec *x, const ws_batch *b, int t)
{
    return x->m->cfg.empty_steps == WS_EMPTY_HOLD && b->n_instr[t] == 0 && !b->from_w0[t];
}

static int count_holds(const ws_exec *x, const ws_batch *b)
{
    int n = 0;
    for (int t = 0; t < b->n_traj; t++) n += holds(x, b, t);
    return n;
}

/* W_t of every trajectory: the Updater's output in p->w_new, or W_{t-1} where it
 * holds (already in place when w_out aliases w_prev). When d_w is given (the
 * backward pass), the rows that held get no gradient into the Updater instead:
 * their W_t did not come from it, and gradients stop at W_{t-1}. Runs of
 * trajectories of one kind are one operation. */
static ws_status hold_rows(ws_exec *x, const ws_batch *b, const float *w_prev, float *w_out,
                           float *d_w)
{
    ws_backend *be = x->m->be;
    size_t per = (size_t)x->m->cfg.n_state * x->m->cfg.d;
    for (int t = 0; t < b->n_traj;) {
        int h = holds(x, b, t), e = t + 1;
        while (e < b->n_traj && holds(x, b, e) == h) e++;
        size_t at = (size_t)t * per, n = (size_t)(e - t) * per;
        if (d_w) {
            if (h) WS_TRY(be->ops->fill(be, d_w + at, 0.0f, n));
        } else {
            const float *src = h ? w_prev + at : x->plan.w_new + at;
            if (src != w_out + at) WS_TRY(be->ops->copy(be, w_out + at, src, n * sizeof(float)));
        }
        t = e;
    }
    return WS_OK;
}

/* *b: what the plan runs, the batch or x->views laid out from it (views.c). */
static ws_status planned(ws_exec *x, const ws_batch *batch, const ws_batch **b, ws_error *err)
{
    *b = batch;
    if (x->m->cfg.views <= 1) return WS_OK;
    WS_TRY(ws_views_expand(x, batch, err));
    *b = x->views;
    return WS_OK;
}

/* The answers of batch, run as b (planned). */
static ws_status answers(ws_exec *x, const ws_batch *batch, const ws_batch *b, float *probs_host,
                         float loss_scale, int train, ws_step_result *res, ws_error *err)
{
    return b == batch ? finish_queries(x, batch, probs_host, res, err)
                      : ws_views_finish(x, batch, probs_host, loss_scale, train, res, err);
}

ws_status ws_exec_step(ws_exec *x, const ws_batch *batch, const float *w_prev, float *w_out,
                       ws_step_mode mode, float loss_scale, float *probs_host,
                       ws_step_result *res, ws_error *err)
{
    ws_step_result local;
    if (!res) res = &local;
    WS_TRY(check_batch(x->m, batch, w_prev, err));
    int train = mode == WS_STEP_TRAIN && batch->n_labelled > 0;
    const ws_batch *b;
    WS_TRY(planned(x, batch, &b, err));
    WS_TRY(ws_plan_prepare(x, b, train, err));
    /* When every trajectory holds, the Updater has nothing to do. */
    int n_hold = count_holds(x, b), hold = n_hold > 0, upd = n_hold < b->n_traj;
    ws_status st = ws_embed_forward(x);
    if (st == WS_OK && upd) st = ws_updater_forward(x, w_prev, hold ? x->plan.w_new : w_out);
    if (st == WS_OK && hold) st = hold_rows(x, b, w_prev, w_out, NULL);
    if (st == WS_OK) st = ws_extractor_forward(x, w_out);
    if (st != WS_OK) return ws_error_set(err, st, "model: forward pass failed");
    WS_TRY(answers(x, batch, b, probs_host, loss_scale, train, res, err));
    if (!train) return WS_OK;
    ws_backend *be = x->m->be;
    ws_plan *p = &x->plan;
    if (b == batch) /* the views' gradients are ws_views_finish's */
        st = be->ops->bce_backward(be, p->d_logits, p->logits, p->labels, (size_t)p->n_query,
                                   loss_scale / (float)batch->n_labelled);
    if (st == WS_OK) st = ws_extractor_backward(x, w_out, p->d_w);
    if (st == WS_OK && hold && upd) st = hold_rows(x, b, w_prev, w_out, p->d_w);
    if (st == WS_OK && upd) st = ws_updater_backward(x);
    if (st == WS_OK) st = ws_embed_backward(x);
    if (st != WS_OK) return ws_error_set(err, st, "model: backward pass failed");
    return WS_OK;
}

ws_status ws_exec_query(ws_exec *x, const ws_batch *batch, const float *w, float *probs_host,
                        ws_step_result *res, ws_error *err)
{
    ws_step_result local;
    if (!res) res = &local;
    if (!w) return ws_error_set(err, WS_ERR_INVALID, "model: query needs states");
    WS_TRY(check_batch(x->m, batch, w, err));
    const ws_batch *b;
    WS_TRY(planned(x, batch, &b, err));
    WS_TRY(ws_plan_prepare(x, b, 0, err));
    ws_status st = ws_embed_forward(x);
    if (st == WS_OK) st = ws_extractor_forward(x, w);
    if (st != WS_OK) return ws_error_set(err, st, "model: extractor pass failed");
    return answers(x, batch, b, probs_host, 1.0f, 0, res, err);
}
