/* crt_task.c — the Contextual Retrieval Task generator (crt_task.h). */
#include "crt_task.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The authors' α_s, drawn once from U(−1, 1) (data.py). */
static const double kCoeffs[25] = {
    -0.71347752, -0.6062312,  0.66062073,  -0.61213017, -0.82631877, 0.75908621, -0.36274866,
    0.84383333,  -0.37908235, 0.46539368,  0.98675292,  0.20388434,  -0.78718797, -0.74316581,
    0.11539548,  0.35559215,  0.32584524,  0.58590426,  0.95284985,  -0.77999937, -0.660806,
    -0.35542737, 0.93532822,  0.75049373,  -0.27825577};

int crt_task_init(crt_task *t, int n_obj, int gs, int gr, int with_coeff)
{
    memset(t, 0, sizeof *t);
    if (n_obj < 2 || gs < 1 || gs > 25 || gr < 2 || pow(gr, gs) > 1 << 20) return -1;
    t->n_obj = n_obj, t->gs = gs, t->gr = gr, t->in_dim = gs + gr + gs * gr;
    for (int s = 0; s < gs; s++) t->alpha[s] = with_coeff ? kCoeffs[s] : 1.0;
    int K = 1;
    for (int s = 0; s < gs; s++) K *= gr;
    t->n_tuples = K;
    t->train = malloc((size_t)K * sizeof *t->train);
    t->test = malloc((size_t)K * sizeof *t->test);
    if (!t->train || !t->test) {
        crt_task_free(t);
        return -1;
    }
    /* evens train; then the first ⌊0.8K⌋ − ⌈K/2⌉ odds move to train */
    int n_even = (K + 1) / 2, moved = (int)(0.8 * K) - n_even;
    for (int i = 0; i < K; i += 2) t->train[t->n_train++] = i;
    for (int i = 1, odd = 0; i < K; i += 2, odd++) {
        if (odd < moved)
            t->train[t->n_train++] = i;
        else
            t->test[t->n_test++] = i;
    }
    return 0;
}

void crt_task_free(crt_task *t)
{
    free(t->train);
    free(t->test);
    t->train = t->test = NULL;
}

int crt_tuple_pref(const crt_task *t, int tuple, int s)
{
    for (int k = s + 1; k < t->gs; k++) tuple /= t->gr; /* the first search is most significant */
    return tuple % t->gr;
}

double crt_normal(ws_task_rng *r)
{
    double u1 = 1.0 - ws_task_rng_uniform(r); /* (0, 1]: log stays finite */
    double u2 = ws_task_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void crt_sample(const crt_task *t, ws_task_rng *r, int set, int B, float *x, float *y)
{
    int n = t->n_obj, gs = t->gs, gr = t->gr, w = t->in_dim;
    for (int b = 0; b < B; b++) {
        float *xs = x + (size_t)b * n * w;
        memset(xs, 0, (size_t)n * w * sizeof *xs);
        for (int i = 0; i < n; i++) {
            float *row = xs + (size_t)i * w;
            for (int f = 0; f < gs + gr; f++) row[f] = (float)crt_normal(r);
            int tuple = set == CRT_TRAIN  ? t->train[ws_task_rng_below(r, (uint32_t)t->n_train)]
                        : set == CRT_TEST ? t->test[ws_task_rng_below(r, (uint32_t)t->n_test)]
                                          : (int)ws_task_rng_below(r, (uint32_t)t->n_tuples);
            for (int s = 0; s < gs; s++) row[gs + gr + s * gr + crt_tuple_pref(t, tuple, s)] = 1;
        }
        for (int i = 0; i < n; i++) {
            const float *ri = xs + (size_t)i * w;
            double target = 0.0;
            for (int s = 0; s < gs; s++) {
                int best = -1;
                double gap = INFINITY;
                for (int j = 0; j < n; j++) {
                    double g = fabs((double)xs[(size_t)j * w + s] - ri[s]);
                    if (j != i && g < gap) gap = g, best = j;
                }
                int pref = 0;
                while (ri[gs + gr + s * gr + pref] == 0.0f) pref++;
                target += t->alpha[s] * xs[(size_t)best * w + gs + pref];
            }
            y[(size_t)b * n + i] = (float)target;
        }
    }
}
