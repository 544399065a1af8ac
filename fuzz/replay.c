/*
 * The replay driver: a main() for a fuzz target without libFuzzer, so that
 * the normal build and ctest run every seed input and every past crasher
 * through the target (under ASan and UBSan in the sanitizer build).
 *
 *   fuzz_replay_NAME [--optional] PATH...
 *
 * Each PATH is a file or a folder (its files, recursively, in name order;
 * names starting with '.' are skipped). A missing PATH is an error unless
 * --optional precedes it (fuzz/crashes/NAME/ exists only once something
 * crashed). Every input is copied into a buffer of exactly its size, so a
 * read past the end is caught. Exit 0 when every input ran and at least one
 * did, 1 otherwise.
 */
#include "harness.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool replay_file(const char *path, size_t *count)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "fuzz_replay: %s: %s\n", path, strerror(errno));
        return false;
    }
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || sb.st_size < 0) {
        fprintf(stderr, "fuzz_replay: %s: cannot stat\n", path);
        fclose(f);
        return false;
    }
    size_t size = (size_t)sb.st_size;
    /* an empty input gets a buffer of one byte (malloc(0) may be NULL),
     * passed with size 0 */
    uint8_t *data = malloc(size ? size : 1);
    if (!data || fread(data, 1, size, f) != size) {
        fprintf(stderr, "fuzz_replay: %s: cannot read\n", path);
        free(data);
        fclose(f);
        return false;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(data, size);
    free(data);
    (*count)++;
    return true;
}

static bool replay_path(const char *path, size_t *count)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        fprintf(stderr, "fuzz_replay: %s: %s\n", path, strerror(errno));
        return false;
    }
    if (!S_ISDIR(sb.st_mode))
        return replay_file(path, count);
    DIR *dh = opendir(path);
    if (!dh) {
        fprintf(stderr, "fuzz_replay: %s: %s\n", path, strerror(errno));
        return false;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    bool ok = true;
    for (struct dirent *e; ok && (e = readdir(dh));) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **grown = realloc(names, cap * sizeof *names);
            if (!grown) {
                ok = false;
                break;
            }
            names = grown;
        }
        size_t len = strlen(path) + strlen(e->d_name) + 2;
        if (!(names[n] = malloc(len))) {
            ok = false;
            break;
        }
        snprintf(names[n++], len, "%s/%s", path, e->d_name);
    }
    closedir(dh);
    if (!ok)
        fprintf(stderr, "fuzz_replay: %s: out of memory\n", path);
    if (n)
        qsort(names, n, sizeof *names, cmp_name);
    for (size_t i = 0; i < n; i++) {
        if (ok)
            ok = replay_path(names[i], count);
        free(names[i]);
    }
    free(names);
    return ok;
}

int main(int argc, char **argv)
{
    size_t count = 0;
    bool optional = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--optional") == 0) {
            optional = true;
            continue;
        }
        struct stat sb;
        if (optional && stat(argv[i], &sb) != 0) {
            optional = false;
            continue;
        }
        optional = false;
        if (!replay_path(argv[i], &count))
            return 1;
    }
    if (count == 0) {
        fprintf(stderr, "fuzz_replay: no inputs (give files or folders of inputs)\n");
        return 1;
    }
    printf("fuzz_replay: %zu inputs, no crash\n", count);
    return 0;
}
