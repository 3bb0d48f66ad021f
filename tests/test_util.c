/* test_util.c — see test_util.h. */
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/ws_rm_tree.h"
#include "base/ws_rng.h"

uint64_t ws_test_next(ws_test_rng *r)
{
    uint64_t x = r->s ? r->s : 0x9E3779B97F4A7C15ULL;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

float ws_test_uniform(ws_test_rng *r) { return (float)((ws_test_next(r) >> 40) * (1.0 / 16777216.0)); }

float ws_test_normal(ws_test_rng *r)
{
    uint64_t a = ws_test_next(r);
    uint64_t b = ws_test_next(r);
    return ws_normal_from_bits(a, b);
}

int ws_test_int(ws_test_rng *r, int lo, int hi)
{
    return lo + (int)(ws_test_next(r) % (uint64_t)(hi - lo + 1));
}

void ws_test_fill_normal(ws_test_rng *r, float *x, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++) x[i] = scale * ws_test_normal(r);
}

double ws_test_max_rel_err(const float *a, const float *b, size_t n, double floor)
{
    double worst = 0.0, mag = floor;
    for (size_t i = 0; i < n; i++) {
        worst = fmax(worst, fabs((double)a[i] - b[i]));
        mag = fmax(mag, fabs((double)b[i]));
    }
    return worst / mag;
}

double ws_test_norm_rel_err(const float *a, const float *b, size_t n, double floor)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)a[i] - b[i];
        num += e * e;
        den += (double)b[i] * b[i];
    }
    return sqrt(num) / fmax(sqrt(den), floor);
}

static int ends_with(const char *name, const char *suffix)
{
    size_t n = strlen(name), k = strlen(suffix);
    return n >= k && strcmp(name + n - k, suffix) == 0;
}

int ws_test_key_bias_slice(const char *name, int d, size_t numel, size_t *off, size_t *len)
{
    if (ends_with(name, ".self.qkv.b")) {
        *off = (size_t)d, *len = (size_t)d;
        return 1;
    }
    if (ends_with(name, ".cross.kv.b")) {
        *off = 0, *len = (size_t)d;
        return 1;
    }
    if (ends_with(name, ".rk.b")) {
        *off = 0, *len = numel;
        return 1;
    }
    return 0;
}

int ws_test_rm_tree(const char *p) { return ws_rm_tree(p); }

void ws_test_flip_byte(const char *path, long from_end, int mask)
{
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, -from_end, SEEK_END), 0);
    int c = fgetc(f);
    assert_true(c != EOF);
    assert_int_equal(fseek(f, -from_end, SEEK_END), 0);
    assert_int_equal(fputc(c ^ mask, f), c ^ mask);
    assert_int_equal(fclose(f), 0);
}

int ws_test_run_prog(const char *env_var, const char *args, int merge_stderr, char *out,
                     size_t cap)
{
    const char *prog = getenv(env_var);
    assert_non_null(prog);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "OMP_NUM_THREADS=1 '%s' %s%s", prog, args,
             merge_stderr ? " 2>&1" : "");
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
