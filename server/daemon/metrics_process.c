/* metrics_process.c — the process metrics every Prometheus client library
 * exports (process_*), read from /proc at each scrape: resident and virtual
 * memory, CPU time, open and allowed file descriptors, start time. A value
 * that cannot be read is left out, never made up. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "daemon.h"

/* Fields 14 (utime), 15 (stime) and 22 (starttime, clock ticks after boot) of
 * /proc/self/stat; 0 when it cannot be read. The command name (field 2) may
 * hold spaces and parentheses: the fields are counted after its last ')'. */
static int read_stat(unsigned long long *utime, unsigned long long *stime,
                     unsigned long long *start)
{
    char line[1024];
    FILE *f = fopen("/proc/self/stat", "r");
    if (!f) return 0;
    char *ok = fgets(line, sizeof line, f);
    fclose(f);
    char *p = ok ? strrchr(line, ')') : NULL;
    if (!p) return 0;
    /* after ") ": field 3 (state), then 4..13 skipped, 14, 15, 16..21 skipped, 22 */
    return sscanf(p + 2,
                  "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d "
                  "%*d %llu",
                  utime, stime, start) == 3;
}

/* The boot time, seconds since the epoch (btime of /proc/stat); 0 if unknown. */
static long long boot_time(void)
{
    char line[256];
    long long bt = 0;
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "btime %lld", &bt) == 1) break;
    fclose(f);
    return bt;
}

static long open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    long n = 0;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n - 1; /* the directory stream's own descriptor */
}

void ws_metrics_process(char **buf, size_t *len, size_t *cap)
{
    long tick = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    unsigned long long ut, st, start;
    if (tick > 0 && read_stat(&ut, &st, &start)) {
        ws_metrics_family(buf, len, cap, "process_cpu_seconds_total", "counter",
                          "Total user and system CPU time spent in seconds.");
        ws_metrics_printf(buf, len, cap, "process_cpu_seconds_total %.2f\n",
                          (double)(ut + st) / (double)tick);
        long long bt = boot_time();
        if (bt > 0) {
            ws_metrics_family(buf, len, cap, "process_start_time_seconds", "gauge",
                              "Start time of the process since unix epoch in seconds.");
            ws_metrics_printf(buf, len, cap, "process_start_time_seconds %.2f\n",
                              (double)bt + (double)start / (double)tick);
        }
    }
    unsigned long long vm, rss;
    FILE *f = fopen("/proc/self/statm", "r");
    int got = f && page > 0 && fscanf(f, "%llu %llu", &vm, &rss) == 2;
    if (f) fclose(f);
    if (got) {
        ws_metrics_family(buf, len, cap, "process_resident_memory_bytes", "gauge",
                          "Resident memory size in bytes.");
        ws_metrics_printf(buf, len, cap, "process_resident_memory_bytes %llu\n",
                          rss * (unsigned long long)page);
        ws_metrics_family(buf, len, cap, "process_virtual_memory_bytes", "gauge",
                          "Virtual memory size in bytes.");
        ws_metrics_printf(buf, len, cap, "process_virtual_memory_bytes %llu\n",
                          vm * (unsigned long long)page);
    }
    long fds = open_fds();
    if (fds >= 0) {
        ws_metrics_family(buf, len, cap, "process_open_fds", "gauge",
                          "Number of open file descriptors.");
        ws_metrics_printf(buf, len, cap, "process_open_fds %ld\n", fds);
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        ws_metrics_family(buf, len, cap, "process_max_fds", "gauge",
                          "Maximum number of open file descriptors.");
        ws_metrics_printf(buf, len, cap, "process_max_fds %llu\n", (unsigned long long)rl.rlim_cur);
    }
}
