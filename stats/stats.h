/*
 * stats: the numbers behind every verdict, on GSL.
 *
 * Four pieces, one file each:
 *
 *   describe.c   what one sample looks like: mean, median, quantiles, standard
 *                deviation, coefficient of variation, MAD, Tukey fences and
 *                the outliers outside them;
 *   tests.c      whether two samples differ: Student's and Welch's t-tests and
 *                the Mann-Whitney U test (exact or normal approximation);
 *   bootstrap.c  how large the difference is: a seeded bootstrap confidence
 *                interval for the ratio of medians and the Hodges-Lehmann
 *                shift;
 *   power.c      how many samples a verdict needs: the minimum detectable
 *                effect for given sample sizes, and its inverse.
 *
 * The hypothesis tests follow SciPy's conventions so that our figures can be
 * checked against it (tests/stats/vectors.h is generated with SciPy): a test
 * of (x, y) reports scipy.stats.ttest_ind(x, y) / mannwhitneyu(x, y) values,
 * so t > 0 when x's mean is larger and U counts the pairs where x wins. Effect
 * sizes read "y relative to x": with x = before and y = after, the
 * Hodges-Lehmann shift is positive and the median ratio above 1 when the
 * values grew.
 *
 * Quantiles use linear interpolation between closest ranks (GSL's
 * gsl_stats_quantile_from_sorted_data, the same as NumPy's default "linear"
 * method, type 7 of Hyndman and Fan): for p in [0,1] and n sorted values
 * s[0..n-1], the position is h = p*(n-1) and the quantile is
 * s[floor(h)] + (h - floor(h)) * (s[floor(h)+1] - s[floor(h)]). The median is
 * the 0.5 quantile; the quartiles of the Tukey fences are the 0.25 and 0.75
 * quantiles.
 *
 * Errors: every function that judges its input returns an enum cp_status and,
 * on bad input, fills the struct cp_diag (which may be NULL) with what is
 * wrong: too few values ("need at least 2"), a value that is not finite (by
 * index), zero variance where a statistic divides by it, a parameter out of
 * range. Nothing here aborts; CP_ERR_NOMEM is returned when scratch memory
 * cannot be had. On failure scalar outputs are NaN and the fields of result
 * structs are NaN (counts 0), never a plausible-looking number. Inputs are
 * never modified; no function keeps state between calls.
 */
#ifndef CP_STATS_H
#define CP_STATS_H

#include "core/core.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ===== describe.c: one sample ============================================ */

struct cp_summary {
    size_t n;
    double mean;
    double median;
    double p90;
    double p99;
    double sd; /* sample standard deviation (n-1); 0 when n < 2 */
    double cv; /* sd / mean; 0 when mean is 0 */
    double min;
    double max;
};

/* Summarise n values (not modified). CP_ERR_INVALID when n == 0 or a value
 * is not finite; then *out is zeroed. */
enum cp_status cp_stats_summary(const double *x, size_t n, struct cp_summary *out,
                                struct cp_diag *d);

/* The p-quantile (p in [0,1]) of n values, by linear interpolation. The
 * input is not modified. NaN when n == 0 (or out of memory). Unchecked: use
 * cp_stats_quantiles when the values come from a user. */
double cp_stats_quantile(const double *x, size_t n, double p);

/* The arithmetic mean of n >= 1 finite values. OUT: *out. */
enum cp_status cp_stats_mean(const double *x, size_t n, double *out, struct cp_diag *d);

/* The median (0.5 quantile; the mean of the two middle values when n is
 * even) of n >= 1 finite values. OUT: *out. */
enum cp_status cp_stats_median(const double *x, size_t n, double *out, struct cp_diag *d);

/* Several quantiles at once (one sort): out[i] is the p[i]-quantile of x by
 * linear interpolation, for k probabilities p[i] in [0,1] (the percentile
 * q is p = q/100). n >= 1. OUT: out[0..k-1] (caller's array). */
enum cp_status cp_stats_quantiles(const double *x, size_t n, const double *p, size_t k, double *out,
                                  struct cp_diag *d);

/* The sample standard deviation, with n - 1 in the denominator (NumPy's
 * std(ddof=1)). n >= 2. OUT: *out. */
enum cp_status cp_stats_sd(const double *x, size_t n, double *out, struct cp_diag *d);

/* The coefficient of variation sd / mean (sd as cp_stats_sd; SciPy's
 * variation(x, ddof=1)). Negative when the mean is. n >= 2; CP_ERR_INVALID
 * when the mean is 0. OUT: *out. */
enum cp_status cp_stats_cv(const double *x, size_t n, double *out, struct cp_diag *d);

/* 1 / Phi^-1(3/4): scales a MAD into a consistent estimator of a normal
 * population's standard deviation. The constant GSL's gsl_stats_mad and
 * SciPy's median_abs_deviation(scale='normal') use. */
#define CP_STATS_MAD_NORMAL 1.482602218505602

/* The median absolute deviation, both ways it is quoted. */
struct cp_mad {
    double median; /* median of x */
    double raw;    /* median(|x_i - median|), unscaled (SciPy's default scale=1.0) */
    double scaled; /* raw * CP_STATS_MAD_NORMAL: comparable with a standard deviation */
};

/* MAD of n >= 1 finite values. OUT: *out. */
enum cp_status cp_stats_mad(const double *x, size_t n, struct cp_mad *out, struct cp_diag *d);

/* Tukey's k for "outlier"; 3.0 is the customary "far out". */
#define CP_STATS_TUKEY_K 1.5

/* Tukey's fences: values below lo or above hi are outliers. */
struct cp_fences {
    double q1;  /* 0.25 quantile (linear interpolation) */
    double q3;  /* 0.75 quantile */
    double iqr; /* q3 - q1 */
    double k;   /* the multiplier used */
    double lo;  /* q1 - k * iqr */
    double hi;  /* q3 + k * iqr */
};

/* The fences of n >= 1 finite values for a multiplier k >= 0 (finite; usually
 * CP_STATS_TUKEY_K). OUT: *out. */
enum cp_status cp_stats_tukey_fences(const double *x, size_t n, double k, struct cp_fences *out,
                                     struct cp_diag *d);

/* Count the values strictly outside the Tukey fences with multiplier k (a
 * value equal to a fence is not an outlier). OUT: *count; *fences when not
 * NULL; flags[i] (caller's array of n, may be NULL) says whether x[i] is an
 * outlier. On failure *count is 0 and flags are all false. */
enum cp_status cp_stats_outliers(const double *x, size_t n, double k, struct cp_fences *fences,
                                 bool *flags, size_t *count, struct cp_diag *d);

/* ===== tests.c: do two samples differ? =================================== */

/* A two-sample t-test, as scipy.stats.ttest_ind(x, y, equal_var=...). */
struct cp_ttest {
    double t;    /* diff / se: positive when x's mean is larger */
    double df;   /* degrees of freedom (Welch: Welch-Satterthwaite, not an integer) */
    double p;    /* two-sided p-value, 2 * P(T_df > |t|) */
    double diff; /* mean(x) - mean(y) */
    double se;   /* standard error of diff */
};

/* Welch's t-test (unequal variances). Each sample needs n >= 2 finite values;
 * CP_ERR_INVALID when both variances are 0 (all values of each sample equal:
 * t is undefined). OUT: *out. p comes from gsl_cdf_tdist_Q, whose Cornish-
 * Fisher branch (df > 30) agrees with SciPy to ~1e-13 relative except far in
 * the tail (p < 1e-12: ~1e-8), which no verdict depends on. */
enum cp_status cp_stats_ttest_welch(const double *x, size_t nx, const double *y, size_t ny,
                                    struct cp_ttest *out, struct cp_diag *d);

/* Student's t-test (pooled variance, df = nx + ny - 2). Each sample needs
 * n >= 2 finite values (as in SciPy, where a single value's variance is NaN);
 * CP_ERR_INVALID when the pooled variance is 0. OUT: *out. */
enum cp_status cp_stats_ttest_student(const double *x, size_t nx, const double *y, size_t ny,
                                      struct cp_ttest *out, struct cp_diag *d);

/* The paired t-test: a one-sample t-test of the differences x[i] - y[i]
 * (df = n - 1), as SciPy's ttest_rel. n >= 2 finite pairs; CP_ERR_INVALID
 * when all differences are equal (t is undefined). OUT: *out. */
enum cp_status cp_stats_ttest_paired(const double *x, const double *y, size_t n,
                                     struct cp_ttest *out, struct cp_diag *d);

/* The two-sided confidence interval of mean(x) - mean(y) at the given level
 * in (0,1) (e.g. 0.95) from a t-test result: diff -/+ t_{(1+level)/2, df} * se.
 * OUT: *lo, *hi. */
enum cp_status cp_stats_ttest_ci(const struct cp_ttest *r, double level, double *lo, double *hi,
                                 struct cp_diag *d);

enum cp_mwu_method {
    CP_MWU_AUTO = 0,       /* exact when there are no ties and nx*ny <= CP_STATS_MWU_AUTO_EXACT */
    CP_MWU_EXACT = 1,      /* the exact null distribution of U; refused with ties */
    CP_MWU_ASYMPTOTIC = 2, /* normal approximation, tie and continuity corrections */
};

/* AUTO's exact/asymptotic switch on nx*ny (e.g. 50 x 50 or 3 x 833). */
#define CP_STATS_MWU_AUTO_EXACT 2500
/* The largest nx*ny CP_MWU_EXACT accepts (e.g. 100 x 100): the exact
 * distribution costs O(min(nx,ny)^2 * max(nx,ny) * (nx+ny)) time. */
#define CP_STATS_MWU_EXACT_MAX 10000

/* The Mann-Whitney U test, as scipy.stats.mannwhitneyu(x, y,
 * use_continuity=True, alternative='two-sided', method=...). */
struct cp_mwu {
    double u;    /* U1: pairs (x_i, y_j) with x_i > y_j, ties counting 1/2 (SciPy's statistic) */
    double p;    /* two-sided p-value, capped at 1 */
    double z;    /* asymptotic: (max(U1,U2) - nx*ny/2 - 0.5) / sigma; NaN when exact */
    double cles; /* u / (nx*ny): P(X > Y) + P(X = Y)/2, the common-language effect size */
    enum cp_mwu_method method; /* the method used: EXACT or ASYMPTOTIC, never AUTO */
    bool ties;                 /* some value occurs more than once in x and y together */
};

/* Mann-Whitney U of n >= 1 finite values each.
 *
 * Exact: p = 2 * P(U >= max(U1, U2)) under the null distribution of U, which
 * is computed by dynamic programming over the ranks (all C(nx+ny, nx)
 * orderings counted in doubles). CP_MWU_EXACT is refused (CP_ERR_INVALID)
 * when there are ties, and (CP_ERR_UNSUPPORTED) when nx*ny exceeds
 * CP_STATS_MWU_EXACT_MAX.
 *
 * Asymptotic: z = (max(U1,U2) - nx*ny/2 - 0.5) / sigma with
 * sigma^2 = nx*ny/12 * ((N+1) - sum(t^3 - t) / (N(N-1))), N = nx+ny and t the
 * sizes of the groups of tied values; p = 2 * Q(z). When every value is the
 * same, sigma is 0: like SciPy, p is then 1 (U sits at the centre of its
 * distribution, which conditional on the ties is a single point) and z is 0.
 *
 * OUT: *out. */
enum cp_status cp_stats_mann_whitney(const double *x, size_t nx, const double *y, size_t ny,
                                     enum cp_mwu_method method, struct cp_mwu *out,
                                     struct cp_diag *d);

/* ===== arrivals.c: an open-loop workload ================================== */

/* The send times (seconds from 0, ascending) of a Poisson process at `rate`
 * per second: until duration_s (when > 0), at most max_n of them (when >
 * 0). Seeded (gsl_rng_mt19937): the same seed gives the same times.
 * CP_ERR_INVALID for a rate that is not above 0 or neither bound. OUT:
 * *out (free), *n. */
enum cp_status cp_stats_poisson_arrivals(double rate, double duration_s, size_t max_n,
                                         uint64_t seed, double **out, size_t *n, struct cp_diag *d);

/* ===== bootstrap.c: how large is the difference? ========================= */

#define CP_STATS_BOOTSTRAP_RESAMPLES 10000
#define CP_STATS_BOOTSTRAP_LEVEL     0.95

struct cp_bootstrap_opts {
    size_t resamples; /* >= 100 and <= 10,000,000 */
    double level;     /* confidence level in (0,1) */
    uint64_t seed;    /* seeds gsl_rng_mt19937 */
};

/* Defaults: CP_STATS_BOOTSTRAP_RESAMPLES resamples, level 0.95, seed 1. */
void cp_bootstrap_opts_init(struct cp_bootstrap_opts *o);

struct cp_bootstrap_ci {
    double estimate; /* median(y) / median(x) of the samples themselves */
    double lo, hi;   /* the percentile interval */
    double se;       /* standard deviation of the bootstrap ratios */
    double level;
    size_t resamples;
    double p; /* two-sided bootstrap p-value of "the ratio is 1":
               * min(1, 2 * (k + 1) / (B + 1)) with k the smaller of the counts of
               * resampled ratios <= 1 and >= 1 and B the resamples */
};

/* A bootstrap confidence interval for median(y) / median(x) (with x = before
 * and y = after, above 1 means the values grew).
 *
 * Each of the o->resamples rounds draws nx indices into x and then ny into y,
 * uniformly with replacement (gsl_rng_uniform_int on a gsl_rng_mt19937
 * seeded with o->seed; note that GSL's MT19937 treats seed 0 as its default
 * seed 4357), and records median(y*) / median(x*). The interval is the
 * percentile interval: the (1-level)/2 and (1+level)/2 quantiles of the
 * recorded ratios, by linear interpolation. Same inputs and seed, same
 * interval, on every run and machine with the same GSL.
 *
 * Needs nx, ny >= 2 finite values and every x > 0 (so that each resampled
 * median of x is positive). OUT: *out. */
enum cp_status cp_stats_bootstrap_median_ratio(const double *x, size_t nx, const double *y,
                                               size_t ny, const struct cp_bootstrap_opts *o,
                                               struct cp_bootstrap_ci *out, struct cp_diag *d);

/* The same for the q-quantile (q in (0,1)) instead of the median:
 * quantile_q(y) / quantile_q(x), quantiles by linear interpolation (q = 0.5
 * gives exactly cp_stats_bootstrap_median_ratio). `validate` compares p99
 * latency with q = 0.99. */
enum cp_status cp_stats_bootstrap_quantile_ratio(const double *x, size_t nx, const double *y,
                                                 size_t ny, double q,
                                                 const struct cp_bootstrap_opts *o,
                                                 struct cp_bootstrap_ci *out, struct cp_diag *d);

/* The Hodges-Lehmann shift estimate: the median of all nx*ny differences
 * y_j - x_i (the mean of the two middle ones when nx*ny is even). Positive
 * when y tends to be larger than x, in y's units; for y = x + c it is c. The
 * differences are never stored: O(nx + ny) memory, and a bisection on the
 * value whose steps each cost one O(nx + ny) counting pass, so it is fine for
 * samples of any size. n >= 1 finite values each. OUT: *out. */
enum cp_status cp_stats_hodges_lehmann(const double *x, size_t nx, const double *y, size_t ny,
                                       double *out, struct cp_diag *d);

/* Holm's step-down procedure: which of n hypotheses, with p-values p[i],
 * to reject so that the chance of rejecting any true one stays at most
 * alpha (family-wise). Sorted ascending, the k-th smallest (k from 0) is
 * rejected while p <= alpha / (n - k); the first that is not stops the
 * rest. NaN p-values are never rejected (and count in n). alpha in (0, 1),
 * n >= 1. OUT: reject[0..n-1]. */
enum cp_status cp_stats_holm(const double *p, size_t n, double alpha, bool *reject,
                             struct cp_diag *d);

/* ===== power.c: how many samples does a verdict need? ==================== */

/* The minimum detectable effect of a two-sided two-sample test at level
 * alpha with the given power, by the normal approximation:
 *   MDE = (z_{1-alpha/2} + z_{power}) * sqrt(1/n1 + 1/n2)
 * in units of the (common) standard deviation sigma: a shift of the mean by
 * MDE * sigma is detected with probability `power`. (The t-test needs
 * slightly more; the difference fades as n grows.) n1, n2 >= 2; alpha and
 * power in (0,1). OUT: *effect. */
enum cp_status cp_stats_mde(size_t n1, size_t n2, double alpha, double power, double *effect,
                            struct cp_diag *d);

/* The same MDE as a percentage of a baseline mean:
 * 100 * MDE * sigma / |baseline| (e.g. 3.2 for 3.2%). sigma > 0, baseline
 * != 0, both finite. OUT: *pct. */
enum cp_status cp_stats_mde_relative(size_t n1, size_t n2, double alpha, double power, double sigma,
                                     double baseline, double *pct, struct cp_diag *d);

/* The inverse: the smallest n per group (n1 = n2 = n, at least 2) whose MDE
 * is at most `effect` (in units of sigma, > 0):
 *   n = ceil(2 * ((z_{1-alpha/2} + z_{power}) / effect)^2).
 * CP_ERR_INVALID when n would exceed 10^12. OUT: *n. */
enum cp_status cp_stats_n_for_effect(double effect, double alpha, double power, size_t *n,
                                     struct cp_diag *d);

/* The n per group needed to detect a relative change of pct percent (> 0) of
 * a baseline mean, given the standard deviation sigma: cp_stats_n_for_effect
 * with effect = pct/100 * |baseline| / sigma. This is what `validate` quotes
 * for an inconclusive verdict. OUT: *n. */
enum cp_status cp_stats_n_for_relative(double pct, double sigma, double baseline, double alpha,
                                       double power, size_t *n, struct cp_diag *d);

/* The same two for a paired comparison of n pairs (a one-sample test of the
 * differences, sigma their standard deviation):
 *   MDE = (z_{1-alpha/2} + z_{power}) / sqrt(n),   n = ceil((z sum / effect)^2)
 * n >= 2. OUT: *effect, *n. */
enum cp_status cp_stats_mde_paired(size_t n, double alpha, double power, double *effect,
                                   struct cp_diag *d);
enum cp_status cp_stats_n_pairs_for_effect(double effect, double alpha, double power, size_t *n,
                                           struct cp_diag *d);

#endif
