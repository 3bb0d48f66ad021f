/* common.h — what worldstated (server/daemon/, server/engine/) and
 * worldstate-train (server/train/) share: request limits, facts parsed from
 * JSON, step-log entries as JSON, per-model online-training settings (limits.h,
 * without JSON; JSON here) and the data-directory lock. Model versions on disk
 * (versions.h) and recall facts (recall.h) have headers of their own. */
#ifndef WS_SRV_COMMON_H
#define WS_SRV_COMMON_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "model/model.h"
#include "storage/storage.h"
#include "limits.h"

/* Locks the data directory for this process's lifetime (datadir_lock.c); who
 * names the caller in the message. WS_ERR_CONFLICT while another holds it. */
ws_status ws_srv_datadir_lock(const char *data_dir, const char *who, int *fd_out, ws_error *err);

/* ---- parsed facts ------------------------------------------------------- */
typedef struct {
    int n_sym;                        /* 0: a vector fact */
    const char *sym[WS_MAX_FACT_LEN]; /* borrowed from the job's cJSON body */
    int sym_len[WS_MAX_FACT_LEN];
    float *vec; /* owned, n_vec floats */
    int n_vec;
    int value; /* instruction value, or query label (-1 none) */
} ws_srv_fact;

/* ---- per-model online-training settings as JSON (training_settings.c) --- */
/* Applies the fields present in obj (enabled, lr, update_every,
 * recall_queries) to *t after checking all of them; unknown fields refused. */
ws_status ws_srv_training_parse(const cJSON *obj, ws_srv_training *t, ws_error *err);
/* ws_srv_training_parse that also tells which fields obj has (WS_SRV_TRAINING_* bits):
 * a partial update to apply later (ws_srv_training_apply). */
ws_status ws_srv_training_parse_fields(const cJSON *obj, ws_srv_training *t, unsigned *fields,
                                       ws_error *err);
cJSON *ws_srv_training_json(const ws_srv_training *t);

/* One step-log entry as the API lists it (step, instructions, queries, labels,
 * answers, model_version, time_ms), added to o (log_json.c). */
ws_status ws_srv_log_item_fill(cJSON *o, const ws_store_log_entry *e);
/* Answers p[0..n) as [{"p":…,"holds":p >= 0.5}, …]; NULL when out of memory. */
cJSON *ws_srv_answers_json(const float *p, int n);
/* A probability as JSON text that parses back to the same float (nine
 * significant digits at most; "null" when not finite); returns its length. */
enum { WS_SRV_PROB_TEXT = 32 };
int ws_srv_prob_text(float p, char buf[WS_SRV_PROB_TEXT]);

/* Parsing helpers (json.c). */
/* A request body: one JSON object, strictly RFC 8259 (UTF-8, number grammar, no
 * raw control bytes), and no \u0000 in any string (cJSON would cut it there). */
ws_status ws_json_parse_object(const char *body, size_t len, cJSON **out, ws_error *err);
/* A client's string that becomes a symbol, a name or a note: 1..max bytes of
 * strict UTF-8 without control characters; field names it in the message. */
ws_status ws_srv_text_check(const char *s, size_t max, const char *field, ws_error *err);
/* Every member of obj is one of the names (NULL-terminated list). */
ws_status ws_json_only(const cJSON *obj, const char *const *names, ws_error *err);
/* Facts of a step/query body into a job; kind "instructions" or "queries". */
ws_status ws_json_facts(const cJSON *arr, int instructions, ws_srv_fact **out, int *n,
                        ws_error *err);
ws_status ws_json_labels(const cJSON *arr, ws_srv_fact *q, int n_query, ws_error *err);
ws_status ws_json_int(const cJSON *v, int64_t lo, int64_t hi, int64_t *out, const char *name,
                      ws_error *err);

#endif
