/* fuzz_utf8.c — the strict UTF-8 validator (base/ws_utf8.c) against an
 * independent reading of the standard: the table of well-formed byte
 * sequences (Unicode §3.9, Table 3-7), byte ranges instead of decoding. Also:
 * scrubbing leaves valid UTF-8 of the same length and keeps valid text as it
 * is; a control character is found exactly where a byte is one. */
#include <stdint.h>
#include <string.h>

#include "fuzz_check.h"
#include "base/ws_utf8.h"

/* Length of the well-formed sequence at s (n bytes left), 0 when none. */
static size_t table_len(const uint8_t *s, size_t n)
{
    static const struct {
        uint8_t lead_lo, lead_hi, second_lo, second_hi;
        size_t len;
    } rows[] = {
        {0x00, 0x7F, 0, 0, 1},       {0xC2, 0xDF, 0x80, 0xBF, 2}, {0xE0, 0xE0, 0xA0, 0xBF, 3},
        {0xE1, 0xEC, 0x80, 0xBF, 3}, {0xED, 0xED, 0x80, 0x9F, 3}, {0xEE, 0xEF, 0x80, 0xBF, 3},
        {0xF0, 0xF0, 0x90, 0xBF, 4}, {0xF1, 0xF3, 0x80, 0xBF, 4}, {0xF4, 0xF4, 0x80, 0x8F, 4},
    };
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        if (s[0] < rows[r].lead_lo || s[0] > rows[r].lead_hi) continue;
        size_t len = rows[r].len;
        if (n < len) return 0;
        if (len > 1 && (s[1] < rows[r].second_lo || s[1] > rows[r].second_hi)) return 0;
        for (size_t k = 2; k < len; k++)
            if (s[k] < 0x80 || s[k] > 0xBF) return 0;
        return len;
    }
    return 0;
}

static int table_valid(const uint8_t *s, size_t n)
{
    for (size_t i = 0, k; i < n; i += k)
        if (!(k = table_len(s + i, n - i))) return 0;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int valid = ws_utf8_valid(data, size);
    WS_FUZZ_CHECK(valid == table_valid(data, size));
    if (valid) {
        int control = 0;
        for (size_t i = 0; i < size; i++) control |= data[i] < 0x20 || data[i] == 0x7F;
        WS_FUZZ_CHECK(ws_utf8_has_control(data, size) == control);
    }
    /* ws_utf8_scrub takes a C string: the bytes up to the first NUL. */
    size_t n = strnlen((const char *)data, size);
    char *s = malloc(n + 1);
    if (!s) return 0;
    memcpy(s, data, n);
    s[n] = '\0';
    ws_utf8_scrub(s);
    WS_FUZZ_CHECK(strlen(s) == n);
    WS_FUZZ_CHECK(table_valid((const uint8_t *)s, n));
    if (table_valid(data, n)) WS_FUZZ_CHECK(memcmp(s, data, n) == 0);
    free(s);
    return 0;
}
