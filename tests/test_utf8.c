/* test_utf8.c — the strict UTF-8 validator (base/ws_utf8): every refused form,
 * the edges it accepts, control characters, scrubbing of echoed bytes, and
 * cutting between characters. */
#include <stdio.h>
#include <string.h>

#include "base/ws_utf8.h"
#include "test_util.h"
#include "utf8_cases.h"

static int valid(const char *s) { return ws_utf8_valid((const unsigned char *)s, strlen(s)); }

static void test_valid(void **state)
{
    (void)state;
    for (int i = 0; i < WS_UTF8_N_BAD; i++) {
        char s[32];
        snprintf(s, sizeof s, "a%sb", ws_utf8_bad[i]);
        if (valid(s)) fail_msg("case %d accepted", i);
        if (valid(ws_utf8_bad[i])) fail_msg("case %d accepted alone", i);
    }
    for (int i = 0; i < WS_UTF8_N_GOOD; i++) assert_true(valid(ws_utf8_good[i]));
    assert_true(valid("plain ascii"));
    assert_true(ws_utf8_valid((const unsigned char *)"", 0));
}

static void test_control(void **state)
{
    (void)state;
    const unsigned char tab[] = "a\tb", del[] = "a\x7f", nul[] = {'a', 0, 'b'};
    assert_true(ws_utf8_has_control(tab, 3));
    assert_true(ws_utf8_has_control(del, 2));
    assert_true(ws_utf8_has_control(nul, 3));
    assert_false(ws_utf8_has_control((const unsigned char *)"\xC2\x80\xE2\x82\xAC", 5));
}

static void test_scrub(void **state)
{
    (void)state;
    for (int i = 0; i < WS_UTF8_N_BAD; i++) {
        char s[32];
        snprintf(s, sizeof s, "a%s\xC3\xA9", ws_utf8_bad[i]);
        size_t n = strlen(s);
        ws_utf8_scrub(s);
        assert_int_equal(strlen(s), n);
        assert_true(valid(s));
        assert_memory_equal(s + n - 2, "\xC3\xA9", 2); /* valid text kept */
    }
}

static void test_cut(void **state)
{
    (void)state;
    const char *s = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"; /* a, é, €, 😀: 1+2+3+4 bytes */
    const size_t at[] = {0, 1, 1, 3, 3, 3, 6, 6, 6, 6, 10, 10};
    for (size_t max = 0; max < sizeof at / sizeof *at; max++)
        assert_int_equal(ws_utf8_cut(s, max), at[max]);
    assert_int_equal(ws_utf8_cut("", 5), 0);
    assert_int_equal(ws_utf8_cut("abc", 2), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),
        cmocka_unit_test(test_control),
        cmocka_unit_test(test_scrub),
        cmocka_unit_test(test_cut),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
