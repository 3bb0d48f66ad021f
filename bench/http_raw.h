/* http_raw.h — the load loop's HTTP client: one keep-alive HTTP/1.1
 * connection over loopback, a request written and its whole answer read, with
 * no library between. bench_server measures the daemon on the machine it runs
 * on, so the load generator's CPU is taken from the daemon: with libcurl it
 * was 64-78 µs of CPU a step at 64 clients (perf, issue 15), 15% of 2 cores. */
#ifndef WS_BENCH_HTTP_RAW_H
#define WS_BENCH_HTTP_RAW_H

#include <stddef.h>

typedef struct {
    int fd, port; /* fd -1: not connected (the next request connects) */
} http_raw;

/* A connection to 127.0.0.1:port, made on first use. */
void http_raw_init(http_raw *h, int port);
/* Sends method path (body: JSON, or NULL for none) and reads the answer: its
 * status, its body into out[cap] (cut to fit, NUL-terminated; out may be NULL).
 * A connection the daemon closed is made again once. 0 when no answer came. */
long http_raw_request(http_raw *h, const char *method, const char *path, const char *body,
                      char *out, size_t cap);
void http_raw_close(http_raw *h);

#endif
