/* cors.c — OPTIONS and CORS (--cors-origin), so that a browser application
 * served from another origin may call the API.
 *
 * With no --cors-origin (the default) no response carries a CORS header and a
 * browser keeps pages of other origins out, as it should for a service that
 * trusts loopback in open mode. An allowed origin's requests get
 * Access-Control-Allow-Origin (its own origin, or * when * is allowed) and the
 * headers it may read; its preflight (OPTIONS with
 * Access-Control-Request-Method) gets the path's methods and the request
 * headers it may send: Authorization (the API key) and Content-Type. */
#include <stdio.h>
#include <string.h>

#include "daemon.h"

/* Response headers a page may read beyond the safelisted ones. */
#define WS_CORS_EXPOSE  "Allow, X-State-Shape, X-Step, X-Model-Version"
#define WS_CORS_HEADERS "Authorization, Content-Type"
#define WS_CORS_MAX_AGE "600" /* seconds a browser may cache a preflight */

/* One origin: "*", or scheme://host[:port] as a browser sends it (no path,
 * no trailing slash, no spaces or commas). */
static int origin_ok(const char *o, size_t n)
{
    if (n == 1 && o[0] == '*') return 1;
    size_t scheme = !strncmp(o, "http://", 7) ? 7 : !strncmp(o, "https://", 8) ? 8 : 0;
    if (!scheme || n == scheme) return 0;
    for (size_t i = scheme; i < n; i++)
        if (o[i] <= ' ' || o[i] == '/' || o[i] == ',' || o[i] == 0x7f) return 0;
    return 1;
}

ws_status ws_cors_origin_add(ws_srv_config *c, const char *arg, ws_error *err)
{
    for (const char *p = arg;; p++) {
        size_t n = strcspn(p, ",");
        while (n && *p == ' ') p++, n--;
        while (n && p[n - 1] == ' ') n--;
        if (!origin_ok(p, n))
            return ws_error_set(err, WS_ERR_INVALID,
                                "wants origins like https://app.example.com (scheme://host[:port], "
                                "no path), a comma list of them, or *; got '%s'",
                                arg);
        size_t used = strlen(c->cors_origins);
        if (used + n + 2 > sizeof c->cors_origins)
            return ws_error_set(err, WS_ERR_INVALID, "too many origins (%zu bytes at most)",
                                sizeof c->cors_origins - 1);
        snprintf(c->cors_origins + used, sizeof c->cors_origins - used, "%s%.*s", used ? "," : "",
                 (int)n, p);
        p += strcspn(p, ",");
        if (!*p) return WS_OK;
    }
}

/* The value of Access-Control-Allow-Origin for this request, or NULL: its
 * Origin is not allowed (or it has none). */
static const char *allowed_origin(const ws_srv *srv, struct MHD_Connection *conn)
{
    const char *origin = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin");
    if (!origin || !*origin) return NULL;
    size_t len = strlen(origin);
    for (const char *p = srv->cfg.cors_origins; *p;) {
        size_t n = strcspn(p, ",");
        if (n == 1 && *p == '*') return "*";
        if (n == len && !strncmp(p, origin, n)) return origin;
        p += n + (p[n] == ',');
    }
    return NULL;
}

int ws_cors_headers(const ws_srv *srv, struct MHD_Connection *conn, struct MHD_Response *resp)
{
    if (!srv->cfg.cors_origins[0]) return 1;
    /* the answer depends on Origin: a shared cache must key on it */
    if (MHD_add_response_header(resp, "Vary", "Origin") != MHD_YES) return 0;
    const char *allow = allowed_origin(srv, conn);
    if (!allow) return 1;
    return MHD_add_response_header(resp, "Access-Control-Allow-Origin", allow) == MHD_YES &&
           MHD_add_response_header(resp, "Access-Control-Expose-Headers", WS_CORS_EXPOSE) ==
               MHD_YES;
}

struct MHD_Response *ws_cors_options(const ws_srv *srv, struct MHD_Connection *conn,
                                     const char *allow)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
    if (!resp) return NULL;
    int ok = MHD_add_response_header(resp, "Allow", allow) == MHD_YES;
    const char *preflight =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Access-Control-Request-Method");
    if (ok && preflight && allowed_origin(srv, conn))
        ok = MHD_add_response_header(resp, "Access-Control-Allow-Methods", allow) == MHD_YES &&
             MHD_add_response_header(resp, "Access-Control-Allow-Headers", WS_CORS_HEADERS) ==
                 MHD_YES &&
             MHD_add_response_header(resp, "Access-Control-Max-Age", WS_CORS_MAX_AGE) == MHD_YES;
    if (!ok) {
        MHD_destroy_response(resp);
        return NULL;
    }
    return resp;
}
