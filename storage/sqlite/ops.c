/* ops.c — the SQLite backend's operations table (store_ops.h), named in
 * storage/registry.c. */
#include "sqlite_internal.h"

const ws_store_ops ws_store_sqlite_ops = {
    .scheme = "sqlite",
#define WS_STORE_OP(ret, name, params) .name = ws_sqlite_##name,
#include "storage/store_op_list.h"
#undef WS_STORE_OP
};
