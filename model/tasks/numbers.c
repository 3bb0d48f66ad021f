/* numbers.c — the World of Numbers (§9) on real Fashion-MNIST images.
 *
 * A world is a tuple of `images` pictures. Each image i has a class c_i, drawn
 * uniformly at reset; step 1 shows a random image of class c_i, and every later
 * step replaces each image by a fresh random image of class (c_i + 1) mod 10:
 * the tuple rotates "semantically", never repeating the pixels.
 * Facts: ("m<i>", "y<row>", "x<col>") = "pixel (row, col) of image i is on"
 * (grey value > 127). Three symbols per fact, images + 28 + 28 = 59 symbols,
 * rather than ("m<i>", "px<k>") with 787: it fits a small vocabulary (the CLI
 * uses 512) and shares row and column embeddings across images, as in the
 * paper's (i, x, y) queries.
 * Instructions: a uniform number in [0, max_told] ([0, max_told_first] at step 1)
 * of distinct random pixels across the tuple, told with their true values.
 * Queries: n_queries distinct random pixels across the tuple, label = the pixel,
 * kind WS_QK_TOLD if that pixel was told this step else WS_QK_UNTOLD, no groups.
 * Baseline [0] "class mean image": the fraction of training images of the
 * image's true class with that pixel on — what knowing the class but no pixels
 * would give.
 * The dataset is read once per task object (tens of MB, read-only afterwards,
 * shared by all slots). test_split = 1 draws images from the t10k files, for
 * evaluation on unseen images; the baseline still comes from the training split.
 * Defaults (the paper's): 3 images, max_told 75, max_told_first 500, n_queries 75,
 * data_dir /usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mnist.h"
#include "task_impl.h"

enum { NUMBERS_MAX_IMAGES = 64 };

static const char default_dir[] = "/usr/share/datasets/fashion-mnist";

typedef struct {
    int *cls;      /* [images]: current class of each image */
    int *img;      /* [images]: its index in the dataset */
    uint8_t *told; /* [images * pixels]: told this step */
    int *pick;     /* [images * pixels]: sampling scratch */
} numbers_world;

typedef struct {
    ws_mnist set;    /* the split images are drawn from */
    int pixels;      /* rows * cols */
    int *by_class;   /* [set.n]: image indices grouped by class */
    int class_start[WS_MNIST_CLASSES + 1];
    float *mean;     /* [classes * pixels]: training-split P(pixel on | class) */
    int32_t *m_ids, *y_ids, *x_ids;
    numbers_world *w; /* [n_slots] */
} numbers_data;

static void numbers_defaults(ws_task_params *p)
{
    p->images = 3;
    p->max_told = 75;
    p->max_told_first = 500;
    p->n_queries = 75;
    p->test_split = 0;
    p->data_dir = default_dir;
}

/* Loads one split of data_dir ("train" or "t10k"). */
static ws_status load_split(ws_mnist *m, const char *dir, const char *split, ws_error *err)
{
    char images[4096], labels[4096];
    int a = snprintf(images, sizeof images, "%s/%s-images-idx3-ubyte.gz", dir, split);
    int b = snprintf(labels, sizeof labels, "%s/%s-labels-idx1-ubyte.gz", dir, split);
    if (a < 0 || b < 0 || (size_t)a >= sizeof images || (size_t)b >= sizeof labels)
        return ws_error_set(err, WS_ERR_INVALID, "task numbers: data_dir is too long");
    return ws_mnist_load(m, images, labels, err);
}

static ws_status class_means(numbers_data *d, const ws_mnist *train, ws_error *err)
{
    size_t P = (size_t)train->rows * (size_t)train->cols;
    d->mean = calloc(WS_MNIST_CLASSES * P, sizeof *d->mean);
    if (!d->mean) return ws_error_set(err, WS_ERR_NOMEM, "task numbers: out of memory");
    int count[WS_MNIST_CLASSES] = {0};
    for (int i = 0; i < train->n; i++) {
        float *m = d->mean + train->labels[i] * P;
        const uint8_t *bits = train->bits + (size_t)i * (size_t)train->stride;
        count[train->labels[i]]++;
        for (size_t p = 0; p < P; p++) m[p] += (float)((bits[p / 8] >> (p % 8)) & 1);
    }
    for (int c = 0; c < WS_MNIST_CLASSES; c++) {
        if (!count[c])
            return ws_error_set(err, WS_ERR_FORMAT, "task numbers: the training split has no "
                                                    "image of class %d", c);
        for (size_t p = 0; p < P; p++) d->mean[c * P + p] /= (float)count[c];
    }
    return WS_OK;
}

/* Groups image indices by class (counting sort), so drawing one is O(1). */
static ws_status index_classes(numbers_data *d, const char *split, ws_error *err)
{
    const ws_mnist *s = &d->set;
    d->by_class = malloc((size_t)s->n * sizeof *d->by_class);
    if (!d->by_class) return ws_error_set(err, WS_ERR_NOMEM, "task numbers: out of memory");
    int fill[WS_MNIST_CLASSES + 1] = {0};
    for (int i = 0; i < s->n; i++) fill[s->labels[i] + 1]++;
    for (int c = 0; c < WS_MNIST_CLASSES; c++) {
        if (!fill[c + 1])
            return ws_error_set(err, WS_ERR_FORMAT, "task numbers: the %s split has no image of "
                                                    "class %d", split, c);
        fill[c + 1] += fill[c];
    }
    memcpy(d->class_start, fill, sizeof fill);
    for (int i = 0; i < s->n; i++) d->by_class[fill[s->labels[i]]++] = i;
    return WS_OK;
}

static ws_status load_data(ws_task *t, numbers_data *d, ws_error *err)
{
    const char *dir = t->p.data_dir ? t->p.data_dir : default_dir;
    ws_mnist train;
    WS_TRY(load_split(&train, dir, "train", err));
    ws_status st = class_means(d, &train, err);
    if (st == WS_OK && t->p.test_split) {
        st = load_split(&d->set, dir, "t10k", err);
        if (st == WS_OK && (d->set.rows != train.rows || d->set.cols != train.cols))
            st = ws_error_set(err, WS_ERR_FORMAT, "task numbers: t10k images are %dx%d, train "
                                                  "images %dx%d", d->set.rows, d->set.cols,
                              train.rows, train.cols);
        ws_mnist_free(&train);
    } else {
        d->set = train; /* the training split is both the images and the baseline */
    }
    if (st != WS_OK) return st;
    d->pixels = d->set.rows * d->set.cols;
    return index_classes(d, t->p.test_split ? "t10k" : "train", err);
}

static ws_status numbers_create(ws_task *t, ws_vocab *v, ws_error *err)
{
    const ws_task_params *p = &t->p;
    if (p->images < 1 || p->images > NUMBERS_MAX_IMAGES)
        return ws_error_set(err, WS_ERR_INVALID, "task numbers: images must be in [1, %d]",
                            NUMBERS_MAX_IMAGES);
    if (p->max_told < 0 || p->max_told_first < 0 || p->n_queries < 0 ||
        (p->test_split != 0 && p->test_split != 1))
        return ws_error_set(err, WS_ERR_INVALID, "task numbers: max_told, max_told_first and "
                                                 "n_queries must be >= 0, test_split 0 or 1");
    numbers_data *d = calloc(1, sizeof *d);
    if (!d) return ws_error_set(err, WS_ERR_NOMEM, "task numbers: out of memory");
    t->data = d;
    WS_TRY(load_data(t, d, err));
    int cells = p->images * d->pixels;
    if (p->max_told > cells || p->max_told_first > cells || p->n_queries > cells)
        return ws_error_set(err, WS_ERR_INVALID, "task numbers: max_told, max_told_first and "
                                                 "n_queries must be <= %d pixels", cells);
    d->m_ids = malloc((size_t)p->images * sizeof *d->m_ids);
    d->y_ids = malloc((size_t)d->set.rows * sizeof *d->y_ids);
    d->x_ids = malloc((size_t)d->set.cols * sizeof *d->x_ids);
    d->w = calloc((size_t)t->n_slots, sizeof *d->w);
    if (!d->m_ids || !d->y_ids || !d->x_ids || !d->w)
        return ws_error_set(err, WS_ERR_NOMEM, "task numbers: out of memory");
    for (int s = 0; s < t->n_slots; s++) {
        numbers_world *w = &d->w[s];
        w->cls = malloc((size_t)p->images * sizeof *w->cls);
        w->img = malloc((size_t)p->images * sizeof *w->img);
        w->told = malloc((size_t)cells);
        w->pick = malloc((size_t)cells * sizeof *w->pick);
        if (!w->cls || !w->img || !w->told || !w->pick)
            return ws_error_set(err, WS_ERR_NOMEM, "task numbers: out of memory");
    }
    WS_TRY(ws_task_symbols(t, v, "m", p->images, d->m_ids, err));
    WS_TRY(ws_task_symbols(t, v, "y", d->set.rows, d->y_ids, err));
    return ws_task_symbols(t, v, "x", d->set.cols, d->x_ids, err);
}

static void numbers_destroy(ws_task *t)
{
    numbers_data *d = t->data;
    if (!d) return;
    for (int s = 0; d->w && s < t->n_slots; s++) {
        free(d->w[s].cls);
        free(d->w[s].img);
        free(d->w[s].told);
        free(d->w[s].pick);
    }
    free(d->w);
    free(d->m_ids);
    free(d->y_ids);
    free(d->x_ids);
    free(d->mean);
    free(d->by_class);
    ws_mnist_free(&d->set);
    free(d);
}

static int numbers_max_queries(const ws_task *t) { return t->p.n_queries; }

static void numbers_reset(ws_task *t, int slot)
{
    numbers_data *d = t->data;
    for (int i = 0; i < t->p.images; i++)
        d->w[slot].cls[i] = (int)ws_task_rng_below(&t->rng[slot], WS_MNIST_CLASSES);
}

/* The fact of cell k of the tuple: image k / pixels, pixel k % pixels. */
static void fact_of(const numbers_data *d, int k, int32_t fact[3])
{
    int p = k % d->pixels;
    fact[0] = d->m_ids[k / d->pixels];
    fact[1] = d->y_ids[p / d->set.cols];
    fact[2] = d->x_ids[p % d->set.cols];
}

static int value_of(const numbers_data *d, const numbers_world *w, int k)
{
    return ws_mnist_pixel(&d->set, w->img[k / d->pixels], k % d->pixels);
}

static ws_status numbers_step(ws_task *t, int slot, ws_batch *b, ws_query_info *info)
{
    numbers_data *d = t->data;
    numbers_world *w = &d->w[slot];
    ws_task_rng *r = &t->rng[slot];
    int first = t->steps[slot] == 1, cells = t->p.images * d->pixels, nq = 0;
    for (int i = 0; i < t->p.images; i++) {
        if (!first) w->cls[i] = (w->cls[i] + 1) % WS_MNIST_CLASSES;
        int lo = d->class_start[w->cls[i]], hi = d->class_start[w->cls[i] + 1];
        w->img[i] = d->by_class[lo + (int)ws_task_rng_below(r, (uint32_t)(hi - lo))];
    }
    int max_told = first ? t->p.max_told_first : t->p.max_told;
    int n_told = (int)ws_task_rng_below(r, (uint32_t)max_told + 1);
    memset(w->told, 0, (size_t)cells);
    ws_task_rng_sample(r, w->pick, cells, n_told);
    for (int j = 0; j < n_told; j++) {
        int k = w->pick[j];
        int32_t fact[3];
        fact_of(d, k, fact);
        w->told[k] = 1;
        WS_TRY(ws_batch_add_instr(b, fact, 3, value_of(d, w, k)));
    }
    ws_task_rng_sample(r, w->pick, cells, t->p.n_queries);
    for (int j = 0; j < t->p.n_queries; j++) {
        int k = w->pick[j], cls = w->cls[k / d->pixels];
        int32_t fact[3];
        fact_of(d, k, fact);
        ws_query_info qi = {.kind = w->told[k] ? WS_QK_TOLD : WS_QK_UNTOLD, .group = -1,
                            .baseline = {d->mean[(size_t)cls * d->pixels + k % d->pixels]}};
        WS_TRY(ws_task_query(b, fact, 3, value_of(d, w, k), info, &nq, qi));
    }
    return WS_OK;
}

const ws_task_kind ws_task_kind_numbers = {
    .name = "numbers",
    .dynamics = 1,
    .fact_len = 3,
    .n_baselines = 1,
    .baselines = {"class mean image"},
    .defaults = numbers_defaults,
    .create = numbers_create,
    .destroy = numbers_destroy,
    .max_queries = numbers_max_queries,
    .reset = numbers_reset,
    .step = numbers_step,
};
