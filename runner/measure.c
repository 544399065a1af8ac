/* The measurement engine (runner/measure.h): rounds of subjects in
 * rotating order, the interference probe, the stopping rule, and what a
 * measurement leaves in a trace. */
#include "runner/measure.h"
#include "core/host.h"
#include "runner/probe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cp_measure_policy_init(struct cp_measure_policy *p)
{
    memset(p, 0, sizeof *p);
    p->mode = CP_MEASURE_UNDISTURBED;
    p->warmup = CP_MEASURE_DEFAULT_WARMUP;
    p->iterations = CP_MEASURE_DEFAULT_ITERATIONS;
    p->probe = true;
    p->floor_cache = true;
    p->threads = 1;
    p->min_rounds = 1;
    p->time_limit_min_s = CP_MEASURE_MIN_LIMIT_S;
}

const char *cp_measure_stop_name(enum cp_measure_stop s)
{
    static const char *const names[] = {"target",     "count",       "duration",
                                        "time limit", "interrupted", "stopped early"};
    return (unsigned)s < sizeof names / sizeof *names ? names[s] : "unknown";
}

const char *cp_measure_priority_name(enum cp_measure_priority p)
{
    return p == CP_MEASURE_PRIORITY_HIGH ? "high" : "normal";
}

bool cp_measure_priority_parse(const char *s, enum cp_measure_priority *out)
{
    if (strcmp(s, "normal") == 0)
        *out = CP_MEASURE_PRIORITY_NORMAL;
    else if (strcmp(s, "high") == 0)
        *out = CP_MEASURE_PRIORITY_HIGH;
    else
        return false;
    return true;
}

static enum cp_status run_plan(void *ctx, size_t subject, int32_t iteration, struct cp_diag *d)
{
    (void)subject;
    return cp_plan_run(ctx, iteration, d);
}

struct cp_measure_subject cp_measure_plan_subject(struct cp_plan *plan,
                                                  struct cp_trace_recorder *trace)
{
    return (struct cp_measure_subject){.run = run_plan, .ctx = plan, .trace = trace};
}

void cp_measurement_release(struct cp_measurement *m)
{
    for (size_t i = 0; i < CP_MEASURE_MAX_SUBJECTS; i++)
        free(m->ns[i]);
    free(m->probe_ns);
    free(m->undisturbed);
    memset(m, 0, sizeof *m);
}

static enum cp_status check_policy(const struct cp_measure_subject *s, size_t n,
                                   const struct cp_measure_policy *p, struct cp_diag *d)
{
    if (!s || n == 0 || n > CP_MEASURE_MAX_SUBJECTS)
        return cp_diag_set(d, CP_ERR_INVALID, "measure: %zu subjects (1 to %d)", n,
                           CP_MEASURE_MAX_SUBJECTS);
    for (size_t i = 0; i < n; i++)
        if (!s[i].run)
            return cp_diag_set(d, CP_ERR_INVALID, "measure: subject %zu has nothing to run", i);
    if (p->warmup < 0 || p->warmup > INT32_MAX)
        return cp_diag_set(d, CP_ERR_INVALID, "measure: %lld warm-up rounds", (long long)p->warmup);
    if (p->min_rounds < 1 || p->min_rounds > INT32_MAX)
        return cp_diag_set(d, CP_ERR_INVALID, "measure: min_rounds %lld", (long long)p->min_rounds);
    switch (p->mode) {
    case CP_MEASURE_UNDISTURBED:
        if (!p->probe)
            return cp_diag_set(d, CP_ERR_INVALID,
                               "measure: counting undisturbed rounds needs the probe");
        /* fall through */
    case CP_MEASURE_EXACT:
        if (p->iterations < p->min_rounds || p->iterations > INT32_MAX)
            return cp_diag_set(d, CP_ERR_INVALID, "measure: %lld iterations (%lld to %d)",
                               (long long)p->iterations, (long long)p->min_rounds, INT32_MAX);
        break;
    case CP_MEASURE_DURATION:
        if (!(p->duration_s > 0) || !isfinite(p->duration_s))
            return cp_diag_set(d, CP_ERR_INVALID, "measure: a duration in seconds, > 0");
        break;
    default:
        return cp_diag_set(d, CP_ERR_INVALID, "measure: mode %d", (int)p->mode);
    }
    if (p->mode == CP_MEASURE_UNDISTURBED &&
        (p->time_limit_s < 0 || !isfinite(p->time_limit_s) || !(p->time_limit_min_s > 0) ||
         !isfinite(p->time_limit_min_s)))
        return cp_diag_set(d, CP_ERR_INVALID, "measure: time limit %g s (at least %g s)",
                           p->time_limit_s, p->time_limit_min_s);
    if (p->probe && (p->threads < 1 || p->threads > 4096))
        return cp_diag_set(d, CP_ERR_INVALID, "measure: probe threads %d", p->threads);
    return CP_OK;
}

/* The subject at position k of round r: the order rotates, so with two
 * subjects even rounds run A then B, odd rounds B then A. */
static size_t subject_at(size_t r, size_t k, size_t n)
{
    return (r + k) % n;
}

/* Open (push) or close (pop) an application range on every distinct
 * recorder. A range that cannot be opened (out of memory) only costs the
 * trace its label. */
static void ranges(const struct cp_measure_subject *s, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++) {
        if (!s[i].trace)
            continue;
        bool seen = false;
        for (size_t j = 0; j < i; j++)
            seen = seen || s[j].trace == s[i].trace;
        if (seen)
            continue;
        if (name)
            (void)cp_trace_push(s[i].trace, name);
        else
            (void)cp_trace_pop(s[i].trace);
    }
}

static void set_iteration(const struct cp_measure_subject *s, size_t n, int32_t it)
{
    for (size_t i = 0; i < n; i++)
        if (s[i].trace)
            cp_trace_set_iteration(s[i].trace, it);
}

/* One round: every subject once in the round's order. ns[subject] gets
 * its time (may be NULL in warm-up). OUT: *total, the round's wall time. */
static enum cp_status run_round(const struct cp_measure_subject *s, size_t n, size_t r,
                                int32_t iteration, uint64_t **ns, size_t at, uint64_t *total,
                                struct cp_diag *d)
{
    /* The round's time is the sum of its subjects' times, not the wall
     * time around them: the trace stores only those, and whoever judges
     * the run again from the trace must find the same window. */
    uint64_t sum = 0;
    for (size_t k = 0; k < n; k++) {
        size_t i = subject_at(r, k, n);
        uint64_t t0 = cp_clock_ns();
        enum cp_status st = s[i].run(s[i].ctx, i, iteration, d);
        uint64_t t1 = cp_clock_ns();
        if (st != CP_OK)
            return st;
        if (ns)
            ns[i][at] = t1 - t0;
        sum += t1 - t0;
    }
    *total = sum;
    return CP_OK;
}

/* Room for `cap` rounds in every array of m, and in the round times. */
static enum cp_status grow(struct cp_measurement *m, uint64_t **round_ns, size_t cap, bool probe,
                           struct cp_diag *d)
{
    uint64_t *rt = cp_realloc_array(*round_ns, cap, sizeof *rt);
    if (!rt)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory for %zu rounds of samples", cap);
    *round_ns = rt;
    for (size_t i = 0; i < m->n_subjects; i++) {
        uint64_t *g = cp_realloc_array(m->ns[i], cap, sizeof *g);
        if (!g)
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory for %zu rounds of samples", cap);
        m->ns[i] = g;
    }
    if (probe) {
        uint64_t *g = cp_realloc_array(m->probe_ns, cap, sizeof *g);
        if (!g)
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory for %zu probe readings", cap);
        m->probe_ns = g;
    }
    return CP_OK;
}

/* The clock reading `s` seconds after `from`. Saturates: converting a
 * double beyond uint64_t's range is undefined, and centuries mean no
 * deadline in practice. */
static uint64_t deadline_after(uint64_t from, double s)
{
    double ns = s * 1e9;
    return ns < 9e18 && from < UINT64_MAX - (uint64_t)ns ? from + (uint64_t)ns : UINT64_MAX;
}

/* The reference floor rounds are judged against: this measurement's own
 * (the value at rank n/100 of its probes), or the machine's lowest lately
 * when that is lower. */
static uint64_t reference_floor(const uint64_t *probe, size_t n, uint64_t hint)
{
    uint64_t own = cp_probe_floor(probe, n);
    return hint && hint < own ? hint : own;
}

/* How many of the first n rounds ran undisturbed (flags in out, may be
 * NULL): runner/probe.h's one rule, with the window the median round time
 * calls for. The stopping rule and the final verdict both use it, so the
 * count a run stops at is the count it reports. */
static size_t count_undisturbed(const uint64_t *probe, const uint64_t *round_ns, size_t n,
                                uint64_t hint, bool *out)
{
    return cp_probe_mark_run(probe, round_ns, n, reference_floor(probe, n, hint), out);
}

/* Judge every round and flag the undisturbed ones (all of them without
 * the probe). */
static enum cp_status mark_rounds(struct cp_measurement *m, const uint64_t *round_ns,
                                  struct cp_diag *d)
{
    m->undisturbed = cp_calloc(m->n ? m->n : 1, sizeof *m->undisturbed);
    if (!m->undisturbed)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory judging %zu rounds", m->n);
    if (!m->probed) {
        for (size_t r = 0; r < m->n; r++)
            m->undisturbed[r] = true;
        m->n_undisturbed = m->n;
        return CP_OK;
    }
    m->floor_ns = cp_probe_floor(m->probe_ns, m->n);
    m->reference_ns = reference_floor(m->probe_ns, m->n, m->floor_hint_ns);
    m->n_undisturbed =
        count_undisturbed(m->probe_ns, round_ns, m->n, m->floor_hint_ns, m->undisturbed);
    return CP_OK;
}

/* One look of the policy's sequential rule at the rounds so far, judged
 * as the end would judge them. OUT: *stop. */
static enum cp_status look(const struct cp_measurement *m, const uint64_t *round_ns,
                           const struct cp_measure_policy *p, bool *stop, struct cp_diag *d)
{
    struct cp_measurement view = *m;
    view.undisturbed = cp_calloc(m->n ? m->n : 1, sizeof *view.undisturbed);
    if (!view.undisturbed)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory judging %zu rounds", m->n);
    if (m->probed)
        view.n_undisturbed =
            count_undisturbed(m->probe_ns, round_ns, m->n, m->floor_hint_ns, view.undisturbed);
    else {
        for (size_t r = 0; r < m->n; r++)
            view.undisturbed[r] = true;
        view.n_undisturbed = m->n;
    }
    *stop = p->look_fn(p->look_ctx, &view);
    free(view.undisturbed);
    return CP_OK;
}

/* Remember this machine's floor for the runs to come: a lower one, or the
 * same again (which keeps it from expiring). A cache that cannot be
 * written costs only that. */
static void save_floor(const struct cp_measurement *m, int threads)
{
    if (!m->probed || m->floor_ns == 0)
        return;
    if (m->floor_hint_ns && !cp_probe_undisturbed(m->floor_ns, m->floor_hint_ns))
        return;
    char path[1200];
    struct cp_diag ignored;
    cp_diag_init(&ignored);
    if (cp_probe_floor_path(threads, true, path, sizeof path))
        (void)cp_probe_floor_save(path, m->reference_ns, &ignored);
}

/* Counters pause around the probe: they describe the subjects. */
struct perf_state {
    struct cp_perf *perf;
    bool broken;
};

static uint64_t probe_round(struct cp_probe *probe, struct perf_state *ps)
{
    bool counting = ps->perf && !ps->broken && cp_perf_has_any(ps->perf);
    if (counting && cp_perf_pause(ps->perf, NULL) != CP_OK)
        ps->broken = true;
    uint64_t v = cp_probe_run(probe);
    if (counting && !ps->broken && cp_perf_resume(ps->perf, NULL) != CP_OK)
        ps->broken = true;
    return v;
}

enum cp_status cp_measure(const struct cp_measure_subject *s, size_t n,
                          const struct cp_measure_policy *p, struct cp_measurement *out,
                          struct cp_diag *d)
{
    memset(out, 0, sizeof *out);
    enum cp_status st = check_policy(s, n, p, d);
    if (st != CP_OK)
        return st;
    struct cp_measurement m = {0};
    m.n_subjects = n;
    m.warmup = p->warmup;
    m.target = p->mode == CP_MEASURE_DURATION ? 0 : p->iterations;
    m.probed = p->probe;
    struct cp_probe *probe = NULL;
    if (p->probe && !p->probe_fn && (st = cp_probe_create(p->threads, &probe, d)) != CP_OK)
        return st;
    if (p->probe && p->floor_cache) {
        char path[1200];
        if (cp_probe_floor_path(p->threads, false, path, sizeof path))
            m.floor_hint_ns = cp_probe_floor_load(path);
    }

    /* raised before the warm-up, so that threads the first rounds create
     * (the runtime's and the probe's) start raised as well */
    struct cp_host_priority prio = {0};
    if (p->priority == CP_MEASURE_PRIORITY_HIGH) {
        m.priority_raised = cp_host_priority_raise(CP_MEASURE_HIGH_NICE, &prio);
        if (!m.priority_raised)
            snprintf(m.priority_why, sizeof m.priority_why, "%s", prio.why);
    }

    /* warm-up: its mean round time is what the time limit and the first
     * probe window are sized from */
    ranges(s, n, "warmup");
    uint64_t w0 = cp_clock_ns(), total = 0;
    for (int64_t r = 0; r < p->warmup && st == CP_OK; r++)
        st = run_round(s, n, (size_t)r, -1, NULL, 0, &total, d);
    double typical = p->warmup > 0 ? (double)(cp_clock_ns() - w0) / (double)p->warmup : 0;
    ranges(s, n, NULL);
    if (st != CP_OK)
        goto fail;

    size_t cap = 0, good = 0, next_check = (size_t)p->iterations;
    bool stop_early = false;
    uint64_t *round_ns = NULL; /* each round's wall time, for the probe window */
    struct perf_state perf = {p->perf, false};
    ranges(s, n, "measure");
    if (p->perf)
        cp_perf_start(p->perf, NULL); /* optional: a failure leaves the reading invalid */
    uint64_t t0 = cp_clock_ns();
    uint64_t deadline = UINT64_MAX;
    bool have_deadline = false;
    for (;;) {
        if (p->mode == CP_MEASURE_DURATION && !have_deadline) {
            deadline = deadline_after(t0, p->duration_s);
            have_deadline = true;
        } else if (p->mode == CP_MEASURE_UNDISTURBED && !have_deadline && typical > 0) {
            m.time_limit_s =
                p->time_limit_s > 0
                    ? p->time_limit_s
                    : fmax(p->time_limit_min_s,
                           CP_MEASURE_LIMIT_FACTOR * (double)p->iterations * typical / 1e9);
            deadline = deadline_after(t0, m.time_limit_s);
            have_deadline = true;
        }
        bool enough_rounds = m.n >= (size_t)p->min_rounds;
        if (p->interrupt && *p->interrupt && m.n > 0) {
            m.stop = CP_MEASURE_STOP_INTERRUPTED;
            break;
        }
        if (p->mode == CP_MEASURE_EXACT && m.n >= (size_t)p->iterations) {
            m.stop = CP_MEASURE_STOP_COUNT;
            break;
        }
        if (p->mode == CP_MEASURE_UNDISTURBED && good >= (size_t)p->iterations) {
            m.stop = CP_MEASURE_STOP_TARGET;
            break;
        }
        if (enough_rounds && have_deadline && cp_clock_ns() >= deadline) {
            m.stop = p->mode == CP_MEASURE_DURATION ? CP_MEASURE_STOP_DURATION
                                                    : CP_MEASURE_STOP_TIME_LIMIT;
            break;
        }
        if (m.n == (size_t)INT32_MAX) { /* iterations are int32 in traces */
            m.stop = p->mode == CP_MEASURE_UNDISTURBED ? CP_MEASURE_STOP_TIME_LIMIT
                                                       : CP_MEASURE_STOP_DURATION;
            break;
        }
        if (m.n == cap) {
            size_t ncap = cap ? cap * 2 : 1024;
            if ((st = grow(&m, &round_ns, ncap, p->probe, d)) != CP_OK)
                break;
            cap = ncap;
        }
        set_iteration(s, n, (int32_t)m.n);
        if ((st = run_round(s, n, m.n, (int32_t)m.n, m.ns, m.n, &total, d)) != CP_OK)
            break;
        if (typical <= 0)
            typical = (double)total;
        round_ns[m.n] = total;
        size_t n1 = m.n + 1;
        if (p->probe) {
            m.probe_ns[m.n] =
                p->probe_fn ? p->probe_fn(p->probe_ctx, m.n) : probe_round(probe, &perf);
            /* Counting is O(n log n): do it once the target is reachable,
             * then at growing intervals (an eighth more rounds, at least
             * 16), so that a long run stays linear overall. */
            if (p->mode == CP_MEASURE_UNDISTURBED && n1 >= next_check) {
                good = count_undisturbed(m.probe_ns, round_ns, n1, m.floor_hint_ns, NULL);
                next_check = n1 + (n1 / 8 > 16 ? n1 / 8 : 16);
            }
        }
        m.n = n1;
        if (p->look_fn && p->look_every >= 2 && n1 % (size_t)p->look_every == 0 &&
            (st = look(&m, round_ns, p, &stop_early, d)) != CP_OK)
            break;
        if (stop_early) {
            m.stop = CP_MEASURE_STOP_EARLY;
            break;
        }
    }
    m.elapsed_s = (double)(cp_clock_ns() - t0) / 1e9;
    if (p->perf) {
        cp_perf_stop(p->perf, &m.perf, NULL);
        m.perf_valid = !perf.broken;
        if (perf.broken)
            memset(&m.perf, 0, sizeof m.perf); /* partial counts are no counts */
    }
    set_iteration(s, n, -1);
    ranges(s, n, NULL);
    if (st == CP_OK && m.n == 0)
        st = cp_diag_set(d, CP_ERR_INVALID, "measure: interrupted before any round");
    if (st == CP_OK)
        st = mark_rounds(&m, round_ns, d);
    free(round_ns);
    round_ns = NULL;
    if (st != CP_OK)
        goto fail;
    cp_host_priority_restore(&prio);
    if (p->floor_cache)
        save_floor(&m, p->threads);
    cp_probe_free(probe);
    *out = m;
    return CP_OK;
fail:
    cp_host_priority_restore(&prio);
    cp_probe_free(probe);
    cp_measurement_release(&m);
    return st;
}

enum cp_status cp_measurement_values(const struct cp_measurement *m, size_t subject,
                                     bool undisturbed_only, double **x, size_t *n,
                                     struct cp_diag *d)
{
    *x = NULL;
    *n = 0;
    if (subject >= m->n_subjects)
        return cp_diag_set(d, CP_ERR_INVALID, "measure: no subject %zu", subject);
    double *v = cp_calloc(m->n ? m->n : 1, sizeof *v);
    if (!v)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    size_t k = 0;
    for (size_t r = 0; r < m->n; r++)
        if (!undisturbed_only || !m->undisturbed || m->undisturbed[r])
            v[k++] = (double)m->ns[subject][r];
    *x = v;
    *n = k;
    return CP_OK;
}

enum cp_status cp_measurement_summary(const struct cp_measurement *m, size_t subject,
                                      bool undisturbed_only, struct cp_summary *out,
                                      struct cp_diag *d)
{
    memset(out, 0, sizeof *out);
    double *x;
    size_t k;
    enum cp_status st = cp_measurement_values(m, subject, undisturbed_only, &x, &k, d);
    if (st == CP_OK && k > 0)
        st = cp_stats_summary(x, k, out, d);
    free(x);
    return st;
}

bool cp_measurement_uses_undisturbed(const struct cp_measurement *m)
{
    return m->probed && m->n_undisturbed >= CP_MEASURE_MIN_UNDISTURBED_COMPARED;
}

enum cp_status cp_measurement_compare(const struct cp_measurement *m, size_t a, size_t b,
                                      int64_t items_a, int64_t items_b,
                                      const struct cp_verdict_opts *vo, struct cp_comparison *c,
                                      bool *used_undisturbed, struct cp_diag *d)
{
    struct cp_verdict_opts defaults;
    if (!vo) {
        cp_verdict_opts_init(&defaults);
        vo = &defaults;
    }
    memset(c, 0, sizeof *c);
    c->before = c->after = c->delta_pct = c->ci_lo_pct = c->ci_hi_pct = c->p = c->mde_pct = NAN;
    c->verdict = CP_VERDICT_INCONCLUSIVE;
    if (a >= m->n_subjects || b >= m->n_subjects)
        return cp_diag_set(d, CP_ERR_INVALID, "measure: no subjects %zu and %zu", a, b);
    bool und = cp_measurement_uses_undisturbed(m);
    if (used_undisturbed)
        *used_undisturbed = und;
    size_t k = und ? m->n_undisturbed : m->n;
    if (k < 2)
        return cp_diag_set(d, CP_ERR_INVALID, "a verdict needs at least 2 rounds; %zu measured", k);
    double *xa = cp_calloc(k, sizeof *xa), *xb = cp_calloc(k, sizeof *xb);
    enum cp_status st = CP_OK;
    if (!xa || !xb)
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    bool throughput = items_a > 0 && items_b > 0;
    for (size_t r = 0, j = 0; st == CP_OK && r < m->n; r++) {
        if (und && !m->undisturbed[r])
            continue;
        double ta = (double)m->ns[a][r], tb = (double)m->ns[b][r];
        xa[j] = throughput ? (ta > 0 ? (double)items_a * 1e9 / ta : 0) : ta;
        xb[j] = throughput ? (tb > 0 ? (double)items_b * 1e9 / tb : 0) : tb;
        j++;
    }
    if (st == CP_OK)
        st = cp_verdict_compare(xa, k, xb, k, throughput ? CP_BETTER_HIGHER : CP_BETTER_LOWER, vo,
                                c, d);
    free(xa);
    free(xb);
    return st;
}

/* ---- recording ------------------------------------------------------------ */

static enum cp_status store_policy(struct cp_trace_store *store, int64_t run,
                                   const struct cp_measurement *m, struct cp_diag *d)
{
    const struct {
        const char *name;
        double value;
    } kv[] = {
        {"measure.target", (double)m->target},
        {"measure.rounds", (double)m->n},
        {"measure.undisturbed", (double)m->n_undisturbed},
        {"measure.time_limit_s", m->time_limit_s},
        {"measure.time_limit_hit", m->stop == CP_MEASURE_STOP_TIME_LIMIT ? 1.0 : 0.0},
        {"measure.interrupted", m->stop == CP_MEASURE_STOP_INTERRUPTED ? 1.0 : 0.0},
        {"measure.elapsed_s", m->elapsed_s},
        {"measure.subjects", (double)m->n_subjects},
        {"measure.priority_raised", m->priority_raised ? 1.0 : 0.0},
    };
    enum cp_status st = CP_OK;
    for (size_t i = 0; i < sizeof kv / sizeof *kv && st == CP_OK; i++)
        st = cp_trace_store_add_counter(store, run, -1, kv[i].name, kv[i].value, 0, d);
    if (st == CP_OK && m->probed) {
        if ((st = cp_trace_store_add_counter(store, run, -1, "measure.probe_floor_ns",
                                             (double)m->floor_ns, 0, d)) == CP_OK)
            st = cp_trace_store_add_counter(store, run, -1, "measure.probe_reference_ns",
                                            (double)m->reference_ns, 0, d);
    }
    return st;
}

enum cp_status cp_measure_store(struct cp_trace_store *store, const char *kind,
                                const struct cp_measure_record *rec, const struct cp_measurement *m,
                                int64_t *run_ids, struct cp_diag *d)
{
    uint64_t rss = cp_peak_rss_bytes();
    enum cp_status st = CP_OK;
    for (size_t i = 0; i < m->n_subjects && st == CP_OK; i++) {
        st = cp_session_store_run(rec[i].session, store, kind, rec[i].model_path, rec[i].trace,
                                  rec[i].batch, m->warmup, m->ns[i], m->n, rss, &run_ids[i], d);
        if (st == CP_OK && m->probed)
            st = cp_probe_store(store, run_ids[i], m->probe_ns, m->n, d);
        if (st == CP_OK)
            st = store_policy(store, run_ids[i], m, d);
        if (st == CP_OK && rec[i].perf)
            st = cp_perf_store(store, run_ids[i], rec[i].perf, &m->perf, d);
    }
    if (st == CP_OK && m->n_subjects == 2) {
        char ids[2][32];
        snprintf(ids[0], sizeof ids[0], "%lld", (long long)run_ids[0]);
        snprintf(ids[1], sizeof ids[1], "%lld", (long long)run_ids[1]);
        if ((st = cp_trace_store_set_meta(store, "ab.before_run", ids[0], d)) == CP_OK &&
            (st = cp_trace_store_set_meta(store, "ab.after_run", ids[1], d)) == CP_OK)
            st = cp_trace_store_set_meta(store, "ab.order", "alternating", d);
    }
    return st;
}

/* ---- inputs ------------------------------------------------------------------ */

long cp_measure_find_input(const struct cp_plan *p, const char *name)
{
    for (size_t i = 0; i < cp_plan_n_inputs(p); i++)
        if (strcmp(cp_plan_input(p, i)->name, name) == 0)
            return (long)i;
    return -1;
}

/* "f32[1,3,64,64]" into b. */
static void describe_tensor(struct cp_buf *b, const struct cp_tensor *t)
{
    cp_buf_printf(b, "%s[", cp_dtype_name(t->dtype));
    for (int i = 0; i < t->shape.rank; i++) {
        if (t->shape.dims[i].value >= 0)
            cp_buf_printf(b, "%s%lld", i ? "," : "", (long long)t->shape.dims[i].value);
        else
            cp_buf_printf(b, "%s%s", i ? "," : "",
                          t->shape.dims[i].sym ? t->shape.dims[i].sym : "?");
    }
    cp_buf_putc(b, ']');
}

static enum cp_status missing_input(const char *input, const char *has, const char *lacks,
                                    struct cp_diag *d)
{
    return cp_diag_set(d, CP_ERR_INVALID,
                       "input '%s': %s takes it but %s does not; A and B must take the same "
                       "inputs",
                       input, has, lacks);
}

enum cp_status cp_measure_check_inputs(const struct cp_plan *a, const struct cp_plan *b,
                                       const char *a_name, const char *b_name, struct cp_diag *d)
{
    for (size_t i = 0; i < cp_plan_n_inputs(a); i++)
        if (cp_measure_find_input(b, cp_plan_input(a, i)->name) < 0)
            return missing_input(cp_plan_input(a, i)->name, a_name, b_name, d);
    for (size_t i = 0; i < cp_plan_n_inputs(b); i++)
        if (cp_measure_find_input(a, cp_plan_input(b, i)->name) < 0)
            return missing_input(cp_plan_input(b, i)->name, b_name, a_name, d);
    for (size_t i = 0; i < cp_plan_n_inputs(a); i++) {
        const struct cp_tensor *ta = cp_plan_input(a, i);
        const struct cp_tensor *tb = cp_plan_input(b, (size_t)cp_measure_find_input(b, ta->name));
        if (ta->dtype == tb->dtype && cp_shape_equal(&ta->shape, &tb->shape))
            continue;
        struct cp_buf da, db;
        cp_buf_init(&da);
        cp_buf_init(&db);
        describe_tensor(&da, ta);
        describe_tensor(&db, tb);
        enum cp_status st =
            cp_diag_set(d, CP_ERR_INVALID,
                        "input '%s': %s takes %s but %s takes %s; A and B must take the "
                        "same inputs",
                        ta->name, a_name, da.data ? da.data : "?", b_name, db.data ? db.data : "?");
        cp_buf_release(&da);
        cp_buf_release(&db);
        return st;
    }
    return CP_OK;
}

enum cp_status cp_measure_feed_inputs(struct cp_session *const *sessions, size_t n,
                                      const char *const *inputs, size_t n_inputs, uint64_t seed,
                                      struct cp_diag *d)
{
    if (n == 0)
        return CP_OK;
    struct cp_session_inputs in;
    enum cp_status st = cp_session_make_inputs(sessions[0], inputs, n_inputs, seed, &in, d);
    for (size_t i = 0; i < in.n && st == CP_OK; i++) {
        for (size_t k = 0; k < n && st == CP_OK; k++) {
            long j = k == 0 ? (long)i : cp_measure_find_input(sessions[k]->plan, in.t[i].name);
            st = j < 0 ? cp_diag_set(d, CP_ERR_INVALID, "input '%s': model %zu does not take it",
                                     in.t[i].name, k + 1)
                       : cp_plan_set_input(sessions[k]->plan, (size_t)j, &in.t[i], d);
        }
        if (st != CP_OK && in.file[i] && !strstr(d->msg, in.file[i])) {
            /* The plan knows the input, not the file it came from. */
            struct cp_buf msg;
            cp_buf_init(&msg);
            cp_buf_printf(&msg, "%s: %s", in.file[i], d->msg);
            if (msg.data)
                snprintf(d->msg, sizeof d->msg, "%.*s", (int)(sizeof d->msg - 1), msg.data);
            cp_buf_release(&msg);
        }
    }
    cp_session_inputs_release(&in);
    return st;
}
