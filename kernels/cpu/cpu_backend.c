/* cpu_backend.c — the CPU backend: host memory, OpenBLAS, OpenMP. */
#include <cblas.h>
#include <malloc.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_internal.h"
#include "cpu_simplicial2.h"

static void cpu_destroy(ws_backend *be)
{
    ws_cpu *cpu = be->impl;
    free(cpu->scratch);
    free(cpu->codes);
    free(cpu->code_tag);
    free(cpu->code_stamp);
    free(cpu);
    free(be);
}

float *ws_cpu_scratch(ws_backend *be, size_t n)
{
    ws_cpu *cpu = be->impl;
    if (n > cpu->scratch_floats) {
        float *p = realloc(cpu->scratch, n * sizeof *p);
        if (!p) return NULL;
        cpu->scratch = p;
        cpu->scratch_floats = n;
    }
    return cpu->scratch;
}

static ws_status cpu_alloc(ws_backend *be, size_t bytes, void **out)
{
    (void)be;
    /* 64-byte alignment for vector loads; aligned_alloc wants a multiple. */
    size_t rounded = (bytes + 63) & ~(size_t)63;
    *out = aligned_alloc(64, rounded ? rounded : 64);
    return *out ? WS_OK : WS_ERR_NOMEM;
}

static void cpu_release(ws_backend *be, void *p)
{
    (void)be;
    ws_cpu_packs_forget(p, malloc_usable_size(p));
    free(p);
}

static ws_status cpu_copy(ws_backend *be, void *dst, const void *src, size_t bytes)
{
    (void)be;
    ws_cpu_packs_forget(dst, bytes);
    if (bytes) memmove(dst, src, bytes);
    return WS_OK;
}

static ws_status cpu_fill(ws_backend *be, float *dst, float value, size_t n)
{
    (void)be;
    ws_cpu_packs_forget(dst, n * sizeof *dst);
    if (value == 0.0f) {
        memset(dst, 0, n * sizeof *dst);
    } else {
        for (size_t i = 0; i < n; i++) dst[i] = value;
    }
    return WS_OK;
}

static ws_status cpu_sync(ws_backend *be)
{
    (void)be;
    return WS_OK;
}

/* Per calling thread: the engine thread and a training thread may want
 * different counts on one backend. 0: the backend's own. */
static _Thread_local int threads_now;

int ws_cpu_threads(const ws_backend *be)
{
    int n = ((const ws_cpu *)be->impl)->n_threads;
    return threads_now > 0 && threads_now < n ? threads_now : n;
}

static int cpu_threads(ws_backend *be, int n)
{
    threads_now = n;
    return ((const ws_cpu *)be->impl)->n_threads;
}

static const ws_backend_ops cpu_ops = {
    .name = "cpu",
    .destroy = cpu_destroy,
    .alloc = cpu_alloc,
    .release = cpu_release,
    .upload = cpu_copy,
    .download = cpu_copy,
    .copy = cpu_copy,
    .fill = cpu_fill,
    .sync = cpu_sync,
    .threads = cpu_threads,
#define WS_OP(name, params) .name = ws_cpu_##name,
#include "kernels/backend_ops.h"
#undef WS_OP
    .rn = &ws_cpu_rn_ops,
    .simplicial = &ws_cpu_simplicial2_ops,
    .rmc = &ws_cpu_rmc_ops,
    .compositional = &ws_cpu_compositional_ops,
};

int ws_backend_cpu_default_threads(void)
{
    return omp_get_num_procs(); /* libgomp: the CPUs of the affinity mask */
}

ws_status ws_backend_cpu_new(ws_backend **out, int n_threads, ws_error *err)
{
    *out = NULL;
    ws_backend *be = calloc(1, sizeof *be);
    ws_cpu *cpu = calloc(1, sizeof *cpu);
    if (!be || !cpu) {
        free(be);
        free(cpu);
        return ws_error_set(err, WS_ERR_NOMEM, "cpu backend: out of memory");
    }
    cpu->n_threads = n_threads > 0 ? n_threads : ws_backend_cpu_default_threads();
    /* One BLAS thread per call; the ops parallelise across rows and segments. */
    openblas_set_num_threads(1);
    be->ops = &cpu_ops;
    be->impl = cpu;
    *out = be;
    return WS_OK;
}
