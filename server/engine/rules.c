/* rules.c — see rules.h. The rules with evidence sit in an open-addressed
 * table of twice WS_RULES_MAX slots keyed by (arity, position, anchor
 * position, anchor symbol); a step looks up at most a few dozen keys. */
#include "rules.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/ws_utf8.h"
#include "files.h"
#include "server/common/limits.h"

#define SLOTS (2 * WS_RULES_MAX)

typedef struct {
    int used;
    int arity, pos, anchor;
    ws_sym sym;
    char text[64]; /* the anchor symbol's string, as first seen ("" unknown) */
    uint32_t excl, plain;
    uint64_t ctx[WS_RULE_MIN_CONTEXTS]; /* distinct contexts of exclusive evidence */
    int n_ctx;
} rule;

struct ws_rules {
    pthread_mutex_t mu;
    int n;
    int changed; /* a rule began or ceased to hold since ws_rules_changed asked */
    rule slot[SLOTS];
};

ws_status ws_rules_new(ws_rules **out, ws_error *err)
{
    *out = calloc(1, sizeof **out);
    if (!*out) return ws_error_set(err, WS_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&(*out)->mu, NULL);
    return WS_OK;
}

void ws_rules_free(ws_rules *r)
{
    if (!r) return;
    pthread_mutex_destroy(&r->mu);
    free(r);
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static uint64_t key_hash(int arity, int pos, int anchor, ws_sym s)
{
    return mix(
        mix(mix(mix((uint64_t)arity, (uint64_t)pos), (uint64_t)anchor), (uint64_t)(uint32_t)s.id),
        s.hash);
}

static int sym_eq(ws_sym a, ws_sym b)
{
    return a.id == b.id && a.hash == b.hash;
}

static int holds(const rule *x)
{
    return x->excl >= WS_RULE_MIN_EVIDENCE && (uint64_t)x->plain * WS_RULE_MAX_AGAINST <= x->excl &&
           x->n_ctx >= WS_RULE_MIN_CONTEXTS;
}

/* The rule's slot (used or the empty one where it would go); NULL when the
 * table is full and it is not there. */
static rule *slot_of(ws_rules *r, int arity, int pos, int anchor, ws_sym s)
{
    uint64_t h = key_hash(arity, pos, anchor, s);
    for (int probe = 0; probe < SLOTS; probe++) {
        rule *x = &r->slot[(h + (uint64_t)probe) % SLOTS];
        if (!x->used) return x;
        if (x->arity == arity && x->pos == pos && x->anchor == anchor && sym_eq(x->sym, s))
            return x;
    }
    return NULL;
}

static void fact_at(const ws_recall_facts *told, int i, int S, ws_rule_fact *f)
{
    f->n = ws_recall_syms(told, i, S, f->sym);
    f->text = NULL;
}

/* The one position where a and b differ, -1 when they are of different
 * arity, the same, or differ in more than one. */
static int differ_at(const ws_rule_fact *a, const ws_rule_fact *b)
{
    if (a->n != b->n) return -1;
    int at = -1;
    for (int k = 0; k < a->n; k++)
        if (!sym_eq(a->sym[k], b->sym[k])) {
            if (at >= 0) return -1;
            at = k;
        }
    return at;
}

/* Keeps the rules that hold and, while there is room, those with evidence of
 * at least `min_evidence`; the rest go (mu held). */
static void keep(ws_rules *r, uint32_t min_evidence)
{
    rule *old = malloc(sizeof(rule) * WS_RULES_MAX);
    if (!old) return;
    int n = 0;
    for (int i = 0; i < SLOTS; i++)
        if (r->slot[i].used &&
            (holds(&r->slot[i]) || r->slot[i].excl + r->slot[i].plain >= min_evidence))
            old[n++] = r->slot[i];
    memset(r->slot, 0, sizeof r->slot);
    r->n = 0;
    for (int i = 0; i < n; i++) {
        rule *x = slot_of(r, old[i].arity, old[i].pos, old[i].anchor, old[i].sym);
        *x = old[i];
        r->n++;
    }
    free(old);
}

/* Room for one more rule: a full table keeps what holds and what has seen
 * more than one label; if that is still most of it, what holds alone. A
 * deployment's symbols come and go (every new person and place is an anchor
 * with a label or two), and a relation's rule must still find room. */
static void make_room(ws_rules *r)
{
    if (r->n < WS_RULES_MAX) return;
    keep(r, 2);
    if (r->n > WS_RULES_MAX / 2) keep(r, UINT32_MAX);
}

/* Exclusive evidence for x from q (free position k, anchor j), with the
 * context it came from: the symbols at q's other positions. */
static void count_exclusive(rule *x, const ws_rule_fact *q, int k, int j)
{
    x->excl++;
    uint64_t c = 0; /* the context: the symbols at the other positions */
    for (int p = 0; p < q->n; p++)
        if (p != k && p != j) c = mix(mix(c, (uint64_t)(uint32_t)q->sym[p].id), q->sym[p].hash);
    for (int i = 0; i < x->n_ctx; i++)
        if (x->ctx[i] == c) return;
    if (x->n_ctx < WS_RULE_MIN_CONTEXTS) x->ctx[x->n_ctx++] = c;
}

static void count(ws_rules *r, const ws_rule_fact *q, int k, int j, int label)
{
    rule *x = slot_of(r, q->n, k, j, q->sym[j]);
    if (x && !x->used && r->n >= WS_RULES_MAX) {
        make_room(r);
        x = slot_of(r, q->n, k, j, q->sym[j]);
    }
    if (!x || (!x->used && r->n >= WS_RULES_MAX)) return;
    if (!x->used) {
        *x = (rule){.used = 1, .arity = q->n, .pos = k, .anchor = j, .sym = q->sym[j]};
        r->n++;
    }
    if (!x->text[0] && q->text && q->text[j]) { /* cut between characters: it is served as JSON */
        size_t n = ws_utf8_cut(q->text[j], sizeof x->text - 1);
        memcpy(x->text, q->text[j], n);
        x->text[n] = '\0';
    }
    int held = holds(x);
    if (label)
        x->plain++;
    else
        count_exclusive(x, q, k, j);
    r->changed |= holds(x) != held;
}

void ws_rule_fact_row(const ws_rule_fact *f, int S, int32_t *ids, uint64_t *hash)
{
    for (int k = 0; k < S; k++) {
        ids[k] = k < f->n ? f->sym[k].id : -1;
        hash[k] = k < f->n ? f->sym[k].hash : 0;
    }
}

static int find(const ws_recall_facts *told, int S, const ws_rule_fact *f)
{
    int32_t ids[WS_MAX_FACT_LEN];
    uint64_t hash[WS_MAX_FACT_LEN];
    ws_rule_fact_row(f, S, ids, hash);
    return ws_recall_find(told, S, ids, hash);
}

void ws_rules_learn(ws_rules *r, const ws_recall_facts *told, int S, const ws_rule_fact *q,
                    int label)
{
    int qi = find(told, S, q);
    if (qi < 0 || told->val[qi] == 0 || q->n < 2) return; /* made false by a rule: told true */
    unsigned done = 0; /* free positions counted: once each per query */
    pthread_mutex_lock(&r->mu);
    for (int i = qi + 1; i < told->n; i++) { /* told after q */
        ws_rule_fact f;
        fact_at(told, i, S, &f);
        int k = told->val[i] == 1 ? differ_at(&f, q) : -1;
        if (k < 0 || (done >> k & 1u)) continue;
        done |= 1u << k;
        for (int j = 0; j < q->n; j++)
            if (j != k) count(r, q, k, j, label);
    }
    pthread_mutex_unlock(&r->mu);
}

int ws_rules_infer(ws_rules *r, const ws_recall_facts *told, int S, const ws_rule_fact *fact,
                   int *out, int max)
{
    int n = 0;
    pthread_mutex_lock(&r->mu);
    for (int i = 0; r->n && i < told->n && n < max; i++) {
        ws_rule_fact f;
        fact_at(told, i, S, &f);
        int k = told->val[i] == 1 ? differ_at(&f, fact) : -1;
        for (int j = 0; k >= 0 && j < fact->n; j++) {
            const rule *x = j != k ? slot_of(r, fact->n, k, j, fact->sym[j]) : NULL;
            if (x && x->used && holds(x)) {
                out[n++] = i;
                break;
            }
        }
    }
    pthread_mutex_unlock(&r->mu);
    return n;
}

static int by_evidence(const void *a, const void *b)
{
    const ws_engine_rule *x = a, *y = b;
    uint32_t ex = x->exclusive + x->not_exclusive, ey = y->exclusive + y->not_exclusive;
    return ex < ey ? 1 : ex > ey ? -1 : 0;
}

int ws_rules_list(ws_rules *r, ws_engine_rule *out, int max)
{
    ws_engine_rule *all = malloc(sizeof *all * WS_RULES_MAX);
    if (!all) return 0;
    int n = 0;
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < SLOTS; i++) {
        const rule *x = &r->slot[i];
        if (!x->used) continue;
        all[n] = (ws_engine_rule){.arity = x->arity,
                                  .position = x->pos,
                                  .anchor_position = x->anchor,
                                  .exclusive = x->excl,
                                  .not_exclusive = x->plain,
                                  .contexts = x->n_ctx,
                                  .holds = holds(x)};
        memcpy(all[n++].anchor, x->text, sizeof x->text);
    }
    pthread_mutex_unlock(&r->mu);
    qsort(all, (size_t)n, sizeof *all, by_evidence);
    if (n > max) n = max;
    memcpy(out, all, sizeof *all * (size_t)n);
    free(all);
    return n;
}

int ws_rules_changed(ws_rules *r)
{
    pthread_mutex_lock(&r->mu);
    int c = r->changed;
    r->changed = 0;
    pthread_mutex_unlock(&r->mu);
    return c;
}

/* The file: one rule a line, "arity pos anchor id hash excl plain n_ctx ctx0
 * ctx1 ctx2 text" (the anchor's string last: symbols hold no control
 * characters, so no newline). */
ws_status ws_rules_save(ws_rules *r, const char *data_dir, const char *path, ws_error *err)
{
    char tmp[WS_SRV_PATH_MAX + 64];
    int fd;
    WS_TRY(ws_srv_upload_create(data_dir, tmp, sizeof tmp, &fd, err));
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        unlink(tmp);
        return ws_error_set(err, WS_ERR_IO, "cannot write %s", tmp);
    }
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < SLOTS; i++) {
        const rule *x = &r->slot[i];
        if (!x->used) continue;
        fprintf(f, "%d %d %d %" PRId32 " %" PRIu64 " %" PRIu32 " %" PRIu32 " %d", x->arity, x->pos,
                x->anchor, x->sym.id, x->sym.hash, x->excl, x->plain, x->n_ctx);
        for (int c = 0; c < WS_RULE_MIN_CONTEXTS; c++) fprintf(f, " %" PRIu64, x->ctx[c]);
        fprintf(f, " %s\n", x->text);
    }
    pthread_mutex_unlock(&r->mu);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        unlink(tmp);
        return ws_error_set(err, WS_ERR_IO, "cannot write %s", tmp);
    }
    ws_status s = ws_srv_file_commit(tmp, path, err);
    if (s != WS_OK) unlink(tmp);
    return s;
}

ws_status ws_rules_load(ws_rules *r, const char *path, ws_error *err)
{
    FILE *f = fopen(path, "r");
    if (!f) return errno == ENOENT ? WS_OK : ws_error_set(err, WS_ERR_IO, "cannot read %s", path);
    char line[512];
    ws_status s = WS_OK;
    pthread_mutex_lock(&r->mu);
    while (s == WS_OK && r->n < WS_RULES_MAX && fgets(line, sizeof line, f)) {
        rule x = {.used = 1};
        int at = 0;
        int got = sscanf(line,
                         "%d %d %d %" SCNd32 " %" SCNu64 " %" SCNu32 " %" SCNu32 " %d %" SCNu64
                         " %" SCNu64 " %" SCNu64 "%n",
                         &x.arity, &x.pos, &x.anchor, &x.sym.id, &x.sym.hash, &x.excl, &x.plain,
                         &x.n_ctx, &x.ctx[0], &x.ctx[1], &x.ctx[2], &at);
        if (got != 11 || x.arity < 2 || x.arity > WS_MAX_FACT_LEN || x.pos < 0 ||
            x.pos >= x.arity || x.anchor < 0 || x.anchor >= x.arity || x.anchor == x.pos ||
            x.n_ctx < 0 || x.n_ctx > WS_RULE_MIN_CONTEXTS || line[at] != ' ') {
            s = ws_error_set(err, WS_ERR_FORMAT, "%s: not a rules file", path);
            break;
        }
        /* the string after one space, which may begin with spaces of its own */
        line[at + 1 + strcspn(line + at + 1, "\n")] = '\0';
        memcpy(x.text, line + at + 1, ws_utf8_cut(line + at + 1, sizeof x.text - 1)); /* x zeroed */
        ws_utf8_scrub(x.text); /* a file of an older daemon: cut inside a character */
        rule *slot = slot_of(r, x.arity, x.pos, x.anchor, x.sym);
        if (slot && !slot->used) *slot = x, r->n++;
    }
    if (s != WS_OK) { /* all or nothing */
        memset(r->slot, 0, sizeof r->slot);
        r->n = 0;
    }
    pthread_mutex_unlock(&r->mu);
    fclose(f);
    return s;
}
