/* sha256.h — SHA-256 (FIPS 180-4), used to store API keys hashed.
 *
 * Self-contained so that storage/ needs no crypto library. The keys it hashes
 * carry 256 random bits, so a plain (unsalted, fast) hash is the right tool:
 * there is nothing to brute-force, and lookup by hash stays one index probe. */
#ifndef WS_STORE_SHA256_H
#define WS_STORE_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define WS_STORE_SHA256_BYTES 32

typedef struct {
    uint32_t h[8];
    uint64_t n_bytes;    /* message length so far */
    unsigned char buf[64];
    size_t n_buf;        /* bytes waiting in buf (< 64) */
} ws_store_sha256_ctx;

void ws_store_sha256_init(ws_store_sha256_ctx *c);
void ws_store_sha256_update(ws_store_sha256_ctx *c, const void *data, size_t n);
void ws_store_sha256_final(ws_store_sha256_ctx *c, unsigned char out[WS_STORE_SHA256_BYTES]);

/* One-shot digest of data[0..n). */
void ws_store_sha256(const void *data, size_t n, unsigned char out[WS_STORE_SHA256_BYTES]);
/* One-shot digest as 64 lowercase hex digits + NUL. */
void ws_store_sha256_hex(const void *data, size_t n, char out[2 * WS_STORE_SHA256_BYTES + 1]);

#endif
