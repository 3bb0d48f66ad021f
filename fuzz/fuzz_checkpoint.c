/* fuzz_checkpoint.c — an imported checkpoint, loaded as the engine loads a
 * POST /v1/models/{name}/import body: ws_checkpoint_load_admit on the file
 * (model/checkpoint.c over model/safetensors.c). The bytes go into a memory
 * file (memfd), named through /proc/self/fd, so the loader reads them as it
 * reads the spooled upload. The admit hook refuses models over 64 MiB, as
 * --max-model-memory does in the daemon, before anything is allocated. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_check.h"
#include "model/checkpoint.h"

#define FUZZ_MODEL_MAX ((size_t)64 << 20)

static ws_backend *be;
static int fd = -1;
static char path[64];

static ws_status admit(void *ctx, const ws_model_config *cfg, ws_error *err)
{
    (void)ctx;
    ws_model_memory mm;
    WS_TRY(ws_model_memory_of(cfg, NULL, 0, 0, &mm, err));
    if (mm.total > FUZZ_MODEL_MAX)
        return ws_error_set(err, WS_ERR_INVALID, "model of %zu bytes", mm.total);
    return WS_OK;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    ws_error err = {0};
    if (ws_backend_cpu_new(&be, 1, &err) != WS_OK) {
        fprintf(stderr, "fuzz_checkpoint: %s\n", err.msg);
        abort();
    }
    fd = memfd_create("fuzz_checkpoint", MFD_CLOEXEC);
    WS_FUZZ_CHECK(fd >= 0);
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    WS_FUZZ_CHECK(ftruncate(fd, 0) == 0);
    WS_FUZZ_CHECK(pwrite(fd, data, size, 0) == (ssize_t)size);
    ws_model *m = NULL;
    ws_error err = {0};
    ws_status s = ws_checkpoint_load_admit(&m, path, be, admit, NULL, &err);
    WS_FUZZ_CHECK((s == WS_OK) == (m != NULL));
    WS_FUZZ_CHECK(s == WS_OK || s == WS_ERR_FORMAT || s == WS_ERR_INVALID || s == WS_ERR_NOMEM);
    ws_model_free(m);
    return 0;
}
