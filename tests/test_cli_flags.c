/* test_cli_flags.c — the command lines of worldstate-train ($WS_TRAIN) and
 * worldstated ($WS_DAEMON), run for real, and their parser (server/common/cli.h)
 * in process. worldstate-train's model flags come from the config's one field
 * table (ws_model_config_fields): every field is a flag (its key with dashes,
 * and the older alias where it has one) that sets that field, refuses a value
 * out of the field's range with a message naming the flag, and uses the very
 * bounds JSON uses. worldstated's --help lists every flag api.md documents. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/backend.h"
#include "model/checkpoint.h"
#include "server/common/cli.h"
#include "test_util.h"

#define N WS_MODEL_CONFIG_N_FIELDS

/* The flag of field i: its key with dashes. */
static void flag_of(int i, char *out, size_t cap)
{
    snprintf(out, cap, "--%s", ws_model_config_fields[i].key);
    for (char *p = out; *p; p++)
        if (*p == '_') *p = '-';
}

/* A value just past the field's range, as a flag's text. */
static void past_range(int i, char *out, size_t cap)
{
    const ws_model_config_field *f = &ws_model_config_fields[i];
    if (f->type == WS_CFG_NAME) snprintf(out, cap, "no-such-%s", f->key);
    else if (f->type == WS_CFG_FLOAT) snprintf(out, cap, "%g", f->hi * 2);
    else snprintf(out, cap, "%.0f", f->hi + 1);
}

static int run(const char *env_var, const char *args, char *out, size_t cap)
{
    return ws_test_run_prog(env_var, args, 1, out, cap);
}

/* In process: each spelling of each field's flag sets that field (to the top of
 * its range, or its last name); --no-X sets a [0, 1] field to 0. */
static void test_every_field_has_a_flag_that_sets_it(void **state)
{
    (void)state;
    for (int i = 0; i < N; i++) {
        const ws_model_config_field *f = &ws_model_config_fields[i];
        char flags[2][48], value[48];
        flag_of(i, flags[0], sizeof flags[0]);
        snprintf(flags[1], sizeof flags[1], "--%s", f->alias ? f->alias : f->key);
        if (f->type == WS_CFG_NAME) snprintf(value, sizeof value, "%s", f->names[f->n_names - 1]);
        else snprintf(value, sizeof value, "%.17g", f->hi);
        for (int k = 0; k < (f->alias ? 2 : 1); k++) {
            ws_model_config mc = ws_model_config_default();
            char *argv[] = {"train", flags[k], value, NULL};
            assert_int_equal(ws_cli_parse(3, argv, "test", NULL, 0, 0, NULL, &mc), 3);
            assert_true(ws_model_config_get(&mc, i) == (f->type == WS_CFG_FLOAT
                                                            ? (double)(float)f->hi : f->hi));
        }
        if (f->type == WS_CFG_INT && f->lo == 0 && f->hi == 1) {
            ws_model_config mc = ws_model_config_default();
            ws_model_config_set(&mc, i, 1);
            char no[sizeof flags[0] + 4];
            snprintf(no, sizeof no, "--no-%.40s", flags[0] + 2);
            char *argv[] = {"train", no, NULL};
            assert_int_equal(ws_cli_parse(2, argv, "test", NULL, 0, 0, NULL, &mc), 2);
            assert_true(ws_model_config_get(&mc, i) == 0);
        }
    }
}

/* The CLI and JSON refuse the same value past a field's range, and name the
 * same range: one table gives both their bounds. */
static void test_cli_and_json_share_bounds(void **state)
{
    (void)state;
    for (int i = 0; i < N; i++) {
        const ws_model_config_field *f = &ws_model_config_fields[i];
        char flag[48], value[48];
        flag_of(i, flag, sizeof flag);
        past_range(i, value, sizeof value);
        ws_model_config mc = ws_model_config_default();
        ws_error cli_err = {0}, json_err = {0};
        assert_int_equal(ws_model_config_parse(&mc, i, value, flag, &cli_err), WS_ERR_INVALID);
        cJSON *o = cJSON_CreateObject();
        if (f->type == WS_CFG_NAME) cJSON_AddStringToObject(o, f->key, value);
        else cJSON_AddNumberToObject(o, f->key, strtod(value, NULL));
        assert_int_equal(ws_model_config_from_json(o, 0, &mc, &json_err), WS_ERR_INVALID);
        cJSON_Delete(o);
        /* the same words after the name: "must be in [lo, hi], got v" */
        const char *tail = cli_err.msg + strlen(flag);
        assert_non_null(strstr(json_err.msg, f->key));
        assert_string_equal(tail, json_err.msg + strlen(json_err.msg) - strlen(tail));
    }
}

/* The real binary refuses each field's out-of-range value before building a
 * model (exit 2), with a message naming the flag and the range. */
static void test_binary_refuses_out_of_range(void **state)
{
    (void)state;
    char out[1 << 14];
    for (int i = 0; i < N; i++) {
        char flag[48], value[48], args[160];
        flag_of(i, flag, sizeof flag);
        past_range(i, value, sizeof value);
        snprintf(args, sizeof args, "train %s %s --iters 1", flag, value);
        assert_int_equal(run("WS_TRAIN", args, out, sizeof out), 2);
        char want[96];
        snprintf(want, sizeof want, "worldstate-train: %s must ", flag);
        if (!strstr(out, want)) fail_msg("%s: %s", args, out);
        const ws_model_config_field *f = &ws_model_config_fields[i];
        if (f->type == WS_CFG_INT) {
            snprintf(want, sizeof want, "[%.0f, %.0f]", f->lo, f->hi);
            assert_non_null(strstr(out, want));
        }
    }
    assert_int_equal(run("WS_TRAIN", "train --no-such-flag 1", out, sizeof out), 2);
    assert_non_null(strstr(out, "--no-such-flag"));
}

/* One run of the binary with every field away from its default, through the
 * documented spellings (aliases where there are), then through the keys' own:
 * the checkpoint's config holds each value. */
static void test_binary_sets_every_field(void **state)
{
    (void)state;
    static const struct {
        const char *key, *value;
    } want[N] = {
        {"d", "48"}, {"n_heads", "3"}, {"n_state", "8"}, {"n_upd_layers", "1"},
        {"n_ext_layers", "1"}, {"max_fact_len", "3"}, {"vocab_cap", "100"},
        {"n_overflow", "8"}, {"d_raw", "5"}, {"state_norm", "0"},
        {"upd_mixer", "compositional"}, {"ext_mixer", "rn"}, {"s2_virtual", "3"},
        {"s2_heads", "2"}, {"s2_dim", "16"}, {"s2_tau", "0.5"}, {"comp_searches", "8"},
        {"comp_retrievals", "3"}, {"comp_dim", "8"}, {"rn_width", "32"}, {"rn_layers", "3"},
        {"symbol_code", "table"}, {"empty_steps", "update"}, {"views", "2"},
    };
    char path[] = "/tmp/ws_train_cli_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    for (int spelling = 0; spelling < 2; spelling++) {
        char args[2048] = "train --iters 1 --batch 1 --no-eval --threads 1";
        for (int i = 0; i < N; i++) {
            const ws_model_config_field *f = &ws_model_config_fields[i];
            char flag[48];
            assert_string_equal(want[i].key, f->key); /* a new field needs a row here */
            flag_of(i, flag, sizeof flag);
            if (spelling == 0 && f->alias) snprintf(flag, sizeof flag, "--%s", f->alias);
            snprintf(args + strlen(args), sizeof args - strlen(args), " %s %s", flag,
                     want[i].value);
        }
        snprintf(args + strlen(args), sizeof args - strlen(args), " --checkpoint '%s'", path);
        char out[1 << 14];
        if (run("WS_TRAIN", args, out, sizeof out) != 0) fail_msg("%s\n%s", args, out);
        ws_error err = {0};
        ws_backend *be;
        ws_model *m;
        assert_int_equal(ws_backend_cpu_new(&be, 1, &err), WS_OK);
        if (ws_checkpoint_load(&m, path, be, &err) != WS_OK) fail_msg("%s", err.msg);
        const ws_model_config *c = ws_model_config_of(m);
        for (int i = 0; i < N; i++) {
            ws_model_config expect = *c;
            assert_int_equal(ws_model_config_parse(&expect, i, want[i].value, "", &err), WS_OK);
            if (ws_model_config_get(c, i) != ws_model_config_get(&expect, i))
                fail_msg("%s: %g, not %s", want[i].key, ws_model_config_get(c, i), want[i].value);
        }
        ws_model_free(m);
        ws_backend_free(be);
    }
    unlink(path);
}

/* The config of the checkpoint at path. */
static ws_model_config config_in(const char *path)
{
    ws_error err = {0};
    ws_backend *be;
    ws_model *m;
    assert_int_equal(ws_backend_cpu_new(&be, 1, &err), WS_OK);
    if (ws_checkpoint_load(&m, path, be, &err) != WS_OK) fail_msg("%s", err.msg);
    ws_model_config c = *ws_model_config_of(m);
    ws_model_free(m);
    ws_backend_free(be);
    return c;
}

static int empty_steps_in(const char *path) { return config_in(path).empty_steps; }

/* A resumed model keeps its config, except empty_steps when --empty-steps is
 * given (the parameters do not depend on it). */
static void test_resume_switches_empty_steps(void **state)
{
    (void)state;
    char path[] = "/tmp/ws_train_resume_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    char args[1024], out[1 << 14];
    const char *base = "train --task memory --iters 1 --batch 1 --no-eval --threads 1 --d 8 "
                       "--heads 2 --state-tokens 2 --vocab 8 --overflow 2";
    snprintf(args, sizeof args, "%s --empty-steps update --checkpoint '%s'", base, path);
    if (run("WS_TRAIN", args, out, sizeof out) != 0) fail_msg("%s\n%s", args, out);
    assert_int_equal(empty_steps_in(path), WS_EMPTY_UPDATE);
    snprintf(args, sizeof args, "%s --resume '%s' --checkpoint '%s'", base, path, path);
    if (run("WS_TRAIN", args, out, sizeof out) != 0) fail_msg("%s\n%s", args, out);
    assert_int_equal(empty_steps_in(path), WS_EMPTY_UPDATE);
    snprintf(args, sizeof args, "%s --resume '%s' --empty-steps hold --checkpoint '%s'", base,
             path, path);
    if (run("WS_TRAIN", args, out, sizeof out) != 0) fail_msg("%s\n%s", args, out);
    assert_int_equal(empty_steps_in(path), WS_EMPTY_HOLD);
    /* a task whose worlds move on silent steps refuses a holding model */
    snprintf(args, sizeof args, "train --task life --iters 1 --batch 1 --no-eval --threads 1");
    assert_int_equal(run("WS_TRAIN", args, out, sizeof out), 1);
    assert_non_null(strstr(out, "--empty-steps update"));
    unlink(path);
}

/* --views switches a loaded model (resumed, or evaluated: eval --ship writes it
 * so); without it a loaded model keeps its own; out of range is refused. */
static void test_views_switch_loaded_model(void **state)
{
    (void)state;
    char path[] = "/tmp/ws_train_views_XXXXXX", shipped[64];
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    snprintf(shipped, sizeof shipped, "%s.ship", path);
    char args[1024], out[1 << 14];
    const char *base = "--task memory --batch 1 --threads 1 --d 8 --heads 2 --state-tokens 2 "
                       "--vocab 8 --overflow 2";
    snprintf(args, sizeof args, "train %s --iters 1 --no-eval --checkpoint '%s'", base, path);
    if (run("WS_TRAIN", args, out, sizeof out) != 0) fail_msg("%s\n%s", args, out);
    assert_int_equal(config_in(path).views, 1);
    snprintf(args, sizeof args, "eval %s --checkpoint '%s' --views 3 --trajectories 2 --horizons 2 "
             "--ship '%s'", base, path, shipped);
    if (run("WS_TRAIN", args, out, sizeof out) != 0) fail_msg("%s\n%s", args, out);
    ws_model_config c = config_in(shipped);
    assert_int_equal(c.views, 3);
    assert_int_equal(c.d, 8); /* the rest as it was */
    assert_int_equal(config_in(path).views, 1);
    snprintf(args, sizeof args, "train %s --iters 2 --no-eval --resume '%s' --checkpoint '%s'",
             base, shipped, shipped);
    if (run("WS_TRAIN", args, out, sizeof out) != 0) fail_msg("%s\n%s", args, out);
    assert_int_equal(config_in(shipped).views, 3);
    snprintf(args, sizeof args, "eval %s --checkpoint '%s' --views 9", base, path);
    assert_int_equal(run("WS_TRAIN", args, out, sizeof out), 2);
    unlink(path);
    unlink(shipped);
}

/* --backend: cpu trains on the CPU; cuda on the GPU, or fails (exit 1) saying
 * why the plugin found none, never falling back; auto takes what the plugin
 * finds; another name is refused (exit 2). Which of the two a machine gets is
 * asked of the plugin in process. */
static void test_train_backend(void **state)
{
    (void)state;
    const char *base = "train --task memory --iters 2 --batch 2 --no-eval --threads 1 --d 8 "
                       "--heads 2 --state-tokens 2 --vocab 8 --overflow 2";
    char args[512], out[1 << 14];
    ws_backend *gpu = NULL;
    ws_error why = {0};
    int has_gpu = ws_backend_cuda_load(&gpu, &why) == WS_OK;
    if (has_gpu) ws_backend_free(gpu);
    snprintf(args, sizeof args, "%s --backend cpu", base);
    assert_int_equal(run("WS_TRAIN", args, out, sizeof out), 0);
    assert_non_null(strstr(out, "trained 2 iterations (2 AdamW steps) in "));
    assert_non_null(strstr(out, " on cpu, "));
    snprintf(args, sizeof args, "%s --backend cuda", base);
    if (has_gpu) {
        if (run("WS_TRAIN", args, out, sizeof out) != 0) fail_msg("%s\n%s", args, out);
        assert_non_null(strstr(out, " on cuda, "));
    } else {
        assert_int_equal(run("WS_TRAIN", args, out, sizeof out), 1);
        if (!strstr(out, why.msg)) fail_msg("%s: \"%s\" not in\n%s", args, why.msg, out);
    }
    snprintf(args, sizeof args, "%s --backend auto", base);
    assert_int_equal(run("WS_TRAIN", args, out, sizeof out), 0);
    assert_non_null(strstr(out, has_gpu ? " on cuda, " : " on cpu, "));
    snprintf(args, sizeof args, "%s --backend gpu", base);
    assert_int_equal(run("WS_TRAIN", args, out, sizeof out), 2);
    assert_non_null(strstr(out, "--backend: wants cpu, cuda or auto, got 'gpu'"));
}

/* --help lists every field's flag. */
static void test_help_lists_every_flag(void **state)
{
    (void)state;
    static char out[1 << 16];
    assert_int_equal(run("WS_TRAIN", "--help", out, sizeof out), 0);
    for (int i = 0; i < N; i++) {
        char flag[52];
        flag_of(i, flag, sizeof flag - 1);
        strcat(flag, " ");
        if (!strstr(out, flag)) fail_msg("--help does not list %s", flag);
    }
}

/* Every flag api.md's table of worldstated flags lists is in --help, and a
 * value out of range is refused naming the flag; the offline commands refuse a
 * flag of another command. */
static void test_daemon_and_offline_flags(void **state)
{
    (void)state;
    static char out[1 << 14], doc[1 << 16];
    assert_int_equal(run("WS_DAEMON", "--help", out, sizeof out), 0);
    FILE *f = fopen(WS_SOURCE_DIR "/api.md", "r");
    assert_non_null(f);
    size_t n = fread(doc, 1, sizeof doc - 1, f);
    doc[n] = '\0';
    fclose(f);
    int rows = 0;
    for (const char *p = doc; (p = strstr(p, "\n| `--")) != NULL; p++) {
        char flag[40];
        if (sscanf(p, "\n| `%39[a-z-]`", flag) != 1) continue;
        char listed[48];
        snprintf(listed, sizeof listed, "  %s ", flag);
        if (!strstr(out, listed)) fail_msg("worldstated --help does not list %s", flag);
        rows++;
    }
    assert_true(rows >= 10);
    assert_int_equal(run("WS_DAEMON", "--threads 0", out, sizeof out), 2);
    assert_non_null(strstr(out, "worldstated: --threads wants an integer in [1, 256]"));
    assert_int_equal(run("WS_DAEMON", "--listen nowhere", out, sizeof out), 2);
    assert_non_null(strstr(out, "--listen"));
    assert_int_equal(run("WS_TRAIN", "export --data-dir /nonexistent --epochs 2", out, sizeof out),
                     2);
    assert_non_null(strstr(out, "unknown option '--epochs'"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_field_has_a_flag_that_sets_it),
        cmocka_unit_test(test_cli_and_json_share_bounds),
        cmocka_unit_test(test_binary_refuses_out_of_range),
        cmocka_unit_test(test_binary_sets_every_field),
        cmocka_unit_test(test_resume_switches_empty_steps),
        cmocka_unit_test(test_views_switch_loaded_model),
        cmocka_unit_test(test_train_backend),
        cmocka_unit_test(test_help_lists_every_flag),
        cmocka_unit_test(test_daemon_and_offline_flags),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
