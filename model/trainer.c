/* trainer.c — the truncated-gradient training loop over task trajectory slots. */
#include "trainer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/ws_clock.h"
#include "base/ws_rng.h"
#include "exec_pool.h"

struct ws_trainer {
    ws_exec *x;
    ws_model *m; /* x's */
    ws_task *task;
    ws_train_config tc;
    ws_batch *batch;
    float *states;      /* device [batch, T, d] */
    int *age, *lifetime;
    uint64_t *episodes; /* per slot, to derive fresh world seeds */
    ws_exec_chunks *chunks; /* tc.threads >= 1 on the CPU: the slots in chunks */
    uint64_t rng;
    long iter;
    double t0;
};

ws_train_config ws_train_config_default(void)
{
    /* Fixed 8-step rollouts by default: the pool (--lifetime pool) held facts 8×8
     * at 100% to 10,000 steps against 99.88% for fixed rollouts on the same 8000
     * iterations, but on small budgets (the CI tests: 2000-4000 iterations) it
     * trained worse, having fewer fresh trajectories to learn the first step from. */
    return (ws_train_config){.batch = 32, .rollout = 8, .lifetime = WS_LIFETIME_FIXED,
                             .max_age = 256, .update_every = 1, .lr = 1e-3f,
                             .min_lr_ratio = 0.1f, .warmup = 100, .iters = 2000, .seconds = 0,
                             .weight_decay = 0.01f, .clip_norm = 1.0f, .seed = 1};
}

/* splitmix64's output for state z: seeds and a stream that feeds back its
 * own output (uniform01). */
static uint64_t mix(uint64_t z) { return ws_mix64(z + WS_RNG_GOLDEN); }

static double uniform01(uint64_t *s)
{
    *s = mix(*s);
    return (*s >> 11) * (1.0 / 9007199254740992.0);
}

static double progress(const ws_trainer *t)
{
    double p = 0.0;
    if (t->tc.iters > 0) p = (double)t->iter / (double)t->tc.iters;
    if (t->tc.seconds > 0) p = fmax(p, (ws_clock_mono_s() - t->t0) / t->tc.seconds);
    return fmin(p, 1.0);
}

/* Fixed: the rollout length. Pool: log-uniform in [1, A], A growing with progress. */
static int draw_lifetime(ws_trainer *t)
{
    if (t->tc.lifetime == WS_LIFETIME_FIXED) return t->tc.rollout;
    double a = t->tc.rollout + (t->tc.max_age - t->tc.rollout) * progress(t);
    int life = (int)floor(exp(uniform01(&t->rng) * log(a + 1.0)));
    return life < 1 ? 1 : life;
}

ws_status ws_trainer_new(ws_trainer **out, ws_exec *x, const ws_task_params *task,
                         const ws_train_config *tc, ws_error *err)
{
    *out = NULL;
    if (tc->batch < 1 || tc->rollout < 1 || tc->update_every < 1 ||
        (tc->lifetime == WS_LIFETIME_POOL && tc->max_age < tc->rollout) ||
        (tc->iters <= 0 && tc->seconds <= 0) || !(tc->lr > 0))
        return ws_error_set(err, WS_ERR_INVALID,
                            "trainer: need batch, rollout, update_every >= 1, lr > 0, a budget, "
                            "and max_age >= rollout for the pool");
    ws_trainer *t = calloc(1, sizeof *t);
    if (!t) return ws_error_set(err, WS_ERR_NOMEM, "trainer: out of memory");
    t->x = x;
    t->m = ws_exec_model(x);
    ws_model *m = t->m;
    t->tc = *tc;
    t->rng = mix(tc->seed ^ 0x5EEDULL);
    t->t0 = ws_clock_mono_s();
    ws_status st = ws_task_new(&t->task, task, tc->batch, ws_model_vocab(m), err);
    if (st == WS_OK) st = ws_task_check_model(t->task, ws_model_config_of(m), err);
    if (st != WS_OK) goto fail;
    st = ws_batch_new(&t->batch, ws_model_config_of(m));
    if (st == WS_OK) st = ws_model_state_alloc(m, tc->batch, &t->states, err);
    t->age = calloc((size_t)tc->batch, sizeof *t->age);
    t->lifetime = calloc((size_t)tc->batch, sizeof *t->lifetime);
    t->episodes = calloc((size_t)tc->batch, sizeof *t->episodes);
    if (st != WS_OK || !t->age || !t->lifetime || !t->episodes) {
        st = ws_error_set(err, st == WS_OK ? WS_ERR_NOMEM : st, "trainer: out of memory");
        goto fail;
    }
    if (tc->threads >= 1 && !strcmp(ws_model_backend(m)->ops->name, "cpu"))
        st = ws_exec_chunks_new(&t->chunks, m, tc->batch, tc->threads, err);
    if (st != WS_OK) goto fail;
    /* Stagger first lifetimes so that every age is present in every batch. */
    for (int i = 0; i < tc->batch; i++)
        t->lifetime[i] = tc->lifetime == WS_LIFETIME_FIXED ? 1 + i % tc->rollout
                                                            : draw_lifetime(t);
    *out = t;
    return WS_OK;
fail:
    ws_trainer_free(t);
    return st;
}

void ws_trainer_free(ws_trainer *t)
{
    if (!t) return;
    if (t->states) ws_backend_release(ws_model_backend(t->m), t->states);
    ws_exec_chunks_free(t->chunks);
    ws_batch_free(t->batch);
    ws_task_free(t->task);
    free(t->age);
    free(t->lifetime);
    free(t->episodes);
    free(t);
}

void ws_trainer_set_iter(ws_trainer *t, long iter) { t->iter = iter; }

float ws_train_lr(const ws_train_config *c, long iter, double progress)
{
    if (c->warmup > 0 && iter < c->warmup) return c->lr * (float)(iter + 1) / c->warmup;
    double lo = c->lr * c->min_lr_ratio;
    return (float)(lo + (c->lr - lo) * 0.5 * (1.0 + cos(M_PI * progress)));
}

ws_status ws_train_adamw(ws_model *m, const ws_train_config *c, float lr, float *grad_norm,
                         ws_error *err)
{
    ws_optim_config oc = ws_optim_config_default();
    oc.lr = lr;
    oc.weight_decay = c->weight_decay;
    oc.clip_norm = c->clip_norm;
    return ws_model_adamw_step(m, &oc, grad_norm, err);
}

/* Slot i's next step into b: a fresh world first when its trajectory ended. */
static ws_status add_slot(ws_trainer *t, int i, ws_batch *b, ws_error *err)
{
    int fresh = t->age[i] == 0;
    if (fresh)
        WS_TRY(ws_task_reset(t->task, i, mix(t->tc.seed * 1000003ULL + i) ^ mix(++t->episodes[i])));
    WS_TRY(ws_batch_begin_traj(b, fresh));
    return ws_task_step(t->task, i, b, NULL, err);
}

ws_status ws_trainer_accumulate(ws_trainer *t, float scale, ws_step_result *res, ws_error *err)
{
    if (t->chunks) { /* data-parallel (exec_pool.h) */
        ws_exec_chunks_clear(t->chunks);
        for (int i = 0; i < t->tc.batch; i++)
            WS_TRY(add_slot(t, i, ws_exec_chunks_batch(t->chunks, i), err));
        WS_TRY(
            ws_exec_chunks_step(t->chunks, t->tc.batch, t->states, WS_STEP_TRAIN, scale, res, err));
    } else {
        ws_batch_clear(t->batch);
        for (int i = 0; i < t->tc.batch; i++) WS_TRY(add_slot(t, i, t->batch, err));
        WS_TRY(ws_exec_step(t->x, t->batch, t->states, t->states, WS_STEP_TRAIN, scale, NULL, res,
                            err));
    }
    for (int i = 0; i < t->tc.batch; i++) {
        if (++t->age[i] >= t->lifetime[i]) {
            t->age[i] = 0;
            t->lifetime[i] = draw_lifetime(t);
        }
    }
    return WS_OK;
}

ws_status ws_trainer_iterate(ws_trainer *t, ws_train_stats *stats, ws_error *err)
{
    if (progress(t) >= 1.0) return ws_error_set(err, WS_ERR_CONFLICT, "trainer: budget spent");
    ws_step_result res;
    WS_TRY(ws_trainer_accumulate(t, 1.0f / (float)t->tc.update_every, &res, err));
    stats->lr = ws_train_lr(&t->tc, t->iter, progress(t));
    t->iter++;
    if (t->iter % t->tc.update_every == 0)
        WS_TRY(ws_train_adamw(t->m, &t->tc, stats->lr, &stats->grad_norm, err));
    stats->iter = t->iter;
    stats->optim_steps = ws_model_optim_steps(t->m);
    stats->elapsed = ws_clock_mono_s() - t->t0;
    stats->progress = progress(t);
    stats->loss = res.loss;
    stats->accuracy = res.n_labelled ? (float)res.n_correct / res.n_labelled : 0.0f;
    stats->steps_per_s = stats->elapsed > 0 ? t->iter * (double)t->tc.batch / stats->elapsed : 0;
    return WS_OK;
}
