/* Export entry points and what the exporters share: the kernel table of a
 * run and careful JSON output. */
#include "trace/trace_internal.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool cp_trace_format_parse(const char *name, enum cp_trace_format *out)
{
    if (name && strcmp(name, "chrome") == 0) {
        *out = CP_TRACE_FORMAT_CHROME;
        return true;
    }
    if (name && strcmp(name, "folded") == 0) {
        *out = CP_TRACE_FORMAT_FOLDED;
        return true;
    }
    return false;
}

const char *cp_trace_format_name(enum cp_trace_format fmt)
{
    switch (fmt) {
    case CP_TRACE_FORMAT_CHROME:
        return "chrome";
    case CP_TRACE_FORMAT_FOLDED:
        return "folded";
    }
    return "unknown";
}

enum cp_status cp_trace_export_buf(struct cp_trace_store *s, int64_t run_id,
                                   enum cp_trace_format fmt, struct cp_buf *out, struct cp_diag *d)
{
    int64_t run;
    enum cp_status st = cp_trace_store_resolve_run(s, run_id, &run, d);
    if (st != CP_OK)
        return st;
    switch (fmt) {
    case CP_TRACE_FORMAT_CHROME:
        return cp_trace_export_chrome(s, run, out, d);
    case CP_TRACE_FORMAT_FOLDED:
        return cp_trace_export_folded(s, run, out, d);
    }
    return cp_diag_set(d, CP_ERR_UNSUPPORTED, "%s: unknown export format %d", s->path, (int)fmt);
}

enum cp_status cp_trace_export(struct cp_trace_store *s, int64_t run_id, enum cp_trace_format fmt,
                               const char *out_path, struct cp_diag *d)
{
    struct cp_buf b;
    cp_buf_init(&b);
    enum cp_status st = cp_trace_export_buf(s, run_id, fmt, &b, d);
    if (st == CP_OK)
        st = cp_file_write_atomic(out_path, b.data ? b.data : "", b.len, d);
    cp_buf_release(&b);
    return st;
}

/* ---- JSON ------------------------------------------------------------------ */

/* Length of the valid UTF-8 sequence at p (1..4), or 0 when it is not one
 * (stray continuation byte, overlong form, surrogate, beyond U+10FFFF,
 * truncated). */
static size_t utf8_seq_len(const unsigned char *p)
{
    unsigned c = p[0];
    size_t n;
    unsigned cp, min;
    if (c < 0x80)
        return 1;
    if ((c & 0xe0) == 0xc0) {
        n = 2, cp = c & 0x1f, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
        n = 3, cp = c & 0x0f, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
        n = 4, cp = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) /* also stops at the NUL */
            return 0;
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

void cp_trace_json_str(struct cp_buf *b, const char *s)
{
    cp_buf_putc(b, '"');
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p) {
        const unsigned char *run = p;
        /* Copy plain bytes in one go: the common case. */
        while (*p >= 0x20 && *p < 0x7f && *p != '"' && *p != '\\')
            p++;
        if (p > run)
            cp_buf_append(b, run, (size_t)(p - run));
        if (!*p)
            break;
        switch (*p) {
        case '"':
            cp_buf_puts(b, "\\\"");
            p++;
            continue;
        case '\\':
            cp_buf_puts(b, "\\\\");
            p++;
            continue;
        case '\n':
            cp_buf_puts(b, "\\n");
            p++;
            continue;
        case '\t':
            cp_buf_puts(b, "\\t");
            p++;
            continue;
        default:
            break;
        }
        if (*p < 0x20 || *p == 0x7f) { /* Perfetto refuses raw DEL too */
            cp_buf_printf(b, "\\u%04x", *p);
            p++;
            continue;
        }
        size_t n = utf8_seq_len(p);
        if (n == 0) {
            cp_buf_puts(b, "\\ufffd");
            p++;
        } else {
            cp_buf_append(b, p, n);
            p += n;
        }
    }
    cp_buf_putc(b, '"');
}

void cp_trace_json_text(struct cp_buf *b, const char *json)
{
    if (!json) {
        cp_buf_puts(b, "null");
        return;
    }
    json_t *v = json_loads(json, JSON_DECODE_ANY, NULL);
    char *dumped = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    if (dumped)
        cp_buf_puts(b, dumped);
    else
        cp_trace_json_str(b, json);
    free(dumped);
    json_decref(v);
}

void cp_trace_json_num(struct cp_buf *b, double v)
{
    if (!isfinite(v))
        cp_buf_puts(b, "null");
    else if (v == (double)(int64_t)v && fabs(v) < 9e15)
        cp_buf_printf(b, "%lld", (long long)v);
    else
        cp_buf_printf(b, "%.17g", v);
}

/* ---- kernels --------------------------------------------------------------- */

void cp_trace_kinfo_free(struct cp_trace_kinfo *k, size_t n)
{
    if (!k)
        return;
    for (size_t i = 0; i < n; i++) {
        free(k[i].node);
        free(k[i].op_type);
        free(k[i].args);
    }
    free(k);
}

const struct cp_trace_kinfo *cp_trace_kinfo_find(const struct cp_trace_kinfo *k, size_t n,
                                                 int64_t idx)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (k[mid].idx < idx)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && k[lo].idx == idx ? &k[lo] : NULL;
}

static char *column_dup(sqlite3_stmt *st, int col)
{
    const char *v = (const char *)sqlite3_column_text(st, col);
    return cp_strdup(v ? v : "?");
}

/* The Chrome args members of one kernel (the event adds its iteration). */
static char *render_args(sqlite3_stmt *st)
{
    struct cp_buf b;
    cp_buf_init(&b);
    static const char *const text_keys[] = {"node", "op_type", "impl"};
    for (int i = 0; i < 3; i++) {
        cp_buf_printf(&b, "%s\"%s\":", i ? "," : "", text_keys[i]);
        const char *v = (const char *)sqlite3_column_text(st, 1 + i);
        if (v)
            cp_trace_json_str(&b, v);
        else
            cp_buf_puts(&b, "null");
    }
    static const char *const json_keys[] = {"origins", "inputs", "outputs"};
    for (int i = 0; i < 3; i++) {
        cp_buf_printf(&b, ",\"%s\":", json_keys[i]);
        cp_trace_json_text(&b, (const char *)sqlite3_column_text(st, 4 + i));
    }
    cp_buf_puts(&b, ",\"flops\":");
    cp_trace_json_num(&b, sqlite3_column_double(st, 7));
    cp_buf_puts(&b, ",\"bytes\":");
    cp_trace_json_num(&b, sqlite3_column_double(st, 8));
    if (cp_buf_status(&b) != CP_OK) {
        cp_buf_release(&b);
        return NULL;
    }
    return cp_buf_steal(&b);
}

enum cp_status cp_trace_kinfo_load(struct cp_trace_store *s, int64_t run, bool with_args,
                                   struct cp_trace_kinfo **k, size_t *n, struct cp_diag *d)
{
    *k = NULL;
    *n = 0;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT idx, node, op_type, impl, origins, inputs, outputs, flops, "
                           "bytes FROM kernels WHERE run_id = ?1 ORDER BY idx",
                           -1, &st, NULL) != SQLITE_OK)
        return cp_trace_store_db_error(s, d, "reading kernels");
    sqlite3_bind_int64(st, 1, run);
    struct cp_trace_kinfo *arr = NULL;
    size_t len = 0, cap = 0;
    enum cp_status ret = CP_OK;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (len == cap) {
            size_t ncap = cap ? cap * 2 : 64;
            struct cp_trace_kinfo *p = cp_realloc_array(arr, ncap, sizeof(*p));
            if (!p)
                goto out_nomem;
            arr = p;
            cap = ncap;
        }
        struct cp_trace_kinfo *ki = &arr[len++];
        memset(ki, 0, sizeof(*ki));
        ki->idx = sqlite3_column_int64(st, 0);
        ki->node = column_dup(st, 1);
        ki->op_type = column_dup(st, 2);
        if (with_args)
            ki->args = render_args(st);
        if (!ki->node || !ki->op_type || (with_args && !ki->args))
            goto out_nomem;
    }
    if (rc != SQLITE_DONE) {
        ret = cp_trace_store_db_error(s, d, "reading kernels");
        goto out_free;
    }
    sqlite3_finalize(st);
    *k = arr;
    *n = len;
    return CP_OK;
out_nomem:
    ret = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory reading kernels", s->path);
out_free:
    cp_trace_kinfo_free(arr, len);
    sqlite3_finalize(st);
    return ret;
}
