/* mnist.c — the IDX reader: zlib's gz* stream (which also passes plain files
 * through), strict header checks, binarization while reading. */
#include "mnist.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

enum {
    IDX_IMAGES = 0x00000803,
    IDX_LABELS = 0x00000801,
    IDX_MAX_N = 10000000, /* far above any MNIST-like set */
    IDX_MAX_SIDE = 1024,
    CHUNK = 1 << 16
};
/* Bounds what a (possibly corrupt) header can make us allocate: 128 MiB of bits. */
#define IDX_MAX_PIXELS ((size_t)1 << 30)

static ws_status open_idx(gzFile *f, const char *path, ws_error *err)
{
    errno = 0;
    *f = gzopen(path, "rb");
    if (*f) {
        gzbuffer(*f, CHUNK); /* before the first read; fewer calls into zlib */
        return WS_OK;
    }
    if (errno == ENOENT)
        return ws_error_set(err, WS_ERR_NOTFOUND, "mnist: %s does not exist", path);
    return ws_error_set(err, errno ? WS_ERR_IO : WS_ERR_NOMEM, "mnist: cannot open %s: %s", path,
                        errno ? strerror(errno) : "out of memory");
}

/* Why the stream stopped short: an OS error, a corrupt gzip stream, or an early
 * end (zlib says Z_BUF_ERROR for a gzip stream cut off, Z_OK for a plain file). */
static ws_status stream_error(gzFile f, const char *path, ws_error *err)
{
    int code = Z_OK;
    const char *msg = gzerror(f, &code);
    if (code == Z_ERRNO)
        return ws_error_set(err, WS_ERR_IO, "mnist: reading %s: %s", path, strerror(errno));
    if (code != Z_OK && code != Z_BUF_ERROR)
        return ws_error_set(err, WS_ERR_FORMAT, "mnist: %s: corrupt gzip stream (%s)", path, msg);
    return ws_error_set(err, WS_ERR_FORMAT, "mnist: %s is truncated", path);
}

/* Reads exactly n bytes (n <= INT_MAX). */
static ws_status read_exact(gzFile f, const char *path, void *buf, size_t n, ws_error *err)
{
    int got = gzread(f, buf, (unsigned)n);
    if (got >= 0 && (size_t)got == n) return WS_OK;
    return stream_error(f, path, err);
}

/* Reads and checks the header: the magic, then ndim big-endian dimensions. */
static ws_status read_header(gzFile f, const char *path, uint32_t magic, int ndim, int *dims,
                             ws_error *err)
{
    unsigned char h[16];
    WS_TRY(read_exact(f, path, h, 4 * (size_t)(1 + ndim), err));
    uint32_t v[4];
    for (int i = 0; i <= ndim; i++)
        v[i] = (uint32_t)h[4 * i] << 24 | (uint32_t)h[4 * i + 1] << 16 |
               (uint32_t)h[4 * i + 2] << 8 | h[4 * i + 3];
    if (v[0] != magic)
        return ws_error_set(err, WS_ERR_FORMAT, "mnist: %s: magic 0x%08x, expected 0x%08x", path,
                            (unsigned)v[0], (unsigned)magic);
    for (int i = 0; i < ndim; i++) {
        uint32_t hi = i == 0 ? IDX_MAX_N : IDX_MAX_SIDE;
        if (v[1 + i] < 1 || v[1 + i] > hi)
            return ws_error_set(err, WS_ERR_FORMAT, "mnist: %s: dimension %d is %u, not in "
                                                    "[1, %u]", path, i, (unsigned)v[1 + i],
                                (unsigned)hi);
        dims[i] = (int)v[1 + i];
    }
    return WS_OK;
}

/* After the data the stream must end cleanly: extra bytes mean a different
 * file, and a gzip trailer that is missing or fails its CRC a damaged one. */
static ws_status expect_end(gzFile f, const char *path, ws_error *err)
{
    unsigned char extra;
    int got = gzread(f, &extra, 1);
    if (got > 0) return ws_error_set(err, WS_ERR_FORMAT, "mnist: %s has trailing data", path);
    int code = Z_OK;
    gzerror(f, &code);
    if (got == 0 && code == Z_OK) return WS_OK;
    return stream_error(f, path, err);
}

static ws_status read_labels(ws_mnist *m, const char *path, ws_error *err)
{
    gzFile f;
    WS_TRY(open_idx(&f, path, err));
    int n = 0; /* set by read_header on success; -O3 cannot see that */
    ws_status st = read_header(f, path, IDX_LABELS, 1, &n, err);
    if (st == WS_OK && n != m->n)
        st = ws_error_set(err, WS_ERR_FORMAT, "mnist: %s holds %d labels for %d images", path, n,
                          m->n);
    if (st == WS_OK && !(m->labels = malloc((size_t)n)))
        st = ws_error_set(err, WS_ERR_NOMEM, "mnist: out of memory");
    if (st == WS_OK) st = read_exact(f, path, m->labels, (size_t)n, err);
    if (st == WS_OK) st = expect_end(f, path, err);
    for (int i = 0; st == WS_OK && i < n; i++)
        if (m->labels[i] >= WS_MNIST_CLASSES)
            st = ws_error_set(err, WS_ERR_FORMAT, "mnist: %s: label %d of image %d is not a "
                                                  "class 0..9", path, m->labels[i], i);
    gzclose(f);
    return st;
}

/* Reads the pixels in chunks, packing pixel > 127 as a set bit. */
static ws_status read_pixels(ws_mnist *m, gzFile f, const char *path, ws_error *err)
{
    size_t per = (size_t)m->rows * (size_t)m->cols, total = per * (size_t)m->n;
    uint8_t *buf = malloc(CHUNK);
    if (!buf) return ws_error_set(err, WS_ERR_NOMEM, "mnist: out of memory");
    ws_status st = WS_OK;
    for (size_t at = 0; at < total && st == WS_OK;) {
        size_t n = total - at < CHUNK ? total - at : CHUNK;
        st = read_exact(f, path, buf, n, err);
        for (size_t j = 0; st == WS_OK && j < n; j++, at++)
            if (buf[j] > 127) {
                size_t img = at / per, p = at % per;
                m->bits[img * (size_t)m->stride + p / 8] |= (uint8_t)(1u << (p % 8));
            }
    }
    free(buf);
    return st;
}

static ws_status read_images(ws_mnist *m, const char *path, ws_error *err)
{
    gzFile f;
    WS_TRY(open_idx(&f, path, err));
    int dims[3];
    ws_status st = read_header(f, path, IDX_IMAGES, 3, dims, err);
    if (st == WS_OK && (size_t)dims[0] * (size_t)dims[1] * (size_t)dims[2] > IDX_MAX_PIXELS)
        st = ws_error_set(err, WS_ERR_FORMAT, "mnist: %s: %d images of %dx%d is implausibly large",
                          path, dims[0], dims[1], dims[2]);
    if (st == WS_OK) {
        m->n = dims[0], m->rows = dims[1], m->cols = dims[2];
        m->stride = (m->rows * m->cols + 7) / 8;
        if (!(m->bits = calloc((size_t)m->n, (size_t)m->stride)))
            st = ws_error_set(err, WS_ERR_NOMEM, "mnist: out of memory");
    }
    if (st == WS_OK) st = read_pixels(m, f, path, err);
    if (st == WS_OK) st = expect_end(f, path, err);
    gzclose(f);
    return st;
}

ws_status ws_mnist_load(ws_mnist *out, const char *images_path, const char *labels_path,
                        ws_error *err)
{
    memset(out, 0, sizeof *out);
    ws_status st = read_images(out, images_path, err);
    if (st == WS_OK) st = read_labels(out, labels_path, err);
    if (st != WS_OK) ws_mnist_free(out);
    return st;
}

void ws_mnist_free(ws_mnist *m)
{
    free(m->bits);
    free(m->labels);
    memset(m, 0, sizeof *m);
}

int ws_mnist_pixel(const ws_mnist *m, int i, int p)
{
    return (m->bits[(size_t)i * (size_t)m->stride + (size_t)(p / 8)] >> (p % 8)) & 1;
}
