/* rules.h — exclusive relations learned from a model's labels (api.md, Rules
 * learned from labels).
 *
 * The network learns a deployment's rules from labels slowly and at a cost to
 * its memory (api.md: thousands of AdamW steps reach 80-89% on the one-place
 * rule). One kind of rule is plain in the labels themselves: "telling
 * (mary, location, garden) makes (mary, location, kitchen) false". Here it is
 * learned as counts and applied as instructions: once a relation is learned to
 * be exclusive, a step that tells a value of it also tells the session's other
 * values of it false, and the model, which keeps facts told in full (told-moves
 * worlds, scripts/train-default.sh), answers as the rule says.
 *
 * A rule is (arity n, free position k, anchor position j, anchor symbol s):
 * two facts of n symbols that differ only at position k and hold s at position
 * j cannot both hold. Evidence comes from labelled queries: a query q the
 * session was told true, after which it was told a fact that differs from q
 * only at position k, is evidence for every rule (n, k, j, q[j]) — exclusive
 * when q's label is false, not exclusive when it is true. A rule holds when
 * it has at least WS_RULE_MIN_EVIDENCE exclusive counts, at most one in
 * WS_RULE_MAX_AGAINST against, and came from at least WS_RULE_MIN_CONTEXTS
 * distinct facts in the other positions (different people, not one person's
 * places: what lets it generalise to people never seen, and keeps a person's
 * own symbol from becoming a rule about all of their facts).
 *
 * Thread-safe: the engine thread learns and infers, any thread lists them. */
#ifndef WS_RULES_H
#define WS_RULES_H

#include "base/ws_status.h"
#include "engine.h"
#include "server/common/recall.h"

#define WS_RULE_MIN_EVIDENCE 8
#define WS_RULE_MAX_AGAINST  20 /* exclusive >= 20 x not exclusive */
#define WS_RULE_MIN_CONTEXTS 3
#define WS_RULES_MAX \
    1024 /* rules with evidence kept (a full table keeps what holds and
                             what saw more than one label) */

typedef struct ws_rules ws_rules;

ws_status ws_rules_new(ws_rules **out, ws_error *err);
void ws_rules_free(ws_rules *r);

/* A fact as the rules take it: n symbols (id and hash) and, for naming a rule
 * in ws_rules_list, their strings (may be NULL). */
typedef struct {
    int n;
    ws_sym sym[WS_MAX_FACT_LEN];
    const char *const *text;
} ws_rule_fact;

/* f as a recall row (recall.h): S ids (-1 padded) and hashes (0 padded). */
void ws_rule_fact_row(const ws_rule_fact *f, int S, int32_t *ids, uint64_t *hash);

/* A session's told facts as the rules keep them: ws_recall_facts whose val is
 * 1 (told true), 0 (told false) or WS_RULE_MADE_FALSE: told true by the client,
 * then false by a rule. Evidence counts it as told true (so a rule that holds
 * wrongly still meets the labels that refute it); inference as false. */
#define WS_RULE_MADE_FALSE 2

/* Counts the evidence of one labelled query q (label 0 or 1) of a step,
 * `told` being what the session was told up to and including the step's
 * instructions (newest last). */
void ws_rules_learn(ws_rules *r, const ws_recall_facts *told, int S, const ws_rule_fact *q,
                    int label);

/* The facts of `told` (indices into out, at most max) that telling `fact`
 * true makes false by a rule that holds: told true, of fact's arity,
 * different from it only at a rule's free position. Returns how many. */
int ws_rules_infer(ws_rules *r, const ws_recall_facts *told, int S, const ws_rule_fact *fact,
                   int *out, int max);

/* The rules with evidence, most evidence first, at most max into out;
 * returns how many. */
int ws_rules_list(ws_rules *r, ws_engine_rule *out, int max);

/* 1 when a rule began or ceased to hold since the last call (then 0 again). */
int ws_rules_changed(ws_rules *r);

/* The rules with evidence into the file at path (written beside it in
 * data_dir/models, then renamed: a crash leaves the old file or the new). */
ws_status ws_rules_save(ws_rules *r, const char *data_dir, const char *path, ws_error *err);
/* Adds the rules of the file at path (none when it is absent); a file that is
 * not one adds nothing (WS_ERR_FORMAT). */
ws_status ws_rules_load(ws_rules *r, const char *path, ws_error *err);

#endif
