/* Flame graphs: a run's events folded into a tree of frames (view/view.h,
 * docs/views.md).
 *
 * Every event of the chosen iterations is placed under the innermost event
 * of its thread that contains it, whatever the layer: an application range
 * holds the runtime phases it spans, a runtime phase the kernels it
 * launched. Events are taken in start order, the longer first when two
 * start together, so the container always comes before what it contains.
 * Outermost events hang under a frame of their layer (and thread). A
 * frame's time is the sum of its events' durations; what its children do
 * not cover is its own time.
 *
 * A pipeline run has no events but node calls: the flow, its nodes, and
 * each node's time on a CPU, waiting for one, off the CPU and blocked on a
 * full queue, each call's time shared equally by the requests of its batch.
 */
#include "view/flame_internal.h"

#include "core/json.h"
#include "runner/probe.h"
#include "stats/stats.h"

#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool cp_flame_group_parse(const char *s, enum cp_flame_group *g)
{
    static const char *const names[] = {"layer", "op", "onnx", "pipeline"};
    for (size_t i = 0; s && i < sizeof names / sizeof names[0]; i++)
        if (strcmp(s, names[i]) == 0) {
            *g = (enum cp_flame_group)i;
            return true;
        }
    return false;
}

bool cp_flame_iters_parse(const char *s, enum cp_flame_iters *w, int64_t *iteration)
{
    if (!s || !*s)
        return false;
    if (strcmp(s, "mean") == 0 || strcmp(s, "median") == 0 || strcmp(s, "all") == 0) {
        *w = s[1] == 'e' && s[2] == 'a' ? CP_FLAME_MEAN
             : s[1] == 'e'              ? CP_FLAME_MEDIAN
                                        : CP_FLAME_ALL;
        return true;
    }
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (*end || v < 0)
        return false;
    *w = CP_FLAME_ONE;
    *iteration = v;
    return true;
}

void cp_flame_opts_init(struct cp_flame_opts *o)
{
    memset(o, 0, sizeof *o);
    o->run_id = -1;
}

void fl_fmt_ns(double ns, char *out, size_t n)
{
    double a = fabs(ns);
    if (a >= 1e9)
        snprintf(out, n, "%.3g s", ns / 1e9);
    else if (a >= 1e6)
        snprintf(out, n, "%.3g ms", ns / 1e6);
    else if (a >= 1e3)
        snprintf(out, n, "%.3g \xc2\xb5s", ns / 1e3);
    else
        snprintf(out, n, "%.0f ns", ns);
}

/* ---- the tree ---------------------------------------------------------------------------- */

void fl_frames_release(struct fl_tree *t)
{
    for (size_t i = 0; i < t->n; i++) {
        free(t->f[i].name);
        free(t->f[i].path);
        free(t->f[i].key);
        free(t->f[i].per);
        free(t->f[i].kids);
    }
    free(t->f);
    t->f = NULL;
    t->n = t->cap = 0;
    cp_strmap_release(&t->by_key);
}

void fl_tree_release(struct fl_tree *t)
{
    fl_frames_release(t);
    free(t->iters);
    free(t->chosen);
    free(t->quiet);
    cp_trace_kernels_free(t->k, t->nk);
    free(t->run_label);
    free(t->model);
    free(t->model_hash);
    memset(t, 0, sizeof *t);
}

int32_t fl_child(struct fl_tree *t, int32_t parent, enum fl_kind kind, int layer, const char *name)
{
    struct cp_buf key;
    cp_buf_init(&key);
    cp_buf_printf(&key, "%" PRId32 "\x1f%d\x1f%s", parent, (int)kind, name);
    if (cp_buf_status(&key) != CP_OK) {
        cp_buf_release(&key);
        return -1;
    }
    int64_t id = cp_strmap_get(&t->by_key, key.data, key.len, -1);
    if (id >= 0) {
        cp_buf_release(&key);
        return (int32_t)id;
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 256;
        struct fl_frame *f = cp_realloc_array(t->f, cap, sizeof *f);
        if (!f) {
            cp_buf_release(&key);
            return -1;
        }
        t->f = f;
        t->cap = cap;
    }
    struct fl_frame *f = &t->f[t->n];
    memset(f, 0, sizeof *f);
    f->parent = parent;
    f->kind = kind;
    f->layer = layer;
    f->kernel = -1;
    f->name = cp_strdup(name);
    struct cp_buf path;
    cp_buf_init(&path);
    if (parent >= 0)
        cp_buf_printf(&path, "%s\x1f%d:%s", t->f[parent].path, (int)kind, name);
    else
        cp_buf_puts(&path, name);
    f->path = cp_buf_status(&path) == CP_OK ? cp_buf_steal(&path) : NULL;
    cp_buf_release(&path);
    /* the map borrows its keys: the frame owns this one */
    f->key_len = key.len;
    f->key = cp_buf_steal(&key);
    cp_buf_release(&key);
    if (!f->name || !f->path || !f->key ||
        cp_strmap_put(&t->by_key, f->key, f->key_len, (int64_t)t->n) != CP_OK) {
        free(f->name);
        free(f->path);
        free(f->key);
        return -1;
    }
    if (parent >= 0 && t->f[parent].depth + 1 > t->max_depth)
        t->max_depth = t->f[parent].depth + 1;
    f->depth = parent >= 0 ? t->f[parent].depth + 1 : 0;
    return (int32_t)t->n++;
}

/* Add ns to frame id (and the current dense iteration's share). */
static bool add(struct fl_tree *t, int32_t id, double ns)
{
    struct fl_frame *f = &t->f[id];
    f->total += ns;
    if (!t->keep_per || t->n_iters == 0)
        return true;
    size_t i = t->n_iters - 1;
    if (i >= f->n_per) {
        size_t cap = f->n_per ? f->n_per : 16;
        while (cap <= i)
            cap *= 2;
        double *p = cp_realloc_array(f->per, cap, sizeof *p);
        if (!p)
            return false;
        memset(p + f->n_per, 0, (cap - f->n_per) * sizeof *p);
        f->per = p;
        f->n_per = cap;
    }
    f->per[i] += ns;
    return true;
}

static bool new_iteration(struct fl_tree *t, int64_t it)
{
    if (t->n_iters == t->cap_iters) {
        size_t cap = t->cap_iters ? 2 * t->cap_iters : 64;
        int64_t *v = cp_realloc_array(t->iters, cap, sizeof *v);
        if (!v)
            return false;
        t->iters = v;
        t->cap_iters = cap;
    }
    t->iters[t->n_iters++] = it;
    return true;
}

/* ---- events -> frames ------------------------------------------------------------------ */

struct ev {
    int64_t start, end, kernel;
    int layer, thread;
    size_t name; /* offset in the iteration's text, or SIZE_MAX */
};

struct walk {
    struct fl_tree *t;
    struct cp_trace_store *s;
    int64_t iteration; /* being gathered; INT64_MIN before the first */
    struct ev *ev;
    size_t n, cap;
    struct cp_buf text;
    struct cp_buf name; /* scratch */
    size_t events;
};

static int cmp_ev(const void *a, const void *b)
{
    const struct ev *x = a, *y = b;
    if (x->thread != y->thread)
        return x->thread < y->thread ? -1 : 1;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    if (x->end != y->end)
        return x->end > y->end ? -1 : 1; /* the container first */
    if (x->layer != y->layer)
        return x->layer < y->layer ? -1 : 1;
    return x->name < y->name ? -1 : x->name > y->name;
}

/* The frame name of a kernel event by the grouping. */
static const char *kernel_name(struct walk *w, const struct ev *e, const char *event_name)
{
    const struct fl_tree *t = w->t;
    const struct cp_trace_kernel_desc *k =
        e->kernel >= 0 && (size_t)e->kernel < t->nk && t->k[e->kernel].idx == e->kernel
            ? &t->k[e->kernel]
            : NULL;
    if (t->group != CP_FLAME_BY_ONNX || !k)
        return event_name ? event_name : (k && k->node[0] ? k->node : "(kernel)");
    json_t *o = json_loads(k->origins, 0, NULL);
    cp_buf_reset(&w->name);
    for (size_t i = 0; json_is_array(o) && i < json_array_size(o); i++) {
        const char *s = json_string_value(json_array_get(o, i));
        if (!s)
            continue;
        if (w->name.len)
            cp_buf_puts(&w->name, " + ");
        cp_buf_puts(&w->name, s);
    }
    json_decref(o);
    if (w->name.len == 0 || cp_buf_status(&w->name) != CP_OK)
        return event_name ? event_name : k->node;
    return w->name.data;
}

static const char *op_of(const struct fl_tree *t, int64_t kernel)
{
    if (kernel >= 0 && (size_t)kernel < t->nk && t->k[kernel].idx == kernel &&
        t->k[kernel].op_type[0])
        return t->k[kernel].op_type;
    return "(op not recorded)";
}

/* Fold the gathered iteration's events into the tree. */
static enum cp_status fold(struct walk *w, struct cp_diag *d)
{
    struct fl_tree *t = w->t;
    if (w->n == 0)
        return CP_OK;
    if (!new_iteration(t, w->iteration))
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    qsort(w->ev, w->n, sizeof *w->ev, cmp_ev);
    struct {
        int32_t frame;
        int64_t start, end;
    } stack[CP_TRACE_MAX_DEPTH * 4];
    size_t depth = 0;
    int thread = INT32_MIN;
    for (size_t i = 0; i < w->n; i++) {
        const struct ev *e = &w->ev[i];
        if (e->thread != thread) {
            depth = 0;
            thread = e->thread;
        }
        while (depth > 0 && !(e->start >= stack[depth - 1].start && e->end <= stack[depth - 1].end))
            depth--;
        int32_t parent;
        if (depth > 0) {
            parent = stack[depth - 1].frame;
        } else {
            char track[96];
            const char *ln = cp_trace_layer_name((enum cp_trace_layer)e->layer);
            if (strcmp(ln, "unknown") == 0)
                snprintf(track, sizeof track, "layer %d", e->layer);
            else
                snprintf(track, sizeof track, "%s", ln);
            if (e->thread != 0) {
                size_t l = strlen(track);
                snprintf(track + l, sizeof track - l, " (thread %d)", e->thread);
            }
            parent = fl_child(t, 0, FK_TRACK, e->layer, track);
            if (parent < 0 || !add(t, parent, (double)(e->end - e->start)) ||
                !add(t, 0, (double)(e->end - e->start)))
                return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        }
        const char *en = e->name != SIZE_MAX ? w->text.data + e->name : NULL;
        bool is_kernel = e->kernel >= 0 && e->layer == CP_LAYER_DEVICE;
        int32_t id;
        if (is_kernel && t->group == CP_FLAME_BY_OP) {
            int32_t op = fl_child(t, parent, FK_OP, e->layer, op_of(t, e->kernel));
            if (op < 0 || !add(t, op, (double)(e->end - e->start)))
                return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            id = fl_child(t, op, FK_KERNEL, e->layer, kernel_name(w, e, en));
        } else if (is_kernel) {
            id = fl_child(t, parent, FK_KERNEL, e->layer, kernel_name(w, e, en));
        } else {
            id = fl_child(t, parent, FK_EVENT, e->layer, en ? en : "(unnamed)");
        }
        if (id < 0 || !add(t, id, (double)(e->end - e->start)))
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        if (t->f[id].kernel < 0)
            t->f[id].kernel = is_kernel ? e->kernel : -1;
        if (depth < sizeof stack / sizeof stack[0]) {
            stack[depth].frame = id;
            stack[depth].start = e->start;
            stack[depth].end = e->end;
            depth++;
        }
    }
    w->n = 0;
    cp_buf_reset(&w->text);
    return CP_OK;
}

static enum cp_status on_event(void *ctx, const struct cp_trace_event_row *r, struct cp_diag *d)
{
    struct walk *w = ctx;
    if (r->iteration != w->iteration) {
        enum cp_status st = fold(w, d);
        if (st != CP_OK)
            return st;
        w->iteration = r->iteration;
    }
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 1024;
        struct ev *v = cp_realloc_array(w->ev, cap, sizeof *v);
        if (!v)
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        w->ev = v;
        w->cap = cap;
    }
    struct ev *e = &w->ev[w->n++];
    e->start = r->start_ns;
    /* saturated: an imported trace may hold any int64 */
    int64_t dur = r->dur_ns > 0 ? r->dur_ns : 0;
    e->end = r->start_ns > INT64_MAX - dur ? INT64_MAX : r->start_ns + dur;
    e->kernel = r->kernel_idx;
    e->layer = r->layer;
    e->thread = r->thread;
    e->name = SIZE_MAX;
    if (r->name) {
        e->name = w->text.len;
        cp_buf_append(&w->text, r->name, strlen(r->name) + 1);
        if (cp_buf_status(&w->text) != CP_OK)
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    }
    w->events++;
    return CP_OK;
}

/* ---- pipeline runs ------------------------------------------------------------------------ */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static enum cp_status build_pipeline(struct cp_trace_store *s, int64_t run, struct fl_tree *t,
                                     const struct cp_trace_pipeline *pl, struct cp_diag *d)
{
    struct cp_trace_node_call *v = NULL;
    size_t n = 0;
    enum cp_status st = cp_trace_query_node_calls(s, run, &v, &n, d);
    if (st != CP_OK)
        return st;
    if (n == 0) {
        cp_trace_node_calls_free(v, n);
        return cp_diag_set(d, CP_ERR_INVALID, "%s: run %lld recorded no node calls",
                           cp_trace_store_path(s), (long long)run);
    }
    /* the requests, ascending, as the dense iterations */
    int64_t *req = NULL;
    size_t nr = 0, cr = 0;
    for (size_t i = 0; i < n && st == CP_OK; i++)
        for (const char *p = v[i].requests; p && *p;) {
            char *end = NULL;
            long long id = strtoll(p, &end, 10);
            if (end == p)
                break;
            if (nr == cr) {
                size_t c = cr ? 2 * cr : 256;
                int64_t *q = cp_realloc_array(req, c, sizeof *q);
                if (!q) {
                    st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
                    break;
                }
                req = q;
                cr = c;
            }
            req[nr++] = id;
            p = *end == ',' ? end + 1 : end;
        }
    if (st == CP_OK) {
        if (nr > 1)
            qsort(req, nr, sizeof *req, cmp_i64);
        size_t u = 0;
        for (size_t i = 0; i < nr; i++)
            if (u == 0 || req[u - 1] != req[i])
                req[u++] = req[i];
        nr = u;
        for (size_t i = 0; i < nr && st == CP_OK; i++)
            if (!new_iteration(t, req[i]))
                st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    }
    const char *flow = t->model && t->model[0] ? t->model : "flow";
    const char *base = strrchr(flow, '/');
    int32_t root = st == CP_OK ? fl_child(t, 0, FK_TRACK, -1, base ? base + 1 : flow) : 0;
    if (root < 0)
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    static const char *const phase[] = {"on a CPU", "waiting for a CPU", "off the CPU",
                                        "blocked on a full queue"};
    for (size_t i = 0; i < n && st == CP_OK; i++) {
        const struct cp_trace_node_call *c = &v[i];
        if (c->node < 0 || (size_t)c->node >= pl->n_nodes)
            continue;
        double busy = c->end_ns > c->start_ns ? (double)(c->end_ns - c->start_ns) : 0;
        double cpu = fmin((double)c->cpu_ns, busy);
        double rq = fmin((double)c->runq_ns, busy - cpu);
        double part[4] = {cpu, rq, busy - cpu - rq, (double)c->blocked_ns};
        int32_t node = fl_child(t, root, FK_NODE, -1, pl->nodes[c->node].name);
        int32_t ph[4];
        for (int k = 0; k < 4; k++)
            ph[k] = node >= 0 ? fl_child(t, node, FK_PHASE, k, phase[k]) : -1;
        if (node < 0 || ph[0] < 0 || ph[1] < 0 || ph[2] < 0 || ph[3] < 0) {
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            break;
        }
        /* shared by the batch's requests */
        size_t nb = 0;
        for (const char *p = c->requests; p && *p; p++)
            nb += *p == ',';
        nb += c->requests && *c->requests ? 1 : 0;
        for (const char *p = c->requests; p && *p && st == CP_OK;) {
            char *end = NULL;
            long long id = strtoll(p, &end, 10);
            if (end == p)
                break;
            int64_t key = id;
            int64_t *at = nr ? bsearch(&key, req, nr, sizeof *req, cmp_i64) : NULL;
            if (at) {
                /* `add` charges the last dense iteration: point it here */
                size_t keep = t->n_iters;
                t->n_iters = (size_t)(at - req) + 1;
                double total = 0;
                for (int k = 0; k < 4; k++) {
                    if (part[k] > 0 && !add(t, ph[k], part[k] / (double)nb))
                        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
                    total += part[k] / (double)nb;
                }
                if (st == CP_OK &&
                    (!add(t, node, total) || !add(t, root, total) || !add(t, 0, total)))
                    st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
                t->n_iters = keep;
            }
            p = *end == ',' ? end + 1 : end;
        }
    }
    free(req);
    cp_trace_node_calls_free(v, n);
    return st;
}

/* ---- which iterations ---------------------------------------------------------------------- */

/* The fewest undisturbed iterations kept on their own (fewer: all count). */
#define FL_MIN_QUIET 5

static int cmp_sample_it(const void *a, const void *b)
{
    int64_t x = ((const struct cp_trace_sample *)a)->iteration,
            y = ((const struct cp_trace_sample *)b)->iteration;
    return x < y ? -1 : x > y;
}

/* Which dense iterations ran undisturbed: the probe of every sample, marked
 * as validate and the features mark them (cp_probe_mark_run against the
 * run's own floor). Leaves t->quiet NULL when the run has no probe for
 * every sample, or fewer than FL_MIN_QUIET (or all) ran undisturbed. */
static enum cp_status pick_quiet(struct cp_trace_store *s, struct fl_tree *t, struct cp_diag *d)
{
    struct cp_trace_sample *sm = NULL;
    struct cp_trace_point *pr = NULL;
    size_t n = 0, np = 0;
    enum cp_status st = cp_trace_query_samples(s, t->run_id, &sm, &n, d);
    if (st == CP_OK && n > 0)
        st = cp_trace_query_counter_series(s, t->run_id, "probe_ns", &pr, &np, d);
    uint64_t *ns = NULL, *probe = NULL;
    bool *keep = NULL;
    if (st != CP_OK || n < FL_MIN_QUIET || np < n)
        goto out;
    if (n > 1)
        qsort(sm, n, sizeof *sm, cmp_sample_it);
    ns = cp_calloc(n, sizeof *ns);
    probe = cp_calloc(n, sizeof *probe);
    keep = cp_calloc(n, sizeof *keep);
    if (!ns || !probe || !keep) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        goto out;
    }
    /* each sample's probe (the series is ascending by iteration) */
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        while (j < np && pr[j].iteration < sm[i].iteration)
            j++;
        if (j == np || pr[j].iteration != sm[i].iteration ||
            !(pr[j].value > 0 && pr[j].value < 1e18))
            goto out; /* a sample without a probe: every iteration counts */
        probe[i] = (uint64_t)pr[j].value;
        ns[i] = sm[i].latency_ns;
    }
    size_t k = cp_probe_mark_run(probe, ns, n, cp_probe_floor(probe, n), keep);
    if (k < FL_MIN_QUIET || k == n)
        goto out;
    t->quiet = cp_calloc(t->n_iters ? t->n_iters : 1, sizeof *t->quiet);
    if (!t->quiet) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        goto out;
    }
    /* dense iterations are ascending too */
    j = 0;
    for (size_t i = 0; i < t->n_iters; i++) {
        while (j < n && sm[j].iteration < t->iters[i])
            j++;
        t->quiet[i] = j < n && sm[j].iteration == t->iters[i] && keep[j];
        t->n_quiet += t->quiet[i];
    }
    if (t->n_quiet < FL_MIN_QUIET) {
        free(t->quiet);
        t->quiet = NULL;
        t->n_quiet = 0;
    }
out:
    free(sm);
    free(pr);
    free(ns);
    free(probe);
    free(keep);
    return st;
}

/* The iteration with the median latency (the lower of the middle two). */
static enum cp_status median_iteration(struct cp_trace_store *s, int64_t run, int64_t *it,
                                       struct cp_diag *d)
{
    struct cp_trace_sample *v = NULL;
    size_t n = 0;
    enum cp_status st = cp_trace_query_samples(s, run, &v, &n, d);
    if (st != CP_OK)
        return st;
    if (n == 0) {
        free(v);
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s: run %lld has no iteration latencies to find the median one in "
                           "(use --iteration mean or a number)",
                           cp_trace_store_path(s), (long long)run);
    }
    /* sort by latency, then iteration, and take the middle */
    for (size_t i = 1; i < n; i++) {
        struct cp_trace_sample x = v[i];
        size_t j = i;
        while (j > 0 &&
               (v[j - 1].latency_ns > x.latency_ns ||
                (v[j - 1].latency_ns == x.latency_ns && v[j - 1].iteration > x.iteration))) {
            v[j] = v[j - 1];
            j--;
        }
        v[j] = x;
    }
    *it = v[(n - 1) / 2].iteration;
    free(v);
    return CP_OK;
}

enum cp_status fl_build(struct cp_trace_store *s, const struct cp_flame_opts *o, struct fl_tree *t,
                        struct cp_diag *d)
{
    memset(t, 0, sizeof *t);
    cp_strmap_init(&t->by_key);
    t->keep_per = true; /* widths of the chosen iterations, and a diff's tests */
    t->group = o->group;
    t->left_heavy = o->left_heavy;
    const char *path = cp_trace_store_path(s);
    struct cp_trace_run run;
    enum cp_status st = cp_trace_query_run(s, o->run_id, &run, d);
    if (st != CP_OK)
        return st;
    t->run_id = run.id;
    t->model = cp_strdup(run.model_path);
    t->model_hash = cp_strdup(run.model_hash);
    struct cp_buf lab;
    cp_buf_init(&lab);
    cp_buf_printf(&lab, "%s, run %lld (%s%s%s)", path, (long long)run.id, run.kind,
                  run.model_path[0] ? " of " : "", run.model_path);
    t->run_label = cp_buf_status(&lab) == CP_OK ? cp_buf_steal(&lab) : NULL;
    cp_buf_release(&lab);
    cp_trace_run_release(&run);
    if (!t->model || !t->model_hash || !t->run_label)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    if (fl_child(t, -1, FK_ROOT, -1, "all") != 0)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    struct cp_trace_pipeline pl;
    st = cp_trace_query_pipeline(s, t->run_id, &pl, d);
    if (st != CP_OK)
        return st;
    bool pipeline = pl.n_nodes > 0;
    if (o->group == CP_FLAME_BY_PIPELINE && !pipeline) {
        cp_trace_pipeline_release(&pl);
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s: run %lld is not a pipeline run: --group pipeline draws a flow's "
                           "nodes (use layer, op or onnx)",
                           path, (long long)t->run_id);
    }
    if (pipeline) {
        t->group = CP_FLAME_BY_PIPELINE;
        st = build_pipeline(s, t->run_id, t, &pl, d);
        cp_trace_pipeline_release(&pl);
    } else {
        cp_trace_pipeline_release(&pl);
        st = cp_trace_query_kernels(s, t->run_id, &t->k, &t->nk, d);
        struct walk w = {.t = t, .s = s, .iteration = INT64_MIN};
        cp_buf_init(&w.text);
        cp_buf_init(&w.name);
        if (st == CP_OK)
            st = cp_trace_query_iteration_events(s, t->run_id, 0xffffffffu, NULL, on_event, &w, d);
        if (st == CP_OK)
            st = fold(&w, d);
        free(w.ev);
        cp_buf_release(&w.text);
        cp_buf_release(&w.name);
    }
    if (st != CP_OK)
        return st;
    if (t->n_iters == 0 || t->f[0].total <= 0)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s: run %lld has no %s in measured iterations to draw (a run "
                           "recorded without --trace events, or an empty import)",
                           path, (long long)t->run_id, pipeline ? "node calls" : "events");
    if (!pipeline && o->all_iterations == false) {
        st = pick_quiet(s, t, d);
        if (st != CP_OK)
            return st;
    }
    /* the chosen iterations */
    t->chosen = cp_calloc(t->n_iters, sizeof *t->chosen);
    if (!t->chosen)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    int64_t want = -1;
    if (o->iters == CP_FLAME_MEDIAN && !pipeline) {
        st = median_iteration(s, t->run_id, &want, d);
        if (st != CP_OK)
            return st;
    } else if (o->iters == CP_FLAME_MEDIAN) {
        /* a flow's median request: the one whose node time is the median */
        double *tot = cp_calloc(t->n_iters, sizeof *tot);
        if (!tot)
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        for (size_t i = 0; i < t->n_iters; i++)
            tot[i] = fl_per(&t->f[0], i);
        double med = cp_stats_quantile(tot, t->n_iters, 0.5);
        size_t best = 0;
        for (size_t i = 1; i < t->n_iters; i++)
            if (fabs(tot[i] - med) < fabs(tot[best] - med))
                best = i;
        want = t->iters[best];
        free(tot);
    } else if (o->iters == CP_FLAME_ONE) {
        want = o->iteration;
    }
    size_t n_chosen = 0;
    for (size_t i = 0; i < t->n_iters; i++) {
        /* the mean and the sum are of the undisturbed iterations; one
         * iteration asked for by number is drawn whatever it met */
        t->chosen[i] = want < 0 ? fl_counts(t, i) : t->iters[i] == want;
        n_chosen += t->chosen[i];
    }
    if (n_chosen == 0)
        return cp_diag_set(
            d, CP_ERR_INVALID, "%s: run %lld has no %s %lld with events (it has %lld to %lld)",
            path, (long long)t->run_id, pipeline ? "request" : "iteration", (long long)want,
            (long long)t->iters[0], (long long)t->iters[t->n_iters - 1]);
    t->divisor = o->iters == CP_FLAME_MEAN ? (double)n_chosen : 1;
    return CP_OK;
}

/* ---- layout -------------------------------------------------------------------------------- */

static const struct fl_tree *sort_tree;

static int cmp_kid(const void *a, const void *b)
{
    const struct fl_frame *x = &sort_tree->f[*(const int32_t *)a],
                          *y = &sort_tree->f[*(const int32_t *)b];
    /* left-heavy (speedscope): the widest first, ties by name */
    if (sort_tree->left_heavy && x->width != y->width)
        return x->width > y->width ? -1 : 1;
    int c = strcmp(x->name, y->name);
    if (c)
        return c;
    return x->kind < y->kind ? -1 : x->kind > y->kind;
}

static void shrink(struct fl_tree *t, int32_t id, double scale)
{
    struct fl_frame *f = &t->f[id];
    f->width *= scale;
    for (size_t j = 0; j < f->n_kids; j++)
        shrink(t, f->kids[j], scale);
}

static void place(struct fl_tree *t, int32_t id, double x)
{
    struct fl_frame *f = &t->f[id];
    f->x = x;
    double sum = 0;
    for (size_t i = 0; i < f->n_kids; i++)
        sum += t->f[f->kids[i]].width;
    /* children that outgrow their frame (partly overlapping imported
     * events) are shrunk to fit, and counted */
    double scale = 1;
    if (sum > f->width * (1 + 1e-9) && sum > 0) {
        scale = f->width / sum;
        t->overlaps++;
    }
    for (size_t i = 0; i < f->n_kids; i++) {
        struct fl_frame *k = &t->f[f->kids[i]];
        if (scale != 1)
            shrink(t, f->kids[i], scale);
        place(t, f->kids[i], x);
        x += k->width;
    }
}

enum cp_status fl_layout(struct fl_tree *t)
{
    for (size_t i = 0; i < t->n; i++) {
        struct fl_frame *f = &t->f[i];
        double w = 0;
        for (size_t k = 0; k < t->n_iters; k++)
            if (t->chosen[k])
                w += fl_per(f, k);
        f->width = w / t->divisor;
        free(f->kids);
        f->kids = NULL;
        f->n_kids = 0;
    }
    /* children lists: count, then fill */
    size_t *count = cp_calloc(t->n ? t->n : 1, sizeof *count);
    if (!count)
        return CP_ERR_NOMEM;
    for (size_t i = 1; i < t->n; i++)
        count[t->f[i].parent]++;
    for (size_t i = 0; i < t->n; i++)
        if (count[i]) {
            t->f[i].kids = cp_calloc(count[i], sizeof *t->f[i].kids);
            if (!t->f[i].kids) {
                free(count);
                return CP_ERR_NOMEM;
            }
        }
    free(count);
    for (size_t i = 1; i < t->n; i++) {
        struct fl_frame *p = &t->f[t->f[i].parent];
        p->kids[p->n_kids++] = (int32_t)i;
    }
    sort_tree = t;
    for (size_t i = 0; i < t->n; i++)
        if (t->f[i].n_kids > 1)
            qsort(t->f[i].kids, t->f[i].n_kids, sizeof *t->f[i].kids, cmp_kid);
    sort_tree = NULL;
    t->overlaps = 0;
    place(t, 0, 0);
    return CP_OK;
}
