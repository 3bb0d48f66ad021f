/* test_config.c — worldstated's settings (server/daemon/config.h) over a
 * table of its own: a flag beats the environment, which beats the file, which
 * beats the default, each setting's source recorded; a bad file is refused
 * with FILE:LINE and the setting, a bad variable with its name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "server/daemon/config.h"

typedef struct {
    int a, b, c, d, help;
    const char *name, *config;
    char mode[16];
    char tags[64]; /* a repeatable row: each value is added */
} opts;

static ws_status parse_mode(void *value, const char *arg, ws_error *err)
{
    if (strcmp(arg, "fast") && strcmp(arg, "slow"))
        return ws_error_set(err, WS_ERR_INVALID, "wants fast or slow, got '%s'", arg);
    snprintf(value, 16, "%s", arg);
    return WS_OK;
}

static ws_status add_tag(void *value, const char *arg, ws_error *err)
{
    char *t = value;
    if (strlen(t) + strlen(arg) + 2 > 64) return ws_error_set(err, WS_ERR_INVALID, "too many");
    if (t[0]) strcat(t, ",");
    strcat(t, arg);
    return WS_OK;
}

enum { RUN = 1, OTHER = 2 };
#define O(f) offsetof(opts, f)
static const ws_cli_opt rows[] = {
    {"a", WS_OPT_INT, O(a), 0, 100, "N", "a", NULL, RUN},
    {"b-two", WS_OPT_INT, O(b), 0, 100, "N", "b", NULL, RUN},
    {"c", WS_OPT_INT, O(c), 0, 100, "N", "c", NULL, RUN},
    {"d", WS_OPT_INT, O(d), 0, 100, "N", "d", NULL, RUN},
    {"mode", WS_OPT_FN, O(mode), 0, 0, "M", "fast|slow (default slow)", parse_mode, RUN},
    {"name", WS_OPT_STR, O(name), 0, 0, "S", "a name", NULL, RUN},
    {"config", WS_OPT_STR, O(config), 0, 0, "PATH", "the file", NULL, 0},
    {"help", WS_OPT_SET, O(help), 1, 1, NULL, "help", NULL, RUN},
    {"other", WS_OPT_INT, O(d), 0, 1, "N", "another command's", NULL, OTHER},
    {"tag", WS_OPT_FN, O(tags), 0, 0, "T", "repeatable", add_tag, RUN},
};
#undef O
#define N_ROWS ((int)(sizeof rows / sizeof *rows))

static const ws_conf_spec spec = {.prog = "test",
                                  .opts = rows,
                                  .n_opts = N_ROWS,
                                  .cmd = RUN,
                                  .settings = RUN,
                                  .size = sizeof(opts),
                                  .config_flag = "config",
                                  .env_prefix = "WSTEST_",
                                  .section = "test"};

static char file[64];

static void write_file(const char *text)
{
    snprintf(file, sizeof file, "/tmp/ws_test_conf_XXXXXX");
    int fd = mkstemp(file);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

/* Loads argv (NULL-terminated, after the program name) over the defaults. */
static ws_status load(const char *const *args, opts *o, ws_conf *c, ws_error *err)
{
    char *argv[16] = {"test"};
    int argc = 1;
    for (; args && args[argc - 1]; argc++) argv[argc] = (char *)args[argc - 1];
    *o = (opts){.a = 1, .b = 1, .c = 1, .d = 1, .mode = "slow"};
    return ws_conf_load(&spec, argc, argv, o, c, err);
}

static void test_precedence(void **state)
{
    (void)state;
    write_file("# a comment\n; another\n[test]\na = 10\nb_two = 10\nc = 10\nmode = fast\n"
               "name = from file ; a comment after the value\n");
    setenv("WSTEST_B_TWO", "20", 1);
    setenv("WSTEST_C", "20", 1);
    setenv("WSTEST_OTHER", "1", 1); /* another command's row: not a setting, ignored */
    const char *args[] = {"--config", file, "--c=30", NULL};
    opts o;
    ws_conf c;
    ws_error err = {0};
    if (load(args, &o, &c, &err) != WS_OK) fail_msg("%s", err.msg);
    assert_int_equal(o.a, 10); /* file */
    assert_int_equal(o.b, 20); /* env over file */
    assert_int_equal(o.c, 30); /* flag over env over file */
    assert_int_equal(o.d, 1);  /* default */
    assert_string_equal(o.mode, "fast");
    assert_string_equal(o.name, "from file");
    assert_int_equal(c.source[0], WS_CONF_FILE);
    assert_int_equal(c.source[1], WS_CONF_ENV);
    assert_int_equal(c.source[2], WS_CONF_FLAG);
    assert_int_equal(c.source[3], WS_CONF_DEFAULT);
    assert_string_equal(c.file, file);
    char buf[64];
    ws_conf_value_text(&spec, &c, &o, 4, buf, sizeof buf);
    assert_string_equal(buf, "fast");
    ws_conf_value_text(&spec, &c, &o, 2, buf, sizeof buf);
    assert_string_equal(buf, "30");
    assert_true(ws_conf_is_setting(&spec, 0));
    assert_false(ws_conf_is_setting(&spec, 6)); /* config */
    assert_false(ws_conf_is_setting(&spec, 7)); /* a switch */
    assert_false(ws_conf_is_setting(&spec, 8)); /* another command's */
    ws_conf_env_name(&spec, "b-two", buf, sizeof buf);
    assert_string_equal(buf, "WSTEST_B_TWO");
    ws_conf_free(&c);

    /* the file named by the environment; no flag: the env's values stand */
    setenv("WSTEST_CONFIG", file, 1);
    if (load(NULL, &o, &c, &err) != WS_OK) fail_msg("%s", err.msg);
    assert_int_equal(o.a, 10);
    assert_int_equal(o.c, 20);
    ws_conf_free(&c);
    unsetenv("WSTEST_CONFIG");
    unsetenv("WSTEST_B_TWO");
    unsetenv("WSTEST_C");
    unsetenv("WSTEST_OTHER");

    /* no file: defaults, and a parsed row's default from its help */
    if (load(NULL, &o, &c, &err) != WS_OK) fail_msg("%s", err.msg);
    assert_string_equal(c.file, "");
    assert_int_equal(o.a, 1);
    ws_conf_value_text(&spec, &c, &o, 4, buf, sizeof buf);
    assert_string_equal(buf, "slow");
    ws_conf_free(&c);
    unlink(file);
}

/* A bad file: the error names FILE:LINE and what is wrong. */
static void expect_file_error(const char *text, int line, const char *what)
{
    write_file(text);
    const char *args[] = {"--config", file, NULL};
    opts o;
    ws_conf c;
    ws_error err = {0};
    assert_int_not_equal(load(args, &o, &c, &err), WS_OK);
    ws_conf_free(&c);
    char where[96];
    snprintf(where, sizeof where, "%s:%d: ", file, line);
    if (!strstr(err.msg, where) || !strstr(err.msg, what))
        fail_msg("wanted \"%s%s\" in \"%s\"", where, what, err.msg);
    unlink(file);
}

static void test_bad_files(void **state)
{
    (void)state;
    expect_file_error("a = 2\nzzz = 3\n", 2, "unknown setting 'zzz'");
    expect_file_error("a = 2\n\nb-two = x\n", 3, "b-two wants an integer in [0, 100], got 'x'");
    expect_file_error("a = 2\nc = 101\n", 2, "c wants an integer in [0, 100], got '101'");
    expect_file_error("mode = medium\n", 1, "mode: wants fast or slow, got 'medium'");
    expect_file_error("a = 2\njust words\nzzz = 1\n", 2, "not a `name = value` line");
    expect_file_error("[other]\na = 2\n", 2, "unknown section [other]");
    expect_file_error("help = 1\n", 1, "unknown setting 'help'"); /* switches are flags only */
    expect_file_error("config = x\n", 1, "unknown setting 'config'");
    char longline[400];
    snprintf(longline, sizeof longline, "a = 1\nname = %0300d\n", 0);
    expect_file_error(longline, 2, "a line longer than");
    /* the first error is the one reported */
    expect_file_error("a = 2\nzzz = 3\nyyy = 4\n", 2, "'zzz'");
}

static void test_bad_env_and_flags(void **state)
{
    (void)state;
    opts o;
    ws_conf c;
    ws_error err = {0};
    setenv("WSTEST_A", "lots", 1);
    assert_int_equal(load(NULL, &o, &c, &err), WS_ERR_INVALID);
    assert_non_null(strstr(err.msg, "WSTEST_A wants an integer in [0, 100], got 'lots'"));
    ws_conf_free(&c);
    /* a flag's error comes first (and is the command line's) */
    const char *bad[] = {"--a", "200", NULL};
    assert_int_not_equal(load(bad, &o, &c, &err), WS_OK);
    assert_int_equal(c.usage_error, 1);
    ws_conf_free(&c);
    unsetenv("WSTEST_A");
    /* a missing --config file is an error, not "no file" */
    const char *missing[] = {"--config", "/nonexistent/ws.conf", NULL};
    assert_int_equal(load(missing, &o, &c, &err), WS_ERR_IO);
    assert_non_null(strstr(err.msg, "/nonexistent/ws.conf"));
    ws_conf_free(&c);
}

/* A row whose parser adds up (a repeatable flag): its value comes from its
 * highest source alone, every line or flag of that source added. */
static void test_repeatable_row(void **state)
{
    (void)state;
    write_file("tag = a\ntag = b\n");
    opts o;
    ws_conf c;
    ws_error err = {0};
    const char *file_only[] = {"--config", file, NULL};
    if (load(file_only, &o, &c, &err) != WS_OK) fail_msg("%s", err.msg);
    assert_string_equal(o.tags, "a,b");
    ws_conf_free(&c);
    setenv("WSTEST_TAG", "c", 1);
    if (load(file_only, &o, &c, &err) != WS_OK) fail_msg("%s", err.msg);
    assert_string_equal(o.tags, "c");
    ws_conf_free(&c);
    const char *flags[] = {"--config", file, "--tag", "d", "--tag", "e", NULL};
    if (load(flags, &o, &c, &err) != WS_OK) fail_msg("%s", err.msg);
    assert_string_equal(o.tags, "d,e");
    assert_int_equal(c.source[9], WS_CONF_FLAG);
    ws_conf_free(&c);
    unsetenv("WSTEST_TAG");
    unlink(file);
}

/* The default file is read only when it exists. */
static void test_default_file(void **state)
{
    (void)state;
    ws_conf_spec s = spec;
    s.default_file = "/nonexistent/ws-default.conf";
    opts o = {.a = 1};
    ws_conf c;
    ws_error err = {0};
    char *argv[] = {"test", NULL};
    assert_int_equal(ws_conf_load(&s, 1, argv, &o, &c, &err), WS_OK);
    assert_string_equal(c.file, "");
    ws_conf_free(&c);
    write_file("a = 42\n");
    s.default_file = file;
    assert_int_equal(ws_conf_load(&s, 1, argv, &o, &c, &err), WS_OK);
    assert_int_equal(o.a, 42);
    assert_string_equal(c.file, file);
    ws_conf_free(&c);
    unlink(file);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_precedence),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_bad_env_and_flags),
        cmocka_unit_test(test_default_file),
        cmocka_unit_test(test_repeatable_row),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
