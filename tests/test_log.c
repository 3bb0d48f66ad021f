/* test_log.c — the daemon's log (server/common/log.h): levels filter, a JSON
 * line parses and holds its fields, a text line is one line whatever the
 * bytes, a cut line still parses, a bad level or format is refused. */
#include <cjson/cJSON.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/ws_utf8.h"
#include "server/common/log.h"

static char path[64];
static char text[1 << 16];

/* The log into a fresh file at level and format. */
static void log_to_file(ws_log_level level, ws_log_format format)
{
    snprintf(path, sizeof path, "/tmp/ws_test_log_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    ws_error err = {0};
    assert_int_equal(ws_log_configure(level, format, path, &err), WS_OK);
}

/* Back to stderr; the file's lines into text; the number of lines. */
static int read_back(void)
{
    ws_error err = {0};
    assert_int_equal(ws_log_configure(WS_LOG_INFO, WS_LOG_TEXT, NULL, &err), WS_OK);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    unlink(path);
    int lines = 0;
    for (size_t i = 0; i < n; i++) lines += text[i] == '\n';
    return lines;
}

static void test_levels_filter(void **state)
{
    (void)state;
    log_to_file(WS_LOG_WARN, WS_LOG_TEXT);
    assert_true(ws_log_enabled(WS_LOG_ERROR));
    assert_true(ws_log_enabled(WS_LOG_WARN));
    assert_false(ws_log_enabled(WS_LOG_INFO));
    ws_log(WS_LOG_ERROR, "an error %d", 1);
    ws_log(WS_LOG_WARN, "a warning");
    ws_log(WS_LOG_INFO, "an info line");
    ws_log(WS_LOG_DEBUG, "a debug line");
    assert_int_equal(read_back(), 2);
    assert_non_null(strstr(text, " error an error 1\n"));
    assert_non_null(strstr(text, " warn a warning\n"));
    assert_null(strstr(text, "info line"));
    assert_null(strstr(text, "debug line"));
    /* a timestamp first: 2026-11-24T05:47:45.123Z */
    int y, mo, d, h, mi, s, ms;
    char z;
    assert_int_equal(
        sscanf(text, "%4d-%2d-%2dT%2d:%2d:%2d.%3d%c", &y, &mo, &d, &h, &mi, &s, &ms, &z), 8);
    assert_int_equal(z, 'Z');

    log_to_file(WS_LOG_DEBUG, WS_LOG_TEXT);
    ws_log(WS_LOG_DEBUG, "a debug line");
    assert_int_equal(read_back(), 1);
    assert_non_null(strstr(text, " debug a debug line\n"));
}

static void test_json_line_parses(void **state)
{
    (void)state;
    log_to_file(WS_LOG_INFO, WS_LOG_JSON);
    /* a client's bytes: a quote, a newline, a control byte, invalid UTF-8 */
    ws_log_field f[] = {WS_LOG_STR("method", "GET"),
                        WS_LOG_STR("route", "/v1/sessions/{id}"),
                        WS_LOG_NUM("status", 404),
                        WS_LOG_NUM("ms", 1.23456),
                        WS_LOG_STR("session", "a\"b\nc\x01\xff"),
                        WS_LOG_STR("tenant", NULL)};
    ws_log_kv(WS_LOG_INFO, "request", f, 6);
    assert_int_equal(read_back(), 1);
    assert_true(ws_utf8_valid((const unsigned char *)text, strlen(text)));
    cJSON *j = cJSON_Parse(text);
    assert_non_null(j);
    assert_string_equal(cJSON_GetObjectItem(j, "level")->valuestring, "info");
    assert_string_equal(cJSON_GetObjectItem(j, "msg")->valuestring, "request");
    assert_string_equal(cJSON_GetObjectItem(j, "method")->valuestring, "GET");
    assert_string_equal(cJSON_GetObjectItem(j, "route")->valuestring, "/v1/sessions/{id}");
    assert_int_equal(cJSON_GetObjectItem(j, "status")->valueint, 404);
    assert_float_equal(cJSON_GetObjectItem(j, "ms")->valuedouble, 1.235, 1e-9);
    assert_string_equal(cJSON_GetObjectItem(j, "session")->valuestring, "a\"b\nc\x01?");
    assert_null(cJSON_GetObjectItem(j, "tenant")); /* NULL: left out */
    assert_true(strlen(cJSON_GetObjectItem(j, "ts")->valuestring) == 24);
    cJSON_Delete(j);
}

/* A message far over the line's size is cut, and the line still parses. */
static void test_long_line_cut_and_whole(void **state)
{
    (void)state;
    static char big[20000];
    memset(big, '"', sizeof big - 1); /* each escapes to two bytes */
    big[sizeof big - 1] = '\0';
    log_to_file(WS_LOG_INFO, WS_LOG_JSON);
    ws_log_kv(WS_LOG_INFO, "long", (ws_log_field[]){WS_LOG_STR("v", big), WS_LOG_NUM("n", 7)}, 2);
    assert_int_equal(read_back(), 1);
    assert_true(strlen(text) <= 8192);
    cJSON *j = cJSON_Parse(text);
    assert_non_null(j);
    assert_string_equal(cJSON_GetObjectItem(j, "msg")->valuestring, "long");
    cJSON_Delete(j);
    /* plain text and 2-byte characters, cut wherever the line ends: still one
     * line, still UTF-8, still JSON */
    for (size_t i = 0; i + 2 < sizeof big; i += 2) memcpy(big + i, "\xc3\xa9", 2);
    big[sizeof big - 2] = '\0';
    log_to_file(WS_LOG_INFO, WS_LOG_JSON);
    ws_log_kv(WS_LOG_INFO, "x", (ws_log_field[]){WS_LOG_STR("k", "v"), WS_LOG_STR("v", big)}, 2);
    assert_int_equal(read_back(), 1);
    assert_true(strlen(text) <= 8192 && strlen(text) > 8000);
    assert_true(ws_utf8_valid((const unsigned char *)text, strlen(text)));
    j = cJSON_Parse(text);
    assert_non_null(j);
    assert_string_equal(cJSON_GetObjectItem(j, "k")->valuestring, "v");
    cJSON_Delete(j);
}

/* Text: a value with spaces is quoted, a newline in a message does not make
 * a second line. */
static void test_text_one_line(void **state)
{
    (void)state;
    log_to_file(WS_LOG_INFO, WS_LOG_TEXT);
    ws_log_field f[] = {WS_LOG_STR("auth", "open mode"), WS_LOG_STR("route", "/healthz"),
                        WS_LOG_NUM("status", 200)};
    ws_log_kv(WS_LOG_INFO, "two\nlines", f, 3);
    assert_int_equal(read_back(), 1);
    assert_non_null(
        strstr(text, " info two\\nlines auth=\"open mode\" route=/healthz status=200\n"));
}

static void test_names(void **state)
{
    (void)state;
    ws_error err = {0};
    ws_log_level l;
    ws_log_format f;
    assert_int_equal(ws_log_level_parse("debug", &l, &err), WS_OK);
    assert_int_equal(l, WS_LOG_DEBUG);
    assert_int_equal(ws_log_level_parse("verbose", &l, &err), WS_ERR_INVALID);
    assert_non_null(strstr(err.msg, "error|warn|info|debug"));
    assert_int_equal(ws_log_format_parse("json", &f, &err), WS_OK);
    assert_int_equal(f, WS_LOG_JSON);
    assert_int_equal(ws_log_format_parse("xml", &f, &err), WS_ERR_INVALID);
    /* a log file that cannot be opened leaves the log as it was */
    assert_int_equal(ws_log_configure(WS_LOG_DEBUG, WS_LOG_JSON, "/nonexistent/dir/log", &err),
                     WS_ERR_IO);
    assert_non_null(strstr(err.msg, "/nonexistent/dir/log"));
    assert_false(ws_log_enabled(WS_LOG_DEBUG));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_levels_filter),
        cmocka_unit_test(test_json_line_parses),
        cmocka_unit_test(test_long_line_cut_and_whole),
        cmocka_unit_test(test_text_one_line),
        cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
