/* test_server_learn.c — online learning through the API: a tiny model created
 * over HTTP gets a labelled stream of the `facts` task (entities moving between
 * places) posted as ordinary steps with labels; the daemon trains on it in the
 * background. Accuracy on held-out episodes (argmax over each entity's places,
 * chance 1/places), posted without labels so they teach nothing, must rise
 * measurably from before to after. WS_LEARN_EPISODES=N caps the stream's length,
 * WS_LEARN_VERBOSE=1 prints the training status every 50 episodes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "batch.h"
#include "tasks/task.h"
#include "test_server_util.h"
#include "test_util.h"

enum { STEPS = 6, EVAL_EPISODES = 12 };

static ws_ts_daemon D;
static ws_task *T;
static ws_vocab *V;
static ws_batch *B;
static ws_task_params P;

/* Appends the facts of list f (rows [0, n)) as JSON to buf. */
static size_t facts_json(char *buf, size_t cap, size_t len, const ws_fact_list *f, int S, int with_value)
{
    for (int i = 0; i < f->n; i++) {
        const int32_t *ids = f->ids + (size_t)i * S;
        len += (size_t)snprintf(buf + len, cap - len, "%s{\"fact\":[\"%s\",\"%s\"]", i ? "," : "",
                                ws_vocab_symbol(V, ids[0]), ws_vocab_symbol(V, ids[1]));
        if (with_value) len += (size_t)snprintf(buf + len, cap - len, ",\"value\":%s", f->value[i] ? "true" : "false");
        len += (size_t)snprintf(buf + len, cap - len, "}");
    }
    return len;
}

/* Plays one episode of the task through a new session; returns correct
 * entity argmaxes (out of STEPS * entities) when not labelled. */
static int episode(uint64_t seed, int labelled)
{
    char id[33], path[128];
    assert_int_equal(ws_ts_session(&D, NULL, "learn", id), 201);
    ws_ts_spath(path, sizeof path, id, "/steps");
    ws_error err = {0};
    assert_int_equal(ws_task_reset(T, 0, seed), WS_OK);
    static char body[1 << 16];
    int correct = 0;
    for (int t = 0; t < STEPS; t++) {
        ws_batch_clear(B);
        assert_int_equal(ws_batch_begin_traj(B, 1), WS_OK);
        assert_int_equal(ws_task_step(T, 0, B, NULL, &err), WS_OK);
        size_t len = (size_t)snprintf(body, sizeof body, "{\"expect_step\":%d,\"instructions\":[", t);
        len = facts_json(body, sizeof body, len, &B->instr, B->S, 1);
        len += (size_t)snprintf(body + len, sizeof body - len, "],\"queries\":[");
        len = facts_json(body, sizeof body, len, &B->query, B->S, 0);
        len += (size_t)snprintf(body + len, sizeof body - len, "]");
        if (labelled) {
            len += (size_t)snprintf(body + len, sizeof body - len, ",\"labels\":[");
            for (int q = 0; q < B->query.n; q++)
                len += (size_t)snprintf(body + len, sizeof body - len, "%s%s", q ? "," : "", B->query.value[q] ? "true" : "false");
            len += (size_t)snprintf(body + len, sizeof body - len, "]");
        }
        snprintf(body + len, sizeof body - len, "}");
        ws_ts_resp r;
        assert_int_equal(ws_ts_req(&D, "POST", path, NULL, body, &r), 200);
        const cJSON *ans = cJSON_GetObjectItem(r.json, "answers");
        for (int e = 0; e < P.entities; e++) { /* queries are entity-major: P.places per entity */
            int best = 0, truth = 0;
            double bp = -1;
            for (int p = 0; p < P.places; p++) {
                int q = e * P.places + p;
                double pv = cJSON_GetObjectItem(cJSON_GetArrayItem(ans, q), "p")->valuedouble;
                if (pv > bp) bp = pv, best = p;
                if (B->query.value[q] == 1) truth = p;
            }
            correct += best == truth;
        }
        ws_ts_resp_free(&r);
    }
    return correct;
}

static double evaluate(void)
{
    int c = 0;
    for (int i = 0; i < EVAL_EPISODES; i++) c += episode(1000000 + (uint64_t)i, 0);
    return (double)c / (EVAL_EPISODES * STEPS * P.entities);
}

static double model_status(const char *field)
{
    ws_ts_resp r;
    assert_int_equal(ws_ts_req(&D, "GET", "/v1/models/learn", NULL, NULL, &r), 200);
    const cJSON *v = strcmp(field, "version") ? cJSON_GetObjectItem(cJSON_GetObjectItem(r.json, "status"), field)
                                              : cJSON_GetObjectItem(r.json, "version");
    double x = v ? v->valuedouble : -1;
    ws_ts_resp_free(&r);
    return x;
}

static void test_online_learning(void **state)
{
    (void)state;
    char dir[256];
    ws_ts_tmpdir(dir, sizeof dir);
    static const char *const flags[] = {"--batch-wait-us", "0", NULL}; /* one client: no batch to wait for */
    assert_int_equal(ws_ts_start(&D, dir, flags), 0);
    ws_ts_resp r;
    assert_int_equal(ws_ts_req(&D, "POST", "/v1/models", NULL,
                               "{\"name\":\"learn\",\"seed\":7,\"config\":{\"d\":32,\"n_heads\":2,\"n_state\":8,"
                               "\"n_upd_layers\":1,\"n_ext_layers\":1,\"max_fact_len\":2,\"vocab_cap\":32,\"n_overflow\":4},"
                               "\"training\":{\"enabled\":true,\"lr\":0.003,\"update_every\":4,\"recall_queries\":4}}", &r),
                     201);
    ws_ts_resp_free(&r);
    ws_model_config cfg = ws_model_config_default();
    cfg.max_fact_len = 2, cfg.vocab_cap = 32, cfg.n_overflow = 4;
    assert_int_equal(ws_vocab_new(&V, cfg.vocab_cap, cfg.n_overflow), WS_OK);
    assert_int_equal(ws_batch_new(&B, &cfg), WS_OK);
    assert_true(ws_task_params_default("facts", &P));
    P.entities = 2, P.places = 3; /* small enough to learn in CI time (chance 1/3) */
    ws_error err = {0};
    assert_int_equal(ws_task_new(&T, &P, 1, V, &err), WS_OK);

    double before = evaluate();
    /* The stream goes on until the training loss says the model has caught on
     * (how soon varies: which examples share a training pass depends on timing),
     * at most max_episodes. */
    int max_episodes = getenv("WS_LEARN_EPISODES") ? atoi(getenv("WS_LEARN_EPISODES")) : 1500, episodes = 0;
    time_t t0 = time(NULL);
    while (episodes < max_episodes) {
        episode(1 + (uint64_t)episodes++, 1);
        if (episodes % 25 == 0 && episodes >= 300 && model_status("last_loss") < 0.05) break;
        if (getenv("WS_LEARN_VERBOSE") && episodes % 50 == 0) {
            assert_int_equal(ws_ts_req(&D, "GET", "/v1/models/learn", NULL, NULL, &r), 200);
            fprintf(stderr, "%d: %s\n", episodes, strstr(r.body, "\"status\""));
            ws_ts_resp_free(&r);
        }
    }
    for (int i = 0; i < 600 && model_status("examples_ready") > 0; i++) { /* let training drain */
        struct timespec ts = {0, 100000000};
        nanosleep(&ts, NULL);
    }
    double after = evaluate();
    int version = (int)model_status("version");
    fprintf(stderr, "online learning: %d labelled episodes in %lds, %d model versions; held-out accuracy %.3f -> %.3f "
                    "(chance %.3f)\n", episodes, (long)(time(NULL) - t0), version, before, after, 1.0 / P.places);
    assert_true(version > 1);
    assert_true(after > before + 0.15);
    ws_task_free(T);
    ws_batch_free(B);
    ws_vocab_free(V);
    assert_int_equal(ws_ts_stop(&D), 0);
    ws_ts_cleanup(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_online_learning)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
