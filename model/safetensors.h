/* safetensors.h — reading and writing the safetensors format.
 *
 * Format: 8-byte little-endian header length N, then N bytes of JSON
 * {"name": {"dtype": "F32"|"I32", "shape": [...], "data_offsets": [begin, end]},
 *  ..., "__metadata__": {"key": "string value", ...}}, then the raw little-endian
 * data; offsets are relative to the end of the header. Readers validate
 * everything (header bounds, JSON, dtypes, shapes vs offsets, overlaps, file size)
 * and reject corrupt or truncated files with a clear message. */
#ifndef WS_SAFETENSORS_H
#define WS_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "base/ws_status.h"

#define WS_ST_MAX_DIMS 4

typedef enum { WS_ST_F32 = 0, WS_ST_I32 = 1 } ws_st_dtype;

typedef struct {
    const char *name;
    ws_st_dtype dtype;
    int ndim;
    int64_t shape[WS_ST_MAX_DIMS];
    size_t numel;
    const void *data; /* points into the loaded file, little-endian, 4-byte aligned copy */
} ws_st_tensor;

typedef struct ws_st_file ws_st_file;

/* Loads and validates a whole file (rules at the top of safetensors.c; they
 * follow the reference reader, plus: F32/I32 only, unique names and keys,
 * no unknown keys in a tensor entry). Tensors keep header order; their data is
 * valid until ws_st_close. Errors: WS_ERR_IO (cannot open or read, not a
 * regular file), WS_ERR_FORMAT (corrupt, truncated, unsupported), WS_ERR_NOMEM;
 * *out is NULL on failure. */
ws_status ws_st_read(const char *path, ws_st_file **out, ws_error *err);
void ws_st_close(ws_st_file *f);
int ws_st_count(const ws_st_file *f);
const ws_st_tensor *ws_st_at(const ws_st_file *f, int i);
const ws_st_tensor *ws_st_find(const ws_st_file *f, const char *name);
/* Metadata string for key, or NULL. */
const char *ws_st_meta(const ws_st_file *f, const char *key);

/* Writer: collect tensors (data is copied) and metadata, then write atomically
 * (temporary file "<path>.tmp.<pid>.<seq>" in the same directory, fsync, rename,
 * fsync directory). Tensors are written in the order added, the header padded
 * with spaces to a multiple of 8. add/meta reject (WS_ERR_INVALID, writer
 * unchanged) empty, reserved ("__metadata__"), non-UTF-8 or duplicate names and
 * keys, and bad dtypes or shapes. write gives WS_ERR_IO with the errno text on
 * any file-system failure and leaves no temporary file behind; the writer can
 * be written again. */
typedef struct ws_st_writer ws_st_writer;
ws_status ws_st_writer_new(ws_st_writer **out);
void ws_st_writer_free(ws_st_writer *w);
ws_status ws_st_writer_add(ws_st_writer *w, const char *name, ws_st_dtype dtype, int ndim,
                           const int64_t *shape, const void *data, ws_error *err);
ws_status ws_st_writer_meta(ws_st_writer *w, const char *key, const char *value, ws_error *err);
ws_status ws_st_writer_write(ws_st_writer *w, const char *path, ws_error *err);

#endif
