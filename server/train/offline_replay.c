/* offline_replay.c — sessions replayed in parallel: every row of the batch is
 * one session's trajectory, advanced one logged step per ws_exec_step, from
 * the learned W_0 at its first step. A row whose session ended takes the next
 * one of the pass; when none is left the last busy row moves into its place,
 * so the busy rows always form the batch's first rows. On the CPU the rows go
 * in chunks of WS_EXEC_POOL_CHUNK on the backend's threads, as the trainer's
 * (model/exec_pool.h ws_exec_chunks_step): the same states, gradients up to
 * rounding. */
#include <stdlib.h>
#include <string.h>

#include "model/exec_pool.h"
#include "offline.h"

struct ws_off_replay {
    ws_off_corpus *c;
    ws_backend *be;
    ws_batch *batch;
    ws_exec *x; /* the replay's own context on the corpus's model */
    ws_exec_chunks *chunks; /* on the CPU: the rows in chunks on the backend's threads */
    float *w;   /* device: one state per row */
    size_t state_floats;
    ws_off_row *rows;
    int cap, n_busy;
    const int *order;
    int n_order, next; /* the pass: sessions order[next..n_order) are still to come */
};

ws_status ws_off_replay_new(ws_off_replay **out, ws_off_corpus *c, int rows, ws_error *err)
{
    *out = NULL;
    ws_off_replay *r = calloc(1, sizeof *r);
    if (!r) return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    r->c = c;
    r->be = ws_model_backend(c->m);
    r->cap = rows;
    r->state_floats = ws_model_state_floats(c->m);
    r->rows = calloc((size_t)rows, sizeof *r->rows);
    ws_status s = r->rows ? ws_batch_new(&r->batch, ws_model_config_of(c->m))
                          : ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    if (s == WS_OK) s = ws_model_state_alloc(c->m, rows, &r->w, err);
    if (s == WS_OK) s = ws_exec_new(&r->x, c->m, err);
    if (s == WS_OK && !strcmp(r->be->ops->name, "cpu"))
        s = ws_exec_chunks_new(&r->chunks, c->m, rows, ws_backend_threads(r->be, 0), err);
    if (s != WS_OK) {
        ws_off_replay_free(r);
        return s == WS_ERR_NOMEM ? ws_error_set(err, s, "out of memory") : s;
    }
    *out = r;
    return WS_OK;
}

void ws_off_replay_free(ws_off_replay *r)
{
    if (!r) return;
    for (int i = 0; r->rows && i < r->cap; i++) ws_off_cursor_free(&r->rows[i].cursor);
    free(r->rows);
    ws_exec_chunks_free(r->chunks);
    ws_batch_free(r->batch);
    ws_exec_free(r->x);
    ws_backend_release(r->be, r->w);
    free(r);
}

/* Gives row i the next session of the pass that has steps; 0 when none is left. */
static int take_session(ws_off_replay *r, int i)
{
    while (r->next < r->n_order && r->c->sessions[r->order[r->next]].n_steps == 0) r->next++;
    if (r->next == r->n_order) return 0;
    ws_off_row *row = &r->rows[i];
    row->session = r->order[r->next++];
    ws_off_cursor_start(&row->cursor, &r->c->sessions[row->session]);
    row->recall.n = 0;
    return 1;
}

void ws_off_replay_begin(ws_off_replay *r, const int *order, int n)
{
    r->order = order, r->n_order = n, r->next = 0;
    r->n_busy = 0;
    while (r->n_busy < r->cap && take_session(r, r->n_busy)) r->n_busy++;
}

/* Appends row's step (instructions, then the caller's queries) to b. */
static ws_status add_row(ws_batch *b, ws_off_row *row, ws_off_queries_fn queries, void *ctx,
                         ws_error *err)
{
    const ws_off_step *st = row->step;
    row->first = row->cursor.next == 1;
    row->last = row->cursor.next == row->cursor.sess->n_steps;
    WS_TRY(ws_batch_begin_traj(b, row->first));
    for (int k = 0; k < st->n_instr; k++) {
        const ws_off_fact *f = &st->facts[k];
        ws_sym syms[WS_MAX_FACT_LEN];
        WS_TRY(f->n_ids ? ws_batch_add_instr_syms(b, ws_off_fact_syms(f, syms), f->n_ids, f->val)
                        : ws_batch_add_instr_raw(b, f->vec, f->val));
    }
    return queries ? queries(ctx, row, b, err) : WS_OK;
}

/* The busy rows' steps: one batch, or on the CPU chunks of WS_EXEC_POOL_CHUNK. */
static ws_status run_rows(ws_off_replay *r, ws_step_mode mode, float loss_scale,
                          ws_off_queries_fn queries, void *ctx, ws_step_result *res, ws_error *err)
{
    if (!r->chunks) {
        ws_batch_clear(r->batch);
        for (int i = 0; i < r->n_busy; i++)
            WS_TRY(add_row(r->batch, &r->rows[i], queries, ctx, err));
        return ws_exec_step(r->x, r->batch, r->w, r->w, mode, loss_scale, NULL, res, err);
    }
    ws_exec_chunks_clear(r->chunks);
    for (int i = 0; i < r->n_busy; i++)
        WS_TRY(add_row(ws_exec_chunks_batch(r->chunks, i), &r->rows[i], queries, ctx, err));
    return ws_exec_chunks_step(r->chunks, r->n_busy, r->w, mode, loss_scale, res, err);
}

/* Row i's session is over: the row takes the next session, or the last busy
 * row (with its state) moves into it. */
static ws_status retire(ws_off_replay *r, int i, ws_error *err)
{
    if (take_session(r, i)) return WS_OK;
    int last = --r->n_busy;
    if (last == i) return WS_OK;
    ws_off_row tmp = r->rows[i]; /* swapped, so each cursor keeps its own page buffer */
    r->rows[i] = r->rows[last];
    r->rows[last] = tmp;
    size_t bytes = sizeof(float) * r->state_floats;
    if (r->be->ops->copy(r->be, r->w + (size_t)i * r->state_floats,
                         r->w + (size_t)last * r->state_floats, bytes) != WS_OK)
        return ws_error_set(err, WS_ERR_BACKEND, "replay: cannot move a state");
    return WS_OK;
}

ws_status ws_off_replay_step(ws_off_replay *r, ws_step_mode mode, float loss_scale,
                             ws_off_queries_fn queries, ws_off_end_fn end, void *ctx, int *n_rows,
                             ws_step_result *res, ws_error *err)
{
    memset(res, 0, sizeof *res);
    /* Every busy row takes its next step; a session deleted since the listing is
     * simply over, and its row takes another (or the last busy row). */
    for (int i = 0; i < r->n_busy;) {
        ws_off_row *row = &r->rows[i];
        ws_status s = ws_off_cursor_next(r->c, &row->cursor, &row->step, err);
        if (s == WS_ERR_NOTFOUND)
            WS_TRY(retire(r, i, err));
        else if (s != WS_OK)
            return s;
        else
            i++;
    }
    *n_rows = r->n_busy;
    if (r->n_busy == 0) return WS_OK;
    WS_TRY(run_rows(r, mode, loss_scale, queries, ctx, res, err));
    /* Downwards: a row moved into place i comes from above, already seen. */
    for (int i = r->n_busy - 1; i >= 0; i--) {
        if (!r->rows[i].last) continue;
        if (end) WS_TRY(end(ctx, &r->rows[i], r->w + (size_t)i * r->state_floats, err));
        WS_TRY(retire(r, i, err));
    }
    return WS_OK;
}
