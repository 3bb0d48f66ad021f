/* test_ops_attention.c — op-level proof tests for ragged multi-head attention:
 * forward against a naive double-precision softmax(QKᵀ/√d_h)V per (segment,
 * head), probabilities included; backward against central finite differences
 * of L = Σ out ⊙ R over every element of Q, K and V; the += contract of dq, dk
 * and dv; key_valid masks (masked keys get p = 0 and zero gradient, a segment
 * with no valid key or no keys gets a zero output); row strides of fused QKV
 * [N, 3d] and KV [N, 2d] layouts, whose padding an op must not touch; a
 * forward-only call (the same outputs, probabilities not written). All
 * buffers go through ws_backend_alloc/upload/download. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "ops_check.h"
#include "test_util.h"

/* ---- attention cases ---------------------------------------------------------- */

/* One segment to build: query/key counts and its key mask (all valid, partly
 * valid with at least one valid and one masked key, or none valid). */
enum { MASK_NONE, MASK_PART, MASK_ALL };
typedef struct {
    int q_len, k_len, mask;
} seg_spec;

/* Where Q, K and V live: one fused [N, 3d] buffer (self-attention), a separate Q
 * with a fused [Nk, 2d] KV (cross-attention), or three buffers. */
enum { LAYOUT_QKV, LAYOUT_Q_KV, LAYOUT_Q_K_V };

typedef struct {
    int rows, ld;
    size_t n;
    float *h;      /* host image: logical values, NaN padding */
    uint8_t *mask; /* logical elements */
    float *dev;
} abuf;

typedef struct {
    int d, n_heads, dh;
    int nq, nk;
    int n_bufs;
    abuf buf[3];
    int qb, qc, kb, kc, vb, vc; /* buffer and column offset of Q, K, V */
    int ldo;
    size_t n_out, n_probs;
    uint8_t *out_mask, *probs_mask;
    float *d_out, *d_probs;
    int n_segs;
    ws_attn_seg *segs, *d_segs;
    uint8_t *valid, *d_valid; /* NULL when no mask */
    ws_attn_args a;
} attn_case;

static void abuf_init(abuf *b, ws_test_rng *rng, int rows, int ld, const int *col0,
                      int n_ranges, int width, float scale)
{
    b->rows = rows, b->ld = ld, b->n = (size_t)rows * ld;
    b->h = xmalloc(b->n * sizeof *b->h);
    b->mask = calloc(b->n ? b->n : 1, 1);
    assert_non_null(b->mask);
    for (int r = 0; r < rows; r++)
        for (int t = 0; t < n_ranges; t++)
            for (int c = col0[t]; c < col0[t] + width; c++) b->mask[(size_t)r * ld + c] = 1;
    for (size_t i = 0; i < b->n; i++) b->h[i] = b->mask[i] ? scale * ws_test_normal(rng) : NAN;
    b->dev = dev_from(b->h, b->n);
}

static void attn_case_init(attn_case *c, ws_test_rng *rng, int layout, int d, int n_heads,
                           const seg_spec *spec, int n_segs, int use_mask, float scale)
{
    memset(c, 0, sizeof *c);
    c->d = d, c->n_heads = n_heads, c->dh = d / n_heads, c->n_segs = n_segs;
    assert_int_equal(c->dh * n_heads, d);
    c->segs = xmalloc((size_t)n_segs * sizeof *c->segs);

    /* packed offsets in spec order; keys of cross layouts in reverse order with one
     * unused key row before each block (no segment reads it) */
    int *qo = xmalloc((size_t)n_segs * sizeof *qo), *ko = xmalloc((size_t)n_segs * sizeof *ko);
    int nq = 0, nk = 0;
    for (int s = 0; s < n_segs; s++) {
        qo[s] = nq;
        nq += spec[s].q_len;
    }
    if (layout == LAYOUT_QKV) {
        for (int s = 0; s < n_segs; s++) {
            assert_int_equal(spec[s].q_len, spec[s].k_len);
            ko[s] = qo[s];
        }
        nk = nq;
    } else {
        for (int s = n_segs - 1; s >= 0; s--) {
            nk += 1;
            ko[s] = nk;
            nk += spec[s].k_len;
        }
    }
    c->nq = nq, c->nk = nk;

    /* segment array in a shuffled order; probabilities packed in that order with
     * two floats of padding before each block */
    int *perm = xmalloc((size_t)n_segs * sizeof *perm);
    for (int s = 0; s < n_segs; s++) perm[s] = s;
    for (int s = n_segs - 1; s > 0; s--) {
        int j = ws_test_int(rng, 0, s), t = perm[s];
        perm[s] = perm[j], perm[j] = t;
    }
    size_t p = 0;
    int max_q = 0, max_k = 0;
    for (int i = 0; i < n_segs; i++) {
        const seg_spec *sp = &spec[perm[i]];
        p += 2;
        c->segs[i] = (ws_attn_seg){.q_off = qo[perm[i]], .q_len = sp->q_len,
                                   .k_off = ko[perm[i]], .k_len = sp->k_len, .p_off = (int32_t)p};
        p += (size_t)n_heads * sp->q_len * sp->k_len;
        if (sp->q_len > max_q) max_q = sp->q_len;
        if (sp->k_len > max_k) max_k = sp->k_len;
    }
    c->n_probs = p + 2;
    c->probs_mask = calloc(c->n_probs, 1);
    assert_non_null(c->probs_mask);
    for (int i = 0; i < n_segs; i++)
        memset(c->probs_mask + c->segs[i].p_off, 1,
               (size_t)n_heads * c->segs[i].q_len * c->segs[i].k_len);

    /* key mask */
    if (use_mask) {
        c->valid = xmalloc((size_t)(nk ? nk : 1));
        for (int j = 0; j < nk; j++) c->valid[j] = (uint8_t)ws_test_int(rng, 0, 1);
        for (int s = 0; s < n_segs; s++) {
            uint8_t *v = c->valid + ko[s];
            int kl = spec[s].k_len;
            for (int j = 0; j < kl; j++)
                v[j] = spec[s].mask == MASK_NONE  ? 1
                       : spec[s].mask == MASK_ALL ? 0
                                                  : (uint8_t)(ws_test_uniform(rng) < 0.6f);
            if (spec[s].mask == MASK_PART && kl > 0) {
                /* at least one valid key and, where there are two, one masked */
                int j = ws_test_int(rng, 0, kl - 1);
                v[j] = 1;
                if (kl > 1) v[(j + 1) % kl] = 0;
            }
        }
        c->d_valid = dev_alloc_bytes((size_t)(nk ? nk : 1));
        put_bytes(c->d_valid, c->valid, (size_t)(nk ? nk : 1));
    }

    /* inputs */
    int pad = ws_test_int(rng, 1, 3);
    if (layout == LAYOUT_QKV) {
        int cols[3] = {0, d, 2 * d};
        c->n_bufs = 1;
        abuf_init(&c->buf[0], rng, nq, 3 * d + pad, cols, 3, d, scale);
        c->qb = c->kb = c->vb = 0, c->qc = 0, c->kc = d, c->vc = 2 * d;
    } else if (layout == LAYOUT_Q_KV) {
        int q0 = 0, kv[2] = {0, d};
        c->n_bufs = 2;
        abuf_init(&c->buf[0], rng, nq, d + pad, &q0, 1, d, scale);
        abuf_init(&c->buf[1], rng, nk, 2 * d + ws_test_int(rng, 0, 2), kv, 2, d, scale);
        c->qb = 0, c->kb = c->vb = 1, c->qc = 0, c->kc = 0, c->vc = d;
    } else {
        int z = 0, one = 1;
        c->n_bufs = 3;
        abuf_init(&c->buf[0], rng, nq, d, &z, 1, d, scale);
        abuf_init(&c->buf[1], rng, nk, d + 1, &one, 1, d, scale); /* K starts at column 1 */
        abuf_init(&c->buf[2], rng, nk, d + 2, &z, 1, d, scale);
        c->qb = 0, c->kb = 1, c->vb = 2, c->qc = 0, c->kc = 1, c->vc = 0;
    }

    /* outputs: out rows of width d inside ldo */
    c->ldo = d + ws_test_int(rng, 0, 2);
    c->n_out = (size_t)(nq ? nq : 1) * c->ldo;
    c->out_mask = calloc(c->n_out, 1);
    assert_non_null(c->out_mask);
    for (int r = 0; r < nq; r++) memset(c->out_mask + (size_t)r * c->ldo, 1, (size_t)d);
    c->d_out = dev_alloc(c->n_out);
    c->d_probs = dev_alloc(c->n_probs);
    c->d_segs = dev_alloc_bytes((size_t)n_segs * sizeof *c->segs);
    put_bytes(c->d_segs, c->segs, (size_t)n_segs * sizeof *c->segs);

    c->a = (ws_attn_args){.out = c->d_out, .ldo = c->ldo, .probs = c->d_probs,
                          .q = c->buf[c->qb].dev + c->qc, .ldq = c->buf[c->qb].ld,
                          .k = c->buf[c->kb].dev + c->kc, .ldk = c->buf[c->kb].ld,
                          .v = c->buf[c->vb].dev + c->vc, .ldv = c->buf[c->vb].ld,
                          .segs = c->d_segs, .n_segs = n_segs, .key_valid = c->d_valid,
                          .n_heads = n_heads, .d = d, .max_q_len = max_q, .max_k_len = max_k};
    free(qo), free(ko), free(perm);
}

static void attn_case_free(attn_case *c)
{
    for (int b = 0; b < c->n_bufs; b++) {
        dev_free(c->buf[b].dev);
        free(c->buf[b].h), free(c->buf[b].mask);
    }
    dev_free(c->d_out), dev_free(c->d_probs), dev_free(c->d_segs);
    if (c->d_valid) dev_free(c->d_valid);
    free(c->out_mask), free(c->probs_mask), free(c->segs), free(c->valid);
}

/* Naive double reference of out (n_out) and probs (n_probs), from the host images. */
static void attn_reference(const attn_case *c, double *out, double *probs)
{
    memset(out, 0, c->n_out * sizeof *out);
    memset(probs, 0, c->n_probs * sizeof *probs);
    const abuf *bq = &c->buf[c->qb], *bk = &c->buf[c->kb], *bv = &c->buf[c->vb];
    double inv = 1.0 / sqrt((double)c->dh);
    double *sc = xmalloc(((size_t)c->nk + 1) * sizeof *sc);
    for (int s = 0; s < c->n_segs; s++) {
        const ws_attn_seg *sg = &c->segs[s];
        for (int h = 0; h < c->n_heads; h++)
            for (int i = 0; i < sg->q_len; i++) {
                const float *q = bq->h + (size_t)(sg->q_off + i) * bq->ld + c->qc + h * c->dh;
                double mx = -INFINITY;
                for (int j = 0; j < sg->k_len; j++) {
                    int kr = sg->k_off + j;
                    if (c->valid && !c->valid[kr]) continue;
                    const float *k = bk->h + (size_t)kr * bk->ld + c->kc + h * c->dh;
                    double dot = 0.0;
                    for (int t = 0; t < c->dh; t++) dot += (double)q[t] * k[t];
                    sc[j] = dot * inv;
                    mx = fmax(mx, sc[j]);
                }
                if (mx == -INFINITY) continue; /* no keys: zero output, zero probs */
                double sum = 0.0;
                for (int j = 0; j < sg->k_len; j++) {
                    int kr = sg->k_off + j;
                    sc[j] = (c->valid && !c->valid[kr]) ? 0.0 : exp(sc[j] - mx);
                    sum += sc[j];
                }
                double *pr = probs + sg->p_off + ((size_t)h * sg->q_len + i) * sg->k_len;
                double *o = out + (size_t)(sg->q_off + i) * c->ldo + h * c->dh;
                for (int j = 0; j < sg->k_len; j++) {
                    pr[j] = sc[j] / sum;
                    const float *v =
                        bv->h + (size_t)(sg->k_off + j) * bv->ld + c->vc + h * c->dh;
                    for (int t = 0; t < c->dh; t++) o[t] += pr[j] * v[t];
                }
            }
    }
    free(sc);
}

static void attn_forward(void *ctx)
{
    attn_case *c = ctx;
    assert_int_equal(g_run->ops->attention_forward(g_run, &c->a), WS_OK);
}

/* Poisons out (NaN where the op must write, SENTINEL where it must not). */
static void attn_poison_out(attn_case *c)
{
    float *h = xmalloc(c->n_out * sizeof *h);
    for (size_t i = 0; i < c->n_out; i++) h[i] = c->out_mask[i] ? NAN : SENTINEL;
    put(c->d_out, h, c->n_out);
    free(h);
}

/* Poisons out and probs alike. */
static void attn_poison(attn_case *c)
{
    attn_poison_out(c);
    float *h = xmalloc(c->n_probs * sizeof *h);
    for (size_t i = 0; i < c->n_probs; i++) h[i] = c->probs_mask[i] ? NAN : SENTINEL;
    put(c->d_probs, h, c->n_probs);
    free(h);
}

static void check_attn_forward(attn_case *c, const char *tag, double atol, double rtol)
{
    attn_poison(c);
    attn_forward(c);
    float *out = xmalloc(c->n_out * sizeof *out), *probs = xmalloc(c->n_probs * sizeof *probs);
    get(out, c->d_out, c->n_out);
    get(probs, c->d_probs, c->n_probs);
    double *want_out = xmalloc(c->n_out * sizeof(double));
    double *want_p = xmalloc(c->n_probs * sizeof(double));
    attn_reference(c, want_out, want_p);
    char what[96];
    snprintf(what, sizeof what, "attention out %s", tag);
    check_close(what, out, want_out, c->n_out, c->out_mask, atol, rtol);
    check_untouched(what, out, c->out_mask, c->n_out);
    snprintf(what, sizeof what, "attention probs %s", tag);
    check_close(what, probs, want_p, c->n_probs, c->probs_mask, atol, rtol);
    check_untouched(what, probs, c->probs_mask, c->n_probs);

    /* exact zeros: masked keys get probability 0; a query with no valid key (or
     * no keys at all) gets a zero output row */
    for (int s = 0; s < c->n_segs; s++) {
        const ws_attn_seg *sg = &c->segs[s];
        int any_valid = 0;
        for (int j = 0; j < sg->k_len; j++) {
            int ok = !c->valid || c->valid[sg->k_off + j];
            any_valid |= ok;
            if (ok) continue;
            for (int h = 0; h < c->n_heads; h++)
                for (int i = 0; i < sg->q_len; i++) {
                    float pv = probs[sg->p_off + ((size_t)h * sg->q_len + i) * sg->k_len + j];
                    if (pv != 0.0f) fail_msg("%s: masked key %d of segment %d has p %g", tag, j, s,
                                             (double)pv);
                }
        }
        if (any_valid) continue;
        for (int i = 0; i < sg->q_len; i++)
            for (int t = 0; t < c->d; t++) {
                float o = out[(size_t)(sg->q_off + i) * c->ldo + t];
                if (o != 0.0f)
                    fail_msg("%s: segment %d has no valid key but out[%d][%d] = %g", tag, s, i,
                             t, (double)o);
            }
    }
    free(out), free(probs), free(want_out), free(want_p);
}

/* Backward: FD over every logical input element, the += contract, padding. */
static void check_attn_backward(attn_case *c, ws_test_rng *rng, const char *tag, float h,
                                double atol, double rtol)
{
    double *r = random_weights(rng, c->out_mask, c->n_out);
    float *hdy = xmalloc(c->n_out * sizeof *hdy);
    for (size_t i = 0; i < c->n_out; i++) hdy[i] = c->out_mask[i] ? (float)r[i] : NAN;
    float *ddy = dev_from(hdy, c->n_out);

    float *gdev[3] = {0}, *an[3] = {0}, *pre[3] = {0}, *zero[3] = {0};
    for (int b = 0; b < c->n_bufs; b++) {
        size_t n = c->buf[b].n;
        an[b] = xmalloc(n * sizeof(float));
        pre[b] = xmalloc(n * sizeof(float));
        zero[b] = xmalloc(n * sizeof(float));
        for (size_t i = 0; i < n; i++) {
            zero[b][i] = c->buf[b].mask[i] ? 0.0f : SENTINEL;
            pre[b][i] = c->buf[b].mask[i] ? ws_test_normal(rng) : SENTINEL;
        }
        gdev[b] = dev_from(zero[b], n);
    }
    ws_attn_grads g = {.dq = gdev[c->qb] + c->qc, .dk = gdev[c->kb] + c->kc,
                       .dv = gdev[c->vb] + c->vc, .dout = ddy};
    attn_forward(c);
    assert_int_equal(g_be->ops->attention_backward(g_be, &c->a, &g), WS_OK);
    for (int b = 0; b < c->n_bufs; b++) get(an[b], gdev[b], c->buf[b].n);

    /* prefilled: rerun forward (probs) and backward on top of random values */
    for (int b = 0; b < c->n_bufs; b++) put(gdev[b], pre[b], c->buf[b].n);
    attn_forward(c);
    assert_int_equal(g_be->ops->attention_backward(g_be, &c->a, &g), WS_OK);
    char what[96];
    for (int b = 0; b < c->n_bufs; b++) {
        float *got = xmalloc(c->buf[b].n * sizeof *got);
        get(got, gdev[b], c->buf[b].n);
        snprintf(what, sizeof what, "attention grad += buf%d %s", b, tag);
        check_accumulated(what, got, pre[b], an[b], c->buf[b].n, c->buf[b].mask);
        check_untouched(what, got, c->buf[b].mask, c->buf[b].n);
        free(got);
    }

    loss_fn l = {attn_forward, c, c->d_out, c->n_out, r, xmalloc(c->n_out * sizeof(float))};
    for (int b = 0; b < c->n_bufs; b++) {
        double *fd = xmalloc(c->buf[b].n * sizeof *fd);
        fd_grad(&l, c->buf[b].dev, c->buf[b].n, c->buf[b].mask, h, fd);
        snprintf(what, sizeof what, "attention grad buf%d %s", b, tag);
        check_close(what, an[b], fd, c->buf[b].n, c->buf[b].mask, atol, rtol);
        check_untouched(what, an[b], c->buf[b].mask, c->buf[b].n);
        free(fd);
    }

    /* keys no segment reads, and masked keys, get exactly zero gradient */
    for (int j = 0; j < c->nk; j++) {
        int used = 0;
        for (int s = 0; s < c->n_segs; s++)
            used |= j >= c->segs[s].k_off && j < c->segs[s].k_off + c->segs[s].k_len;
        if (used && !(c->valid && !c->valid[j])) continue;
        for (int t = 0; t < c->d; t++) {
            float gk = an[c->kb][(size_t)j * c->buf[c->kb].ld + c->kc + t];
            float gv = an[c->vb][(size_t)j * c->buf[c->vb].ld + c->vc + t];
            if (gk != 0.0f || gv != 0.0f)
                fail_msg("%s: key row %d (unused or masked) got dk %g dv %g", tag, j, (double)gk,
                         (double)gv);
        }
    }

    for (int b = 0; b < c->n_bufs; b++) {
        dev_free(gdev[b]);
        free(an[b]), free(pre[b]), free(zero[b]);
    }
    dev_free(ddy);
    free(hdy), free(r), free(l.scratch);
}

/* ---- tests ---------------------------------------------------------------------- */

/* Self-attention over a fused [N, 3d + pad] QKV buffer: ragged segments of odd
 * lengths, partly masked keys and one fully masked segment. */
static void test_attention_self_fused(void **state)
{
    (void)state;
    ws_test_rng rng = {0xa771};
    static const seg_spec segs[] = {{1, 1, MASK_NONE}, {3, 3, MASK_PART}, {7, 7, MASK_NONE},
                                    {17, 17, MASK_PART}, {4, 4, MASK_ALL}, {5, 5, MASK_NONE}};
    /* heads of 4, 7 and 3 columns (both passes' columns-as-lanes sums) and of
     * 32 (their whole vectors of columns) */
    static const int dims[][2] = {{12, 3}, {7, 1}, {6, 2}, {64, 2}};
    for (int t = 0; t < N_OF(dims); t++) {
        attn_case c;
        attn_case_init(&c, &rng, LAYOUT_QKV, dims[t][0], dims[t][1], segs, N_OF(segs), 1, 1.0f);
        char tag[64];
        snprintf(tag, sizeof tag, "qkv d%d h%d", dims[t][0], dims[t][1]);
        check_attn_forward(&c, tag, 1e-5, 1e-5);
        check_attn_backward(&c, &rng, tag, 1e-2f, 1e-4, 5e-4);
        attn_case_free(&c);
    }
}

/* Cross-attention: Q alone (padded rows), K and V fused [Nk, 2d + pad]; segments
 * with q_len != k_len, one without keys, one fully masked, unused key rows. */
static void test_attention_cross(void **state)
{
    (void)state;
    ws_test_rng rng = {0xc055};
    static const seg_spec segs[] = {{1, 7, MASK_NONE}, {3, 1, MASK_NONE}, {17, 33, MASK_PART},
                                    {2, 0, MASK_NONE}, {4, 5, MASK_ALL},  {5, 3, MASK_PART}};
    static const int dims[][2] = {{7, 1}, {12, 4}};
    for (int t = 0; t < N_OF(dims); t++) {
        attn_case c;
        attn_case_init(&c, &rng, LAYOUT_Q_KV, dims[t][0], dims[t][1], segs, N_OF(segs), 1, 1.0f);
        char tag[64];
        snprintf(tag, sizeof tag, "q|kv d%d h%d", dims[t][0], dims[t][1]);
        check_attn_forward(&c, tag, 1e-5, 1e-5);
        check_attn_backward(&c, &rng, tag, 1e-2f, 1e-4, 5e-4);
        attn_case_free(&c);
    }
}

/* Three separate buffers, no key mask (key_valid NULL), random odd lengths. */
static void test_attention_unmasked(void **state)
{
    (void)state;
    ws_test_rng rng = {0x0dd5};
    static const int lens[] = {1, 3, 7, 17};
    seg_spec segs[5];
    for (int s = 0; s < N_OF(segs); s++)
        segs[s] = (seg_spec){lens[ws_test_int(&rng, 0, 3)], lens[ws_test_int(&rng, 0, 3)],
                             MASK_NONE};
    attn_case c;
    attn_case_init(&c, &rng, LAYOUT_Q_K_V, 6, 2, segs, N_OF(segs), 0, 1.0f);
    check_attn_forward(&c, "q|k|v d6 h2", 1e-5, 1e-5);
    check_attn_backward(&c, &rng, "q|k|v d6 h2", 1e-2f, 1e-4, 5e-4);
    attn_case_free(&c);
}

/* Scores in the hundreds: the softmax must subtract the row maximum (expf
 * overflows at 89) and stay finite and exact. Also more (segment, head) pairs
 * than threads, with long segments. */
static void test_attention_large_scores(void **state)
{
    (void)state;
    ws_test_rng rng = {0xb16};
    static const seg_spec segs[] = {{33, 33, MASK_PART}, {17, 40, MASK_NONE}, {1, 65, MASK_PART},
                                    {9, 2, MASK_ALL},    {40, 17, MASK_NONE}};
    attn_case c;
    attn_case_init(&c, &rng, LAYOUT_Q_KV, 16, 4, segs, N_OF(segs), 1, 8.0f);
    /* tolerance: a float score of ~300 carries ~2e-5 absolute error into exp() */
    check_attn_forward(&c, "q|kv large", 2e-3, 2e-4);
    attn_case_free(&c);
}

/* A query row's output and probabilities must not depend on which segments, or
 * which other queries of its segment, share the call, bit for bit: the daemon
 * steps a session among other sessions and answers its queries among others,
 * and replaying its log alone must reproduce its stored state. Each segment is
 * run alone, then each of its query rows alone against the same keys. */
static void test_attention_rows_independent(void **state)
{
    (void)state;
    ws_test_rng rng = {0x1d1e};
    static const seg_spec segs[] = {{8, 32, MASK_NONE}, {1, 5, MASK_PART}, {33, 17, MASK_NONE},
                                    {17, 33, MASK_PART}, {16, 16, MASK_NONE}};
    attn_case c;
    attn_case_init(&c, &rng, LAYOUT_Q_KV, 64, 4, segs, N_OF(segs), 1, 1.0f);
    attn_forward(&c);
    float *out = xmalloc(c.n_out * sizeof *out), *probs = xmalloc(c.n_probs * sizeof *probs);
    float *o1 = xmalloc(c.n_out * sizeof *o1), *p1 = xmalloc(c.n_probs * sizeof *p1);
    get(out, c.d_out, c.n_out);
    get(probs, c.d_probs, c.n_probs);
    ws_attn_seg *d_one = dev_alloc_bytes(sizeof *d_one);
    for (int s = 0; s < c.n_segs; s++) {
        const ws_attn_seg *sg = &c.segs[s];
        for (int i = -1; i < sg->q_len; i++) { /* -1: the whole segment */
            int q0 = i < 0 ? 0 : i, nq = i < 0 ? sg->q_len : 1;
            ws_attn_seg one = {.q_off = sg->q_off + q0, .q_len = nq, .k_off = sg->k_off,
                               .k_len = sg->k_len, .p_off = 0};
            put_bytes(d_one, &one, sizeof one);
            ws_attn_args a = c.a;
            a.segs = d_one, a.n_segs = 1, a.max_q_len = nq, a.max_k_len = sg->k_len;
            assert_int_equal(g_run->ops->attention_forward(g_run, &a), WS_OK);
            get(o1, c.d_out, c.n_out);
            get(p1, c.d_probs, c.n_probs);
            for (int r = q0; r < q0 + nq; r++) {
                size_t at = (size_t)(sg->q_off + r) * c.ldo;
                if (memcmp(o1 + at, out + at, (size_t)c.d * sizeof *out))
                    fail_msg("segment %d row %d: out differs when %s", s, r,
                             i < 0 ? "its segment is alone" : "it is alone");
                for (int h = 0; h < c.n_heads; h++)
                    if (memcmp(p1 + ((size_t)h * nq + r - q0) * sg->k_len,
                               probs + sg->p_off + ((size_t)h * sg->q_len + r) * sg->k_len,
                               (size_t)sg->k_len * sizeof *p1))
                        fail_msg("segment %d row %d head %d: probabilities differ alone", s, r,
                                 h);
            }
        }
    }
    dev_free(d_one);
    free(out), free(probs), free(o1), free(p1);
    attn_case_free(&c);
}

/* A forward-only pass (no backward reads its probabilities: the engine's
 * serving passes) gives the same outputs bit for bit and, on the CPU, leaves
 * probs as it found them. */
static void test_attention_forward_only(void **state)
{
    (void)state;
    ws_test_rng rng = {0xf0a1};
    static const seg_spec segs[] = {{8, 32, MASK_NONE}, {1, 5, MASK_PART}, {17, 33, MASK_PART},
                                    {4, 4, MASK_ALL}, {2, 0, MASK_NONE}};
    attn_case c;
    attn_case_init(&c, &rng, LAYOUT_Q_KV, 64, 4, segs, N_OF(segs), 1, 1.0f);
    float *want = xmalloc(c.n_out * sizeof *want), *got = xmalloc(c.n_out * sizeof *got);
    float *probs = xmalloc(c.n_probs * sizeof *probs);
    attn_poison(&c);
    attn_forward(&c);
    get(want, c.d_out, c.n_out);
    for (size_t i = 0; i < c.n_probs; i++) probs[i] = SENTINEL;
    put(c.d_probs, probs, c.n_probs);
    attn_poison_out(&c);
    c.a.forward_only = 1;
    attn_forward(&c);
    get(got, c.d_out, c.n_out);
    get(probs, c.d_probs, c.n_probs);
    for (size_t i = 0; i < c.n_out; i++)
        if (memcmp(&got[i], &want[i], sizeof *got))
            fail_msg("forward-only out[%zu] = %g, with probabilities %g", i, (double)got[i],
                     (double)want[i]);
    uint8_t *none = calloc(c.n_probs, 1);
    assert_non_null(none);
    check_untouched("forward-only probs", probs, none, c.n_probs);
    free(none), free(want), free(got), free(probs);
    attn_case_free(&c);
}

/* Gradients are the same bits run to run and at any thread count: a training
 * step must not depend on how many threads computed it. More (segment, head)
 * pairs than threads, ragged and partly masked. */
static void test_attention_backward_threads(void **state)
{
    (void)state;
    ws_test_rng rng = {0x7e4d};
    static const seg_spec segs[] = {{33, 33, MASK_PART}, {17, 40, MASK_NONE}, {1, 65, MASK_PART},
                                    {40, 17, MASK_NONE}, {16, 16, MASK_NONE}};
    attn_case c;
    attn_case_init(&c, &rng, LAYOUT_Q_KV, 64, 4, segs, N_OF(segs), 1, 1.0f);
    attn_forward(&c);
    float *hdy = xmalloc(c.n_out * sizeof *hdy);
    for (size_t i = 0; i < c.n_out; i++) hdy[i] = c.out_mask[i] ? ws_test_normal(&rng) : 0.0f;
    float *ddy = dev_from(hdy, c.n_out);
    ws_backend *runs[3] = {g_be, g_fd_be, g_be}; /* 2 threads, 1, 2 again */
    float *got[3][3] = {{0}};
    for (int run = 0; run < 3; run++) {
        float *gdev[3] = {0};
        for (int b = 0; b < c.n_bufs; b++) {
            gdev[b] = dev_alloc(c.buf[b].n);
            dev_set(gdev[b], 0.0f, c.buf[b].n);
        }
        ws_attn_grads g = {.dq = gdev[c.qb] + c.qc, .dk = gdev[c.kb] + c.kc,
                           .dv = gdev[c.vb] + c.vc, .dout = ddy};
        assert_int_equal(runs[run]->ops->attention_backward(runs[run], &c.a, &g), WS_OK);
        for (int b = 0; b < c.n_bufs; b++) {
            got[run][b] = xmalloc(c.buf[b].n * sizeof(float));
            get(got[run][b], gdev[b], c.buf[b].n);
            dev_free(gdev[b]);
        }
    }
    for (int run = 1; run < 3; run++)
        for (int b = 0; b < c.n_bufs; b++)
            if (memcmp(got[run][b], got[0][b], c.buf[b].n * sizeof(float)))
                fail_msg("attention gradient buf%d differs %s", b,
                         run == 1 ? "on one thread" : "run again");
    for (int run = 0; run < 3; run++)
        for (int b = 0; b < c.n_bufs; b++) free(got[run][b]);
    dev_free(ddy);
    free(hdy);
    attn_case_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attention_self_fused),
        cmocka_unit_test(test_attention_cross),
        cmocka_unit_test(test_attention_unmasked),
        cmocka_unit_test(test_attention_large_scores),
        cmocka_unit_test(test_attention_rows_independent),
        cmocka_unit_test(test_attention_forward_only),
        cmocka_unit_test(test_attention_backward_threads),
    };
    return cmocka_run_group_tests(tests, ops_group_setup, ops_group_teardown);
}
