/* online_trainer.h — the examples of a model's online training (see
 * online_trainer.c): made from committed steps on the commit thread, trained on
 * by the model's training thread (engine_train.c). */
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

/* ---- any thread ----------------------------------------------------------- */
ws_status ws_online_new(ws_online_trainer **out, const ws_model_config *c, ws_error *err);
/* After ws_online_detach (the training thread is gone). */
void ws_online_free(ws_online_trainer *t);
/* The largest batch the training thread runs (ws_online_run, ws_online_replay). */
ws_batch_shape ws_online_shape(void);
/* What the examples of a model of c hold at most, and the training thread's
 * states (the recall cache's symbol strings not counted). */
size_t ws_online_bytes(const ws_model_config *c);
/* The counters, read under the examples' lock: they are written on both threads. */
ws_online_stats ws_online_stats_of(ws_online_trainer *t);
/* fn(ctx) is called whenever an example becomes ready (from the engine thread,
 * with no lock held): it wakes the training thread. */
void ws_online_on_ready(ws_online_trainer *t, void (*fn)(void *ctx), void *ctx);

/* ---- the commit thread (engine_commit.c: one thread) ------------------------ */
void ws_online_observe(ws_online_trainer *t, const ws_srv_training *tr, const ws_online_step *st);
/* Labels that arrived later; 1 if the step was still remembered and is now an example. */
int ws_online_label(ws_online_trainer *t, const char *session, int64_t step, const int *labels,
                    int n);

/* ---- the training thread ---------------------------------------------------- */
/* Allocates the training thread's batch and states on m (the training copy). */
ws_status ws_online_attach(ws_online_trainer *t, ws_model *m, ws_error *err);
void ws_online_detach(ws_online_trainer *t, ws_model *m);
/* Examples waiting (stats.ready also counts those of a pass not done). */
int ws_online_ready(ws_online_trainer *t);
/* Forgets the gradients summed towards the next AdamW step (the parameters
 * they were summed on are replaced); examples and recall facts are kept. */
void ws_online_discard_gradients(ws_online_trainer *t);
/* One training pass over up to 8 ready examples in context x (on the model
 * attached), its gradients summed into the model's; *due = 1 once update_every
 * examples are summed: the caller applies them (ws_online_update). */
ws_status ws_online_run(ws_online_trainer *t, ws_exec *x, const ws_srv_training *tr, int *due,
                        ws_error *err);
/* The held-out examples (the newest ones the holdout setting kept out of
 * training) replayed in context x: each one's step from its W_{t-1}, its
 * labelled queries answered (recall facts at their last value, never-told
 * facts, client labels); *right of *n answers correct (both 0 when none).
 * The set is the one ws_online_take_held last took, so that the served version
 * and its candidate answer the same questions, in the same order: answers (NULL,
 * or room for ws_online_replay_cap) gets 1 or 0 for each, right or not. */
ws_status ws_online_replay(ws_online_trainer *t, ws_exec *x, long *right, long *n, uint8_t *answers,
                           ws_error *err);
/* The most answers a replay has (room for ws_online_replay's answers). */
size_t ws_online_replay_cap(void);
/* Takes the held-out examples made since the last call into the replay set
 * (the newest 256 are kept). */
void ws_online_take_held(ws_online_trainer *t);
/* One AdamW step of m with the summed gradients (which it zeroes). */
ws_status ws_online_update(ws_online_trainer *t, ws_model *m, const ws_srv_training *tr,
                           ws_error *err);
/* The update that ws_online_run said was due is decided (published or not;
 * stepped: its AdamW step was taken, counted in stats.updates): its examples
 * stop counting as ready, so a client that sees none ready and the update
 * counted sees its version served. */
void ws_online_update_done(ws_online_trainer *t, int stepped);

#endif
