/* params.h — the named parameter table of a model configuration (internal). */
#ifndef WS_PARAMS_H
#define WS_PARAMS_H

#include "model.h"

/* Fills table (may be NULL to count) and returns the number of tensors; *total
 * receives the number of floats. Order and names are the checkpoint format. */
int ws_params_layout(const ws_model_config *c, ws_tensor_info *table, size_t *total);

#endif
