/* log.h — the daemon's own log (not a session's step log): one line per event,
 * timestamped (RFC 3339, UTC, milliseconds) and levelled, as text or as one
 * JSON object per line, to one destination (stderr or a file). Every thread
 * may log; a line is written whole with one write(2) under a lock, so lines
 * from different threads never interleave.
 *
 *   text: 2026-11-24T05:47:45.123Z info request method=GET route=/healthz status=200
 *   json: {"ts":"2026-11-24T05:47:45.123Z","level":"info","msg":"request",
 *          "method":"GET","route":"/healthz","status":200}
 *
 * Until ws_log_configure is called the log is text at level info on stderr, so
 * a library user (the engine in tests, worldstate-train) logs sensibly as is.
 * Bytes that are not UTF-8 become '?' and control characters are escaped: a
 * client's bytes in a field cannot forge a line. */
#ifndef WS_SRV_LOG_H
#define WS_SRV_LOG_H

#include "base/ws_status.h"

typedef enum { WS_LOG_ERROR, WS_LOG_WARN, WS_LOG_INFO, WS_LOG_DEBUG } ws_log_level;
typedef enum { WS_LOG_TEXT, WS_LOG_JSON } ws_log_format;

/* "error"|"warn"|"info"|"debug" and "text"|"json"; WS_ERR_INVALID otherwise. */
ws_status ws_log_level_parse(const char *s, ws_log_level *out, ws_error *err);
ws_status ws_log_format_parse(const char *s, ws_log_format *out, ws_error *err);
const char *ws_log_level_name(ws_log_level l);
const char *ws_log_format_name(ws_log_format f);

/* Lines of `level` and more severe, in `format`, to the file at path (appended,
 * created 0600 under the daemon's umask; NULL or "": stderr). A file is opened
 * anew on every call, so a call after logrotate moved it writes to a new one.
 * On failure the log stays as it was. */
ws_status ws_log_configure(ws_log_level level, ws_log_format format, const char *path,
                           ws_error *err);
/* The destination's descriptor, for a writer that cannot take the lock (a
 * crash report from a signal handler). */
int ws_log_fd(void);
/* 1 when a line of this level is written: skip building an expensive one. */
int ws_log_enabled(ws_log_level level);

/* A field of a structured line: a string (NULL: left out) or a number. */
typedef struct {
    const char *key;
    const char *str;
    double num;
    int is_num;
} ws_log_field;
#define WS_LOG_STR(k, v) ((ws_log_field){.key = (k), .str = (v)})
#define WS_LOG_NUM(k, v) ((ws_log_field){.key = (k), .num = (double)(v), .is_num = 1})

/* One line: msg and n fields. */
void ws_log_kv(ws_log_level level, const char *msg, const ws_log_field *fields, int n);
/* One line of formatted text, no fields. */
void ws_log(ws_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
