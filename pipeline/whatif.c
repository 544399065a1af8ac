/* What-if replay of a pipeline run (docs/pipelines.md, "What if"): a
 * discrete-event simulation of the flow as recorded (its nodes, workers,
 * queue sizes, batch sizes and windows, loops and fan-outs, blocking pushes), each
 * call's service time drawn from the node's recorded calls (fixed seed),
 * run twice: as recorded, and with the changes. The prediction is the
 * measured figure times the ratio of the two simulations, so what the
 * model gets wrong about the flow as it was cancels out; the simulation of
 * the flow as recorded against the measurement is reported as the model's
 * own error.
 *
 * Not modelled: contention between nodes for the CPU (service times are
 * as measured, with whatever contention the run had), and the gain of a
 * larger batch (a batch size never recorded costs its items' time one by
 * one: a conservative prediction). */
#include "pipeline/pipeline_internal.h"
#include "stats/stats.h"
#include "trace/query.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sim_item {
    uint64_t req;
    int loop_iter;
};

struct sim_push {
    int32_t to; /* node */
    bool back;
    struct sim_item it;
};

struct sim_node {
    int workers, batch, queue;
    double window; /* s a worker waits, from its first item, for a batch to fill */
    double speed;
    const char *flowunit;
    bool source, loop;
    int loop_count;
    long body_to, exit_to; /* nodes; -1 */
    /* recorded calls: duration (s) and batch */
    double *dur;
    uint32_t *bat;
    size_t n_rec;
    size_t *by_batch; /* the records' indices by (batch, index): one batch size is a range */
    /* the queue */
    struct sim_item *q;
    size_t q_head, q_n, q_cap;
    int *waiters; /* blocked workers, FIFO */
    size_t w_head, w_n, w_cap;
};

enum { W_IDLE, W_BUSY, W_BLOCKED };

struct sim_worker {
    int node, state;
    double wait_until; /* idle with a partial batch: its window ends then; 0 not waiting */
    struct sim_item items[256];
    size_t n_items;
    struct sim_push *pend;
    size_t n_pend, i_pend, cap_pend;
};

/* An event: a worker's call completes (worker >= 0), an arrival is due
 * (-1), or a worker's batching window ends (WINDOW_EVENT of it). */
struct sim_event {
    double t;
    int worker;
};
#define WINDOW_EVENT(wi) (-2 - (wi))

struct sim {
    struct sim_node *n;
    size_t n_nodes;
    int32_t *out_from, *out_to;
    bool *out_back;
    size_t n_edges;
    struct sim_worker *w;
    size_t n_w;
    struct sim_event *heap;
    size_t n_heap, cap_heap;
    double now;
    uint64_t requests, sent;
    double *emitted, *done;
    uint64_t rng;
    bool oom;
    /* an open-loop workload: the sources send request k at arrivals[k]
     * (seconds) instead of as fast as they can; NULL floods */
    const double *arrivals;
    double timer; /* a wake-up for the next arrival is queued at this time; < 0: none */
};

static double uniform(struct sim *s)
{
    s->rng ^= s->rng << 13;
    s->rng ^= s->rng >> 7;
    s->rng ^= s->rng << 17;
    return (double)(s->rng >> 11) / 9007199254740992.0;
}

static void heap_push(struct sim *s, double t, int worker)
{
    if (s->n_heap == s->cap_heap) {
        size_t nc = s->cap_heap ? s->cap_heap * 2 : 256;
        struct sim_event *g = cp_realloc_array(s->heap, nc, sizeof *g);
        if (!g) {
            s->oom = true;
            return;
        }
        s->heap = g;
        s->cap_heap = nc;
    }
    size_t i = s->n_heap++;
    s->heap[i] = (struct sim_event){t, worker};
    while (i > 0 && s->heap[(i - 1) / 2].t > s->heap[i].t) {
        struct sim_event x = s->heap[i];
        s->heap[i] = s->heap[(i - 1) / 2];
        s->heap[(i - 1) / 2] = x;
        i = (i - 1) / 2;
    }
}

static struct sim_event heap_pop(struct sim *s)
{
    struct sim_event top = s->heap[0];
    s->heap[0] = s->heap[--s->n_heap];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < s->n_heap && s->heap[l].t < s->heap[m].t)
            m = l;
        if (r < s->n_heap && s->heap[r].t < s->heap[m].t)
            m = r;
        if (m == i)
            break;
        struct sim_event x = s->heap[i];
        s->heap[i] = s->heap[m];
        s->heap[m] = x;
        i = m;
    }
    return top;
}

static bool q_put(struct sim *s, struct sim_node *n, struct sim_item it)
{
    if (n->q_n == n->q_cap) {
        size_t nc = n->q_cap ? n->q_cap * 2 : 64;
        struct sim_item *g = cp_calloc(nc, sizeof *g);
        if (!g) {
            s->oom = true;
            return false;
        }
        for (size_t k = 0; k < n->q_n; k++)
            g[k] = n->q[(n->q_head + k) % n->q_cap];
        free(n->q);
        n->q = g;
        n->q_cap = nc;
        n->q_head = 0;
    }
    n->q[(n->q_head + n->q_n) % n->q_cap] = it;
    n->q_n++;
    return true;
}

/* The first position in n->by_batch whose record's batch is >= m. */
static size_t batch_lower(const struct sim_node *n, size_t m)
{
    size_t lo = 0, hi = n->n_rec;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (n->bat[n->by_batch[mid]] < m)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The service time of a call of `m` items at node n. */
static double service(struct sim *s, const struct sim_node *n, size_t m)
{
    if (n->n_rec == 0)
        return 0;
    /* a recorded call of the same batch size, else one scaled by items */
    size_t lo = batch_lower(n, m), hi = batch_lower(n, m + 1);
    double t;
    if (hi > lo) {
        size_t k = (size_t)(uniform(s) * (double)(hi - lo));
        t = n->dur[n->by_batch[lo + (k < hi - lo ? k : hi - lo - 1)]];
    } else {
        size_t i = (size_t)(uniform(s) * (double)n->n_rec);
        i = i < n->n_rec ? i : n->n_rec - 1;
        t = n->dur[i] * (double)m / (double)(n->bat[i] ? n->bat[i] : 1);
    }
    return t / n->speed;
}

static void add_push(struct sim *s, struct sim_worker *w, int32_t to, bool back, struct sim_item it)
{
    if (w->n_pend == w->cap_pend) {
        size_t nc = w->cap_pend ? w->cap_pend * 2 : 16;
        struct sim_push *g = cp_realloc_array(w->pend, nc, sizeof *g);
        if (!g) {
            s->oom = true;
            return;
        }
        w->pend = g;
        w->cap_pend = nc;
    }
    w->pend[w->n_pend++] = (struct sim_push){to, back, it};
}

static void finish_request(struct sim *s, uint64_t req)
{
    if (req < s->requests && s->now > s->done[req])
        s->done[req] = s->now;
}

/* Start every idle worker that has work. */
static void dispatch(struct sim *s);

/* Continue w's pushes; false when it is blocked on a full queue. */
static bool push_on(struct sim *s, int wi)
{
    struct sim_worker *w = &s->w[wi];
    while (w->i_pend < w->n_pend) {
        struct sim_push *p = &w->pend[w->i_pend];
        struct sim_node *t = &s->n[p->to];
        if (!p->back && t->q_n >= (size_t)t->queue) {
            /* wait for room */
            if (t->w_n == t->w_cap) {
                size_t nc = t->w_cap ? t->w_cap * 2 : 16;
                int *g = cp_calloc(nc, sizeof *g);
                if (!g) {
                    s->oom = true;
                    return false;
                }
                for (size_t k = 0; k < t->w_n; k++)
                    g[k] = t->waiters[(t->w_head + k) % t->w_cap];
                free(t->waiters);
                t->waiters = g;
                t->w_cap = nc;
                t->w_head = 0;
            }
            t->waiters[(t->w_head + t->w_n) % t->w_cap] = wi;
            t->w_n++;
            w->state = W_BLOCKED;
            return false;
        }
        q_put(s, t, p->it);
        w->i_pend++;
    }
    w->n_pend = w->i_pend = 0;
    w->state = W_IDLE;
    return true;
}

/* Room was made in node n's queue: blocked pushers go on, in order. */
static void wake(struct sim *s, struct sim_node *n)
{
    while (n->w_n > 0 && n->q_n < (size_t)n->queue) {
        int wi = n->waiters[n->w_head];
        n->w_head = (n->w_head + 1) % n->w_cap;
        n->w_n--;
        push_on(s, wi);
    }
}

static void dispatch(struct sim *s)
{
    bool again = true;
    while (again && !s->oom) {
        again = false;
        for (size_t wi = 0; wi < s->n_w; wi++) {
            struct sim_worker *w = &s->w[wi];
            struct sim_node *n = &s->n[w->node];
            if (w->state != W_IDLE)
                continue;
            size_t m = 0;
            size_t max = (size_t)n->batch < 256 ? (size_t)n->batch : 256;
            if (n->source) {
                while (m < max && s->sent < s->requests &&
                       (!s->arrivals || s->arrivals[s->sent] <= s->now + 1e-12))
                    w->items[m++] = (struct sim_item){s->sent++, 0};
                /* the next request is not due yet: wake up when it is */
                if (!m && s->arrivals && s->sent < s->requests &&
                    s->timer != s->arrivals[s->sent]) {
                    s->timer = s->arrivals[s->sent];
                    heap_push(s, s->timer, -1);
                }
            } else {
                /* a partial batch waits for its window (pl_queue_pop): the
                 * worker wakes when it ends, or takes a batch that fills */
                if (n->window > 0 && n->q_n > 0 && n->q_n < max) {
                    if (!(w->wait_until > 0)) {
                        w->wait_until = s->now + n->window;
                        heap_push(s, w->wait_until, WINDOW_EVENT((int)wi));
                        continue;
                    }
                    if (s->now + 1e-12 < w->wait_until)
                        continue;
                }
                w->wait_until = 0;
                while (m < max && n->q_n > 0) {
                    w->items[m++] = n->q[n->q_head];
                    n->q_head = (n->q_head + 1) % n->q_cap;
                    n->q_n--;
                }
                if (m)
                    wake(s, n);
            }
            if (!m)
                continue;
            w->n_items = m;
            w->state = W_BUSY;
            heap_push(s, s->now + service(s, n, m), (int)wi);
            again = true;
        }
    }
}

static void complete(struct sim *s, int wi)
{
    struct sim_worker *w = &s->w[wi];
    struct sim_node *n = &s->n[w->node];
    for (size_t i = 0; i < w->n_items; i++) {
        struct sim_item it = w->items[i];
        if (n->source && it.req < s->requests)
            s->emitted[it.req] = s->now;
        if (n->loop) {
            bool lap = it.loop_iter < n->loop_count;
            it.loop_iter = lap ? it.loop_iter + 1 : 0;
            long to = lap ? n->body_to : n->exit_to;
            if (to >= 0)
                add_push(s, w, (int32_t)to, false, it);
            continue;
        }
        bool any = false;
        for (size_t e = 0; e < s->n_edges; e++)
            if ((size_t)s->out_from[e] == (size_t)w->node) {
                add_push(s, w, s->out_to[e], s->out_back[e], it);
                any = true;
            }
        if (!any)
            finish_request(s, it.req);
    }
    w->n_items = 0;
    push_on(s, wi);
}

/* ---- set up, run, figures ---------------------------------------------------------------- */

struct sim_figures {
    double throughput, p50_ms, p99_ms, mean_ms;
};

static enum cp_status simulate(struct sim_node *nodes, size_t n_nodes,
                               const struct cp_trace_pipeline *pl, uint64_t requests,
                               const double *arrivals, struct sim_figures *f, struct cp_diag *d)
{
    struct sim s;
    memset(&s, 0, sizeof s);
    s.arrivals = arrivals;
    s.timer = -1;
    s.n = nodes;
    s.n_nodes = n_nodes;
    s.requests = requests;
    s.rng = 0x9e3779b97f4a7c15ULL;
    s.n_edges = pl->n_edges;
    s.out_from = cp_calloc(pl->n_edges ? pl->n_edges : 1, sizeof *s.out_from);
    s.out_to = cp_calloc(pl->n_edges ? pl->n_edges : 1, sizeof *s.out_to);
    s.out_back = cp_calloc(pl->n_edges ? pl->n_edges : 1, sizeof *s.out_back);
    s.emitted = cp_calloc(requests, sizeof *s.emitted);
    s.done = cp_calloc(requests, sizeof *s.done);
    for (size_t i = 0; i < n_nodes; i++)
        s.n_w += (size_t)nodes[i].workers;
    s.w = cp_calloc(s.n_w ? s.n_w : 1, sizeof *s.w);
    enum cp_status st = CP_OK;
    if (!s.out_from || !s.out_to || !s.out_back || !s.emitted || !s.done || !s.w)
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    for (size_t e = 0; st == CP_OK && e < pl->n_edges; e++) {
        s.out_from[e] = pl->edges[e].from;
        s.out_to[e] = pl->edges[e].to;
        s.out_back[e] = pl->edges[e].back;
    }
    size_t k = 0;
    for (size_t i = 0; st == CP_OK && i < n_nodes; i++) {
        nodes[i].q_head = nodes[i].q_n = nodes[i].w_head = nodes[i].w_n = 0;
        for (int j = 0; j < nodes[i].workers; j++)
            s.w[k++].node = (int)i;
    }
    if (st == CP_OK) {
        dispatch(&s);
        while (s.n_heap > 0 && !s.oom) {
            struct sim_event e = heap_pop(&s);
            s.now = e.t;
            if (e.worker >= 0)
                complete(&s, e.worker);
            else if (e.worker == -1)
                s.timer = -1; /* an arrival is due */
            /* else a batching window ended (or its batch filled before):
             * dispatch takes what there is */
            dispatch(&s);
        }
        if (s.oom)
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    }
    if (st == CP_OK) {
        double first = INFINITY, last = 0, sum = 0;
        double *lat = cp_calloc(requests, sizeof *lat);
        size_t m = 0;
        for (uint64_t r = 0; lat && r < requests; r++)
            if (s.done[r] > 0) {
                lat[m++] = s.done[r] - s.emitted[r];
                first = s.emitted[r] < first ? s.emitted[r] : first;
                last = s.done[r] > last ? s.done[r] : last;
                sum += s.done[r] - s.emitted[r];
            }
        if (!lat || m < requests) {
            st = lat ? cp_diag_set(d, CP_ERR_INTERNAL, "the replay completed %zu of %llu requests",
                                   m, (unsigned long long)requests)
                     : cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        } else {
            f->throughput = last > first ? (double)m / (last - first) : 0;
            f->mean_ms = 1e3 * sum / (double)m;
            f->p50_ms = 1e3 * cp_stats_quantile(lat, m, 0.5);
            f->p99_ms = 1e3 * cp_stats_quantile(lat, m, 0.99);
        }
        free(lat);
    }
    for (size_t i = 0; i < s.n_w; i++)
        free(s.w[i].pend);
    free(s.w);
    free(s.heap);
    free(s.out_from);
    free(s.out_to);
    free(s.out_back);
    free(s.emitted);
    free(s.done);
    for (size_t i = 0; i < n_nodes; i++) {
        free(nodes[i].q);
        free(nodes[i].waiters);
        nodes[i].q = NULL;
        nodes[i].waiters = NULL;
        nodes[i].q_cap = nodes[i].w_cap = 0;
    }
    return st;
}

/* ---- changes --------------------------------------------------------------------------- */

/* "node.key=value[,node.key=value...]": key workers, batch_size,
 * queue_size (whole numbers), batch_window_ms (whole milliseconds, 0 for
 * none) or speed (a factor > 0). */
static enum cp_status apply_changes(const char *spec, const struct cp_trace_pipeline *pl,
                                    struct sim_node *nodes, struct cp_flow_whatif *w,
                                    struct cp_diag *d)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        while (*t == ' ')
            t++;
        /* NODE.KEY before the '=' (the value may hold a '.': speed=1.5) */
        char *eq = strchr(t, '='), *dot = NULL;
        for (char *p = t; eq && p < eq; p++)
            if (*p == '.')
                dot = p;
        if (!dot || !eq)
            return cp_diag_set(d, CP_ERR_USAGE,
                               "--what-if %s: write NODE.KEY=VALUE (KEY: speed, workers, "
                               "batch_size, queue_size, batch_window_ms)",
                               t);
        *dot = '\0';
        *eq = '\0';
        const char *key = dot + 1, *val = eq + 1;
        long node = -1;
        for (size_t i = 0; i < pl->n_nodes; i++)
            if (strcmp(pl->nodes[i].name, t) == 0)
                node = (long)i;
        if (node < 0)
            return cp_diag_set(d, CP_ERR_USAGE, "--what-if: the flow has no node '%s'", t);
        char *end = NULL;
        double x = strtod(val, &end);
        bool whole = x == floor(x) && x >= 1 && x <= 1e6;
        struct sim_node *n = &nodes[node];
        bool window = strcmp(key, "batch_window_ms") == 0;
        if (end == val || *end || !isfinite(x) || x < 0 || (x == 0 && !window))
            return cp_diag_set(d, CP_ERR_USAGE, "--what-if %s.%s=%s: give a number above 0%s", t,
                               key, val, window ? " (or 0: no window)" : "");
        if (window && x == floor(x) && x <= 60000)
            n->window = x / 1e3;
        else if (strcmp(key, "speed") == 0)
            n->speed *= x;
        else if (strcmp(key, "workers") == 0 && whole)
            n->workers = (int)x;
        else if (strcmp(key, "batch_size") == 0 && whole && x <= 256)
            n->batch = (int)x;
        else if (strcmp(key, "queue_size") == 0 && whole)
            n->queue = (int)x;
        else
            return cp_diag_set(d, CP_ERR_USAGE,
                               "--what-if %s.%s=%s: KEY is speed (a factor), workers, batch_size "
                               "(1..256), queue_size (whole numbers) or batch_window_ms "
                               "(0..60000)",
                               t, key, val);
        if (w->n_changes < CP_WHATIF_MAX_CHANGES) {
            struct cp_whatif_change *c = &w->changes[w->n_changes++];
            snprintf(c->node, sizeof c->node, "%s", t);
            snprintf(c->key, sizeof c->key, "%s", key);
            snprintf(c->value, sizeof c->value, "%s", val);
            c->line = pl->nodes[node].line;
        }
    }
    if (w->n_changes == 0)
        return cp_diag_set(d, CP_ERR_USAGE, "--what-if: no change given");
    return CP_OK;
}

/* A number among a node's recorded keys (a JSON object of strings); 0
 * when absent or not a number. */
static double attr_num(const char *attrs_json, const char *key)
{
    json_t *o = attrs_json ? json_loads(attrs_json, 0, NULL) : NULL;
    const char *v = json_string_value(json_object_get(o, key));
    char *end = NULL;
    double x = v ? strtod(v, &end) : 0;
    if (!v || end == v || *end || !isfinite(x) || x < 0)
        x = 0;
    json_decref(o);
    return x;
}

static void free_nodes(struct sim_node *nodes, size_t n)
{
    for (size_t i = 0; nodes && i < n; i++) {
        free(nodes[i].dur);
        free(nodes[i].bat);
        free(nodes[i].by_batch);
        free(nodes[i].q);
        free(nodes[i].waiters);
    }
    free(nodes);
}

struct rec_key {
    uint32_t batch;
    size_t idx;
};

static int cmp_rec_key(const void *pa, const void *pb)
{
    const struct rec_key *a = pa, *b = pb;
    if (a->batch != b->batch)
        return a->batch < b->batch ? -1 : 1;
    return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static enum cp_status load_nodes(const struct cp_trace_pipeline *pl,
                                 const struct cp_trace_node_call *v, size_t n,
                                 struct sim_node **out, struct cp_diag *d)
{
    struct sim_node *nodes = cp_calloc(pl->n_nodes, sizeof *nodes);
    if (!nodes)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < pl->n_nodes; i++) {
        struct sim_node *s = &nodes[i];
        s->workers = pl->nodes[i].workers > 0 ? pl->nodes[i].workers : 1;
        s->batch = pl->nodes[i].batch_size > 0 ? pl->nodes[i].batch_size : 1;
        s->queue = pl->nodes[i].queue_size > 0 ? pl->nodes[i].queue_size : 32;
        s->speed = 1;
        s->window = attr_num(pl->nodes[i].attrs_json, "batch_window_ms") / 1e3;
        s->flowunit = pl->nodes[i].flowunit;
        s->source = strcmp(s->flowunit, "file_source") == 0;
        s->loop = strcmp(s->flowunit, "loop") == 0;
        s->body_to = s->exit_to = -1;
        if (s->loop) {
            /* count from the node's keys */
            const char *a =
                pl->nodes[i].attrs_json ? strstr(pl->nodes[i].attrs_json, "\"count\":\"") : NULL;
            s->loop_count = a ? atoi(a + 9) : 1;
        }
    }
    /* a loop's body edge: the out edge through which the loop reaches its
     * own back edge; found by a search from each out edge */
    for (size_t i = 0; i < pl->n_nodes; i++) {
        if (!nodes[i].loop)
            continue;
        for (size_t e = 0; e < pl->n_edges; e++) {
            if ((size_t)pl->edges[e].from != i)
                continue;
            bool *seen = cp_calloc(pl->n_nodes, sizeof *seen);
            int32_t *stack = cp_calloc(pl->n_nodes + 1, sizeof *stack);
            if (!seen || !stack) {
                free(seen);
                free(stack);
                free(nodes);
                return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            }
            size_t sp = 0;
            bool back = false;
            stack[sp++] = pl->edges[e].to;
            while (sp && !back) {
                int32_t x = stack[--sp];
                if (seen[x])
                    continue;
                seen[x] = true;
                for (size_t f = 0; f < pl->n_edges; f++)
                    if (pl->edges[f].from == x) {
                        if (pl->edges[f].back && (size_t)pl->edges[f].to == i)
                            back = true;
                        else if (!pl->edges[f].back && !seen[pl->edges[f].to] && sp < pl->n_nodes)
                            stack[sp++] = pl->edges[f].to;
                    }
            }
            free(seen);
            free(stack);
            if (back)
                nodes[i].body_to = pl->edges[e].to;
            else
                nodes[i].exit_to = pl->edges[e].to;
        }
    }
    /* the recorded calls per node: counted, then copied, then indexed by
     * batch size */
    for (size_t c = 0; c < n; c++)
        if (v[c].node >= 0 && (size_t)v[c].node < pl->n_nodes)
            nodes[v[c].node].n_rec++;
    for (size_t i = 0; i < pl->n_nodes; i++) {
        struct sim_node *s = &nodes[i];
        size_t k = s->n_rec ? s->n_rec : 1;
        s->dur = cp_calloc(k, sizeof *s->dur);
        s->bat = cp_calloc(k, sizeof *s->bat);
        s->by_batch = cp_calloc(k, sizeof *s->by_batch);
        if (!s->dur || !s->bat || !s->by_batch) {
            free_nodes(nodes, pl->n_nodes);
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        }
        s->n_rec = 0;
    }
    for (size_t c = 0; c < n; c++) {
        if (v[c].node < 0 || (size_t)v[c].node >= pl->n_nodes)
            continue;
        struct sim_node *s = &nodes[v[c].node];
        s->dur[s->n_rec] = (double)(v[c].end_ns - v[c].start_ns) / 1e9;
        s->bat[s->n_rec] = v[c].batch ? v[c].batch : 1;
        s->by_batch[s->n_rec] = s->n_rec;
        s->n_rec++;
    }
    for (size_t i = 0; i < pl->n_nodes; i++) {
        struct sim_node *s = &nodes[i];
        struct rec_key *keys = cp_calloc(s->n_rec ? s->n_rec : 1, sizeof *keys);
        if (!keys) {
            free_nodes(nodes, pl->n_nodes);
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        }
        for (size_t r = 0; r < s->n_rec; r++)
            keys[r] = (struct rec_key){s->bat[r], r};
        qsort(keys, s->n_rec, sizeof *keys, cmp_rec_key);
        for (size_t r = 0; r < s->n_rec; r++)
            s->by_batch[r] = keys[r].idx;
        free(keys);
    }
    *out = nodes;
    return CP_OK;
}

enum cp_status cp_pipeline_whatif(const char *trace, int64_t run, const char *changes,
                                  struct cp_flow_whatif *w, struct cp_diag *d)
{
    return cp_pipeline_whatif_at(trace, run, changes, 0, 0, w, d);
}

enum cp_status cp_pipeline_whatif_at(const char *trace, int64_t run, const char *changes,
                                     double rate, uint64_t seed, struct cp_flow_whatif *w,
                                     struct cp_diag *d)
{
    memset(w, 0, sizeof *w);
    struct pl_recorded rec;
    enum cp_status st = pl_recorded_read(trace, run, &rec, d);
    if (st != CP_OK)
        return st;
    w->run_id = rec.run_id;
    snprintf(w->flow, sizeof w->flow, "%s", rec.flow);
    const struct cp_trace_pipeline pl = rec.pl;
    const struct cp_trace_node_call *v = rec.calls;
    size_t n = rec.n_calls;
    const struct cp_trace_sample *sm = rec.samples;
    size_t n_sm = rec.n_samples;
    struct sim_node *base = NULL, *changed = NULL;
    if (st == CP_OK)
        st = load_nodes(&pl, v, n, &base, d);
    if (st == CP_OK)
        st = load_nodes(&pl, v, n, &changed, d);
    if (st == CP_OK)
        st = apply_changes(changes, &pl, changed, w, d);
    /* under a workload, both replays get the same arrivals */
    double *at = NULL;
    size_t n_at = 0;
    if (st == CP_OK && rate > 0) {
        st = cp_stats_poisson_arrivals(rate, 0, n_sm, seed, &at, &n_at, d);
        if (st == CP_OK && n_at < n_sm)
            st = cp_diag_set(d, CP_ERR_INTERNAL, "too few arrivals for the replay");
    }
    struct sim_figures fb, fc;
    if (st == CP_OK)
        st = simulate(base, pl.n_nodes, &pl, n_sm, at, &fb, d);
    if (st == CP_OK)
        st = simulate(changed, pl.n_nodes, &pl, n_sm, at, &fc, d);
    free(at);
    if (st == CP_OK) {
        /* the measured figures */
        double *lat = cp_calloc(n_sm, sizeof *lat), sum = 0;
        uint64_t t0 = UINT64_MAX, t1 = 0;
        for (size_t i = 0; i < n; i++) {
            t0 = v[i].start_ns < t0 ? v[i].start_ns : t0;
            t1 = v[i].done_ns > t1 ? v[i].done_ns : t1;
        }
        for (size_t i = 0; lat && i < n_sm; i++) {
            lat[i] = (double)sm[i].latency_ns / 1e6;
            sum += lat[i];
        }
        if (!lat) {
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        } else {
            w->measured.throughput = t1 > t0 ? (double)n_sm / ((double)(t1 - t0) / 1e9) : 0;
            w->measured.p50_ms = cp_stats_quantile(lat, n_sm, 0.5);
            w->measured.p99_ms = cp_stats_quantile(lat, n_sm, 0.99);
            w->measured.mean_ms = sum / (double)n_sm;
        }
        free(lat);
        w->replayed = (struct cp_whatif_figures){fb.throughput, fb.p50_ms, fb.p99_ms, fb.mean_ms};
        w->simulated = (struct cp_whatif_figures){fc.throughput, fc.p50_ms, fc.p99_ms, fc.mean_ms};
        /* the measurement scaled by the ratio of the two replays */
        w->predicted.throughput =
            fb.throughput > 0 ? w->measured.throughput * fc.throughput / fb.throughput : 0;
        w->predicted.p50_ms = fb.p50_ms > 0 ? w->measured.p50_ms * fc.p50_ms / fb.p50_ms : 0;
        w->predicted.p99_ms = fb.p99_ms > 0 ? w->measured.p99_ms * fc.p99_ms / fb.p99_ms : 0;
        w->predicted.mean_ms = fb.mean_ms > 0 ? w->measured.mean_ms * fc.mean_ms / fb.mean_ms : 0;
        w->requests = n_sm;
    }
    free_nodes(base, pl.n_nodes);
    free_nodes(changed, pl.n_nodes);
    pl_recorded_release(&rec);
    return st;
}
