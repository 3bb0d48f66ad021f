/* daemon.h — worldstated's internals, shared by the server/daemon/ files (DESIGN §4).
 *
 * Flow: an HTTP thread (ws_http_*) finds the request's row in the route table
 * (routes.h), accumulates the body, checks the key the row asks for
 * (ws_auth_*), and the row's handler either answers from storage directly
 * (session CRUD, log pages, model listings) or builds a ws_job, hands it to the engine
 * (ws_engine_submit) and suspends the connection. The engine thread owns the
 * backend and every loaded model; it batches jobs, runs the model, commits one
 * transaction per group, fills job->status/reply, and resumes the connection;
 * the HTTP thread then sends the reply. */
#ifndef WS_SRV_DAEMON_H
#define WS_SRV_DAEMON_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "../common/common.h"

#define WS_SRV_BODY_MAX (1u << 20)  /* request body cap (bytes) */
/* Body cap of POST /v1/models/{name}/import (a checkpoint, spooled to a file):
 * room for a model of about 64M parameters, or 21M with its AdamW state. */
#define WS_SRV_IMPORT_MAX ((uint64_t)256 << 20)

typedef struct {
    char data_dir[WS_SRV_PATH_MAX];
    char host[64];
    int port;
    int threads;
    int max_batch;
    int batch_wait_us;
    ws_store_durability durability;
    int force_cpu;
    int64_t max_sessions;     /* per tenant */
    int request_timeout_ms;   /* engine deadline of a queued job */
    int max_queue;            /* jobs waiting in the engine before 503 */
} ws_srv_config;

ws_srv_config ws_srv_config_default(void);

/* ---- engine jobs ------------------------------------------------------- */
typedef enum {
    WS_JOB_STEP,
    WS_JOB_QUERY,
    WS_JOB_LABELS,
    WS_JOB_MODEL_CREATE,
    WS_JOB_TRAINING_SET,
    WS_JOB_MODEL_IMPORT
} ws_job_kind;

typedef struct ws_job {
    ws_job_kind kind;
    struct ws_job *next;
    struct MHD_Connection *conn;
    int64_t deadline_ms;
    int64_t tenant;
    char session[WS_STORE_ID_LEN + 1];
    int64_t expect_step;  /* -1: none given */
    int64_t label_step;   /* WS_JOB_LABELS: the step labelled */
    ws_srv_fact *instr, *query;
    int n_instr, n_query;
    int has_labels;
    int replace;          /* WS_JOB_LABELS: overwrite different labels */
    cJSON *body;          /* owns the symbol strings */
    char *instr_json, *query_json, *labels_json; /* normalised, for the log */
    char model_name[WS_STORE_NAME_MAX + 1];
    ws_model_config cfg;  /* WS_JOB_MODEL_CREATE */
    ws_srv_training training;
    uint64_t seed;
    char *upload;         /* WS_JOB_MODEL_IMPORT: the spooled checkpoint (owned: ws_job_free
                             removes the file unless the engine took it over) */
    /* result, written by the engine before `done` */
    int status;
    cJSON *reply;
    atomic_int done;
} ws_job;

void ws_job_free(ws_job *j);

/* ---- the server --------------------------------------------------------- */
typedef struct ws_engine ws_engine;

typedef struct ws_srv {
    ws_srv_config cfg;
    char db_path[WS_SRV_PATH_MAX + 32];
    struct MHD_Daemon *mhd;
    ws_engine *engine;
    int open_mode;            /* no keys: loopback only, no auth, tenant "default" */
    int64_t default_tenant;
    pthread_key_t store_key;  /* one ws_store per HTTP thread */
    atomic_int stopping;
} ws_srv;

/* The calling thread's storage connection (opened on first use). */
ws_store *ws_srv_store(ws_srv *srv, ws_error *err);
int64_t ws_srv_now_ms(void);

/* ---- HTTP ------------------------------------------------------------------- */
ws_status ws_http_start(ws_srv *srv, ws_error *err);
/* Stops accepting new connections (shutdown, step 1). */
void ws_http_quiesce(ws_srv *srv);
void ws_http_stop(ws_srv *srv);
/* {"error":{"code":code,"message":msg}} */
cJSON *ws_http_error(const char *code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* HTTP status and error code for a storage/engine status. */
int ws_http_status_of(ws_status s, const char **code);

/* A route's answer: status + JSON (owned) or a raw body. */
typedef struct {
    int status;
    cJSON *json;
    struct MHD_Response *raw; /* non-JSON (metrics, checkpoint, state) */
    ws_job *job;              /* non-NULL: submitted, suspend and wait */
} ws_http_answer;

#define WS_HTTP_PARAMS 4 /* {…} segments of a route pattern (routes.h) */

typedef struct {
    ws_srv *srv;
    struct MHD_Connection *conn;
    struct ws_http_req *req;  /* the request's state in http.c */
    const char *method;
    const char *params[WS_HTTP_PARAMS]; /* the route pattern's {…} segments, in order */
    const char *body;
    size_t body_len;
    char *upload;         /* a FILE route's body (routes.h): the file holding it; a route
                             that takes it over moves it into its job and sets it to NULL */
    ws_store_principal who;
} ws_http_ctx;

/* Hands a job to the engine: a->job on success, else a 503 in a. */
void ws_http_submit(ws_http_ctx *c, ws_job *j, ws_http_answer *a);
/* Model config <-> JSON (the checkpoint's field names). */
cJSON *ws_srv_model_config_json(const ws_model_config *cfg);
/* A model as the API shows it (model_json.c): name, version, config, training,
 * created_ms, origin and version_note. One model by name (*id: its id; may be
 * NULL), or every model. */
ws_status ws_srv_model_json(ws_store *st, const char *name, cJSON **out, int64_t *id,
                            ws_error *err);
ws_status ws_srv_models_json(ws_store *st, cJSON **out, ws_error *err);

/* ---- files in <data-dir>/models (files.c) ------------------------------- */
#define WS_SRV_UPLOAD_PREFIX ".upload-" /* temporary files: removed at start */
/* A new empty temporary file <data-dir>/models/.upload-XXXXXX (mode 0600),
 * open for writing; its path into path[cap]. */
ws_status ws_srv_upload_create(const char *data_dir, char *path, size_t cap, int *fd,
                               ws_error *err);
/* Writes all of buf[0..n) to fd (retrying short writes); errno on failure. */
ws_status ws_srv_write_all(int fd, const void *buf, size_t n, ws_error *err);
/* Makes the finished temporary file tmp durable under the name dst: fsync,
 * rename, fsync of the folder (a crash leaves the old dst or the whole new one). */
ws_status ws_srv_file_commit(const char *tmp, const char *dst, ws_error *err);

/* ---- auth --------------------------------------------------------------- */
/* Fills who from the Authorization header; WS_ERR_NOTFOUND: 401. */
ws_status ws_auth_check(ws_srv *srv, struct MHD_Connection *conn, ws_store_principal *who,
                        ws_error *err);
int ws_auth_is_loopback(const char *host);

/* ---- engine ------------------------------------------------------------- */
ws_status ws_engine_start(ws_srv *srv, ws_engine **out, ws_error *err);
/* Queues a job; WS_ERR_UNSUPPORTED when shutting down, WS_ERR_CONFLICT when full. */
ws_status ws_engine_submit(ws_engine *e, ws_job *job, ws_error *err);
/* Stops the thread after the batch in hand: queued jobs are failed (503),
 * later submits refused. Idempotent. */
void ws_engine_stop(ws_engine *e);
/* Stops if needed, then frees the models, backend and storage connection. */
void ws_engine_free(ws_engine *e);
const char *ws_engine_backend_name(ws_engine *e);
int ws_engine_queue_depth(ws_engine *e);
/* Training state of a model for GET /v1/models/{name} (NULL if not loaded). */
cJSON *ws_engine_model_status(ws_engine *e, int64_t model_id);
/* Appends Prometheus lines about loaded models. */
void ws_engine_metrics(ws_engine *e, char **buf, size_t *len, size_t *cap);

/* ---- metrics ------------------------------------------------------------ */
/* label: a route label slot (routes.h) */
void ws_metrics_request(int label, int status, double seconds);
void ws_metrics_batch(int n_jobs, int n_steps, int n_queries);
void ws_metrics_training_update(void);
struct MHD_Response *ws_metrics_render(ws_srv *srv);
/* printf-append into a growing buffer (for metrics); returns 0 on OOM */
int ws_metrics_printf(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
