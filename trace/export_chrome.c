/* Chrome trace-event JSON (the "JSON Object Format" that Perfetto and
 * chrome://tracing read), streamed into a buffer: one process "cannprof",
 * one thread per layer (and per recorder thread), complete "X" events with
 * microsecond times relative to the run's first event. */
#include "trace/trace_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHROME_PID     1
#define CHROME_PID_STR "1"

/* Chrome thread ids: the three layers of recorder thread 0 are tids 1, 2, 3
 * (so they sort application, runtime, device), recorder thread t adds 3t. */
#define N_TIDS (CP_TRACE_N_LAYERS * (INT16_MAX + 1) + 1)

static int chrome_tid(int layer, int thread)
{
    return 1 + layer + CP_TRACE_N_LAYERS * thread;
}

static const char *track_name(int layer)
{
    switch (layer) {
    case CP_LAYER_APP:
        return "application";
    case CP_LAYER_RUNTIME:
        return "runtime";
    case CP_LAYER_DEVICE:
        return "device (kernels)";
    }
    return "unknown";
}

/* Integers without printf: a million events format several each, and
 * vsnprintf would be most of the export's time. */
static void put_u64(struct cp_buf *b, uint64_t v)
{
    char tmp[24];
    size_t i = sizeof(tmp);
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    cp_buf_append(b, tmp + i, sizeof(tmp) - i);
}

static void put_i64(struct cp_buf *b, int64_t v)
{
    if (v < 0) {
        cp_buf_putc(b, '-');
        put_u64(b, (uint64_t)0 - (uint64_t)v);
    } else {
        put_u64(b, (uint64_t)v);
    }
}

/* Nanoseconds as microseconds with three decimals, exactly. */
static void put_us(struct cp_buf *b, uint64_t ns)
{
    put_u64(b, ns / 1000);
    unsigned frac = (unsigned)(ns % 1000);
    char tmp[4] = {'.', (char)('0' + frac / 100), (char)('0' + frac / 10 % 10),
                   (char)('0' + frac % 10)};
    cp_buf_append(b, tmp, sizeof(tmp));
}

static void put_metadata_events(struct cp_buf *b, const bool *seen)
{
    cp_buf_printf(b,
                  "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                  "\"args\":{\"name\":\"cannprof\"}}",
                  CHROME_PID);
    cp_buf_printf(b,
                  ",\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                  "\"args\":{\"sort_index\":0}}",
                  CHROME_PID);
    for (int tid = 1; tid < N_TIDS; tid++) {
        if (!seen[tid])
            continue;
        int layer = (tid - 1) % CP_TRACE_N_LAYERS, thread = (tid - 1) / CP_TRACE_N_LAYERS;
        cp_buf_printf(b,
                      ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                      "\"args\":{\"name\":",
                      CHROME_PID, tid);
        if (thread == 0)
            cp_buf_printf(b, "\"%s\"}}", track_name(layer));
        else
            cp_buf_printf(b, "\"%s #%d\"}}", track_name(layer), thread);
        cp_buf_printf(b,
                      ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                      "\"args\":{\"sort_index\":%d}}",
                      CHROME_PID, tid, tid);
    }
}

/* One column of a result row as a JSON value. */
static void put_column(struct cp_buf *b, sqlite3_stmt *st, int col)
{
    switch (sqlite3_column_type(st, col)) {
    case SQLITE_INTEGER:
        cp_buf_printf(b, "%lld", (long long)sqlite3_column_int64(st, col));
        break;
    case SQLITE_FLOAT:
        cp_trace_json_num(b, sqlite3_column_double(st, col));
        break;
    case SQLITE_NULL:
        cp_buf_puts(b, "null");
        break;
    default: {
        const char *name = sqlite3_column_name(st, col);
        const char *text = (const char *)sqlite3_column_text(st, col);
        if (name && strcmp(name, "config_json") == 0)
            cp_trace_json_text(b, text);
        else
            cp_trace_json_str(b, text);
    }
    }
}

/* "metadata": the run's row and the store's meta table. */
static enum cp_status put_metadata(struct cp_trace_store *s, int64_t run, struct cp_buf *b,
                                   struct cp_diag *d)
{
    sqlite3_stmt *st = NULL;
    enum cp_status ret = CP_OK;
    cp_buf_printf(b, "\"metadata\":{\"tool\":\"cannprof\",\"trace_schema_version\":%d,\"run\":{",
                  CP_TRACE_SCHEMA_VERSION);
    if (sqlite3_prepare_v2(s->db, "SELECT * FROM runs WHERE id = ?1", -1, &st, NULL) != SQLITE_OK)
        return cp_trace_store_db_error(s, d, "reading the run");
    sqlite3_bind_int64(st, 1, run);
    if (sqlite3_step(st) == SQLITE_ROW) {
        for (int c = 0; c < sqlite3_column_count(st); c++) {
            if (c)
                cp_buf_putc(b, ',');
            cp_trace_json_str(b, sqlite3_column_name(st, c));
            cp_buf_putc(b, ':');
            put_column(b, st, c);
        }
    }
    sqlite3_finalize(st);
    cp_buf_puts(b, "},\"store\":{");
    if (sqlite3_prepare_v2(s->db, "SELECT key, value FROM meta ORDER BY key", -1, &st, NULL) !=
        SQLITE_OK)
        return cp_trace_store_db_error(s, d, "reading meta");
    int rc, i = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (i++)
            cp_buf_putc(b, ',');
        cp_trace_json_str(b, (const char *)sqlite3_column_text(st, 0));
        cp_buf_putc(b, ':');
        cp_trace_json_str(b, (const char *)sqlite3_column_text(st, 1));
    }
    if (rc != SQLITE_DONE)
        ret = cp_trace_store_db_error(s, d, "reading meta");
    sqlite3_finalize(st);
    cp_buf_puts(b, "}}");
    return ret;
}

enum cp_status cp_trace_export_chrome(struct cp_trace_store *s, int64_t run, struct cp_buf *out,
                                      struct cp_diag *d)
{
    struct cp_trace_kinfo *k = NULL;
    size_t nk = 0;
    enum cp_status ret = cp_trace_kinfo_load(s, run, true, &k, &nk, d);
    if (ret != CP_OK)
        return ret;
    sqlite3_stmt *st = NULL;
    bool *seen = cp_calloc(N_TIDS, sizeof(*seen));
    if (!seen) {
        ret = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory exporting", s->path);
        goto out_free;
    }
    if (sqlite3_prepare_v2(s->db,
                           "SELECT e.layer, e.thread, e.iteration, e.kernel_idx, e.start_ns, "
                           "e.dur_ns, s.value FROM events e LEFT JOIN strings s "
                           "ON s.id = e.name_id WHERE e.run_id = ?1 "
                           "ORDER BY e.start_ns, e.depth",
                           -1, &st, NULL) != SQLITE_OK) {
        ret = cp_trace_store_db_error(s, d, "reading events");
        goto out_free;
    }
    sqlite3_bind_int64(st, 1, run);
    cp_buf_puts(out, "{\"traceEvents\":[\n");
    int64_t t0 = 0;
    bool first = true;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        int layer = sqlite3_column_int(st, 0);
        int thread = sqlite3_column_int(st, 1);
        int iteration = sqlite3_column_int(st, 2);
        int64_t kidx = sqlite3_column_int64(st, 3); /* -1: not a kernel */
        int64_t start = sqlite3_column_int64(st, 4);
        int64_t dur = sqlite3_column_int64(st, 5);
        const char *name = (const char *)sqlite3_column_text(st, 6);
        if (layer < 0 || layer >= CP_TRACE_N_LAYERS)
            continue; /* a layer from a newer writer: not ours to draw */
        if (thread < 0 || thread > INT16_MAX)
            thread = 0;
        if (first)
            t0 = start;
        const struct cp_trace_kinfo *ki = kidx >= 0 ? cp_trace_kinfo_find(k, nk, kidx) : NULL;
        int tid = chrome_tid(layer, thread);
        seen[tid] = true;
        cp_buf_puts(out, first ? "{\"name\":" : ",\n{\"name\":");
        first = false;
        cp_trace_json_str(out, name ? name : ki ? ki->node : "?");
        cp_buf_puts(out, ",\"cat\":\"");
        cp_buf_puts(out, cp_trace_layer_name((enum cp_trace_layer)layer));
        cp_buf_puts(out, "\",\"ph\":\"X\",\"ts\":");
        put_us(out, (uint64_t)(start - t0));
        cp_buf_puts(out, ",\"dur\":");
        put_us(out, dur < 0 ? 0 : (uint64_t)dur);
        cp_buf_puts(out, ",\"pid\":" CHROME_PID_STR ",\"tid\":");
        put_i64(out, tid);
        cp_buf_puts(out, ",\"args\":{");
        if (ki) {
            cp_buf_puts(out, ki->args);
            cp_buf_putc(out, ',');
        } else if (kidx >= 0) {
            cp_buf_puts(out, "\"kernel\":");
            put_i64(out, kidx);
            cp_buf_putc(out, ',');
        }
        cp_buf_puts(out, "\"iteration\":");
        put_i64(out, iteration);
        cp_buf_puts(out, "}}");
    }
    if (rc != SQLITE_DONE) {
        ret = cp_trace_store_db_error(s, d, "reading events");
        goto out_free;
    }
    if (!first)
        cp_buf_puts(out, ",\n");
    put_metadata_events(out, seen);
    cp_buf_puts(out, "\n],\n\"displayTimeUnit\":\"ns\",\n");
    if ((ret = put_metadata(s, run, out, d)) != CP_OK)
        goto out_free;
    cp_buf_puts(out, "}\n");
    if (cp_buf_status(out) != CP_OK)
        ret = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory exporting run %lld", s->path,
                          (long long)run);
out_free:
    sqlite3_finalize(st);
    free(seen);
    cp_trace_kinfo_free(k, nk);
    return ret;
}
