/* facts_stream.h — plays episodes of the `facts` task (entities moving between
 * places, model/tasks) through a live daemon, one session per episode: each
 * step's instructions and queries posted as an ordinary step, with labels when
 * the episode is for training. Shared by the online-learning and retraining
 * tests. Held-out accuracy is the argmax over each entity's places (chance
 * 1/places). Assertion failures fail the calling cmocka test. */
#ifndef WS_FACTS_STREAM_H
#define WS_FACTS_STREAM_H

#include <stdint.h>

#include "model/tasks/task.h"
#include "test_server_util.h"

typedef struct {
    ws_task_params p;
    int steps; /* steps per episode */
    ws_task *task;
    ws_vocab *vocab;
    ws_batch *batch;
} ws_fs;

/* Starts the daemon on a fresh directory (dir: 256 bytes) with
 * --batch-wait-us 0 (one client: no batch to wait for) and creates the tiny
 * model `name` (d=32, 2 heads, T=8, 1+1 layers, 2 symbols per fact, seed 7)
 * with the online-training settings `training` (a JSON object, or NULL for
 * the defaults). */
void ws_fs_start(ws_ts_daemon *d, char *dir, const char *name, const char *training);

/* entities × places worlds of `steps` steps; symbols of at most 2 per fact. */
void ws_fs_init(ws_fs *f, int entities, int places, int steps);
void ws_fs_free(ws_fs *f);

typedef struct {
    int correct;                  /* entity argmaxes right (unlabelled episodes) */
    int64_t min_version, max_version; /* model_version of the answers */
    char session[33];
} ws_fs_result;

/* One episode of world `seed` in a new session of model. */
ws_fs_result ws_fs_episode(ws_fs *f, const ws_ts_daemon *d, const char *model, uint64_t seed,
                           int labelled);
/* Held-out accuracy over n unlabelled episodes of seeds first, first+1, ...;
 * their sessions are deleted again when delete_after (so that they teach
 * nothing to a later retrain). *min_version/max_version (nullable) span the
 * answers' model versions. */
double ws_fs_accuracy(ws_fs *f, const ws_ts_daemon *d, const char *model, uint64_t first, int n,
                      int delete_after, int64_t *min_version, int64_t *max_version);

#endif
