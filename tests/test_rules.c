/* test_rules.c — exclusive relations learned from labels (server/engine/rules.h),
 * on made-up sessions: a rule holds only after enough evidence from enough
 * different entities, never from one entity's own facts, nor for a relation
 * that labels say holds several values at once; one label against it in
 * twenty undoes it, also once it has made a fact false (that fact still counts
 * as told true); and it infers exactly the session's other true values of the
 * relation for the entity told a new one, nothing for another entity, another
 * relation, another arity or a fact told false; a table full of one-label
 * anchors keeps what holds and still learns; the rules file gives back what was
 * saved, its anchors' strings included, and a damaged one gives back nothing;
 * an anchor's string too long to keep is cut at a character, never inside one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/ws_utf8.h"

#include "server/engine/rules.h"
#include "test_util.h"

enum { S = 4 };

/* Symbols: "e<i>" entities, "v<i>" values, and two relations. */
static ws_sym sym(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return (ws_sym){.id = (int32_t)(h % 1000), .hash = h};
}

static ws_rule_fact fact3(const char *a, const char *b, const char *c)
{
    ws_rule_fact f = {.n = 3, .sym = {sym(a), sym(b), sym(c)}};
    return f;
}

static void tell(ws_recall_facts *told, const ws_rule_fact *f, int val)
{
    int32_t ids[S];
    uint64_t hash[S];
    for (int k = 0; k < S; k++) {
        ids[k] = k < f->n ? f->sym[k].id : -1;
        hash[k] = k < f->n ? f->sym[k].hash : 0;
    }
    ws_recall_tell(told, S, ids, hash, val);
}

static ws_rules *rules_new(void)
{
    ws_rules *r = NULL;
    ws_error err = {0};
    assert_int_equal(ws_rules_new(&r, &err), WS_OK);
    return r;
}

static const ws_engine_rule *find_rule(const ws_engine_rule *list, int n, int pos, int anchor)
{
    for (int i = 0; i < n; i++)
        if (list[i].arity == 3 && list[i].position == pos && list[i].anchor_position == anchor)
            return &list[i];
    return NULL;
}

/* One labelled move: entity e told at v0, then at v1 (relation rel), and
 * asked about v0 with `label`. */
static void move(ws_rules *r, const char *e, const char *rel, int label)
{
    ws_recall_facts told = {0};
    char v0[32], v1[32];
    snprintf(v0, sizeof v0, "%s-v0", e);
    snprintf(v1, sizeof v1, "%s-v1", e);
    ws_rule_fact old = fact3(e, rel, v0), now = fact3(e, rel, v1);
    tell(&told, &old, 1);
    tell(&told, &now, 1);
    ws_rules_learn(r, &told, S, &old, label);
}

/* move(), the facts' strings given: rel's is the rules' anchor string. */
static void move_named(ws_rules *r, const char *e, const char *rel)
{
    ws_recall_facts told = {0};
    const char *old_text[3] = {e, rel, "v0"};
    ws_rule_fact old = fact3(e, rel, "v0"), now = fact3(e, rel, "v1");
    old.text = old_text;
    tell(&told, &old, 1);
    tell(&told, &now, 1);
    ws_rules_learn(r, &told, S, &old, 0);
}

/* The facts a move of e to v1 makes false, the session told (e, rel, v0). */
static int inferred(ws_rules *r, const char *e, const char *rel)
{
    ws_recall_facts told = {0};
    ws_rule_fact old = fact3(e, rel, "v0"), other = fact3("someone", rel, "v0");
    ws_rule_fact flat = {.n = 2, .sym = {sym(e), sym("v0")}}, gone = fact3(e, rel, "v2");
    tell(&told, &old, 1);
    tell(&told, &other, 1);
    tell(&told, &flat, 1);
    tell(&told, &gone, 0);
    ws_rule_fact now = fact3(e, rel, "v1");
    tell(&told, &now, 1);
    int out[WS_RECALL_FACTS];
    int n = ws_rules_infer(r, &told, S, &now, out, WS_RECALL_FACTS);
    for (int i = 0; i < n; i++) assert_int_equal(out[i], 0); /* only (e, rel, v0) */
    return n;
}

static void test_learns_from_many_entities(void **state)
{
    (void)state;
    ws_rules *r = rules_new();
    char e[16];
    for (int i = 0; i < WS_RULE_MIN_EVIDENCE - 1; i++) {
        snprintf(e, sizeof e, "e%d", i);
        move(r, e, "location", 0);
    }
    assert_int_equal(inferred(r, "new", "location"), 0); /* one short */
    move(r, "e99", "location", 0);
    assert_int_equal(inferred(r, "new", "location"), 1); /* a person never seen */
    assert_int_equal(inferred(r, "new", "has"), 0);      /* another relation */
    ws_engine_rule list[8];
    int n = ws_rules_list(r, list, 8);
    const ws_engine_rule *loc = find_rule(list, n, 2, 1);
    assert_non_null(loc);
    assert_string_equal(loc->anchor, "");
    assert_int_equal(loc->exclusive, WS_RULE_MIN_EVIDENCE);
    assert_int_equal(loc->contexts, WS_RULE_MIN_CONTEXTS);
    assert_true(loc->holds);
    /* the anchor at the entity's own position saw one context (the relation) */
    const ws_engine_rule *ent = find_rule(list, n, 2, 0);
    assert_non_null(ent);
    assert_false(ent->holds);
    ws_rules_free(r);
}

static void test_one_entity_is_not_enough(void **state)
{
    (void)state;
    ws_rules *r = rules_new();
    for (int i = 0; i < 4 * WS_RULE_MIN_EVIDENCE; i++) move(r, "mary", "location", 0);
    assert_int_equal(inferred(r, "mary", "location"), 0);
    assert_int_equal(inferred(r, "john", "location"), 0);
    ws_rules_free(r);
}

static void test_plain_relation_never_holds(void **state)
{
    (void)state;
    ws_rules *r = rules_new();
    char e[16];
    for (int i = 0; i < 40; i++) {
        snprintf(e, sizeof e, "e%d", i);
        move(r, e, "has", 1);                 /* a second object: the first still had */
        if (i % 2) move(r, e, "location", 0); /* and some moves */
    }
    assert_int_equal(inferred(r, "new", "has"), 0);
    assert_int_equal(inferred(r, "new", "location"), 1);
    ws_rules_free(r);
}

static void test_refuted(void **state)
{
    (void)state;
    ws_rules *r = rules_new();
    char e[16];
    for (int i = 0; i < WS_RULE_MAX_AGAINST - 1; i++) { /* 19 for, then 1 against */
        snprintf(e, sizeof e, "e%d", i);
        move(r, e, "location", 0);
    }
    assert_int_equal(inferred(r, "new", "location"), 1);
    /* a fact a rule made false, labelled true: evidence against it, as told true */
    ws_recall_facts told = {0};
    ws_rule_fact old = fact3("x", "location", "a"), now = fact3("x", "location", "b");
    tell(&told, &old, 1);
    tell(&told, &now, 1);
    tell(&told, &old, WS_RULE_MADE_FALSE); /* the rule's false: the newest entry */
    ws_rules_learn(r, &told, S, &old, 1);
    assert_int_equal(inferred(r, "new", "location"), 1); /* made false after the move: none */
    told = (ws_recall_facts){0};
    tell(&told, &old, WS_RULE_MADE_FALSE);
    tell(&told, &now, 1);
    ws_rules_learn(r, &told, S, &old, 1); /* counted: the client told it true */
    assert_int_equal(inferred(r, "new", "location"), 0);
    /* a fact told false by the client is not evidence either way */
    told = (ws_recall_facts){0};
    tell(&told, &old, 0);
    tell(&told, &now, 1);
    ws_rules_learn(r, &told, S, &old, 1);
    ws_engine_rule list[8];
    int n = ws_rules_list(r, list, 8);
    const ws_engine_rule *loc = find_rule(list, n, 2, 1);
    assert_int_equal(loc->not_exclusive, 1);
    assert_false(loc->holds);
    ws_rules_free(r);
}

/* Every new symbol with a label is an anchor with evidence: a full table
 * keeps the rules that hold and still learns a new one. */
static void test_table_full(void **state)
{
    (void)state;
    ws_rules *r = rules_new();
    char e[16], rel[16];
    for (int i = 0; i < WS_RULE_MIN_EVIDENCE; i++) {
        snprintf(e, sizeof e, "e%d", i);
        move(r, e, "location", 0);
    }
    for (int i = 0; i < 2 * WS_RULES_MAX; i++) { /* one label each: two anchors a move */
        snprintf(e, sizeof e, "x%d", i);
        snprintf(rel, sizeof rel, "r%d", i);
        move(r, e, rel, 0);
    }
    assert_int_equal(inferred(r, "new", "location"), 1);
    for (int i = 0; i < WS_RULE_MIN_EVIDENCE; i++) {
        snprintf(e, sizeof e, "o%d", i);
        move(r, e, "owner", 0);
    }
    assert_int_equal(inferred(r, "new", "owner"), 1);
    assert_int_equal(inferred(r, "new", "r7"), 0);
    ws_engine_rule list[WS_RULES_MAX];
    assert_true(ws_rules_list(r, list, WS_RULES_MAX) <= WS_RULES_MAX);
    ws_rules_free(r);
}

/* A rule for rel learned from WS_RULE_MIN_EVIDENCE people's moves. */
static ws_rules *learned(const char *rel)
{
    ws_rules *r = rules_new();
    char e[16];
    for (int i = 0; i < WS_RULE_MIN_EVIDENCE; i++) {
        snprintf(e, sizeof e, "e%d", i);
        move_named(r, e, rel);
    }
    return r;
}

static void test_anchor_cut_at_a_character(void **state)
{
    (void)state;
    char rel[2 * 40 + 1] = ""; /* 40 two-byte characters: 80 bytes, kept are 63 at most */
    for (int i = 0; i < 40; i++) strcat(rel, "\xc3\xa9");
    ws_rules *r = learned(rel);
    ws_engine_rule list[8];
    int n = ws_rules_list(r, list, 8);
    const ws_engine_rule *loc = find_rule(list, n, 2, 1);
    assert_non_null(loc);
    assert_true(loc->holds);
    size_t len = strlen(loc->anchor);
    assert_int_equal(len, 62); /* 31 characters: the 32nd would end at byte 64 */
    assert_true(ws_utf8_valid((const unsigned char *)loc->anchor, len));
    assert_memory_equal(loc->anchor, rel, len);
    ws_rules_free(r);
}

static void test_saved_and_loaded(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_rules_XXXXXX", path[64]; /* a data dir: the file in models/ */
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/models", dir);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof path, "%s/models/m.rules", dir);
    ws_error err = {0};
    ws_rules *r = learned(" the place"), *back = rules_new();
    move(r, "x0", "has", 1); /* a rule that does not hold is kept too */
    assert_int_equal(ws_rules_load(back, path, &err), WS_OK); /* no file yet: nothing */
    ws_engine_rule list[8], got[8];
    assert_int_equal(ws_rules_list(back, got, 8), 0);
    assert_int_equal(ws_rules_save(r, dir, path, &err), WS_OK);
    assert_int_equal(ws_rules_load(back, path, &err), WS_OK);
    int n = ws_rules_list(r, list, 8);
    assert_true(n >= 2);
    assert_int_equal(ws_rules_list(back, got, 8), n);
    for (int i = 0; i < n; i++) {
        assert_int_equal(got[i].arity, list[i].arity);
        assert_int_equal(got[i].position, list[i].position);
        assert_int_equal(got[i].anchor_position, list[i].anchor_position);
        assert_int_equal(got[i].exclusive, list[i].exclusive);
        assert_int_equal(got[i].not_exclusive, list[i].not_exclusive);
        assert_int_equal(got[i].contexts, list[i].contexts);
        assert_int_equal(got[i].holds, list[i].holds);
        assert_string_equal(got[i].anchor, list[i].anchor);
    }
    assert_non_null(find_rule(got, n, 2, 1));
    assert_string_equal(find_rule(got, n, 2, 1)->anchor, " the place"); /* its space kept */
    assert_int_equal(inferred(back, "new", " the place"), 1);
    ws_rules_free(back);
    /* a line damaged: nothing of the file is taken */
    FILE *f = fopen(path, "a");
    assert_non_null(f);
    fputs("3 2 1 x\n", f);
    fclose(f);
    back = rules_new();
    assert_int_equal(ws_rules_load(back, path, &err), WS_ERR_FORMAT);
    assert_int_equal(ws_rules_list(back, got, 8), 0);
    assert_int_equal(inferred(back, "new", " the place"), 0);
    ws_rules_free(back);
    ws_rules_free(r);
    assert_int_equal(ws_test_rm_tree(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_learns_from_many_entities),
        cmocka_unit_test(test_one_entity_is_not_enough),
        cmocka_unit_test(test_plain_relation_never_holds),
        cmocka_unit_test(test_refuted),
        cmocka_unit_test(test_table_full),
        cmocka_unit_test(test_anchor_cut_at_a_character),
        cmocka_unit_test(test_saved_and_loaded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
