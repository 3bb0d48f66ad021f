/* soak_stats.c — the soak's tallies (latency and errors by request kind) and
 * what /proc says: the daemon's resident memory and open descriptors, the
 * machine's load. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "soak.h"

#define SOAK_KIND_NAME(name) #name,
const char *const soak_kind_names[SOAK_N_KINDS] = {SOAK_KINDS(SOAK_KIND_NAME)};

int soak_tally_init(soak_tally *t, int n_cycles)
{
    memset(t, 0, sizeof *t);
    pthread_mutex_init(&t->mu, NULL);
    t->step_by_cycle = calloc((size_t)n_cycles, sizeof *t->step_by_cycle);
    t->n_cycles = t->step_by_cycle ? n_cycles : 0;
    return t->step_by_cycle ? 0 : -1;
}

void soak_tally_free(soak_tally *t)
{
    for (int k = 0; k < SOAK_N_KINDS; k++) free(t->lat[k].v);
    for (int i = 0; i < t->n_cycles; i++) free(t->step_by_cycle[i].v);
    free(t->step_by_cycle);
    pthread_mutex_destroy(&t->mu);
}

static void lat_add(soak_lat *l, double seconds)
{
    if (l->n == l->cap) {
        long cap = l->cap ? 2 * l->cap : 1024;
        double *v = realloc(l->v, sizeof *v * (size_t)cap);
        if (v) l->v = v, l->cap = cap;
    }
    if (l->n < l->cap) l->v[l->n++] = seconds;
}

void soak_tally_ok(soak_tally *t, soak_kind k, double seconds)
{
    int c = atomic_load(&t->cycle);
    pthread_mutex_lock(&t->mu);
    lat_add(&t->lat[k], seconds);
    if (k == SOAK_step && c < t->n_cycles) lat_add(&t->step_by_cycle[c], seconds);
    pthread_mutex_unlock(&t->mu);
}

void soak_tally_err(soak_tally *t, soak_kind k, const ws_client_error *e, int expected)
{
    long status = e->kind == WS_CLIENT_ERR_HTTP ? e->status : 0;
    const char *code = e->kind == WS_CLIENT_ERR_HTTP ? e->code : ws_client_status_name(e->kind);
    pthread_mutex_lock(&t->mu);
    int i = 0;
    while (i < t->n_err && !(t->err[i].kind == k && t->err[i].status == status && t->err[i].expected == expected &&
                             !strcmp(t->err[i].code, code)))
        i++;
    if (i == t->n_err && i < SOAK_MAX_ERR_ROWS) {
        t->err[i] = (soak_err_row){.kind = k, .status = status, .expected = expected};
        snprintf(t->err[i].code, sizeof t->err[i].code, "%s", code);
        t->n_err++;
    }
    if (i < t->n_err)
        t->err[i].n++;
    else
        t->err_overflow++;
    pthread_mutex_unlock(&t->mu);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double lat_pct(soak_tally *t, soak_lat *l, double p)
{
    pthread_mutex_lock(&t->mu);
    double r = -1;
    if (l->n) {
        qsort(l->v, (size_t)l->n, sizeof *l->v, cmp_double);
        long i = (long)(p * (double)(l->n - 1) + 0.5);
        r = 1e3 * l->v[i];
    }
    pthread_mutex_unlock(&t->mu);
    return r;
}

double soak_tally_pct(soak_tally *t, soak_kind k, double p)
{
    return lat_pct(t, &t->lat[k], p);
}

double soak_tally_cycle_pct(soak_tally *t, int cycle, double p)
{
    return cycle < t->n_cycles ? lat_pct(t, &t->step_by_cycle[cycle], p) : -1;
}

long soak_tally_unexpected(const soak_tally *t)
{
    long n = t->err_overflow;
    for (int i = 0; i < t->n_err; i++)
        if (!t->err[i].expected) n += t->err[i].n;
    return n;
}

long soak_rss_kb(int pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) kb = atol(line + 6);
    if (f) fclose(f);
    return kb;
}

long soak_fd_count(int pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", pid);
    DIR *d = opendir(path);
    if (!d) return -1;
    long n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

double soak_loadavg(void)
{
    FILE *f = fopen("/proc/loadavg", "r");
    double l = -1;
    if (f && fscanf(f, "%lf", &l) != 1) l = -1;
    if (f) fclose(f);
    return l;
}
