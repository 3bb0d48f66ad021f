/* console.h — the web console's static files (console/), embedded in
 * worldstated at build time by console_embed.cmake and served at / and
 * /console/NAME (console.c) with no key: the page holds no data, every call it
 * makes to the API carries the user's key as any client's does. */
#ifndef WS_SRV_CONSOLE_H
#define WS_SRV_CONSOLE_H

#include <stddef.h>

typedef struct {
    const char *name;          /* "index.html", "app.js", ... */
    const char *type;          /* its Content-Type */
    const unsigned char *data; /* its bytes (NUL after them) */
    size_t len;
    const char *etag; /* "\"<16 hex of its SHA-256>\"" */
} ws_console_file;

extern const ws_console_file ws_console_files[];
extern const int ws_console_n_files;

#endif
