/* ops.c — the PostgreSQL backend's operations table (store_ops.h), named in
 * storage/registry.c. */
#include "pg_internal.h"

const ws_store_ops ws_store_postgresql_ops = {
    .scheme = "postgresql",
    .alias = "postgres", /* libpq takes both URI schemes */
    .shared = 1,         /* every daemon of a cluster connects to the one server */
#define WS_STORE_OP(ret, name, params) .name = ws_pg_##name,
#include "storage/store_op_list.h"
#undef WS_STORE_OP
};
