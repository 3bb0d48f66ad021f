/* console.c — GET / and GET /console/{file}: the web console's embedded files
 * (console.h). Each answer carries its ETag and "Cache-Control: no-cache", so a
 * browser keeps its copy and asks again with If-None-Match (a 304, no body)
 * until a new build changes the file; and a Content-Security-Policy that lets
 * the page load only its own scripts and talk only to this daemon, so that a
 * key typed into it cannot be sent elsewhere by injected markup. */
#include <string.h>

#include "console.h"
#include "routes.h"

#define CONSOLE_CSP                                                                   \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " \
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

static const ws_console_file *file_named(const char *name)
{
    for (int i = 0; i < ws_console_n_files; i++)
        if (!strcmp(ws_console_files[i].name, name)) return &ws_console_files[i];
    return NULL;
}

static int add_headers(struct MHD_Response *r, const ws_console_file *f)
{
    return MHD_add_response_header(r, "ETag", f->etag) == MHD_YES &&
           MHD_add_response_header(r, "Cache-Control", "no-cache") == MHD_YES &&
           MHD_add_response_header(r, "X-Content-Type-Options", "nosniff") == MHD_YES &&
           MHD_add_response_header(r, "Referrer-Policy", "no-referrer") == MHD_YES &&
           MHD_add_response_header(r, "Content-Security-Policy", CONSOLE_CSP) == MHD_YES;
}

/* 1 when the request's If-None-Match names the file's ETag (or is "*"). */
static int not_modified(ws_http_ctx *c, const ws_console_file *f)
{
    const char *inm = MHD_lookup_connection_value(c->conn, MHD_HEADER_KIND, "If-None-Match");
    if (!inm) return 0;
    if (!strcmp(inm, "*")) return 1;
    size_t n = strlen(f->etag);
    for (const char *p = strstr(inm, f->etag); p; p = strstr(p + 1, f->etag)) {
        int starts = p == inm || p[-1] == ' ' || p[-1] == ',' || p[-1] == '/';
        int ends = p[n] == '\0' || p[n] == ',' || p[n] == ' ';
        if (starts && ends) return 1;
    }
    return 0;
}

static void serve(ws_http_ctx *c, ws_http_answer *a, const char *name)
{
    const ws_console_file *f = file_named(name);
    if (!f) {
        a->status = 404;
        a->json = ws_http_error("not_found", "no such console file");
        return;
    }
    int same = not_modified(c, f);
    a->status = same ? 304 : 200;
    const void *body = same ? (const void *)"" : (const void *)f->data;
    a->raw =
        MHD_create_response_from_buffer(same ? 0 : f->len, (void *)body, MHD_RESPMEM_PERSISTENT);
    if (!a->raw) return; /* out of memory: http.c closes the connection */
    if ((!same && MHD_add_response_header(a->raw, "Content-Type", f->type) != MHD_YES) ||
        !add_headers(a->raw, f)) {
        MHD_destroy_response(a->raw);
        a->raw = NULL;
    }
}

void ws_route_console_index(ws_http_ctx *c, ws_http_answer *a)
{
    serve(c, a, "index.html");
}

void ws_route_console_file(ws_http_ctx *c, ws_http_answer *a)
{
    serve(c, a, c->params[0]);
}
