/* Reading one run of a trace store into the raw facts features are made
 * of (see features_internal.h), through trace/query.h only: this file
 * knows what the facts mean, the trace module knows where they are kept. */
#include "rules/features_internal.h"
#include "runner/probe.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The iterations the timing facts are read from: NULL (every measured one)
 * unless the run was filtered to its undisturbed ones. */
static const struct cp_trace_iter_set *kept_set(const struct cp_fload *l,
                                                struct cp_trace_iter_set *buf)
{
    if (!l->filtered)
        return NULL;
    buf->it = l->keep_it;
    buf->n = l->n_keep;
    return buf;
}

/* ---- the run and its samples ------------------------------------------------------- */

static enum cp_status read_run(struct cp_trace_store *s, struct cp_fload *l, struct cp_diag *d)
{
    struct cp_trace_run r;
    enum cp_status rc = cp_trace_query_run(s, l->run_id, &r, d);
    if (rc != CP_OK)
        return rc;
    l->kind = r.kind;
    l->config_json = r.config_json;
    l->target = r.target;
    r.kind = r.config_json = r.target = NULL;
    l->threads = r.threads;
    l->batch = r.batch;
    l->memory_bytes = (double)(r.weight_bytes + r.arena_bytes);
    if (l->memory_bytes == 0 && r.peak_bytes > 0)
        l->memory_bytes = (double)r.peak_bytes; /* an import: the profile's memory peak */
    cp_trace_run_release(&r);
    return CP_OK;
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

/* Line the probe series up with the samples: probe[i] is the probe of
 * sample i. False when a sample has none, or one that is no time. */
static bool probe_each(const struct cp_trace_sample *sm, size_t n, const struct cp_trace_point *p,
                       size_t np, uint64_t *probe)
{
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        while (j < np && p[j].iteration < sm[i].iteration) /* both sorted by iteration */
            j++;
        if (j == np || p[j].iteration != sm[i].iteration)
            return false;
        double v = p[j].value;
        if (!(v > 0 && v < 1e18))
            return false;
        probe[i] = (uint64_t)v;
    }
    return true;
}

/* The latency samples, with the interference probe of each when the run has
 * one for every sample: then only the undisturbed iterations are kept.
 * OUT: *sm, *n: all the samples (kept or not; caller frees). */
static enum cp_status read_samples(struct cp_trace_store *s, struct cp_fload *l,
                                   struct cp_trace_sample **sm, size_t *n, struct cp_diag *d)
{
    enum cp_status rc = cp_trace_query_samples(s, l->run_id, sm, n, d);
    if (rc != CP_OK || *n == 0)
        return rc;
    l->n_measured = *n;
    struct cp_trace_point *p = NULL;
    size_t np = 0;
    int64_t *it = cp_calloc(*n, sizeof *it);
    uint64_t *ns = cp_calloc(*n, sizeof *ns);
    uint64_t *probe = cp_calloc(*n, sizeof *probe);
    if (!it || !ns || !probe)
        rc = cp_diag_set(d, CP_ERR_NOMEM, "out of memory reading samples");
    if (rc == CP_OK)
        rc = cp_trace_query_counter_series(s, l->run_id, "probe_ns", &p, &np, d);
    for (size_t i = 0; rc == CP_OK && i < *n; i++) {
        it[i] = (*sm)[i].iteration;
        ns[i] = (*sm)[i].latency_ns;
    }
    if (rc == CP_OK && probe_each(*sm, *n, p, np, probe))
        rc = pick_undisturbed(l, it, ns, probe, *n, d);
    struct cp_trace_iter_set buf;
    const struct cp_trace_iter_set *only = kept_set(l, &buf);
    if (rc == CP_OK && !(l->lat_ns = cp_calloc(*n, sizeof *l->lat_ns)))
        rc = cp_diag_set(d, CP_ERR_NOMEM, "out of memory reading samples");
    for (size_t i = 0; rc == CP_OK && i < *n; i++)
        if (!only || cp_trace_iter_set_has(only, it[i]))
            l->lat_ns[l->n_lat++] = (double)ns[i];
    free(p);
    free(it);
    free(ns);
    free(probe);
    return rc;
}

/* ---- kernels -------------------------------------------------------------------- */

/* The rows of l->ktab as the features and patterns see them: strings
 * borrowed from the table, each tensor's source and element count worked
 * out once. */
static struct cp_ftensor *view_tensors(const struct cp_trace_tensor *t, size_t n)
{
    struct cp_ftensor *v = cp_calloc(n + 1, sizeof *v);
    if (!v)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        struct cp_ftensor *x = &v[i];
        x->name = t[i].name;
        x->src = t[i].view_of ? t[i].view_of : t[i].name;
        x->dtype = t[i].dtype;
        x->layout = t[i].layout;
        x->compute = t[i].compute;
        x->rank = t[i].rank;
        x->numel = x->rank < 0 ? NAN : 1;
        for (int j = 0; j < x->rank; j++) {
            x->dims[j] = t[i].dims[j];
            x->numel = x->dims[j] >= 0 ? x->numel * (double)x->dims[j] : NAN;
        }
    }
    return v;
}

static enum cp_status read_kernels(struct cp_trace_store *s, struct cp_fload *l, struct cp_diag *d)
{
    enum cp_status rc = cp_trace_query_kernels(s, l->run_id, &l->ktab, &l->n_ktab, d);
    if (rc != CP_OK || l->n_ktab == 0)
        return rc;
    l->k = cp_calloc(l->n_ktab, sizeof *l->k);
    if (!l->k)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory reading kernels");
    l->n_k = l->n_ktab;
    for (size_t i = 0; i < l->n_k; i++) {
        const struct cp_trace_kernel_desc *t = &l->ktab[i];
        struct cp_fk *k = &l->k[i];
        k->idx = t->idx;
        k->node = t->node;
        k->op_type = t->op_type;
        k->impl = t->impl;
        k->origins = t->origins;
        k->flops = t->flops;
        k->bytes = t->bytes;
        k->in = view_tensors(t->in, t->n_in);
        k->out = view_tensors(t->out, t->n_out);
        if (!k->in || !k->out)
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory reading kernels");
        k->n_in = t->n_in;
        k->n_out = t->n_out;
    }
    return CP_OK;
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
    struct cp_trace_iter_set buf;
    const struct cp_trace_iter_set *only = kept_set(l, &buf);
    struct cp_trace_kernel_time *t;
    size_t n;
    enum cp_status rc =
        cp_trace_query_kernel_times(s, l->run_id, only, CP_FEATURES_SMALL_KERNEL_NS, &t, &n, d);
    if (rc != CP_OK)
        return rc;
    for (size_t i = 0; i < n; i++) {
        struct cp_fk *k = find_kernel(l, t[i].kernel_idx);
        if (!k)
            continue; /* a kernel the table lacks */
        k->n_events += t[i].events;
        k->sum_ns += t[i].total_ns;
        k->n_small += t[i].n_short;
        k->small_ns += t[i].short_ns;
    }
    free(t);
    struct cp_trace_iter_time *it;
    rc = cp_trace_query_layer_iterations(s, l->run_id, CP_LAYER_DEVICE, only, &it, &n, d);
    if (rc == CP_OK)
        l->n_dev_iter = n;
    free(it);
    return rc;
}

/* ---- coverage of iterations ----------------------------------------------------------- */

/* A running union of intervals added in order of their start. */
struct cover {
    bool open;
    int64_t s, e; /* the interval being extended */
    double total; /* length of the closed ones */
};

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

/* The iteration being summed, as the events stream by. */
struct iter_acc {
    struct cp_fload *l;
    const struct cp_trace_sample *sm; /* every sample, by iteration */
    size_t n_sm;
    int64_t it;
    bool any;
    struct cover dev, all;
    double io;
    /* host calls since the last device task, when they start after the
     * device went idle: how many, for how long */
    double quiet_calls, quiet_call_ns;
    double quiet_ns; /* the iteration's gaps that are unexplained (below) */
};

/* msprof-analyze's conjectured gap: the device idles over 200 ms while the
 * host calls almost no runtime API (under 1e-4 calls per us, under 1% of
 * the gap): the host runs code the profile does not show. */
#define QUIET_GAP_NS   200e6
#define QUIET_CALLS_US 1e-4
#define QUIET_SHARE    0.01

static double lookup_latency(const struct iter_acc *a, int64_t it)
{
    size_t lo = 0, hi = a->n_sm;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a->sm[mid].iteration < it)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < a->n_sm && a->sm[lo].iteration == it ? (double)a->sm[lo].latency_ns : NAN;
}

static void iter_flush(struct iter_acc *a)
{
    if (!a->any)
        return;
    struct cp_fload *l = a->l;
    double w = lookup_latency(a, a->it);
    double dev = cover_done(&a->dev), all = cover_done(&a->all);
    if (isfinite(w) && w > 0) {
        l->cov_iters++;
        l->wall_ns += w;
        l->dev_ns += dev < w ? dev : w;
        l->rt_ns += all < w ? all : w;
        l->io_ns += a->io < w ? a->io : w;
        l->quiet_gap_ns += a->quiet_ns < w ? a->quiet_ns : w;
    }
    a->any = false;
}

static enum cp_status on_event(void *ctx, const struct cp_trace_event_row *e, struct cp_diag *d)
{
    (void)d;
    struct iter_acc *a = ctx;
    int64_t dur = e->dur_ns < 0 ? 0 : e->dur_ns;
    if (!a->any || e->iteration != a->it) {
        iter_flush(a);
        a->it = e->iteration;
        a->any = true;
        memset(&a->dev, 0, sizeof a->dev);
        memset(&a->all, 0, sizeof a->all);
        a->io = a->quiet_calls = a->quiet_call_ns = a->quiet_ns = 0;
    }
    if (e->layer == CP_LAYER_DEVICE) {
        double gap = a->dev.open ? (double)(e->start_ns - a->dev.e) : 0;
        if (gap > QUIET_GAP_NS && a->quiet_calls < QUIET_CALLS_US * gap / 1000.0 &&
            a->quiet_call_ns < QUIET_SHARE * gap)
            a->quiet_ns += gap;
        a->quiet_calls = a->quiet_call_ns = 0;
        cover_add(&a->dev, e->start_ns, e->start_ns + dur);
    } else {
        if (a->dev.open && e->start_ns > a->dev.e) {
            a->quiet_calls++;
            a->quiet_call_ns += (double)dur;
        }
        a->l->has_runtime = true;
        if (e->name && (strcmp(e->name, "input copy") == 0 || strcmp(e->name, "output copy") == 0))
            a->io += (double)dur;
    }
    cover_add(&a->all, e->start_ns, e->start_ns + dur);
    return CP_OK;
}

/* Per kept iteration, how much of its latency the kernels and the runtime
 * cover. sm/n: every sample of the run. */
static enum cp_status read_coverage(struct cp_trace_store *s, struct cp_fload *l,
                                    const struct cp_trace_sample *sm, size_t n, struct cp_diag *d)
{
    struct cp_trace_iter_set buf;
    struct iter_acc a = {.l = l, .sm = sm, .n_sm = n};
    enum cp_status rc = cp_trace_query_iteration_events(
        s, l->run_id, CP_TRACE_LAYER_BIT(CP_LAYER_RUNTIME) | CP_TRACE_LAYER_BIT(CP_LAYER_DEVICE),
        kept_set(l, &buf), on_event, &a, d);
    if (rc == CP_OK)
        iter_flush(&a);
    return rc;
}

/* ---- counters and host ---------------------------------------------------------------- */

static int perf_index(const char *name)
{
    for (int i = 0; i < CP_PERF_N_COUNTERS; i++)
        if (strcmp(cp_perf_counter_name((enum cp_perf_counter)i), name) == 0)
            return i;
    return -1;
}

static enum cp_status read_counters(struct cp_trace_store *s, struct cp_fload *l, struct cp_diag *d)
{
    struct cp_trace_counter *c;
    size_t n;
    enum cp_status rc = cp_trace_query_run_counters(s, l->run_id, "perf.", &c, &n, d);
    if (rc != CP_OK)
        return rc;
    l->paranoid = -2;
    for (size_t k = 0; k < n; k++) {
        const char *name = c[k].name;
        double v = c[k].value;
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
    cp_trace_counters_free(c, n);
    return CP_OK;
}

/* An imported profile's counters: the task table's columns (col.*) and the
 * timeline's device arguments (arg.*) per iteration, as import/ names them
 * (docs/import.md). */
static const char *const IMPORTED[CP_FLOAD_N_IMPORTED][2] = {
    [CP_IMP_AIC_MAC] = {"col.aic_mac_ratio", "arg.aic_mac_ratio"},
    [CP_IMP_AIC_MTE2] = {"col.aic_mte2_ratio", "arg.aic_mte2_ratio"},
    [CP_IMP_AIV_VEC] = {"col.aiv_vec_ratio", "arg.aiv_vec_ratio"},
    [CP_IMP_CUBE_UTIL] = {"col.cube_utilization(%)", "arg.cube_utilization(%)"},
    [CP_IMP_OCCUPANCY] = {"arg.est. achieved occupancy %", "arg.achieved occupancy %"},
    [CP_IMP_BLOCKS_PER_SM] = {"arg.blocks per SM", NULL},
};

/* The mean over measured iterations of a per-iteration counter; NaN when
 * none has it. */
static enum cp_status iteration_mean(struct cp_trace_store *s, const struct cp_fload *l,
                                     const char *name, double *mean, double *sum, struct cp_diag *d)
{
    struct cp_trace_point *v = NULL;
    size_t n = 0;
    *mean = NAN;
    *sum = 0;
    enum cp_status rc = cp_trace_query_counter_series(s, l->run_id, name, &v, &n, d);
    if (rc != CP_OK)
        return rc;
    double acc = 0;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i].iteration < 0 || !isfinite(v[i].value))
            continue;
        if (l->filtered) {
            bool kept = false;
            for (size_t j = 0; j < l->n_keep && !kept; j++)
                kept = l->keep_it[j] == v[i].iteration;
            if (!kept)
                continue;
        }
        acc += v[i].value;
        k++;
    }
    free(v);
    *sum = acc;
    if (k)
        *mean = acc / (double)k;
    return CP_OK;
}

/* The ranks of a cluster import: each rank's median step, their spread. */
static enum cp_status read_ranks(struct cp_trace_store *s, struct cp_fload *l, struct cp_diag *d)
{
    int64_t *ids = NULL;
    size_t n = 0;
    enum cp_status rc = cp_trace_store_run_group(s, l->run_id, &ids, &n, d);
    if (rc != CP_OK || n < 2) {
        free(ids);
        return rc;
    }
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    size_t k = 0;
    for (size_t i = 0; i < n && rc == CP_OK; i++) {
        double rank = NAN, med = NAN;
        rc = cp_trace_query_median_sample(s, ids[i], &med, NULL, d);
        if (rc == CP_OK)
            rc = cp_trace_query_counter(s, ids[i], "rank", &rank, d);
        if (rc == CP_OK && isfinite(med) && isfinite(rank)) {
            if (med > hi) {
                hi = med;
                l->slowest_rank = (int)rank;
            }
            lo = med < lo ? med : lo;
            sum += med;
            k++;
        }
    }
    free(ids);
    if (rc == CP_OK && k >= 2 && sum > 0) {
        l->rank_count = k;
        l->rank_spread = (hi - lo) / (sum / (double)k);
    }
    return rc;
}

/* The sum over measured iterations of a per-iteration counter (0 when
 * none has it; *found says whether any did). */
static enum cp_status iteration_sum(struct cp_trace_store *s, const struct cp_fload *l,
                                    const char *name, double *sum, bool *found, struct cp_diag *d)
{
    double mean;
    enum cp_status rc = iteration_mean(s, l, name, &mean, sum, d);
    *found = isfinite(mean);
    return rc;
}

/* A per-iteration count: the mean over measured iterations of the
 * timeline's counter, else the run's total from a statistics table
 * (api_statistic.csv) spread over its iterations. */
static enum cp_status per_iteration(struct cp_trace_store *s, const struct cp_fload *l,
                                    const char *name, const char *table_name, double *out,
                                    struct cp_diag *d)
{
    double sum;
    enum cp_status rc = iteration_mean(s, l, name, out, &sum, d);
    if (rc != CP_OK || isfinite(*out) || !table_name)
        return rc;
    double total = NAN;
    rc = cp_trace_query_counter(s, l->run_id, table_name, &total, d);
    size_t its = l->n_lat ? l->n_lat : 1;
    if (rc == CP_OK && isfinite(total))
        *out = total / (double)its;
    return rc;
}

/* A share of two per-iteration sums (what failed a check over what was
 * checked); NaN when nothing was checked. */
static enum cp_status checked_share(struct cp_trace_store *s, const struct cp_fload *l,
                                    const char *failed, const char *checked, double *out,
                                    struct cp_diag *d)
{
    double f = 0, c = 0;
    bool has_f, has_c;
    enum cp_status rc = iteration_sum(s, l, checked, &c, &has_c, d);
    if (rc == CP_OK)
        rc = iteration_sum(s, l, failed, &f, &has_f, d);
    *out = rc == CP_OK && has_c && c > 0 ? f / c : NAN;
    return rc;
}

/* The AI Core clock against its nominal one (info.json's aic_frequency,
 * else the highest seen): how far below it the chip ran on average. */
static enum cp_status freq_drop(struct cp_trace_store *s, const struct cp_fload *l, double *out,
                                struct cp_diag *d)
{
    struct cp_trace_point *v = NULL;
    size_t n = 0;
    *out = NAN;
    enum cp_status rc = cp_trace_query_counter_series(s, l->run_id, "AI Core Freq.MHz", &v, &n, d);
    double nominal = NAN;
    if (rc == CP_OK)
        rc = cp_trace_query_counter(s, l->run_id, "device.aic_frequency_mhz", &nominal, d);
    double sum = 0, hi = 0;
    size_t k = 0;
    for (size_t i = 0; rc == CP_OK && i < n; i++)
        if (isfinite(v[i].value) && v[i].value > 0) {
            sum += v[i].value;
            hi = v[i].value > hi ? v[i].value : hi;
            k++;
        }
    free(v);
    if (!isfinite(nominal))
        nominal = hi;
    if (rc == CP_OK && k > 0 && nominal > 0)
        *out = (nominal - sum / (double)k) / nominal;
    return rc;
}

/* Bandwidth per link of one transport: communication_matrix.json's links
 * (comm.link.<src>-<dst>.<TRANSPORT>.gbps) of every rank, and each rank's
 * own bandwidth per link type (communication.json: size / time) in a
 * cluster. The spread is the largest over transports of (max - min) /
 * mean, with at least two links (or ranks) of the transport. */
struct bw_group {
    char transport[24];
    double lo, hi, sum;
    size_t n;
};

static void bw_add(struct bw_group *g, size_t *n, size_t cap, const char *transport, double gbps)
{
    if (!(gbps > 0) || !isfinite(gbps) || strlen(transport) >= sizeof g->transport)
        return;
    size_t i = 0;
    while (i < *n && strcmp(g[i].transport, transport) != 0)
        i++;
    if (i == *n) {
        if (*n == cap)
            return;
        snprintf(g[i].transport, sizeof g[i].transport, "%s", transport);
        g[i].lo = INFINITY;
        g[i].hi = -INFINITY;
        g[i].sum = 0;
        g[i].n = 0;
        (*n)++;
    }
    g[i].lo = gbps < g[i].lo ? gbps : g[i].lo;
    g[i].hi = gbps > g[i].hi ? gbps : g[i].hi;
    g[i].sum += gbps;
    g[i].n++;
}

static double bw_spread(const struct bw_group *g, size_t n)
{
    double worst = NAN;
    for (size_t i = 0; i < n; i++)
        if (g[i].n >= 2 && g[i].sum > 0) {
            double x = (g[i].hi - g[i].lo) / (g[i].sum / (double)g[i].n);
            worst = isfinite(worst) && worst >= x ? worst : x;
        }
    return worst;
}

static enum cp_status link_spread(struct cp_trace_store *s, const struct cp_fload *l, double *out,
                                  struct cp_diag *d)
{
    int64_t *ids = NULL;
    size_t n_ids = 0;
    *out = NAN;
    enum cp_status rc = cp_trace_store_run_group(s, l->run_id, &ids, &n_ids, d);
    int64_t self = l->run_id;
    if (rc == CP_OK && n_ids == 0) {
        ids = &self;
        n_ids = 1;
    }
    enum { CAP = 16 };
    struct bw_group links[CAP], ranks[CAP];
    size_t n_links = 0, n_ranks = 0;
    static const char *const types[] = {"HCCS", "PCIE", "RDMA", "SDMA", "SIO"};
    for (size_t r = 0; rc == CP_OK && r < n_ids; r++) {
        struct cp_trace_counter *c = NULL;
        size_t n = 0;
        rc = cp_trace_query_run_counters(s, ids[r], "comm.link.", &c, &n, d);
        for (size_t i = 0; rc == CP_OK && i < n; i++) {
            /* comm.link.<src>-<dst>.<TRANSPORT>.gbps */
            char name[160];
            snprintf(name, sizeof name, "%s", c[i].name);
            char *gb = strrchr(name, '.');
            if (!gb || strcmp(gb, ".gbps") != 0)
                continue;
            *gb = '\0';
            char *tr = strrchr(name, '.');
            if (tr)
                bw_add(links, &n_links, CAP, tr + 1, c[i].value);
        }
        cp_trace_counters_free(c, n);
        if (n_ids < 2)
            continue;
        for (size_t t = 0; rc == CP_OK && t < sizeof types / sizeof *types; t++) {
            char mb_name[48], ms_name[48];
            snprintf(mb_name, sizeof mb_name, "comm.%s.size_mb", types[t]);
            snprintf(ms_name, sizeof ms_name, "comm.%s.time_ms", types[t]);
            struct cp_fload one = *l;
            one.run_id = ids[r];
            one.filtered = false;
            double mb = 0, ms = 0;
            bool has_mb, has_ms;
            rc = iteration_sum(s, &one, mb_name, &mb, &has_mb, d);
            if (rc == CP_OK)
                rc = iteration_sum(s, &one, ms_name, &ms, &has_ms, d);
            if (rc == CP_OK && has_mb && has_ms && ms > 0)
                bw_add(ranks, &n_ranks, CAP, types[t], mb / ms);
        }
    }
    if (ids != &self)
        free(ids);
    double a = bw_spread(links, n_links), b = bw_spread(ranks, n_ranks);
    *out = isfinite(a) && isfinite(b) ? (a > b ? a : b) : isfinite(a) ? a : b;
    return rc;
}

/* Packets smaller than their link's threshold, over all packets. */
static enum cp_status small_packets(struct cp_trace_store *s, const struct cp_fload *l, double *out,
                                    struct cp_diag *d)
{
    static const char *const types[] = {"HCCS", "PCIE", "RDMA", "SDMA", "SIO"};
    double small = 0, all = 0;
    enum cp_status rc = CP_OK;
    for (size_t t = 0; rc == CP_OK && t < sizeof types / sizeof *types; t++) {
        char a[48], b[48];
        snprintf(a, sizeof a, "comm.%s.small_packets", types[t]);
        snprintf(b, sizeof b, "comm.%s.packets", types[t]);
        double x = 0, y = 0;
        bool hx, hy;
        rc = iteration_sum(s, l, a, &x, &hx, d);
        if (rc == CP_OK)
            rc = iteration_sum(s, l, b, &y, &hy, d);
        small += x;
        all += y;
    }
    *out = all > 0 ? small / all : NAN;
    return rc;
}

/* The analyses of msprof-analyze's advisor that need more than the task
 * kernels: each fact from the counters import/ wrote (docs/import.md). */
static enum cp_status read_analyses(struct cp_trace_store *s, struct cp_fload *l, struct cp_diag *d)
{
    double *x = l->x;
    enum cp_status rc = checked_share(s, l, "ascend.block_dim_misaligned_us",
                                      "ascend.block_dim_checked_us", &x[CP_X_BLOCK_DIM], d);
    if (rc == CP_OK)
        rc = checked_share(s, l, "ascend.no_bound_us", "ascend.pipe_checked_us", &x[CP_X_UNBOUND],
                           d);
    if (rc == CP_OK)
        rc = freq_drop(s, l, &x[CP_X_FREQ_DROP], d);
    if (rc == CP_OK)
        rc = per_iteration(s, l, "api.compile_calls", "apistat.compile_calls",
                           &x[CP_X_COMPILE_CALLS], d);
    if (rc == CP_OK)
        rc = per_iteration(s, l, "api.sync_calls", "apistat.sync_calls", &x[CP_X_SYNC_CALLS], d);
    if (rc == CP_OK)
        rc = per_iteration(s, l, "api.memory_us", "apistat.memory_us", &x[CP_X_MEMORY_API_US], d);
    if (rc == CP_OK)
        rc = per_iteration(s, l, "host.syncbn_ops", NULL, &x[CP_X_SYNCBN_OPS], d);
    if (rc == CP_OK)
        rc = per_iteration(s, l, "host.dataloader_us", NULL, &x[CP_X_DATALOADER_US], d);
    if (rc == CP_OK)
        rc = small_packets(s, l, &x[CP_X_SMALL_PACKETS], d);
    if (rc == CP_OK)
        rc = cp_trace_query_counter(s, l->run_id, "comm.RDMA.max_transit_ms", &x[CP_X_RDMA_MAX_MS],
                                    d);
    if (rc == CP_OK)
        rc = link_spread(s, l, &x[CP_X_LINK_SPREAD], d);
    if (rc == CP_OK)
        rc = cp_trace_query_counter(s, l->run_id, "env.log_level", &x[CP_X_LOG_LEVEL], d);
    if (rc == CP_OK)
        rc = cp_trace_query_counter(s, l->run_id, "env.alloc_expandable", &x[CP_X_EXPANDABLE], d);
    double reserved = NAN, allocated = NAN;
    if (rc == CP_OK)
        rc = cp_trace_query_counter(s, l->run_id, "memory.peak_reserved_mb", &reserved, d);
    if (rc == CP_OK)
        rc = cp_trace_query_counter(s, l->run_id, "memory.peak_allocated_mb", &allocated, d);
    x[CP_X_RESERVED_RATIO] = allocated > 0 ? reserved / allocated : NAN;
    /* what failed a check, as a share of all the task (or SDMA) time; NaN
     * when the profile let nothing be checked (no ratios, no shapes) */
    static const struct {
        int x;
        const char *failed, *checked, *of;
    } shares[] = {
        {CP_X_FA_UNBOUND, "ascend.fa_unbound_us", "ascend.fa_us", "ascend.task_us"},
        {CP_X_VECTOR_UNBOUND, "ascend.vector_unbound_us", "ascend.vector_us", "ascend.task_us"},
        {CP_X_SHAPE_MISALIGNED, "ascend.shape_misaligned_us", "ascend.shape_checked_us",
         "ascend.task_us"},
        {CP_X_MISALIGNED_SDMA, "hccl.misaligned_us", "hccl.sdma_us", "hccl.sdma_us"},
        {CP_X_CONTENDED_SDMA, "hccl.contended_us", "hccl.sdma_us", "hccl.sdma_us"},
    };
    for (size_t i = 0; rc == CP_OK && i < sizeof shares / sizeof *shares; i++) {
        double checked = 0;
        bool has = false;
        rc = iteration_sum(s, l, shares[i].checked, &checked, &has, d);
        x[shares[i].x] = NAN;
        if (rc == CP_OK && has && checked > 0)
            rc = checked_share(s, l, shares[i].failed, shares[i].of, &x[shares[i].x], d);
    }
    /* a collection hits some steps: its time is spread over all of them */
    double gc = 0;
    bool has_gc = false;
    if (rc == CP_OK)
        rc = iteration_sum(s, l, "host.gc_us", &gc, &has_gc, d);
    x[CP_X_GC_US] = has_gc && l->n_lat ? gc / (double)l->n_lat : NAN;
    /* the fused-API sequences: counted in the steps they occur in, spread
     * over all; 0 when the timeline has framework ops but none matched */
    static const char *const apis[4] = {"npu_rms_norm", "npu_swiglu", "npu_rotary_mul",
                                        "npu_fusion_attention"};
    static const struct {
        int x;
        const char *counter;
    } runwide[] = {
        {CP_X_FUSIBLE, "fusible.top_share"},
        {CP_X_STAGE_SPREAD, "cluster.stage_compute_spread"},
        {CP_X_SLOWEST_STAGE, "cluster.slowest_stage"},
        {CP_X_HCCL_ALGO, "env.hccl_algo_set"},
        {CP_X_HOST_CACHE, "env.host_cache_capacity"},
        {CP_X_ACLNN_CACHE, "env.aclnn_cache_limit"},
    };
    for (size_t i = 0; rc == CP_OK && i < sizeof runwide / sizeof *runwide; i++)
        rc = cp_trace_query_counter(s, l->run_id, runwide[i].counter, &x[runwide[i].x], d);
    /* the import says how many framework events the matchers read (no
     * scan of the events here) */
    double app_events = NAN;
    if (rc == CP_OK)
        rc = cp_trace_query_counter(s, l->run_id, "affinity.app_events", &app_events, d);
    for (int i = 0; rc == CP_OK && i < 4; i++) {
        char name[64];
        double v[2] = {0, 0};
        bool has[2] = {false, false};
        for (int j = 0; rc == CP_OK && j < 2; j++) {
            snprintf(name, sizeof name, "affinity.%s.%s", apis[i], j ? "us" : "count");
            rc = iteration_sum(s, l, name, &v[j], &has[j], d);
        }
        bool known = l->n_lat && app_events > 0;
        x[CP_X_RMS_NORM_N + i] = known ? v[0] / (double)l->n_lat : NAN;
        x[CP_X_RMS_NORM_US + i] = known ? v[1] / (double)l->n_lat : NAN;
    }
    return rc;
}

static enum cp_status read_imported(struct cp_trace_store *s, struct cp_fload *l, struct cp_diag *d)
{
    for (int i = 0; i < CP_FLOAD_N_X; i++)
        l->x[i] = NAN;
    for (int i = 0; i < CP_FLOAD_N_IMPORTED; i++)
        l->imp[i] = NAN;
    l->launch_blocking = NAN;
    if (!l->kind || strcmp(l->kind, "import") != 0)
        return CP_OK;
    enum cp_status rc = CP_OK;
    double sum;
    for (int i = 0; i < CP_FLOAD_N_IMPORTED && rc == CP_OK; i++)
        for (int a = 0; a < 2 && IMPORTED[i][a] && rc == CP_OK && !isfinite(l->imp[i]); a++)
            rc = iteration_mean(s, l, IMPORTED[i][a], &l->imp[i], &sum, d);
    double mean;
    if (rc == CP_OK)
        rc = iteration_mean(s, l, "ascend.op_state.dynamic", &mean, &l->dynamic_ops, d);
    if (rc == CP_OK)
        rc = iteration_mean(s, l, "ascend.op_state.static", &mean, &l->static_ops, d);
    if (rc == CP_OK)
        rc = iteration_mean(s, l, "comm.wait_ms", &mean, &l->comm_wait_ms, d);
    if (rc == CP_OK)
        rc = iteration_mean(s, l, "comm.elapse_ms", &mean, &l->comm_elapse_ms, d);
    if (rc == CP_OK)
        rc = cp_trace_query_counter(s, l->run_id, "env.launch_blocking", &l->launch_blocking, d);
    if (rc == CP_OK)
        rc = read_ranks(s, l, d);
    if (rc == CP_OK)
        rc = read_analyses(s, l, d);
    return rc;
}

static enum cp_status read_host(struct cp_trace_store *s, struct cp_fload *l, struct cp_diag *d)
{
    struct cp_trace_host h;
    enum cp_status rc = cp_trace_query_host(s, &h, d);
    if (rc != CP_OK)
        return rc;
    l->host_cores = h.cores;
    l->isa_flags = h.isa_flags;
    h.isa_flags = NULL;
    cp_trace_host_release(&h);
    return CP_OK;
}

/* ---- entry points ----------------------------------------------------------------- */

enum cp_status cp_fload_read(struct cp_trace_store *s, int64_t run_id, struct cp_fload *l,
                             struct cp_diag *d)
{
    memset(l, 0, sizeof *l);
    l->paranoid = -2;
    struct cp_trace_sample *sm = NULL;
    size_t n_sm = 0;
    enum cp_status rc = cp_trace_store_resolve_run(s, run_id, &l->run_id, d);
    if (rc == CP_OK)
        rc = read_run(s, l, d);
    if (rc == CP_OK)
        rc = read_samples(s, l, &sm, &n_sm, d);
    if (rc == CP_OK)
        rc = read_kernels(s, l, d);
    if (rc == CP_OK)
        rc = read_kernel_times(s, l, d);
    if (rc == CP_OK)
        rc = read_coverage(s, l, sm, n_sm, d);
    if (rc == CP_OK)
        rc = read_counters(s, l, d);
    if (rc == CP_OK)
        rc = read_host(s, l, d);
    if (rc == CP_OK)
        rc = read_imported(s, l, d);
    free(sm);
    return rc;
}

void cp_fload_release(struct cp_fload *l)
{
    free(l->kind);
    free(l->config_json);
    free(l->target);
    free(l->lat_ns);
    free(l->keep_it);
    for (size_t i = 0; l->k && i < l->n_k; i++) {
        free(l->k[i].in);
        free(l->k[i].out);
    }
    free(l->k);
    cp_trace_kernels_free(l->ktab, l->n_ktab);
    free(l->isa_flags);
    memset(l, 0, sizeof *l);
}
