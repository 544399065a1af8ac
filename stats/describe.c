/* Descriptive statistics of one sample, on GSL. */
#include "stats/check.h"
#include "stats/stats.h"

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum cp_status cp_stats_check_sample(const char *what, const double *x, size_t n, size_t min_n,
                                     const char *why, struct cp_diag *d)
{
    if (n < min_n)
        return cp_diag_set(d, CP_ERR_INVALID, "%s has %zu value%s; need at least %zu %s", what, n,
                           n == 1 ? "" : "s", min_n, why);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return cp_diag_set(d, CP_ERR_INVALID, "%s: value %zu is not a finite number (%g)", what,
                               i, x[i]);
    return CP_OK;
}

double *cp_stats_sorted_copy(const double *x, size_t n)
{
    double *s = cp_calloc(n, sizeof *s);
    if (!s)
        return NULL;
    memcpy(s, x, n * sizeof *s);
    gsl_sort(s, 1, n);
    return s;
}

static enum cp_status nomem(struct cp_diag *d, size_t n)
{
    return cp_diag_set(d, CP_ERR_NOMEM, "out of memory sorting %zu values", n);
}

double cp_stats_quantile(const double *x, size_t n, double p)
{
    if (n == 0)
        return NAN;
    double *s = cp_stats_sorted_copy(x, n);
    if (!s)
        return NAN;
    double q = gsl_stats_quantile_from_sorted_data(s, 1, n, p);
    free(s);
    return q;
}

enum cp_status cp_stats_summary(const double *x, size_t n, struct cp_summary *out,
                                struct cp_diag *d)
{
    memset(out, 0, sizeof *out);
    enum cp_status st = cp_stats_check_sample("sample", x, n, 1, "to summarise", d);
    if (st != CP_OK)
        return st;
    double *s = cp_stats_sorted_copy(x, n);
    if (!s)
        return nomem(d, n);
    out->n = n;
    out->mean = gsl_stats_mean(s, 1, n);
    out->median = gsl_stats_median_from_sorted_data(s, 1, n);
    out->p90 = gsl_stats_quantile_from_sorted_data(s, 1, n, 0.90);
    out->p99 = gsl_stats_quantile_from_sorted_data(s, 1, n, 0.99);
    out->sd = n > 1 ? gsl_stats_sd_m(s, 1, n, out->mean) : 0.0;
    out->cv = out->mean != 0.0 ? out->sd / out->mean : 0.0;
    out->min = s[0];
    out->max = s[n - 1];
    free(s);
    return CP_OK;
}

enum cp_status cp_stats_mean(const double *x, size_t n, double *out, struct cp_diag *d)
{
    *out = NAN;
    enum cp_status st = cp_stats_check_sample("sample", x, n, 1, "for a mean", d);
    if (st != CP_OK)
        return st;
    *out = gsl_stats_mean(x, 1, n);
    return CP_OK;
}

enum cp_status cp_stats_median(const double *x, size_t n, double *out, struct cp_diag *d)
{
    double half = 0.5;
    return cp_stats_quantiles(x, n, &half, 1, out, d);
}

enum cp_status cp_stats_quantiles(const double *x, size_t n, const double *p, size_t k, double *out,
                                  struct cp_diag *d)
{
    for (size_t i = 0; i < k; i++)
        out[i] = NAN;
    enum cp_status st = cp_stats_check_sample("sample", x, n, 1, "for a quantile", d);
    if (st != CP_OK)
        return st;
    for (size_t i = 0; i < k; i++)
        if (!(p[i] >= 0.0 && p[i] <= 1.0))
            return cp_diag_set(d, CP_ERR_INVALID,
                               "quantile %zu: probability %g is outside [0, 1] (percentile %g%%)",
                               i, p[i], p[i] * 100.0);
    double *s = cp_stats_sorted_copy(x, n);
    if (!s)
        return nomem(d, n);
    for (size_t i = 0; i < k; i++)
        out[i] = gsl_stats_quantile_from_sorted_data(s, 1, n, p[i]);
    free(s);
    return CP_OK;
}

enum cp_status cp_stats_sd(const double *x, size_t n, double *out, struct cp_diag *d)
{
    *out = NAN;
    enum cp_status st = cp_stats_check_sample("sample", x, n, 2, "for a standard deviation", d);
    if (st != CP_OK)
        return st;
    *out = gsl_stats_sd(x, 1, n);
    return CP_OK;
}

enum cp_status cp_stats_cv(const double *x, size_t n, double *out, struct cp_diag *d)
{
    *out = NAN;
    enum cp_status st =
        cp_stats_check_sample("sample", x, n, 2, "for a coefficient of variation", d);
    if (st != CP_OK)
        return st;
    double mean = gsl_stats_mean(x, 1, n);
    if (mean == 0.0)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "the mean of the %zu values is 0: the coefficient of variation "
                           "(sd / mean) is undefined",
                           n);
    *out = gsl_stats_sd_m(x, 1, n, mean) / mean;
    return CP_OK;
}

enum cp_status cp_stats_mad(const double *x, size_t n, struct cp_mad *out, struct cp_diag *d)
{
    out->median = out->raw = out->scaled = NAN;
    enum cp_status st = cp_stats_check_sample("sample", x, n, 1, "for a MAD", d);
    if (st != CP_OK)
        return st;
    double *s = cp_stats_sorted_copy(x, n);
    double *work = cp_calloc(n, sizeof *work);
    if (!s || !work) {
        st = nomem(d, n);
        goto out_free;
    }
    out->median = gsl_stats_median_from_sorted_data(s, 1, n);
    /* gsl_stats_mad = CP_STATS_MAD_NORMAL * gsl_stats_mad0; one call is enough. */
    out->raw = gsl_stats_mad0(s, 1, n, work);
    out->scaled = CP_STATS_MAD_NORMAL * out->raw;
out_free:
    free(work);
    free(s);
    return st;
}

static void fences_nan(struct cp_fences *f)
{
    f->q1 = f->q3 = f->iqr = f->k = f->lo = f->hi = NAN;
}

enum cp_status cp_stats_tukey_fences(const double *x, size_t n, double k, struct cp_fences *out,
                                     struct cp_diag *d)
{
    fences_nan(out);
    if (!(isfinite(k) && k >= 0.0))
        return cp_diag_set(d, CP_ERR_INVALID,
                           "Tukey fence multiplier k = %g must be a finite number >= 0", k);
    double pq[2] = {0.25, 0.75}, q[2];
    enum cp_status st = cp_stats_quantiles(x, n, pq, 2, q, d);
    if (st != CP_OK)
        return st;
    out->q1 = q[0];
    out->q3 = q[1];
    out->iqr = q[1] - q[0];
    out->k = k;
    out->lo = q[0] - k * out->iqr;
    out->hi = q[1] + k * out->iqr;
    return CP_OK;
}

enum cp_status cp_stats_outliers(const double *x, size_t n, double k, struct cp_fences *fences,
                                 bool *flags, size_t *count, struct cp_diag *d)
{
    struct cp_fences f;
    *count = 0;
    if (flags)
        for (size_t i = 0; i < n; i++)
            flags[i] = false;
    enum cp_status st = cp_stats_tukey_fences(x, n, k, &f, d);
    if (fences)
        *fences = f;
    if (st != CP_OK)
        return st;
    size_t c = 0;
    for (size_t i = 0; i < n; i++) {
        bool out = x[i] < f.lo || x[i] > f.hi;
        if (flags)
            flags[i] = out;
        c += out;
    }
    *count = c;
    return CP_OK;
}
