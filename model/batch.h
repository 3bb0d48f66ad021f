/* batch.h — the host-side layout of a ragged batch (internal to model/).
 *
 * Instructions of all trajectories are packed in order, then queries likewise;
 * trajectory t owns instr rows [instr_off[t], instr_off[t]+n_instr[t]) and query
 * rows [query_off[t], ...). A fact row holds S symbols (ids -1 padded, hashes 0
 * padded; a symbol is present when its id >= 0 or its hash != 0) or, for a raw
 * fact, raw_row >= 0 indexing the raw vector pool. */
#ifndef WS_BATCH_H
#define WS_BATCH_H

#include "model.h"

typedef struct {
    int32_t *ids;  /* [n * S] */
    uint64_t *hash; /* [n * S]: symbol hashes (0: by id from the vocabulary, or padding) */
    int32_t *raw_row; /* [n], -1 for symbolic facts */
    float *raw;    /* [n_raw * d_raw] */
    int32_t *value; /* [n]: instruction value or query label (-1 unlabelled) */
    int n, n_raw, cap, ids_cap, hash_cap, raw_cap;
} ws_fact_list;

struct ws_batch {
    int S, d_raw, n_ids; /* n_ids: valid symbol ids are [0, n_ids) */
    int n_traj, traj_cap;
    int32_t *from_w0, *n_instr, *n_query, *instr_off, *query_off;
    ws_fact_list instr, query;
    float *labels; /* [query.n] as floats, for the loss */
    int labels_cap;
    int n_labelled;
};

#endif
