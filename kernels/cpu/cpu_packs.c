/* cpu_packs.c — the table of packed weights (cpu_linear.c packs them), one for
 * every CPU backend, read without a lock.
 *
 * One table: the backends' memory is one, and a test writes through one backend
 * what another computes with. Read without a lock: the engine thread looks a
 * pack up for every linear op, and every op that writes memory (copy, fill,
 * upload, download, AdamW, scale, release) asks whether it overlaps a pack; the
 * training thread does the same at a low CPU priority. Under one mutex, a
 * training thread taken off its core while holding it kept the engine thread
 * waiting until it ran again: with one client and training on, about 100
 * wakeups a second of the engine thread came from the training thread's unlock
 * in the lookup (perf record -e sched:sched_waking --call-graph dwarf on the
 * training thread). So each entry carries a sequence count (a seqlock): readers
 * take an entry whose count was even and unchanged around their reads, and
 * only a change (a pack added, packs dropped because their weights were
 * written) takes the mutex, for a few stores: the packing is done before.
 *
 * Entries live in [0, n). A dropped entry is replaced by the last one, so a
 * reader that scanned meanwhile may miss an entry (or see one twice): a miss is
 * looked up again under the mutex before a pack is added, and a write that
 * cannot tell whether it overlaps takes the mutex. That includes a write whose
 * scan saw no change in any entry but ran while entries moved: the moved entry
 * may have gone to a slot it had already passed, and the slot it left may have
 * been taken by a new pack since, so the write would keep the pack of weights
 * as they were before it (test_cpu_packs caught that about once in a hundred
 * runs). A table-wide count of moves, odd while they are made, tells it. A
 * pack's buffer is freed only when its weights are written or freed, which no
 * thread does while another computes with them, so a pack a reader found
 * stays valid while it uses it. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "cpu_internal.h"

#define PACKS        256
#define PACKS_FLOATS ((size_t)16 << 20) /* 64 MB */

typedef struct {
    const float *w, *bias;
    int in_dim, out_dim;
    float *wt;
} pack_view;

typedef struct {
    atomic_uint seq; /* odd while the entry changes */
    _Atomic(const float *) w, bias;
    atomic_int in_dim, out_dim;
    _Atomic(float *) wt;
    size_t floats; /* under lock only */
} pack_entry;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pack_entry packs[PACKS];
static atomic_int n_packs;
static atomic_uint moves;  /* odd while ws_cpu_packs_forget drops and moves entries */
static size_t floats_kept; /* under lock */

/* Copies entry e into v; 0 when it changed meanwhile (v is then not to be used). */
static int entry_read(pack_entry *e, pack_view *v)
{
    unsigned s = atomic_load_explicit(&e->seq, memory_order_acquire);
    if (s & 1) return 0;
    v->w = atomic_load_explicit(&e->w, memory_order_relaxed);
    v->bias = atomic_load_explicit(&e->bias, memory_order_relaxed);
    v->in_dim = atomic_load_explicit(&e->in_dim, memory_order_relaxed);
    v->out_dim = atomic_load_explicit(&e->out_dim, memory_order_relaxed);
    v->wt = atomic_load_explicit(&e->wt, memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    return atomic_load_explicit(&e->seq, memory_order_relaxed) == s;
}

/* Sets entry e to v (lock held). */
static void entry_write(pack_entry *e, const pack_view *v, size_t floats)
{
    unsigned s = atomic_load_explicit(&e->seq, memory_order_relaxed);
    atomic_store_explicit(&e->seq, s + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&e->w, v->w, memory_order_relaxed);
    atomic_store_explicit(&e->bias, v->bias, memory_order_relaxed);
    atomic_store_explicit(&e->in_dim, v->in_dim, memory_order_relaxed);
    atomic_store_explicit(&e->out_dim, v->out_dim, memory_order_relaxed);
    atomic_store_explicit(&e->wt, v->wt, memory_order_relaxed);
    e->floats = floats;
    atomic_store_explicit(&e->seq, s + 2, memory_order_release);
}

static int same(const pack_view *v, const pack_view *k)
{
    return v->w == k->w && v->bias == k->bias && v->in_dim == k->in_dim && v->out_dim == k->out_dim;
}

static int overlaps(const void *a, size_t a_bytes, const void *b, size_t b_bytes)
{
    uintptr_t a0 = (uintptr_t)a, b0 = (uintptr_t)b;
    return a0 < b0 + b_bytes && b0 < a0 + a_bytes;
}

static int view_overlaps(const pack_view *v, const void *p, size_t bytes)
{
    return overlaps(p, bytes, v->w, (size_t)v->in_dim * v->out_dim * sizeof(float)) ||
           (v->bias && overlaps(p, bytes, v->bias, (size_t)v->out_dim * sizeof(float)));
}

/* The kept pack of k (k.wt unused), or NULL: lock held, or not (may then miss). */
static float *find(const pack_view *k)
{
    int n = atomic_load_explicit(&n_packs, memory_order_acquire);
    for (int i = 0; i < n; i++) {
        pack_view v;
        if (entry_read(&packs[i], &v) && same(&v, k)) return v.wt;
    }
    return NULL;
}

float *ws_cpu_pack_find(const float *w, const float *bias, int in_dim, int out_dim)
{
    pack_view k = {w, bias, in_dim, out_dim, NULL};
    return find(&k);
}

float *ws_cpu_pack_keep(float *wt, size_t floats, const float *w, const float *bias, int in_dim,
                        int out_dim)
{
    pack_view k = {w, bias, in_dim, out_dim, wt};
    pthread_mutex_lock(&lock);
    float *kept = find(&k);
    int n = atomic_load_explicit(&n_packs, memory_order_relaxed);
    if (!kept && n < PACKS && floats_kept + floats <= PACKS_FLOATS) {
        entry_write(&packs[n], &k, floats);
        floats_kept += floats;
        atomic_store_explicit(&n_packs, n + 1, memory_order_release);
        kept = wt;
    }
    pthread_mutex_unlock(&lock);
    if (kept && kept != wt) free(wt); /* another thread kept the same pack first */
    return kept;
}

/* Whether [p, p + bytes) may overlap a kept pack (an entry changing, or
 * entries moving, counts). */
static int any_overlaps(const void *p, size_t bytes)
{
    unsigned m = atomic_load_explicit(&moves, memory_order_acquire);
    if (m & 1) return 1;
    int n = atomic_load_explicit(&n_packs, memory_order_acquire);
    for (int i = 0; i < n; i++) {
        pack_view v;
        if (!entry_read(&packs[i], &v) || view_overlaps(&v, p, bytes)) return 1;
    }
    atomic_thread_fence(memory_order_acquire);
    return atomic_load_explicit(&moves, memory_order_relaxed) != m;
}

void ws_cpu_packs_forget(const void *p, size_t bytes)
{
    if (!any_overlaps(p, bytes)) return; /* the usual case: activations, states */
    pthread_mutex_lock(&lock);
    /* counted only when an entry goes: a count moved by every locked call
     * would send other threads' scans under the lock, whose calls would move
     * it again (the mutex the seqlocks are there to spare) */
    unsigned m = atomic_load_explicit(&moves, memory_order_relaxed);
    int moving = 0;
    int n = atomic_load_explicit(&n_packs, memory_order_relaxed);
    for (int i = 0; i < n;) {
        pack_view v;
        entry_read(&packs[i], &v); /* lock held: nothing changes it */
        if (!view_overlaps(&v, p, bytes)) {
            i++;
            continue;
        }
        if (!moving) {
            atomic_store_explicit(&moves, m + 1, memory_order_relaxed);
            atomic_thread_fence(memory_order_release);
            moving = 1;
        }
        floats_kept -= packs[i].floats;
        free(v.wt);
        n--;
        if (i < n) { /* the last entry fills the hole */
            pack_view last;
            entry_read(&packs[n], &last);
            entry_write(&packs[i], &last, packs[n].floats);
        }
        atomic_store_explicit(&n_packs, n, memory_order_release);
    }
    if (moving) atomic_store_explicit(&moves, m + 2, memory_order_release);
    pthread_mutex_unlock(&lock);
}
