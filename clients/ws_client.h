/* ws_client.h — C client library for the worldstated REST API (api.md).
 *
 * One function per route; results are typed structs, errors are values.
 *
 * Threading. A ws_client handle holds only configuration that never changes
 * after ws_client_new, and every call makes, uses and frees its own libcurl easy
 * handle: one handle may be shared by any number of threads, calls may run
 * concurrently, and nothing is cached between calls. libcurl's global state is
 * set up once (ws_client_new does it under pthread_once).
 *
 * Errors. Every call returns a ws_client_status and, when err is not NULL,
 * fills it: WS_CLIENT_ERR_HTTP carries the HTTP status and the API's error code
 * and message ({"error":{"code","message"}}), plus current_step for a 409
 * step_conflict; WS_CLIENT_ERR_TRANSPORT means no HTTP answer came back
 * (connection refused, timeout, reset) and carries the CURLcode. Result structs
 * are filled only on WS_CLIENT_OK and then own their memory: free each with its
 * *_free (which also accepts a zeroed struct).
 *
 * Timeouts and retries. timeout_ms bounds each attempt (connect, send, wait,
 * receive); connect_timeout_ms the connect alone. A failed attempt is retried
 * (up to `retries` times, waiting backoff_ms, doubled for each further retry up
 * to 10 s) only when that cannot apply anything twice:
 *   - a connection that could not be made (nothing was sent): every route;
 *   - 503 overloaded / deadline_exceeded / shutting_down / storage_busy
 *     (api.md: "not applied"): every route;
 *   - any other transport error (timeout, reset, empty reply): requests whose
 *     repetition is harmless — GET, PUT labels, PATCH training, DELETE (a 404 on
 *     a retry after a lost reply counts as deleted), POST queries — and POST
 *     steps that carry expect_step.
 * Creating a session or a model without a reply is never repeated: a second
 * attempt could create a second session (or fail with conflict).
 *
 * Steps and expect_step (api.md retry rule). A step posted with expect_step = t
 * applies only while the session is at step t. When an attempt's reply was lost
 * and the retry answers 409 step_conflict with current_step = t+1, the first
 * attempt was applied: the client reads step t+1 back from the step log, checks
 * that its instructions, queries and labels are the ones sent, and returns that
 * step's answers with `recovered` set. If the logged step differs, someone else
 * moved the session and the 409 is returned as it came. A 409 without a lost
 * attempt is always returned to the caller (the step was not applied by this
 * call). */
#ifndef WS_CLIENT_H
#define WS_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#define WS_CLIENT_ID_LEN   32   /* session id: 32 lowercase hex digits */
#define WS_CLIENT_NAME_MAX 64   /* model names: [A-Za-z0-9._-]{1,64} */
#define WS_CLIENT_NO_STEP  (-1) /* expect_step absent; next_after of a last page */

typedef enum {
    WS_CLIENT_OK = 0,
    WS_CLIENT_ERR_TRANSPORT, /* no HTTP answer: err->curl_code says why */
    WS_CLIENT_ERR_HTTP,      /* the server answered an error: status, code, message */
    WS_CLIENT_ERR_PROTOCOL,  /* the answer is not what api.md describes */
    WS_CLIENT_ERR_INVALID,   /* bad arguments or input; nothing was sent */
    WS_CLIENT_ERR_NOMEM,
    WS_CLIENT_ERR_IO /* a local file (checkpoint download) */
} ws_client_status;

typedef struct {
    ws_client_status kind;
    long status;          /* HTTP status (WS_CLIENT_ERR_HTTP), else 0 */
    char code[48];        /* the API's error code, e.g. "step_conflict"; "" if none */
    char message[512];    /* the API's message, or the client's own */
    int64_t current_step; /* 409 step_conflict: the session's step; else -1 */
    int curl_code;        /* WS_CLIENT_ERR_TRANSPORT: the CURLcode of the last attempt */
    int attempts;         /* requests made (HTTP and transport errors) */
} ws_client_error;

/* "transport", "http", ... for messages. */
const char *ws_client_status_name(ws_client_status s);

/* ---- handle ----------------------------------------------------------------- */

typedef struct {
    const char *url;         /* base URL, e.g. "http://127.0.0.1:8080" */
    const char *api_key;     /* sent as "Authorization: Bearer <key>"; NULL or "": none */
    long timeout_ms;         /* per attempt, whole request; 0: no limit */
    long connect_timeout_ms; /* per attempt; 0: libcurl's default */
    int retries;             /* extra attempts after a retryable failure (0..100) */
    long backoff_ms;         /* wait before the first retry, doubled for each next */
} ws_client_config;

typedef struct ws_client ws_client;

/* url http://127.0.0.1:8080, no key, 30 s per attempt, 5 s connect, 3 retries, 100 ms. */
ws_client_config ws_client_config_default(void);
/* Copies cfg (strings included): cfg may be freed afterwards. */
ws_client_status ws_client_new(const ws_client_config *cfg, ws_client **out, ws_client_error *err);
void ws_client_free(ws_client *c);

/* ---- facts and steps ---------------------------------------------------------- */

/* A fact is symbols (n_symbols >= 1) or a raw vector (n_symbols == 0, n_vector >= 1). */
typedef struct {
    char **symbols;
    int n_symbols;
    double *vector;
    int n_vector;
} ws_client_fact;

typedef struct {
    ws_client_fact fact;
    int value;    /* 1: the fact now holds; 0: it no longer holds */
    int inferred; /* a step log's: added by a rule the model learned (api.md, Rules
                     learned from labels); posted back as it is, marked */
} ws_client_instruction;

typedef struct {
    int64_t expect_step; /* >= 0: apply only at this step; WS_CLIENT_NO_STEP: always */
    ws_client_instruction *instructions;
    int n_instructions;
    ws_client_fact *queries;
    int n_queries;
    int has_labels; /* labels sent (one per query); 0: the step is unlabelled */
    int *labels;    /* 0 / 1 */
} ws_client_step_req;

typedef struct {
    double p;  /* probability that the fact holds */
    int holds; /* p >= 0.5 */
} ws_client_answer;

/* The answer of a step or of queries. */
typedef struct {
    int64_t step; /* the session's step after the call */
    ws_client_answer *answers;
    int n_answers;
    int64_t model_version;
    int recovered; /* the reply was lost and the applied step was read back from the log */
} ws_client_answers;

/* One logged step; as a JSON Lines record (export/replay) it also names its session. */
typedef struct {
    char session[WS_CLIENT_ID_LEN + 1]; /* "" when unknown */
    int64_t step;                       /* WS_CLIENT_NO_STEP when unknown */
    ws_client_step_req req;             /* its instructions, queries, labels (expect_step unset) */
    ws_client_answer *answers;
    int n_answers;
    int64_t model_version; /* 0 when unknown */
    int64_t time_ms;       /* 0 when unknown */
} ws_client_log_entry;

typedef struct {
    ws_client_log_entry *steps;
    int n;
    int64_t next_after; /* pass as `after` for the next page; WS_CLIENT_NO_STEP: last page */
} ws_client_log_page;

/* Free the arrays and strings inside these, all malloc'd (as the decoders make
 * them; a step_req built by hand the same way may be freed here too). */
void ws_client_step_req_free(ws_client_step_req *r);
void ws_client_answers_free(ws_client_answers *a);
void ws_client_log_entry_free(ws_client_log_entry *e);
void ws_client_log_page_free(ws_client_log_page *p);
/* 1 when both carry the same instructions, queries and labels (expect_step aside;
 * instructions marked inferred left out: a server's rule added them). */
int ws_client_step_req_equal(const ws_client_step_req *a, const ws_client_step_req *b);

/* JSON Lines records for export and replay: one object per step, holding the
 * step object {"instructions","queries","labels"} and the metadata "session",
 * "step", "answers", "model_version", "time_ms" (and "model", which the offline
 * `worldstate-train export` adds; read and ignored). to_json writes one line without
 * a newline (*out freed with free()). from_json reads such a line: every field
 * is optional (a bare step object is a valid record), unknown fields and wrong
 * types are WS_CLIENT_ERR_INVALID with a message naming the field. */
ws_client_status ws_client_log_entry_to_json(const ws_client_log_entry *e, char **out,
                                             ws_client_error *err);
ws_client_status ws_client_log_entry_from_json(const char *text, size_t len,
                                               ws_client_log_entry *out, ws_client_error *err);

/* ---- probes ------------------------------------------------------------------- */

typedef struct {
    int ready;           /* 200 ready; 0 for 503 not_ready */
    char durability[16]; /* "normal" / "full" when ready */
    int64_t queue_depth; /* when ready */
    char reason[256];    /* when not ready */
} ws_client_ready;

/* GET /healthz: WS_CLIENT_OK when the process answers {"status":"ok"}. */
ws_client_status ws_client_healthz(const ws_client *c, ws_client_error *err);
/* GET /readyz: a 503 not_ready is a result (ready = 0), not an error. */
ws_client_status ws_client_readyz(const ws_client *c, ws_client_ready *out, ws_client_error *err);
/* GET /metrics: the Prometheus text, NUL-terminated (*text freed with free()). */
ws_client_status ws_client_metrics(const ws_client *c, char **text, ws_client_error *err);

/* ---- sessions ----------------------------------------------------------------- */

typedef struct {
    char id[WS_CLIENT_ID_LEN + 1];
    char model[WS_CLIENT_NAME_MAX + 1]; /* "" in listings */
    int64_t step;
    int64_t state_version;      /* 0 in listings */
    int state_rows, state_cols; /* ws_client_session_get only; 0,0 before the first step */
    int64_t created_ms;         /* 0 in listings */
    int64_t updated_ms;
} ws_client_session;

typedef struct {
    ws_client_session *items;
    int n;
    char next_after[WS_CLIENT_ID_LEN + 1]; /* pass as `after` for the next page; "": last page */
} ws_client_session_page;

typedef struct {
    float *values; /* rows * cols floats in host order (the wire is little-endian) */
    int rows, cols;
    int64_t step;
} ws_client_state;

void ws_client_session_page_free(ws_client_session_page *p);
void ws_client_state_free(ws_client_state *s);

/* POST /v1/sessions; model NULL: "default". */
ws_client_status ws_client_session_create(const ws_client *c, const char *model,
                                          ws_client_session *out, ws_client_error *err);
/* GET /v1/sessions?after=&limit=; after NULL or "": from the start; limit 1..1000. */
ws_client_status ws_client_session_list(const ws_client *c, const char *after, int limit,
                                        ws_client_session_page *out, ws_client_error *err);
ws_client_status ws_client_session_get(const ws_client *c, const char *id, ws_client_session *out,
                                       ws_client_error *err);
ws_client_status ws_client_session_delete(const ws_client *c, const char *id, ws_client_error *err);
/* GET /v1/sessions/{id}/state (values NULL, rows = cols = 0 before the first step). */
ws_client_status ws_client_state_get(const ws_client *c, const char *id, ws_client_state *out,
                                     ws_client_error *err);

/* POST /v1/sessions/{id}/steps (see "Steps and expect_step" above). */
ws_client_status ws_client_step(const ws_client *c, const char *id, const ws_client_step_req *req,
                                ws_client_answers *out, ws_client_error *err);
/* GET /v1/sessions/{id}/steps?after=&limit=: steps after `after` (>= 0), oldest first. */
ws_client_status ws_client_step_log(const ws_client *c, const char *id, int64_t after, int limit,
                                    ws_client_log_page *out, ws_client_error *err);
/* POST /v1/sessions/{id}/queries: answers on the current state, which stays as it is. */
ws_client_status ws_client_query(const ws_client *c, const char *id, const ws_client_fact *queries,
                                 int n, ws_client_answers *out, ws_client_error *err);
/* PUT /v1/sessions/{id}/steps/{step}/labels; *training_example (may be NULL) as answered. */
ws_client_status ws_client_labels_put(const ws_client *c, const char *id, int64_t step,
                                      const int *labels, int n, int replace, int *training_example,
                                      ws_client_error *err);

/* ---- models ------------------------------------------------------------------- */

typedef struct {
    int enabled;
    double lr;
    int update_every;
    int recall_queries;
    /* Self-supervision and the publication gate (api.md, Online training); an
     * older server sends none: -1 each. */
    int self_supervised, negative_queries;
    double holdout;
    int gate;
    double gate_tolerance;
    int rehearsal;     /* trajectories of the task memory trained beside each pass */
    int publish_every; /* AdamW steps per candidate version; an older server: -1 */
    char scope[16]; /* "all" or "symbols" (what an AdamW step changes); "": an older
                       server, or (a patch) keep */
    /* Exclusive relations learned from labels (api.md, Rules learned from
     * labels): on, 1, or off, 0; an older server: -1. */
    int rules;
} ws_client_training;

/* Training fields to change: enabled < 0, lr <= 0, update_every <= 0, scope ""
 * and the other fields < 0 keep the current value (start from WS_CLIENT_TRAINING_KEEP). */
typedef ws_client_training ws_client_training_patch;
#define WS_CLIENT_TRAINING_KEEP \
    ((ws_client_training_patch){-1, 0.0, 0, -1, -1, -1, -1, -1, -1, -1, -1, "", -1})

/* The integer fields every config has; the whole config (mixers included) is config_json.
 * views: 1 from a daemon that predates it; a session's state is views x n_state rows of d. */
typedef struct {
    int d, n_heads, n_state, n_upd_layers, n_ext_layers, max_fact_len, vocab_cap, n_overflow, d_raw;
    int views;
} ws_client_model_config;

typedef struct {
    int present; /* ws_client_model_get only */
    char state[16];
    int64_t serving_version, examples_ready, examples_labelled, examples_trained, examples_dropped,
        updates;
    double last_loss;
    int64_t examples_self_supervised, examples_held_out; /* 0 from an older server */
} ws_client_model_status;

/* The publication gate of GET /v1/models/{name} (ws_client_model_get only). */
typedef struct {
    int present;
    int64_t published, rejected;
    int64_t restored;             /* the replay's anchor served again; 0 from an older server */
    int64_t anchor_version;       /* the replay's anchor; 0 from an older server */
    double served_probe_accuracy; /* -1: not measured yet */
    /* The last decision: "published" or "rejected" ("" before the first), and
     * why it was rejected ("" when published). */
    char last_verdict[16], last_reason[160];
} ws_client_model_gate;

typedef struct {
    char name[WS_CLIENT_NAME_MAX + 1];
    int64_t version;
    int64_t created_ms; /* 0 when the server did not send it */
    ws_client_model_config config;
    char *config_json; /* the config object as the server sent it */
    ws_client_training training;
    ws_client_model_status status;
    ws_client_model_gate gate;
    /* Where the parameters come from: origin ("random", "shipped", "imported";
     * "" from an older server) is how version 1 was made, version_note (NULL
     * when not sent) what made the current version ("online training", ...). */
    char origin[16];
    char *version_note;
    char tenant[WS_CLIENT_NAME_MAX + 1]; /* the tenant it belongs to; "" shared */
    /* The rules learned from its labels that hold (api.md, Rules learned from
     * labels), as "ANCHOR@J:K/N" (anchor symbol at position J, facts of N
     * symbols exclusive at position K; ANCHOR "" when hidden), comma-separated
     * as many as fit; "" none (ws_client_model_get only). */
    char rules_holding[256];
} ws_client_model;

typedef struct {
    ws_client_model *items;
    int n;
} ws_client_model_list;

typedef struct {
    const char *name;                         /* [A-Za-z0-9._-]{1,64} */
    const char *config_json;                  /* NULL, or a JSON object of config fields */
    const ws_client_training_patch *training; /* NULL: the defaults */
    int64_t seed;                             /* < 0: the server's default */
    const char *tenant; /* the tenant it is for (only its sessions use it); NULL: shared */
} ws_client_model_spec;

void ws_client_model_free(ws_client_model *m);
void ws_client_model_list_free(ws_client_model_list *l);

ws_client_status ws_client_model_list_get(const ws_client *c, ws_client_model_list *out,
                                          ws_client_error *err);
/* POST /v1/models (admin). */
ws_client_status ws_client_model_create(const ws_client *c, const ws_client_model_spec *spec,
                                        ws_client_model *out, ws_client_error *err);
/* GET /v1/models/{name}, with status. */
ws_client_status ws_client_model_get(const ws_client *c, const char *name, ws_client_model *out,
                                     ws_client_error *err);
/* PATCH /v1/models/{name}/training (admin); *out: the resulting settings. */
ws_client_status ws_client_training_set(const ws_client *c, const char *name,
                                        const ws_client_training_patch *patch,
                                        ws_client_training *out, ws_client_error *err);
/* POST /v1/models/{name}/import (admin): the checkpoint file at `path`
 * (safetensors, worldstate-model-1, with or without AdamW state; up to 256 MiB)
 * becomes model `name` (*created = 1; tenant's own, or shared when tenant is
 * NULL) or, when it exists, its next version (*created = 0; it keeps its
 * tenant); *out is the model as the server lists it. *created may be NULL.
 * Never repeated once sent (like a creation). Refusals: 400 bad_checkpoint /
 * invalid_request (also an unknown tenant), 403, 409 config_mismatch /
 * vocab_mismatch / conflict (tenant is not the existing model's), 413. */
ws_client_status ws_client_model_import(const ws_client *c, const char *name, const char *tenant,
                                        const char *path, ws_client_model *out, int *created,
                                        ws_client_error *err);
/* POST /v1/models/{name}/versions/{version}/current (admin): makes a recorded
 * earlier version the model's current one again and serves it (a rollback);
 * *out is the model as the server lists it. Repeating it is harmless.
 * Refusals: 400 (bad version), 403, 404 (no such model or version), 409
 * version_unavailable (its checkpoint file is gone or damaged). */
ws_client_status ws_client_model_rollback(const ws_client *c, const char *name, int64_t version,
                                          ws_client_model *out, ws_client_error *err);
/* One recorded version of a model (GET /v1/models/{name}/versions). */
typedef struct {
    int64_t version;
    char *note; /* what made it: "created", "imported", "online training", a retrain's summary */
    int64_t created_ms;
    int current;   /* the version SQLite names current */
    int available; /* its checkpoint file is still there: it can be made current again */
} ws_client_version;

typedef struct {
    ws_client_version *items;
    int n;
} ws_client_version_list;

void ws_client_version_list_free(ws_client_version_list *l);
/* GET /v1/models/{name}/versions: the model's recorded versions, oldest first. */
ws_client_status ws_client_model_versions(const ws_client *c, const char *name,
                                          ws_client_version_list *out, ws_client_error *err);
/* DELETE /v1/models/{name} (admin): the model, its versions, vocabulary and
 * checkpoint files. A 404 on a retry after a lost reply counts as deleted.
 * Refusals: 403, 404, 409 model_is_default ("default" stays), model_in_use
 * (sessions use it: delete them first) or conflict (being created). */
ws_client_status ws_client_model_delete(const ws_client *c, const char *name, ws_client_error *err);
/* GET /v1/models/{name}/checkpoint (admin) into the file `path` (written to
 * path.part, renamed on success); *version (may be NULL) from X-Model-Version. */
ws_client_status ws_client_checkpoint_download(const ws_client *c, const char *name,
                                               const char *path, int64_t *version,
                                               ws_client_error *err);

#endif
