/* openapi_check.c — see openapi_check.h. The rules are those of the OpenAPI
 * Specification 3.0.3 (the Schema Object is its JSON Schema subset: `type` one
 * string, `nullable`, boolean `exclusiveMinimum`/`exclusiveMaximum`, a `$ref`
 * with no sibling keywords), plus this project's strictness for what the
 * daemon answers: an object schema of a response lists its `required` fields
 * and has `additionalProperties: false`. */
#include "openapi_check.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64 /* $ref chains and nesting: the document has no cycles */

void ws_oa_problem(ws_oa_report *rep, const char *fmt, ...)
{
    rep->n++;
    size_t used = strlen(rep->msg);
    if (used + 2 >= sizeof rep->msg) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rep->msg + used, sizeof rep->msg - used - 1, fmt, ap);
    va_end(ap);
    used = strlen(rep->msg);
    rep->msg[used] = '\n';
    rep->msg[used + 1] = '\0';
}

static int one_of(const char *s, const char *const *set)
{
    for (int i = 0; set[i]; i++)
        if (!strcmp(s, set[i])) return 1;
    return 0;
}

/* Every key of o is in allowed or is an extension (x-…). */
static void keys_in(const cJSON *o, const char *const *allowed, const char *where,
                    ws_oa_report *rep)
{
    for (const cJSON *k = o->child; k; k = k->next)
        if (strncmp(k->string, "x-", 2) != 0 && !one_of(k->string, allowed))
            ws_oa_problem(rep, "%s: \"%s\" is not an OpenAPI 3.0 keyword here", where, k->string);
}

static const cJSON *pointer(const cJSON *doc, const char *ref)
{
    if (strncmp(ref, "#/", 2) != 0) return NULL;
    const cJSON *at = doc;
    char tok[256];
    for (const char *p = ref + 2; at && *p;) {
        size_t n = strcspn(p, "/"), o = 0;
        if (n >= sizeof tok) return NULL;
        for (size_t i = 0; i < n; i++) { /* ~1 is '/', ~0 is '~' */
            if (p[i] == '~' && i + 1 < n && (p[i + 1] == '0' || p[i + 1] == '1'))
                tok[o++] = p[++i] == '1' ? '/' : '~';
            else
                tok[o++] = p[i];
        }
        tok[o] = '\0';
        at = cJSON_GetObjectItemCaseSensitive(at, tok);
        p += n + (p[n] == '/');
    }
    return at;
}

const cJSON *ws_oa_resolve(const cJSON *doc, const cJSON *node)
{
    for (int i = 0; node && i < MAX_DEPTH; i++) {
        const cJSON *ref = cJSON_GetObjectItemCaseSensitive(node, "$ref");
        if (!cJSON_IsString(ref)) return node;
        node = pointer(doc, ref->valuestring);
    }
    return NULL;
}

/* ---- the document's shape ------------------------------------------------ */

static const char *const schema_keys[] = {
    "title",     "multipleOf", "maximum",  "exclusiveMaximum", "minimum",
    "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems",
    "minItems",  "uniqueItems", "maxProperties", "minProperties", "required",
    "enum",      "type",       "allOf",    "oneOf",            "anyOf",
    "not",       "items",      "properties", "additionalProperties", "description",
    "format",    "default",    "nullable", "discriminator",    "readOnly",
    "writeOnly", "xml",        "externalDocs", "example",      "deprecated",
    "$ref",      NULL};
static const char *const types[] = {"object", "array",  "string", "number",
                                    "integer", "boolean", NULL};

static void check_schema(const cJSON *doc, const cJSON *s, const char *where, int strict,
                         int depth, ws_oa_report *rep);

static void check_ref(const cJSON *doc, const cJSON *s, const char *where, int strict, int depth,
                      ws_oa_report *rep)
{
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    if (!cJSON_IsString(ref)) return ws_oa_problem(rep, "%s: $ref is not a string", where);
    if (cJSON_GetArraySize(s) != 1)
        ws_oa_problem(rep, "%s: keywords beside $ref are ignored in OpenAPI 3.0", where);
    const cJSON *to = pointer(doc, ref->valuestring);
    if (!to) return ws_oa_problem(rep, "%s: $ref %s does not resolve", where, ref->valuestring);
    if (strict) check_schema(doc, to, ref->valuestring, strict, depth + 1, rep);
}

static void check_sub(const cJSON *doc, const cJSON *s, const char *key, const char *where,
                      int strict, int depth, ws_oa_report *rep)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, key);
    if (!v) return;
    char at[512];
    snprintf(at, sizeof at, "%s.%s", where, key);
    if (!strcmp(key, "properties")) {
        if (!cJSON_IsObject(v)) return ws_oa_problem(rep, "%s: not an object", at);
        for (const cJSON *p = v->child; p; p = p->next) {
            char pat[640];
            snprintf(pat, sizeof pat, "%s.%s", at, p->string);
            check_schema(doc, p, pat, strict, depth + 1, rep);
        }
    } else if (cJSON_IsArray(v)) { /* allOf, oneOf, anyOf */
        if (!cJSON_GetArraySize(v)) ws_oa_problem(rep, "%s: empty", at);
        int i = 0;
        for (const cJSON *e = v->child; e; e = e->next, i++) {
            char eat[640];
            snprintf(eat, sizeof eat, "%s[%d]", at, i);
            check_schema(doc, e, eat, 0, depth + 1, rep); /* branches constrain, not describe */
        }
    } else if (!cJSON_IsBool(v)) {
        check_schema(doc, v, at, strict, depth + 1, rep);
    }
}

static void check_schema(const cJSON *doc, const cJSON *s, const char *where, int strict,
                         int depth, ws_oa_report *rep)
{
    if (depth > MAX_DEPTH) return ws_oa_problem(rep, "%s: nested too deep (a cycle?)", where);
    if (!cJSON_IsObject(s)) return ws_oa_problem(rep, "%s: a schema must be an object", where);
    if (cJSON_GetObjectItemCaseSensitive(s, "$ref")) return check_ref(doc, s, where, strict, depth, rep);
    keys_in(s, schema_keys, where, rep);
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (type && (!cJSON_IsString(type) || !one_of(type->valuestring, types)))
        ws_oa_problem(rep, "%s: type must be one of object, array, string, number, integer, "
                           "boolean (a list of types, or \"null\", is OpenAPI 3.1)", where);
    static const char *const bools[] = {"exclusiveMinimum", "exclusiveMaximum", "nullable",
                                        "readOnly", "writeOnly", "uniqueItems", "deprecated",
                                        NULL};
    for (int i = 0; bools[i]; i++) {
        const cJSON *b = cJSON_GetObjectItemCaseSensitive(s, bools[i]);
        if (b && !cJSON_IsBool(b))
            ws_oa_problem(rep, "%s: %s must be true or false in OpenAPI 3.0", where, bools[i]);
    }
    static const char *const nums[] = {"minimum", "maximum", "multipleOf", NULL};
    for (int i = 0; nums[i]; i++) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(s, nums[i]);
        if (n && !cJSON_IsNumber(n)) ws_oa_problem(rep, "%s: %s must be a number", where, nums[i]);
    }
    static const char *const counts[] = {"minItems",  "maxItems",      "minLength",
                                         "maxLength", "minProperties", "maxProperties", NULL};
    for (int i = 0; counts[i]; i++) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(s, counts[i]);
        if (n && (!cJSON_IsNumber(n) || n->valuedouble < 0 || n->valuedouble != floor(n->valuedouble)))
            ws_oa_problem(rep, "%s: %s must be an integer >= 0", where, counts[i]);
    }
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
    if (en && (!cJSON_IsArray(en) || !cJSON_GetArraySize(en)))
        ws_oa_problem(rep, "%s: enum must be a non-empty array", where);
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    if (req) {
        if (!cJSON_IsArray(req) || !cJSON_GetArraySize(req))
            ws_oa_problem(rep, "%s: required must be a non-empty array of names", where);
        for (const cJSON *r = req ? req->child : NULL; r; r = r->next)
            if (!cJSON_IsString(r))
                ws_oa_problem(rep, "%s: required holds a non-string", where);
            else if (props && !cJSON_GetObjectItemCaseSensitive(props, r->valuestring))
                ws_oa_problem(rep, "%s: required names \"%s\", which is not a property", where,
                              r->valuestring);
    }
    if (type && cJSON_IsString(type) && !strcmp(type->valuestring, "array") &&
        !cJSON_GetObjectItemCaseSensitive(s, "items"))
        ws_oa_problem(rep, "%s: an array schema must have items", where);
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
    if (items && !cJSON_IsObject(items))
        ws_oa_problem(rep, "%s: items must be one schema (a list is not OpenAPI 3.0)", where);
    const cJSON *ap = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    if (strict && props) {
        int has_req = req || cJSON_GetObjectItemCaseSensitive(s, "oneOf") ||
                      cJSON_GetObjectItemCaseSensitive(s, "anyOf");
        if (!has_req) ws_oa_problem(rep, "%s: a response object must list its required fields", where);
        if (!cJSON_IsFalse(ap))
            ws_oa_problem(rep, "%s: a response object must have additionalProperties: false", where);
    }
    static const char *const subs[] = {"properties", "items", "additionalProperties", "allOf",
                                       "oneOf",      "anyOf", "not",                  NULL};
    for (int i = 0; subs[i]; i++) check_sub(doc, s, subs[i], where, strict, depth, rep);
}

/* Content: media types with a schema each. */
static void check_content(const cJSON *doc, const cJSON *content, const char *where, int strict,
                          ws_oa_report *rep)
{
    if (!cJSON_IsObject(content) || !content->child)
        return ws_oa_problem(rep, "%s: content must name at least one media type", where);
    for (const cJSON *mt = content->child; mt; mt = mt->next) {
        char at[512];
        snprintf(at, sizeof at, "%s.content[%s]", where, mt->string);
        static const char *const keys[] = {"schema", "example", "examples", "encoding", NULL};
        if (!cJSON_IsObject(mt)) {
            ws_oa_problem(rep, "%s: not an object", at);
            continue;
        }
        keys_in(mt, keys, at, rep);
        const cJSON *schema = cJSON_GetObjectItemCaseSensitive(mt, "schema");
        if (!schema) {
            ws_oa_problem(rep, "%s: no schema", at);
            continue;
        }
        char sat[560];
        snprintf(sat, sizeof sat, "%s.schema", at);
        check_schema(doc, schema, sat, strict && strstr(mt->string, "json") != NULL, 0, rep);
    }
}

static void check_response(const cJSON *doc, const cJSON *r, const char *where, ws_oa_report *rep)
{
    if (cJSON_GetObjectItemCaseSensitive(r, "$ref")) {
        const cJSON *to = ws_oa_resolve(doc, r);
        if (!to) return ws_oa_problem(rep, "%s: $ref does not resolve", where);
        return; /* components/responses are checked on their own */
    }
    static const char *const keys[] = {"description", "headers", "content", "links", NULL};
    if (!cJSON_IsObject(r)) return ws_oa_problem(rep, "%s: not an object", where);
    keys_in(r, keys, where, rep);
    if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(r, "description")))
        ws_oa_problem(rep, "%s: a response needs a description", where);
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(r, "content");
    if (content) check_content(doc, content, where, 1, rep);
    const cJSON *headers = cJSON_GetObjectItemCaseSensitive(r, "headers");
    for (const cJSON *h = headers ? headers->child : NULL; h; h = h->next) {
        char at[512];
        snprintf(at, sizeof at, "%s.headers.%s", where, h->string);
        const cJSON *hs = cJSON_GetObjectItemCaseSensitive(h, "schema");
        if (!hs)
            ws_oa_problem(rep, "%s: a header needs a schema", at);
        else
            check_schema(doc, hs, at, 0, 0, rep);
    }
}

static int status_key_ok(const char *k)
{
    if (!strcmp(k, "default")) return 1;
    if (strlen(k) != 3 || k[0] < '1' || k[0] > '5') return 0;
    if (!strcmp(k + 1, "XX")) return 1;
    return k[1] >= '0' && k[1] <= '9' && k[2] >= '0' && k[2] <= '9';
}

/* A parameter: name, in, a schema; a path parameter is required. Its name
 * into *path_name when it is in the path. */
static void check_parameter(const cJSON *doc, const cJSON *p, const char *where,
                            const char **path_name, ws_oa_report *rep)
{
    *path_name = NULL;
    p = ws_oa_resolve(doc, p);
    if (!cJSON_IsObject(p)) return ws_oa_problem(rep, "%s: not a parameter", where);
    static const char *const keys[] = {"name",    "in",      "description", "required",
                                       "deprecated", "allowEmptyValue", "style", "explode",
                                       "allowReserved", "schema", "example", "examples",
                                       "content", NULL};
    static const char *const ins[] = {"query", "header", "path", "cookie", NULL};
    keys_in(p, keys, where, rep);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(p, "name");
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(p, "in");
    if (!cJSON_IsString(name) || !cJSON_IsString(in) || !one_of(in->valuestring, ins))
        return ws_oa_problem(rep, "%s: a parameter needs a name and an in", where);
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(p, "schema");
    if (!schema && !cJSON_GetObjectItemCaseSensitive(p, "content"))
        ws_oa_problem(rep, "%s: parameter %s has no schema", where, name->valuestring);
    if (schema) check_schema(doc, schema, where, 0, 0, rep);
    if (!strcmp(in->valuestring, "path")) {
        if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "required")))
            ws_oa_problem(rep, "%s: path parameter %s must be required", where, name->valuestring);
        *path_name = name->valuestring;
    }
}

/* The path parameters declared (path item's and operation's) against the
 * template's {…} segments: each named once, both ways. */
static void check_path_params(const cJSON *doc, const char *path, const cJSON *item_params,
                              const cJSON *op_params, const char *where, ws_oa_report *rep)
{
    const char *declared[16];
    int n = 0;
    const cJSON *lists[2] = {item_params, op_params};
    for (int l = 0; l < 2; l++)
        for (const cJSON *p = lists[l] ? lists[l]->child : NULL; p; p = p->next) {
            const char *name;
            check_parameter(doc, p, where, &name, rep);
            if (name && n < 16) declared[n++] = name;
        }
    int in_path = 0;
    for (const char *s = strchr(path, '{'); s; s = strchr(s + 1, '{')) {
        size_t len = strcspn(s + 1, "}");
        in_path++;
        int found = 0;
        for (int i = 0; i < n; i++) found |= strlen(declared[i]) == len && !strncmp(declared[i], s + 1, len);
        if (!found) ws_oa_problem(rep, "%s: {%.*s} has no path parameter", where, (int)len, s + 1);
    }
    if (n != in_path)
        ws_oa_problem(rep, "%s: %d path parameters for %d {…} segments", where, n, in_path);
}

static void check_operation(const cJSON *doc, const char *path, const char *method,
                            const cJSON *op, const cJSON *item_params, const cJSON *schemes,
                            cJSON *ids, ws_oa_report *rep)
{
    char where[512];
    snprintf(where, sizeof where, "%s %s", method, path);
    static const char *const keys[] = {"tags",        "summary",     "description", "externalDocs",
                                       "operationId", "parameters",  "requestBody", "responses",
                                       "callbacks",   "deprecated",  "security",    "servers",
                                       NULL};
    if (!cJSON_IsObject(op)) return ws_oa_problem(rep, "%s: not an operation", where);
    keys_in(op, keys, where, rep);
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(op, "operationId");
    if (!cJSON_IsString(id) || !*id->valuestring) {
        ws_oa_problem(rep, "%s: no operationId", where);
    } else if (cJSON_GetObjectItemCaseSensitive(ids, id->valuestring)) {
        ws_oa_problem(rep, "%s: operationId %s is not unique", where, id->valuestring);
    } else {
        cJSON_AddTrueToObject(ids, id->valuestring);
    }
    check_path_params(doc, path, item_params, cJSON_GetObjectItemCaseSensitive(op, "parameters"),
                      where, rep);
    const cJSON *body = ws_oa_resolve(doc, cJSON_GetObjectItemCaseSensitive(op, "requestBody"));
    if (body) {
        static const char *const bkeys[] = {"description", "content", "required", NULL};
        keys_in(body, bkeys, where, rep);
        check_content(doc, cJSON_GetObjectItemCaseSensitive(body, "content"), where, 0, rep);
    }
    const cJSON *sec = cJSON_GetObjectItemCaseSensitive(op, "security");
    for (const cJSON *req = sec ? sec->child : NULL; req; req = req->next)
        for (const cJSON *s = req->child; s; s = s->next)
            if (!cJSON_GetObjectItemCaseSensitive(schemes, s->string))
                ws_oa_problem(rep, "%s: security names %s, not a securityScheme", where, s->string);
    const cJSON *responses = cJSON_GetObjectItemCaseSensitive(op, "responses");
    if (!cJSON_IsObject(responses) || !responses->child)
        return ws_oa_problem(rep, "%s: no responses", where);
    for (const cJSON *r = responses->child; r; r = r->next) {
        char at[600];
        snprintf(at, sizeof at, "%s %s", where, r->string);
        if (!status_key_ok(r->string)) ws_oa_problem(rep, "%s: not a status code", at);
        check_response(doc, r, at, rep);
    }
}

static void check_paths(const cJSON *doc, const cJSON *paths, const cJSON *schemes,
                        ws_oa_report *rep)
{
    static const char *const methods[] = {"get",     "put",  "post",  "delete", "options",
                                          "head",    "patch", "trace", NULL};
    static const char *const item_keys[] = {"summary", "description", "parameters", "servers",
                                            "$ref",    "get",         "put",        "post",
                                            "delete",  "options",     "head",       "patch",
                                            "trace",   NULL};
    cJSON *ids = cJSON_CreateObject();
    for (const cJSON *item = paths->child; item; item = item->next) {
        if (item->string[0] != '/') ws_oa_problem(rep, "path %s: must begin with /", item->string);
        keys_in(item, item_keys, item->string, rep);
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(item, "parameters");
        int n_ops = 0;
        for (int m = 0; methods[m]; m++) {
            const cJSON *op = cJSON_GetObjectItemCaseSensitive(item, methods[m]);
            if (!op) continue;
            n_ops++;
            check_operation(doc, item->string, methods[m], op, params, schemes, ids, rep);
        }
        if (!n_ops) ws_oa_problem(rep, "path %s: no operation", item->string);
    }
    cJSON_Delete(ids);
}

int ws_oa_check_document(const cJSON *doc, ws_oa_report *rep)
{
    int before = rep->n;
    if (!cJSON_IsObject(doc)) {
        ws_oa_problem(rep, "the document is not a JSON object");
        return rep->n - before;
    }
    static const char *const keys[] = {"openapi",  "info", "servers",      "paths",
                                       "components", "security", "tags", "externalDocs", NULL};
    keys_in(doc, keys, "document", rep);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(doc, "openapi");
    if (!cJSON_IsString(v) || strncmp(v->valuestring, "3.0.", 4) != 0)
        ws_oa_problem(rep, "openapi must be \"3.0.x\"");
    const cJSON *info = cJSON_GetObjectItemCaseSensitive(doc, "info");
    if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(info, "title")) ||
        !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(info, "version")))
        ws_oa_problem(rep, "info needs a title and a version");
    const cJSON *comp = cJSON_GetObjectItemCaseSensitive(doc, "components");
    static const char *const ckeys[] = {"schemas",  "responses",     "parameters",
                                        "examples", "requestBodies", "headers",
                                        "securitySchemes", "links", "callbacks", NULL};
    if (comp) keys_in(comp, ckeys, "components", rep);
    const cJSON *schemas = cJSON_GetObjectItemCaseSensitive(comp, "schemas");
    for (const cJSON *s = schemas ? schemas->child : NULL; s; s = s->next) {
        char at[300];
        snprintf(at, sizeof at, "#/components/schemas/%s", s->string);
        check_schema(doc, s, at, 0, 0, rep);
    }
    const cJSON *responses = cJSON_GetObjectItemCaseSensitive(comp, "responses");
    for (const cJSON *r = responses ? responses->child : NULL; r; r = r->next) {
        char at[300];
        snprintf(at, sizeof at, "#/components/responses/%s", r->string);
        check_response(doc, r, at, rep);
    }
    const cJSON *schemes = cJSON_GetObjectItemCaseSensitive(comp, "securitySchemes");
    static const char *const stypes[] = {"apiKey", "http", "oauth2", "openIdConnect", NULL};
    for (const cJSON *s = schemes ? schemes->child : NULL; s; s = s->next) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(s, "type");
        if (!cJSON_IsString(t) || !one_of(t->valuestring, stypes))
            ws_oa_problem(rep, "securityScheme %s: bad type", s->string);
        else if (!strcmp(t->valuestring, "http") &&
                 !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(s, "scheme")))
            ws_oa_problem(rep, "securityScheme %s: http needs a scheme", s->string);
    }
    const cJSON *sec = cJSON_GetObjectItemCaseSensitive(doc, "security");
    for (const cJSON *req = sec ? sec->child : NULL; req; req = req->next)
        for (const cJSON *s = req->child; s; s = s->next)
            if (!cJSON_GetObjectItemCaseSensitive(schemes, s->string))
                ws_oa_problem(rep, "security names %s, not a securityScheme", s->string);
    const cJSON *paths = cJSON_GetObjectItemCaseSensitive(doc, "paths");
    if (!cJSON_IsObject(paths))
        ws_oa_problem(rep, "paths must be an object");
    else
        check_paths(doc, paths, schemes, rep);
    return rep->n - before;
}

/* ---- values against schemas ---------------------------------------------- */

static int type_ok(const char *type, const cJSON *v)
{
    if (!strcmp(type, "object")) return cJSON_IsObject(v);
    if (!strcmp(type, "array")) return cJSON_IsArray(v);
    if (!strcmp(type, "string")) return cJSON_IsString(v);
    if (!strcmp(type, "boolean")) return cJSON_IsBool(v);
    if (!strcmp(type, "number")) return cJSON_IsNumber(v);
    if (!strcmp(type, "integer"))
        return cJSON_IsNumber(v) && isfinite(v->valuedouble) &&
               v->valuedouble == floor(v->valuedouble);
    return 0;
}

static size_t utf8_chars(const char *s)
{
    size_t n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static int value_at(const cJSON *doc, const cJSON *s, const cJSON *v, const char *where,
                    int depth, ws_oa_report *rep);

/* How many of a oneOf/anyOf's branches v fits (their problems not reported). */
static int branches_fit(const cJSON *doc, const cJSON *list, const cJSON *v, const char *where,
                        int depth)
{
    int fit = 0;
    for (const cJSON *b = list->child; b; b = b->next) {
        ws_oa_report scratch = {0};
        fit += value_at(doc, b, v, where, depth + 1, &scratch) == 0;
    }
    return fit;
}

static void bounds(const cJSON *s, const cJSON *v, const char *where, ws_oa_report *rep)
{
    double x = v->valuedouble;
    const cJSON *min = cJSON_GetObjectItemCaseSensitive(s, "minimum");
    const cJSON *max = cJSON_GetObjectItemCaseSensitive(s, "maximum");
    int xmin = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "exclusiveMinimum"));
    int xmax = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "exclusiveMaximum"));
    if (cJSON_IsNumber(min) && (xmin ? x <= min->valuedouble : x < min->valuedouble))
        ws_oa_problem(rep, "%s: %.17g is below the minimum %.17g%s", where, x, min->valuedouble,
                      xmin ? " (exclusive)" : "");
    if (cJSON_IsNumber(max) && (xmax ? x >= max->valuedouble : x > max->valuedouble))
        ws_oa_problem(rep, "%s: %.17g is above the maximum %.17g%s", where, x, max->valuedouble,
                      xmax ? " (exclusive)" : "");
}

static void counted(const cJSON *s, const char *lo, const char *hi, size_t n, const char *what,
                    const char *where, ws_oa_report *rep)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(s, lo);
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(s, hi);
    if (cJSON_IsNumber(a) && (double)n < a->valuedouble)
        ws_oa_problem(rep, "%s: %zu %s, fewer than %s %g", where, n, what, lo, a->valuedouble);
    if (cJSON_IsNumber(b) && (double)n > b->valuedouble)
        ws_oa_problem(rep, "%s: %zu %s, more than %s %g", where, n, what, hi, b->valuedouble);
}

static void object_at(const cJSON *doc, const cJSON *s, const cJSON *v, const char *where,
                      int depth, ws_oa_report *rep)
{
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    for (const cJSON *r = req ? req->child : NULL; r; r = r->next)
        if (cJSON_IsString(r) && !cJSON_GetObjectItemCaseSensitive(v, r->valuestring))
            ws_oa_problem(rep, "%s: required field \"%s\" is missing", where, r->valuestring);
    const cJSON *ap = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    for (const cJSON *f = v->child; f; f = f->next) {
        char at[512];
        snprintf(at, sizeof at, "%s.%s", where, f->string);
        const cJSON *ps = props ? cJSON_GetObjectItemCaseSensitive(props, f->string) : NULL;
        if (ps)
            value_at(doc, ps, f, at, depth + 1, rep);
        else if (cJSON_IsFalse(ap))
            ws_oa_problem(rep, "%s: field not in the schema (additionalProperties: false)", at);
        else if (cJSON_IsObject(ap))
            value_at(doc, ap, f, at, depth + 1, rep);
    }
}

static int value_at(const cJSON *doc, const cJSON *s, const cJSON *v, const char *where,
                    int depth, ws_oa_report *rep)
{
    int before = rep->n;
    s = ws_oa_resolve(doc, s);
    if (!s || depth > MAX_DEPTH) {
        ws_oa_problem(rep, "%s: its schema does not resolve", where);
        return rep->n - before;
    }
    if (cJSON_IsNull(v)) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(s, "type");
        if (type && !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "nullable")))
            ws_oa_problem(rep, "%s: null, but the schema is not nullable", where);
        return rep->n - before;
    }
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (cJSON_IsString(type) && !type_ok(type->valuestring, v)) {
        ws_oa_problem(rep, "%s: not of type %s", where, type->valuestring);
        return rep->n - before;
    }
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
    if (cJSON_IsArray(en)) {
        int found = 0;
        for (const cJSON *e = en->child; e && !found; e = e->next) found = cJSON_Compare(e, v, 1);
        if (!found) ws_oa_problem(rep, "%s: not one of the enum's values", where);
    }
    if (cJSON_IsNumber(v)) bounds(s, v, where, rep);
    if (cJSON_IsString(v))
        counted(s, "minLength", "maxLength", utf8_chars(v->valuestring), "characters", where, rep);
    if (cJSON_IsArray(v)) {
        counted(s, "minItems", "maxItems", (size_t)cJSON_GetArraySize(v), "items", where, rep);
        const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
        int i = 0;
        for (const cJSON *e = v->child; items && e; e = e->next, i++) {
            char at[512];
            snprintf(at, sizeof at, "%s[%d]", where, i);
            value_at(doc, items, e, at, depth + 1, rep);
        }
    }
    if (cJSON_IsObject(v)) object_at(doc, s, v, where, depth, rep);
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(s, "allOf");
    for (const cJSON *b = all ? all->child : NULL; b; b = b->next)
        value_at(doc, b, v, where, depth + 1, rep);
    const cJSON *one = cJSON_GetObjectItemCaseSensitive(s, "oneOf");
    int fit;
    if (one && (fit = branches_fit(doc, one, v, where, depth)) != 1)
        ws_oa_problem(rep, "%s: fits %d of oneOf's branches, not exactly 1", where, fit);
    const cJSON *any = cJSON_GetObjectItemCaseSensitive(s, "anyOf");
    if (any && branches_fit(doc, any, v, where, depth) == 0)
        ws_oa_problem(rep, "%s: fits none of anyOf's branches", where);
    const cJSON *not = cJSON_GetObjectItemCaseSensitive(s, "not");
    ws_oa_report scratch = {0};
    if (not && value_at(doc, not, v, where, depth + 1, &scratch) == 0)
        ws_oa_problem(rep, "%s: fits the schema of not", where);
    return rep->n - before;
}

int ws_oa_check_value(const cJSON *doc, const cJSON *schema, const cJSON *value,
                      const char *where, ws_oa_report *rep)
{
    return value_at(doc, schema, value, where, 0, rep);
}

/* ---- routes ---------------------------------------------------------------- */

const char *ws_oa_path_of(const cJSON *doc, const char *path)
{
    const cJSON *paths = cJSON_GetObjectItemCaseSensitive(doc, "paths");
    size_t plen = strcspn(path, "?");
    for (const cJSON *item = paths ? paths->child : NULL; item; item = item->next) {
        const char *t = item->string, *p = path, *end = path + plen;
        while (*t == '/' && p < end && *p == '/') {
            t++, p++;
            size_t tl = strcspn(t, "/"), pl = strcspn(p, "/?");
            if (p + pl > end) pl = (size_t)(end - p);
            if (!pl || (*t != '{' && (tl != pl || strncmp(t, p, tl) != 0))) break;
            t += tl, p += pl;
        }
        if (!*t && p == end) return item->string;
    }
    return NULL;
}

const cJSON *ws_oa_response(const cJSON *doc, const cJSON *op, long status)
{
    const cJSON *responses = cJSON_GetObjectItemCaseSensitive(op, "responses");
    char key[32];
    snprintf(key, sizeof key, "%ld", status);
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(responses, key);
    if (!r) {
        snprintf(key, sizeof key, "%ldXX", status / 100);
        r = cJSON_GetObjectItemCaseSensitive(responses, key);
    }
    if (!r) r = cJSON_GetObjectItemCaseSensitive(responses, "default");
    return r ? ws_oa_resolve(doc, r) : NULL;
}
