/* Whole-file reads, read-only mappings and atomic writes. */
#include "core/core.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

enum cp_status cp_file_read(const char *path, uint8_t **data, size_t *len, struct cp_diag *d)
{
    *data = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return cp_diag_set(d, CP_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    enum cp_status st = CP_OK;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        st = cp_diag_set(d, CP_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
        goto out_close;
    }
    if (!S_ISREG(sb.st_mode)) {
        st = cp_diag_set(d, CP_ERR_IO, "%s: not a regular file", path);
        goto out_close;
    }
    size_t n = (size_t)sb.st_size;
    uint8_t *buf = malloc(n + 1);
    if (!buf) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory reading %zu bytes", path, n);
        goto out_close;
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            free(buf);
            st = cp_diag_set(d, CP_ERR_IO, "%s: read failed: %s", path,
                             r < 0 ? strerror(errno) : "file shrank while reading");
            goto out_close;
        }
        got += (size_t)r;
    }
    buf[n] = 0;
    *data = buf;
    *len = n;
out_close:
    close(fd);
    return st;
}

enum cp_status cp_file_write_atomic(const char *path, const void *data, size_t len,
                                    struct cp_diag *d)
{
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 16);
    if (!tmp)
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory", path);
    snprintf(tmp, plen + 16, "%s.tmpXXXXXX", path);
    enum cp_status st = CP_OK;
    int fd = mkstemp(tmp);
    if (fd < 0) {
        st = cp_diag_set(d, CP_ERR_WRITE, "%s: cannot create temporary file: %s", path,
                         strerror(errno));
        goto out_free;
    }
    const uint8_t *p = data;
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(fd, p + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            st = cp_diag_set(d, CP_ERR_WRITE, "%s: write failed: %s", path, strerror(errno));
            goto out_unlink;
        }
        done += (size_t)w;
    }
    if (fchmod(fd, 0644) != 0 || fsync(fd) != 0) {
        st = cp_diag_set(d, CP_ERR_WRITE, "%s: cannot sync: %s", path, strerror(errno));
        goto out_unlink;
    }
    if (close(fd) != 0) {
        fd = -1;
        st = cp_diag_set(d, CP_ERR_WRITE, "%s: close failed: %s", path, strerror(errno));
        goto out_unlink;
    }
    fd = -1;
    if (rename(tmp, path) != 0) {
        st =
            cp_diag_set(d, CP_ERR_WRITE, "%s: cannot rename into place: %s", path, strerror(errno));
        goto out_unlink;
    }
    goto out_free;
out_unlink:
    if (fd >= 0)
        close(fd);
    unlink(tmp);
out_free:
    free(tmp);
    return st;
}

enum cp_status cp_mmap_open(const char *path, struct cp_mmap *m, struct cp_diag *d)
{
    m->data = NULL;
    m->len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return cp_diag_set(d, CP_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    enum cp_status st = CP_OK;
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        st = cp_diag_set(d, CP_ERR_IO, "%s: not a readable regular file", path);
        goto out_close;
    }
    if (sb.st_size == 0)
        goto out_close;
    void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
        st = cp_diag_set(d, CP_ERR_IO, "%s: mmap failed: %s", path, strerror(errno));
        goto out_close;
    }
    m->data = p;
    m->len = (size_t)sb.st_size;
out_close:
    close(fd);
    return st;
}

void cp_mmap_close(struct cp_mmap *m)
{
    if (m->data && m->len)
        munmap((void *)m->data, m->len);
    m->data = NULL;
    m->len = 0;
}

bool cp_path_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

char *cp_path_dirname(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return cp_strdup(".");
    if (slash == path)
        return cp_strdup("/");
    size_t n = (size_t)(slash - path);
    char *r = malloc(n + 1);
    if (!r)
        return NULL;
    memcpy(r, path, n);
    r[n] = 0;
    return r;
}

bool cp_path_has_suffix(const char *path, const char *suffix)
{
    size_t a = strlen(path), b = strlen(suffix);
    return a >= b && strcasecmp(path + a - b, suffix) == 0;
}

enum cp_status cp_mkdir_p(const char *path, unsigned mode, struct cp_diag *d)
{
    char *p = cp_strdup(path);
    if (!p)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    enum cp_status st = CP_OK;
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != '\0')
            continue;
        char c = *s;
        *s = '\0';
        if (p[0] && mkdir(p, (mode_t)mode) != 0 && errno != EEXIST) {
            st = cp_diag_set(d, CP_ERR_WRITE, "%s: cannot create %s: %s", path, p, strerror(errno));
            break;
        }
        *s = c;
        if (c == '\0')
            break;
    }
    struct stat sb;
    if (st == CP_OK && (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)))
        st = cp_diag_set(d, CP_ERR_WRITE, "%s: not a folder", path);
    free(p);
    return st;
}

enum cp_status cp_cache_dir(char *out, size_t n, struct cp_diag *d)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int w;
    if (xdg && xdg[0] == '/')
        w = snprintf(out, n, "%s/cannprof", xdg);
    else if (home && *home)
        w = snprintf(out, n, "%s/.cache/cannprof", home);
    else {
        if (n)
            out[0] = '\0';
        return cp_diag_set(d, CP_ERR_IO,
                           "no cache folder: neither XDG_CACHE_HOME (an absolute path) nor HOME "
                           "is set");
    }
    if (w < 0 || (size_t)w >= n) {
        if (n)
            out[0] = '\0';
        return cp_diag_set(d, CP_ERR_IO, "the cache folder path is too long (%d bytes)", w);
    }
    return CP_OK;
}

enum cp_status cp_buf_write_file(const struct cp_buf *b, const char *path, struct cp_diag *d)
{
    if (cp_buf_status(b) != CP_OK)
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory preparing its contents", path);
    return cp_file_write_atomic(path, b->data, b->len, d);
}
