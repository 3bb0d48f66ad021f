/* test_task_numbers.c — the numbers task (Fashion-MNIST images, pixels told
 * and asked, classes that rotate) checked against the images it drew, and the
 * IDX reader on the real files and on damaged ones. Skipped (not passed) where
 * the dataset is not installed. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "model/tasks/mnist.h"
#include "task_rig.h"
#include "test_util.h"

/* ---- numbers ----------------------------------------------------------------- */

static int have_mnist(void)
{
    struct stat st;
    return stat(MNIST_DIR, &st) == 0 && S_ISDIR(st.st_mode);
}

static void load_ref(ws_mnist *m, const char *split)
{
    char im[256], lb[256];
    snprintf(im, sizeof im, MNIST_DIR "/%s-images-idx3-ubyte.gz", split);
    snprintf(lb, sizeof lb, MNIST_DIR "/%s-labels-idx1-ubyte.gz", split);
    ws_error err = {0};
    rig_check(ws_mnist_load(m, im, lb, &err), &err);
}

/* Whether `set` holds an image of class cls with exactly these 784 pixels
 * (identical pictures may exist in two classes, so every match is tried). */
static int holds_image(const ws_mnist *set, const int *px, int cls)
{
    uint8_t packed[98] = {0};
    for (int p = 0; p < 784; p++) packed[p / 8] |= (uint8_t)(px[p] << (p % 8));
    assert_int_equal(set->stride, 98);
    for (int i = 0; i < set->n; i++)
        if (set->labels[i] == cls && !memcmp(set->bits + (size_t)i * 98, packed, 98)) return 1;
    return 0;
}

/* Steps a numbers world that queries every pixel: each image must be a real
 * image of `images` (train or t10k) whose class moves on by one each step, the
 * baseline must be its class's training mean, and told pixels true values. */
static void check_numbers(rig *r, int slot, int steps, const ws_mnist *images,
                          const float *mean, const ws_task_params *p)
{
    int n = p->images, cls[8] = {0}, px[8][784];
    static float base[8][784];
    assert_true(n <= 8);
    for (int s = 1; s <= steps; s++) {
        rig_step(r, slot);
        int ni = ws_batch_n_instr(r->b), nq = ws_batch_n_query(r->b);
        assert_int_equal(nq, n * 784);
        assert_true(ni <= (s == 1 ? p->max_told_first : p->max_told));
        memset(px, 0xff, sizeof px);
        for (int q = 0; q < nq; q++) {
            const int32_t *ids = rig_query_ids(r, q);
            assert_int_equal(rig_n_ids(r, ids), 3);
            int m = rig_sym_num(r, ids[0], "m"), y = rig_sym_num(r, ids[1], "y"), x = rig_sym_num(r, ids[2], "x");
            assert_true(m < n && y < 28 && x < 28);
            assert_int_equal(px[m][y * 28 + x], -1); /* distinct */
            px[m][y * 28 + x] = r->b->query.value[q];
            base[m][y * 28 + x] = r->info[q].baseline[0];
        }
        /* Told pixels carry the image's value and make their queries TOLD. */
        int told[8][784] = {{0}};
        for (int i = 0; i < ni; i++) {
            const int32_t *ids = rig_instr_ids(r, i);
            int m = rig_sym_num(r, ids[0], "m"), k = rig_sym_num(r, ids[1], "y") * 28 + rig_sym_num(r, ids[2], "x");
            assert_int_equal(r->b->instr.value[i], px[m][k]);
            assert_int_equal(told[m][k]++, 0);
        }
        for (int q = 0; q < nq; q++) {
            const int32_t *ids = rig_query_ids(r, q);
            int m = rig_sym_num(r, ids[0], "m"), k = rig_sym_num(r, ids[1], "y") * 28 + rig_sym_num(r, ids[2], "x");
            assert_int_equal(r->info[q].kind, told[m][k] ? WS_QK_TOLD : WS_QK_UNTOLD);
            assert_int_equal(r->info[q].group, -1);
        }
        for (int m = 0; m < n; m++) {
            int best = -1;
            double best_d = 1e30;
            for (int c = 0; c < 10; c++) {
                double dist = 0;
                for (int k = 0; k < 784; k++) dist += fabs(base[m][k] - mean[c * 784 + k]);
                if (dist < best_d) best_d = dist, best = c;
            }
            assert_true(best_d < 1e-3);
            if (s > 1) assert_int_equal(best, (cls[m] + 1) % 10);
            cls[m] = best;
            assert_true(holds_image(images, px[m], best));
        }
    }
}

static void class_means(const ws_mnist *m, float *mean)
{
    int count[10] = {0};
    memset(mean, 0, 10 * 784 * sizeof *mean);
    for (int i = 0; i < m->n; i++) {
        count[m->labels[i]]++;
        for (int k = 0; k < 784; k++) mean[m->labels[i] * 784 + k] += (float)ws_mnist_pixel(m, i, k);
    }
    for (int c = 0; c < 10; c++)
        for (int k = 0; k < 784; k++) mean[c * 784 + k] /= (float)count[c];
}

static void test_numbers(void **state)
{
    (void)state;
    if (!have_mnist()) skip();
    ws_mnist train, t10k;
    load_ref(&train, "train");
    load_ref(&t10k, "t10k");
    assert_int_equal(train.n, 60000);
    assert_int_equal(t10k.n, 10000);
    assert_true(train.rows == 28 && train.cols == 28 && t10k.rows == 28 && t10k.cols == 28);
    assert_int_equal(train.labels[0], 9); /* ankle boot, in both splits */
    assert_int_equal(t10k.labels[0], 9);
    float *mean = malloc(10 * 784 * sizeof *mean);
    assert_non_null(mean);
    class_means(&train, mean);

    ws_task_params p = rig_params("numbers");
    p.n_queries = 3 * 784; /* every pixel, so the test sees whole images */
    rig r;
    rig_open(&r, &p, 3);
    assert_int_equal(ws_task_max_fact_len(r.t), 3);
    assert_int_equal(ws_task_n_baselines(r.t), 1);
    assert_string_equal(ws_task_baseline_name(r.t, 0), "class mean image");
    assert_int_equal(ws_task_reset(r.t, 0, 11), WS_OK);
    check_numbers(&r, 0, 12, &train, mean, &p);
    /* Determinism: slot 1 with the same seed repeats slot 0, slot 2 differs. */
    rig_blob a = {0}, b = {0}, c = {0};
    assert_int_equal(ws_task_reset(r.t, 0, 5), WS_OK);
    assert_int_equal(ws_task_reset(r.t, 1, 5), WS_OK);
    assert_int_equal(ws_task_reset(r.t, 2, 6), WS_OK);
    for (int s = 0; s < 3; s++) {
        rig_step(&r, 0), rig_snapshot(&r, &a);
        rig_step(&r, 2), rig_snapshot(&r, &c);
        rig_step(&r, 1), rig_snapshot(&r, &b);
    }
    assert_int_equal(a.n, b.n);
    assert_memory_equal(a.p, b.p, a.n);
    assert_true(a.n != c.n || memcmp(a.p, c.p, a.n) != 0);
    free(a.p), free(b.p), free(c.p);
    rig_close(&r);

    /* Unseen images: test_split draws from t10k, the baseline stays the train mean. */
    p = rig_params("numbers");
    p.test_split = 1, p.images = 2, p.n_queries = 2 * 784, p.max_told_first = 3, p.max_told = 0;
    rig_open(&r, &p, 1);
    assert_int_equal(ws_task_reset(r.t, 0, 3), WS_OK);
    check_numbers(&r, 0, 4, &t10k, mean, &p);
    rig_close(&r);
    free(mean);
    ws_mnist_free(&train);
    ws_mnist_free(&t10k);
}

/* The default sizes, on a model whose facts are too short for (m, y, x). */
static void test_numbers_defaults(void **state)
{
    (void)state;
    if (!have_mnist()) skip();
    ws_task_params p = rig_params("numbers");
    rig r;
    rig_open(&r, &p, 1);
    assert_int_equal(ws_task_max_queries(r.t), 75);
    assert_int_equal(ws_task_reset(r.t, 0, 1), WS_OK);
    int told = 0, told_q = 0, max_first = 0;
    for (int s = 1; s <= 40; s++) {
        rig_step(&r, 0);
        int ni = ws_batch_n_instr(r.b);
        if (s == 1) max_first = ni;
        else {
            assert_true(ni <= 75);
            told += ni;
        }
        assert_int_equal(ws_batch_n_query(r.b), 75);
        for (int q = 0; q < 75; q++) {
            told_q += r.info[q].kind == WS_QK_TOLD;
            assert_true(r.info[q].baseline[0] >= 0.0f && r.info[q].baseline[0] <= 1.0f);
        }
    }
    assert_true(max_first <= 500);
    assert_true(told > 39 * 75 / 4 && told < 39 * 75 * 3 / 4); /* uniform in [0, 75] */
    assert_true(told_q > 0);
    ws_model_config c = ws_model_config_default();
    c.max_fact_len = 2;
    ws_batch *small;
    ws_error err = {0};
    assert_int_equal(ws_batch_new(&small, &c), WS_OK);
    assert_int_equal(ws_batch_begin_traj(small, 1), WS_OK);
    assert_int_equal(ws_task_step(r.t, 0, small, r.info, &err), WS_ERR_INVALID);
    ws_batch_free(small);
    rig_close(&r);
}

/* ---- damaged IDX files ------------------------------------------------------- */

static char tmpdir[64];

static void path_in(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", tmpdir, name);
}

static void write_bytes(const char *name, const void *x, size_t n, int gz)
{
    char path[128];
    path_in(path, sizeof path, name);
    if (gz) {
        gzFile f = gzopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(gzwrite(f, x, (unsigned)n), (int)n);
        assert_int_equal(gzclose(f), Z_OK);
    } else {
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(x, 1, n, f), n);
        assert_int_equal(fclose(f), 0);
    }
}

static unsigned char *read_bytes(const char *name, size_t *n)
{
    char path[128];
    path_in(path, sizeof path, name);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    unsigned char *x = malloc(1 << 16);
    assert_non_null(x);
    *n = fread(x, 1, 1 << 16, f);
    fclose(f);
    return x;
}

static void be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8), p[3] = (unsigned char)v;
}

/* IDX contents: n rows×cols images with grey = 100 + 9·image + pixel (both
 * sides of the 127 threshold), and n labels counting up from `first`. */
static size_t make_images(unsigned char *buf, uint32_t magic, int n, int rows, int cols)
{
    be32(buf, magic), be32(buf + 4, (uint32_t)n), be32(buf + 8, (uint32_t)rows);
    be32(buf + 12, (uint32_t)cols);
    size_t k = 16;
    for (int i = 0; i < n; i++)
        for (int p = 0; p < rows * cols; p++) buf[k++] = (unsigned char)(100 + 9 * i + p);
    return k;
}

static size_t make_labels(unsigned char *buf, int n, int first)
{
    be32(buf, 0x801), be32(buf + 4, (uint32_t)n);
    for (int i = 0; i < n; i++) buf[8 + i] = (unsigned char)((first + i) % 10);
    return 8 + (size_t)n;
}

static ws_status load_tmp(ws_mnist *m, const char *images, const char *labels, ws_error *err)
{
    char im[128], lb[128];
    path_in(im, sizeof im, images);
    path_in(lb, sizeof lb, labels);
    memset(err, 0, sizeof *err);
    return ws_mnist_load(m, im, lb, err);
}

static void expect_format(const char *images, const char *labels)
{
    ws_mnist m;
    ws_error err;
    assert_int_equal(load_tmp(&m, images, labels, &err), WS_ERR_FORMAT);
    assert_null(m.bits);
    assert_null(m.labels);
    assert_true(err.msg[0] != '\0');
}

static void test_idx_damaged(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ws_test_tasks_XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    unsigned char img[2048], lab[64];
    size_t ni = make_images(img, 0x803, 3, 4, 5), nl = make_labels(lab, 3, 8);

    /* A good pair, gzipped and plain: binarized at > 127. */
    write_bytes("img.gz", img, ni, 1);
    write_bytes("lab.gz", lab, nl, 1);
    write_bytes("img.raw", img, ni, 0);
    ws_mnist m;
    ws_error err;
    const char *good[] = {"img.gz", "img.raw"};
    for (int g = 0; g < 2; g++) {
        rig_check(load_tmp(&m, good[g], "lab.gz", &err), &err);
        assert_true(m.n == 3 && m.rows == 4 && m.cols == 5 && m.stride == 3);
        for (int i = 0; i < 3; i++) {
            assert_int_equal(m.labels[i], (8 + i) % 10);
            for (int p = 0; p < 20; p++)
                assert_int_equal(ws_mnist_pixel(&m, i, p), 100 + 9 * i + p > 127);
        }
        ws_mnist_free(&m);
    }

    /* Wrong magic (labels file given as images; images as labels). */
    expect_format("lab.gz", "lab.gz");
    expect_format("img.gz", "img.gz");
    /* Data cut short, or running on. */
    write_bytes("short.gz", img, ni - 7, 1);
    expect_format("short.gz", "lab.gz");
    write_bytes("header.gz", img, 10, 1);
    expect_format("header.gz", "lab.gz");
    img[ni] = 0;
    write_bytes("long.gz", img, ni + 1, 1);
    expect_format("long.gz", "lab.gz");
    /* Counts that disagree, labels out of range, empty or absurd dimensions. */
    unsigned char lab2[64];
    write_bytes("lab2.gz", lab2, make_labels(lab2, 2, 0), 1);
    expect_format("img.gz", "lab2.gz");
    lab[9] = 10;
    write_bytes("lab10.gz", lab, nl, 1);
    expect_format("img.gz", "lab10.gz");
    lab[9] = 9;
    unsigned char bad[64];
    write_bytes("zero.gz", bad, make_images(bad, 0x803, 0, 4, 5), 1);
    expect_format("zero.gz", "lab.gz");
    make_images(bad, 0x803, 0, 4, 5);
    be32(bad + 4, 10000000), be32(bad + 8, 1000), be32(bad + 12, 1000);
    write_bytes("huge.gz", bad, 16, 1);
    expect_format("huge.gz", "lab.gz");

    /* A gzip stream cut in the middle, and one with a damaged body. */
    size_t n;
    unsigned char *z = read_bytes("img.gz", &n);
    write_bytes("cut.gz", z, n - 12, 0);
    expect_format("cut.gz", "lab.gz");
    write_bytes("cut2.gz", z, n / 2, 0);
    expect_format("cut2.gz", "lab.gz");
    z[n - 6] ^= 0x55; /* inside the CRC/length trailer */
    write_bytes("crc.gz", z, n, 0);
    expect_format("crc.gz", "lab.gz");
    free(z);

    /* A missing file. */
    assert_int_equal(load_tmp(&m, "nothing.gz", "lab.gz", &err), WS_ERR_NOTFOUND);

    /* The task refuses a data_dir whose training images are damaged. */
    z = read_bytes("cut2.gz", &n);
    write_bytes("train-images-idx3-ubyte.gz", z, n, 0);
    free(z);
    write_bytes("train-labels-idx1-ubyte.gz", lab, nl, 1);
    ws_vocab *v;
    assert_int_equal(ws_vocab_new(&v, 4096, 16), WS_OK);
    ws_task_params p = rig_params("numbers");
    p.data_dir = tmpdir;
    rig_expect_new_fails(&p, v, WS_ERR_FORMAT);
    p.data_dir = "/nonexistent/fashion-mnist";
    rig_expect_new_fails(&p, v, WS_ERR_NOTFOUND);
    ws_vocab_free(v);

    const char *files[] = {"img.gz", "lab.gz", "img.raw", "short.gz", "header.gz", "long.gz",
                           "lab2.gz", "lab10.gz", "zero.gz", "huge.gz", "cut.gz", "cut2.gz",
                           "crc.gz", "train-images-idx3-ubyte.gz",
                           "train-labels-idx1-ubyte.gz"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char path[128];
        path_in(path, sizeof path, files[i]);
        assert_int_equal(unlink(path), 0);
    }
    assert_int_equal(rmdir(tmpdir), 0);
}

/* A task whose worlds move on silent steps refuses a model that holds its state
 * on them; the others take either. */

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_numbers_defaults),
        cmocka_unit_test(test_idx_damaged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
