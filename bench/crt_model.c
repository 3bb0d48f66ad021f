/* crt_model.c — the Contextual Retrieval Task model on the backend (crt_model.h).
 *
 * Parameters live in one buffer (one Adam call); activations and their gradients
 * in two regions sized for max_batch samples. The attention's input projections
 * are one fused linear: Q | K | V (| retrieval queries, compositional). */
#include "crt_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/mixer_ops_compositional.h"
#include "model/tasks/task_rng.h"

/* A linear's weight [out, in] and bias [out] in the parameter buffer. */
typedef struct {
    size_t w, b;
    int in, out;
} lin;

/* Activations (and, in a second copy, their gradients). */
typedef struct {
    float *x, *a1, *g1, *h, *att, *o, *kbar, *y, *t, *z, *a3, *g3, *pred;
} acts;

struct crt_model {
    ws_backend *be;
    int comp, d, S, R, n_obj, in_dim, max_rows;
    int dk, dv, dr, w_att, w_o, w_y; /* widths: search, value, retrieval; att, O, y */
    lin e1, e2, att, tin, vk, oy, d1, d2;
    size_t ot_w; /* out_proj's columns for the concatenated token: [d, d_v], no bias */
    size_t n_params, n_acts;
    float *params, *grads, *adam_m, *adam_v;
    float *act_mem, *grad_mem, *probs, *rho;
    ws_attn_seg *segs;
    acts a, g;
    int B, steps;
};

static lin add_lin(size_t *total, int in, int out, int bias)
{
    lin l = {.w = *total, .in = in, .out = out};
    *total += (size_t)in * out;
    l.b = *total;
    *total += bias ? (size_t)out : 0;
    return l;
}

/* PyTorch's Linear init: weight and bias U(±1/√fan_in). */
static void init_uniform(float *p, size_t n, int fan_in, ws_task_rng *r)
{
    double bound = 1.0 / sqrt((double)fan_in);
    for (size_t i = 0; i < n; i++) p[i] = (float)((2.0 * ws_task_rng_uniform(r) - 1.0) * bound);
}

static void init_lin(float *p, const lin *l, int fan_in, int bias, ws_task_rng *r)
{
    init_uniform(p + l->w, (size_t)l->in * l->out, fan_in, r);
    if (bias) init_uniform(p + l->b, (size_t)l->out, fan_in, r);
}

/* Carves the activation (or gradient) region: every buffer for max_rows rows. */
static size_t carve(crt_model *m, float *base, acts *a)
{
    size_t rows = (size_t)m->max_rows, d = (size_t)m->d, off = 0;
    float **bufs[] = {&a->x, &a->a1, &a->g1, &a->h, &a->att, &a->o, &a->kbar,
                      &a->y, &a->t,  &a->z,  &a->a3, &a->g3, &a->pred};
    size_t widths[] = {(size_t)m->in_dim, d, d, d, (size_t)m->w_att, (size_t)m->w_o,
                       m->comp ? (size_t)m->S * m->R * m->dr : 0, (size_t)m->w_y,
                       (size_t)m->dv, d, d, d, 1};
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++) {
        *bufs[i] = base ? base + off : NULL;
        off += rows * widths[i];
    }
    return off;
}

static ws_status alloc_f(ws_backend *be, float **p, size_t n)
{
    return ws_backend_alloc(be, (n ? n : 1) * sizeof(float), (void **)p);
}

ws_status crt_model_new(crt_model **out, ws_backend *be, int comp, int d, int S, int R,
                        int in_dim, int n_obj, int max_batch, uint64_t seed)
{
    crt_model *m = calloc(1, sizeof *m);
    if (!m) return WS_ERR_NOMEM;
    *out = m;
    m->be = be, m->comp = comp, m->d = d, m->S = S, m->R = comp ? R : S;
    m->n_obj = n_obj, m->in_dim = in_dim, m->max_rows = max_batch * n_obj;
    m->dk = d / S, m->dv = d / m->R, m->dr = m->dk;
    m->w_att = comp ? 2 * d + m->R * m->dv + S * m->dr : 3 * d;
    m->w_o = comp ? S * m->R * m->dv : d; /* the search's output */
    m->w_y = S * m->dv;                   /* what out_proj reads besides the token */
    size_t n = 0;
    m->e1 = add_lin(&n, in_dim, d, 1);
    m->e2 = add_lin(&n, d, d, 1);
    m->att = add_lin(&n, d, m->w_att, 1);
    m->tin = add_lin(&n, d, m->dv, 1);
    m->vk = add_lin(&n, comp ? m->dv : 0, comp ? m->dr : 0, comp);
    m->oy = add_lin(&n, m->w_y, d, 1);
    m->ot_w = n;
    n += (size_t)m->dv * d;
    m->d1 = add_lin(&n, d, d, 1);
    m->d2 = add_lin(&n, d, 1, 1);
    m->n_params = n;

    float *h = calloc(n, sizeof *h);
    if (!h) return WS_ERR_NOMEM;
    ws_task_rng r;
    ws_task_rng_seed(&r, seed);
    init_lin(h, &m->e1, in_dim, 1, &r);
    init_lin(h, &m->e2, d, 1, &r);
    init_lin(h, &m->att, d, 1, &r);
    init_lin(h, &m->tin, d, 1, &r);
    if (comp) init_lin(h, &m->vk, m->dv, 1, &r);
    int fan_out = m->w_y + m->dv; /* out_proj reads the concatenation */
    init_lin(h, &m->oy, fan_out, 1, &r);
    init_uniform(h + m->ot_w, (size_t)m->dv * d, fan_out, &r);
    init_lin(h, &m->d1, d, 1, &r);
    init_lin(h, &m->d2, d, 1, &r);

    m->n_acts = carve(m, NULL, &m->a);
    size_t n_probs = (size_t)max_batch * S * n_obj * n_obj;
    ws_status st = WS_OK;
    if ((st = alloc_f(be, &m->params, n)) != WS_OK || (st = alloc_f(be, &m->grads, n)) != WS_OK ||
        (st = alloc_f(be, &m->adam_m, n)) != WS_OK || (st = alloc_f(be, &m->adam_v, n)) != WS_OK ||
        (st = alloc_f(be, &m->act_mem, m->n_acts)) != WS_OK ||
        (st = alloc_f(be, &m->grad_mem, m->n_acts)) != WS_OK ||
        (st = alloc_f(be, &m->probs, n_probs)) != WS_OK ||
        (st = alloc_f(be, &m->rho, (size_t)m->max_rows * S * m->R)) != WS_OK ||
        (st = ws_backend_alloc(be, (size_t)max_batch * sizeof(ws_attn_seg), (void **)&m->segs)) !=
            WS_OK ||
        (st = ws_backend_upload(be, m->params, h, n * sizeof *h)) != WS_OK ||
        (st = be->ops->fill(be, m->adam_m, 0.0f, n)) != WS_OK ||
        (st = be->ops->fill(be, m->adam_v, 0.0f, n)) != WS_OK) {
        free(h);
        return st;
    }
    free(h);
    carve(m, m->act_mem, &m->a);
    carve(m, m->grad_mem, &m->g);
    return WS_OK;
}

void crt_model_free(crt_model *m)
{
    if (!m) return;
    float *bufs[] = {m->params, m->grads,  m->adam_m, m->adam_v,
                     m->act_mem, m->grad_mem, m->probs, m->rho};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) ws_backend_release(m->be, bufs[i]);
    ws_backend_release(m->be, m->segs);
    free(m);
}

size_t crt_model_n_params(const crt_model *m) { return m->n_params; }

#define P(off) (m->params + (off))
#define G(off) (m->grads + (off))

static ws_status lin_fwd(crt_model *m, const lin *l, float *out, const float *in, int rows)
{
    return m->be->ops->linear_forward(m->be, out, in, P(l->w), P(l->b), rows, l->in, l->out);
}

static ws_status lin_bwd(crt_model *m, const lin *l, float *din, const float *dout,
                         const float *in, int rows)
{
    return m->be->ops->linear_backward(m->be, din, G(l->w), G(l->b), dout, in, P(l->w), rows,
                                       l->in, l->out);
}

/* The search: over each sample's objects, diagonal masked. */
static ws_comp_search_args search_args(const crt_model *m, const acts *a)
{
    ws_comp_search_args s = {
        .a = {.out = a->o, .ldo = m->w_o, .probs = m->probs, .q = a->att, .ldq = m->w_att,
              .k = a->att + m->d, .ldk = m->w_att, .v = a->att + 2 * m->d, .ldv = m->w_att,
              .segs = m->segs, .n_segs = m->B, .n_heads = m->S, .d = m->d,
              .max_q_len = m->n_obj, .max_k_len = m->n_obj},
        .dv = m->comp ? m->R * m->dv : m->dv,
        .v_step = m->comp ? 0 : m->dv, /* compositional: every search, every value */
        .mask_diag = 1,
    };
    return s;
}

static ws_comp_select_args select_args(const crt_model *m, const acts *a)
{
    ws_comp_select_args s = {
        .n = m->B * m->n_obj, .n_searches = m->S, .n_retrievals = m->R, .dv = m->dv,
        .dr = m->dr, .scale = 1.0f / sqrtf((float)m->dr), .o = a->o, .k = a->kbar,
        .q = a->att + 2 * m->d + m->R * m->dv, .ldq = m->w_att, .rho = m->rho, .y = a->y,
        .ldy = m->w_y,
    };
    return s;
}

/* out_proj's token part: z += t · W_tᵀ (z already holds y·W_yᵀ + b). */
static ws_gemm_args token_gemm(const crt_model *m, const acts *a, int rows)
{
    ws_gemm_args g = {.trans_b = 1, .m = rows, .n = m->d, .k = m->dv, .alpha = 1.0f,
                      .beta = 1.0f, .a = a->t, .lda = m->dv, .b = P(m->ot_w), .ldb = m->dv,
                      .c = a->z, .ldc = m->d, .batch = 1};
    return g;
}

static ws_status set_segments(crt_model *m, int B)
{
    ws_attn_seg *h = malloc((size_t)B * sizeof *h);
    if (!h) return WS_ERR_NOMEM;
    int n = m->n_obj;
    for (int b = 0; b < B; b++)
        h[b] = (ws_attn_seg){b * n, n, b * n, n, b * m->S * n * n};
    ws_status st = ws_backend_upload(m->be, m->segs, h, (size_t)B * sizeof *h);
    free(h);
    return st;
}

ws_status crt_model_forward(crt_model *m, const float *x, int B, float *pred)
{
    ws_backend *be = m->be;
    const acts *a = &m->a;
    int rows = B * m->n_obj, d = m->d;
    if (rows > m->max_rows) return WS_ERR_INVALID;
    if (B != m->B) WS_TRY(set_segments(m, B));
    m->B = B;
    WS_TRY(ws_backend_upload(be, a->x, x, (size_t)rows * m->in_dim * sizeof *x));
    WS_TRY(lin_fwd(m, &m->e1, a->a1, a->x, rows));
    WS_TRY(be->ops->gelu_forward(be, a->g1, a->a1, (size_t)rows * d));
    WS_TRY(lin_fwd(m, &m->e2, a->h, a->g1, rows));
    WS_TRY(lin_fwd(m, &m->att, a->att, a->h, rows));
    WS_TRY(lin_fwd(m, &m->tin, a->t, a->h, rows));
    ws_comp_search_args sa = search_args(m, a);
    WS_TRY(be->ops->compositional->search_forward(be, &sa));
    const float *y = a->o; /* multi-head: the heads are y */
    if (m->comp) {
        WS_TRY(lin_fwd(m, &m->vk, a->kbar, a->o, rows * m->S * m->R));
        ws_comp_select_args se = select_args(m, a);
        WS_TRY(be->ops->compositional->select_forward(be, &se));
        y = a->y;
    }
    WS_TRY(lin_fwd(m, &m->oy, a->z, y, rows));
    ws_gemm_args tg = token_gemm(m, a, rows);
    WS_TRY(be->ops->gemm(be, &tg));
    WS_TRY(lin_fwd(m, &m->d1, a->a3, a->z, rows));
    WS_TRY(be->ops->gelu_forward(be, a->g3, a->a3, (size_t)rows * d));
    WS_TRY(lin_fwd(m, &m->d2, a->pred, a->g3, rows));
    return ws_backend_download(be, pred, a->pred, (size_t)rows * sizeof *pred);
}

ws_status crt_model_backward(crt_model *m, const float *dpred)
{
    ws_backend *be = m->be;
    const acts *a = &m->a, *g = &m->g;
    int rows = m->B * m->n_obj, d = m->d;
    WS_TRY(be->ops->fill(be, m->grad_mem, 0.0f, m->n_acts));
    WS_TRY(be->ops->fill(be, m->grads, 0.0f, m->n_params));
    WS_TRY(ws_backend_upload(be, g->pred, dpred, (size_t)rows * sizeof *dpred));
    WS_TRY(lin_bwd(m, &m->d2, g->g3, g->pred, a->g3, rows));
    WS_TRY(be->ops->gelu_backward(be, g->a3, a->a3, g->g3, (size_t)rows * d));
    WS_TRY(lin_bwd(m, &m->d1, g->z, g->a3, a->z, rows));
    ws_gemm_args tg = token_gemm(m, a, rows);
    WS_TRY(ws_gemm_backward(be, &tg, g->z, g->t, G(m->ot_w)));
    /* multi-head: y is the search output, so its gradient is the search's */
    float *dy = m->comp ? g->y : g->o;
    WS_TRY(lin_bwd(m, &m->oy, dy, g->z, m->comp ? a->y : a->o, rows));
    if (m->comp) {
        ws_comp_select_args se = select_args(m, a);
        ws_comp_select_grads sg = {.d_o = g->o, .d_k = g->kbar,
                                   .d_q = g->att + 2 * d + m->R * m->dv, .d_y = g->y};
        WS_TRY(be->ops->compositional->select_backward(be, &se, &sg));
        WS_TRY(lin_bwd(m, &m->vk, g->o, g->kbar, a->o, rows * m->S * m->R));
    }
    ws_comp_search_args sa = search_args(m, a);
    ws_attn_grads ag = {.dq = g->att, .dk = g->att + d, .dv = g->att + 2 * d, .dout = g->o};
    WS_TRY(be->ops->compositional->search_backward(be, &sa, &ag));
    WS_TRY(lin_bwd(m, &m->tin, g->h, g->t, a->h, rows));
    WS_TRY(lin_bwd(m, &m->att, g->h, g->att, a->h, rows));
    WS_TRY(lin_bwd(m, &m->e2, g->g1, g->h, a->g1, rows));
    WS_TRY(be->ops->gelu_backward(be, g->a1, a->a1, g->g1, (size_t)rows * d));
    return lin_bwd(m, &m->e1, NULL, g->a1, a->x, rows);
}

ws_status crt_model_adam(crt_model *m, float lr)
{
    ws_adamw_args args = {.lr = lr, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                          .weight_decay = 0.0f, .step = ++m->steps, .grad_scale = 1.0f};
    return m->be->ops->adamw(m->be, m->params, m->grads, m->adam_m, m->adam_v, m->n_params,
                             &args);
}
