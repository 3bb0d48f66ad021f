/* test_ops_rn.c — op-level proof tests for the relation-network ops
 * (kernels/mixer_ops_rn.h) on odd shapes (K = 1, 3, 5 objects; w = 3, 7; ragged
 * query counts, a segment without queries, object rows no segment reads):
 *   pair_forward against a double reference of relu(A o_i + B o_j + C q);
 *   pair_backward against central finite differences of L = Σ pairs ⊙ R over
 *   every object and query element, its += contract, and exact zeros (unchanged
 *   prefill) for unread object rows;
 *   pair_sum and relu forward/backward the same way (relu also in place; the
 *   sum's backward also with the ReLU mask it can fold in).
 * Inputs sit on a grid that keeps every ReLU input at least 0.04 from the kink,
 * so the 1e-2 finite-difference stencil never crosses it and the checks can be
 * tight. All buffers cross through ws_backend_alloc/upload/download. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/mixer_ops_rn.h"
#include "ops_check.h"
#include "test_util.h"

#define FD_H 1e-2f

/* A value 0.25·k + off, k in [-6, 6]: sums of two such (off 0.1) and one with
 * off 0.01 are 0.25·n + 0.21, never closer than 0.04 to zero. */
static float grid(ws_test_rng *r, float off) { return 0.25f * ws_test_int(r, -6, 6) + off; }

/* ---- pair_forward / pair_backward ----------------------------------------------- */

typedef struct {
    int K, w, n_segs, nq, n_obj_rows;
    ws_attn_seg *segs, *d_segs;
    float *obj, *qry;     /* host */
    float *d_obj, *d_qry; /* device */
    size_t n_pairs;       /* floats: nq·K²·w, plus a sentinel tail on the device */
    float *d_pairs;
    uint8_t *obj_used;
    ws_rn_args a;
} pair_case;

#define TAIL 5 /* sentinel floats after the pair rows */

/* q_lens: queries per segment (0 allowed); object rows are laid out with one
 * unread row before each segment's block, blocks in reverse segment order. */
static void pair_case_init(pair_case *c, ws_test_rng *r, int K, int w, const int *q_lens,
                           int n_segs)
{
    memset(c, 0, sizeof *c);
    c->K = K, c->w = w, c->n_segs = n_segs;
    c->segs = xmalloc((size_t)n_segs * sizeof *c->segs);
    int rows = 0, max_q = 0;
    for (int s = n_segs - 1; s >= 0; s--) {
        rows += 1;
        c->segs[s].k_off = rows;
        c->segs[s].k_len = K;
        rows += K;
    }
    for (int s = 0; s < n_segs; s++) {
        c->segs[s].q_off = c->nq;
        c->segs[s].q_len = q_lens[s];
        c->segs[s].p_off = 0;
        c->nq += q_lens[s];
        if (q_lens[s] > max_q) max_q = q_lens[s];
    }
    c->n_obj_rows = rows;
    c->obj_used = calloc((size_t)rows, 1);
    assert_non_null(c->obj_used);
    for (int s = 0; s < n_segs; s++)
        if (c->segs[s].q_len > 0) memset(c->obj_used + c->segs[s].k_off, 1, (size_t)K);
    c->obj = xmalloc((size_t)rows * 2 * w * sizeof *c->obj);
    c->qry = xmalloc((size_t)c->nq * w * sizeof *c->qry);
    for (size_t i = 0; i < (size_t)rows * 2 * w; i++) c->obj[i] = grid(r, 0.1f);
    for (size_t i = 0; i < (size_t)c->nq * w; i++) c->qry[i] = grid(r, 0.01f);
    c->d_obj = dev_from(c->obj, (size_t)rows * 2 * w);
    c->d_qry = dev_from(c->qry, (size_t)c->nq * w);
    c->n_pairs = (size_t)c->nq * K * K * w;
    c->d_pairs = dev_alloc(c->n_pairs + TAIL);
    c->d_segs = dev_alloc_bytes((size_t)n_segs * sizeof *c->segs);
    put_bytes(c->d_segs, c->segs, (size_t)n_segs * sizeof *c->segs);
    c->a = (ws_rn_args){.segs = c->d_segs, .n_segs = n_segs, .n_obj = K, .width = w,
                        .max_q_len = max_q};
}

static void pair_case_free(pair_case *c)
{
    dev_free(c->d_obj), dev_free(c->d_qry), dev_free(c->d_pairs), dev_free(c->d_segs);
    free(c->obj), free(c->qry), free(c->segs), free(c->obj_used);
}

static void pair_forward(void *ctx)
{
    pair_case *c = ctx;
    assert_int_equal(g_run->ops->rn->pair_forward(g_run, c->d_pairs, c->d_obj, c->d_qry, &c->a),
                     WS_OK);
}

/* relu(A o_i + B o_j + C q) in double from the host copies. */
static void pair_reference(const pair_case *c, double *want)
{
    int K = c->K, w = c->w;
    for (int s = 0; s < c->n_segs; s++) {
        const ws_attn_seg *sg = &c->segs[s];
        for (int r = sg->q_off; r < sg->q_off + sg->q_len; r++)
            for (int i = 0; i < K; i++)
                for (int j = 0; j < K; j++)
                    for (int t = 0; t < w; t++) {
                        double z = (double)c->obj[(size_t)(sg->k_off + i) * 2 * w + t] +
                                   c->obj[(size_t)(sg->k_off + j) * 2 * w + w + t] +
                                   c->qry[(size_t)r * w + t];
                        want[(((size_t)r * K + i) * K + j) * w + t] = z > 0.0 ? z : 0.0;
                    }
    }
}

static void check_pair_forward(pair_case *c, const char *tag)
{
    size_t n = c->n_pairs + TAIL;
    float *h = xmalloc(n * sizeof *h);
    uint8_t *mask = xmalloc(n);
    for (size_t i = 0; i < n; i++) h[i] = i < c->n_pairs ? NAN : SENTINEL, mask[i] = i < c->n_pairs;
    put(c->d_pairs, h, n);
    pair_forward(c);
    get(h, c->d_pairs, n);
    double *want = xmalloc(n * sizeof *want);
    pair_reference(c, want);
    char what[80];
    snprintf(what, sizeof what, "rn pair_forward %s", tag);
    check_close(what, h, want, n, mask, 1e-6, 1e-6);
    check_untouched(what, h, mask, n);
    free(h), free(mask), free(want);
}

/* Runs pair_backward with dpairs = R into gradients prefilled with pre_obj/pre_qry. */
static void run_pair_backward(pair_case *c, const float *dpairs, const float *pre_obj,
                              const float *pre_qry, float *g_obj, float *g_qry)
{
    size_t no = (size_t)c->n_obj_rows * 2 * c->w, nqw = (size_t)c->nq * c->w;
    float *d_dp = dev_from(dpairs, c->n_pairs), *d_go = dev_from(pre_obj, no);
    float *d_gq = dev_from(pre_qry, nqw);
    pair_forward(c);
    assert_int_equal(g_be->ops->rn->pair_backward(g_be, d_go, d_gq, d_dp, c->d_pairs, &c->a),
                     WS_OK);
    get(g_obj, d_go, no);
    get(g_qry, d_gq, nqw);
    dev_free(d_dp), dev_free(d_go), dev_free(d_gq);
}

static void check_pair_backward(pair_case *c, ws_test_rng *r, const char *tag)
{
    size_t no = (size_t)c->n_obj_rows * 2 * c->w, nqw = (size_t)c->nq * c->w;
    double *R = random_weights(r, NULL, c->n_pairs);
    float *dp = xmalloc(c->n_pairs * sizeof *dp);
    for (size_t i = 0; i < c->n_pairs; i++) dp[i] = (float)R[i];
    float *zo = calloc(no, sizeof *zo), *zq = calloc(nqw ? nqw : 1, sizeof *zq);
    float *go = xmalloc(no * sizeof *go), *gq = xmalloc(nqw * sizeof *gq);
    float *po = xmalloc(no * sizeof *po), *pq = xmalloc(nqw * sizeof *pq);
    float *ao = xmalloc(no * sizeof *ao), *aq = xmalloc(nqw * sizeof *aq);
    assert_true(zo && zq);
    run_pair_backward(c, dp, zo, zq, go, gq);
    ws_test_fill_normal(r, po, no, 1.0f);
    ws_test_fill_normal(r, pq, nqw, 1.0f);
    run_pair_backward(c, dp, po, pq, ao, aq);
    char what[96];
    snprintf(what, sizeof what, "rn pair_backward += dobj %s", tag);
    check_accumulated(what, ao, po, go, no, NULL);
    snprintf(what, sizeof what, "rn pair_backward += dqry %s", tag);
    check_accumulated(what, aq, pq, gq, nqw, NULL);
    /* Object rows of no segment with queries: exactly no gradient. */
    for (int row = 0; row < c->n_obj_rows; row++)
        for (int t = 0; !c->obj_used[row] && t < 2 * c->w; t++)
            if (go[(size_t)row * 2 * c->w + t] != 0.0f)
                fail_msg("%s: unread object row %d got gradient %g", tag, row,
                         (double)go[(size_t)row * 2 * c->w + t]);

    loss_fn l = {pair_forward, c, c->d_pairs, c->n_pairs, R, xmalloc(c->n_pairs * sizeof(float))};
    double *fo = xmalloc(no * sizeof *fo), *fq = xmalloc(nqw * sizeof *fq);
    fd_grad(&l, c->d_obj, no, NULL, FD_H, fo);
    fd_grad(&l, c->d_qry, nqw, NULL, FD_H, fq);
    snprintf(what, sizeof what, "rn pair_backward dobj vs FD %s", tag);
    check_close(what, go, fo, no, NULL, 1e-4, 1e-4);
    snprintf(what, sizeof what, "rn pair_backward dqry vs FD %s", tag);
    check_close(what, gq, fq, nqw, NULL, 1e-4, 1e-4);
    free(R), free(dp), free(zo), free(zq), free(go), free(gq), free(po), free(pq), free(ao);
    free(aq), free(l.scratch), free(fo), free(fq);
}

static void test_rn_pairs(void **state)
{
    (void)state;
    ws_test_rng rng = {0x2e1a};
    static const int shapes[][2] = {{1, 3}, {3, 7}, {5, 3}, {3, 3}};
    static const int q_lens[] = {1, 0, 4, 2, 3};
    for (int t = 0; t < N_OF(shapes); t++) {
        pair_case c;
        int n_segs = 2 + t % 4; /* 2..5 segments of the ragged counts above */
        pair_case_init(&c, &rng, shapes[t][0], shapes[t][1], q_lens, n_segs);
        char tag[48];
        snprintf(tag, sizeof tag, "K%d w%d segs%d", shapes[t][0], shapes[t][1], n_segs);
        check_pair_forward(&c, tag);
        check_pair_backward(&c, &rng, tag);
        pair_case_free(&c);
    }
}

/* ---- pair_sum ------------------------------------------------------------------- */

typedef struct {
    int n, per, w;
    float scale;
    float *d_in, *d_out;
} sum_case;

static void sum_forward(void *ctx)
{
    sum_case *c = ctx;
    assert_int_equal(g_run->ops->rn->pair_sum_forward(g_run, c->d_out, c->d_in, c->n, c->per,
                                                      c->w, c->scale),
                     WS_OK);
}

/* pair_sum_backward: += scale·dout broadcast (masked by a ReLU output when one
 * is given), against a direct reference and the += contract; unmasked also
 * against FD of Σ out ⊙ R through the forward. */
static void check_pair_sum_backward(sum_case *c, ws_test_rng *rng, int masked)
{
    size_t ni = (size_t)c->n * c->per * c->w, no = (size_t)c->n * c->w;
    double *R = random_weights(rng, NULL, no);
    float *dout = xmalloc(no * sizeof *dout), *pre = xmalloc(ni * sizeof *pre);
    float *got = xmalloc(ni * sizeof *got), *fresh = calloc(ni, sizeof *fresh);
    float *relu_out = xmalloc(ni * sizeof *relu_out);
    double *want = xmalloc(ni * sizeof *want);
    assert_non_null(fresh);
    for (size_t i = 0; i < no; i++) dout[i] = (float)R[i];
    for (size_t i = 0; i < ni; i++) relu_out[i] = ws_test_int(rng, 0, 2) ? 0.5f : 0.0f;
    float *d_dout = dev_from(dout, no), *d_din = dev_from(fresh, ni);
    float *d_mask = masked ? dev_from(relu_out, ni) : NULL;
    const struct ws_rn_ops *rn = g_be->ops->rn;
    assert_int_equal(rn->pair_sum_backward(g_be, d_din, d_dout, d_mask, c->n, c->per, c->w,
                                           c->scale),
                     WS_OK);
    get(fresh, d_din, ni);
    for (size_t i = 0; i < ni; i++) {
        size_t r = i / ((size_t)c->per * c->w), col = i % c->w;
        want[i] = masked && relu_out[i] == 0.0f ? 0.0 : (double)c->scale * dout[r * c->w + col];
    }
    check_close(masked ? "rn pair_sum_backward masked" : "rn pair_sum_backward", fresh, want, ni,
                NULL, 1e-7, 1e-6);
    ws_test_fill_normal(rng, pre, ni, 1.0f);
    put(d_din, pre, ni);
    assert_int_equal(rn->pair_sum_backward(g_be, d_din, d_dout, d_mask, c->n, c->per, c->w,
                                           c->scale),
                     WS_OK);
    get(got, d_din, ni);
    check_accumulated("rn pair_sum_backward +=", got, pre, fresh, ni, NULL);
    if (!masked) {
        loss_fn l = {sum_forward, c, c->d_out, no, R, xmalloc(no * sizeof(float))};
        double *fd = xmalloc(ni * sizeof *fd);
        fd_grad(&l, c->d_in, ni, NULL, FD_H, fd);
        check_close("rn pair_sum_backward vs FD", fresh, fd, ni, NULL, 1e-4, 1e-4);
        free(l.scratch), free(fd);
    }
    dev_free(d_dout), dev_free(d_din);
    if (d_mask) dev_free(d_mask);
    free(R), free(dout), free(pre), free(got), free(fresh), free(relu_out), free(want);
}

static void test_rn_pair_sum(void **state)
{
    (void)state;
    ws_test_rng rng = {0x5a3};
    static const int shapes[][3] = {{1, 1, 3}, {3, 9, 7}, {4, 25, 3}, {2, 25, 7}}; /* n, K², w */
    for (int t = 0; t < N_OF(shapes); t++) {
        sum_case c = {shapes[t][0], shapes[t][1], shapes[t][2], 1.0f / (float)shapes[t][1], 0, 0};
        size_t ni = (size_t)c.n * c.per * c.w, no = (size_t)c.n * c.w;
        float *in = xmalloc(ni * sizeof *in), *out = xmalloc((no + TAIL) * sizeof *out);
        ws_test_fill_normal(&rng, in, ni, 1.0f);
        c.d_in = dev_from(in, ni);
        c.d_out = dev_alloc(no + TAIL);
        uint8_t *mask = xmalloc(no + TAIL);
        for (size_t i = 0; i < no + TAIL; i++) out[i] = i < no ? NAN : SENTINEL, mask[i] = i < no;
        put(c.d_out, out, no + TAIL);
        sum_forward(&c);
        get(out, c.d_out, no + TAIL);
        double *want = xmalloc((no + TAIL) * sizeof *want);
        for (size_t i = 0; i < no; i++) {
            size_t r = i / c.w, col = i % c.w;
            double s = 0.0;
            for (int p = 0; p < c.per; p++) s += in[(r * c.per + p) * c.w + col];
            want[i] = s * c.scale;
        }
        char what[64];
        snprintf(what, sizeof what, "rn pair_sum n%d per%d w%d", c.n, c.per, c.w);
        check_close(what, out, want, no + TAIL, mask, 1e-6, 1e-5);
        check_untouched(what, out, mask, no + TAIL);
        check_pair_sum_backward(&c, &rng, 0);
        check_pair_sum_backward(&c, &rng, 1);
        dev_free(c.d_in), dev_free(c.d_out);
        free(in), free(out), free(mask), free(want);
    }
}

/* ---- relu ----------------------------------------------------------------------- */

typedef struct {
    size_t n;
    float *d_in, *d_out;
} relu_case;

static void relu_forward(void *ctx)
{
    relu_case *c = ctx;
    assert_int_equal(g_run->ops->rn->relu_forward(g_run, c->d_out, c->d_in, c->n), WS_OK);
}

static void test_rn_relu(void **state)
{
    (void)state;
    ws_test_rng rng = {0x7e1};
    static const size_t sizes[] = {1, 21, 5000}; /* 5000: past the threading threshold */
    for (int t = 0; t < N_OF(sizes); t++) {
        size_t n = sizes[t];
        float *in = xmalloc(n * sizeof *in), *out = xmalloc(n * sizeof *out);
        for (size_t i = 0; i < n; i++) in[i] = grid(&rng, 0.1f) + 0.01f; /* |x| >= 0.11 */
        relu_case c = {n, dev_from(in, n), dev_alloc(n)};
        relu_forward(&c);
        get(out, c.d_out, n);
        for (size_t i = 0; i < n; i++)
            if (out[i] != (in[i] > 0.0f ? in[i] : 0.0f))
                fail_msg("relu[%zu]: %g -> %g", i, (double)in[i], (double)out[i]);
        /* in place gives the same */
        float *d_io = dev_from(in, n), *io = xmalloc(n * sizeof *io);
        assert_int_equal(g_be->ops->rn->relu_forward(g_be, d_io, d_io, n), WS_OK);
        get(io, d_io, n);
        assert_memory_equal(io, out, n * sizeof *io);

        double *R = random_weights(&rng, NULL, n);
        float *dout = xmalloc(n * sizeof *dout), *pre = xmalloc(n * sizeof *pre);
        float *got = xmalloc(n * sizeof *got), *fresh = calloc(n, sizeof *fresh);
        assert_non_null(fresh);
        for (size_t i = 0; i < n; i++) dout[i] = (float)R[i];
        float *d_dout = dev_from(dout, n), *d_din = dev_from(fresh, n);
        assert_int_equal(g_be->ops->rn->relu_backward(g_be, d_din, c.d_out, d_dout, n), WS_OK);
        get(fresh, d_din, n);
        ws_test_fill_normal(&rng, pre, n, 1.0f);
        put(d_din, pre, n);
        assert_int_equal(g_be->ops->rn->relu_backward(g_be, d_din, c.d_out, d_dout, n), WS_OK);
        get(got, d_din, n);
        check_accumulated("rn relu_backward +=", got, pre, fresh, n, NULL);
        loss_fn l = {relu_forward, &c, c.d_out, n, R, xmalloc(n * sizeof(float))};
        double *fd = xmalloc(n * sizeof *fd);
        fd_grad(&l, c.d_in, n, NULL, FD_H, fd);
        check_close("rn relu_backward vs FD", fresh, fd, n, NULL, 1e-4, 1e-4);
        dev_free(c.d_in), dev_free(c.d_out), dev_free(d_io), dev_free(d_dout), dev_free(d_din);
        free(in), free(out), free(io), free(R), free(dout), free(pre), free(got), free(fresh);
        free(l.scratch), free(fd);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rn_pairs),
        cmocka_unit_test(test_rn_pair_sum),
        cmocka_unit_test(test_rn_relu),
    };
    return cmocka_run_group_tests(tests, ops_group_setup, ops_group_teardown);
}
