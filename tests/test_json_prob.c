/* test_json_prob.c — a probability written for the API and the step log
 * (ws_srv_prob_text, server/common/log_json.c) parses back, as JSON, to the
 * very float it was: across a sweep of every 997th float in [0, 1), the
 * subnormals, the decades' edges and the values next to 0.5 and 1; with nine
 * significant digits at most, and "null" for what is not finite. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/common/common.h"
#include "test_util.h"

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static int significant_digits(const char *s)
{
    int n = 0, leading = 1;
    for (; *s && *s != 'e'; s++) {
        if (*s < '0' || *s > '9') continue;
        if (*s != '0') leading = 0;
        if (!leading) n++;
    }
    return n;
}

static void check_one(float p)
{
    char buf[WS_SRV_PROB_TEXT];
    int n = ws_srv_prob_text(p, buf);
    assert_int_equal(n, (int)strlen(buf));
    cJSON *j = cJSON_Parse(buf);
    if (!cJSON_IsNumber(j)) fail_msg("%.9g written as \"%s\": not a JSON number", (double)p, buf);
    if ((float)j->valuedouble != p || (float)strtod(buf, NULL) != p)
        fail_msg("%.9g written as \"%s\" reads back as %.9g", (double)p, buf, j->valuedouble);
    if (significant_digits(buf) > 9) fail_msg("%.9g written as \"%s\": over 9 digits", (double)p, buf);
    cJSON_Delete(j);
}

static void test_sweep(void **state)
{
    (void)state;
    uint32_t one = 0x3F800000u; /* 1.0f */
    for (uint32_t u = 0; u < one; u += 997) check_one(from_bits(u));
    for (uint32_t u = 1; u < 4096; u++) check_one(from_bits(u)); /* subnormals */
    for (int d = -45; d <= 0; d++) {
        float x = (float)pow(10.0, d);
        check_one(nextafterf(x, 0.0f));
        if (x < 1.0f) check_one(x);
        check_one(nextafterf(x, 1.0f));
    }
    check_one(nextafterf(1.0f, 0.0f));
    check_one(nextafterf(0.5f, 0.0f));
    check_one(0.5f);
    check_one(nextafterf(0.5f, 1.0f));
}

static void test_plain_values(void **state)
{
    (void)state;
    static const struct { float p; const char *text; } cases[] = {
        {0.0f, "0"}, {0.5f, "0.5"}, {0.25f, "0.25"}, {1.0f, "1"},
        {0.1f, "0.100000001"}, {1e-3f, "0.00100000005"}, {2e-7f, "2.00000002e-7"},
    };
    char buf[WS_SRV_PROB_TEXT];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ws_srv_prob_text(cases[i].p, buf);
        assert_string_equal(buf, cases[i].text);
    }
    ws_srv_prob_text(NAN, buf);
    assert_string_equal(buf, "null");
    ws_srv_prob_text(INFINITY, buf);
    assert_string_equal(buf, "null");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sweep),
        cmocka_unit_test(test_plain_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
