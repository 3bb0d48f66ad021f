/* test_storage.c — the storage API on real databases in a temporary directory,
 * once per registered backend (storage/registry.c): sessions and tenant
 * isolation, the per-tenant session counter, group commit with a stale
 * expect_step, rollback, bit-exact states (also re-derived ones), the step log,
 * vocabularies, models and versions, and models of one tenant. The database
 * itself (settings, schema and migrations, keys, writers, errors) is
 * test_storage_db.c. Checks that look past the API into the SQLite file run on
 * SQLite only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "storage_fixture.h"

/* ---- sessions ---------------------------------------------------------------- */

static ws_status count_cb(void *ctx, const ws_store_session *sess)
{
    (void)sess;
    ++*(int *)ctx;
    return WS_OK;
}

static void test_sessions_and_isolation(void **state)
{
    (void)state;
    fixture f = make_fixture("sessions.db");
    ws_error err = {0};
    char id[WS_STORE_ID_LEN + 1], id2[WS_STORE_ID_LEN + 1], buf[64];

    OK(ws_store_session_create(f.s, f.acme, f.model, NULL, 0, 0, 0, 0, id, &e_));
    assert_true(ws_store_session_id_valid(id));
    OK(ws_store_session_create(f.s, f.acme, f.model, NULL, 0, 0, 0, 0, id2, &e_));
    assert_string_not_equal(id, id2);
    ws_store_session got;
    OK(ws_store_session_get(f.s, f.acme, id, 1, &got, &e_));
    assert_string_equal(got.id, id);
    assert_int_equal(got.tenant, f.acme);
    assert_int_equal(got.model, f.model);
    assert_int_equal(got.step, 0);
    assert_int_equal(got.rows, 0);
    assert_null(got.state); /* no state yet */
    assert_true(got.created_ms > 0);
    ws_store_session_clear(&got);

    /* bad input: unknown model/tenant, state/shape mismatch */
    float w[4] = {1, 2, 3, 4};
    expect_status(ws_store_session_create(f.s, f.acme, 999, NULL, 0, 0, 0, 0, buf, &err),
                  WS_ERR_NOTFOUND, &err, "unknown model");
    expect_status(ws_store_session_create(f.s, 999, f.model, NULL, 0, 0, 0, 0, buf, &err),
                  WS_ERR_NOTFOUND, &err, "unknown tenant");
    expect_status(ws_store_session_create(f.s, f.acme, f.model, NULL, 2, 2, 0, 0, buf, &err),
                  WS_ERR_INVALID, &err, "NULL state with a shape");
    expect_status(ws_store_session_create(f.s, f.acme, f.model, w, 0, 4, 0, 0, buf, &err),
                  WS_ERR_INVALID, &err, "state with an empty shape");

    /* Another tenant gets NOTFOUND for everything, with the very message a
     * missing session gets: existence does not leak. */
    char want_msg[128];
    snprintf(want_msg, sizeof want_msg, "session %s not found", id);
    ws_store_log_entry e = entry_for(1, buf, sizeof buf);
    int64_t cur = -1;
    int n = 0;
    expect_status(ws_store_session_get(f.s, f.evil, id, 1, &got, &err), WS_ERR_NOTFOUND, &err,
                  "get other tenant");
    assert_string_equal(err.msg, want_msg);
    expect_status(ws_store_session_delete(f.s, f.evil, id, &err), WS_ERR_NOTFOUND, &err,
                  "delete other tenant");
    assert_string_equal(err.msg, want_msg);
    expect_status(ws_store_apply_step(f.s, f.evil, id, 0, w, 2, 2, &e, &cur, &err),
                  WS_ERR_NOTFOUND, &err, "apply other tenant");
    assert_int_equal(cur, -1);
    expect_status(ws_store_log_page(f.s, f.evil, id, 0, 10, count_log_cb, &n, &err),
                  WS_ERR_NOTFOUND, &err, "log other tenant");
    expect_status(ws_store_log_each(f.s, f.evil, id, count_log_cb, &n, &err), WS_ERR_NOTFOUND,
                  &err, "replay other tenant");
    expect_status(ws_store_log_set_labels(f.s, f.evil, id, 1, "[1]", 0, &err), WS_ERR_NOTFOUND,
                  &err, "labels other tenant");
    assert_int_equal(n, 0);
    /* and the session is untouched */
    OK(ws_store_session_get(f.s, f.acme, id, 0, &got, &e_));
    assert_int_equal(got.step, 0);
    ws_store_session_clear(&got);
    /* malformed ids: NOTFOUND too */
    expect_status(ws_store_session_get(f.s, f.acme, "nope", 0, &got, &err), WS_ERR_NOTFOUND, &err,
                  "malformed id");
    expect_status(ws_store_session_get(f.s, f.acme, NULL, 0, &got, &err), WS_ERR_NOTFOUND, &err,
                  "NULL id");

    /* delete takes the log with it (real delete, cascade) */
    OK(ws_store_apply_step(f.s, f.acme, id, 0, w, 2, 2, &e, &cur, &e_));
    assert_int_equal(cur, 1);
    ws_store_close(f.s);
    assert_raw_count("sessions.db", "SELECT count(*) FROM step_log", 1);
    f.s = open_db("sessions.db", WS_STORE_DURABILITY_NORMAL);
    OK(ws_store_session_delete(f.s, f.acme, id, &e_));
    expect_status(ws_store_session_get(f.s, f.acme, id, 0, &got, &err), WS_ERR_NOTFOUND, &err,
                  "get deleted");
    expect_status(ws_store_session_delete(f.s, f.acme, id, &err), WS_ERR_NOTFOUND, &err,
                  "delete twice");
    expect_status(ws_store_apply_step(f.s, f.acme, id, 1, w, 2, 2, &e, &cur, &err),
                  WS_ERR_NOTFOUND, &err, "apply to deleted");
    ws_store_close(f.s);
    assert_raw_count("sessions.db", "SELECT count(*) FROM step_log", 0);
    assert_raw_count("sessions.db", "SELECT count(*) FROM sessions", 1);
}

typedef struct {
    char ids[64][WS_STORE_ID_LEN + 1];
    int n;
} id_list;

static ws_status collect_ids(void *ctx, const ws_store_session *sess)
{
    id_list *l = ctx;
    assert_true(l->n < 64);
    memcpy(l->ids[l->n++], sess->id, WS_STORE_ID_LEN + 1);
    assert_null(sess->state); /* listings never carry states */
    return WS_OK;
}

static ws_status reenter_cb(void *ctx, const ws_store_session *sess)
{
    (void)sess;
    ws_store *s = ctx;
    int64_t n;
    ws_error err = {0};
    /* the listing's statement is still running: re-entry must be refused */
    assert_int_equal(ws_store_session_count(s, 1, &n, &err), WS_ERR_INVALID);
    return WS_ERR_CONFLICT; /* and a callback's status stops the listing */
}

static int cmp_id(const void *a, const void *b) { return strcmp(a, b); }

static void test_session_list_count_limit(void **state)
{
    (void)state;
    fixture f = make_fixture("list.db");
    ws_error err = {0};
    char id[WS_STORE_ID_LEN + 1];
    id_list made = {0};
    for (int i = 0; i < 23; i++) {
        OK(ws_store_session_create(f.s, f.acme, f.model, NULL, 0, 0, 0, 0, id, &e_));
        memcpy(made.ids[made.n++], id, sizeof id);
    }
    for (int i = 0; i < 4; i++)
        OK(ws_store_session_create(f.s, f.evil, f.model, NULL, 0, 0, 0, 0, id, &e_));
    int64_t n;
    OK(ws_store_session_count(f.s, f.acme, &n, &e_));
    assert_int_equal(n, 23);
    OK(ws_store_session_count(f.s, f.evil, &n, &e_));
    assert_int_equal(n, 4);

    /* pages of 10 by keyset cursor: every session once, in id order, none of
     * the other tenant's */
    id_list seen = {0};
    const char *after = NULL;
    for (;;) {
        int before = seen.n;
        OK(ws_store_session_list(f.s, f.acme, after, 10, collect_ids, &seen, &e_));
        assert_true(seen.n - before <= 10);
        if (seen.n == before) break;
        after = seen.ids[seen.n - 1];
    }
    assert_int_equal(seen.n, 23);
    qsort(made.ids, (size_t)made.n, sizeof made.ids[0], cmp_id);
    for (int i = 0; i < 23; i++) assert_string_equal(seen.ids[i], made.ids[i]);
    expect_status(ws_store_session_list(f.s, f.acme, NULL, 0, collect_ids, &seen, &err),
                  WS_ERR_INVALID, &err, "limit 0");

    /* per-tenant limit: checked inside the create transaction */
    expect_status(ws_store_session_create(f.s, f.evil, f.model, NULL, 0, 0, 0, 4, id, &err),
                  WS_ERR_CONFLICT, &err, "tenant limit");
    OK(ws_store_session_create(f.s, f.evil, f.model, NULL, 0, 0, 0, 5, id, &e_));

    /* every session of a model (replay), all tenants */
    int all = 0;
    OK(ws_store_session_each_of_model(f.s, f.model, count_cb, &all, &e_));
    assert_int_equal(all, 28);

    /* callbacks cannot re-enter the store; their status is returned */
    expect_status(ws_store_session_list(f.s, f.acme, NULL, 5, reenter_cb, f.s, &err),
                  WS_ERR_CONFLICT, &err, "callback status");
    OK(ws_store_session_count(f.s, f.acme, &n, &e_)); /* usable again afterwards */
    check_integrity(f.s);
    ws_store_close(f.s);
}

/* The tenant's count of sessions (a counter the schema keeps, schema v4) under
 * creates, deletes, refusals and a rolled-back group: the count and the limit
 * mean exactly what counting the rows meant. */
static void test_session_counter(void **state)
{
    (void)state;
    fixture f = make_fixture("counter.db");
    ws_error err = {0};
    char ids[3][WS_STORE_ID_LEN + 1], id[WS_STORE_ID_LEN + 1];
    assert_count(f.s, f.acme, 0);
    assert_count(f.s, 999, 0); /* an unknown tenant has none, as before */
    for (int i = 0; i < 3; i++)
        OK(ws_store_session_create(f.s, f.acme, f.model, NULL, 0, 0, 0, 3, ids[i], &e_));
    assert_count(f.s, f.acme, 3);
    assert_count(f.s, f.evil, 0);
    /* at the limit: refused, nothing counted */
    expect_status(ws_store_session_create(f.s, f.acme, f.model, NULL, 0, 0, 0, 3, id, &err),
                  WS_ERR_CONFLICT, &err, "at the limit");
    assert_count(f.s, f.acme, 3);
    /* another tenant's limit is its own */
    OK(ws_store_session_create(f.s, f.evil, f.model, NULL, 0, 0, 0, 1, id, &e_));
    assert_count(f.s, f.evil, 1);
    /* a refused create (unknown model) and a refused delete (another tenant's
     * session) count nothing */
    expect_status(ws_store_session_create(f.s, f.acme, 999, NULL, 0, 0, 0, 0, id, &err),
                  WS_ERR_NOTFOUND, &err, "unknown model");
    expect_status(ws_store_session_delete(f.s, f.evil, ids[0], &err), WS_ERR_NOTFOUND, &err,
                  "another tenant's session");
    assert_count(f.s, f.acme, 3);
    assert_count(f.s, f.evil, 1);
    /* a delete makes room for exactly one more */
    OK(ws_store_session_delete(f.s, f.acme, ids[0], &e_));
    assert_count(f.s, f.acme, 2);
    OK(ws_store_session_create(f.s, f.acme, f.model, NULL, 0, 0, 0, 3, ids[0], &e_));
    expect_status(ws_store_session_create(f.s, f.acme, f.model, NULL, 0, 0, 0, 3, id, &err),
                  WS_ERR_CONFLICT, &err, "full again");
    /* creates and a delete inside a group that is rolled back: all undone */
    OK(ws_store_begin(f.s, &e_));
    OK(ws_store_session_delete(f.s, f.acme, ids[1], &e_));
    OK(ws_store_session_create(f.s, f.acme, f.model, NULL, 0, 0, 0, 3, id, &e_));
    OK(ws_store_session_create(f.s, f.evil, f.model, NULL, 0, 0, 0, 0, id, &e_));
    assert_count(f.s, f.evil, 2); /* the transaction sees its own writes */
    OK(ws_store_rollback(f.s, &e_));
    assert_count(f.s, f.acme, 3);
    assert_count(f.s, f.evil, 1);
    check_integrity(f.s);
    ws_store_close(f.s);
    /* past the API: the counters are the rows' counts */
    assert_raw_count("counter.db",
                     "SELECT count(*) FROM tenants t WHERE t.n_sessions <> "
                     "(SELECT count(*) FROM sessions s WHERE s.tenant = t.id)",
                     0);
}

/* ---- group commit ------------------------------------------------------------ */

static void test_group_commit_with_stale_step(void **state)
{
    (void)state;
    fixture f = make_fixture("group.db");
    ws_store *other = open_db("group.db", WS_STORE_DURABILITY_NORMAL);
    ws_error err = {0};
    enum { N = 5, STALE = 2 };
    char ids[N][WS_STORE_ID_LEN + 1], evil_id[WS_STORE_ID_LEN + 1], buf[64];
    for (int i = 0; i < N; i++)
        OK(ws_store_session_create(f.s, f.acme, f.model, NULL, 0, 0, 0, 0, ids[i], &e_));
    OK(ws_store_session_create(f.s, f.evil, f.model, NULL, 0, 0, 0, 0, evil_id, &e_));
    /* session STALE moves to step 1 first, so "expect 0" is stale for it */
    float *pre = make_state(100, 4, 8);
    ws_store_log_entry e = entry_for(1, buf, sizeof buf);
    OK(ws_store_apply_step(f.s, f.acme, ids[STALE], 0, pre, 4, 8, &e, NULL, &e_));

    float *w[N];
    int64_t cur[N];
    ws_status st[N];
    OK(ws_store_begin(f.s, &e_));
    assert_true(ws_store_in_transaction(f.s));
    expect_status(ws_store_begin(f.s, &err), WS_ERR_INVALID, &err, "nested begin");
    for (int i = 0; i < N; i++) {
        w[i] = make_state(i, 4, 8);
        cur[i] = -1;
        st[i] = ws_store_apply_step(f.s, f.acme, ids[i], 0, w[i], 4, 8, &e, &cur[i], &err);
        if (i == STALE / 2) { /* a foreign session in the same batch: NOTFOUND, harmless */
            int64_t c = -1;
            expect_status(ws_store_apply_step(f.s, f.acme, evil_id, 0, w[i], 4, 8, &e, &c, &err),
                          WS_ERR_NOTFOUND, &err, "other tenant in group");
            assert_int_equal(c, -1);
        }
    }
    /* nothing is visible to another connection before the commit: a step may
     * be acknowledged only after it */
    ws_store_session got;
    OK(ws_store_session_get(other, f.acme, ids[0], 0, &got, &e_));
    assert_int_equal(got.step, 0);
    ws_store_session_clear(&got);
    OK(ws_store_commit(f.s, &e_));
    assert_false(ws_store_in_transaction(f.s));

    for (int i = 0; i < N; i++) {
        if (i == STALE) {
            expect_status(st[i], WS_ERR_CONFLICT, NULL, "stale expect_step");
            assert_int_equal(cur[i], 1); /* the current step comes back */
        } else {
            expect_status(st[i], WS_OK, NULL, "fresh expect_step");
            assert_int_equal(cur[i], 1);
        }
    }
    /* seen through the second connection: committed ones moved, the stale one
     * kept its earlier state and its one log entry */
    for (int i = 0; i < N; i++) {
        OK(ws_store_session_get(other, f.acme, ids[i], 1, &got, &e_));
        assert_int_equal(got.step, 1);
        assert_memory_equal(got.state, i == STALE ? pre : w[i], 32 * sizeof(float));
        assert_int_equal(got.state_version, 3);
        ws_store_session_clear(&got);
        int n = 0;
        OK(ws_store_log_each(other, f.acme, ids[i], count_log_cb, &n, &e_));
        assert_int_equal(n, 1);
    }
    /* the retry with the right step goes through */
    OK(ws_store_apply_step(f.s, f.acme, ids[STALE], 1, w[STALE], 4, 8, &e, &cur[STALE], &e_));
    assert_int_equal(cur[STALE], 2);
    for (int i = 0; i < N; i++) free(w[i]);
    free(pre);
    expect_status(ws_store_commit(f.s, &err), WS_ERR_INVALID, &err, "commit without begin");
    check_integrity(f.s);
    ws_store_close(other);
    ws_store_close(f.s);
}

static void test_rollback_leaves_nothing(void **state)
{
    (void)state;
    fixture f = make_fixture("rollback.db");
    char ids[3][WS_STORE_ID_LEN + 1], buf[64];
    for (int i = 0; i < 3; i++)
        OK(ws_store_session_create(f.s, f.acme, f.model, NULL, 0, 0, 0, 0, ids[i], &e_));
    float *w = make_state(1, 2, 2);
    ws_store_log_entry e = entry_for(1, buf, sizeof buf);
    OK(ws_store_begin(f.s, &e_));
    for (int i = 0; i < 3; i++)
        OK(ws_store_apply_step(f.s, f.acme, ids[i], 0, w, 2, 2, &e, NULL, &e_));
    const char *syms[] = {"a", "b"};
    OK(ws_store_vocab_append(f.s, f.model, 0, 2, syms, &e_));
    OK(ws_store_version_add(f.s, f.model, 1, "/x/v1.safetensors", SHA, NULL, &e_));
    OK(ws_store_rollback(f.s, &e_));
    OK(ws_store_rollback(f.s, &e_)); /* harmless when nothing is open */

    ws_store_session got;
    for (int i = 0; i < 3; i++) {
        OK(ws_store_session_get(f.s, f.acme, ids[i], 1, &got, &e_));
        assert_int_equal(got.step, 0);
        assert_null(got.state);
        ws_store_session_clear(&got);
    }
    int64_t n;
    OK(ws_store_vocab_count(f.s, f.model, &n, &e_));
    assert_int_equal(n, 0);
    ws_store_model m;
    OK(ws_store_model_get(f.s, f.model, &m, &e_));
    assert_int_equal(m.current_version, 0);
    ws_store_model_clear(&m);
    /* an open transaction is rolled back by close, too */
    OK(ws_store_begin(f.s, &e_));
    OK(ws_store_apply_step(f.s, f.acme, ids[0], 0, w, 2, 2, &e, NULL, &e_));
    ws_store_close(f.s);
    assert_raw_count("rollback.db", "SELECT count(*) FROM step_log", 0);
    assert_raw_count("rollback.db", "SELECT max(step) FROM sessions", 0);
    free(w);
}

static void test_state_bit_exact(void **state)
{
    (void)state;
    fixture f = make_fixture("bits.db");
    enum { R = 3, C = 7 }; /* 84 bytes: not a multiple of 8 or 16 */
    uint32_t bits[R * C] = {
        0x00000000, 0x80000000, /* +0, -0 */
        0x00000001, 0x807fffff, /* denormals */
        0x7f800000, 0xff800000, /* +-inf */
        0x7fc00001, 0xffffffff, 0x7f800001, /* NaNs with payloads, a signalling NaN */
        0x3f800000, 0x7f7fffff};
    ws_test_rng rng = {0x5eed};
    for (int i = 11; i < R * C; i++) bits[i] = (uint32_t)ws_test_next(&rng);
    float w[R * C];
    memcpy(w, bits, sizeof w);
    char id[WS_STORE_ID_LEN + 1], buf[64];
    OK(ws_store_session_create(f.s, f.acme, f.model, w, R, C, 7, 0, id, &e_));
    ws_store_session got;
    OK(ws_store_session_get(f.s, f.acme, id, 1, &got, &e_));
    assert_int_equal(got.rows, R);
    assert_int_equal(got.cols, C);
    assert_int_equal(got.state_version, 7);
    assert_memory_equal(got.state, bits, sizeof bits);
    ws_store_session_clear(&got);
    /* the same through apply_step, reversed; and a shape change is stored as is */
    uint32_t rev[R * C];
    for (int i = 0; i < R * C; i++) rev[i] = bits[R * C - 1 - i];
    memcpy(w, rev, sizeof w);
    ws_store_log_entry e = entry_for(1, buf, sizeof buf);
    OK(ws_store_apply_step(f.s, f.acme, id, 0, w, C, R, &e, NULL, &e_));
    OK(ws_store_session_get(f.s, f.acme, id, 1, &got, &e_));
    assert_int_equal(got.rows, C);
    assert_int_equal(got.cols, R);
    assert_memory_equal(got.state, rev, sizeof rev);
    ws_store_session_clear(&got);
    /* without with_state the shape comes back but no buffer */
    OK(ws_store_session_get(f.s, f.acme, id, 0, &got, &e_));
    assert_int_equal(got.rows, C);
    assert_null(got.state);
    ws_store_session_clear(&got);
    ws_error err;
    expect_status(ws_store_apply_step(f.s, f.acme, id, 1, NULL, 0, 0, &e, NULL, &err),
                  WS_ERR_INVALID, &err, "apply without a state");
    /* a re-derived state replaces the state and its version, never the step or log */
    OK(ws_store_session_set_state(f.s, f.acme, id, 1, (const float *)bits, R, C, 9, &e_));
    OK(ws_store_session_get(f.s, f.acme, id, 1, &got, &e_));
    assert_int_equal(got.step, 1);
    assert_int_equal(got.state_version, 9);
    assert_int_equal(got.rows, R);
    assert_memory_equal(got.state, bits, sizeof bits);
    ws_store_session_clear(&got);
    expect_status(ws_store_session_set_state(f.s, f.acme, id, 0, w, R, C, 4, &err),
                  WS_ERR_CONFLICT, &err, "set_state at a stale step");
    expect_status(ws_store_session_set_state(f.s, f.evil, id, 1, w, R, C, 4, &err),
                  WS_ERR_NOTFOUND, &err, "set_state of another tenant's session");
    expect_status(ws_store_session_set_state(f.s, f.acme, id, 1, NULL, 0, 0, 4, &err),
                  WS_ERR_INVALID, &err, "set_state without a state");
    OK(ws_store_session_get(f.s, f.acme, id, 1, &got, &e_));
    assert_int_equal(got.state_version, 9);
    assert_memory_equal(got.state, bits, sizeof bits);
    assert_raw_count("bits.db", "SELECT count(*) FROM step_log", 1);
    ws_store_session_clear(&got);
    ws_store_close(f.s);
}

/* ---- the step log ------------------------------------------------------------ */

typedef struct {
    int64_t steps[64];
    int n;
    int labelled_step; /* the one step expected to carry labels */
    const char *labels;
} log_seen;

static ws_status collect_log(void *ctx, const ws_store_log_entry *e)
{
    log_seen *l = ctx;
    assert_true(l->n < 64);
    l->steps[l->n++] = e->step;
    char want[64];
    snprintf(want, sizeof want, "[[\"step\",\"%d\"]]", (int)e->step);
    assert_string_equal(e->instructions_json, want);
    assert_string_equal(e->queries_json, "[[\"q\"]]");
    assert_string_equal(e->answers_json, "[0.5]");
    assert_int_equal(e->model_version, 3);
    assert_true(e->time_ms > 0);
    if (e->step == l->labelled_step)
        assert_string_equal(e->labels_json, l->labels);
    else
        assert_null(e->labels_json);
    return WS_OK;
}

static void test_step_log_paging_and_labels(void **state)
{
    (void)state;
    fixture f = make_fixture("log.db");
    ws_error err = {0};
    char id[WS_STORE_ID_LEN + 1], other[WS_STORE_ID_LEN + 1], buf[64];
    OK(ws_store_session_create(f.s, f.acme, f.model, NULL, 0, 0, 0, 0, id, &e_));
    OK(ws_store_session_create(f.s, f.acme, f.model, NULL, 0, 0, 0, 0, other, &e_));
    float w[4] = {0};
    for (int t = 1; t <= 25; t++) {
        ws_store_log_entry e = entry_for(t, buf, sizeof buf);
        w[0] = (float)t;
        int64_t cur;
        OK(ws_store_apply_step(f.s, f.acme, id, t - 1, w, 1, 4, &e, &cur, &e_));
        assert_int_equal(cur, t);
        if (t <= 3) OK(ws_store_apply_step(f.s, f.acme, other, t - 1, w, 1, 4, &e, NULL, &e_));
    }
    /* pages of 10 after 0, 10, 20, 25 */
    static const int want_n[] = {10, 10, 5, 0};
    for (int p = 0; p < 4; p++) {
        log_seen seen = {.labelled_step = -1};
        int64_t after = p < 3 ? 10 * p : 25;
        OK(ws_store_log_page(f.s, f.acme, id, after, 10, collect_log, &seen, &e_));
        assert_int_equal(seen.n, want_n[p]);
        for (int i = 0; i < seen.n; i++) assert_int_equal(seen.steps[i], after + 1 + i);
    }
    expect_status(ws_store_log_page(f.s, f.acme, id, 0, WS_STORE_PAGE_MAX + 1, collect_log, NULL,
                                    &err),
                  WS_ERR_INVALID, &err, "page too large");

    /* labels arrive later: set, retry with the same, refuse different, replace */
    OK(ws_store_log_set_labels(f.s, f.acme, id, 7, "[true]", 0, &e_));
    OK(ws_store_log_set_labels(f.s, f.acme, id, 7, "[true]", 0, &e_));
    expect_status(ws_store_log_set_labels(f.s, f.acme, id, 7, "[false]", 0, &err),
                  WS_ERR_CONFLICT, &err, "different labels");
    log_seen seen = {.labelled_step = 7, .labels = "[true]"};
    OK(ws_store_log_page(f.s, f.acme, id, 6, 1, collect_log, &seen, &e_));
    assert_int_equal(seen.n, 1);
    OK(ws_store_log_set_labels(f.s, f.acme, id, 7, "[false]", 1, &e_));
    expect_status(ws_store_log_set_labels(f.s, f.acme, id, 26, "[1]", 0, &err), WS_ERR_NOTFOUND,
                  &err, "labels for an unlogged step");
    expect_status(ws_store_log_set_labels(f.s, f.acme, id, 0, "[1]", 0, &err), WS_ERR_NOTFOUND,
                  &err, "labels for step 0");

    /* the whole log in order (replay), only this session's steps */
    seen = (log_seen){.labelled_step = 7, .labels = "[false]"};
    OK(ws_store_log_each(f.s, f.acme, id, collect_log, &seen, &e_));
    assert_int_equal(seen.n, 25);
    for (int i = 0; i < 25; i++) assert_int_equal(seen.steps[i], i + 1);
    seen = (log_seen){.labelled_step = -1};
    OK(ws_store_log_each(f.s, f.acme, other, collect_log, &seen, &e_));
    assert_int_equal(seen.n, 3);

    /* labels given with the step itself */
    ws_store_log_entry e = entry_for(4, buf, sizeof buf);
    e.labels_json = "[1,0]";
    OK(ws_store_apply_step(f.s, f.acme, other, 3, w, 1, 4, &e, NULL, &e_));
    seen = (log_seen){.labelled_step = 4, .labels = "[1,0]"};
    OK(ws_store_log_page(f.s, f.acme, other, 3, 5, collect_log, &seen, &e_));
    assert_int_equal(seen.n, 1);
    /* a missing field is bad input: nothing changes */
    e.answers_json = NULL;
    int64_t cur = -1;
    expect_status(ws_store_apply_step(f.s, f.acme, other, 4, w, 1, 4, &e, &cur, &err),
                  WS_ERR_INVALID, &err, "entry without answers");
    assert_int_equal(cur, -1);
    check_integrity(f.s);
    ws_store_close(f.s);
}

/* ---- vocabulary -------------------------------------------------------------- */

typedef struct {
    char syms[16][16];
    int n;
} vocab_seen;

static ws_status collect_vocab(void *ctx, int64_t id, const char *sym, size_t len)
{
    vocab_seen *v = ctx;
    assert_int_equal(id, v->n);
    assert_int_equal(strlen(sym), len);
    snprintf(v->syms[v->n++], sizeof v->syms[0], "%s", sym);
    return WS_OK;
}

static void test_vocab(void **state)
{
    (void)state;
    fixture f = make_fixture("vocab.db");
    ws_error err = {0};
    int64_t m2, n;
    OK(ws_store_model_create(f.s, "facts", 0, "{}", "{}", &m2, &e_));
    const char *a[] = {"mary", "location", "kitchen"};
    const char *b[] = {"caf\xc3\xa9", "john"};
    OK(ws_store_vocab_append(f.s, f.model, 0, 3, a, &e_));
    OK(ws_store_vocab_append(f.s, f.model, 3, 2, b, &e_));
    OK(ws_store_vocab_append(f.s, m2, 0, 1, b + 1, &e_)); /* models are separate */
    OK(ws_store_vocab_append(f.s, f.model, 5, 0, NULL, &e_)); /* nothing to do */

    /* the caller's ids must continue the stored ones */
    const char *c[] = {"x"};
    expect_status(ws_store_vocab_append(f.s, f.model, 4, 1, c, &err), WS_ERR_CONFLICT, &err,
                  "append at a wrong id");
    /* a symbol already stored fails the whole append */
    const char *d[] = {"new", "mary"};
    expect_status(ws_store_vocab_append(f.s, f.model, 5, 2, d, &err), WS_ERR_CONFLICT, &err,
                  "duplicate symbol");
    expect_status(ws_store_vocab_append(f.s, 999, 0, 1, c, &err), WS_ERR_NOTFOUND, &err,
                  "unknown model");
    OK(ws_store_vocab_count(f.s, f.model, &n, &e_));
    assert_int_equal(n, 5);

    vocab_seen v = {0};
    OK(ws_store_vocab_load(f.s, f.model, collect_vocab, &v, &e_));
    assert_int_equal(v.n, 5);
    const char *want[] = {"mary", "location", "kitchen", "caf\xc3\xa9", "john"};
    for (int i = 0; i < 5; i++) assert_string_equal(v.syms[i], want[i]);
    v = (vocab_seen){0};
    OK(ws_store_vocab_load(f.s, m2, collect_vocab, &v, &e_));
    assert_int_equal(v.n, 1);
    assert_string_equal(v.syms[0], "john");
    ws_store_close(f.s);
}

/* The merge of several daemons appending at once (ws_store_vocab_merge). */
static ws_status refuse_vocab(void *ctx, int64_t id, const char *sym, size_t len)
{
    (void)ctx, (void)id, (void)sym, (void)len;
    return WS_ERR_INVALID;
}

static void expect_vocab(ws_store *s, int64_t model, const char *const *want, int n)
{
    vocab_seen v = {0};
    OK(ws_store_vocab_load(s, model, collect_vocab, &v, &e_));
    assert_int_equal(v.n, n);
    for (int i = 0; i < n; i++) assert_string_equal(v.syms[i], want[i]);
}

static void test_vocab_merge(void **state)
{
    (void)state;
    fixture f = make_fixture("vocab_merge.db");
    ws_error err = {0};
    int64_t count = 0;
    const char *ab[] = {"a", "b"}, *cd[] = {"c", "d"}, *ecf[] = {"e", "c", "f"};
    OK(ws_store_vocab_append(f.s, f.model, 0, 2, ab, &e_));
    /* at the stored count a merge is an append: no one else's symbols */
    vocab_seen others = {0};
    OK(ws_store_vocab_merge(f.s, f.model, 2, 2, cd, 100, collect_vocab, &others, &count, &e_));
    assert_int_equal(others.n, 0);
    assert_int_equal(count, 4);
    /* a daemon that saw 2 symbols merges after c, d, which it is handed, and
     * its c is not stored twice */
    others = (vocab_seen){.n = 2};
    OK(ws_store_vocab_merge(f.s, f.model, 2, 3, ecf, 100, collect_vocab, &others, &count, &e_));
    assert_int_equal(others.n, 4);
    assert_string_equal(others.syms[2], "c");
    assert_string_equal(others.syms[3], "d");
    assert_int_equal(count, 6);
    const char *want[] = {"a", "b", "c", "d", "e", "f", "g", "h"};
    expect_vocab(f.s, f.model, want, 6);

    /* a limit of 8 symbols in all: of g, h, i after e, f only g, h fit */
    const char *ghi[] = {"g", "h", "i"};
    others = (vocab_seen){.n = 4};
    OK(ws_store_vocab_merge(f.s, f.model, 4, 3, ghi, 8, collect_vocab, &others, &count, &e_));
    assert_int_equal(others.n, 6);
    assert_int_equal(count, 8);
    expect_vocab(f.s, f.model, want, 8);
    /* nothing to add: the count all the same */
    count = 0;
    OK(ws_store_vocab_merge(f.s, f.model, 8, 0, NULL, 100, collect_vocab, &others, &count, &e_));
    assert_int_equal(count, 8);

    /* what fails changes nothing */
    const char *x[] = {"x"};
    expect_status(
        ws_store_vocab_merge(f.s, f.model, 9, 1, x, 100, collect_vocab, &others, &count, &err),
        WS_ERR_CONFLICT, &err, "merge past the stored count");
    expect_status(ws_store_vocab_merge(f.s, f.model, 7, 1, x, 100, refuse_vocab, NULL, &count, &err),
                  WS_ERR_INVALID, &err, "callback refuses");
    expect_status(ws_store_vocab_merge(f.s, f.model, 7, 1, x, 100, NULL, NULL, &count, &err),
                  WS_ERR_INVALID, &err, "no callback");
    expect_status(ws_store_vocab_merge(f.s, f.model, 7, 1, x, 100, collect_vocab, &others, NULL,
                                       &err),
                  WS_ERR_INVALID, &err, "no count");
    expect_status(
        ws_store_vocab_merge(f.s, 999, 0, 1, x, 100, collect_vocab, &others, &count, &err),
        WS_ERR_NOTFOUND, &err, "unknown model");
    /* the strict append still refuses what a merge takes */
    expect_status(ws_store_vocab_append(f.s, f.model, 7, 1, x, &err), WS_ERR_CONFLICT, &err,
                  "append behind the stored count");
    expect_vocab(f.s, f.model, want, 8);
    ws_store_close(f.s);
}

/* ---- models and versions ----------------------------------------------------- */

typedef struct {
    int64_t versions[8];
    int n;
} version_seen;

static ws_status collect_versions(void *ctx, const ws_store_version *v)
{
    version_seen *s = ctx;
    s->versions[s->n++] = v->version;
    return WS_OK;
}

static ws_status count_models(void *ctx, const ws_store_model *m)
{
    assert_non_null(m->config_json);
    ++*(int *)ctx;
    return WS_OK;
}

static void test_models_and_versions(void **state)
{
    (void)state;
    fixture f = make_fixture("models.db");
    ws_error err = {0};
    int64_t id;
    expect_status(ws_store_model_create(f.s, "life", 0, "{}", NULL, &id, &err), WS_ERR_CONFLICT,
                  &err, "duplicate model name");
    expect_status(ws_store_model_create(f.s, "bad name!", 0, "{}", NULL, &id, &err),
                  WS_ERR_INVALID, &err, "bad model name");
    ws_store_model m;
    OK(ws_store_model_find(f.s, "life", &m, &e_));
    assert_int_equal(m.id, f.model);
    assert_string_equal(m.config_json, "{\"d\":8}");
    assert_string_equal(m.training_json, "{}");
    assert_int_equal(m.current_version, 0);
    ws_store_model_clear(&m);
    expect_status(ws_store_model_find(f.s, "nope", &m, &err), WS_ERR_NOTFOUND, &err, "find");
    OK(ws_store_model_set_training(f.s, f.model, "{\"lr\":0.001}", &e_));
    expect_status(ws_store_model_set_training(f.s, 999, "{}", &err), WS_ERR_NOTFOUND, &err,
                  "training of unknown model");

    int64_t max = -1;
    OK(ws_store_version_max(f.s, f.model, &max, &e_));
    assert_int_equal(max, 0);
    OK(ws_store_version_add(f.s, f.model, 1, "/ck/life-1.safetensors", SHA, "init", &e_));
    OK(ws_store_version_add(f.s, f.model, 2, "/ck/life-2.safetensors", SHA, NULL, &e_));
    expect_status(ws_store_version_add(f.s, f.model, 2, "/ck/x", SHA, NULL, &err), WS_ERR_CONFLICT,
                  &err, "repeated version");
    expect_status(ws_store_version_add(f.s, 999, 1, "/ck/x", SHA, NULL, &err), WS_ERR_NOTFOUND,
                  &err, "version of unknown model");
    OK(ws_store_model_get(f.s, f.model, &m, &e_));
    assert_int_equal(m.current_version, 2);
    assert_string_equal(m.training_json, "{\"lr\":0.001}");
    ws_store_model_clear(&m);
    /* roll back to 1; a new version must still exceed 2 */
    OK(ws_store_model_set_current(f.s, f.model, 1, &e_));
    expect_status(ws_store_model_set_current(f.s, f.model, 9, &err), WS_ERR_NOTFOUND, &err,
                  "unrecorded version");
    expect_status(ws_store_version_add(f.s, f.model, 2, "/ck/x", SHA, NULL, &err), WS_ERR_CONFLICT,
                  &err, "reused version number");
    OK(ws_store_model_get(f.s, f.model, &m, &e_));
    assert_int_equal(m.current_version, 1);
    ws_store_model_clear(&m);
    OK(ws_store_version_max(f.s, f.model, &max, &e_)); /* the greatest, not the current one */
    assert_int_equal(max, 2);
    OK(ws_store_version_add(f.s, f.model, 3, "/ck/life-3.safetensors", SHA, NULL, &e_));
    ws_store_version v;
    OK(ws_store_version_get(f.s, f.model, 1, &v, &e_));
    assert_string_equal(v.path, "/ck/life-1.safetensors");
    assert_string_equal(v.note, "init");
    assert_string_equal(v.sha256, SHA);
    assert_true(v.created_ms > 0);
    ws_store_version_clear(&v);
    version_seen seen = {0};
    OK(ws_store_version_list(f.s, f.model, collect_versions, &seen, &e_));
    assert_int_equal(seen.n, 3);
    for (int i = 0; i < 3; i++) assert_int_equal(seen.versions[i], i + 1);

    int64_t m2;
    OK(ws_store_model_create(f.s, "facts", 0, "{}", NULL, &m2, &e_));
    int nm = 0;
    OK(ws_store_model_list(f.s, count_models, &nm, &e_));
    assert_int_equal(nm, 2);

    /* a model in use cannot go; an unused one goes with versions and vocab */
    char sid[WS_STORE_ID_LEN + 1];
    OK(ws_store_session_create(f.s, f.acme, f.model, NULL, 0, 0, 0, 0, sid, &e_));
    expect_status(ws_store_model_delete(f.s, f.model, &err), WS_ERR_CONFLICT, &err,
                  "delete a model in use");
    OK(ws_store_session_delete(f.s, f.acme, sid, &e_));
    const char *syms[] = {"a"};
    OK(ws_store_vocab_append(f.s, f.model, 0, 1, syms, &e_));
    OK(ws_store_model_delete(f.s, f.model, &e_));
    expect_status(ws_store_model_get(f.s, f.model, &m, &err), WS_ERR_NOTFOUND, &err, "deleted");
    expect_status(ws_store_version_get(f.s, f.model, 1, &v, &err), WS_ERR_NOTFOUND, &err,
                  "version of a deleted model");
    expect_status(ws_store_model_delete(f.s, f.model, &err), WS_ERR_NOTFOUND, &err,
                  "delete twice");
    check_integrity(f.s);
    ws_store_close(f.s);
    assert_raw_count("models.db", "SELECT count(*) FROM vocab", 0);
    assert_raw_count("models.db", "SELECT count(*) FROM model_versions", 0);
}

/* A tenant's model: recorded with its tenant, usable by that tenant's sessions
 * only (another tenant's session is NOTFOUND, as for a missing model). */
static void test_model_of_tenant(void **state)
{
    (void)state;
    fixture f = make_fixture("tenant_model.db");
    ws_error err = {0};
    int64_t own, id;
    expect_status(ws_store_model_create(f.s, "acme-only", 999, "{}", NULL, &id, &err),
                  WS_ERR_NOTFOUND, &err, "model of an unknown tenant");
    OK(ws_store_model_create(f.s, "acme-only", f.acme, "{}", NULL, &own, &e_));
    ws_store_model m;
    OK(ws_store_model_find(f.s, "acme-only", &m, &e_));
    assert_int_equal(m.tenant, f.acme);
    assert_string_equal(m.tenant_name, "acme");
    ws_store_model_clear(&m);
    OK(ws_store_model_get(f.s, f.model, &m, &e_)); /* the fixture's model is shared */
    assert_int_equal(m.tenant, 0);
    assert_string_equal(m.tenant_name, "");
    ws_store_model_clear(&m);

    char sid[WS_STORE_ID_LEN + 1];
    expect_status(ws_store_session_create(f.s, f.evil, own, NULL, 0, 0, 1, 0, sid, &err),
                  WS_ERR_NOTFOUND, &err, "a session on another tenant's model");
    char missing[64]; /* worded as for a model that does not exist */
    snprintf(missing, sizeof missing, "model %lld not found", (long long)own);
    assert_string_equal(err.msg, missing);
    int64_t n = -1;
    OK(ws_store_session_count(f.s, f.evil, &n, &e_));
    assert_int_equal(n, 0);
    OK(ws_store_session_create(f.s, f.acme, own, NULL, 0, 0, 1, 0, sid, &e_));
    OK(ws_store_session_create(f.s, f.evil, f.model, NULL, 0, 0, 1, 0, sid, &e_));
    check_integrity(f.s);
    ws_store_close(f.s);
    assert_raw_count("tenant_model.db", "SELECT count(*) FROM models WHERE tenant IS NULL", 1);
}

/* ---- the cluster lock ---------------------------------------------------------- */

/* One connection at a time holds a key on a shared store (PostgreSQL), and asking
 * again while holding it keeps it; closing the holder frees it for another.
 * SQLite has one daemon per file: every connection leads. */
static void test_leader_lock(void **state)
{
    (void)state;
    fixture f = make_fixture("leader.db");
    ws_store *other = open_db("leader.db", WS_STORE_DURABILITY_NORMAL);
    int shared = ws_store_shared(f.s), held = -1;
    assert_int_equal(shared, on_postgresql());
    OK(ws_store_leader_try(f.s, 7, &held, &e_));
    assert_int_equal(held, 1);
    OK(ws_store_leader_try(f.s, 7, &held, &e_)); /* again: still held, not stacked */
    assert_int_equal(held, 1);
    OK(ws_store_leader_try(other, 7, &held, &e_));
    assert_int_equal(held, !shared);
    OK(ws_store_leader_try(other, 8, &held, &e_)); /* another key is free */
    assert_int_equal(held, 1);
    ws_error err;
    expect_status(ws_store_leader_try(other, -1, &held, &err), WS_ERR_INVALID, &err, "bad key");
    ws_store_close(f.s); /* the holder goes: the lock with it, once its server process has
                            ended (after the close returns: asked again for up to 10 s) */
    held = 0;
    for (int i = 0; i < 100 && !held; i++) {
        if (i) usleep(100 * 1000);
        OK(ws_store_leader_try(other, 7, &held, &e_));
    }
    assert_int_equal(held, 1);
    ws_store_close(other);
}

int main(void)
{
    const struct CMUnitTest per_backend[] = {
        cmocka_unit_test(test_sessions_and_isolation),
        cmocka_unit_test(test_session_list_count_limit),
        cmocka_unit_test(test_session_counter),
        cmocka_unit_test(test_group_commit_with_stale_step),
        cmocka_unit_test(test_rollback_leaves_nothing),
        cmocka_unit_test(test_state_bit_exact),
        cmocka_unit_test(test_step_log_paging_and_labels),
        cmocka_unit_test(test_vocab),
        cmocka_unit_test(test_vocab_merge),
        cmocka_unit_test(test_models_and_versions),
        cmocka_unit_test(test_model_of_tenant),
        cmocka_unit_test(test_leader_lock),
    };
    return storage_run(NULL, 0, per_backend, sizeof per_backend / sizeof *per_backend);
}
