/* state_cache.h — the world states the engine committed last, kept in memory,
 * so that a session's next step need not read its state back from the store.
 *
 * Without it every step and query begins with a read of the session's state
 * blob (engine_run.c, prepare): on SQLite a few WAL page reads, about 40 us, on
 * the engine thread, whose time paces every batch — 4-6% of the daemon's CPU
 * under load (perf, issue 15). Only the engine's own commits put states here,
 * so the cache is used only where this daemon is the store's one writer
 * (SQLite: the data directory's lock; not on a shared PostgreSQL store, where
 * another daemon may step the session); whatever else changes a session (its
 * deletion, a step whose commit failed or conflicted) drops its entry, and a
 * step whose expect_step disagrees with the cached step reads the store
 * before it is refused. A state comes back with exactly the floats committed:
 * replay stays bit for bit.
 *
 * Least recently used entries go first once the states take more than the
 * bound given. Thread-safe (one lock): the engine thread reads, the commit
 * thread puts and drops. */
#ifndef WS_STATE_CACHE_H
#define WS_STATE_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "base/ws_status.h"
#include "server/common/recall.h"
#include "storage/storage.h"

typedef struct ws_state_cache ws_state_cache;

/* A cache of at most max_bytes of states (> 0). */
ws_status ws_state_cache_new(ws_state_cache **out, size_t max_bytes, ws_error *err);
void ws_state_cache_free(ws_state_cache *c);

/* 1 and *out filled as ws_store_session_get fills it (id, tenant, model, step,
 * rows, cols and an owned copy of the state; the timestamps and
 * state_version 0) when the session of that tenant is cached; 0 otherwise,
 * and when out of memory for the copy. */
int ws_state_cache_get(ws_state_cache *c, int64_t tenant, const char *id, ws_store_session *out);

/* The session's state as just committed: rows x cols floats at `state`, after
 * `step` steps, on `model`. When it cannot be kept (out of memory, or larger
 * than the bound) any older entry of the session is dropped. */
void ws_state_cache_put(ws_state_cache *c, int64_t tenant, const char *id, int64_t model,
                        int64_t step, int32_t rows, int32_t cols, const float *state);

/* Keeps beside the session's state, committed after `step` steps, what it
 * was told up to then (rules.h): the facts its next step's rules work from.
 * Nothing when the cache holds it at another step; a new put forgets them. */
void ws_state_cache_put_told(ws_state_cache *c, const char *id, int64_t step,
                             const ws_recall_facts *told);
/* 1 and *out filled (and *model, may be NULL: the session's model) when the
 * session of that tenant is cached at `step` with what it was told; 0
 * otherwise. */
int ws_state_cache_told(ws_state_cache *c, int64_t tenant, const char *id, int64_t step,
                        ws_recall_facts *out, int64_t *model);

/* Forgets the session (any tenant's): the store holds what it has now. */
void ws_state_cache_drop(ws_state_cache *c, const char *id);

typedef struct {
    uint64_t hits, misses; /* ws_state_cache_get's answers so far */
    size_t entries, bytes; /* held now (bytes: the states) */
} ws_state_cache_stats;

ws_state_cache_stats ws_state_cache_stats_of(ws_state_cache *c);

#endif
