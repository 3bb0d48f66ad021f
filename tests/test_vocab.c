/* test_vocab.c — the symbol vocabulary's truncation (model/vocab.h): what a
 * daemon of a cluster does when another daemon stored new symbols first. */
#include <string.h>

#include "model/vocab.h"
#include "test_util.h"

static int32_t id_of(ws_vocab *v, const char *s, int add)
{
    return ws_vocab_id(v, s, strlen(s), add);
}

/* After truncating to n, ids below n keep their symbols, the symbols past it
 * are unknown again (overflow ids when looked up), and adding goes on at n. */
static void test_truncate(void **state)
{
    (void)state;
    ws_vocab *v;
    assert_int_equal(ws_vocab_new(&v, 8, 4), WS_OK);
    const char *syms[] = {"a", "b", "c", "d", "e"};
    for (int i = 0; i < 5; i++) assert_int_equal(id_of(v, syms[i], 1), i);
    ws_vocab_truncate(v, 2);
    assert_int_equal(ws_vocab_size(v), 2);
    assert_int_equal(id_of(v, "a", 0), 0);
    assert_int_equal(id_of(v, "b", 0), 1);
    assert_true(id_of(v, "c", 0) >= 8); /* gone: an overflow id */
    assert_null(ws_vocab_symbol(v, 2));
    assert_int_equal(id_of(v, "x", 1), 2); /* another process's symbol first */
    assert_int_equal(id_of(v, "c", 1), 3);
    assert_string_equal(ws_vocab_symbol(v, 3), "c");
    ws_vocab_truncate(v, 9); /* past the size: nothing to do */
    assert_int_equal(ws_vocab_size(v), 4);
    ws_vocab_free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_truncate)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
