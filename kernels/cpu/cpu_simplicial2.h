/* cpu_simplicial2.h — the CPU backend's 2-simplicial attention ops
 * (../mixer_ops_simplicial2.h): pair values in cpu_simplicial2_pair.c, the
 * attention and the op table in cpu_simplicial2_attn.c. */
#ifndef WS_CPU_SIMPLICIAL2_H
#define WS_CPU_SIMPLICIAL2_H

#include "kernels/mixer_ops_simplicial2.h"

/* Runs fn over every (segment, head) unit t = segment·n_heads + head on the
 * backend's threads, each call with its own per_thread floats of scratch. */
typedef void (*ws_cpu_s2_unit_fn)(const ws_s2_args *a, const void *ctx, int t, float *scratch);
ws_status ws_cpu_s2_for_units(ws_backend *be, const ws_s2_args *a, size_t per_thread,
                              ws_cpu_s2_unit_fn fn, const void *ctx);

ws_status ws_cpu_s2_pair_forward(ws_backend *be, const ws_s2_args *a);
ws_status ws_cpu_s2_pair_backward(ws_backend *be, const ws_s2_args *a, const ws_s2_grads *g);

extern const struct ws_simplicial_ops ws_cpu_simplicial2_ops;

#endif
