/* ws_utf8.c — strict UTF-8 (RFC 3629); see ws_utf8.h. */
#include <stdint.h>
#include <string.h>

#include "ws_utf8.h"

/* Length of the valid sequence at s (n bytes left), 0 when it is not one. */
static size_t seq_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t len;
    uint32_t min, cp;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2, min = 0x80, cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3, min = 0x800, cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4, min = 0x10000, cp = c & 0x07;
    } else {
        return 0; /* a continuation byte, C0/C1 (always overlong) or F5..FF */
    }
    if (n < len) return 0;
    for (size_t k = 1; k < len; k++) {
        unsigned cc = s[k];
        if ((cc & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (cc & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

int ws_utf8_valid(const unsigned char *s, size_t n)
{
    for (size_t i = 0, k; i < n; i += k)
        if (!(k = seq_len(s + i, n - i))) return 0;
    return 1;
}

int ws_utf8_has_control(const unsigned char *s, size_t n)
{
    /* Bytes below 0x80 are never part of a multi-byte sequence. */
    for (size_t i = 0; i < n; i++)
        if (s[i] < 0x20 || s[i] == 0x7F) return 1;
    return 0;
}

size_t ws_utf8_cut(const char *s, size_t max)
{
    size_t n = strnlen(s, max + 1);
    if (n <= max) return n;
    /* s[max] begins the first character left out unless it continues one */
    n = max;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) n--;
    return n;
}

void ws_utf8_scrub(char *s)
{
    unsigned char *u = (unsigned char *)s;
    size_t n = strlen(s);
    for (size_t i = 0, k; i < n; i += k)
        if (!(k = seq_len(u + i, n - i))) {
            u[i] = '?';
            k = 1;
        }
}
