/* fuzz_path.c — a request's path as the daemon takes it (server/daemon/path.c):
 * MHD's unescape callback, then the match against the route table. The first
 * byte picks the method, the rest up to a NUL is the path (MHD hands it over
 * as a C string). Beyond not crashing: unescaping never makes a '/' or a NUL,
 * and a matched route's {…} parameters are non-empty segments of the path. */
#include <stdint.h>
#include <string.h>

#include "fuzz_check.h"
#include "server/daemon/routes.h"

static size_t count_slashes(const char *s)
{
    size_t n = 0;
    for (; *s; s++) n += *s == '/';
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const methods[] = {"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "TRACE"};
    if (size < 1) return 0;
    const char *method = methods[data[0] % (sizeof methods / sizeof methods[0])];
    size_t n = strnlen((const char *)data + 1, size - 1);
    char *url = malloc(n + 1);
    if (!url) return 0;
    memcpy(url, data + 1, n);
    url[n] = '\0';
    size_t slashes = count_slashes(url);
    size_t len = ws_http_unescape(NULL, NULL, url);
    WS_FUZZ_CHECK(len == strlen(url) && len <= n);
    WS_FUZZ_CHECK(count_slashes(url) == slashes);
    char path[WS_SRV_PATH_MAX];
    ws_route_match m;
    if (ws_http_route(url, method, path, sizeof path, &m) == 0) {
        WS_FUZZ_CHECK(m.label >= 0 && m.label < WS_ROUTE_LABELS);
        WS_FUZZ_CHECK(!m.route || !strcmp(m.route->method, method) ||
                      (!strcmp(method, "HEAD") && !strcmp(m.route->method, "GET")));
        for (int i = 0; m.route && i < WS_HTTP_PARAMS && m.params[i]; i++) {
            WS_FUZZ_CHECK(m.params[i] >= path && m.params[i] < path + sizeof path);
            WS_FUZZ_CHECK(m.params[i][0] != '\0' && !strchr(m.params[i], '/'));
        }
    }
    free(url);
    return 0;
}
