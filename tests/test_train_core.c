/* test_train_core.c — the core a training thread keeps to (server/engine/
 * train_core.h): /proc/stat's per-core lines read (the machine's total and
 * other lines skipped, cores past the table ignored), the move decided (to the
 * least used core only when it was used less by a quarter of the window, the
 * highest of equals, never to a core not allowed), and, on a machine of two
 * cores or more, the calling thread kept to the highest one (the next model's
 * to another) and moved off it when the rest of the machine kept it busy a
 * second (a stat file of the test's). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server/engine/train_core.h"
#include "test_util.h"

static void test_parse(void **state)
{
    (void)state;
    const char *text = "cpu  100 0 50 900 10 0 0 0 0 0\n"
                       "cpu0 10 1 5 400 7 2 3 4 0 0\n"
                       "cpu1 20 0 10 500 3 0 0 0 0 0\n"
                       "cpu3 1 1 1 1 1 1 1 1\n"
                       "intr 12345 0 0\n"
                       "ctxt 999\n";
    int64_t busy[3] = {-1, -1, -1};
    assert_int_equal(ws_train_core_parse(text, busy, 3), 4); /* cpu3 seen, not kept */
    assert_int_equal(busy[0], 10 + 1 + 5 + 2 + 3 + 4);       /* not idle nor iowait */
    assert_int_equal(busy[1], 30);
    assert_int_equal(busy[2], -1); /* no cpu2 line: untouched */
    assert_int_equal(ws_train_core_parse("intr 1 2 3\n", busy, 3), 0);
}

static void test_pick(void **state)
{
    (void)state;
    cpu_set_t all, no0;
    CPU_ZERO(&all);
    for (int k = 0; k < 4; k++) CPU_SET(k, &all);
    no0 = all;
    CPU_CLR(0, &no0);
    int64_t others[4] = {10, 90, 90, 95};
    assert_int_equal(ws_train_core_pick(others, 4, &all, 3, 100), 0); /* 85 ticks less */
    assert_int_equal(ws_train_core_pick(others, 4, &no0, 3, 100), 3); /* 5 less: stays */
    int64_t calm[4] = {60, 40, 40, 50};
    assert_int_equal(ws_train_core_pick(calm, 4, &all, 3, 100), 3); /* 10 less: stays */
    int64_t free2[4] = {0, 0, 0, 100};
    assert_int_equal(ws_train_core_pick(free2, 4, &all, 3, 100), 2); /* the highest of equals */
    assert_int_equal(ws_train_core_pick(free2, 4, &no0, 3, 100), 2);
    int64_t edge[2] = {0, 25};
    assert_int_equal(ws_train_core_pick(edge, 2, &all, 1, 100), 0); /* a quarter: moves */
    edge[1] = 24;
    assert_int_equal(ws_train_core_pick(edge, 2, &all, 1, 100), 1);
}

/* The one core the calling thread may run on; -1 when not one. */
static int only_core(void)
{
    cpu_set_t now;
    if (pthread_getaffinity_np(pthread_self(), sizeof now, &now) != 0 || CPU_COUNT(&now) != 1)
        return -1;
    for (int k = 0; k < CPU_SETSIZE; k++)
        if (CPU_ISSET(k, &now)) return k;
    return -1;
}

/* A stat file of cores 0..highest, each `base` busy ticks but `core` at
 * `base + more`. */
static void write_stat(const char *path, int highest, int core, long base, long more)
{
    FILE *f = fopen(path, "w");
    if (!f) return;
    fprintf(f, "cpu  1 2 3 4 5 6 7 8 0 0\n");
    for (int k = 0; k <= highest; k++)
        fprintf(f, "cpu%d %ld 0 0 1000 0 0 0 0 0 0\n", k, base + (k == core ? more : 0));
    fprintf(f, "intr 1 2 3\n");
    fclose(f);
}

/* What a thread of its own saw (cmocka asserts on the test's thread only). */
typedef struct {
    int cores, highest;
    int init0, core0, kept0;    /* nth 0: status, core, the thread's only core */
    int init1, core1;           /* nth 1 */
    int moved_core, moved_kept; /* after the highest was busy with other work */
    int after_look;             /* a look within the second */
} seen;

static void *kept_and_moved(void *arg)
{
    seen *s = arg;
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return NULL;
    s->cores = CPU_COUNT(&allowed);
    s->highest = CPU_SETSIZE - 1;
    while (!CPU_ISSET(s->highest, &allowed)) s->highest--;
    ws_train_core c;
    s->init0 = ws_train_core_init(&c, 0, "test", NULL);
    s->core0 = c.core, s->kept0 = only_core();
    ws_train_core_free(&c);
    if (s->cores < 2) return NULL;
    /* each init as a new thread's: with the cores the process may use */
    pthread_setaffinity_np(pthread_self(), sizeof allowed, &allowed);
    s->init1 = ws_train_core_init(&c, 1, "test", NULL); /* the next model's: one down */
    s->core1 = c.core;
    ws_train_core_free(&c);
    /* the highest busy with other work for a whole second (a stat file of the
     * test's: the machine's own would hold what other tests do beside it) */
    pthread_setaffinity_np(pthread_self(), sizeof allowed, &allowed);
    char path[] = "/tmp/test_train_core_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return NULL;
    close(fd);
    write_stat(path, s->highest, -1, 500, 0);
    ws_train_core_init(&c, 0, "test", path);
    long tick = sysconf(_SC_CLK_TCK);
    write_stat(path, s->highest, s->highest, 500, 2 * tick);
    struct timespec ts = {1, 100000000};
    nanosleep(&ts, NULL);
    ws_train_core_look(&c, "test");
    s->moved_core = c.core, s->moved_kept = only_core();
    ws_train_core_look(&c, "test"); /* within the second: no look */
    s->after_look = only_core();
    ws_train_core_free(&c);
    unlink(path);
    return NULL;
}

static void test_kept_and_moved(void **state)
{
    (void)state;
    seen s = {0};
    pthread_t th; /* a thread of its own: the test's own keeps its cores */
    assert_int_equal(pthread_create(&th, NULL, kept_and_moved, &s), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    if (s.cores < 2) {
        assert_int_equal(s.init0, -1);
        assert_int_equal(s.kept0, -1); /* left as it was */
        print_message("one core: nothing kept\n");
        return;
    }
    assert_int_equal(s.init0, 0);
    assert_int_equal(s.core0, s.highest);
    assert_int_equal(s.kept0, s.highest);
    assert_int_equal(s.init1, 0);
    assert_int_not_equal(s.core1, s.highest);
    assert_int_not_equal(s.moved_core, s.highest);
    assert_int_equal(s.moved_kept, s.moved_core);
    assert_int_equal(s.after_look, s.moved_core);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_pick),
        cmocka_unit_test(test_kept_and_moved),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
