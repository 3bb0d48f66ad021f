/* internal.h — what the ws_client sources share: the handle, the HTTP
 * transport (http.c), error helpers and the JSON codecs (json_*.c). */
#ifndef WS_CLIENT_INTERNAL_H
#define WS_CLIENT_INTERNAL_H

#include <cjson/cJSON.h>
#include <stdio.h>

#include "clients/ws_client.h"

struct ws_client {
    char *url;  /* base URL without a trailing '/' */
    char *auth; /* "Authorization: Bearer …", or NULL */
    long timeout_ms, connect_timeout_ms, backoff_ms;
    int retries;
};

/* ---- transport (http.c) -------------------------------------------------------- */

typedef struct {
    const char *method;
    const char *path; /* appended to the base URL; built from validated parts */
    const char *body; /* JSON text, or NULL for no body */
    int repeatable;   /* sending it twice is harmless: retry transport errors */
    int answer_503;   /* a 503 is this route's answer (readyz): never retried */
    FILE *sink;       /* a 2xx body goes here (truncated before each attempt), not to memory */
    FILE *source;     /* a binary body read from here (rewound before each attempt), or NULL */
    int64_t source_len;
} wsc_request;

typedef struct {
    long status;
    char *body; /* NUL-terminated; error bodies always land here */
    size_t len;
    cJSON *json; /* body parsed when it is JSON, else NULL */
    char x_state_shape[32], x_step[32], x_model_version[32];
    int lost; /* an earlier attempt may have reached the server, its reply did not come back */
} wsc_response;

/* Runs the request with the handle's retry policy. WS_CLIENT_OK for a 2xx (and
 * for a 503 when answer_503); an error status gives WS_CLIENT_ERR_HTTP with err
 * filled from the API's error body — rs keeps the last answer in both cases. */
ws_client_status wsc_call(const ws_client *c, const wsc_request *rq, wsc_response *rs,
                          ws_client_error *err);
void wsc_response_free(wsc_response *rs);

/* ---- errors and arguments (client.c) -------------------------------------------- */

/* Fills err (may be NULL) with kind and a client-side message; returns kind. */
ws_client_status wsc_fail(ws_client_error *err, ws_client_status kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A session id (32 lowercase hex) / model name ([A-Za-z0-9._-]{1,64}); else
 * WS_CLIENT_ERR_INVALID. */
ws_client_status wsc_check_id(const char *id, ws_client_error *err);
ws_client_status wsc_check_name(const char *name, ws_client_error *err);
/* snprintf into buf; WS_CLIENT_ERR_INVALID when it does not fit. */
ws_client_status wsc_path(char *buf, size_t cap, ws_client_error *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* "/v1/sessions/<id><suffix>" / "/v1/models/<name><suffix>", the id or name checked first. */
ws_client_status wsc_session_path(char *buf, size_t cap, const char *id, const char *suffix,
                                  ws_client_error *err);
ws_client_status wsc_model_path(char *buf, size_t cap, const char *name, const char *suffix,
                                ws_client_error *err);
/* The object body of a 2xx answer, or WS_CLIENT_ERR_PROTOCOL. */
ws_client_status wsc_json_body(const wsc_response *rs, const cJSON **out, ws_client_error *err);

/* Decodes an answer's JSON object into a typed result. */
typedef ws_client_status (*wsc_decoder)(const cJSON *body, void *out, ws_client_error *err);
/* Runs rq and decodes its JSON object answer into out. */
ws_client_status wsc_fetch(const ws_client *c, const wsc_request *rq, wsc_decoder decode, void *out,
                           ws_client_error *err);
/* wsc_fetch of a GET (repeatable); path may be NULL after a failed path helper,
 * whose status is then passed on. */
ws_client_status wsc_get(const ws_client *c, ws_client_status path_status, const char *path,
                         wsc_decoder decode, void *out, ws_client_error *err);
/* wsc_fetch of a request with a JSON body, which it frees; a failed
 * preparation (prior != WS_CLIENT_OK) is passed on without a request. */
ws_client_status wsc_send(const ws_client *c, ws_client_status prior, const char *method,
                          const char *path, char *body, int repeatable, wsc_decoder decode,
                          void *out, ws_client_error *err);
/* A DELETE of path (repeatable); a 404 on a retry after a lost reply means
 * the first attempt deleted it: WS_CLIENT_OK. A failed path helper's status
 * (path_status) is passed on. */
ws_client_status wsc_delete(const ws_client *c, ws_client_status path_status, const char *path,
                            ws_client_error *err);
/* cJSON_PrintUnformatted of obj (which is deleted), or WS_CLIENT_ERR_NOMEM. */
ws_client_status wsc_print(cJSON *obj, char **out, ws_client_error *err);

/* ---- JSON field access (json_fields.c) -------------------------------------------- */

typedef enum { WSC_I64, WSC_INT, WSC_DBL, WSC_BOOL, WSC_STR } wsc_kind;

/* One member of a JSON object decoded into a struct at offset `off`
 * (WSC_STR: a char array of `cap` bytes). Absent optional members keep the
 * struct's value. */
typedef struct {
    const char *key;
    wsc_kind kind;
    size_t off;
    size_t cap;
    int required;
} wsc_field;

ws_client_status wsc_decode_fields(const cJSON *obj, const wsc_field *fields, int n, void *base,
                                   ws_client_error *err);
/* An integer-valued number in [lo, hi]. */
ws_client_status wsc_json_i64(const cJSON *v, int64_t lo, int64_t hi, int64_t *out,
                              const char *what, ws_client_error *err);

/* ---- step codecs (json_steps.c) ---------------------------------------------------- */

/* The request body of a step: {"expect_step"?, "instructions", "queries", "labels"?}. */
ws_client_status wsc_step_req_to_json(const ws_client_step_req *r, int with_expect, cJSON **out,
                                      ws_client_error *err);
ws_client_status wsc_step_req_from_json(const cJSON *obj, ws_client_step_req *r,
                                        ws_client_error *err);
/* Adds item to obj under key, deleting it when that fails (or item is NULL). */
ws_client_status wsc_add_member(cJSON *obj, const char *key, cJSON *item, ws_client_error *err);
/* Facts as a JSON array of {"fact"} / {"vector"} objects. */
ws_client_status wsc_facts_to_json(const ws_client_fact *f, int n, cJSON **out,
                                   ws_client_error *err);
/* {"step","answers":[{"p","holds"}…],"model_version"}. */
ws_client_status wsc_answers_from_json(const cJSON *obj, ws_client_answers *out,
                                       ws_client_error *err);
/* One log object; reject_unknown: members other than the record's are an error. */
ws_client_status wsc_log_entry_from_json(const cJSON *obj, int reject_unknown,
                                         ws_client_log_entry *out, ws_client_error *err);

/* ---- resource codecs (json_resources.c) ---------------------------------------------- */

ws_client_status wsc_session_from_json(const cJSON *obj, int listing, ws_client_session *out,
                                       ws_client_error *err);
ws_client_status wsc_model_from_json(const cJSON *obj, ws_client_model *out, ws_client_error *err);
ws_client_status wsc_training_from_json(const cJSON *obj, ws_client_training *out,
                                        ws_client_error *err);
/* The members of a training patch that change something (into obj). */
ws_client_status wsc_training_patch_to_json(const ws_client_training_patch *p, cJSON **out,
                                            ws_client_error *err);

#endif
