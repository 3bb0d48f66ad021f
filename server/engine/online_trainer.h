/* online_trainer.h — per-model online trainer of the engine (see online_trainer.c). */
#ifndef WS_ENGINE_ONLINE_TRAINER_H
#define WS_ENGINE_ONLINE_TRAINER_H

#include "server/common/common.h"

typedef struct ws_online_trainer ws_online_trainer;

/* One committed step, as the engine ran it (ids are max_fact_len per row, -1
 * padded, hashes beside them, 0 padded; w_prev is the host copy of W_{t-1},
 * NULL when it was W_0). */
typedef struct {
    const char *session;
    int64_t step; /* the step's number (the state it produced) */
    const float *w_prev;
    const int32_t *instr_ids;
    const uint64_t *instr_hash;
    const int *instr_val;
    int n_instr;
    const int32_t *query_ids;
    const uint64_t *query_hash;
    const int *labels; /* NULL: not labelled */
    int n_query;
    int has_vectors; /* raw vector facts: not trained on */
} ws_online_step;

typedef struct {
    int64_t examples_labelled, examples_self, examples_held_out, examples_trained, examples_dropped,
        updates;
    int ready, held_out;
    float last_loss;
} ws_online_stats;

ws_status ws_online_new(ws_online_trainer **out, ws_model *m, ws_error *err);
/* The largest batch a trainer runs on its model's context (ws_online_run). */
ws_batch_shape ws_online_shape(void);
/* What a trainer of a model of c holds at most besides that context: its device
 * states and its examples (the recall cache's symbol strings not counted). */
size_t ws_online_bytes(const ws_model_config *c);
void ws_online_free(ws_online_trainer *t, ws_model *m);
void ws_online_observe(ws_online_trainer *t, const ws_srv_training *tr, const ws_online_step *st);
/* Labels that arrived later; 1 if the step was still remembered and is now an example. */
int ws_online_label(ws_online_trainer *t, const char *session, int64_t step, const int *labels,
                    int n);
int ws_online_ready(const ws_online_trainer *t);
/* Forgets the gradients summed towards the next AdamW step (the engine replaced
 * the model they were summed into); examples and recall facts are kept. */
void ws_online_discard_gradients(ws_online_trainer *t);
ws_online_stats ws_online_stats_of(const ws_online_trainer *t);
/* One training pass over up to 8 ready examples in context x (on the model the
 * trainer was made for), its gradients summed into the model's; *due = 1 once
 * update_every examples are summed: the caller applies them (ws_online_update)
 * when it publishes the new version. */
ws_status ws_online_run(ws_online_trainer *t, ws_exec *x, const ws_srv_training *tr, int *due,
                        ws_error *err);
/* The held-out examples (the newest ones the holdout setting kept out of
 * training) replayed in context x: each one's step from its W_{t-1}, its
 * labelled queries answered (recall facts at their last value, never-told
 * facts, client labels); *right of *n answers correct (both 0 when none). */
ws_status ws_online_replay(ws_online_trainer *t, ws_exec *x, long *right, long *n, ws_error *err);
/* One AdamW step of m with the summed gradients (which it zeroes). */
ws_status ws_online_update(ws_online_trainer *t, ws_model *m, const ws_srv_training *tr,
                           ws_error *err);

#endif
