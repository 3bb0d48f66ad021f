/* test_server_model_memory.c — issue 14, item 1, through the real daemon:
 * POST /v1/models {"config":{"d":4096}} passed the old d²·layers bound and grew
 * the daemon to 24 GB until the kernel killed it; now it is refused with 400
 * model_too_large before anything is allocated (the daemon stays small), and so
 * is a model that fits alone but not beside the loaded ones, as
 * --max-model-memory says. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/engine/engine.h"
#include "test_server_util.h"
#include "test_util.h"

/* The daemon's resident memory in KiB (0: unknown). */
static long rss_kib(const ws_ts_daemon *d)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)d->pid);
    FILE *f = fopen(path, "r");
    long kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld", &kib) == 1) break;
    if (f) fclose(f);
    return kib;
}

/* POSTs model `name` with config; the status, and the refusal's bytes left. */
static long create(const ws_ts_daemon *d, const char *name, const char *config, size_t *left)
{
    char body[256];
    snprintf(body, sizeof body, "{\"name\":\"%s\",\"config\":%s}", name, config);
    ws_ts_resp r;
    long status = ws_ts_req(d, "POST", "/v1/models", NULL, body, &r);
    if (status == 400) {
        const cJSON *e = cJSON_GetObjectItem(r.json, "error");
        const char *msg = cJSON_GetStringValue(cJSON_GetObjectItem(e, "message"));
        printf("%s: %s\n", name, msg);
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(e, "code")),
                            "model_too_large");
        unsigned long long need = 0, l = 0;
        assert_non_null(msg);
        assert_int_equal(sscanf(msg, "model too large: it needs %llu bytes of memory, %llu", &need,
                                &l),
                         2);
        if (left) *left = (size_t)l;
    }
    ws_ts_resp_free(&r);
    return status;
}

static void test_model_memory_bound(void **state)
{
    (void)state;
    char dir[256];
    ws_ts_tmpdir(dir, sizeof dir);
    ws_ts_daemon d;
    const size_t bound = (size_t)8 << 30;
    const char *const flags8g[] = {"--max-model-memory", "8G", NULL};
    assert_int_equal(ws_ts_start(&d, dir, flags8g), 0);
    size_t left = 0;
    assert_int_equal(create(&d, "huge", "{\"d\":4096}", &left), 400);
    assert_int_equal(create(&d, "vocab", "{\"vocab_cap\":16777216}", NULL), 400);
    assert_int_equal(create(&d, "raw", "{\"d_raw\":65536}", NULL), 400);
    long rss = rss_kib(&d);
    printf("daemon RSS after the refusals: %ld KiB\n", rss);
    assert_true(rss > 0 && rss < 1024 * 1024);
    assert_int_equal(ws_ts_stop(&d), 0);
    size_t used = bound - left; /* the default model */

    /* Room for one model of d=64 beside the default, not two: a bound the
     * restarted daemon takes from the flag, in bytes. */
    ws_engine_config ec = ws_engine_config_default();
    ws_model_config c = ws_model_config_default();
    c.d = 64;
    size_t bytes = 0;
    ws_error err = {0};
    assert_int_equal(ws_engine_model_bytes(&ec, &c, &bytes, &err), WS_OK);
    char arg[32];
    snprintf(arg, sizeof arg, "%zu", used + bytes + bytes / 2);
    const char *const flags[] = {"--max-model-memory", arg, NULL};
    assert_int_equal(ws_ts_start(&d, dir, flags), 0);
    assert_int_equal(create(&d, "a", "{\"d\":64}", NULL), 201);
    assert_int_equal(create(&d, "b", "{\"d\":64}", &left), 400);
    assert_true(left < bytes && left >= bytes / 2); /* it fits alone, not beside "a" */
    assert_int_equal(ws_ts_stop(&d), 0);
    ws_ts_cleanup(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_model_memory_bound)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
