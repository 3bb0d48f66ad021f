/* store.c — the HTTP threads' storage connections: one per thread, opened on
 * first use and closed when the thread ends (apart from main.c, so that the
 * daemon's edge links into programs other than worldstated: the fuzz targets). */
#include "daemon.h"

static void close_store(void *p)
{
    ws_store_close(p);
}

ws_status ws_srv_store_init(ws_srv *srv, ws_error *err)
{
    if (pthread_key_create(&srv->store_key, close_store) != 0)
        return ws_error_set(err, WS_ERR_NOMEM, "cannot create thread key");
    return WS_OK;
}

ws_store *ws_srv_store(ws_srv *srv, ws_error *err)
{
    ws_store *st = pthread_getspecific(srv->store_key);
    if (st) return st;
    if (ws_store_open(srv->db_path, srv->cfg.durability, 0, &st, err) != WS_OK) return NULL;
    if (pthread_setspecific(srv->store_key, st) != 0) {
        ws_store_close(st);
        ws_error_set(err, WS_ERR_NOMEM, "cannot keep the storage connection");
        return NULL;
    }
    return st;
}
