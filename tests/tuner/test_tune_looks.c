/* The tuner's sequential looks (tuner/tuner.h, "sequential looks"): the
 * futility rule on injected rounds. A candidate clearly slower, or one that
 * cannot reach the threshold, is dropped; one better by the threshold never
 * is; every look is counted, including those with too few rounds to judge,
 * and none is made after the last; the memory target never stops early. */
#include "tuner/tuner.h"

#include <criterion/criterion.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Two subjects of n rounds: A around 1 ms, B around factor ms, a small
 * deterministic scatter; rounds >= undisturbed_from are undisturbed. */
static struct cp_measurement pair(size_t n, double factor, size_t disturbed_first)
{
    struct cp_measurement m;
    memset(&m, 0, sizeof m);
    m.n_subjects = 2;
    m.n = n;
    m.undisturbed = calloc(n, sizeof *m.undisturbed);
    cr_assert_not_null(m.undisturbed);
    for (size_t s = 0; s < 2; s++) {
        m.ns[s] = malloc(n * sizeof *m.ns[s]);
        cr_assert_not_null(m.ns[s]);
        for (size_t i = 0; i < n; i++) {
            double jitter = 1 + 0.004 * (double)((i * 7 + s * 3) % 5) - 0.008;
            m.ns[s][i] = (uint64_t)(1e6 * (s ? factor : 1.0) * jitter);
        }
    }
    for (size_t i = 0; i < n; i++)
        m.undisturbed[i] = i >= disturbed_first;
    m.n_undisturbed = n > disturbed_first ? n - disturbed_first : 0;
    return m;
}

static struct cp_tune_futility rule(enum cp_target t)
{
    struct cp_tune_futility f;
    memset(&f, 0, sizeof f);
    f.target = t;
    cp_verdict_opts_init(&f.verdict);
    f.items[0] = f.items[1] = 1;
    f.looks_max = CP_TUNE_LOOK_BLOCKS - 1;
    f.upper = NAN;
    return f;
}

Test(tune_looks, a_clear_loser_is_dropped_at_the_first_look)
{
    struct cp_measurement m = pair(15, 1.5, 0);
    struct cp_tune_futility f = rule(CP_TARGET_LATENCY);
    cr_expect(cp_tune_futile(&f, &m));
    cr_expect_eq(f.looks, 1);
    cr_expect_eq(f.stopped_at, 15);
    cr_expect_lt(f.upper, 0, "a 50%% slower candidate saves nothing: %g", f.upper);
    cp_measurement_release(&m);
}

Test(tune_looks, a_candidate_better_by_the_threshold_is_never_dropped)
{
    struct cp_measurement m = pair(15, 0.8, 0);
    struct cp_tune_futility f = rule(CP_TARGET_LATENCY);
    for (int k = 0; k < 3; k++)
        cr_expect_not(cp_tune_futile(&f, &m), "look %d", k + 1);
    cr_expect_gt(f.upper, 0.19, "%g", f.upper);
    cr_expect_eq(f.stopped_at, 0);
    cp_measurement_release(&m);
}

Test(tune_looks, a_gain_below_the_threshold_cannot_win_and_stops)
{
    /* 0.5% faster, under the 2% threshold */
    struct cp_measurement m = pair(30, 0.995, 0);
    struct cp_tune_futility f = rule(CP_TARGET_LATENCY);
    cr_expect(cp_tune_futile(&f, &m), "upper %g", f.upper);
    cr_expect(f.upper < 0.02 && f.upper > 0, "%g", f.upper);
    cp_measurement_release(&m);
}

Test(tune_looks, every_look_is_counted_and_none_is_made_after_the_last)
{
    /* too few undisturbed rounds to judge: no stop, but the look is spent */
    struct cp_measurement m = pair(15, 1.5, 10);
    struct cp_tune_futility f = rule(CP_TARGET_LATENCY);
    cr_expect_not(cp_tune_futile(&f, &m));
    cr_expect_eq(f.looks, 1);
    cp_measurement_release(&m);
    m = pair(15, 1.5, 0);
    cr_expect(cp_tune_futile(&f, &m));
    cr_expect(cp_tune_futile(&f, &m));
    cr_expect_eq(f.looks, 3);
    cr_expect_not(cp_tune_futile(&f, &m), "the fourth block is the verdict's, not a look's");
    cr_expect_eq(f.looks, 3);
    cp_measurement_release(&m);
}

Test(tune_looks, the_memory_target_never_stops_and_throughput_counts_items)
{
    struct cp_measurement m = pair(15, 1.5, 0);
    struct cp_tune_futility f = rule(CP_TARGET_MEMORY);
    cr_expect_not(cp_tune_futile(&f, &m));
    cr_expect_eq(f.looks, 0);
    /* a batch of 2 in 1.5x the time: a third more items per second */
    f = rule(CP_TARGET_THROUGHPUT);
    f.items[1] = 2;
    cr_expect_not(cp_tune_futile(&f, &m), "upper %g", f.upper);
    cr_expect_gt(f.upper, 0.3, "%g", f.upper);
    cp_measurement_release(&m);
}
