/* task_rig.h — what the task tests share: a vocabulary, a batch and one task
 * (a "rig"), one step of a world into a cleared batch, the symbols a step put
 * in it, and a step's whole output as bytes for determinism checks. Every
 * failure is a cmocka assertion. */
#ifndef WS_TEST_TASK_RIG_H
#define WS_TEST_TASK_RIG_H

#include <stddef.h>
#include <stdint.h>

#include "model/batch.h"
#include "model/model.h"
#include "model/tasks/task.h"

#define MNIST_DIR "/usr/share/datasets/fashion-mnist"

/* A vocabulary and a batch for a default model (S = 4), and one task. */
typedef struct {
    ws_vocab *v;
    ws_batch *b;
    ws_task *t;
    ws_query_info *info;
} rig;

/* Fails the test with err's message unless st is WS_OK. */
void rig_check(ws_status st, const ws_error *err);
/* A task's default parameters (the name must be known). */
ws_task_params rig_params(const char *name);
void rig_open(rig *r, const ws_task_params *p, int n_slots);
void rig_close(rig *r);
/* ws_task_new must refuse p with want, a message, and a NULL task. */
void rig_expect_new_fails(const ws_task_params *p, ws_vocab *v, ws_status want);
/* One step of a slot into a cleared batch (one trajectory). */
void rig_step(rig *r, int slot);

/* Instruction / query i's symbol ids, and how many of them are symbols. */
const int32_t *rig_instr_ids(const rig *r, int i);
const int32_t *rig_query_ids(const rig *r, int i);
int rig_n_ids(const rig *r, const int32_t *ids);
/* The number after a symbol's prefix ("e12" -> 12), checking the prefix. */
int rig_sym_num(const rig *r, int32_t id, const char *prefix);
int rig_is_sym(const rig *r, int32_t id, const char *sym);

/* Everything a step put in the batch and the info array, as one byte string. */
typedef struct {
    unsigned char *p;
    size_t n;
} rig_blob;
void rig_snapshot(const rig *r, rig_blob *o);

#endif
