/* bench_cluster.c — a cluster's cost per node (api.md, Running a cluster):
 * steps/s and p50/p99 with 1, 2, ... --nodes worldstated nodes over one
 * PostgreSQL behind HAProxy (deploy/haproxy/worldstate.cfg), next to one
 * daemon on SQLite, in the same run and under the same load: `clients`
 * threads, each stepping a session of its own on the shipped default model
 * with expect_step (2 instructions, 2 queries) through the C client.
 *
 * On a small machine this measures overhead, not scaling: the nodes, HAProxy,
 * PostgreSQL and the clients share its cores. So it also prints what scales:
 * CPU seconds per 1,000 steps of the nodes (together), of HAProxy and of
 * PostgreSQL (/proc/PID/stat), and PostgreSQL statements (round trips) per
 * engine batch and per step (pg_stat_statements over the load, over the
 * nodes' worldstate_batch_jobs_count) and write-ahead log bytes per step
 * (pg_current_wal_lsn): what one PostgreSQL must carry for all the nodes.
 *
 * Its PostgreSQL is a throwaway one (scripts/pg-test-server.sh, fsync off as
 * there: a commit costs no disk flush) with pg_stat_statements loaded; each
 * cluster size gets a schema of its own. Every daemon runs --backend cpu
 * --threads 1, the shipped model. Without haproxy or PostgreSQL's server
 * programs it says so and exits 77. Prints a table and one JSON line.
 *
 *   build/bench/bench_cluster [--nodes 3] [--clients 16] [--seconds 5] [--keep]
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/ws_clock.h"
#include "clients/ws_client.h"
#include "daemon_proc.h"
#include "latencies.h"
#include "tmp_dir.h"

enum { MAX_NODES = 3, MAX_CLIENTS = 256 };

static char base[64] = "/tmp/ws-bench-cluster-XXXXXX";
static char pg_uri[512], pg_cluster[300];

/* ---- processes ---------------------------------------------------------------------- */

/* CPU seconds (user + system) of a process from /proc; 0 when it is gone. */
static double cpu_s(pid_t pid, char *comm, size_t comm_cap)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *open = strchr(buf, '('), *close = strrchr(buf, ')');
    unsigned long ut = 0, st = 0;
    if (!open || !close || sscanf(close + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return 0;
    if (comm) snprintf(comm, comm_cap, "%.*s", (int)(close - open - 1), open + 1);
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* CPU seconds of every PostgreSQL process now (the server and its backends: a
 * node's connections live as long as it does, so their time stays countable). */
static double postgres_cpu_s(void)
{
    DIR *d = opendir("/proc");
    double sum = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        char comm[64] = "";
        int pid = atoi(e->d_name);
        if (pid <= 0) continue;
        double s = cpu_s(pid, comm, sizeof comm);
        if (!strcmp(comm, "postgres")) sum += s;
    }
    if (d) closedir(d);
    return sum;
}

static int sh(const char *cmd)
{
    int rc = system(cmd);
    return rc == 0 ? 0 : -1;
}

/* psql's first value of sql into out (may be NULL). */
static int psql(const char *sql, char *out, size_t cap)
{
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "psql -qtAX '%s' -c \"%s\"", pg_uri, sql);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    char line[256] = "";
    if (!fgets(line, sizeof line, p)) line[0] = '\0';
    int rc = pclose(p);
    if (out) snprintf(out, cap, "%.*s", (int)strcspn(line, "\n"), line);
    return rc == 0 ? 0 : -1;
}

/* A throwaway PostgreSQL with pg_stat_statements: started, stopped, the library
 * added to its settings, started again. */
static int pg_start(void)
{
    char cmd[1400], path[400];
    snprintf(cmd, sizeof cmd, "bash '%s/scripts/pg-test-server.sh' start '%s/pg' >/dev/null", WS_SOURCE_DIR, base);
    if (sh(cmd) != 0) return -1;
    snprintf(path, sizeof path, "%s/pg/uri", base);
    FILE *f = fopen(path, "r");
    if (!f) return 77; /* no server programs */
    int ok = fgets(pg_uri, sizeof pg_uri, f) != NULL;
    fclose(f);
    pg_uri[strcspn(pg_uri, "\n")] = '\0';
    snprintf(path, sizeof path, "%s/pg/cluster", base);
    f = fopen(path, "r");
    ok = ok && f && fgets(pg_cluster, sizeof pg_cluster, f) != NULL;
    if (f) fclose(f);
    pg_cluster[strcspn(pg_cluster, "\n")] = '\0';
    if (!ok) return -1;
    snprintf(cmd, sizeof cmd,
             "bash '%s/scripts/pg-test-server.sh' halt '%s/pg' && "
             "echo \"shared_preload_libraries = 'pg_stat_statements'\" >> '%s/data/postgresql.conf' && "
             "bash '%s/scripts/pg-test-server.sh' resume '%s/pg'",
             WS_SOURCE_DIR, base, pg_cluster, WS_SOURCE_DIR, base);
    if (sh(cmd) != 0) return -1;
    return psql("CREATE EXTENSION IF NOT EXISTS pg_stat_statements", NULL, 0);
}

static void pg_stop(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "bash '%s/scripts/pg-test-server.sh' stop '%s/pg' >/dev/null", WS_SOURCE_DIR, base);
    if (sh(cmd) != 0) fprintf(stderr, "bench_cluster: could not stop PostgreSQL\n");
}

/* ---- load -------------------------------------------------------------------------- */

typedef struct {
    const char *url;
    double until;
    ws_bench_lat lat; /* acknowledged steps */
    long errors;
} client;

static void *client_main(void *arg)
{
    client *cl = arg;
    ws_client_config cfg = ws_client_config_default();
    cfg.url = cl->url;
    cfg.retries = 10; /* a node's health check may still be settling */
    ws_client *c = NULL;
    ws_client_error err;
    ws_client_session s;
    if (ws_client_new(&cfg, &c, &err) != WS_CLIENT_OK || ws_client_session_create(c, NULL, &s, &err) != WS_CLIENT_OK) {
        fprintf(stderr, "bench_cluster: session create: %s\n", err.message);
        cl->errors++;
        ws_client_free(c);
        return NULL;
    }
    char sym[4][16];
    char *f[2][2] = {{sym[0], sym[1]}, {sym[2], sym[3]}};
    ws_client_instruction in[2] = {{.fact = {f[0], 2, NULL, 0}, .value = 1},
                                   {.fact = {f[1], 2, NULL, 0}, .value = 0}};
    ws_client_fact q[2] = {{f[0], 2, NULL, 0}, {f[1], 2, NULL, 0}};
    for (int64_t step = s.step; ws_clock_mono_s() < cl->until;) {
        snprintf(sym[0], sizeof sym[0], "e%d", (int)(step % 16));
        snprintf(sym[1], sizeof sym[1], "p%d", (int)(step % 5));
        snprintf(sym[2], sizeof sym[2], "e%d", (int)((step + 3) % 16));
        snprintf(sym[3], sizeof sym[3], "p%d", (int)((step + 1) % 5));
        ws_client_step_req req = {.expect_step = step, .instructions = in, .n_instructions = 2, .queries = q, .n_queries = 2};
        ws_client_answers a;
        double t0 = ws_clock_mono_s();
        if (ws_client_step(c, s.id, &req, &a, &err) != WS_CLIENT_OK) {
            if (cl->errors++ == 0) fprintf(stderr, "bench_cluster: step: %s\n", err.message);
            break;
        }
        double dt = ws_clock_mono_s() - t0;
        step = a.step;
        ws_client_answers_free(&a);
        if (ws_bench_lat_push(&cl->lat, dt) != 0) break;
    }
    ws_client_free(c);
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    char name[32];
    int nodes;
    double steps_per_s, p50_ms, p99_ms;
    double node_cpu, haproxy_cpu, pg_cpu; /* CPU s per 1,000 steps */
    double stmts_per_batch, stmts_per_step, steps_per_batch;
    double wal_per_step; /* bytes of PostgreSQL's write-ahead log per step */
    long steps, errors;
} row;

/* The write-ahead log's position in bytes: what PostgreSQL wrote so far (the
 * throwaway server runs with full_page_writes off: a production one writes more). */
static double wal_bytes(void)
{
    char v[64];
    return psql("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')", v, sizeof v) == 0 ? atof(v) : 0;
}

/* worldstate_batch_jobs_count of a node: the engine batches it ran. */
static double batches_of(int port)
{
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    ws_client_config cfg = ws_client_config_default();
    cfg.url = url;
    ws_client *c = NULL;
    ws_client_error err;
    char *text = NULL;
    double n = 0;
    if (ws_client_new(&cfg, &c, &err) == WS_CLIENT_OK && ws_client_metrics(c, &text, &err) == WS_CLIENT_OK) {
        const char *p = strstr(text, "\nworldstate_batch_jobs_count ");
        if (p) n = atof(p + strlen("\nworldstate_batch_jobs_count "));
    }
    free(text);
    ws_client_free(c);
    return n;
}

/* The load through port; the costs of the nodes, of haproxy (pid > 0) and of
 * PostgreSQL (schema non-NULL) into r. */
static void run_load(int port, const daemon_proc *nodes, int n, pid_t haproxy, const char *schema, int clients,
                     double seconds, row *r)
{
    char url[64], v[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    static client cl[MAX_CLIENTS];
    pthread_t th[MAX_CLIENTS];
    double node0 = 0, batches0 = 0, stmts0 = 0;
    for (int i = 0; i < n; i++) node0 += cpu_s(nodes[i].pid, NULL, 0), batches0 += batches_of(nodes[i].port);
    double hap0 = haproxy > 0 ? cpu_s(haproxy, NULL, 0) : 0, pg0 = schema ? postgres_cpu_s() : 0;
    if (schema && psql("SELECT sum(calls) FROM pg_stat_statements", v, sizeof v) == 0) stmts0 = atof(v);
    double wal0 = schema ? wal_bytes() : 0;
    double until = ws_clock_mono_s() + seconds;
    for (int i = 0; i < clients; i++) {
        cl[i] = (client){.url = url, .until = until};
        if (pthread_create(&th[i], NULL, client_main, &cl[i]) != 0) cl[i].errors = 1, th[i] = 0;
    }
    long total = 0;
    for (int i = 0; i < clients; i++) {
        if (th[i]) pthread_join(th[i], NULL);
        total += cl[i].lat.n;
        r->errors += cl[i].errors;
    }
    double node1 = 0, batches1 = 0, stmts1 = 0;
    for (int i = 0; i < n; i++) node1 += cpu_s(nodes[i].pid, NULL, 0), batches1 += batches_of(nodes[i].port);
    double hap1 = haproxy > 0 ? cpu_s(haproxy, NULL, 0) : 0, pg1 = schema ? postgres_cpu_s() : 0;
    if (schema && psql("SELECT sum(calls) FROM pg_stat_statements", v, sizeof v) == 0) stmts1 = atof(v);
    double wal1 = schema ? wal_bytes() : 0;
    double *all = malloc(sizeof *all * (size_t)(total ? total : 1));
    long k = 0;
    for (int i = 0; i < clients; i++) {
        if (all) memcpy(all + k, cl[i].lat.v, sizeof *all * (size_t)cl[i].lat.n);
        k += cl[i].lat.n;
        free(cl[i].lat.v);
    }
    if (all && total) qsort(all, (size_t)total, sizeof *all, cmp_double);
    r->steps = total;
    r->steps_per_s = total / seconds;
    r->p50_ms = all && total ? 1e3 * all[total / 2] : 0;
    r->p99_ms = all && total ? 1e3 * all[(long)(0.99 * (double)(total - 1))] : 0;
    free(all);
    double per_k = total ? 1000.0 / (double)total : 0;
    r->node_cpu = (node1 - node0) * per_k;
    r->haproxy_cpu = (hap1 - hap0) * per_k;
    r->pg_cpu = (pg1 - pg0) * per_k;
    double batches = batches1 - batches0;
    /* the statements counted include the sum and the WAL position read before the load */
    r->stmts_per_batch = schema && batches > 0 ? (stmts1 - stmts0 - 2) / batches : 0;
    r->steps_per_batch = batches > 0 ? (double)total / batches : 0;
    r->stmts_per_step = schema && total ? (stmts1 - stmts0 - 2) / (double)total : 0;
    r->wal_per_step = total ? (wal1 - wal0) / (double)total : 0;
}

/* ---- configurations -------------------------------------------------------------- */

static const char *daemon_path = WS_DAEMON_PATH;

static int start_node(daemon_proc *d, const char *dir, const char *store)
{
    const char *flags[] = {"--backend", "cpu", "--threads", "1", "--config", "/dev/null",
                           store ? "--store" : NULL, store, NULL};
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) return -1;
    return daemon_start(d, daemon_path, dir, flags);
}

static int run_sqlite(int clients, double seconds, row *r)
{
    char dir[128];
    snprintf(dir, sizeof dir, "%s/sqlite", base);
    daemon_proc d = {0};
    if (start_node(&d, dir, NULL) != 0) return -1;
    snprintf(r->name, sizeof r->name, "1 node, SQLite");
    r->nodes = 1;
    run_load(d.port, &d, 1, 0, NULL, clients, seconds, r);
    daemon_stop(&d);
    return 0;
}

static int run_cluster(int n, int clients, double seconds, row *r)
{
    char schema[32], store[700], dir[MAX_NODES][128];
    snprintf(schema, sizeof schema, "bench_%d", n);
    char sql[64];
    snprintf(sql, sizeof sql, "CREATE SCHEMA %s", schema);
    if (psql(sql, NULL, 0) != 0) return -1;
    snprintf(store, sizeof store, "%s%coptions=-csearch_path%%3D%s", pg_uri, strchr(pg_uri, '?') ? '&' : '?',
             schema);
    daemon_proc nodes[MAX_NODES] = {{0}};
    int ok = 1;
    for (int i = 0; ok && i < n; i++) {
        snprintf(dir[i], sizeof dir[i], "%s/%s_%d", base, schema, i + 1);
        if (i > 0) { /* models/ is the first node's */
            char models[160], link[160];
            snprintf(models, sizeof models, "%s/models", dir[0]);
            snprintf(link, sizeof link, "%s/models", dir[i]);
            ok = mkdir(dir[i], 0700) == 0 && symlink(models, link) == 0;
        }
        ok = ok && start_node(&nodes[i], dir[i], store) == 0;
    }
    int port = ok ? daemon_free_port() : -1, ports[MAX_NODES];
    char log[128];
    snprintf(log, sizeof log, "%s/haproxy.log", base);
    for (int i = 0; i < n; i++) ports[i] = nodes[i].port;
    pid_t hap = port > 0 ? daemon_haproxy_start(WS_SOURCE_DIR "/deploy/haproxy/worldstate.cfg", port, ports,
                                                n, log)
                         : -1;
    ok = ok && hap > 0;
    if (ok) {
        snprintf(r->name, sizeof r->name, "%d node%s, PostgreSQL", n, n > 1 ? "s" : "");
        r->nodes = n;
        /* HAProxy's checks (each second, two to rise) see every node ready */
        sleep(3);
        run_load(port, nodes, n, hap, schema, clients, seconds, r);
    }
    if (hap > 0) {
        kill(hap, SIGTERM);
        waitpid(hap, NULL, 0);
    }
    for (int i = n - 1; i >= 0; i--) daemon_stop(&nodes[i]);
    return ok ? 0 : -1;
}

int main(int argc, char **argv)
{
    int max_nodes = 3, clients = 16, keep = 0;
    double seconds = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--keep"))
            keep = 1;
        else if (i + 1 < argc && !strcmp(argv[i], "--nodes"))
            max_nodes = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--clients"))
            clients = atoi(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--seconds"))
            seconds = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_cluster [--nodes 3] [--clients 16] [--seconds 5] [--keep]\n");
            return 2;
        }
    }
    if (max_nodes < 1 || max_nodes > MAX_NODES || clients < 1 || clients > MAX_CLIENTS || seconds <= 0) {
        fprintf(stderr, "bench_cluster: --nodes 1..%d, --clients 1..%d, --seconds > 0\n", MAX_NODES, MAX_CLIENTS);
        return 2;
    }
    if (sh("command -v haproxy >/dev/null 2>&1") != 0) {
        printf("bench_cluster: skipped: no haproxy (scripts/install-deps.sh)\n");
        return 77;
    }
    if (!mkdtemp(base)) return perror("mkdtemp"), 1;
    int pg = pg_start();
    if (pg != 0) {
        printf("bench_cluster: skipped: %s\n", pg == 77 ? "no PostgreSQL server programs" : "PostgreSQL did not start");
        pg_stop();
        return pg == 77 ? 77 : 1;
    }
    row rows[MAX_NODES + 1];
    memset(rows, 0, sizeof rows);
    int n_rows = 0, failed = run_sqlite(clients, seconds, &rows[n_rows++]) != 0;
    for (int n = 1; n <= max_nodes && !failed; n++) failed = run_cluster(n, clients, seconds, &rows[n_rows++]) != 0;
    pg_stop();

    printf("\nbench_cluster: %d clients, %.0f s each, steps with expect_step (2 instructions, 2 queries), "
           "the shipped model, --threads 1 per node; %ld cores shared by everything\n",
           clients, seconds, sysconf(_SC_NPROCESSORS_ONLN));
    printf("%-22s %9s %8s %8s %10s %10s %10s %10s %9s %9s %9s %7s\n", "config", "steps/s", "p50 ms", "p99 ms",
           "node CPU", "haproxy", "postgres", "PG stmts", "PG stmts", "WAL KB", "steps", "errors");
    printf("%-22s %9s %8s %8s %10s %10s %10s %10s %9s %9s %9s %7s\n", "", "", "", "", "s/1k steps", "s/1k steps",
           "s/1k steps", "per batch", "per step", "per step", "per batch", "");
    for (int i = 0; i < n_rows; i++) {
        const row *r = &rows[i];
        printf("%-22s %9.0f %8.2f %8.2f %10.3f %10.3f %10.3f %10.2f %9.2f %9.1f %9.2f %7ld\n", r->name,
               r->steps_per_s, r->p50_ms, r->p99_ms, r->node_cpu, r->haproxy_cpu, r->pg_cpu, r->stmts_per_batch,
               r->stmts_per_step, r->wal_per_step / 1024, r->steps_per_batch, r->errors);
    }
    printf("{\"bench\":\"cluster\",\"clients\":%d,\"seconds\":%.1f,\"rows\":[", clients, seconds);
    for (int i = 0; i < n_rows; i++) {
        const row *r = &rows[i];
        printf("%s{\"config\":\"%s\",\"nodes\":%d,\"steps_per_s\":%.1f,\"p50_ms\":%.3f,\"p99_ms\":%.3f,"
               "\"node_cpu_s_per_1k\":%.4f,\"haproxy_cpu_s_per_1k\":%.4f,\"postgres_cpu_s_per_1k\":%.4f,"
               "\"pg_statements_per_batch\":%.2f,\"pg_statements_per_step\":%.2f,\"wal_bytes_per_step\":%.0f,"
               "\"steps_per_batch\":%.2f,\"errors\":%ld}",
               i ? "," : "", r->name, r->nodes, r->steps_per_s, r->p50_ms, r->p99_ms, r->node_cpu, r->haproxy_cpu,
               r->pg_cpu, r->stmts_per_batch, r->stmts_per_step, r->wal_per_step, r->steps_per_batch, r->errors);
    }
    printf("]}\n");
    if (!keep) tmp_dir_remove("bench_cluster", base);
    return failed;
}
