/* A flow served (docs/pipelines.md, "Serving a flow"): the executor runs
 * until stopped; its source takes each caller's request from an inbox
 * instead of reading its folder, and its sink hands the request's payload
 * back to the caller instead of writing a file. A unit that fails on a
 * request answers that request with the error; the flow goes on. Calls are
 * kept only between record_begin and record_end (a deep trace), so a
 * server running for days does not grow. */
#include "pipeline/exec_internal.h"
#include "stats/stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct cp_flow_service {
    struct pl_exec x;
    size_t source, sink;
    bool started, stopped;
    cp_flow_call_fn on_call;
    void *call_ctx;
};

void pl_service_answer(struct pl_exec *x, uint64_t request, struct pl_payload *p,
                       const struct cp_diag *err)
{
    pthread_mutex_lock(&x->mu);
    struct pl_waiter *w = x->waiters;
    while (w && w->request != request)
        w = w->next;
    if (w && !w->done) {
        w->done = true;
        w->answer = p;
        if (err)
            w->err = *err;
        pthread_cond_signal(&w->cv);
        p = NULL;
    }
    pthread_mutex_unlock(&x->mu);
    pl_payload_unref(p); /* nobody waits for it (a second sink) */
}

static void call_hook(void *ctx, const struct pl_exec *x, const struct pl_call *c)
{
    (void)x;
    struct cp_flow_service *s = ctx;
    struct cp_flow_call_info i = {
        .node = c->node,
        .batch = c->batch,
        .depth = c->depth,
        .wait_ns = c->wait_ns,
        .busy_ns = c->end_ns - c->start_ns,
        .blocked_ns = c->blocked_ns,
        .done_ns = c->done_ns,
    };
    s->on_call(s->call_ctx, &i);
}

enum cp_status cp_flow_service_start(const struct cp_flow *f, cp_flow_call_fn on_call,
                                     void *call_ctx, struct cp_flow_service **out,
                                     struct cp_diag *d)
{
    *out = NULL;
    /* one way in and one way out: a request has one source and one answer */
    size_t n_src = 0, n_end = 0, src = 0, end = 0;
    for (size_t i = 0; i < f->n_nodes; i++) {
        if (f->nodes[i].unit == PL_FILE_SOURCE) {
            n_src++;
            src = i;
        }
        if (f->nodes[i].n_out == 0) {
            n_end++;
            end = i;
        }
    }
    if (n_src != 1 || n_end != 1 || f->nodes[end].unit != PL_FILE_SINK)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s: a flow is served with one file_source (the request's data) and "
                           "one file_sink (the answer); this one has %zu sources and %zu nodes "
                           "whose output goes nowhere%s",
                           f->path, n_src, n_end,
                           n_end == 1 && f->nodes[end].unit != PL_FILE_SINK
                               ? " (and that node is not a file_sink)"
                               : "");
    struct cp_flow_service *s = cp_calloc(1, sizeof *s);
    if (!s)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    s->source = src;
    s->sink = end;
    s->on_call = on_call;
    s->call_ctx = call_ctx;
    s->x.service = true;
    s->x.on_call = on_call ? call_hook : NULL;
    s->x.call_ctx = s;
    enum cp_status st = pl_queue_init(&s->x.inbox, (size_t)f->nodes[src].queue_size, d);
    if (st != CP_OK) {
        free(s);
        return st;
    }
    s->x.env.inbox = &s->x.inbox;
    s->x.inject = cp_calloc(f->n_nodes ? f->n_nodes : 1, sizeof *s->x.inject);
    if (!s->x.inject) {
        pl_queue_destroy(&s->x.inbox);
        free(s);
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    }
    /* the inference nodes get recorders for a deep trace, paused
     * between recordings */
    st = pl_exec_open(&s->x, f, true, d);
    s->x.f = f;
    for (size_t k = 0; st == CP_OK && k < s->x.n_w; k++)
        if (s->x.w[k].rec)
            pl_unit_trace_pause(s->x.w[k].u, true);
    if (st == CP_OK)
        st = pl_exec_start(&s->x, d);
    s->started = true;
    if (st != CP_OK) {
        cp_flow_service_stop(s);
        return st;
    }
    *out = s;
    return CP_OK;
}

enum cp_status cp_flow_service_call(struct cp_flow_service *s, const char *name, uint8_t *data,
                                    size_t len, struct cp_flow_answer *a, struct cp_diag *d)
{
    memset(a, 0, sizeof *a);
    struct pl_exec *x = &s->x;
    struct pl_payload *p = pl_payload_new();
    if (!p) {
        free(data);
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    }
    snprintf(p->name, sizeof p->name, "%s", name && name[0] ? name : "request");
    p->bytes = data; /* the request's buffer, not copied */
    p->len = len;
    uint64_t id = atomic_fetch_add(&x->env.next_request, 1);
    struct pl_waiter w = {.request = id};
    cp_diag_init(&w.err);
    pthread_cond_init(&w.cv, NULL);
    pthread_mutex_lock(&x->mu);
    w.next = x->waiters;
    x->waiters = &w;
    pthread_mutex_unlock(&x->mu);
    /* emitted now: the source notes it when it takes the request */
    struct pl_item it = {.request = id, .emitted_ns = (int64_t)cp_clock_ns(), .p = p};
    int64_t blocked = 0;
    bool queued = pl_queue_push(&x->inbox, &it, &blocked);
    pthread_mutex_lock(&x->mu);
    if (!queued)
        pl_payload_unref(p);
    while (queued && !w.done)
        pthread_cond_wait(&w.cv, &x->mu);
    for (struct pl_waiter **q = &x->waiters; *q; q = &(*q)->next)
        if (*q == &w) {
            *q = w.next;
            break;
        }
    pthread_mutex_unlock(&x->mu);
    pthread_cond_destroy(&w.cv);
    if (!queued)
        return cp_diag_set(d, CP_ERR_IO, "the flow is stopping: request not taken");
    if (!w.answer)
        return cp_diag_set(d, w.err.status ? w.err.status : CP_ERR_INTERNAL, "%s",
                           w.err.msg[0] ? w.err.msg : "the request was lost");
    /* the answer: the payload's bytes, else its first tensor as .npy */
    struct pl_payload *r = w.answer;
    enum cp_status st = CP_OK;
    snprintf(a->name, sizeof a->name, "%s", r->name);
    if (r->len) {
        a->bytes = malloc(r->len);
        if (!a->bytes)
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        else
            memcpy(a->bytes, r->bytes, r->len);
        a->len = r->len;
    } else if (r->n_t) {
        a->npy = true;
        st = cp_tensor_npy_encode(&r->t[0], r->t[0].name, &a->bytes, &a->len, d);
    }
    pl_payload_unref(r);
    return st;
}

void cp_flow_answer_release(struct cp_flow_answer *a)
{
    free(a->bytes);
    memset(a, 0, sizeof *a);
}

enum cp_status cp_flow_service_sample(const struct cp_flow_service *s, uint8_t **data, size_t *len,
                                      char name[256], struct cp_diag *d)
{
    const struct pl_unit_ctx *u = NULL;
    for (size_t k = 0; k < s->x.n_w && !u; k++)
        if (s->x.w[k].node == s->source)
            u = s->x.w[k].u;
    const char *dir = NULL, *first = u ? pl_unit_first_file(u, &dir) : NULL;
    if (!first)
        return cp_diag_set(d, CP_ERR_INVALID, "%s: the source has no file to send", s->x.f->path);
    char path[1500];
    snprintf(path, sizeof path, "%s/%s", dir, first);
    snprintf(name, 256, "%s", first);
    return cp_file_read(path, data, len, d);
}

const char *cp_flow_service_node_name(const struct cp_flow_service *s, size_t node)
{
    return node < s->x.f->n_nodes ? s->x.f->nodes[node].name : "?";
}

size_t cp_flow_service_n_nodes(const struct cp_flow_service *s)
{
    return s->x.f->n_nodes;
}

void cp_flow_service_record_begin(struct cp_flow_service *s)
{
    struct pl_exec *x = &s->x;
    pthread_mutex_lock(&x->mu);
    for (size_t k = 0; k < x->n_w; k++) {
        x->w[k].n_calls = x->w[k].n_reqs = 0;
        if (x->w[k].rec) /* not recording: no call writes to it */
            cp_trace_clear(x->w[k].rec);
    }
    if (x->cap_req) {
        memset(x->emitted, 0, x->cap_req * sizeof *x->emitted);
        memset(x->done, 0, x->cap_req * sizeof *x->done);
    }
    x->n_done = 0;
    x->rec_base = atomic_load(&x->env.next_request);
    atomic_store(&x->env.iter_base, x->rec_base);
    atomic_store(&x->recording, true);
    pthread_mutex_unlock(&x->mu);
}

enum cp_status cp_flow_service_record_end(struct cp_flow_service *s, const char *trace,
                                          const char *kind, int64_t *run_id, size_t *model_events,
                                          struct cp_diag *d)
{
    struct pl_exec *x = &s->x;
    *run_id = -1;
    if (model_events)
        *model_events = 0;
    pthread_mutex_lock(&x->mu);
    atomic_store(&x->recording, false);
    /* an inference call of the window may still be writing its kernels */
    while (x->traced_calls)
        pthread_cond_wait(&x->traced_cv, &x->mu);
    pthread_mutex_unlock(&x->mu);
    /* nothing is added while not recording: the workers' lists and
     * recorders are still */
    size_t calls = 0, events = 0;
    for (size_t k = 0; k < x->n_w; k++) {
        calls += x->w[k].n_calls;
        events += x->w[k].rec ? cp_trace_n_events(x->w[k].rec) : 0;
    }
    enum cp_status st =
        x->cap_req && x->emitted[0] && x->done[0] && calls
            ? pl_exec_record(x, trace, kind, run_id, d)
            : cp_diag_set(d, CP_ERR_INVALID,
                          "%s: nothing to record: no request came through the flow while it "
                          "was recorded",
                          trace);
    if (st == CP_OK && model_events)
        *model_events = events;
    pthread_mutex_lock(&x->mu);
    for (size_t k = 0; k < x->n_w; k++) {
        x->w[k].n_calls = x->w[k].n_reqs = 0;
        if (x->w[k].rec)
            cp_trace_clear(x->w[k].rec);
    }
    pthread_mutex_unlock(&x->mu);
    return st;
}

void cp_flow_service_inject(struct cp_flow_service *s, size_t node, int64_t from_ns, double ms)
{
    if (node >= s->x.f->n_nodes || !s->x.inject)
        return;
    atomic_store(&s->x.inject[node].from_ns, from_ns);
    atomic_store(&s->x.inject[node].ns, ms > 0 ? (int64_t)(ms * 1e6) : 0);
}

void cp_flow_service_stop(struct cp_flow_service *s)
{
    if (!s)
        return;
    if (s->started && !s->stopped) {
        /* no new request; the inbox drains, then the flow */
        pl_queue_close(&s->x.inbox);
        pl_exec_join(&s->x);
        s->stopped = true;
    }
    pl_queue_destroy(&s->x.inbox);
    if (s->x.f)
        pl_exec_close(&s->x);
    free(s);
}

/* ---- an open-loop workload in process ---------------------------------------------------- */

struct load_run {
    struct cp_flow_service *s;
    const double *at;
    size_t n;
    int64_t t0;
    const uint8_t *body;
    size_t len;
    const char *name;
    atomic_size_t next;
    double *lat_ms; /* by request; NaN: failed */
    int64_t *done_ns;
};

static void *load_worker(void *arg)
{
    struct load_run *L = arg;
    for (;;) {
        size_t i = atomic_fetch_add(&L->next, 1);
        if (i >= L->n)
            break;
        int64_t due = L->t0 + (int64_t)(L->at[i] * 1e9);
        int64_t now = (int64_t)cp_clock_ns();
        if (due > now) {
            struct timespec ts = {(time_t)((due - now) / 1000000000),
                                  (long)((due - now) % 1000000000)};
            nanosleep(&ts, NULL);
        }
        uint8_t *copy = malloc(L->len ? L->len : 1);
        struct cp_flow_answer a;
        struct cp_diag d;
        cp_diag_init(&d);
        bool ok = copy && (memcpy(copy, L->body, L->len),
                           cp_flow_service_call(L->s, L->name, copy, L->len, &a, &d) == CP_OK);
        int64_t end = (int64_t)cp_clock_ns();
        if (ok)
            cp_flow_answer_release(&a);
        /* from the intended send time: a flow that falls behind shows its queue */
        L->lat_ms[i] = ok ? (double)(end - due) / 1e6 : NAN;
        L->done_ns[i] = end;
    }
    return NULL;
}

enum cp_status cp_flow_service_load(struct cp_flow_service *s, const struct cp_flow_load_opts *o,
                                    struct cp_flow_load_result *r, struct cp_diag *d)
{
    memset(r, 0, sizeof *r);
    if (o->concurrency < 1 || o->concurrency > 1024)
        return cp_diag_set(d, CP_ERR_USAGE, "the workload's concurrency is 1 to 1024");
    uint8_t *body = NULL;
    size_t len = 0;
    char name[256];
    enum cp_status st = cp_flow_service_sample(s, &body, &len, name, d);
    if (st != CP_OK)
        return st;
    double *at = NULL;
    size_t n = 0;
    st = cp_stats_poisson_arrivals(o->rate, o->duration_s, o->requests, o->seed, &at, &n, d);
    struct load_run L = {.s = s, .at = at, .n = n, .body = body, .len = len, .name = name};
    atomic_init(&L.next, 0);
    L.lat_ms = cp_calloc(n ? n : 1, sizeof *L.lat_ms);
    L.done_ns = cp_calloc(n ? n : 1, sizeof *L.done_ns);
    pthread_t *th = cp_calloc((size_t)o->concurrency, sizeof *th);
    if (st == CP_OK && (!L.lat_ms || !L.done_ns || !th))
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    int started = 0;
    if (st == CP_OK) {
        L.t0 = (int64_t)cp_clock_ns();
        for (; started < o->concurrency; started++)
            if (pthread_create(&th[started], NULL, load_worker, &L) != 0)
                break;
        if (started == 0)
            st = cp_diag_set(d, CP_ERR_NOMEM, "cannot start the workload's threads");
        for (int k = 0; k < started; k++)
            pthread_join(th[k], NULL);
    }
    if (st == CP_OK) {
        double *ok = cp_calloc(n ? n : 1, sizeof *ok);
        int64_t last = L.t0;
        for (size_t i = 0; ok && i < n; i++) {
            r->sent++;
            if (isnan(L.lat_ms[i])) {
                r->failed++;
                continue;
            }
            ok[r->ok++] = L.lat_ms[i];
            last = L.done_ns[i] > last ? L.done_ns[i] : last;
        }
        r->seconds = (double)(last - L.t0) / 1e9;
        r->throughput = r->seconds > 0 ? (double)r->ok / r->seconds : 0;
        struct cp_summary sum;
        struct cp_diag ignored;
        cp_diag_init(&ignored);
        if (ok && r->ok && cp_stats_summary(ok, r->ok, &sum, &ignored) == CP_OK) {
            r->mean_ms = sum.mean;
            r->p50_ms = sum.median;
            r->p99_ms = sum.p99;
        } else {
            r->mean_ms = r->p50_ms = r->p99_ms = NAN;
        }
        free(ok);
        if (!ok)
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    }
    free(th);
    free(L.lat_ms);
    free(L.done_ns);
    free(at);
    free(body);
    return st;
}
