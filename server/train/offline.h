/* offline.h — worldstate-train's work on a daemon's data directory: export the
 * step logs as JSON Lines, retrain a model on them, re-derive sessions' states
 * by replaying their logs (offline_*.c; api.md "Offline: export, retrain,
 * rederive" says what each command promises).
 *
 * A session's log is read as the model sees it: facts mapped to ids by the
 * model's vocabulary (SQLite's, never grown here: an unknown symbol gets its
 * overflow id, as in a full vocabulary) or kept as raw vectors, instruction
 * values, query labels. Sessions come from the database (read a page at a time,
 * up to the step each had when listed) or from JSON Lines files (all in memory).
 * Replays run sessions in parallel, one trajectory row each, like the trainer
 * runs task worlds (model/trainer.h). */
#ifndef WS_SRV_OFFLINE_H
#define WS_SRV_OFFLINE_H

#include <stdint.h>
#include <stdio.h>

#include "model/trainer.h"
#include "server/common/recall.h"
#include "server/common/common.h"

/* ---- logged steps (offline_log.c) -------------------------------------- */

typedef struct {
    int32_t ids[WS_MAX_FACT_LEN];   /* symbol ids, -1 padded */
    uint64_t hash[WS_MAX_FACT_LEN]; /* the symbols' hashes (their fixed codes), 0 padded */
    int n_ids;                      /* 0: a raw vector fact */
    float *vec;                     /* d_raw floats (owned) for a vector fact */
    int val;                        /* instruction value, or query label (-1: none) */
} ws_off_fact;

/* The symbols of a symbolic fact (n_ids of them) as a batch takes them. */
const ws_sym *ws_off_fact_syms(const ws_off_fact *f, ws_sym *out);

typedef struct {
    int64_t step, model_version;
    int n_instr, n_query;
    ws_off_fact *facts; /* instructions, then queries */
} ws_off_step;

void ws_off_step_clear(ws_off_step *s);
/* One logged step from its JSON parts (as the API lists them; labels NULL or
 * JSON null when unlabelled), checked against the model as the daemon checks a
 * request. */
ws_status ws_off_step_parse(ws_model *m, int64_t step, const cJSON *instructions,
                            const cJSON *queries, const cJSON *labels, ws_off_step *out,
                            ws_error *err);

typedef struct {
    char id[WS_STORE_ID_LEN + 1];
    int64_t tenant;
    int64_t n_steps;    /* steps to replay: 1..n_steps */
    int64_t state_step; /* the session's step when listed (the last read, from a file) */
    ws_off_step *steps; /* JSON Lines sessions: all steps; NULL: in the database */
} ws_off_session;

typedef struct {
    ws_store *st;
    ws_model *m;
    const char *model_name;
    ws_off_session *sessions;
    int n, cap;
    long lines_skipped; /* JSON Lines of other models */
} ws_off_corpus;

/* The model's sessions in the database (only `session` when not NULL); each
 * is replayed up to the step it had now, or its first `rollout` steps (> 0). */
ws_status ws_off_corpus_from_db(ws_off_corpus *c, int64_t model_id, const char *session,
                                int64_t rollout, ws_error *err);
/* Appends the sessions of a JSON Lines file (export's format); lines naming
 * another "model" are skipped. Each session's lines must hold steps 1, 2, ... */
ws_status ws_off_corpus_from_jsonl(ws_off_corpus *c, const char *path, int64_t rollout,
                                   ws_error *err);
void ws_off_corpus_free(ws_off_corpus *c);
int64_t ws_off_corpus_steps(const ws_off_corpus *c);

/* Reads one session's steps in order. */
typedef struct {
    const ws_off_session *sess;
    int64_t next;      /* steps handed out so far */
    ws_off_step *page; /* database sessions: the page in hand */
    int n_page, pos;
} ws_off_cursor;

void ws_off_cursor_start(ws_off_cursor *k, const ws_off_session *s);
/* The next step (valid until the next call), or *out = NULL after the last.
 * WS_ERR_NOTFOUND: the session was deleted since it was listed. */
ws_status ws_off_cursor_next(ws_off_corpus *c, ws_off_cursor *k, const ws_off_step **out,
                             ws_error *err);
void ws_off_cursor_free(ws_off_cursor *k);

/* ---- replaying sessions in parallel (offline_replay.c) ------------------ */

/* A trajectory row: one session being replayed. */
typedef struct {
    int session; /* index into the corpus */
    ws_off_cursor cursor;
    const ws_off_step *step; /* the step this batch applies */
    int first, last;         /* it is the session's first / last step */
    ws_recall_facts recall;  /* the session's told facts (the caller's to use) */
} ws_off_row;

typedef struct ws_off_replay ws_off_replay;

/* Appends row r's queries to the batch (right after its instructions). */
typedef ws_status (*ws_off_queries_fn)(void *ctx, ws_off_row *r, ws_batch *b, ws_error *err);
/* Row r's session ended with the state at w (device, one state). */
typedef ws_status (*ws_off_end_fn)(void *ctx, ws_off_row *r, const float *w, ws_error *err);

ws_status ws_off_replay_new(ws_off_replay **out, ws_off_corpus *c, int rows, ws_error *err);
void ws_off_replay_free(ws_off_replay *r);
/* Starts a pass over the sessions order[0..n) (corpus indexes). */
void ws_off_replay_begin(ws_off_replay *r, const int *order, int n);
/* One step for every session in hand: each row applies its session's next
 * logged step (from the learned W_0 at the first) with its instructions and
 * the queries `queries` adds (nullable: none), in one step of `mode` (on the
 * CPU in chunks on the backend's threads, model/exec_pool.h ws_exec_chunks_step);
 * rows whose session ended are reported to `end` (nullable) and take the next
 * session of the pass; a session deleted meanwhile ends unreported.
 * *n_rows = rows stepped: 0 when the pass is over. */
ws_status ws_off_replay_step(ws_off_replay *r, ws_step_mode mode, float loss_scale,
                             ws_off_queries_fn queries, ws_off_end_fn end, void *ctx, int *n_rows,
                             ws_step_result *res, ws_error *err);

/* ---- the commands (offline_export.c, offline_retrain.c, offline_rederive.c) */

typedef struct {
    const char *data_dir, *model, *session;
    const char *store; /* --store: the daemon's data location; NULL: <data_dir>/worldstate.db */
    const char *jsonl[16];
    int n_jsonl;
    int epochs, recall, threads, dry_run;
    int64_t version, rollout; /* 0: current version / whole sessions */
    ws_train_config tc;       /* retrain: batch, update_every, lr, schedule, seed */
} ws_off_options;

/* `worldstate-train export|retrain|rederive ...` (argv[1] is the command):
 * the exit status. ws_off_usage prints their part of the usage (lines that
 * follow train's). */
int ws_off_main(int argc, char **argv);
void ws_off_usage(FILE *f);

/* Opens o->store, else <data-dir>/worldstate.db (must exist). */
ws_status ws_off_open_store(const ws_off_options *o, ws_store **out, ws_error *err);

/* What retrain and rederive work on: the database, the model's row, a CPU
 * backend, a version of the model loaded on it, and the sessions to replay
 * (corpus.st and corpus.m point at the store and the model). */
typedef struct {
    ws_store_model row;
    ws_backend *be;
    int64_t version;
    ws_off_corpus corpus;
} ws_off_work;

/* Opens o->model's version `version` (0: the current one). */
ws_status ws_off_work_open(ws_off_work *w, const ws_off_options *o, int64_t version, ws_error *err);
void ws_off_work_close(ws_off_work *w);

ws_status ws_off_export(const ws_off_options *o, FILE *out, ws_error *err);
ws_status ws_off_retrain(const ws_off_options *o, ws_error *err);
ws_status ws_off_rederive(const ws_off_options *o, ws_error *err);

#endif
