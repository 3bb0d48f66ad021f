/* probe_http.h — memory probes (model/probe.h) run through a live daemon over its
 * REST API with the C client: what a user of the service sees. Shared by
 * bench/bench_memory (the HTTP slice) and the end-to-end tests. */
#ifndef WS_PROBE_HTTP_H
#define WS_PROBE_HTTP_H

#include <stddef.h>

#include "model/probe.h"

/* One session per episode on `model` (NULL: the default), created through url.
 * Each session gets its episode's instruction steps (no labels), then silent
 * steps (or, with pc->chatter, steps telling the same chatter facts as
 * ws_probe_run: ws_probe_chatter_fact); at each delay (counted from the session's last instruction step, as
 * ws_probe_run counts) all 2k questions are asked with POST /queries and tallied
 * into res as ws_probe_run would. With unrelated (non-NULL), every step after the
 * instructions also asks one never-told question of fresh symbols (a session in
 * use, about other things, which changes nothing): unrelated[0] counts those
 * answers and unrelated[1] the ones that are "no". Returns 0, or -1 with a message in err. */
int ws_probe_http_run(const char *url, const char *model, const ws_probe_config *pc,
                      long unrelated[2], ws_probe_result *res, char *err, size_t err_len);

#endif
