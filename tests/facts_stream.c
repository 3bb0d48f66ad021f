/* facts_stream.c — see facts_stream.h. */
#include "facts_stream.h"

#include <stdio.h>
#include <string.h>

#include "model/batch.h"
#include "test_util.h"

void ws_fs_start(ws_ts_daemon *d, char *dir, const char *name, const char *training)
{
    ws_ts_tmpdir(dir, 256);
    /* Training at the priority of serving: these streams are about what is
     * learned, on a test machine that may have no idle core. */
    static const char *const flags[] = {"--batch-wait-us", "0", "--train-priority", "normal",
                                        NULL};
    assert_int_equal(ws_ts_start(d, dir, flags), 0);
    char body[512];
    snprintf(body, sizeof body,
             "{\"name\":\"%s\",\"seed\":7,\"config\":{\"d\":32,\"n_heads\":2,\"n_state\":8,\"n_upd_layers\":1,"
             "\"n_ext_layers\":1,\"max_fact_len\":2,\"vocab_cap\":32,\"n_overflow\":4}%s%s}",
             name, training ? ",\"training\":" : "", training ? training : "");
    ws_ts_resp r;
    assert_int_equal(ws_ts_req(d, "POST", "/v1/models", NULL, body, &r), 201);
    ws_ts_resp_free(&r);
}

void ws_fs_init(ws_fs *f, int entities, int places, int steps)
{
    memset(f, 0, sizeof *f);
    ws_model_config cfg = ws_model_config_default();
    cfg.max_fact_len = 2, cfg.vocab_cap = 32, cfg.n_overflow = 4;
    assert_int_equal(ws_vocab_new(&f->vocab, cfg.vocab_cap, cfg.n_overflow), WS_OK);
    assert_int_equal(ws_batch_new(&f->batch, &cfg), WS_OK);
    assert_true(ws_task_params_default("facts", &f->p));
    f->p.entities = entities, f->p.places = places;
    f->steps = steps;
    ws_error err = {0};
    assert_int_equal(ws_task_new(&f->task, &f->p, 1, f->vocab, &err), WS_OK);
}

void ws_fs_free(ws_fs *f)
{
    ws_task_free(f->task);
    ws_batch_free(f->batch);
    ws_vocab_free(f->vocab);
}

/* Appends the facts of list l (rows [0, n)) as JSON to buf. */
static size_t facts_json(const ws_fs *f, char *buf, size_t cap, size_t len, const ws_fact_list *l,
                         int with_value)
{
    int S = f->batch->S;
    for (int i = 0; i < l->n; i++) {
        const int32_t *ids = l->ids + (size_t)i * S;
        len += (size_t)snprintf(buf + len, cap - len, "%s{\"fact\":[\"%s\",\"%s\"]", i ? "," : "",
                                ws_vocab_symbol(f->vocab, ids[0]), ws_vocab_symbol(f->vocab, ids[1]));
        if (with_value)
            len += (size_t)snprintf(buf + len, cap - len, ",\"value\":%s", l->value[i] ? "true" : "false");
        len += (size_t)snprintf(buf + len, cap - len, "}");
    }
    return len;
}

ws_fs_result ws_fs_episode(ws_fs *f, const ws_ts_daemon *d, const char *model, uint64_t seed,
                           int labelled)
{
    ws_fs_result res = {.min_version = INT64_MAX, .max_version = 0};
    char path[128];
    assert_int_equal(ws_ts_session(d, NULL, model, res.session), 201);
    ws_ts_spath(path, sizeof path, res.session, "/steps");
    ws_error err = {0};
    assert_int_equal(ws_task_reset(f->task, 0, seed), WS_OK);
    static char body[1 << 16];
    const ws_fact_list *q = &f->batch->query;
    for (int t = 0; t < f->steps; t++) {
        ws_batch_clear(f->batch);
        assert_int_equal(ws_batch_begin_traj(f->batch, 1), WS_OK);
        assert_int_equal(ws_task_step(f->task, 0, f->batch, NULL, &err), WS_OK);
        size_t len = (size_t)snprintf(body, sizeof body, "{\"expect_step\":%d,\"instructions\":[", t);
        len = facts_json(f, body, sizeof body, len, &f->batch->instr, 1);
        len += (size_t)snprintf(body + len, sizeof body - len, "],\"queries\":[");
        len = facts_json(f, body, sizeof body, len, q, 0);
        len += (size_t)snprintf(body + len, sizeof body - len, "]");
        if (labelled) {
            len += (size_t)snprintf(body + len, sizeof body - len, ",\"labels\":[");
            for (int i = 0; i < q->n; i++)
                len += (size_t)snprintf(body + len, sizeof body - len, "%s%s", i ? "," : "",
                                        q->value[i] ? "true" : "false");
            len += (size_t)snprintf(body + len, sizeof body - len, "]");
        }
        snprintf(body + len, sizeof body - len, "}");
        ws_ts_resp r;
        assert_int_equal(ws_ts_req(d, "POST", path, NULL, body, &r), 200);
        int64_t v = (int64_t)cJSON_GetObjectItem(r.json, "model_version")->valuedouble;
        res.min_version = v < res.min_version ? v : res.min_version;
        res.max_version = v > res.max_version ? v : res.max_version;
        const cJSON *ans = cJSON_GetObjectItem(r.json, "answers");
        for (int e = 0; e < f->p.entities; e++) { /* queries are entity-major: places per entity */
            int best = 0, truth = 0;
            double bp = -1;
            for (int p = 0; p < f->p.places; p++) {
                int i = e * f->p.places + p;
                double pv = cJSON_GetObjectItem(cJSON_GetArrayItem(ans, i), "p")->valuedouble;
                if (pv > bp) bp = pv, best = p;
                if (q->value[i] == 1) truth = p;
            }
            res.correct += best == truth;
        }
        ws_ts_resp_free(&r);
    }
    return res;
}

double ws_fs_accuracy(ws_fs *f, const ws_ts_daemon *d, const char *model, uint64_t first, int n,
                      int delete_after, int64_t *min_version, int64_t *max_version)
{
    int correct = 0;
    int64_t lo = INT64_MAX, hi = 0;
    for (int i = 0; i < n; i++) {
        ws_fs_result r = ws_fs_episode(f, d, model, first + (uint64_t)i, 0);
        correct += r.correct;
        lo = r.min_version < lo ? r.min_version : lo;
        hi = r.max_version > hi ? r.max_version : hi;
        if (delete_after) {
            char path[128];
            ws_ts_resp resp;
            assert_int_equal(ws_ts_req(d, "DELETE", ws_ts_spath(path, sizeof path, r.session, NULL), NULL, NULL,
                                       &resp),
                             204);
            ws_ts_resp_free(&resp);
        }
    }
    if (min_version) *min_version = lo;
    if (max_version) *max_version = hi;
    return (double)correct / ((double)n * f->steps * f->p.entities);
}
