/* test_server_backup.c — backup and restore of a live data directory: clients
 * post steps without pause while a backup is taken through POST
 * /v1/admin/backup and another through `worldstated backup`; each backup is
 * restored (`worldstated restore`) into a fresh data directory, whose
 * database passes its integrity check, and a daemon started on it has every
 * step acknowledged before its backup began, with the answers the client got,
 * and each session's log whole up to its step (a step acknowledged after the
 * backup ended may be missing; none is half there). Also: the route takes a
 * name, never a path, is off without --backup-dir and needs an admin key; a
 * damaged backup or a non-empty target is refused and leaves nothing behind. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "storage/storage.h"
#include "test_server_util.h"
#include "test_util.h"

enum { CLIENTS = 4, MAX_STEPS = 100000, QUERIES = 2 };

typedef struct {
    ws_ts_daemon *d;
    char id[33];
    atomic_int *stop;
    _Atomic int64_t acked; /* last step answered 200 (read by the main thread) */
    float (*p)[QUERIES];   /* p[step]: the answers of each acknowledged step */
    long failed;           /* the status of a step that was not answered 200 */
} client;

static void *run_client(void *arg)
{
    client *c = arg;
    char path[128], body[320];
    ws_ts_spath(path, sizeof path, c->id, "/steps");
    while (!atomic_load(c->stop) && c->acked < MAX_STEPS) {
        long long n = (long long)c->acked;
        snprintf(body, sizeof body,
                 "{\"expect_step\":%lld,\"instructions\":[{\"fact\":[\"k%lld\",\"v\"],\"value\":%s}],"
                 "\"queries\":[{\"fact\":[\"k%lld\",\"v\"]},{\"fact\":[\"k%lld\",\"v\"]}]}",
                 n, n % 5, n % 3 ? "true" : "false", n % 5, (n + 2) % 5);
        ws_ts_resp r;
        long st = ws_ts_req(c->d, "POST", path, NULL, body, &r);
        const cJSON *ans = st == 200 ? cJSON_GetObjectItem(r.json, "answers") : NULL;
        if (st == 200 && cJSON_GetArraySize(ans) == QUERIES) {
            int64_t step = (int64_t)cJSON_GetObjectItem(r.json, "step")->valuedouble;
            for (int q = 0; q < QUERIES; q++)
                c->p[step][q] = (float)cJSON_GetObjectItem(cJSON_GetArrayItem(ans, q), "p")->valuedouble;
            c->acked = step;
        } else {
            c->failed = st ? st : -1;
        }
        ws_ts_resp_free(&r);
        if (c->failed) break;
    }
    return NULL;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Waits (however slow the machine) until every client has at least n[i] + more
 * steps acknowledged. */
static void wait_acked(const client *cl, const int64_t *n, int64_t more)
{
    for (int i = 0; i < CLIENTS; i++)
        while (cl[i].acked < (n ? n[i] : 0) + more && !cl[i].failed) sleep_ms(20);
    for (int i = 0; i < CLIENTS; i++) assert_int_equal(cl[i].failed, 0);
}

static void acked_now(const client *cl, int64_t *out)
{
    for (int i = 0; i < CLIENTS; i++) out[i] = cl[i].acked;
}

/* POST /v1/admin/backup with body (open mode) and its answer's status. */
static long post_backup(const ws_ts_daemon *d, const char *body, ws_ts_resp *r)
{
    return ws_ts_req(d, "POST", "/v1/admin/backup", NULL, body, r);
}

static const char *error_code(const ws_ts_resp *r)
{
    const cJSON *e = cJSON_GetObjectItem(r->json, "error");
    const cJSON *c = e ? cJSON_GetObjectItem(e, "code") : NULL;
    return cJSON_IsString(c) ? c->valuestring : "";
}

/* The backup started by the route (with key: NULL in open mode), to its end: "done". */
static void route_backup(const ws_ts_daemon *d, const char *key, const char *name)
{
    char body[96];
    snprintf(body, sizeof body, "{\"name\":\"%s\"}", name);
    ws_ts_resp r;
    assert_int_equal(ws_ts_req(d, "POST", "/v1/admin/backup", key, body, &r), 202);
    const cJSON *b = cJSON_GetObjectItem(r.json, "backup");
    assert_string_equal(cJSON_GetObjectItem(b, "name")->valuestring, name);
    ws_ts_resp_free(&r);
    for (;;) {
        assert_int_equal(ws_ts_req(d, "GET", "/v1/admin/backup", key, NULL, &r), 200);
        b = cJSON_GetObjectItem(r.json, "backup");
        const char *state = cJSON_GetObjectItem(b, "state")->valuestring;
        if (strcmp(state, "running") != 0) {
            if (strcmp(state, "done") != 0) fail_msg("backup %s: %s", name, r.body);
            assert_true(cJSON_GetObjectItem(b, "files")->valuedouble >= 2); /* db + a model */
            const cJSON *db = cJSON_GetObjectItem(b, "database");
            assert_true(cJSON_GetObjectItem(db, "pages_done")->valuedouble ==
                        cJSON_GetObjectItem(db, "pages_total")->valuedouble);
            ws_ts_resp_free(&r);
            return;
        }
        ws_ts_resp_free(&r);
        sleep_ms(50);
    }
}

/* The route's refusals: no name is a path, no name is taken twice. */
static void route_refusals(const ws_ts_daemon *d, const char *tmp)
{
    static const char *const bad[] = {
        "{\"name\":\"../escape\"}", "{\"name\":\".hidden\"}", "{\"name\":\"a/b\"}",
        "{\"name\":\"\"}",          "{\"name\":7}",           "{\"path\":\"/tmp/x\"}",
        "[1]",
    };
    ws_ts_resp r;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(post_backup(d, bad[i], &r), 400);
        ws_ts_resp_free(&r);
    }
    char escape[512];
    snprintf(escape, sizeof escape, "%s/escape", tmp);
    assert_int_not_equal(access(escape, F_OK), 0);
    assert_int_equal(post_backup(d, "{\"name\":\"mid\"}", &r), 409);
    assert_string_equal(error_code(&r), "conflict");
    ws_ts_resp_free(&r);
}

/* The restored database passes its integrity check (before any daemon opens it). */
static void check_integrity(const char *data_dir)
{
    char db[512];
    snprintf(db, sizeof db, "%s/worldstate.db", data_dir);
    ws_store *st = NULL;
    ws_error err = {0};
    if (ws_store_open(db, WS_STORE_DURABILITY_NORMAL, 0, &st, &err) != WS_OK ||
        ws_store_integrity_check(st, &err) != WS_OK)
        fail_msg("%s: %s", db, err.msg);
    ws_store_close(st);
}

/* Session i on the restored daemon: at a step s with before <= s <= after + 1
 * (nothing from after the backup ended but the step then in flight), its log
 * exactly steps 1..s, each with the answers its client got. */
static void check_session(const ws_ts_daemon *d, const client *c, int64_t before, int64_t after)
{
    char path[160];
    ws_ts_resp r;
    assert_int_equal(ws_ts_req(d, "GET", ws_ts_spath(path, sizeof path, c->id, ""), NULL, NULL, &r),
                     200);
    int64_t s = (int64_t)cJSON_GetObjectItem(r.json, "step")->valuedouble;
    ws_ts_resp_free(&r);
    if (s < before || s > after + 1)
        fail_msg("session %s: step %lld in the backup, acknowledged %lld before it began and %lld "
                 "when it ended",
                 c->id, (long long)s, (long long)before, (long long)after);
    int64_t seen = 0;
    while (seen < s) {
        char suffix[64];
        snprintf(suffix, sizeof suffix, "/steps?after=%lld&limit=1000", (long long)seen);
        assert_int_equal(
            ws_ts_req(d, "GET", ws_ts_spath(path, sizeof path, c->id, suffix), NULL, NULL, &r),
            200);
        const cJSON *e;
        int page = 0;
        cJSON_ArrayForEach(e, cJSON_GetObjectItem(r.json, "steps"))
        {
            int64_t step = (int64_t)cJSON_GetObjectItem(e, "step")->valuedouble;
            assert_int_equal(step, seen + 1);
            const cJSON *ans = cJSON_GetObjectItem(e, "answers");
            assert_int_equal(cJSON_GetArraySize(ans), QUERIES);
            assert_true(step <= c->acked); /* every logged step was answered */
            for (int q = 0; q < QUERIES; q++) {
                double p = cJSON_GetObjectItem(cJSON_GetArrayItem(ans, q), "p")->valuedouble;
                if (fabs(p - c->p[step][q]) > 1e-6)
                    fail_msg("session %s step %lld answer %d: %g in the backup, %g acknowledged",
                             c->id, (long long)step, q, p, (double)c->p[step][q]);
            }
            seen = step;
            page++;
        }
        ws_ts_resp_free(&r);
        assert_true(page > 0); /* the log ends at the session's step, not before */
    }
}

/* Restores backup `from` into `to` and checks it as check_session says; the
 * restored daemon has no --backup-dir (the route is off) and takes new steps. */
static void restore_and_check(const char *from, const char *to, const client *cl,
                              const int64_t *before, const int64_t *after)
{
    const char *args[] = {"restore", "--from", from, "--data-dir", to, NULL};
    char out[1024];
    assert_int_equal(ws_ts_daemon_run(args, out, sizeof out), 0);
    check_integrity(to);
    ws_ts_daemon d;
    assert_int_equal(ws_ts_start(&d, to, NULL), 0);
    for (int i = 0; i < CLIENTS; i++) check_session(&d, &cl[i], before[i], after[i]);
    ws_ts_resp r;
    assert_int_equal(post_backup(&d, NULL, &r), 409);
    assert_string_equal(error_code(&r), "backup_not_configured");
    ws_ts_resp_free(&r);
    char path[160], body[160];
    assert_int_equal(ws_ts_req(&d, "GET", ws_ts_spath(path, sizeof path, cl[0].id, ""), NULL, NULL,
                               &r),
                     200);
    snprintf(body, sizeof body, "{\"expect_step\":%lld,\"queries\":[{\"fact\":[\"k0\",\"v\"]}]}",
             (long long)cJSON_GetObjectItem(r.json, "step")->valuedouble);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_req(&d, "POST", ws_ts_spath(path, sizeof path, cl[0].id, "/steps"), NULL,
                               body, &r),
                     200);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_stop(&d), 0);
}

/* Flips one byte in the middle of file. */
static void damage(const char *file)
{
    FILE *f = fopen(file, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long mid = ftell(f) / 2;
    assert_int_equal(fseek(f, mid, SEEK_SET), 0);
    int c = fgetc(f);
    assert_int_equal(fseek(f, mid, SEEK_SET), 0);
    assert_int_not_equal(fputc(c ^ 0x5a, f), EOF);
    assert_int_equal(fclose(f), 0);
}

static void test_backup_under_load(void **state)
{
    (void)state;
    char tmp[256], data[320], root[320], cmd_to[320], restored[2][320], bad[320];
    ws_ts_tmpdir(tmp, sizeof tmp);
    snprintf(data, sizeof data, "%s/data", tmp);
    snprintf(root, sizeof root, "%s/backups", tmp);
    snprintf(cmd_to, sizeof cmd_to, "%s/cmd-backup", tmp);
    snprintf(restored[0], sizeof restored[0], "%s/restored-route", tmp);
    snprintf(restored[1], sizeof restored[1], "%s/restored-cmd", tmp);
    snprintf(bad, sizeof bad, "%s/restored-bad", tmp);
    assert_int_equal(mkdir(data, 0700), 0);

    ws_ts_daemon d;
    const char *flags[] = {"--backup-dir", root, NULL};
    assert_int_equal(ws_ts_start(&d, data, flags), 0);
    ws_ts_resp r;
    assert_int_equal(ws_ts_req(&d, "GET", "/v1/admin/backup", NULL, NULL, &r), 200);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(r.json, "backup"))); /* none yet */
    ws_ts_resp_free(&r);

    client cl[CLIENTS];
    pthread_t th[CLIENTS];
    atomic_int stop = 0;
    for (int i = 0; i < CLIENTS; i++) {
        memset(&cl[i], 0, sizeof cl[i]);
        cl[i].d = &d, cl[i].stop = &stop;
        cl[i].p = calloc(MAX_STEPS + 1, sizeof *cl[i].p);
        assert_non_null(cl[i].p);
        assert_int_equal(ws_ts_session(&d, NULL, "default", cl[i].id), 201);
        assert_int_equal(pthread_create(&th[i], NULL, run_client, &cl[i]), 0);
    }
    int64_t before[2][CLIENTS], after[2][CLIENTS];
    wait_acked(cl, NULL, 5);

    /* 1. through the route, mid-load */
    acked_now(cl, before[0]);
    route_backup(&d, NULL, "mid");
    acked_now(cl, after[0]);
    wait_acked(cl, after[0], 3);

    /* 2. through the command, beside the daemon, mid-load */
    acked_now(cl, before[1]);
    const char *args[] = {"backup", "--data-dir", data, "--to", cmd_to, NULL};
    char out[1024];
    assert_int_equal(ws_ts_daemon_run(args, out, sizeof out), 0);
    acked_now(cl, after[1]);
    wait_acked(cl, after[1], 3);

    atomic_store(&stop, 1);
    for (int i = 0; i < CLIENTS; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < CLIENTS; i++) assert_int_equal(cl[i].failed, 0);
    route_refusals(&d, tmp);
    assert_int_equal(ws_ts_stop(&d), 0);

    char route_to[400];
    snprintf(route_to, sizeof route_to, "%s/mid", root);
    restore_and_check(route_to, restored[0], cl, before[0], after[0]);
    restore_and_check(cmd_to, restored[1], cl, before[1], after[1]);

    /* a non-empty target, and a damaged backup: refused, nothing left behind */
    const char *again[] = {"restore", "--from", cmd_to, "--data-dir", restored[0], NULL};
    assert_int_equal(ws_ts_daemon_run(again, out, sizeof out), 1);
    char model[512];
    snprintf(model, sizeof model, "%s/models/default-v1.safetensors", cmd_to);
    damage(model);
    const char *broken[] = {"restore", "--from", cmd_to, "--data-dir", bad, NULL};
    assert_int_equal(ws_ts_daemon_run(broken, out, sizeof out), 1);
    assert_int_not_equal(access(bad, F_OK), 0);

    for (int i = 0; i < CLIENTS; i++) free(cl[i].p);
    ws_ts_cleanup(tmp);
}

/* With keys, the route is an admin's: no key is 401, a tenant's key 403, and
 * neither starts a backup; an admin key's backup completes. */
static void test_backup_needs_admin(void **state)
{
    (void)state;
    char tmp[256], data[320], root[320], admin[128], user[128];
    ws_ts_tmpdir(tmp, sizeof tmp);
    snprintf(data, sizeof data, "%s/data", tmp);
    snprintf(root, sizeof root, "%s/backups", tmp);
    assert_int_equal(mkdir(data, 0700), 0);
    assert_int_equal(ws_ts_key_create(data, "ops", 1, admin, sizeof admin), 0);
    assert_int_equal(ws_ts_key_create(data, "acme", 0, user, sizeof user), 0);
    ws_ts_daemon d;
    const char *flags[] = {"--backup-dir", root, NULL};
    assert_int_equal(ws_ts_start(&d, data, flags), 0);
    ws_ts_resp r;
    const char *body = "{\"name\":\"k\"}";
    assert_int_equal(ws_ts_req(&d, "POST", "/v1/admin/backup", NULL, body, &r), 401);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_req(&d, "POST", "/v1/admin/backup", user, body, &r), 403);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_req(&d, "GET", "/v1/admin/backup", user, NULL, &r), 403);
    ws_ts_resp_free(&r);
    assert_int_not_equal(access(root, F_OK), 0); /* nothing was made */
    route_backup(&d, admin, "k");
    assert_int_equal(ws_ts_stop(&d), 0);
    ws_ts_cleanup(tmp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_backup_under_load),
                                       cmocka_unit_test(test_backup_needs_admin)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
