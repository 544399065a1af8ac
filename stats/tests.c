/* Two-sample hypothesis tests: Student's and Welch's t-tests (GSL's t
 * distribution) and the Mann-Whitney U test (GSL has none: the exact null
 * distribution is counted here, the normal tail comes from GSL). The
 * conventions are SciPy's, see stats.h. */
#include "stats/check.h"
#include "stats/stats.h"

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdlib.h>

/* ---- t-tests ------------------------------------------------------------- */

static void ttest_nan(struct cp_ttest *r)
{
    r->t = r->df = r->p = r->diff = r->se = NAN;
}

static enum cp_status check_two(const double *x, size_t nx, const double *y, size_t ny,
                                size_t min_n, const char *why, struct cp_diag *d)
{
    enum cp_status st = cp_stats_check_sample("first sample (x)", x, nx, min_n, why, d);
    if (st != CP_OK)
        return st;
    return cp_stats_check_sample("second sample (y)", y, ny, min_n, why, d);
}

static void finish_ttest(struct cp_ttest *r, double diff, double se, double df)
{
    r->diff = diff;
    r->se = se;
    r->df = df;
    r->t = diff / se;
    double p = 2.0 * gsl_cdf_tdist_Q(fabs(r->t), df);
    r->p = p > 1.0 ? 1.0 : p;
}

enum cp_status cp_stats_ttest_welch(const double *x, size_t nx, const double *y, size_t ny,
                                    struct cp_ttest *out, struct cp_diag *d)
{
    ttest_nan(out);
    enum cp_status st = check_two(x, nx, y, ny, 2, "for Welch's t-test", d);
    if (st != CP_OK)
        return st;
    double mx = gsl_stats_mean(x, 1, nx), my = gsl_stats_mean(y, 1, ny);
    /* squared standard errors of the two means */
    double vx = gsl_stats_variance_m(x, 1, nx, mx) / (double)nx,
           vy = gsl_stats_variance_m(y, 1, ny, my) / (double)ny;
    if (vx + vy == 0.0)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "Welch's t-test: both samples have zero variance (all %zu values of x "
                           "equal, all %zu of y equal), so t is undefined",
                           nx, ny);
    double df = (vx + vy) * (vx + vy) / (vx * vx / (double)(nx - 1) + vy * vy / (double)(ny - 1));
    finish_ttest(out, mx - my, sqrt(vx + vy), df);
    return CP_OK;
}

enum cp_status cp_stats_ttest_student(const double *x, size_t nx, const double *y, size_t ny,
                                      struct cp_ttest *out, struct cp_diag *d)
{
    ttest_nan(out);
    enum cp_status st = check_two(x, nx, y, ny, 2, "for Student's t-test", d);
    if (st != CP_OK)
        return st;
    double mx = gsl_stats_mean(x, 1, nx), my = gsl_stats_mean(y, 1, ny);
    double df = (double)(nx + ny - 2);
    double pooled = ((double)(nx - 1) * gsl_stats_variance_m(x, 1, nx, mx) +
                     (double)(ny - 1) * gsl_stats_variance_m(y, 1, ny, my)) /
                    df;
    if (pooled == 0.0)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "Student's t-test: the pooled variance is 0 (all values of x equal, "
                           "all values of y equal), so t is undefined");
    finish_ttest(out, mx - my, sqrt(pooled * (1.0 / (double)nx + 1.0 / (double)ny)), df);
    return CP_OK;
}

enum cp_status cp_stats_ttest_paired(const double *x, const double *y, size_t n,
                                     struct cp_ttest *out, struct cp_diag *d)
{
    ttest_nan(out);
    enum cp_status st = check_two(x, n, y, n, 2, "pairs for the paired t-test", d);
    if (st != CP_OK)
        return st;
    double *diff = cp_calloc(n, sizeof *diff);
    if (!diff)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory for %zu differences", n);
    for (size_t i = 0; i < n; i++)
        diff[i] = x[i] - y[i];
    double m = gsl_stats_mean(diff, 1, n);
    double v = gsl_stats_variance_m(diff, 1, n, m);
    free(diff);
    if (v == 0.0)
        return cp_diag_set(d, CP_ERR_INVALID,
                           "paired t-test: all %zu differences are equal, so t is undefined", n);
    finish_ttest(out, m, sqrt(v / (double)n), (double)(n - 1));
    return CP_OK;
}

enum cp_status cp_stats_ttest_ci(const struct cp_ttest *r, double level, double *lo, double *hi,
                                 struct cp_diag *d)
{
    *lo = *hi = NAN;
    if (!(level > 0.0 && level < 1.0))
        return cp_diag_set(d, CP_ERR_INVALID, "confidence level %g is outside (0, 1)", level);
    if (!(isfinite(r->diff) && isfinite(r->se) && r->se > 0.0 && isfinite(r->df) && r->df > 0.0))
        return cp_diag_set(d, CP_ERR_INVALID,
                           "t-test result has no finite difference, standard error and degrees "
                           "of freedom (did the test fail?)");
    double q = gsl_cdf_tdist_Qinv((1.0 - level) / 2.0, r->df);
    *lo = r->diff - q * r->se;
    *hi = r->diff + q * r->se;
    return CP_OK;
}

/* ---- Mann-Whitney U -------------------------------------------------------- */

/* Ranks of x within x and y together: the sum of x's midranks and the tie
 * term sum(t^3 - t) over groups of equal values. */
struct mwu_ranks {
    double r1;
    double tie_term;
    bool ties;
    bool all_equal;
};

static enum cp_status rank_xy(const double *x, size_t nx, const double *y, size_t ny,
                              struct mwu_ranks *rk, struct cp_diag *d)
{
    size_t n = nx + ny;
    double *v = cp_calloc(n, sizeof *v);
    size_t *idx = cp_calloc(n, sizeof *idx);
    enum cp_status st = CP_OK;
    if (!v || !idx) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory ranking %zu values", n);
        goto out_free;
    }
    for (size_t i = 0; i < nx; i++)
        v[i] = x[i];
    for (size_t j = 0; j < ny; j++)
        v[nx + j] = y[j];
    gsl_sort_index(idx, v, 1, n);
    rk->r1 = rk->tie_term = 0.0;
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && v[idx[j]] == v[idx[i]])
            j++;
        /* positions i..j-1 (ranks i+1..j) share the midrank (i+1+j)/2 */
        double mid = ((double)(i + 1) + (double)j) / 2.0;
        size_t in_x = 0;
        for (size_t k = i; k < j; k++)
            in_x += idx[k] < nx;
        rk->r1 += mid * (double)in_x;
        double t = (double)(j - i);
        rk->tie_term += t * t * t - t;
        i = j;
    }
    rk->ties = rk->tie_term > 0.0;
    rk->all_equal = v[idx[0]] == v[idx[n - 1]];
out_free:
    free(idx);
    free(v);
    return st;
}

/* P(U >= u) for the U statistic of m and n values without ties, under the
 * null hypothesis that all C(m+n, m) orderings are equally likely.
 *
 * Walk the m+n ranks from the smallest up; c[k][s] counts the orderings of
 * the ranks seen so far that hold k of the m values and have U = s so far.
 * Giving rank i to one of the m values with k of them below it puts i - k of
 * the n values below it, which adds i - k to U. All terms are positive, so
 * the counts (up to C(200,100) ~ 1e59 here) keep full double precision. */
static enum cp_status mwu_exact_sf(size_t m, size_t n, double u, double *p, struct cp_diag *d)
{
    if (m > n) {
        size_t t = m;
        m = n;
        n = t;
    }
    *p = NAN;
    size_t w = m * n + 1, N = m + n;
    double *c = cp_calloc(m + 1, w * sizeof *c);
    if (!c)
        return cp_diag_set(d, CP_ERR_NOMEM,
                           "out of memory for the exact U distribution (%zu x %zu)", m, n);
    c[0] = 1.0;
    for (size_t i = 0; i < N; i++) {
        size_t k_hi = i < m ? i : m - 1;
        size_t k_lo = i > n ? i - n : 0;
        for (size_t k = k_hi + 1; k-- > k_lo;) {
            size_t add = i - k;
            const double *from = c + k * w;
            double *to = c + (k + 1) * w + add;
            for (size_t s = 0, s_max = k * add; s <= s_max; s++)
                to[s] += from[s];
        }
    }
    const double *f = c + m * w;
    double total = 0.0, tail = 0.0;
    for (size_t s = 0; s < w; s++)
        total += f[s];
    /* from the far end in, so that the small terms are summed first */
    for (size_t s = w; s-- > 0 && (double)s >= u;)
        tail += f[s];
    *p = tail / total;
    free(c);
    return CP_OK;
}

static void mwu_nan(struct cp_mwu *r)
{
    r->u = r->p = r->z = r->cles = NAN;
    r->method = CP_MWU_AUTO;
    r->ties = false;
}

enum cp_status cp_stats_mann_whitney(const double *x, size_t nx, const double *y, size_t ny,
                                     enum cp_mwu_method method, struct cp_mwu *out,
                                     struct cp_diag *d)
{
    mwu_nan(out);
    if (method != CP_MWU_AUTO && method != CP_MWU_EXACT && method != CP_MWU_ASYMPTOTIC)
        return cp_diag_set(d, CP_ERR_INVALID, "unknown Mann-Whitney method %d", (int)method);
    enum cp_status st = check_two(x, nx, y, ny, 1, "for the Mann-Whitney U test", d);
    if (st != CP_OK)
        return st;
    struct mwu_ranks rk = {0};
    st = rank_xy(x, nx, y, ny, &rk, d);
    if (st != CP_OK)
        return st;
    double mn = (double)nx * (double)ny;
    double u1 = rk.r1 - (double)nx * ((double)nx + 1.0) / 2.0;
    double umax = fmax(u1, mn - u1);
    if (method == CP_MWU_EXACT) {
        if (rk.ties)
            return cp_diag_set(d, CP_ERR_INVALID,
                               "the exact Mann-Whitney test assumes no ties, but some values "
                               "occur more than once; use the asymptotic method");
        if (mn > CP_STATS_MWU_EXACT_MAX)
            return cp_diag_set(d, CP_ERR_UNSUPPORTED,
                               "the exact Mann-Whitney test is limited to nx * ny <= %d "
                               "(here %zu x %zu); use the asymptotic method",
                               CP_STATS_MWU_EXACT_MAX, nx, ny);
    } else if (method == CP_MWU_AUTO) {
        method = !rk.ties && mn <= CP_STATS_MWU_AUTO_EXACT ? CP_MWU_EXACT : CP_MWU_ASYMPTOTIC;
    }
    double p = NAN, z = NAN;
    if (method == CP_MWU_EXACT) {
        st = mwu_exact_sf(nx, ny, umax, &p, d);
        if (st != CP_OK)
            return st;
        p *= 2.0;
    } else if (rk.all_equal) {
        z = 0.0;
        p = 1.0;
    } else {
        double n = (double)(nx + ny);
        double sigma = sqrt(mn / 12.0 * ((n + 1.0) - rk.tie_term / (n * (n - 1.0))));
        z = (umax - mn / 2.0 - 0.5) / sigma;
        p = 2.0 * gsl_cdf_ugaussian_Q(z);
    }
    out->u = u1;
    out->p = p > 1.0 ? 1.0 : p;
    out->z = z;
    out->cles = u1 / mn;
    out->method = method;
    out->ties = rk.ties;
    return CP_OK;
}

struct holm_item {
    double p;
    size_t i;
};

static int cmp_holm(const void *a, const void *b)
{
    double x = ((const struct holm_item *)a)->p, y = ((const struct holm_item *)b)->p;
    bool nx = isnan(x), ny = isnan(y);
    if (nx || ny)
        return nx - ny; /* NaN last */
    return (x > y) - (x < y);
}

enum cp_status cp_stats_holm(const double *p, size_t n, double alpha, bool *reject,
                             struct cp_diag *d)
{
    if (n < 1)
        return cp_diag_set(d, CP_ERR_INVALID, "Holm's procedure needs at least 1 p-value");
    if (!(alpha > 0 && alpha < 1))
        return cp_diag_set(d, CP_ERR_INVALID, "alpha %g is not in (0, 1)", alpha);
    struct holm_item *v = malloc(n * sizeof *v);
    if (!v)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        v[i] = (struct holm_item){p[i], i};
        reject[i] = false;
    }
    qsort(v, n, sizeof *v, cmp_holm);
    for (size_t k = 0; k < n; k++) {
        if (isnan(v[k].p) || v[k].p > alpha / (double)(n - k))
            break;
        reject[v[k].i] = true;
    }
    free(v);
    return CP_OK;
}
