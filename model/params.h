/* params.h — the named parameter table of a model configuration (internal).
 *
 * One pass over the layout both builds the table and resolves every offset the
 * forward and backward passes use (model_internal.h ws_param_offsets): each
 * ws_layout_add* returns the offset of what it registered, so nothing is looked
 * up by name while the model runs. */
#ifndef WS_PARAMS_H
#define WS_PARAMS_H

#include "model.h"

/* Offsets (in floats) into the parameter buffer; the same offsets address the
 * gradient buffer. A map without bias has b == WS_NO_PARAM. */
#define WS_NO_PARAM ((size_t)-1)
typedef struct { size_t g, b; } ws_ln_off;
typedef struct { size_t w, b; } ws_lin_off;

struct ws_param_offsets_s;

/* Fills table (may be NULL to count) and the offsets, and returns the number of
 * tensors; *total (nullable) receives the number of floats. Order and names are
 * the checkpoint format. off's per-layer arrays must hold the config's layers. */
int ws_params_layout(const ws_model_config *c, ws_tensor_info *table, size_t *total,
                     struct ws_param_offsets_s *off);

/* The builder the layout (and each mixer's layout hook) registers tensors with. */
typedef struct {
    ws_tensor_info *table; /* NULL: only count */
    int n;
    size_t total;
} ws_param_layout;

/* A tensor [rows, cols] (rows = 0: a vector of cols) that starts as init says
 * (ws_init_kind; WS_INIT_FAN_IN: a linear weight [out, in], weight-decayed). */
size_t ws_layout_add(ws_param_layout *L, const char *name, int rows, int cols,
                     ws_init_kind init);
/* "<prefix>.g" (ones) and "<prefix>.b" (zeros), both [d] */
ws_ln_off ws_layout_add_ln(ws_param_layout *L, const char *prefix, int d);
/* "<prefix>.w" [out, in] (fan-in init, decay) and "<prefix>.b" [out] (zeros) */
ws_lin_off ws_layout_add_linear(ws_param_layout *L, const char *prefix, int out, int in);
/* "<prefix>.w" [out, in] alone (fan-in init, decay; b = WS_NO_PARAM) */
ws_lin_off ws_layout_add_weight(ws_param_layout *L, const char *prefix, int out, int in);

#endif
