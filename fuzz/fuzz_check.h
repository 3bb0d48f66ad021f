/* fuzz_check.h — what the fuzz targets share: a property that must hold of
 * every input, checked so that its failure is a crash libFuzzer reports (with
 * the input saved), in release builds too (no assert). */
#ifndef WS_FUZZ_CHECK_H
#define WS_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define WS_FUZZ_CHECK(cond)                                                             \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "%s:%d: property failed: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                    \
        }                                                                               \
    } while (0)

#endif
