/* openapi_check.h — a small OpenAPI 3.0 checker for the tests (cJSON only):
 * the document's shape (3.0 keywords and forms only, $refs that resolve,
 * operations, parameters, responses, strict response schemas) and JSON values
 * against its schemas (type, nullable, required, additionalProperties, enum,
 * minimum/maximum, lengths, items, oneOf/anyOf/allOf; patterns are not
 * checked). Problems are collected as lines of text, so that one run names
 * every one of them. */
#ifndef WS_TEST_OPENAPI_CHECK_H
#define WS_TEST_OPENAPI_CHECK_H

#include <cjson/cJSON.h>

typedef struct {
    int n;          /* problems found */
    char msg[8192]; /* the first ones, one a line */
} ws_oa_report;

/* Appends a problem to rep. */
void ws_oa_problem(ws_oa_report *rep, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Checks doc as an OpenAPI 3.0 document; the number of problems (also in rep). */
int ws_oa_check_document(const cJSON *doc, ws_oa_report *rep);

/* node, or what its "$ref" (a local "#/…" pointer, followed through chains)
 * names; NULL when a $ref does not resolve. */
const cJSON *ws_oa_resolve(const cJSON *doc, const cJSON *node);

/* Checks value against schema; where names the value in messages ("$"). The
 * number of problems added to rep. */
int ws_oa_check_value(const cJSON *doc, const cJSON *schema, const cJSON *value,
                      const char *where, ws_oa_report *rep);

/* The path template of doc that a concrete path (query string ignored)
 * matches, {…} segments matching any one segment; NULL when none does. */
const char *ws_oa_path_of(const cJSON *doc, const char *path);

/* The response object (resolved) of operation op for status, or its
 * "default"; NULL when neither is documented. */
const cJSON *ws_oa_response(const cJSON *doc, const cJSON *op, long status);

#endif
