/* test_backend_plugin.c — the CUDA backend as a plugin (kernels/backend_plugin.c):
 * no plugin, a library that is not one, and one from another build are each
 * refused with a message that says so, and the automatic backend then runs on
 * the CPU saying why; the plugin this build made (where CUDA was found) loads
 * and either makes a CUDA backend or says there is no GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "test_util.h"

static ws_status load_from(const char *path, ws_backend **be, ws_error *err)
{
    assert_int_equal(setenv("WORLDSTATE_CUDA_PLUGIN", path, 1), 0);
    memset(err, 0, sizeof *err);
    return ws_backend_cuda_load(be, err);
}

static void test_refusals(void **state)
{
    (void)state;
    ws_backend *be = (ws_backend *)1;
    ws_error err;
    assert_int_equal(load_from("/nonexistent/libworldstate-cuda.so", &be, &err),
                     WS_ERR_UNSUPPORTED);
    assert_null(be);
    assert_non_null(strstr(err.msg, "no CUDA plugin at /nonexistent/libworldstate-cuda.so"));
    assert_int_equal(load_from(WS_TEST_NOT_A_PLUGIN, &be, &err), WS_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "is not a worldstate CUDA plugin"));
    /* its constructor aborts: reaching it would end the test */
    assert_int_equal(load_from(WS_TEST_WRONG_ABI, &be, &err), WS_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "another version of the backend interface"));
    assert_null(be);
}

static void test_auto_falls_back_and_says_why(void **state)
{
    (void)state;
    assert_int_equal(setenv("WORLDSTATE_CUDA_PLUGIN", WS_TEST_WRONG_ABI, 1), 0);
    ws_backend *be = NULL;
    ws_error err = {0};
    char why[256] = "unset";
    assert_int_equal(ws_backend_auto_why(&be, why, sizeof why, &err), WS_OK);
    assert_string_equal(be->ops->name, "cpu");
    assert_non_null(strstr(why, "another version"));
    ws_backend_free(be);
}

static void test_the_built_plugin(void **state)
{
    (void)state;
#ifdef WS_TEST_CUDA_PLUGIN
    ws_backend *be = NULL;
    ws_error err;
    ws_status st = load_from(WS_TEST_CUDA_PLUGIN, &be, &err);
    if (st == WS_OK) { /* a GPU: the backend works through the plugin */
        assert_string_equal(be->ops->name, "cuda");
        float *x = NULL, y[4] = {0};
        const float one[4] = {1, 2, 3, 4};
        assert_int_equal(ws_backend_alloc(be, sizeof one, (void **)&x), WS_OK);
        assert_int_equal(be->ops->upload(be, x, one, sizeof one), WS_OK);
        assert_int_equal(be->ops->download(be, y, x, sizeof y), WS_OK);
        assert_memory_equal(y, one, sizeof one);
        be->ops->release(be, x);
        ws_backend_free(be);
        printf("the CUDA plugin loaded and made a backend on the GPU\n");
        return;
    }
    /* loaded (its own checks ran), no GPU or driver here */
    assert_int_equal(st, WS_ERR_UNSUPPORTED);
    assert_null(strstr(err.msg, "no CUDA plugin"));
    assert_null(strstr(err.msg, "not a worldstate"));
    assert_null(strstr(err.msg, "another version"));
    printf("the CUDA plugin loaded; no GPU: %s\n", err.msg);
#else
    printf("skipped: this build has no CUDA plugin\n");
    skip();
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_auto_falls_back_and_says_why),
        cmocka_unit_test(test_the_built_plugin),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
