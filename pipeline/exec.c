/* The executor (docs/pipelines.md): every node has `workers` threads
 * and one bounded input queue; a worker pops up to batch_size items
 * (waiting up to batch_window_ms for the batch to fill), runs its unit,
 * and pushes each item to every edge out of the node, blocking while a
 * queue is full. A loop node sends an item into its body until it has
 * gone round count times, then out. The run ends when the sources have
 * sent everything and no item is left anywhere; a unit that fails stops
 * it. Every invocation is recorded with its wait, its blocked time and
 * its thread's CPU, run-queue and off-CPU time. */
#include "pipeline/pipeline_internal.h"
#include "stats/stats.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pl_call {
    uint32_t node, worker, batch, depth;
    int thread;
    uint64_t seq;
    int64_t wait_ns, ready_ns, start_ns, end_ns, done_ns, blocked_ns, cpu_ns, runq_ns;
    uint64_t req_off; /* into the worker's request list */
};

struct pl_exec;

struct pl_worker {
    struct pl_exec *x;
    size_t node;
    int worker, thread;
    struct pl_unit_ctx *u;
    struct cp_trace_recorder *rec; /* the model layer (inference), or NULL */
    pthread_t th;
    bool started;
    struct pl_call *calls;
    size_t n_calls, cap_calls;
    uint64_t *reqs; /* each call's request ids, back to back */
    size_t n_reqs, cap_reqs;
    enum cp_status st;
    struct cp_diag d;
};

struct pl_exec {
    const struct cp_flow *f;
    struct pl_run_env env;
    struct pl_queue *q; /* a node's input queue */
    struct pl_worker *w;
    size_t n_w;
    atomic_llong live; /* items in queues or being processed */
    atomic_int sources_left;
    atomic_bool failed;
    atomic_ullong *seq;      /* per node: its next invocation number */
    int64_t t0;              /* the run's zero */
    pthread_mutex_t mu;      /* the request table and the first error */
    int64_t *emitted, *done; /* by request id; done 0: not completed */
    size_t cap_req;
    uint64_t n_done;
    struct cp_diag err;
    bool have_err;
};

static int64_t now_ns(void)
{
    return (int64_t)cp_clock_ns();
}

static void close_all(struct pl_exec *x)
{
    for (size_t i = 0; i < x->f->n_nodes; i++)
        pl_queue_close(&x->q[i]);
}

static void fail(struct pl_exec *x, const struct cp_diag *d)
{
    pthread_mutex_lock(&x->mu);
    if (!x->have_err) {
        x->err = *d;
        x->have_err = true;
    }
    pthread_mutex_unlock(&x->mu);
    atomic_store(&x->failed, true);
    close_all(x);
}

/* The run is over when nothing is left to send or to process. */
static void maybe_finish(struct pl_exec *x)
{
    if (atomic_load(&x->sources_left) == 0 && atomic_load(&x->live) == 0)
        close_all(x);
}

static bool note_request(struct pl_exec *x, uint64_t id, int64_t emitted, int64_t done)
{
    pthread_mutex_lock(&x->mu);
    bool ok = true;
    if (id >= x->cap_req) {
        size_t nc = x->cap_req ? x->cap_req : 1024;
        while (nc <= id)
            nc *= 2;
        int64_t *e = cp_realloc_array(x->emitted, nc, sizeof *e);
        if (e)
            x->emitted = e;
        int64_t *dn = e ? cp_realloc_array(x->done, nc, sizeof *dn) : NULL;
        if (dn) {
            x->done = dn;
            memset(x->emitted + x->cap_req, 0, (nc - x->cap_req) * sizeof *e);
            memset(x->done + x->cap_req, 0, (nc - x->cap_req) * sizeof *dn);
            x->cap_req = nc;
        } else {
            ok = false;
        }
    }
    if (ok) {
        if (emitted)
            x->emitted[id] = emitted;
        if (done) {
            if (x->done[id] == 0)
                x->n_done++;
            /* a request that reaches several sinks is done at the last */
            if (done > x->done[id])
                x->done[id] = done;
        }
    }
    pthread_mutex_unlock(&x->mu);
    return ok;
}

/* Send an item along edge e (a reference of its payload each). */
static void push_edge(struct pl_exec *x, size_t e, struct pl_item *it, int64_t *blocked)
{
    const struct pl_edge *ed = &x->f->edges[e];
    atomic_fetch_add(&x->live, 1);
    int64_t b = 0;
    bool ok =
        ed->back ? pl_queue_push_force(&x->q[ed->to], it) : pl_queue_push(&x->q[ed->to], it, &b);
    *blocked += b;
    if (!ok) {
        pl_payload_unref(it->p);
        atomic_fetch_sub(&x->live, 1);
    }
}

/* Route a processed item out of node i. */
static void route(struct pl_exec *x, size_t i, struct pl_item *it, int64_t *blocked)
{
    const struct pl_node *n = &x->f->nodes[i];
    if (n->unit == PL_LOOP) {
        bool again = it->loop_iter < n->loop_count;
        it->loop_iter = again ? it->loop_iter + 1 : 0;
        push_edge(x, (size_t)(again ? n->body_edge : n->exit_edge), it, blocked);
        return;
    }
    if (n->n_out == 0) {
        /* a sink, or a node whose outputs go nowhere: the request is done */
        if (!note_request(x, it->request, 0, now_ns())) {
            struct cp_diag d;
            cp_diag_init(&d);
            cp_diag_set(&d, CP_ERR_NOMEM, "out of memory");
            fail(x, &d);
        }
        pl_payload_unref(it->p);
        return;
    }
    for (size_t k = 1; k < n->n_out; k++)
        pl_payload_ref(it->p);
    for (size_t k = 0; k < n->n_out; k++)
        push_edge(x, n->out[k], it, blocked);
}

static bool record_call(struct pl_worker *w, struct pl_call *c, const struct pl_item *items,
                        size_t n)
{
    if (w->n_calls == w->cap_calls) {
        size_t nc = w->cap_calls ? w->cap_calls * 2 : 256;
        struct pl_call *g = cp_realloc_array(w->calls, nc, sizeof *g);
        if (!g)
            return false;
        w->calls = g;
        w->cap_calls = nc;
    }
    while (w->n_reqs + n > w->cap_reqs) {
        size_t nc = w->cap_reqs ? w->cap_reqs * 2 : 1024;
        uint64_t *g = cp_realloc_array(w->reqs, nc, sizeof *g);
        if (!g)
            return false;
        w->reqs = g;
        w->cap_reqs = nc;
    }
    c->req_off = w->n_reqs;
    for (size_t i = 0; i < n; i++)
        w->reqs[w->n_reqs++] = items[i].request;
    w->calls[w->n_calls++] = *c;
    return true;
}

static void *worker_main(void *arg)
{
    struct pl_worker *w = arg;
    struct pl_exec *x = w->x;
    const struct pl_node *n = &x->f->nodes[w->node];
    size_t max = (size_t)n->batch_size;
    long window_ms = 0;
    const char *wv = pl_attr(n, "batch_window_ms");
    if (wv)
        window_ms = strtol(wv, NULL, 10);
    struct pl_item *items = cp_calloc(max, sizeof *items);
    cp_diag_init(&w->d);
    if (!items) {
        cp_diag_set(&w->d, CP_ERR_NOMEM, "out of memory");
        fail(x, &w->d);
        if (n->unit == PL_FILE_SOURCE) {
            atomic_fetch_sub(&x->sources_left, 1);
            maybe_finish(x);
        }
        return NULL;
    }
    bool source = n->unit == PL_FILE_SOURCE;
    for (;;) {
        struct pl_call c = {
            .node = (uint32_t)w->node, .worker = (uint32_t)w->worker, .thread = w->thread};
        int64_t t_wait = now_ns();
        size_t got = 0, depth = 0;
        if (source) {
            got = 0;
        } else {
            got = pl_queue_pop(&x->q[w->node], items, max, window_ms * 1000000, &depth);
            if (got == 0)
                break; /* closed: the run is over or failed */
        }
        c.ready_ns = now_ns();
        c.wait_ns = source ? 0 : c.ready_ns - t_wait;
        c.depth = (uint32_t)depth;
        struct cp_thread_clock k0, k1;
        cp_thread_clock_begin(&k0);
        c.start_ns = now_ns();
        size_t n_out = source ? max : got;
        if (source && atomic_load(&x->failed))
            n_out = 0;
        else
            w->st = pl_unit_process(w->u, items, got, &n_out, &w->d);
        c.end_ns = now_ns();
        cp_thread_clock_end(&k1);
        if (w->st != CP_OK) {
            for (size_t i = 0; i < got; i++)
                pl_payload_unref(items[i].p);
            atomic_fetch_sub(&x->live, (long long)got);
            fail(x, &w->d);
            break;
        }
        if (source && n_out == 0)
            break; /* sent everything */
        size_t count = source ? n_out : got;
        for (size_t i = 0; source && i < count; i++)
            if (!note_request(x, items[i].request, items[i].emitted_ns, 0)) {
                cp_diag_set(&w->d, CP_ERR_NOMEM, "out of memory");
                fail(x, &w->d);
            }
        c.batch = (uint32_t)count;
        c.cpu_ns = k1.cpu_ns - k0.cpu_ns;
        c.runq_ns = k1.runq_ns - k0.runq_ns;
        c.seq = atomic_fetch_add(&x->seq[w->node], 1);
        /* the request ids before routing hands the items on */
        struct pl_item ids[64];
        size_t n_ids = count < 64 ? count : 64;
        memcpy(ids, items, n_ids * sizeof *ids);
        int64_t blocked = 0;
        for (size_t i = 0; i < count; i++)
            route(x, w->node, &items[i], &blocked);
        c.done_ns = now_ns();
        c.blocked_ns = blocked;
        if (!record_call(w, &c, count <= 64 ? ids : items, count <= 64 ? count : 0)) {
            cp_diag_set(&w->d, CP_ERR_NOMEM, "out of memory");
            fail(x, &w->d);
        }
        if (!source) {
            atomic_fetch_sub(&x->live, (long long)got);
            maybe_finish(x);
        }
    }
    if (source) {
        atomic_fetch_sub(&x->sources_left, 1);
        maybe_finish(x);
    }
    free(items);
    return NULL;
}

/* ---- the run's figures ---------------------------------------------------------------- */

static void summarise(struct pl_exec *x, struct cp_flow_run_result *r)
{
    const struct cp_flow *f = x->f;
    r->n_nodes = f->n_nodes;
    r->nodes = cp_calloc(f->n_nodes ? f->n_nodes : 1, sizeof *r->nodes);
    for (size_t i = 0; r->nodes && i < f->n_nodes; i++)
        snprintf(r->nodes[i].name, sizeof r->nodes[i].name, "%s", f->nodes[i].name);
    for (size_t k = 0; r->nodes && k < x->n_w; k++) {
        const struct pl_worker *w = &x->w[k];
        struct cp_flow_node_stats *s = &r->nodes[w->node];
        for (size_t i = 0; i < w->n_calls; i++) {
            const struct pl_call *c = &w->calls[i];
            double busy = (double)(c->end_ns - c->start_ns) / 1e9;
            double cpu = (double)c->cpu_ns / 1e9, runq = (double)c->runq_ns / 1e9;
            s->calls++;
            s->items += c->batch;
            s->busy_s += busy;
            s->cpu_s += cpu;
            s->runq_s += runq;
            s->offcpu_s += busy - cpu - runq > 0 ? busy - cpu - runq : 0;
            s->starved_s += (double)c->wait_ns / 1e9;
            s->blocked_s += (double)c->blocked_ns / 1e9;
            s->max_depth = c->depth > s->max_depth ? c->depth : s->max_depth;
        }
    }
    /* requests: sent, done, latency */
    int64_t first = 0, last = 0;
    size_t n = 0;
    double *lat = cp_calloc(x->cap_req ? x->cap_req : 1, sizeof *lat);
    for (size_t id = 0; id < x->cap_req; id++) {
        if (x->emitted[id])
            r->sent++;
        if (x->emitted[id] && x->done[id]) {
            if (lat)
                lat[n++] = (double)(x->done[id] - x->emitted[id]) / 1e6;
            first = !first || x->emitted[id] < first ? x->emitted[id] : first;
            last = x->done[id] > last ? x->done[id] : last;
        }
    }
    r->done = n;
    r->seconds = n ? (double)(last - first) / 1e9 : 0;
    r->throughput = r->seconds > 0 ? (double)n / r->seconds : 0;
    struct cp_summary sum;
    struct cp_diag ignored;
    cp_diag_init(&ignored);
    if (lat && n && cp_stats_summary(lat, n, &sum, &ignored) == CP_OK) {
        r->latency_mean_ms = sum.mean;
        r->latency_p50_ms = sum.median;
        r->latency_p99_ms = sum.p99;
    }
    free(lat);
}

void cp_flow_run_result_release(struct cp_flow_run_result *r)
{
    free(r->nodes);
    memset(r, 0, sizeof *r);
    r->run_id = -1;
}

/* ---- the trace ----------------------------------------------------------------------- */

/* The node's keys as a JSON object. */
static char *attrs_json(const struct pl_node *n)
{
    json_t *o = json_object();
    for (size_t i = 0; o && i < n->n_attrs; i++)
        json_object_set_new(o, n->attrs[i].key, json_string(n->attrs[i].value));
    char *t = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(o);
    return t;
}

/* Write the run: a run of kind "pipeline" whose samples are the requests'
 * latencies (iteration = request id), the flow's nodes and edges, every
 * node call, an application-layer event per call (a track per worker
 * thread) and the model layer of the inference workers. */
static enum cp_status record_run(struct pl_exec *x, const struct cp_flow_run_opts *o,
                                 int64_t *run_id, struct cp_diag *d)
{
    const struct cp_flow *f = x->f;
    struct cp_trace_store *s = NULL;
    enum cp_status st = cp_trace_store_open(o->trace_path, &s, d);
    if (st != CP_OK)
        return st;
    if ((st = cp_trace_store_set_host_meta(s, d)) != CP_OK) {
        cp_trace_store_close(s);
        return st;
    }
    size_t sent = 0;
    while (sent < x->cap_req && x->emitted[sent])
        sent++;
    struct cp_trace_run_info info = {
        .kind = "pipeline",
        .model_path = f->path,
        .target = "cpu",
        .batch = 1,
        .iterations = (int)sent,
        .peak_rss_bytes = cp_peak_rss_bytes(),
    };
    st = cp_trace_store_begin_run(s, &info, run_id, d);
    uint64_t *lat = cp_calloc(sent ? sent : 1, sizeof *lat);
    if (st == CP_OK && !lat)
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; st == CP_OK && i < sent; i++)
        lat[i] = (uint64_t)(x->done[i] - x->emitted[i]);
    if (st == CP_OK && sent)
        st = cp_trace_store_add_samples(s, *run_id, 0, lat, sent, d);
    free(lat);
    /* the flow */
    struct cp_trace_pipeline_node *nodes = cp_calloc(f->n_nodes, sizeof *nodes);
    struct cp_trace_pipeline_edge *edges = cp_calloc(f->n_edges ? f->n_edges : 1, sizeof *edges);
    if (st == CP_OK && (!nodes || !edges))
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; st == CP_OK && i < f->n_nodes; i++) {
        const struct pl_node *n = &f->nodes[i];
        nodes[i] = (struct cp_trace_pipeline_node){n->name,       pl_unit_name(n->unit), n->workers,
                                                   n->batch_size, n->queue_size,         n->line,
                                                   attrs_json(n)};
    }
    for (size_t e = 0; st == CP_OK && e < f->n_edges; e++)
        edges[e] = (struct cp_trace_pipeline_edge){(int32_t)f->edges[e].from,
                                                   (int32_t)f->edges[e].to, f->edges[e].back};
    if (st == CP_OK)
        st = cp_trace_store_add_pipeline(s, *run_id, nodes, f->n_nodes, edges, f->n_edges, d);
    for (size_t i = 0; nodes && i < f->n_nodes; i++)
        free((char *)nodes[i].attrs_json);
    free(nodes);
    free(edges);
    /* the calls, and their events */
    size_t n_calls = 0;
    for (size_t k = 0; k < x->n_w; k++)
        n_calls += x->w[k].n_calls;
    struct cp_trace_node_call *calls = cp_calloc(n_calls ? n_calls : 1, sizeof *calls);
    struct cp_trace_recorder *rec = cp_trace_recorder_create(n_calls ? n_calls : 1);
    if (st == CP_OK && (!calls || !rec))
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    size_t m = 0;
    for (size_t k = 0; st == CP_OK && k < x->n_w; k++) {
        const struct pl_worker *w = &x->w[k];
        int32_t name = cp_trace_intern(rec, f->nodes[w->node].name);
        for (size_t i = 0; st == CP_OK && i < w->n_calls; i++) {
            const struct pl_call *c = &w->calls[i];
            struct cp_buf b;
            cp_buf_init(&b);
            for (size_t r = 0; r < c->batch && c->req_off + r < w->n_reqs; r++)
                cp_buf_printf(&b, "%s%llu", r ? "," : "",
                              (unsigned long long)w->reqs[c->req_off + r]);
            if (cp_buf_status(&b) != CP_OK || name < 0) {
                cp_buf_release(&b);
                st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
                break;
            }
            calls[m++] = (struct cp_trace_node_call){
                .node = (int32_t)c->node,
                .worker = (int32_t)c->worker,
                .thread = c->thread,
                .seq = c->seq,
                .batch = c->batch,
                .depth = c->depth,
                .requests = b.data ? cp_buf_steal(&b) : cp_strdup(""),
                .ready_ns = (uint64_t)c->ready_ns,
                .start_ns = (uint64_t)c->start_ns,
                .end_ns = (uint64_t)c->end_ns,
                .done_ns = (uint64_t)c->done_ns,
                .wait_ns = (uint64_t)c->wait_ns,
                .blocked_ns = (uint64_t)c->blocked_ns,
                .cpu_ns = (uint64_t)(c->cpu_ns > 0 ? c->cpu_ns : 0),
                .runq_ns = (uint64_t)(c->runq_ns > 0 ? c->runq_ns : 0),
            };
            cp_buf_release(&b);
            int32_t it = c->batch && c->req_off < w->n_reqs
                             ? (int32_t)(w->reqs[c->req_off] & 0x7fffffff)
                             : -1;
            cp_trace_record(rec, CP_LAYER_APP, name, -1, it, (uint64_t)c->start_ns,
                            (uint64_t)c->end_ns, c->thread);
        }
    }
    if (st == CP_OK)
        st = cp_trace_store_add_node_calls(s, *run_id, calls, m, d);
    if (st == CP_OK)
        st = cp_trace_store_add_events(s, *run_id, rec, d);
    for (size_t i = 0; calls && i < m; i++)
        free((char *)calls[i].requests);
    free(calls);
    cp_trace_recorder_free(rec);
    /* the model layer under the inference nodes */
    for (size_t k = 0; st == CP_OK && k < x->n_w; k++)
        if (x->w[k].rec)
            st = cp_trace_store_add_events(s, *run_id, x->w[k].rec, d);
    if (st != CP_OK && *run_id >= 0) {
        struct cp_diag ignored;
        cp_diag_init(&ignored);
        (void)cp_trace_store_delete_run(s, *run_id, &ignored);
        *run_id = -1;
    }
    cp_trace_store_close(s);
    return st;
}

enum cp_status cp_flow_run(const struct cp_flow *f, const struct cp_flow_run_opts *o,
                           struct cp_flow_run_result *r, struct cp_diag *d)
{
    memset(r, 0, sizeof *r);
    r->run_id = -1;
    if (o->requests == 0 && !(o->duration_s > 0))
        return cp_diag_set(d, CP_ERR_USAGE, "a run needs --requests N or --duration D");
    struct pl_exec x;
    memset(&x, 0, sizeof x);
    x.f = f;
    x.env.flow = f;
    x.env.requests = o->requests;
    atomic_init(&x.env.next_request, 0);
    atomic_init(&x.live, 0);
    atomic_init(&x.failed, false);
    pthread_mutex_init(&x.mu, NULL);
    enum cp_status st = CP_OK;
    x.q = cp_calloc(f->n_nodes, sizeof *x.q);
    x.seq = cp_calloc(f->n_nodes, sizeof *x.seq);
    size_t n_w = 0;
    for (size_t i = 0; i < f->n_nodes; i++)
        n_w += (size_t)f->nodes[i].workers;
    x.w = cp_calloc(n_w ? n_w : 1, sizeof *x.w);
    if (!x.q || !x.seq || !x.w)
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; st == CP_OK && i < f->n_nodes; i++)
        st = pl_queue_init(&x.q[i], (size_t)f->nodes[i].queue_size, d);
    /* open every unit before any thread starts: a model that does not
     * load stops the run before a request is sent */
    int sources = 0;
    for (size_t o_i = 0; st == CP_OK && o_i < f->n_nodes; o_i++) {
        size_t i = f->order[o_i];
        const struct pl_node *n = &f->nodes[i];
        for (int k = 0; st == CP_OK && k < n->workers; k++) {
            struct pl_worker *w = &x.w[x.n_w];
            w->x = &x;
            w->node = i;
            w->worker = k;
            w->thread = (int)x.n_w + 1;
            if (n->unit == PL_INFERENCE && o->model_layer && o->trace_path &&
                !(w->rec = cp_trace_recorder_create(4096)))
                st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            if (st == CP_OK)
                st = pl_unit_open(f, i, k, &x.env, w->rec, &w->u, d);
            x.n_w++;
            if (n->unit == PL_FILE_SOURCE)
                sources++;
        }
    }
    atomic_init(&x.sources_left, sources);
    if (st == CP_OK) {
        x.t0 = now_ns();
        x.env.deadline_ns = o->duration_s > 0 ? x.t0 + (int64_t)(o->duration_s * 1e9) : 0;
        for (size_t k = 0; k < x.n_w; k++) {
            if (pthread_create(&x.w[k].th, NULL, worker_main, &x.w[k]) != 0) {
                cp_diag_set(d, CP_ERR_NOMEM, "cannot start a worker thread");
                fail(&x, d);
                /* the sources that never started never finish */
                for (size_t j = k; j < x.n_w; j++)
                    if (f->nodes[x.w[j].node].unit == PL_FILE_SOURCE)
                        atomic_fetch_sub(&x.sources_left, 1);
                break;
            }
            x.w[k].started = true;
        }
        for (size_t k = 0; k < x.n_w; k++)
            if (x.w[k].started)
                pthread_join(x.w[k].th, NULL);
        if (x.have_err)
            st = cp_diag_set(d, x.err.status, "%s", x.err.msg);
    }
    if (st == CP_OK)
        summarise(&x, r);
    if (st == CP_OK && r->done < r->sent)
        st = cp_diag_set(d, CP_ERR_INTERNAL, "%llu of %llu requests did not complete",
                         (unsigned long long)(r->sent - r->done), (unsigned long long)r->sent);
    if (st == CP_OK && o->trace_path)
        st = record_run(&x, o, &r->run_id, d);
    for (size_t k = 0; k < x.n_w; k++) {
        pl_unit_close(x.w[k].u);
        cp_trace_recorder_free(x.w[k].rec);
        free(x.w[k].calls);
        free(x.w[k].reqs);
    }
    for (size_t i = 0; x.q && i < f->n_nodes; i++)
        pl_queue_destroy(&x.q[i]);
    free(x.q);
    free(x.seq);
    free(x.w);
    free(x.emitted);
    free(x.done);
    pthread_mutex_destroy(&x.mu);
    return st;
}
