/* http_raw.c — see http_raw.h. Enough HTTP/1.1 for the daemon's answers: a
 * status line, headers with Content-Length (the daemon never sends chunked
 * bodies to these requests), the body; one request at a time on the connection. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http_raw.h"

enum { HEAD_MAX = 8192 };

void http_raw_init(http_raw *h, int port)
{
    h->fd = -1;
    h->port = port;
}

void http_raw_close(http_raw *h)
{
    if (h->fd >= 0) close(h->fd);
    h->fd = -1;
}

static int connect_to(http_raw *h)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((unsigned short)h->port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int one = 1;
    if (fd < 0 || setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0 ||
        connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    h->fd = fd;
    return 0;
}

static int send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k <= 0) return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* The value of header `name` in the header block head (NUL-terminated), or NULL. */
static const char *header(const char *head, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = strstr(head, "\r\n"); p; p = strstr(p + 2, "\r\n"))
        if (!strncasecmp(p + 2, name, n) && p[2 + n] == ':') return p + 3 + n;
    return NULL;
}

/* Bytes src[0..n) of a body at offset `at` into out[cap], as far as it holds
 * them (NUL-terminated; out may be NULL). */
static void keep(char *out, size_t cap, size_t at, const char *src, size_t n)
{
    if (!out || at + 1 >= cap) return;
    size_t k = n < cap - 1 - at ? n : cap - 1 - at;
    memcpy(out + at, src, k);
    out[at + k] = '\0';
}

/* One request and its answer on a connected h; 0 when none came whole. */
static long exchange(http_raw *h, const char *req, size_t req_len, char *out, size_t cap)
{
    char head[HEAD_MAX + 1];
    if (send_all(h->fd, req, req_len) != 0) return 0;
    size_t have = 0;
    char *end = NULL;
    while (!end) {
        if (have == HEAD_MAX) return 0;
        ssize_t k = recv(h->fd, head + have, HEAD_MAX - have, 0);
        if (k <= 0) return 0;
        have += (size_t)k;
        head[have] = '\0';
        end = strstr(head, "\r\n\r\n");
    }
    long status = 0;
    const char *len_v = header(head, "Content-Length");
    if (sscanf(head, "HTTP/1.%*d %ld", &status) != 1 || !len_v) return 0;
    size_t body_len = (size_t)strtoul(len_v, NULL, 10), got = have - (size_t)(end + 4 - head);
    if (got > body_len) return 0; /* nothing was asked for after this answer */
    keep(out, cap, 0, end + 4, got);
    char sink[4096];
    while (got < body_len) { /* the rest of the body: kept as far as out holds it */
        size_t want = body_len - got < sizeof sink ? body_len - got : sizeof sink;
        ssize_t k = recv(h->fd, sink, want, 0);
        if (k <= 0) return 0;
        keep(out, cap, got, sink, (size_t)k);
        got += (size_t)k;
    }
    return status;
}

long http_raw_request(http_raw *h, const char *method, const char *path, const char *body,
                      char *out, size_t cap)
{
    size_t body_len = body ? strlen(body) : 0, cap_req = strlen(path) + body_len + 160;
    char *req = malloc(cap_req);
    if (!req) return 0;
    int n = snprintf(req, cap_req,
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     method, path, body_len, body ? body : "");
    long status = 0;
    if (out && cap) out[0] = '\0';
    /* twice at most: a kept-alive connection the daemon closed meanwhile */
    for (int attempt = 0; n > 0 && !status && attempt < 2; attempt++) {
        if (h->fd < 0 && connect_to(h) != 0) break;
        status = exchange(h, req, (size_t)n, out, cap);
        if (!status) http_raw_close(h);
    }
    free(req);
    return status;
}
