/*
 * stats: the numbers behind every verdict, on GSL.
 *
 * Descriptive statistics of a sample (mean, median, percentiles, standard
 * deviation, coefficient of variation, min, max). Percentiles use linear
 * interpolation between closest ranks (GSL's gsl_stats_quantile_from_sorted_data,
 * the same as NumPy's default "linear" method): for p in [0,1] and n sorted
 * values x[0..n-1], the position is p*(n-1).
 */
#ifndef CP_STATS_H
#define CP_STATS_H

#include "core/core.h"

#include <stddef.h>

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
 * is not finite. */
enum cp_status cp_stats_summary(const double *x, size_t n, struct cp_summary *out,
                                struct cp_diag *d);

/* The p-quantile (p in [0,1]) of n values, by linear interpolation. The
 * input is not modified. NaN when n == 0. */
double cp_stats_quantile(const double *x, size_t n, double p);

#endif
