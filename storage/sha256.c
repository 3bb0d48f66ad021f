/* sha256.c — SHA-256 per FIPS 180-4 §6.2, byte-oriented, endian-independent. */
#include "sha256.h"

#include <string.h>

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

/* One 64-byte block into the hash state (§6.2.2). */
static void compress(uint32_t h[8], const unsigned char *p)
{
    uint32_t w[64];
    for (int t = 0; t < 16; t++)
        w[t] = (uint32_t)p[4 * t] << 24 | (uint32_t)p[4 * t + 1] << 16 |
               (uint32_t)p[4 * t + 2] << 8 | (uint32_t)p[4 * t + 3];
    for (int t = 16; t < 64; t++) {
        uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
        uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
        w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int t = 0; t < 64; t++) {
        uint32_t S1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
        uint32_t ch = (e & f) ^ (~e & g);
        uint32_t t1 = k + S1 + ch + K[t] + w[t];
        uint32_t S0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
        uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
        uint32_t t2 = S0 + maj;
        k = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += k;
}

void ws_store_sha256_init(ws_store_sha256_ctx *c)
{
    static const uint32_t H0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->h, H0, sizeof H0);
    c->n_bytes = 0;
    c->n_buf = 0;
}

void ws_store_sha256_update(ws_store_sha256_ctx *c, const void *data, size_t n)
{
    const unsigned char *p = data;
    c->n_bytes += n;
    if (c->n_buf) { /* top up a partial block first */
        size_t take = 64 - c->n_buf < n ? 64 - c->n_buf : n;
        memcpy(c->buf + c->n_buf, p, take);
        c->n_buf += take;
        p += take;
        n -= take;
        if (c->n_buf < 64) return;
        compress(c->h, c->buf);
        c->n_buf = 0;
    }
    for (; n >= 64; p += 64, n -= 64) compress(c->h, p);
    memcpy(c->buf, p, n);
    c->n_buf = n;
}

void ws_store_sha256_final(ws_store_sha256_ctx *c, unsigned char out[WS_STORE_SHA256_BYTES])
{
    /* Padding (§5.1.1): 0x80, zeros to 56 mod 64, then the bit length big-endian. */
    uint64_t bits = c->n_bytes * 8;
    c->buf[c->n_buf++] = 0x80;
    if (c->n_buf > 56) {
        memset(c->buf + c->n_buf, 0, 64 - c->n_buf);
        compress(c->h, c->buf);
        c->n_buf = 0;
    }
    memset(c->buf + c->n_buf, 0, 56 - c->n_buf);
    for (int i = 0; i < 8; i++) c->buf[56 + i] = (unsigned char)(bits >> (56 - 8 * i));
    compress(c->h, c->buf);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (unsigned char)(c->h[i] >> 24);
        out[4 * i + 1] = (unsigned char)(c->h[i] >> 16);
        out[4 * i + 2] = (unsigned char)(c->h[i] >> 8);
        out[4 * i + 3] = (unsigned char)c->h[i];
    }
    memset(c, 0, sizeof *c); /* leave no key material behind in the context */
}

void ws_store_sha256(const void *data, size_t n, unsigned char out[WS_STORE_SHA256_BYTES])
{
    ws_store_sha256_ctx c;
    ws_store_sha256_init(&c);
    ws_store_sha256_update(&c, data, n);
    ws_store_sha256_final(&c, out);
}

void ws_store_sha256_hex(const void *data, size_t n, char out[2 * WS_STORE_SHA256_BYTES + 1])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char d[WS_STORE_SHA256_BYTES];
    ws_store_sha256(data, n, d);
    for (int i = 0; i < WS_STORE_SHA256_BYTES; i++) {
        out[2 * i] = hex[d[i] >> 4];
        out[2 * i + 1] = hex[d[i] & 15];
    }
    out[2 * WS_STORE_SHA256_BYTES] = '\0';
}
