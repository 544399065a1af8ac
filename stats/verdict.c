/* Verdicts: a test, an effect with its interval, and the threshold that
 * separates a change that matters from noise. */
#include "stats/verdict.h"
#include "stats/check.h"

#include <gsl/gsl_cdf.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *cp_verdict_name(enum cp_verdict v)
{
    switch (v) {
    case CP_VERDICT_UNCHANGED:
        return "unchanged";
    case CP_VERDICT_IMPROVED:
        return "improved";
    case CP_VERDICT_REGRESSED:
        return "regressed";
    case CP_VERDICT_INCONCLUSIVE:
        return "inconclusive";
    }
    return "unknown";
}

static const struct {
    const char *name;
    enum cp_stat_test test;
} test_names[] = {
    {"mann-whitney", CP_TEST_MANN_WHITNEY},
    {"welch", CP_TEST_WELCH},
    {"t-test", CP_TEST_STUDENT},
    {"bootstrap", CP_TEST_BOOTSTRAP},
    {"paired-t", CP_TEST_PAIRED_T},
    {"mwu", CP_TEST_MANN_WHITNEY},
    {"mannwhitney", CP_TEST_MANN_WHITNEY},
    {"mann_whitney", CP_TEST_MANN_WHITNEY},
    {"student", CP_TEST_STUDENT},
    {"ttest", CP_TEST_STUDENT},
    {"t_test", CP_TEST_STUDENT},
};

const char *cp_stat_test_name(enum cp_stat_test t)
{
    for (size_t i = 0; i < sizeof test_names / sizeof *test_names; i++)
        if (test_names[i].test == t)
            return test_names[i].name; /* the first entry of each test is its name */
    return "unknown";
}

bool cp_stat_test_parse(const char *s, enum cp_stat_test *out)
{
    for (size_t i = 0; s && i < sizeof test_names / sizeof *test_names; i++)
        if (test_names[i].test != CP_TEST_PAIRED_T && strcasecmp(s, test_names[i].name) == 0) {
            *out = test_names[i].test;
            return true;
        }
    return false;
}

void cp_verdict_opts_init(struct cp_verdict_opts *o)
{
    memset(o, 0, sizeof *o);
    o->test = CP_TEST_MANN_WHITNEY;
    o->alpha = 0.05;
    o->threshold_pct = 2.0;
    o->power = 0.9;
    o->quantile = 0.0;
    cp_bootstrap_opts_init(&o->boot);
}

static void comparison_nan(struct cp_comparison *c, size_t nb, size_t na, enum cp_stat_test t)
{
    memset(c, 0, sizeof *c);
    c->n_before = nb;
    c->n_after = na;
    c->before = c->after = c->delta_pct = c->ci_lo_pct = c->ci_hi_pct = NAN;
    c->p = c->mde_pct = NAN;
    c->test = t;
    c->verdict = CP_VERDICT_INCONCLUSIVE;
}

static enum cp_status check_opts(const struct cp_verdict_opts *o, struct cp_diag *d)
{
    if (!(o->alpha > 0.0 && o->alpha <= 0.5))
        return cp_diag_set(d, CP_ERR_INVALID, "alpha %g is outside (0, 0.5]", o->alpha);
    if (!(o->threshold_pct >= 0.0 && isfinite(o->threshold_pct)))
        return cp_diag_set(d, CP_ERR_INVALID, "threshold %g%% is not a percentage >= 0",
                           o->threshold_pct);
    if (!(o->power > 0.0 && o->power < 1.0))
        return cp_diag_set(d, CP_ERR_INVALID, "power %g is outside (0, 1)", o->power);
    if (!(o->quantile >= 0.0 && o->quantile < 1.0))
        return cp_diag_set(d, CP_ERR_INVALID, "quantile %g is outside [0, 1)", o->quantile);
    return CP_OK;
}

/* Improved or regressed, by the sign of the change and the metric's good
 * direction. */
static enum cp_verdict direction(double delta_pct, enum cp_better better)
{
    bool up = delta_pct > 0;
    return up == (better == CP_BETTER_HIGHER) ? CP_VERDICT_IMPROVED : CP_VERDICT_REGRESSED;
}

/* The spread the sample-size figures assume: the standard deviation for the
 * t-tests; for the rank and bootstrap tests, which are chosen because
 * latency has outliers, the MAD scaled to a normal sigma (the raw sd would
 * inflate every sample-size estimate by the outliers). Pooled over both
 * sides. */
static double spread(const double *b, size_t nb, const double *a, size_t na, enum cp_stat_test t)
{
    double sb = NAN, sa = NAN;
    if (t == CP_TEST_MANN_WHITNEY || t == CP_TEST_BOOTSTRAP) {
        struct cp_mad mb, ma;
        if (cp_stats_mad(b, nb, &mb, NULL) == CP_OK && cp_stats_mad(a, na, &ma, NULL) == CP_OK) {
            sb = mb.scaled;
            sa = ma.scaled;
        }
    }
    if (!(sb > 0) || !(sa > 0)) {
        cp_stats_sd(b, nb, &sb, NULL);
        cp_stats_sd(a, na, &sa, NULL);
    }
    double v = (((double)nb - 1) * sb * sb + ((double)na - 1) * sa * sa) / (double)(nb + na - 2);
    return sqrt(v);
}

static enum cp_status ttest(const double *b, size_t nb, const double *a, size_t na,
                            const struct cp_verdict_opts *o, struct cp_comparison *c,
                            struct cp_diag *d)
{
    cp_stats_mean(b, nb, &c->before, NULL);
    cp_stats_mean(a, na, &c->after, NULL);
    if (c->before == 0)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "the before mean is 0: a change in percent of it "
                           "means nothing");
    struct cp_ttest r;
    struct cp_diag td;
    cp_diag_init(&td);
    enum cp_status st = o->test == CP_TEST_WELCH ? cp_stats_ttest_welch(a, na, b, nb, &r, &td)
                                                 : cp_stats_ttest_student(a, na, b, nb, &r, &td);
    c->delta_pct = 100.0 * (c->after - c->before) / c->before;
    if (st == CP_ERR_INVALID) {
        /* No variance on either side: the samples are constants, and equal
         * or not with certainty. */
        c->p = c->after == c->before ? 1.0 : 0.0;
        c->ci_lo_pct = c->ci_hi_pct = c->delta_pct;
        return CP_OK;
    }
    if (st != CP_OK)
        return cp_diag_set(d, st, "%s", td.msg);
    double lo, hi;
    if ((st = cp_stats_ttest_ci(&r, o->boot.level, &lo, &hi, d)) != CP_OK)
        return st;
    c->p = r.p;
    c->ci_lo_pct = 100.0 * lo / fabs(c->before);
    c->ci_hi_pct = 100.0 * hi / fabs(c->before);
    return CP_OK;
}

/* The median (or quantile) ratio by the bootstrap: the interval always; the
 * p-value too unless a rank test supplies it. */
static enum cp_status ratio(const double *b, size_t nb, const double *a, size_t na, double q,
                            const struct cp_verdict_opts *o, struct cp_comparison *c,
                            struct cp_diag *d)
{
    c->before = cp_stats_quantile(b, nb, q);
    c->after = cp_stats_quantile(a, na, q);
    /* the values were checked finite: NaN here is a failed allocation, not
     * bad input */
    if (isnan(c->before) || isnan(c->after))
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory sorting %zu values", nb > na ? nb : na);
    if (!(c->before > 0))
        return cp_diag_set(d, CP_ERR_INVALID,
                           "the before values' %s is %g: a ratio needs positive values",
                           q == 0.5 ? "median" : "quantile", c->before);
    for (size_t i = 0; i < nb; i++)
        if (!(b[i] > 0))
            return cp_diag_set(d, CP_ERR_INVALID,
                               "before value %zu is %g: a ratio needs positive values", i, b[i]);
    struct cp_bootstrap_ci ci;
    enum cp_status st = cp_stats_bootstrap_quantile_ratio(b, nb, a, na, q, &o->boot, &ci, d);
    if (st != CP_OK)
        return st;
    c->delta_pct = 100.0 * (ci.estimate - 1.0);
    c->ci_lo_pct = 100.0 * (ci.lo - 1.0);
    c->ci_hi_pct = 100.0 * (ci.hi - 1.0);
    c->p = ci.p;
    return CP_OK;
}

/* The verdict from c's p-value, interval and change. The test and the
 * interval must agree: a p-value under alpha whose interval still straddles
 * "no change" (they come from different methods for the rank test) is not
 * evidence enough to act on. Returns whether the change is large but not
 * significant (inconclusive: the caller says how many samples would do). */
static bool decide(const struct cp_verdict_opts *o, enum cp_better better, struct cp_comparison *c)
{
    bool straddles = isfinite(c->ci_lo_pct) && c->ci_lo_pct <= 0 && c->ci_hi_pct >= 0;
    bool significant = c->p < o->alpha && !straddles;
    bool large = fabs(c->delta_pct) >= o->threshold_pct && c->delta_pct != 0;
    if (significant)
        c->verdict = large ? direction(c->delta_pct, better) : CP_VERDICT_UNCHANGED;
    else
        c->verdict = large ? CP_VERDICT_INCONCLUSIVE : CP_VERDICT_UNCHANGED;
    return !significant && large;
}

/* The bootstrap's spread, read back from its interval: the sigma that
 * gives a two-sample standard error of the interval's half width over its
 * z (NaN when the interval has no width). A quantile's spread is not the
 * samples': a p99 moves far more than the MAD says. */
static double bootstrap_spread(const struct cp_comparison *c, size_t nb, size_t na, double level)
{
    double half = (c->ci_hi_pct - c->ci_lo_pct) / 200.0,
           z = gsl_cdf_ugaussian_Pinv(0.5 + level / 2);
    if (!(half > 0) || !isfinite(half) || !(z > 0))
        return NAN;
    return half / z * fabs(c->before) / sqrt(1.0 / (double)nb + 1.0 / (double)na);
}

static void judge(const double *b, size_t nb, const double *a, size_t na, enum cp_better better,
                  const struct cp_verdict_opts *o, struct cp_comparison *c)
{
    double sigma = c->test == CP_TEST_BOOTSTRAP ? bootstrap_spread(c, nb, na, o->boot.level)
                                                : spread(b, nb, a, na, c->test);
    if (!(sigma > 0))
        sigma = spread(b, nb, a, na, c->test);
    if (sigma > 0)
        cp_stats_mde_relative(nb, na, o->alpha, o->power, sigma, c->before, &c->mde_pct, NULL);
    size_t n = 0;
    if (decide(o, better, c) && sigma > 0 &&
        cp_stats_n_for_relative(fabs(c->delta_pct), sigma, c->before, o->alpha, o->power, &n,
                                NULL) == CP_OK)
        c->n_needed = n;
    /* a quantile q above the median of very few samples is their largest
     * one, and the bootstrap's interval of it shrinks to nothing when they
     * barely differ (2 against 2 gave p = 0.0002): under 0.1 / (1 - q)
     * samples a side (p99: 10), no verdict of a change */
    double q = o->quantile > 0 ? o->quantile : 0.5;
    size_t least = q > 0.5 ? (size_t)ceil(0.1 / (1.0 - q) - 1e-9) : 0;
    if ((nb < least || na < least) && c->verdict != CP_VERDICT_UNCHANGED) {
        c->verdict = CP_VERDICT_INCONCLUSIVE;
        c->n_needed = c->n_needed > least ? c->n_needed : least;
    }
}

static enum cp_status exact(double b, double a, enum cp_better better,
                            const struct cp_verdict_opts *o, struct cp_comparison *c,
                            struct cp_diag *d)
{
    if (!isfinite(b) || !isfinite(a))
        return cp_diag_set(d, CP_ERR_INVALID, "a value is not finite (before %g, after %g)", b, a);
    if (b == 0 && a != 0)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "the before value is 0: a change in percent of "
                           "it means nothing");
    c->exact = true;
    c->before = b;
    c->after = a;
    c->delta_pct = b == 0 ? 0.0 : 100.0 * (a - b) / fabs(b);
    c->ci_lo_pct = c->ci_hi_pct = c->delta_pct;
    bool large = fabs(c->delta_pct) >= o->threshold_pct && c->delta_pct != 0;
    c->verdict = large ? direction(c->delta_pct, better) : CP_VERDICT_UNCHANGED;
    return CP_OK;
}

enum cp_status cp_verdict_compare(const double *before, size_t nb, const double *after, size_t na,
                                  enum cp_better better, const struct cp_verdict_opts *o,
                                  struct cp_comparison *out, struct cp_diag *d)
{
    enum cp_stat_test t = o->quantile > 0 ? CP_TEST_BOOTSTRAP : o->test;
    comparison_nan(out, nb, na, t);
    enum cp_status st = check_opts(o, d);
    if (st != CP_OK)
        return st;
    if (nb == 1 && na == 1)
        return exact(before[0], after[0], better, o, out, d);
    if ((st = cp_stats_check_sample("before", before, nb, 2, "per side (or one each)", d)) !=
            CP_OK ||
        (st = cp_stats_check_sample("after", after, na, 2, "per side (or one each)", d)) != CP_OK)
        return st;
    if (t == CP_TEST_PAIRED_T)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "the paired t-test compares pairs: use cp_verdict_compare_paired");
    struct cp_comparison c = *out;
    if (t == CP_TEST_WELCH || t == CP_TEST_STUDENT)
        st = ttest(before, nb, after, na, o, &c, d);
    else {
        st = ratio(before, nb, after, na, o->quantile > 0 ? o->quantile : 0.5, o, &c, d);
        if (st == CP_OK && t == CP_TEST_MANN_WHITNEY) {
            struct cp_mwu u;
            st = cp_stats_mann_whitney(before, nb, after, na, CP_MWU_AUTO, &u, d);
            c.p = u.p;
        }
    }
    if (st != CP_OK)
        return st;
    judge(before, nb, after, na, better, o, &c);
    *out = c;
    return CP_OK;
}

/* The verdict of a paired comparison from its log-ratio t-test: decide(),
 * with the spread of the pairs' log ratios for the sample sizes. */
static void judge_paired(const struct cp_ttest *r, size_t n, enum cp_better better,
                         const struct cp_verdict_opts *o, struct cp_comparison *c)
{
    double sd = r->se * sqrt((double)n), e;
    if (sd > 0 && cp_stats_mde_paired(n, o->alpha, o->power, &e, NULL) == CP_OK)
        c->mde_pct = 100.0 * expm1(e * sd);
    size_t need = 0;
    if (decide(o, better, c) && sd > 0 &&
        cp_stats_n_pairs_for_effect(fabs(log1p(c->delta_pct / 100.0)) / sd, o->alpha, o->power,
                                    &need, NULL) == CP_OK)
        c->n_needed = need;
}

enum cp_status cp_verdict_compare_paired(const double *before, const double *after, size_t n,
                                         enum cp_better better, const struct cp_verdict_opts *o,
                                         struct cp_comparison *out, struct cp_diag *d)
{
    comparison_nan(out, n, n, CP_TEST_PAIRED_T);
    enum cp_status st = check_opts(o, d);
    if (st != CP_OK)
        return st;
    if ((st = cp_stats_check_sample("before", before, n, 2, "pairs", d)) != CP_OK ||
        (st = cp_stats_check_sample("after", after, n, 2, "pairs", d)) != CP_OK)
        return st;
    for (size_t i = 0; i < n; i++)
        if (!(before[i] > 0) || !(after[i] > 0))
            return cp_diag_set(d, CP_ERR_INVALID,
                               "pair %zu is (%g, %g): a ratio needs positive values", i, before[i],
                               after[i]);
    double *la = cp_calloc(n, sizeof *la), *lb = cp_calloc(n, sizeof *lb);
    if (!la || !lb) {
        free(la);
        free(lb);
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory for %zu pairs", n);
    }
    for (size_t i = 0; i < n; i++) {
        la[i] = log(after[i]);
        lb[i] = log(before[i]);
    }
    struct cp_comparison c = *out;
    c.before = cp_stats_quantile(before, n, 0.5);
    c.after = cp_stats_quantile(after, n, 0.5);
    struct cp_ttest r;
    struct cp_diag td;
    cp_diag_init(&td);
    st = cp_stats_ttest_paired(la, lb, n, &r, &td);
    free(la);
    free(lb);
    if (isnan(c.before) || isnan(c.after))
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory sorting %zu values", n);
    if (st == CP_ERR_INVALID) {
        /* every pair has the same ratio: the change is that ratio, with
         * certainty */
        double ratio = after[0] / before[0];
        c.delta_pct = c.ci_lo_pct = c.ci_hi_pct = 100.0 * (ratio - 1.0);
        c.p = ratio == 1.0 ? 1.0 : 0.0;
        decide(o, better, &c);
        *out = c;
        return CP_OK;
    }
    if (st != CP_OK)
        return cp_diag_set(d, st, "%s", td.msg);
    double lo, hi;
    if ((st = cp_stats_ttest_ci(&r, o->boot.level, &lo, &hi, d)) != CP_OK)
        return st;
    c.p = r.p;
    c.delta_pct = 100.0 * expm1(r.diff);
    c.ci_lo_pct = 100.0 * expm1(lo);
    c.ci_hi_pct = 100.0 * expm1(hi);
    judge_paired(&r, n, better, o, &c);
    *out = c;
    return CP_OK;
}
