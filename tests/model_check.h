/* model_check.h — whole-model checks shared by the model tests (test_model_grad*.c):
 * a tiny config, large random parameters, a standard ragged batch, a fixture that
 * holds a model with previous states, and the finite-difference check of every
 * parameter tensor's gradient and the ragged-batch isolation check. */
#ifndef WS_MODEL_CHECK_H
#define WS_MODEL_CHECK_H

#include "model.h"
#include "test_util.h"

/* d 8, 2 heads, 3 state tokens, 2 + 2 layers, facts of up to 3 symbols, 8 ids, raw width 3. */
ws_model_config ws_mc_tiny_config(int state_norm);

/* Random parameters large enough that gradients are well above float noise:
 * LN gains 1 + 0.2·N(0,1), everything else 0.4·N(0,1). */
void ws_mc_randomize(ws_model *m, ws_test_rng *r);

/* Four ragged trajectories: 0 from W_0 with a symbolic and a raw instruction and
 * three queries; 1 from a state with no instructions; 2 from a state with four
 * instructions and no queries (variant changes only these); 3 from a state with
 * both — so every path carries gradient. 6 labelled queries. */
void ws_mc_build_batch(ws_batch *b, int variant);

typedef struct {
    ws_backend *be;
    ws_model *m;
    ws_batch *b;
    float *w_prev, *w_out; /* 4 states each; w_prev random N(0, 1) */
    ws_test_rng r;
} ws_mc_fixture;

void ws_mc_setup(ws_mc_fixture *f, const ws_model_config *c);
void ws_mc_teardown(ws_mc_fixture *f);
/* The loss of an inference step on the fixture's batch and states. */
double ws_mc_loss(ws_mc_fixture *f);

/* One training step, then every parameter tensor's gradient against central
 * differences (step 1e-2) of the loss; fails on a relative error above tol and
 * prints the worst tensor under label. */
void ws_mc_check_all_gradients(const ws_model_config *c, const char *label, double tol);

/* Changing trajectory 2's instructions changes no other trajectory's new state
 * and no answer, bit for bit. */
void ws_mc_check_isolation(const ws_model_config *c);

#endif
