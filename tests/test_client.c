/* test_client.c — the C client library (ws_client) against the real daemon:
 * every route, typed results, error mapping (400/401/403/404/409, transport),
 * timeouts, thread safety, and retry safety — a step whose reply is lost is
 * applied once and its answer recovered from the log. Lost replies, lost
 * requests and hangs come from a small TCP proxy between client and daemon. */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "test_server_util.h"
#include "test_util.h"
#include "clients/ws_client.h"

/* The daemon most tests share (ws_ts_shared_setup starts it). */
static ws_ts_daemon *const D = &ws_ts_shared;
static const char *const DIR_ = ws_ts_shared_dir;

static ws_client *client_for(int port, const char *key, long timeout_ms, int retries)
{
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    ws_client_config cfg = ws_client_config_default();
    cfg.url = url;
    cfg.api_key = key;
    cfg.timeout_ms = timeout_ms;
    cfg.retries = retries;
    cfg.backoff_ms = 10;
    ws_client *c = NULL;
    ws_client_error e;
    assert_int_equal(ws_client_new(&cfg, &c, &e), WS_CLIENT_OK);
    return c;
}

static ws_client *client(void)
{
    return client_for(D->port, NULL, 30000, 3);
}

/* ---- a TCP proxy that can lose a reply, lose a request, or hang ---------------------- */

typedef enum { PROXY_PASS, PROXY_DROP_REPLY, PROXY_DROP_REQUEST, PROXY_HANG } proxy_mode;

typedef struct {
    int fd, port, target;
    _Atomic int mode;    /* for the next connection; falls back to PASS after one use */
    _Atomic int stop;
    _Atomic int conns;
    pthread_t th;
} proxy;

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0) return fd;
    if (fd >= 0) close(fd);
    return -1;
}

/* Pumps bytes both ways until either side closes; the mode decides what is lost. */
static void serve(proxy *p, int cfd, proxy_mode mode)
{
    int dfd = mode == PROXY_PASS || mode == PROXY_DROP_REPLY ? connect_to(p->target) : -1;
    struct pollfd fds[2] = {{.fd = cfd, .events = POLLIN}, {.fd = dfd, .events = POLLIN}};
    char buf[65536];
    for (;;) {
        if (poll(fds, dfd >= 0 ? 2 : 1, 100) < 0 || atomic_load(&p->stop)) break;
        if (fds[0].revents) {
            ssize_t n = read(cfd, buf, sizeof buf);
            if (n <= 0) break;
            if (mode == PROXY_DROP_REQUEST) break; /* the request never reaches the daemon */
            if (mode == PROXY_HANG) continue;      /* swallowed: the client waits for its timeout */
            if (write(dfd, buf, (size_t)n) != n) break;
        }
        if (dfd >= 0 && fds[1].revents) {
            ssize_t n = read(dfd, buf, sizeof buf);
            if (n <= 0 || mode == PROXY_DROP_REPLY) break; /* the daemon acted; its reply is lost */
            if (write(cfd, buf, (size_t)n) != n) break;
        }
    }
    if (dfd >= 0) close(dfd);
    close(cfd);
}

static void *proxy_main(void *arg)
{
    proxy *p = arg;
    struct pollfd pf = {.fd = p->fd, .events = POLLIN};
    while (!atomic_load(&p->stop)) {
        if (poll(&pf, 1, 100) <= 0) continue;
        int cfd = accept(p->fd, NULL, NULL);
        if (cfd < 0) continue;
        atomic_fetch_add(&p->conns, 1);
        serve(p, cfd, (proxy_mode)atomic_exchange(&p->mode, PROXY_PASS));
    }
    return NULL;
}

static void proxy_start(proxy *p, int target)
{
    memset(p, 0, sizeof *p);
    p->target = target;
    p->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    assert_true(p->fd >= 0);
    assert_int_equal(bind(p->fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(p->fd, 8), 0);
    assert_int_equal(getsockname(p->fd, (struct sockaddr *)&a, &len), 0);
    p->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&p->th, NULL, proxy_main, p), 0);
}

static void proxy_stop(proxy *p)
{
    atomic_store(&p->stop, 1);
    assert_int_equal(pthread_join(p->th, NULL), 0);
    close(p->fd);
}

/* ---- helpers ------------------------------------------------------------------------ */

static ws_client_fact fact2(char **syms)
{
    return (ws_client_fact){.symbols = syms, .n_symbols = 2};
}

static char *MARY_KITCHEN[] = {"mary", "kitchen"}, *JOHN_GARDEN[] = {"john", "garden"};

/* One instruction (mary,kitchen=value), two queries, labels when asked. */
static ws_client_step_req simple_step(ws_client_instruction *in, ws_client_fact *qs, int *labels, int value,
                                      int64_t expect)
{
    in[0] = (ws_client_instruction){.fact = fact2(MARY_KITCHEN), .value = value};
    qs[0] = fact2(MARY_KITCHEN);
    qs[1] = fact2(JOHN_GARDEN);
    return (ws_client_step_req){.expect_step = expect,
                                .instructions = in,
                                .n_instructions = 1,
                                .queries = qs,
                                .n_queries = 2,
                                .has_labels = labels != NULL,
                                .labels = labels};
}

static int64_t session_step(ws_client *c, const char *id)
{
    ws_client_session s;
    assert_int_equal(ws_client_session_get(c, id, &s, NULL), WS_CLIENT_OK);
    return s.step;
}

static void new_session(ws_client *c, char *id)
{
    ws_client_session s;
    assert_int_equal(ws_client_session_create(c, NULL, &s, NULL), WS_CLIENT_OK);
    memcpy(id, s.id, WS_CLIENT_ID_LEN + 1);
}

/* Per-test fixture: a client of the shared daemon, a fresh session, and room
 * for a simple_step. */
typedef struct {
    ws_client *c;
    char id[WS_CLIENT_ID_LEN + 1];
    ws_client_instruction in[1];
    ws_client_fact qs[2];
} fixture;

static int fixture_open(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f) return -1;
    f->c = client();
    new_session(f->c, f->id);
    *state = f;
    return 0;
}

static int fixture_close(void **state)
{
    fixture *f = *state;
    ws_client_free(f->c);
    free(f);
    return 0;
}

static void expect_http(ws_client_status s, const ws_client_error *e, long status, const char *code)
{
    assert_int_equal(s, WS_CLIENT_ERR_HTTP);
    assert_int_equal(e->kind, WS_CLIENT_ERR_HTTP);
    assert_int_equal(e->status, status);
    assert_string_equal(e->code, code);
    assert_true(e->message[0] != '\0');
}

/* ---- tests -------------------------------------------------------------------------- */

static void test_probes(void **state)
{
    (void)state;
    ws_client *c = client();
    ws_client_error e;
    assert_int_equal(ws_client_healthz(c, &e), WS_CLIENT_OK);
    ws_client_ready r;
    assert_int_equal(ws_client_readyz(c, &r, &e), WS_CLIENT_OK);
    assert_int_equal(r.ready, 1);
    assert_string_equal(r.durability, "normal");
    assert_true(r.queue_depth >= 0);
    char *text;
    assert_int_equal(ws_client_metrics(c, &text, &e), WS_CLIENT_OK);
    assert_non_null(strstr(text, "worldstate_steps_total"));
    assert_non_null(strstr(text, "worldstate_model_version{model=\"default\"}"));
    free(text);
    ws_client_free(c);
}

static void test_sessions(void **state)
{
    (void)state;
    ws_client *c = client();
    ws_client_error e;
    ws_client_session s;
    char ids[3][WS_CLIENT_ID_LEN + 1];
    for (int i = 0; i < 3; i++) new_session(c, ids[i]);
    assert_int_equal(ws_client_session_get(c, ids[0], &s, &e), WS_CLIENT_OK);
    assert_string_equal(s.id, ids[0]);
    assert_string_equal(s.model, "default");
    assert_int_equal(s.step, 0);
    assert_int_equal(s.state_rows, 0);
    assert_true(s.created_ms > 0 && s.updated_ms >= s.created_ms);
    /* Paging: every id exactly once, in id order. */
    int seen[3] = {0}, total = 0;
    char after[WS_CLIENT_ID_LEN + 1] = "", prev[WS_CLIENT_ID_LEN + 1] = "";
    do {
        ws_client_session_page p;
        assert_int_equal(ws_client_session_list(c, after, 2, &p, &e), WS_CLIENT_OK);
        assert_true(p.n <= 2);
        for (int i = 0; i < p.n; i++, total++) {
            assert_true(strcmp(prev, p.items[i].id) < 0);
            memcpy(prev, p.items[i].id, sizeof prev);
            for (int k = 0; k < 3; k++) seen[k] += !strcmp(p.items[i].id, ids[k]);
        }
        memcpy(after, p.next_after, sizeof after);
        ws_client_session_page_free(&p);
    } while (after[0]);
    assert_true(total >= 3);
    for (int k = 0; k < 3; k++) assert_int_equal(seen[k], 1);
    /* Delete, then 404 mapped to a typed error. */
    assert_int_equal(ws_client_session_delete(c, ids[1], &e), WS_CLIENT_OK);
    expect_http(ws_client_session_get(c, ids[1], &s, &e), &e, 404, "not_found");
    expect_http(ws_client_session_delete(c, ids[1], &e), &e, 404, "not_found");
    expect_http(ws_client_session_create(c, "no-such-model", &s, &e), &e, 404, "model_not_found");
    /* Ids and names are checked before anything is sent. */
    assert_int_equal(ws_client_session_get(c, "../models", &s, &e), WS_CLIENT_ERR_INVALID);
    assert_int_equal(e.attempts, 0);
    assert_int_equal(ws_client_session_create(c, "bad name", &s, &e), WS_CLIENT_ERR_INVALID);
    assert_int_equal(ws_client_session_list(c, NULL, 1001, &(ws_client_session_page){0}, &e), WS_CLIENT_ERR_INVALID);
    ws_client_free(c);
}

static void test_steps_log_queries_labels(void **state)
{
    fixture *f = *state;
    ws_client *c = f->c;
    const char *id = f->id;
    ws_client_error e;
    int labels[2] = {1, 0};
    ws_client_step_req sent[3];
    ws_client_answers a;
    for (int t = 0; t < 3; t++) {
        sent[t] = simple_step(f->in, f->qs, t == 0 ? labels : NULL, t != 1, t);
        assert_int_equal(ws_client_step(c, id, &sent[t], &a, &e), WS_CLIENT_OK);
        assert_int_equal(a.step, t + 1);
        assert_int_equal(a.n_answers, 2);
        assert_int_equal(a.model_version, 1);
        assert_int_equal(a.recovered, 0);
        for (int i = 0; i < 2; i++) {
            assert_true(a.answers[i].p > 0 && a.answers[i].p < 1);
            assert_int_equal(a.answers[i].holds, a.answers[i].p >= 0.5);
        }
        ws_client_answers_free(&a);
    }
    /* The log, paged: what was sent comes back, typed. */
    ws_client_log_page p;
    assert_int_equal(ws_client_step_log(c, id, 0, 2, &p, &e), WS_CLIENT_OK);
    assert_int_equal(p.n, 2);
    assert_int_equal(p.next_after, 2);
    assert_int_equal(p.steps[0].step, 1);
    assert_string_equal(p.steps[0].session, id);
    assert_true(ws_client_step_req_equal(&p.steps[0].req, &sent[0]));
    assert_true(p.steps[0].req.has_labels);
    assert_int_equal(p.steps[0].req.instructions[0].value, 1);
    assert_int_equal(p.steps[1].req.instructions[0].value, 0);
    assert_false(ws_client_step_req_equal(&p.steps[0].req, &p.steps[1].req));
    assert_int_equal(p.steps[1].n_answers, 2);
    assert_true(p.steps[1].time_ms > 0);
    ws_client_log_page_free(&p);
    assert_int_equal(ws_client_step_log(c, id, 2, 2, &p, &e), WS_CLIENT_OK);
    assert_int_equal(p.n, 1);
    assert_int_equal(p.steps[0].step, 3);
    assert_int_equal(p.next_after, WS_CLIENT_NO_STEP);
    ws_client_log_page_free(&p);
    /* Queries leave the session where it is. */
    assert_int_equal(ws_client_query(c, id, f->qs, 2, &a, &e), WS_CLIENT_OK);
    assert_int_equal(a.step, 3);
    assert_int_equal(a.n_answers, 2);
    ws_client_answers_free(&a);
    assert_int_equal(session_step(c, id), 3);
    /* Labels later: stored, same again is fine, different ones conflict unless replaced. */
    int later[2] = {0, 1}, other[2] = {1, 1};
    int queued = -1;
    assert_int_equal(ws_client_labels_put(c, id, 2, later, 2, 0, &queued, &e), WS_CLIENT_OK);
    assert_true(queued == 0 || queued == 1);
    assert_int_equal(ws_client_labels_put(c, id, 2, later, 2, 0, NULL, &e), WS_CLIENT_OK);
    expect_http(ws_client_labels_put(c, id, 2, other, 2, 0, NULL, &e), &e, 409, "labels_conflict");
    assert_int_equal(ws_client_labels_put(c, id, 2, other, 2, 1, NULL, &e), WS_CLIENT_OK);
    expect_http(ws_client_labels_put(c, id, 2, other, 1, 0, NULL, &e), &e, 400, "invalid_request");
    expect_http(ws_client_labels_put(c, id, 99, other, 2, 0, NULL, &e), &e, 404, "not_found");
    assert_int_equal(ws_client_step_log(c, id, 1, 1, &p, &e), WS_CLIENT_OK);
    assert_int_equal(p.steps[0].req.labels[0], 1);
    assert_int_equal(p.steps[0].req.labels[1], 1);
    ws_client_log_page_free(&p);
}

static void test_state(void **state)
{
    fixture *f = *state;
    ws_client *c = f->c;
    const char *id = f->id;
    ws_client_error e;
    ws_client_state st;
    assert_int_equal(ws_client_state_get(c, id, &st, &e), WS_CLIENT_OK);
    assert_int_equal(st.rows * st.cols, 0);
    assert_null(st.values);
    ws_client_state_free(&st);
    ws_client_step_req req = simple_step(f->in, f->qs, NULL, 1, WS_CLIENT_NO_STEP);
    ws_client_answers a;
    assert_int_equal(ws_client_step(c, id, &req, &a, &e), WS_CLIENT_OK);
    ws_client_answers_free(&a);
    assert_int_equal(ws_client_state_get(c, id, &st, &e), WS_CLIENT_OK);
    ws_client_model dm; /* the default model's shape depends on the checkpoint it ships */
    assert_int_equal(ws_client_model_get(c, "default", &dm, &e), WS_CLIENT_OK);
    assert_int_equal(st.rows, dm.config.views * dm.config.n_state);
    assert_int_equal(st.cols, dm.config.d);
    ws_client_model_free(&dm);
    assert_int_equal(st.step, 1);
    double norm = 0;
    for (int i = 0; i < st.rows * st.cols; i++) {
        assert_true(isfinite(st.values[i]));
        norm += st.values[i] * st.values[i];
    }
    assert_true(norm > 0);
    ws_client_state_free(&st);
}

/* 409 step_conflict carries current_step; the same step posted twice with
 * expect_step applies once. Bad input is a 400 that changes nothing. */
static void test_conflict_and_bad_input(void **state)
{
    fixture *f = *state;
    ws_client *c = f->c;
    const char *id = f->id;
    ws_client_error e;
    ws_client_step_req req = simple_step(f->in, f->qs, NULL, 1, 0);
    ws_client_answers a;
    assert_int_equal(ws_client_step(c, id, &req, &a, &e), WS_CLIENT_OK);
    ws_client_answers_free(&a);
    expect_http(ws_client_step(c, id, &req, &a, &e), &e, 409, "step_conflict");
    assert_int_equal(e.current_step, 1);
    assert_int_equal(e.attempts, 1);
    assert_int_equal(session_step(c, id), 1);
    req.expect_step = 7;
    expect_http(ws_client_step(c, id, &req, &a, &e), &e, 409, "step_conflict");
    assert_int_equal(e.current_step, 1);
    /* Five symbols for a model whose facts have at most four. */
    char *five[] = {"a", "b", "c", "d", "e"};
    req.expect_step = WS_CLIENT_NO_STEP;
    req.queries[0] = (ws_client_fact){.symbols = five, .n_symbols = 5};
    expect_http(ws_client_step(c, id, &req, &a, &e), &e, 400, "invalid_request");
    double vec[3] = {1, 2, 3};
    req.queries[0] = (ws_client_fact){.vector = vec, .n_vector = 3}; /* the default model takes no vectors */
    expect_http(ws_client_step(c, id, &req, &a, &e), &e, 400, "invalid_request");
    assert_int_equal(session_step(c, id), 1);
    /* A fact with neither symbols nor vector never leaves the client. */
    req.queries[0] = (ws_client_fact){0};
    assert_int_equal(ws_client_step(c, id, &req, &a, &e), WS_CLIENT_ERR_INVALID);
    assert_int_equal(e.attempts, 0);
}

static void test_models(void **state)
{
    (void)state;
    ws_client *c = client();
    ws_client_error e;
    ws_client_model_list l;
    assert_int_equal(ws_client_model_list_get(c, &l, &e), WS_CLIENT_OK);
    assert_true(l.n >= 1);
    assert_string_equal(l.items[0].name, "default");
    /* Its config is the shipped checkpoint's, or the built-in default's. */
    char heads[32];
    snprintf(heads, sizeof heads, "\"n_heads\":%d", l.items[0].config.n_heads);
    assert_true(l.items[0].config.d > 0 && l.items[0].config.n_state > 0);
    assert_non_null(strstr(l.items[0].config_json, heads));
    assert_true(!strcmp(l.items[0].origin, "random") || !strcmp(l.items[0].origin, "shipped"));
    ws_client_model_list_free(&l);
    ws_client_training_patch tp = WS_CLIENT_TRAINING_KEEP;
    tp.update_every = 8;
    ws_client_model_spec spec = {.name = "tiny",
                                 .config_json = "{\"d\":16,\"n_heads\":2,\"n_state\":4,\"n_upd_layers\":1,"
                                                "\"n_ext_layers\":1,\"vocab_cap\":64}",
                                 .training = &tp,
                                 .seed = 7};
    ws_client_model m;
    assert_int_equal(ws_client_model_create(c, &spec, &m, &e), WS_CLIENT_OK);
    assert_string_equal(m.name, "tiny");
    assert_int_equal(m.version, 1);
    assert_int_equal(m.config.d, 16);
    assert_int_equal(m.training.update_every, 8);
    assert_int_equal(m.training.enabled, 1);
    assert_string_equal(m.tenant, ""); /* shared */
    ws_client_model_free(&m);
    expect_http(ws_client_model_create(c, &spec, &m, &e), &e, 409, "conflict");
    /* a tenant's own model (open mode: the tenant is "default") */
    ws_client_model_spec own = {.name = "tiny-own",
                                .config_json = "{\"d\":16,\"n_heads\":2,\"n_state\":4}",
                                .seed = -1,
                                .tenant = "default"};
    assert_int_equal(ws_client_model_create(c, &own, &m, &e), WS_CLIENT_OK);
    assert_string_equal(m.tenant, "default");
    ws_client_model_free(&m);
    own.name = "tiny-nobody", own.tenant = "nobody";
    expect_http(ws_client_model_create(c, &own, &m, &e), &e, 400, "invalid_request");
    own.tenant = "bad name!";
    assert_int_equal(ws_client_model_create(c, &own, &m, &e), WS_CLIENT_ERR_INVALID);
    spec = (ws_client_model_spec){.name = "huge", .config_json = "{\"d\":100000}", .seed = -1};
    expect_http(ws_client_model_create(c, &spec, &m, &e), &e, 400, "invalid_request");
    spec.config_json = "{\"d\":16} trailing";
    assert_int_equal(ws_client_model_create(c, &spec, &m, &e), WS_CLIENT_ERR_INVALID);
    assert_int_equal(ws_client_model_get(c, "tiny", &m, &e), WS_CLIENT_OK);
    assert_true(m.status.present);
    assert_string_equal(m.status.state, "loaded");
    assert_int_equal(m.status.serving_version, 1);
    ws_client_model_free(&m);
    expect_http(ws_client_model_get(c, "nope", &m, &e), &e, 404, "not_found");
    ws_client_training t;
    tp = WS_CLIENT_TRAINING_KEEP;
    tp.enabled = 0;
    tp.lr = 0.01;
    assert_int_equal(ws_client_training_set(c, "tiny", &tp, &t, &e), WS_CLIENT_OK);
    assert_int_equal(t.enabled, 0);
    assert_true(fabs(t.lr - 0.01) < 1e-9);
    assert_int_equal(t.update_every, 8); /* kept */
    tp = WS_CLIENT_TRAINING_KEEP;
    tp.lr = 2; /* out of (0, 1] */
    expect_http(ws_client_training_set(c, "tiny", &tp, &t, &e), &e, 400, "invalid_request");
    char path[400];
    snprintf(path, sizeof path, "%s/tiny.safetensors", DIR_);
    int64_t version = 0;
    assert_int_equal(ws_client_checkpoint_download(c, "tiny", path, &version, &e), WS_CLIENT_OK);
    assert_int_equal(version, 1);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char head[4096] = {0};
    size_t n = fread(head, 1, sizeof head - 1, f);
    fclose(f);
    assert_true(n > 8);
    assert_non_null(strstr(head + 8, "worldstate-model-1"));
    /* The checkpoint imported: a new model, then that model's next version. */
    int created = -1;
    assert_int_equal(ws_client_model_import(c, "tiny-copy", NULL, path, &m, &created, &e), WS_CLIENT_OK);
    assert_int_equal(created, 1);
    assert_int_equal(m.version, 1);
    assert_int_equal(m.config.d, 16);
    assert_string_equal(m.origin, "imported");
    ws_client_model_free(&m);
    assert_int_equal(ws_client_model_import(c, "tiny-copy", NULL, path, &m, &created, &e), WS_CLIENT_OK);
    assert_int_equal(created, 0);
    assert_int_equal(m.version, 2);
    assert_string_equal(m.version_note, "imported");
    ws_client_model_free(&m);
    expect_http(ws_client_model_import(c, "default", NULL, path, &m, NULL, &e), &e, 409,
                "config_mismatch");
    /* for a tenant: a new model is its own; a shared model's version stays shared */
    assert_int_equal(ws_client_model_import(c, "tiny-mine", "default", path, &m, &created, &e),
                     WS_CLIENT_OK);
    assert_int_equal(created, 1);
    assert_string_equal(m.tenant, "default");
    ws_client_model_free(&m);
    expect_http(ws_client_model_import(c, "tiny-copy", "default", path, &m, NULL, &e), &e, 409,
                "conflict");
    expect_http(ws_client_model_import(c, "tiny-x", "nobody", path, &m, NULL, &e), &e, 400,
                "invalid_request");
    char junk[420];
    snprintf(junk, sizeof junk, "%s/junk.safetensors", DIR_);
    f = fopen(junk, "wb");
    assert_non_null(f);
    assert_int_equal(fputs("not a checkpoint", f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
    expect_http(ws_client_model_import(c, "junk", NULL, junk, &m, NULL, &e), &e, 400, "bad_checkpoint");
    strcat(junk, ".missing");
    assert_int_equal(ws_client_model_import(c, "junk", NULL, junk, &m, NULL, &e), WS_CLIENT_ERR_IO);
    /* A failed download leaves neither the file nor its .part. */
    snprintf(path, sizeof path, "%s/nope.safetensors", DIR_);
    expect_http(ws_client_checkpoint_download(c, "nope", path, &version, &e), &e, 404, "not_found");
    assert_int_equal(access(path, F_OK), -1);
    strcat(path, ".part");
    assert_int_equal(access(path, F_OK), -1);
    ws_client_free(c);
}

/* The publication gate as the client decodes it (GET /v1/models/{name}): a
 * new model's anchor is version 1 and no decision is made yet; after labelled
 * steps with a candidate every AdamW step, the first decision's verdict and
 * its reason (none when published). */
static void test_model_gate(void **state)
{
    (void)state;
    ws_client *c = client();
    ws_client_error e;
    ws_client_model m;
    ws_client_training_patch tp = WS_CLIENT_TRAINING_KEEP;
    tp.enabled = 1, tp.update_every = 1, tp.publish_every = 1;
    ws_client_model_spec spec = {.name = "tiny-gate",
                                 .config_json = "{\"d\":16,\"n_heads\":2,\"n_state\":4}",
                                 .training = &tp,
                                 .seed = 5};
    assert_int_equal(ws_client_model_create(c, &spec, &m, &e), WS_CLIENT_OK);
    ws_client_model_free(&m);
    assert_int_equal(ws_client_model_get(c, "tiny-gate", &m, &e), WS_CLIENT_OK);
    assert_true(m.gate.present && m.gate.anchor_version == 1 && m.gate.restored == 0);
    assert_string_equal(m.gate.last_verdict, "");
    ws_client_model_free(&m);
    ws_client_session s;
    assert_int_equal(ws_client_session_create(c, "tiny-gate", &s, &e), WS_CLIENT_OK);
    ws_client_instruction in[1];
    ws_client_fact qs[2];
    int labels[2] = {1, 0}, decided = 0;
    for (int i = 0; i < 500 && !decided; i++) {
        ws_client_step_req req = simple_step(in, qs, labels, 1, WS_CLIENT_NO_STEP);
        ws_client_answers a;
        assert_int_equal(ws_client_step(c, s.id, &req, &a, &e), WS_CLIENT_OK);
        ws_client_answers_free(&a);
        assert_int_equal(ws_client_model_get(c, "tiny-gate", &m, &e), WS_CLIENT_OK);
        decided = m.gate.last_verdict[0] != '\0';
        if (!decided) ws_client_model_free(&m);
        struct timespec ts = {0, 10000000};
        if (!decided) nanosleep(&ts, NULL);
    }
    assert_true(decided);
    printf("tiny-gate: %s (%s), %lld published, %lld rejected, anchor version %lld\n",
           m.gate.last_verdict, m.gate.last_reason, (long long)m.gate.published,
           (long long)m.gate.rejected, (long long)m.gate.anchor_version);
    assert_true(m.gate.published + m.gate.rejected >= 1);
    if (!strcmp(m.gate.last_verdict, "published")) { /* a published candidate has no reason */
        assert_string_equal(m.gate.last_verdict, "published");
        assert_string_equal(m.gate.last_reason, "");
    } else {
        assert_string_equal(m.gate.last_verdict, "rejected");
        assert_true(strlen(m.gate.last_reason) > 0);
    }
    ws_client_model_free(&m);
    ws_client_free(c);
}

/* The reply of an applied step is lost: the retry answers 409 with
 * current_step = expect_step+1, and the client returns the logged answers. */
static void test_lost_reply_applies_once(void **state)
{
    fixture *f = *state;
    ws_client *direct = f->c;
    const char *id = f->id;
    proxy px;
    proxy_start(&px, D->port);
    ws_client *c = client_for(px.port, NULL, 30000, 3);
    int labels[2] = {1, 0};
    ws_client_step_req req = simple_step(f->in, f->qs, labels, 1, 0);
    ws_client_answers a;
    ws_client_error e;
    atomic_store(&px.mode, PROXY_DROP_REPLY);
    assert_int_equal(ws_client_step(c, id, &req, &a, &e), WS_CLIENT_OK);
    assert_int_equal(a.recovered, 1);
    assert_int_equal(a.step, 1);
    assert_int_equal(a.n_answers, 2);
    assert_int_equal(session_step(direct, id), 1);
    ws_client_log_page p;
    assert_int_equal(ws_client_step_log(direct, id, 0, 10, &p, &e), WS_CLIENT_OK);
    assert_int_equal(p.n, 1);
    for (int i = 0; i < 2; i++) assert_true(p.steps[0].answers[i].p == a.answers[i].p);
    ws_client_log_page_free(&p);
    ws_client_answers_free(&a);
    assert_true(atomic_load(&px.conns) >= 3); /* the lost one, the 409, the log read */

    /* The request is lost before the daemon sees it: the retry applies it. */
    req.expect_step = 1;
    atomic_store(&px.mode, PROXY_DROP_REQUEST);
    assert_int_equal(ws_client_step(c, id, &req, &a, &e), WS_CLIENT_OK);
    assert_int_equal(a.recovered, 0);
    assert_int_equal(a.step, 2);
    ws_client_answers_free(&a);
    assert_int_equal(session_step(direct, id), 2);

    /* Someone else took step 3 while our reply was lost: the 409 stands. */
    req.expect_step = 2;
    ws_client_step_req theirs = req;
    theirs.has_labels = 0;
    assert_int_equal(ws_client_step(direct, id, &theirs, &a, &e), WS_CLIENT_OK);
    ws_client_answers_free(&a);
    atomic_store(&px.mode, PROXY_DROP_REQUEST);
    expect_http(ws_client_step(c, id, &req, &a, &e), &e, 409, "step_conflict");
    assert_int_equal(e.current_step, 3);
    assert_int_equal(e.attempts, 2);

    /* Without expect_step a lost reply is not retried (it could apply twice). */
    req.expect_step = WS_CLIENT_NO_STEP;
    atomic_store(&px.mode, PROXY_DROP_REPLY);
    assert_int_equal(ws_client_step(c, id, &req, &a, &e), WS_CLIENT_ERR_TRANSPORT);
    assert_int_equal(e.attempts, 1);
    assert_true(e.curl_code != 0);
    assert_int_equal(session_step(direct, id), 4);

    /* DELETE whose reply is lost: the retry's 404 means it was deleted. */
    atomic_store(&px.mode, PROXY_DROP_REPLY);
    assert_int_equal(ws_client_session_delete(c, id, &e), WS_CLIENT_OK);
    ws_client_session s;
    expect_http(ws_client_session_get(direct, id, &s, &e), &e, 404, "not_found");

    /* Creating a session is not repeated after a lost reply. */
    atomic_store(&px.mode, PROXY_DROP_REPLY);
    assert_int_equal(ws_client_session_create(c, NULL, &s, &e), WS_CLIENT_ERR_TRANSPORT);
    assert_int_equal(e.attempts, 1);
    ws_client_free(c);
    proxy_stop(&px);
}

static void test_timeout_and_unreachable(void **state)
{
    (void)state;
    proxy px;
    proxy_start(&px, D->port);
    ws_client *c = client_for(px.port, NULL, 300, 0);
    ws_client_error e;
    atomic_store(&px.mode, PROXY_HANG);
    assert_int_equal(ws_client_healthz(c, &e), WS_CLIENT_ERR_TRANSPORT);
    assert_int_equal(e.curl_code, 28); /* CURLE_OPERATION_TIMEDOUT */
    assert_int_equal(e.status, 0);
    ws_client_free(c);
    proxy_stop(&px);
    /* Nothing listens there any more: refused, retried, then a transport error. */
    c = client_for(px.port, NULL, 300, 2);
    assert_int_equal(ws_client_healthz(c, &e), WS_CLIENT_ERR_TRANSPORT);
    assert_int_equal(e.attempts, 3);
    ws_client_free(c);
    ws_client_config cfg = ws_client_config_default();
    cfg.url = "ftp://example";
    assert_int_equal(ws_client_new(&cfg, &c, &e), WS_CLIENT_ERR_INVALID);
    assert_null(c);
}

/* One handle shared by threads, each driving its own session. */
typedef struct {
    ws_client *c;
    char id[WS_CLIENT_ID_LEN + 1];
    int ok;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    ws_client_instruction in[1];
    ws_client_fact qs[2];
    for (int t = 0; t < 8; t++) {
        ws_client_step_req req = simple_step(in, qs, NULL, t % 2, t);
        ws_client_answers a;
        if (ws_client_step(w->c, w->id, &req, &a, NULL) != WS_CLIENT_OK || a.step != t + 1) return NULL;
        ws_client_answers_free(&a);
    }
    w->ok = 1;
    return NULL;
}

static void test_threads_share_a_handle(void **state)
{
    (void)state;
    ws_client *c = client();
    worker w[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (worker){.c = c};
        new_session(c, w[i].id);
        assert_int_equal(pthread_create(&th[i], NULL, work, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_int_equal(w[i].ok, 1);
        assert_int_equal(session_step(c, w[i].id), 8);
    }
    ws_client_free(c);
}

/* Keys: 401 without or with a wrong key, 403 for admin routes with a plain key. */
static void test_keys(void **state)
{
    (void)state;
    char dir[256], key[128], admin[128];
    ws_ts_tmpdir(dir, sizeof dir);
    assert_int_equal(ws_ts_key_create(dir, "acme", 0, key, sizeof key), 0);
    assert_int_equal(ws_ts_key_create(dir, "ops", 1, admin, sizeof admin), 0);
    ws_ts_daemon kd;
    assert_int_equal(ws_ts_start(&kd, dir, NULL), 0);
    ws_client *none = client_for(kd.port, NULL, 30000, 0), *wrong = client_for(kd.port, "wsk_0000", 30000, 0);
    ws_client *user = client_for(kd.port, key, 30000, 0), *adm = client_for(kd.port, admin, 30000, 0);
    ws_client_session s;
    ws_client_error e;
    expect_http(ws_client_session_create(none, NULL, &s, &e), &e, 401, "unauthorized");
    expect_http(ws_client_session_create(wrong, NULL, &s, &e), &e, 401, "unauthorized");
    assert_int_equal(ws_client_healthz(none, &e), WS_CLIENT_OK); /* probes need no key */
    assert_int_equal(ws_client_session_create(user, NULL, &s, &e), WS_CLIENT_OK);
    ws_client_session seen;
    expect_http(ws_client_session_get(adm, s.id, &seen, &e), &e, 404, "not_found"); /* another tenant's */
    assert_int_equal(ws_client_session_get(user, s.id, &seen, &e), WS_CLIENT_OK);
    ws_client_training t;
    ws_client_training_patch tp = WS_CLIENT_TRAINING_KEEP;
    expect_http(ws_client_training_set(user, "default", &tp, &t, &e), &e, 403, "forbidden");
    assert_int_equal(ws_client_training_set(adm, "default", &tp, &t, &e), WS_CLIENT_OK);
    assert_int_equal(t.enabled, 1);
    ws_client *bad = NULL;
    ws_client_config cfg = ws_client_config_default();
    cfg.api_key = "wsk_1\r\nX: y";
    assert_int_equal(ws_client_new(&cfg, &bad, &e), WS_CLIENT_ERR_INVALID);
    ws_client_free(none);
    ws_client_free(wrong);
    ws_client_free(user);
    ws_client_free(adm);
    assert_int_equal(ws_ts_stop(&kd), 0);
    ws_ts_cleanup(dir);
}

/* JSON Lines records: round trip, bare step objects, and clear errors. */
static void test_records(void **state)
{
    (void)state;
    const char *line = "{\"session\":\"0123456789abcdef0123456789abcdef\",\"step\":4,"
                       "\"instructions\":[{\"fact\":[\"a\",\"b\"],\"value\":false},{\"vector\":[0.1,-0.0025],\"value\":true}],"
                       "\"queries\":[{\"fact\":[\"a\"]}],\"labels\":[true],\"answers\":[{\"p\":0.25,\"holds\":false}],"
                       "\"model_version\":3,\"time_ms\":1700000000000}";
    ws_client_log_entry r, back;
    ws_client_error e;
    assert_int_equal(ws_client_log_entry_from_json(line, strlen(line), &r, &e), WS_CLIENT_OK);
    assert_int_equal(r.step, 4);
    assert_int_equal(r.req.n_instructions, 2);
    assert_true(r.req.instructions[1].fact.vector[1] == -0.0025);
    assert_int_equal(r.model_version, 3);
    char *text;
    assert_int_equal(ws_client_log_entry_to_json(&r, &text, &e), WS_CLIENT_OK);
    assert_string_equal(text, line); /* same member order, exact numbers */
    assert_int_equal(ws_client_log_entry_from_json(text, strlen(text), &back, &e), WS_CLIENT_OK);
    assert_true(ws_client_step_req_equal(&r.req, &back.req));
    free(text);
    ws_client_log_entry_free(&r);
    ws_client_log_entry_free(&back);
    /* a line of the offline export (worldstate-train export) carries "model" too */
    const char *offline = "{\"session\":\"0123456789abcdef0123456789abcdef\",\"model\":\"default\","
                          "\"step\":1,\"instructions\":[],\"queries\":[],\"labels\":null}";
    assert_int_equal(ws_client_log_entry_from_json(offline, strlen(offline), &r, &e), WS_CLIENT_OK);
    assert_int_equal(r.step, 1);
    ws_client_log_entry_free(&r);
    const char *bare = "{\"queries\":[{\"fact\":[\"x\"]}]}\n";
    assert_int_equal(ws_client_log_entry_from_json(bare, strlen(bare), &r, &e), WS_CLIENT_OK);
    assert_int_equal(r.step, WS_CLIENT_NO_STEP);
    assert_int_equal(r.req.has_labels, 0);
    ws_client_log_entry_free(&r);
    static const struct {
        const char *line, *says;
    } bad[] = {{"{\"instrs\":[]}", "unknown field \"instrs\""},
               {"{\"queries\":[],\"queries\":[]}", "duplicate field"},
               {"{\"queries\":[{\"fact\":[\"x\"]}],\"labels\":[true,false]}", "labels has 2 items for 1 queries"},
               {"{\"instructions\":[{\"fact\":[\"x\"]}]}", "instructions[0] must have exactly"},
               {"{\"instructions\":[{\"fact\":[\"x\"],\"value\":1}]}", "instructions[0].value must be true or false"},
               {"{\"queries\":[{\"fact\":[]}]}", "queries[0].fact must be a non-empty array"},
               {"{\"queries\":[]} {}", "not one JSON object"},
               {"[1]", "must be a JSON object"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(ws_client_log_entry_from_json(bad[i].line, strlen(bad[i].line), &r, &e), WS_CLIENT_ERR_INVALID);
        if (!strstr(e.message, bad[i].says)) fail_msg("%s: got \"%s\"", bad[i].line, e.message);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_records),
        cmocka_unit_test(test_probes),
        cmocka_unit_test(test_sessions),
        cmocka_unit_test_setup_teardown(test_steps_log_queries_labels, fixture_open, fixture_close),
        cmocka_unit_test_setup_teardown(test_state, fixture_open, fixture_close),
        cmocka_unit_test_setup_teardown(test_conflict_and_bad_input, fixture_open, fixture_close),
        cmocka_unit_test(test_models),
        cmocka_unit_test(test_model_gate),
        cmocka_unit_test_setup_teardown(test_lost_reply_applies_once, fixture_open, fixture_close),
        cmocka_unit_test(test_timeout_and_unreachable),
        cmocka_unit_test(test_threads_share_a_handle),
        cmocka_unit_test(test_keys),
    };
    return cmocka_run_group_tests(tests, ws_ts_shared_setup, ws_ts_shared_teardown);
}
