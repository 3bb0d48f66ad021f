/* ws_version.h — which build this is: the project's version (CMake project(),
 * fixed when the build is configured) and the git description of the checkout
 * it was built from (`git describe --always --dirty --tags`, taken at every
 * build by version.cmake; "" outside a checkout or without git). Printed by
 * each program's --version, served at GET /version and as the metric
 * worldstate_build_info. */
#ifndef WS_VERSION_H
#define WS_VERSION_H

#include <stdio.h>

const char *ws_version(void);     /* "0.1.0" */
const char *ws_version_git(void); /* "a2edf0c-dirty", or "" */
/* "PROG 0.1.0 (git a2edf0c)", the parenthesis only when built in a checkout. */
void ws_version_print(FILE *f, const char *prog);

#endif
