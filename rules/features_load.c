/* Reading one run of a trace store into the raw facts features are made
 * of (see features_internal.h). Every query names the store in its error. */
#include "rules/features_internal.h"
#include "runner/probe.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

static enum cp_status db_error(struct cp_trace_store *s, const char *what, struct cp_diag *d)
{
    sqlite3 *db = cp_trace_store_db(s);
    return cp_diag_set(d, CP_ERR_DB, "%s: reading %s: %s", cp_trace_store_path(s), what,
                       sqlite3_errmsg(db));
}

static enum cp_status prepare(struct cp_trace_store *s, const char *sql, int64_t run,
                              sqlite3_stmt **st, const char *what, struct cp_diag *d)
{
    if (sqlite3_prepare_v2(cp_trace_store_db(s), sql, -1, st, NULL) != SQLITE_OK)
        return db_error(s, what, d);
    sqlite3_bind_int64(*st, 1, run);
    return CP_OK;
}

/* A copy of a column's text ("" for NULL). NULL on OOM. */
static char *col_text(sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    return cp_strdup(t ? (const char *)t : "");
}

/* ---- runs and samples ------------------------------------------------------------- */

static enum cp_status read_run(struct cp_trace_store *s, struct cp_fload *l, struct cp_diag *d)
{
    sqlite3_stmt *st;
    enum cp_status rc =
        prepare(s,
                "SELECT kind, config_json, threads, batch, weight_bytes + arena_bytes FROM runs "
                "WHERE id = ?1",
                l->run_id, &st, "the run", d);
    if (rc != CP_OK)
        return rc;
    int r = sqlite3_step(st);
    if (r == SQLITE_ROW) {
        l->kind = col_text(st, 0);
        l->config_json = col_text(st, 1);
        l->threads = sqlite3_column_int(st, 2);
        l->batch = sqlite3_column_int(st, 3);
        l->memory_bytes = sqlite3_column_double(st, 4);
        if (!l->kind || !l->config_json)
            rc = cp_diag_set(d, CP_ERR_NOMEM, "out of memory reading the run");
    } else if (r == SQLITE_DONE) {
        rc = cp_diag_set(d, CP_ERR_INVALID, "%s: no run %lld", cp_trace_store_path(s),
                         (long long)l->run_id);
    } else {
        rc = db_error(s, "the run", d);
    }
    sqlite3_finalize(st);
    return rc;
}

/* Is iteration `it` one the timing facts are read from? */
static bool kept(const struct cp_fload *l, int64_t it)
{
    if (!l->filtered)
        return true;
    size_t lo = 0, hi = l->n_keep;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (l->keep_it[mid] < it)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < l->n_keep && l->keep_it[lo] == it;
}

/* Which iterations ran undisturbed, as validate judges them against the
 * run's own floor; sets l->filtered when enough did. it/ns/probe: the n
 * samples in iteration order. */
static enum cp_status pick_undisturbed(struct cp_fload *l, const int64_t *it, const uint64_t *ns,
                                       const uint64_t *probe, size_t n, struct cp_diag *d)
{
    bool *keep = cp_calloc(n, sizeof *keep);
    if (!keep)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory reading the probe");
    size_t k = cp_probe_mark_run(probe, ns, n, cp_probe_floor(probe, n), keep);
    enum cp_status rc = CP_OK;
    if (k >= CP_FEATURES_MIN_UNDISTURBED && k < n) {
        l->keep_it = cp_calloc(k, sizeof *l->keep_it);
        if (!l->keep_it)
            rc = cp_diag_set(d, CP_ERR_NOMEM, "out of memory reading the probe");
        for (size_t i = 0; rc == CP_OK && i < n; i++)
            if (keep[i])
                l->keep_it[l->n_keep++] = it[i];
        l->filtered = rc == CP_OK;
    }
    free(keep);
    return rc;
}

/* The latency samples, with the interference probe of each when the run has
 * one for every sample: then only the undisturbed iterations are kept. */
static enum cp_status read_samples(struct cp_trace_store *s, struct cp_fload *l, struct cp_diag *d)
{
    sqlite3_stmt *st;
    enum cp_status rc =
        prepare(s,
                "SELECT s.iteration, s.latency_ns, c.value FROM samples s "
                "LEFT JOIN counters c ON c.run_id = s.run_id AND c.name = 'probe_ns' "
                "AND c.iteration = s.iteration WHERE s.run_id = ?1 ORDER BY s.iteration",
                l->run_id, &st, "samples", d);
    if (rc != CP_OK)
        return rc;
    int64_t *it = NULL;
    uint64_t *ns = NULL;
    uint64_t *probe = NULL;
    size_t n = 0, cap = 0;
    bool probed = true;
    int r;
    while ((r = sqlite3_step(st)) == SQLITE_ROW) {
        if (n == cap) {
            size_t nc = cap ? 2 * cap : 256;
            int64_t *a = cp_realloc_array(it, nc, sizeof *a);
            if (a)
                it = a;
            uint64_t *b = cp_realloc_array(ns, nc, sizeof *b);
            if (b)
                ns = b;
            uint64_t *c = cp_realloc_array(probe, nc, sizeof *c);
            if (c)
                probe = c;
            if (!a || !b || !c) {
                rc = cp_diag_set(d, CP_ERR_NOMEM, "out of memory reading samples");
                break;
            }
            cap = nc;
        }
        it[n] = sqlite3_column_int64(st, 0);
        int64_t v = sqlite3_column_int64(st, 1);
        ns[n] = v > 0 ? (uint64_t)v : 0;
        double pv = sqlite3_column_double(st, 2);
        if (sqlite3_column_type(st, 2) == SQLITE_NULL || !(pv > 0 && pv < 1e18))
            probed = false;
        else
            probe[n] = (uint64_t)pv;
        n++;
    }
    if (rc == CP_OK && r != SQLITE_DONE)
        rc = db_error(s, "samples", d);
    sqlite3_finalize(st);
    l->n_measured = n;
    if (rc == CP_OK && probed && n > 0)
        rc = pick_undisturbed(l, it, ns, probe, n, d);
    if (rc == CP_OK && n > 0 && !(l->lat_ns = cp_calloc(n, sizeof *l->lat_ns)))
        rc = cp_diag_set(d, CP_ERR_NOMEM, "out of memory reading samples");
    for (size_t i = 0; rc == CP_OK && i < n; i++)
        if (kept(l, it[i]))
            l->lat_ns[l->n_lat++] = (double)ns[i];
    free(it);
    free(ns);
    free(probe);
    return rc;
}

/* ---- kernels -------------------------------------------------------------------- */

static char *json_str_dup(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return cp_strdup(json_is_string(v) ? json_string_value(v) : "");
}

static void tensor_release(struct cp_ftensor *t)
{
    free(t->name);
    free(t->src);
    free(t->dtype);
    free(t->layout);
    free(t->compute);
}

/* Parse a kernels.inputs/outputs JSON array. OUT: *v, *n. */
static enum cp_status parse_tensors(struct cp_trace_store *s, const char *text, int64_t idx,
                                    const char *col, struct cp_ftensor **v, size_t *n,
                                    struct cp_diag *d)
{
    *v = NULL;
    *n = 0;
    if (!text || !*text)
        return CP_OK;
    json_error_t err;
    json_t *a = json_loads(text, 0, &err);
    if (!json_is_array(a)) {
        json_decref(a);
        return cp_diag_set(d, CP_ERR_CORRUPT, "%s: kernel %lld: %s is not a JSON array (%s)",
                           cp_trace_store_path(s), (long long)idx, col,
                           a ? "another JSON value" : err.text);
    }
    enum cp_status rc = CP_OK;
    size_t m = json_array_size(a);
    struct cp_ftensor *t = cp_calloc(m + 1, sizeof *t);
    if (!t) {
        json_decref(a);
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory reading kernels");
    }
    for (size_t i = 0; i < m && rc == CP_OK; i++) {
        json_t *o = json_array_get(a, i);
        if (!json_is_object(o)) {
            rc = cp_diag_set(d, CP_ERR_CORRUPT, "%s: kernel %lld: %s[%zu] is not an object",
                             cp_trace_store_path(s), (long long)idx, col, i);
            break;
        }
        struct cp_ftensor *x = &t[i];
        x->name = json_str_dup(o, "name");
        json_t *vo = json_object_get(o, "view_of");
        x->src = cp_strdup(json_is_string(vo) ? json_string_value(vo) : x->name ? x->name : "");
        x->dtype = json_str_dup(o, "dtype");
        x->layout = json_str_dup(o, "layout");
        json_t *c = json_object_get(o, "compute");
        x->compute = json_is_string(c) ? cp_strdup(json_string_value(c)) : NULL;
        if (!x->name || !x->src || !x->dtype || !x->layout || (json_is_string(c) && !x->compute))
            rc = cp_diag_set(d, CP_ERR_NOMEM, "out of memory reading kernels");
        json_t *sh = json_object_get(o, "shape");
        x->rank = -1;
        x->numel = NAN;
        if (json_is_array(sh) && json_array_size(sh) <= 8) {
            x->rank = (int)json_array_size(sh);
            x->numel = 1;
            for (int j = 0; j < x->rank; j++) {
                json_t *dj = json_array_get(sh, (size_t)j);
                x->dims[j] = json_is_integer(dj) ? json_integer_value(dj) : -1;
                x->numel = x->dims[j] >= 0 ? x->numel * (double)x->dims[j] : NAN;
            }
        }
    }
    json_decref(a);
    if (rc != CP_OK) {
        for (size_t i = 0; i < m; i++)
            tensor_release(&t[i]);
        free(t);
        return rc;
    }
    *v = t;
    *n = m;
    return CP_OK;
}

static enum cp_status read_kernels(struct cp_trace_store *s, struct cp_fload *l, struct cp_diag *d)
{
    sqlite3_stmt *st;
    enum cp_status rc =
        prepare(s,
                "SELECT idx, node, op_type, impl, origins, inputs, outputs, flops, bytes "
                "FROM kernels WHERE run_id = ?1 ORDER BY idx",
                l->run_id, &st, "kernels", d);
    if (rc != CP_OK)
        return rc;
    size_t cap = 0;
    int r;
    while (rc == CP_OK && (r = sqlite3_step(st)) == SQLITE_ROW) {
        if (l->n_k == cap) {
            size_t nc = cap ? cap * 2 : 64;
            struct cp_fk *g = cp_realloc_array(l->k, nc, sizeof *g);
            if (!g) {
                rc = cp_diag_set(d, CP_ERR_NOMEM, "out of memory reading kernels");
                break;
            }
            l->k = g;
            cap = nc;
        }
        struct cp_fk *k = &l->k[l->n_k++];
        memset(k, 0, sizeof *k);
        k->idx = sqlite3_column_int64(st, 0);
        k->node = col_text(st, 1);
        k->op_type = col_text(st, 2);
        k->impl = col_text(st, 3);
        k->origins = col_text(st, 4);
        if (k->origins && !*k->origins) {
            free(k->origins);
            k->origins = cp_strdup("[]");
        }
        k->flops = sqlite3_column_double(st, 7);
        k->bytes = sqlite3_column_double(st, 8);
        if (!k->node || !k->op_type || !k->impl || !k->origins) {
            rc = cp_diag_set(d, CP_ERR_NOMEM, "out of memory reading kernels");
            break;
        }
        const char *in = (const char *)sqlite3_column_text(st, 5);
        rc = parse_tensors(s, in, k->idx, "inputs", &k->in, &k->n_in, d);
        if (rc == CP_OK) {
            const char *out = (const char *)sqlite3_column_text(st, 6);
            rc = parse_tensors(s, out, k->idx, "outputs", &k->out, &k->n_out, d);
        }
    }
    if (rc == CP_OK && r != SQLITE_DONE)
        rc = db_error(s, "kernels", d);
    sqlite3_finalize(st);
    return rc;
}

static struct cp_fk *find_kernel(struct cp_fload *l, int64_t idx)
{
    size_t lo = 0, hi = l->n_k;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (l->k[mid].idx < idx)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < l->n_k && l->k[lo].idx == idx ? &l->k[lo] : NULL;
}

/* Per-kernel sums of device events in measured (kept) iterations, and how
 * many such iterations have device events. */
static enum cp_status read_kernel_times(struct cp_trace_store *s, struct cp_fload *l,
                                        struct cp_diag *d)
{
    sqlite3_stmt *st;
    enum cp_status rc =
        prepare(s,
                "SELECT kernel_idx, iteration, count(*), total(dur_ns), total(dur_ns < ?2), "
                "total(CASE WHEN dur_ns < ?2 THEN dur_ns ELSE 0 END) FROM events "
                "WHERE run_id = ?1 AND layer = 2 AND iteration >= 0 AND kernel_idx >= 0 "
                "GROUP BY kernel_idx, iteration",
                l->run_id, &st, "kernel events", d);
    if (rc != CP_OK)
        return rc;
    sqlite3_bind_double(st, 2, CP_FEATURES_SMALL_KERNEL_NS);
    int r;
    while ((r = sqlite3_step(st)) == SQLITE_ROW) {
        struct cp_fk *k = find_kernel(l, sqlite3_column_int64(st, 0));
        if (!k || !kept(l, sqlite3_column_int64(st, 1)))
            continue; /* a kernel the table lacks, or a disturbed iteration */
        k->n_events += sqlite3_column_int64(st, 2);
        k->sum_ns += sqlite3_column_double(st, 3);
        k->n_small += (int64_t)sqlite3_column_double(st, 4);
        k->small_ns += sqlite3_column_double(st, 5);
    }
    if (r != SQLITE_DONE)
        rc = db_error(s, "kernel events", d);
    sqlite3_finalize(st);
    if (rc != CP_OK)
        return rc;
    rc = prepare(s,
                 "SELECT DISTINCT iteration FROM events "
                 "WHERE run_id = ?1 AND layer = 2 AND iteration >= 0",
                 l->run_id, &st, "kernel events", d);
    if (rc != CP_OK)
        return rc;
    while ((r = sqlite3_step(st)) == SQLITE_ROW)
        l->n_dev_iter += kept(l, sqlite3_column_int64(st, 0));
    if (r != SQLITE_DONE)
        rc = db_error(s, "kernel events", d);
    sqlite3_finalize(st);
    return rc;
}

/* ---- coverage of iterations ----------------------------------------------------------- */

/* A running union of intervals added in order of their start. */
struct cover {
    bool open;
    int64_t s, e; /* the interval being extended */
    double total; /* length of the closed ones */
};

static void cover_reset(struct cover *c)
{
    memset(c, 0, sizeof *c);
}

static void cover_add(struct cover *c, int64_t s, int64_t e)
{
    if (c->open && s <= c->e) {
        if (e > c->e)
            c->e = e;
        return;
    }
    if (c->open)
        c->total += (double)(c->e - c->s);
    c->open = true;
    c->s = s;
    c->e = e;
}

static double cover_done(struct cover *c)
{
    if (c->open)
        c->total += (double)(c->e - c->s);
    c->open = false;
    return c->total;
}

/* All the samples (kept or not) as (iteration, latency) pairs sorted by
 * iteration. OUT:
 * *iters, *lat (caller frees both, also on failure), *n. */
static enum cp_status sample_map(struct cp_trace_store *s, struct cp_fload *l, int64_t **iters,
                                 double **lat, size_t *n, struct cp_diag *d)
{
    *iters = NULL;
    *lat = NULL;
    *n = 0;
    sqlite3_stmt *st;
    enum cp_status rc =
        prepare(s, "SELECT iteration, latency_ns FROM samples WHERE run_id = ?1 ORDER BY iteration",
                l->run_id, &st, "samples", d);
    if (rc != CP_OK)
        return rc;
    *iters = cp_calloc(l->n_measured + 1, sizeof **iters);
    *lat = cp_calloc(l->n_measured + 1, sizeof **lat);
    if (!*iters || !*lat)
        rc = cp_diag_set(d, CP_ERR_NOMEM, "out of memory reading samples");
    int r = SQLITE_DONE;
    while (rc == CP_OK && *n < l->n_measured && (r = sqlite3_step(st)) == SQLITE_ROW) {
        (*iters)[*n] = sqlite3_column_int64(st, 0);
        (*lat)[*n] = sqlite3_column_double(st, 1);
        (*n)++;
    }
    if (rc == CP_OK && r != SQLITE_DONE && r != SQLITE_ROW)
        rc = db_error(s, "samples", d);
    sqlite3_finalize(st);
    return rc;
}

static double lookup_latency(const int64_t *iters, const double *lat, size_t n, int64_t it)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (iters[mid] < it)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && iters[lo] == it ? lat[lo] : NAN;
}

struct iter_acc {
    int64_t it;
    bool any;
    struct cover dev, all;
    double io;
};

static void iter_flush(struct cp_fload *l, struct iter_acc *a, const int64_t *iters,
                       const double *lat, size_t n)
{
    if (!a->any || !kept(l, a->it))
        return;
    double w = lookup_latency(iters, lat, n, a->it);
    double dev = cover_done(&a->dev), all = cover_done(&a->all);
    if (isfinite(w) && w > 0) {
        l->cov_iters++;
        l->wall_ns += w;
        l->dev_ns += dev < w ? dev : w;
        l->rt_ns += all < w ? all : w;
        l->io_ns += a->io < w ? a->io : w;
    }
    a->any = false;
}

static enum cp_status read_coverage(struct cp_trace_store *s, struct cp_fload *l, struct cp_diag *d)
{
    int64_t *iters;
    double *lat;
    size_t n;
    enum cp_status rc = sample_map(s, l, &iters, &lat, &n, d);
    sqlite3_stmt *st = NULL;
    if (rc == CP_OK)
        rc = prepare(s,
                     "SELECT e.iteration, e.layer, e.start_ns, e.dur_ns, coalesce(t.value, '') "
                     "FROM events e LEFT JOIN strings t ON t.id = e.name_id "
                     "WHERE e.run_id = ?1 AND e.layer IN (1, 2) AND e.iteration >= 0 "
                     "ORDER BY e.iteration, e.start_ns",
                     l->run_id, &st, "events", d);
    if (rc != CP_OK) {
        free(iters);
        free(lat);
        return rc;
    }
    struct iter_acc a = {.any = false};
    int r;
    while ((r = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t it = sqlite3_column_int64(st, 0);
        int layer = sqlite3_column_int(st, 1);
        int64_t s0 = sqlite3_column_int64(st, 2), dur = sqlite3_column_int64(st, 3);
        if (dur < 0)
            dur = 0;
        if (!a.any || it != a.it) {
            iter_flush(l, &a, iters, lat, n);
            a.it = it;
            a.any = true;
            cover_reset(&a.dev);
            cover_reset(&a.all);
            a.io = 0;
        }
        if (layer == CP_LAYER_DEVICE) {
            cover_add(&a.dev, s0, s0 + dur);
        } else {
            l->has_runtime = true;
            const char *name = (const char *)sqlite3_column_text(st, 4);
            if (name && (strcmp(name, "input copy") == 0 || strcmp(name, "output copy") == 0))
                a.io += (double)dur;
        }
        cover_add(&a.all, s0, s0 + dur);
    }
    iter_flush(l, &a, iters, lat, n);
    if (r != SQLITE_DONE)
        rc = db_error(s, "events", d);
    sqlite3_finalize(st);
    free(iters);
    free(lat);
    return rc;
}

/* ---- counters and meta ------------------------------------------------------------ */

static int perf_index(const char *name)
{
    for (int i = 0; i < CP_PERF_N_COUNTERS; i++)
        if (strcmp(cp_perf_counter_name((enum cp_perf_counter)i), name) == 0)
            return i;
    return -1;
}

static enum cp_status read_counters(struct cp_trace_store *s, struct cp_fload *l, struct cp_diag *d)
{
    sqlite3_stmt *st;
    enum cp_status rc = prepare(s,
                                "SELECT name, value FROM counters "
                                "WHERE run_id = ?1 AND iteration = -1 AND name LIKE 'perf.%'",
                                l->run_id, &st, "counters", d);
    if (rc != CP_OK)
        return rc;
    l->paranoid = -2;
    int r;
    while ((r = sqlite3_step(st)) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 0);
        double v = sqlite3_column_double(st, 1);
        if (!name)
            continue;
        l->perf_recorded = true;
        int i;
        if (strcmp(name, "perf.paranoid") == 0)
            l->paranoid = (int)v;
        else if (strncmp(name, "perf.errno.", 11) == 0 && (i = perf_index(name + 11)) >= 0)
            l->perf_errno[i] = v > 0 ? (int)v : EINVAL;
        else if ((i = perf_index(name + 5)) >= 0 && isfinite(v)) {
            l->perf_has[i] = true;
            l->perf[i] = v;
        }
    }
    if (r != SQLITE_DONE)
        rc = db_error(s, "counters", d);
    sqlite3_finalize(st);
    return rc;
}

static enum cp_status read_meta(struct cp_trace_store *s, struct cp_fload *l, struct cp_diag *d)
{
    char *cores = NULL;
    enum cp_status rc = cp_trace_store_get_meta(s, "host_cores", &cores, d);
    if (rc != CP_OK)
        return rc;
    int64_t v;
    if (cores && cp_parse_i64(cores, &v) && v > 0 && v < 1 << 20)
        l->host_cores = (int)v;
    free(cores);
    return cp_trace_store_get_meta(s, "host_isa_flags", &l->isa_flags, d);
}

/* ---- entry points ----------------------------------------------------------------- */

enum cp_status cp_fload_read(struct cp_trace_store *s, int64_t run_id, struct cp_fload *l,
                             struct cp_diag *d)
{
    memset(l, 0, sizeof *l);
    l->paranoid = -2;
    enum cp_status rc = cp_trace_store_resolve_run(s, run_id, &l->run_id, d);
    if (rc == CP_OK)
        rc = read_run(s, l, d);
    if (rc == CP_OK)
        rc = read_samples(s, l, d);
    if (rc == CP_OK)
        rc = read_kernels(s, l, d);
    if (rc == CP_OK)
        rc = read_kernel_times(s, l, d);
    if (rc == CP_OK)
        rc = read_coverage(s, l, d);
    if (rc == CP_OK)
        rc = read_counters(s, l, d);
    if (rc == CP_OK)
        rc = read_meta(s, l, d);
    return rc;
}

void cp_fload_release(struct cp_fload *l)
{
    free(l->kind);
    free(l->config_json);
    free(l->lat_ns);
    free(l->keep_it);
    for (size_t i = 0; i < l->n_k; i++) {
        struct cp_fk *k = &l->k[i];
        free(k->node);
        free(k->op_type);
        free(k->impl);
        free(k->origins);
        for (size_t j = 0; j < k->n_in; j++)
            tensor_release(&k->in[j]);
        for (size_t j = 0; j < k->n_out; j++)
            tensor_release(&k->out[j]);
        free(k->in);
        free(k->out);
    }
    free(l->k);
    free(l->isa_flags);
    memset(l, 0, sizeof *l);
}
