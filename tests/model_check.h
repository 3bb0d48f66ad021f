/* model_check.h — whole-model test helpers shared by test_model_grad.c and the
 * mixer model tests: a tiny config, a ragged batch that exercises every path,
 * random parameters, and the finite-difference check of every parameter tensor.
 *
 * The fixture holds two copies of the model with the same parameters: m on a
 * 2-thread CPU backend runs the steps under test (the analytic gradient, the
 * threaded op paths), fd_m on a 1-thread backend runs the thousands of tiny
 * forward passes of the finite differences — on a loaded 2-core machine every
 * OpenMP team barrier can cost a scheduler tick, which made those 45x slower. */
#ifndef WS_MODEL_CHECK_H
#define WS_MODEL_CHECK_H

#include "model/model.h"
#include "test_util.h"

#define MODEL_CHECK_N_TRAJ 4 /* trajectories in model_check_batch */

typedef struct {
    ws_backend *be, *fd_be;
    ws_model *m, *fd_m;
    ws_exec *x, *fd_x; /* a context on each */
    ws_batch *b;
    float *w_prev, *w_out;       /* on be, MODEL_CHECK_N_TRAJ states */
    float *fd_w_prev, *fd_w_out; /* the same states on fd_be */
    ws_test_rng r;
} model_fixture;

/* d=8, 2 heads, T=3, 2+2 layers, S=3, raw facts of 3 floats. */
ws_model_config model_check_tiny_config(int state_norm);

/* Four ragged trajectories: from W_0 with a raw fact; from a state with no
 * instructions; from a state with instructions and no queries (variant changes
 * only these); and one with both, so every path carries gradient. */
void model_check_batch(ws_batch *b, int variant);

/* Builds both models from c with random parameters (large enough that
 * gradients stand well above float noise), the batch (variant 0) and random
 * previous states. */
void model_fixture_setup(model_fixture *f, const ws_model_config *c);
void model_fixture_teardown(model_fixture *f);

/* One TRAIN step on m, then every tensor's gradient against central
 * differences (step h) of the loss on fd_m: fails when a tensor's
 * ‖g − fd‖/‖fd‖ exceeds tol; returns the worst and prints it under label.
 * Elements whose stencil crosses a ReLU kink (detected from the stencils at h
 * and h/2) are left out and counted: there the finite difference averages two
 * slopes. Every tensor keeps at least one element. */
double model_check_gradients(model_fixture *f, float h, double tol, const char *label);
/* The same on a fresh fixture of config c. */
double model_check_config_gradients(const ws_model_config *c, float h, double tol,
                                    const char *label);

/* Changing trajectory 2's instructions changes no other trajectory's new state
 * and no answer, bit for bit. */
void model_check_isolation(const ws_model_config *c);

#endif
