/* The one JSON writer (core/json.h), on jansson. */
#include "core/json.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Reals: jansson's lossless precision, set explicitly so it cannot drift. */
#define DUMP_FLAGS (JSON_REAL_PRECISION(17) | JSON_ENCODE_ANY)

/* The length of the valid UTF-8 sequence at s (at most n bytes), or 0. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    size_t len;
    unsigned cp, min;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2, cp = c & 0x1f, min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3, cp = c & 0x0f, min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4, cp = c & 0x07, min = 0x10000;
    } else
        return 0;
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

bool cp_utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq(p + i, n - i);
        if (!k)
            return false;
        i += k;
    }
    return true;
}

void cp_utf8_repair(const char *s, size_t n, struct cp_buf *out)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq(p + i, n - i);
        if (k) {
            cp_buf_append(out, p + i, k);
            i += k;
        } else {
            cp_buf_puts(out, "\xef\xbf\xbd"); /* U+FFFD, one per bad byte */
            i++;
        }
    }
}

json_t *cp_json_num(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

json_t *cp_json_int(int64_t v)
{
    return json_integer((json_int_t)v);
}

json_t *cp_json_bool(bool v)
{
    return json_boolean(v);
}

json_t *cp_json_strn(const char *s, size_t n)
{
    if (!s)
        return json_null();
    if (cp_utf8_valid(s, n))
        return json_stringn(s, n);
    struct cp_buf b;
    cp_buf_init(&b);
    cp_utf8_repair(s, n, &b);
    json_t *j = cp_buf_status(&b) == CP_OK ? json_stringn(b.data ? b.data : "", b.len) : NULL;
    cp_buf_release(&b);
    return j;
}

json_t *cp_json_str(const char *s)
{
    return s ? cp_json_strn(s, strlen(s)) : json_null();
}

bool cp_json_set(json_t *obj, const char *key, json_t *v)
{
    if (!v)
        return false;
    size_t n = strlen(key);
    if (cp_utf8_valid(key, n))
        return json_object_set_new(obj, key, v) == 0;
    struct cp_buf b;
    cp_buf_init(&b);
    cp_utf8_repair(key, n, &b);
    bool ok = cp_buf_status(&b) == CP_OK && json_object_set_new(obj, b.data ? b.data : "", v) == 0;
    if (cp_buf_status(&b) != CP_OK)
        json_decref(v);
    cp_buf_release(&b);
    return ok;
}

bool cp_json_set_num(json_t *obj, const char *key, double v)
{
    return cp_json_set(obj, key, cp_json_num(v));
}

bool cp_json_set_int(json_t *obj, const char *key, int64_t v)
{
    return cp_json_set(obj, key, cp_json_int(v));
}

bool cp_json_set_str(json_t *obj, const char *key, const char *s)
{
    return cp_json_set(obj, key, cp_json_str(s));
}

bool cp_json_set_bool(json_t *obj, const char *key, bool v)
{
    return cp_json_set(obj, key, cp_json_bool(v));
}

bool cp_json_push(json_t *arr, json_t *v)
{
    return v && json_array_append_new(arr, v) == 0;
}

static int to_buf(const char *buffer, size_t size, void *data)
{
    struct cp_buf *b = data;
    cp_buf_append(b, buffer, size);
    return cp_buf_status(b) == CP_OK ? 0 : -1;
}

enum cp_status cp_json_dump(const json_t *j, bool pretty, struct cp_buf *out)
{
    size_t flags = DUMP_FLAGS | (pretty ? JSON_INDENT(2) : JSON_COMPACT);
    if (!j || json_dump_callback(j, to_buf, out, flags) != 0 || cp_buf_status(out) != CP_OK)
        return CP_ERR_NOMEM;
    return CP_OK;
}

enum cp_status cp_json_print(const json_t *j, FILE *f)
{
    struct cp_buf b;
    cp_buf_init(&b);
    enum cp_status st = cp_json_dump(j, false, &b);
    if (st == CP_OK) {
        cp_buf_putc(&b, '\n');
        if (cp_buf_status(&b) != CP_OK)
            st = CP_ERR_NOMEM;
        else if (fwrite(b.data, 1, b.len, f) != b.len || fflush(f) != 0)
            st = CP_ERR_IO;
    }
    cp_buf_release(&b);
    return st;
}

enum cp_status cp_json_write_file(const json_t *j, const char *path, struct cp_diag *d)
{
    struct cp_buf b;
    cp_buf_init(&b);
    enum cp_status st = cp_json_dump(j, true, &b);
    if (st == CP_OK)
        cp_buf_putc(&b, '\n');
    if (st != CP_OK || cp_buf_status(&b) != CP_OK)
        st = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory writing JSON", path);
    else
        st = cp_file_write_atomic(path, b.data, b.len, d);
    cp_buf_release(&b);
    return st;
}

char *cp_json_text(const json_t *j)
{
    struct cp_buf b;
    cp_buf_init(&b);
    if (cp_json_dump(j, false, &b) != CP_OK) {
        cp_buf_release(&b);
        return NULL;
    }
    return cp_buf_steal(&b);
}

json_t *cp_json_embed(const char *text)
{
    if (!text)
        return json_null();
    json_error_t err;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &err);
    return j ? j : cp_json_str(text);
}
