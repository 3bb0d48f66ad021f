/* offline_retrain.c — `worldstate-train retrain`: truncated-gradient training
 * (DESIGN §3) of a model's current version on the sessions' step logs, then a
 * new version beside the running daemon.
 *
 * Each epoch replays every session from W_0 in a fresh random order, batch
 * sessions at a time (offline_replay.c): W_t = U(stopgrad(W_{t-1}), I_t) as in
 * the daemon, the loss on the step's labelled queries plus recall queries drawn
 * from the facts told earlier in the session (labelled ones at their labels),
 * as online training draws them (recall.h), and, when the model's training is
 * self-supervised, its unlabelled queries answered by the closed world (a fact
 * told at its last value, one never told false while the session has told
 * fewer facts than recall.h keeps), as online training answers them.
 * Gradients accumulate over
 * update_every steps per AdamW step with the trainer's warmup + cosine
 * schedule over all epochs (model/trainer.h). The result is published as the
 * model's next version (versions.h): the daemon serves it within about a
 * second. */
#include <stdlib.h>
#include <string.h>

#include "offline.h"
#include "server/common/versions.h"
#include "base/ws_clock.h"
#include "base/ws_rng.h"

typedef struct {
    int S, recall;
    int closed; /* unlabelled queries answered by the closed world */
    uint64_t rng;
} targets_ctx;

/* The closed world's answer to fact f of row r's session (unlabelled): its
 * last value told, false when never told, -1 when that is not known (the
 * session told more facts than r->recall keeps, or f is a raw vector). */
static int closed_world(const targets_ctx *c, const ws_off_row *r, const ws_off_fact *f)
{
    if (!c->closed || !f->n_ids) return -1;
    return ws_recall_closed(&r->recall, c->S, f->ids, f->hash, r->recall.n < WS_RECALL_FACTS);
}

/* The step's labelled queries, then recall queries about facts told so far. A
 * label is the truth of the session's world at its step and overrides the
 * value told (a domain's rule may have changed it), as online training does
 * (api.md, Rules from labels): the labelled fact is recalled at its label. */
static ws_status add_targets(void *ctx, ws_off_row *r, ws_batch *b, ws_error *err)
{
    (void)err;
    targets_ctx *c = ctx;
    const ws_off_step *st = r->step;
    for (int k = 0; k < st->n_instr; k++)
        if (st->facts[k].n_ids)
            ws_recall_tell(&r->recall, c->S, st->facts[k].ids, st->facts[k].hash, st->facts[k].val);
    for (int k = st->n_instr; k < st->n_instr + st->n_query; k++) {
        const ws_off_fact *f = &st->facts[k];
        ws_sym syms[WS_MAX_FACT_LEN];
        int val = f->val >= 0 ? f->val : closed_world(c, r, f);
        if (val < 0) continue; /* unlabelled, unknown: nothing to learn from */
        if (f->n_ids && f->val >= 0) ws_recall_tell(&r->recall, c->S, f->ids, f->hash, f->val);
        WS_TRY(f->n_ids ? ws_batch_add_query_syms(b, ws_off_fact_syms(f, syms), f->n_ids, val)
                        : ws_batch_add_query_raw(b, f->vec, val));
    }
    int n = r->recall.n < c->recall ? r->recall.n : c->recall;
    for (int i = 0; i < n; i++) {
        int k = ws_recall_draw(&r->recall, &c->rng);
        ws_sym syms[WS_MAX_FACT_LEN];
        int n_syms = ws_recall_syms(&r->recall, k, c->S, syms);
        WS_TRY(ws_batch_add_query_syms(b, syms, n_syms, r->recall.val[k]));
    }
    return WS_OK;
}

static void shuffle(int *a, int n, uint64_t *rng)
{
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(ws_xorshift64(rng) % (uint64_t)(i + 1)), t = a[i];
        a[i] = a[j], a[j] = t;
    }
}

typedef struct {
    long iter;            /* model steps (batches) so far */
    int64_t steps, total; /* trajectory steps so far / in all epochs */
    double loss;          /* Σ loss·labelled over the epoch */
    long labelled, correct;
} progress;

/* One epoch over the corpus in the order given. */
static ws_status epoch(ws_off_replay *rp, ws_model *m, const ws_train_config *tc, targets_ctx *tg,
                       progress *p, ws_error *err)
{
    for (;;) {
        int n = 0;
        ws_step_result res;
        WS_TRY(ws_off_replay_step(rp, WS_STEP_TRAIN, 1.0f / (float)tc->update_every, add_targets,
                                  NULL, tg, &n, &res, err));
        if (n == 0) return WS_OK;
        p->steps += n;
        p->loss += (double)res.loss * res.n_labelled;
        p->labelled += res.n_labelled;
        p->correct += res.n_correct;
        float lr = ws_train_lr(tc, p->iter, (double)p->steps / (double)p->total);
        if (++p->iter % tc->update_every == 0) WS_TRY(ws_train_adamw(m, tc, lr, NULL, err));
    }
}

/* The recall queries per step (the option, else the model's online setting)
 * and whether unlabelled queries are answered by the closed world (the
 * model's self_supervised). */
static ws_status targets_of(const ws_off_options *o, const ws_store_model *row, int *recall,
                            int *closed, ws_error *err)
{
    ws_srv_training tr = ws_srv_training_default();
    cJSON *tj = cJSON_Parse(row->training_json);
    ws_status s = tj ? ws_srv_training_parse(tj, &tr, err) : WS_OK;
    cJSON_Delete(tj);
    *recall = o->recall >= 0 ? o->recall : tr.recall_queries;
    *closed = tr.self_supervised;
    return s;
}

static ws_status train_corpus(const ws_off_options *o, ws_off_corpus *c, int recall, int closed,
                              ws_error *err)
{
    int *order = malloc(sizeof(int) * (size_t)(c->n ? c->n : 1));
    if (!order) return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    for (int i = 0; i < c->n; i++) order[i] = i;
    ws_off_replay *rp = NULL;
    ws_status s = ws_off_replay_new(&rp, c, o->tc.batch, err);
    targets_ctx tg = {ws_model_config_of(c->m)->max_fact_len, recall, closed,
                      o->tc.seed * 0x9E3779B97F4A7C15ULL | 1};
    uint64_t rng = tg.rng ^ 0x5EEDULL;
    progress p = {.total = ws_off_corpus_steps(c) * o->epochs};
    if (s == WS_OK) s = ws_model_zero_grads(c->m, err);
    double t0 = ws_clock_mono_s();
    for (int e = 1; s == WS_OK && e <= o->epochs; e++) {
        shuffle(order, c->n, &rng);
        ws_off_replay_begin(rp, order, c->n);
        p.loss = 0, p.labelled = p.correct = 0;
        s = epoch(rp, c->m, &o->tc, &tg, &p, err);
        if (s == WS_OK)
            printf("epoch %d/%d: loss %.4f, accuracy %.2f%% on %ld targets (labels, recall%s), "
                   "%.1f s\n",
                   e, o->epochs, p.labelled ? p.loss / (double)p.labelled : 0.0,
                   p.labelled ? 100.0 * (double)p.correct / (double)p.labelled : 0.0, p.labelled,
                   closed ? ", closed world" : "", ws_clock_mono_s() - t0);
        fflush(stdout);
    }
    /* Gradients of a last partial accumulation still count. */
    if (s == WS_OK && p.iter % o->tc.update_every != 0)
        s = ws_train_adamw(c->m, &o->tc, ws_train_lr(&o->tc, p.iter, 1.0), NULL, err);
    ws_off_replay_free(rp);
    free(order);
    return s;
}

ws_status ws_off_retrain(const ws_off_options *o, ws_error *err)
{
    ws_off_work w;
    int recall = 0, closed = 0;
    ws_status s = ws_off_work_open(&w, o, 0, err);
    ws_off_corpus *c = &w.corpus;
    if (s == WS_OK) s = targets_of(o, &w.row, &recall, &closed, err);
    if (s == WS_OK && o->n_jsonl == 0)
        s = ws_off_corpus_from_db(c, w.row.id, o->session, o->rollout, err);
    for (int i = 0; s == WS_OK && i < o->n_jsonl; i++)
        s = ws_off_corpus_from_jsonl(c, o->jsonl[i], o->rollout, err);
    int64_t steps = ws_off_corpus_steps(c);
    if (s == WS_OK && steps == 0)
        s = ws_error_set(err, WS_ERR_INVALID, "no logged steps to train on");
    if (s == WS_OK) {
        printf("retrain %s from version %lld: %d sessions, %lld steps%s, %d epochs, batch %d, %d "
               "recall queries per step%s\n",
               o->model, (long long)w.version, c->n, (long long)steps,
               c->lines_skipped ? " (lines of other models skipped)" : "", o->epochs, o->tc.batch,
               recall, closed ? ", unlabelled queries answered by the closed world" : "");
        s = train_corpus(o, c, recall, closed, err);
    }
    char note[160];
    snprintf(note, sizeof note,
             "retrain: %d epochs over %d sessions (%lld steps) from version %lld", o->epochs, c->n,
             (long long)steps, (long long)w.version);
    int64_t version = 0;
    if (s == WS_OK)
        s = ws_srv_version_publish(c->st, o->data_dir, o->model, w.row.id, c->m, -1, note, &version,
                                   err);
    if (s == WS_OK) printf("published %s version %lld\n", o->model, (long long)version);
    ws_off_work_close(&w);
    return s;
}
