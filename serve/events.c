/* A served model's request events (struct cp_serve_event) as JSON, what
 * GET /v1/trace answers and `cannprof trace --target` reads, and as a
 * pipeline run of the trace store: the nodes http -> model -> reply with
 * every request's calls, so that node-bottleneck, export and analyze read
 * a served model as they read a flow (docs/serving.md, "Tracing a running
 * server"). */
#include "serve/serve.h"
#include "core/json.h"
#include "runner/runner.h"
#include "trace/trace.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The order of an event's fields in the JSON arrays. */
static const char *const FIELDS[] = {
    "id",           "code",          "arrive_ns",     "queued_ns",     "popped_ns",
    "run_start_ns", "run_end_ns",    "woken_ns",      "replied_ns",    "batch_seq",
    "batch",        "depth",         "batch_wait_ns", "batch_cpu_ns",  "batch_runq_ns",
    "parse_cpu_ns", "parse_runq_ns", "reply_cpu_ns",  "reply_runq_ns", "connection",
};
#define N_FIELDS (sizeof FIELDS / sizeof *FIELDS)

/* The fields as int64 values, times relative to origin (0 stays 0: a stage
 * not reached). */
static void to_row(const struct cp_serve_event *e, int64_t origin, int64_t v[N_FIELDS])
{
    int64_t t[7] = {e->arrive_ns,  e->queued_ns, e->popped_ns, e->run_start_ns,
                    e->run_end_ns, e->woken_ns,  e->replied_ns};
    v[0] = (int64_t)e->id;
    v[1] = e->code;
    for (int k = 0; k < 7; k++)
        v[2 + k] = t[k] ? t[k] - origin : 0;
    v[9] = (int64_t)e->batch_seq;
    v[10] = e->batch;
    v[11] = e->depth;
    v[12] = e->batch_wait_ns;
    v[13] = e->batch_cpu_ns;
    v[14] = e->batch_runq_ns;
    v[15] = e->parse_cpu_ns;
    v[16] = e->parse_runq_ns;
    v[17] = e->reply_cpu_ns;
    v[18] = e->reply_runq_ns;
    v[19] = (int64_t)e->connection;
}

json_t *cp_serve_events_json(const struct cp_serve_event *e, size_t n, int64_t origin_ns)
{
    json_t *fields = json_array(), *events = json_array(), *o = json_object();
    for (size_t k = 0; fields && k < N_FIELDS; k++)
        json_array_append_new(fields, json_string(FIELDS[k]));
    for (size_t i = 0; events && i < n; i++) {
        int64_t v[N_FIELDS];
        to_row(&e[i], origin_ns, v);
        json_t *row = json_array();
        for (size_t k = 0; row && k < N_FIELDS; k++)
            json_array_append_new(row, json_integer(v[k]));
        if (!row || json_array_append_new(events, row) != 0) {
            json_decref(fields);
            json_decref(events);
            json_decref(o);
            return NULL;
        }
    }
    if (!o || !fields || !events || json_object_set_new(o, "fields", fields) != 0 ||
        json_object_set_new(o, "events", events) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

enum cp_status cp_serve_events_from_json(const char *origin, const json_t *o,
                                         struct cp_serve_event **out, size_t *n, struct cp_diag *d)
{
    *out = NULL;
    *n = 0;
    const json_t *fields = json_object_get(o, "fields"), *events = json_object_get(o, "events");
    if (!json_is_array(fields) || !json_is_array(events))
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s: not a trace of cannprof serve (no \"fields\" and \"events\" lists)",
                           origin);
    if (json_array_size(fields) != N_FIELDS)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s: %zu event fields, this cannprof reads %zu (a server of another "
                           "version?)",
                           origin, json_array_size(fields), N_FIELDS);
    for (size_t k = 0; k < N_FIELDS; k++) {
        const char *f = json_string_value(json_array_get(fields, k));
        if (!f || strcmp(f, FIELDS[k]) != 0)
            return cp_diag_set(d, CP_ERR_INVALID, "%s: event field %zu is %s, expected %s", origin,
                               k, f ? f : "not a string", FIELDS[k]);
    }
    size_t m = json_array_size(events);
    if (m > CP_SERVE_TRACE_MAX)
        return cp_diag_set(d, CP_ERR_INVALID, "%s: %zu events, more than the %u a trace holds",
                           origin, m, (unsigned)CP_SERVE_TRACE_MAX);
    struct cp_serve_event *v = cp_calloc(m ? m : 1, sizeof *v);
    if (!v)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < m; i++) {
        const json_t *row = json_array_get(events, i);
        int64_t x[N_FIELDS];
        bool ok = json_is_array(row) && json_array_size(row) == N_FIELDS;
        for (size_t k = 0; ok && k < N_FIELDS; k++) {
            const json_t *j = json_array_get(row, k);
            ok = json_is_integer(j);
            x[k] = ok ? (int64_t)json_integer_value(j) : 0;
        }
        /* counts and ids are not negative; the times keep their order */
        ok = ok && x[0] >= 0 && x[1] >= 100 && x[1] <= 599 && x[9] >= 0 && x[10] >= 0 &&
             x[10] <= UINT32_MAX && x[11] >= 0 && x[11] <= UINT32_MAX && x[19] >= 0;
        for (size_t k = 12; ok && k < 19; k++)
            ok = x[k] >= 0;
        /* times within 2^60 ns (36 years) of the origin, in order */
        int64_t prev = INT64_MIN;
        for (size_t k = 2; ok && k < 9; k++)
            ok = x[k] > -((int64_t)1 << 60) && x[k] < ((int64_t)1 << 60);
        for (size_t k = 12; ok && k < 19; k++)
            ok = x[k] < ((int64_t)1 << 60);
        for (size_t k = 2; ok && k < 9; k++)
            if (x[k]) {
                ok = x[k] >= prev;
                prev = x[k];
            }
        if (!ok) {
            free(v);
            return cp_diag_set(d, CP_ERR_INVALID,
                               "%s: event %zu is not %zu integers in the order of \"fields\" "
                               "(status 100..599, counts not negative, times in order and within "
                               "2^60 ns)",
                               origin, i, N_FIELDS);
        }
        struct cp_serve_event *e = &v[i];
        e->id = (uint64_t)x[0];
        e->code = (int)x[1];
        e->arrive_ns = x[2];
        e->queued_ns = x[3];
        e->popped_ns = x[4];
        e->run_start_ns = x[5];
        e->run_end_ns = x[6];
        e->woken_ns = x[7];
        e->replied_ns = x[8];
        e->batch_seq = (uint64_t)x[9];
        e->batch = (uint32_t)x[10];
        e->depth = (uint32_t)x[11];
        e->batch_wait_ns = x[12];
        e->batch_cpu_ns = x[13];
        e->batch_runq_ns = x[14];
        e->parse_cpu_ns = x[15];
        e->parse_runq_ns = x[16];
        e->reply_cpu_ns = x[17];
        e->reply_runq_ns = x[18];
        e->connection = (uint64_t)x[19];
    }
    *out = v;
    *n = m;
    return CP_OK;
}

/* ---- as a pipeline run ------------------------------------------------------------------ */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The most requests in [arrive, replied] at once: the connection threads
 * the http and reply nodes had. */
static int max_overlap(const struct cp_serve_event *const *v, size_t n)
{
    int64_t *pts = cp_calloc(2 * n + 1, sizeof *pts);
    if (!pts)
        return 1;
    for (size_t i = 0; i < n; i++) {
        pts[2 * i] = v[i]->arrive_ns * 2 + 1;  /* odd: a start */
        pts[2 * i + 1] = v[i]->replied_ns * 2; /* even: an end, before a start at that time */
    }
    qsort(pts, 2 * n, sizeof *pts, cmp_i64);
    int cur = 0, best = 1;
    for (size_t i = 0; i < 2 * n; i++) {
        cur += (pts[i] & 1) ? 1 : -1;
        best = cur > best ? cur : best;
    }
    free(pts);
    return best;
}

/* Requests ordered by a key, then by their position. */
struct keyed {
    uint64_t key;
    size_t i;
};

static int cmp_keyed(const void *a, const void *b)
{
    const struct keyed *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

static uint64_t rel(int64_t t, int64_t base)
{
    return t > base ? (uint64_t)(t - base) : 0;
}

static uint64_t pos(int64_t x)
{
    return x > 0 ? (uint64_t)x : 0;
}

enum cp_status cp_serve_store_events(const char *trace_path, const struct cp_serve_trace_info *info,
                                     const struct cp_serve_event *ev, size_t n, int64_t *run_id,
                                     struct cp_diag *d)
{
    *run_id = -1;
    /* the requests that ran: answered 200 after a batch */
    const struct cp_serve_event **v = cp_calloc(n ? n : 1, sizeof *v);
    if (!v)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    size_t m = 0, errors = 0;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].code == 200 && ev[i].queued_ns && ev[i].run_end_ns && ev[i].replied_ns)
            v[m++] = &ev[i];
        else
            errors++;
    }
    if (m == 0) {
        free(v);
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s: nothing to record: no request was answered in the window (%zu "
                           "refused or failed)",
                           trace_path, errors);
    }
    int64_t base = INT64_MAX;
    for (size_t i = 0; i < m; i++)
        base = v[i]->arrive_ns < base ? v[i]->arrive_ns : base;
    struct cp_trace_store *s = NULL;
    enum cp_status st = cp_trace_store_open(trace_path, &s, d);
    if (st == CP_OK)
        st = cp_trace_store_set_host_meta(s, d);
    struct cp_trace_run_info ri = {
        .kind = info->kind ? info->kind : "serve",
        .model_path = info->model_path,
        .target = "cpu",
        .threads = info->threads,
        .batch = 1,
        .iterations = (int)m,
        .peak_rss_bytes = cp_peak_rss_bytes(),
    };
    if (st == CP_OK)
        st = cp_trace_store_begin_run(s, &ri, run_id, d);
    /* one sample per request: arrival to answer */
    uint64_t *lat = cp_calloc(m, sizeof *lat);
    if (st == CP_OK && !lat)
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; st == CP_OK && i < m; i++)
        lat[i] = rel(v[i]->replied_ns, v[i]->arrive_ns);
    if (st == CP_OK)
        st = cp_trace_store_add_samples(s, *run_id, 0, lat, m, d);
    free(lat);
    if (st == CP_OK)
        st = cp_trace_store_add_counter(s, *run_id, -1, "serve.refused_or_failed", (double)errors,
                                        0, d);
    if (st == CP_OK && info->sampling > 0)
        st = cp_trace_store_add_counter(s, *run_id, -1, "serve.sampling", info->sampling, 0, d);
    /* the nodes */
    int conns = max_overlap(v, m);
    char model_attrs[1400];
    json_t *ma = json_object();
    cp_json_set_str(ma, "model", info->model_path ? info->model_path : "");
    char *mt = ma ? json_dumps(ma, JSON_COMPACT) : NULL;
    json_decref(ma);
    snprintf(model_attrs, sizeof model_attrs, "%s", mt ? mt : "{}");
    free(mt);
    const struct cp_trace_pipeline_node nodes[3] = {
        {"http", "http_receive", conns, 1, 0, 0, "{}"},
        {"model", "inference", 1, info->max_batch > 0 ? info->max_batch : 1, 0, 0, model_attrs},
        {"reply", "http_reply", conns, 1, 0, 0, "{}"},
    };
    const struct cp_trace_pipeline_edge edges[2] = {{0, 1, false}, {1, 2, false}};
    if (st == CP_OK)
        st = cp_trace_store_add_pipeline(s, *run_id, nodes, 3, edges, 2, d);
    /* the calls: two per request, one per batch */
    struct cp_trace_node_call *calls = cp_calloc(3 * m, sizeof *calls);
    struct cp_trace_recorder *rec = cp_trace_recorder_create(3 * m);
    char *ids = cp_calloc(m, 24);
    if (st == CP_OK && (!calls || !rec || !ids))
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    size_t nc = 0;
    int32_t names[3] = {-1, -1, -1};
    for (int k = 0; st == CP_OK && k < 3; k++)
        names[k] = cp_trace_intern(rec, nodes[k].name);
    /* a connection's thread number: 1 + its rank among the connections */
    struct keyed *by = cp_calloc(m, sizeof *by);
    int32_t *thread_of = cp_calloc(m, sizeof *thread_of);
    if (st == CP_OK && (!by || !thread_of))
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; st == CP_OK && i < m; i++)
        by[i] = (struct keyed){v[i]->connection, i};
    if (st == CP_OK)
        qsort(by, m, sizeof *by, cmp_keyed);
    for (size_t i = 0, rank = 0; st == CP_OK && i < m; i++) {
        if (i && by[i].key != by[i - 1].key)
            rank++;
        thread_of[by[i].i] = (int32_t)(1 + rank % 30000);
    }
    for (size_t i = 0; st == CP_OK && i < m; i++) {
        const struct cp_serve_event *e = v[i];
        int32_t thread = thread_of[i];
        char *id = ids + i * 24;
        snprintf(id, 24, "%zu", i);
        calls[nc++] = (struct cp_trace_node_call){
            .node = 0,
            .worker = thread,
            .thread = thread,
            .seq = i,
            .batch = 1,
            .requests = id,
            .ready_ns = rel(e->arrive_ns, base),
            .start_ns = rel(e->arrive_ns, base),
            .end_ns = rel(e->queued_ns, base),
            .done_ns = rel(e->queued_ns, base),
            .cpu_ns = pos(e->parse_cpu_ns),
            .runq_ns = pos(e->parse_runq_ns),
        };
        cp_trace_record(rec, CP_LAYER_APP, names[0], -1, (int32_t)(i & 0x7fffffff),
                        rel(e->arrive_ns, base), rel(e->queued_ns, base), (int16_t)thread);
        calls[nc++] = (struct cp_trace_node_call){
            .node = 2,
            .worker = thread,
            .thread = thread,
            .seq = i,
            .batch = 1,
            .requests = id,
            .ready_ns = rel(e->run_end_ns, base),
            .start_ns = rel(e->woken_ns ? e->woken_ns : e->run_end_ns, base),
            .end_ns = rel(e->replied_ns, base),
            .done_ns = rel(e->replied_ns, base),
            .cpu_ns = pos(e->reply_cpu_ns),
            .runq_ns = pos(e->reply_runq_ns),
        };
        cp_trace_record(rec, CP_LAYER_APP, names[2], -1, (int32_t)(i & 0x7fffffff),
                        rel(e->woken_ns ? e->woken_ns : e->run_end_ns, base),
                        rel(e->replied_ns, base), (int16_t)thread);
    }
    /* the batches: the requests of each, in the order they were answered */
    struct cp_buf b;
    cp_buf_init(&b);
    char **lists = cp_calloc(m, sizeof *lists);
    if (st == CP_OK && !lists)
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    size_t n_lists = 0;
    for (size_t i = 0; st == CP_OK && i < m; i++)
        by[i] = (struct keyed){v[i]->batch_seq, i};
    if (st == CP_OK)
        qsort(by, m, sizeof *by, cmp_keyed);
    for (size_t g = 0, g_end; st == CP_OK && g < m; g = g_end) {
        const struct cp_serve_event *e = v[by[g].i];
        cp_buf_reset(&b);
        for (g_end = g; g_end < m && by[g_end].key == by[g].key; g_end++)
            cp_buf_printf(&b, "%s%zu", b.len ? "," : "", by[g_end].i);
        if (cp_buf_status(&b) != CP_OK || !(lists[n_lists] = cp_strdup(b.data))) {
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            break;
        }
        calls[nc++] = (struct cp_trace_node_call){
            .node = 1,
            .worker = 0,
            .thread = 0,
            .seq = e->batch_seq,
            .batch = e->batch ? e->batch : 1,
            .depth = e->depth,
            .requests = lists[n_lists++],
            .ready_ns = rel(e->popped_ns, base),
            .start_ns = rel(e->run_start_ns, base),
            .end_ns = rel(e->run_end_ns, base),
            .done_ns = rel(e->run_end_ns, base),
            .wait_ns = pos(e->batch_wait_ns),
            .cpu_ns = pos(e->batch_cpu_ns),
            .runq_ns = pos(e->batch_runq_ns),
        };
        cp_trace_record(rec, CP_LAYER_APP, names[1], -1, (int32_t)(by[g].i & 0x7fffffff),
                        rel(e->run_start_ns, base), rel(e->run_end_ns, base), 0);
    }
    cp_buf_release(&b);
    if (st == CP_OK)
        st = cp_trace_store_add_node_calls(s, *run_id, calls, nc, d);
    if (st == CP_OK)
        st = cp_trace_store_add_events(s, *run_id, rec, d);
    for (size_t i = 0; lists && i < n_lists; i++)
        free(lists[i]);
    free(lists);
    free(by);
    free(thread_of);
    free(ids);
    free(calls);
    cp_trace_recorder_free(rec);
    free(v);
    if (st != CP_OK && s && *run_id >= 0) {
        struct cp_diag ignored;
        cp_diag_init(&ignored);
        (void)cp_trace_store_delete_run(s, *run_id, &ignored);
        *run_id = -1;
    }
    cp_trace_store_close(s);
    return st;
}
