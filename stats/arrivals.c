/* Arrival times of an open-loop workload (stats/stats.h): a Poisson
 * process, its gaps exponential (gsl_ran_exponential on gsl_rng_mt19937). */
#include "stats/stats.h"

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdlib.h>

enum cp_status cp_stats_poisson_arrivals(double rate, double duration_s, size_t max_n,
                                         uint64_t seed, double **out, size_t *n, struct cp_diag *d)
{
    *out = NULL;
    *n = 0;
    if (!(rate > 0) || !isfinite(rate) || (!(duration_s > 0) && max_n == 0) ||
        (duration_s > 0 && !isfinite(duration_s)))
        return cp_diag_set(d, CP_ERR_INVALID,
                           "arrivals need a rate above 0 and a duration or a count");
    /* about rate x duration of them, and room to grow */
    double expect = duration_s > 0 ? rate * duration_s : (double)max_n;
    size_t cap = expect < 16 ? 16 : expect > 1e8 ? 100000000 : (size_t)(expect * 1.2) + 16;
    if (max_n && cap > max_n)
        cap = max_n;
    double *v = malloc(cap * sizeof *v);
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    if (!v || !r) {
        free(v);
        if (r)
            gsl_rng_free(r);
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    }
    gsl_rng_set(r, (unsigned long)seed);
    double t = 0;
    size_t k = 0;
    for (;;) {
        t += gsl_ran_exponential(r, 1.0 / rate);
        if ((duration_s > 0 && t >= duration_s) || (max_n && k == max_n))
            break;
        if (k == cap) {
            size_t nc = cap * 2;
            double *g = realloc(v, nc * sizeof *g);
            if (!g) {
                free(v);
                gsl_rng_free(r);
                return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
            }
            v = g;
            cap = nc;
        }
        v[k++] = t;
    }
    gsl_rng_free(r);
    *out = v;
    *n = k;
    return CP_OK;
}
