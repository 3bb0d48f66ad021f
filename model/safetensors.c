/* safetensors.c — strict reader and atomic writer for the safetensors format.
 *
 * The reader follows the rules of the reference implementation
 * (huggingface/safetensors, SafeTensors::read_metadata + Metadata::validate) and
 * is stricter where a looser reading could hide a corrupt file:
 *   - 8-byte little-endian header length N, N <= 100 MB, 8 + N <= file size;
 *   - the header is valid UTF-8, starts with '{' and is one JSON object, followed
 *     only by JSON whitespace (the writer pads with spaces to a multiple of 8);
 *   - every entry other than "__metadata__" is an object with exactly dtype,
 *     shape and data_offsets; dtype is F32 or I32; shape is a list of at most
 *     WS_ST_MAX_DIMS non-negative integers; data_offsets is [begin, end] with
 *     begin <= end and end - begin == numel * 4;
 *   - sorted by offset, the tensors tile the data section exactly: the first
 *     starts at 0, each starts where the previous ended (no overlap, no hole) and
 *     the last ends at the end of the file (no trailing bytes);
 *   - names and metadata keys are unique; metadata values are strings.
 * Only F32 and I32 exist in this project, so every tensor is 4-byte elements. */
#include "safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/ws_utf8.h"

/* Tensor data is handed out as-is (no byte swapping), which is only right on a
 * little-endian host. */
#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__)
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "safetensors.c assumes a little-endian host");
#else
#error "cannot determine byte order: safetensors.c assumes a little-endian host"
#endif

/* Same bound as the reference implementation: a header beyond it is corrupt or
 * hostile, and parsing it would cost a lot of memory. */
#define WS_ST_MAX_HEADER 100000000ULL
/* Offsets and shapes travel through JSON numbers (doubles in cJSON); beyond 2^53
 * they would not be exact. */
#define WS_ST_MAX_JSON_INT 9007199254740992.0
#define WS_ST_ELEM 4 /* bytes per element of F32 and I32 */

static const char *dtype_name(ws_st_dtype d) { return d == WS_ST_I32 ? "I32" : "F32"; }

/* ======================================================================== */
/* reader                                                                   */
/* ======================================================================== */

typedef struct {
    char *key, *value;
} st_meta;

struct ws_st_file {
    unsigned char *buf;     /* the whole file; the data section is moved to be aligned */
    ws_st_tensor *tensors;  /* in header order */
    char **names;           /* owned copies, tensors[i].name points here */
    int n;
    int *by_name;           /* tensor indices sorted by name, for ws_st_find */
    st_meta *meta;
    int n_meta;
};

void ws_st_close(ws_st_file *f)
{
    if (!f) return;
    if (f->names)
        for (int i = 0; i < f->n; i++) free(f->names[i]);
    for (int i = 0; i < f->n_meta; i++) {
        free(f->meta[i].key);
        free(f->meta[i].value);
    }
    free(f->names);
    free(f->tensors);
    free(f->by_name);
    free(f->meta);
    free(f->buf);
    free(f);
}

int ws_st_count(const ws_st_file *f) { return f->n; }

const ws_st_tensor *ws_st_at(const ws_st_file *f, int i)
{
    return (i >= 0 && i < f->n) ? &f->tensors[i] : NULL;
}

/* qsort/bsearch have no context argument, so the comparators see the file
 * through a thread-local pointer set around each call. */
static _Thread_local const ws_st_file *cmp_file;
static _Thread_local const uint64_t (*cmp_offsets)[2];

static int cmp_by_name(const void *a, const void *b)
{
    return strcmp(cmp_file->tensors[*(const int *)a].name,
                  cmp_file->tensors[*(const int *)b].name);
}

static int cmp_by_offset(const void *a, const void *b)
{
    const uint64_t *x = cmp_offsets[*(const int *)a], *y = cmp_offsets[*(const int *)b];
    if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
    if (x[1] != y[1]) return x[1] < y[1] ? -1 : 1;
    return 0;
}

const ws_st_tensor *ws_st_find(const ws_st_file *f, const char *name)
{
    int lo = 0, hi = f->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        const ws_st_tensor *t = &f->tensors[f->by_name[mid]];
        int c = strcmp(name, t->name);
        if (c == 0) return t;
        if (c < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
    return NULL;
}

const char *ws_st_meta(const ws_st_file *f, const char *key)
{
    for (int i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta[i].key, key) == 0) return f->meta[i].value;
    return NULL;
}

/* Reads the whole regular file at path into a fresh buffer. */
static ws_status read_all(const char *path, unsigned char **out, size_t *size, ws_error *err)
{
    *out = NULL;
    *size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ws_error_set(err, WS_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return ws_error_set(err, WS_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    /* A FIFO or device would block or never end; only regular files are files. */
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return ws_error_set(err, WS_ERR_IO, "%s: not a regular file", path);
    }
    if (st.st_size < 8) {
        close(fd);
        return ws_error_set(err, WS_ERR_FORMAT,
                            "%s: file is %lld bytes, shorter than the 8-byte header length",
                            path, (long long)st.st_size);
    }
    if ((uint64_t)st.st_size > (uint64_t)SIZE_MAX) {
        close(fd);
        return ws_error_set(err, WS_ERR_NOMEM, "%s: file too large for memory", path);
    }
    size_t n = (size_t)st.st_size;
    unsigned char *buf = malloc(n);
    if (!buf) {
        close(fd);
        return ws_error_set(err, WS_ERR_NOMEM, "%s: cannot allocate %zu bytes", path, n);
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            free(buf);
            close(fd);
            return ws_error_set(err, WS_ERR_IO, "%s: read failed: %s", path, strerror(e));
        }
        if (r == 0) {
            /* Someone truncated the file under us: what we have is not the file. */
            free(buf);
            close(fd);
            return ws_error_set(err, WS_ERR_IO, "%s: file shrank while being read", path);
        }
        got += (size_t)r;
    }
    if (close(fd) != 0) {
        int e = errno;
        free(buf);
        return ws_error_set(err, WS_ERR_IO, "%s: close failed: %s", path, strerror(e));
    }
    *out = buf;
    *size = n;
    return WS_OK;
}

/* A JSON number that is an exact non-negative integer <= 2^53. */
static int json_uint(const cJSON *it, uint64_t *out)
{
    if (!cJSON_IsNumber(it)) return 0;
    double v = it->valuedouble;
    if (!(v >= 0.0 && v <= WS_ST_MAX_JSON_INT)) return 0;
    uint64_t u = (uint64_t)v;
    if ((double)u != v) return 0;
    *out = u;
    return 1;
}

/* Fills one tensor from its header entry; offsets are checked against the data
 * section later, once all entries are known. */
static ws_status parse_entry(const char *path, const cJSON *e, ws_st_tensor *t,
                             uint64_t off[2], ws_error *err)
{
    const char *name = e->string;
    if (!cJSON_IsObject(e))
        return ws_error_set(err, WS_ERR_FORMAT, "%s: tensor '%s': entry is not an object", path,
                            name);
    const cJSON *dtype = NULL, *shape = NULL, *offsets = NULL;
    for (const cJSON *k = e->child; k; k = k->next) {
        const cJSON **slot = strcmp(k->string, "dtype") == 0          ? &dtype
                             : strcmp(k->string, "shape") == 0        ? &shape
                             : strcmp(k->string, "data_offsets") == 0 ? &offsets
                                                                      : NULL;
        if (!slot)
            return ws_error_set(err, WS_ERR_FORMAT, "%s: tensor '%s': unexpected key '%s'", path,
                                name, k->string);
        if (*slot)
            return ws_error_set(err, WS_ERR_FORMAT, "%s: tensor '%s': duplicate key '%s'", path,
                                name, k->string);
        *slot = k;
    }
    if (!dtype || !shape || !offsets)
        return ws_error_set(err, WS_ERR_FORMAT, "%s: tensor '%s': missing '%s'", path, name,
                            !dtype ? "dtype" : !shape ? "shape" : "data_offsets");

    if (!cJSON_IsString(dtype))
        return ws_error_set(err, WS_ERR_FORMAT, "%s: tensor '%s': dtype is not a string", path,
                            name);
    if (strcmp(dtype->valuestring, "F32") == 0)
        t->dtype = WS_ST_F32;
    else if (strcmp(dtype->valuestring, "I32") == 0)
        t->dtype = WS_ST_I32;
    else
        return ws_error_set(err, WS_ERR_FORMAT,
                            "%s: tensor '%s': unsupported dtype '%.32s' (only F32 and I32)",
                            path, name, dtype->valuestring);

    if (!cJSON_IsArray(shape))
        return ws_error_set(err, WS_ERR_FORMAT, "%s: tensor '%s': shape is not a list", path,
                            name);
    int ndim = cJSON_GetArraySize(shape);
    if (ndim > WS_ST_MAX_DIMS)
        return ws_error_set(err, WS_ERR_FORMAT, "%s: tensor '%s': %d dimensions, at most %d",
                            path, name, ndim, WS_ST_MAX_DIMS);
    t->ndim = ndim;
    size_t numel = 1;
    int i = 0;
    for (const cJSON *d = shape->child; d; d = d->next, i++) {
        uint64_t v;
        if (!json_uint(d, &v))
            return ws_error_set(err, WS_ERR_FORMAT,
                                "%s: tensor '%s': shape[%d] is not a non-negative integer", path,
                                name, i);
        t->shape[i] = (int64_t)v;
        /* numel * 4 must fit in size_t; v == 0 makes any product 0. */
        if (v != 0 && numel > SIZE_MAX / WS_ST_ELEM / v)
            return ws_error_set(err, WS_ERR_FORMAT, "%s: tensor '%s': shape overflows", path,
                                name);
        numel *= (size_t)v;
    }
    t->numel = numel;

    if (!cJSON_IsArray(offsets) || cJSON_GetArraySize(offsets) != 2 ||
        !json_uint(offsets->child, &off[0]) || !json_uint(offsets->child->next, &off[1]))
        return ws_error_set(err, WS_ERR_FORMAT,
                            "%s: tensor '%s': data_offsets is not [begin, end] of non-negative "
                            "integers",
                            path, name);
    if (off[0] > off[1])
        return ws_error_set(err, WS_ERR_FORMAT,
                            "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                            "] has begin > end",
                            path, name, off[0], off[1]);
    if (off[1] - off[0] != (uint64_t)numel * WS_ST_ELEM)
        return ws_error_set(err, WS_ERR_FORMAT,
                            "%s: tensor '%s': data_offsets span %" PRIu64
                            " bytes but %s shape needs %zu",
                            path, name, off[1] - off[0], dtype_name(t->dtype),
                            numel * WS_ST_ELEM);
    return WS_OK;
}

static ws_status parse_metadata(const char *path, ws_st_file *f, const cJSON *md, ws_error *err)
{
    if (!cJSON_IsObject(md))
        return ws_error_set(err, WS_ERR_FORMAT, "%s: __metadata__ is not an object", path);
    int n = cJSON_GetArraySize(md);
    f->meta = calloc(n > 0 ? (size_t)n : 1, sizeof *f->meta);
    if (!f->meta) return ws_error_set(err, WS_ERR_NOMEM, "%s: out of memory", path);
    for (const cJSON *k = md->child; k; k = k->next) {
        if (!cJSON_IsString(k))
            return ws_error_set(err, WS_ERR_FORMAT,
                                "%s: __metadata__ value of '%s' is not a string", path,
                                k->string);
        /* Few keys in practice (a handful), so a quadratic check is fine. */
        for (int j = 0; j < f->n_meta; j++)
            if (strcmp(f->meta[j].key, k->string) == 0)
                return ws_error_set(err, WS_ERR_FORMAT, "%s: duplicate __metadata__ key '%s'",
                                    path, k->string);
        st_meta *m = &f->meta[f->n_meta];
        m->key = strdup(k->string);
        m->value = strdup(k->valuestring);
        if (!m->key || !m->value) {
            free(m->key);
            free(m->value);
            m->key = m->value = NULL;
            return ws_error_set(err, WS_ERR_NOMEM, "%s: out of memory", path);
        }
        f->n_meta++;
    }
    return WS_OK;
}

/* Parses and validates the header of f->buf (n_hdr bytes after the length);
 * fills tensors, names, metadata and offs (one [begin, end] per tensor). */
static ws_status parse_header(const char *path, ws_st_file *f, size_t n_hdr,
                              uint64_t (**offs_out)[2], ws_error *err)
{
    const char *hdr = (const char *)f->buf + 8;
    *offs_out = NULL;
    if (!ws_utf8_valid((const unsigned char *)hdr, n_hdr))
        return ws_error_set(err, WS_ERR_FORMAT, "%s: header is not valid UTF-8", path);
    /* Raw control characters are never valid JSON (except \t \n \r as whitespace);
     * rejecting them also keeps NUL bytes from silently truncating names. */
    for (size_t i = 0; i < n_hdr; i++) {
        unsigned char c = (unsigned char)hdr[i];
        if (c < 0x20 && c != '\t' && c != '\n' && c != '\r')
            return ws_error_set(err, WS_ERR_FORMAT,
                                "%s: header has control byte 0x%02x at offset %zu", path, c, i);
    }
    /* The reference format requires '{' first; this also keeps cJSON from
     * skipping a byte-order mark or leading whitespace. */
    if (n_hdr == 0 || hdr[0] != '{')
        return ws_error_set(err, WS_ERR_FORMAT, "%s: header does not start with '{'", path);

    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(hdr, n_hdr, &end, 0);
    if (!root) {
        size_t at = (end && end >= hdr && end <= hdr + n_hdr) ? (size_t)(end - hdr) : 0;
        return ws_error_set(err, WS_ERR_FORMAT, "%s: header is not valid JSON (near byte %zu)",
                            path, at);
    }
    ws_status st = WS_OK;
    uint64_t (*offs)[2] = NULL;
    /* After the object only JSON whitespace may follow (the writer pads with spaces). */
    for (const char *p = end; p < hdr + n_hdr; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            st = ws_error_set(err, WS_ERR_FORMAT,
                              "%s: header has trailing bytes after the JSON object (byte %zu)",
                              path, (size_t)(p - hdr));
            goto done;
        }
    if (!cJSON_IsObject(root)) {
        st = ws_error_set(err, WS_ERR_FORMAT, "%s: header is not a JSON object", path);
        goto done;
    }

    int n_entries = cJSON_GetArraySize(root);
    f->tensors = calloc(n_entries > 0 ? (size_t)n_entries : 1, sizeof *f->tensors);
    f->names = calloc(n_entries > 0 ? (size_t)n_entries : 1, sizeof *f->names);
    offs = calloc(n_entries > 0 ? (size_t)n_entries : 1, sizeof *offs);
    if (!f->tensors || !f->names || !offs) {
        st = ws_error_set(err, WS_ERR_NOMEM, "%s: out of memory for %d entries", path, n_entries);
        goto done;
    }
    int seen_meta = 0;
    for (const cJSON *e = root->child; e; e = e->next) {
        if (strcmp(e->string, "__metadata__") == 0) {
            if (seen_meta) {
                st = ws_error_set(err, WS_ERR_FORMAT, "%s: duplicate __metadata__", path);
                goto done;
            }
            seen_meta = 1;
            st = parse_metadata(path, f, e, err);
            if (st != WS_OK) goto done;
            continue;
        }
        ws_st_tensor *t = &f->tensors[f->n];
        st = parse_entry(path, e, t, offs[f->n], err);
        if (st != WS_OK) goto done;
        f->names[f->n] = strdup(e->string);
        if (!f->names[f->n]) {
            st = ws_error_set(err, WS_ERR_NOMEM, "%s: out of memory", path);
            goto done;
        }
        t->name = f->names[f->n];
        f->n++;
    }

    /* Unique names: sort an index by name and compare neighbours. */
    f->by_name = malloc((f->n > 0 ? (size_t)f->n : 1) * sizeof *f->by_name);
    if (!f->by_name) {
        st = ws_error_set(err, WS_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    for (int i = 0; i < f->n; i++) f->by_name[i] = i;
    cmp_file = f;
    qsort(f->by_name, (size_t)f->n, sizeof *f->by_name, cmp_by_name);
    cmp_file = NULL;
    for (int i = 1; i < f->n; i++)
        if (strcmp(f->tensors[f->by_name[i]].name, f->tensors[f->by_name[i - 1]].name) == 0) {
            st = ws_error_set(err, WS_ERR_FORMAT, "%s: duplicate tensor '%s'", path,
                              f->tensors[f->by_name[i]].name);
            goto done;
        }
    *offs_out = offs;
    offs = NULL;
done:
    free(offs);
    cJSON_Delete(root);
    return st;
}

/* Checks that the tensors, sorted by offset, tile [0, data_size) exactly. */
static ws_status check_coverage(const char *path, const ws_st_file *f, uint64_t (*offs)[2],
                                uint64_t data_size, ws_error *err)
{
    int *order = malloc((f->n > 0 ? (size_t)f->n : 1) * sizeof *order);
    if (!order) return ws_error_set(err, WS_ERR_NOMEM, "%s: out of memory", path);
    for (int i = 0; i < f->n; i++) order[i] = i;
    cmp_offsets = (const uint64_t(*)[2])offs;
    qsort(order, (size_t)f->n, sizeof *order, cmp_by_offset);
    cmp_offsets = NULL;
    ws_status st = WS_OK;
    uint64_t pos = 0;
    for (int k = 0; k < f->n; k++) {
        int i = order[k];
        const char *name = f->tensors[i].name;
        if (offs[i][1] > data_size) {
            st = ws_error_set(err, WS_ERR_FORMAT,
                              "%s: tensor '%s': data_offsets end %" PRIu64
                              " is beyond the data section (%" PRIu64 " bytes)",
                              path, name, offs[i][1], data_size);
            break;
        }
        if (offs[i][0] < pos) {
            st = ws_error_set(err, WS_ERR_FORMAT,
                              "%s: tensor '%s': data [%" PRIu64 ", %" PRIu64
                              ") overlaps the previous tensor (ends at %" PRIu64 ")",
                              path, name, offs[i][0], offs[i][1], pos);
            break;
        }
        if (offs[i][0] > pos) {
            st = ws_error_set(err, WS_ERR_FORMAT,
                              "%s: tensor '%s': hole of %" PRIu64 " bytes before its data",
                              path, name, offs[i][0] - pos);
            break;
        }
        pos = offs[i][1];
    }
    if (st == WS_OK && pos != data_size)
        st = ws_error_set(err, WS_ERR_FORMAT,
                          "%s: data section is %" PRIu64 " bytes but the tensors cover %" PRIu64
                          " (trailing bytes)",
                          path, data_size, pos);
    free(order);
    return st;
}

ws_status ws_st_read(const char *path, ws_st_file **out, ws_error *err)
{
    *out = NULL;
    ws_st_file *f = calloc(1, sizeof *f);
    if (!f) return ws_error_set(err, WS_ERR_NOMEM, "%s: out of memory", path);
    size_t size;
    uint64_t(*offs)[2] = NULL;
    ws_status st = read_all(path, &f->buf, &size, err);
    if (st != WS_OK) goto fail;

    uint64_t n_hdr = 0;
    for (int i = 7; i >= 0; i--) n_hdr = (n_hdr << 8) | f->buf[i];
    if (n_hdr > WS_ST_MAX_HEADER) {
        st = ws_error_set(err, WS_ERR_FORMAT,
                          "%s: header length %" PRIu64 " exceeds the %llu-byte limit", path,
                          n_hdr, WS_ST_MAX_HEADER);
        goto fail;
    }
    if (n_hdr > size - 8) {
        st = ws_error_set(err, WS_ERR_FORMAT,
                          "%s: header length %" PRIu64 " runs past the end of the file (%zu bytes)",
                          path, n_hdr, size);
        goto fail;
    }
    st = parse_header(path, f, (size_t)n_hdr, &offs, err);
    if (st != WS_OK) goto fail;
    size_t data_off = 8 + (size_t)n_hdr;
    uint64_t data_size = size - data_off;
    st = check_coverage(path, f, offs, data_size, err);
    if (st != WS_OK) goto fail;

    /* The data section must be 4-byte aligned for float/int32 access. malloc
     * aligns the buffer; if the header length is not a multiple of 4, slide the
     * data down over the (already parsed) header bytes instead of copying it. */
    unsigned char *data = f->buf + data_off;
    if (data_off % WS_ST_ELEM != 0) {
        unsigned char *aligned = f->buf + (data_off - data_off % WS_ST_ELEM);
        memmove(aligned, data, (size_t)data_size);
        data = aligned;
    }
    for (int i = 0; i < f->n; i++) f->tensors[i].data = data + offs[i][0];
    free(offs);
    *out = f;
    return WS_OK;
fail:
    free(offs);
    ws_st_close(f);
    return st;
}

/* ======================================================================== */
/* writer                                                                   */
/* ======================================================================== */

typedef struct {
    char *name;
    ws_st_dtype dtype;
    int ndim;
    int64_t shape[WS_ST_MAX_DIMS];
    size_t bytes;
    void *data;
} st_entry;

struct ws_st_writer {
    st_entry *entries;
    int n, cap;
    st_meta *meta;
    int n_meta, cap_meta;
    uint64_t total; /* bytes of tensor data so far */
};

ws_status ws_st_writer_new(ws_st_writer **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? WS_OK : WS_ERR_NOMEM;
}

void ws_st_writer_free(ws_st_writer *w)
{
    if (!w) return;
    for (int i = 0; i < w->n; i++) {
        free(w->entries[i].name);
        free(w->entries[i].data);
    }
    for (int i = 0; i < w->n_meta; i++) {
        free(w->meta[i].key);
        free(w->meta[i].value);
    }
    free(w->entries);
    free(w->meta);
    free(w);
}

static int valid_text(const char *s)
{
    return ws_utf8_valid((const unsigned char *)s, strlen(s));
}

ws_status ws_st_writer_add(ws_st_writer *w, const char *name, ws_st_dtype dtype, int ndim,
                           const int64_t *shape, const void *data, ws_error *err)
{
    if (!name || !name[0])
        return ws_error_set(err, WS_ERR_INVALID, "safetensors: empty tensor name");
    if (strcmp(name, "__metadata__") == 0)
        return ws_error_set(err, WS_ERR_INVALID, "safetensors: '__metadata__' is reserved");
    /* The header must be UTF-8; readers reject anything else. */
    if (!valid_text(name))
        return ws_error_set(err, WS_ERR_INVALID, "safetensors: tensor name is not valid UTF-8");
    if (dtype != WS_ST_F32 && dtype != WS_ST_I32)
        return ws_error_set(err, WS_ERR_INVALID, "safetensors: tensor '%s': bad dtype %d", name,
                            (int)dtype);
    if (ndim < 0 || ndim > WS_ST_MAX_DIMS || (ndim > 0 && !shape))
        return ws_error_set(err, WS_ERR_INVALID, "safetensors: tensor '%s': bad ndim %d", name,
                            ndim);
    size_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || (double)shape[i] > WS_ST_MAX_JSON_INT)
            return ws_error_set(err, WS_ERR_INVALID,
                                "safetensors: tensor '%s': bad shape[%d] = %" PRId64, name, i,
                                shape[i]);
        uint64_t v = (uint64_t)shape[i];
        if (v != 0 && numel > SIZE_MAX / WS_ST_ELEM / v)
            return ws_error_set(err, WS_ERR_INVALID, "safetensors: tensor '%s': shape overflows",
                                name);
        numel *= (size_t)v;
    }
    size_t bytes = numel * WS_ST_ELEM;
    if ((double)(w->total + bytes) > WS_ST_MAX_JSON_INT)
        return ws_error_set(err, WS_ERR_INVALID, "safetensors: tensor '%s': file too large",
                            name);
    if (bytes > 0 && !data)
        return ws_error_set(err, WS_ERR_INVALID, "safetensors: tensor '%s': no data", name);
    /* Linear scan: files hold hundreds of tensors at most. */
    for (int i = 0; i < w->n; i++)
        if (strcmp(w->entries[i].name, name) == 0)
            return ws_error_set(err, WS_ERR_INVALID, "safetensors: duplicate tensor '%s'", name);
    if (w->n == w->cap) {
        int cap = w->cap ? w->cap * 2 : 16;
        st_entry *e = realloc(w->entries, (size_t)cap * sizeof *e);
        if (!e) return ws_error_set(err, WS_ERR_NOMEM, "safetensors: out of memory");
        w->entries = e;
        w->cap = cap;
    }
    st_entry *e = &w->entries[w->n];
    memset(e, 0, sizeof *e);
    e->name = strdup(name);
    e->data = malloc(bytes > 0 ? bytes : 1);
    if (!e->name || !e->data) {
        free(e->name);
        free(e->data);
        return ws_error_set(err, WS_ERR_NOMEM, "safetensors: out of memory for tensor '%s'",
                            name);
    }
    if (bytes > 0) memcpy(e->data, data, bytes);
    e->dtype = dtype;
    e->ndim = ndim;
    for (int i = 0; i < ndim; i++) e->shape[i] = shape[i];
    e->bytes = bytes;
    w->total += bytes;
    w->n++;
    return WS_OK;
}

ws_status ws_st_writer_meta(ws_st_writer *w, const char *key, const char *value, ws_error *err)
{
    if (!key || !value) return ws_error_set(err, WS_ERR_INVALID, "safetensors: NULL metadata");
    if (!valid_text(key) || !valid_text(value))
        return ws_error_set(err, WS_ERR_INVALID,
                            "safetensors: metadata '%.64s' is not valid UTF-8", key);
    for (int i = 0; i < w->n_meta; i++)
        if (strcmp(w->meta[i].key, key) == 0)
            return ws_error_set(err, WS_ERR_INVALID, "safetensors: duplicate metadata key '%s'",
                                key);
    if (w->n_meta == w->cap_meta) {
        int cap = w->cap_meta ? w->cap_meta * 2 : 8;
        st_meta *m = realloc(w->meta, (size_t)cap * sizeof *m);
        if (!m) return ws_error_set(err, WS_ERR_NOMEM, "safetensors: out of memory");
        w->meta = m;
        w->cap_meta = cap;
    }
    st_meta *m = &w->meta[w->n_meta];
    m->key = strdup(key);
    m->value = strdup(value);
    if (!m->key || !m->value) {
        free(m->key);
        free(m->value);
        return ws_error_set(err, WS_ERR_NOMEM, "safetensors: out of memory for metadata '%s'",
                            key);
    }
    w->n_meta++;
    return WS_OK;
}

/* A JSON integer written as text: cJSON would print large numbers in
 * exponent form, which strict readers reject. */
static cJSON *json_int(uint64_t v)
{
    char s[24];
    snprintf(s, sizeof s, "%" PRIu64, v);
    return cJSON_CreateRaw(s);
}

/* The header JSON, unpadded (caller frees), or NULL when out of memory. */
static char *build_header(const ws_st_writer *w)
{
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    int ok = 1;
    if (w->n_meta > 0) {
        cJSON *md = cJSON_AddObjectToObject(root, "__metadata__");
        ok = md != NULL;
        for (int i = 0; ok && i < w->n_meta; i++)
            ok = cJSON_AddStringToObject(md, w->meta[i].key, w->meta[i].value) != NULL;
    }
    uint64_t pos = 0;
    for (int i = 0; ok && i < w->n; i++) {
        const st_entry *e = &w->entries[i];
        /* Keys in the order the reference writer uses: dtype, shape, data_offsets. */
        cJSON *t = cJSON_AddObjectToObject(root, e->name);
        cJSON *shape = NULL, *offs = NULL;
        ok = t && cJSON_AddStringToObject(t, "dtype", dtype_name(e->dtype)) &&
             (shape = cJSON_AddArrayToObject(t, "shape")) != NULL;
        for (int k = 0; ok && k < e->ndim; k++) {
            cJSON *v = json_int((uint64_t)e->shape[k]);
            ok = v && cJSON_AddItemToArray(shape, v);
            if (!ok) cJSON_Delete(v);
        }
        if (ok) ok = (offs = cJSON_AddArrayToObject(t, "data_offsets")) != NULL;
        for (int k = 0; ok && k < 2; k++) {
            cJSON *v = json_int(k == 0 ? pos : pos + e->bytes);
            ok = v && cJSON_AddItemToArray(offs, v);
            if (!ok) cJSON_Delete(v);
        }
        pos += e->bytes;
    }
    char *s = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return s;
}

/* "<path>.tmp.<pid>.<seq>": the pid keeps processes apart, the sequence number
 * keeps two threads of one process that save the same path from sharing (and
 * interleaving writes into) one temporary file. */
static atomic_uint tmp_seq;

static ws_status fsync_dir_of(const char *path, ws_error *err)
{
    const char *slash = strrchr(path, '/');
    char *dir;
    if (!slash)
        dir = strdup(".");
    else if (slash == path)
        dir = strdup("/");
    else
        dir = strndup(path, (size_t)(slash - path));
    if (!dir) return ws_error_set(err, WS_ERR_NOMEM, "safetensors: out of memory");
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        ws_error_set(err, WS_ERR_IO, "%s: cannot open directory to sync it: %s", dir,
                     strerror(e));
        free(dir);
        return WS_ERR_IO;
    }
    /* Some file systems cannot sync a directory (EINVAL); the rename itself has
     * happened, so that is not a failure of the write. */
    if (fsync(fd) != 0 && errno != EINVAL) {
        int e = errno;
        close(fd);
        ws_error_set(err, WS_ERR_IO, "%s: directory fsync failed: %s", dir, strerror(e));
        free(dir);
        return WS_ERR_IO;
    }
    close(fd);
    free(dir);
    return WS_OK;
}

static int write_all(FILE *fp, const void *p, size_t n)
{
    return n == 0 || fwrite(p, 1, n, fp) == n;
}

ws_status ws_st_writer_write(ws_st_writer *w, const char *path, ws_error *err)
{
    char *json = build_header(w);
    if (!json) return ws_error_set(err, WS_ERR_NOMEM, "%s: out of memory building header", path);
    size_t len = strlen(json);
    /* Pad with spaces so the data section starts 8-byte aligned, as the
     * reference writer does. */
    size_t n_hdr = (len + 7) / 8 * 8;
    if (n_hdr > WS_ST_MAX_HEADER) {
        free(json);
        return ws_error_set(err, WS_ERR_INVALID,
                            "%s: header of %zu bytes exceeds the %llu-byte limit", path, n_hdr,
                            WS_ST_MAX_HEADER);
    }
    char *hdr = realloc(json, n_hdr > 0 ? n_hdr : 1);
    if (!hdr) {
        free(json);
        return ws_error_set(err, WS_ERR_NOMEM, "%s: out of memory building header", path);
    }
    memset(hdr + len, ' ', n_hdr - len);
    unsigned char len_le[8];
    for (int i = 0; i < 8; i++) len_le[i] = (unsigned char)((uint64_t)n_hdr >> (8 * i));

    size_t tlen = strlen(path) + 64;
    char *tmp = malloc(tlen);
    if (!tmp) {
        free(hdr);
        return ws_error_set(err, WS_ERR_NOMEM, "%s: out of memory", path);
    }
    snprintf(tmp, tlen, "%s.tmp.%ld.%u", path, (long)getpid(),
             atomic_fetch_add(&tmp_seq, 1u));

    const char *what = "create";
    int e = 0;
    FILE *fp = NULL;
    /* O_EXCL: never write through a file (or symlink) someone else put there.
     * A leftover of a crashed process that had our pid is ours to remove. */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST && unlink(tmp) == 0)
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        e = errno;
        ws_error_set(err, WS_ERR_IO, "%s: cannot create temporary file %s: %s", path, tmp,
                     strerror(e));
        free(tmp);
        free(hdr);
        return WS_ERR_IO;
    }
    fp = fdopen(fd, "wb");
    if (!fp) {
        e = errno;
        close(fd);
        goto fail;
    }
    what = "write";
    int ok = write_all(fp, len_le, 8) && write_all(fp, hdr, n_hdr);
    for (int i = 0; ok && i < w->n; i++)
        ok = write_all(fp, w->entries[i].data, w->entries[i].bytes);
    if (!ok || fflush(fp) != 0) {
        e = errno;
        goto fail_open;
    }
    what = "fsync";
    if (fsync(fileno(fp)) != 0) {
        e = errno;
        goto fail_open;
    }
    what = "close";
    if (fclose(fp) != 0) {
        e = errno;
        fp = NULL;
        goto fail;
    }
    fp = NULL;
    what = "rename";
    if (rename(tmp, path) != 0) {
        e = errno;
        goto fail;
    }
    free(tmp);
    free(hdr);
    /* Make the new directory entry durable too. */
    return fsync_dir_of(path, err);

fail_open:
    fclose(fp);
fail:
    unlink(tmp);
    ws_error_set(err, WS_ERR_IO, "%s: %s failed: %s", path, what,
                 e ? strerror(e) : "unknown error");
    free(tmp);
    free(hdr);
    return WS_ERR_IO;
}
