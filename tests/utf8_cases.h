/* utf8_cases.h — byte strings that strict UTF-8 (RFC 3629) refuses and some it
 * accepts at the edges: the table behind test_utf8.c (the validator) and
 * test_server_input.c (the daemon's edge). */
#ifndef WS_TEST_UTF8_CASES_H
#define WS_TEST_UTF8_CASES_H

static const char *const ws_utf8_bad[] = {
    "\xC0\x80", "\xC0\xAF", "\xC1\xBF", "\xE0\x80\x80", "\xE0\x9F\xBF", "\xF0\x80\x80\x80",
    "\xF0\x8F\xBF\xBF",                                        /* overlong forms */
    "\xED\xA0\x80", "\xED\xAD\xBF", "\xED\xAE\x80", "\xED\xBF\xBF",
    "\xED\xA0\x80\xED\xB0\x80",                                /* surrogates (CESU-8 pair) */
    "\xF4\x90\x80\x80", "\xF4\xBF\xBF\xBF",                    /* above U+10FFFF */
    "\xF5\x80\x80\x80", "\xF6\x80\x80\x80", "\xF7\xBF\xBF\xBF", /* F5..F7 leads */
    "\xF8\x88\x80\x80\x80", "\xFC\x84\x80\x80\x80\x80", "\xFE", "\xFF",
    "\x80", "\xBF",                                            /* lone continuation bytes */
    "\xC3", "\xE2\x82", "\xF0\x9F\x98",                        /* truncated sequences */
    "\xC3\x28", "\xE2\x28\xA1",                                /* bad continuation bytes */
};
#define WS_UTF8_N_BAD ((int)(sizeof ws_utf8_bad / sizeof ws_utf8_bad[0]))

/* U+00E9, U+20AC, U+D7FF, U+E000, U+FFFF, U+10000, U+1D11E, U+10FFFF */
static const char *const ws_utf8_good[] = {
    "\xC3\xA9",         "\xE2\x82\xAC",     "\xED\x9F\xBF",     "\xEE\x80\x80",
    "\xEF\xBF\xBF",     "\xF0\x90\x80\x80", "\xF0\x9D\x84\x9E", "\xF4\x8F\xBF\xBF",
};
#define WS_UTF8_N_GOOD ((int)(sizeof ws_utf8_good / sizeof ws_utf8_good[0]))

#endif
