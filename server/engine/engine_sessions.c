/* engine_sessions.c — session creation and deletion as engine jobs: every
 * storage write runs on the engine thread, so that an HTTP thread never waits
 * for SQLite's write lock (another process holding it would otherwise stall
 * every connection that thread serves, /healthz included). */
#include "engine_impl.h"

/* WS_JOB_SESSION_CREATE: a session on the named model's current version;
 * its id into j->session. Another tenant's model is refused exactly as a
 * missing one, so that its name does not leak. */
static void create_job(ws_engine *e, ws_job *j)
{
    ws_error err = {0};
    ws_store_model m = {0};
    ws_status s = ws_store_model_find(e->st, j->model_name, &m, &err);
    if (s == WS_OK && m.tenant && m.tenant != j->tenant) s = WS_ERR_NOTFOUND;
    if (s == WS_ERR_NOTFOUND) {
        ws_store_model_clear(&m);
        return ws_eng_refuse(j, WS_JOB_MODEL_NOT_FOUND, s, "no such model");
    }
    if (s == WS_OK)
        s = ws_store_session_create(e->st, j->tenant, m.id, NULL, 0, 0, m.current_version,
                                    j->max_sessions, j->session, &err);
    ws_store_model_clear(&m);
    if (s == WS_ERR_CONFLICT) return ws_eng_refuse(j, WS_JOB_SESSION_LIMIT, s, "%s", err.msg);
    if (s != WS_OK) return ws_eng_fail(j, s, &err);
    ws_eng_finish(j);
}

/* WS_JOB_SESSION_DELETE: the session and its log, for good. */
static void delete_job(ws_engine *e, ws_job *j)
{
    ws_error err = {0};
    if (e->cache) ws_state_cache_drop(e->cache, j->session);
    ws_status s = ws_store_session_delete(e->st, j->tenant, j->session, &err);
    if (s != WS_OK) return ws_eng_fail(j, s, &err);
    ws_eng_finish(j);
}

void ws_eng_session_job(ws_engine *e, ws_job *j)
{
    if (j->kind == WS_JOB_SESSION_CREATE) return create_job(e, j);
    delete_job(e, j);
}
