/* store_util.h — what every storage backend shares and none should copy: time
 * stamps (ws_clock_wall_ms), randomness for ids, and the checks and messages storage.h promises
 * for every backend alike. */
#ifndef WS_STORE_UTIL_H
#define WS_STORE_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "base/ws_clock.h"
#include "storage.h"
/* n random bytes from /dev/urandom. */
ws_status ws_store__random(void *buf, size_t n, ws_error *err);
/* 2n lowercase hex digits + NUL. */
void ws_store__hex(const unsigned char *in, size_t n, char *out);
/* A fresh session id: WS_STORE_ID_LEN / 2 random bytes as hex. */
ws_status ws_store__new_id(char id[WS_STORE_ID_LEN + 1], ws_error *err);
/* Tenant/model names: [A-Za-z0-9._-]{1,WS_STORE_NAME_MAX}. */
ws_status ws_store__check_name(const char *what, const char *name, ws_error *err);
/* A state argument: NULL with shape 0x0 (when allow_null), or a positive shape
 * within WS_STORE_STATE_MAX_BYTES. */
ws_status ws_store__check_state(const float *state, int32_t rows, int32_t cols, int allow_null,
                                ws_error *err);
/* WS_ERR_NOTFOUND with the one message for a session that is missing,
 * malformed or another tenant's (the id echoed only when well-formed). */
ws_status ws_store__session_not_found(const char *id, ws_error *err);

/* The WS_ERR_CONFLICTs every backend words alike: a session not at the
 * expected step, a vocabulary append not at the stored count, a version not
 * above the model's greatest. */
ws_status ws_store__step_conflict(const char *id, int64_t step, int64_t expect, ws_error *err);
ws_status ws_store__vocab_conflict(int64_t model, int64_t have, int64_t first_id, ws_error *err);
ws_status ws_store__version_conflict(int64_t model, int64_t max, ws_error *err);

/* What a backend's vocabulary append needs of it (vocab_append.c), b its
 * handle: the stored count, the symbols from an id on in id order, and an
 * insert of symbols at ids first_id.. (UNIQUE(model, symbol) broken:
 * WS_ERR_CONFLICT). */
typedef struct {
    ws_status (*count)(void *b, int64_t model, int64_t *n, ws_error *err);
    ws_status (*load)(void *b, int64_t model, int64_t from, ws_store_vocab_fn fn, void *ctx,
                      ws_error *err);
    ws_status (*insert)(void *b, int64_t model, int64_t first_id, size_t n,
                        const char *const *symbols, ws_error *err);
} ws_store__vocab_io;
/* The vocab_append op (store_op_list.h) inside the backend's transaction,
 * with the model's row locked against other appenders. */
ws_status ws_store__vocab_append(const ws_store__vocab_io *io, void *b, int64_t model,
                                 int64_t first_id, size_t n, const char *const *symbols,
                                 int64_t limit, ws_store_vocab_fn others, void *ctx,
                                 int64_t *count, ws_error *err);

/* The entry check of every ws_store_* wrapper: a store, and not re-entered from
 * one of its own listing callbacks. */
ws_status ws_store__enter(ws_store *s, ws_error *err);
#define WS_STORE_ENTER(s, err) WS_TRY(ws_store__enter((s), (err)))

#endif
