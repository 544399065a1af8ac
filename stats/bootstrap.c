/* Effect sizes: the bootstrap confidence interval of a ratio of medians and
 * the Hodges-Lehmann shift. */
#include "stats/check.h"
#include "stats/stats.h"

#include <gsl/gsl_rng.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdlib.h>

/* ---- bootstrap of median(y) / median(x) ------------------------------------ */

#define MIN_RESAMPLES 100
#define MAX_RESAMPLES 10000000

void cp_bootstrap_opts_init(struct cp_bootstrap_opts *o)
{
    o->resamples = CP_STATS_BOOTSTRAP_RESAMPLES;
    o->level = CP_STATS_BOOTSTRAP_LEVEL;
    o->seed = 1;
}

static void ci_nan(struct cp_bootstrap_ci *r)
{
    r->estimate = r->lo = r->hi = r->se = r->level = r->p = NAN;
    r->resamples = 0;
}

static enum cp_status check_opts(const struct cp_bootstrap_opts *o, struct cp_diag *d)
{
    if (o->resamples < MIN_RESAMPLES || o->resamples > MAX_RESAMPLES)
        return cp_diag_set(d, CP_ERR_INVALID, "bootstrap resamples = %zu; use %d to %d",
                           o->resamples, MIN_RESAMPLES, MAX_RESAMPLES);
    if (!(o->level > 0.0 && o->level < 1.0))
        return cp_diag_set(d, CP_ERR_INVALID, "bootstrap confidence level %g is outside (0, 1)",
                           o->level);
    return CP_OK;
}

/* The q-quantile of the n values in s (reordered). The median takes GSL's
 * quickselect; other quantiles sort. */
static double quantile_of(double *s, size_t n, double q)
{
    if (q == 0.5)
        return gsl_stats_median(s, 1, n);
    gsl_sort(s, 1, n);
    return gsl_stats_quantile_from_sorted_data(s, 1, n, q);
}

/* The q-quantile of n values drawn with replacement from x into scratch s. */
static double resample_quantile(gsl_rng *r, const double *x, size_t n, double *s, double q)
{
    for (size_t i = 0; i < n; i++)
        s[i] = x[gsl_rng_uniform_int(r, n)];
    return quantile_of(s, n, q);
}

enum cp_status cp_stats_bootstrap_median_ratio(const double *x, size_t nx, const double *y,
                                               size_t ny, const struct cp_bootstrap_opts *o,
                                               struct cp_bootstrap_ci *out, struct cp_diag *d)
{
    return cp_stats_bootstrap_quantile_ratio(x, nx, y, ny, 0.5, o, out, d);
}

enum cp_status cp_stats_bootstrap_quantile_ratio(const double *x, size_t nx, const double *y,
                                                 size_t ny, double q,
                                                 const struct cp_bootstrap_opts *o,
                                                 struct cp_bootstrap_ci *out, struct cp_diag *d)
{
    ci_nan(out);
    if (!(q > 0.0 && q < 1.0))
        return cp_diag_set(d, CP_ERR_INVALID, "bootstrap quantile %g is outside (0, 1)", q);
    enum cp_status st = cp_stats_check_sample("first sample (x)", x, nx, 2, "for a bootstrap", d);
    if (st == CP_OK)
        st = cp_stats_check_sample("second sample (y)", y, ny, 2, "for a bootstrap", d);
    if (st == CP_OK)
        st = check_opts(o, d);
    if (st != CP_OK)
        return st;
    for (size_t i = 0; i < nx; i++)
        if (x[i] <= 0.0)
            return cp_diag_set(d, CP_ERR_INVALID,
                               "first sample (x): value %zu is %g; a ratio of medians needs "
                               "every x > 0",
                               i, x[i]);
    /* gsl_rng_uniform_int draws from MT19937's 2^32 outputs */
    if (nx > 0xffffffffu || ny > 0xffffffffu)
        return cp_diag_set(d, CP_ERR_UNSUPPORTED, "bootstrap of more than 2^32 values");

    /* GSL's gsl_rng_alloc reports out-of-memory through GSL's error handler,
     * which aborts by default; allocating the generator's state here keeps
     * "never abort" without touching that process-wide handler. */
    gsl_rng rng = {gsl_rng_mt19937, cp_calloc(1, gsl_rng_mt19937->size)};
    double *sx = cp_calloc(nx, sizeof *sx);
    double *sy = cp_calloc(ny, sizeof *sy);
    double *ratio = cp_calloc(o->resamples, sizeof *ratio);
    if (!rng.state || !sx || !sy || !ratio) {
        st =
            cp_diag_set(d, CP_ERR_NOMEM, "out of memory for %zu bootstrap resamples", o->resamples);
        goto out_free;
    }
    gsl_rng_set(&rng, (unsigned long)o->seed);

    for (size_t i = 0; i < nx; i++)
        sx[i] = x[i];
    for (size_t j = 0; j < ny; j++)
        sy[j] = y[j];
    double est = quantile_of(sy, ny, q) / quantile_of(sx, nx, q);

    size_t at_most_1 = 0, at_least_1 = 0;
    for (size_t b = 0; b < o->resamples; b++) {
        double mx = resample_quantile(&rng, x, nx, sx, q);
        double my = resample_quantile(&rng, y, ny, sy, q);
        ratio[b] = my / mx;
        at_most_1 += ratio[b] <= 1.0;
        at_least_1 += ratio[b] >= 1.0;
    }
    gsl_sort(ratio, 1, o->resamples);
    size_t tail = at_most_1 < at_least_1 ? at_most_1 : at_least_1;
    out->p = fmin(1.0, 2.0 * (double)(tail + 1) / (double)(o->resamples + 1));
    out->estimate = est;
    out->lo = gsl_stats_quantile_from_sorted_data(ratio, 1, o->resamples, (1.0 - o->level) / 2.0);
    out->hi = gsl_stats_quantile_from_sorted_data(ratio, 1, o->resamples, (1.0 + o->level) / 2.0);
    out->se = gsl_stats_sd(ratio, 1, o->resamples);
    out->level = o->level;
    out->resamples = o->resamples;
out_free:
    free(ratio);
    free(sy);
    free(sx);
    free(rng.state);
    return st;
}

/* ---- Hodges-Lehmann ---------------------------------------------------------- */

/* The nx*ny differences y_j - x_i are never materialised. With x and y
 * sorted, d(i,j) = fl(y_j - x_i) grows with j and shrinks with i (rounding is
 * monotone), so the number of differences <= t is one merge-like pass. The
 * k-th smallest difference is found by bisecting on the value until few
 * enough differences lie between the bounds to list and sort them. */
struct pairs {
    const double *x, *y; /* sorted */
    size_t nx, ny;
};

static size_t count_le(const struct pairs *p, double t)
{
    size_t c = 0, j = 0;
    for (size_t i = 0; i < p->nx; i++) {
        while (j < p->ny && p->y[j] - p->x[i] <= t)
            j++;
        c += j;
    }
    return c;
}

/* The differences in (lo, hi], at most `cap` of them, into buf. */
static size_t list_between(const struct pairs *p, double lo, double hi, double *buf, size_t cap)
{
    size_t m = 0, a = 0, b = 0;
    for (size_t i = 0; i < p->nx; i++) {
        while (a < p->ny && p->y[a] - p->x[i] <= lo)
            a++;
        while (b < p->ny && p->y[b] - p->x[i] <= hi)
            b++;
        for (size_t j = a; j < b && m < cap; j++)
            buf[m++] = p->y[j] - p->x[i];
    }
    return m;
}

/* The k-th smallest difference (0-based). buf holds `cap` doubles. */
static double select_diff(const struct pairs *p, size_t k, double *buf, size_t cap)
{
    double lo = p->y[0] - p->x[p->nx - 1]; /* the smallest difference */
    double hi = p->y[p->ny - 1] - p->x[0]; /* the largest */
    size_t c_lo = count_le(p, lo), c_hi = p->nx * p->ny;
    if (c_lo > k)
        return lo;
    /* invariant: c_lo = count_le(lo) <= k < c_hi = count_le(hi) */
    for (;;) {
        if (c_hi - c_lo <= cap) {
            size_t m = list_between(p, lo, hi, buf, cap);
            gsl_sort(buf, 1, m);
            return buf[k - c_lo];
        }
        double mid = 0.5 * lo + 0.5 * hi;
        if (mid <= lo || mid >= hi)
            return hi; /* adjacent doubles: every difference in (lo, hi] is hi */
        size_t c = count_le(p, mid);
        if (c > k) {
            hi = mid;
            c_hi = c;
        } else {
            lo = mid;
            c_lo = c;
        }
    }
}

enum cp_status cp_stats_hodges_lehmann(const double *x, size_t nx, const double *y, size_t ny,
                                       double *out, struct cp_diag *d)
{
    *out = NAN;
    enum cp_status st =
        cp_stats_check_sample("first sample (x)", x, nx, 1, "for a Hodges-Lehmann shift", d);
    if (st == CP_OK)
        st = cp_stats_check_sample("second sample (y)", y, ny, 1, "for a Hodges-Lehmann shift", d);
    if (st != CP_OK)
        return st;
    size_t total;
    if (cp_mul_overflows(nx, ny, &total))
        return cp_diag_set(d, CP_ERR_UNSUPPORTED, "%zu x %zu differences overflow a count", nx, ny);
    size_t cap = 4 * (nx + ny) + 4096;
    double *sx = cp_stats_sorted_copy(x, nx);
    double *sy = cp_stats_sorted_copy(y, ny);
    double *buf = cp_calloc(cap, sizeof *buf);
    if (!sx || !sy || !buf) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory for a Hodges-Lehmann shift");
        goto out_free;
    }
    if (!isfinite(sy[ny - 1] - sx[0]) || !isfinite(sy[0] - sx[nx - 1])) {
        st = cp_diag_set(d, CP_ERR_INVALID,
                         "values too large: a difference y_j - x_i overflows a double");
        goto out_free;
    }
    struct pairs p = {sx, sy, nx, ny};
    double hl = select_diff(&p, total / 2, buf, cap);
    if (total % 2 == 0)
        hl = (select_diff(&p, total / 2 - 1, buf, cap) + hl) / 2.0;
    *out = hl;
out_free:
    free(buf);
    free(sy);
    free(sx);
    return st;
}
