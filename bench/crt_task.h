/* crt_task.h — the Contextual Retrieval Task of compositional attention (Mittal et
 * al., ICLR 2022, §4.1 and C.1; ../shared/MIXERS.md §8.2), as the authors'
 * generator (Contextual_Retrieval_Task/data.py) defines it.
 *
 * A sample is a set of n objects (10). Object i has S* search features
 * z_i ~ N(0, 1), R* retrieval features z̄_i ~ N(0, 1) and, for every ground-truth
 * search s, a retrieval preference r_{i,s} ∈ [0, R*). Its target is
 *     y_i = Σ_s α_s · z̄_{j*(i,s)}[r_{i,s}],   j*(i,s) = argmin_{j≠i} |z_j[s] − z_i[s]|
 * with fixed α_s ~ U(−1, 1) (the authors' list), or α_s = 1 without coefficients.
 * Input row: [z_i, z̄_i, one-hot(r_{i,1}), …, one-hot(r_{i,S*})], S* + R* + S*·R* wide.
 *
 * Preference tuples (r_{i,1..S*}) index the R*^{S*} tuples in lexicographic order.
 * The OoD split: the even-indexed tuples and then the first ⌊0.8K⌋ − ⌈K/2⌉
 * odd-indexed ones train, the remaining ~20 % test (2S4R: test = (2,1), (2,3),
 * (3,1), (3,3), the paper's Table 5). Each object draws its tuple uniformly from
 * its set; CRT_ALL draws every preference independently (the task without OoD). */
#ifndef WS_CRT_TASK_H
#define WS_CRT_TASK_H

#include <stdint.h>

#include "model/tasks/task_rng.h"

enum { CRT_TRAIN, CRT_TEST, CRT_ALL };

typedef struct {
    int n_obj, gs, gr, in_dim;
    double alpha[25]; /* α_s, s < gs */
    int n_tuples, n_train, n_test;
    int *train, *test; /* tuple indices of the two OoD sets */
} crt_task;

/* gs <= 25 (the authors' coefficient list), gr >= 2. 0 on success, -1 when out of
 * memory or out of range. */
int crt_task_init(crt_task *t, int n_obj, int gs, int gr, int with_coeff);
void crt_task_free(crt_task *t);

/* Preference r of search s in tuple index tuple. */
int crt_tuple_pref(const crt_task *t, int tuple, int s);

/* B samples from the set (CRT_TRAIN, CRT_TEST, CRT_ALL): x [B·n_obj, in_dim] and
 * y [B·n_obj], object-major within a sample. */
void crt_sample(const crt_task *t, ws_task_rng *r, int set, int B, float *x, float *y);

/* N(0, 1) by Box–Muller. */
double crt_normal(ws_task_rng *r);

#endif
