/* test_safetensors.c — the safetensors reader and writer: round trips, and a
 * table of corrupt files that the reader must reject cleanly (never crash). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/safetensors.h"
#include "test_util.h"

static char tmpdir[64];

static void path_in(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", tmpdir, name);
}

static void write_bytes(const char *path, const void *p, size_t n)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    if (n) assert_int_equal(fwrite(p, 1, n, fp), n);
    assert_int_equal(fclose(fp), 0);
}

static unsigned char *read_bytes(const char *path, size_t *n)
{
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    assert_int_equal(fseek(fp, 0, SEEK_END), 0);
    long len = ftell(fp);
    assert_true(len >= 0);
    rewind(fp);
    unsigned char *buf = malloc((size_t)len + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)len, fp), (size_t)len);
    fclose(fp);
    *n = (size_t)len;
    return buf;
}

/* Builds a file: 8-byte length (hdr_len, or strlen(json) when hdr_len is
 * UINT64_MAX), the JSON header, then n_data bytes 0, 1, 2, ... */
static void make_file(const char *path, const char *json, uint64_t hdr_len, size_t n_data)
{
    size_t j = strlen(json);
    if (hdr_len == UINT64_MAX) hdr_len = j;
    unsigned char *buf = malloc(8 + j + n_data + 1);
    assert_non_null(buf);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(hdr_len >> (8 * i));
    memcpy(buf + 8, json, j);
    for (size_t i = 0; i < n_data; i++) buf[8 + j + i] = (unsigned char)i;
    write_bytes(path, buf, 8 + j + n_data);
    free(buf);
}

static int tensor_aligned(const ws_st_tensor *t) { return ((uintptr_t)t->data % 4) == 0; }

/* ---- round trip ----------------------------------------------------------- */

static void build_sample(ws_st_writer **out)
{
    ws_st_writer *w;
    ws_error err = {0};
    assert_int_equal(ws_st_writer_new(&w), WS_OK);
    float a[6] = {0.0f, 1.5f, -2.25f, 3e-38f, -0.0f, 1e30f};
    int32_t b[4] = {0, -1, 2147483647, -2147483647 - 1};
    float s = 42.0f;
    int64_t sa[2] = {2, 3}, sb[1] = {4}, se[2] = {0, 5}, s4[4] = {1, 2, 1, 3};
    assert_int_equal(ws_st_writer_add(w, "layer.a", WS_ST_F32, 2, sa, a, &err), WS_OK);
    assert_int_equal(ws_st_writer_add(w, "ids", WS_ST_I32, 1, sb, b, &err), WS_OK);
    assert_int_equal(ws_st_writer_add(w, "scalar", WS_ST_F32, 0, NULL, &s, &err), WS_OK);
    assert_int_equal(ws_st_writer_add(w, "empty", WS_ST_F32, 2, se, NULL, &err), WS_OK);
    assert_int_equal(ws_st_writer_add(w, "four.d", WS_ST_F32, 4, s4, a, &err), WS_OK);
    assert_int_equal(ws_st_writer_meta(w, "format", "test-1", &err), WS_OK);
    assert_int_equal(ws_st_writer_meta(w, "note", "quote \" backslash \\ tab \t ünï €", &err),
                     WS_OK);
    *out = w;
}

static void test_roundtrip(void **state)
{
    (void)state;
    char path[128];
    path_in(path, sizeof path, "rt.safetensors");
    ws_st_writer *w;
    ws_error err = {0};
    build_sample(&w);
    assert_int_equal(ws_st_writer_write(w, path, &err), WS_OK);
    ws_st_writer_free(w);

    ws_st_file *f = NULL;
    ws_status st = ws_st_read(path, &f, &err);
    if (st != WS_OK) fail_msg("read: %s", err.msg);
    assert_int_equal(ws_st_count(f), 5);
    const char *names[5] = {"layer.a", "ids", "scalar", "empty", "four.d"};
    for (int i = 0; i < 5; i++) {
        assert_string_equal(ws_st_at(f, i)->name, names[i]); /* order of addition */
        assert_ptr_equal(ws_st_find(f, names[i]), ws_st_at(f, i));
        assert_true(tensor_aligned(ws_st_at(f, i)));
    }
    assert_null(ws_st_at(f, 5));
    assert_null(ws_st_at(f, -1));
    assert_null(ws_st_find(f, "nope"));

    const ws_st_tensor *t = ws_st_find(f, "layer.a");
    assert_int_equal(t->dtype, WS_ST_F32);
    assert_int_equal(t->ndim, 2);
    assert_int_equal(t->shape[0], 2);
    assert_int_equal(t->shape[1], 3);
    assert_int_equal(t->numel, 6);
    float a[6] = {0.0f, 1.5f, -2.25f, 3e-38f, -0.0f, 1e30f};
    assert_memory_equal(t->data, a, sizeof a); /* bit-exact, -0.0 included */

    t = ws_st_find(f, "ids");
    assert_int_equal(t->dtype, WS_ST_I32);
    int32_t b[4] = {0, -1, 2147483647, -2147483647 - 1};
    assert_memory_equal(t->data, b, sizeof b);

    t = ws_st_find(f, "scalar");
    assert_int_equal(t->ndim, 0);
    assert_int_equal(t->numel, 1);
    assert_true(((const float *)t->data)[0] == 42.0f);

    t = ws_st_find(f, "empty");
    assert_int_equal(t->ndim, 2);
    assert_int_equal(t->numel, 0);

    t = ws_st_find(f, "four.d");
    assert_int_equal(t->ndim, 4);
    assert_int_equal(t->shape[3], 3);
    assert_memory_equal(t->data, a, sizeof a);

    assert_string_equal(ws_st_meta(f, "format"), "test-1");
    assert_string_equal(ws_st_meta(f, "note"), "quote \" backslash \\ tab \t ünï €");
    assert_null(ws_st_meta(f, "missing"));
    ws_st_close(f);

    /* Layout: header padded with spaces to a multiple of 8, no trailing bytes. */
    size_t n;
    unsigned char *buf = read_bytes(path, &n);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = (hl << 8) | buf[i];
    assert_int_equal(hl % 8, 0);
    assert_int_equal(buf[8], '{');
    size_t data_bytes = (6 + 4 + 1 + 0 + 6) * 4;
    assert_int_equal(n, 8 + hl + data_bytes);
    size_t k = 8 + hl;
    while (buf[k - 1] == ' ') k--;
    assert_int_equal(buf[k - 1], '}');
    free(buf);
}

/* Valid files the writer would not produce but the format allows. */
static void test_valid_variants(void **state)
{
    (void)state;
    char path[128];
    path_in(path, sizeof path, "variants.safetensors");
    ws_error err = {0};
    ws_st_file *f = NULL;

    /* Empty file: no tensors, no metadata. */
    make_file(path, "{}      ", UINT64_MAX, 0);
    assert_int_equal(ws_st_read(path, &f, &err), WS_OK);
    assert_int_equal(ws_st_count(f), 0);
    assert_null(ws_st_find(f, "x"));
    ws_st_close(f);

    /* Header length 61 (not a multiple of 4): the data must still come back
     * aligned; entries listed out of offset order; JSON whitespace inside. */
    const char *j = "{ \"b\": {\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[8,12]},"
                    "\n\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    char hdr[256];
    snprintf(hdr, sizeof hdr, "%s", j);
    size_t len = strlen(hdr);
    while ((8 + len) % 4 == 0) hdr[len++] = ' ', hdr[len] = '\0';
    make_file(path, hdr, UINT64_MAX, 12);
    ws_status st = ws_st_read(path, &f, &err);
    if (st != WS_OK) fail_msg("read: %s", err.msg);
    assert_int_equal(ws_st_count(f), 2);
    assert_string_equal(ws_st_at(f, 0)->name, "b");
    const ws_st_tensor *a = ws_st_find(f, "a"), *b = ws_st_find(f, "b");
    assert_true(tensor_aligned(a) && tensor_aligned(b));
    const unsigned char want_a[8] = {0, 1, 2, 3, 4, 5, 6, 7}, want_b[4] = {8, 9, 10, 11};
    assert_memory_equal(a->data, want_a, 8);
    assert_memory_equal(b->data, want_b, 4);
    ws_st_close(f);

    /* Zero-sized tensors may share an offset. */
    make_file(path,
              "{\"e1\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
              "\"e2\":{\"dtype\":\"F32\",\"shape\":[3,0],\"data_offsets\":[0,0]},"
              "\"x\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}",
              UINT64_MAX, 4);
    st = ws_st_read(path, &f, &err);
    if (st != WS_OK) fail_msg("read: %s", err.msg);
    assert_int_equal(ws_st_count(f), 3);
    ws_st_close(f);
}

/* ---- corruption ------------------------------------------------------------ */

/* Message of the last rejection, for the corruption table's log. */
static char last_msg[256];

static void expect_reject(const char *path, ws_status code, const char *needle)
{
    ws_st_file *f = (ws_st_file *)0x1; /* must be reset to NULL */
    ws_error err = {0};
    ws_status st = ws_st_read(path, &f, &err);
    if (st == WS_OK) {
        ws_st_close(f);
        fail_msg("accepted a corrupt file (expected '%s')", needle ? needle : "");
    }
    assert_null(f);
    assert_int_equal(st, code);
    assert_int_equal(err.code, code);
    assert_true(err.msg[0] != '\0');
    if (needle && !strstr(err.msg, needle))
        fail_msg("message '%s' does not mention '%s'", err.msg, needle);
    snprintf(last_msg, sizeof last_msg, "%s", err.msg);
}

static void test_truncations(void **state)
{
    (void)state;
    char path[128], cut[128];
    path_in(path, sizeof path, "full.safetensors");
    path_in(cut, sizeof cut, "cut.safetensors");
    ws_st_writer *w;
    ws_error err = {0};
    build_sample(&w);
    assert_int_equal(ws_st_writer_write(w, path, &err), WS_OK);
    ws_st_writer_free(w);
    size_t n;
    unsigned char *buf = read_bytes(path, &n);
    /* Every proper prefix of a valid file is invalid. */
    for (size_t len = 0; len < n; len++) {
        write_bytes(cut, buf, len);
        expect_reject(cut, WS_ERR_FORMAT, NULL);
    }
    /* And so is the file with any extra byte. */
    unsigned char *longer = malloc(n + 1);
    assert_non_null(longer);
    memcpy(longer, buf, n);
    longer[n] = 0;
    write_bytes(cut, longer, n + 1);
    expect_reject(cut, WS_ERR_FORMAT, "trailing");
    free(longer);
    free(buf);
}

/* Flipping bytes anywhere must give either a valid file or a clean error. */
static void test_byte_flips(void **state)
{
    (void)state;
    char path[128], bad[128];
    path_in(path, sizeof path, "flip-src.safetensors");
    path_in(bad, sizeof bad, "flip.safetensors");
    ws_st_writer *w;
    ws_error err = {0};
    build_sample(&w);
    assert_int_equal(ws_st_writer_write(w, path, &err), WS_OK);
    ws_st_writer_free(w);
    size_t n;
    unsigned char *buf = read_bytes(path, &n);
    const unsigned char vals[] = {0x00, 0xff, '"', '[', '9', 0x80};
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < sizeof vals; k++) {
            unsigned char old = buf[i];
            if (old == vals[k]) continue;
            buf[i] = vals[k];
            write_bytes(bad, buf, n);
            ws_st_file *f = NULL;
            ws_status st = ws_st_read(bad, &f, &err);
            if (st == WS_OK) {
                /* Accepted: then it must be internally consistent. */
                for (int t = 0; t < ws_st_count(f); t++) assert_true(tensor_aligned(ws_st_at(f, t)));
                ws_st_close(f);
            } else {
                assert_null(f);
                assert_true(err.msg[0] != '\0');
            }
            buf[i] = old;
        }
    }
    free(buf);
}

typedef struct {
    const char *what;
    const char *json;
    uint64_t hdr_len; /* UINT64_MAX: strlen(json) */
    size_t n_data;
    const char *needle; /* must occur in the message */
} corrupt_case;

#define T1 "\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}"

static const corrupt_case corrupt_cases[] = {
    {"header length 2^63", "{}", 1ULL << 63, 0, "exceeds"},
    {"header length 2^64-2", "{}", UINT64_MAX - 1, 0, "exceeds"},
    {"header length 200 MB", "{}", 200000000ULL, 0, "exceeds"},
    {"header length past end", "{}", 1000, 0, "past the end"},
    {"header length 0", "{}", 0, 2, "'{'"},
    {"header not JSON", "{\"t\": ", UINT64_MAX, 0, "not valid JSON"},
    {"header JSON garbage", "{\"t\" 1}", UINT64_MAX, 0, "not valid JSON"},
    {"header is an array", "[1, 2]  ", UINT64_MAX, 0, "'{'"},
    {"header leading space", " {}", UINT64_MAX, 0, "'{'"},
    {"header trailing garbage", "{} x", UINT64_MAX, 0, "trailing"},
    {"header two objects", "{}{}", UINT64_MAX, 0, "trailing"},
    {"header NUL padding", "{}\0\0", 4, 0, "control"},
    {"header bad UTF-8", "{\"\xff\":1}", UINT64_MAX, 0, "UTF-8"},
    {"header overlong UTF-8", "{\"\xc0\xaf\":1}", UINT64_MAX, 0, "UTF-8"},
    {"entry not an object", "{\"t\": 5}", UINT64_MAX, 0, "'t'"},
    {"entry is a list", "{\"t\": [1,2]}", UINT64_MAX, 0, "'t'"},
    {"dtype F16", "{\"t\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]}}", UINT64_MAX,
     4, "F16"},
    {"dtype F64", "{\"t\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", UINT64_MAX,
     8, "F64"},
    {"dtype lower case", "{\"t\":{\"dtype\":\"f32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
     UINT64_MAX, 8, "f32"},
    {"dtype not a string", "{\"t\":{\"dtype\":32,\"shape\":[2],\"data_offsets\":[0,8]}}",
     UINT64_MAX, 8, "dtype"},
    {"dtype missing", "{\"t\":{\"shape\":[2],\"data_offsets\":[0,8]}}", UINT64_MAX, 8, "dtype"},
    {"shape missing", "{\"t\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", UINT64_MAX, 8,
     "shape"},
    {"offsets missing", "{\"t\":{\"dtype\":\"F32\",\"shape\":[2]}}", UINT64_MAX, 8,
     "data_offsets"},
    {"unknown entry key",
     "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}", UINT64_MAX, 8,
     "'x'"},
    {"duplicate entry key",
     "{\"t\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
     UINT64_MAX, 8, "duplicate"},
    {"shape not a list", "{\"t\":{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}}",
     UINT64_MAX, 8, "shape"},
    {"shape negative", "{\"t\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}",
     UINT64_MAX, 8, "shape[0]"},
    {"shape fractional", "{\"t\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,8]}}",
     UINT64_MAX, 8, "shape[0]"},
    {"shape string", "{\"t\":{\"dtype\":\"F32\",\"shape\":[1,\"2\"],\"data_offsets\":[0,8]}}",
     UINT64_MAX, 8, "shape[1]"},
    {"shape null", "{\"t\":{\"dtype\":\"F32\",\"shape\":[null],\"data_offsets\":[0,8]}}",
     UINT64_MAX, 8, "shape[0]"},
    {"five dimensions",
     "{\"t\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,2],\"data_offsets\":[0,8]}}", UINT64_MAX, 8,
     "dimensions"},
    {"shape overflow",
     "{\"t\":{\"dtype\":\"F32\",\"shape\":[1099511627776,1099511627776],\"data_offsets\":[0,8]}}",
     UINT64_MAX, 8, "overflow"},
    {"shape huge number", "{\"t\":{\"dtype\":\"F32\",\"shape\":[1e300],\"data_offsets\":[0,8]}}",
     UINT64_MAX, 8, "shape[0]"},
    {"offsets not a list", "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":8}}",
     UINT64_MAX, 8, "data_offsets"},
    {"offsets one number", "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8]}}",
     UINT64_MAX, 8, "data_offsets"},
    {"offsets three numbers",
     "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,8]}}", UINT64_MAX, 8,
     "data_offsets"},
    {"offsets negative", "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-8,0]}}",
     UINT64_MAX, 8, "data_offsets"},
    {"offsets reversed", "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}",
     UINT64_MAX, 8, "begin > end"},
    {"offsets vs shape", "{\"t\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}",
     UINT64_MAX, 8, "shape needs 12"},
    {"offsets beyond data", "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
     UINT64_MAX, 8, "beyond"},
    {"offsets not starting at 0",
     "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", UINT64_MAX, 12, "hole"},
    {"overlap",
     "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
     "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
     UINT64_MAX, 12, "overlaps"},
    {"same range twice",
     "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
     "\"b\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
     UINT64_MAX, 8, "overlaps"},
    {"hole between tensors",
     "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
     "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}}",
     UINT64_MAX, 20, "hole"},
    {"trailing data", "{" T1 "}", UINT64_MAX, 12, "trailing"},
    {"data without tensors", "{}", UINT64_MAX, 4, "trailing"},
    {"duplicate tensor", "{" T1 "," T1 "}", UINT64_MAX, 8, "duplicate tensor 't'"},
    {"metadata not an object", "{\"__metadata__\": \"x\"}", UINT64_MAX, 0, "__metadata__"},
    {"metadata number value", "{\"__metadata__\": {\"k\": 1}}", UINT64_MAX, 0, "'k'"},
    {"metadata null value", "{\"__metadata__\": {\"k\": null}}", UINT64_MAX, 0, "'k'"},
    {"metadata nested", "{\"__metadata__\": {\"k\": {\"a\":\"b\"}}}", UINT64_MAX, 0, "'k'"},
    {"metadata duplicate key", "{\"__metadata__\": {\"k\": \"a\", \"k\": \"b\"}}", UINT64_MAX, 0,
     "'k'"},
    {"metadata twice", "{\"__metadata__\": {}, \"__metadata__\": {}}", UINT64_MAX, 0,
     "__metadata__"},
};

static void test_corruption_table(void **state)
{
    (void)state;
    char path[128];
    path_in(path, sizeof path, "corrupt.safetensors");
    for (size_t i = 0; i < sizeof corrupt_cases / sizeof corrupt_cases[0]; i++) {
        const corrupt_case *c = &corrupt_cases[i];
        /* "header NUL padding" carries NULs, so give make_file the exact length. */
        if (c->hdr_len != UINT64_MAX && c->hdr_len < 64 && c->hdr_len > strlen(c->json)) {
            unsigned char buf[80];
            for (int k = 0; k < 8; k++) buf[k] = (unsigned char)(c->hdr_len >> (8 * k));
            memcpy(buf + 8, c->json, (size_t)c->hdr_len);
            write_bytes(path, buf, 8 + (size_t)c->hdr_len + c->n_data);
        } else {
            make_file(path, c->json, c->hdr_len, c->n_data);
        }
        expect_reject(path, WS_ERR_FORMAT, c->needle);
        /* The message without the path prefix. */
        const char *m = strstr(last_msg, ": ");
        print_message("  %-26s -> %s\n", c->what, m ? m + 2 : last_msg);
    }
}

static void test_read_errors(void **state)
{
    (void)state;
    char path[128];
    path_in(path, sizeof path, "does-not-exist.safetensors");
    expect_reject(path, WS_ERR_IO, "does-not-exist");
    expect_reject(tmpdir, WS_ERR_IO, "not a regular file");
    path_in(path, sizeof path, "short.safetensors");
    write_bytes(path, "\x02\0\0\0", 4);
    expect_reject(path, WS_ERR_FORMAT, "shorter");
}

/* ---- writer ----------------------------------------------------------------- */

/* Number of entries in dir whose name starts with prefix. */
static int count_entries(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) n++;
    closedir(d);
    return n;
}

static void test_atomic_writer(void **state)
{
    (void)state;
    char dir[128], path[160];
    path_in(dir, sizeof dir, "atomic");
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    ws_error err = {0};
    ws_st_writer *w;
    build_sample(&w);
    /* Twice: the second write replaces the first. */
    assert_int_equal(ws_st_writer_write(w, path, &err), WS_OK);
    assert_int_equal(ws_st_writer_write(w, path, &err), WS_OK);
    assert_int_equal(count_entries(dir, ""), 3); /* ".", "..", the file */
    assert_int_equal(count_entries(dir, "model.safetensors"), 1);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode));

    /* A relative path (directory "."), from inside the directory. */
    char cwd[512];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(dir), 0);
    ws_status s = ws_st_writer_write(w, "rel.safetensors", &err);
    assert_int_equal(chdir(cwd), 0);
    assert_int_equal(s, WS_OK);
    assert_int_equal(count_entries(dir, ""), 4);

    /* Into a directory that does not exist: WS_ERR_IO with errno text. */
    char bad[200];
    snprintf(bad, sizeof bad, "%s/no/such/dir/m.safetensors", dir);
    memset(&err, 0, sizeof err);
    assert_int_equal(ws_st_writer_write(w, bad, &err), WS_ERR_IO);
    assert_int_equal(err.code, WS_ERR_IO);
    assert_non_null(strstr(err.msg, strerror(ENOENT)));

    /* Over an existing directory: create and write succeed, rename fails; the
     * temporary file must be gone. */
    char sub[200];
    snprintf(sub, sizeof sub, "%s/subdir", dir);
    assert_int_equal(mkdir(sub, 0755), 0);
    memset(&err, 0, sizeof err);
    assert_int_equal(ws_st_writer_write(w, sub, &err), WS_ERR_IO);
    assert_non_null(strstr(err.msg, "rename"));
    assert_int_equal(count_entries(dir, "subdir.tmp"), 0);
    assert_int_equal(count_entries(dir, ""), 5);
    ws_st_writer_free(w);

    /* The replaced file is still the last good one. */
    ws_st_file *f;
    assert_int_equal(ws_st_read(path, &f, &err), WS_OK);
    assert_int_equal(ws_st_count(f), 5);
    ws_st_close(f);
}

static void test_writer_rejects(void **state)
{
    (void)state;
    ws_st_writer *w;
    ws_error err = {0};
    assert_int_equal(ws_st_writer_new(&w), WS_OK);
    float x[4] = {0};
    int64_t s1[1] = {4}, sneg[1] = {-1}, s5[5] = {1, 1, 1, 1, 4};
    assert_int_equal(ws_st_writer_add(w, "x", WS_ST_F32, 1, s1, x, &err), WS_OK);
    assert_int_equal(ws_st_writer_add(w, "x", WS_ST_F32, 1, s1, x, &err), WS_ERR_INVALID);
    assert_non_null(strstr(err.msg, "duplicate"));
    assert_int_equal(ws_st_writer_add(w, "", WS_ST_F32, 1, s1, x, &err), WS_ERR_INVALID);
    assert_int_equal(ws_st_writer_add(w, "__metadata__", WS_ST_F32, 1, s1, x, &err),
                     WS_ERR_INVALID);
    assert_int_equal(ws_st_writer_add(w, "bad\xff", WS_ST_F32, 1, s1, x, &err), WS_ERR_INVALID);
    assert_int_equal(ws_st_writer_add(w, "neg", WS_ST_F32, 1, sneg, x, &err), WS_ERR_INVALID);
    assert_int_equal(ws_st_writer_add(w, "five", WS_ST_F32, 5, s5, x, &err), WS_ERR_INVALID);
    assert_int_equal(ws_st_writer_add(w, "dt", (ws_st_dtype)7, 1, s1, x, &err), WS_ERR_INVALID);
    assert_int_equal(ws_st_writer_add(w, "nodata", WS_ST_F32, 1, s1, NULL, &err), WS_ERR_INVALID);
    assert_int_equal(ws_st_writer_meta(w, "k", "v", &err), WS_OK);
    assert_int_equal(ws_st_writer_meta(w, "k", "w", &err), WS_ERR_INVALID);
    assert_int_equal(ws_st_writer_meta(w, "k2", "\xc3", &err), WS_ERR_INVALID);
    /* The failed calls left the writer usable and unchanged. */
    char path[128];
    path_in(path, sizeof path, "rejects.safetensors");
    assert_int_equal(ws_st_writer_write(w, path, &err), WS_OK);
    ws_st_writer_free(w);
    ws_st_file *f;
    assert_int_equal(ws_st_read(path, &f, &err), WS_OK);
    assert_int_equal(ws_st_count(f), 1);
    assert_string_equal(ws_st_meta(f, "k"), "v");
    ws_st_close(f);
}

/* ---- fixture ------------------------------------------------------------- */

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ws_test_st_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return ws_test_rm_tree(tmpdir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),      cmocka_unit_test(test_valid_variants),
        cmocka_unit_test(test_truncations),    cmocka_unit_test(test_byte_flips),
        cmocka_unit_test(test_corruption_table), cmocka_unit_test(test_read_errors),
        cmocka_unit_test(test_atomic_writer),  cmocka_unit_test(test_writer_rejects),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
