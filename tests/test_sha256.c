/* test_sha256.c — storage/sha256.c (the API keys' hashes, the backups' and the
 * version files' checksums) against the FIPS 180-4 examples, one million 'a' fed in
 * uneven pieces, and the incremental hash against the one-shot around the
 * padding edges. */
#include <stdio.h>
#include <string.h>

#include "storage/sha256.h"
#include "test_util.h"

static void test_sha256_vectors(void **state)
{
    (void)state;
    /* FIPS 180-4 examples (NIST CSRC "SHA256.pdf", "SHA2_Additional.pdf"). */
    static const struct {
        const char *msg;
        const char *hex;
    } v[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopq"
         "klmnopqrlmnopqrsmnopqrstnopqrstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
    };
    char hex[65];
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        ws_store_sha256_hex(v[i].msg, strlen(v[i].msg), hex);
        assert_string_equal(hex, v[i].hex);
    }
    /* one million 'a', fed in uneven pieces across block boundaries */
    ws_store_sha256_ctx c;
    ws_store_sha256_init(&c);
    char a[1024]; /* pieces are at most 1009 bytes */
    memset(a, 'a', sizeof a);
    size_t left = 1000000, piece = 1;
    while (left) {
        size_t n = piece < left ? piece : left;
        ws_store_sha256_update(&c, a, n);
        left -= n;
        piece = piece % 997 + 13;
    }
    unsigned char d[32];
    ws_store_sha256_final(&c, d);
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    /* lengths around the 55/56/64-byte padding edges agree with one-shot */
    unsigned char buf[130], one[32], inc[32];
    for (int i = 0; i < 130; i++) buf[i] = (unsigned char)(i * 7 + 1);
    for (size_t n = 50; n <= 130; n++) {
        ws_store_sha256(buf, n, one);
        ws_store_sha256_init(&c);
        ws_store_sha256_update(&c, buf, n / 3);
        ws_store_sha256_update(&c, buf + n / 3, n - n / 3);
        ws_store_sha256_final(&c, inc);
        assert_memory_equal(one, inc, 32);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_sha256_vectors)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
