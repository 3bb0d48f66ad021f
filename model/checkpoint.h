/* checkpoint.h — saving and loading a model as a safetensors file.
 *
 * Layout ("worldstate-model-1"):
 *   tensors      every parameter of the model's tensor table, F32, under its table
 *                name and shape ([n] or [rows, cols]);
 *                with optimizer state also "adam.m.<name>" and "adam.v.<name>"
 *                (AdamW first and second moments, same shapes);
 *   __metadata__ "format"      = "worldstate-model-1"
 *                "config"      = JSON object of every ws_model_config field
 *                "vocab"       = JSON array of the named symbols, in id order
 *                "optim_steps" = decimal AdamW step count (with optimizer state only)
 * Files are written atomically (see safetensors.h), so a crash during a save
 * leaves the previous checkpoint intact. */
#ifndef WS_CHECKPOINT_H
#define WS_CHECKPOINT_H

#include "base/ws_status.h"
#include "model.h"

#define WS_CHECKPOINT_FORMAT "worldstate-model-1"

/* Saves m's parameters, configuration and vocabulary (and, with_optim != 0, its
 * AdamW moments and step count) to path. Refuses (WS_ERR_INVALID, nothing
 * written) a model with a non-finite parameter, so that a diverged model never
 * replaces a good checkpoint; and a vocabulary symbol that is not valid UTF-8,
 * which the JSON header cannot hold. I/O failures give WS_ERR_IO. */
ws_status ws_checkpoint_save(ws_model *m, const char *path, int with_optim, ws_error *err);

/* Loads a checkpoint into a new model on backend be. The file is validated
 * completely before *out is set: safetensors structure, format tag,
 * configuration, every tensor present with its exact shape, dtype F32, no
 * unknown tensors, finite values, the vocabulary, and the optimizer state when
 * present (both moments for every tensor plus optim_steps, or none of it).
 * Corrupt or mismatching files give WS_ERR_FORMAT naming the offending tensor or
 * key; unreadable files WS_ERR_IO. On failure *out is NULL. */
ws_status ws_checkpoint_load(ws_model **out, const char *path, ws_backend *be, ws_error *err);
/* ws_checkpoint_load that first asks admit (ctx, the file's config) whether to
 * build the model at all: its refusal is returned as it is, before the model's
 * memory is allocated. */
typedef ws_status ws_checkpoint_admit_fn(void *ctx, const ws_model_config *cfg, ws_error *err);
ws_status ws_checkpoint_load_admit(ws_model **out, const char *path, ws_backend *be,
                                   ws_checkpoint_admit_fn *admit, void *ctx, ws_error *err);

#endif
