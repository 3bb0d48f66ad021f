/* log_json.c — a step-log entry as JSON: the items of GET
 * /v1/sessions/{id}/steps, and the lines of `worldstate-train export`, which
 * add the session (and model) to the same fields; and the answers as both the
 * log and the API's replies write them. */
#include <math.h>
#include <stdio.h>

#include "common.h"

/* Nine significant digits give back any float (FLT_DECIMAL_DIG is 9), so a
 * probability is written with nine, trailing zeros dropped.
 * Not printf: cJSON writes a double with 15 or 17 digits, parsing it back to
 * choose, and glibc's %g works in multiple precision; at 64 sessions that was
 * about 5% of the daemon's CPU (perf), for 8 answers a step written twice (log
 * and reply). Scaling by powers of ten in double adds a few units of 1e-16 to
 * a digit string that has 5e-9 to spare. */
int ws_srv_prob_text(float p, char buf[WS_SRV_PROB_TEXT])
{
    if (!isfinite(p) || p < 0.0f || p >= 1.0f) {
        if (!isfinite(p)) return snprintf(buf, WS_SRV_PROB_TEXT, "null");
        return snprintf(buf, WS_SRV_PROB_TEXT, "%.9g", (double)p);
    }
    if (p == 0.0f) return snprintf(buf, WS_SRV_PROB_TEXT, "0");
    double x = p;
    int e = 0; /* p = x * 10^-e, x in [1e8, 1e9) */
    while (x < 1e8) x *= 10.0, e++;
    long long m = llround(x);
    if (m == 1000000000LL) m /= 10, e--;
    char dig[10];
    for (int i = 8; i >= 0; i--) dig[i] = (char)('0' + m % 10), m /= 10;
    int nd = 9;
    while (nd > 1 && dig[nd - 1] == '0') nd--;
    int exp10 = 8 - e; /* p = d0.d1d2... * 10^exp10, exp10 <= -1 */
    int n = 0;
    if (exp10 >= -5) { /* 0.000ddd */
        buf[n++] = '0', buf[n++] = '.';
        for (int z = -1; z > exp10; z--) buf[n++] = '0';
        for (int i = 0; i < nd; i++) buf[n++] = dig[i];
        buf[n] = '\0';
        return n;
    }
    buf[n++] = dig[0];
    if (nd > 1) {
        buf[n++] = '.';
        for (int i = 1; i < nd; i++) buf[n++] = dig[i];
    }
    return n + snprintf(buf + n, WS_SRV_PROB_TEXT - (size_t)n, "e%d", exp10);
}

cJSON *ws_srv_answers_json(const float *p, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(a, o)) {
            cJSON_Delete(o);
            cJSON_Delete(a);
            return NULL;
        }
        char text[WS_SRV_PROB_TEXT];
        ws_srv_prob_text(p[i], text);
        cJSON *pj = cJSON_CreateRaw(text);
        if (pj && !cJSON_AddItemToObject(o, "p", pj)) cJSON_Delete(pj), pj = NULL;
        if (!pj ||
            !cJSON_AddBoolToObject(o, "holds", p[i] >= 0.5f)) {
            cJSON_Delete(a); /* o with it */
            return NULL;
        }
    }
    return a;
}

ws_status ws_srv_log_item_fill(cJSON *o, const ws_store_log_entry *e)
{
    /* The log holds JSON this server wrote: embed it as JSON, not as strings. */
    cJSON *ins = cJSON_Parse(e->instructions_json), *qs = cJSON_Parse(e->queries_json);
    cJSON *ls = e->labels_json ? cJSON_Parse(e->labels_json) : cJSON_CreateNull();
    cJSON *ans = cJSON_Parse(e->answers_json);
    int ok = ins && qs && ls && ans && cJSON_AddNumberToObject(o, "step", (double)e->step);
    if (ok) {
        cJSON_AddItemToObject(o, "instructions", ins);
        cJSON_AddItemToObject(o, "queries", qs);
        cJSON_AddItemToObject(o, "labels", ls);
        cJSON_AddItemToObject(o, "answers", ans);
        ok = cJSON_AddNumberToObject(o, "model_version", (double)e->model_version) &&
             cJSON_AddNumberToObject(o, "time_ms", (double)e->time_ms);
        return ok ? WS_OK : WS_ERR_NOMEM;
    }
    cJSON_Delete(ins);
    cJSON_Delete(qs);
    cJSON_Delete(ls);
    cJSON_Delete(ans);
    return WS_ERR_NOMEM;
}
