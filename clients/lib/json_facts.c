/* json_facts.c — facts, instructions and step objects to and from JSON (the
 * same shapes in request bodies, the step log and JSON Lines records). */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static ws_client_status nomem(ws_client_error *err)
{
    return wsc_fail(err, WS_CLIENT_ERR_NOMEM, "out of memory");
}

/* ---- encoding ---------------------------------------------------------------------- */

static ws_client_status fact_to_json(const ws_client_fact *f, const int *value, cJSON **out,
                                     ws_client_error *err)
{
    *out = NULL;
    if ((f->n_symbols > 0) == (f->n_vector > 0) || f->n_symbols < 0 || f->n_vector < 0)
        return wsc_fail(err, WS_CLIENT_ERR_INVALID,
                        "a fact needs symbols or a vector (exactly one of them)");
    for (int i = 0; i < f->n_symbols; i++)
        if (!f->symbols[i]) return wsc_fail(err, WS_CLIENT_ERR_INVALID, "a fact symbol is NULL");
    cJSON *o = cJSON_CreateObject();
    cJSON *arr = f->n_symbols
                     ? cJSON_CreateStringArray((const char *const *)f->symbols, f->n_symbols)
                     : cJSON_CreateDoubleArray(f->vector, f->n_vector);
    int ok = o && arr && cJSON_AddItemToObject(o, f->n_symbols ? "fact" : "vector", arr);
    if (!ok) cJSON_Delete(arr);
    if (ok && value) ok = cJSON_AddBoolToObject(o, "value", *value != 0) != NULL;
    if (!ok) {
        cJSON_Delete(o);
        return nomem(err);
    }
    *out = o;
    return WS_CLIENT_OK;
}

/* Appends item to arr, deleting it when that fails. */
static ws_client_status append(cJSON *arr, cJSON *item, ws_client_error *err)
{
    if (item && cJSON_AddItemToArray(arr, item)) return WS_CLIENT_OK;
    cJSON_Delete(item);
    return nomem(err);
}

ws_client_status wsc_facts_to_json(const ws_client_fact *f, int n, cJSON **out,
                                   ws_client_error *err)
{
    cJSON *arr = cJSON_CreateArray();
    ws_client_status s = arr ? WS_CLIENT_OK : nomem(err);
    for (int i = 0; s == WS_CLIENT_OK && i < n; i++) {
        cJSON *o;
        s = fact_to_json(&f[i], NULL, &o, err);
        if (s == WS_CLIENT_OK) s = append(arr, o, err);
    }
    if (s != WS_CLIENT_OK) cJSON_Delete(arr);
    *out = s == WS_CLIENT_OK ? arr : NULL;
    return s;
}

ws_client_status wsc_add_member(cJSON *obj, const char *key, cJSON *item, ws_client_error *err)
{
    if (item && cJSON_AddItemToObject(obj, key, item)) return WS_CLIENT_OK;
    cJSON_Delete(item);
    return nomem(err);
}

static ws_client_status instructions_to_json(const ws_client_instruction *in, int n, cJSON **out,
                                             ws_client_error *err)
{
    cJSON *arr = cJSON_CreateArray();
    ws_client_status s = arr ? WS_CLIENT_OK : nomem(err);
    for (int i = 0; s == WS_CLIENT_OK && i < n; i++) {
        cJSON *o;
        s = fact_to_json(&in[i].fact, &in[i].value, &o, err);
        if (s == WS_CLIENT_OK && in[i].inferred && !cJSON_AddTrueToObject(o, "inferred"))
            cJSON_Delete(o), s = nomem(err);
        if (s == WS_CLIENT_OK) s = append(arr, o, err);
    }
    if (s != WS_CLIENT_OK) cJSON_Delete(arr);
    *out = s == WS_CLIENT_OK ? arr : NULL;
    return s;
}

static ws_client_status labels_to_json(const ws_client_step_req *r, cJSON **out,
                                       ws_client_error *err)
{
    cJSON *arr = cJSON_CreateArray();
    ws_client_status s = arr ? WS_CLIENT_OK : nomem(err);
    for (int i = 0; s == WS_CLIENT_OK && i < r->n_queries; i++)
        s = append(arr, cJSON_CreateBool(r->labels[i]), err);
    if (s != WS_CLIENT_OK) cJSON_Delete(arr);
    *out = s == WS_CLIENT_OK ? arr : NULL;
    return s;
}

ws_client_status wsc_step_req_to_json(const ws_client_step_req *r, int with_expect, cJSON **out,
                                      ws_client_error *err)
{
    *out = NULL;
    if (r->n_instructions < 0 || r->n_queries < 0 || (r->has_labels && r->n_queries && !r->labels))
        return wsc_fail(err, WS_CLIENT_ERR_INVALID, "bad step: negative counts or labels missing");
    cJSON *o = cJSON_CreateObject(), *ins = NULL, *qs = NULL, *ls = NULL;
    if (!o) return nomem(err);
    ws_client_status s = WS_CLIENT_OK;
    if (with_expect && r->expect_step >= 0 &&
        !cJSON_AddNumberToObject(o, "expect_step", (double)r->expect_step))
        s = nomem(err);
    if (s == WS_CLIENT_OK) s = instructions_to_json(r->instructions, r->n_instructions, &ins, err);
    if (s == WS_CLIENT_OK) s = wsc_add_member(o, "instructions", ins, err);
    if (s == WS_CLIENT_OK) s = wsc_facts_to_json(r->queries, r->n_queries, &qs, err);
    if (s == WS_CLIENT_OK) s = wsc_add_member(o, "queries", qs, err);
    if (s == WS_CLIENT_OK && r->has_labels) s = labels_to_json(r, &ls, err);
    if (s == WS_CLIENT_OK && r->has_labels) s = wsc_add_member(o, "labels", ls, err);
    if (s != WS_CLIENT_OK) {
        cJSON_Delete(o);
        return s;
    }
    *out = o;
    return WS_CLIENT_OK;
}

/* ---- decoding ----------------------------------------------------------------------- */

static void fact_free(ws_client_fact *f)
{
    for (int i = 0; i < f->n_symbols; i++) free(f->symbols[i]);
    free(f->symbols);
    free(f->vector);
    memset(f, 0, sizeof *f);
}

void ws_client_step_req_free(ws_client_step_req *r)
{
    for (int i = 0; i < r->n_instructions; i++) fact_free(&r->instructions[i].fact);
    for (int i = 0; i < r->n_queries; i++) fact_free(&r->queries[i]);
    free(r->instructions);
    free(r->queries);
    free(r->labels);
    memset(r, 0, sizeof *r);
    r->expect_step = WS_CLIENT_NO_STEP;
}

static ws_client_status symbols_from_json(const cJSON *arr, ws_client_fact *f, const char *what,
                                          ws_client_error *err)
{
    int n = cJSON_GetArraySize(arr);
    if (!cJSON_IsArray(arr) || n < 1)
        return wsc_fail(err, WS_CLIENT_ERR_INVALID, "%s.fact must be a non-empty array of strings",
                        what);
    f->symbols = calloc((size_t)n, sizeof *f->symbols);
    if (!f->symbols) return nomem(err);
    const cJSON *it;
    cJSON_ArrayForEach(it, arr)
    {
        if (!cJSON_IsString(it))
            return wsc_fail(err, WS_CLIENT_ERR_INVALID, "%s.fact[%d] must be a string", what,
                            f->n_symbols);
        if (!(f->symbols[f->n_symbols] = strdup(it->valuestring))) return nomem(err);
        f->n_symbols++;
    }
    return WS_CLIENT_OK;
}

static ws_client_status vector_from_json(const cJSON *arr, ws_client_fact *f, const char *what,
                                         ws_client_error *err)
{
    int n = cJSON_GetArraySize(arr);
    if (!cJSON_IsArray(arr) || n < 1)
        return wsc_fail(err, WS_CLIENT_ERR_INVALID,
                        "%s.vector must be a non-empty array of numbers", what);
    f->vector = malloc(sizeof(double) * (size_t)n);
    if (!f->vector) return nomem(err);
    const cJSON *it;
    cJSON_ArrayForEach(it, arr)
    {
        if (!cJSON_IsNumber(it))
            return wsc_fail(err, WS_CLIENT_ERR_INVALID, "%s.vector[%d] must be a number", what,
                            f->n_vector);
        f->vector[f->n_vector++] = it->valuedouble;
    }
    return WS_CLIENT_OK;
}

/* {"fact":[…]} or {"vector":[…]}, plus "value" when value is not NULL. On
 * failure f holds what was decoded so far (the caller frees it). */
static ws_client_status fact_from_json(const cJSON *o, ws_client_fact *f, int *value,
                                       const char *what, ws_client_error *err)
{
    if (!cJSON_IsObject(o))
        return wsc_fail(err, WS_CLIENT_ERR_INVALID, "%s must be an object", what);
    const cJSON *sym = cJSON_GetObjectItemCaseSensitive(o, "fact");
    const cJSON *vec = cJSON_GetObjectItemCaseSensitive(o, "vector");
    const cJSON *val = cJSON_GetObjectItemCaseSensitive(o, "value");
    /* a step log's mark of an instruction a learned rule added: replayed as
     * an instruction like any (api.md, Rules learned from labels) */
    const cJSON *inferred = value ? cJSON_GetObjectItemCaseSensitive(o, "inferred") : NULL;
    int expected = 1 + (value != NULL) + (inferred != NULL);
    if (inferred && !cJSON_IsBool(inferred))
        return wsc_fail(err, WS_CLIENT_ERR_INVALID, "%s.inferred must be true or false", what);
    if (!sym == !vec || cJSON_GetArraySize(o) != expected || (value && !val))
        return wsc_fail(err, WS_CLIENT_ERR_INVALID, "%s must have exactly %s", what,
                        value ? "\"fact\" or \"vector\", and \"value\""
                              : "one of \"fact\" or \"vector\"");
    if (value) {
        if (!cJSON_IsBool(val))
            return wsc_fail(err, WS_CLIENT_ERR_INVALID, "%s.value must be true or false", what);
        *value = cJSON_IsTrue(val);
    }
    return sym ? symbols_from_json(sym, f, what, err) : vector_from_json(vec, f, what, err);
}

/* A JSON array member (absent or null: none). */
static ws_client_status array_member(const cJSON *obj, const char *key, const cJSON **out, int *n,
                                     ws_client_error *err)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(obj, key);
    *out = NULL;
    *n = 0;
    if (!a || cJSON_IsNull(a)) return WS_CLIENT_OK;
    if (!cJSON_IsArray(a)) return wsc_fail(err, WS_CLIENT_ERR_INVALID, "%s must be an array", key);
    *out = a;
    *n = cJSON_GetArraySize(a);
    return WS_CLIENT_OK;
}

static ws_client_status decode_req(const cJSON *obj, ws_client_step_req *r, ws_client_error *err)
{
    const cJSON *ins, *qs, *ls, *it;
    int ni, nq, nl;
    char what[48];
    ws_client_status s = array_member(obj, "instructions", &ins, &ni, err);
    if (s == WS_CLIENT_OK) s = array_member(obj, "queries", &qs, &nq, err);
    if (s == WS_CLIENT_OK) s = array_member(obj, "labels", &ls, &nl, err);
    if (s != WS_CLIENT_OK) return s;
    if (ls && nl != nq)
        return wsc_fail(err, WS_CLIENT_ERR_INVALID, "labels has %d items for %d queries (one each)",
                        nl, nq);
    r->instructions = calloc((size_t)ni + 1, sizeof *r->instructions);
    r->queries = calloc((size_t)nq + 1, sizeof *r->queries);
    r->labels = calloc((size_t)nl + 1, sizeof *r->labels);
    if (!r->instructions || !r->queries || !r->labels) return nomem(err);
    cJSON_ArrayForEach(it, ins)
    {
        snprintf(what, sizeof what, "instructions[%d]", r->n_instructions);
        ws_client_instruction *in = &r->instructions[r->n_instructions++];
        if ((s = fact_from_json(it, &in->fact, &in->value, what, err)) != WS_CLIENT_OK) return s;
        in->inferred = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, "inferred"));
    }
    cJSON_ArrayForEach(it, qs)
    {
        snprintf(what, sizeof what, "queries[%d]", r->n_queries);
        if ((s = fact_from_json(it, &r->queries[r->n_queries++], NULL, what, err)) != WS_CLIENT_OK)
            return s;
    }
    r->has_labels = ls != NULL;
    int i = 0;
    cJSON_ArrayForEach(it, ls)
    {
        if (!cJSON_IsBool(it))
            return wsc_fail(err, WS_CLIENT_ERR_INVALID, "labels[%d] must be true or false", i);
        r->labels[i++] = cJSON_IsTrue(it);
    }
    return WS_CLIENT_OK;
}

ws_client_status wsc_step_req_from_json(const cJSON *obj, ws_client_step_req *r,
                                        ws_client_error *err)
{
    memset(r, 0, sizeof *r);
    r->expect_step = WS_CLIENT_NO_STEP;
    ws_client_status s = decode_req(obj, r, err);
    if (s != WS_CLIENT_OK) ws_client_step_req_free(r);
    return s;
}

/* ---- comparison ----------------------------------------------------------------------- */

static int fact_equal(const ws_client_fact *a, const ws_client_fact *b)
{
    if (a->n_symbols != b->n_symbols || a->n_vector != b->n_vector) return 0;
    for (int i = 0; i < a->n_symbols; i++)
        if (strcmp(a->symbols[i], b->symbols[i]) != 0) return 0;
    for (int i = 0; i < a->n_vector; i++) /* exact: printed and parsed doubles round-trip */
        if (a->vector[i] != b->vector[i]) return 0;
    return 1;
}

/* The next instruction at or after *i that the client sent (not inferred);
 * NULL past the end. */
static const ws_client_instruction *sent_next(const ws_client_step_req *r, int *i)
{
    while (*i < r->n_instructions && r->instructions[*i].inferred) (*i)++;
    return *i < r->n_instructions ? &r->instructions[(*i)++] : NULL;
}

/* Instructions a rule inferred are the server's, not the request's: they are
 * left out of the comparison. */
int ws_client_step_req_equal(const ws_client_step_req *a, const ws_client_step_req *b)
{
    if (a->n_queries != b->n_queries || !a->has_labels != !b->has_labels) return 0;
    int ia = 0, ib = 0;
    for (;;) {
        const ws_client_instruction *x = sent_next(a, &ia), *y = sent_next(b, &ib);
        if (!x || !y) {
            if (x || y) return 0;
            break;
        }
        if (!x->value != !y->value || !fact_equal(&x->fact, &y->fact)) return 0;
    }
    for (int i = 0; i < a->n_queries; i++)
        if (!fact_equal(&a->queries[i], &b->queries[i]) ||
            (a->has_labels && !a->labels[i] != !b->labels[i]))
            return 0;
    return 1;
}
