/* engine_rules.c — a step job under its model's learned rules (rules.h), on
 * the engine thread after the job's symbols are mapped: what the session was
 * told up to now (kept beside its state in the state cache), plus this step's
 * instructions; the step's labels counted as evidence; then, for each fact
 * the step tells true, the session's facts a rule that holds makes false are
 * told false in the same step, as instructions of its own. They are marked
 * "inferred" in the step log, so an export replays the step as it ran, and
 * what a session was told can be read back from its log when the cache no
 * longer has it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_impl.h"

static void fact_of(const ws_eng_item *it, int row, int n_sym, const char *const *text,
                    ws_rule_fact *f)
{
    ws_eng_row_syms(it, row, it->em->cfg.max_fact_len, f->sym);
    f->n = n_sym;
    f->text = text;
}

static int told_in_step(const ws_eng_item *it, const ws_recall_facts *told, int i)
{
    int S = it->em->cfg.max_fact_len;
    for (int r = 0; r < it->j->n_instr; r++)
        if (!memcmp(told->ids[i], it->ids + (size_t)r * S, sizeof(int32_t) * (size_t)S) &&
            !memcmp(told->hash[i], it->hash + (size_t)r * S, sizeof(uint64_t) * (size_t)S))
            return 1;
    return 0;
}

/* The instruction "told fact i is false", its symbols' strings from the
 * vocabulary; 0 when one has none (an overflow id: a full vocabulary). */
static int inferred_fact(const ws_vocab *v, const ws_recall_facts *told, int i, int S,
                         ws_job_fact *out, ws_error *err)
{
    const char *syms[WS_MAX_FACT_LEN];
    int lens[WS_MAX_FACT_LEN], n = 0;
    for (; n < S && told->ids[i][n] >= 0; n++) {
        if (!(syms[n] = ws_vocab_symbol(v, told->ids[i][n]))) return 0;
        lens[n] = (int)strlen(syms[n]);
    }
    *out = (ws_job_fact){.value = 0};
    return ws_job_fact_syms(out, syms, lens, n, err) == WS_OK ? 1 : -1;
}

/* The step log's instructions with the inferred ones (from n_was on) added. */
static ws_status log_inferred(ws_job *j, int n_was, ws_error *err)
{
    cJSON *a = cJSON_Parse(j->instr_json ? j->instr_json : "[]");
    int ok = cJSON_IsArray(a);
    for (int i = n_was; ok && i < j->n_instr; i++) {
        cJSON *o = cJSON_CreateObject(), *fact = cJSON_CreateArray();
        ok = o && fact && cJSON_AddItemToObject(o, "fact", fact) && cJSON_AddItemToArray(a, o);
        for (int k = 0; ok && k < j->instr[i].n_sym; k++)
            ok = cJSON_AddItemToArray(fact, cJSON_CreateString(j->instr[i].sym[k]));
        ok = ok && cJSON_AddFalseToObject(o, "value") && cJSON_AddTrueToObject(o, "inferred");
    }
    char *text = ok ? cJSON_PrintUnformatted(a) : NULL;
    cJSON_Delete(a);
    if (!text) return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    free(j->instr_json);
    j->instr_json = text;
    return WS_OK;
}

/* Adds the inferred facts (indices into told) as instructions after the
 * step's own, their ids and hashes as rows between instructions and queries. */
static ws_status add_inferred(ws_eng_item *it, const ws_recall_facts *told, const int *idx, int n,
                              ws_error *err)
{
    ws_job *j = it->j;
    int S = it->em->cfg.max_fact_len, n_was = j->n_instr, rows = j->n_instr + n + j->n_query;
    ws_job_fact *f = realloc(j->instr, sizeof *f * (size_t)(j->n_instr + n));
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)S * (size_t)rows);
    uint64_t *hash = malloc(sizeof(uint64_t) * (size_t)S * (size_t)rows);
    if (f) j->instr = f;
    ws_status s = f && ids && hash ? WS_OK : ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    size_t at = (size_t)n_was * S;
    if (s == WS_OK) {
        memcpy(ids, it->ids, sizeof(int32_t) * at);
        memcpy(hash, it->hash, sizeof(uint64_t) * at);
    }
    for (int i = 0; s == WS_OK && i < n; i++) {
        ws_job_fact *nf = &j->instr[j->n_instr];
        int got = inferred_fact(ws_model_vocab(it->em->m), told, idx[i], S, nf, err);
        if (got < 0) {
            for (int k = 0; k < nf->n_sym; k++) free(nf->sym[k]);
            s = WS_ERR_NOMEM;
        }
        if (got <= 0) continue;
        memcpy(ids + at, told->ids[idx[i]], sizeof(int32_t) * (size_t)S);
        memcpy(hash + at, told->hash[idx[i]], sizeof(uint64_t) * (size_t)S);
        at += (size_t)S, j->n_instr++;
    }
    if (s != WS_OK) { /* the job fails: its instructions as far as they are whole */
        free(ids);
        free(hash);
        return s;
    }
    memcpy(ids + at, it->ids + (size_t)n_was * S, sizeof(int32_t) * (size_t)S * j->n_query);
    memcpy(hash + at, it->hash + (size_t)n_was * S, sizeof(uint64_t) * (size_t)S * j->n_query);
    free(it->ids);
    free(it->hash);
    it->ids = ids, it->hash = hash;
    return j->n_instr > n_was ? log_inferred(j, n_was, err) : WS_OK;
}

static void tell_row(const ws_eng_item *it, ws_recall_facts *told, int row, int value)
{
    int S = it->em->cfg.max_fact_len;
    ws_recall_tell(told, S, it->ids + (size_t)row * S, it->hash + (size_t)row * S, value);
}

/* Reading a session's told facts back from its step log (after a restart,
 * or once the cache let it go): the newest steps, enough to fill the list. */
enum { REBUILD_STEPS = 4 * WS_RECALL_FACTS };

typedef struct {
    ws_vocab *v;
    int S;
    ws_recall_facts *told;
} rebuild;

/* A fact of the step log (an instruction or a query object) as symbols of v
 * (looked up, not added) into f, with their strings; f->n 0 when it is not
 * one of at most S symbols (a vector fact). */
static void logged_fact(ws_vocab *v, int S, const cJSON *o, ws_rule_fact *f, const char **text)
{
    const cJSON *fact = cJSON_GetObjectItemCaseSensitive(o, "fact"), *sym;
    f->n = 0, f->text = text;
    cJSON_ArrayForEach(sym, fact)
    {
        if (f->n == S || !cJSON_IsString(sym)) break;
        text[f->n] = sym->valuestring;
        f->sym[f->n++] = ws_vocab_sym(v, sym->valuestring, strlen(sym->valuestring), 0);
    }
    if (f->n != cJSON_GetArraySize(fact)) f->n = 0;
}

static ws_status tell_logged(void *ctx, const ws_store_log_entry *entry)
{
    rebuild *rb = ctx;
    cJSON *a = cJSON_Parse(entry->instructions_json);
    const cJSON *o;
    cJSON_ArrayForEach(o, a)
    {
        const char *text[WS_MAX_FACT_LEN];
        ws_rule_fact f;
        logged_fact(rb->v, rb->S, o, &f, text);
        if (!f.n) continue;
        int32_t ids[WS_MAX_FACT_LEN];
        uint64_t hash[WS_MAX_FACT_LEN];
        ws_rule_fact_row(&f, rb->S, ids, hash);
        int val = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "value"));
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "inferred"))) val = WS_RULE_MADE_FALSE;
        ws_recall_tell(rb->told, rb->S, ids, hash, val);
    }
    cJSON_Delete(a);
    return WS_OK;
}

/* What the session was told before this step: as the cache kept it beside
 * the state, else as its step log says (the last REBUILD_STEPS steps). */
static ws_status told_before(ws_engine *e, ws_eng_item *it, ws_error *err)
{
    const ws_job *j = it->j;
    it->told->n = 0;
    if (!it->sess.step ||
        ws_state_cache_told(e->cache, j->tenant, j->session, it->sess.step, it->told, NULL))
        return WS_OK;
    rebuild rb = {ws_model_vocab(it->em->m), it->em->cfg.max_fact_len, it->told};
    int64_t after = it->sess.step > REBUILD_STEPS ? it->sess.step - REBUILD_STEPS : 0;
    return ws_store_log_page(e->st, j->tenant, j->session, after, REBUILD_STEPS, tell_logged, &rb,
                             err);
}

void ws_eng_rules_path(const char *data_dir, const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "%s/models/%s.rules", data_dir, name);
}

/* A rules file that cannot be read or written is logged: the rules go on in
 * memory. */
void ws_eng_rules_load(ws_engine *e, ws_eng_model *em)
{
    char path[WS_ENG_CKPT_PATH];
    ws_error err = {0};
    ws_eng_rules_path(e->cfg.data_dir, em->name, path, sizeof path);
    if (ws_rules_load(em->rules, path, &err) != WS_OK)
        ws_log(WS_LOG_WARN, "model %s: its learned rules were not loaded: %s", em->name, err.msg);
    ws_rules_changed(em->rules); /* loaded, not changed */
}

/* Saved whenever a rule begins or ceases to hold. */
static void rules_file(ws_engine *e, ws_eng_model *em)
{
    if (!ws_rules_changed(em->rules)) return; /* every step of the model asks */
    char path[WS_ENG_CKPT_PATH];
    ws_error err = {0};
    ws_eng_rules_path(e->cfg.data_dir, em->name, path, sizeof path);
    if (ws_rules_save(em->rules, e->cfg.data_dir, path, &err) != WS_OK)
        ws_log(WS_LOG_WARN, "model %s: its learned rules were not saved: %s", em->name, err.msg);
}

ws_status ws_eng_rules_apply(ws_engine *e, ws_eng_item *it, ws_error *err)
{
    ws_job *j = it->j;
    ws_rules *rules = it->em->rules;
    if (!(it->told = malloc(sizeof *it->told)))
        return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    WS_TRY(told_before(e, it, err));
    ws_recall_facts *told = it->told;
    for (int r = 0; r < j->n_instr; r++)
        if (j->instr[r].n_sym) tell_row(it, told, r, j->instr[r].value);
    for (int q = 0; j->has_labels && q < j->n_query; q++) {
        const ws_job_fact *f = &j->query[q];
        if (!f->n_sym || f->value < 0) continue;
        ws_rule_fact rf;
        fact_of(it, j->n_instr + q, f->n_sym, (const char *const *)f->sym, &rf);
        ws_rules_learn(rules, told, it->em->cfg.max_fact_len, &rf, f->value);
    }
    int idx[WS_RECALL_FACTS], n = 0, room = WS_SRV_MAX_ITEMS - j->n_instr;
    for (int r = 0; r < j->n_instr; r++) {
        if (!j->instr[r].n_sym || j->instr[r].value != 1) continue;
        ws_rule_fact rf;
        fact_of(it, r, j->instr[r].n_sym, NULL, &rf);
        int got[WS_RECALL_FACTS];
        int m = ws_rules_infer(rules, told, it->em->cfg.max_fact_len, &rf, got, WS_RECALL_FACTS);
        for (int i = 0; i < m && n < room; i++) {
            int dup = told_in_step(it, told, got[i]);
            for (int k = 0; k < n && !dup; k++) dup = idx[k] == got[i];
            if (!dup) idx[n++] = got[i];
        }
    }
    int n_was = j->n_instr;
    if (n) WS_TRY(add_inferred(it, told, idx, n, err));
    for (int r = n_was; r < j->n_instr; r++) tell_row(it, told, r, WS_RULE_MADE_FALSE);
    rules_file(e, it->em);
    return WS_OK;
}

/* A logged step's queries (JSON) and whether it has labels. */
typedef struct {
    cJSON *queries;
    int labelled;
} logged_step;

static ws_status read_step(void *ctx, const ws_store_log_entry *entry)
{
    logged_step *ls = ctx;
    ls->labelled = entry->labels_json != NULL;
    ls->queries = cJSON_Parse(entry->queries_json);
    return WS_OK;
}

void ws_eng_rules_labels(ws_engine *e, const ws_job *j)
{
    int64_t model = 0;
    ws_recall_facts *told = e->cache ? malloc(sizeof *told) : NULL;
    /* cached with what it was told at the labelled step: that is its latest */
    ws_eng_model *em = told && ws_state_cache_told(e->cache, j->tenant, j->session,
                                                   j->label_step, told, &model)
                           ? ws_eng_model_by_id(e, model)
                           : NULL;
    logged_step ls = {0};
    ws_error err = {0};
    if (em && em->tr.rules &&
        ws_store_log_page(e->st, j->tenant, j->session, j->label_step - 1, 1, read_step, &ls,
                          &err) == WS_OK &&
        cJSON_GetArraySize(ls.queries) == j->n_labels && !ls.labelled) {
        int i = 0;
        const cJSON *q;
        cJSON_ArrayForEach(q, ls.queries)
        {
            const char *text[WS_MAX_FACT_LEN];
            ws_rule_fact f;
            logged_fact(ws_model_vocab(em->m), em->cfg.max_fact_len, q, &f, text);
            if (f.n) ws_rules_learn(em->rules, told, em->cfg.max_fact_len, &f, j->labels[i]);
            i++;
        }
        rules_file(e, em);
    }
    cJSON_Delete(ls.queries);
    free(told);
}
