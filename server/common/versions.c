/* versions.c — see versions.h. */
#include "versions.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "model/checkpoint.h"
#include "storage/sha256.h"
#include "limits.h"

static ws_status collect(void *ctx, const ws_store_model *m)
{
    ws_srv_model_rows *r = ctx;
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 8;
        ws_srv_model_row *t = realloc(r->rows, sizeof *t * (size_t)cap);
        if (!t) return WS_ERR_NOMEM;
        r->rows = t, r->cap = cap;
    }
    ws_srv_model_row *row = &r->rows[r->n];
    row->id = m->id, row->version = m->current_version;
    strcpy(row->name, m->name);
    row->training = strdup(m->training_json ? m->training_json : "{}");
    if (!row->training) return WS_ERR_NOMEM;
    r->n++;
    return WS_OK;
}

ws_status ws_srv_model_rows_read(ws_store *st, ws_srv_model_rows *out, ws_error *err)
{
    memset(out, 0, sizeof *out);
    ws_status s = ws_store_model_list(st, collect, out, err);
    if (s == WS_ERR_NOMEM) ws_error_set(err, s, "out of memory");
    return s;
}

void ws_srv_model_rows_free(ws_srv_model_rows *r)
{
    for (int i = 0; i < r->n; i++) free(r->rows[i].training);
    free(r->rows);
    memset(r, 0, sizeof *r);
}

const char *ws_srv_origin_of_note(const char *note)
{
    if (!note) return "unknown";
    if (!strcmp(note, WS_SRV_NOTE_CREATED)) return "random";
    if (!strcmp(note, WS_SRV_NOTE_SHIPPED)) return "shipped";
    if (!strcmp(note, WS_SRV_NOTE_IMPORTED)) return "imported";
    return "unknown";
}

int ws_srv_config_diff(const ws_model_config *ca, const char *a_name, const ws_model_config *cb,
                       const char *b_name, char *why, size_t cap)
{
    /* Through the JSON form: it names every field, and compares values rather
     * than bytes (no padding or float sign-of-zero surprises). */
    cJSON *a = ws_model_config_to_json(ca), *b = ws_model_config_to_json(cb);
    int same = a && b;
    snprintf(why, cap, "%s", same ? "" : "out of memory");
    for (const cJSON *x = a ? a->child : NULL; same && x; x = x->next) {
        const cJSON *y = cJSON_GetObjectItemCaseSensitive(b, x->string);
        if (y && cJSON_Compare(x, y, 1)) continue;
        char *xs = cJSON_PrintUnformatted(x), *ys = y ? cJSON_PrintUnformatted(y) : NULL;
        snprintf(why, cap, "%s is %s in %s, %s in %s", x->string, xs ? xs : "?", a_name,
                 ys ? ys : "absent", b_name);
        free(xs);
        free(ys);
        same = 0;
    }
    if (same && cJSON_GetArraySize(a) != cJSON_GetArraySize(b)) {
        snprintf(why, cap, "the field lists differ");
        same = 0;
    }
    cJSON_Delete(a);
    cJSON_Delete(b);
    return same;
}

void ws_srv_ckpt_relpath(const char *name, int64_t version, char *out, size_t cap)
{
    snprintf(out, cap, "models/%s-v%lld.safetensors", name, (long long)version);
}

void ws_srv_ckpt_resolve(const char *data_dir, const char *recorded, char *out, size_t cap)
{
    if (recorded[0] == '/')
        snprintf(out, cap, "%s", recorded);
    else
        snprintf(out, cap, "%s/%s", data_dir, recorded);
}

void ws_srv_ckpt_path(const char *data_dir, const char *name, int64_t version, char *out,
                      size_t cap)
{
    char rel[WS_STORE_NAME_MAX + 64];
    ws_srv_ckpt_relpath(name, version, rel, sizeof rel);
    ws_srv_ckpt_resolve(data_dir, rel, out, cap);
}

ws_status ws_srv_file_sha256(const char *path, char hex[65], ws_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ws_error_set(err, WS_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    enum { CHUNK = 1 << 20 };
    unsigned char *buf = malloc(CHUNK);
    if (!buf) {
        close(fd);
        return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    }
    ws_store_sha256_ctx c;
    ws_store_sha256_init(&c);
    ssize_t n;
    while ((n = read(fd, buf, CHUNK)) != 0) {
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;
        ws_store_sha256_update(&c, buf, (size_t)n);
    }
    int e = errno;
    free(buf);
    close(fd); /* read-only: nothing to lose on close */
    if (n < 0) return ws_error_set(err, WS_ERR_IO, "cannot read %s: %s", path, strerror(e));
    unsigned char d[WS_STORE_SHA256_BYTES];
    ws_store_sha256_final(&c, d);
    for (int i = 0; i < WS_STORE_SHA256_BYTES; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
    return WS_OK;
}

ws_status ws_srv_version_record(ws_store *st, const char *data_dir, const char *name,
                                int64_t model_id, int64_t version, const char *sha256,
                                const char *note, ws_error *err)
{
    char rel[WS_STORE_NAME_MAX + 64], path[WS_SRV_PATH_MAX + 128], sha[65];
    ws_srv_ckpt_relpath(name, version, rel, sizeof rel);
    if (!sha256) {
        ws_srv_ckpt_resolve(data_dir, rel, path, sizeof path);
        WS_TRY(ws_srv_file_sha256(path, sha, err));
        sha256 = sha;
    }
    return ws_store_version_add(st, model_id, version, rel, sha256, note, err);
}

typedef struct {
    ws_vocab *v;
    ws_error *err;
} vocab_ctx;

static ws_status vocab_one(void *ctx, int64_t id, const char *sym, size_t len)
{
    vocab_ctx *c = ctx;
    if (ws_vocab_id(c->v, sym, len, 1) != id)
        return ws_error_set(c->err, WS_ERR_FORMAT,
                            "vocabulary of the checkpoint disagrees with the database at id %lld",
                            (long long)id);
    return WS_OK;
}

ws_status ws_srv_vocab_extend(ws_store *st, int64_t model_id, ws_model *m, ws_error *err)
{
    vocab_ctx vc = {ws_model_vocab(m), err};
    return ws_store_vocab_load(st, model_id, vocab_one, &vc, err);
}

/* The file at path is the one recorded: same SHA-256 (rows of older builds
 * have none and pass). */
static ws_status check_sha256(const char *path, const char *recorded, ws_error *err)
{
    if (!recorded[0]) return WS_OK;
    char sha[65];
    WS_TRY(ws_srv_file_sha256(path, sha, err));
    if (strcmp(sha, recorded) != 0)
        return ws_error_set(err, WS_ERR_FORMAT,
                            "checkpoint %s is damaged: its SHA-256 is %.12s..., recorded %.12s...",
                            path, sha, recorded);
    return WS_OK;
}

/* m's configuration is the one the model was created with. */
static ws_status check_config(ws_store *st, int64_t model_id, const ws_model *m, const char *path,
                              ws_error *err)
{
    ws_store_model row = {0};
    WS_TRY(ws_store_model_get(st, model_id, &row, err));
    cJSON *j = cJSON_Parse(row.config_json);
    ws_store_model_clear(&row);
    ws_model_config rec;
    ws_status s = j ? ws_model_config_from_json(j, 1, &rec, err)
                    : ws_error_set(err, WS_ERR_FORMAT, "the model's recorded config is not JSON");
    cJSON_Delete(j);
    char why[256];
    if (s == WS_OK && !ws_srv_config_diff(ws_model_config_of(m), "the checkpoint", &rec,
                                          "the model", why, sizeof why))
        s = ws_error_set(err, WS_ERR_FORMAT, "checkpoint %s is of another configuration: %s", path,
                         why);
    return s;
}

ws_status ws_srv_version_load(ws_store *st, const char *data_dir, int64_t model_id, int64_t version,
                              ws_backend *be, ws_model **out, ws_error *err)
{
    *out = NULL;
    ws_store_version v = {0};
    WS_TRY(ws_store_version_get(st, model_id, version, &v, err));
    char path[WS_SRV_PATH_MAX + 128];
    ws_srv_ckpt_resolve(data_dir, v.path, path, sizeof path);
    ws_model *m = NULL;
    ws_status s = check_sha256(path, v.sha256, err);
    ws_store_version_clear(&v);
    if (s == WS_OK) s = ws_checkpoint_load(&m, path, be, err);
    if (s == WS_OK) s = check_config(st, model_id, m, path, err);
    if (s == WS_OK) s = ws_srv_vocab_extend(st, model_id, m, err);
    if (s != WS_OK) {
        ws_model_free(m);
        return s;
    }
    *out = m;
    return WS_OK;
}

ws_status ws_srv_vocab_store(ws_store *st, int64_t model_id, ws_model *m, int from, ws_error *err)
{
    ws_vocab *v = ws_model_vocab(m);
    int n = ws_vocab_size(v) - from;
    if (from < 0 || n <= 0) return WS_OK;
    const char **syms = malloc(sizeof *syms * (size_t)n);
    if (!syms) return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) syms[i] = ws_vocab_symbol(v, from + i);
    ws_status s = ws_store_vocab_append(st, model_id, from, (size_t)n, syms, err);
    free(syms);
    return s;
}

ws_status ws_srv_version_publish_vocab(ws_store *st, const char *data_dir, const char *name,
                                       int64_t model_id, ws_model *m, int64_t expect_prev,
                                       const char *note, int vocab_from, int64_t *version_out,
                                       ws_error *err)
{
    int64_t max = 0;
    WS_TRY(ws_store_begin(st, err));
    ws_status s = ws_store_version_max(st, model_id, &max, err);
    if (s == WS_OK && expect_prev >= 0 && max != expect_prev)
        s = ws_error_set(err, WS_ERR_CONFLICT,
                         "model %s: version %lld was published meanwhile (expected %lld)", name,
                         (long long)max, (long long)expect_prev);
    char path[4096];
    ws_srv_ckpt_path(data_dir, name, max + 1, path, sizeof path);
    int written = 0;
    if (s == WS_OK) s = ws_srv_vocab_store(st, model_id, m, vocab_from, err);
    if (s == WS_OK) s = ws_checkpoint_save(m, path, 1, err);
    if (s == WS_OK) written = 1;
    if (s == WS_OK)
        s = ws_srv_version_record(st, data_dir, name, model_id, max + 1, NULL, note, err);
    if (s == WS_OK) s = ws_store_commit(st, err);
    if (s != WS_OK) {
        ws_store_rollback(st, NULL); /* the failure in err is the one to report */
        /* Nobody refers to the file: it goes, so a failed publish leaves nothing. */
        if (written) unlink(path);
    }
    if (s == WS_OK) *version_out = max + 1;
    return s;
}

ws_status ws_srv_version_publish(ws_store *st, const char *data_dir, const char *name,
                                 int64_t model_id, ws_model *m, int64_t expect_prev,
                                 const char *note, int64_t *version_out, ws_error *err)
{
    return ws_srv_version_publish_vocab(st, data_dir, name, model_id, m, expect_prev, note, -1,
                                        version_out, err);
}
