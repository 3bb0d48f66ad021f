/* probe_http.c — memory probes through the REST API (probe_http.h). */
#include "probe_http.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/tasks/task_rng.h"
#include "clients/ws_client.h"

typedef struct {
    ws_client *c;
    char *err;
    size_t err_len;
} ctx;

static int fail(ctx *x, const char *what, const ws_client_error *e)
{
    snprintf(x->err, x->err_len, "%s: %s %ld %s %s", what, ws_client_status_name(e->kind),
             e->status, e->code, e->message);
    return -1;
}

/* A client fact viewing a probe fact's symbols (no copies). */
static ws_client_fact client_fact(const ws_probe_fact *f, char **buf)
{
    for (int j = 0; j < f->arity; j++) buf[j] = (char *)f->sym[j];
    return (ws_client_fact){.symbols = buf, .n_symbols = f->arity};
}

/* Steps of one episode's instructions, then silent (or chatter) steps up to each
 * delay. */
static int run_episode(ctx *x, const char *model, const ws_probe_config *pc, int ki,
                       const ws_probe_episode *e, long *unrelated, uint64_t unrelated_seed,
                       ws_probe_result *res)
{
    ws_client_error ce;
    ws_client_session s;
    if (ws_client_session_create(x->c, model, &s, &ce) != WS_CLIENT_OK)
        return fail(x, "session create", &ce);
    int k2 = 2 * e->k, n_sym = k2 * WS_PROBE_ARITY;
    ws_client_instruction *ins = calloc((size_t)e->n_instr, sizeof *ins);
    ws_client_fact *qs = calloc((size_t)k2, sizeof *qs);
    char **syms = calloc((size_t)(n_sym + e->n_instr * WS_PROBE_ARITY + WS_PROBE_ARITY),
                         sizeof *syms);
    int rc = ins && qs && syms ? 0 : -1;
    if (rc) snprintf(x->err, x->err_len, "out of memory");
    for (int s_i = 0; !rc && s_i < e->n_steps; s_i++) {
        ws_client_step_req req = {.expect_step = WS_CLIENT_NO_STEP};
        req.instructions = ins + e->step_off[s_i];
        req.n_instructions = e->step_off[s_i + 1] - e->step_off[s_i];
        for (int j = e->step_off[s_i]; j < e->step_off[s_i + 1]; j++) {
            ins[j].fact = client_fact(&e->facts[e->instr_fact[j]], syms + n_sym + j * WS_PROBE_ARITY);
            ins[j].value = e->instr_value[j];
        }
        ws_client_answers a;
        if (ws_client_step(x->c, s.id, &req, &a, &ce) != WS_CLIENT_OK) rc = fail(x, "step", &ce);
        else ws_client_answers_free(&a);
    }
    int done = 0;
    ws_task_rng r;
    ws_task_rng_seed(&r, unrelated_seed);
    ws_client_instruction told[64]; /* pc->chatter <= 64 (ws_probe_run's bound) */
    ws_probe_fact told_fact[64];
    char *told_buf[64][WS_PROBE_ARITY];
    for (int di = 0; !rc && di < pc->n_delays; di++) {
        for (; !rc && done < pc->delays[di]; done++) {
            ws_client_step_req req = {.expect_step = WS_CLIENT_NO_STEP};
            for (int j = 0; j < pc->chatter && j < 64; j++) {
                ws_probe_chatter_fact(pc, e, done + 1, j, &told_fact[j], &told[j].value);
                told[j].fact = client_fact(&told_fact[j], told_buf[j]);
            }
            req.instructions = told, req.n_instructions = pc->chatter < 64 ? pc->chatter : 64;
            ws_probe_fact other = {.arity = 1 + (int)ws_task_rng_below(&r, WS_PROBE_ARITY)};
            char *obuf[WS_PROBE_ARITY];
            ws_client_fact of;
            if (unrelated) {
                for (int j = 0; j < other.arity; j++)
                    snprintf(other.sym[j], sizeof other.sym[j], "u%012llx",
                             (unsigned long long)(ws_task_rng_next(&r) >> 16));
                of = client_fact(&other, obuf);
                req.queries = &of, req.n_queries = 1;
            }
            ws_client_answers a;
            if (ws_client_step(x->c, s.id, &req, &a, &ce) != WS_CLIENT_OK) {
                rc = fail(x, "silent step", &ce);
                break;
            }
            if (unrelated && a.n_answers == 1)
                unrelated[0]++, unrelated[1] += !a.answers[0].holds;
            ws_client_answers_free(&a);
        }
        if (rc) break;
        for (int q = 0; q < k2; q++) {
            int kind, label;
            qs[q] = client_fact(ws_probe_question(e, q, &kind, &label), syms + q * WS_PROBE_ARITY);
        }
        ws_client_answers a;
        if (ws_client_query(x->c, s.id, qs, k2, &a, &ce) != WS_CLIENT_OK) {
            rc = fail(x, "queries", &ce);
            break;
        }
        if (a.n_answers != k2) {
            snprintf(x->err, x->err_len, "queries: %d answers for %d questions", a.n_answers, k2);
            rc = -1;
        }
        for (int q = 0; !rc && q < k2; q++) {
            int kind, label;
            ws_probe_question(e, q, &kind, &label);
            res->n[ki][di][kind]++;
            res->right[ki][di][kind] += a.answers[q].holds == label;
        }
        ws_client_answers_free(&a);
    }
    free(ins), free(qs), free(syms);
    return rc;
}

int ws_probe_http_run(const char *url, const char *model, const ws_probe_config *pc,
                      long unrelated[2], ws_probe_result *res, char *err, size_t err_len)
{
    memset(res, 0, sizeof *res);
    if (unrelated) unrelated[0] = unrelated[1] = 0;
    ws_client_config cfg = ws_client_config_default();
    cfg.url = url;
    ws_client_error ce;
    ctx x = {NULL, err, err_len};
    if (ws_client_new(&cfg, &x.c, &ce) != WS_CLIENT_OK) return fail(&x, "client", &ce);
    int rc = 0;
    ws_error werr = {0};
    for (int ki = 0; !rc && ki < pc->n_ks; ki++)
        for (int t = 0; !rc && t < pc->n_traj[ki]; t++) {
            ws_probe_episode e;
            uint64_t seed = ws_probe_seed(pc, ki, t);
            if (ws_probe_episode_make(&e, pc->ks[ki], pc, seed, &werr) != WS_OK) {
                snprintf(err, err_len, "%s", werr.msg);
                rc = -1;
                break;
            }
            rc = run_episode(&x, model, pc, ki, &e, unrelated, ~seed, res);
            ws_probe_episode_free(&e);
        }
    ws_client_free(x.c);
    return rc;
}
