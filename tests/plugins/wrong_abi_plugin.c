/* wrong_abi_plugin.c — a CUDA plugin from "another build" for test_backend_plugin:
 * its interface check says no, so its constructor must never be called (it
 * aborts if it is). */
#include <stddef.h>
#include <stdlib.h>

int ws_backend_cuda_plugin_abi(unsigned abi, size_t ops_size, size_t backend_size);
int ws_backend_cuda_new(void **out, int device, void *err);

int ws_backend_cuda_plugin_abi(unsigned abi, size_t ops_size, size_t backend_size)
{
    (void)abi, (void)ops_size, (void)backend_size;
    return 0;
}

int ws_backend_cuda_new(void **out, int device, void *err)
{
    (void)out, (void)device, (void)err;
    abort();
}
