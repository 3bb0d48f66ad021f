/* ws_version.c — the build's version (ws_version.h): WS_VERSION comes from the
 * configure step, ws_version_git_desc from ws_version_git.c, which
 * version.cmake writes at build time. */
#include "ws_version.h"

extern const char ws_version_git_desc[];

const char *ws_version(void)
{
    return WS_VERSION;
}

const char *ws_version_git(void)
{
    return ws_version_git_desc;
}

void ws_version_print(FILE *f, const char *prog)
{
    if (ws_version_git_desc[0])
        fprintf(f, "%s %s (git %s)\n", prog, WS_VERSION, ws_version_git_desc);
    else
        fprintf(f, "%s %s\n", prog, WS_VERSION);
}
