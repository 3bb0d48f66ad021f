/* daemon.h — worldstated's internals, shared by the server/daemon/ files (DESIGN §4).
 *
 * worldstated is an HTTP edge over the engine library (server/engine/engine.h).
 * Flow: an HTTP thread (ws_http_*) finds the request's row in the route table
 * (routes.h), accumulates the body, checks the key the row asks for
 * (ws_auth_*), and the row's handler either answers a read from storage
 * directly (a session, lists, log pages, model listings) or parses the request
 * into a native ws_job, hands it to the engine (ws_http_submit) and suspends
 * the connection: every storage write runs on the engine thread, so that no
 * HTTP thread (and no connection it serves, /healthz included) waits for
 * SQLite's write lock. The engine thread batches jobs, runs the model, commits one
 * transaction per group, writes each job's native result and calls the job's
 * callback, which resumes the connection; the HTTP thread then turns the result
 * into a status and JSON (ws_http_job_reply) and sends it. */
#ifndef WS_SRV_DAEMON_H
#define WS_SRV_DAEMON_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "server/common/common.h"
#include "server/engine/engine.h"
#include "server/engine/files.h"

#define WS_SRV_BODY_MAX   (1u << 20) /* request body cap (bytes) */
/* Body cap of POST /v1/models/{name}/import (a checkpoint, spooled to a file):
 * room for a model of about 64M parameters, or 21M with its AdamW state. */
#define WS_SRV_IMPORT_MAX ((uint64_t)256 << 20)

typedef struct {
    char data_dir[WS_SRV_PATH_MAX];
    char store[WS_SRV_PATH_MAX]; /* --store: the data location; "": <data_dir>/worldstate.db */
    char host[64];
    int port;
    int threads;
    int max_batch;
    int batch_wait_us;
    ws_store_durability durability;
    int force_cpu;
    int train_priority;     /* ws_train_priority */
    int64_t max_sessions;   /* per tenant */
    int request_timeout_ms; /* engine deadline of a queued job */
    int max_queue;          /* jobs waiting in the engine before 503 */
    /* Connection bounds (http.c): a client that opens connections and trickles
     * bytes holds at most max_connections_per_ip of the max_connections slots,
     * and each for at most connection_timeout_s without a byte. */
    int max_connections;
    int max_connections_per_ip;
    int connection_timeout_s;
    size_t max_model_memory; /* bytes all loaded models may take together (0: no bound) */
    size_t state_cache;      /* bytes of session states kept from the engine's commits (0: none) */
    int idle_spin_us;        /* the engine's poll for the next job before it sleeps (0: none) */
    char cors_origins[1024]; /* --cors-origin: origins a browser may call from, comma-separated
                                ("*": any); "" (the default): no CORS headers (cors.c) */
    char backup_dir[WS_SRV_PATH_MAX]; /* POST /v1/admin/backup writes under it; "": off */
} ws_srv_config;

ws_srv_config ws_srv_config_default(void);

/* ---- the server --------------------------------------------------------- */
typedef struct ws_srv {
    ws_srv_config cfg;
    char db_path[WS_SRV_PATH_MAX + 32];
    struct MHD_Daemon *mhd;
    ws_engine *engine;
    atomic_int
        open_mode; /* no keys: loopback only, no auth, tenant "default"; ends with the first key (main.c) */
    int64_t default_tenant;
    pthread_key_t store_key; /* one ws_store per HTTP thread */
    atomic_int stopping;
    /* WS_ERR_UNAVAILABLE or WS_ERR_CORRUPT while the latest write the engine
     * reported failed for that reason (0 once one succeeds): /readyz says not
     * ready without touching storage itself (ws_srv_storage_note). */
    atomic_int storage_fault;
} ws_srv;

/* The calling thread's storage connection (opened on first use; store.c);
 * ws_srv_store_init once before any. */
ws_status ws_srv_store_init(ws_srv *srv, ws_error *err);
ws_store *ws_srv_store(ws_srv *srv, ws_error *err);

/* ---- HTTP ------------------------------------------------------------------- */
ws_status ws_http_start(ws_srv *srv, ws_error *err);
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
    struct ws_http_req *req; /* the request's state in http.c */
    const char *method;
    const char *params[WS_HTTP_PARAMS]; /* the route pattern's {…} segments, in order */
    const char *body;
    size_t body_len;
    char *upload; /* a FILE route's body (routes.h): the file holding it; a route
                             that takes it over moves it into its job and sets it to NULL */
    ws_store_principal who;
} ws_http_ctx;

/* Hands a job to the engine, to resume the connection when it is done: a->job
 * on success, else a 503 in a (the job freed). */
void ws_http_submit(ws_http_ctx *c, ws_job *j, ws_http_answer *a);
/* A model as the API shows it (model_json.c): name, version, config, training,
 * created_ms, tenant, origin and version_note. One model by name (*id: its id;
 * may be NULL), or every model, as `who` may see them: an admin key (or who
 * NULL: an admin route's answer) sees every model, any other key the shared
 * ones and its tenant's; another tenant's model is WS_ERR_NOTFOUND, worded as
 * a missing one, and left out of the list. */
ws_status ws_srv_model_json(ws_store *st, const char *name, const ws_store_principal *who,
                            cJSON **out, int64_t *id, ws_error *err);
ws_status ws_srv_models_json(ws_store *st, const ws_store_principal *who, cJSON **out,
                             ws_error *err);
/* 1 when `who` may see model m (ws_srv_model_json's rule). */
int ws_srv_model_visible(const ws_store_principal *who, const ws_store_model *m);
/* A model's publication gate as GET /v1/models/{name} shows it (routes_versions.c),
 * and one version's scores at it. */
cJSON *ws_srv_gate_json(const ws_engine_gate_info *g);
cJSON *ws_srv_gate_score_json(const ws_engine_gate_score *s);

/* The model the route names (c->params[0]), as storage has it, if the key may
 * see it (another tenant's is missing to it); 0 with the answer in a. A name
 * longer than any model's is no model's (routes_versions.c). */
int ws_srv_model_of(ws_http_ctx *c, ws_http_answer *a, ws_store **st, ws_store_model *m);

/* A session as the API shows it (routes_sessions.c); NULL when out of memory. */
cJSON *ws_srv_session_json(ws_store *st, const ws_store_session *s);

/* ---- auth --------------------------------------------------------------- */
/* Fills who from the Authorization header; WS_ERR_NOTFOUND: 401. */
ws_status ws_auth_check(ws_srv *srv, struct MHD_Connection *conn, ws_store_principal *who,
                        ws_error *err);
int ws_auth_is_loopback(const char *host);

/* ---- the engine at the edge (jobs.c) ----------------------------------- */
/* Starts srv->engine with the daemon's settings (flags, metrics hooks). */
ws_status ws_srv_engine_start(ws_srv *srv, ws_error *err);
/* A finished job's result as the API answers it: status + JSON into a. */
void ws_http_job_reply(ws_srv *srv, const ws_job *j, ws_http_answer *a);
/* Records the outcome of a write for /readyz: a storage that cannot write or
 * is damaged makes the daemon not ready until a write succeeds again. */
void ws_srv_storage_note(ws_srv *srv, ws_status s);

/* ---- OPTIONS and CORS (cors.c) ----------------------------------------- */
/* --cors-origin ARG: one origin (scheme://host[:port]), a comma list, or "*",
 * appended to c->cors_origins; WS_ERR_INVALID for anything else. */
ws_status ws_cors_origin_add(ws_srv_config *c, const char *arg, ws_error *err);
/* Adds the CORS headers a request from an allowed Origin gets (and Vary:
 * Origin whenever CORS is on) to resp; 0 when out of memory. */
int ws_cors_headers(const ws_srv *srv, struct MHD_Connection *conn, struct MHD_Response *resp);
/* The answer to OPTIONS on a known path (204): Allow, and for a preflight from
 * an allowed origin the methods and request headers it may use. NULL: out of
 * memory. */
struct MHD_Response *ws_cors_options(const ws_srv *srv, struct MHD_Connection *conn,
                                     const char *allow);

/* ---- metrics ------------------------------------------------------------ */
/* label: a route label slot, pattern: a route pattern slot (routes.h);
 * method: ws_metrics_method's index. */
void ws_metrics_request(int label, int pattern, int method, int status, double seconds);
/* The index of an HTTP method for ws_metrics_request (one past the known ones: other). */
int ws_metrics_method(const char *method);
void ws_metrics_batch(int n_jobs, int n_steps, int n_queries);
void ws_metrics_training_update(void);
struct MHD_Response *ws_metrics_render(ws_srv *srv);
/* printf-append into a growing buffer (for metrics); returns 0 on OOM */
int ws_metrics_printf(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* A metric family's "# HELP" and "# TYPE" lines. */
void ws_metrics_family(char **buf, size_t *len, size_t *cap, const char *name, const char *type,
                       const char *help);
/* The process_* metrics, from /proc (metrics_process.c). */
void ws_metrics_process(char **buf, size_t *len, size_t *cap);

#endif
