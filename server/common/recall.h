/* recall.h — the facts a session was told, for recall queries (DESIGN §3).
 *
 * Truncated-gradient training is sound only when querying is thorough: any
 * earlier instruction may be asked about later. Online training
 * (engine/online_trainer.c) and offline retraining (train/offline_retrain.c)
 * therefore add recall queries of their own, drawn from the facts told earlier
 * in the same session, each labelled with the last value told: "told and not
 * overridden since". One
 * ws_recall_facts holds a session's newest WS_RECALL_FACTS distinct facts. */
#ifndef WS_SRV_RECALL_H
#define WS_SRV_RECALL_H

#include <stdint.h>

#include "model/model.h"

#define WS_RECALL_FACTS 64

typedef struct {
    int n;
    int32_t ids[WS_RECALL_FACTS][WS_MAX_FACT_LEN]; /* S ids each, -1 padded */
    /* Each symbol's hash (its fixed code; what tells apart two symbols that
     * share an overflow id), 0 padded; all 0 where the caller had ids only. */
    uint64_t hash[WS_RECALL_FACTS][WS_MAX_FACT_LEN];
    int8_t val[WS_RECALL_FACTS];
} ws_recall_facts;

/* Records that fact ids (S ids, -1 padded; hash: their S hashes, or NULL for
 * none) now has value val: it becomes the newest (an older entry of the same
 * fact goes); at capacity the oldest fact is forgotten. */
void ws_recall_tell(ws_recall_facts *f, int S, const int32_t *ids, const uint64_t *hash, int val);
/* The index of the fact (ids and hashes as ws_recall_tell takes them), or -1
 * when the session was not told it (or it was forgotten). */
int ws_recall_find(const ws_recall_facts *f, int S, const int32_t *ids, const uint64_t *hash);
/* The closed world's answer about a fact (as ws_recall_find takes it): its
 * last value told; 0 when it was never told, known only when f holds every
 * fact the session was told (complete); else -1, unknown. */
int ws_recall_closed(const ws_recall_facts *f, int S, const int32_t *ids, const uint64_t *hash,
                     int complete);
/* A uniformly drawn fact index in [0, f->n) (f->n > 0), advancing *rng
 * (xorshift64, never 0). */
int ws_recall_draw(const ws_recall_facts *f, uint64_t *rng);
/* Fact k's symbols as a batch takes them (id and hash) into out[S]; returns
 * how many there are. */
int ws_recall_syms(const ws_recall_facts *f, int k, int S, ws_sym *out);

#endif
