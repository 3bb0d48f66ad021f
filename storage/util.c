/* util.c — the helpers every backend shares (store_util.h): randomness, ids,
 * and the argument checks and messages of storage.h. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "store_util.h"

ws_status ws_store__random(void *buf, size_t n, ws_error *err)
{
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ws_error_set(err, WS_ERR_IO, "storage: cannot open /dev/urandom: %s",
                            strerror(errno));
    unsigned char *p = buf;
    size_t got = 0;
    while (got < n) { /* reads may be short or interrupted */
        ssize_t r = read(fd, p + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int e = r < 0 ? errno : EIO;
            close(fd);
            return ws_error_set(err, WS_ERR_IO, "storage: reading /dev/urandom: %s",
                                strerror(e));
        }
        got += (size_t)r;
    }
    close(fd);
    return WS_OK;
}

ws_status ws_store__new_id(char id[WS_STORE_ID_LEN + 1], ws_error *err)
{
    unsigned char raw[WS_STORE_ID_LEN / 2];
    WS_TRY(ws_store__random(raw, sizeof raw, err));
    ws_store__hex(raw, sizeof raw, id);
    return WS_OK;
}

void ws_store__hex(const unsigned char *in, size_t n, char *out)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex[in[i] >> 4];
        out[2 * i + 1] = hex[in[i] & 15];
    }
    out[2 * n] = '\0';
}

ws_status ws_store__check_name(const char *what, const char *name, ws_error *err)
{
    if (!name || !*name)
        return ws_error_set(err, WS_ERR_INVALID, "%s name is empty", what);
    size_t n = 0;
    for (const char *p = name; *p; p++, n++) {
        char c = *p;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '_' || c == '-';
        if (!ok || n >= WS_STORE_NAME_MAX)
            return ws_error_set(err, WS_ERR_INVALID,
                                "%s name must be 1..%d characters of A-Z a-z 0-9 . _ -", what,
                                WS_STORE_NAME_MAX);
    }
    return WS_OK;
}

ws_status ws_store__check_state(const float *state, int32_t rows, int32_t cols, int allow_null,
                                ws_error *err)
{
    if (!state) {
        if (allow_null && rows == 0 && cols == 0) return WS_OK;
        return ws_error_set(err, WS_ERR_INVALID,
                            allow_null ? "state is NULL but its shape is %dx%d (want 0x0)"
                                       : "state is NULL (shape %dx%d)",
                            (int)rows, (int)cols);
    }
    if (rows <= 0 || cols <= 0 ||
        (uint64_t)rows * (uint64_t)cols * sizeof(float) > WS_STORE_STATE_MAX_BYTES)
        return ws_error_set(err, WS_ERR_INVALID, "state shape %dx%d is empty or too large",
                            (int)rows, (int)cols);
    return WS_OK;
}

/* No arbitrary bytes in messages: a malformed id is not echoed. */
ws_status ws_store__session_not_found(const char *id, ws_error *err)
{
    return ws_error_set(err, WS_ERR_NOTFOUND, "session %s not found",
                        ws_store_session_id_valid(id) ? id : "(malformed id)");
}

ws_status ws_store__step_conflict(const char *id, int64_t step, int64_t expect, ws_error *err)
{
    return ws_error_set(err, WS_ERR_CONFLICT, "session %s is at step %lld, not %lld", id,
                        (long long)step, (long long)expect);
}

/* The caller's in-memory vocabulary assigned the ids; if it does not continue
 * exactly where the stored one ends, the two have diverged and writing would
 * make ids mean different symbols after a restart. */
ws_status ws_store__vocab_conflict(int64_t model, int64_t have, int64_t first_id, ws_error *err)
{
    return ws_error_set(err, WS_ERR_CONFLICT,
                        "vocabulary of model %lld has %lld symbols; cannot append at id %lld",
                        (long long)model, (long long)have, (long long)first_id);
}

/* Versions only grow, even after set_current went back to an older one, so a
 * version number names one checkpoint forever. */
ws_status ws_store__version_conflict(int64_t model, int64_t max, ws_error *err)
{
    return ws_error_set(err, WS_ERR_CONFLICT,
                        "model %lld already has version %lld; a new version must be greater",
                        (long long)model, (long long)max);
}
