/* Export entry points and what the exporters share: the kernel table of a
 * run, with each kernel's Chrome args built once (core/json.h). */
#include "core/json.h"
#include "trace/trace_internal.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stddef.h>
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

/* The number of events of run `run`. */
static enum cp_status count_events(struct cp_trace_store *s, int64_t run, size_t *n,
                                   struct cp_diag *d)
{
    *n = 0;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, "SELECT count(*) FROM events WHERE run_id = ?1", -1, &st, NULL) !=
        SQLITE_OK)
        return cp_trace_store_db_error(s, d, "counting events");
    sqlite3_bind_int64(st, 1, run);
    enum cp_status ret = CP_OK;
    if (sqlite3_step(st) == SQLITE_ROW)
        *n = (size_t)sqlite3_column_int64(st, 0);
    else
        ret = cp_trace_store_db_error(s, d, "counting events");
    sqlite3_finalize(st);
    return ret;
}

enum cp_status cp_trace_export_file(struct cp_trace_store *s, int64_t run_id,
                                    enum cp_trace_format fmt, const char *out_path,
                                    struct cp_trace_export_info *info, struct cp_diag *d)
{
    struct cp_trace_export_info got = {0};
    if (info)
        *info = got;
    enum cp_status st = cp_trace_store_resolve_run(s, run_id, &got.run, d);
    struct cp_buf b;
    cp_buf_init(&b);
    if (st == CP_OK && info)
        st = count_events(s, got.run, &got.events, d);
    if (st == CP_OK)
        st = cp_trace_export_buf(s, got.run, fmt, &b, d);
    if (st == CP_OK)
        st = cp_file_write_atomic(out_path, b.data ? b.data : "", b.len, d);
    got.bytes = b.len;
    cp_buf_release(&b);
    if (st == CP_OK && info)
        *info = got;
    return st;
}

enum cp_status cp_trace_export(struct cp_trace_store *s, int64_t run_id, enum cp_trace_format fmt,
                               const char *out_path, struct cp_diag *d)
{
    return cp_trace_export_file(s, run_id, fmt, out_path, NULL, d);
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

_Static_assert(offsetof(struct cp_trace_kinfo, idx) == 0, "cp_trace_find_idx reads idx first");

const struct cp_trace_kinfo *cp_trace_kinfo_find(const struct cp_trace_kinfo *k, size_t n,
                                                 int64_t idx)
{
    return cp_trace_find_idx(k, n, sizeof *k, idx);
}

static char *column_dup(sqlite3_stmt *st, int col)
{
    const char *v = (const char *)sqlite3_column_text(st, col);
    return cp_strdup(v ? v : "?");
}

/* A number column as JSON: whole numbers as integers (FLOPs and bytes
 * read 2000000, not 2000000.0), others as reals, NaN and infinities null. */
static json_t *number_column(sqlite3_stmt *st, int col)
{
    if (sqlite3_column_type(st, col) == SQLITE_NULL)
        return json_null();
    double v = sqlite3_column_double(st, col);
    if (isfinite(v) && v == (double)(int64_t)v && fabs(v) < 9e15)
        return cp_json_int((int64_t)v);
    return cp_json_num(v);
}

/* The Chrome args of one kernel; the exporter adds its iteration. */
static json_t *kernel_args(sqlite3_stmt *st)
{
    json_t *o = json_object();
    bool ok = o != NULL;
    static const char *const text_keys[] = {"node", "op_type", "impl"};
    for (int i = 0; ok && i < 3; i++)
        ok = cp_json_set_str(o, text_keys[i], (const char *)sqlite3_column_text(st, 1 + i));
    /* JSON columns embedded as JSON (text that does not parse: a string) */
    static const char *const json_keys[] = {"origins", "inputs", "outputs"};
    for (int i = 0; ok && i < 3; i++)
        ok = cp_json_set(o, json_keys[i],
                         cp_json_embed((const char *)sqlite3_column_text(st, 4 + i)));
    ok = ok && cp_json_set(o, "flops", number_column(st, 7)) &&
         cp_json_set(o, "bytes", number_column(st, 8));
    if (ok)
        return o;
    json_decref(o);
    return NULL;
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
        if (with_args) {
            json_t *args = kernel_args(st);
            ki->args = cp_json_text(args);
            ki->args_len = ki->args ? strlen(ki->args) : 0;
            json_decref(args);
        }
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
