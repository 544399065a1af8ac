/* A flow served (docs/serving.md, "Serving a flow"): POST /v1/infer takes
 * the flow's source data (one file's bytes, raw or as the one part of a
 * multipart body) and answers what reaches its sink (a PNG, bytes, or a
 * tensor as .npy), through pipeline/'s service. Every node's busy time and
 * queue wait go to /metrics; a monitor's deep trace records every node
 * call of the flow. */
#include "serve/serve_internal.h"
#include "core/json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void on_call(void *ctx, const struct cp_flow_call_info *c)
{
    struct server *sv = ctx;
    size_t node = c->node;
    if (node >= sv->n_flow_nodes)
        return;
    if (sv->hooks && sv->hooks->on_node_call)
        sv->hooks->on_node_call(sv->hooks->ctx, c);
    double s = (double)c->busy_ns / 1e9;
    pthread_mutex_lock(&sv->m.mu);
    size_t b = 0;
    while (b < N_LAT && s > SV_LAT_BOUNDS[b])
        b++;
    sv->flow_bucket[node][b]++;
    sv->flow_sum[node] += s;
    sv->flow_count[node]++;
    pthread_mutex_unlock(&sv->m.mu);
}

/* Start and end the deep recording a monitor asks for. */
static void *watcher_main(void *arg)
{
    struct server *sv = arg;
    const struct cp_serve_hooks *h = sv->hooks;
    pthread_mutex_lock(&sv->mu);
    while (sv->watching) {
        pthread_mutex_unlock(&sv->mu);
        bool wanted = h->kernels_wanted(h->ctx);
        if (wanted && !sv->flow_recording) {
            cp_flow_service_record_begin(sv->fs);
            sv->flow_recording = true;
        } else if (!wanted && sv->flow_recording) {
            h->on_flow_recorded(h->ctx, sv->fs);
            sv->flow_recording = false;
        }
        struct timespec ts = {0, 100000000};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&sv->mu);
    }
    pthread_mutex_unlock(&sv->mu);
    if (sv->flow_recording)
        h->on_flow_recorded(h->ctx, sv->fs);
    sv->flow_recording = false;
    return NULL;
}

enum cp_status sv_flow_open(struct server *sv, struct cp_diag *d)
{
    enum cp_status st = cp_flow_load(sv->o->model_path, &sv->flow, d);
    if (st != CP_OK)
        return st;
    size_t n = cp_flow_n_nodes(sv->flow);
    sv->n_flow_nodes = n;
    sv->flow_bucket = cp_calloc(n ? n : 1, sizeof *sv->flow_bucket);
    sv->flow_sum = cp_calloc(n ? n : 1, sizeof *sv->flow_sum);
    sv->flow_count = cp_calloc(n ? n : 1, sizeof *sv->flow_count);
    if (!sv->flow_bucket || !sv->flow_sum || !sv->flow_count)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    if (sv->o->inject_node && sv->o->inject_ms > 0 &&
        cp_flow_node_index(sv->flow, sv->o->inject_node) < 0)
        return cp_diag_set(d, CP_ERR_USAGE, "--inject-slowdown: %s has no node '%.100s'",
                           sv->o->model_path, sv->o->inject_node);
    st = cp_flow_service_start(sv->flow, on_call, sv, &sv->fs, d);
    /* warm up with the source's first file: the models' first runs, the
     * answer's shape */
    for (int k = 0; st == CP_OK && k < CP_SERVE_WARMUP_RUNS; k++) {
        uint8_t *data = NULL;
        size_t len = 0;
        char name[256];
        struct cp_flow_answer a;
        st = cp_flow_service_sample(sv->fs, &data, &len, name, d);
        if (st == CP_OK)
            st = cp_flow_service_call(sv->fs, name, data, len, &a, d);
        if (st == CP_OK)
            cp_flow_answer_release(&a);
    }
    if (st != CP_OK) {
        struct cp_diag inner = *d;
        cp_diag_init(d);
        return cp_diag_set(d, inner.status,
                           "%s: warming the flow up with its source's first file: %s",
                           sv->o->model_path, inner.msg);
    }
    pthread_mutex_lock(&sv->m.mu);
    for (size_t i = 0; i < n; i++) {
        memset(sv->flow_bucket[i], 0, sizeof sv->flow_bucket[i]);
        sv->flow_sum[i] = 0;
        sv->flow_count[i] = 0;
    }
    pthread_mutex_unlock(&sv->m.mu);
    sv->max_body = sv->o->max_body ? sv->o->max_body : (size_t)64 << 20;
    const struct cp_serve_hooks *h = sv->hooks;
    if (h && h->kernels_wanted && h->on_flow_recorded) {
        sv->watching = true;
        if (pthread_create(&sv->watcher, NULL, watcher_main, sv) != 0) {
            sv->watching = false;
            return cp_diag_set(d, CP_ERR_NOMEM, "cannot start the flow's recording thread");
        }
    }
    return CP_OK;
}

void sv_flow_close(struct server *sv)
{
    pthread_mutex_lock(&sv->mu);
    bool joined = sv->watching;
    sv->watching = false;
    pthread_mutex_unlock(&sv->mu);
    if (joined)
        pthread_join(sv->watcher, NULL);
    cp_flow_service_stop(sv->fs);
    sv->fs = NULL;
    cp_flow_free(sv->flow);
    sv->flow = NULL;
    free(sv->flow_bucket);
    free(sv->flow_sum);
    free(sv->flow_count);
}

char *sv_flow_model_json(struct server *sv)
{
    json_t *j = json_object(), *nodes = json_array();
    const char *source = NULL, *sink = NULL;
    for (size_t i = 0; i < sv->n_flow_nodes; i++) {
        struct cp_flow_node_info ni;
        cp_flow_node(sv->flow, i, &ni);
        json_t *o = json_object();
        cp_json_set_str(o, "name", ni.name);
        cp_json_set_str(o, "flowunit", ni.flowunit);
        cp_json_set_int(o, "workers", ni.workers);
        cp_json_set_int(o, "batch_size", ni.batch_size);
        cp_json_set_int(o, "queue_size", ni.queue_size);
        json_array_append_new(nodes, o);
        if (strcmp(ni.flowunit, "file_source") == 0)
            source = ni.name;
        if (strcmp(ni.flowunit, "file_sink") == 0)
            sink = ni.name;
    }
    cp_json_set_str(j, "flow", sv->o->model_path);
    cp_json_set_str(j, "name", cp_flow_name(sv->flow));
    json_object_set_new(j, "nodes", nodes);
    json_t *req = json_object();
    cp_json_set_str(req, "source", source ? source : "");
    cp_json_set_str(req, "form",
                    "the bytes of one file the source would read, as the body (or as the one "
                    "part of a multipart body); its name in the X-Cannprof-Name header");
    uint8_t *data = NULL;
    size_t len = 0;
    char name[256];
    struct cp_diag ignored;
    cp_diag_init(&ignored);
    if (cp_flow_service_sample(sv->fs, &data, &len, name, &ignored) == CP_OK) {
        cp_json_set_str(req, "sample", name);
        cp_json_set_int(req, "sample_bytes", (int64_t)len);
    }
    free(data);
    json_object_set_new(j, "request", req);
    cp_json_set_str(j, "answer", sink ? sink : "");
    char *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    return text;
}

enum MHD_Result sv_flow_infer(struct server *sv, struct MHD_Connection *mc, struct conn *c)
{
    struct cp_serve_event e = {.arrive_ns = c->t0, .connection = c->connection};
    uint8_t *data;
    size_t len;
    const char *name = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "X-Cannprof-Name");
    if (!name)
        name = MHD_lookup_connection_value(mc, MHD_GET_ARGUMENT_KIND, "name");
    char pname[256] = "";
    if (c->multipart) {
        if (c->n_parts != 1) {
            e.code = 400;
            enum MHD_Result r = sv_reply_error(
                sv, mc, 400, "a flow takes one part (the source's data); this body has %zu",
                c->n_parts);
            sv_emit(sv, &e);
            return r;
        }
        snprintf(pname, sizeof pname, "%s", c->part[0].name);
        len = c->part[0].data.len;
        data = len ? (uint8_t *)cp_buf_steal(&c->part[0].data) : cp_calloc(1, 1);
    } else {
        len = c->body.len;
        data = len ? (uint8_t *)cp_buf_steal(&c->body) : cp_calloc(1, 1);
    }
    if (!name)
        name = pname[0] ? pname : "request";
    struct cp_thread_clock k1;
    cp_thread_clock_end(&k1);
    e.parse_cpu_ns = k1.cpu_ns - c->k0.cpu_ns;
    e.parse_runq_ns = k1.runq_ns - c->k0.runq_ns;
    if (!data) {
        e.code = 500;
        enum MHD_Result r = sv_reply_error(sv, mc, 500, "out of memory");
        sv_emit(sv, &e);
        return r;
    }
    /* the flow is the "model" node: queued to its answer */
    e.queued_ns = e.popped_ns = e.run_start_ns = sv_now_ns();
    /* the fire drill: the flow's answer comes that much later (a node's
     * calls are slowed by the service itself) */
    if (sv->o->inject_ms > 0 && !sv->o->inject_node &&
        e.queued_ns - __atomic_load_n(&sv->started_ns, __ATOMIC_ACQUIRE) >=
            (int64_t)(sv->o->inject_after_s * 1e9)) {
        struct timespec ts = {(time_t)(sv->o->inject_ms / 1000),
                              (long)(fmod(sv->o->inject_ms, 1000) * 1e6)};
        nanosleep(&ts, NULL);
    }
    struct cp_flow_answer a;
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = cp_flow_service_call(sv->fs, name, data, len, &a, &d);
    e.run_end_ns = e.woken_ns = sv_now_ns();
    e.batch = 1;
    e.batch_seq = __atomic_add_fetch(&sv->batch_seq, 1, __ATOMIC_RELAXED);
    enum MHD_Result r;
    if (st != CP_OK) {
        e.code = st == CP_ERR_IO ? 503 : st == CP_ERR_NOMEM || st == CP_ERR_INTERNAL ? 500 : 400;
        r = sv_reply_error(sv, mc, (unsigned)e.code, "%.500s", d.msg);
    } else {
        const char *type = a.npy ? "application/x-npy"
                           : a.len >= 8 && memcmp(a.bytes, "\x89PNG\r\n\x1a\n", 8) == 0
                               ? "image/png"
                               : "application/octet-stream";
        struct MHD_Response *resp =
            MHD_create_response_from_buffer(a.len, a.bytes, MHD_RESPMEM_MUST_FREE);
        if (!resp) {
            cp_flow_answer_release(&a);
            e.code = 500;
            r = MHD_NO;
        } else {
            a.bytes = NULL;
            MHD_add_response_header(resp, "Content-Type", type);
            MHD_add_response_header(resp, "X-Cannprof-Name", a.name);
            sv_note_latency(sv, c->t0, 200);
            r = MHD_queue_response(mc, 200, resp);
            MHD_destroy_response(resp);
            e.code = 200;
        }
    }
    sv_emit(sv, &e);
    return r;
}

void sv_flow_metrics(struct server *sv, struct cp_buf *b)
{
    cp_buf_puts(b, "# HELP cannprof_flow_node_busy_seconds A served flow's node calls: the time "
                   "each call processed its batch.\n"
                   "# TYPE cannprof_flow_node_busy_seconds histogram\n");
    pthread_mutex_lock(&sv->m.mu);
    for (size_t k = 0; k < sv->n_flow_nodes; k++) {
        const char *name = cp_flow_service_node_name(sv->fs, k);
        uint64_t acc = 0;
        for (size_t i = 0; i <= N_LAT; i++) {
            acc += sv->flow_bucket[k][i];
            if (i < N_LAT)
                cp_buf_printf(
                    b, "cannprof_flow_node_busy_seconds_bucket{node=\"%s\",le=\"%g\"} %llu\n", name,
                    SV_LAT_BOUNDS[i], (unsigned long long)acc);
            else
                cp_buf_printf(b,
                              "cannprof_flow_node_busy_seconds_bucket{node=\"%s\",le=\"+Inf\"} "
                              "%llu\n",
                              name, (unsigned long long)acc);
        }
        cp_buf_printf(b,
                      "cannprof_flow_node_busy_seconds_sum{node=\"%s\"} %.9g\n"
                      "cannprof_flow_node_busy_seconds_count{node=\"%s\"} %llu\n",
                      name, sv->flow_sum[k], name, (unsigned long long)sv->flow_count[k]);
    }
    pthread_mutex_unlock(&sv->m.mu);
}

enum MHD_Result sv_flow_sample(struct server *sv, struct MHD_Connection *mc)
{
    uint8_t *data = NULL;
    size_t len = 0;
    char name[256];
    struct cp_diag d;
    cp_diag_init(&d);
    if (cp_flow_service_sample(sv->fs, &data, &len, name, &d) != CP_OK)
        return sv_reply_error(sv, mc, 500, "%.500s", d.msg);
    struct MHD_Response *r = MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(data);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "application/octet-stream");
    MHD_add_response_header(r, "X-Cannprof-Name", name);
    enum MHD_Result ret = MHD_queue_response(mc, 200, r);
    MHD_destroy_response(r);
    return ret;
}
