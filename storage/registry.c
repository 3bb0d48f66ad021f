/* registry.c — the storage backends this build has, and which one a data
 * location names. Adding a backend: its folder (storage/<scheme>/, defining
 * ws_store_<scheme>_ops) and one line in WS_STORE_BACKENDS. */
#include <stdio.h>
#include <string.h>

#include "store_ops.h"

/* One line per backend. The first one also serves bare paths. A backend built
 * only where its library is found (WS_POSTGRESQL in CMake) adds its line then. */
#ifdef WS_HAVE_POSTGRESQL
#define WS_STORE_BACKEND_POSTGRESQL(X) X(postgresql)
#else
#define WS_STORE_BACKEND_POSTGRESQL(X)
#endif
/* clang-format off */
#define WS_STORE_BACKENDS(X) \
    X(sqlite) \
    WS_STORE_BACKEND_POSTGRESQL(X)
/* clang-format on */

#define WS_STORE_X_DECLARE(name) extern const ws_store_ops ws_store_##name##_ops;
WS_STORE_BACKENDS(WS_STORE_X_DECLARE)
#undef WS_STORE_X_DECLARE

static const ws_store_ops *const backends[] = {
#define WS_STORE_X_ENTRY(name) &ws_store_##name##_ops,
    WS_STORE_BACKENDS(WS_STORE_X_ENTRY)
#undef WS_STORE_X_ENTRY
};
enum { N_BACKENDS = sizeof backends / sizeof backends[0] };

int ws_store_backend_count(void) { return N_BACKENDS; }

const char *ws_store_backend_scheme(int i)
{
    return i >= 0 && i < N_BACKENDS ? backends[i]->scheme : NULL;
}

/* 1 if name (not NUL-terminated, n bytes) is the scheme or alias of b. */
static int names(const ws_store_ops *b, const char *name, size_t n)
{
    return (strlen(b->scheme) == n && memcmp(b->scheme, name, n) == 0) ||
           (b->alias && strlen(b->alias) == n && memcmp(b->alias, name, n) == 0);
}

/* The length of a URI-style scheme ([a-z][a-z0-9+.-]*) followed by ':' at the
 * start of location, or 0 when location is a bare path. */
static size_t scheme_len(const char *location)
{
    if (!(location[0] >= 'a' && location[0] <= 'z')) return 0;
    size_t n = 1;
    for (char c; (c = location[n]) != ':'; n++) {
        int ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '.' ||
                 c == '-';
        if (!ok) return 0;
    }
    return n;
}

ws_status ws_store__resolve(const char *location, const ws_store_ops **ops, const char **target,
                            ws_error *err)
{
    size_t n = scheme_len(location);
    if (n == 0) {
        *ops = backends[0];
        *target = location;
        return WS_OK;
    }
    for (int i = 0; i < N_BACKENDS; i++) {
        if (names(backends[i], location, n)) {
            *ops = backends[i];
            *target = location + n + 1;
            return WS_OK;
        }
    }
    char known[128] = "";
    for (int i = 0, at = 0; i < N_BACKENDS && at < (int)sizeof known; i++)
        at += snprintf(known + at, sizeof known - (size_t)at, "%s%s:", i ? ", " : "",
                       backends[i]->scheme);
    return ws_error_set(err, WS_ERR_INVALID,
                        "storage: unknown storage scheme \"%.*s:\" in \"%s\" (known: %s, "
                        "or a bare path for %s)",
                        (int)n, location, location, known, backends[0]->scheme);
}
