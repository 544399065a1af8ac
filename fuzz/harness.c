/* What the fuzz targets share (harness.h). */
#include "harness.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *fuzz_strdup(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        return NULL;
    if (size)
        memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* The temporary folder. A fuzz target has no context to keep it in (libFuzzer
 * calls LLVMFuzzerTestOneInput with the bytes only), so this one path is the
 * process's: made once, removed at exit. */
static char tmp_dir[512];

void fuzz_tmp_remove(const char *path)
{
    struct stat sb;
    if (!path || !path[0] || lstat(path, &sb) != 0)
        return;
    if (S_ISDIR(sb.st_mode)) {
        DIR *dh = opendir(path);
        for (struct dirent *e; dh && (e = readdir(dh));) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char child[1024];
            int n = snprintf(child, sizeof child, "%s/%s", path, e->d_name);
            if (n > 0 && (size_t)n < sizeof child)
                fuzz_tmp_remove(child);
        }
        if (dh)
            closedir(dh);
    }
    remove(path);
}

static void remove_tmp_dir(void)
{
    fuzz_tmp_remove(tmp_dir);
}

static const char *tmp_root(void)
{
    if (tmp_dir[0])
        return tmp_dir;
    const char *base = getenv("TMPDIR");
    if (!base || base[0] != '/')
        base = "/tmp";
    int n = snprintf(tmp_dir, sizeof tmp_dir, "%s/cannprof-fuzz.XXXXXX", base);
    if (n < 0 || (size_t)n >= sizeof tmp_dir || !mkdtemp(tmp_dir)) {
        tmp_dir[0] = '\0';
        return NULL;
    }
    atexit(remove_tmp_dir);
    return tmp_dir;
}

char *fuzz_tmp_path(const char *name, char *out, size_t n)
{
    const char *root = tmp_root();
    if (!root)
        return NULL;
    int len = snprintf(out, n, "%s/%s", root, name);
    return len >= 0 && (size_t)len < n ? out : NULL;
}

bool fuzz_tmp_write(const char *name, const uint8_t *data, size_t size, char *path, size_t n)
{
    if (!fuzz_tmp_path(name, path, n))
        return false;
    FILE *f = fopen(path, "wb");
    if (!f)
        return false;
    bool ok = fwrite(data, 1, size, f) == size;
    return fclose(f) == 0 && ok;
}

void fuzz_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("fuzz: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

void fuzz_expect_refusal(const char *what, enum cp_status st, const struct cp_diag *d)
{
    if (st == CP_OK || st == CP_ERR_NOMEM)
        return;
    if (!d->msg[0])
        fuzz_fail("%s refused the input (status %d) without a message", what, (int)st);
    if (cp_status_exit_code(st) != 2)
        fuzz_fail("%s refused the input with status %d (exit code %d, not 2): %s", what, (int)st,
                  cp_status_exit_code(st), d->msg);
}

void fuzz_tmp_remove_db(const char *path)
{
    char side[1100];
    static const char *const suffixes[] = {"-journal", "-wal", "-shm"};
    for (size_t i = 0; i < sizeof suffixes / sizeof *suffixes; i++) {
        snprintf(side, sizeof side, "%s%s", path, suffixes[i]);
        fuzz_tmp_remove(side);
    }
    fuzz_tmp_remove(path);
}
