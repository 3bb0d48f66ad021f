/* ws_status.c — error value helpers. */
#include "ws_status.h"

#include <stdio.h>

ws_status ws_error_set(ws_error *err, ws_status code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

const char *ws_status_name(ws_status s)
{
    switch (s) {
    case WS_OK: return "ok";
    case WS_ERR_NOMEM: return "out of memory";
    case WS_ERR_INVALID: return "invalid";
    case WS_ERR_BACKEND: return "backend failure";
    case WS_ERR_IO: return "i/o error";
    case WS_ERR_FORMAT: return "bad format";
    case WS_ERR_UNSUPPORTED: return "unsupported";
    case WS_ERR_NOTFOUND: return "not found";
    case WS_ERR_CONFLICT: return "conflict";
    case WS_ERR_STORAGE: return "storage failure";
    case WS_ERR_UNAVAILABLE: return "storage unavailable";
    case WS_ERR_CORRUPT: return "storage corrupt";
    }
    return "unknown";
}
