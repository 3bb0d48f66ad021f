/* fuzz_json.c — the strict request-body check (server/common/json.c,
 * ws_json_parse_object): every body the daemon parses goes through it first.
 * Beyond not crashing: what it accepts is one JSON object of valid UTF-8, and
 * cJSON's own printing of it is accepted again (nothing the daemon stores
 * from a body, such as the step log's text, is refused when read back). */
#include <stdint.h>
#include <string.h>

#include "fuzz_check.h"
#include "base/ws_utf8.h"
#include "server/common/common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cJSON *root = NULL;
    ws_error err = {0};
    ws_status s = ws_json_parse_object((const char *)data, size, &root, &err);
    if (s != WS_OK) {
        WS_FUZZ_CHECK(root == NULL);
        WS_FUZZ_CHECK(s == WS_ERR_FORMAT || s == WS_ERR_INVALID);
        WS_FUZZ_CHECK(err.msg[0] != '\0');
        return 0;
    }
    WS_FUZZ_CHECK(cJSON_IsObject(root));
    WS_FUZZ_CHECK(ws_utf8_valid(data, size));
    char *text = cJSON_PrintUnformatted(root);
    if (text) {
        cJSON *again = NULL;
        s = ws_json_parse_object(text, strlen(text), &again, &err);
        if (s != WS_OK) fprintf(stderr, "reprinted body refused: %s\n%s\n", err.msg, text);
        WS_FUZZ_CHECK(s == WS_OK);
        cJSON_Delete(again);
        free(text);
    }
    cJSON_Delete(root);
    return 0;
}
