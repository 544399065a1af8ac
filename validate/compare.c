/* Comparing two sides of runs metric by metric (validate/validate.h). */
#include "validate/validate.h"
#include "runner/probe.h"
#include "stats/stats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct metric_def {
    enum cp_vmetric id;
    const char *name;
    const char *unit;
    double scale;
    enum cp_better better;
};

static const struct metric_def metric_defs[CP_VM_COUNT] = {
    {CP_VM_LATENCY, "latency", "ms", 1e-6, CP_BETTER_LOWER},
    {CP_VM_P99, "p99", "ms", 1e-6, CP_BETTER_LOWER},
    {CP_VM_THROUGHPUT, "throughput", "items/s", 1.0, CP_BETTER_HIGHER},
    {CP_VM_DEVICE_UTIL, "device_util", "%", 100.0, CP_BETTER_HIGHER},
    {CP_VM_MEMORY, "memory", "MiB", 1.0 / (1024.0 * 1024.0), CP_BETTER_LOWER},
    {CP_VM_PRECISION, "precision", "% loss", 1.0, CP_BETTER_LOWER},
};

const char *cp_vmetric_name(enum cp_vmetric m)
{
    return (unsigned)m < CP_VM_COUNT ? metric_defs[m].name : "unknown";
}

enum cp_status cp_vmetric_parse_list(const char *s, bool wanted[CP_VM_COUNT], struct cp_diag *d)
{
    memset(wanted, 0, CP_VM_COUNT * sizeof *wanted);
    char *copy = cp_strdup(s);
    if (!copy)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    enum cp_status st = CP_OK;
    size_t n = 0;
    for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok && st == CP_OK;
         tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ')
            tok++;
        size_t i = 0;
        while (i < CP_VM_COUNT && strcmp(tok, metric_defs[i].name) != 0)
            i++;
        if (i == CP_VM_COUNT)
            st = cp_diag_set(d, CP_ERR_INVALID,
                             "--metrics: unknown metric '%s'; known: latency, p99, throughput, "
                             "device_util, memory, precision",
                             tok);
        else
            wanted[i] = true, n++;
    }
    free(copy);
    if (st == CP_OK && n == 0)
        st = cp_diag_set(d, CP_ERR_INVALID, "--metrics: give at least one metric");
    return st;
}

void cp_validate_opts_init(struct cp_validate_opts *o)
{
    memset(o, 0, sizeof *o);
    for (int i = 0; i < CP_VM_COUNT; i++)
        o->wanted[i] = true;
    cp_verdict_opts_init(&o->verdict);
    o->precision_tolerance = 0.1;
}

/* ---- sides ---------------------------------------------------------------- */

void cp_validate_side_release(struct cp_validate_side *s)
{
    for (size_t i = 0; i < s->n_own; i++)
        cp_run_metrics_release(&s->own[i]);
    memset(s, 0, sizeof *s);
}

void cp_validate_side_borrow(struct cp_validate_side *s, const char *label,
                             struct cp_run_metrics *m)
{
    memset(s, 0, sizeof *s);
    s->label = label;
    s->runs[0] = m;
    s->n_runs = 1;
}

/* Add run `run` of an open store to side s. */
static enum cp_status add_run(struct cp_trace_store *store, const char *path, int64_t run,
                              struct cp_validate_side *s, struct cp_diag *d)
{
    if (s->n_own == CP_VALIDATE_MAX_RUNS)
        return cp_diag_set(d, CP_ERR_INVALID, "%s: more than %d runs on one side", path,
                           CP_VALIDATE_MAX_RUNS);
    struct cp_run_metrics *m = &s->own[s->n_own];
    enum cp_status st = cp_trace_store_run_metrics(store, run, m, d);
    if (st != CP_OK)
        return st == CP_ERR_IO ? CP_ERR_INVALID : st;
    s->n_own++;
    s->runs[s->n_runs++] = m;
    if (m->n == 0)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "%s: run %lld has no latency samples; record them with "
                           "`cannprof bench MODEL --trace %s`",
                           path, (long long)m->run_id, path);
    return CP_OK;
}

static enum cp_status open_existing(const char *path, struct cp_trace_store **store,
                                    struct cp_diag *d)
{
    if (!cp_path_exists(path))
        return cp_diag_set(d, CP_ERR_INVALID, "%s: no such file", path);
    enum cp_status st = cp_trace_store_open_ro(path, store, d);
    return st == CP_ERR_IO ? CP_ERR_INVALID : st;
}

static enum cp_status parse_run(const char *text, int64_t *run, struct cp_diag *d)
{
    if (!cp_parse_i64(text, run) || *run < 1)
        return cp_diag_set(d, CP_ERR_INVALID, "run '%s' is not a run id (1, 2, ...)", text);
    return CP_OK;
}

enum cp_status cp_validate_side_from_trace(const char *path, const char *run_text,
                                           struct cp_validate_side *s, struct cp_diag *d)
{
    memset(s, 0, sizeof *s);
    s->label = path;
    return cp_validate_side_add_trace(path, run_text, s, d);
}

enum cp_status cp_validate_side_add_trace(const char *path, const char *run_text,
                                          struct cp_validate_side *s, struct cp_diag *d)
{
    if (!s->label)
        s->label = path;
    int64_t run = -1;
    enum cp_status st = run_text ? parse_run(run_text, &run, d) : CP_OK;
    struct cp_trace_store *store = NULL;
    if (st == CP_OK)
        st = open_existing(path, &store, d);
    int64_t *ids = NULL;
    size_t n = 0;
    if (st == CP_OK && run_text)
        st = add_run(store, path, run, s, d);
    else if (st == CP_OK && (st = cp_trace_store_run_group(store, -1, &ids, &n, d)) == CP_OK)
        for (size_t i = 0; i < n && st == CP_OK; i++)
            st = add_run(store, path, ids[i], s, d);
    free(ids);
    cp_trace_store_close(store);
    if (st != CP_OK && st == CP_ERR_IO)
        st = CP_ERR_INVALID;
    return st;
}

enum cp_status cp_validate_sides_from_ab(const char *path, struct cp_validate_side *before,
                                         struct cp_validate_side *after, struct cp_diag *d)
{
    memset(before, 0, sizeof *before);
    memset(after, 0, sizeof *after);
    before->label = after->label = path;
    struct cp_trace_store *store = NULL;
    char *rb = NULL, *ra = NULL;
    int64_t b = 0, a = 0;
    enum cp_status st = open_existing(path, &store, d);
    if (st == CP_OK && (st = cp_trace_store_get_meta(store, "ab.before_run", &rb, d)) == CP_OK &&
        (st = cp_trace_store_get_meta(store, "ab.after_run", &ra, d)) == CP_OK && (!rb || !ra))
        st = cp_diag_set(d, CP_ERR_INVALID,
                         "%s is not an A/B trace (no ab.before_run/ab.after_run meta); record "
                         "one with `cannprof bench A.om --vs B.om --trace %s`",
                         path, path);
    if (st == CP_OK && (st = parse_run(rb, &b, d)) == CP_OK)
        st = parse_run(ra, &a, d);
    if (st == CP_OK && (st = add_run(store, path, b, before, d)) == CP_OK)
        st = add_run(store, path, a, after, d);
    free(rb);
    free(ra);
    cp_trace_store_close(store);
    return st;
}

/* ---- which iterations ----------------------------------------------------------- */

/* Keep the iterations of m flagged in keep[] (latency, kernel time and
 * probe arrays compacted in place). */
static void keep_flagged(struct cp_run_metrics *m, const bool *keep)
{
    size_t k = 0;
    for (size_t i = 0; i < m->n; i++) {
        if (!keep[i])
            continue;
        m->latency_ns[k] = m->latency_ns[i];
        if (m->device_ns)
            m->device_ns[k] = m->device_ns[i];
        if (m->probe_ns)
            m->probe_ns[k] = m->probe_ns[i];
        k++;
    }
    m->n = k;
}

static bool side_probed(const struct cp_validate_side *s)
{
    for (size_t i = 0; i < s->n_runs; i++)
        if (!s->runs[i]->probe_ns)
            return false;
    return true;
}

/* The rounds of an A/B trace: a round is judged once for both runs, by the
 * higher of its two probe readings (the engine stores the same one in
 * both), with a window sized from the time of the whole round. Rounds kept
 * stay paired. */
static void select_rounds(struct cp_run_metrics *b, struct cp_run_metrics *a, struct cp_vprobe *p,
                          bool all)
{
    size_t n = b->n < a->n ? b->n : a->n;
    uint64_t *round = cp_calloc(n ? n : 1, sizeof *round);
    uint64_t *probe = cp_calloc(n ? n : 1, sizeof *probe);
    bool *keep = cp_calloc(n ? n : 1, sizeof *keep);
    if (!round || !probe || !keep) {
        snprintf(p->why, sizeof p->why, "out of memory selecting undisturbed rounds");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        round[i] = b->latency_ns[i] + a->latency_ns[i];
        probe[i] = b->probe_ns[i] > a->probe_ns[i] ? b->probe_ns[i] : a->probe_ns[i];
    }
    uint64_t floor = cp_probe_floor(probe, n);
    size_t k = cp_probe_mark_run(probe, round, n, floor, keep);
    p->floor_ns[0] = p->floor_ns[1] = p->reference_ns[0] = p->reference_ns[1] = floor;
    p->kept[0] = p->kept[1] = k;
    if (all) {
        snprintf(p->why, sizeof p->why, "--all-iterations");
        goto out;
    }
    if (k < CP_VALIDATE_MIN_UNDISTURBED) {
        snprintf(p->why, sizeof p->why,
                 "interleaved A/B rounds, only %zu of %zu undisturbed: every round compared "
                 "(both sides saw the same machine)",
                 k, n);
        goto out;
    }
    b->n = a->n = n;
    keep_flagged(b, keep);
    keep_flagged(a, keep);
    p->used = true;
out:
    free(round);
    free(probe);
    free(keep);
}

/* Decide which iterations the timing metrics compare (struct cp_vprobe):
 * the undisturbed ones, each run judged against the lowest floor of all
 * runs (so that a run made while the machine was busy throughout is seen
 * as such), or its own floor when thread counts differ. A run with fewer
 * than CP_VALIDATE_MIN_UNDISTURBED of them is left out; when a side is left
 * with none, every iteration is compared and timing gets no verdict
 * (too_few). The counts are reported whatever is compared. OUT:
 * usable[s][i]. */
static void select_iterations(struct cp_validate_side *b, struct cp_validate_side *a,
                              const struct cp_validate_opts *o, struct cp_vprobe *p,
                              bool usable[2][CP_VALIDATE_MAX_RUNS])
{
    memset(p, 0, sizeof *p);
    struct cp_validate_side *sides[2] = {b, a};
    for (int s = 0; s < 2; s++)
        for (size_t i = 0; i < sides[s]->n_runs; i++) {
            usable[s][i] = true;
            p->total[s] += sides[s]->runs[i]->n;
        }
    p->kept[0] = p->total[0];
    p->kept[1] = p->total[1];
    bool probed[2] = {side_probed(b), side_probed(a)};
    if (o->interleaved && probed[0] && probed[1]) {
        select_rounds(b->runs[0], a->runs[0], p, o->all_iterations);
        return;
    }
    bool same_threads = true;
    uint64_t low = UINT64_MAX;
    for (int s = 0; s < 2; s++) {
        uint64_t side_low = UINT64_MAX;
        for (size_t i = 0; i < sides[s]->n_runs; i++) {
            const struct cp_run_metrics *m = sides[s]->runs[i];
            same_threads = same_threads && m->threads == b->runs[0]->threads;
            if (!m->probe_ns)
                continue;
            uint64_t f = cp_probe_floor(m->probe_ns, m->n);
            side_low = f < side_low ? f : side_low;
        }
        p->floor_ns[s] = side_low == UINT64_MAX ? 0 : side_low;
        if (side_low < low)
            low = side_low;
    }
    bool *keep[2][CP_VALIDATE_MAX_RUNS];
    memset(keep, 0, sizeof keep);
    bool oom = false, too_few = false;
    for (int s = 0; s < 2; s++) {
        if (!probed[s])
            continue;
        p->kept[s] = 0;
        p->reference_ns[s] = same_threads && low != UINT64_MAX ? low : p->floor_ns[s];
        size_t usable_runs = 0;
        for (size_t i = 0; i < sides[s]->n_runs; i++) {
            const struct cp_run_metrics *m = sides[s]->runs[i];
            keep[s][i] = cp_calloc(m->n ? m->n : 1, sizeof *keep[s][i]);
            if (!keep[s][i]) {
                oom = true;
                continue;
            }
            size_t k =
                cp_probe_mark_run(m->probe_ns, m->latency_ns, m->n, p->reference_ns[s], keep[s][i]);
            p->kept[s] += k;
            usable[s][i] = k >= CP_VALIDATE_MIN_UNDISTURBED;
            usable_runs += usable[s][i];
        }
        too_few = too_few || usable_runs == 0;
    }
    if (o->all_iterations)
        snprintf(p->why, sizeof p->why, "--all-iterations");
    else if (!probed[0] || !probed[1])
        snprintf(p->why, sizeof p->why,
                 "the %s run has no interference probe (recorded with --no-probe or by an older "
                 "cannprof)",
                 probed[0] ? "after" : "before");
    else if (oom)
        snprintf(p->why, sizeof p->why, "out of memory selecting undisturbed iterations");
    else if (too_few)
        p->too_few = true;
    else {
        for (int s = 0; s < 2; s++)
            for (size_t i = 0; i < sides[s]->n_runs; i++)
                if (usable[s][i])
                    keep_flagged(sides[s]->runs[i], keep[s][i]);
        p->used = true;
    }
    if (!p->used) /* every iteration of every run */
        for (int s = 0; s < 2; s++)
            for (size_t i = 0; i < sides[s]->n_runs; i++)
                usable[s][i] = true;
    for (int s = 0; s < 2; s++)
        for (size_t i = 0; i < sides[s]->n_runs; i++)
            free(keep[s][i]);
}

/* ---- metrics ----------------------------------------------------------------------- */

/* The value of metric `id` at iteration i of run m. */
static double value_at(enum cp_vmetric id, const struct cp_run_metrics *m, size_t i)
{
    double lat = (double)m->latency_ns[i];
    int batch = m->batch > 0 ? m->batch : 1;
    switch (id) {
    case CP_VM_LATENCY:
    case CP_VM_P99:
        return lat;
    case CP_VM_THROUGHPUT:
        return lat > 0 ? (double)batch * 1e9 / lat : 0;
    case CP_VM_DEVICE_UTIL:
        return lat > 0 && m->device_ns ? (double)m->device_ns[i] / lat : 0;
    case CP_VM_MEMORY:
        return (double)(m->weight_bytes + m->arena_bytes);
    case CP_VM_PRECISION:
        return m->precision_loss;
    }
    return NAN;
}

/* Per-iteration values of a metric over a side's usable runs (one value of
 * the first run for memory and precision). OUT: *v (caller frees), *n. */
static enum cp_status side_values(enum cp_vmetric id, const struct cp_validate_side *s,
                                  const bool *usable, double **v, size_t *n, struct cp_diag *d)
{
    *v = NULL;
    *n = 0;
    bool single = id == CP_VM_MEMORY || id == CP_VM_PRECISION;
    size_t cnt = 0;
    for (size_t i = 0; i < s->n_runs; i++)
        if (usable[i] || single)
            cnt += s->runs[i]->n;
    double *x = cp_calloc(cnt ? cnt : 1, sizeof *x);
    if (!x)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    if (single) {
        x[0] = value_at(id, s->runs[0], 0);
        *v = x;
        *n = 1;
        return CP_OK;
    }
    size_t k = 0;
    for (size_t r = 0; r < s->n_runs; r++)
        for (size_t i = 0; usable[r] && i < s->runs[r]->n; i++)
            x[k++] = value_at(id, s->runs[r], i);
    *v = x;
    *n = k;
    return CP_OK;
}

/* One value per usable run: its median of the metric (p99: its 0.99
 * quantile). OUT: *v (caller frees), *n. */
static enum cp_status run_values(enum cp_vmetric id, const struct cp_validate_side *s,
                                 const bool *usable, double **v, size_t *n, struct cp_diag *d)
{
    *v = NULL;
    *n = 0;
    double *x = cp_calloc(s->n_runs ? s->n_runs : 1, sizeof *x);
    if (!x)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    size_t k = 0;
    enum cp_status st = CP_OK;
    for (size_t r = 0; r < s->n_runs && st == CP_OK; r++) {
        if (!usable[r])
            continue;
        const struct cp_run_metrics *m = s->runs[r];
        double *it = cp_calloc(m->n ? m->n : 1, sizeof *it);
        if (!it) {
            st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            break;
        }
        for (size_t i = 0; i < m->n; i++)
            it[i] = value_at(id, m, i);
        x[k++] = cp_stats_quantile(it, m->n, id == CP_VM_P99 ? 0.99 : 0.5);
        free(it);
    }
    if (st != CP_OK) {
        free(x);
        return st;
    }
    *v = x;
    *n = k;
    return CP_OK;
}

/* Separate runs that stopped at their time limit before they had the
 * undisturbed iterations they asked for (bench's "time limit hit"). Such a
 * run found the machine busy throughout: the few iterations it kept are the
 * quiet moments of another regime than a run that finished, and separate
 * runs in different regimes differed by up to 12% on a 2-core machine with
 * two threads and two CPU hogs (docs/validation.md), where every other
 * signal looked clean. Interleaved rounds saw the same machine, and
 * --all-iterations asks for every iteration whatever the machine did. */
static void count_busy(const struct cp_validate_side *b, const struct cp_validate_side *a,
                       const struct cp_validate_opts *o, struct cp_vprobe *p)
{
    if (o->interleaved || o->all_iterations)
        return;
    const struct cp_validate_side *sides[2] = {b, a};
    for (int s = 0; s < 2; s++)
        for (size_t i = 0; i < sides[s]->n_runs; i++)
            if (sides[s]->runs[i]->time_limit_hit) {
                p->busy[s]++;
                p->busy_raised[s] += sides[s]->runs[i]->priority_raised;
            }
}

static size_t count_usable(const bool *usable, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += usable[i];
    return k;
}

/* Which metrics both sides can give. Explicitly asked-for metrics that a
 * side lacks are an error naming it. */
static enum cp_status pick_metrics(const struct cp_validate_opts *o, bool wanted[CP_VM_COUNT],
                                   const struct cp_validate_side *b,
                                   const struct cp_validate_side *a, struct cp_diag *d)
{
    memcpy(wanted, o->wanted, CP_VM_COUNT * sizeof *wanted);
    const struct cp_validate_side *sides[2] = {b, a};
    for (int s = 0; s < 2; s++)
        for (size_t i = 0; i < sides[s]->n_runs; i++) {
            const struct cp_run_metrics *m = sides[s]->runs[i];
            const char *missing = NULL;
            if (wanted[CP_VM_DEVICE_UTIL] && !m->device_ns)
                missing = "device_util needs kernel events: record the trace with `cannprof "
                          "bench --trace`";
            else if (wanted[CP_VM_PRECISION] && i == 0 && isnan(m->precision_loss))
                missing = "precision needs a precision_loss counter in the run";
            else if (wanted[CP_VM_MEMORY] && i == 0 && m->weight_bytes + m->arena_bytes == 0)
                missing = "memory needs the run's weights and arena, which cannprof's own runs "
                          "record (an imported profile has none)";
            if (!missing)
                continue;
            if (o->asked)
                return cp_diag_set(d, CP_ERR_INVALID, "%s (run %lld): %s", sides[s]->label,
                                   (long long)m->run_id, missing);
            if (!m->device_ns)
                wanted[CP_VM_DEVICE_UTIL] = false;
            if (i == 0 && isnan(m->precision_loss))
                wanted[CP_VM_PRECISION] = false;
            if (i == 0 && m->weight_bytes + m->arena_bytes == 0)
                wanted[CP_VM_MEMORY] = false;
        }
    return CP_OK;
}

static enum cp_status compare_metric(const struct metric_def *md, struct cp_validate_side *b,
                                     struct cp_validate_side *a,
                                     bool usable[2][CP_VALIDATE_MAX_RUNS], struct cp_vresult *r,
                                     struct cp_vrow *row, struct cp_diag *d)
{
    row->metric = md->id;
    row->name = md->name;
    row->unit = md->unit;
    row->scale = md->scale;
    bool timing = md->id != CP_VM_MEMORY && md->id != CP_VM_PRECISION;
    row->between_runs = timing && r->between_runs;
    row->paired = row->between_runs && r->paired;
    double *xb = NULL, *xa = NULL;
    size_t nb = 0, na = 0;
    struct cp_verdict_opts o = r->opts;
    enum cp_status st;
    if (row->between_runs) {
        /* each run's statistic is one sample: the test sees the variance
         * between processes */
        o.test = CP_TEST_WELCH;
        o.quantile = 0;
        st = run_values(md->id, b, usable[0], &xb, &nb, d);
        if (st == CP_OK)
            st = run_values(md->id, a, usable[1], &xa, &na, d);
    } else {
        o.quantile = md->id == CP_VM_P99 ? 0.99 : 0.0;
        st = side_values(md->id, b, usable[0], &xb, &nb, d);
        if (st == CP_OK)
            st = side_values(md->id, a, usable[1], &xa, &na, d);
    }
    if (st == CP_OK && md->id == CP_VM_PRECISION) {
        /* Percentage points: a loss going from 0.1% to 0.2% is +0.1 pp,
         * not +100%. */
        o.threshold_pct = r->precision_tolerance;
        st = cp_verdict_compare(xb, 1, xa, 1, md->better, &o, &row->c, d);
        row->c.delta_pct = xa[0] - xb[0];
        row->c.ci_lo_pct = row->c.ci_hi_pct = row->c.delta_pct;
        row->c.verdict = row->c.delta_pct > r->precision_tolerance    ? CP_VERDICT_REGRESSED
                         : row->c.delta_pct < -r->precision_tolerance ? CP_VERDICT_IMPROVED
                                                                      : CP_VERDICT_UNCHANGED;
    } else if (st == CP_OK && (nb == 0 || na == 0)) {
        /* no usable run on a side: no timing verdict */
        memset(&row->c, 0, sizeof row->c);
        row->c.before = row->c.after = row->c.delta_pct = row->c.ci_lo_pct = row->c.ci_hi_pct =
            row->c.p = row->c.mde_pct = NAN;
        row->c.verdict = CP_VERDICT_INCONCLUSIVE;
    } else if (st == CP_OK && row->paired && nb == na)
        st = cp_verdict_compare_paired(xb, xa, nb, md->better, &o, &row->c, d);
    else if (st == CP_OK)
        st = cp_verdict_compare(xb, nb, xa, na, md->better, &o, &row->c, d);
    free(xb);
    free(xa);
    if (st != CP_OK) {
        struct cp_diag inner = *d;
        cp_diag_init(d);
        return cp_diag_set(d, st, "metric %s: %s", md->name, inner.msg);
    }
    return CP_OK;
}

/* Did the runs alternate, so that run i of each side is a pair? Equal
 * counts of at least three runs, all usable, started in the order before 1,
 * after 1, before 2, after 2, ... (by the runs' recorded start; traces
 * written without one are not paired). */
static bool alternated(const struct cp_validate_side *b, const struct cp_validate_side *a,
                       bool usable[2][CP_VALIDATE_MAX_RUNS])
{
    size_t n = b->n_runs;
    if (n < 3 || a->n_runs != n)
        return false;
    for (size_t i = 0; i < n; i++) {
        double tb = b->runs[i]->started_us, ta = a->runs[i]->started_us;
        if (!usable[0][i] || !usable[1][i] || !(tb < ta))
            return false;
        if (i + 1 < n && !(ta < b->runs[i + 1]->started_us))
            return false;
    }
    return true;
}

/* Same model? The source-model hash recorded in the .om says; when a side
 * has none (an .onnx run unconverted), the model file's name does. */
static bool same_model(const struct cp_run_metrics *a, const struct cp_run_metrics *b)
{
    /* an imported profile names its file, not a model: two profiles of one
     * workload have different names (torch_npu stamps the time in them) */
    if ((a->kind && strcmp(a->kind, "import") == 0) || (b->kind && strcmp(b->kind, "import") == 0))
        return true;
    if (a->model_hash[0] && b->model_hash[0])
        return strcmp(a->model_hash, b->model_hash) == 0;
    const char *na = strrchr(a->model_path, '/'), *nb = strrchr(b->model_path, '/');
    return strcmp(na ? na + 1 : a->model_path, nb ? nb + 1 : b->model_path) == 0;
}

enum cp_verdict cp_vresult_overall(const struct cp_vresult *r)
{
    bool improved = false, inconclusive = false;
    for (size_t i = 0; i < r->n_rows; i++) {
        switch (r->rows[i].c.verdict) {
        case CP_VERDICT_REGRESSED:
            return CP_VERDICT_REGRESSED;
        case CP_VERDICT_IMPROVED:
            improved = true;
            break;
        case CP_VERDICT_INCONCLUSIVE:
            inconclusive = true;
            break;
        case CP_VERDICT_UNCHANGED:
            break;
        }
    }
    return improved       ? CP_VERDICT_IMPROVED
           : inconclusive ? CP_VERDICT_INCONCLUSIVE
                          : CP_VERDICT_UNCHANGED;
}

int cp_validate_exit_code(const struct cp_vresult *r)
{
    switch (r->overall) {
    case CP_VERDICT_REGRESSED:
        return 1;
    case CP_VERDICT_INCONCLUSIVE:
        return CP_VALIDATE_EXIT_INCONCLUSIVE;
    case CP_VERDICT_IMPROVED:
    case CP_VERDICT_UNCHANGED:
        break;
    }
    return 0;
}

enum cp_status cp_validate_compare(struct cp_validate_side *before, struct cp_validate_side *after,
                                   const struct cp_validate_opts *o, double noise_floor_pct,
                                   size_t noise_runs, struct cp_vresult *r, struct cp_diag *d)
{
    memset(r, 0, sizeof *r);
    if (!before->n_runs || !after->n_runs)
        return cp_diag_set(d, CP_ERR_INVALID, "validate: a side has no run");
    r->opts = o->verdict;
    r->precision_tolerance = o->precision_tolerance;
    r->asked_threshold_pct = o->verdict.threshold_pct;
    r->noise_floor_pct = noise_floor_pct;
    r->noise_runs = noise_runs;
    if (noise_runs && noise_floor_pct > r->opts.threshold_pct)
        r->opts.threshold_pct = noise_floor_pct;
    r->before_label = before->label;
    r->after_label = after->label;
    r->before = before->runs[0];
    r->after = after->runs[0];
    r->runs[0] = before->n_runs;
    r->runs[1] = after->n_runs;
    r->interleaved = o->interleaved;
    for (size_t s = 0; s < 2; s++) {
        const struct cp_validate_side *side = s ? after : before;
        for (size_t i = 0; i < side->n_runs; i++)
            if (!same_model(side->runs[i], before->runs[0]) ||
                !same_model(side->runs[i], after->runs[0]))
                r->models_differ = true;
    }
    if (r->models_differ && !o->force)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "the traces are of different models (before: %s, hash %s; after: %s, "
                           "hash %s); add --force to compare them anyway",
                           r->before->model_path, r->before->model_hash, r->after->model_path,
                           r->after->model_hash);
    bool usable[2][CP_VALIDATE_MAX_RUNS];
    select_iterations(before, after, o, &r->probe, usable);
    count_busy(before, after, o, &r->probe);
    r->between_runs = !o->interleaved && count_usable(usable[0], before->n_runs) >= 2 &&
                      count_usable(usable[1], after->n_runs) >= 2;
    r->paired = r->between_runs && alternated(before, after, usable);
    bool wanted[CP_VM_COUNT];
    enum cp_status st = pick_metrics(o, wanted, before, after, d);
    for (int i = 0; i < CP_VM_COUNT && st == CP_OK; i++) {
        if (!wanted[i])
            continue;
        st = compare_metric(&metric_defs[i], before, after, usable, r, &r->rows[r->n_rows], d);
        if (st == CP_OK)
            r->n_rows++;
    }
    if (st != CP_OK)
        return st;
    /* With too few undisturbed iterations on a side, or a run that never
     * got them, a timing difference may be the machine's: no verdict on
     * timing. */
    if (r->probe.too_few || r->probe.busy[0] + r->probe.busy[1] > 0)
        for (size_t i = 0; i < r->n_rows; i++) {
            struct cp_vrow *row = &r->rows[i];
            if (row->metric == CP_VM_MEMORY || row->metric == CP_VM_PRECISION)
                continue;
            row->c.verdict = CP_VERDICT_INCONCLUSIVE;
            row->c.n_needed = 0;
        }
    r->overall = cp_vresult_overall(r);
    return CP_OK;
}
