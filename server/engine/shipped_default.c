/* shipped_default.c — see shipped.h. The bytes come in through the assembler's
 * .incbin: no generated C array to compile, so a file of several MB costs the
 * build nothing. WS_SHIPPED_BLOB (a compile definition) is the build's copy of
 * models/default.safetensors, empty when the repository had none. */
#include "shipped.h"

#ifndef WS_SHIPPED_BLOB
#error "WS_SHIPPED_BLOB must name the file to embed (server/engine/CMakeLists.txt)"
#endif

__asm__(".section .rodata.ws_shipped_default,\"a\",@progbits\n"
        ".balign 64\n"
        ".globl ws_shipped_default_begin\n"
        ".hidden ws_shipped_default_begin\n"
        "ws_shipped_default_begin:\n"
        ".incbin \"" WS_SHIPPED_BLOB "\"\n"
        ".globl ws_shipped_default_end\n"
        ".hidden ws_shipped_default_end\n"
        "ws_shipped_default_end:\n"
        ".byte 0\n" /* the end label stays inside the section even when the file is empty */
        ".previous\n");

extern const unsigned char ws_shipped_default_begin[] __attribute__((visibility("hidden")));
extern const unsigned char ws_shipped_default_end[] __attribute__((visibility("hidden")));

const unsigned char *ws_srv_shipped_default(size_t *len)
{
    *len = (size_t)(ws_shipped_default_end - ws_shipped_default_begin);
    return ws_shipped_default_begin;
}
