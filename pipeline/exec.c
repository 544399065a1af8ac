/* The executor (docs/pipelines.md): every node has `workers` threads
 * and one bounded input queue; a worker pops up to batch_size items
 * (waiting up to batch_window_ms for the batch to fill), runs its unit,
 * and pushes each item to every edge out of the node, blocking while a
 * queue is full. A loop node sends an item into its body until it has
 * gone round count times, then out. The run ends when the sources have
 * sent everything and no item is left anywhere; a unit that fails stops
 * it. Every invocation is recorded with its wait, its blocked time and
 * its thread's CPU, run-queue and off-CPU time. */
#include "pipeline/exec_internal.h"
#include "stats/stats.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t now_ns(void)
{
    return (int64_t)cp_clock_ns();
}

void pl_exec_close_queues(struct pl_exec *x)
{
    for (size_t i = 0; i < x->f->n_nodes; i++)
        pl_queue_close(&x->q[i]);
    if (x->service)
        pl_queue_close(&x->inbox);
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
    pl_exec_close_queues(x);
}

/* The run is over when nothing is left to send or to process. */
static void maybe_finish(struct pl_exec *x)
{
    if (atomic_load(&x->sources_left) == 0 && atomic_load(&x->live) == 0)
        pl_exec_close_queues(x);
}

static bool note_request(struct pl_exec *x, uint64_t id, int64_t emitted, int64_t done)
{
    /* serving: only the requests of a recording window are kept */
    if (x->service && (!atomic_load(&x->recording) || id < x->rec_base))
        return true;
    id -= x->rec_base;
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
        if (x->service)
            pl_service_answer(x, it->request, it->p, NULL); /* the caller's now */
        else
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

/* Serving: whether a call runs with its model layer on (the service is
 * recording and all its requests came in the window); counted, so that
 * record_end reads the recorders only once no such call is running. */
static bool traced_begin(struct pl_exec *x, const struct pl_item *items, size_t n)
{
    /* most calls of a server run outside a deep trace: no lock for them
     * (a recording that begins just after this check misses this call's
     * kernels only) */
    if (!atomic_load(&x->recording))
        return false;
    pthread_mutex_lock(&x->mu);
    bool on = atomic_load(&x->recording);
    for (size_t i = 0; on && i < n; i++)
        on = items[i].request >= x->rec_base;
    if (on)
        x->traced_calls++;
    pthread_mutex_unlock(&x->mu);
    return on;
}

static void traced_end(struct pl_exec *x)
{
    pthread_mutex_lock(&x->mu);
    if (--x->traced_calls == 0)
        pthread_cond_broadcast(&x->traced_cv);
    pthread_mutex_unlock(&x->mu);
}

/* The fire drill: spin as long as the node's injected slowdown says. */
static void drill(struct pl_inject *in)
{
    int64_t ns = atomic_load(&in->ns);
    if (ns <= 0)
        return;
    int64_t t = now_ns();
    if (t < atomic_load(&in->from_ns))
        return;
    while (now_ns() - t < ns)
        ;
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
        /* served, the source's requests come from the callers: waiting for
         * them is its wait, not its work */
        size_t taken = 0;
        if (source && x->service) {
            taken = pl_queue_pop(&x->inbox, items, max, 0, &depth);
            if (taken == 0)
                break; /* stopped and drained */
        } else if (source) {
            got = 0;
        } else {
            got = pl_queue_pop(&x->q[w->node], items, max, window_ms * 1000000, &depth);
            if (got == 0)
                break; /* closed: the run is over or failed */
        }
        c.ready_ns = now_ns();
        c.wait_ns = source && !x->service ? 0 : c.ready_ns - t_wait;
        c.depth = (uint32_t)depth;
        struct cp_thread_clock k0, k1;
        cp_thread_clock_begin(&k0);
        c.start_ns = now_ns();
        size_t n_out = source ? max : got;
        bool traced = w->rec && x->service && traced_begin(x, items, got);
        if (w->rec && x->service)
            pl_unit_trace_pause(w->u, !traced);
        if (source && x->service)
            n_out = taken; /* what the callers sent is the source's output */
        else if (source && atomic_load(&x->failed))
            n_out = 0;
        else
            w->st = pl_unit_process(w->u, items, got, &n_out, &w->d);
        if (x->inject)
            drill(&x->inject[w->node]);
        c.end_ns = now_ns();
        cp_thread_clock_end(&k1);
        if (w->st != CP_OK && x->service && !source) {
            /* a served request that fails is answered with the error; the
             * flow goes on serving the others */
            for (size_t i = 0; i < got; i++) {
                pl_payload_unref(items[i].p);
                pl_service_answer(x, items[i].request, NULL, &w->d);
            }
            atomic_fetch_sub(&x->live, (long long)got);
            if (traced)
                traced_end(x);
            w->st = CP_OK;
            cp_diag_init(&w->d);
            maybe_finish(x);
            continue;
        }
        if (w->st != CP_OK) {
            if (traced)
                traced_end(x);
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
        if (x->on_call)
            x->on_call(x->call_ctx, x, &c);
        /* serving: a call is kept while recording, when all of its requests
         * came in the window; a call that ran traced is kept with its
         * kernels (record_end waits for it) */
        if (x->service)
            pthread_mutex_lock(&x->mu); /* against record_begin/_end */
        bool keep = traced || !x->service || atomic_load(&x->recording);
        for (size_t i = 0; keep && x->service && i < n_ids; i++)
            keep = ids[i].request >= x->rec_base;
        bool recorded =
            !keep || record_call(w, &c, count <= 64 ? ids : items, count <= 64 ? count : 0);
        if (x->service)
            pthread_mutex_unlock(&x->mu);
        if (traced)
            traced_end(x);
        if (!recorded) {
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

/* ---- opening, starting, closing ------------------------------------------------------ */

enum cp_status pl_exec_open(struct pl_exec *x, const struct cp_flow *f, bool model_layer,
                            struct cp_diag *d)
{
    x->f = f;
    x->env.flow = f;
    atomic_init(&x->env.next_request, 0);
    atomic_init(&x->env.iter_base, 0);
    atomic_init(&x->live, 0);
    atomic_init(&x->failed, false);
    atomic_init(&x->recording, false);
    pthread_mutex_init(&x->mu, NULL);
    pthread_cond_init(&x->traced_cv, NULL);
    enum cp_status st = CP_OK;
    x->q = cp_calloc(f->n_nodes, sizeof *x->q);
    x->seq = cp_calloc(f->n_nodes, sizeof *x->seq);
    size_t n_w = 0;
    for (size_t i = 0; i < f->n_nodes; i++)
        n_w += (size_t)f->nodes[i].workers;
    x->w = cp_calloc(n_w ? n_w : 1, sizeof *x->w);
    if (!x->q || !x->seq || !x->w)
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; st == CP_OK && i < f->n_nodes; i++)
        st = pl_queue_init(&x->q[i], (size_t)f->nodes[i].queue_size, d);
    /* open every unit before any thread starts: a model that does not
     * load stops the run before a request is sent */
    int sources = 0;
    for (size_t o_i = 0; st == CP_OK && o_i < f->n_nodes; o_i++) {
        size_t i = f->order[o_i];
        const struct pl_node *n = &f->nodes[i];
        for (int k = 0; st == CP_OK && k < n->workers; k++) {
            struct pl_worker *w = &x->w[x->n_w];
            w->x = x;
            w->node = i;
            w->worker = k;
            w->thread = (int)x->n_w + 1;
            if (n->unit == PL_INFERENCE && model_layer &&
                !(w->rec = cp_trace_recorder_create(4096)))
                st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            if (st == CP_OK)
                st = pl_unit_open(f, i, k, w->thread, &x->env, w->rec, &w->u, d);
            x->n_w++;
            if (n->unit == PL_FILE_SOURCE)
                sources++;
        }
    }
    atomic_init(&x->sources_left, sources);
    return st;
}

enum cp_status pl_exec_start(struct pl_exec *x, struct cp_diag *d)
{
    x->t0 = now_ns();
    for (size_t k = 0; k < x->n_w; k++) {
        if (pthread_create(&x->w[k].th, NULL, worker_main, &x->w[k]) != 0) {
            cp_diag_set(d, CP_ERR_NOMEM, "cannot start a worker thread");
            fail(x, d);
            /* the sources that never started never finish */
            for (size_t j = k; j < x->n_w; j++)
                if (x->f->nodes[x->w[j].node].unit == PL_FILE_SOURCE)
                    atomic_fetch_sub(&x->sources_left, 1);
            return CP_ERR_NOMEM;
        }
        x->w[k].started = true;
    }
    return CP_OK;
}

void pl_exec_join(struct pl_exec *x)
{
    for (size_t k = 0; k < x->n_w; k++)
        if (x->w[k].started) {
            pthread_join(x->w[k].th, NULL);
            x->w[k].started = false;
        }
}

void pl_exec_close(struct pl_exec *x)
{
    for (size_t k = 0; x->w && k < x->n_w; k++) {
        pl_unit_close(x->w[k].u);
        cp_trace_recorder_free(x->w[k].rec);
        free(x->w[k].calls);
        free(x->w[k].reqs);
    }
    for (size_t i = 0; x->q && i < x->f->n_nodes; i++)
        pl_queue_destroy(&x->q[i]);
    free(x->q);
    free(x->seq);
    free(x->w);
    free(x->emitted);
    free(x->done);
    free(x->inject);
    pthread_mutex_destroy(&x->mu);
    pthread_cond_destroy(&x->traced_cv);
    memset(x, 0, sizeof *x);
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
    x.env.requests = o->requests;
    enum cp_status st = pl_exec_open(&x, f, o->model_layer && o->trace_path, d);
    if (st == CP_OK) {
        x.env.deadline_ns = o->duration_s > 0 ? now_ns() + (int64_t)(o->duration_s * 1e9) : 0;
        (void)pl_exec_start(&x, d);
        pl_exec_join(&x);
        if (x.have_err)
            st = cp_diag_set(d, x.err.status, "%s", x.err.msg);
    }
    if (st == CP_OK)
        summarise(&x, r);
    if (st == CP_OK && r->done < r->sent)
        st = cp_diag_set(d, CP_ERR_INTERNAL, "%llu of %llu requests did not complete",
                         (unsigned long long)(r->sent - r->done), (unsigned long long)r->sent);
    if (st == CP_OK && o->trace_path)
        st = pl_exec_record(&x, o->trace_path, NULL, &r->run_id, d);
    pl_exec_close(&x);
    return st;
}
