/* json.c — strict request-body parsing: everything a client sends is checked
 * here (types, unknown fields, limits, finiteness, UTF-8) before any state is
 * touched, so bad input always ends as a 4xx with nothing changed. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "base/ws_utf8.h"

static int json_space(char c)
{
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

/* Index after the digits of s from k on (n bytes in all). */
static size_t digits_end(const char *s, size_t k, size_t n)
{
    while (k < n && s[k] >= '0' && s[k] <= '9') k++;
    return k;
}

/* Bytes of the RFC 8259 number at s (n bytes left); 0 when it is not one:
 * cJSON hands anything made of [0-9+-.eE] to strtod, so "01", "1." and "1.e5"
 * would pass. */
static size_t number_len(const char *s, size_t n)
{
    size_t k = s[0] == '-', d = k;
    k = k < n && s[k] == '0' ? k + 1 : digits_end(s, k, n);
    if (k == d) return 0;
    if (k < n && s[k] == '.') {
        d = k + 1;
        if ((k = digits_end(s, d, n)) == d) return 0;
    }
    if (k < n && (s[k] == 'e' || s[k] == 'E')) {
        d = k + 1 < n && (s[k + 1] == '+' || s[k + 1] == '-') ? k + 2 : k + 1;
        if ((k = digits_end(s, d, n)) == d) return 0;
    }
    /* "01" or "1.2.3": a number runs on where the grammar ended it */
    if (k < n && s[k] && strchr("0123456789.eE+-", s[k])) return 0;
    return k;
}

/* What RFC 8259 refuses and cJSON lets through, checked on the raw text: bytes
 * that are not strict UTF-8, control bytes (cJSON skips any byte <= 0x20 as
 * whitespace, and takes them raw inside strings), numbers outside the grammar,
 * and \u0000 in a string: cJSON stops the string there, so "a\u0000b" would be
 * "a" (a symbol silently truncated, a model name silently another). The rest
 * (structure, literals, escapes) cJSON checks. */
static ws_status strict_text(const char *b, size_t n, ws_error *err)
{
    if (!ws_utf8_valid((const unsigned char *)b, n))
        return ws_error_set(err, WS_ERR_FORMAT, "the body is not valid UTF-8");
    const char *key = "";
    int key_len = 0; /* the last member name: the field a string belongs to */
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)b[i];
        if (c == '"') {
            size_t start = ++i;
            int nul = 0;
            for (; i < n && b[i] != '"'; i++) {
                if ((unsigned char)b[i] < 0x20)
                    return ws_error_set(err, WS_ERR_FORMAT,
                                        "a control character in a string must be escaped");
                if (b[i] == '\\' && ++i + 4 < n && !memcmp(b + i, "u0000", 5)) nul = 1;
            }
            if (i >= n) break; /* unterminated: cJSON says so */
            size_t len = i++ - start, j = i;
            while (j < n && json_space(b[j])) j++;
            int is_key = j < n && b[j] == ':';
            if (nul && is_key)
                return ws_error_set(err, WS_ERR_INVALID, "a field name contains \\u0000 (NUL)");
            if (nul)
                return ws_error_set(err, WS_ERR_INVALID,
                                    "\"%.*s\": strings may not contain \\u0000 (NUL)", key_len,
                                    key);
            if (is_key) key = b + start, key_len = len > 64 ? 64 : (int)len;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            size_t k = number_len(b + i, n - i);
            if (!k)
                return ws_error_set(err, WS_ERR_FORMAT, "\"%.*s\": malformed number", key_len, key);
            i += k;
        } else if (c < 0x20 && !json_space((char)c)) {
            return ws_error_set(err, WS_ERR_FORMAT, "a control character outside a string");
        } else {
            i++;
        }
    }
    return WS_OK;
}

ws_status ws_json_parse_object(const char *body, size_t len, cJSON **out, ws_error *err)
{
    *out = NULL;
    if (len == 0) return ws_error_set(err, WS_ERR_FORMAT, "empty body: a JSON object is required");
    WS_TRY(strict_text(body, len, err));
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    if (!root) return ws_error_set(err, WS_ERR_FORMAT, "malformed JSON");
    /* Trailing bytes other than whitespace mean the client sent two documents or junk. */
    for (const char *p = end; p && p < body + len; p++) {
        if (!json_space(*p)) {
            cJSON_Delete(root);
            return ws_error_set(err, WS_ERR_FORMAT, "trailing data after the JSON document");
        }
    }
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return ws_error_set(err, WS_ERR_INVALID, "the body must be a JSON object");
    }
    *out = root;
    return WS_OK;
}

ws_status ws_srv_text_check(const char *s, size_t max, const char *field, ws_error *err)
{
    size_t len = strlen(s);
    if (len < 1 || len > max)
        return ws_error_set(err, WS_ERR_INVALID, "%s: 1..%zu bytes", field, max);
    if (!ws_utf8_valid((const unsigned char *)s, len))
        return ws_error_set(err, WS_ERR_INVALID, "%s is not valid UTF-8", field);
    if (ws_utf8_has_control((const unsigned char *)s, len))
        return ws_error_set(err, WS_ERR_INVALID,
                            "%s contains a control character (U+0000..U+001F, U+007F)", field);
    return WS_OK;
}

ws_status ws_json_only(const cJSON *obj, const char *const *names, ws_error *err)
{
    for (const cJSON *it = obj->child; it; it = it->next) {
        int ok = 0;
        for (const char *const *n = names; *n && !ok; n++)
            ok = it->string && !strcmp(it->string, *n);
        if (!ok)
            return ws_error_set(err, WS_ERR_INVALID, "unknown field \"%s\"",
                                it->string ? it->string : "");
        /* A duplicated key would make "which one wins" a parser accident. */
        for (const cJSON *o = it->next; o; o = o->next)
            if (o->string && !strcmp(o->string, it->string))
                return ws_error_set(err, WS_ERR_INVALID, "duplicate field \"%s\"", it->string);
    }
    return WS_OK;
}

ws_status ws_json_int(const cJSON *v, int64_t lo, int64_t hi, int64_t *out, const char *name,
                      ws_error *err)
{
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble != floor(v->valuedouble))
        return ws_error_set(err, WS_ERR_INVALID, "%s must be an integer", name);
    if (v->valuedouble < (double)lo || v->valuedouble > (double)hi)
        return ws_error_set(err, WS_ERR_INVALID, "%s must be in [%lld, %lld]", name, (long long)lo,
                            (long long)hi);
    *out = (int64_t)v->valuedouble;
    return WS_OK;
}

static ws_status parse_fact(const cJSON *o, int instruction, int idx, ws_srv_fact *f, ws_error *err)
{
    /* "inferred": a step log's mark of an instruction a learned rule added
     * (server/engine/rules.h); posted back (a replay), an instruction as any */
    static const char *const instr_fields[] = {"fact", "vector", "value", "inferred", NULL};
    static const char *const query_fields[] = {"fact", "vector", NULL};
    const char *what = instruction ? "instructions" : "queries";
    if (!cJSON_IsObject(o))
        return ws_error_set(err, WS_ERR_INVALID, "%s[%d] must be an object", what, idx);
    WS_TRY(ws_json_only(o, instruction ? instr_fields : query_fields, err));
    const cJSON *fact = cJSON_GetObjectItemCaseSensitive(o, "fact");
    const cJSON *vec = cJSON_GetObjectItemCaseSensitive(o, "vector");
    if (!!fact == !!vec)
        return ws_error_set(err, WS_ERR_INVALID,
                            "%s[%d] needs exactly one of \"fact\" or \"vector\"", what, idx);
    f->value = -1;
    if (instruction) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "value");
        if (!cJSON_IsBool(v))
            return ws_error_set(err, WS_ERR_INVALID, "instructions[%d].value must be true or false",
                                idx);
        f->value = cJSON_IsTrue(v) ? 1 : 0;
        const cJSON *inf = cJSON_GetObjectItemCaseSensitive(o, "inferred");
        if (inf && !cJSON_IsBool(inf))
            return ws_error_set(err, WS_ERR_INVALID, "instructions[%d].inferred must be a boolean",
                                idx);
    }
    if (fact) {
        if (!cJSON_IsArray(fact))
            return ws_error_set(err, WS_ERR_INVALID, "%s[%d].fact must be an array of strings",
                                what, idx);
        int n = cJSON_GetArraySize(fact);
        if (n < 1 || n > WS_MAX_FACT_LEN)
            return ws_error_set(err, WS_ERR_INVALID,
                                "%s[%d].fact must have 1..%d symbols (the model may allow fewer)",
                                what, idx, WS_MAX_FACT_LEN);
        int i = 0;
        for (const cJSON *s = fact->child; s; s = s->next, i++) {
            if (!cJSON_IsString(s))
                return ws_error_set(err, WS_ERR_INVALID, "%s[%d].fact[%d] must be a string", what,
                                    idx, i);
            /* The field's name is formatted only for the error: a step names up
             * to a few hundred symbols, and snprintf was the request parser's top cost. */
            if (ws_srv_text_check(s->valuestring, WS_SRV_SYMBOL_MAX, "symbol", err) != WS_OK) {
                char field[64];
                snprintf(field, sizeof field, "%s[%d].fact[%d]", what, idx, i);
                return ws_srv_text_check(s->valuestring, WS_SRV_SYMBOL_MAX, field, err);
            }
            f->sym[i] = s->valuestring;
            f->sym_len[i] = (int)strlen(s->valuestring);
        }
        f->n_sym = n;
        return WS_OK;
    }
    if (!cJSON_IsArray(vec))
        return ws_error_set(err, WS_ERR_INVALID, "%s[%d].vector must be an array of numbers", what,
                            idx);
    int n = cJSON_GetArraySize(vec);
    if (n < 1 || n > 65536)
        return ws_error_set(err, WS_ERR_INVALID, "%s[%d].vector must have 1..65536 numbers", what,
                            idx);
    f->vec = malloc(sizeof(float) * (size_t)n);
    if (!f->vec) return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    f->n_vec = n;
    int i = 0;
    for (const cJSON *x = vec->child; x; x = x->next, i++) {
        /* cJSON turns 1e999 into inf; and a double beyond FLT_MAX would become inf as a float. */
        if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble) || fabs(x->valuedouble) > FLT_MAX)
            return ws_error_set(err, WS_ERR_INVALID, "%s[%d].vector[%d] must be a finite number",
                                what, idx, i);
        f->vec[i] = (float)x->valuedouble;
    }
    return WS_OK;
}

ws_status ws_json_facts(const cJSON *arr, int instructions, ws_srv_fact **out, int *n,
                        ws_error *err)
{
    *out = NULL;
    *n = 0;
    const char *what = instructions ? "instructions" : "queries";
    if (!arr) return WS_OK;
    if (!cJSON_IsArray(arr)) return ws_error_set(err, WS_ERR_INVALID, "%s must be an array", what);
    int count = cJSON_GetArraySize(arr);
    if (count > WS_SRV_MAX_ITEMS)
        return ws_error_set(err, WS_ERR_INVALID, "at most %d %s per request", WS_SRV_MAX_ITEMS,
                            what);
    if (count == 0) return WS_OK;
    ws_srv_fact *f = calloc((size_t)count, sizeof *f);
    if (!f) return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    *out = f; /* the caller frees (vectors included) even on failure */
    *n = count;
    int i = 0;
    for (const cJSON *o = arr->child; o; o = o->next, i++)
        WS_TRY(parse_fact(o, instructions, i, &f[i], err));
    return WS_OK;
}

ws_status ws_json_labels(const cJSON *arr, ws_srv_fact *q, int n_query, ws_error *err)
{
    if (!cJSON_IsArray(arr))
        return ws_error_set(err, WS_ERR_INVALID, "labels must be an array of booleans");
    if (cJSON_GetArraySize(arr) != n_query)
        return ws_error_set(err, WS_ERR_INVALID, "labels must have one boolean per query (%d)",
                            n_query);
    int i = 0;
    for (const cJSON *l = arr->child; l; l = l->next, i++) {
        if (!cJSON_IsBool(l))
            return ws_error_set(err, WS_ERR_INVALID, "labels[%d] must be true or false", i);
        if (q) q[i].value = cJSON_IsTrue(l) ? 1 : 0;
    }
    return WS_OK;
}
