/*
 * view/timeline.c: a few iterations of a run as one self-contained HTML page.
 *
 * The events of the chosen iterations are read through trace/query.h, put in
 * one canonical order (start, longest first, layer, thread, kernel,
 * iteration, name), and given what the page needs and cannot cheaply work
 * out itself: their track (one per layer and thread), their depth within it
 * (by containment, so an import whose depths are all 0 still stacks), and
 * the runtime phase that launched each kernel (the innermost runtime event
 * of the same thread whose span holds it: the flows). The page's script
 * draws them as SVG from the JSON embedded beside it: zoom, pan, an axis,
 * details, flows, search. Nothing in the page names a time of day or a
 * host path other than the trace's, so the same trace gives the same bytes.
 *
 * The JSON's strings (names, kernels, tracks, the title) go through
 * core/json.h; the event rows, integers only, are printed straight into the
 * page: 200,000 rows as jansson trees would cost a hundred megabytes.
 */
#include "view/view.h"
#include "view/colour.h"
#include "view/timeline_page.h"

#include "core/hashmap.h"
#include "core/json.h"
#include "trace/query.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define TL_MAX_COUNT  16
#define TL_MAX_EVENTS 200000

struct tl_event {
    int64_t start, dur, iteration, kernel;
    int64_t parent; /* the runtime event that launched this kernel; -1 */
    int32_t name;   /* index into the names; -1 when unnamed */
    int32_t layer, thread, track, depth;
};

struct tl_track {
    int32_t layer, thread;
    int32_t depths; /* rows: the deepest depth + 1 */
    size_t events;
    int64_t *open; /* ends (depth pass) or event indices (flow pass) of open events */
    size_t n_open, cap_open;
};

struct tl_ctx {
    const char *path;
    int64_t run;
    const struct cp_trace_iter_set *set;
    struct tl_event *ev;
    size_t n, cap;
    char **names;
    size_t n_names, cap_names;
    struct cp_strmap name_ids;
    struct tl_track *tracks;
    size_t n_tracks;
    size_t flows;
};

static bool grow(void **arr, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return true;
    size_t ncap = *cap ? *cap * 2 : 64;
    void *p = cp_realloc_array(*arr, ncap, size);
    if (!p)
        return false;
    *arr = p;
    *cap = ncap;
    return true;
}

static void ctx_release(struct tl_ctx *c)
{
    free(c->ev);
    for (size_t i = 0; i < c->n_names; i++)
        free(c->names[i]);
    free(c->names);
    cp_strmap_release(&c->name_ids);
    for (size_t i = 0; i < c->n_tracks; i++)
        free(c->tracks[i].open);
    free(c->tracks);
}

/* ---- reading ----------------------------------------------------------------- */

static enum cp_status intern(struct tl_ctx *c, const char *s, int32_t *id, struct cp_diag *d)
{
    size_t len = strlen(s);
    int64_t v = cp_strmap_get(&c->name_ids, s, len, -1);
    if (v >= 0) {
        *id = (int32_t)v;
        return CP_OK;
    }
    if (!grow((void **)&c->names, &c->cap_names, c->n_names, sizeof *c->names))
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory", c->path);
    char *copy = cp_strdup(s);
    if (!copy || cp_strmap_put(&c->name_ids, copy, len, (int64_t)c->n_names) != CP_OK) {
        free(copy);
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory", c->path);
    }
    c->names[c->n_names] = copy;
    *id = (int32_t)c->n_names++;
    return CP_OK;
}

static enum cp_status collect(void *vctx, const struct cp_trace_event_row *e, struct cp_diag *d)
{
    struct tl_ctx *c = vctx;
    if (c->n >= TL_MAX_EVENTS) {
        const struct cp_trace_iter_set *s = c->set;
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s: run %lld: iterations %lld..%lld hold more than %d events, too "
                           "many for one page; choose fewer iterations (--count)",
                           c->path, (long long)c->run, (long long)s->it[0],
                           (long long)s->it[s->n - 1], TL_MAX_EVENTS);
    }
    if (!grow((void **)&c->ev, &c->cap, c->n, sizeof *c->ev))
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory", c->path);
    struct tl_event *t = &c->ev[c->n];
    memset(t, 0, sizeof *t);
    /* clamped to ±2^61 ns (73 years), so that no sum or difference of two
     * times below overflows: an imported trace may hold any int64 */
    const int64_t lim = (int64_t)1 << 61;
    t->start = e->start_ns < -lim ? -lim : e->start_ns > lim ? lim : e->start_ns;
    t->dur = e->dur_ns < 0 ? 0 : e->dur_ns > lim ? lim : e->dur_ns;
    t->iteration = e->iteration;
    t->kernel = e->kernel_idx < 0 ? -1 : e->kernel_idx;
    t->parent = -1;
    t->layer = e->layer;
    t->thread = e->thread;
    t->name = -1;
    if (e->name) {
        enum cp_status st = intern(c, e->name, &t->name, d);
        if (st != CP_OK)
            return st;
    }
    c->n++;
    return CP_OK;
}

/* ---- ordering, tracks, depths, flows ------------------------------------------ */

static int cmp_str_ptr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_i64(int64_t a, int64_t b)
{
    return (a > b) - (a < b);
}

/* The canonical order of the events. Names break the last ties by their
 * rank, which is their byte order once sort_names has run. */
static int cmp_event(const void *pa, const void *pb)
{
    const struct tl_event *a = pa, *b = pb;
    int r = cmp_i64(a->start, b->start);
    if (!r)
        r = cmp_i64(b->dur, a->dur);
    if (!r)
        r = cmp_i64(a->layer, b->layer);
    if (!r)
        r = cmp_i64(a->thread, b->thread);
    if (!r)
        r = cmp_i64(a->kernel, b->kernel);
    if (!r)
        r = cmp_i64(a->iteration, b->iteration);
    if (!r)
        r = cmp_i64(a->name, b->name);
    return r;
}

/* Renumber the names in byte order, so that neither the ids nor the order of
 * equal events depend on the order the store streamed them in. */
static enum cp_status sort_names(struct tl_ctx *c, struct cp_diag *d)
{
    if (c->n_names == 0)
        return CP_OK;
    char **sorted = cp_calloc(c->n_names, sizeof *sorted);
    int32_t *rank = cp_calloc(c->n_names, sizeof *rank);
    if (!sorted || !rank) {
        free(sorted);
        free(rank);
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory", c->path);
    }
    memcpy(sorted, c->names, c->n_names * sizeof *sorted);
    qsort(sorted, c->n_names, sizeof *sorted, cmp_str_ptr);
    for (size_t i = 0; i < c->n_names; i++) {
        int64_t old = cp_strmap_gets(&c->name_ids, sorted[i], -1);
        rank[old] = (int32_t)i;
    }
    for (size_t i = 0; i < c->n; i++)
        if (c->ev[i].name >= 0)
            c->ev[i].name = rank[c->ev[i].name];
    memcpy(c->names, sorted, c->n_names * sizeof *sorted);
    free(sorted);
    free(rank);
    return CP_OK;
}

static int cmp_track(const void *pa, const void *pb)
{
    const struct tl_track *a = pa, *b = pb;
    int r = cmp_i64(a->layer, b->layer);
    return r ? r : cmp_i64(a->thread, b->thread);
}

static struct tl_track *find_track(struct tl_ctx *c, int32_t layer, int32_t thread)
{
    struct tl_track key = {.layer = layer, .thread = thread};
    return c->n_tracks ? bsearch(&key, c->tracks, c->n_tracks, sizeof key, cmp_track) : NULL;
}

static bool push_open(struct tl_track *t, int64_t v)
{
    if (!grow((void **)&t->open, &t->cap_open, t->n_open, sizeof *t->open))
        return false;
    t->open[t->n_open++] = v;
    return true;
}

/* The tracks: every (layer, thread) that has events, plus an empty one for
 * each of the three standard layers that has none, so that a page always
 * shows where application ranges, runtime phases and kernels would be. */
static enum cp_status make_tracks(struct tl_ctx *c, struct cp_diag *d)
{
    size_t cap = 0;
    for (size_t i = 0; i < c->n + CP_TRACE_N_LAYERS; i++) {
        int32_t layer = i < c->n ? c->ev[i].layer : (int32_t)(i - c->n);
        int32_t thread = i < c->n ? c->ev[i].thread : 0;
        bool seen = false;
        for (size_t k = c->n_tracks; k-- > 0 && !seen;)
            seen = c->tracks[k].layer == layer && (i >= c->n || c->tracks[k].thread == thread);
        if (seen)
            continue;
        if (!grow((void **)&c->tracks, &cap, c->n_tracks, sizeof *c->tracks))
            return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory", c->path);
        c->tracks[c->n_tracks++] = (struct tl_track){.layer = layer, .thread = thread, .depths = 1};
    }
    if (c->n_tracks > 1)
        qsort(c->tracks, c->n_tracks, sizeof *c->tracks, cmp_track);
    return CP_OK;
}

/* Depth by containment within each track: the events still open when one
 * starts are the ones it nests in. */
static enum cp_status assign_depths(struct tl_ctx *c, struct cp_diag *d)
{
    for (size_t i = 0; i < c->n; i++) {
        struct tl_event *e = &c->ev[i];
        struct tl_track *t = find_track(c, e->layer, e->thread);
        while (t->n_open && t->open[t->n_open - 1] <= e->start)
            t->n_open--;
        e->track = (int32_t)(t - c->tracks);
        e->depth = (int32_t)t->n_open;
        if (e->depth + 1 > t->depths)
            t->depths = e->depth + 1;
        t->events++;
        if (!push_open(t, e->start + e->dur))
            return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory", c->path);
    }
    for (size_t k = 0; k < c->n_tracks; k++)
        c->tracks[k].n_open = 0;
    return CP_OK;
}

/* Each device event's launcher: the innermost runtime event of its thread
 * whose span holds it. */
static enum cp_status assign_flows(struct tl_ctx *c, struct cp_diag *d)
{
    for (size_t i = 0; i < c->n; i++) {
        struct tl_event *e = &c->ev[i];
        if (e->layer != CP_LAYER_RUNTIME && e->layer != CP_LAYER_DEVICE)
            continue;
        struct tl_track *rt = find_track(c, CP_LAYER_RUNTIME, e->thread);
        if (!rt)
            continue;
        while (rt->n_open) {
            const struct tl_event *top = &c->ev[rt->open[rt->n_open - 1]];
            if (top->start + top->dur > e->start)
                break;
            rt->n_open--;
        }
        if (e->layer == CP_LAYER_RUNTIME) {
            if (!push_open(rt, (int64_t)i))
                return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory", c->path);
            continue;
        }
        for (size_t k = rt->n_open; k-- > 0;) {
            const struct tl_event *r = &c->ev[rt->open[k]];
            if (r->start <= e->start && e->start + e->dur <= r->start + r->dur) {
                e->parent = rt->open[k];
                c->flows++;
                break;
            }
        }
    }
    return CP_OK;
}

/* ---- choosing the iterations -------------------------------------------------- */

static int cmp_sample_latency(const void *pa, const void *pb)
{
    const struct cp_trace_sample *a = pa, *b = pb;
    int r = (a->latency_ns > b->latency_ns) - (a->latency_ns < b->latency_ns);
    return r ? r : cmp_i64(a->iteration, b->iteration);
}

static int cmp_i64_ptr(const void *a, const void *b)
{
    return cmp_i64(*(const int64_t *)a, *(const int64_t *)b);
}

/* The measured iterations of a run, ascending: those with a latency sample,
 * or, for a run that recorded none (some imports), those with events. OUT:
 * *its (caller frees), *n; *median the iteration of median latency. */
static enum cp_status list_iterations(struct cp_trace_store *s, int64_t run, int64_t **its,
                                      size_t *n, int64_t *median, struct cp_diag *d)
{
    *its = NULL;
    *n = 0;
    struct cp_trace_sample *sm = NULL;
    size_t ns = 0;
    enum cp_status st = cp_trace_query_samples(s, run, &sm, &ns, d);
    if (st != CP_OK)
        return st;
    size_t cap = 0;
    int64_t *v = NULL;
    for (size_t i = 0; i < ns; i++) {
        if (!grow((void **)&v, &cap, *n, sizeof *v))
            goto out_nomem;
        v[(*n)++] = sm[i].iteration;
    }
    for (int l = 0; ns == 0 && l < CP_TRACE_N_LAYERS; l++) {
        struct cp_trace_iter_time *lt = NULL;
        size_t nl = 0;
        st = cp_trace_query_layer_iterations(s, run, (enum cp_trace_layer)l, NULL, &lt, &nl, d);
        if (st != CP_OK)
            goto out_free;
        for (size_t i = 0; i < nl; i++) {
            if (!grow((void **)&v, &cap, *n, sizeof *v)) {
                free(lt);
                goto out_nomem;
            }
            v[(*n)++] = lt[i].iteration;
        }
        free(lt);
    }
    if (*n > 1)
        qsort(v, *n, sizeof *v, cmp_i64_ptr);
    size_t u = 0;
    for (size_t i = 0; i < *n; i++)
        if (u == 0 || v[u - 1] != v[i])
            v[u++] = v[i];
    *n = u;
    if (ns) {
        if (ns > 1)
            qsort(sm, ns, sizeof *sm, cmp_sample_latency);
        *median = sm[(ns - 1) / 2].iteration;
    } else if (u) {
        *median = v[(u - 1) / 2];
    }
    free(sm);
    *its = v;
    return CP_OK;
out_nomem:
    st = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory", cp_trace_store_path(s));
out_free:
    free(v);
    free(sm);
    *n = 0;
    return st;
}

/* ---- the page ------------------------------------------------------------------- */

static void put_shape(struct cp_buf *b, const struct cp_trace_tensor *t)
{
    if (t->name[0])
        cp_buf_printf(b, "%s: ", t->name);
    if (t->rank < 0) {
        cp_buf_puts(b, "?");
    } else {
        cp_buf_putc(b, '[');
        for (int k = 0; k < t->rank; k++) {
            if (t->dims[k] < 0)
                cp_buf_printf(b, "%s?", k ? "," : "");
            else
                cp_buf_printf(b, "%s%" PRId64, k ? "," : "", t->dims[k]);
        }
        cp_buf_putc(b, ']');
    }
    if (t->dtype[0])
        cp_buf_printf(b, " %s", t->dtype);
    if (t->layout[0])
        cp_buf_printf(b, " %s", t->layout);
}

static json_t *shapes_json(const struct cp_trace_tensor *t, size_t n)
{
    json_t *a = json_array();
    struct cp_buf b;
    cp_buf_init(&b);
    for (size_t i = 0; a && i < n; i++) {
        cp_buf_reset(&b);
        put_shape(&b, &t[i]);
        if (cp_buf_status(&b) != CP_OK || !cp_json_push(a, cp_json_str(b.data))) {
            json_decref(a);
            a = NULL;
        }
    }
    cp_buf_release(&b);
    return a;
}

static json_t *kernel_json(const struct cp_trace_kernel_desc *k)
{
    json_t *o = json_object();
    if (o && cp_json_set_int(o, "idx", k->idx) && cp_json_set_str(o, "node", k->node) &&
        cp_json_set_str(o, "op", k->op_type) && cp_json_set_str(o, "impl", k->impl) &&
        cp_json_set(o, "origins", cp_json_embed(k->origins)) &&
        cp_json_set(o, "in", shapes_json(k->in, k->n_in)) &&
        cp_json_set(o, "out", shapes_json(k->out, k->n_out)) &&
        cp_json_set_num(o, "flops", k->flops) && cp_json_set_num(o, "bytes", k->bytes))
        return o;
    json_decref(o);
    return NULL;
}

static int cmp_kernel_idx(const void *key, const void *elem)
{
    return cmp_i64(*(const int64_t *)key, ((const struct cp_trace_kernel_desc *)elem)->idx);
}

/* The JSON the script reads, but for the event rows: meta, tracks, names,
 * the kernels the events refer to (their position in "kernels" replaces
 * the kernel index in each event: *kpos[event], -1 for none). */
/* The fills the events are drawn in, the flame graph's (view/colour.h): the
 * layer's colour lightened by the event's name, so that an event and its
 * frame look alike. Each distinct fill goes once into `fills`; *fill[e] is
 * its index. */
static bool event_fills(const struct tl_ctx *c, json_t *fills, int32_t *fill)
{
    struct cp_strmap seen;
    cp_strmap_init(&seen);
    char **owned = NULL; /* the map's keys */
    size_t n_owned = 0, cap = 0;
    bool ok = true;
    for (size_t e = 0; ok && e < c->n; e++) {
        const struct tl_event *ev = &c->ev[e];
        const char *key = ev->name >= 0 ? c->names[ev->name] : "";
        char hex[8];
        vw_fill(vw_layer_colour(ev->layer), key, hex);
        int64_t i = cp_strmap_gets(&seen, hex, -1);
        if (i < 0) {
            char *copy = cp_strdup(hex);
            ok = copy && grow((void **)&owned, &cap, n_owned, sizeof *owned);
            if (!ok) {
                free(copy);
                break;
            }
            owned[n_owned] = copy;
            i = (int64_t)n_owned++;
            ok = cp_strmap_puts(&seen, copy, i) == CP_OK && cp_json_push(fills, cp_json_str(copy));
        }
        fill[e] = (int32_t)i;
    }
    cp_strmap_release(&seen);
    for (size_t i = 0; i < n_owned; i++)
        free(owned[i]);
    free(owned);
    return ok;
}

static json_t *page_json(const struct tl_ctx *c, const struct cp_trace_run *run, const char *title,
                         const int64_t *its, size_t n_its, const struct cp_trace_sample *sm,
                         size_t n_sm, const struct cp_trace_kernel_desc *k, size_t nk, int64_t t0,
                         int64_t t1, int64_t *kpos, int32_t *fill)
{
    /* the containers go in first (the setters steal them), then are filled */
    json_t *root = json_object(), *tracks = json_array(), *names = json_array();
    json_t *kernels = json_array(), *iters = json_array(), *fills = json_array();
    bool ok = root && cp_json_set_str(root, "title", title) &&
              cp_json_set_str(root, "trace", c->path) && cp_json_set_int(root, "run", run->id) &&
              cp_json_set_str(root, "model", run->model_path) &&
              cp_json_set_int(root, "span", t1 - t0);
    ok = cp_json_set(root, "tracks", tracks) && ok;
    ok = cp_json_set(root, "names", names) && ok;
    ok = cp_json_set(root, "kernels", kernels) && ok;
    ok = cp_json_set(root, "iterations", iters) && ok;
    ok = cp_json_set(root, "fills", fills) && ok;
    for (size_t i = 0; ok && i < c->n_tracks; i++) {
        const struct tl_track *t = &c->tracks[i];
        char lname[32];
        const char *ln = t->layer < CP_TRACE_N_LAYERS
                             ? cp_trace_layer_name((enum cp_trace_layer)t->layer)
                             : (snprintf(lname, sizeof lname, "layer %d", (int)t->layer), lname);
        bool alone = t->thread == 0 && (i + 1 == c->n_tracks || c->tracks[i + 1].layer != t->layer);
        char name[64];
        if (alone)
            snprintf(name, sizeof name, "%s", ln);
        else
            snprintf(name, sizeof name, "%s, thread %d", ln, (int)t->thread);
        json_t *o = json_object();
        ok = cp_json_push(tracks, o) && cp_json_set_str(o, "name", name) &&
             cp_json_set_str(o, "layer_name", ln) && cp_json_set_int(o, "layer", t->layer) &&
             cp_json_set_int(o, "thread", t->thread) && cp_json_set_int(o, "depths", t->depths) &&
             cp_json_set_int(o, "events", (int64_t)t->events);
    }
    for (size_t i = 0; ok && i < c->n_names; i++)
        ok = cp_json_push(names, cp_json_str(c->names[i]));
    /* the kernels the events refer to, in index order: kpos[] holds each
     * event's row of the kernel table first, its position in "kernels"
     * after; pos[row] is that position + 1, 0 for a kernel no event names */
    int64_t *pos = nk ? cp_calloc(nk, sizeof *pos) : NULL;
    ok = ok && (nk == 0 || pos);
    for (size_t e = 0; ok && e < c->n; e++) {
        const struct cp_trace_kernel_desc *kd =
            c->ev[e].kernel < 0 || nk == 0
                ? NULL
                : bsearch(&c->ev[e].kernel, k, nk, sizeof *k, cmp_kernel_idx);
        kpos[e] = kd ? kd - k : -1;
        if (kd)
            pos[kd - k] = 1;
    }
    ok = ok && event_fills(c, fills, fill);
    for (size_t i = 0, nused = 0; ok && i < nk; i++) {
        if (!pos[i])
            continue;
        ok = cp_json_push(kernels, kernel_json(&k[i]));
        pos[i] = (int64_t)++nused;
    }
    for (size_t e = 0; ok && e < c->n; e++)
        if (kpos[e] >= 0)
            kpos[e] = pos[kpos[e]] - 1;
    free(pos);
    for (size_t i = 0; ok && i < n_its; i++) {
        int64_t lo = INT64_MAX, hi = INT64_MIN;
        for (size_t e = 0; e < c->n; e++) {
            if (c->ev[e].iteration != its[i])
                continue;
            lo = c->ev[e].start < lo ? c->ev[e].start : lo;
            hi = c->ev[e].start + c->ev[e].dur > hi ? c->ev[e].start + c->ev[e].dur : hi;
        }
        if (lo > hi)
            continue; /* no events: nothing to mark */
        json_t *o = json_object();
        ok = cp_json_push(iters, o) && cp_json_set_int(o, "it", its[i]) &&
             cp_json_set_int(o, "start", lo - t0) && cp_json_set_int(o, "end", hi - t0);
        for (size_t j = 0; ok && j < n_sm; j++)
            if (sm[j].iteration == its[i])
                ok = cp_json_set_int(o, "latency", (int64_t)sm[j].latency_ns);
    }
    if (ok)
        return root;
    json_decref(root);
    return NULL;
}

/* Append JSON text for a <script> element: "</" as "<\/" (so no string in it
 * can close the element) and "<!--" as "\u003c!--" (so none opens the
 * script's escaped state). Both only occur inside JSON strings, where the
 * replacements read back as the same characters. */
static void put_script_json(struct cp_buf *out, const char *j, size_t n)
{
    size_t from = 0;
    for (size_t i = 0; i < n; i++) {
        if (j[i] != '<')
            continue;
        if (i + 1 < n && j[i + 1] == '/') {
            cp_buf_append(out, j + from, i + 1 - from);
            cp_buf_putc(out, '\\');
            from = i + 1;
        } else if (i + 3 < n && memcmp(j + i, "<!--", 4) == 0) {
            cp_buf_append(out, j + from, i - from);
            cp_buf_puts(out, "\\u003c");
            from = i + 1;
        }
    }
    cp_buf_append(out, j + from, n - from);
}

static void put_lines(struct cp_buf *out, const char *const *lines)
{
    for (size_t i = 0; lines[i]; i++)
        cp_buf_puts(out, lines[i]);
}

static enum cp_status write_page(struct tl_ctx *c, const struct cp_trace_run *run,
                                 const char *title, const int64_t *its, size_t n_its,
                                 const struct cp_trace_sample *sm, size_t n_sm,
                                 const struct cp_trace_kernel_desc *k, size_t nk,
                                 struct cp_buf *out, struct cp_diag *d)
{
    int64_t t0 = c->ev[0].start, t1 = t0;
    for (size_t i = 0; i < c->n; i++)
        if (c->ev[i].start + c->ev[i].dur > t1)
            t1 = c->ev[i].start + c->ev[i].dur;
    int64_t *kpos = cp_calloc(c->n, sizeof *kpos);
    int32_t *fill = cp_calloc(c->n, sizeof *fill);
    if (!kpos || !fill) {
        free(kpos);
        free(fill);
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory", c->path);
    }
    for (size_t i = 0; i < c->n; i++)
        kpos[i] = -1;
    json_t *j = page_json(c, run, title, its, n_its, sm, n_sm, k, nk, t0, t1, kpos, fill);
    struct cp_buf js;
    cp_buf_init(&js);
    if (!j || cp_json_dump(j, false, &js) != CP_OK || js.len < 2) {
        json_decref(j);
        cp_buf_release(&js);
        free(kpos);
        free(fill);
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory", c->path);
    }
    json_decref(j);

    cp_buf_puts(out, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                     "<meta name=\"generator\" content=\"cannprof " CP_VERSION_STRING "\">\n"
                     "<meta name=\"viewport\" content=\"width=device-width\">\n<title>");
    cp_buf_markup(out, title);
    cp_buf_puts(out, "</title>\n<style>\n");
    put_lines(out, TL_CSS);
    cp_buf_puts(out, "</style>\n</head>\n<body>\n<header>\n<h1>");
    cp_buf_markup(out, title);
    cp_buf_puts(out, "</h1>\n<p id=\"summary\">");
    cp_buf_markup(out, c->path);
    cp_buf_printf(out, ", run %lld", (long long)run->id);
    if (run->model_path[0]) {
        cp_buf_puts(out, " (");
        cp_buf_markup(out, run->model_path);
        cp_buf_puts(out, ")");
    }
    if (n_its == 1)
        cp_buf_printf(out, ": iteration %lld", (long long)its[0]);
    else
        cp_buf_printf(out, ": iterations %lld to %lld", (long long)its[0],
                      (long long)its[n_its - 1]);
    cp_buf_printf(out, ", %zu events on %zu tracks, %zu flows</p>\n", c->n, c->n_tracks, c->flows);
    put_lines(out, TL_BODY);
    cp_buf_puts(out, "<script type=\"application/json\" id=\"tl-data\">");
    put_script_json(out, js.data, js.len - 1); /* all but the closing brace */
    cp_buf_puts(out, ",\"events\":[");
    /* [track, depth, start, dur, name, kernel, iteration, parent, fill] */
    for (size_t i = 0; i < c->n; i++) {
        const struct tl_event *e = &c->ev[i];
        cp_buf_printf(out,
                      "%s[%d,%d,%" PRId64 ",%" PRId64 ",%d,%" PRId64 ",%" PRId64 ",%" PRId64 ",%d]",
                      i ? (i % 8 ? "," : ",\n") : "", (int)e->track, (int)e->depth, e->start - t0,
                      e->dur, (int)e->name, kpos[i], e->iteration, e->parent, (int)fill[i]);
    }
    cp_buf_puts(out, "]}</script>\n<script>\n");
    put_lines(out, TL_SCRIPT);
    cp_buf_puts(out, "</script>\n</body>\n</html>\n");
    cp_buf_release(&js);
    free(kpos);
    free(fill);
    return cp_buf_status(out) == CP_OK ? CP_OK
                                       : cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory", c->path);
}

/* ---- the entry point ------------------------------------------------------------ */

enum cp_status cp_view_timeline(struct cp_trace_store *s, const struct cp_timeline_opts *o,
                                struct cp_buf *out, struct cp_timeline_info *info,
                                struct cp_diag *d)
{
    struct cp_timeline_opts defaults = {.run_id = -1, .first = -1};
    if (!o)
        o = &defaults;
    if (info)
        memset(info, 0, sizeof *info);
    const char *path = cp_trace_store_path(s);
    struct tl_ctx c = {.path = path};
    cp_strmap_init(&c.name_ids);
    struct cp_trace_run run;
    struct cp_trace_sample *sm = NULL;
    size_t n_sm = 0;
    struct cp_trace_kernel_desc *k = NULL;
    size_t nk = 0;
    int64_t *its = NULL, median = -1;
    size_t n_its = 0;
    char *title = NULL;

    enum cp_status st = cp_trace_query_run(s, o->run_id, &run, d);
    if (st != CP_OK)
        return st;
    c.run = run.id;
    int64_t count = o->count == 0 ? 1 : o->count;
    if (count < 0 || count > TL_MAX_COUNT) {
        st = cp_diag_set(d, CP_ERR_INVALID,
                         "%s: run %lld: %lld iterations asked for; a timeline shows 1 to %d", path,
                         (long long)run.id, (long long)o->count, TL_MAX_COUNT);
        goto out;
    }
    st = list_iterations(s, run.id, &its, &n_its, &median, d);
    if (st != CP_OK)
        goto out;
    if (n_its == 0) {
        st = cp_diag_set(d, CP_ERR_INVALID,
                         "%s: run %lld (%s) has no measured iterations to draw a timeline of", path,
                         (long long)run.id, run.kind[0] ? run.kind : "unknown kind");
        goto out;
    }
    int64_t first = o->first < 0 ? median : o->first;
    if (first > its[n_its - 1]) {
        st = cp_diag_set(d, CP_ERR_INVALID,
                         "%s: run %lld: iteration %lld is beyond the last one: the run has "
                         "iterations %lld..%lld",
                         path, (long long)run.id, (long long)first, (long long)its[0],
                         (long long)its[n_its - 1]);
        goto out;
    }
    size_t from = 0;
    while (its[from] < first)
        from++;
    size_t n_shown = n_its - from < (size_t)count ? n_its - from : (size_t)count;
    struct cp_trace_iter_set set = {.it = its + from, .n = n_shown};
    c.set = &set;
    st = cp_trace_query_iteration_events(s, run.id, ~0u, &set, collect, &c, d);
    if (st != CP_OK)
        goto out;
    if (c.n == 0) {
        st = cp_diag_set(d, CP_ERR_INVALID,
                         "%s: run %lld: no events in iteration%s %lld..%lld (was the run traced "
                         "with --trace?)",
                         path, (long long)run.id, n_shown > 1 ? "s" : "", (long long)set.it[0],
                         (long long)set.it[n_shown - 1]);
        goto out;
    }
    st = sort_names(&c, d);
    if (st != CP_OK)
        goto out;
    if (c.n > 1)
        qsort(c.ev, c.n, sizeof *c.ev, cmp_event);
    if ((st = make_tracks(&c, d)) != CP_OK || (st = assign_depths(&c, d)) != CP_OK ||
        (st = assign_flows(&c, d)) != CP_OK)
        goto out;
    if ((st = cp_trace_query_samples(s, run.id, &sm, &n_sm, d)) != CP_OK ||
        (st = cp_trace_query_kernels(s, run.id, &k, &nk, d)) != CP_OK)
        goto out;
    if (o->title) {
        title = cp_strdup(o->title);
    } else {
        struct cp_buf tb;
        cp_buf_init(&tb);
        cp_buf_printf(&tb, "Timeline of %s, run %lld, ", path, (long long)run.id);
        if (n_shown == 1)
            cp_buf_printf(&tb, "iteration %lld%s", (long long)set.it[0],
                          o->first < 0 ? " (median latency)" : "");
        else
            cp_buf_printf(&tb, "iterations %lld to %lld", (long long)set.it[0],
                          (long long)set.it[n_shown - 1]);
        title = cp_buf_status(&tb) == CP_OK ? cp_buf_steal(&tb) : NULL;
        cp_buf_release(&tb);
    }
    if (!title) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory", path);
        goto out;
    }
    size_t out_len = out->len;
    st = write_page(&c, &run, title, set.it, n_shown, sm, n_sm, k, nk, out, d);
    if (st != CP_OK && out->data) { /* nothing written on failure */
        out->len = out_len;
        out->data[out_len] = '\0';
    }
    if (st == CP_OK && info) {
        info->run_id = run.id;
        info->first = set.it[0];
        info->count = (int64_t)n_shown;
        info->events = c.n;
        for (size_t i = 0; i < c.n_tracks; i++)
            info->tracks += c.tracks[i].events > 0;
        info->flows = c.flows;
    }
out:
    free(title);
    free(its);
    free(sm);
    cp_trace_kernels_free(k, nk);
    cp_trace_run_release(&run);
    ctx_release(&c);
    return st;
}
