/* mnist.h — reading (Fashion-)MNIST IDX files, gzipped or plain, into binarized
 * images (internal to tasks/ and its tests).
 *
 * IDX: a big-endian header — magic 0x00000803 then n, rows, cols for images;
 * 0x00000801 then n for labels — followed by exactly that many unsigned bytes.
 * Anything else (wrong magic, zero or huge dimensions, counts that differ between
 * the two files, labels >= 10, a file that ends early or runs on, a corrupt gzip
 * stream) is WS_ERR_FORMAT; a missing file is WS_ERR_NOTFOUND, other OS errors
 * WS_ERR_IO. */
#ifndef WS_MNIST_H
#define WS_MNIST_H

#include <stdint.h>

#include "base/ws_status.h"

#define WS_MNIST_CLASSES 10

typedef struct {
    int n, rows, cols;
    int stride;      /* bytes per packed image: ceil(rows*cols / 8) */
    uint8_t *bits;   /* [n * stride]: pixel p = row*cols + col of image i is bit
                        p % 8 of byte i*stride + p/8; 1 where the grey value > 127 */
    uint8_t *labels; /* [n], each < WS_MNIST_CLASSES */
} ws_mnist;

/* Loads an images file and its labels file into *out (zeroed on failure). */
ws_status ws_mnist_load(ws_mnist *out, const char *images_path, const char *labels_path,
                        ws_error *err);
void ws_mnist_free(ws_mnist *m);

/* Pixel p (row*cols + col) of image i: 0 or 1. */
int ws_mnist_pixel(const ws_mnist *m, int i, int p);

#endif
