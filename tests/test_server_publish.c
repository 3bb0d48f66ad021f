/* test_server_publish.c — model versions on disk, through the real daemon:
 * - a publish that fails (its file's path is taken by a folder) leaves the
 *   published version served: the same query on the same state answers the
 *   same p under the same model_version before and after a restart;
 * - a data directory named relatively works from another working directory,
 *   and a copy of a data directory loads its own files (the original's gone);
 * - a current version whose file is damaged (flipped bytes) or of another
 *   configuration is detected at start: the newest intact version is served,
 *   and GET /v1/models/{name} and /metrics say which version could not be;
 *   temporary checkpoint files of a writer that is gone are removed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "facts_stream.h"
#include "test_server_util.h"
#include "test_util.h"

static const char *const FLAGS[] = {"--batch-wait-us", "0", NULL};
#define TRAINING \
    "{\"enabled\":true,\"lr\":0.05,\"update_every\":1,\"publish_every\":1,\"recall_queries\":0}"

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* status.<field> of model pub (or its "version" when field is NULL). */
static double pub_status(const ws_ts_daemon *d, const char *field)
{
    ws_ts_resp r;
    assert_int_equal(ws_ts_req(d, "GET", "/v1/models/pub", NULL, NULL, &r), 200);
    const cJSON *v = field ? cJSON_GetObjectItem(cJSON_GetObjectItem(r.json, "status"), field)
                           : cJSON_GetObjectItem(r.json, "version");
    double x = v ? v->valuedouble : -1;
    ws_ts_resp_free(&r);
    return x;
}

/* Posts labelled steps to session id until status.updates reaches n, then
 * waits for the examples left to be trained on (and their versions published:
 * the status follows the publish). */
static void train_until(const ws_ts_daemon *d, const char *id, int n)
{
    char p[160];
    for (int i = 0; i < 300 && pub_status(d, "updates") < n; i++) {
        ws_ts_resp r;
        assert_int_equal(ws_ts_req(d, "POST", ws_ts_spath(p, sizeof p, id, "/steps"), NULL,
                                   "{\"instructions\":[{\"fact\":[\"a\",\"b\"],\"value\":true}],"
                                   "\"queries\":[{\"fact\":[\"a\",\"b\"]}],\"labels\":[true]}",
                                   &r),
                         200);
        ws_ts_resp_free(&r);
        sleep_ms(20);
    }
    assert_true(pub_status(d, "updates") >= n);
    for (int i = 0; i < 300 && pub_status(d, "examples_ready") > 0; i++) sleep_ms(20);
    assert_int_equal(pub_status(d, "examples_ready"), 0);
}

/* The answer to one fixed query on session id; its model_version into *version. */
static double query_p(const ws_ts_daemon *d, const char *id, int *version)
{
    char p[160];
    ws_ts_resp r;
    assert_int_equal(ws_ts_req(d, "POST", ws_ts_spath(p, sizeof p, id, "/queries"), NULL,
                               "{\"queries\":[{\"fact\":[\"a\",\"b\"]}]}", &r),
                     200);
    *version = cJSON_GetObjectItem(r.json, "model_version")->valueint;
    double x = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(r.json, "answers"), 0),
                                   "p")
                   ->valuedouble;
    ws_ts_resp_free(&r);
    return x;
}

static void test_failed_publish_serves_published(void **state)
{
    (void)state;
    ws_ts_daemon d;
    char dir[256], id[33], taken[320];
    ws_fs_start(&d, dir, "pub", TRAINING);
    assert_int_equal(ws_ts_session(&d, NULL, "pub", id), 201);
    train_until(&d, id, 1);
    int v0 = (int)pub_status(&d, "serving_version");
    assert_true(v0 >= 2);
    /* the next version's file cannot be written: its path is a folder */
    snprintf(taken, sizeof taken, "%s/models/pub-v%d.safetensors", dir, v0 + 1);
    assert_int_equal(mkdir(taken, 0700), 0);
    train_until(&d, id, (int)pub_status(&d, "updates") + 2);
    int v1, v2;
    double before = query_p(&d, id, &v1);
    assert_int_equal(v1, v0);
    assert_int_equal(ws_ts_stop(&d), 0);
    assert_int_equal(ws_ts_start(&d, dir, FLAGS), 0);
    double after = query_p(&d, id, &v2);
    assert_int_equal(v2, v0);
    fprintf(stderr, "version %d: p=%.9f before the restart, %.9f after\n", v0, before, after);
    assert_true(before == after);
    assert_int_equal(ws_ts_stop(&d), 0);
    ws_ts_cleanup(dir);
}

static void test_relative_and_copied_data_dir(void **state)
{
    (void)state;
    ws_ts_daemon d;
    char dir[256], cwd[512], copy[300], cmd[1024];
    ws_ts_tmpdir(dir, sizeof dir);
    assert_non_null(getcwd(cwd, sizeof cwd));
    /* first start from the directory's parent, named relatively */
    char *base = strrchr(dir, '/');
    *base = '\0';
    assert_int_equal(chdir(dir), 0);
    *base = '/';
    assert_int_equal(ws_ts_start(&d, base + 1, FLAGS), 0);
    assert_int_equal(ws_ts_stop(&d), 0);
    assert_int_equal(chdir(cwd), 0);
    /* again from elsewhere, named absolutely */
    assert_int_equal(ws_ts_start(&d, dir, FLAGS), 0);
    assert_int_equal(ws_ts_stop(&d), 0);
    /* a copy loads its own files: the original's are gone */
    snprintf(copy, sizeof copy, "%s-copy", dir);
    snprintf(cmd, sizeof cmd, "cp -a %s %s && rm -r %s/models", dir, copy, dir);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(ws_ts_start(&d, copy, FLAGS), 0);
    ws_ts_resp r;
    assert_int_equal(ws_ts_req(&d, "GET", "/readyz", NULL, NULL, &r), 200);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_stop(&d), 0);
    ws_ts_cleanup(copy);
    ws_ts_cleanup(dir);
}

/* Restarts d on dir and checks that pub serves version `serving` because
 * version `bad` cannot be. */
static void expect_fallback(ws_ts_daemon *d, const char *dir, int serving, int bad)
{
    assert_int_equal(ws_ts_start(d, dir, FLAGS), 0);
    assert_int_equal(pub_status(d, "serving_version"), serving);
    assert_int_equal(pub_status(d, "unloadable_version"), bad);
    ws_ts_resp r;
    char line[128];
    assert_int_equal(ws_ts_req(d, "GET", "/metrics", NULL, NULL, &r), 200);
    snprintf(line, sizeof line, "worldstate_model_unloadable_version{model=\"pub\"} %d", bad);
    assert_non_null(strstr(r.body, line));
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_req(d, "GET", "/readyz", NULL, NULL, &r), 200);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_stop(d), 0);
}

static void test_damaged_version_detected(void **state)
{
    (void)state;
    ws_ts_daemon d;
    char dir[256], id[33], path[320], other[320], tmp[400], cmd[1000];
    ws_fs_start(&d, dir, "pub", TRAINING);
    ws_ts_resp r;
    assert_int_equal(ws_ts_req(&d, "POST", "/v1/models", NULL,
                               "{\"name\":\"other\",\"config\":{\"d\":16,\"n_heads\":2,"
                               "\"n_state\":4,\"max_fact_len\":2}}",
                               &r),
                     201);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_session(&d, NULL, "pub", id), 201);
    train_until(&d, id, 1);
    int v = (int)pub_status(&d, "serving_version");
    assert_int_equal(ws_ts_stop(&d), 0);
    snprintf(path, sizeof path, "%s/models/pub-v%d.safetensors", dir, v);

    /* a checkpoint that a dead writer left half-written goes at start */
    pid_t gone = fork();
    if (gone == 0) _exit(0);
    assert_int_equal(waitpid(gone, NULL, 0), gone);
    snprintf(tmp, sizeof tmp, "%s.tmp.%d.0", path, (int)gone);
    snprintf(cmd, sizeof cmd, "cp %s %s", path, tmp);
    assert_int_equal(system(cmd), 0);

    snprintf(cmd, sizeof cmd, "cp %s %s.orig", path, path);
    assert_int_equal(system(cmd), 0);
    ws_test_flip_byte(path, 8, 1);
    expect_fallback(&d, dir, v - 1, v);
    assert_int_equal(access(tmp, F_OK), -1);

    /* another model's checkpoint in its place */
    snprintf(other, sizeof other, "%s/models/other-v1.safetensors", dir);
    snprintf(cmd, sizeof cmd, "cp %s %s", other, path);
    assert_int_equal(system(cmd), 0);
    expect_fallback(&d, dir, v - 1, v);

    /* the intact file back: served again */
    snprintf(cmd, sizeof cmd, "cp %s.orig %s", path, path);
    assert_int_equal(system(cmd), 0);
    expect_fallback(&d, dir, v, 0);
    ws_ts_cleanup(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_failed_publish_serves_published),
                                       cmocka_unit_test(test_relative_and_copied_data_dir),
                                       cmocka_unit_test(test_damaged_version_detected)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
