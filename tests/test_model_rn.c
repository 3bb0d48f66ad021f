/* test_model_rn.c — the relation-network readout (ext_mixer = rn,
 * model/readout_rn.c) in the whole model:
 *   every parameter tensor's gradient against finite differences of the loss,
 *   with n_ext_layers 0, 1 and 2 and rn_layers 1..3;
 *   permutation invariance: permuting a trajectory's state rows leaves every
 *   answer unchanged (to float rounding), while changing one row does change
 *   that trajectory's answers (and no other's);
 *   the split first layer equals the naive MLP on the concatenation
 *   [w_i; w_j; q], computed here in double from the model's tensors;
 *   checkpoints carry the readout; configs and backends that cannot hold it are
 *   refused. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/symcode.h"
#include "model/checkpoint.h"
#include "model_check.h"

static ws_model_config rn_config(int ext_layers, int rn_layers, int width)
{
    ws_model_config c = model_check_tiny_config(1);
    c.ext_mixer = WS_MIXER_RN;
    c.n_ext_layers = ext_layers;
    c.rn_layers = rn_layers;
    c.rn_width = width;
    return c;
}

/* The fixture draws every tensor N(0, 0.4²); through the readout's ReLU stack
 * that shrinks activations and gradients layer by layer, until the Updater's
 * gradients sink to the float noise of the finite differences (the loss is
 * quantised at ~6e-8, ~3e-6 in a difference quotient). He-scaled readout
 * weights, N(0, 2/fan_in) with fan_in 3d for g's first layer (the
 * concatenation it splits), keep them O(1), and f's output weights 6x that
 * make the logits, and every gradient upstream, large enough to measure. */
static void he_scale_readout(model_fixture *f)
{
    ws_test_rng r = {0x4e5};
    int d = ws_model_config_of(f->m)->d;
    for (int i = 0; i < ws_model_n_tensors(f->m); i++) {
        const ws_tensor_info *t = ws_model_tensor(f->m, i);
        size_t n = strlen(t->name);
        if (strncmp(t->name, "ext.rn.", 7) != 0 || strcmp(t->name + n - 2, ".w") != 0) continue;
        int first = strstr(t->name, ".g.0.") != NULL;
        float *h = malloc(t->numel * sizeof *h);
        assert_non_null(h);
        float gain = strstr(t->name, ".f.1.") ? 6.0f : 1.0f;
        ws_test_fill_normal(&r, h, t->numel, gain * sqrtf(2.0f / (first ? 3 * d : t->shape[1])));
        assert_int_equal(ws_model_set_tensor(f->m, t->name, h, t->numel, NULL), WS_OK);
        assert_int_equal(ws_model_set_tensor(f->fd_m, t->name, h, t->numel, NULL), WS_OK);
        free(h);
    }
}

static void check_gradients(int ext_layers, int rn_layers, int width)
{
    model_fixture f;
    ws_model_config c = rn_config(ext_layers, rn_layers, width);
    model_fixture_setup(&f, &c);
    he_scale_readout(&f);
    /* The readout's tensors replace the head. */
    assert_null(ws_model_tensor_by_name(f.m, "ext.head.w"));
    assert_non_null(ws_model_tensor_by_name(f.m, "ext.rn.g.0.obj.w"));
    assert_non_null(ws_model_tensor_by_name(f.m, "ext.rn.f.1.b"));
    char label[64];
    snprintf(label, sizeof label, "rn ext_layers=%d rn_layers=%d w=%d", ext_layers, rn_layers,
             width);
    /* Hundreds of ReLU units sit between the Updater's parameters and the loss,
     * their kinks ~1e-3 apart along some of them: a smaller step than the
     * smooth model's crosses fewer of them. */
    model_check_gradients(&f, 5e-3f, 2e-2, label);
    model_fixture_teardown(&f);
}

static void test_rn_gradients(void **s)
{
    (void)s;
    check_gradients(2, 2, 5);
    check_gradients(0, 3, 4);
    check_gradients(1, 1, 3);
}

/* Probabilities of every query of f's batch on the states f->w_prev. */
static void answers(model_fixture *f, float *probs)
{
    ws_error err;
    assert_int_equal(ws_exec_query(f->x, f->b, f->w_prev, probs, NULL, &err), WS_OK);
}

static void check_permutation(int ext_layers)
{
    model_fixture f;
    ws_model_config c = rn_config(ext_layers, 2, 6);
    model_fixture_setup(&f, &c);
    int T = c.n_state, d = c.d, nq = ws_batch_n_query(f.b);
    size_t sf = (size_t)T * d, n = MODEL_CHECK_N_TRAJ * sf;
    float *w = malloc(n * sizeof *w), *pw = malloc(n * sizeof *pw);
    float *p0 = malloc(nq * sizeof *p0), *p1 = malloc(nq * sizeof *p1);
    assert_true(w && pw && p0 && p1);
    assert_int_equal(ws_backend_download(f.be, w, f.w_prev, n * sizeof *w), WS_OK);
    answers(&f, p0);
    /* A different non-identity permutation of the T = 3 rows per trajectory. */
    static const int perms[MODEL_CHECK_N_TRAJ][3] = {{1, 2, 0}, {2, 1, 0}, {0, 2, 1}, {2, 0, 1}};
    for (int t = 0; t < MODEL_CHECK_N_TRAJ; t++)
        for (int i = 0; i < T; i++)
            memcpy(pw + t * sf + (size_t)i * d, w + t * sf + (size_t)perms[t][i] * d,
                   (size_t)d * sizeof *w);
    assert_int_equal(ws_backend_upload(f.be, f.w_prev, pw, n * sizeof *pw), WS_OK);
    answers(&f, p1);
    double worst = 0.0;
    for (int k = 0; k < nq; k++) worst = fmax(worst, fabs((double)p1[k] - p0[k]));
    printf("rn ext_layers=%d: permuting state rows moves answers by at most %.2e\n", ext_layers,
           worst);
    assert_true(worst <= 2e-6);

    /* The readout does read the state: moving one row of trajectory 0 moves its
     * answers, and only its answers. */
    for (int k = 0; k < d; k++) pw[sf * 0 + d + k] += 0.7f * (k % 2 ? 1.0f : -1.0f);
    assert_int_equal(ws_backend_upload(f.be, f.w_prev, pw, n * sizeof *pw), WS_OK);
    float *p2 = malloc(nq * sizeof *p2);
    assert_non_null(p2);
    answers(&f, p2);
    int n0 = ws_batch_query_count(f.b, 0);
    double moved = 0.0;
    for (int k = 0; k < n0; k++) moved = fmax(moved, fabs((double)p2[k] - p1[k]));
    assert_true(moved > 1e-3);
    assert_memory_equal(p2 + n0, p1 + n0, (size_t)(nq - n0) * sizeof *p1);
    free(w), free(pw), free(p0), free(p1), free(p2);
    model_fixture_teardown(&f);
}

static void test_rn_permutation_invariance(void **s)
{
    (void)s;
    check_permutation(0);
    check_permutation(2);
}

/* ---- the naive readout, in double ------------------------------------------------ */

static float *tensor(ws_model *m, const char *name)
{
    const ws_tensor_info *t = ws_model_tensor_by_name(m, name);
    assert_non_null(t);
    float *h = malloc(t->numel * sizeof *h);
    assert_non_null(h);
    ws_error err;
    assert_int_equal(ws_model_get_tensor(m, name, h, t->numel, 0, &err), WS_OK);
    return h;
}

static void layer_norm(double *x, int d, const float *g, const float *b)
{
    double mean = 0.0, var = 0.0;
    for (int k = 0; k < d; k++) mean += x[k];
    mean /= d;
    for (int k = 0; k < d; k++) var += (x[k] - mean) * (x[k] - mean);
    double rstd = 1.0 / sqrt(var / d + 1e-5);
    for (int k = 0; k < d; k++) x[k] = (x[k] - mean) * rstd * g[k] + b[k];
}

/* y[o] = relu?(W[o,:]·x + b[o]), W [n_out, n_in] float, x double. */
static void dense(double *y, const float *W, const float *b, const double *x, int n_out, int n_in,
                  int relu)
{
    for (int o = 0; o < n_out; o++) {
        double z = b[o];
        for (int k = 0; k < n_in; k++) z += (double)W[(size_t)o * n_in + k] * x[k];
        y[o] = relu && z < 0.0 ? 0.0 : z;
    }
}

/* σ(f((1/T²) Σ_{i,j} g([w_i; w_j; q]))) with g's first layer as ONE matrix
 * W₁ = [A | B | C] of [w, 3d] on the concatenation, for query q (double, [d])
 * on the T state rows st. */
static double naive_prob(ws_model *m, const ws_model_config *c, const float *st, const double *q)
{
    int d = c->d, T = c->n_state, w = c->rn_width;
    float *obj = tensor(m, "ext.rn.g.0.obj.w"), *qw = tensor(m, "ext.rn.g.0.query.w");
    float *b1 = tensor(m, "ext.rn.g.0.query.b");
    float *W1 = malloc((size_t)w * 3 * d * sizeof *W1);
    double *x = malloc(3 * (size_t)d * sizeof *x), *h = malloc(2 * (size_t)w * sizeof *h);
    double *sum = calloc((size_t)w, sizeof *sum), *f0 = malloc((size_t)w * sizeof *f0);
    assert_true(W1 && x && h && sum && f0);
    for (int o = 0; o < w; o++) {
        memcpy(W1 + (size_t)o * 3 * d, obj + (size_t)o * d, (size_t)d * sizeof *W1);
        memcpy(W1 + (size_t)o * 3 * d + d, obj + (size_t)(w + o) * d, (size_t)d * sizeof *W1);
        memcpy(W1 + (size_t)o * 3 * d + 2 * d, qw + (size_t)o * d, (size_t)d * sizeof *W1);
    }
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++) {
            for (int k = 0; k < d; k++) {
                x[k] = st[(size_t)i * d + k];
                x[d + k] = st[(size_t)j * d + k];
                x[2 * d + k] = q[k];
            }
            dense(h, W1, b1, x, w, 3 * d, 1);
            for (int l = 1; l < c->rn_layers; l++) {
                char nw[32], nb[32];
                snprintf(nw, sizeof nw, "ext.rn.g.%d.w", l);
                snprintf(nb, sizeof nb, "ext.rn.g.%d.b", l);
                float *Wl = tensor(m, nw), *bl = tensor(m, nb);
                dense(h + w, Wl, bl, h, w, w, 1);
                memcpy(h, h + w, (size_t)w * sizeof *h);
                free(Wl), free(bl);
            }
            for (int k = 0; k < w; k++) sum[k] += h[k] / (T * T);
        }
    float *F0 = tensor(m, "ext.rn.f.0.w"), *fb0 = tensor(m, "ext.rn.f.0.b");
    float *F1 = tensor(m, "ext.rn.f.1.w"), *fb1 = tensor(m, "ext.rn.f.1.b");
    double logit;
    dense(f0, F0, fb0, sum, w, w, 1);
    dense(&logit, F1, fb1, f0, 1, w, 0);
    free(obj), free(qw), free(b1), free(W1), free(x), free(h), free(sum), free(f0);
    free(F0), free(fb0), free(F1), free(fb1);
    return 1.0 / (1.0 + exp(-logit));
}

/* With no Extractor layers, q = LN_o(LN_f(Σ_k E_sym[id_k] + code_k(id_k) + E_slot[k]))
 * (the code term under the hashed symbol code: the vocabulary's hash of the id,
 * rolled by slot k, kernels/symcode.h). */
static void query_row(ws_model *m, const ws_model_config *c, const int32_t *ids, int n, double *q)
{
    int d = c->d;
    float *sym = tensor(m, "embed.sym"), *slot = tensor(m, "embed.slot");
    float *fg = tensor(m, "embed.ln.g"), *fb = tensor(m, "embed.ln.b");
    float *og = tensor(m, "ext.ln.g"), *ob = tensor(m, "ext.ln.b");
    for (int k = 0; k < d; k++) q[k] = 0.0;
    for (int s = 0; s < n; s++)
        for (int k = 0; k < d; k++)
            q[k] += (double)sym[(size_t)ids[s] * d + k] + slot[(size_t)s * d + k] +
                    (c->symbol_code == WS_SYMBOLS_HASHED
                         ? ws_sym_code(ws_vocab_hash(ws_model_vocab(m), ids[s]), (k + s) % d)
                         : 0.0);
    layer_norm(q, d, fg, fb);
    layer_norm(q, d, og, ob);
    free(sym), free(slot), free(fg), free(fb), free(og), free(ob);
}

static void test_rn_split_equals_naive(void **s)
{
    (void)s;
    model_fixture f;
    ws_model_config c = rn_config(0, 3, 5);
    model_fixture_setup(&f, &c);
    /* Ragged symbolic queries: 2, 0 and 3 of them over three trajectories. */
    static const int32_t ids[5][3] = {{1, 4, 2}, {7, 0, 0}, {3, 3, 5}, {6, 1, 0}, {0, 2, 7}};
    static const int lens[5] = {3, 1, 3, 2, 3}, traj_of[5] = {0, 0, 2, 2, 2};
    ws_batch_clear(f.b);
    for (int t = 0, k = 0; t < 3; t++) {
        assert_int_equal(ws_batch_begin_traj(f.b, 0), WS_OK);
        for (; k < 5 && traj_of[k] == t; k++)
            assert_int_equal(ws_batch_add_query(f.b, ids[k], lens[k], k % 2), WS_OK);
    }
    float probs[5];
    answers(&f, probs);
    size_t sf = (size_t)c.n_state * c.d;
    float *st = malloc(3 * sf * sizeof *st);
    double q[8], worst = 0.0;
    int mid = 0;
    assert_non_null(st);
    assert_int_equal(ws_backend_download(f.be, st, f.w_prev, 3 * sf * sizeof *st), WS_OK);
    for (int k = 0; k < 5; k++) {
        query_row(f.m, &c, ids[k], lens[k], q);
        double want = naive_prob(f.m, &c, st + traj_of[k] * sf, q);
        worst = fmax(worst, fabs(want - probs[k]));
        mid += want > 0.05 && want < 0.95;
    }
    printf("rn split first layer vs naive concatenation: max |Δp| %.2e over 5 queries\n", worst);
    assert_true(worst <= 2e-6);
    assert_true(mid >= 2); /* not all saturated: the comparison has teeth */
    free(st);
    model_fixture_teardown(&f);
}

/* ---- format, config and backend ---------------------------------------------------- */

static void test_rn_checkpoint_round_trip(void **s)
{
    (void)s;
    model_fixture f;
    ws_model_config c = rn_config(1, 2, 4);
    model_fixture_setup(&f, &c);
    char path[] = "/tmp/ws_test_rn_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    ws_error err;
    assert_int_equal(ws_checkpoint_save(f.m, path, 0, &err), WS_OK);
    ws_model *back;
    ws_exec *back_x;
    assert_int_equal(ws_checkpoint_load(&back, path, f.be, &err), WS_OK);
    assert_int_equal(ws_exec_new(&back_x, back, &err), WS_OK);
    unlink(path);
    assert_int_equal(ws_model_config_of(back)->ext_mixer, WS_MIXER_RN);
    assert_int_equal(ws_model_config_of(back)->rn_width, 4);
    int nq = ws_batch_n_query(f.b);
    float *p0 = malloc(nq * sizeof *p0), *p1 = malloc(nq * sizeof *p1);
    assert_true(p0 && p1);
    answers(&f, p0);
    assert_int_equal(ws_exec_query(back_x, f.b, f.w_prev, p1, NULL, &err), WS_OK);
    assert_memory_equal(p0, p1, nq * sizeof *p0);
    free(p0), free(p1);
    ws_exec_free(back_x);
    ws_model_free(back);
    model_fixture_teardown(&f);
}

static void test_rn_refusals(void **s)
{
    (void)s;
    ws_error err;
    ws_model_config c = rn_config(1, 2, 4);
    c.n_state = 65; /* 65² pair rows per query: over the readout's bound */
    assert_int_equal(ws_model_config_validate(&c, &err), WS_ERR_INVALID);
    c = rn_config(1, 2, 4);
    c.upd_mixer = WS_MIXER_RN; /* a readout cannot mix the Updater */
    assert_int_equal(ws_model_config_validate(&c, &err), WS_ERR_INVALID);

    /* A backend without the rn ops refuses the model (and still takes mha). */
    ws_backend *cpu, lacking;
    assert_int_equal(ws_backend_cpu_new(&cpu, 1, &err), WS_OK);
    ws_backend_ops ops = *cpu->ops;
    ops.rn = NULL;
    lacking = (ws_backend){.ops = &ops, .impl = cpu->impl};
    ws_model *m;
    c = rn_config(1, 2, 4);
    assert_int_equal(ws_model_new(&m, &c, &lacking, 1, &err), WS_ERR_INVALID);
    assert_non_null(strstr(err.msg, "has no ops for mixers"));
    c.ext_mixer = WS_MIXER_MHA;
    assert_int_equal(ws_model_new(&m, &c, &lacking, 1, &err), WS_OK);
    ws_model_free(m);
    ws_backend_free(cpu);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rn_gradients),
        cmocka_unit_test(test_rn_permutation_invariance),
        cmocka_unit_test(test_rn_split_equals_naive),
        cmocka_unit_test(test_rn_checkpoint_round_trip),
        cmocka_unit_test(test_rn_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
