/* plan.c — one step's memory: the inputs (ids, segments, labels, raw vectors),
 * the forward activations and, for training, the gradients, carved out of one
 * backend arena that grows to the largest batch shape seen. The inputs are built
 * in a host staging copy of their region and uploaded in a single transfer. */
#include <stdlib.h>
#include <string.h>

#include "mixer.h"

#define ARENA_ALIGN 64 /* bytes: every piece of the arena starts at a multiple */

static void layout_inputs(ws_plan *p, const ws_model_config *cfg, ws_carve *c)
{
    size_t S = (size_t)cfg->max_fact_len;
    p->sym_ids = ws_carve_i(c, p->n_facts * S);
    p->sym_hash = cfg->symbol_code == WS_SYMBOLS_HASHED
                      ? ws_carve_take(c, p->n_facts * S * sizeof(uint64_t))
                      : NULL;
    p->slot_ids = ws_carve_i(c, p->n_facts * S);
    p->val_ids = ws_carve_i(c, p->n_facts);
    p->ctx_tok = ws_carve_i(c, p->n_ctx);
    p->ctx_null = ws_carve_i(c, p->n_ctx);
    p->ids_prev = ws_carve_i(c, p->n_state_rows);
    p->ids_w0 = ws_carve_i(c, p->n_state_rows);
    p->ids_pos = ws_carve_i(c, p->n_state_rows);
    p->seg_self = ws_carve_take(c, p->B * sizeof(ws_attn_seg));
    p->seg_cross = ws_carve_take(c, p->B * sizeof(ws_attn_seg));
    p->seg_ext = ws_carve_take(c, p->B * sizeof(ws_attn_seg));
    p->labels = ws_carve_f(c, p->n_query);
    p->raw = p->has_raw ? ws_carve_f(c, (size_t)p->n_facts * cfg->d_raw) : NULL;
}

static void layout_ln(ws_ln_act *a, ws_carve *c, size_t n, size_t d, int with_out)
{
    a->out = with_out ? ws_carve_f(c, n * d) : NULL;
    a->mean = ws_carve_f(c, n);
    a->rstd = ws_carve_f(c, n);
}

/* A mixer sub-block: LN, the mixer's activations, the output; records the
 * largest backward scratch any mixer use needs. */
static void layout_mix(ws_plan *p, ws_mix_act *a, ws_carve *c, const ws_model_config *cfg,
                       const ws_mix_off *o)
{
    size_t d = (size_t)cfg->d, n = (size_t)a->shape.n;
    layout_ln(&a->ln, c, n, d, 1);
    a->mix = ws_carve_f(c, o->mixer->act_floats(cfg, (ws_mix_mode)o->mode, &a->shape));
    a->x_out = ws_carve_f(c, n * d);
    size_t scratch = o->mixer->scratch_floats(cfg, (ws_mix_mode)o->mode, &a->shape);
    if (scratch > p->mix_scratch_floats) p->mix_scratch_floats = scratch;
}

static void layout_mlp(ws_mlp_act *a, ws_carve *c, size_t n, size_t d)
{
    layout_ln(&a->ln, c, n, d, 1);
    a->fc = ws_carve_f(c, n * 4 * d);
    a->act = ws_carve_f(c, n * 4 * d);
    a->x_out = ws_carve_f(c, n * d);
}

static void layout_acts(ws_exec *x, ws_carve *c)
{
    const ws_model *m = x->m;
    ws_plan *p = &x->plan;
    size_t d = m->cfg.d, ns = p->n_state_rows, nq = p->n_query;
    const ws_param_offsets *o = &m->off;
    p->mix_scratch_floats = 0;
    p->u = ws_carve_f(c, p->n_facts * d);
    p->tok = ws_carve_f(c, p->n_facts * d);
    layout_ln(&p->fact_ln, c, p->n_facts, d, 0);
    p->ctx = ws_carve_f(c, p->n_ctx * d);
    p->x0 = ws_carve_f(c, ns * d);
    p->w_new = m->cfg.empty_steps == WS_EMPTY_HOLD ? ws_carve_f(c, ns * d) : NULL;
    if (m->upd_variant) {
        p->upd_variant_act = ws_carve_f(c, m->upd_variant->act_floats(x));
        size_t scratch = m->upd_variant->scratch_floats(x);
        if (scratch > p->mix_scratch_floats) p->mix_scratch_floats = scratch;
    }
    for (int l = 0; !m->upd_variant && l < m->cfg.n_upd_layers; l++) {
        layout_mix(p, &p->upd[l].self, c, &m->cfg, &o->upd[l].self);
        layout_mix(p, &p->upd[l].cross, c, &m->cfg, &o->upd[l].cross);
        layout_mlp(&p->upd[l].mlp, c, ns, d);
    }
    layout_ln(&p->state_ln, c, ns, d, 0);
    for (int l = 0; l < m->cfg.n_ext_layers; l++) {
        layout_mix(p, &p->ext[l].cross, c, &m->cfg, &o->ext[l].cross);
        layout_mlp(&p->ext[l].mlp, c, nq, d);
    }
    layout_ln(&p->out_ln, c, nq, d, 1);
    if (m->readout) {
        p->readout_act = ws_carve_f(c, m->readout->act_floats(x));
        size_t scratch = m->readout->scratch_floats(x);
        if (scratch > p->mix_scratch_floats) p->mix_scratch_floats = scratch;
    }
    p->logits = ws_carve_f(c, nq);
    p->loss = ws_carve_f(c, 1);
    p->probs = ws_carve_f(c, nq);
}

static void layout_grads(const ws_model *m, ws_plan *p, ws_carve *c)
{
    size_t d = m->cfg.d, ns = p->n_state_rows, nq = p->n_query;
    size_t rows = ns > nq ? ns : nq;
    p->d_u = ws_carve_f(c, p->n_facts * d);
    p->d_tok = ws_carve_f(c, p->n_facts * d);
    p->d_ctx = ws_carve_f(c, p->n_ctx * d);
    p->d_x = ws_carve_f(c, ns * d);
    p->d_w = ws_carve_f(c, ns * d);
    p->d_lno = ws_carve_f(c, nq * d);
    p->d_logits = ws_carve_f(c, nq);
    p->scratch.d_ln = ws_carve_f(c, rows * d);
    p->scratch.d_act = ws_carve_f(c, rows * 4 * d);
    p->scratch.d_fc = ws_carve_f(c, rows * 4 * d);
    p->scratch.mix = ws_carve_f(c, p->mix_scratch_floats);
}

/* memcpy that accepts an empty, never-allocated source (NULL is UB even for 0). */
static void copy_n(void *dst, const void *src, size_t bytes)
{
    if (bytes) memcpy(dst, src, bytes);
}

/* The symbols of the batch's fact rows (instructions, then queries): ids, and
 * under the hashed encoding the hash of each (the vocabulary's for symbols given
 * by id alone); under the table encoding a symbol given by hash alone takes its
 * overflow bucket. A slot is filled where a symbol is present. */
static void fill_symbols(const ws_model *m, ws_plan *h, const ws_batch *b)
{
    const ws_model_config *cfg = &m->cfg;
    size_t S = (size_t)cfg->max_fact_len, ni = (size_t)b->instr.n;
    for (size_t i = 0; i < (size_t)h->n_facts * S; i++) {
        const ws_fact_list *f = i < ni * S ? &b->instr : &b->query;
        size_t at = i < ni * S ? i : i - ni * S;
        int32_t id = f->ids[at];
        uint64_t hash = f->hash[at];
        if (h->sym_hash)
            h->sym_hash[i] = hash ? hash : id >= 0 ? ws_vocab_hash(m->vocab, id) : 0;
        else if (id < 0 && hash)
            id = cfg->vocab_cap + (int32_t)(hash % (uint64_t)cfg->n_overflow);
        h->sym_ids[i] = id;
        h->slot_ids[i] = id >= 0 || hash ? (int32_t)(i % S) : -1;
    }
}

/* Trajectory t's attention segments: its state rows over themselves, over its
 * context (c_null, then its instructions) and, when it has queries, its
 * queries over its state rows. */
static void traj_segs(ws_plan *h, int t, int T, int H, int instr_off, int n_instr, int query_off,
                      int n_query)
{
    int c_off = t + instr_off;
    h->seg_self[t] = (ws_attn_seg){t * T, T, t * T, T, t * H * T * T};
    h->seg_cross[t] = (ws_attn_seg){t * T, T, c_off, 1 + n_instr, H * T * c_off};
    if (n_query > 0)
        h->seg_ext[h->n_ext_segs++] =
            (ws_attn_seg){query_off, n_query, t * T, T, H * T * query_off};
}

/* Fills the host staging copy of the inputs from the batch. */
static void fill_inputs(const ws_model *m, ws_plan *h, const ws_batch *b)
{
    const ws_model_config *cfg = &m->cfg;
    int T = cfg->n_state, H = cfg->n_heads, ni = b->instr.n;
    fill_symbols(m, h, b);
    for (int r = 0; r < h->n_facts; r++) h->val_ids[r] = r < ni ? b->instr.value[r] : -1;
    if (h->has_raw) {
        memset(h->raw, 0, (size_t)h->n_facts * cfg->d_raw * sizeof(float));
        for (int r = 0; r < h->n_facts; r++) {
            const ws_fact_list *f = r < ni ? &b->instr : &b->query;
            int row = f->raw_row[r < ni ? r : r - ni];
            if (row >= 0)
                memcpy(h->raw + (size_t)r * cfg->d_raw, f->raw + (size_t)row * cfg->d_raw,
                       (size_t)cfg->d_raw * sizeof(float));
        }
    }
    copy_n(h->labels, b->labels, (size_t)b->query.n * sizeof(float));
    h->n_ext_segs = 0;
    for (int t = 0; t < h->B; t++) {
        int c_off = t + b->instr_off[t];
        h->ctx_tok[c_off] = -1;
        h->ctx_null[c_off] = 0;
        for (int j = 0; j < b->n_instr[t]; j++) {
            h->ctx_tok[c_off + 1 + j] = b->instr_off[t] + j;
            h->ctx_null[c_off + 1 + j] = -1;
        }
        for (int i = 0; i < T; i++) {
            int r = t * T + i;
            h->ids_prev[r] = b->from_w0[t] ? -1 : r;
            h->ids_w0[r] = b->from_w0[t] ? i : -1;
            h->ids_pos[r] = i;
        }
        traj_segs(h, t, T, H, b->instr_off[t], b->n_instr[t], b->query_off[t], b->n_query[t]);
    }
}

static size_t pairs(const ws_attn_seg *segs, int n)
{
    size_t total = 0;
    for (int i = 0; i < n; i++) total += (size_t)segs[i].q_len * (size_t)segs[i].k_len;
    return total;
}

/* The row shapes of every mixer sub-block: segments (device and host copies),
 * launch bounds and pair counts. Needs the host inputs filled. */
static void set_shapes(const ws_model *m, ws_plan *p)
{
    int T = m->cfg.n_state;
    ws_mix_shape self = {p->n_state_rows, p->n_state_rows, p->seg_self, p->seg_self_host, p->B,
                         T, T, pairs(p->seg_self_host, p->B)};
    ws_mix_shape cross = {p->n_state_rows, p->n_ctx, p->seg_cross, p->seg_cross_host, p->B, T,
                          1 + p->max_instr, pairs(p->seg_cross_host, p->B)};
    ws_mix_shape ext = {p->n_query, p->n_state_rows, p->seg_ext, p->seg_ext_host, p->n_ext_segs,
                        p->max_query, T, pairs(p->seg_ext_host, p->n_ext_segs)};
    for (int l = 0; l < m->cfg.n_upd_layers; l++) {
        p->upd[l].self.shape = self;
        p->upd[l].cross.shape = cross;
    }
    for (int l = 0; l < m->cfg.n_ext_layers; l++) p->ext[l].cross.shape = ext;
}

/* The arena allocated for a layout of `total` bytes: headroom, since shapes
 * vary step to step. */
static size_t arena_want(size_t total) { return total + total / 4; }

static ws_status grow_arena(ws_exec *x, size_t total, ws_error *err)
{
    ws_backend *be = x->m->be;
    if (total <= x->arena_bytes) return WS_OK;
    ws_backend_release(be, x->arena);
    x->arena = NULL;
    x->arena_bytes = 0;
    size_t want = arena_want(total);
    if (ws_backend_alloc(be, want, &x->arena) != WS_OK)
        return ws_error_set(err, WS_ERR_NOMEM, "model: cannot allocate %zu bytes of activations",
                            want);
    x->arena_bytes = want;
    return WS_OK;
}

ws_status ws_plan_prepare(ws_exec *x, const ws_batch *b, int train, ws_error *err)
{
    const ws_model *m = x->m;
    ws_plan *p = &x->plan;
    p->B = b->n_traj;
    p->train = train;
    p->n_instr = b->instr.n;
    p->n_query = b->query.n;
    p->n_facts = p->n_instr + p->n_query;
    p->n_ctx = p->B + p->n_instr;
    p->n_state_rows = p->B * m->cfg.n_state;
    p->has_raw = b->instr.n_raw + b->query.n_raw > 0;
    p->max_instr = p->max_query = 0;
    for (int t = 0; t < b->n_traj; t++) {
        if (b->n_instr[t] > p->max_instr) p->max_instr = b->n_instr[t];
        if (b->n_query[t] > p->max_query) p->max_query = b->n_query[t];
    }

    /* Fill the host copy of the inputs first: the mixers size their memory
     * from the segments. */
    ws_carve c = ws_carve_at(NULL, ARENA_ALIGN);
    layout_inputs(p, &m->cfg, &c);
    size_t in_bytes = ws_carve_end(&c);
    if (in_bytes > x->staging_bytes) {
        void *s = realloc(x->staging, in_bytes);
        if (!s) return ws_error_set(err, WS_ERR_NOMEM, "model: cannot allocate input staging");
        x->staging = s;
        x->staging_bytes = in_bytes;
    }
    ws_plan host = *p;
    ws_carve hc = ws_carve_at(x->staging, ARENA_ALIGN);
    layout_inputs(&host, &m->cfg, &hc);
    fill_inputs(m, &host, b);
    p->n_ext_segs = host.n_ext_segs;
    p->seg_self_host = host.seg_self;
    p->seg_cross_host = host.seg_cross;
    p->seg_ext_host = host.seg_ext;
    set_shapes(m, p);

    /* Measure activations and gradients, grow the arena, lay out for real. */
    layout_acts(x, &c);
    size_t act_end = ws_carve_end(&c);
    if (train) layout_grads(m, p, &c);
    size_t total = c.off;
    WS_TRY(grow_arena(x, total, err));
    ws_carve dc = ws_carve_at(x->arena, ARENA_ALIGN);
    layout_inputs(p, &m->cfg, &dc);
    set_shapes(m, p); /* the device segment pointers are final now */
    layout_acts(x, &dc);
    if (train) {
        layout_grads(m, p, &dc);
        if (m->be->ops->fill(m->be, (float *)((char *)x->arena + act_end), 0.0f,
                             (total - act_end) / sizeof(float)) != WS_OK)
            return ws_error_set(err, WS_ERR_BACKEND, "model: cannot clear gradients");
    }
    if (ws_backend_upload(m->be, x->arena, x->staging, in_bytes) != WS_OK)
        return ws_error_set(err, WS_ERR_BACKEND, "model: input upload failed");
    return WS_OK;
}

/* The batch shape's layout, measured on a model shell: the config and the
 * parameter offsets (the mixers size their regions from them), no parameters.
 * Every trajectory full: each region grows with rows, segments and pairs, so no
 * batch within the shape takes more. */
ws_status ws_plan_bound(const ws_model_config *cfg, const ws_batch_shape *s, size_t *arena,
                        size_t *staging, ws_error *err)
{
    ws_model m = {.cfg = *cfg,
                  .upd_variant = ws_updater_variant_find(cfg->upd_mixer),
                  .readout = ws_readout_variant_find(cfg->ext_mixer)};
    ws_exec x = {.m = &m};
    ws_plan *p = &x.plan;
    /* a trajectory is views trajectories of the plan (views.c) */
    int B = (s->n_traj > 0 ? s->n_traj : 1) * cfg->views, T = cfg->n_state;
    m.off.upd = calloc((size_t)cfg->n_upd_layers + 1, sizeof *m.off.upd);
    m.off.ext = calloc((size_t)cfg->n_ext_layers + 1, sizeof *m.off.ext);
    p->upd = calloc((size_t)cfg->n_upd_layers + 1, sizeof *p->upd);
    p->ext = calloc((size_t)cfg->n_ext_layers + 1, sizeof *p->ext);
    ws_attn_seg *segs = calloc(3 * (size_t)B, sizeof *segs);
    ws_status st = WS_OK;
    if (!m.off.upd || !m.off.ext || !p->upd || !p->ext || !segs) {
        st = ws_error_set(err, WS_ERR_NOMEM, "model: out of memory");
        goto done;
    }
    ws_params_layout(cfg, NULL, NULL, &m.off);
    p->B = B;
    p->n_instr = B * s->n_instr;
    p->n_query = B * s->n_query;
    p->n_facts = p->n_instr + p->n_query;
    p->n_ctx = B + p->n_instr;
    p->n_state_rows = B * T;
    p->has_raw = cfg->d_raw > 0;
    p->max_instr = s->n_instr;
    p->max_query = s->n_query;
    p->seg_self = segs, p->seg_cross = segs + B, p->seg_ext = segs + 2 * B;
    for (int t = 0; t < B; t++)
        traj_segs(p, t, T, cfg->n_heads, t * s->n_instr, s->n_instr, t * s->n_query,
                  s->n_query);
    p->seg_self_host = p->seg_self, p->seg_cross_host = p->seg_cross;
    p->seg_ext_host = p->seg_ext;
    set_shapes(&m, p);
    ws_carve c = ws_carve_at(NULL, ARENA_ALIGN);
    layout_inputs(p, cfg, &c);
    *staging = ws_carve_end(&c);
    layout_acts(&x, &c);
    if (s->train) layout_grads(&m, p, &c);
    *arena = arena_want(c.off);
done:
    free(segs);
    free(p->upd);
    free(p->ext);
    free(m.off.upd);
    free(m.off.ext);
    return st;
}
