/* versions.h — model versions on disk and in SQLite, shared by worldstated and
 * worldstate-train: the checkpoint layout, loading a version with the model's
 * vocabulary, and publishing a new version beside other writers.
 *
 * Layout: <data-dir>/models/<name>-v<version>.safetensors, one file per
 * version, never rewritten once recorded. SQLite is the authority on versions
 * (models.current_version) and on the vocabulary (a checkpoint's vocabulary is
 * a prefix of the model's vocab table). A version's row records its path
 * relative to the data directory ("models/<name>-v<version>.safetensors", so a
 * data directory works wherever it is and however it was named) and the
 * file's SHA-256, checked at every load. */
#ifndef WS_SRV_VERSIONS_H
#define WS_SRV_VERSIONS_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"
#include "storage/storage.h"

/* Every model's id, name, current version and training settings (owned
 * copies: a listing's callback may not call into the store). */
typedef struct {
    int64_t id, version;
    char name[WS_STORE_NAME_MAX + 1];
    char *training;
} ws_srv_model_row;
typedef struct {
    ws_srv_model_row *rows;
    int n, cap;
} ws_srv_model_rows;
ws_status ws_srv_model_rows_read(ws_store *st, ws_srv_model_rows *out, ws_error *err);
void ws_srv_model_rows_free(ws_srv_model_rows *r);

/* Notes of a version 1, which say where a model's parameters began (its
 * "origin" in the API): random ones (POST /v1/models, or the default model of a
 * build without a shipped one), the checkpoint shipped in worldstated, or one
 * imported through POST /v1/models/{name}/import (which also notes a new
 * version it makes so). */
#define WS_SRV_NOTE_CREATED  "created"
#define WS_SRV_NOTE_SHIPPED  "shipped"
#define WS_SRV_NOTE_IMPORTED "imported"
/* "random", "shipped", "imported", or "unknown" for the note of a version 1. */
const char *ws_srv_origin_of_note(const char *note);

/* 1 when both configurations are the same; else 0 with the first field that
 * differs described in why[cap], naming a and b ("d is 64 in the checkpoint,
 * 128 in the model"). */
int ws_srv_config_diff(const ws_model_config *a, const char *a_name, const ws_model_config *b,
                       const char *b_name, char *why, size_t cap);

/* The path a version's row records: "models/<name>-v<version>.safetensors". */
void ws_srv_ckpt_relpath(const char *name, int64_t version, char *out, size_t cap);
/* Where a recorded path lies: a relative one under data_dir; an absolute one
 * (rows of builds before relative paths) as it is. */
void ws_srv_ckpt_resolve(const char *data_dir, const char *recorded, char *out, size_t cap);
/* The file of a version: data_dir + its relative path. */
void ws_srv_ckpt_path(const char *data_dir, const char *name, int64_t version, char *out,
                      size_t cap);
/* The SHA-256 of the file at path, as 64 lowercase hex digits. */
ws_status ws_srv_file_sha256(const char *path, char hex[65], ws_error *err);
/* Records version `version` of the model, whose checkpoint is already written
 * at its path (ws_srv_ckpt_path), with the file's SHA-256 (inside the
 * caller's transaction: ws_store_version_add). sha256: the file's, when the
 * writer computed it (64 hex digits); NULL: the file is read here. */
ws_status ws_srv_version_record(ws_store *st, const char *data_dir, const char *name,
                                int64_t model_id, int64_t version, const char *sha256,
                                const char *note, ws_error *err);

/* Loads the recorded version `version` of model `model_id` on be, and extends
 * its vocabulary with the model's symbols from SQLite. The file must be the one
 * recorded (its SHA-256) and of the model's recorded configuration, else
 * WS_ERR_FORMAT saying which. WS_ERR_NOTFOUND for an unrecorded version; the
 * checkpoint's own errors otherwise (a file removed by retention gives
 * WS_ERR_IO). */
ws_status ws_srv_version_load(ws_store *st, const char *data_dir, int64_t model_id, int64_t version,
                              ws_backend *be, ws_model **out, ws_error *err);

/* Publishes m's parameters, vocabulary and AdamW state as the model's next
 * version N and makes it current, in one SQLite write transaction: N = the
 * greatest recorded version + 1, the checkpoint written atomically to N's path,
 * N recorded. Because the file is written under the database's write lock, two
 * publishers (the daemon's online training, an offline retrain) never write
 * the same path, and a recorded path always holds the version recorded.
 * expect_prev >= 0: publish only if the greatest version is still expect_prev,
 * else WS_ERR_CONFLICT and nothing written (someone else published first);
 * -1: publish on top of whatever is there. *version_out = N. The lock is held
 * for the save (milliseconds to a few hundred for large models); writers of
 * other processes wait for it (WS_STORE_BUSY_TIMEOUT_MS). */
ws_status ws_srv_version_publish(ws_store *st, const char *data_dir, const char *name,
                                 int64_t model_id, ws_model *m, int64_t expect_prev,
                                 const char *note, int64_t *version_out, ws_error *err);
/* ws_srv_version_publish that also records, in the same transaction, the
 * symbols of m's vocabulary from id vocab_from on (an imported checkpoint may
 * name symbols the model has not stored yet); vocab_from < 0: none. */
ws_status ws_srv_version_publish_vocab(ws_store *st, const char *data_dir, const char *name,
                                       int64_t model_id, ws_model *m, int64_t expect_prev,
                                       const char *note, int vocab_from, int64_t *version_out,
                                       ws_error *err);
/* Extends m's vocabulary with the model's symbols in SQLite that it lacks
 * (WS_ERR_FORMAT when the two disagree on an id m has). */
ws_status ws_srv_vocab_extend(ws_store *st, int64_t model_id, ws_model *m, ws_error *err);
/* Records m's symbols from id `from` on in the model's vocabulary (inside the
 * caller's transaction). */
ws_status ws_srv_vocab_store(ws_store *st, int64_t model_id, ws_model *m, int from, ws_error *err);

#endif
