/* soak_load.c — the soak's workload: clients stepping sessions with
 * expect_step (labels in the step or PUT after it, queries between steps), a
 * thread creating small models, and a thread creating, using and revoking API
 * keys with the daemon binary. Each request is tallied; a request without an
 * answer, or answered with a 503 that applied nothing, is retried (the daemon
 * is being killed and restarted under it). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "base/ws_clock.h"
#include "soak.h"

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Sleeps up to `seconds`, in slices, returning early once the soak stops. */
static void nap(soak *s, double seconds)
{
    for (double until = ws_clock_mono_s() + seconds; !atomic_load(&s->stop) && ws_clock_mono_s() < until;)
        sleep_ms(100);
}

ws_client *soak_client(soak *s, ws_client *old, int *gen, const char *key)
{
    int g = atomic_load(&s->gen);
    if (old && g == *gen) return old;
    ws_client_free(old);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", atomic_load(&s->port));
    ws_client_config cfg = ws_client_config_default();
    cfg.url = url;
    cfg.api_key = key ? key : s->admin_key;
    cfg.retries = 0; /* every attempt is tallied here, and retried here */
    cfg.timeout_ms = 60000;
    ws_client *c = NULL;
    ws_client_error e;
    if (ws_client_new(&cfg, &c, &e) != WS_CLIENT_OK) return NULL;
    *gen = g;
    return c;
}

/* 503s that apply nothing and that the API documents for a busy or stopping daemon. */
static int documented_503(const ws_client_error *e)
{
    static const char *const codes[] = {"shutting_down", "overloaded", "deadline_exceeded", "storage_busy"};
    for (size_t i = 0; e->status == 503 && i < sizeof codes / sizeof *codes; i++)
        if (!strcmp(e->code, codes[i])) return 1;
    return 0;
}

int soak_retry(soak *s, soak_kind k, ws_client_status st, const ws_client_error *e, double t0)
{
    if (st == WS_CLIENT_OK) {
        soak_tally_ok(&s->tally, k, ws_clock_mono_s() - t0);
        return 0;
    }
    int again = st == WS_CLIENT_ERR_TRANSPORT || (st == WS_CLIENT_ERR_HTTP && documented_503(e));
    soak_tally_err(&s->tally, k, e, again);
    if (again) sleep_ms(50);
    return again;
}

void soak_step_body_of(int salt, int64_t t, soak_step_body *b)
{
    memset(b, 0, sizeof *b);
    snprintf(b->sym[0], sizeof b->sym[0], "s%d", salt);
    snprintf(b->sym[1], sizeof b->sym[1], "k%d", (int)(t % 13));
    snprintf(b->sym[2], sizeof b->sym[2], "e%d", (int)(t % 11));
    snprintf(b->sym[3], sizeof b->sym[3], "a%d", (int)(t % 5));
    snprintf(b->sym[4], sizeof b->sym[4], "e%d", (int)((t + 3) % 11));
    snprintf(b->sym[5], sizeof b->sym[5], "v%d", (int)(t % 997)); /* the vocabulary keeps growing */
    static const int uses[4][3] = {{0, 1, -1}, {2, 3, 5}, {0, 1, -1}, {4, 3, -1}};
    ws_client_fact f[4];
    for (int i = 0; i < 4; i++) {
        int n = 0;
        for (; n < 3 && uses[i][n] >= 0; n++) b->facts[i][n] = b->sym[uses[i][n]];
        f[i] = (ws_client_fact){.symbols = b->facts[i], .n_symbols = n};
    }
    b->ins[0] = (ws_client_instruction){.fact = f[0], .value = t % 2 == 0};
    b->ins[1] = (ws_client_instruction){.fact = f[1], .value = 1};
    b->q[0] = f[2];
    b->q[1] = f[3];
    b->labels[0] = t % 2 == 0; /* the value just told */
    b->labels[1] = 0;
    b->req = (ws_client_step_req){.expect_step = WS_CLIENT_NO_STEP,
                                  .instructions = b->ins,
                                  .n_instructions = 2,
                                  .queries = b->q,
                                  .n_queries = 2,
                                  .has_labels = t % 3 == 0,
                                  .labels = b->labels};
}

static soak_session *session_register(soak *s, const char *id)
{
    soak_session *ss = calloc(1, sizeof *ss);
    if (!ss) return NULL;
    memcpy(ss->id, id, sizeof ss->id);
    pthread_mutex_init(&ss->mu, NULL);
    pthread_mutex_lock(&s->reg_mu);
    int i = atomic_load(&s->n_sessions);
    if (i < SOAK_MAX_SESSIONS) {
        ss->salt = i;
        s->sessions[i] = ss;
        atomic_store(&s->n_sessions, i + 1);
    }
    pthread_mutex_unlock(&s->reg_mu);
    if (i < SOAK_MAX_SESSIONS) return ss;
    pthread_mutex_destroy(&ss->mu);
    free(ss);
    return NULL;
}

soak_session *soak_session_new(soak *s, ws_client **c, int *gen, const char *model)
{
    while (!atomic_load(&s->stop)) {
        if (!(*c = soak_client(s, *c, gen, NULL))) return NULL;
        ws_client_session out;
        ws_client_error e = {0};
        double t0 = ws_clock_mono_s();
        ws_client_status st = ws_client_session_create(*c, model, &out, &e);
        if (st == WS_CLIENT_OK) {
            soak_retry(s, SOAK_session, st, &e, t0);
            return session_register(s, out.id);
        }
        if (!soak_retry(s, SOAK_session, st, &e, t0)) return NULL;
    }
    return NULL;
}

/* Records that step t of ss is applied. */
static int mark(soak_session *ss, int64_t t, uint8_t flags, double p0)
{
    pthread_mutex_lock(&ss->mu);
    if (ss->n == ss->cap) {
        int64_t cap = ss->cap ? 2 * ss->cap : 256;
        soak_mark *m = realloc(ss->marks, sizeof *m * (size_t)cap);
        if (m) ss->marks = m, ss->cap = cap;
    }
    int ok = ss->n < ss->cap && t == ss->n + 1;
    if (ok) {
        ss->marks[t - 1] = (soak_mark){.p0 = (float)p0, .flags = flags};
        ss->n = t;
    }
    pthread_mutex_unlock(&ss->mu);
    return ok ? 0 : -1;
}

int soak_step(soak *s, ws_client **c, int *gen, soak_session *ss)
{
    int64_t t = ss->n + 1; /* only this thread moves ss->n */
    soak_step_body b;
    soak_step_body_of(ss->salt, t, &b);
    b.req.expect_step = t - 1;
    int lost = 0; /* an attempt went without an answer: it may have been applied */
    while (!atomic_load(&s->stop)) {
        if (!(*c = soak_client(s, *c, gen, NULL))) return -1;
        ws_client_answers a;
        ws_client_error e = {0};
        double t0 = ws_clock_mono_s();
        ws_client_status st = ws_client_step(*c, ss->id, &b.req, &a, &e);
        if (st == WS_CLIENT_OK) {
            soak_retry(s, SOAK_step, st, &e, t0);
            int ok = a.step == t && a.n_answers == 2 && mark(ss, t, SOAK_ACKED, a.answers[0].p) == 0;
            ws_client_answers_free(&a);
            if (!ok) {
                atomic_fetch_add(&s->anomalies, 1);
                return -1;
            }
            atomic_fetch_add(&s->acked, 1);
            return 0;
        }
        /* api.md's retry rule: a 409 at expect_step + 1 after a lost reply means it was applied. */
        if (st == WS_CLIENT_ERR_HTTP && e.status == 409 && !strcmp(e.code, "step_conflict")) {
            int applied = lost && e.current_step == t;
            soak_tally_err(&s->tally, SOAK_step, &e, applied);
            if (!applied || mark(ss, t, SOAK_RECOVERED, NAN) != 0) {
                atomic_fetch_add(&s->anomalies, 1);
                return -1;
            }
            atomic_fetch_add(&s->recovered, 1);
            return 0;
        }
        lost |= st == WS_CLIENT_ERR_TRANSPORT;
        if (!soak_retry(s, SOAK_step, st, &e, t0)) return -1;
    }
    return -1;
}

/* Labels for the step just acknowledged (step t, t % 3 == 1), PUT afterwards. */
static void put_labels(soak *s, ws_client **c, int *gen, soak_session *ss, int64_t t)
{
    soak_step_body b;
    soak_step_body_of(ss->salt, t, &b);
    while (!atomic_load(&s->stop) && (*c = soak_client(s, *c, gen, NULL))) {
        ws_client_error e = {0};
        double t0 = ws_clock_mono_s();
        ws_client_status st = ws_client_labels_put(*c, ss->id, t, b.labels, 2, 0, NULL, &e);
        if (st == WS_CLIENT_OK) {
            pthread_mutex_lock(&ss->mu);
            ss->marks[t - 1].flags |= SOAK_LABELLED;
            pthread_mutex_unlock(&ss->mu);
            atomic_fetch_add(&s->labels_acked, 1);
        }
        if (!soak_retry(s, SOAK_labels, st, &e, t0)) return;
    }
}

/* Queries alone: they answer at the session's step, never below an applied one. */
static void query(soak *s, ws_client **c, int *gen, soak_session *ss)
{
    soak_step_body b;
    soak_step_body_of(ss->salt, ss->n, &b);
    while (!atomic_load(&s->stop) && (*c = soak_client(s, *c, gen, NULL))) {
        ws_client_answers a;
        ws_client_error e = {0};
        double t0 = ws_clock_mono_s();
        ws_client_status st = ws_client_query(*c, ss->id, b.q, 2, &a, &e);
        if (st == WS_CLIENT_OK) {
            if (a.step < ss->n) atomic_fetch_add(&s->queries_behind, 1);
            ws_client_answers_free(&a);
        }
        if (!soak_retry(s, SOAK_query, st, &e, t0)) return;
    }
}

void *soak_client_main(void *arg)
{
    soak *s = arg;
    ws_client *c = NULL;
    int gen = -1;
    soak_session *ss[2] = {soak_session_new(s, &c, &gen, "soak"), soak_session_new(s, &c, &gen, "default")};
    for (long i = 0; !atomic_load(&s->stop) && (ss[0] || ss[1]); i++) {
        soak_session *x = ss[i % 2];
        if (!x) continue;
        if (soak_step(s, &c, &gen, x) != 0) {
            ss[i % 2] = NULL; /* out of step with the daemon: a finding, already counted */
            continue;
        }
        if (x->n % 3 == 1 && (x->marks[x->n - 1].flags & SOAK_ACKED)) put_labels(s, &c, &gen, x, x->n);
        if (i % 4 == 3) query(s, &c, &gen, x);
    }
    ws_client_free(c);
    return NULL;
}

/* ---- models ------------------------------------------------------------------------- */

/* Small configs, one per mixer (the daemon runs --backend cpu, which has them all). */
static const char *const model_configs[] = {
    "{\"d\":16,\"n_heads\":2,\"n_state\":4,\"n_upd_layers\":1,\"n_ext_layers\":1,\"vocab_cap\":64}",
    "{\"d\":32,\"n_heads\":2,\"n_state\":8,\"n_upd_layers\":1,\"n_ext_layers\":1,\"vocab_cap\":128,"
    "\"upd_mixer\":\"simplicial2\",\"s2_virtual\":2,\"s2_dim\":8}",
    "{\"d\":32,\"n_heads\":2,\"n_state\":8,\"n_upd_layers\":1,\"n_ext_layers\":1,\"vocab_cap\":256,"
    "\"ext_mixer\":\"compositional\",\"comp_searches\":2,\"comp_retrievals\":2,\"comp_dim\":8}",
    "{\"d\":16,\"n_heads\":2,\"n_state\":4,\"n_upd_layers\":1,\"n_ext_layers\":1,\"vocab_cap\":256,"
    "\"upd_mixer\":\"rmc\"}",
    "{\"d\":16,\"n_heads\":2,\"n_state\":4,\"n_upd_layers\":1,\"n_ext_layers\":1,\"vocab_cap\":256,"
    "\"ext_mixer\":\"rn\",\"rn_width\":16}",
};

void soak_model_register(soak *s, const char *name)
{
    pthread_mutex_lock(&s->reg_mu);
    int i = atomic_load(&s->n_models);
    if (i < SOAK_MAX_MODELS) {
        snprintf(s->models[i], sizeof s->models[i], "%s", name);
        atomic_store(&s->n_models, i + 1);
    }
    pthread_mutex_unlock(&s->reg_mu);
}

/* Creates model `name`; 1 when its creation was acknowledged, or when a retry
 * after a lost reply found the name taken (the model must then exist and serve:
 * the checks and the steps below find out). */
static int create_model(soak *s, ws_client **c, int *gen, const char *name, const char *config, int seed)
{
    ws_client_training_patch off = WS_CLIENT_TRAINING_KEEP;
    off.enabled = 0;
    ws_client_model_spec spec = {.name = name, .config_json = config, .training = &off, .seed = seed};
    int lost = 0;
    while (!atomic_load(&s->stop) && (*c = soak_client(s, *c, gen, NULL))) {
        ws_client_model m;
        ws_client_error e = {0};
        double t0 = ws_clock_mono_s();
        ws_client_status st = ws_client_model_create(*c, &spec, &m, &e);
        if (st == WS_CLIENT_OK) {
            ws_client_model_free(&m);
            soak_retry(s, SOAK_model_create, st, &e, t0);
            return 1;
        }
        /* A retry after a lost reply finds the name taken: made, or being made, by the first. */
        if (st == WS_CLIENT_ERR_HTTP && e.status == 409 && lost) {
            soak_tally_err(&s->tally, SOAK_model_create, &e, 1);
            return 1;
        }
        lost |= st == WS_CLIENT_ERR_TRANSPORT;
        if (!soak_retry(s, SOAK_model_create, st, &e, t0)) return 0;
    }
    return 0;
}

void *soak_models_main(void *arg)
{
    soak *s = arg;
    ws_client *c = NULL;
    int gen = -1;
    int n_configs = (int)(sizeof model_configs / sizeof *model_configs);
    for (int k = 0; !atomic_load(&s->stop) && k < SOAK_MAX_MODELS; k++) {
        nap(s, s->o->model_every);
        char name[16];
        snprintf(name, sizeof name, "m%03d", k);
        if (!create_model(s, &c, &gen, name, model_configs[k % n_configs], k + 1)) continue;
        soak_model_register(s, name);
        atomic_fetch_add(&s->models_created, 1);
        /* The new model serves: a few steps on a session of its own. */
        soak_session *ss = soak_session_new(s, &c, &gen, name);
        for (int t = 0; ss && t < 3 && soak_step(s, &c, &gen, ss) == 0; t++) {}
    }
    ws_client_free(c);
    return NULL;
}

/* ---- API keys ----------------------------------------------------------------------- */

/* Runs `worldstated key VERB ARG --data-dir DIR` (output into out); its exit status. */
static int key_command(soak *s, const char *verb, const char *arg, char *out, size_t cap)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' key %s %s --data-dir '%s' 2>&1", s->o->daemon_path, verb, arg, s->dir);
    double t0 = ws_clock_mono_s();
    FILE *p = popen(cmd, "r");
    size_t n = p ? fread(out, 1, cap - 1, p) : 0;
    out[n] = '\0';
    int rc = p ? pclose(p) : -1;
    rc = rc == -1 ? -1 : WEXITSTATUS(rc);
    if (rc == 0) {
        soak_tally_ok(&s->tally, SOAK_key_cli, ws_clock_mono_s() - t0);
    } else {
        ws_client_error e = {.kind = WS_CLIENT_ERR_HTTP, .status = -1};
        snprintf(e.code, sizeof e.code, "exit %d", rc);
        soak_tally_err(&s->tally, SOAK_key_cli, &e, 0);
        fprintf(stderr, "bench_soak: key %s %s: %s", verb, arg, out);
    }
    return rc;
}

/* Creates a session (get_id NULL) or GETs session get_id with key's client
 * until answered: the answer's status (0 when the soak stopped); *out on 200. */
static long key_request(soak *s, ws_client **c, int *gen, const char *key, const char *get_id, ws_client_session *out)
{
    while (!atomic_load(&s->stop) && (*c = soak_client(s, *c, gen, key))) {
        ws_client_error e = {0};
        double t0 = ws_clock_mono_s();
        ws_client_status st =
            get_id ? ws_client_session_get(*c, get_id, out, &e) : ws_client_session_create(*c, NULL, out, &e);
        if (st == WS_CLIENT_OK) {
            soak_retry(s, SOAK_key_http, st, &e, t0);
            return 200;
        }
        if (st == WS_CLIENT_ERR_HTTP && !documented_503(&e)) {
            /* 401 and 404 are what the key checks expect: judged by the caller. */
            if (e.status != 401 && e.status != 404) soak_tally_err(&s->tally, SOAK_key_http, &e, 0);
            return e.status;
        }
        if (!soak_retry(s, SOAK_key_http, st, &e, t0)) return e.status;
    }
    return 0;
}

/* A round: a new tenant's key creates a session there; the admin key (another
 * tenant) must not see it (404); once revoked, the key must be refused (401). */
static void key_round(soak *s, int k)
{
    char tenant[48], out[1024], key[128] = "", id[32] = "";
    snprintf(tenant, sizeof tenant, "--tenant t%d", k);
    if (key_command(s, "create", tenant, out, sizeof out) != 0) return;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        long long kid;
        if (!strncmp(line, "wsk_", 4)) snprintf(key, sizeof key, "%s", line);
        if (sscanf(line, "key %lld for tenant", &kid) == 1) snprintf(id, sizeof id, "%lld", kid);
    }
    if (!key[0] || !id[0]) return;
    atomic_fetch_add(&s->keys_created, 1);
    ws_client *kc = NULL, *ac = NULL;
    int kgen = -1, agen = -1;
    ws_client_session sess = {0}, seen;
    long st = key_request(s, &kc, &kgen, key, NULL, &sess);
    if (st != 200 && st != 0) atomic_fetch_add(&s->key_faults, 1); /* a fresh key refused */
    long other = st == 200 ? key_request(s, &ac, &agen, NULL, sess.id, &seen) : 404;
    if (other != 404 && other != 0) atomic_fetch_add(&s->key_faults, 1); /* another tenant sees it */
    if (key_command(s, "revoke", id, out, sizeof out) == 0) {
        atomic_fetch_add(&s->keys_revoked, 1);
        long revoked = st == 200 ? key_request(s, &kc, &kgen, key, sess.id, &seen) : 401;
        if (revoked != 401 && revoked != 0) atomic_fetch_add(&s->key_faults, 1);
    }
    ws_client_free(kc);
    ws_client_free(ac);
}

void *soak_keys_main(void *arg)
{
    soak *s = arg;
    for (int k = 0; !atomic_load(&s->stop); k++) {
        nap(s, s->o->key_every);
        if (!atomic_load(&s->stop)) key_round(s, k);
    }
    return NULL;
}
