/* limits.h — request limits and the online-training settings, without JSON:
 * what the engine's native interface (server/engine/engine.h) shares with the
 * JSON side (common.h). */
#ifndef WS_SRV_LIMITS_H
#define WS_SRV_LIMITS_H

#define WS_SRV_MAX_ITEMS  256 /* instructions, queries or labels per request */
#define WS_SRV_SYMBOL_MAX 128 /* bytes per symbol */
#define WS_SRV_PATH_MAX   1024
#define WS_SRV_RECALL_MAX 64 /* recall queries the engine may add per training example */

/* ---- per-model online-training settings (training_settings.c) ---------- */
typedef struct {
    int enabled;
    float lr;
    int update_every;     /* examples per AdamW step */
    int publish_every;    /* AdamW steps per candidate version (its gate, its publication) */
    int recall_queries;   /* recall queries the engine adds per example */
    int self_supervised;  /* unlabelled steps are examples too (recall queries, negatives) */
    int negative_queries; /* never-told facts the engine adds per example, labelled false */
    float holdout;        /* share of examples kept out of training for the gate's replay */
    int gate;             /* candidates are evaluated before they are published */
    float gate_tolerance; /* accuracy a candidate may lose on the probe or the replay */
    int rehearsal;        /* trajectories of the built-in task memory trained beside each pass */
    int scope;            /* what an AdamW step changes: WS_SRV_SCOPE_* */
    int rules;            /* exclusive relations learned from labels and applied
                             (server/engine/rules.h), whether or not the network trains */
} ws_srv_training;

/* The parameters online training changes: all of them, or only the symbols'
 * learned corrections (embed.sym), so that the network, and with it what it
 * does with symbols it has never seen, stays as served. */
enum { WS_SRV_SCOPE_ALL = 0, WS_SRV_SCOPE_SYMBOLS = 1 };

/* The fields of a ws_srv_training, as bits (a partial update names its fields). */
enum {
    WS_SRV_TRAINING_ENABLED = 1,
    WS_SRV_TRAINING_LR = 2,
    WS_SRV_TRAINING_UPDATE_EVERY = 4,
    WS_SRV_TRAINING_RECALL_QUERIES = 8,
    WS_SRV_TRAINING_SELF_SUPERVISED = 16,
    WS_SRV_TRAINING_NEGATIVE_QUERIES = 32,
    WS_SRV_TRAINING_HOLDOUT = 64,
    WS_SRV_TRAINING_GATE = 128,
    WS_SRV_TRAINING_GATE_TOLERANCE = 256,
    WS_SRV_TRAINING_REHEARSAL = 512,
    WS_SRV_TRAINING_SCOPE = 1024,
    WS_SRV_TRAINING_PUBLISH_EVERY = 2048,
    WS_SRV_TRAINING_RULES = 4096
};
#define WS_SRV_REHEARSAL_MAX 8 /* the training pass's trajectories (ws_online_shape) */

ws_srv_training ws_srv_training_default(void);
/* Copies the fields named in `fields` from `from` into *t. */
void ws_srv_training_apply(ws_srv_training *t, const ws_srv_training *from, unsigned fields);

#endif
