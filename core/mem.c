/* Checked allocation and growable string buffers. */
#include "core/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool cp_mul_overflows(size_t a, size_t b, size_t *out)
{
    size_t r;
    if (__builtin_mul_overflow(a, b, &r))
        return true;
    if (out)
        *out = r;
    return false;
}

bool cp_add_overflows_i64(int64_t a, int64_t b, int64_t *out)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r))
        return true;
    if (out)
        *out = r;
    return false;
}

bool cp_sub_overflows_i64(int64_t a, int64_t b, int64_t *out)
{
    int64_t r;
    if (__builtin_sub_overflow(a, b, &r))
        return true;
    if (out)
        *out = r;
    return false;
}

bool cp_mul_overflows_i64(int64_t a, int64_t b, int64_t *out)
{
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r))
        return true;
    if (out)
        *out = r;
    return false;
}

void *cp_calloc(size_t n, size_t size)
{
    size_t total;
    if (cp_mul_overflows(n, size, &total))
        return NULL;
    return calloc(total ? n : 1, total ? size : 1);
}

void *cp_realloc_array(void *p, size_t n, size_t size)
{
    size_t total;
    if (cp_mul_overflows(n, size, &total))
        return NULL;
    return realloc(p, total ? total : 1);
}

char *cp_strdup(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *r = malloc(n);
    if (r)
        memcpy(r, s, n);
    return r;
}

void cp_buf_init(struct cp_buf *b)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->failed = false;
}

void cp_buf_release(struct cp_buf *b)
{
    free(b->data);
    cp_buf_init(b);
}

void cp_buf_reset(struct cp_buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

static bool buf_reserve(struct cp_buf *b, size_t extra)
{
    if (b->failed)
        return false;
    size_t need;
    if (__builtin_add_overflow(b->len, extra + 1, &need)) {
        b->failed = true;
        return false;
    }
    if (need <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) {
            cap = need;
            break;
        }
        cap *= 2;
    }
    char *p = realloc(b->data, cap);
    if (!p) {
        b->failed = true;
        return false;
    }
    b->data = p;
    b->cap = cap;
    return true;
}

void cp_buf_append(struct cp_buf *b, const void *p, size_t n)
{
    if (!buf_reserve(b, n))
        return;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void cp_buf_puts(struct cp_buf *b, const char *s)
{
    cp_buf_append(b, s, strlen(s));
}

void cp_buf_putc(struct cp_buf *b, char c)
{
    cp_buf_append(b, &c, 1);
}

void cp_buf_vprintf(struct cp_buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0) {
        b->failed = true;
        return;
    }
    if (!buf_reserve(b, (size_t)n))
        return;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

void cp_buf_printf(struct cp_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cp_buf_vprintf(b, fmt, ap);
    va_end(ap);
}

enum cp_status cp_buf_status(const struct cp_buf *b)
{
    return b->failed ? CP_ERR_NOMEM : CP_OK;
}

char *cp_buf_steal(struct cp_buf *b)
{
    char *p = b->data;
    if (!p)
        p = cp_strdup("");
    cp_buf_init(b);
    return p;
}
