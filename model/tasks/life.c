/* life.c — Conway's Game of Life on an 8×8 torus with interventions (§10).
 *
 * Symbols "r0".."r7", "c0".."c7"; fact (r<row>, c<col>) = "the cell is alive".
 * Step 1: a random board, each cell alive with probability `density`; all 64
 * cells are told in row-major order. Step t >= 2: the board advances one
 * generation (B3/S23, wrapping), then min(Poisson(intervention_rate), 64)
 * distinct random cells are each set to a fresh random bit (an intervention:
 * the value is drawn, not flipped, so about half repeat what the rule gave and
 * an instruction always means "the cell is now v", never "toggle"); each is told
 * as an instruction, zero interventions being a normal step.
 * Queries: all 64 cells in row-major order, WS_QK_PLAIN, label = the board after
 * this step, no groups. Baselines:
 *   [0] "all dead":      p = 0 everywhere;
 *   [1] "copy previous": the previous step's true board with this step's told
 *                        cells applied (at step 1, when all cells are told, the
 *                        board itself) — what a model that knows the last board
 *                        and reads instructions, but not the rule, would say.
 * Defaults: density 0.35 (a lively soup that neither dies out nor fills up in a
 * few generations), intervention_rate 2 (interventions on most steps, a small
 * fraction of the board). */
#include <math.h>
#include <stdlib.h>

#include "life.h"
#include "task_impl.h"

typedef struct {
    uint64_t board;
    int pick[WS_LIFE_CELLS]; /* sampling scratch */
} life_world;

typedef struct {
    int32_t row[WS_LIFE_SIDE], col[WS_LIFE_SIDE];
    life_world *w; /* [n_slots] */
} life_data;

static int cell(uint64_t board, int r, int c)
{
    r = (r + WS_LIFE_SIDE) % WS_LIFE_SIDE;
    c = (c + WS_LIFE_SIDE) % WS_LIFE_SIDE;
    return (int)(board >> (r * WS_LIFE_SIDE + c)) & 1;
}

uint64_t ws_task_life_next(uint64_t board)
{
    uint64_t next = 0;
    for (int r = 0; r < WS_LIFE_SIDE; r++)
        for (int c = 0; c < WS_LIFE_SIDE; c++) {
            int n = 0;
            for (int dr = -1; dr <= 1; dr++)
                for (int dc = -1; dc <= 1; dc++)
                    if (dr || dc) n += cell(board, r + dr, c + dc);
            if (n == 3 || (n == 2 && cell(board, r, c)))
                next |= 1ULL << (r * WS_LIFE_SIDE + c);
        }
    return next;
}

static void life_defaults(ws_task_params *p)
{
    p->density = 0.35f;
    p->intervention_rate = 2.0f;
}

static ws_status life_create(ws_task *t, ws_vocab *v, ws_error *err)
{
    if (!(t->p.density >= 0 && t->p.density <= 1))
        return ws_error_set(err, WS_ERR_INVALID, "task life: density must be in [0, 1]");
    if (!isfinite(t->p.intervention_rate) || t->p.intervention_rate < 0)
        return ws_error_set(err, WS_ERR_INVALID,
                            "task life: intervention_rate must be finite and >= 0");
    life_data *d = calloc(1, sizeof *d);
    if (!d) return ws_error_set(err, WS_ERR_NOMEM, "task life: out of memory");
    t->data = d;
    d->w = calloc((size_t)t->n_slots, sizeof *d->w);
    if (!d->w) return ws_error_set(err, WS_ERR_NOMEM, "task life: out of memory");
    WS_TRY(ws_task_symbols(t, v, "r", WS_LIFE_SIDE, d->row, err));
    return ws_task_symbols(t, v, "c", WS_LIFE_SIDE, d->col, err);
}

static void life_destroy(ws_task *t)
{
    life_data *d = t->data;
    if (d) free(d->w);
    free(d);
}

static int life_max_queries(const ws_task *t)
{
    (void)t;
    return WS_LIFE_CELLS;
}

static void life_reset(ws_task *t, int slot)
{
    life_data *d = t->data;
    uint64_t board = 0;
    for (int i = 0; i < WS_LIFE_CELLS; i++)
        if (ws_task_rng_uniform(&t->rng[slot]) < t->p.density) board |= 1ULL << i;
    d->w[slot].board = board;
}

static ws_status tell(const life_data *d, ws_batch *b, int i, int value)
{
    int32_t fact[2] = {d->row[i / WS_LIFE_SIDE], d->col[i % WS_LIFE_SIDE]};
    return ws_batch_add_instr(b, fact, 2, value);
}

static ws_status life_step(ws_task *t, int slot, ws_batch *b, ws_query_info *info)
{
    life_data *d = t->data;
    life_world *w = &d->w[slot];
    ws_task_rng *r = &t->rng[slot];
    uint64_t copy_prev;
    int nq = 0;
    if (t->steps[slot] == 1) {
        for (int i = 0; i < WS_LIFE_CELLS; i++) WS_TRY(tell(d, b, i, (int)(w->board >> i) & 1));
        copy_prev = w->board;
    } else {
        copy_prev = w->board;
        w->board = ws_task_life_next(w->board);
        int k = ws_task_rng_poisson(r, t->p.intervention_rate, WS_LIFE_CELLS);
        ws_task_rng_sample(r, w->pick, WS_LIFE_CELLS, k);
        for (int j = 0; j < k; j++) {
            int i = w->pick[j], v = ws_task_rng_bit(r);
            uint64_t bit = 1ULL << i;
            w->board = v ? w->board | bit : w->board & ~bit;
            copy_prev = v ? copy_prev | bit : copy_prev & ~bit;
            WS_TRY(tell(d, b, i, v));
        }
    }
    for (int i = 0; i < WS_LIFE_CELLS; i++) {
        int32_t fact[2] = {d->row[i / WS_LIFE_SIDE], d->col[i % WS_LIFE_SIDE]};
        ws_query_info qi = {.kind = WS_QK_PLAIN, .group = -1,
                            .baseline = {0.0f, (float)((copy_prev >> i) & 1)}};
        WS_TRY(ws_task_query(b, fact, 2, (int)(w->board >> i) & 1, info, &nq, qi));
    }
    return WS_OK;
}

const ws_task_kind ws_task_kind_life = {
    .name = "life",
    .dynamics = 1,
    .fact_len = 2,
    .n_baselines = 2,
    .baselines = {"all dead", "copy previous"},
    .defaults = life_defaults,
    .create = life_create,
    .destroy = life_destroy,
    .max_queries = life_max_queries,
    .reset = life_reset,
    .step = life_step,
};
