/* training.h — per-model online trainer of the engine (see training.c). */
#ifndef WS_SRV_TRAINING_H
#define WS_SRV_TRAINING_H

#include "srv.h"

typedef struct ws_trainer ws_trainer;

/* One committed step, as the engine ran it (ids are max_fact_len per row, -1
 * padded; w_prev is the host copy of W_{t-1}, NULL when it was W_0). */
typedef struct {
    const char *session;
    int64_t step; /* the step's number (the state it produced) */
    const float *w_prev;
    const int32_t *instr_ids;
    const int *instr_val;
    int n_instr;
    const int32_t *query_ids;
    const int *labels; /* NULL: not labelled */
    int n_query;
    int has_vectors;   /* raw vector facts: not trained on */
} ws_trainer_step;

typedef struct {
    int64_t examples_labelled, examples_trained, examples_dropped, updates;
    int ready;
    float last_loss;
} ws_trainer_stats;

ws_status ws_trainer_new(ws_trainer **out, ws_model *m, ws_error *err);
void ws_trainer_free(ws_trainer *t, ws_model *m);
void ws_trainer_observe(ws_trainer *t, const ws_srv_training *tr, const ws_trainer_step *st);
/* Labels that arrived later; 1 if the step was still remembered and is now an example. */
int ws_trainer_label(ws_trainer *t, const char *session, int64_t step, const int *labels, int n);
int ws_trainer_ready(const ws_trainer *t);
/* Forgets the gradients summed towards the next AdamW step (the engine replaced
 * the model they were summed into); examples and recall facts are kept. */
void ws_trainer_discard_gradients(ws_trainer *t);
ws_trainer_stats ws_trainer_stats_of(const ws_trainer *t);
/* One training pass over up to 8 ready examples in context x (on the model the
 * trainer was made for); *updated = 1 after an AdamW step (the caller
 * checkpoints the new version). */
ws_status ws_trainer_run(ws_trainer *t, ws_exec *x, const ws_srv_training *tr, int *updated, ws_error *err);

#endif
