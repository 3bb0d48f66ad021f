/* carve.h — the one way model/ lays out sub-regions of a buffer: pieces taken
 * in order from a base, each starting at a multiple of the carver's alignment.
 * With base NULL the same calls only measure (off is then the bytes to
 * allocate), so a region's size and its layout come from one function and
 * cannot disagree. The plan carves its arena in 64-byte pieces (vector loads on
 * any backend); mixers carve their regions packed (align sizeof(float)). */
#ifndef WS_CARVE_H
#define WS_CARVE_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *base;   /* NULL: measure only */
    size_t off;   /* bytes taken so far (the end of the last piece) */
    size_t align; /* a power of two */
} ws_carve;

static inline ws_carve ws_carve_at(void *base, size_t align)
{
    return (ws_carve){(char *)base, 0, align};
}

/* Where the next piece would start: the region so far, padded to the alignment. */
static inline size_t ws_carve_end(const ws_carve *c)
{
    return (c->off + c->align - 1) & ~(c->align - 1);
}

static inline void *ws_carve_take(ws_carve *c, size_t bytes)
{
    size_t at = ws_carve_end(c);
    c->off = at + bytes;
    return c->base ? c->base + at : NULL;
}

static inline float *ws_carve_f(ws_carve *c, size_t n)
{
    return (float *)ws_carve_take(c, n * sizeof(float));
}

static inline int32_t *ws_carve_i(ws_carve *c, size_t n)
{
    return (int32_t *)ws_carve_take(c, n * sizeof(int32_t));
}

/* The floats that hold everything taken so far. */
static inline size_t ws_carve_floats(const ws_carve *c)
{
    return (c->off + sizeof(float) - 1) / sizeof(float);
}

#endif
