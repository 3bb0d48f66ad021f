/* test_server.c — worldstated end to end over HTTP (the real binary): the user
 * flow, answers equal to the model run directly, restart keeps every state
 * bit for bit, tenants isolated, every bad-input class a 4xx with nothing
 * changed. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/ws_clock.h"
#include "model/checkpoint.h"
#include "storage/storage.h"
#include "test_server_util.h"
#include "test_util.h"

/* The daemon the tests share (ws_ts_shared_setup starts it). */
static ws_ts_daemon *const D = &ws_ts_shared;
static const char *const DIR_ = ws_ts_shared_dir;

static long step(const char *id, const char *key, const char *body, ws_ts_resp *r)
{
    char p[128];
    return ws_ts_req(D, "POST", ws_ts_spath(p, sizeof p, id, "/steps"), key, body, r);
}

/* worldstate_engine_idle_seconds_total from /metrics. */
static double engine_idle_seconds(void)
{
    ws_ts_resp r;
    assert_int_equal(ws_ts_req(D, "GET", "/metrics", NULL, NULL, &r), 200);
    const char *name = "\nworldstate_engine_idle_seconds_total ";
    const char *v = strstr(r.body, name);
    assert_non_null(v);
    double s = strtod(v + strlen(name), NULL);
    ws_ts_resp_free(&r);
    return s;
}

static void test_flow(void **state)
{
    (void)state;
    ws_ts_resp r;
    assert_int_equal(ws_ts_req(D, "GET", "/readyz", NULL, NULL, &r), 200);
    ws_ts_resp_free(&r);
    char id[33], p[160];
    assert_int_equal(ws_ts_session(D, NULL, "default", id), 201);
    assert_int_equal(step(id, NULL,
                          "{\"expect_step\":0,\"instructions\":[{\"fact\":[\"mary\",\"kitchen\"],\"value\":true}],"
                          "\"queries\":[{\"fact\":[\"mary\",\"kitchen\"]},{\"fact\":[\"john\",\"garden\"]}]}", &r), 200);
    assert_int_equal(cJSON_GetObjectItem(r.json, "step")->valueint, 1);
    const cJSON *ans = cJSON_GetObjectItem(r.json, "answers");
    assert_int_equal(cJSON_GetArraySize(ans), 2);
    double p0 = cJSON_GetObjectItem(cJSON_GetArrayItem(ans, 0), "p")->valuedouble;
    assert_true(p0 > 0 && p0 < 1);
    ws_ts_resp_free(&r);
    /* an empty step still advances time */
    assert_int_equal(step(id, NULL, "{}", &r), 200);
    assert_int_equal(cJSON_GetObjectItem(r.json, "step")->valueint, 2);
    ws_ts_resp_free(&r);
    /* queries alone: no state change */
    assert_int_equal(ws_ts_req(D, "POST", ws_ts_spath(p, sizeof p, id, "/queries"), NULL,
                               "{\"queries\":[{\"fact\":[\"mary\",\"kitchen\"]}]}", &r),
                     200);
    assert_int_equal(cJSON_GetObjectItem(r.json, "step")->valueint, 2);
    ws_ts_resp_free(&r);
    /* labels later */
    assert_int_equal(ws_ts_req(D, "PUT", ws_ts_spath(p, sizeof p, id, "/steps/1/labels"), NULL,
                               "{\"labels\":[true,false]}", &r),
                     200);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_req(D, "PUT", ws_ts_spath(p, sizeof p, id, "/steps/1/labels"), NULL,
                               "{\"labels\":[false,false]}", &r),
                     409);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_req(D, "PUT", ws_ts_spath(p, sizeof p, id, "/steps/1/labels"), NULL,
                               "{\"labels\":[true,false,true]}", &r),
                     400);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_req(D, "PUT", ws_ts_spath(p, sizeof p, id, "/steps/99/labels"), NULL,
                               "{\"labels\":[true]}", &r),
                     404);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_req(D, "PUT", ws_ts_spath(p, sizeof p, id, "/steps/1/labels"), NULL,
                               "{\"labels\":[false,false],\"replace\":true}", &r),
                     200);
    ws_ts_resp_free(&r);
    /* the log, paged */
    assert_int_equal(
        ws_ts_req(D, "GET", ws_ts_spath(p, sizeof p, id, "/steps?after=0&limit=1"), NULL, NULL, &r),
        200);
    const cJSON *steps = cJSON_GetObjectItem(r.json, "steps");
    assert_int_equal(cJSON_GetArraySize(steps), 1);
    assert_true(cJSON_IsArray(cJSON_GetObjectItem(cJSON_GetArrayItem(steps, 0), "labels")));
    assert_int_equal(cJSON_GetObjectItem(r.json, "next_after")->valueint, 1);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_req(D, "GET", ws_ts_spath(p, sizeof p, id, ""), NULL, NULL, &r), 200);
    assert_int_equal(cJSON_GetObjectItem(r.json, "step")->valueint, 2);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_req(D, "GET", "/v1/sessions?limit=10", NULL, NULL, &r), 200);
    assert_true(cJSON_GetArraySize(cJSON_GetObjectItem(r.json, "sessions")) >= 1);
    ws_ts_resp_free(&r);
    /* models: list, create, read, tune, download */
    assert_int_equal(ws_ts_req(D, "GET", "/v1/models", NULL, NULL, &r), 200);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_req(D, "POST", "/v1/models", NULL,
                               "{\"name\":\"tiny\",\"config\":{\"d\":16,\"n_heads\":2,\"n_state\":"
                               "4,\"n_upd_layers\":1,"
                               "\"n_ext_layers\":1,\"vocab_cap\":64,\"d_raw\":3}}",
                               &r),
                     201);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_req(D, "POST", "/v1/models", NULL, "{\"name\":\"tiny\"}", &r), 409);
    ws_ts_resp_free(&r);
    /* mixer fields: names, not numbers; each slot takes only its own mixers */
    static const char *const bad_mixers[] = {
        "{\"name\":\"bad\",\"config\":{\"upd_mixer\":2}}",
        "{\"name\":\"bad\",\"config\":{\"upd_mixer\":\"rn\"}}",
        "{\"name\":\"bad\",\"config\":{\"ext_mixer\":\"lstm\"}}",
        "{\"name\":\"bad\",\"config\":{\"s2_tau\":0}}",
        "{\"name\":\"bad\",\"config\":{\"s2_tau\":\"1\"}}",
    };
    for (size_t i = 0; i < sizeof bad_mixers / sizeof bad_mixers[0]; i++) {
        assert_int_equal(ws_ts_req(D, "POST", "/v1/models", NULL, bad_mixers[i], &r), 400);
        ws_ts_resp_free(&r);
    }
    assert_int_equal(ws_ts_req(D, "GET", "/v1/models/bad", NULL, NULL, &r), 404);
    ws_ts_resp_free(&r);
    /* a model with other mixers: created, recorded by name, and it serves steps */
    assert_int_equal(ws_ts_req(D, "POST", "/v1/models", NULL,
                               "{\"name\":\"mixed\",\"config\":{\"d\":16,\"n_heads\":2,"
                               "\"n_state\":6,\"n_upd_layers\":1,\"n_ext_layers\":1,"
                               "\"upd_mixer\":\"rmc\",\"ext_mixer\":\"simplicial2\","
                               "\"s2_dim\":8,\"s2_tau\":0.125}}",
                               &r),
                     201);
    cJSON *mc = cJSON_GetObjectItem(r.json, "config");
    assert_string_equal(cJSON_GetObjectItem(mc, "upd_mixer")->valuestring, "rmc");
    assert_string_equal(cJSON_GetObjectItem(mc, "ext_mixer")->valuestring, "simplicial2");
    assert_true(cJSON_GetObjectItem(mc, "s2_tau")->valuedouble == 0.125);
    ws_ts_resp_free(&r);
    char mid[33];
    assert_int_equal(ws_ts_session(D, NULL, "mixed", mid), 201);
    assert_int_equal(step(mid, NULL, "{\"instructions\":[{\"fact\":[\"a\",\"b\"],\"value\":true}],"
                              "\"queries\":[{\"fact\":[\"a\",\"b\"]}]}", &r), 200);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(r.json, "answers")), 1);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_req(D, "PATCH", "/v1/models/tiny/training", NULL,
                               "{\"enabled\":false,\"lr\":0.01}", &r),
                     200);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(r.json, "enabled")));
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_req(D, "GET", "/v1/models/tiny", NULL, NULL, &r), 200);
    assert_int_equal(cJSON_GetObjectItem(r.json, "version")->valueint, 1);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_req(D, "GET", "/v1/models/tiny/checkpoint", NULL, NULL, &r), 200);
    assert_true(r.len > 8 && strstr(r.body + 8, "worldstate-model-1"));
    ws_ts_resp_free(&r);
    char vid[33];
    assert_int_equal(ws_ts_session(D, NULL, "tiny", vid), 201);
    assert_int_equal(step(vid, NULL, "{\"instructions\":[{\"vector\":[1,2,3],\"value\":true}],\"queries\":[{\"vector\":[1,2,3]}]}", &r), 200);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_req(D, "GET", "/metrics", NULL, NULL, &r), 200);
    assert_non_null(strstr(r.body, "worldstate_steps_total"));
    assert_non_null(strstr(r.body, "worldstate_model_version{model=\"tiny\"} 1"));
    /* the states just committed are held for the sessions' next steps (--state-cache) */
    assert_non_null(strstr(r.body, "\nworldstate_state_cache_hits_total "));
    assert_non_null(strstr(r.body, "\nworldstate_state_cache_misses_total "));
    const char *held = strstr(r.body, "\nworldstate_state_cache_bytes ");
    assert_non_null(held);
    assert_true(strtod(held + strlen("\nworldstate_state_cache_bytes "), NULL) > 0);
    ws_ts_resp_free(&r);
    /* the engine thread's idle time grows while nothing is asked, by no more
     * than the time that passed (the wait under way counts) */
    double t0 = ws_clock_mono_us() / 1e6, idle0 = engine_idle_seconds();
    usleep(300000);
    double idle1 = engine_idle_seconds(), t1 = ws_clock_mono_us() / 1e6;
    assert_true(idle1 - idle0 >= 0.2);
    assert_true(idle1 - idle0 <= t1 - t0 + 1e-3);
    /* delete */
    assert_int_equal(ws_ts_req(D, "DELETE", ws_ts_spath(p, sizeof p, id, ""), NULL, NULL, &r), 204);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_req(D, "GET", ws_ts_spath(p, sizeof p, id, ""), NULL, NULL, &r), 404);
    ws_ts_resp_free(&r);
}

/* The daemon's answers equal the model run here on the same inputs. */
static ws_status vocab_add(void *ctx, int64_t id, const char *sym, size_t len)
{
    return ws_vocab_id(ctx, sym, len, 1) == id ? WS_OK : WS_ERR_FORMAT;
}

static void fetch_state(const char *id, float **out, size_t *n)
{
    char p[160];
    ws_ts_resp r;
    assert_int_equal(ws_ts_req(D, "GET", ws_ts_spath(p, sizeof p, id, "/state"), NULL, NULL, &r),
                     200);
    *n = r.len / sizeof(float);
    *out = malloc(r.len ? r.len : 1);
    memcpy(*out, r.body, r.len);
    ws_ts_resp_free(&r);
}

static void test_matches_model(void **state)
{
    (void)state;
    static const char *facts[][2] = {{"anna", "hall"}, {"bob", "attic"}, {"anna", "attic"}};
    char id[33];
    ws_ts_resp r1, r2;
    assert_int_equal(ws_ts_session(D, NULL, "default", id), 201);
    assert_int_equal(step(id, NULL, "{\"instructions\":[{\"fact\":[\"anna\",\"hall\"],\"value\":true},"
                                    "{\"fact\":[\"bob\",\"attic\"],\"value\":true}],"
                                    "\"queries\":[{\"fact\":[\"anna\",\"hall\"]},{\"fact\":[\"anna\",\"attic\"]}]}", &r1), 200);
    float *w1;
    size_t nw;
    fetch_state(id, &w1, &nw);
    assert_int_equal(step(id, NULL, "{\"instructions\":[{\"fact\":[\"anna\",\"attic\"],\"value\":true}],"
                                    "\"queries\":[{\"fact\":[\"anna\",\"attic\"]},{\"fact\":[\"bob\",\"attic\"]}]}", &r2), 200);

    ws_error err = {0};
    ws_backend *be;
    assert_int_equal(ws_backend_cpu_new(&be, 1, &err), WS_OK);
    ws_model *m;
    char path[400], db[400];
    snprintf(path, sizeof path, "%s/models/default-v1.safetensors", DIR_);
    snprintf(db, sizeof db, "%s/worldstate.db", DIR_);
    assert_int_equal(ws_checkpoint_load(&m, path, be, &err), WS_OK);
    ws_store *st;
    ws_store_model sm = {0};
    assert_int_equal(ws_store_open(db, WS_STORE_DURABILITY_NORMAL, 0, &st, &err), WS_OK);
    assert_int_equal(ws_store_model_find(st, "default", &sm, &err), WS_OK);
    assert_int_equal(ws_store_vocab_load(st, sm.id, vocab_add, ws_model_vocab(m), &err), WS_OK);
    ws_store_model_clear(&sm);
    ws_store_close(st);
    ws_vocab *v = ws_model_vocab(m);
    int32_t ids[3][2];
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 2; k++) ids[i][k] = ws_vocab_id(v, facts[i][k], strlen(facts[i][k]), 0);
    size_t T = ws_model_state_floats(m);
    assert_int_equal(nw, T);
    float *w, probs[2];
    assert_int_equal(ws_model_state_alloc(m, 1, &w, &err), WS_OK);
    ws_batch *b;
    assert_int_equal(ws_batch_new(&b, ws_model_config_of(m)), WS_OK);
    ws_exec *x;
    assert_int_equal(ws_exec_new(&x, m, &err), WS_OK);
    ws_step_result res;
    /* step 1 from W_0 */
    ws_batch_begin_traj(b, 1);
    ws_batch_add_instr(b, ids[0], 2, 1);
    ws_batch_add_instr(b, ids[1], 2, 1);
    ws_batch_add_query(b, ids[0], 2, -1);
    ws_batch_add_query(b, ids[2], 2, -1);
    assert_int_equal(ws_exec_step(x, b, w, w, WS_STEP_INFER, 1, probs, &res, &err), WS_OK);
    const cJSON *a1 = cJSON_GetObjectItem(r1.json, "answers");
    for (int i = 0; i < 2; i++)
        assert_true(fabs(cJSON_GetObjectItem(cJSON_GetArrayItem(a1, i), "p")->valuedouble - probs[i]) < 1e-5);
    float *mine = malloc(sizeof(float) * T);
    assert_int_equal(ws_backend_download(be, mine, w, sizeof(float) * T), WS_OK);
    for (size_t i = 0; i < T; i++) assert_true(fabsf(mine[i] - w1[i]) < 1e-4f);
    /* step 2 from the daemon's W_1 */
    ws_batch_clear(b);
    ws_batch_begin_traj(b, 0);
    ws_batch_add_instr(b, ids[2], 2, 1);
    ws_batch_add_query(b, ids[2], 2, -1);
    ws_batch_add_query(b, ids[1], 2, -1);
    assert_int_equal(ws_backend_upload(be, w, w1, sizeof(float) * T), WS_OK);
    assert_int_equal(ws_exec_step(x, b, w, w, WS_STEP_INFER, 1, probs, &res, &err), WS_OK);
    const cJSON *a2 = cJSON_GetObjectItem(r2.json, "answers");
    for (int i = 0; i < 2; i++)
        assert_true(fabs(cJSON_GetObjectItem(cJSON_GetArrayItem(a2, i), "p")->valuedouble - probs[i]) < 1e-5);
    free(mine);
    free(w1);
    ws_batch_free(b);
    ws_backend_release(be, w);
    ws_exec_free(x);
    ws_model_free(m);
    ws_backend_free(be);
    ws_ts_resp_free(&r1);
    ws_ts_resp_free(&r2);
}

/* A restart keeps every session and its state bit for bit. */
static void test_restart(void **state)
{
    (void)state;
    enum { N = 4 };
    char ids[N][33];
    float *before[N];
    size_t n[N];
    ws_ts_resp r;
    for (int s = 0; s < N; s++) {
        assert_int_equal(ws_ts_session(D, NULL, "default", ids[s]), 201);
        for (int t = 0; t <= s; t++) {
            char body[200];
            snprintf(body, sizeof body, "{\"instructions\":[{\"fact\":[\"x%d\",\"y%d\"],\"value\":%s}]}", s, t,
                     t % 2 ? "false" : "true");
            assert_int_equal(step(ids[s], NULL, body, &r), 200);
            ws_ts_resp_free(&r);
        }
        fetch_state(ids[s], &before[s], &n[s]);
    }
    assert_int_equal(ws_ts_stop(D), 0);
    assert_int_equal(ws_ts_start(D, DIR_, NULL), 0);
    for (int s = 0; s < N; s++) {
        float *after;
        size_t na;
        char p[160];
        fetch_state(ids[s], &after, &na);
        assert_int_equal(na, n[s]);
        assert_memory_equal(after, before[s], na * sizeof(float));
        assert_int_equal(ws_ts_req(D, "GET", ws_ts_spath(p, sizeof p, ids[s], ""), NULL, NULL, &r),
                         200);
        assert_int_equal(cJSON_GetObjectItem(r.json, "step")->valueint, s + 1);
        ws_ts_resp_free(&r);
        free(after);
        free(before[s]);
    }
}

/* Every bad-input class: a 4xx with a JSON error, and the session unchanged. */
static void test_bad_input(void **state)
{
    (void)state;
    char id[33], vid[33], p[160];
    ws_ts_resp r;
    assert_int_equal(
        ws_ts_req(
            D, "POST", "/v1/models", NULL,
            "{\"name\":\"vec\",\"config\":{\"d\":16,\"n_heads\":2,\"n_state\":4,\"n_upd_layers\":1,"
            "\"n_ext_layers\":1,\"vocab_cap\":64,\"d_raw\":3}}",
            &r),
        201);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_session(D, NULL, "default", id), 201);
    assert_int_equal(ws_ts_session(D, NULL, "vec", vid), 201);
    assert_int_equal(step(id, NULL, "{\"instructions\":[{\"fact\":[\"a\",\"b\"],\"value\":true}]}", &r), 200);
    ws_ts_resp_free(&r);
    assert_int_equal(step(vid, NULL, "{\"instructions\":[{\"vector\":[1,2,3],\"value\":true}]}", &r), 200);
    ws_ts_resp_free(&r);
    float *s0, *v0;
    size_t n0, nv0;
    fetch_state(id, &s0, &n0);
    fetch_state(vid, &v0, &nv0);
    static const struct {
        int vec;
        const char *body;
        long status;
        const char *code;
    } cases[] = {
        {0, "{\"instructions\":[", 400, "bad_json"},
        {0, "", 400, "bad_json"},
        {0, "[1,2]", 400, "invalid_request"},
        {0, "{} {}", 400, "bad_json"},
        {0, "{\"instructions\":[{\"fact\":[\"a\",\"b\"],\"value\":\"yes\"}]}", 400, "invalid_request"},
        {0, "{\"instructions\":[{\"fact\":[\"a\",\"b\"]}]}", 400, "invalid_request"},
        {0, "{\"instructions\":[{\"fact\":[\"a\",1],\"value\":true}]}", 400, "invalid_request"},
        {0, "{\"instructions\":{}}", 400, "invalid_request"},
        {0, "{\"instructions\":[],\"colour\":1}", 400, "invalid_request"},
        {0, "{\"instructions\":[{\"fact\":[\"a\"],\"value\":true,\"weight\":2}]}", 400, "invalid_request"},
        {0, "{\"instructions\":[{\"fact\":[],\"value\":true}]}", 400, "invalid_request"},
        {0, "{\"instructions\":[{\"fact\":[\"\"],\"value\":true}]}", 400, "invalid_request"},
        {0, "{\"instructions\":[{\"fact\":[\"a\",\"b\",\"c\",\"d\",\"e\"],\"value\":true}]}", 400, "invalid_request"},
        {0, "{\"queries\":[{\"fact\":[\"a\"]}],\"labels\":[true,false]}", 400, "invalid_request"},
        {0, "{\"expect_step\":-1}", 400, "invalid_request"},
        {0, "{\"expect_step\":1.5}", 400, "invalid_request"},
        {0, "{\"expect_step\":0}", 409, "step_conflict"},
        {0, "{\"instructions\":[{\"vector\":[1,2,3],\"value\":true}]}", 400, "invalid_request"},
        {1, "{\"instructions\":[{\"vector\":[1,2],\"value\":true}]}", 400, "invalid_request"},
        {1, "{\"instructions\":[{\"vector\":[1,1e999,3],\"value\":true}]}", 400, "invalid_request"},
        {1, "{\"instructions\":[{\"vector\":[1,1e39,3],\"value\":true}]}", 400, "invalid_request"},
        {1, "{\"queries\":[{\"vector\":[1,\"2\",3]}]}", 400, "invalid_request"},
        {1, "{\"instructions\":[{\"fact\":[\"a\"],\"vector\":[1,2,3],\"value\":true}]}", 400, "invalid_request"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        long st = step(cases[i].vec ? vid : id, NULL, cases[i].body, &r);
        if (st != cases[i].status) fprintf(stderr, "case %zu (%s): %ld %s\n", i, cases[i].body, st, r.body);
        assert_int_equal(st, cases[i].status);
        const cJSON *e = cJSON_GetObjectItem(r.json, "error");
        assert_non_null(e);
        assert_string_equal(cJSON_GetObjectItem(e, "code")->valuestring, cases[i].code);
        assert_true(cJSON_IsString(cJSON_GetObjectItem(e, "message")));
        ws_ts_resp_free(&r);
    }
    /* limits: too many instructions, a too-long symbol, a body over 1 MiB */
    size_t cap = 2u << 20;
    char *big = malloc(cap);
    size_t len = (size_t)snprintf(big, cap, "{\"instructions\":[");
    for (int i = 0; i < 257; i++) len += (size_t)snprintf(big + len, cap - len, "%s{\"fact\":[\"a\"],\"value\":true}", i ? "," : "");
    snprintf(big + len, cap - len, "]}");
    assert_int_equal(step(id, NULL, big, &r), 400);
    ws_ts_resp_free(&r);
    len = (size_t)snprintf(big, cap, "{\"instructions\":[{\"fact\":[\"");
    memset(big + len, 'x', 200);
    snprintf(big + len + 200, cap - len - 200, "\"],\"value\":true}]}");
    assert_int_equal(step(id, NULL, big, &r), 400);
    ws_ts_resp_free(&r);
    memset(big, ' ', cap - 1);
    big[0] = '{';
    big[cap - 2] = '}';
    big[cap - 1] = '\0';
    assert_int_equal(step(id, NULL, big, &r), 413);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(r.json, "error"), "code")->valuestring, "too_large");
    ws_ts_resp_free(&r);
    free(big);
    /* unknown session, wrong method, unknown route, bad key */
    assert_int_equal(step("0123456789abcdef0123456789abcdef", NULL, "{}", &r), 404);
    ws_ts_resp_free(&r);
    assert_int_equal(step("nope", NULL, "{}", &r), 404);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_req(D, "PATCH", ws_ts_spath(p, sizeof p, id, ""), NULL, "{}", &r), 405);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_req(D, "GET", "/v2/nothing", NULL, NULL, &r), 404);
    ws_ts_resp_free(&r);
    assert_int_equal(step(id, "wsk_wrong", "{}", &r), 401);
    ws_ts_resp_free(&r);
    /* nothing changed */
    float *s1, *v1;
    size_t n1, nv1;
    fetch_state(id, &s1, &n1);
    fetch_state(vid, &v1, &nv1);
    assert_int_equal(n1, n0);
    assert_memory_equal(s1, s0, n0 * sizeof(float));
    assert_int_equal(nv1, nv0);
    assert_memory_equal(v1, v0, nv0 * sizeof(float));
    assert_int_equal(ws_ts_req(D, "GET", ws_ts_spath(p, sizeof p, id, "/steps"), NULL, NULL, &r),
                     200);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(r.json, "steps")), 1);
    ws_ts_resp_free(&r);
    free(s0), free(s1), free(v0), free(v1);
}

/* Many clients stepping ONE session at once (no expect_step): every step is
 * applied exactly once, in some order, none lost (the engine takes a session at
 * most once per batch and commits against the step it computed from). */
typedef struct {
    const char *id;
    int ok;
} hammer_arg;

static void *hammer(void *p)
{
    hammer_arg *h = p;
    for (int i = 0; i < 5; i++) {
        ws_ts_resp r;
        h->ok += step(h->id, NULL, "{\"instructions\":[{\"fact\":[\"h\"],\"value\":true}]}", &r) == 200;
        ws_ts_resp_free(&r);
    }
    return NULL;
}

static void test_one_session_concurrent(void **state)
{
    (void)state;
    enum { THREADS = 8 };
    char id[33], p[160];
    assert_int_equal(ws_ts_session(D, NULL, "default", id), 201);
    pthread_t th[THREADS];
    hammer_arg args[THREADS];
    for (int i = 0; i < THREADS; i++) {
        args[i] = (hammer_arg){id, 0};
        assert_int_equal(pthread_create(&th[i], NULL, hammer, &args[i]), 0);
    }
    int ok = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        ok += args[i].ok;
    }
    assert_int_equal(ok, THREADS * 5);
    ws_ts_resp r;
    assert_int_equal(
        ws_ts_req(D, "GET", ws_ts_spath(p, sizeof p, id, "/steps?limit=1000"), NULL, NULL, &r),
        200);
    const cJSON *steps = cJSON_GetObjectItem(r.json, "steps");
    assert_int_equal(cJSON_GetArraySize(steps), THREADS * 5);
    for (int i = 0; i < THREADS * 5; i++)
        assert_int_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(steps, i), "step")->valueint, i + 1);
    ws_ts_resp_free(&r);
}

/* Keys: tenants cannot reach each other's sessions (404), admin routes need an
 * admin key, no or wrong key is 401. Its own daemon (keys exist from the start). */
static void test_tenants(void **state)
{
    (void)state;
    char dir[256], ka[128], kb[128], kadm[128];
    ws_ts_tmpdir(dir, sizeof dir);
    assert_int_equal(ws_ts_key_create(dir, "alice", 0, ka, sizeof ka), 0);
    assert_int_equal(ws_ts_key_create(dir, "bob", 0, kb, sizeof kb), 0);
    assert_int_equal(ws_ts_key_create(dir, "ops", 1, kadm, sizeof kadm), 0);
    ws_ts_daemon saved = *D;
    assert_int_equal(ws_ts_start(D, dir, NULL), 0);
    char id[33], p[160];
    ws_ts_resp r;
    assert_int_equal(ws_ts_session(D, NULL, "default", id), 401);
    assert_int_equal(ws_ts_session(D, "wsk_0000", "default", id), 401);
    assert_int_equal(ws_ts_session(D, ka, "default", id), 201);
    assert_int_equal(step(id, ka, "{\"instructions\":[{\"fact\":[\"k\"],\"value\":true}]}", &r), 200);
    ws_ts_resp_free(&r);
    static const char *const m[][3] = {{"GET", "", NULL}, {"GET", "/state", NULL}, {"GET", "/steps", NULL},
                                       {"POST", "/steps", "{}"}, {"POST", "/queries", "{\"queries\":[]}"},
                                       {"PUT", "/steps/1/labels", "{\"labels\":[true]}"}, {"DELETE", "", NULL}};
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        assert_int_equal(
            ws_ts_req(D, m[i][0], ws_ts_spath(p, sizeof p, id, m[i][1]), kb, m[i][2], &r), 404);
        ws_ts_resp_free(&r);
    }
    assert_int_equal(ws_ts_req(D, "GET", "/v1/sessions", kb, NULL, &r), 200);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(r.json, "sessions")), 0);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_req(D, "GET", ws_ts_spath(p, sizeof p, id, ""), ka, NULL, &r), 200);
    assert_int_equal(cJSON_GetObjectItem(r.json, "step")->valueint, 1);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_req(D, "POST", "/v1/models", ka, "{\"name\":\"m2\"}", &r), 403);
    ws_ts_resp_free(&r);
    assert_int_equal(
        ws_ts_req(D, "PATCH", "/v1/models/default/training", kb, "{\"enabled\":false}", &r), 403);
    ws_ts_resp_free(&r);
    assert_int_equal(
        ws_ts_req(D, "PATCH", "/v1/models/default/training", kadm, "{\"enabled\":true}", &r), 200);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_stop(D), 0);
    ws_ts_cleanup(dir);
    *D = saved;
}

/* The route table's answers: 405 names the path's methods in Allow, HEAD is
 * every GET route without its body, /metrics labels requests by row name. */
static void test_routes(void **state)
{
    (void)state;
    char id[33], p[160], allow[128], len[32];
    ws_ts_resp r;
    assert_int_equal(ws_ts_session(D, NULL, "default", id), 201);
    static const char *const wrong[][3] = {
        {"PATCH", "", "GET, HEAD, DELETE, OPTIONS"},
        {"DELETE", "/steps", "GET, HEAD, POST, OPTIONS"},
        {"GET", "/queries", "POST, OPTIONS"},
        {"POST", "/steps/1/labels", "PUT, OPTIONS"},
    };
    for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
        ws_ts_spath(p, sizeof p, id, wrong[i][1]);
        assert_int_equal(ws_ts_req(D, wrong[i][0], p, NULL, "{}", &r), 405);
        assert_true(ws_ts_header(&r, "Allow", allow, sizeof allow));
        assert_string_equal(allow, wrong[i][2]);
        const cJSON *e = cJSON_GetObjectItem(r.json, "error");
        assert_string_equal(cJSON_GetObjectItem(e, "code")->valuestring, "method_not_allowed");
        ws_ts_resp_free(&r);
    }
    static const char *const other[][3] = {{"DELETE", "/v1/models", "GET, HEAD, POST, OPTIONS"},
                                           {"GET", "/v1/models/default/import", "POST, OPTIONS"},
                                           {"PUT", "/v1/models/default/training", "PATCH, OPTIONS"},
                                           {"POST", "/healthz", "GET, HEAD, OPTIONS"}};
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        assert_int_equal(ws_ts_req(D, other[i][0], other[i][1], NULL, NULL, &r), 405);
        assert_true(ws_ts_header(&r, "Allow", allow, sizeof allow));
        assert_string_equal(allow, other[i][2]);
        ws_ts_resp_free(&r);
    }
    /* HEAD: the GET's status and headers, no body */
    static const char *const heads[] = {"", "/state", "/steps"};
    for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++) {
        ws_ts_spath(p, sizeof p, id, heads[i]);
        assert_int_equal(ws_ts_req(D, "GET", p, NULL, NULL, &r), 200);
        size_t get_len = r.len;
        ws_ts_resp_free(&r);
        assert_int_equal(ws_ts_req(D, "HEAD", p, NULL, NULL, &r), 200);
        assert_int_equal(r.len, 0);
        assert_true(ws_ts_header(&r, "Content-Length", len, sizeof len));
        assert_int_equal(strtoul(len, NULL, 10), get_len);
        ws_ts_resp_free(&r);
    }
    assert_int_equal(ws_ts_req(D, "HEAD", "/healthz", NULL, NULL, &r), 200);
    assert_int_equal(r.len, 0);
    ws_ts_resp_free(&r);
    assert_int_equal(
        ws_ts_req(D, "HEAD", "/v1/sessions/0123456789abcdef0123456789abcdef", NULL, NULL, &r), 404);
    assert_int_equal(r.len, 0);
    ws_ts_resp_free(&r);
    assert_int_equal(ws_ts_req(D, "HEAD", ws_ts_spath(p, sizeof p, id, "/queries"), NULL, NULL, &r),
                     405);
    ws_ts_resp_free(&r);
    /* /metrics: the row's name, HEAD counted with its GET, a 405 with the path's rows */
    assert_int_equal(ws_ts_req(D, "GET", "/metrics", NULL, NULL, &r), 200);
    assert_non_null(strstr(r.body, "_requests_total{route=\"state\",status=\"200\"}"));
    assert_null(strstr(r.body, "{route=\"state\",status=\"405\"}"));
    assert_non_null(strstr(r.body, "{route=\"labels\",status=\"405\"} 1"));
    assert_non_null(strstr(r.body, "{route=\"import\",status=\"405\"} 1"));
    ws_ts_resp_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flow),
        cmocka_unit_test(test_matches_model),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_one_session_concurrent),
        cmocka_unit_test(test_restart),
        cmocka_unit_test(test_tenants),
        cmocka_unit_test(test_routes),
    };
    return cmocka_run_group_tests(tests, ws_ts_shared_setup, ws_ts_shared_teardown);
}
