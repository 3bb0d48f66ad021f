/* evaluate.c — roll a model out on fresh worlds to long horizons and score it,
 * next to the task's baselines. */
#include <stdlib.h>
#include <string.h>

#include "trainer.h"

typedef struct {
    double q, q_ok, groups, groups_ok, boards, boards_ok, recall, recall_ok;
    double told, told_ok, untold, untold_ok;
    double slot[WS_QS_N], slot_ok[WS_QS_N];
    double b_ok[WS_TASK_MAX_BASELINES], b_boards_ok[WS_TASK_MAX_BASELINES];
    double b_untold_ok[WS_TASK_MAX_BASELINES];
} tally;

/* Scores one trajectory's queries at one step into a tally. */
static void score(tally *s, const float *probs, const float *labels, const ws_query_info *info,
                  int n, int n_baselines, int *group_best)
{
    int board_ok = 1, b_board_ok[WS_TASK_MAX_BASELINES];
    for (int k = 0; k < n_baselines; k++) b_board_ok[k] = 1;
    int any = 0;
    for (int i = 0; i < n; i++) group_best[i] = -1;
    for (int i = 0; i < n; i++) {
        if (labels[i] < 0.0f) continue;
        any = 1;
        int truth = labels[i] >= 0.5f, ok = (probs[i] >= 0.5f) == truth;
        s->q++, s->q_ok += ok;
        board_ok &= ok;
        if (info[i].kind == WS_QK_RECALL) s->recall++, s->recall_ok += ok;
        if (info[i].kind == WS_QK_TOLD) s->told++, s->told_ok += ok;
        if (info[i].kind == WS_QK_UNTOLD) s->untold++, s->untold_ok += ok;
        if (info[i].slot > WS_QS_NONE && info[i].slot < WS_QS_N)
            s->slot[info[i].slot]++, s->slot_ok[info[i].slot] += ok;
        for (int k = 0; k < n_baselines; k++) {
            int bok = (info[i].baseline[k] >= 0.5f) == truth;
            s->b_ok[k] += bok;
            b_board_ok[k] &= bok;
            if (info[i].kind == WS_QK_UNTOLD) s->b_untold_ok[k] += bok;
        }
        int g = info[i].group;
        if (g >= 0 && g < n && (group_best[g] < 0 || probs[i] > probs[group_best[g]]))
            group_best[g] = i;
    }
    if (!any) return;
    s->boards++, s->boards_ok += board_ok;
    for (int k = 0; k < n_baselines; k++) s->b_boards_ok[k] += b_board_ok[k];
    for (int g = 0; g < n; g++)
        if (group_best[g] >= 0) s->groups++, s->groups_ok += labels[group_best[g]] >= 0.5f;
}

static double ratio(double a, double b) { return b > 0 ? a / b : -1.0; }

ws_status ws_evaluate(ws_exec *x, const ws_task_params *task, const ws_eval_config *ec,
                      ws_eval_point *out, ws_error *err)
{
    ws_model *m = ws_exec_model(x);
    if (ec->n_traj < 1 || ec->n_horizons < 1 || ec->n_horizons > WS_EVAL_MAX_HORIZONS)
        return ws_error_set(err, WS_ERR_INVALID, "evaluate: bad trajectory or horizon count");
    int last = ec->horizons[ec->n_horizons - 1];
    ws_task *tk = NULL;
    ws_batch *b = NULL;
    float *states = NULL, *probs = NULL;
    ws_query_info *info = NULL;
    int *group_best = NULL;
    tally *tal = calloc((size_t)ec->n_horizons, sizeof *tal);
    ws_status st = ws_task_new(&tk, task, ec->n_traj, ws_model_vocab(m), err);
    if (st == WS_OK) st = ws_task_check_model(tk, ws_model_config_of(m), err);
    if (st != WS_OK) goto done;
    int maxq = ws_task_max_queries(tk), nb = ws_task_n_baselines(tk);
    st = ws_batch_new(&b, ws_model_config_of(m));
    if (st == WS_OK) st = ws_model_state_alloc(m, ec->n_traj, &states, err);
    probs = malloc((size_t)ec->n_traj * maxq * sizeof *probs);
    info = malloc((size_t)ec->n_traj * maxq * sizeof *info);
    group_best = malloc((size_t)(maxq > 0 ? maxq : 1) * sizeof *group_best);
    if (st != WS_OK || !tal || !probs || !info || !group_best) {
        st = ws_error_set(err, st == WS_OK ? WS_ERR_NOMEM : st, "evaluate: out of memory");
        goto done;
    }
    for (int i = 0; i < ec->n_traj; i++)
        if ((st = ws_task_reset(tk, i, ec->seed * 7919ULL + (uint64_t)i + 1)) != WS_OK) goto done;
    for (int step = 1; step <= last; step++) {
        ws_batch_clear(b);
        for (int i = 0; i < ec->n_traj && st == WS_OK; i++) {
            st = ws_batch_begin_traj(b, step == 1);
            if (st == WS_OK) st = ws_task_step(tk, i, b, info + (size_t)ws_batch_n_query(b), err);
        }
        if (st == WS_OK)
            st = ws_exec_step(x, b, states, states, WS_STEP_INFER, 1.0f, probs, NULL, err);
        if (st != WS_OK) goto done;
        for (int h = 0; h < ec->n_horizons; h++) {
            int hz = ec->horizons[h], w = ec->window < hz ? ec->window : hz;
            if (step <= hz - w || step > hz) continue;
            for (int i = 0; i < ec->n_traj; i++) {
                int off = ws_batch_query_off(b, i);
                score(&tal[h], probs + off, ws_batch_labels(b) + off, info + off,
                      ws_batch_query_count(b, i), nb, group_best);
            }
        }
    }
    for (int h = 0; h < ec->n_horizons; h++) {
        tally *s = &tal[h];
        ws_eval_point *p = &out[h];
        memset(p, 0, sizeof *p);
        p->horizon = ec->horizons[h];
        p->n_queries = (long)s->q, p->n_groups = (long)s->groups, p->n_boards = (long)s->boards;
        p->acc = ratio(s->q_ok, s->q);
        p->group_acc = ratio(s->groups_ok, s->groups);
        p->exact_acc = ratio(s->boards_ok, s->boards);
        p->recall_acc = ratio(s->recall_ok, s->recall);
        p->told_acc = ratio(s->told_ok, s->told);
        p->untold_acc = ratio(s->untold_ok, s->untold);
        for (int k = 0; k < WS_QS_N; k++) p->slot_acc[k] = ratio(s->slot_ok[k], s->slot[k]);
        for (int k = 0; k < WS_TASK_MAX_BASELINES; k++) {
            p->baseline_acc[k] = k < nb ? ratio(s->b_ok[k], s->q) : -1.0;
            p->baseline_exact[k] = k < nb ? ratio(s->b_boards_ok[k], s->boards) : -1.0;
            p->baseline_untold[k] = k < nb ? ratio(s->b_untold_ok[k], s->untold) : -1.0;
        }
    }
done:
    if (states) ws_backend_release(ws_model_backend(m), states);
    ws_batch_free(b);
    ws_task_free(tk);
    free(tal);
    free(probs);
    free(info);
    free(group_best);
    return st;
}

static void cell(FILE *f, double v)
{
    if (v < 0) fprintf(f, "  %8s", "-");
    else fprintf(f, "  %7.2f%%", 100.0 * v);
}

/* The slot-world columns (WS_QS_*, from 1), by name: printed when any point has one. */
static const char *const slot_names[WS_QS_N] = {NULL, "current", "left", "plain"};

static int has_slots(const ws_eval_point *pts, int n)
{
    for (int i = 0; i < n; i++)
        for (int k = 1; k < WS_QS_N; k++)
            if (pts[i].slot_acc[k] >= 0) return 1;
    return 0;
}

void ws_eval_print(FILE *f, const ws_task_params *task, const ws_eval_point *pts, int n,
                   const char *label)
{
    int slots = has_slots(pts, n);
    fprintf(f, "%s on %s\n  %7s  %8s  %8s  %8s  %8s  %8s  %8s", label, task->name, "horizon",
            "acc", "group", "exact", "recall", "told", "untold");
    for (int k = 0; k < WS_TASK_MAX_BASELINES; k++)
        if (pts[0].baseline_acc[k] >= 0) fprintf(f, "  %8s  %8s", "base-acc", "b-exact");
    for (int k = 1; slots && k < WS_QS_N; k++) fprintf(f, "  %8s", slot_names[k]);
    fprintf(f, "\n");
    for (int i = 0; i < n; i++) {
        const ws_eval_point *p = &pts[i];
        fprintf(f, "  %7d", p->horizon);
        cell(f, p->acc), cell(f, p->group_acc), cell(f, p->exact_acc), cell(f, p->recall_acc);
        cell(f, p->told_acc), cell(f, p->untold_acc);
        for (int k = 0; k < WS_TASK_MAX_BASELINES; k++)
            if (p->baseline_acc[k] >= 0) cell(f, p->baseline_acc[k]), cell(f, p->baseline_exact[k]);
        for (int k = 1; slots && k < WS_QS_N; k++) cell(f, p->slot_acc[k]);
        fprintf(f, "\n");
    }
    fprintf(f, "{\"eval\":\"%s\",\"task\":\"%s\",\"points\":[", label, task->name);
    for (int i = 0; i < n; i++) {
        const ws_eval_point *p = &pts[i];
        fprintf(f, "%s{\"horizon\":%d,\"acc\":%.5f,\"group_acc\":%.5f,\"exact_acc\":%.5f,"
                   "\"recall_acc\":%.5f,\"told_acc\":%.5f,\"untold_acc\":%.5f,\"queries\":%ld",
                i ? "," : "", p->horizon, p->acc, p->group_acc, p->exact_acc, p->recall_acc,
                p->told_acc, p->untold_acc, p->n_queries);
        for (int k = 0; k < WS_TASK_MAX_BASELINES; k++)
            if (p->baseline_acc[k] >= 0)
                fprintf(f, ",\"baseline%d_acc\":%.5f,\"baseline%d_exact\":%.5f,"
                           "\"baseline%d_untold\":%.5f",
                        k, p->baseline_acc[k], k, p->baseline_exact[k], k, p->baseline_untold[k]);
        for (int k = 1; slots && k < WS_QS_N; k++)
            fprintf(f, ",\"slot_%s_acc\":%.5f", slot_names[k], p->slot_acc[k]);
        fprintf(f, "}");
    }
    fprintf(f, "]}\n");
}
