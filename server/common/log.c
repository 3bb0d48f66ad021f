/* log.c — the daemon's log (log.h): lines built in a buffer, written whole. */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/ws_utf8.h"

static const char *const level_names[] = {"error", "warn", "info", "debug"};
static const char *const format_names[] = {"text", "json"};

static atomic_int log_level = WS_LOG_INFO;
static atomic_int log_format = WS_LOG_TEXT;
/* The destination; the lock is held only to write a line or to swap it. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int log_fd = STDERR_FILENO; /* atomic: read by ws_log_fd */

static ws_status parse_name(const char *s, const char *const *names, int n, const char *what,
                            int *out, ws_error *err)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(s, names[i])) {
            *out = i;
            return WS_OK;
        }
    return ws_error_set(err, WS_ERR_INVALID, "wants %s, got '%s'", what, s);
}

ws_status ws_log_level_parse(const char *s, ws_log_level *out, ws_error *err)
{
    int i = 0;
    WS_TRY(parse_name(s, level_names, 4, "error|warn|info|debug", &i, err));
    *out = (ws_log_level)i;
    return WS_OK;
}

ws_status ws_log_format_parse(const char *s, ws_log_format *out, ws_error *err)
{
    int i = 0;
    WS_TRY(parse_name(s, format_names, 2, "text|json", &i, err));
    *out = (ws_log_format)i;
    return WS_OK;
}

const char *ws_log_level_name(ws_log_level l)
{
    return l >= WS_LOG_ERROR && l <= WS_LOG_DEBUG ? level_names[l] : "?";
}

const char *ws_log_format_name(ws_log_format f)
{
    return f == WS_LOG_JSON ? "json" : "text";
}

int ws_log_fd(void)
{
    return atomic_load(&log_fd);
}

ws_status ws_log_configure(ws_log_level level, ws_log_format format, const char *path,
                           ws_error *err)
{
    int fd = STDERR_FILENO;
    if (path && path[0]) {
        fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0)
            return ws_error_set(err, WS_ERR_IO, "cannot open log file %s: %s", path,
                                strerror(errno));
    }
    pthread_mutex_lock(&log_lock);
    int old = log_fd;
    log_fd = fd;
    atomic_store(&log_level, level);
    atomic_store(&log_format, format);
    pthread_mutex_unlock(&log_lock);
    if (old != STDERR_FILENO && old != fd) close(old);
    return WS_OK;
}

int ws_log_enabled(ws_log_level level)
{
    return (int)level <= atomic_load(&log_level);
}

/* ---- a line ------------------------------------------------------------- */
#define LINE_MAX_BYTES 8192
#define LINE_RESERVE   8 /* kept for what closes a JSON line: '"', '}', '\n' */

typedef struct {
    char b[LINE_MAX_BYTES];
    size_t n; /* bytes so far */
    int full; /* a piece did not fit: nothing more is added but the closers */
} line;

static size_t room(const line *l)
{
    return LINE_MAX_BYTES - LINE_RESERVE - l->n;
}

/* All of a piece or, once one does not fit, nothing: a JSON line is cut only
 * between pieces, where its closers make it whole again. */
static void put(line *l, const char *s, size_t k)
{
    if (l->full || k > room(l)) {
        l->full = 1;
        return;
    }
    memcpy(l->b + l->n, s, k);
    l->n += k;
}

static void puts_(line *l, const char *s)
{
    put(l, s, strlen(s));
}

/* What closes a line: into the reserve, whatever was cut. */
static void put_close(line *l, const char *s)
{
    size_t k = strlen(s);
    memcpy(l->b + l->n, s, k);
    l->n += k;
}

static void putf(line *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(line *l, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k > 0) put(l, tmp, (size_t)k < sizeof tmp ? (size_t)k : sizeof tmp - 1);
}

/* s with control characters escaped, and with quoted also '"' and '\\' (JSON's
 * escapes, which text lines use too); other bytes as they are (ws_utf8_scrub
 * checks them after). A text line's message is not quoted: its quotes stay. */
static void put_escaped(line *l, const char *s, int quoted)
{
    while (*s && !l->full) {
        size_t run = 0; /* bytes that go as they are, copied at once */
        while (s[run] && (unsigned char)s[run] >= 0x20 && s[run] != 0x7f &&
               !(quoted && (s[run] == '"' || s[run] == '\\')))
            run++;
        if (run) { /* as much as fits: a cut here leaves no escape half-written */
            size_t k = run < room(l) ? run : room(l);
            put(l, s, k);
            if (k < run) l->full = 1;
            s += run;
            continue;
        }
        unsigned char c = (unsigned char)*s++;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            put(l, e, 2);
        } else if (c == '\n') {
            puts_(l, "\\n");
        } else if (c == '\t') {
            puts_(l, "\\t");
        } else {
            putf(l, "\\u%04x", c);
        }
    }
}

/* A number: an integer as such, else with 3 decimals; JSON has no NaN. */
static void put_number(line *l, double x, int json)
{
    if (!isfinite(x))
        puts_(l, json ? "null" : "nan");
    else if (x == floor(x) && fabs(x) < 1e15)
        putf(l, "%.0f", x);
    else
        putf(l, "%.3f", x);
}

/* A text line's value: bare when it is one plain word, else quoted. */
static void put_text_value(line *l, const char *s)
{
    int plain = s[0] != '\0';
    for (const char *p = s; plain && *p; p++)
        if (*p == ' ' || *p == '"' || *p == '=' || *p == '\\' || (unsigned char)*p < 0x20 ||
            *p == 0x7f)
            plain = 0;
    if (plain) {
        puts_(l, s);
        return;
    }
    puts_(l, "\"");
    put_escaped(l, s, 1);
    puts_(l, "\"");
}

static void put_time(line *l)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    char t[32];
    size_t k = strftime(t, sizeof t, "%Y-%m-%dT%H:%M:%S", &tm);
    put(l, t, k);
    putf(l, ".%03ldZ", ts.tv_nsec / 1000000);
}

/* A JSON string value: cut or not, its closing quote is there. */
static void put_json_string(line *l, const char *s)
{
    puts_(l, "\"");
    if (l->full) return; /* not even its opening quote fitted */
    put_escaped(l, s, 1);
    put_close(l, "\"");
}

static void build(line *l, ws_log_level level, const char *msg, const ws_log_field *f, int n)
{
    int json = atomic_load(&log_format) == WS_LOG_JSON;
    if (json) puts_(l, "{\"ts\":\"");
    put_time(l);
    if (json) {
        putf(l, "\",\"level\":\"%s\",\"msg\":", ws_log_level_name(level));
        put_json_string(l, msg);
    } else {
        putf(l, " %s ", ws_log_level_name(level));
        put_escaped(l, msg, 0);
    }
    for (int i = 0; i < n && !l->full; i++) {
        if (!f[i].is_num && !f[i].str) continue;
        /* a field starts only with room for its key and a number: never a
         * JSON key without its value */
        if (room(l) < strlen(f[i].key) + 40) break;
        if (json) {
            puts_(l, ",\"");
            put_escaped(l, f[i].key, 1);
            puts_(l, "\":");
        } else {
            puts_(l, " ");
            put_escaped(l, f[i].key, 1);
            puts_(l, "=");
        }
        if (f[i].is_num)
            put_number(l, f[i].num, json);
        else if (json)
            put_json_string(l, f[i].str);
        else
            put_text_value(l, f[i].str);
    }
    if (json) put_close(l, "}");
    l->b[l->n] = '\0';
    ws_utf8_scrub(l->b);
    l->b[l->n++] = '\n';
}

void ws_log_kv(ws_log_level level, const char *msg, const ws_log_field *fields, int n)
{
    if (!ws_log_enabled(level)) return;
    static _Thread_local line l; /* 8 KiB: off the (engine's, MHD's) stacks */
    l.n = 0;
    l.full = 0;
    build(&l, level, msg, fields, n);
    pthread_mutex_lock(&log_lock);
    /* Nowhere to report a failed write to: the line is lost, the daemon goes on. */
    for (size_t off = 0; off < l.n;) {
        ssize_t w = write(log_fd, l.b + off, l.n - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        off += (size_t)w;
    }
    pthread_mutex_unlock(&log_lock);
}

void ws_log(ws_log_level level, const char *fmt, ...)
{
    if (!ws_log_enabled(level)) return;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ws_log_kv(level, msg, NULL, 0);
}
