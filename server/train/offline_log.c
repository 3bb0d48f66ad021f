/* offline_log.c — logged steps as the model sees them, the sessions to replay
 * (from the database or from JSON Lines), and cursors over their steps. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "offline.h"

#define PAGE 256 /* logged steps a database cursor reads at a time */

void ws_off_step_clear(ws_off_step *s)
{
    for (int i = 0; s->facts && i < s->n_instr + s->n_query; i++) free(s->facts[i].vec);
    free(s->facts);
    memset(s, 0, sizeof *s);
}

/* Moves parsed facts f[0..n) into out[0..n): ids by the vocabulary (looked up,
 * never added), vectors taken over. */
static ws_status take_facts(ws_model *m, ws_srv_fact *f, int n, ws_off_fact *out, const char *what,
                            ws_error *err)
{
    const ws_model_config *c = ws_model_config_of(m);
    for (int i = 0; i < n; i++) {
        if (f[i].n_sym > c->max_fact_len)
            return ws_error_set(err, WS_ERR_INVALID,
                                "%s[%d]: the model takes at most %d symbols per fact", what, i,
                                c->max_fact_len);
        if (!f[i].n_sym && f[i].n_vec != c->d_raw)
            return ws_error_set(err, WS_ERR_INVALID,
                                "%s[%d]: vectors of this model have %d numbers", what, i, c->d_raw);
        for (int k = 0; k < WS_MAX_FACT_LEN; k++) {
            ws_sym s = k < f[i].n_sym ? ws_vocab_sym(ws_model_vocab(m), f[i].sym[k],
                                                     (size_t)f[i].sym_len[k], 0)
                                      : (ws_sym){-1, 0};
            out[i].ids[k] = s.id;
            out[i].hash[k] = s.hash;
        }
        out[i].n_ids = f[i].n_sym;
        out[i].vec = f[i].vec;
        f[i].vec = NULL;
        out[i].val = f[i].value;
    }
    return WS_OK;
}

const ws_sym *ws_off_fact_syms(const ws_off_fact *f, ws_sym *out)
{
    for (int k = 0; k < f->n_ids; k++) out[k] = (ws_sym){f->ids[k], f->hash[k]};
    return out;
}

static void free_srv_facts(ws_srv_fact *f, int n)
{
    for (int i = 0; i < n; i++) free(f[i].vec);
    free(f);
}

ws_status ws_off_step_parse(ws_model *m, int64_t step, const cJSON *instructions,
                            const cJSON *queries, const cJSON *labels, ws_off_step *out,
                            ws_error *err)
{
    memset(out, 0, sizeof *out);
    ws_srv_fact *fi = NULL, *fq = NULL;
    int ni = 0, nq = 0;
    ws_status s = ws_json_facts(instructions, 1, &fi, &ni, err);
    if (s == WS_OK) s = ws_json_facts(queries, 0, &fq, &nq, err);
    if (s == WS_OK && labels && !cJSON_IsNull(labels)) s = ws_json_labels(labels, fq, nq, err);
    out->facts = s == WS_OK ? calloc((size_t)(ni + nq ? ni + nq : 1), sizeof *out->facts) : NULL;
    if (s == WS_OK && !out->facts) s = ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    if (s == WS_OK) {
        out->step = step;
        out->n_instr = ni, out->n_query = nq;
        s = take_facts(m, fi, ni, out->facts, "instructions", err);
    }
    if (s == WS_OK) s = take_facts(m, fq, nq, out->facts + ni, "queries", err);
    free_srv_facts(fi, ni);
    free_srv_facts(fq, nq);
    if (s != WS_OK) ws_off_step_clear(out);
    return s;
}

/* Parses a database log entry (its JSON texts) into *out. */
static ws_status parse_entry(ws_model *m, const ws_store_log_entry *e, ws_off_step *out,
                             ws_error *err)
{
    cJSON *ins = cJSON_Parse(e->instructions_json), *qs = cJSON_Parse(e->queries_json);
    cJSON *ls = e->labels_json ? cJSON_Parse(e->labels_json) : NULL;
    ws_status s = ins && qs && (ls || !e->labels_json)
                      ? ws_off_step_parse(m, e->step, ins, qs, ls, out, err)
                      : ws_error_set(err, WS_ERR_FORMAT, "step %lld: unreadable log entry",
                                     (long long)e->step);
    if (s == WS_OK) out->model_version = e->model_version;
    cJSON_Delete(ins);
    cJSON_Delete(qs);
    cJSON_Delete(ls);
    return s;
}

/* ---- the corpus ------------------------------------------------------------ */

static ws_off_session *corpus_add(ws_off_corpus *c, ws_error *err)
{
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 64;
        ws_off_session *t = realloc(c->sessions, sizeof *t * (size_t)cap);
        if (!t) {
            ws_error_set(err, WS_ERR_NOMEM, "out of memory");
            return NULL;
        }
        c->sessions = t, c->cap = cap;
    }
    ws_off_session *s = &c->sessions[c->n++];
    memset(s, 0, sizeof *s);
    return s;
}

typedef struct {
    ws_off_corpus *c;
    const char *only;
    int64_t rollout;
    ws_error *err;
} list_ctx;

static ws_status list_one(void *ctx, const ws_store_session *sess)
{
    list_ctx *l = ctx;
    if (l->only && strcmp(l->only, sess->id) != 0) return WS_OK;
    ws_off_session *s = corpus_add(l->c, l->err);
    if (!s) return WS_ERR_NOMEM;
    memcpy(s->id, sess->id, sizeof s->id);
    s->tenant = sess->tenant;
    s->state_step = sess->step;
    s->n_steps = l->rollout > 0 && l->rollout < sess->step ? l->rollout : sess->step;
    return WS_OK;
}

ws_status ws_off_corpus_from_db(ws_off_corpus *c, int64_t model_id, const char *session,
                                int64_t rollout, ws_error *err)
{
    list_ctx l = {c, session, rollout, err};
    WS_TRY(ws_store_session_each_of_model(c->st, model_id, list_one, &l, err));
    if (session && c->n == 0)
        return ws_error_set(err, WS_ERR_NOTFOUND, "model %s has no session %s", c->model_name,
                            session);
    return WS_OK;
}

/* The corpus session named id (JSON Lines), created if new. */
static ws_off_session *session_named(ws_off_corpus *c, const char *id, ws_error *err)
{
    for (int i = c->n - 1; i >= 0; i--) /* newest first: a session's lines come together */
        if (!strcmp(c->sessions[i].id, id)) return &c->sessions[i];
    ws_off_session *s = corpus_add(c, err);
    if (s) snprintf(s->id, sizeof s->id, "%s", id);
    return s;
}

/* Adds one JSON Lines record to its session. */
static ws_status add_line(ws_off_corpus *c, const cJSON *o, int64_t rollout, ws_error *err)
{
    const cJSON *sess = cJSON_GetObjectItemCaseSensitive(o, "session");
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(o, "model");
    const cJSON *step = cJSON_GetObjectItemCaseSensitive(o, "step");
    if (!cJSON_IsString(sess) || !sess->valuestring[0] ||
        strlen(sess->valuestring) > WS_STORE_ID_LEN)
        return ws_error_set(err, WS_ERR_INVALID, "\"session\" must name the session in 1..%d bytes",
                            WS_STORE_ID_LEN);
    if (model && (!cJSON_IsString(model) || strcmp(model->valuestring, c->model_name) != 0)) {
        c->lines_skipped++;
        return WS_OK;
    }
    int64_t n = 0;
    WS_TRY(ws_json_int(step, 1, INT64_MAX / 2, &n, "step", err));
    ws_off_session *s = session_named(c, sess->valuestring, err);
    if (!s) return WS_ERR_NOMEM;
    if (n != s->state_step + 1) /* state_step: the last step read */
        return ws_error_set(err, WS_ERR_INVALID,
                            "session %s: step %lld follows step %lld (steps must run 1, 2, ...)",
                            s->id, (long long)n, (long long)s->state_step);
    s->state_step = n;
    if (rollout > 0 && n > rollout) return WS_OK;
    if (!s->steps || (s->n_steps & (s->n_steps - 1)) == 0) { /* grow at powers of two */
        ws_off_step *t = realloc(s->steps, sizeof *t * (size_t)(s->n_steps ? 2 * s->n_steps : 1));
        if (!t) return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
        s->steps = t;
    }
    WS_TRY(ws_off_step_parse(c->m, n, cJSON_GetObjectItemCaseSensitive(o, "instructions"),
                             cJSON_GetObjectItemCaseSensitive(o, "queries"),
                             cJSON_GetObjectItemCaseSensitive(o, "labels"), &s->steps[s->n_steps],
                             err));
    s->n_steps++;
    return WS_OK;
}

ws_status ws_off_corpus_from_jsonl(ws_off_corpus *c, const char *path, int64_t rollout,
                                   ws_error *err)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "r") : stdin;
    if (!f) return ws_error_set(err, WS_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    ws_status s = WS_OK;
    long no = 0;
    for (ssize_t len; s == WS_OK && (len = getline(&line, &cap, f)) >= 0;) {
        no++;
        if (strspn(line, " \t\r\n") == (size_t)len) continue; /* blank line */
        cJSON *o = cJSON_ParseWithLength(line, (size_t)len);
        s = cJSON_IsObject(o) ? add_line(c, o, rollout, err)
                              : ws_error_set(err, WS_ERR_FORMAT, "not a JSON object");
        cJSON_Delete(o);
        if (s != WS_OK) {
            ws_error inner = *err;
            ws_error_set(err, s, "%s:%ld: %s", path, no, inner.msg);
        }
    }
    if (s == WS_OK && ferror(f))
        s = ws_error_set(err, WS_ERR_IO, "reading %s: %s", path, strerror(errno));
    free(line);
    if (f != stdin && fclose(f) != 0 && s == WS_OK)
        s = ws_error_set(err, WS_ERR_IO, "closing %s", path);
    return s;
}

void ws_off_corpus_free(ws_off_corpus *c)
{
    for (int i = 0; i < c->n; i++) {
        for (int64_t k = 0; c->sessions[i].steps && k < c->sessions[i].n_steps; k++)
            ws_off_step_clear(&c->sessions[i].steps[k]);
        free(c->sessions[i].steps);
    }
    free(c->sessions);
    c->sessions = NULL;
    c->n = c->cap = 0;
}

int64_t ws_off_corpus_steps(const ws_off_corpus *c)
{
    int64_t n = 0;
    for (int i = 0; i < c->n; i++) n += c->sessions[i].n_steps;
    return n;
}

/* ---- cursors ----------------------------------------------------------------- */

void ws_off_cursor_start(ws_off_cursor *k, const ws_off_session *s)
{
    for (int i = 0; i < k->n_page; i++) ws_off_step_clear(&k->page[i]);
    k->sess = s;
    k->next = 0;
    k->n_page = k->pos = 0;
}

typedef struct {
    ws_off_cursor *k;
    ws_model *m;
    ws_error *err;
} page_ctx;

static ws_status page_one(void *ctx, const ws_store_log_entry *e)
{
    page_ctx *p = ctx;
    ws_off_cursor *k = p->k;
    if (k->next + k->n_page >= k->sess->n_steps) return WS_OK; /* beyond the steps to replay */
    if (e->step != k->next + k->n_page + 1)
        return ws_error_set(p->err, WS_ERR_FORMAT, "session %s: the log lacks step %lld",
                            k->sess->id, (long long)(k->next + k->n_page + 1));
    WS_TRY(parse_entry(p->m, e, &k->page[k->n_page], p->err));
    k->n_page++;
    return WS_OK;
}

ws_status ws_off_cursor_next(ws_off_corpus *c, ws_off_cursor *k, const ws_off_step **out,
                             ws_error *err)
{
    *out = NULL;
    if (k->next >= k->sess->n_steps) return WS_OK;
    if (k->sess->steps) {
        *out = &k->sess->steps[k->next++];
        return WS_OK;
    }
    if (k->pos == k->n_page) { /* the page is spent: read the next one */
        for (int i = 0; i < k->n_page; i++) ws_off_step_clear(&k->page[i]);
        k->n_page = k->pos = 0;
        if (!k->page) {
            k->page = calloc(PAGE, sizeof *k->page);
            if (!k->page) return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
        }
        page_ctx p = {k, c->m, err};
        WS_TRY(ws_store_log_page(c->st, k->sess->tenant, k->sess->id, k->next, PAGE, page_one, &p,
                                 err));
        if (k->n_page == 0)
            return ws_error_set(err, WS_ERR_FORMAT, "session %s: the log ends before step %lld",
                                k->sess->id, (long long)(k->next + 1));
    }
    k->next++;
    *out = &k->page[k->pos++];
    return WS_OK;
}

void ws_off_cursor_free(ws_off_cursor *k)
{
    for (int i = 0; i < k->n_page; i++) ws_off_step_clear(&k->page[i]);
    free(k->page);
    memset(k, 0, sizeof *k);
}
