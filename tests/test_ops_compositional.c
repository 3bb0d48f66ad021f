/* test_ops_compositional.c — op-level proof tests for compositional attention's
 * ops (kernels/mixer_ops_compositional.h) on odd shapes:
 *   search: S = 1, 3 searches sharing one block of R = 1, 2, 3 retrievals' values
 *     (v_step = 0), ragged self and cross segments (q_len != k_len, a segment
 *     without keys), partly masked keys, the masked diagonal; forward against a
 *     naive double softmax(QKᵀ/√d_k)·V, probabilities included; backward against
 *     central differences of L = Σ out ⊙ W over every element of Q, K and V.
 *     (v_step = d_h is multi-head attention: test_ops_attention.c.)
 *   select: S = 1, 3 and R = 1, 2, 3; forward against double ρ = softmax_r(q̄·k̄·
 *     scale), y = Σ_r ρ O_r; backward against central differences over O, k̄, q̄;
 *     with R = 1, ρ == 1 and the k̄, q̄ gradients exactly 0.
 * Both: the += contract and untouched row padding. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/mixer_ops_compositional.h"
#include "ops_check.h"
#include "test_util.h"

/* A host image [rows, ld] with logical columns [0, width) and NaN padding, and
 * its device copy. */
typedef struct {
    int rows, ld;
    size_t n;
    float *h, *dev;
    uint8_t *mask;
} tbuf;

static void tbuf_init(tbuf *b, ws_test_rng *rng, int rows, int width, int pad, float scale)
{
    b->rows = rows, b->ld = width + pad, b->n = (size_t)rows * b->ld;
    b->h = xmalloc(b->n * sizeof *b->h);
    b->mask = xmalloc(b->n ? b->n : 1);
    for (size_t i = 0; i < b->n; i++) {
        b->mask[i] = (int)(i % (size_t)b->ld) < width;
        b->h[i] = b->mask[i] ? scale * ws_test_normal(rng) : NAN;
    }
    b->dev = dev_from(b->h, b->n);
}

static void tbuf_free(tbuf *b)
{
    dev_free(b->dev);
    free(b->h), free(b->mask);
}

/* Poisons an output: NaN where the op must write, SENTINEL where it must not. */
static void poison(float *dev, const uint8_t *mask, size_t n)
{
    float *h = xmalloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++) h[i] = mask[i] ? NAN : SENTINEL;
    put(dev, h, n);
    free(h);
}

/* Runs backward twice, from zero and from random prefills (the += contract), and
 * checks each gradient against central differences of l over its input. The
 * backward gets ∂L/∂out = l->r and the input gradients, all on the device. */
typedef struct {
    void (*backward)(void *ctx, const float *dout, float *const *grads);
    int n_in;
    tbuf *in[3];
} grad_spec;

static void check_grads(const char *tag, ws_test_rng *rng, loss_fn *l, const grad_spec *gs,
                        void *ctx, double atol, double rtol)
{
    float *dev[3], *fresh[3], *pre[3];
    for (int b = 0; b < gs->n_in; b++) {
        tbuf *t = gs->in[b];
        fresh[b] = xmalloc(t->n * sizeof(float));
        pre[b] = xmalloc(t->n * sizeof(float));
        for (size_t i = 0; i < t->n; i++) {
            fresh[b][i] = t->mask[i] ? 0.0f : SENTINEL;
            pre[b][i] = t->mask[i] ? ws_test_normal(rng) : SENTINEL;
        }
        dev[b] = dev_from(fresh[b], t->n);
    }
    float *dout_h = xmalloc(l->n_out * sizeof *dout_h);
    for (size_t i = 0; i < l->n_out; i++) dout_h[i] = (float)l->r[i];
    float *dout = dev_from(dout_h, l->n_out);
    l->forward(ctx);
    gs->backward(ctx, dout, dev);
    for (int b = 0; b < gs->n_in; b++) {
        get(fresh[b], dev[b], gs->in[b]->n);
        put(dev[b], pre[b], gs->in[b]->n);
    }
    gs->backward(ctx, dout, dev);
    dev_free(dout);
    free(dout_h);
    char what[96];
    for (int b = 0; b < gs->n_in; b++) {
        tbuf *t = gs->in[b];
        float *got = xmalloc(t->n * sizeof *got);
        double *fd = xmalloc(t->n * sizeof *fd);
        get(got, dev[b], t->n);
        snprintf(what, sizeof what, "%s grad += input %d", tag, b);
        check_accumulated(what, got, pre[b], fresh[b], t->n, t->mask);
        check_untouched(what, got, t->mask, t->n);
        fd_grad(l, t->dev, t->n, t->mask, 1e-2f, fd);
        snprintf(what, sizeof what, "%s grad input %d", tag, b);
        check_close(what, fresh[b], fd, t->n, t->mask, atol, rtol);
        free(got), free(fd), free(fresh[b]), free(pre[b]);
        dev_free(dev[b]);
    }
}

/* ---- search ------------------------------------------------------------------- */

typedef struct {
    int q_len, k_len;
} seg_len;

typedef struct {
    int S, dk, dv, self, mask_diag;
    tbuf q, k, v, out;
    int n_segs;
    ws_attn_seg *segs, *d_segs;
    size_t n_probs;
    float *probs;
    uint8_t *probs_mask, *valid, *d_valid;
    ws_comp_search_args a;
} search_case;

static void search_init(search_case *c, ws_test_rng *rng, int S, int dk, int R, int dvr,
                        int self, int mask_diag, const seg_len *lens, int n_segs)
{
    memset(c, 0, sizeof *c);
    c->S = S, c->dk = dk, c->dv = R * dvr, c->self = self, c->mask_diag = mask_diag;
    c->n_segs = n_segs;
    c->segs = xmalloc((size_t)n_segs * sizeof *c->segs);
    /* queries packed in order; cross keys packed in reverse with an unused row
     * before each block; probabilities with one float of padding before each */
    int nq = 0, nk = 0, max_q = 0, max_k = 0;
    size_t p = 0;
    for (int s = n_segs - 1; s >= 0 && !self; s--) {
        c->segs[s].k_off = ++nk;
        nk += lens[s].k_len;
    }
    for (int s = 0; s < n_segs; s++) {
        ws_attn_seg *g = &c->segs[s];
        g->q_off = nq, g->q_len = lens[s].q_len, g->k_len = lens[s].k_len;
        if (self) g->k_off = nq;
        nq += g->q_len;
        g->p_off = (int32_t)++p;
        p += (size_t)S * g->q_len * g->k_len;
        max_q = g->q_len > max_q ? g->q_len : max_q;
        max_k = g->k_len > max_k ? g->k_len : max_k;
    }
    if (self) nk = nq;
    c->n_probs = p + 1;
    c->probs_mask = calloc(c->n_probs, 1);
    assert_non_null(c->probs_mask);
    for (int s = 0; s < n_segs; s++)
        memset(c->probs_mask + c->segs[s].p_off, 1,
               (size_t)S * c->segs[s].q_len * c->segs[s].k_len);
    c->probs = dev_alloc(c->n_probs);
    /* about a third of the keys masked */
    c->valid = xmalloc((size_t)nk + 1);
    for (int j = 0; j < nk; j++) c->valid[j] = ws_test_uniform(rng) > 0.3f;
    c->d_valid = dev_alloc_bytes((size_t)nk + 1);
    put_bytes(c->d_valid, c->valid, (size_t)nk + 1);
    tbuf_init(&c->q, rng, nq, S * dk, 1, 1.0f);
    tbuf_init(&c->k, rng, nk, S * dk, 2, 1.0f);
    tbuf_init(&c->v, rng, nk, c->dv, 1, 1.0f);
    tbuf_init(&c->out, rng, nq, S * c->dv, 2, 1.0f);
    c->d_segs = dev_alloc_bytes((size_t)n_segs * sizeof *c->segs);
    put_bytes(c->d_segs, c->segs, (size_t)n_segs * sizeof *c->segs);
    c->a = (ws_comp_search_args){
        .a = {.out = c->out.dev, .ldo = c->out.ld, .probs = c->probs, .q = c->q.dev,
              .ldq = c->q.ld, .k = c->k.dev, .ldk = c->k.ld, .v = c->v.dev, .ldv = c->v.ld,
              .segs = c->d_segs, .n_segs = n_segs, .key_valid = c->d_valid, .n_heads = S,
              .d = S * dk, .max_q_len = max_q, .max_k_len = max_k},
        .dv = c->dv, .v_step = 0, .mask_diag = mask_diag};
}

static void search_free(search_case *c)
{
    tbuf_free(&c->q), tbuf_free(&c->k), tbuf_free(&c->v), tbuf_free(&c->out);
    dev_free(c->probs), dev_free(c->d_segs), dev_free(c->d_valid);
    free(c->segs), free(c->probs_mask), free(c->valid);
}

static void search_reference(const search_case *c, double *out, double *probs)
{
    memset(out, 0, c->out.n * sizeof *out);
    memset(probs, 0, c->n_probs * sizeof *probs);
    double *e = xmalloc(((size_t)c->k.rows + 1) * sizeof *e);
    for (int g = 0; g < c->n_segs; g++) {
        const ws_attn_seg *sg = &c->segs[g];
        for (int s = 0; s < c->S; s++)
            for (int i = 0; i < sg->q_len; i++) {
                const float *q = c->q.h + (size_t)(sg->q_off + i) * c->q.ld + s * c->dk;
                double mx = -INFINITY, sum = 0.0;
                for (int j = 0; j < sg->k_len; j++) {
                    const float *k = c->k.h + (size_t)(sg->k_off + j) * c->k.ld + s * c->dk;
                    int seen = c->valid[sg->k_off + j] && !(c->mask_diag && j == i);
                    double dot = 0.0;
                    for (int t = 0; t < c->dk; t++) dot += (double)q[t] * k[t];
                    e[j] = seen ? dot / sqrt((double)c->dk) : -INFINITY;
                    mx = fmax(mx, e[j]);
                }
                if (mx == -INFINITY) continue; /* no key to see: zeros */
                for (int j = 0; j < sg->k_len; j++) sum += e[j] = exp(e[j] - mx);
                double *pr = probs + sg->p_off + ((size_t)s * sg->q_len + i) * sg->k_len;
                double *o = out + (size_t)(sg->q_off + i) * c->out.ld + (size_t)s * c->dv;
                for (int j = 0; j < sg->k_len; j++) {
                    pr[j] = e[j] / sum;
                    const float *v = c->v.h + (size_t)(sg->k_off + j) * c->v.ld;
                    for (int t = 0; t < c->dv; t++) o[t] += pr[j] * v[t];
                }
            }
    }
    free(e);
}

static void search_forward(void *ctx)
{
    search_case *c = ctx;
    assert_int_equal(g_run->ops->compositional->search_forward(g_run, &c->a), WS_OK);
}

static void search_backward(void *ctx, const float *dout, float *const *grads)
{
    search_case *c = ctx;
    ws_attn_grads g = {.dq = grads[0], .dk = grads[1], .dv = grads[2], .dout = dout};
    assert_int_equal(g_be->ops->compositional->search_backward(g_be, &c->a, &g), WS_OK);
}

static void check_search(search_case *c, ws_test_rng *rng, const char *tag)
{
    poison(c->out.dev, c->out.mask, c->out.n);
    poison(c->probs, c->probs_mask, c->n_probs);
    search_forward(c);
    float *out = xmalloc(c->out.n * sizeof *out), *probs = xmalloc(c->n_probs * sizeof *probs);
    double *want = xmalloc(c->out.n * sizeof *want), *want_p = xmalloc(c->n_probs * sizeof *want_p);
    get(out, c->out.dev, c->out.n);
    get(probs, c->probs, c->n_probs);
    search_reference(c, want, want_p);
    char what[96];
    snprintf(what, sizeof what, "search out %s", tag);
    check_close(what, out, want, c->out.n, c->out.mask, 1e-5, 1e-5);
    check_untouched(what, out, c->out.mask, c->out.n);
    snprintf(what, sizeof what, "search probs %s", tag);
    check_close(what, probs, want_p, c->n_probs, c->probs_mask, 1e-6, 1e-5);
    check_untouched(what, probs, c->probs_mask, c->n_probs);
    /* the masked diagonal and masked keys get probability exactly 0 */
    for (int g = 0; g < c->n_segs; g++) {
        const ws_attn_seg *sg = &c->segs[g];
        for (int s = 0; s < c->S; s++)
            for (int i = 0; i < sg->q_len; i++)
                for (int j = 0; j < sg->k_len; j++) {
                    float pv = probs[sg->p_off + ((size_t)s * sg->q_len + i) * sg->k_len + j];
                    if ((!c->valid[sg->k_off + j] || (c->mask_diag && i == j)) && pv != 0.0f)
                        fail_msg("%s: masked key %d of query %d has p %g", tag, j, i, (double)pv);
                }
    }

    double *r = random_weights(rng, c->out.mask, c->out.n);
    loss_fn l = {search_forward, c, c->out.dev, c->out.n, r, xmalloc(c->out.n * sizeof(float))};
    grad_spec gs = {search_backward, 3, {&c->q, &c->k, &c->v}};
    check_grads(tag, rng, &l, &gs, c, 1e-4, 5e-4);
    free(out), free(probs), free(want), free(want_p), free(r), free(l.scratch);
}

static void test_search_self(void **state)
{
    (void)state;
    ws_test_rng rng = {0xc0a1};
    static const seg_len lens[] = {{1, 1}, {3, 3}, {5, 5}, {2, 2}, {7, 7}};
    static const int shapes[][5] = {/* S, d_k, R, d_v, mask_diag */
                                    {3, 2, 2, 3, 1}, {1, 3, 3, 2, 0}, {3, 3, 1, 2, 1}};
    for (int t = 0; t < N_OF(shapes); t++) {
        const int *sh = shapes[t];
        search_case c;
        search_init(&c, &rng, sh[0], sh[1], sh[2], sh[3], 1, sh[4], lens, N_OF(lens));
        char tag[64];
        snprintf(tag, sizeof tag, "self S%d dk%d R%d dv%d diag%d", sh[0], sh[1], sh[2], sh[3],
                 sh[4]);
        check_search(&c, &rng, tag);
        search_free(&c);
    }
}

static void test_search_cross(void **state)
{
    (void)state;
    ws_test_rng rng = {0xc0a2};
    static const seg_len lens[] = {{2, 5}, {4, 1}, {3, 0}, {1, 3}, {6, 9}};
    static const int shapes[][4] = {{3, 3, 1, 4}, {1, 2, 2, 3}, {3, 1, 3, 1}};
    for (int t = 0; t < N_OF(shapes); t++) {
        const int *sh = shapes[t];
        search_case c;
        search_init(&c, &rng, sh[0], sh[1], sh[2], sh[3], 0, 0, lens, N_OF(lens));
        char tag[64];
        snprintf(tag, sizeof tag, "cross S%d dk%d R%d dv%d", sh[0], sh[1], sh[2], sh[3]);
        check_search(&c, &rng, tag);
        search_free(&c);
    }
}

/* ---- select ------------------------------------------------------------------- */

typedef struct {
    int n, S, R, dv, dr;
    tbuf o, k, q, y;
    float *rho;
    ws_comp_select_args a;
} select_case;

static void select_init(select_case *c, ws_test_rng *rng, int n, int S, int R, int dv, int dr)
{
    c->n = n, c->S = S, c->R = R, c->dv = dv, c->dr = dr;
    int rows = n * S * R;
    tbuf_init(&c->o, rng, rows, dv, 0, 1.0f);
    tbuf_init(&c->k, rng, rows, dr, 0, 1.5f);
    tbuf_init(&c->q, rng, n, S * dr, 3, 1.5f);
    tbuf_init(&c->y, rng, n, S * dv, 1, 1.0f);
    c->rho = dev_alloc((size_t)rows);
    c->a = (ws_comp_select_args){.n = n, .n_searches = S, .n_retrievals = R, .dv = dv, .dr = dr,
                                 .scale = 1.0f / sqrtf((float)dr), .o = c->o.dev, .k = c->k.dev,
                                 .q = c->q.dev, .ldq = c->q.ld, .rho = c->rho, .y = c->y.dev,
                                 .ldy = c->y.ld};
}

static void select_free(select_case *c)
{
    tbuf_free(&c->o), tbuf_free(&c->k), tbuf_free(&c->q), tbuf_free(&c->y);
    dev_free(c->rho);
}

static void select_reference(const select_case *c, double *y, double *rho)
{
    memset(y, 0, c->y.n * sizeof *y);
    for (int n = 0; n < c->n; n++)
        for (int s = 0; s < c->S; s++) {
            size_t base = ((size_t)n * c->S + s) * c->R;
            const float *q = c->q.h + (size_t)n * c->q.ld + s * c->dr;
            double mx = -INFINITY, sum = 0.0;
            for (int r = 0; r < c->R; r++) {
                double e = 0.0;
                for (int t = 0; t < c->dr; t++) e += (double)q[t] * c->k.h[(base + r) * c->dr + t];
                rho[base + r] = e / sqrt((double)c->dr);
                mx = fmax(mx, rho[base + r]);
            }
            for (int r = 0; r < c->R; r++) sum += rho[base + r] = exp(rho[base + r] - mx);
            for (int r = 0; r < c->R; r++) {
                rho[base + r] /= sum;
                for (int t = 0; t < c->dv; t++)
                    y[(size_t)n * c->y.ld + s * c->dv + t] +=
                        rho[base + r] * c->o.h[(base + r) * c->dv + t];
            }
        }
}

static void select_forward(void *ctx)
{
    select_case *c = ctx;
    assert_int_equal(g_run->ops->compositional->select_forward(g_run, &c->a), WS_OK);
}

static void select_backward(void *ctx, const float *dy, float *const *grads)
{
    select_case *c = ctx;
    ws_comp_select_grads g = {.d_o = grads[0], .d_k = grads[1], .d_q = grads[2], .d_y = dy};
    assert_int_equal(g_be->ops->compositional->select_backward(g_be, &c->a, &g), WS_OK);
}

static void check_select(select_case *c, ws_test_rng *rng, const char *tag)
{
    size_t rows = (size_t)c->n * c->S * c->R;
    poison(c->y.dev, c->y.mask, c->y.n);
    select_forward(c);
    float *y = xmalloc(c->y.n * sizeof *y), *rho = xmalloc(rows * sizeof *rho);
    double *want = xmalloc(c->y.n * sizeof *want), *want_rho = xmalloc(rows * sizeof *want_rho);
    get(y, c->y.dev, c->y.n);
    get(rho, c->rho, rows);
    select_reference(c, want, want_rho);
    char what[96];
    snprintf(what, sizeof what, "select y %s", tag);
    check_close(what, y, want, c->y.n, c->y.mask, 1e-5, 1e-5);
    check_untouched(what, y, c->y.mask, c->y.n);
    snprintf(what, sizeof what, "select rho %s", tag);
    check_close(what, rho, want_rho, rows, NULL, 1e-6, 1e-5);

    double *r = random_weights(rng, c->y.mask, c->y.n);
    loss_fn l = {select_forward, c, c->y.dev, c->y.n, r, xmalloc(c->y.n * sizeof(float))};
    grad_spec gs = {select_backward, 3, {&c->o, &c->k, &c->q}};
    check_grads(tag, rng, &l, &gs, c, 1e-4, 5e-4);

    if (c->R == 1) {
        /* one retrieval: ρ is exactly 1 and the scores get exactly no gradient */
        for (size_t i = 0; i < rows; i++)
            if (rho[i] != 1.0f) fail_msg("%s: R = 1 but rho[%zu] = %.9g", tag, i, (double)rho[i]);
        float *dk = dev_alloc(c->k.n), *dq = dev_alloc(c->q.n), *d_o = dev_alloc(c->o.n);
        float *dy = dev_alloc(c->y.n);
        dev_set(dk, 0.0f, c->k.n), dev_set(dq, 0.0f, c->q.n), dev_set(d_o, 0.0f, c->o.n);
        dev_set(dy, 1.0f, c->y.n);
        select_backward(c, dy, (float *const[]){d_o, dk, dq});
        float *h = xmalloc((c->k.n > c->q.n ? c->k.n : c->q.n) * sizeof *h);
        get(h, dk, c->k.n);
        for (size_t i = 0; i < c->k.n; i++) assert_true(h[i] == 0.0f);
        get(h, dq, c->q.n);
        for (size_t i = 0; i < c->q.n; i++) assert_true(h[i] == 0.0f);
        free(h);
        dev_free(dk), dev_free(dq), dev_free(d_o), dev_free(dy);
    }
    free(y), free(rho), free(want), free(want_rho), free(r), free(l.scratch);
}

static void test_select(void **state)
{
    (void)state;
    ws_test_rng rng = {0xc0a3};
    static const int shapes[][5] = {/* n, S, R, d_v, d_r */
                                    {5, 1, 1, 3, 2}, {3, 1, 3, 2, 3}, {4, 3, 1, 2, 2},
                                    {5, 3, 2, 3, 2}, {7, 3, 3, 1, 4}, {70, 3, 2, 2, 3}};
    for (int t = 0; t < N_OF(shapes); t++) {
        const int *sh = shapes[t];
        select_case c;
        select_init(&c, &rng, sh[0], sh[1], sh[2], sh[3], sh[4]);
        char tag[64];
        snprintf(tag, sizeof tag, "n%d S%d R%d dv%d dr%d", sh[0], sh[1], sh[2], sh[3], sh[4]);
        check_select(&c, &rng, tag);
        select_free(&c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_search_self),
        cmocka_unit_test(test_search_cross),
        cmocka_unit_test(test_select),
    };
    return cmocka_run_group_tests(tests, ops_group_setup, ops_group_teardown);
}
