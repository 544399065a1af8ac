/* node-bottleneck (docs/pipelines.md, "Finding the bottleneck"): a
 * pipeline run's node calls read back from the trace and turned into
 *
 *   - per node: utilisation, starved and blocked shares of its workers'
 *     time, its busy time split on-CPU / waiting for a CPU / off-CPU, its
 *     visits per request and the request rate it can carry;
 *   - the limiting node: the one whose capacity bounds the flow's
 *     throughput, with its evidence, and a confidence: the share of eight
 *     equal windows of the run in which it is also the busiest;
 *   - named problems: I/O-bound nodes, CPU oversubscription, back-pressure
 *     chains, queues too small for bursts, batches that leave unfilled;
 *   - the critical path of the median and the p99 request: each node on
 *     it with its queue wait and service time. */
#include "pipeline/pipeline_internal.h"
#include "stats/stats.h"
#include "trace/query.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WINDOWS 8

void cp_bottleneck_release(struct cp_bottleneck *b)
{
    free(b->nodes);
    free(b->p50_path);
    free(b->p99_path);
    memset(b, 0, sizeof *b);
}

/* ---- a request's path ----------------------------------------------------------------- */

/* Whether call c carried request r. */
static bool carries(const struct cp_trace_node_call *c, uint64_t r)
{
    for (const char *p = c->requests; *p;) {
        char *end = NULL;
        unsigned long long x = strtoull(p, &end, 10);
        if (end == p)
            return false;
        if (x == r)
            return true;
        p = *end == ',' ? end + 1 : end;
    }
    return false;
}

/* How long an item waited between the call before it and this one: from
 * the end of the push (or this call's start, if sooner) to its start. */
static double queue_ms(const struct cp_trace_node_call *prev, const struct cp_trace_node_call *c)
{
    uint64_t from = prev->done_ns < c->start_ns ? prev->done_ns : prev->end_ns;
    return c->start_ns > from ? (double)(c->start_ns - from) / 1e6 : 0;
}

/* The chain of calls that ended request r last: from the call that
 * finished it back through, each time, the call of r that finished
 * before this one began. */
static enum cp_status path_of(const struct cp_trace_node_call *v, size_t n, uint64_t r,
                              struct cp_bottleneck_step **out, size_t *n_out, struct cp_diag *d)
{
    *out = NULL;
    *n_out = 0;
    size_t *mine = cp_calloc(n ? n : 1, sizeof *mine), k = 0;
    if (!mine)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        if (carries(&v[i], r))
            mine[k++] = i;
    struct cp_bottleneck_step *steps = cp_calloc(k ? k : 1, sizeof *steps);
    if (!steps) {
        free(mine);
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    }
    /* the last to finish */
    long cur = -1;
    for (size_t j = 0; j < k; j++)
        if (cur < 0 || v[mine[j]].done_ns > v[(size_t)cur].done_ns)
            cur = (long)mine[j];
    size_t m = 0;
    while (cur >= 0 && m < k) {
        const struct cp_trace_node_call *c = &v[(size_t)cur];
        long prev = -1;
        for (size_t j = 0; j < k; j++) {
            const struct cp_trace_node_call *p = &v[mine[j]];
            /* its processing ended before this call began (its push may
             * be recorded as done a little after the consumer started) */
            if ((long)mine[j] != cur && p->end_ns <= c->start_ns &&
                (prev < 0 || p->end_ns > v[(size_t)prev].end_ns))
                prev = (long)mine[j];
        }
        steps[m++] = (struct cp_bottleneck_step){
            .node = c->node,
            .queue_ms = prev >= 0 ? queue_ms(&v[(size_t)prev], c) : 0,
            .service_ms = (double)(c->end_ns - c->start_ns) / 1e6,
            .push_ms = (double)(c->done_ns - c->end_ns) / 1e6,
            .batch = c->batch,
        };
        cur = prev;
    }
    /* first to last */
    for (size_t i = 0; i < m / 2; i++) {
        struct cp_bottleneck_step t = steps[i];
        steps[i] = steps[m - 1 - i];
        steps[m - 1 - i] = t;
    }
    free(mine);
    *out = steps;
    *n_out = m;
    return CP_OK;
}

/* ---- problems ------------------------------------------------------------------------- */

static void add_problem(struct cp_bottleneck *b, const char *kind, int node, const char *fix_key,
                        long fix_value, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

static void add_problem(struct cp_bottleneck *b, const char *kind, int node, const char *fix_key,
                        long fix_value, const char *fmt, ...)
{
    if (b->n_problems == CP_BOTTLENECK_MAX_PROBLEMS)
        return;
    struct cp_bottleneck_problem *p = &b->problems[b->n_problems++];
    snprintf(p->kind, sizeof p->kind, "%s", kind);
    p->node = node;
    snprintf(p->fix_key, sizeof p->fix_key, "%s", fix_key ? fix_key : "");
    p->fix_value = fix_value;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->text, sizeof p->text, fmt, ap);
    va_end(ap);
}

static void find_problems(struct cp_bottleneck *b, const struct cp_trace_pipeline *pl, int cores)
{
    double busy = 0, runq = 0;
    for (size_t i = 0; i < b->n_nodes; i++) {
        busy += b->nodes[i].busy_s;
        runq += b->nodes[i].runq_share * b->nodes[i].busy_s;
    }
    for (size_t i = 0; i < b->n_nodes; i++) {
        const struct cp_bottleneck_node *n = &b->nodes[i];
        if (n->source)
            continue;
        /* busy but off the CPU: I/O or sleeps; more workers overlap them */
        if (n->util > 0.5 && n->offcpu_share > 0.5) {
            long want = (long)ceil(n->util * n->workers / 0.6);
            add_problem(
                b, "io_bound", (int)i, "workers", want > n->workers ? want : n->workers + 1,
                "%s is busy %.0f%% of its workers' time and off the CPU %.0f%% of that (I/O "
                "or sleeps, not computing): more workers overlap its waits (workers=%ld), "
                "or read ahead",
                n->name, 100 * n->util, 100 * n->offcpu_share,
                want > n->workers ? want : (long)n->workers + 1);
        }
        /* blocked pushing: who is it waiting on */
        if (n->blocked > 0.2) {
            int worst = -1;
            for (size_t e = 0; e < pl->n_edges; e++)
                if ((size_t)pl->edges[e].from == i && !pl->edges[e].back &&
                    (worst < 0 || b->nodes[pl->edges[e].to].util > b->nodes[worst].util))
                    worst = pl->edges[e].to;
            if (worst >= 0 && b->nodes[worst].util > 0.7)
                add_problem(b, "back_pressure", (int)i, NULL, 0,
                            "%s is blocked %.0f%% of its time pushing into %s's full queue (%s is "
                            "busy %.0f%%): %s is the constraint, not %s",
                            n->name, 100 * n->blocked, b->nodes[worst].name, b->nodes[worst].name,
                            100 * b->nodes[worst].util, b->nodes[worst].name, n->name);
            else if (worst >= 0 &&
                     1e3 * n->blocked_s / (double)(n->items ? n->items : 1) >= 0.05 * b->p50_ms)
                /* the consumer has spare time, yet its queue fills: bursts;
                 * a problem when the blocking costs a request at least 5%
                 * of the median latency (a flow that is done in a few
                 * milliseconds blocks a fifth of them on a consumer waiting
                 * for a CPU, and has nothing to gain) */
                add_problem(b, "queue_too_small", worst, "queue_size",
                            (long)b->nodes[worst].queue_size * 4,
                            "%s is blocked %.0f%% of its time pushing into %s's queue of %d, "
                            "though %s is busy only %.0f%%: the queue is too small for the bursts "
                            "(queue_size=%d)",
                            n->name, 100 * n->blocked, b->nodes[worst].name,
                            b->nodes[worst].queue_size, b->nodes[worst].name,
                            100 * b->nodes[worst].util, b->nodes[worst].queue_size * 4);
        }
        /* batches that leave half empty on a busy node */
        if (n->batch_size > 1 && n->util > 0.7 && n->mean_batch < 0.5 * n->batch_size)
            add_problem(b, "batch_underfilled", (int)i, "batch_window_ms", 5,
                        "%s takes batches of up to %d but they average %.1f while it is busy "
                        "%.0f%%: let batches fill (batch_window_ms=5) or lower batch_size",
                        n->name, n->batch_size, n->mean_batch, 100 * n->util);
    }
    /* a handful of microseconds of work says nothing about contention:
     * the threads must have been busy for half the run between them */
    if (busy > 0.5 * b->window_s && runq / busy > 0.15)
        add_problem(b, "cpu_oversubscribed", -1, NULL, 0,
                    "the nodes' threads waited for a CPU %.0f%% of their busy time: more threads "
                    "(workers and each model's threads) run than this machine's %d cores; give "
                    "inference nodes threads=N so their sum fits",
                    100 * runq / busy, cores);
    if (b->limiting < 0 && b->n_nodes > 0)
        add_problem(b, "input_bound", -1, NULL, 0,
                    "no node is busy more than half its time: the flow waits for its input");
}

/* ---- the analysis ---------------------------------------------------------------------- */

static bool is_source(const char *flowunit)
{
    return strcmp(flowunit, "file_source") == 0;
}

enum cp_status cp_node_bottleneck(const char *trace, int64_t run, struct cp_bottleneck *b,
                                  struct cp_diag *d)
{
    memset(b, 0, sizeof *b);
    b->limiting = -1;
    struct pl_recorded rec;
    enum cp_status st = pl_recorded_read(trace, run, &rec, d);
    if (st != CP_OK)
        return st;
    b->run_id = rec.run_id;
    snprintf(b->flow, sizeof b->flow, "%s", rec.flow);
    const struct cp_trace_pipeline pl = rec.pl;
    const struct cp_trace_node_call *v = rec.calls;
    size_t n = rec.n_calls;
    const struct cp_trace_sample *sm = rec.samples;
    size_t n_sm = rec.n_samples;
    b->nodes = st == CP_OK ? cp_calloc(pl.n_nodes, sizeof *b->nodes) : NULL;
    if (st == CP_OK && !b->nodes)
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    if (st != CP_OK)
        goto out;
    b->n_nodes = pl.n_nodes;
    b->requests = n_sm;
    /* the window: first call to last push */
    uint64_t t0 = UINT64_MAX, t1 = 0;
    for (size_t i = 0; i < n; i++) {
        t0 = v[i].start_ns < t0 ? v[i].start_ns : t0;
        t1 = v[i].done_ns > t1 ? v[i].done_ns : t1;
    }
    double W = t1 > t0 ? (double)(t1 - t0) / 1e9 : 1e-9;
    b->window_s = W;
    b->throughput = (double)n_sm / W;
    for (size_t i = 0; i < pl.n_nodes; i++) {
        struct cp_bottleneck_node *bn = &b->nodes[i];
        snprintf(bn->name, sizeof bn->name, "%s", pl.nodes[i].name);
        snprintf(bn->flowunit, sizeof bn->flowunit, "%s", pl.nodes[i].flowunit);
        bn->workers = pl.nodes[i].workers > 0 ? pl.nodes[i].workers : 1;
        bn->batch_size = pl.nodes[i].batch_size;
        bn->queue_size = pl.nodes[i].queue_size;
        bn->source = is_source(bn->flowunit);
        bn->model_run = -1;
        /* "model_run:NODE:WORKER": the lowest worker's */
        size_t len = strlen(bn->name);
        long best = -1;
        for (size_t k = 0; k < rec.n_model_runs; k++) {
            const char *c = rec.model_runs[k].name + strlen("model_run:");
            if (strncmp(c, bn->name, len) == 0 && c[len] == ':') {
                long wk = atol(c + len + 1);
                if (best < 0 || wk < best) {
                    best = wk;
                    bn->model_run = (int64_t)rec.model_runs[k].value;
                }
            }
        }
    }
    double win_busy[WINDOWS][64];
    memset(win_busy, 0, sizeof win_busy);
    for (size_t i = 0; i < n; i++) {
        const struct cp_trace_node_call *c = &v[i];
        if (c->node < 0 || (size_t)c->node >= pl.n_nodes)
            continue;
        struct cp_bottleneck_node *bn = &b->nodes[c->node];
        double busy = (double)(c->end_ns - c->start_ns) / 1e9;
        bn->calls++;
        bn->items += c->batch;
        bn->busy_s += busy;
        bn->cpu_s += (double)c->cpu_ns / 1e9;
        bn->runq_s += (double)c->runq_ns / 1e9;
        /* the wait inside the window: a served flow's first call waited
         * for requests since long before its recording began */
        double wait_from = fmax((double)c->ready_ns - (double)c->wait_ns, (double)t0);
        bn->starved_s += fmax(0, (double)c->ready_ns - wait_from) / 1e9;
        bn->blocked_s += (double)c->blocked_ns / 1e9;
        bn->depth_sum += c->depth;
        bn->max_depth = c->depth > bn->max_depth ? c->depth : bn->max_depth;
        /* busy time per window */
        if (c->node < 64)
            for (int w = 0; w < WINDOWS; w++) {
                double ws = (double)t0 + (double)(t1 - t0) * w / WINDOWS,
                       we = (double)t0 + (double)(t1 - t0) * (w + 1) / WINDOWS;
                double a = fmax(ws, (double)c->start_ns), z = fmin(we, (double)c->end_ns);
                if (z > a)
                    win_busy[w][c->node] += (z - a) / 1e9;
            }
    }
    double best_cap = INFINITY;
    for (size_t i = 0; i < pl.n_nodes; i++) {
        struct cp_bottleneck_node *bn = &b->nodes[i];
        double cap = bn->workers * W;
        bn->util = bn->busy_s / cap;
        bn->starved = bn->starved_s / cap;
        bn->blocked = bn->blocked_s / cap;
        double cpu = bn->busy_s > 0 ? fmin(bn->cpu_s / bn->busy_s, 1) : 0;
        double rq = bn->busy_s > 0 ? fmin(bn->runq_s / bn->busy_s, 1 - cpu) : 0;
        bn->cpu_share = cpu;
        bn->runq_share = rq;
        bn->offcpu_share = bn->busy_s > 0 ? fmax(0, 1 - cpu - rq) : 0;
        bn->mean_batch = bn->calls ? (double)bn->items / (double)bn->calls : 0;
        bn->visits = (double)bn->items / (double)n_sm;
        bn->mean_depth = bn->calls ? bn->depth_sum / (double)bn->calls : 0;
        /* requests per second the node can carry with its workers */
        bn->capacity = bn->busy_s > 0 ? bn->workers * (double)n_sm / bn->busy_s : INFINITY;
        if (!bn->source && bn->capacity < best_cap) {
            best_cap = bn->capacity;
            b->limiting = (int)i;
        }
    }
    /* a node busy less than half its time limits nothing */
    if (b->limiting >= 0 && b->nodes[b->limiting].util < 0.5)
        b->limiting = -1;
    if (b->limiting >= 0) {
        b->ceiling = best_cap;
        int agree = 0;
        for (int w = 0; w < WINDOWS; w++) {
            int top = -1;
            for (size_t i = 0; i < pl.n_nodes && i < 64; i++)
                if (!b->nodes[i].source &&
                    (top < 0 || win_busy[w][i] / b->nodes[i].workers >
                                    win_busy[w][top] / b->nodes[top].workers))
                    top = (int)i;
            agree += top == b->limiting;
        }
        b->confidence = (double)agree / WINDOWS;
        const struct cp_bottleneck_node *L = &b->nodes[b->limiting];
        snprintf(b->evidence, sizeof b->evidence,
                 "busy %.0f%% of its %d %s time (on-CPU %.0f%%, waiting for a CPU %.0f%%, "
                 "off-CPU %.0f%%); it can carry %.1f requests/s, the flow ran at %.1f; the "
                 "busiest node in %d of %d windows of the run",
                 100 * L->util, L->workers, L->workers == 1 ? "worker's" : "workers'",
                 100 * L->cpu_share, 100 * L->runq_share, 100 * L->offcpu_share, L->capacity,
                 b->throughput, (int)lround(b->confidence * WINDOWS), WINDOWS);
    }
    /* the median and the p99 request */
    /* the latency's quantiles as everywhere else (stats/stats.h) */
    double *lat = cp_calloc(n_sm, sizeof *lat);
    if (!lat) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n_sm; i++)
        lat[i] = (double)sm[i].latency_ns / 1e6;
    b->p50_ms = cp_stats_quantile(lat, n_sm, 0.5);
    b->p99_ms = cp_stats_quantile(lat, n_sm, 0.99);
    free(lat);
    int64_t r50 = -1, r99 = -1;
    double d50 = INFINITY, d99 = INFINITY;
    for (size_t i = 0; i < n_sm; i++) {
        double ms = (double)sm[i].latency_ns / 1e6;
        if (fabs(ms - b->p50_ms) < d50) {
            d50 = fabs(ms - b->p50_ms);
            r50 = sm[i].iteration;
        }
        if (fabs(ms - b->p99_ms) < d99) {
            d99 = fabs(ms - b->p99_ms);
            r99 = sm[i].iteration;
        }
    }
    b->p50_request = r50;
    b->p99_request = r99;
    if (r50 >= 0)
        st = path_of(v, n, (uint64_t)r50, &b->p50_path, &b->n_p50_path, d);
    if (st == CP_OK && r99 >= 0)
        st = path_of(v, n, (uint64_t)r99, &b->p99_path, &b->n_p99_path, d);
    if (st == CP_OK)
        find_problems(b, &pl, rec.cores);
out:
    pl_recorded_release(&rec);
    if (st != CP_OK)
        cp_bottleneck_release(b);
    return st;
}
