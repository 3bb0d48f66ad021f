/* store_ops.h — the seam between the ws_store_* API (storage.h) and a storage
 * backend, in the shape of SQLite's VFS: a backend is one table of function
 * pointers, one per operation, and its handle embeds struct ws_store as its
 * first member (struct ws_sqlite { ws_store base; sqlite3 *db; ... }), so the
 * wrappers in store.c dispatch through s->ops without knowing the backend.
 *
 * A backend lives in its own folder (storage/sqlite/) and joins with one line
 * in registry.c; tests/test_storage.c then runs every case against it.
 *
 * The contract of each operation is that of the ws_store_* call of the same
 * name in storage.h (statuses, messages' meaning, transactions, tenant
 * isolation), with these parts already done by the wrapper, never by the
 * backend:
 *   - s is not NULL and is not inside one of its own listings: a listing op
 *     runs with s->in_callback set, so a callback re-entering the store is
 *     refused before it reaches the backend (the backend needs no guard);
 *   - the arguments storage.h restricts are checked (tenant and model names,
 *     state shapes, page limits, log entry fields, version numbers, symbols),
 *     except a session id, which the backend checks as part of finding the
 *     session (ws_store__session_not_found gives the one answer for both);
 *   - what is not backend-specific: API keys are generated and hashed before
 *     key_insert and key_find (a backend sees only hashes), session ids come
 *     from ws_store__new_id (store_util.h), and _get results are zeroed.
 * Every write op joins an open group transaction (ws_store_begin) and undoes
 * only its own part when it fails; outside one it is its own transaction. */
#ifndef WS_STORE_OPS_H
#define WS_STORE_OPS_H

#include "storage.h"

typedef struct ws_store_ops ws_store_ops;

/* The part of every backend's handle the wrappers use. */
struct ws_store {
    const ws_store_ops *ops; /* set by ws_store_open */
    int in_callback;         /* a listing op is running: calls into s are refused */
};

struct ws_store_ops {
    /* The location prefix that picks the backend: "sqlite" for "sqlite:PATH". */
    const char *scheme;
    /* Another prefix that picks it ("postgres" beside "postgresql"), or NULL. */
    const char *alias;
    /* Several daemons may serve one database at once (storage.h, ws_store_shared). */
    int shared;

    /* one field per operation of store_op_list.h */
#define WS_STORE_OP(ret, name, params) ret(*name) params;
#include "store_op_list.h"
#undef WS_STORE_OP
};

/* ---- registry.c ---- */
/* The backend a location names and the target it gets: "scheme:target" for a
 * registered scheme, a bare path for the first backend (SQLite). An unknown
 * scheme is WS_ERR_INVALID naming the known ones. */
ws_status ws_store__resolve(const char *location, const ws_store_ops **ops, const char **target,
                            ws_error *err);

#endif
