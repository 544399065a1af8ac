/* Descriptive statistics on GSL. */
#include "stats/stats.h"

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static double *sorted_copy(const double *x, size_t n)
{
    double *s = cp_calloc(n, sizeof *s);
    if (!s)
        return NULL;
    memcpy(s, x, n * sizeof *s);
    gsl_sort(s, 1, n);
    return s;
}

double cp_stats_quantile(const double *x, size_t n, double p)
{
    if (n == 0)
        return NAN;
    double *s = sorted_copy(x, n);
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
    if (n == 0)
        return cp_diag_set(d, CP_ERR_INVALID, "no samples to summarise");
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return cp_diag_set(d, CP_ERR_INVALID, "sample %zu is not a finite number", i);
    double *s = sorted_copy(x, n);
    if (!s)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory summarising %zu samples", n);
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
