/* updater_rmc.c — the relational-memory-core Updater (cfg.upd_mixer = rmc; Santoro
 * et al. 2018, ../shared/MIXERS.md §4 and §9 "RMC inputs"). The world state is
 * the memory: M_{t-1} = W_{t-1} (W_0 for trajectories that start from it).
 *
 *   X_0 = M_{t-1} + P
 *   per block l:  X += MHA(q = LN1(X), keys/values = [LN1(X); C])   (upd.{l}.cross)
 *                 X += MLP(LN2(X))                                  (upd.{l}.mlp)
 *   M̃  = LN_c(X_L)                                                   (upd.ln_cand)
 *   x̄  = mean of the trajectory's context rows C = [c_null; instruction tokens]
 *   G  = tanh(M_{t-1}) W_gmᵀ + b_gm + (x̄ W_gxᵀ + b_gx) broadcast over the rows
 *   i  = σ(G_i + 0),  f = σ(G_f + 1)      (constant input / forget biases)
 *   M_t = i ⊙ tanh(M̃) + f ⊙ M_{t-1}
 *   W_t = LN_w(M_t)  (state_norm = 1, the default; M_t when 0: the RMC's update)
 *
 * Choices (and where they depart from Sonnet's RelationalMemory):
 * - Pre-LN residual blocks, like every other block of the model, in place of the
 *   RMC's post-LN blocks with a LayerNorm over the fused qkv: one residual
 *   convention across the model and the plain Updater's trained behaviour as the
 *   baseline. The attention is the model's MHA in CROSS mode (with its output
 *   projection, which the RMC lacks) and the MLP is the model's 4d GELU MLP
 *   (the RMC's is d→d→d ReLU).
 * - Only state rows query. In the RMC the input rows also query and are then
 *   dropped; with a single block their outputs are discarded unused, and with
 *   several they would only refine the keys of later blocks. Our context rows
 *   are already LN'd fact embeddings that the plain Updater's cross-attention
 *   reads as they are, so we keep them fixed: half the attention cost on the
 *   key side, and the memory rows are exactly [LN1(X); C] in every block.
 * - The gate input is the mean of the context rows, not Sonnet's flattened
 *   input: instruction sets vary in size from step to step (and are empty on
 *   steps with none, where x̄ = c_null), so a flattened vector has no fixed
 *   width; the mean is defined for every size and does not depend on the order
 *   of the instructions (MIXERS §9).
 * - The candidate is LayerNorm'd (LN_c) before its tanh, as the RMC's post-LN
 *   blocks leave it: a pre-LN residual stream has no bounded scale of its own.
 * - LN_w normalises the new state, as in the plain Updater (state_norm = 1).
 *   The gated update alone does bound the state: element-wise
 *   |M_t| <= i + f·|M_{t-1}|, and for fixed weights the gate pre-activations
 *   are bounded (tanh(M_{t-1}) ∈ [-1, 1], x̄ a mean of bounded embeddings), so
 *   f <= f_max < 1 and |M_t| <= max(|M_0|, 1/(1 − f_max)). But that bound is far
 *   above the scale the model trains at: trained on 8-step rollouts (facts 8×8),
 *   the RMC update's mean state-row norm went from 8.8 at step 8 to 80 at step
 *   100 and 125-157 at steps 1,000-10,000 (f near 1 lets i ⊙ tanh accumulate),
 *   and the accuracy fell to chance from step 100 on, while the plain Updater's
 *   LN'd state kept its norm. LN_w after the gates keeps every state at the
 *   scale of training, however old; it costs the exact hold (with f = 1, i = 0,
 *   W_t = LN_w(W_{t-1}), which the model must learn to make a fixed point).
 *   state_norm = 0 keeps the RMC's update, W_t = M_t, as the ablation.
 * - The initial memory is the learned W_0 (the RMC's is a fixed identity).
 *
 * Gradients (DESIGN §3): W_{t-1} is a constant, but for trajectories that start
 * from W_0 the gate path (f ⊙ W_0 and tanh(W_0) in G) carries gradient into W_0
 * here, through p->ids_w0; the path through X_0 goes back as p->d_x, which the
 * Updater carries into W_0 and P.
 *
 * Memory rows: per trajectory t, rows [T state rows; 1 + n_instr(t) context
 * rows] at mem_off(t) = (state rows before t) + (context rows before t), built
 * by gathering through index arrays that forward uploads into its activations. */
#include <stdio.h>
#include <stdlib.h>

#include "mixer.h"
#include "kernels/mixer_ops_rmc.h"

#define RMC_INPUT_BIAS 0.0f
#define RMC_FORGET_BIAS 1.0f /* Sonnet's default: start by mostly keeping the memory */

#define RMC_ALIGN 64 /* bytes: its pieces start as the plan's do (vector loads) */

static ws_ln_act take_ln(ws_carve *c, size_t n, size_t d)
{
    ws_ln_act a = {ws_carve_f(c, n * d), NULL, NULL};
    a.mean = ws_carve_f(c, n);
    a.rstd = ws_carve_f(c, n);
    return a;
}

/* The activations of one block. */
typedef struct {
    ws_ln_act ln;   /* LN1(X): the queries and the state half of the memory rows */
    float *mem;     /* [n_mem, d] memory rows [LN1(X); C] per trajectory */
    float *mha;     /* the attention's own activations */
    float *x_mid;   /* [n, d] X after the attention sub-block */
    ws_mlp_act mlp; /* its x_out is the block's output */
} rmc_block;

typedef struct {
    float *m_prev, *tanh_prev;    /* [n, d] M_{t-1} (saved: w_prev may alias w_out), tanh */
    int32_t *ids_state, *ids_ctx; /* [n_mem] memory row -> state / context row, or -1 */
    ws_attn_seg *segs;            /* [B] state rows (queries) -> memory rows (keys) */
    ws_ln_act cand_ln;            /* M̃ = LN_c(X_L) */
    ws_ln_act state_ln;           /* LN_w's statistics (state_norm only; out is W_t) */
    float *m_new;                 /* [n, d] M_t before LN_w (state_norm only) */
    float *xbar, *gx, *gm, *gates, *a; /* [B,d] [B,2d] [n,2d] [n,2d] [n,d] */
    ws_carve blocks;              /* where block 0 starts; blocks follow each other */
} rmc_act;

typedef struct {
    float *d_m_new, *d_cand, *d_gm, *d_gx, *d_m_prev, *d_xbar, *d_tanh; /* gate phase */
    float *d_ln, *d_mem, *mha;                                /* block phase */
    size_t gate_floats; /* the gate phase's buffers, from d_m_new on */
} rmc_scratch;

static int n_mem_rows(const ws_plan *p) { return p->n_state_rows + p->n_ctx; }

/* ids_state [n_mem], ids_ctx [n_mem], segs [B] */
static size_t index_bytes(const ws_plan *p)
{
    return 2 * (size_t)n_mem_rows(p) * sizeof(int32_t) + (size_t)p->B * sizeof(ws_attn_seg);
}

/* The attention's rows: state rows query their trajectory's memory rows. */
static ws_mix_shape mem_shape(const ws_exec *x, const ws_attn_seg *segs)
{
    const ws_model *m = x->m;
    const ws_plan *p = &x->plan;
    int T = m->cfg.n_state;
    ws_mix_shape s = {.n = p->n_state_rows, .n_keys = n_mem_rows(p), .segs = segs,
                      .segs_host = NULL, /* the MHA mixer reads the device segments only */
                      .n_segs = p->B, .max_q = T, .max_k = T + 1 + p->max_instr};
    for (int t = 0; t < p->B; t++) s.n_pairs += (size_t)T * (T + p->seg_cross_host[t].k_len);
    return s;
}

static const ws_mixer *mha(void) { return ws_mixer_find(WS_MIXER_MHA); }

static rmc_block take_block(ws_carve *c, const ws_exec *x)
{
    const ws_model *m = x->m;
    const ws_plan *p = &x->plan;
    size_t n = (size_t)p->n_state_rows, d = (size_t)m->cfg.d;
    rmc_block b;
    b.ln = take_ln(c, n, d);
    b.mem = ws_carve_f(c, (size_t)n_mem_rows(p) * d);
    ws_mix_shape s = mem_shape(x, NULL);
    b.mha = ws_carve_f(c, mha()->act_floats(&m->cfg, WS_MIX_CROSS, &s));
    b.x_mid = ws_carve_f(c, n * d);
    b.mlp.ln = take_ln(c, n, d);
    b.mlp.fc = ws_carve_f(c, n * 4 * d);
    b.mlp.act = ws_carve_f(c, n * 4 * d);
    b.mlp.x_out = ws_carve_f(c, n * d);
    return b;
}

static rmc_act carve_act(const ws_exec *x, float *base, size_t *floats)
{
    const ws_model *m = x->m;
    const ws_plan *p = &x->plan;
    size_t n = (size_t)p->n_state_rows, d = (size_t)m->cfg.d, B = (size_t)p->B;
    size_t n_mem = (size_t)n_mem_rows(p);
    ws_carve c = ws_carve_at(base, RMC_ALIGN);
    rmc_act a;
    a.m_prev = ws_carve_f(&c, n * d);
    a.tanh_prev = ws_carve_f(&c, n * d);
    /* the three index arrays back to back, as upload_index lays them out */
    a.ids_state = ws_carve_take(&c, index_bytes(p));
    a.ids_ctx = a.ids_state ? a.ids_state + n_mem : NULL;
    a.segs = a.ids_ctx ? (ws_attn_seg *)(a.ids_ctx + n_mem) : NULL;
    a.cand_ln = take_ln(&c, n, d);
    size_t sn = m->cfg.state_norm ? n : 0;
    a.state_ln = take_ln(&c, sn, 0);
    a.m_new = ws_carve_f(&c, sn * d);
    a.xbar = ws_carve_f(&c, B * d);
    a.gx = ws_carve_f(&c, B * 2 * d);
    a.gm = ws_carve_f(&c, n * 2 * d);
    a.gates = ws_carve_f(&c, n * 2 * d);
    a.a = ws_carve_f(&c, n * d);
    a.blocks = c;
    for (int l = 0; l < m->cfg.n_upd_layers; l++) take_block(&c, x);
    if (floats) *floats = ws_carve_floats(&c);
    return a;
}

static rmc_block block_at(const ws_exec *x, const rmc_act *a, int l)
{
    ws_carve c = a->blocks;
    rmc_block b = take_block(&c, x);
    for (int i = 0; i < l; i++) b = take_block(&c, x);
    return b;
}

/* The two phases of the backward share the scratch: the gate phase is done
 * (its result in p->d_x) before the block phase starts. */
static rmc_scratch carve_scratch(const ws_exec *x, float *base, size_t *floats)
{
    const ws_model *m = x->m;
    const ws_plan *p = &x->plan;
    size_t n = (size_t)p->n_state_rows, d = (size_t)m->cfg.d, B = (size_t)p->B;
    rmc_scratch s;
    ws_carve c = ws_carve_at(base, RMC_ALIGN);
    s.d_m_new = ws_carve_f(&c, n * d);
    s.d_cand = ws_carve_f(&c, n * d);
    s.d_gm = ws_carve_f(&c, n * 2 * d);
    s.d_gx = ws_carve_f(&c, B * 2 * d);
    s.d_m_prev = ws_carve_f(&c, n * d);
    s.d_xbar = ws_carve_f(&c, B * d);
    s.d_tanh = ws_carve_f(&c, n * d);
    size_t gate_end = c.off;
    s.gate_floats = gate_end / sizeof(float);
    c.off = 0;
    s.d_ln = ws_carve_f(&c, n * d);
    s.d_mem = ws_carve_f(&c, (size_t)n_mem_rows(p) * d);
    ws_mix_shape sh = mem_shape(x, NULL);
    s.mha = ws_carve_f(&c, mha()->scratch_floats(&m->cfg, WS_MIX_CROSS, &sh));
    if (floats) *floats = (c.off > gate_end ? c.off : gate_end) / sizeof(float);
    return s;
}

static size_t act_floats(const ws_exec *x)
{
    size_t n;
    carve_act(x, NULL, &n);
    return n;
}

static size_t scratch_floats(const ws_exec *x)
{
    size_t n;
    carve_scratch(x, NULL, &n);
    return n;
}

/* ---- parameters -------------------------------------------------------------- */

enum { CAND_LN, GATE_M, GATE_X }; /* its slots in o->upd_variant */

/* Block l: LN1 and the attention in o->upd[l].cross, LN2 and the MLP in
 * o->upd[l].mlp, as the plain Updater's layers keep theirs. */
static void layout(ws_param_layout *L, const ws_model_config *c, ws_param_offsets *o)
{
    char name[48];
    int d = c->d;
    for (int l = 0; l < c->n_upd_layers; l++) {
        ws_mix_off *x = &o->upd[l].cross;
        ws_mlp_off *f = &o->upd[l].mlp;
        snprintf(name, sizeof name, "upd.%d.ln1", l);
        x->ln = ws_layout_add_ln(L, name, d);
        x->mixer = mha();
        x->mode = WS_MIX_CROSS;
        snprintf(name, sizeof name, "upd.%d.cross", l);
        mha()->layout(L, name, c, WS_MIX_CROSS, &x->p);
        snprintf(name, sizeof name, "upd.%d.ln2", l);
        f->ln = ws_layout_add_ln(L, name, d);
        snprintf(name, sizeof name, "upd.%d.mlp.fc", l);
        f->fc = ws_layout_add_linear(L, name, 4 * d, d);
        snprintf(name, sizeof name, "upd.%d.mlp.proj", l);
        f->proj = ws_layout_add_linear(L, name, d, 4 * d);
    }
    ws_ln_off cand = ws_layout_add_ln(L, "upd.ln_cand", d);
    o->upd_variant.at[CAND_LN] = (ws_lin_off){cand.g, cand.b};
    /* rows: input gate, then forget gate */
    o->upd_variant.at[GATE_M] = ws_layout_add_linear(L, "upd.gate.m", 2 * d, d);
    o->upd_variant.at[GATE_X] = ws_layout_add_linear(L, "upd.gate.x", 2 * d, d);
    if (c->state_norm) o->state_ln = ws_layout_add_ln(L, "upd.ln", d);
}

/* ---- forward ----------------------------------------------------------------- */

/* Builds the memory-row index arrays and segments on the host and uploads them. */
static ws_status upload_index(const ws_exec *x, const rmc_act *a)
{
    const ws_model *m = x->m;
    const ws_plan *p = &x->plan;
    int n_mem = n_mem_rows(p), H = m->cfg.n_heads;
    size_t bytes = index_bytes(p);
    int32_t *ids_state = malloc(bytes);
    if (!ids_state) return WS_ERR_NOMEM;
    int32_t *ids_ctx = ids_state + n_mem;
    ws_attn_seg *segs = (ws_attn_seg *)(ids_ctx + n_mem);
    int32_t p_off = 0;
    for (int t = 0; t < p->B; t++) {
        ws_attn_seg c = p->seg_cross_host[t]; /* T state rows, their context rows */
        int32_t at = c.q_off + c.k_off, k_len = c.q_len + c.k_len;
        for (int i = 0; i < k_len; i++) {
            ids_state[at + i] = i < c.q_len ? c.q_off + i : -1;
            ids_ctx[at + i] = i < c.q_len ? -1 : c.k_off + i - c.q_len;
        }
        segs[t] = (ws_attn_seg){c.q_off, c.q_len, at, k_len, p_off};
        p_off += H * c.q_len * k_len;
    }
    ws_status st = ws_backend_upload(m->be, a->ids_state, ids_state, bytes);
    free(ids_state);
    return st;
}

static ws_mix_call mem_call(ws_exec *x, const rmc_act *a, const rmc_block *b, int l)
{
    ws_mix_call call = {.m = x->m, .p = &x->m->off.upd[l].cross.p, .mode = WS_MIX_CROSS,
                        .s = mem_shape(x, a->segs), .act = b->mha, .x = b->ln.out,
                        .keys = b->mem, .out = b->x_mid, .forward_only = !x->plan.train};
    return call;
}

static ws_status block_forward(ws_exec *x, const rmc_act *a, int l, const float *x_in)
{
    ws_model *m = x->m;
    ws_backend *be = m->be;
    const ws_plan *p = &x->plan;
    int d = m->cfg.d, n = p->n_state_rows, n_mem = n_mem_rows(p);
    const ws_upd_layer_off *o = &m->off.upd[l];
    rmc_block b = block_at(x, a, l);
    WS_TRY(ws_ln_forward(m, &o->cross.ln, &b.ln, b.ln.out, x_in, n));
    WS_TRY(be->ops->embedding_forward(be, b.mem, b.ln.out, a->ids_state, n_mem, 1, d, 0));
    WS_TRY(be->ops->embedding_forward(be, b.mem, p->ctx, a->ids_ctx, n_mem, 1, d, 1));
    ws_mix_call call = mem_call(x, a, &b, l);
    WS_TRY(mha()->forward(&call));
    WS_TRY(be->ops->add_forward(be, b.x_mid, b.x_mid, x_in, (size_t)n * d));
    return ws_mlp_forward(x, &o->mlp, &b.mlp, b.x_mid, n);
}

/* The residual stream after the last block. */
static const float *stream_out(const ws_exec *x, const rmc_act *a)
{
    int L = x->m->cfg.n_upd_layers;
    return L > 0 ? block_at(x, a, L - 1).mlp.x_out : x->plan.x0;
}

static ws_rmc_gate_args gate_args(const ws_exec *x, const rmc_act *a, float *out)
{
    const ws_model *m = x->m;
    const ws_plan *p = &x->plan;
    ws_rmc_gate_args g = {.n_rows = p->n_state_rows, .d = m->cfg.d, .segs = p->seg_cross,
                          .n_segs = p->B, .input_bias = RMC_INPUT_BIAS,
                          .forget_bias = RMC_FORGET_BIAS, .gm = a->gm, .gx = a->gx,
                          .cand = a->cand_ln.out, .m_prev = a->m_prev, .gates = a->gates, .a = a->a,
                          .out = out};
    return g;
}

static ws_status forward(ws_exec *x, float *act, const float *w_prev, float *w_out)
{
    ws_model *m = x->m;
    ws_backend *be = m->be;
    const ws_rmc_ops *ops = be->ops->rmc;
    const ws_plan *p = &x->plan;
    int d = m->cfg.d, n = p->n_state_rows;
    rmc_act a = carve_act(x, act, NULL);
    /* M_{t-1} first: w_out may be w_prev. */
    if (w_prev)
        WS_TRY(be->ops->embedding_forward(be, a.m_prev, w_prev, p->ids_prev, n, 1, d, 0));
    else
        WS_TRY(be->ops->fill(be, a.m_prev, 0.0f, (size_t)n * d));
    WS_TRY(be->ops->embedding_forward(be, a.m_prev, WS_P(m, m->off.w0), p->ids_w0, n, 1, d, 1));
    WS_TRY(upload_index(x, &a));
    const float *h = p->x0;
    for (int l = 0; l < m->cfg.n_upd_layers; l++) {
        WS_TRY(block_forward(x, &a, l, h));
        h = block_at(x, &a, l).mlp.x_out;
    }
    const ws_lin_off *P = m->off.upd_variant.at;
    ws_ln_off lnc = ws_slot_ln(P[CAND_LN]);
    WS_TRY(ws_ln_forward(m, &lnc, &a.cand_ln, a.cand_ln.out, h, n));
    WS_TRY(ops->tanh_forward(be, a.tanh_prev, a.m_prev, (size_t)n * d));
    WS_TRY(ws_mix_linear_forward(m, P[GATE_M], a.gm, a.tanh_prev, n, d, 2 * d));
    WS_TRY(ops->seg_mean_forward(be, a.xbar, p->ctx, p->seg_cross, p->B, d));
    WS_TRY(ws_mix_linear_forward(m, P[GATE_X], a.gx, a.xbar, p->B, d, 2 * d));
    ws_rmc_gate_args g = gate_args(x, &a, m->cfg.state_norm ? a.m_new : w_out);
    WS_TRY(ops->gate_forward(be, &g));
    if (!m->cfg.state_norm) return WS_OK;
    return ws_ln_forward(m, &m->off.state_ln, &a.state_ln, w_out, a.m_new, n);
}

/* ---- backward ---------------------------------------------------------------- */

/* p->d_x holds ∂L/∂(block output); leaves ∂L/∂(block input) there. */
static ws_status block_backward(ws_exec *x, const rmc_act *a, const rmc_scratch *s, int l)
{
    ws_model *m = x->m;
    ws_backend *be = m->be;
    const ws_plan *p = &x->plan;
    int d = m->cfg.d, n = p->n_state_rows, n_mem = n_mem_rows(p);
    rmc_block b = block_at(x, a, l);
    const float *x_in = l > 0 ? block_at(x, a, l - 1).mlp.x_out : p->x0;
    const ws_upd_layer_off *o = &m->off.upd[l];
    WS_TRY(ws_mlp_backward(x, &o->mlp, &b.mlp, b.x_mid, p->d_x, n));
    WS_TRY(be->ops->fill(be, s->d_ln, 0.0f, (size_t)n * d));
    WS_TRY(be->ops->fill(be, s->d_mem, 0.0f, (size_t)n_mem * d));
    ws_mix_call call = mem_call(x, a, &b, l);
    call.scratch = s->mha;
    call.d_out = p->d_x;
    call.d_x = s->d_ln;
    call.d_keys = s->d_mem;
    WS_TRY(mha()->backward(&call));
    /* The memory rows' gradients back to the LN'd state rows and the context. */
    WS_TRY(be->ops->embedding_backward(be, s->d_ln, s->d_mem, a->ids_state, n_mem, 1, d));
    WS_TRY(be->ops->embedding_backward(be, p->d_ctx, s->d_mem, a->ids_ctx, n_mem, 1, d));
    return ws_ln_backward(m, &o->cross.ln, &b.ln, p->d_x, s->d_ln, x_in, n);
}

/* ∂L/∂W_t (p->d_w) through LN_w and the gates: into the candidate (then p->d_x),
 * the gate weights, the context (through x̄) and, for W_0 trajectories, W_0. */
static ws_status gates_backward(ws_exec *x, const rmc_act *a, const rmc_scratch *s)
{
    ws_model *m = x->m;
    ws_backend *be = m->be;
    const ws_rmc_ops *ops = be->ops->rmc;
    const ws_plan *p = &x->plan;
    int d = m->cfg.d, n = p->n_state_rows;
    WS_TRY(be->ops->fill(be, s->d_m_new, 0.0f, s->gate_floats));
    const float *d_m_new = p->d_w;
    if (m->cfg.state_norm) {
        WS_TRY(ws_ln_backward(m, &m->off.state_ln, &a->state_ln, s->d_m_new, p->d_w, a->m_new,
                              n));
        d_m_new = s->d_m_new;
    }
    ws_rmc_gate_args g = gate_args(x, a, NULL);
    ws_rmc_gate_grads gg = {.dout = d_m_new, .d_cand = s->d_cand, .d_gm = s->d_gm,
                            .d_gx = s->d_gx, .d_m_prev = s->d_m_prev};
    WS_TRY(ops->gate_backward(be, &g, &gg));
    const ws_lin_off *P = m->off.upd_variant.at;
    WS_TRY(ws_mix_linear_backward(m, P[GATE_X], s->d_xbar, s->d_gx, a->xbar, p->B, d, 2 * d));
    WS_TRY(ops->seg_mean_backward(be, p->d_ctx, s->d_xbar, p->seg_cross, p->B, d));
    WS_TRY(ws_mix_linear_backward(m, P[GATE_M], s->d_tanh, s->d_gm, a->tanh_prev, n, d, 2 * d));
    WS_TRY(ops->tanh_backward(be, s->d_m_prev, a->tanh_prev, s->d_tanh, (size_t)n * d));
    /* Only W_0 rows keep theirs: W_{t-1} is a constant. */
    WS_TRY(be->ops->embedding_backward(be, WS_G(m, m->off.w0), s->d_m_prev, p->ids_w0, n, 1, d));
    ws_ln_off lnc = ws_slot_ln(P[CAND_LN]);
    return ws_ln_backward(m, &lnc, &a->cand_ln, p->d_x, s->d_cand, stream_out(x, a), n);
}

static ws_status backward(ws_exec *x, float *act, float *scratch)
{
    rmc_act a = carve_act(x, act, NULL);
    rmc_scratch s = carve_scratch(x, scratch, NULL);
    WS_TRY(gates_backward(x, &a, &s));
    for (int l = x->m->cfg.n_upd_layers - 1; l >= 0; l--) WS_TRY(block_backward(x, &a, &s, l));
    return WS_OK;
}

/* ---- the variant ------------------------------------------------------------- */

static ws_status validate(const ws_model_config *c, ws_error *err)
{
    (void)c, (void)err; /* any depth (0 blocks: M̃ = X_0) and width (n_heads | d is checked) */
    return WS_OK;
}

static int supported(const ws_backend *be) { return be->ops->rmc != NULL; }

const ws_updater_variant ws_updater_rmc = {
    .validate = validate, .supported = supported,
    .layout = layout, .act_floats = act_floats, .scratch_floats = scratch_floats,
    .forward = forward, .backward = backward,
};
