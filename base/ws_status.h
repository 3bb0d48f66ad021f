/* ws_status.h — error values shared by every module.
 *
 * Functions return a ws_status (WS_OK == 0) and, where they take one, fill a
 * ws_error with a human-readable message. Nothing below main() exits. */
#ifndef WS_STATUS_H
#define WS_STATUS_H

#include <stdarg.h>

typedef enum {
    WS_OK = 0,
    WS_ERR_NOMEM,     /* an allocation failed (host or device) */
    WS_ERR_INVALID,   /* bad argument or input: caller's fault, nothing changed */
    WS_ERR_BACKEND,   /* the compute backend reported a failure */
    WS_ERR_IO,        /* file system or OS call failed */
    WS_ERR_FORMAT,    /* a file or blob is corrupt, truncated or of the wrong kind */
    WS_ERR_UNSUPPORTED, /* the build or device lacks what was asked for */
    WS_ERR_NOTFOUND,
    WS_ERR_CONFLICT,
    WS_ERR_STORAGE,     /* storage is busy (locked past its timeout) or failed otherwise */
    WS_ERR_UNAVAILABLE, /* storage cannot write now: disk full, I/O error, read-only, gone */
    WS_ERR_CORRUPT      /* storage is damaged (a bad page, not a database): an operator's
                           matter, never the request's fault */
} ws_status;

typedef struct {
    ws_status code;
    char msg[256];
} ws_error;

/* Records code and a printf-style message in err (err may be NULL); returns code
 * so that callers can write `return ws_error_set(err, WS_ERR_INVALID, ...)`. */
ws_status ws_error_set(ws_error *err, ws_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Static name of a status, e.g. "invalid". */
const char *ws_status_name(ws_status s);

/* Propagate a failure: evaluates expr once and returns its status if not WS_OK. */
#define WS_TRY(expr)                          \
    do {                                      \
        ws_status ws_try_s_ = (expr);         \
        if (ws_try_s_ != WS_OK) return ws_try_s_; \
    } while (0)

#endif
