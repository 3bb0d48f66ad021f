/* params.h — the named parameter table of a model configuration (internal). */
#ifndef WS_PARAMS_H
#define WS_PARAMS_H

#include "model.h"

/* Fills table (may be NULL to count) and returns the number of tensors; *total
 * receives the number of floats. Order and names are the checkpoint format. */
int ws_params_layout(const ws_model_config *c, ws_tensor_info *table, size_t *total);

/* The builder the layout (and each mixer's layout hook) registers tensors with. */
typedef struct {
    ws_tensor_info *table; /* NULL: only count */
    int n;
    size_t total;
} ws_param_layout;

/* A tensor [rows, cols] (rows = 0: a vector of cols); decay: AdamW weight decay
 * applies and the generic init draws N(0, 1/cols) (linear weights [out, in]). */
void ws_layout_add(ws_param_layout *L, const char *name, int rows, int cols, int decay);
/* "<prefix>.g" and "<prefix>.b", both [d] */
void ws_layout_add_ln(ws_param_layout *L, const char *prefix, int d);
/* "<prefix>.w" [out, in] (decay) and "<prefix>.b" [out] */
void ws_layout_add_linear(ws_param_layout *L, const char *prefix, int out, int in);

#endif
