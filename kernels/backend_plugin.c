/* backend_plugin.c — the CUDA backend as a plugin: libworldstate-cuda.so is
 * loaded with dlopen when a program asks for the automatic backend, so that the
 * programs themselves need no CUDA library to start. A machine without the CUDA
 * runtime, or a package built without CUDA, runs on the CPU and says why; a
 * machine with the plugin and a GPU runs on the GPU. The plugin is found at
 * $WORLDSTATE_CUDA_PLUGIN, else where `cmake --install` puts it
 * (LIBDIR/worldstate/), else (in a build tree) beside the kernels it was built
 * with. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "backend.h"

typedef int (*abi_check_fn)(unsigned abi, size_t ops_size, size_t backend_size);
typedef ws_status (*cuda_new_fn)(ws_backend **out, int device, ws_error *err);

/* Where to look, in order; NULL-terminated. */
static void plugin_paths(const char **paths)
{
    int n = 0;
    const char *env = getenv("WORLDSTATE_CUDA_PLUGIN");
    if (env && *env) {
        paths[n++] = env; /* named by hand: the only place looked */
        paths[n] = NULL;
        return;
    }
    paths[n++] = WS_CUDA_PLUGIN_INSTALLED;
#ifdef WS_CUDA_PLUGIN_BUILT
    paths[n++] = WS_CUDA_PLUGIN_BUILT;
#endif
    paths[n] = NULL;
}

ws_status ws_backend_cuda_load(ws_backend **out, ws_error *err)
{
    *out = NULL;
    const char *paths[3], *path = NULL;
    plugin_paths(paths);
    for (int i = 0; paths[i] && !path; i++)
        if (access(paths[i], R_OK) == 0) path = paths[i];
    if (!path)
        return ws_error_set(err, WS_ERR_UNSUPPORTED, "no CUDA plugin at %s%s%s", paths[0],
                            paths[1] ? " or " : "", paths[1] ? paths[1] : "");
    /* RTLD_LOCAL: its symbols stay its own (it carries its copy of ws_base). */
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) return ws_error_set(err, WS_ERR_UNSUPPORTED, "CUDA plugin: %s", dlerror());
    abi_check_fn check = (abi_check_fn)dlsym(lib, "ws_backend_cuda_plugin_abi");
    cuda_new_fn make = (cuda_new_fn)dlsym(lib, "ws_backend_cuda_new");
    ws_status s;
    if (!check || !make)
        s = ws_error_set(err, WS_ERR_UNSUPPORTED, "%s is not a worldstate CUDA plugin", path);
    else if (!check(WS_BACKEND_ABI, sizeof(ws_backend_ops), sizeof(ws_backend)))
        s = ws_error_set(err, WS_ERR_UNSUPPORTED,
                         "%s was built from another version of the backend interface", path);
    else
        s = make(out, 0, err);
    /* A backend made by it runs its code until the program ends: never unloaded
     * then. Without one nothing of it is referenced, so it goes. */
    if (s != WS_OK) dlclose(lib);
    return s;
}

ws_status ws_backend_auto_why(ws_backend **out, char *why, size_t why_len, ws_error *err)
{
    ws_error gpu = {0};
    if (ws_backend_cuda_load(out, &gpu) == WS_OK) {
        if (why_len) why[0] = '\0';
        return WS_OK;
    }
    if (why_len) snprintf(why, why_len, "%s", gpu.msg);
    return ws_backend_cpu_new(out, 0, err);
}

ws_status ws_backend_auto(ws_backend **out, ws_error *err)
{
    char why[1];
    return ws_backend_auto_why(out, why, 0, err);
}
