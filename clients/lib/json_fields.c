/* json_fields.c — table-driven decoding of JSON object members into structs,
 * so each resource codec lists its fields instead of repeating the checks. */
#include <math.h>
#include <string.h>

#include "internal.h"

ws_client_status wsc_json_i64(const cJSON *v, int64_t lo, int64_t hi, int64_t *out,
                              const char *what, ws_client_error *err)
{
    /* JSON numbers are doubles here: integers are exact up to 2^53. */
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) ||
        v->valuedouble < (double)lo || v->valuedouble > (double)hi)
        return wsc_fail(err, WS_CLIENT_ERR_INVALID, "%s must be an integer in [%lld, %lld]", what,
                        (long long)lo, (long long)hi);
    *out = (int64_t)v->valuedouble;
    return WS_CLIENT_OK;
}

static ws_client_status decode_one(const cJSON *v, const wsc_field *f, char *dst,
                                   ws_client_error *err)
{
    int64_t i = 0; /* set when wsc_json_i64 succeeds; -O3 cannot see that */
    switch (f->kind) {
    case WSC_I64:
        if (wsc_json_i64(v, INT64_MIN / 2, INT64_MAX / 2, &i, f->key, err) != WS_CLIENT_OK) break;
        memcpy(dst, &i, sizeof i);
        return WS_CLIENT_OK;
    case WSC_INT: {
        if (wsc_json_i64(v, -2147483647, 2147483647, &i, f->key, err) != WS_CLIENT_OK) break;
        int x = (int)i;
        memcpy(dst, &x, sizeof x);
        return WS_CLIENT_OK;
    }
    case WSC_DBL:
        if (!cJSON_IsNumber(v)) break;
        memcpy(dst, &v->valuedouble, sizeof(double));
        return WS_CLIENT_OK;
    case WSC_BOOL: {
        if (!cJSON_IsBool(v)) break;
        int x = cJSON_IsTrue(v);
        memcpy(dst, &x, sizeof x);
        return WS_CLIENT_OK;
    }
    case WSC_STR:
        if (!cJSON_IsString(v) || strlen(v->valuestring) >= f->cap) break;
        memcpy(dst, v->valuestring, strlen(v->valuestring) + 1);
        return WS_CLIENT_OK;
    }
    return wsc_fail(err, WS_CLIENT_ERR_PROTOCOL, "answer field \"%s\" has the wrong type or size",
                    f->key);
}

ws_client_status wsc_decode_fields(const cJSON *obj, const wsc_field *fields, int n, void *base,
                                   ws_client_error *err)
{
    for (int k = 0; k < n; k++) {
        const wsc_field *f = &fields[k];
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, f->key);
        if (!v) {
            if (f->required)
                return wsc_fail(err, WS_CLIENT_ERR_PROTOCOL, "answer lacks \"%s\"", f->key);
            continue;
        }
        ws_client_status s = decode_one(v, f, (char *)base + f->off, err);
        if (s != WS_CLIENT_OK) return WS_CLIENT_ERR_PROTOCOL;
    }
    return WS_CLIENT_OK;
}
