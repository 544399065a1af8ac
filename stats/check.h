/* stats: input checks and scratch helpers shared by the stats/ files. Private
 * to the module; not installed, not included outside stats/. */
#ifndef CP_STATS_CHECK_H
#define CP_STATS_CHECK_H

#include "core/core.h"

#include <stddef.h>

/* Check that a sample called `what` ("x", "y", "sample") has at least min_n
 * values and that all are finite; the diag says which rule failed, and the
 * index and value of the first bad one. `why` completes "need at least N
 * values ..." (e.g. "for a standard deviation"). */
enum cp_status cp_stats_check_sample(const char *what, const double *x, size_t n, size_t min_n,
                                     const char *why, struct cp_diag *d);

/* A sorted copy of n values (n >= 1). Caller frees; NULL when out of memory. */
double *cp_stats_sorted_copy(const double *x, size_t n);

#endif
