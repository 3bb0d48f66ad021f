/* test_server_rules.c — a domain rule taught by labels through the API (issue
 * 12, item 3; bench/rules_learn.py prints the whole curve): an entity is in
 * one place, so telling its new place makes the old one false. The shipped
 * default keeps a fact at the value told last, so it answers a place someone
 * left "yes". A real daemon on loopback, its `default` the shipped model,
 * gets households of fresh names posted as steps (people placed, then moving:
 * only the new place told), every step asking each person's current place and
 * one other with the true answers as labels; the daemon trains online. Held-out
 * households (names never seen, no labels) are scored before and after on the
 * places people left: the share answered "no" must rise by a wide margin.
 * (The current places answered "yes" fall meanwhile, 1.00 to 0.69-0.78: what these
 * labels teach the default is mostly "no"; api.md, Rules from labels, says
 * why, and the bench how far it gets.) It costs the general fact memory:
 * the memory probe of the version served falls 0.98 to 0.90-0.92. The same
 * stream again with rehearsal (the training setting: trajectories of the task
 * memory in each pass's gradient) must keep that memory, and the current
 * places, while the places left still rise. With scope "symbols" (only the
 * symbols' corrections train) the memory probe must not move at all.
 * Without the override of recall targets by labels (online_trainer.c) the
 * same stream moved that share from 0.19 to 0.09-0.11; with it, to 0.68-0.70
 * (both on the shipped model before stages G and H of scripts/train-default.sh;
 * after H, 0.07 to 0.46; after I, the shipped model, 0.09 to 0.56-0.60).
 * Deterministic streams (fixed seeds; the stream waits for the training thread
 * rather than let examples be dropped), and the margin half the rise measured,
 * so a loaded machine's timing cannot fail it. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/ws_rng.h"
#include "model/checkpoint.h"
#include "model/probe.h"
#include "test_server_util.h"
#include "test_util.h"

enum { PEOPLE = 3, PLACES = 4, MOVES = 6, EVAL_HOUSEHOLDS = 12 };
/* Labelled steps; under sanitizers (tests/test_util.h) a short stream of the
 * same code, its accuracy not asserted (the normal build asserts it). */
#define BUDGET (WS_TEST_SANITIZED ? 300 : 2100)
enum { LEFT, CURRENT }; /* the places asked of held-out households */
/* A rule holds from 8 labelled queries for it (server/engine/rules.h). */
#define WS_RULE_MIN_EVIDENCE_TEST 8

static ws_ts_daemon D;

typedef struct {
    uint64_t rng;
    char people[PEOPLE][24], places[PLACES][24];
    int where[PEOPLE], visited[PEOPLE][PLACES];
} household;

static int draw(household *h, int n)
{
    return (int)(ws_xorshift64(&h->rng) % (uint64_t)n);
}

/* Names never used before in this run (a counter in each) on the seed's draws. */
static void household_new(household *h, uint64_t seed)
{
    static unsigned serial;
    memset(h, 0, sizeof *h);
    h->rng = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int p = 0; p < PEOPLE; p++)
        snprintf(h->people[p], sizeof h->people[p], "per%u-%d", serial++, draw(h, 1000));
    for (int l = 0; l < PLACES; l++)
        snprintf(h->places[l], sizeof h->places[l], "room%u-%d", serial++, draw(h, 1000));
}

/* A request body, built piece by piece. */
typedef struct {
    char s[4096];
    int n;
} text;

static void add(text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(t->s + t->n, sizeof t->s - (size_t)t->n, fmt, ap);
    va_end(ap);
    assert_true(k >= 0 && (size_t)(t->n + k) < sizeof t->s);
    t->n += k;
}

/* Person p moves to l (or is placed there): its one instruction, told true. */
static void move(household *h, int p, int l, text *body, int first)
{
    h->where[p] = l;
    h->visited[p][l] = 1;
    add(body, "%s{\"fact\":[\"%s\",\"location\",\"%s\"],\"value\":true}", first ? "" : ",",
        h->people[p], h->places[l]);
}

/* One household in a new session: setup, then MOVES steps each moving one
 * person (only the new place told). labelled: every step asks each person's
 * current place and one other, with the truth as labels. Else: after the
 * last step it asks every place a person left and every current place, and
 * adds the right answers to right[LEFT] and right[CURRENT], the questions to
 * n[LEFT] and n[CURRENT]. */
static void household_play(uint64_t seed, int labelled, int *right, int *n, double *p_left)
{
    household h;
    household_new(&h, seed);
    char sid[33], path[96];
    ws_ts_resp r;
    assert_int_equal(ws_ts_session(&D, NULL, "default", sid), 201);
    for (int s = 0; s <= MOVES; s++) {
        text body = {.n = 0}, labels = {.n = 0};
        add(&body, "{\"instructions\":[");
        if (s == 0)
            for (int p = 0; p < PEOPLE; p++) move(&h, p, draw(&h, PLACES), &body, p == 0);
        else {
            int p = draw(&h, PEOPLE);
            move(&h, p, (h.where[p] + 1 + draw(&h, PLACES - 1)) % PLACES, &body, 1);
        }
        add(&body, "],\"queries\":[");
        for (int p = 0; p < PEOPLE && labelled; p++) {
            int other = (h.where[p] + 1 + draw(&h, PLACES - 1)) % PLACES;
            for (int l = 0; l < PLACES; l++) {
                if (l != h.where[p] && l != other) continue;
                add(&body, "%s{\"fact\":[\"%s\",\"location\",\"%s\"]}", labels.n ? "," : "",
                    h.people[p], h.places[l]);
                add(&labels, "%s%s", labels.n ? "," : "", l == h.where[p] ? "true" : "false");
            }
        }
        add(&body, labelled ? "],\"labels\":[%s]}" : "]%s}", labels.s);
        assert_int_equal(
            ws_ts_req(&D, "POST", ws_ts_spath(path, sizeof path, sid, "/steps"), NULL, body.s, &r),
            200);
        ws_ts_resp_free(&r);
    }
    if (labelled) return;
    text body = {.n = 0};
    int asked = 0, kind[PEOPLE * PLACES];
    add(&body, "{\"queries\":[");
    for (int p = 0; p < PEOPLE; p++)
        for (int l = 0; l < PLACES; l++)
            if (h.visited[p][l]) {
                kind[asked] = l == h.where[p] ? CURRENT : LEFT;
                add(&body, "%s{\"fact\":[\"%s\",\"location\",\"%s\"]}", asked++ ? "," : "",
                    h.people[p], h.places[l]);
            }
    add(&body, "]}");
    assert_int_equal(
        ws_ts_req(&D, "POST", ws_ts_spath(path, sizeof path, sid, "/queries"), NULL, body.s, &r),
        200);
    const cJSON *a = cJSON_GetObjectItem(r.json, "answers");
    assert_int_equal(cJSON_GetArraySize(a), asked);
    for (int i = 0; i < asked; i++) {
        double p = cJSON_GetObjectItem(cJSON_GetArrayItem(a, i), "p")->valuedouble;
        right[kind[i]] += (p >= 0.5) == (kind[i] == CURRENT);
        n[kind[i]]++;
        if (kind[i] == LEFT) *p_left += p;
    }
    ws_ts_resp_free(&r);
}

static double model_status(const char *field)
{
    ws_ts_resp r;
    assert_int_equal(ws_ts_req(&D, "GET", "/v1/models/default", NULL, NULL, &r), 200);
    const cJSON *v = cJSON_GetObjectItem(cJSON_GetObjectItem(r.json, "status"), field);
    double x = v ? v->valuedouble : -1;
    ws_ts_resp_free(&r);
    return x;
}

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* Held-out households' accuracy on the places people left (answered "no")
 * and on their current places ("yes"), into acc[LEFT], acc[CURRENT], and the
 * mean p of the places left into *p_left. */
static void held_out(uint64_t first, double *acc, double *p_left)
{
    int right[2] = {0, 0}, n[2] = {0, 0};
    *p_left = 0;
    for (int i = 0; i < EVAL_HOUSEHOLDS; i++)
        household_play(first + (uint64_t)i, 0, right, n, p_left);
    assert_true(n[LEFT] > 0 && n[CURRENT] > 0);
    for (int k = 0; k < 2; k++) acc[k] = (double)right[k] / n[k];
    *p_left /= n[LEFT];
}

/* What one labelled stream did: held-out accuracy before and after ([LEFT],
 * [CURRENT]) and the memory probe of the version served before and after. */
typedef struct {
    double before[2], after[2], memory_before, memory_after;
    double p_left_before, p_left_after; /* the mean p of held-out places left */
    int updates;                        /* AdamW steps of the training thread */
    int rule_holds; /* one rule holds: a person's place (anchor "location", position 2) */
} stream_result;

/* The memory probe (model/probe.h: 32 episodes of 8 facts of fresh symbols,
 * told, a quarter overridden, asked 1 and 10 steps later) of the version the
 * daemon serves, downloaded and run through the library. */
static double served_memory(const char *dir)
{
    ws_ts_resp r;
    assert_int_equal(ws_ts_req(&D, "GET", "/v1/models/default/checkpoint", NULL, NULL, &r), 200);
    char file[320];
    snprintf(file, sizeof file, "%s.served", dir);
    FILE *f = fopen(file, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(r.body, 1, r.len, f), r.len);
    assert_int_equal(fclose(f), 0);
    ws_ts_resp_free(&r);
    ws_error err = {0};
    ws_backend *be;
    ws_model *m;
    ws_exec *x;
    assert_int_equal(ws_backend_cpu_new(&be, 1, &err), WS_OK);
    if (ws_checkpoint_load(&m, file, be, &err) != WS_OK) fail_msg("%s", err.msg);
    remove(file);
    assert_int_equal(ws_exec_new(&x, m, &err), WS_OK);
    ws_probe_config pc = {.n_ks = 1,
                          .ks = {8},
                          .n_traj = {32},
                          .n_delays = 2,
                          .delays = {1, 10},
                          .instr_per_step = 4,
                          .seed = 0x52554C45ull};
    ws_probe_result res;
    if (ws_probe_run(x, &pc, &res, &err) != WS_OK) fail_msg("%s", err.msg);
    double acc = (ws_probe_acc(&res, 0, 0, 7) + ws_probe_acc(&res, 0, 1, 7)) / 2;
    ws_exec_free(x);
    ws_model_free(m);
    ws_backend_free(be);
    return acc;
}

/* A fresh daemon on a new data directory (its path into dir[256]) whose
 * default model's training settings are `training` (JSON). */
static void start(char *dir, const char *training)
{
    ws_ts_tmpdir(dir, 256);
    static const char *const flags[] = {"--batch-wait-us", "0", "--train-priority", "normal", NULL};
    assert_int_equal(ws_ts_start(&D, dir, flags), 0);
    ws_ts_resp r;
    assert_int_equal(ws_ts_req(&D, "PATCH", "/v1/models/default/training", NULL, training, &r),
                     200);
    ws_ts_resp_free(&r);
}

/* The labelled stream (budget labelled steps) on a fresh daemon whose
 * default model's training settings are `training` (JSON); then `after`
 * (may be NULL) on the daemon and its data directory. */
static void run_stream(const char *training, int budget, stream_result *out,
                       void (*after)(const char *dir))
{
    char dir[256];
    start(dir, training);
    ws_ts_resp r;
    out->memory_before = served_memory(dir);
    held_out(1000, out->before, &out->p_left_before);
    time_t t0 = time(NULL);
    int steps = 0;
    for (uint64_t seed = 1; steps < budget; seed++) {
        household_play(seed, 1, NULL, NULL, NULL);
        steps += MOVES + 1;
        /* Training runs beside serving; the stream waits for it rather than
         * have the oldest examples dropped, so every labelled step teaches. */
        for (int i = 0; i < 3000 && model_status("examples_ready") > 32; i++) pause_ms(10);
    }
    for (int i = 0; i < 6000 && model_status("examples_ready") > 0; i++) pause_ms(10);
    held_out(1000, out->after, &out->p_left_after);
    out->memory_after = served_memory(dir);
    out->updates = (int)model_status("updates");
    fprintf(stderr,
            "rule from labels, training %s: %d labelled steps in %lds, %d updates; held-out "
            "places left answered no %.3f -> %.3f (mean p %.3f -> %.3f), current places answered "
            "yes %.3f -> %.3f; memory probe %.3f -> %.3f\n",
            training, steps, (long)(time(NULL) - t0), out->updates, out->before[LEFT],
            out->after[LEFT], out->p_left_before, out->p_left_after, out->before[CURRENT],
            out->after[CURRENT], out->memory_before, out->memory_after);
    assert_int_equal(ws_ts_req(&D, "GET", "/v1/models/default", NULL, NULL, &r), 200);
    /* the rules that hold: exactly one, a person's place (position 2, anchor "location") */
    const cJSON *rule;
    int holding = 0, place = 0;
    cJSON_ArrayForEach(rule, cJSON_GetObjectItem(r.json, "rules"))
    {
        char *text = cJSON_PrintUnformatted(rule);
        fprintf(stderr, "  rule %s\n", text);
        free(text);
        if (!cJSON_IsTrue(cJSON_GetObjectItem(rule, "holds"))) continue;
        holding++;
        place += cJSON_GetObjectItem(rule, "position")->valueint == 2 &&
                 !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(rule, "anchor")), "location");
    }
    out->rule_holds = holding == 1 && place == 1;
    ws_ts_resp_free(&r);
    if (after) after(dir);
    assert_int_equal(ws_ts_stop(&D), 0);
    ws_ts_cleanup(dir);
}

/* The network learns from the stream at rate lr, rehearsing `rehearsal`
 * trajectories of the task memory a pass, changing `scope` ("all" parameters,
 * or the "symbols"' corrections alone). The rule's labels contradict what the
 * default was trained to hold, and the gate's memory probe refuses every
 * candidate that starts to move (bench/rules_learn.py, api.md: Rules from
 * labels): off here, so that what the labels teach is served. */
#define NETWORK(lr, rehearsal, scope)                                                             \
    "{\"enabled\":true,\"lr\":" lr ",\"update_every\":8,\"gate\":false,\"rehearsal\":" #rehearsal \
    ",\"scope\":\"" scope "\"}"

static stream_result plain; /* the stream without rehearsal */

static void test_rule_from_labels(void **state)
{
    (void)state;
    run_stream(NETWORK("0.0001", 0, "all"), BUDGET, &plain, NULL);
    /* Measured here (stage O, the shipped model; 14 runs): 0.000 -> 0.491-0.772
     * (current places 0.97 -> 0.61-0.81; the memory probe 0.996 -> 0.926-0.982);
     * on stage N 0.000 -> 0.632 (0.97 -> 0.69; 0.994 -> 0.965); on stage M 0.000 ->
     * 0.544-0.596 (1.00 -> 0.78-0.83; 0.996 -> 0.973-0.975); on stage
     * L 0.000 -> 0.561 (0.83; 0.990 -> 0.979); on stage J 0.018 -> 0.60
     * (0.81-0.83; 0.984 -> 0.939-0.949); on stage I 0.088 -> 0.60-0.61
     * (0.69-0.78; 0.980 -> 0.90-0.92). */
    if (!WS_TEST_SANITIZED) assert_true(plain.after[LEFT] > plain.before[LEFT] + 0.25);
}

static void test_rule_with_rehearsal(void **state)
{
    (void)state;
    stream_result reh;
    run_stream(NETWORK("0.0001", 8, "all"), BUDGET, &reh, NULL);
    if (WS_TEST_SANITIZED) return;
    /* Stage O, the shipped model (14 runs, some beside a training job): current
     * places 1.00 -> 0.64-0.78, the memory probe 0.996 -> 0.992-0.998, beside
     * the stream without rehearsal's 0.61-0.81 and 0.926-0.982; places left
     * answered no (8 runs) 0.000 -> 0.386-0.649, beside 0.491-0.772. Run by run
     * rehearsal's current places were 6 held-out places under the other's to 3
     * over (14 runs), 0 on average: on this model the two keep current places
     * alike, and which is ahead in a run is chance (the training thread takes
     * the examples the timing gives it), so no order between them is asserted:
     * only that rehearsal still answers most current places yes. Stage N (7
     * runs): places left answered
     * no 0.000 -> 0.404-0.544, current places 1.00 -> 0.72-0.83, the memory probe
     * 0.994 -> 0.988-0.994, beside the stream without rehearsal's 0.544-0.772,
     * 0.64-0.78, 0.930-0.979: current places better on average, but run to run
     * each moves by two held-out places (of 36), and once rehearsal's was two
     * under the other's (0.722 against 0.778). Stage M: 0.000 -> 0.474-0.509,
     * current places 1.00 -> 0.917, the memory probe 0.996 -> 0.988, beside
     * 0.544-0.596, 0.78-0.83, 0.973-0.975. Stage L: 0.000 -> 0.404, 0.917, 0.990
     * -> 0.986, beside 0.561, 0.833, 0.979. Stage K
     * (4 runs): places left 0.053 -> 0.37, current places 1.00 -> 0.86, the
     * memory probe 0.990 -> 0.977-0.980, beside 0.035 -> 0.42-0.51, 0.83-0.86,
     * 0.961-0.973 without. It learns the rule more slowly and keeps what the
     * model knew. On stage J rehearsal also kept current places (0.92 against
     * 0.81-0.83); on K the two were within a held-out place of each other. */
    double lost = reh.memory_before - reh.memory_after;
    double lost_plain = plain.memory_before - plain.memory_after;
    assert_true(reh.after[LEFT] > reh.before[LEFT] + 0.15);
    assert_true(lost <= 0.02 && lost < lost_plain);
    assert_true(reh.after[CURRENT] >= 0.5);
}

/* scope "symbols": the stream moves only its symbols' corrections (`location`,
 * the names), so the memory of fresh symbols is the served version's, to the
 * last bit of the probe, while the answers about `location` move. Measured
 * here (lr 0.01, 2,100 steps), stage O, the shipped default: places left
 * answered no 0.000 -> 0.000 (their mean p 0.992 -> 0.970-0.978), current
 * places answered yes 1.00 -> 1.00, the memory probe 0.996 -> 0.996; stage N:
 * 0.000 -> 0.000 (mean p 0.990 -> 0.980), 0.994 -> 0.994; stage M: 0.000 ->
 * 0.018 (mean p 0.986 -> 0.951); stage L: places left 0.000 -> 0.053-0.070 (3
 * runs); stage K: 0.00 -> 0.175 and 1.00 -> 0.944. So the bar is on the mean p
 * of the places left, which falls on every model (the less, the more the model
 * was trained), not on the answers it turns; rules learned as rules
 * (test_rule_learned_as_rule) are what turns them.
 * The default knows no one-place rule for a symbol's correction to switch on
 * (api.md, Rules from labels): what the labels move is mostly `location`
 * towards "no", less than the whole model moves, and nothing else. */
static void test_rule_symbols_only(void **state)
{
    (void)state;
    stream_result sym;
    run_stream(NETWORK("0.01", 0, "symbols"), BUDGET, &sym, NULL);
    assert_true(sym.memory_after == sym.memory_before);
    assert_true(sym.updates > 0);
    if (WS_TEST_SANITIZED) return;
    assert_true(sym.p_left_after < sym.p_left_before - 0.005);
    assert_true(sym.after[LEFT] >= sym.before[LEFT]);
    assert_true(sym.after[CURRENT] > plain.after[CURRENT]);
}

/* The p of (who, location, where) in session sid. */
static double p_of(const char *sid, const char *who, const char *where)
{
    char path[96], body[160];
    ws_ts_resp r;
    snprintf(body, sizeof body, "{\"queries\":[{\"fact\":[\"%s\",\"location\",\"%s\"]}]}", who,
             where);
    assert_int_equal(
        ws_ts_req(&D, "POST", ws_ts_spath(path, sizeof path, sid, "/queries"), NULL, body, &r),
        200);
    const cJSON *a = cJSON_GetArrayItem(cJSON_GetObjectItem(r.json, "answers"), 0);
    assert_non_null(a);
    double p = cJSON_GetObjectItem(a, "p")->valuedouble;
    ws_ts_resp_free(&r);
    return p;
}

static void tell_place(const char *sid, const char *who, const char *where)
{
    char path[96], body[160];
    ws_ts_resp r;
    snprintf(body, sizeof body,
             "{\"instructions\":[{\"fact\":[\"%s\",\"location\",\"%s\"],\"value\":true}]}", who,
             where);
    assert_int_equal(
        ws_ts_req(&D, "POST", ws_ts_spath(path, sizeof path, sid, "/steps"), NULL, body, &r), 200);
    ws_ts_resp_free(&r);
}

/* The "exclusive" count of the rule (3 symbols, position 2, anchor
 * "location"); 0 when it has none. */
static int location_evidence(void)
{
    ws_ts_resp r;
    assert_int_equal(ws_ts_req(&D, "GET", "/v1/models/default", NULL, NULL, &r), 200);
    const cJSON *rule;
    int n = 0;
    cJSON_ArrayForEach(rule, cJSON_GetObjectItem(r.json, "rules"))
    {
        if (cJSON_GetObjectItem(rule, "position")->valueint == 2 &&
            !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(rule, "anchor")), "location"))
            n = cJSON_GetObjectItem(rule, "exclusive")->valueint;
    }
    ws_ts_resp_free(&r);
    return n;
}

/* A restart keeps the rule (its file) and what a session was told before it
 * (read back from the step log): a person placed before the restart and
 * moving after it has left the old place. */
static void across_restart(const char *dir)
{
    char sid[33];
    assert_int_equal(ws_ts_session(&D, NULL, "default", sid), 201);
    tell_place(sid, "restart-person", "restart-kitchen");
    assert_int_equal(ws_ts_stop(&D), 0);
    static const char *const flags[] = {"--batch-wait-us", "0", NULL};
    assert_int_equal(ws_ts_start(&D, dir, flags), 0);
    assert_true(location_evidence() >= 8); /* listed before any step */
    tell_place(sid, "restart-person", "restart-garden");
    assert_true(p_of(sid, "restart-person", "restart-kitchen") < 0.5);
    assert_true(p_of(sid, "restart-person", "restart-garden") >= 0.5);
}

/* "rules": the exclusive relation is learned from the labels as a rule
 * (server/engine/rules.h) while the network does not train at all: after
 * ten labelled households (70 steps) the rule holds for `location`, and
 * held-out households, whose moves tell only the new place, get their old
 * places told false by it: answered as the rule says, the memory probe to
 * the last bit as served. Measured here: places left 0.000 -> 1.000, current
 * places 1.000 -> 1.000 (stage O, the shipped default, and stage N; stage M: 1.000 ->
 * 0.972). */
static void test_rule_learned_as_rule(void **state)
{
    (void)state;
    stream_result rule;
    run_stream("{\"enabled\":false,\"rules\":true}", 70, &rule, across_restart);
    assert_true(rule.rule_holds);
    assert_true(rule.memory_after == rule.memory_before);
    assert_true(rule.before[LEFT] < 0.5);
    assert_true(rule.after[LEFT] >= 0.95);
    assert_true(rule.after[CURRENT] >= 0.95);
}

/* Person who moves kitchen -> garden in session sid; the move's step asks
 * both places (unlabelled) and gets its labels by PUT afterwards, at once
 * (`latest`) or after another step. */
static void move_labelled_later(const char *sid, const char *who, int latest)
{
    char path[128], body[256];
    ws_ts_resp r;
    tell_place(sid, who, "kitchen");
    snprintf(body, sizeof body,
             "{\"instructions\":[{\"fact\":[\"%s\",\"location\",\"garden\"],\"value\":true}],"
             "\"queries\":[{\"fact\":[\"%s\",\"location\",\"kitchen\"]},"
             "{\"fact\":[\"%s\",\"location\",\"garden\"]}]}",
             who, who, who);
    assert_int_equal(
        ws_ts_req(&D, "POST", ws_ts_spath(path, sizeof path, sid, "/steps"), NULL, body, &r), 200);
    int step = cJSON_GetObjectItem(r.json, "step")->valueint;
    ws_ts_resp_free(&r);
    if (!latest) tell_place(sid, "bystander", "porch");
    snprintf(body, sizeof body, "/steps/%d/labels", step);
    assert_int_equal(ws_ts_req(&D, "PUT", ws_ts_spath(path, sizeof path, sid, body), NULL,
                               "{\"labels\":[false,true]}", &r),
                     200);
    ws_ts_resp_free(&r);
}

/* Labels put after the step count for the session's latest step only (an
 * older step's facts are gone), once. */
static void test_rule_from_labels_put_later(void **state)
{
    (void)state;
    char dir[256], sid[33], who[16];
    start(dir, "{\"enabled\":false,\"rules\":true}");
    assert_int_equal(ws_ts_session(&D, NULL, "default", sid), 201);
    for (int i = 0; i < 4; i++) {
        snprintf(who, sizeof who, "old%d", i);
        move_labelled_later(sid, who, 0);
    }
    assert_int_equal(location_evidence(), 0);
    for (int i = 0; i < WS_RULE_MIN_EVIDENCE_TEST; i++) {
        snprintf(who, sizeof who, "new%d", i);
        move_labelled_later(sid, who, 1);
    }
    assert_int_equal(location_evidence(), WS_RULE_MIN_EVIDENCE_TEST);
    tell_place(sid, "late", "hall");
    tell_place(sid, "late", "attic");
    assert_true(p_of(sid, "late", "hall") < 0.5);
    assert_int_equal(ws_ts_stop(&D), 0);
    ws_ts_cleanup(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rule_learned_as_rule),
        cmocka_unit_test(test_rule_from_labels_put_later), cmocka_unit_test(test_rule_from_labels),
        cmocka_unit_test(test_rule_with_rehearsal), cmocka_unit_test(test_rule_symbols_only)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
