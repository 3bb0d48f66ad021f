/* soak_report.c — what a soak run found: the sum of everything that must be 0,
 * a table per daemon run, latency per request kind, errors by status and code,
 * and one JSON line. */
#include <string.h>
#include <unistd.h>

#include "soak.h"

typedef struct {
    soak_check check; /* every cycle's checks and the final one */
    long kills, terms, term_bad, crashes, unexpected, rss_max, growth_max, fd_min, fd_max;
    double start_max;
} totals;

static void totals_of(const soak_result *r, totals *t)
{
    memset(t, 0, sizeof *t);
    t->fd_min = -1;
    soak_check *c = &t->check;
    for (int i = 0; i <= r->n_cycles; i++) {
        const soak_check *k = i < r->n_cycles ? &r->cycles[i].check : &r->final;
        c->steps_checked += k->steps_checked;
        c->lost += k->lost;
        c->mismatched += k->mismatched;
        c->labels_lost += k->labels_lost;
        c->sessions_behind += k->sessions_behind;
        c->models_lost += k->models_lost;
        c->failed += k->failed;
        c->unserved += k->unserved;
        c->not_ready += k->not_ready;
        c->stray_files += k->stray_files;
        c->orphan_files += k->orphan_files;
        c->excess_files += k->excess_files;
    }
    for (int i = 0; i < r->n_cycles; i++) {
        const soak_cycle *cy = &r->cycles[i];
        const char *end = cy->end ? cy->end : "";
        t->kills += !strcmp(end, "kill -9");
        t->terms += !strcmp(end, "SIGTERM");
        t->term_bad += !strcmp(end, "SIGTERM") && cy->exit_status != 0;
        t->crashes += !strcmp(end, "crashed");
        if (cy->rss_max > t->rss_max) t->rss_max = cy->rss_max;
        if (cy->rss_last - cy->rss_first > t->growth_max) t->growth_max = cy->rss_last - cy->rss_first;
        if (cy->rss_first && (t->fd_min < 0 || cy->fd_min < t->fd_min)) t->fd_min = cy->fd_min;
        if (cy->fd_max > t->fd_max) t->fd_max = cy->fd_max;
        if (cy->start_ms > t->start_max) t->start_max = cy->start_ms;
    }
    t->unexpected = soak_tally_unexpected(&r->s->tally);
}

long soak_failures(const soak_result *r)
{
    totals t;
    totals_of(r, &t);
    const soak *s = r->s;
    const soak_check *c = &t.check;
    return c->lost + c->mismatched + c->labels_lost + c->sessions_behind + c->models_lost + c->failed + c->unserved +
           c->not_ready + c->stray_files + t.unexpected + atomic_load(&s->anomalies) + atomic_load(&s->key_faults) +
           atomic_load(&s->queries_behind) + t.term_bad + t.crashes + !r->integrity;
}

static void table(FILE *out, soak_result *r)
{
    fprintf(out, "%5s %-8s %6s %8s %7s %17s %21s %8s %9s %8s %5s\n", "cycle", "ended", "up s", "start ms", "acked",
            "step p50/p99 ms", "RSS MB start/max/end", "growth", "fds", "checked", "lost");
    for (int i = 0; i < r->n_cycles; i++) {
        const soak_cycle *c = &r->cycles[i];
        fprintf(out, "%5d %-8s %6.1f %8.0f %7ld %8.1f/%8.1f %6.1f/%6.1f/%6.1f %8.1f %4ld/%-4ld %8ld %5ld\n", i + 1,
                c->end ? c->end : "?", c->up_s, c->start_ms, c->acked, soak_tally_cycle_pct(&r->s->tally, i, 0.5),
                soak_tally_cycle_pct(&r->s->tally, i, 0.99), c->rss_first / 1024.0, c->rss_max / 1024.0,
                c->rss_last / 1024.0, (c->rss_last - c->rss_first) / 1024.0, c->fd_min, c->fd_max,
                c->check.steps_checked, c->check.lost);
    }
    fprintf(out, "%5s %-8s %6s %8.0f %7s %17s %21s %8s %9s %8ld %5ld\n", "last", "checks", "", r->final_start_ms, "",
            "", "", "", "", r->final.steps_checked, r->final.lost);
}

static void by_kind(FILE *out, soak_tally *t)
{
    fprintf(out, "\n%-13s %8s %9s %9s\n", "request", "ok", "p50 ms", "p99 ms");
    for (int k = 0; k < SOAK_N_KINDS; k++)
        fprintf(out, "%-13s %8ld %9.2f %9.2f\n", soak_kind_names[k], t->lat[k].n, soak_tally_pct(t, k, 0.5),
                soak_tally_pct(t, k, 0.99));
    fprintf(out, "\n%-13s %6s %-22s %-10s %8s\n", "errors", "status", "code", "expected", "count");
    for (int i = 0; i < t->n_err; i++) {
        const soak_err_row *e = &t->err[i];
        fprintf(out, "%-13s %6ld %-22s %-10s %8ld\n", soak_kind_names[e->kind], e->status, e->code,
                e->expected ? "yes" : "NO", e->n);
    }
}

static void json(FILE *out, const soak_options *o, soak_result *r, const totals *t)
{
    soak *s = r->s;
    const soak_check *c = &t->check;
    fprintf(out,
            "{\"bench\":\"soak\",\"seconds\":%.1f,\"kill_every\":%d,\"term_every\":%d,\"clients\":%d,"
            "\"restarts\":%d,\"kills\":%ld,\"sigterms\":%ld,\"acked_steps\":%ld,\"recovered_steps\":%ld,"
            "\"checked\":%ld,\"lost\":%ld,\"mismatched\":%ld,\"labels_put\":%ld,\"labels_lost\":%ld,"
            "\"sessions_behind\":%ld,\"queries_behind\":%ld,\"check_failures\":%ld,\"models_created\":%ld,"
            "\"models_lost\":%ld,\"keys_created\":%ld,\"keys_revoked\":%ld,\"key_faults\":%ld,"
            "\"client_anomalies\":%ld,\"crashes\":%ld,\"sigterm_not_0\":%ld,\"unexpected_errors\":%ld,"
            "\"models_unserved\":%ld,\"not_ready\":%ld,\"stray_files\":%ld,\"orphan_files\":%ld,\"excess_files\":%ld,"
            "\"model_files\":%ld,\"db_kb\":%ld,\"integrity\":%s,\"versions\":{\"soak\":%lld,\"default\":%lld},",
            r->elapsed, o->kill_every, o->term_every, o->clients, r->n_cycles, t->kills, t->terms,
            atomic_load(&s->acked), atomic_load(&s->recovered), c->steps_checked, c->lost, c->mismatched,
            atomic_load(&s->labels_acked), c->labels_lost, c->sessions_behind, atomic_load(&s->queries_behind),
            c->failed, atomic_load(&s->models_created), c->models_lost, atomic_load(&s->keys_created),
            atomic_load(&s->keys_revoked), atomic_load(&s->key_faults), atomic_load(&s->anomalies), t->crashes,
            t->term_bad, t->unexpected, c->unserved, c->not_ready, c->stray_files, c->orphan_files, c->excess_files,
            r->model_files, r->db_kb, r->integrity ? "true" : "false", (long long)r->versions[0],
            (long long)r->versions[1]);
    const soak_cycle *first = &r->cycles[0], *last = &r->cycles[r->n_cycles > 0 ? r->n_cycles - 1 : 0];
    fprintf(out,
            "\"load\":[%.2f,%.2f],\"rss_mb\":{\"first\":%.1f,\"max\":%.1f,\"last\":%.1f,\"max_growth_in_cycle\":%.1f},"
            "\"fds\":{\"min\":%ld,\"max\":%ld},\"start_ms_max\":%.0f,\"latency_ms\":{",
            r->load[0], r->load[1], first->rss_first / 1024.0, t->rss_max / 1024.0, last->rss_last / 1024.0,
            t->growth_max / 1024.0, t->fd_min, t->fd_max, t->start_max);
    for (int k = 0; k < SOAK_N_KINDS; k++)
        fprintf(out, "%s\"%s\":{\"n\":%ld,\"p50\":%.3f,\"p99\":%.3f}", k ? "," : "", soak_kind_names[k],
                s->tally.lat[k].n, soak_tally_pct(&s->tally, k, 0.5), soak_tally_pct(&s->tally, k, 0.99));
    fprintf(out, "},\"errors\":{");
    for (int i = 0; i < s->tally.n_err; i++) {
        const soak_err_row *e = &s->tally.err[i];
        fprintf(out, "%s\"%s %ld %s%s\":%ld", i ? "," : "", soak_kind_names[e->kind], e->status, e->code,
                e->expected ? "" : " (unexpected)", e->n);
    }
    fprintf(out, "},\"ok\":%s}\n", soak_failures(r) ? "false" : "true");
}

void soak_report(FILE *out, const soak_options *o, soak_result *r)
{
    soak *s = r->s;
    totals t;
    totals_of(r, &t);
    const soak_check *c = &t.check;
    fprintf(out,
            "worldstated soak: %.0f s, stopped every %d s (SIGTERM every %d, else kill -9), %d step clients, "
            "a model every %.0f s, a key round every %.0f s, online training %.0f..%.0f s; backend cpu, "
            "%ld CPU cores, load average %.1f at the start, %.1f at the end\n",
            r->elapsed, o->kill_every, o->term_every, o->clients, o->model_every, o->key_every, 0.25 * o->seconds,
            0.75 * o->seconds, sysconf(_SC_NPROCESSORS_ONLN), r->load[0], r->load[1]);
    table(out, r);
    by_kind(out, &s->tally);
    fprintf(out,
            "\nacknowledged steps %ld (+%ld applied with the reply lost), checked %ld; lost %ld, mismatched %ld, "
            "labels lost %ld (of %ld PUT), sessions behind %ld, queries behind %ld, check failures %ld\n",
            atomic_load(&s->acked), atomic_load(&s->recovered), c->steps_checked, c->lost, c->mismatched,
            c->labels_lost, atomic_load(&s->labels_acked), c->sessions_behind, atomic_load(&s->queries_behind),
            c->failed);
    fprintf(out,
            "models created %ld (lost %ld, serving another version than recorded %ld); keys created %ld, revoked %ld, "
            "faults %ld; versions at the end "
            "(online training): soak v%lld, default v%lld\n",
            atomic_load(&s->models_created), c->models_lost, c->unserved, atomic_load(&s->keys_created),
            atomic_load(&s->keys_revoked), atomic_load(&s->key_faults), (long long)r->versions[0],
            (long long)r->versions[1]);
    fprintf(out,
            "restarts %d (kill -9 %ld, SIGTERM %ld), SIGTERM exits not 0 %ld, crashes %ld, not ready after a "
            "restart %ld, client anomalies %ld, unexpected errors %ld, integrity_check %s\n",
            r->n_cycles, t.kills, t.terms, t.term_bad, t.crashes, c->not_ready, atomic_load(&s->anomalies),
            t.unexpected, r->integrity ? "ok" : "FAILED");
    fprintf(out,
            "RSS max %.1f MB, largest growth in a cycle %.1f MB, fds %ld..%ld, slowest start %.0f ms; at the end "
            "%ld files in models/ (temporary files left by a kill %ld, of no model %ld, past retention %ld), "
            "database with WAL %.1f MB\n",
            t.rss_max / 1024.0, t.growth_max / 1024.0, t.fd_min, t.fd_max, t.start_max, r->model_files, c->stray_files,
            c->orphan_files, c->excess_files, r->db_kb / 1024.0);
    json(out, o, r, &t);
}
