/* ws_utf8.h — the one UTF-8 validator of the tree (RFC 3629, strict): what a
 * client sends is checked with it at the edge, and checkpoints (whose JSON
 * headers safetensors readers parse as strict UTF-8) are checked with it before
 * writing, so a string the daemon accepted can always be saved and served. */
#ifndef WS_UTF8_H
#define WS_UTF8_H

#include <stddef.h>

/* 1 when the n bytes at s are strict UTF-8: no overlong forms, no surrogates
 * (U+D800..U+DFFF), nothing beyond U+10FFFF, no C0/C1/F5..FF lead bytes, no
 * truncated sequence (as Rust's str::from_utf8, which the safetensors reference
 * reader applies). */
int ws_utf8_valid(const unsigned char *s, size_t n);
/* 1 when the n bytes at s (valid UTF-8) hold a control character: U+0000..U+001F
 * or U+007F. */
int ws_utf8_has_control(const unsigned char *s, size_t n);
/* Replaces, in place, every byte of s (NUL-terminated) that is not part of a
 * valid UTF-8 sequence with '?': text that echoes client bytes (an error
 * message) stays valid UTF-8, and so valid JSON once escaped. */
void ws_utf8_scrub(char *s);
/* The length of the longest prefix of s (NUL-terminated, valid UTF-8) of at
 * most max bytes that ends between two characters: where s is kept in a
 * buffer too small for it, it is cut there, never inside a character. */
size_t ws_utf8_cut(const char *s, size_t max);

#endif
