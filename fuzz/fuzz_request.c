/* fuzz_request.c — the request bodies the daemon turns into engine jobs
 * (server/daemon/request.c): the first byte picks the route, the rest is its
 * body. Beyond not crashing or leaking: an accepted job holds only what the
 * API allows (item counts, symbols of 1..128 bytes of UTF-8 without control
 * characters, fact lengths, instruction values, labels). */
#include <stdint.h>
#include <string.h>

#include "fuzz_check.h"
#include "base/ws_utf8.h"
#include "server/daemon/routes.h"

static void check_facts(const ws_job_fact *f, int n, int instructions)
{
    WS_FUZZ_CHECK(n >= 0 && n <= WS_SRV_MAX_ITEMS);
    for (int i = 0; i < n; i++) {
        WS_FUZZ_CHECK((f[i].n_sym > 0) != (f[i].n_vec > 0));
        WS_FUZZ_CHECK(f[i].n_sym <= WS_MAX_FACT_LEN);
        for (int k = 0; k < f[i].n_sym; k++) {
            size_t len = strlen(f[i].sym[k]);
            WS_FUZZ_CHECK(len >= 1 && len <= WS_SRV_SYMBOL_MAX);
            WS_FUZZ_CHECK(ws_utf8_valid((const unsigned char *)f[i].sym[k], len));
            WS_FUZZ_CHECK(!ws_utf8_has_control((const unsigned char *)f[i].sym[k], len));
        }
        if (instructions)
            WS_FUZZ_CHECK(f[i].value == 0 || f[i].value == 1);
        else
            WS_FUZZ_CHECK(f[i].value >= -1 && f[i].value <= 1);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const ws_job_kind kinds[] = {WS_JOB_SESSION_CREATE, WS_JOB_STEP,
                                        WS_JOB_QUERY,          WS_JOB_LABELS,
                                        WS_JOB_MODEL_CREATE,   WS_JOB_TRAINING_SET};
    if (size < 1) return 0;
    ws_job *j = calloc(1, sizeof *j);
    if (!j) return 0;
    j->kind = kinds[data[0] % (sizeof kinds / sizeof kinds[0])];
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    ws_error err = {0};
    char tenant[WS_STORE_NAME_MAX + 1] = "";
    ws_status s;
    switch (j->kind) {
    case WS_JOB_SESSION_CREATE: s = ws_http_session_create_parse(body, len, j, &err); break;
    case WS_JOB_MODEL_CREATE: s = ws_http_model_create_parse(body, len, j, tenant, &err); break;
    case WS_JOB_TRAINING_SET: s = ws_http_training_patch_parse(body, len, j, &err); break;
    default: s = ws_http_session_job_parse(body, len, j, &err); break;
    }
    if (s != WS_OK) {
        WS_FUZZ_CHECK(s == WS_ERR_FORMAT || s == WS_ERR_INVALID);
    } else if (j->kind == WS_JOB_SESSION_CREATE) {
        size_t n = strlen(j->model_name);
        WS_FUZZ_CHECK(n >= 1 && !ws_utf8_has_control((const unsigned char *)j->model_name, n));
    } else if (j->kind == WS_JOB_MODEL_CREATE) {
        WS_FUZZ_CHECK(ws_http_model_name_ok(j->model_name));
        WS_FUZZ_CHECK(!tenant[0] || ws_http_model_name_ok(tenant));
    } else if (j->kind != WS_JOB_TRAINING_SET) {
        check_facts(j->instr, j->n_instr, 1);
        check_facts(j->query, j->n_query, 0);
        WS_FUZZ_CHECK(j->kind != WS_JOB_QUERY || j->n_instr == 0);
        WS_FUZZ_CHECK(j->kind != WS_JOB_STEP || (j->instr_json && j->query_json));
        WS_FUZZ_CHECK(j->kind != WS_JOB_LABELS ||
                      (j->n_labels >= 1 && j->n_labels <= WS_SRV_MAX_ITEMS));
    }
    ws_job_free(j);
    return 0;
}
