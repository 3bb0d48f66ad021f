/* test_versions.c — model versions shared by worldstated and worldstate-train
 * (server/common/versions.h) and the data-directory lock: a published version loads
 * back with the same parameters and the database's whole vocabulary; a
 * publisher that expected another latest version records and writes nothing;
 * one that takes whatever is there gets the next number; a version's row holds
 * a path relative to the data directory and the file's SHA-256; a damaged file
 * or one of another configuration is refused at load; a second holder of
 * the data-directory lock is refused until the first lets go. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/common/common.h"
#include "test_util.h"
#include "server/common/versions.h"

static char tmpdir[64];

static ws_model *tiny_d(ws_backend *be, uint64_t seed, int d)
{
    ws_model_config c = ws_model_config_default();
    c.d = d, c.n_heads = 2, c.n_state = 4, c.n_upd_layers = 1, c.n_ext_layers = 1;
    c.vocab_cap = 8, c.n_overflow = 2;
    ws_model *m = NULL;
    ws_error err = {0};
    if (ws_model_new(&m, &c, be, seed, &err) != WS_OK) fail_msg("model: %s", err.msg);
    return m;
}

static ws_model *tiny(ws_backend *be, uint64_t seed)
{
    return tiny_d(be, seed, 16);
}

/* Model `name` recorded with m's configuration; its id. */
static int64_t model_create(ws_store *st, const char *name, ws_model *m)
{
    ws_error err = {0};
    cJSON *j = ws_model_config_to_json(ws_model_config_of(m));
    char *text = cJSON_PrintUnformatted(j);
    int64_t id = 0;
    assert_int_equal(ws_store_model_create(st, name, 0, text, NULL, &id, &err), WS_OK);
    free(text);
    cJSON_Delete(j);
    return id;
}

static ws_store *store_open(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/worldstate.db", tmpdir);
    ws_store *st = NULL;
    ws_error err = {0};
    assert_int_equal(ws_store_open(path, WS_STORE_DURABILITY_NORMAL, 1, &st, &err), WS_OK);
    return st;
}

static void params_equal(ws_model *a, ws_model *b, int want_equal)
{
    size_t n = ws_model_n_params(a);
    assert_int_equal(n, ws_model_n_params(b));
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    assert_non_null(x);
    assert_non_null(y);
    ws_backend *be = ws_model_backend(a);
    assert_int_equal(ws_backend_download(be, x, ws_model_params(a), n * sizeof *x), WS_OK);
    assert_int_equal(ws_backend_download(be, y, ws_model_params(b), n * sizeof *y), WS_OK);
    assert_int_equal(memcmp(x, y, n * sizeof *x) == 0, want_equal);
    free(x);
    free(y);
}

static void test_publish_and_load(void **state)
{
    (void)state;
    ws_error err = {0};
    char path[128];
    snprintf(path, sizeof path, "%s/models", tmpdir);
    assert_int_equal(mkdir(path, 0700), 0);
    ws_store *st = store_open();
    ws_backend *be = NULL;
    assert_int_equal(ws_backend_cpu_new(&be, 1, &err), WS_OK);
    ws_model *a = tiny(be, 1), *b = tiny(be, 2);
    int64_t id = model_create(st, "m", a);
    /* the model met "mary"; the database knows one symbol more since */
    assert_int_equal(ws_vocab_id(ws_model_vocab(a), "mary", 4, 1), 0);
    const char *syms[] = {"mary", "kitchen"};
    assert_int_equal(ws_store_vocab_append(st, id, 0, 2, syms, &err), WS_OK);

    int64_t v = 0;
    assert_int_equal(ws_srv_version_publish(st, tmpdir, "m", id, a, 0, "first", &v, &err), WS_OK);
    assert_int_equal(v, 1);
    /* b expected version 0 to be the latest: it is refused, nothing recorded or written */
    assert_int_equal(ws_srv_version_publish(st, tmpdir, "m", id, b, 0, "stale", &v, &err), WS_ERR_CONFLICT);
    ws_srv_ckpt_path(tmpdir, "m", 2, path, sizeof path);
    assert_int_equal(access(path, F_OK), -1);
    /* taking whatever is there, b becomes version 2 and current */
    assert_int_equal(ws_srv_version_publish(st, tmpdir, "m", id, b, -1, "second", &v, &err), WS_OK);
    assert_int_equal(v, 2);
    assert_int_equal(access(path, F_OK), 0);
    ws_srv_model_rows rows;
    assert_int_equal(ws_srv_model_rows_read(st, &rows, &err), WS_OK);
    assert_int_equal(rows.n, 1);
    assert_string_equal(rows.rows[0].name, "m");
    assert_int_equal(rows.rows[0].version, 2);
    ws_srv_model_rows_free(&rows);
    /* the row names the file relative to the data directory, with its digest */
    ws_store_version row = {0};
    assert_int_equal(ws_store_version_get(st, id, 2, &row, &err), WS_OK);
    assert_string_equal(row.path, "models/m-v2.safetensors");
    char sha[65];
    assert_int_equal(ws_srv_file_sha256(path, sha, &err), WS_OK);
    assert_string_equal(row.sha256, sha);
    ws_store_version_clear(&row);

    ws_model *a2 = NULL, *b2 = NULL;
    assert_int_equal(ws_srv_version_load(st, tmpdir, id, 1, be, &a2, &err), WS_OK);
    assert_int_equal(ws_srv_version_load(st, tmpdir, id, 2, be, &b2, &err), WS_OK);
    params_equal(a, a2, 1);
    params_equal(b, b2, 1);
    params_equal(a2, b2, 0);
    assert_int_equal(ws_vocab_size(ws_model_vocab(a2)), 2); /* the database's vocabulary */
    assert_int_equal(ws_vocab_id(ws_model_vocab(a2), "kitchen", 7, 0), 1);
    ws_model *none = NULL;
    assert_int_equal(ws_srv_version_load(st, tmpdir, id, 3, be, &none, &err), WS_ERR_NOTFOUND);
    assert_null(none);
    ws_model_free(a), ws_model_free(b), ws_model_free(a2), ws_model_free(b2);
    ws_backend_free(be);
    ws_store_close(st);
}

static void test_damage_refused(void **state)
{
    (void)state;
    ws_error err = {0};
    ws_store *st = store_open();
    ws_backend *be = NULL;
    assert_int_equal(ws_backend_cpu_new(&be, 1, &err), WS_OK);
    ws_model *a = tiny(be, 3), *wide = tiny_d(be, 4, 32), *got = NULL;
    int64_t id = model_create(st, "dmg", a), v = 0;
    assert_int_equal(ws_srv_version_publish(st, tmpdir, "dmg", id, a, 0, "a", &v, &err), WS_OK);
    char path[256];
    ws_srv_ckpt_path(tmpdir, "dmg", 1, path, sizeof path);
    /* flipped tensor bytes: still a valid checkpoint, but not the one recorded */
    ws_test_flip_byte(path, 8, 1);
    assert_int_equal(ws_srv_version_load(st, tmpdir, id, 1, be, &got, &err), WS_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "damaged"));
    assert_null(got);
    /* a checkpoint of another configuration, recorded as a version of this model */
    assert_int_equal(ws_srv_version_publish(st, tmpdir, "dmg", id, wide, 1, "w", &v, &err), WS_OK);
    assert_int_equal(ws_srv_version_load(st, tmpdir, id, 2, be, &got, &err), WS_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "another configuration: d is 32"));
    assert_null(got);
    ws_model_free(a), ws_model_free(wide);
    ws_backend_free(be);
    ws_store_close(st);
}

static void test_datadir_lock(void **state)
{
    (void)state;
    ws_error err = {0};
    int fd = -1, fd2 = -1;
    assert_int_equal(ws_srv_datadir_lock(tmpdir, "first", &fd, &err), WS_OK);
    assert_int_equal(ws_srv_datadir_lock(tmpdir, "second", &fd2, &err), WS_ERR_CONFLICT);
    assert_non_null(strstr(err.msg, "second"));
    assert_int_equal(close(fd), 0);
    assert_int_equal(ws_srv_datadir_lock(tmpdir, "third", &fd2, &err), WS_OK);
    assert_int_equal(close(fd2), 0);
    snprintf(tmpdir + strlen(tmpdir), sizeof tmpdir - strlen(tmpdir), "/missing");
    assert_int_equal(ws_srv_datadir_lock(tmpdir, "fourth", &fd, &err), WS_ERR_IO);
    *strrchr(tmpdir, '/') = '\0';
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ws-versions-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return ws_test_rm_tree(tmpdir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_publish_and_load),
                                       cmocka_unit_test(test_damage_refused),
                                       cmocka_unit_test(test_datadir_lock)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
