/*
 * stats/verdict.h: is "after" better, worse or the same as "before"?
 *
 * One comparison turns two samples of one metric into the figures a
 * performance engineer reads (before, after, delta %, its confidence
 * interval, a p-value) and a verdict:
 *
 *   regressed / improved  the change is statistically significant at alpha
 *                         (p < alpha and its confidence interval excludes
 *                         no-change) AND at least --threshold percent, in the
 *                         metric's bad / good direction;
 *   unchanged             not significant and smaller than the threshold, or
 *                         significant but smaller than the threshold (a real
 *                         but negligible change: noise-level drift of a shared
 *                         machine must not raise alarms);
 *   inconclusive          not significant although the estimated change is at
 *                         least the threshold: the samples are too few or too
 *                         noisy; n_needed says how many per side would settle
 *                         it (at the requested power).
 *
 * Single values on both sides (memory figures, which do not vary between
 * iterations) are compared exactly: no test, p is NaN, and the verdict
 * follows the threshold alone.
 */
#ifndef CP_STATS_VERDICT_H
#define CP_STATS_VERDICT_H

#include "stats/stats.h"

enum cp_verdict {
    CP_VERDICT_UNCHANGED = 0,
    CP_VERDICT_IMPROVED,
    CP_VERDICT_REGRESSED,
    CP_VERDICT_INCONCLUSIVE,
};
/* "unchanged", "improved", "regressed", "inconclusive". */
const char *cp_verdict_name(enum cp_verdict v);

enum cp_stat_test {
    CP_TEST_MANN_WHITNEY = 0, /* the default: robust to the outliers of latency data */
    CP_TEST_WELCH,
    CP_TEST_STUDENT,
    CP_TEST_BOOTSTRAP,
    CP_TEST_PAIRED_T, /* cp_verdict_compare_paired only: the paired t-test of log ratios */
};
/* "mann-whitney", "welch", "t-test", "bootstrap", "paired-t" (the first four
 * also accepted when parsing:
 * "mwu", "mannwhitney", "student", "ttest"). parse: false for anything else. */
const char *cp_stat_test_name(enum cp_stat_test t);
bool cp_stat_test_parse(const char *s, enum cp_stat_test *out);

/* Which way is better for a metric. */
enum cp_better {
    CP_BETTER_LOWER = 0, /* latency, p99, memory */
    CP_BETTER_HIGHER,    /* throughput, device_util */
};

struct cp_verdict_opts {
    enum cp_stat_test test;
    double alpha;                  /* significance level, (0, 0.5]; default 0.05 */
    double threshold_pct;          /* smallest change that matters, percent >= 0; default 2 */
    double power;                  /* for n_needed and mde_pct; default 0.9 */
    double quantile;               /* 0 (default): compare locations with `test`; in (0,1): compare
                                    * this quantile (e.g. 0.99 for p99) by the bootstrap whatever
                                    * `test` says */
    struct cp_bootstrap_opts boot; /* resamples, level of the CI (default 0.95), seed */
};

/* Defaults: Mann-Whitney, alpha 0.05, threshold 2%, power 0.9, quantile 0,
 * cp_bootstrap_opts_init. */
void cp_verdict_opts_init(struct cp_verdict_opts *o);

struct cp_comparison {
    size_t n_before, n_after;
    double before, after;        /* the compared statistic: mean (t-tests), median (Mann-Whitney,
                                  * bootstrap) or the quantile; the value itself for single values */
    double delta_pct;            /* 100 * (after - before) / before */
    double ci_lo_pct, ci_hi_pct; /* CI of delta_pct at boot.level; equal to delta_pct for
                                  * single values */
    double p;                    /* two-sided p-value; NaN for single values */
    double mde_pct;              /* smallest change (percent of before) these sample sizes detect at
                                  * alpha and power; NaN for single values */
    size_t n_needed;             /* inconclusive only: samples per side that would detect delta_pct;
                                  * 0 otherwise */
    enum cp_stat_test test;
    bool exact; /* single values, compared without a test */
    enum cp_verdict verdict;
};

/* Compare `after` with `before` (each n >= 2 finite values, or exactly one
 * value each for an exact comparison). `before`'s statistic must not be 0 (a
 * percentage of 0 means nothing). OUT: *out; on failure its doubles are NaN
 * and the verdict is INCONCLUSIVE. */
enum cp_status cp_verdict_compare(const double *before, size_t nb, const double *after, size_t na,
                                  enum cp_better better, const struct cp_verdict_opts *o,
                                  struct cp_comparison *out, struct cp_diag *d);

/* Compare n pairs (before[i], after[i]), each taken under the same
 * conditions (e.g. two processes run one after the other), by the paired
 * t-test of the log ratios log(after[i] / before[i]): what two processes in
 * one state of the machine share cancels, and the test sees only how each
 * pair differs. All values must be finite and > 0; n >= 2 (3 or more gives a
 * usable interval). before/after are the medians of each side; delta_pct and
 * its interval are exp(mean log ratio) - 1; mde_pct and n_needed (in pairs)
 * come from the log ratios' standard deviation. The verdict follows the same
 * rules as cp_verdict_compare (o->test and o->quantile are not used).
 * OUT: *out, as cp_verdict_compare. */
enum cp_status cp_verdict_compare_paired(const double *before, const double *after, size_t n,
                                         enum cp_better better, const struct cp_verdict_opts *o,
                                         struct cp_comparison *out, struct cp_diag *d);

#endif
