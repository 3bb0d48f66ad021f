/* openapi_doc.c — server/daemon/openapi.json, embedded in worldstated when it is
 * built (the assembler's .incbin, as for the shipped model: server/engine/
 * shipped_default.c) and served at GET /openapi.json, so that the document a
 * client reads is the one of the build that answers it. WS_OPENAPI_FILE (a
 * compile definition) is its path in the source tree; the object is rebuilt
 * whenever the file changes (OBJECT_DEPENDS in CMakeLists.txt). */
#include "routes.h"

#ifndef WS_OPENAPI_FILE
#error "WS_OPENAPI_FILE must name server/daemon/openapi.json (server/daemon/CMakeLists.txt)"
#endif

__asm__(".section .rodata.ws_openapi,\"a\",@progbits\n"
        ".globl ws_openapi_begin\n"
        ".hidden ws_openapi_begin\n"
        "ws_openapi_begin:\n"
        ".incbin \"" WS_OPENAPI_FILE "\"\n"
        ".globl ws_openapi_end\n"
        ".hidden ws_openapi_end\n"
        "ws_openapi_end:\n"
        ".byte 0\n"
        ".previous\n");

extern const char ws_openapi_begin[] __attribute__((visibility("hidden")));
extern const char ws_openapi_end[] __attribute__((visibility("hidden")));

void ws_route_openapi(ws_http_ctx *c, ws_http_answer *a)
{
    (void)c;
    size_t len = (size_t)(ws_openapi_end - ws_openapi_begin);
    a->raw = MHD_create_response_from_buffer(len, (void *)ws_openapi_begin, MHD_RESPMEM_PERSISTENT);
    if (a->raw && MHD_add_response_header(a->raw, "Content-Type", "application/json") != MHD_YES) {
        MHD_destroy_response(a->raw);
        a->raw = NULL;
    }
    a->status = 200;
}
