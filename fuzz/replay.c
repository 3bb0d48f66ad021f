/* replay.c — a fuzz target without libFuzzer: runs LLVMFuzzerTestOneInput once
 * on each file named (a folder: each file in it), so that the normal test
 * suite (any compiler) replays the seed corpora, and with them every input
 * once found to crash, that a fix keeps fixed. Exits 1 when a file cannot be
 * read; a failed property aborts (fuzz_check.h). */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int fail(const char *path)
{
    perror(path);
    return 1;
}

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return fail(path);
    uint8_t *buf = NULL;
    size_t n = 0, cap = 0, got;
    int bad = 0;
    do {
        if (n == cap) {
            cap = cap ? 2 * cap : 4096;
            uint8_t *b = realloc(buf, cap);
            if (!b) {
                bad = 1;
                break;
            }
            buf = b;
        }
        got = fread(buf + n, 1, cap - n, f);
        n += got;
    } while (got > 0);
    bad |= ferror(f);
    fclose(f);
    if (bad)
        fail(path);
    else
        LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return bad;
}

static int run_path(const char *path, int *count)
{
    struct stat st;
    if (stat(path, &st) != 0) return fail(path);
    if (!S_ISDIR(st.st_mode)) {
        ++*count;
        return run_file(path);
    }
    DIR *d = opendir(path);
    if (!d) return fail(path);
    int bad = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char sub[4096];
        snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
        bad |= run_path(sub, count);
    }
    closedir(d);
    return bad;
}

int main(int argc, char **argv)
{
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    int bad = 0, count = 0;
    for (int i = 1; i < argc; i++) bad |= run_path(argv[i], &count);
    printf("%s: %d inputs replayed\n", argv[0], count);
    return bad || count == 0;
}
