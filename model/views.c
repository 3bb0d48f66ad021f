/* views.c — a model of several views (ws_model_config.views): every trajectory
 * of a batch runs as `views` trajectories of the plan, view v on the codes of its
 * symbols' hashes mixed with v, and every query's answer is σ of the mean of its
 * views' logits.
 *
 * Why: the shipped model (d = 64, one view) answers worlds of 16 facts 97.0%
 * right (bench_memory, 1,024 episodes, seed 5), and its errors are mostly
 * interference between the random codes of the facts' symbols: the same
 * episodes on the codes of mixed hashes err on other questions (two views
 * wrong together on 0.13% of the questions, 0.09% were they independent), and
 * the mean of two views' logits answers 99.6% (16 facts), 99.98% (8). A view is
 * the same model on other codes of the same symbols, so no view is trained on
 * its own, and the trained per-id corrections serve every view.
 *
 * Layout: a trajectory's state is its views' states one after another
 * (V x T x d), which is the plan's layout of V trajectories: trajectory t's
 * view v is the plan's trajectory t·V + v, its instructions and queries those
 * of t. View 0 keeps the symbols' hashes: a model of one view is the model as
 * it was, bit for bit. The views' logits meet on the host (one float per
 * query and view), so every backend runs views with the ops it has. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/ws_rng.h"
#include "model_internal.h"

uint64_t ws_view_hash(uint64_t hash, int view)
{
    if (view == 0 || hash == 0) return hash;
    uint64_t h = ws_mix64(hash ^ (uint64_t)view * WS_RNG_GOLDEN);
    return h ? h : 1; /* a hash of 0 is no symbol */
}

/* Row i of f (src's instructions or queries) into dst as view `view` takes it. */
static ws_status add_row(ws_batch *dst, const ws_batch *src, const ws_fact_list *f, int i, int view,
                         const ws_vocab *vocab, int query)
{
    int value = f->value[i];
    if (f->raw_row[i] >= 0) {
        const float *x = f->raw + (size_t)f->raw_row[i] * (size_t)src->d_raw;
        return query ? ws_batch_add_query_raw(dst, x, value)
                     : ws_batch_add_instr_raw(dst, x, value);
    }
    ws_sym syms[WS_MAX_FACT_LEN];
    int n = 0;
    for (int s = 0; s < src->S; s++) { /* a row's symbols come first, then padding */
        int32_t id = f->ids[(size_t)i * src->S + s];
        uint64_t h = f->hash[(size_t)i * src->S + s];
        if (id < 0 && !h) break;
        if (!h && view) h = ws_vocab_hash(vocab, id); /* what the plan would take */
        syms[n++] = (ws_sym){id, ws_view_hash(h, view)};
    }
    return query ? ws_batch_add_query_syms(dst, syms, n, value)
                 : ws_batch_add_instr_syms(dst, syms, n, value);
}

ws_status ws_views_expand(ws_exec *x, const ws_batch *src, ws_error *err)
{
    if (!x->views && ws_batch_new(&x->views, &x->m->cfg) != WS_OK)
        return ws_error_set(err, WS_ERR_NOMEM, "model: out of memory");
    ws_batch *dst = x->views;
    ws_batch_clear(dst);
    int V = x->m->cfg.views;
    ws_status st = WS_OK;
    for (int t = 0; st == WS_OK && t < src->n_traj; t++)
        for (int v = 0; st == WS_OK && v < V; v++) {
            st = ws_batch_begin_traj(dst, src->from_w0[t]);
            for (int i = 0; st == WS_OK && i < src->n_instr[t]; i++)
                st = add_row(dst, src, &src->instr, src->instr_off[t] + i, v, x->m->vocab, 0);
            for (int i = 0; st == WS_OK && i < src->n_query[t]; i++)
                st = add_row(dst, src, &src->query, src->query_off[t] + i, v, x->m->vocab, 1);
        }
    if (st != WS_OK) return ws_error_set(err, st, "model: cannot lay out the views' batch");
    return WS_OK;
}

/* Grows the host buffer of the views' logits and their gradients to 2n floats. */
static float *logit_buffer(ws_exec *x, size_t n)
{
    if (x->view_logits_cap < 2 * n) {
        float *p = realloc(x->view_logits, 2 * n * sizeof *p);
        if (!p) return NULL;
        x->view_logits = p, x->view_logits_cap = 2 * n;
    }
    return x->view_logits;
}

ws_status ws_views_finish(ws_exec *x, const ws_batch *src, float *probs_host, float loss_scale,
                          int train, ws_step_result *res, ws_error *err)
{
    const ws_batch *vb = x->views;
    ws_backend *be = x->m->be;
    int V = x->m->cfg.views;
    size_t n = (size_t)vb->query.n;
    memset(res, 0, sizeof *res);
    res->n_labelled = src->n_labelled;
    if (n == 0) return WS_OK;
    float *logits = logit_buffer(x, n), *d_logits = logits ? logits + n : NULL;
    if (!logits) return ws_error_set(err, WS_ERR_NOMEM, "model: out of memory");
    if (ws_backend_download(be, logits, x->plan.logits, n * sizeof *logits) != WS_OK)
        return ws_error_set(err, WS_ERR_BACKEND, "model: reading answers failed");
    double loss = 0.0;
    for (int t = 0; t < src->n_traj; t++)
        for (int j = 0; j < src->n_query[t]; j++) {
            float z = 0.0f;
            for (int v = 0; v < V; v++) z += logits[vb->query_off[t * V + v] + j];
            z /= (float)V;
            float p = 1.0f / (1.0f + expf(-z)), y = src->labels[src->query_off[t] + j];
            if (probs_host) probs_host[src->query_off[t] + j] = p;
            float g = 0.0f;
            if (y >= 0.0f) {
                /* BCE of the mean logit, in its stable form */
                loss += fmaxf(z, 0.0f) - z * y + log1pf(expf(-fabsf(z)));
                res->n_correct += (p >= 0.5f) == (y >= 0.5f);
                g = (p - y) * loss_scale / (float)src->n_labelled / (float)V;
            }
            for (int v = 0; v < V; v++) d_logits[vb->query_off[t * V + v] + j] = g;
        }
    if (src->n_labelled > 0) res->loss = (float)(loss / src->n_labelled);
    if (train && ws_backend_upload(be, x->plan.d_logits, d_logits, n * sizeof *d_logits) != WS_OK)
        return ws_error_set(err, WS_ERR_BACKEND, "model: writing the answers' gradients failed");
    return WS_OK;
}
