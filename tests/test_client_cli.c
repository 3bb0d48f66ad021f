/* test_client_cli.c — the `worldstate` CLI ($WS_CLI) against real daemons:
 * a session driven from a JSON Lines file, exported, and replayed into a fresh
 * daemon ends in the same state bit for bit (labels included in the replayed
 * log); re-running a file resumes where an earlier run stopped; export --all
 * with --only-session; every subcommand's output and exit codes; model import
 * and rollback. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_server_util.h"
#include "test_util.h"

/* The daemon most tests share (ws_ts_shared_setup starts it). */
static ws_ts_daemon *const D = &ws_ts_shared;
static const char *const DIR_ = ws_ts_shared_dir;

typedef struct {
    int rc;
    char *out, *err; /* stdout and stderr, NUL-terminated */
} run_result;

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *buf = NULL;
    size_t len = 0, cap = 0, n;
    do {
        if (len + 4096 + 1 > cap) {
            cap = 2 * cap + 8192;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
        n = fread(buf + len, 1, 4096, f);
        len += n;
    } while (n > 0);
    buf[len] = '\0';
    fclose(f);
    return buf;
}

/* Runs `worldstate --url <daemon> ARGS` through the shell (ARGS may redirect
 * stdin; stdout and stderr are captured). */
static run_result cli(const ws_ts_daemon *d, const char *fmt, ...)
{
    char args[2048], cmd[3072], out[300], err[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(out, sizeof out, "%s/cli.out", DIR_);
    snprintf(err, sizeof err, "%s/cli.err", DIR_);
    const char *bin = getenv("WS_CLI");
    if (!bin) fail_msg("WS_CLI is not set (the path of the worldstate binary)");
    snprintf(cmd, sizeof cmd, "'%s' --url http://127.0.0.1:%d %s > '%s' 2> '%s'", bin, d->port, args, out, err);
    int st = system(cmd);
    assert_true(st != -1 && WIFEXITED(st));
    return (run_result){WEXITSTATUS(st), slurp(out), slurp(err)};
}

static void run_free(run_result *r)
{
    free(r->out);
    free(r->err);
}

/* Runs an export (args) and writes its stdout to path. */
static void export_to(const ws_ts_daemon *d, const char *args, const char *path)
{
    run_result r = cli(d, "export %s", args);
    assert_int_equal(r.rc, 0);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(r.out, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
    run_free(&r);
}

/* Runs and expects exit code rc; returns stdout parsed as JSON (NULL if not asked). */
static cJSON *cli_json(const ws_ts_daemon *d, int rc, const char *args)
{
    run_result r = cli(d, "--json %s", args);
    if (r.rc != rc) fail_msg("worldstate %s: exit %d (wanted %d)\nstdout: %s\nstderr: %s", args, r.rc, rc, r.out, r.err);
    cJSON *j = cJSON_Parse(r.out);
    run_free(&r);
    return j;
}

/* Creates a session through the CLI; the bare id into id. */
static void cli_session(const ws_ts_daemon *d, char *id)
{
    run_result r = cli(d, "session create");
    assert_int_equal(r.rc, 0);
    assert_int_equal(strlen(r.out), 33); /* 32 hex + newline */
    memcpy(id, r.out, 32);
    id[32] = '\0';
    run_free(&r);
}

/* A deterministic script: people move between places; some steps labelled. */
static void write_steps(const char *path, int n, uint64_t seed, int labelled)
{
    static const char *who[] = {"mary", "john", "anna", "bob", "ida"};
    static const char *where[] = {"kitchen", "garden", "hall", "attic"};
    ws_test_rng rng = {seed};
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int t = 0; t < n; t++) {
        int ni = ws_test_int(&rng, 0, 3), nq = ws_test_int(&rng, 1, 4);
        fprintf(f, "{\"instructions\":[");
        for (int i = 0; i < ni; i++)
            fprintf(f, "%s{\"fact\":[\"%s\",\"%s\"],\"value\":%s}", i ? "," : "", who[ws_test_int(&rng, 0, 4)],
                    where[ws_test_int(&rng, 0, 3)], ws_test_int(&rng, 0, 1) ? "true" : "false");
        fprintf(f, "],\"queries\":[");
        for (int q = 0; q < nq; q++)
            fprintf(f, "%s{\"fact\":[\"%s\",\"%s\"]}", q ? "," : "", who[ws_test_int(&rng, 0, 4)],
                    where[ws_test_int(&rng, 0, 3)]);
        fprintf(f, "]");
        if (labelled && t % 3 == 0) {
            fprintf(f, ",\"labels\":[");
            for (int q = 0; q < nq; q++) fprintf(f, "%s%s", q ? "," : "", ws_test_int(&rng, 0, 1) ? "true" : "false");
            fprintf(f, "]");
        }
        fprintf(f, "}\n");
        if (t == n / 2) fprintf(f, "\n"); /* blank lines do not count */
    }
    assert_int_equal(fclose(f), 0);
}

/* The lines of text, each parsed. */
static int parse_lines(char *text, cJSON **lines, int cap)
{
    int n = 0;
    for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        assert_true(n < cap);
        lines[n] = cJSON_Parse(l);
        assert_non_null(lines[n]);
        n++;
    }
    return n;
}

static void fetch_state(const ws_ts_daemon *d, const char *id, ws_ts_resp *r)
{
    char p[160];
    assert_int_equal(ws_ts_req(d, "GET", ws_ts_spath(p, sizeof p, id, "/state"), NULL, NULL, r), 200);
    assert_true(r->len > 0);
}

static const char *str_of(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    assert_true(cJSON_IsString(v));
    return v->valuestring;
}

static double num_of(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

/* The required end-to-end test: file → session A → export → fresh daemon B →
 * the same state bytes, the same log (labels included), the same answers. */
static void test_export_replay_same_state(void **state)
{
    (void)state;
    enum { N = 40 };
    char dir_a[256], dir_b[256], steps[300], exported[300], replayed[300], a[33], b[33];
    ws_ts_daemon da, db;
    ws_ts_tmpdir(dir_a, sizeof dir_a);
    ws_ts_tmpdir(dir_b, sizeof dir_b);
    assert_int_equal(ws_ts_start(&da, dir_a, NULL), 0);
    assert_int_equal(ws_ts_start(&db, dir_b, NULL), 0);
    /* Both daemons made `default` from the same seed; with training off the
     * model stays that one, so the same steps must give the same states. */
    for (int i = 0; i < 2; i++) {
        cJSON *t = cli_json(i ? &db : &da, 0, "training default --disable");
        assert_true(cJSON_IsFalse(cJSON_GetObjectItem(t, "enabled")));
        cJSON_Delete(t);
    }
    snprintf(steps, sizeof steps, "%s/steps.jsonl", DIR_);
    snprintf(exported, sizeof exported, "%s/export.jsonl", DIR_);
    snprintf(replayed, sizeof replayed, "%s/replayed.jsonl", DIR_);
    write_steps(steps, N, 42, 1);
    cli_session(&da, a);
    char args[1024];
    snprintf(args, sizeof args, "step %s --file '%s'", a, steps);
    cJSON *sum = cli_json(&da, 0, args);
    assert_int_equal(num_of(sum, "applied"), N);
    assert_int_equal(num_of(sum, "step"), N);
    cJSON_Delete(sum);
    export_to(&da, a, exported);

    cli_session(&db, b);
    snprintf(args, sizeof args, "step %s --file '%s'", b, exported);
    sum = cli_json(&db, 0, args);
    assert_int_equal(num_of(sum, "applied"), N);
    cJSON_Delete(sum);
    export_to(&db, b, replayed);

    ws_ts_resp sa, sb;
    fetch_state(&da, a, &sa);
    fetch_state(&db, b, &sb);
    assert_int_equal(sa.len, ws_ts_state_floats(&da, NULL, "default") * 4);
    assert_int_equal(sa.len, sb.len);
    assert_memory_equal(sa.body, sb.body, sa.len);
    ws_ts_resp_free(&sa);
    ws_ts_resp_free(&sb);

    /* The two logs agree step by step: everything but session and time. */
    char *ta = slurp(exported), *tb = slurp(replayed);
    cJSON *la[N + 1], *lb[N + 1];
    assert_int_equal(parse_lines(ta, la, N + 1), N);
    assert_int_equal(parse_lines(tb, lb, N + 1), N);
    int labelled = 0;
    for (int t = 0; t < N; t++) {
        assert_string_equal(str_of(la[t], "session"), a);
        assert_string_equal(str_of(lb[t], "session"), b);
        assert_int_equal(num_of(la[t], "step"), t + 1);
        labelled += cJSON_IsArray(cJSON_GetObjectItem(lb[t], "labels"));
        for (int k = 0; k < 2; k++) {
            cJSON_DeleteItemFromObject(k ? lb[t] : la[t], "session");
            cJSON_DeleteItemFromObject(k ? lb[t] : la[t], "time_ms");
        }
        char *pa = cJSON_PrintUnformatted(la[t]), *pb = cJSON_PrintUnformatted(lb[t]);
        assert_string_equal(pa, pb);
        free(pa);
        free(pb);
        cJSON_Delete(la[t]);
        cJSON_Delete(lb[t]);
    }
    assert_int_equal(labelled, (N + 2) / 3); /* steps 0, 3, 6, … of the script */
    free(ta);
    free(tb);
    assert_int_equal(ws_ts_stop(&da), 0);
    assert_int_equal(ws_ts_stop(&db), 0);
    ws_ts_cleanup(dir_a);
    ws_ts_cleanup(dir_b);
}

/* An interrupted run (only the first records posted) resumes: re-running the
 * full file applies just the rest; a third run applies nothing. */
static void test_resume(void **state)
{
    (void)state;
    enum { N = 30, HALF = 12 };
    char steps[300], half[300], id[33], args[1024];
    snprintf(steps, sizeof steps, "%s/resume.jsonl", DIR_);
    snprintf(half, sizeof half, "%s/half.jsonl", DIR_);
    write_steps(steps, N, 7, 0);
    /* The first HALF records (the file's blank line comes later). */
    char cmd[800];
    snprintf(cmd, sizeof cmd, "head -n %d '%s' > '%s'", HALF, steps, half);
    assert_int_equal(system(cmd), 0);
    cli_session(D, id);
    snprintf(args, sizeof args, "step %s --file '%s'", id, half);
    cJSON *s = cli_json(D, 0, args);
    assert_int_equal(num_of(s, "applied"), HALF);
    cJSON_Delete(s);
    snprintf(args, sizeof args, "step %s --file '%s'", id, steps);
    s = cli_json(D, 0, args);
    assert_int_equal(num_of(s, "records"), N);
    assert_int_equal(num_of(s, "skipped"), HALF);
    assert_int_equal(num_of(s, "applied"), N - HALF);
    assert_int_equal(num_of(s, "step"), N);
    cJSON_Delete(s);
    s = cli_json(D, 0, args);
    assert_int_equal(num_of(s, "applied"), 0);
    assert_int_equal(num_of(s, "skipped"), N);
    cJSON_Delete(s);
    /* Step k of the log is record k of the file. */
    run_result r = cli(D, "export %s", id);
    assert_int_equal(r.rc, 0);
    char *file = slurp(steps);
    cJSON *logged[N + 1], *script[N + 1];
    assert_int_equal(parse_lines(r.out, logged, N + 1), N);
    assert_int_equal(parse_lines(file, script, N + 1), N);
    for (int t = 0; t < N; t++) {
        for (int k = 0; k < 2; k++) {
            const char *key = k ? "queries" : "instructions";
            assert_true(cJSON_Compare(cJSON_GetObjectItem(logged[t], key), cJSON_GetObjectItem(script[t], key), 1));
        }
        assert_true(cJSON_IsNull(cJSON_GetObjectItem(logged[t], "labels")));
        cJSON_Delete(logged[t]);
        cJSON_Delete(script[t]);
    }
    free(file);
    run_free(&r);
    /* --base: records start after steps the session already had. */
    cli_session(D, id);
    for (int t = 0; t < 2; t++) {
        r = cli(D, "step %s --instr x,y=true", id);
        assert_int_equal(r.rc, 0);
        run_free(&r);
    }
    snprintf(args, sizeof args, "step %s --file '%s' --base 2", id, half);
    s = cli_json(D, 0, args);
    assert_int_equal(num_of(s, "applied"), HALF);
    assert_int_equal(num_of(s, "step"), HALF + 2);
    cJSON_Delete(s);
    snprintf(args, sizeof args, "step %s --file '%s' --base %d", id, half, HALF + 5);
    cJSON_Delete(cli_json(D, 2, args)); /* the session is not that far */
    /* From stdin, already applied: skipped. */
    r = cli(D, "step %s --file - --base 2 < '%s'", id, half);
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "0 applied"));
    run_free(&r);
}

/* export --all covers every session; --only-session replays one of them. */
static void test_export_all(void **state)
{
    (void)state;
    char ids[2][33], all[300], args[1024];
    for (int i = 0; i < 2; i++) {
        cli_session(D, ids[i]);
        for (int t = 0; t <= i; t++) {
            run_result r = cli(D, "step %s --instr s%d,t%d=true --query s%d,t%d --label true", ids[i], i, t, i, t);
            assert_int_equal(r.rc, 0);
            run_free(&r);
        }
    }
    snprintf(all, sizeof all, "%s/all.jsonl", DIR_);
    export_to(D, "--all", all);
    char *text = slurp(all);
    int per[2] = {0, 0}, total = 0;
    for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save), total++) {
        cJSON *j = cJSON_Parse(l);
        assert_non_null(j);
        for (int i = 0; i < 2; i++) per[i] += !strcmp(str_of(j, "session"), ids[i]);
        cJSON_Delete(j);
    }
    free(text);
    assert_int_equal(per[0], 1);
    assert_int_equal(per[1], 2);
    assert_true(total >= 3);
    char copy[33];
    cli_session(D, copy);
    snprintf(args, sizeof args, "step %s --file '%s' --only-session %s", copy, all, ids[1]);
    cJSON *s = cli_json(D, 0, args);
    assert_int_equal(num_of(s, "records"), 2);
    assert_int_equal(num_of(s, "step"), 2);
    cJSON_Delete(s);
    run_result r = cli(D, "export %s --after 1", copy);
    assert_int_equal(r.rc, 0);
    cJSON *last = cJSON_Parse(r.out);
    assert_int_equal(num_of(last, "step"), 2);
    assert_true(cJSON_IsTrue(cJSON_GetArrayItem(cJSON_GetObjectItem(last, "labels"), 0)));
    cJSON_Delete(last);
    run_free(&r);
}

static void test_commands(void **state)
{
    (void)state;
    char id[33], args[512], path[300];
    cJSON *j = cli_json(D, 0, "health");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "ready")));
    cJSON_Delete(j);
    j = cli_json(D, 0, "session create --model default");
    snprintf(id, sizeof id, "%s", str_of(j, "id"));
    assert_int_equal(num_of(j, "step"), 0);
    cJSON_Delete(j);
    snprintf(args, sizeof args, "step %s --instr mary,kitchen=true --query mary,kitchen --query john,garden "
                                "--label true --label false --expect 0", id);
    j = cli_json(D, 0, args);
    assert_int_equal(num_of(j, "step"), 1);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "answers")), 2);
    cJSON_Delete(j);
    cJSON_Delete(cli_json(D, 1, args)); /* --expect 0 again: step_conflict */
    run_result r = cli(D, "step %s --query mary,kitchen --expect 0", id);
    assert_int_equal(r.rc, 1);
    assert_non_null(strstr(r.err, "step_conflict"));
    run_free(&r);
    snprintf(args, sizeof args, "query %s --query mary,kitchen", id);
    j = cli_json(D, 0, args);
    assert_int_equal(num_of(j, "step"), 1);
    cJSON_Delete(j);
    snprintf(args, sizeof args, "labels %s 1 --label false,false --replace", id);
    j = cli_json(D, 0, args);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "stored")));
    cJSON_Delete(j);
    snprintf(args, sizeof args, "session show %s", id);
    j = cli_json(D, 0, args);
    assert_int_equal(num_of(j, "step"), 1);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "state_shape")), 2);
    cJSON_Delete(j);
    j = cli_json(D, 0, "session list --limit 1");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "sessions")), 1);
    cJSON_Delete(j);
    r = cli(D, "session list");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, id));
    run_free(&r);
    /* Models. */
    j = cli_json(D, 0, "model create small --config '{\"d\":16,\"n_heads\":2,\"n_state\":4}' --seed 3 --disable");
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "training"), "enabled")));
    cJSON_Delete(j);
    cJSON_Delete(cli_json(D, 1, "model create small")); /* taken */
    j = cli_json(D, 0, "model list");
    assert_true(cJSON_GetArraySize(cJSON_GetObjectItem(j, "models")) >= 2);
    cJSON_Delete(j);
    j = cli_json(D, 0, "model status small");
    assert_string_equal(str_of(cJSON_GetObjectItem(j, "status"), "state"), "loaded");
    assert_int_equal(num_of(cJSON_GetObjectItem(j, "config"), "d"), 16);
    const cJSON *gate = cJSON_GetObjectItem(j, "gate");
    assert_true(num_of(gate, "published") == 0 && num_of(gate, "restored") == 0);
    assert_true(num_of(gate, "anchor_version") == 1 &&
                cJSON_IsNull(cJSON_GetObjectItem(gate, "last")));
    cJSON_Delete(j);
    j = cli_json(D, 0, "training small --enable --lr 0.005 --update-every 4");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "enabled")));
    assert_int_equal(num_of(j, "update_every"), 4);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "gate"))); /* the defaults */
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "self_supervised")));
    cJSON_Delete(j);
    j = cli_json(D, 0, "training small --no-gate --no-self-supervised --negative-queries 2 "
                       "--holdout 0.25 --gate-tolerance 0.05");
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(j, "gate")));
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(j, "self_supervised")));
    assert_int_equal(num_of(j, "negative_queries"), 2);
    assert_true(num_of(j, "holdout") == 0.25 && num_of(j, "gate_tolerance") == 0.05);
    assert_int_equal(num_of(j, "update_every"), 4); /* kept */
    cJSON_Delete(j);
    j = cli_json(D, 0, "training small --scope symbols");
    assert_string_equal(str_of(j, "scope"), "symbols");
    assert_int_equal(num_of(j, "negative_queries"), 2); /* kept */
    cJSON_Delete(j);
    j = cli_json(D, 0, "training small --rules");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "rules")));
    assert_string_equal(str_of(j, "scope"), "symbols"); /* kept */
    cJSON_Delete(j);
    cJSON_Delete(cli_json(D, 2, "training small --rules --no-rules"));
    cJSON_Delete(cli_json(D, 2, "training small --scope weights"));
    cJSON_Delete(cli_json(D, 2, "training small --gate --no-gate"));
    cJSON_Delete(cli_json(D, 1, "training small --holdout 0.9")); /* the server's range */
    snprintf(path, sizeof path, "%s/small.safetensors", DIR_);
    snprintf(args, sizeof args, "model checkpoint small --out '%s'", path);
    j = cli_json(D, 0, args);
    assert_int_equal(num_of(j, "version"), 1);
    cJSON_Delete(j);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fclose(f);
    /* a tenant's own model (open mode: the tenant is "default"), created and imported */
    j = cli_json(D, 0, "model create small-own --config '{\"d\":16,\"n_heads\":2,\"n_state\":4}' --tenant default");
    assert_string_equal(str_of(j, "tenant"), "default");
    cJSON_Delete(j);
    snprintf(args, sizeof args, "model import small-mine '%s' --tenant default", path);
    j = cli_json(D, 0, args);
    assert_string_equal(str_of(j, "tenant"), "default");
    cJSON_Delete(j);
    j = cli_json(D, 0, "model status small");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(j, "tenant")));
    cJSON_Delete(j);
    r = cli(D, "model status small-own");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "tenant         default"));
    assert_non_null(strstr(r.out, "gate           0 published, 0 rejected, 0 restored"));
    assert_non_null(strstr(r.out, "               replay anchor: version 1\n"));
    assert_null(strstr(r.out, "last decision"));
    run_free(&r);
    snprintf(args, sizeof args, "session delete %s", id);
    cJSON_Delete(cli_json(D, 0, args));
    /* Errors: the server's (1), usage (2), unreachable (3), input (4). */
    r = cli(D, "session show %s", id);
    assert_int_equal(r.rc, 1);
    assert_non_null(strstr(r.err, "not_found"));
    assert_non_null(strstr(r.err, "HTTP 404"));
    run_free(&r);
    static const char *const usage[] = {"", "bogus", "session", "session show", "step", "step 0123 --instr a,b",
                                        "training default --lr x", "--timeout-ms 0 health", "export",
                                        "labels x 0 --label true", "session show abc"};
    for (size_t i = 0; i < sizeof usage / sizeof usage[0]; i++) {
        r = cli(D, "%s", usage[i]);
        if (r.rc != 2) fail_msg("worldstate %s: exit %d, wanted 2; stderr: %s", usage[i], r.rc, r.err);
        assert_true(strlen(r.err) > 0);
        run_free(&r);
    }
    r = cli(D, "--url http://127.0.0.1:1 --retries 0 health");
    assert_int_equal(r.rc, 3);
    assert_non_null(strstr(r.err, "cannot reach"));
    run_free(&r);
    cli_session(D, id);
    snprintf(path, sizeof path, "%s/bad.jsonl", DIR_);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"queries\":[{\"fact\":[\"a\"]}]}\n\n{\"instrs\":[]}\n", f);
    assert_int_equal(fclose(f), 0);
    r = cli(D, "step %s --file '%s'", id, path);
    assert_int_equal(r.rc, 4);
    assert_non_null(strstr(r.err, "bad.jsonl:3: unknown field \"instrs\""));
    run_free(&r);
    snprintf(args, sizeof args, "session show %s", id);
    j = cli_json(D, 0, args);
    assert_int_equal(num_of(j, "step"), 1); /* the good line before it was applied */
    cJSON_Delete(j);
}

/* model import NAME FILE: the default model's checkpoint becomes a new model,
 * then its next version; a file that is not a checkpoint is the server's 400. */
static void test_model_import(void **state)
{
    (void)state;
    char file[300], args[700];
    snprintf(file, sizeof file, "%s/default.safetensors", DIR_);
    snprintf(args, sizeof args, "model checkpoint default --out '%s'", file);
    cJSON *j = cli_json(D, 0, args);
    cJSON_Delete(j);
    snprintf(args, sizeof args, "model import copy '%s'", file);
    j = cli_json(D, 0, args);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "created")));
    assert_string_equal(str_of(j, "origin"), "imported");
    assert_int_equal(num_of(j, "version"), 1);
    cJSON_Delete(j);
    run_result r = cli(D, "model import copy '%s'", file);
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "as the model's next version"));
    assert_non_null(strstr(r.out, "version        2"));
    assert_non_null(strstr(r.out, "origin         imported"));
    run_free(&r);
    snprintf(file, sizeof file, "%s/junk.safetensors", DIR_);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    assert_int_equal(fputs("not a checkpoint", f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
    r = cli(D, "model import junk '%s'", file);
    assert_int_equal(r.rc, 1);
    assert_non_null(strstr(r.err, "bad_checkpoint, HTTP 400"));
    run_free(&r);
    r = cli(D, "model import copy");
    assert_int_equal(r.rc, 2);
    run_free(&r);
}

/* model rollback NAME VERSION: the imported model "copy" (versions 1 and 2,
 * test_model_import) goes back to version 1 and forth to 2; a version it lacks
 * is the server's 404, a version that is not a number a usage error. */
static void test_model_rollback(void **state)
{
    (void)state;
    cJSON *j = cli_json(D, 0, "model rollback copy 1");
    assert_int_equal(num_of(j, "version"), 1);
    assert_string_equal(str_of(j, "version_note"), "imported");
    cJSON_Delete(j);
    j = cli_json(D, 0, "model status copy");
    assert_int_equal(num_of(j, "version"), 1);
    cJSON_Delete(j);
    run_result r = cli(D, "model rollback copy 2");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "version        2"));
    run_free(&r);
    r = cli(D, "model rollback copy 9");
    assert_int_equal(r.rc, 1);
    assert_non_null(strstr(r.err, "not_found, HTTP 404"));
    run_free(&r);
    r = cli(D, "model rollback nope 1");
    assert_int_equal(r.rc, 1);
    run_free(&r);
    static const char *const usage[] = {"model rollback copy x", "model rollback copy 0",
                                        "model rollback copy", "model rollback copy 1 2"};
    for (size_t i = 0; i < sizeof usage / sizeof usage[0]; i++) {
        r = cli(D, "%s", usage[i]);
        assert_int_equal(r.rc, 2);
        run_free(&r);
    }
    j = cli_json(D, 0, "model status copy"); /* refusals changed nothing */
    assert_int_equal(num_of(j, "version"), 2);
    cJSON_Delete(j);
    /* the versions, oldest first: 2 is current, both files still there */
    j = cli_json(D, 0, "model versions copy");
    const cJSON *vs = cJSON_GetObjectItem(j, "versions");
    assert_int_equal(cJSON_GetArraySize(vs), 2);
    for (int i = 0; i < 2; i++) {
        const cJSON *v = cJSON_GetArrayItem(vs, i);
        assert_int_equal(num_of(v, "version"), i + 1);
        assert_int_equal(cJSON_IsTrue(cJSON_GetObjectItem(v, "current")), i == 1);
        assert_true(cJSON_IsTrue(cJSON_GetObjectItem(v, "available")));
        assert_true(cJSON_IsString(cJSON_GetObjectItem(v, "note")));
    }
    cJSON_Delete(j);
    r = cli(D, "model versions nope");
    assert_int_equal(r.rc, 1);
    run_free(&r);
}

/* model delete: the model goes; "default" and a model in use stay, with the
 * server's reason. */
static void test_model_delete(void **state)
{
    (void)state;
    run_result r = cli(D, "model create doomed --config '{\"d\":16,\"n_heads\":2,\"n_state\":4}'");
    assert_int_equal(r.rc, 0);
    run_free(&r);
    cJSON *j = cli_json(D, 0, "model delete doomed");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "deleted")));
    cJSON_Delete(j);
    r = cli(D, "model status doomed");
    assert_int_equal(r.rc, 1);
    run_free(&r);
    r = cli(D, "model delete default");
    assert_int_equal(r.rc, 1);
    assert_non_null(strstr(r.err, "model_is_default, HTTP 409"));
    run_free(&r);
    r = cli(D, "model delete");
    assert_int_equal(r.rc, 2);
    run_free(&r);
}

/* With --json every error is one JSON document on stderr (stdout stays
 * empty), with the server's code, status and current_step where it has them;
 * the labels hint names the CLI's flag, not the API's field. */
/* A model's learned rules: eight people's moves labelled (the old place
 * false), and `model status` names the rule that holds (none on a shared
 * PostgreSQL store, where rules are not applied). */
static void test_rules_shown(void **state)
{
    (void)state;
    char id[33], args[512];
    cJSON_Delete(cli_json(D, 0,
                          "model create ruled --config '{\"d\":16,\"n_heads\":2,\"n_state\":4}' "
                          "--disable --rules"));
    cJSON *j = cli_json(D, 0, "session create --model ruled");
    snprintf(id, sizeof id, "%s", str_of(j, "id"));
    cJSON_Delete(j);
    for (int p = 0; p < 8; p++) {
        snprintf(args, sizeof args, "step %s --instr p%d,location,kitchen=true", id, p);
        cJSON_Delete(cli_json(D, 0, args));
        snprintf(
            args, sizeof args,
            "step %s --instr p%d,location,garden=true --query p%d,location,kitchen --label false",
            id, p, p);
        cJSON_Delete(cli_json(D, 0, args));
    }
    j = cli_json(D, 0, "model status ruled");
    if (ws_ts_on_postgresql()) { /* rules need the daemon's own SQLite store (api.md) */
        assert_null(cJSON_GetObjectItem(j, "rules_holding"));
        cJSON_Delete(j);
        return;
    }
    assert_string_equal(str_of(j, "rules_holding"), "location@1:2/3");
    cJSON_Delete(j);
    run_result r = cli(D, "model status ruled");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "rules          location@1:2/3"));
    run_free(&r);
}

static void test_json_errors(void **state)
{
    (void)state;
    char id[33];
    cli_session(D, id);
    run_result r = cli(D, "step %s --query a,b --label true", id);
    assert_int_equal(r.rc, 0);
    run_free(&r);
    static const struct {
        const char *args, *code;
        int rc;
    } cases[] = {
        {"--json bogus", "usage", 2},
        {"--retries x --json health", "usage", 2}, /* --json after the bad flag */
        {"--json step %s --label maybe", "usage", 2},
        {"--json step %s --expect 0", "step_conflict", 1},
        {"--json labels %s 1 --label false", "labels_conflict", 1},
        {"--json model delete default", "model_is_default", 1},
        {"--json model", "usage", 2},
        {"--json --url http://127.0.0.1:1 --retries 0 health", "unreachable", 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        r = cli(D, cases[i].args, id);
        if (r.rc != cases[i].rc) fail_msg("%s: exit %d; stderr: %s", cases[i].args, r.rc, r.err);
        assert_string_equal(r.out, "");
        cJSON *j = cJSON_Parse(r.err);
        if (!j) fail_msg("%s: stderr is not one JSON document: %s", cases[i].args, r.err);
        const cJSON *e = cJSON_GetObjectItem(j, "error");
        assert_string_equal(cJSON_GetObjectItem(e, "code")->valuestring, cases[i].code);
        assert_true(cJSON_IsString(cJSON_GetObjectItem(e, "message")));
        if (cases[i].rc == 1) assert_int_equal(cJSON_GetObjectItem(e, "status")->valueint, 409);
        if (!strcmp(cases[i].code, "step_conflict"))
            assert_int_equal(cJSON_GetObjectItem(e, "current_step")->valueint, 1);
        if (!strcmp(cases[i].code, "labels_conflict")) {
            assert_non_null(strstr(cJSON_GetObjectItem(e, "message")->valuestring, "--replace"));
            assert_null(strstr(cJSON_GetObjectItem(e, "message")->valuestring, "\"replace\""));
        }
        cJSON_Delete(j);
        run_free(&r);
    }
    r = cli(D, "labels %s 1 --label false", id); /* the text form says it too */
    assert_int_equal(r.rc, 1);
    assert_non_null(strstr(r.err, "add --replace"));
    run_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_export_replay_same_state),
        cmocka_unit_test(test_resume),
        cmocka_unit_test(test_export_all),
        cmocka_unit_test(test_commands),
        cmocka_unit_test(test_model_import),
        cmocka_unit_test(test_model_rollback),
        cmocka_unit_test(test_model_delete),
        cmocka_unit_test(test_rules_shown),
        cmocka_unit_test(test_json_errors),
    };
    return cmocka_run_group_tests(tests, ws_ts_shared_setup, ws_ts_shared_teardown);
}
