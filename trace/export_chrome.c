/* Chrome trace-event JSON (the "JSON Object Format" that Perfetto and
 * chrome://tracing read), streamed into a buffer: one process "cannprof",
 * one thread per layer (and per recorder thread), complete "X" events with
 * microsecond times relative to the run's first event. Every value goes
 * through core/json.h (jansson), one event at a time. */
#include "trace/trace_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHROME_PID 1

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

/* An object of the given members, NULL on out-of-memory. */
static json_t *metadata_event(const char *name, int tid, const char *arg_key, json_t *arg)
{
    json_t *e = json_object(), *args = json_object();
    bool ok = e && args && cp_json_set_str(e, "name", name) && cp_json_set_str(e, "ph", "M") &&
              cp_json_set_int(e, "pid", CHROME_PID) && cp_json_set_int(e, "tid", tid) &&
              cp_json_set(args, arg_key, arg);
    arg = NULL;
    if (ok) {
        ok = cp_json_set(e, "args", args);
        args = NULL;
    }
    json_decref(args);
    if (ok)
        return e;
    json_decref(e);
    return NULL;
}

/* Dump one event after the ones before it. */
static bool put_event(struct cp_buf *b, json_t *e, bool *first)
{
    if (!e)
        return false;
    if (!*first)
        cp_buf_puts(b, ",\n");
    *first = false;
    bool ok = cp_json_dump(e, false, b) == CP_OK;
    json_decref(e);
    return ok;
}

static bool put_metadata_events(struct cp_buf *b, const bool *seen, bool *first)
{
    bool ok =
        put_event(b, metadata_event("process_name", 0, "name", cp_json_str("cannprof")), first) &&
        put_event(b, metadata_event("process_sort_index", 0, "sort_index", cp_json_int(0)), first);
    for (int tid = 1; ok && tid < N_TIDS; tid++) {
        if (!seen[tid])
            continue;
        int layer = (tid - 1) % CP_TRACE_N_LAYERS, thread = (tid - 1) / CP_TRACE_N_LAYERS;
        char name[64];
        if (thread == 0)
            snprintf(name, sizeof name, "%s", track_name(layer));
        else
            snprintf(name, sizeof name, "%s #%d", track_name(layer), thread);
        ok = put_event(b, metadata_event("thread_name", tid, "name", cp_json_str(name)), first) &&
             put_event(b, metadata_event("thread_sort_index", tid, "sort_index", cp_json_int(tid)),
                       first);
    }
    return ok;
}

/* One column of a result row as a JSON value. */
static json_t *column_json(sqlite3_stmt *st, int col)
{
    switch (sqlite3_column_type(st, col)) {
    case SQLITE_INTEGER:
        return cp_json_int(sqlite3_column_int64(st, col));
    case SQLITE_FLOAT:
        return cp_json_num(sqlite3_column_double(st, col));
    case SQLITE_NULL:
        return json_null();
    default: {
        const char *name = sqlite3_column_name(st, col);
        const char *text = (const char *)sqlite3_column_text(st, col);
        if (name && strcmp(name, "config_json") == 0)
            return cp_json_embed(text);
        return cp_json_str(text);
    }
    }
}

/* "metadata": the run's row and the store's meta table. OUT: *out. */
static enum cp_status metadata_json(struct cp_trace_store *s, int64_t run, json_t **out,
                                    struct cp_diag *d)
{
    *out = NULL;
    sqlite3_stmt *st = NULL;
    json_t *meta = json_object(), *row = json_object(), *store = json_object();
    bool ok = meta && row && store && cp_json_set_str(meta, "tool", "cannprof") &&
              cp_json_set_int(meta, "trace_schema_version", CP_TRACE_SCHEMA_VERSION);
    enum cp_status ret = CP_OK;
    if (sqlite3_prepare_v2(s->db, "SELECT * FROM runs WHERE id = ?1", -1, &st, NULL) != SQLITE_OK) {
        ret = cp_trace_store_db_error(s, d, "reading the run");
        goto out;
    }
    sqlite3_bind_int64(st, 1, run);
    if (sqlite3_step(st) == SQLITE_ROW)
        for (int c = 0; ok && c < sqlite3_column_count(st); c++)
            ok = cp_json_set(row, sqlite3_column_name(st, c), column_json(st, c));
    sqlite3_finalize(st);
    if (sqlite3_prepare_v2(s->db, "SELECT key, value FROM meta ORDER BY key", -1, &st, NULL) !=
        SQLITE_OK) {
        st = NULL;
        ret = cp_trace_store_db_error(s, d, "reading meta");
        goto out;
    }
    int rc = SQLITE_DONE;
    while (ok && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *key = (const char *)sqlite3_column_text(st, 0);
        ok = cp_json_set_str(store, key ? key : "", (const char *)sqlite3_column_text(st, 1));
    }
    if (ok && rc != SQLITE_DONE) {
        ret = cp_trace_store_db_error(s, d, "reading meta");
        goto out;
    }
    if (ok) {
        ok = cp_json_set(meta, "run", row) && cp_json_set(meta, "store", store);
        row = store = NULL;
    }
    if (!ok)
        ret = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory exporting", s->path);
out:
    sqlite3_finalize(st);
    json_decref(row);
    json_decref(store);
    if (ret == CP_OK)
        *out = meta;
    else
        json_decref(meta);
    return ret;
}

/* jansson writes DEL (0x7f) raw, which is valid JSON but which Perfetto's
 * tokenizer refuses: escape it. In JSON text the byte can only be inside a
 * string, so a byte-wise rewrite from `from` on is exact. */
static void escape_del(struct cp_buf *b, size_t from)
{
    if (!b->data || b->len <= from || !memchr(b->data + from, 0x7f, b->len - from))
        return;
    struct cp_buf t;
    cp_buf_init(&t);
    cp_buf_append(&t, b->data + from, b->len - from);
    if (cp_buf_status(&t) != CP_OK) {
        b->failed = true;
        cp_buf_release(&t);
        return;
    }
    b->len = from;
    for (size_t i = 0; i < t.len; i++)
        if (t.data[i] == 0x7f)
            cp_buf_puts(b, "\\u007f");
        else
            cp_buf_putc(b, t.data[i]);
    cp_buf_release(&t);
}

/* The objects every event reuses: one per event would be a million
 * allocations of the same keys. Set once, their values are replaced per
 * event; the order of keys stays the order they were first set in. */
struct event_objs {
    json_t *ev;          /* name, cat, ph, ts, dur, pid, tid */
    json_t *plain_args;  /* {"iteration"} */
    json_t *kernel_args; /* {"kernel","iteration"}: a kernel the table lacks */
};

static void event_objs_release(struct event_objs *o)
{
    json_decref(o->ev);
    json_decref(o->plain_args);
    json_decref(o->kernel_args);
}

static bool event_objs_init(struct event_objs *o)
{
    o->ev = json_object();
    o->plain_args = json_object();
    o->kernel_args = json_object();
    return o->ev && o->plain_args && o->kernel_args && cp_json_set_str(o->ev, "name", "") &&
           cp_json_set_str(o->ev, "cat", "") && cp_json_set_str(o->ev, "ph", "X") &&
           cp_json_set_num(o->ev, "ts", 0) && cp_json_set_num(o->ev, "dur", 0) &&
           cp_json_set_int(o->ev, "pid", CHROME_PID) && cp_json_set_int(o->ev, "tid", 0) &&
           cp_json_set_int(o->plain_args, "iteration", 0) &&
           cp_json_set_int(o->kernel_args, "kernel", 0) &&
           cp_json_set_int(o->kernel_args, "iteration", 0);
}

/* Set an object's integer member in place. */
static bool set_int(json_t *o, const char *key, int64_t v)
{
    return json_integer_set(json_object_get(o, key), (json_int_t)v) == 0;
}

/* Nanoseconds as microseconds: the double nearest ns/1000, which 17
 * significant digits write back exactly (docs/trace-format.md). */
static bool set_us(json_t *o, const char *key, int64_t ns)
{
    return json_real_set(json_object_get(o, key), (double)ns / 1000.0) == 0;
}

/* Append one complete event: the members of `ev`, then "args": the
 * kernel's members (`kernel`, the text cp_json_text gave for its args
 * object; NULL when the event is not a kernel's) followed by those of
 * `args`. A kernel's args are the bulk of an event and the same in every
 * iteration, so they are encoded once per kernel and their text reused;
 * each piece is jansson's output, joined at the braces. */
static bool put_x_event(struct cp_buf *out, const json_t *ev, const char *kernel, size_t kernel_len,
                        const json_t *args)
{
    if (cp_json_dump(ev, false, out) != CP_OK)
        return false;
    out->len--; /* the event's closing brace: args follow */
    cp_buf_puts(out, ",\"args\":");
    bool merge = kernel && kernel_len > 2; /* "{...}" with members */
    if (merge)
        cp_buf_append(out, kernel, kernel_len - 1); /* without its closing brace */
    size_t at = out->len;
    if (cp_json_dump(args, false, out) != CP_OK)
        return false;
    if (merge)
        out->data[at] = ','; /* args' opening brace: its members join the kernel's */
    cp_buf_putc(out, '}');
    return cp_buf_status(out) == CP_OK;
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
    json_t *meta = NULL;
    struct event_objs eo = {0};
    bool *seen = cp_calloc(N_TIDS, sizeof(*seen));
    size_t from = out->len;
    if (!seen || !event_objs_init(&eo))
        goto out_nomem;
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
    /* Streamed: each event is dumped by jansson as it is read (a million
     * of them would not fit in memory as one tree); only the brackets and
     * commas between events are written here. */
    cp_buf_puts(out, "{\"traceEvents\":[\n");
    int64_t t0 = 0;
    bool first = true, ok = true;
    int rc = SQLITE_DONE;
    while (ok && (rc = sqlite3_step(st)) == SQLITE_ROW) {
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
        json_t *args = ki || kidx < 0 ? eo.plain_args : eo.kernel_args;
        ok = set_int(args, "iteration", iteration) &&
             (ki || kidx < 0 || set_int(args, "kernel", kidx)) &&
             cp_json_set_str(eo.ev, "name",
                             name ? name
                             : ki ? ki->node
                                  : "?") &&
             cp_json_set_str(eo.ev, "cat", cp_trace_layer_name((enum cp_trace_layer)layer)) &&
             set_us(eo.ev, "ts", start - t0) && set_us(eo.ev, "dur", dur < 0 ? 0 : dur) &&
             set_int(eo.ev, "tid", tid);
        if (ok) {
            if (!first)
                cp_buf_puts(out, ",\n");
            first = false;
            ok = put_x_event(out, eo.ev, ki ? ki->args : NULL, ki ? ki->args_len : 0, args);
        }
    }
    if (!ok)
        goto out_nomem;
    if (rc != SQLITE_DONE) {
        ret = cp_trace_store_db_error(s, d, "reading events");
        goto out_free;
    }
    if (!put_metadata_events(out, seen, &first))
        goto out_nomem;
    if ((ret = metadata_json(s, run, &meta, d)) != CP_OK)
        goto out_free;
    cp_buf_puts(out, "\n],\n\"displayTimeUnit\":\"ns\",\n\"metadata\":");
    if (cp_json_dump(meta, false, out) != CP_OK)
        goto out_nomem;
    cp_buf_puts(out, "}\n");
    escape_del(out, from);
    if (cp_buf_status(out) != CP_OK)
        goto out_nomem;
    goto out_free;
out_nomem:
    ret = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory exporting run %lld", s->path,
                      (long long)run);
out_free:
    json_decref(meta);
    event_objs_release(&eo);
    sqlite3_finalize(st);
    free(seen);
    cp_trace_kinfo_free(k, nk);
    return ret;
}
