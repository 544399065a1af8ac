/* Sample sizes and detectable effects for a two-sided two-sample comparison,
 * by the normal approximation. */
#include "stats/stats.h"

#include <gsl/gsl_cdf.h>
#include <math.h>

/* Refuse to promise more samples than anyone will take. */
#define MAX_N 1e12

static enum cp_status check_levels(double alpha, double power, struct cp_diag *d)
{
    if (!(alpha > 0.0 && alpha < 1.0))
        return cp_diag_set(d, CP_ERR_INVALID, "significance level alpha = %g is outside (0, 1)",
                           alpha);
    if (!(power > 0.0 && power < 1.0))
        return cp_diag_set(d, CP_ERR_INVALID, "power = %g is outside (0, 1)", power);
    return CP_OK;
}

/* z_{1-alpha/2} + z_{power}: the distance, in standard errors, between the
 * null and an effect that is detected with probability `power`. */
static double z_sum(double alpha, double power)
{
    return gsl_cdf_ugaussian_Qinv(alpha / 2.0) + gsl_cdf_ugaussian_Pinv(power);
}

enum cp_status cp_stats_mde(size_t n1, size_t n2, double alpha, double power, double *effect,
                            struct cp_diag *d)
{
    *effect = NAN;
    if (n1 < 2 || n2 < 2)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "minimum detectable effect: %zu and %zu samples; need at least 2 in "
                           "each group",
                           n1, n2);
    enum cp_status st = check_levels(alpha, power, d);
    if (st != CP_OK)
        return st;
    *effect = z_sum(alpha, power) * sqrt(1.0 / (double)n1 + 1.0 / (double)n2);
    return CP_OK;
}

static enum cp_status check_scale(double sigma, double baseline, struct cp_diag *d)
{
    if (!(isfinite(sigma) && sigma > 0.0))
        return cp_diag_set(d, CP_ERR_INVALID,
                           "standard deviation sigma = %g must be a finite number > 0", sigma);
    if (!(isfinite(baseline) && baseline != 0.0))
        return cp_diag_set(d, CP_ERR_INVALID,
                           "baseline mean = %g must be a finite, nonzero number (a relative "
                           "effect is a fraction of it)",
                           baseline);
    return CP_OK;
}

enum cp_status cp_stats_mde_relative(size_t n1, size_t n2, double alpha, double power, double sigma,
                                     double baseline, double *pct, struct cp_diag *d)
{
    *pct = NAN;
    double e;
    enum cp_status st = check_scale(sigma, baseline, d);
    if (st == CP_OK)
        st = cp_stats_mde(n1, n2, alpha, power, &e, d);
    if (st != CP_OK)
        return st;
    *pct = 100.0 * e * sigma / fabs(baseline);
    return CP_OK;
}

/* The smallest n whose MDE is at most `effect`: n = ceil(k * (z sum /
 * effect)^2), k = 2 for two groups of n, 1 for n pairs; `what` names the
 * unit in the refusal ("samples per group", "pairs"). */
static enum cp_status n_for(double effect, double alpha, double power, double k, const char *what,
                            size_t *n, struct cp_diag *d)
{
    *n = 0;
    if (!(isfinite(effect) && effect > 0.0))
        return cp_diag_set(d, CP_ERR_INVALID,
                           "effect = %g standard deviations must be a finite number > 0", effect);
    enum cp_status st = check_levels(alpha, power, d);
    if (st != CP_OK)
        return st;
    double z = z_sum(alpha, power) / effect;
    double need = k * z * z;
    if (!(need <= MAX_N))
        return cp_diag_set(d, CP_ERR_INVALID,
                           "an effect of %g standard deviations needs more than %.0g %s to detect",
                           effect, MAX_N, what);
    /* a hair below an integer is that integer: do not ask for one sample more
     * because the last bit of a quantile rounded up */
    double c = ceil(need * (1.0 - 4 * 2.220446049250313e-16));
    *n = c < 2.0 ? 2 : (size_t)c;
    return CP_OK;
}

enum cp_status cp_stats_n_for_effect(double effect, double alpha, double power, size_t *n,
                                     struct cp_diag *d)
{
    return n_for(effect, alpha, power, 2.0, "samples per group", n, d);
}

enum cp_status cp_stats_mde_paired(size_t n, double alpha, double power, double *effect,
                                   struct cp_diag *d)
{
    *effect = NAN;
    if (n < 2)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "minimum detectable effect: %zu pairs; need at least 2", n);
    enum cp_status st = check_levels(alpha, power, d);
    if (st != CP_OK)
        return st;
    *effect = z_sum(alpha, power) / sqrt((double)n);
    return CP_OK;
}

enum cp_status cp_stats_n_pairs_for_effect(double effect, double alpha, double power, size_t *n,
                                           struct cp_diag *d)
{
    return n_for(effect, alpha, power, 1.0, "pairs", n, d);
}

enum cp_status cp_stats_n_for_relative(double pct, double sigma, double baseline, double alpha,
                                       double power, size_t *n, struct cp_diag *d)
{
    *n = 0;
    if (!(isfinite(pct) && pct > 0.0))
        return cp_diag_set(d, CP_ERR_INVALID, "relative effect %g%% must be a finite number > 0",
                           pct);
    enum cp_status st = check_scale(sigma, baseline, d);
    if (st != CP_OK)
        return st;
    return cp_stats_n_for_effect(pct / 100.0 * fabs(baseline) / sigma, alpha, power, n, d);
}
