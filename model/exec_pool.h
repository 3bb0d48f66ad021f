/* exec_pool.h — one pass over a batch's trajectories by several threads at once,
 * each running whole chunks of trajectories through the model.
 *
 * Why: an op shared among threads ends at a barrier, some 70 of them a serving
 * step, and on a machine whose other core is busy (the daemon's HTTP and commit
 * threads) every barrier waits for the thread that was preempted. Chunks need no
 * barrier until the pass ends, and a chunk of a few trajectories keeps its
 * activations in the core's caches. A trajectory's rows are computed alike in
 * any chunk (the ops are row-deterministic), so a chunk's thread changes no bit.
 * A training pass (ws_exec_chunks_step, the trainer's: model/trainer.h) runs its
 * chunks alike, each thread's gradients into a buffer of its own, added to the
 * model's once the pass ends. On 2 cores, against the batch whole with its ops
 * on the same threads: worldstate-train (task memory, the shipped model, batch
 * 256) 4,400 against 2,250 trajectory steps/s on 2 threads, 2,310 against
 * 1,750 on 1 (the chunks' caches alone); bench_model (d = 128) 10.75 against
 * 7.84 train steps/s on 2 threads.
 *
 * Thread 0 is the caller's; the others are a crew's (ws_exec_crew), started
 * with it and asleep between passes, and one crew serves every pool made on it
 * (the engine has one for all its models: it runs one pass at a time, so a
 * daemon has cores - 1 helper threads however many models it serves). Each
 * crew thread has its own CPU backend (its scratch and symbol codes are per
 * backend). A pool holds, per thread, a context and a batch, and past the
 * first a view of the model on that thread's backend: the same parameters and
 * vocabulary, never copied. On another backend (CUDA), or without a crew, a
 * pool has one thread. */
#ifndef WS_EXEC_POOL_H
#define WS_EXEC_POOL_H

#include "model.h"

typedef struct ws_exec_crew ws_exec_crew;
typedef struct ws_exec_pool ws_exec_pool;

/* A crew for passes of `threads` threads, the caller's included: threads - 1
 * helpers. It must outlive every pool made on it. */
ws_status ws_exec_crew_new(ws_exec_crew **out, int threads, ws_error *err);
void ws_exec_crew_free(ws_exec_crew *c);

/* Builds rows [r0, r1) of the pass into b and runs them on x; err per thread. */
typedef ws_status (*ws_exec_chunk_fn)(void *ctx, ws_exec *x, ws_batch *b, int r0, int r1,
                                      ws_error *err);

/* A pool on m, which must outlive it, with the crew's threads (crew NULL, or m
 * not on the CPU: one thread); thread 0 runs on m itself. */
ws_status ws_exec_pool_new(ws_exec_pool **out, ws_model *m, ws_exec_crew *crew, ws_error *err);
void ws_exec_pool_free(ws_exec_pool *p);
/* The most threads a pass can have (1 unless the model's backend is the CPU). */
int ws_exec_pool_threads(const ws_exec_pool *p);
/* The most trajectories a CPU chunk takes: the activations of a few stay in the
 * core's caches, those of a whole batch of 64 do not (the default model on one
 * thread, when a pass took its batch whole: 9,800 steps/s at batch 8, 7,400 at
 * 64). Rows are computed alike in any chunk, so this changes no bits. */
#define WS_EXEC_POOL_CHUNK 8

/* The chunk of a pass of n_rows on `threads` threads: on the CPU at most
 * WS_EXEC_POOL_CHUNK rows, fewer where that gives each thread some; on another
 * backend (a GPU) the pass whole. */
int ws_exec_pool_chunk(const ws_exec_pool *p, int n_rows, int threads);

/* Calls fn on chunks of `chunk` rows of n_rows, claimed in order by `threads`
 * threads (at most the pool's); one thread runs them in order on the caller's
 * thread with the backend's thread count as the caller set it, several run
 * each op on one thread. The first failure is returned, and no chunk starts
 * after it. Passes of several threads on one crew run one at a time (one that
 * comes while another runs waits for it). */
ws_status ws_exec_pool_run(ws_exec_pool *p, int n_rows, int chunk, int threads, ws_exec_chunk_fn fn,
                           void *ctx, ws_error *err);

/* A batch of up to `rows` trajectories in chunks of WS_EXEC_POOL_CHUNK rows,
 * each chunk a batch of its own, run by a pool on a crew of `threads` of its
 * own (the trainer's, retrain's and rederive's; model/trainer.h). */
typedef struct ws_exec_chunks ws_exec_chunks;
ws_status ws_exec_chunks_new(ws_exec_chunks **out, ws_model *m, int rows, int threads,
                             ws_error *err);
void ws_exec_chunks_free(ws_exec_chunks *k);
/* Empties every chunk's batch. */
void ws_exec_chunks_clear(ws_exec_chunks *k);
/* The batch that row (0 .. rows - 1) is built in: rows are added in order. */
ws_batch *ws_exec_chunks_batch(ws_exec_chunks *k, int row);
/* One step of rows [0, n_rows) as built, from and into the states at w (one
 * per row), as ws_exec_step would run the one batch of them all. Forward
 * (any mode but WS_STEP_TRAIN): chunks claimed in order by the threads, the
 * same bits as the whole batch. WS_STEP_TRAIN, data-parallel: the chunks in
 * contiguous, equal shares, each share's chunks in order on one thread, its
 * ops on one thread, into gradients of its own, added to the model's in
 * thread order once the pass ends; each chunk's loss weighted by its share of
 * all the labels, so the gradients are the whole batch's up to rounding, the
 * same bits for the same threads whichever core ran which share. res
 * (nullable): the chunks' results summed, the loss the mean over all labels.
 * After a failure the model's gradients are undefined. */
ws_status ws_exec_chunks_step(ws_exec_chunks *k, int n_rows, float *w, ws_step_mode mode,
                              float loss_scale, ws_step_result *res, ws_error *err);

#endif
