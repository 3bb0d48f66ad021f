/* history.c — the bounded, in-memory history the web console charts (engine.h):
 * per model, a point for each online-training update (its loss, and the
 * publication gate's scores when it was gated); per session, the per-token
 * change norm ||W_t[i] - W_{t-1}[i]|| of its newest steps. Written on the
 * engine thread (changes) and the training threads (updates), read by the HTTP threads, under a lock of its own so that a
 * reader never waits for a batch. Nothing of it is stored: it starts empty
 * with the daemon, and what falls out of the bounds is gone. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_impl.h"
#include "base/ws_clock.h"

typedef struct {
    int64_t model_id;
    int64_t updates, decisions; /* as of the newest point: a new update, a new gate decision */
    int n, head;                /* points held; the next one's slot */
    ws_engine_train_point p[WS_ENGINE_HISTORY_POINTS];
} train_ring;

typedef struct {
    char session[WS_STORE_ID_LEN + 1]; /* "" unused */
    uint64_t touched;                  /* the least recently stepped session is replaced */
    int n_state, n, head;
    int64_t step[WS_ENGINE_CHANGE_STEPS], version[WS_ENGINE_CHANGE_STEPS];
    float *norm; /* WS_ENGINE_CHANGE_STEPS rows of n_state */
} change_ring;

struct ws_eng_history {
    pthread_mutex_t mu;
    train_ring **models;
    int n_models;
    change_ring sessions[WS_ENGINE_CHANGE_SESSIONS];
    uint64_t tick;
};

ws_status ws_eng_history_new(ws_eng_history **out, ws_error *err)
{
    ws_eng_history *h = calloc(1, sizeof *h);
    if (!h || pthread_mutex_init(&h->mu, NULL) != 0) {
        free(h);
        return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    }
    *out = h;
    return WS_OK;
}

void ws_eng_history_free(ws_eng_history *h)
{
    if (!h) return;
    for (int i = 0; i < h->n_models; i++) free(h->models[i]);
    for (int i = 0; i < WS_ENGINE_CHANGE_SESSIONS; i++) free(h->sessions[i].norm);
    free(h->models);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

/* The model's ring, made on first use (mu held); NULL when out of memory. */
static train_ring *ring_of(ws_eng_history *h, int64_t model_id, int make)
{
    for (int i = 0; i < h->n_models; i++)
        if (h->models[i]->model_id == model_id) return h->models[i];
    if (!make) return NULL;
    train_ring **grown = realloc(h->models, sizeof *grown * (size_t)(h->n_models + 1));
    if (!grown) return NULL;
    h->models = grown;
    train_ring *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->model_id = model_id;
    return h->models[h->n_models++] = r;
}

void ws_eng_history_train(ws_eng_history *h, int64_t model_id, int64_t version,
                          const ws_online_stats *st, const ws_engine_gate_info *gate)
{
    pthread_mutex_lock(&h->mu);
    train_ring *r = ring_of(h, model_id, 1);
    int64_t decisions = gate->published + gate->rejected;
    if (r && st->updates != r->updates) {
        ws_engine_train_point *p = &r->p[r->head];
        *p = (ws_engine_train_point){.time_ms = ws_clock_wall_ms(),
                                     .version = version,
                                     .updates = st->updates,
                                     .examples_trained = st->examples_trained,
                                     .loss = st->last_loss,
                                     .gated = decisions != r->decisions && gate->has_last};
        if (p->gated) {
            p->published = gate->last.published;
            p->served = gate->last.served;
            p->candidate = gate->last.candidate;
        }
        r->head = (r->head + 1) % WS_ENGINE_HISTORY_POINTS;
        if (r->n < WS_ENGINE_HISTORY_POINTS) r->n++;
    }
    if (r) r->updates = st->updates, r->decisions = decisions;
    pthread_mutex_unlock(&h->mu);
}

void ws_eng_history_forget_model(ws_eng_history *h, int64_t model_id)
{
    pthread_mutex_lock(&h->mu);
    for (int i = 0; i < h->n_models; i++) {
        if (h->models[i]->model_id != model_id) continue;
        free(h->models[i]);
        h->models[i] = h->models[--h->n_models];
        break;
    }
    pthread_mutex_unlock(&h->mu);
}

int ws_engine_training_history(ws_engine *e, int64_t model_id, ws_engine_train_point *out)
{
    ws_eng_history *h = e->hist;
    pthread_mutex_lock(&h->mu);
    train_ring *r = ring_of(h, model_id, 0);
    int n = r ? r->n : 0;
    for (int i = 0; i < n; i++)
        out[i] = r->p[(r->head - n + i + WS_ENGINE_HISTORY_POINTS) % WS_ENGINE_HISTORY_POINTS];
    pthread_mutex_unlock(&h->mu);
    return n;
}

/* The session's ring, or the least recently stepped one emptied for it (mu held). */
static change_ring *change_slot(ws_eng_history *h, const char *session)
{
    change_ring *old = &h->sessions[0];
    for (int i = 0; i < WS_ENGINE_CHANGE_SESSIONS; i++) {
        change_ring *c = &h->sessions[i];
        if (!strcmp(c->session, session)) return c;
        if (c->touched < old->touched) old = c;
    }
    snprintf(old->session, sizeof old->session, "%s", session);
    old->n = old->head = 0;
    return old;
}

void ws_eng_history_change(ws_eng_history *h, const char *session, int64_t step, int64_t version,
                           int n_state, int d, const float *prev, const float *next)
{
    pthread_mutex_lock(&h->mu);
    change_ring *c = change_slot(h, session);
    c->touched = ++h->tick;
    if (!c->norm || c->n_state != n_state) { /* a first use, or another model's shape */
        free(c->norm);
        c->norm = malloc(sizeof(float) * WS_ENGINE_CHANGE_STEPS * (size_t)n_state);
        c->n_state = n_state;
        c->n = c->head = 0;
    }
    if (!c->norm) { /* out of memory: the session has no history */
        c->session[0] = '\0';
        pthread_mutex_unlock(&h->mu);
        return;
    }
    float *row = c->norm + (size_t)c->head * (size_t)n_state;
    for (int i = 0; i < n_state; i++) {
        double sum = 0;
        for (int k = 0; k < d; k++) {
            double x = (double)next[(size_t)i * d + k] - (double)prev[(size_t)i * d + k];
            sum += x * x;
        }
        row[i] = (float)sqrt(sum);
    }
    c->step[c->head] = step;
    c->version[c->head] = version;
    c->head = (c->head + 1) % WS_ENGINE_CHANGE_STEPS;
    if (c->n < WS_ENGINE_CHANGE_STEPS) c->n++;
    pthread_mutex_unlock(&h->mu);
}

ws_status ws_engine_state_changes_of(ws_engine *e, const char *session,
                                     ws_engine_state_changes *out, ws_error *err)
{
    ws_eng_history *h = e->hist;
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&h->mu);
    const change_ring *c = NULL;
    for (int i = 0; i < WS_ENGINE_CHANGE_SESSIONS && !c; i++)
        if (h->sessions[i].session[0] && !strcmp(h->sessions[i].session, session))
            c = &h->sessions[i];
    ws_status s = WS_OK;
    if (c && c->n) {
        out->norm = malloc(sizeof(float) * (size_t)c->n * (size_t)c->n_state);
        if (!out->norm) s = ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; s == WS_OK && c && i < c->n; i++) {
        int slot = (c->head - c->n + i + WS_ENGINE_CHANGE_STEPS) % WS_ENGINE_CHANGE_STEPS;
        out->step[i] = c->step[slot];
        out->version[i] = c->version[slot];
        memcpy(out->norm + (size_t)i * c->n_state, c->norm + (size_t)slot * c->n_state,
               sizeof(float) * (size_t)c->n_state);
    }
    if (s == WS_OK && c) out->n = c->n, out->n_state = c->n_state;
    pthread_mutex_unlock(&h->mu);
    return s;
}
