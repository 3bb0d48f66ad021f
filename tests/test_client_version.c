/* test_client_version.c — which build answers: `--version` of the three
 * programs (worldstated $WS_DAEMON, worldstate-train $WS_TRAIN, the worldstate
 * CLI $WS_CLI) prints the project's version and git description, the same that
 * a live daemon serves at GET /version and as worldstate_build_info on
 * /metrics; each program's --help names --version. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ws_version.h"
#include "test_server_util.h"
#include "test_util.h"

static int run(const char *env_var, const char *args, char *out, size_t cap)
{
    return ws_test_run_prog(env_var, args, 0, out, cap);
}

static void test_programs_print_the_version(void **state)
{
    (void)state;
    static const char *const progs[][2] = {
        {"WS_DAEMON", "worldstated"}, {"WS_TRAIN", "worldstate-train"}, {"WS_CLI", "worldstate"}};
    char want[256], out[1 << 15];
    assert_true(strlen(ws_version()) > 0);
    for (int i = 0; i < 3; i++) {
        snprintf(want, sizeof want, "%s %s%s%s%s\n", progs[i][1], ws_version(),
                 ws_version_git()[0] ? " (git " : "", ws_version_git(), ws_version_git()[0] ? ")" : "");
        assert_int_equal(run(progs[i][0], "--version", out, sizeof out), 0);
        assert_string_equal(out, want);
        assert_int_equal(run(progs[i][0], "--help", out, sizeof out), 0);
        assert_non_null(strstr(out, "--version"));
    }
}

static void test_daemon_serves_its_version(void **state)
{
    (void)state;
    ws_ts_resp r;
    assert_int_equal(ws_ts_req(&ws_ts_shared, "GET", "/version", NULL, NULL, &r), 200);
    assert_non_null(r.json);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(r.json, "version")), ws_version());
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(r.json, "git")), ws_version_git());
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(r.json, "backend")), "cpu");
    assert_int_equal(cJSON_GetArraySize(r.json), 3);
    ws_ts_resp_free(&r);
    /* a probe: no key needed even once keys exist, and HEAD answers */
    assert_int_equal(ws_ts_req(&ws_ts_shared, "HEAD", "/version", NULL, NULL, &r), 200);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_req(&ws_ts_shared, "POST", "/version", NULL, "{}", &r), 405);
    ws_ts_resp_free(&r);

    char line[256];
    snprintf(line, sizeof line, "worldstate_build_info{version=\"%s\",git=\"%s\",backend=\"cpu\"} 1\n",
             ws_version(), ws_version_git());
    assert_int_equal(ws_ts_req(&ws_ts_shared, "GET", "/metrics", NULL, NULL, &r), 200);
    assert_non_null(strstr(r.body, "# TYPE worldstate_build_info gauge\n"));
    assert_non_null(strstr(r.body, line));
    ws_ts_resp_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_programs_print_the_version),
        cmocka_unit_test(test_daemon_serves_its_version),
    };
    return cmocka_run_group_tests(tests, ws_ts_shared_setup, ws_ts_shared_teardown);
}
