/* path.c — a request's path: the unescaping MHD applies to it (its callback)
 * and its row in the route table, apart from http.c so that the fuzz target
 * (fuzz/fuzz_path.c) runs them on any bytes. */
#include <string.h>

#include "routes.h"

/* MHD decodes %HH in the path (and query arguments) before routing: a decoded
 * %2F would split a segment in two and a %00 would end the path early
 * ("/v1/models/a%00b" naming model "a"). Those two stay encoded; the '%' that
 * remains is in no route's segment (ws_http_route answers -1: 404). */
static int hex_digit(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

size_t ws_http_unescape(void *cls, struct MHD_Connection *conn, char *s)
{
    (void)cls, (void)conn;
    char *w = s;
    for (const char *p = s; *p; p++) {
        int hi = p[0] == '%' ? hex_digit(p[1]) : -1, lo = hi >= 0 ? hex_digit(p[2]) : -1;
        int byte = hi * 16 + lo;
        if (lo >= 0 && byte != '/' && byte != 0) {
            *w++ = (char)byte;
            p += 2;
        } else {
            *w++ = *p;
        }
    }
    *w = '\0';
    return (size_t)(w - s);
}

/* Splits the URL path into segments (in place in a copy). */
static int split_path(const char *url, char *copy, size_t cap, char **segs, int max)
{
    if (strlen(url) >= cap) return -1;
    strcpy(copy, url);
    int n = 0;
    char *save = NULL; /* strtok_r: requests are parsed on several threads at once */
    for (char *p = strtok_r(copy, "/", &save); p; p = strtok_r(NULL, "/", &save)) {
        if (n == max) return -1;
        segs[n++] = p;
    }
    return n;
}

int ws_http_route(const char *url, const char *method, char *path, size_t cap, ws_route_match *m)
{
    if (strchr(url, '%')) return -1;
    char *segs[8];
    int n = split_path(url, path, cap, segs, 8);
    if (n < 0) return -1;
    ws_route_find(method, segs, n, m);
    return 0;
}
