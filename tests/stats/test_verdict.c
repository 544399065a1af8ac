/* Verdicts: the decision table of stats/verdict.h on samples whose answer is
 * known. Samples are drawn from a seeded generator, so every run sees the
 * same numbers. */
#include "stats/verdict.h"

#include <criterion/criterion.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <string.h>

/* n normal values with the given mean and sd, seeded. */
static void draw(double *x, size_t n, double mean, double sd, unsigned long seed)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, seed);
    for (size_t i = 0; i < n; i++)
        x[i] = mean + gsl_ran_gaussian(r, sd);
    gsl_rng_free(r);
}

static struct cp_comparison run(const double *b, size_t nb, const double *a, size_t na,
                                enum cp_better better, enum cp_stat_test t)
{
    struct cp_verdict_opts o;
    cp_verdict_opts_init(&o);
    o.test = t;
    struct cp_comparison c;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_verdict_compare(b, nb, a, na, better, &o, &c, &d), CP_OK, "%s", d.msg);
    return c;
}

static const enum cp_stat_test all_tests[] = {CP_TEST_MANN_WHITNEY, CP_TEST_WELCH, CP_TEST_STUDENT,
                                              CP_TEST_BOOTSTRAP};

Test(verdict, a_clear_slowdown_is_a_regression_by_every_test)
{
    double b[100], a[100];
    draw(b, 100, 10.0, 0.2, 1);
    draw(a, 100, 11.0, 0.2, 2); /* +10% */
    for (size_t i = 0; i < 4; i++) {
        struct cp_comparison c = run(b, 100, a, 100, CP_BETTER_LOWER, all_tests[i]);
        cr_expect_eq(c.verdict, CP_VERDICT_REGRESSED, "%s", cp_stat_test_name(all_tests[i]));
        cr_expect(c.p < 0.001);
        cr_expect(c.delta_pct > 8 && c.delta_pct < 12, "delta %g", c.delta_pct);
        cr_expect(c.ci_lo_pct <= c.delta_pct && c.delta_pct <= c.ci_hi_pct);
        cr_expect(c.ci_lo_pct > 2.0);
        cr_expect_eq(c.n_needed, 0);
    }
}

Test(verdict, the_direction_follows_the_metric)
{
    double b[60], a[60];
    draw(b, 60, 100.0, 1.0, 3);
    draw(a, 60, 110.0, 1.0, 4);
    /* more throughput is better */
    cr_expect_eq(run(b, 60, a, 60, CP_BETTER_HIGHER, CP_TEST_WELCH).verdict, CP_VERDICT_IMPROVED);
    cr_expect_eq(run(a, 60, b, 60, CP_BETTER_HIGHER, CP_TEST_WELCH).verdict, CP_VERDICT_REGRESSED);
    cr_expect_eq(run(a, 60, b, 60, CP_BETTER_LOWER, CP_TEST_MANN_WHITNEY).verdict,
                 CP_VERDICT_IMPROVED);
}

Test(verdict, a_significant_change_below_the_threshold_is_unchanged)
{
    double b[400], a[400];
    draw(b, 400, 10.0, 0.01, 5);
    draw(a, 400, 10.05, 0.01, 6); /* +0.5%, very significant */
    for (size_t i = 0; i < 4; i++) {
        struct cp_comparison c = run(b, 400, a, 400, CP_BETTER_LOWER, all_tests[i]);
        cr_expect(c.p < 0.05, "%s p %g", cp_stat_test_name(all_tests[i]), c.p);
        cr_expect_eq(c.verdict, CP_VERDICT_UNCHANGED);
    }
}

Test(verdict, a_large_change_in_noise_is_inconclusive_and_says_how_many_samples)
{
    double b[5], a[5];
    draw(b, 5, 10.0, 2.0, 7);
    draw(a, 5, 10.6, 2.0, 8);
    struct cp_comparison c = run(b, 5, a, 5, CP_BETTER_LOWER, CP_TEST_WELCH);
    cr_assert(c.p >= 0.05, "p %g", c.p);
    cr_assert(fabs(c.delta_pct) >= 2.0, "delta %g", c.delta_pct);
    cr_expect_eq(c.verdict, CP_VERDICT_INCONCLUSIVE);
    cr_expect(c.n_needed > 5, "n_needed %zu", c.n_needed);
    cr_expect(c.mde_pct > fabs(c.delta_pct));
}

Test(verdict, identical_samples_are_unchanged)
{
    double b[50];
    draw(b, 50, 5.0, 0.5, 9);
    for (size_t i = 0; i < 4; i++) {
        struct cp_comparison c = run(b, 50, b, 50, CP_BETTER_LOWER, all_tests[i]);
        cr_expect_eq(c.verdict, CP_VERDICT_UNCHANGED);
        cr_expect_float_eq(c.delta_pct, 0.0, 1e-12);
        cr_expect(c.p > 0.5);
    }
}

Test(verdict, single_values_compare_exactly)
{
    double b = 1000, a = 1100, same = 1010;
    struct cp_comparison c = run(&b, 1, &a, 1, CP_BETTER_LOWER, CP_TEST_MANN_WHITNEY);
    cr_expect(c.exact);
    cr_expect(isnan(c.p));
    cr_expect_float_eq(c.delta_pct, 10.0, 1e-12);
    cr_expect_eq(c.verdict, CP_VERDICT_REGRESSED);
    cr_expect_eq(run(&b, 1, &same, 1, CP_BETTER_LOWER, CP_TEST_WELCH).verdict,
                 CP_VERDICT_UNCHANGED);
}

Test(verdict, constant_samples_under_a_t_test_are_decided_without_variance)
{
    double b[4] = {2, 2, 2, 2}, a[4] = {3, 3, 3, 3};
    struct cp_comparison c = run(b, 4, a, 4, CP_BETTER_LOWER, CP_TEST_WELCH);
    cr_expect_eq(c.p, 0.0);
    cr_expect_eq(c.verdict, CP_VERDICT_REGRESSED);
    cr_expect_eq(run(b, 4, b, 4, CP_BETTER_LOWER, CP_TEST_STUDENT).verdict, CP_VERDICT_UNCHANGED);
}

Test(verdict, a_tail_regression_shows_in_the_p99_but_not_the_median)
{
    double b[200], a[200];
    draw(b, 200, 10.0, 0.05, 10);
    draw(a, 200, 10.0, 0.05, 11);
    for (size_t i = 180; i < 200; i++) /* the slowest 10% of "after" doubles */
        a[i] = 20.0 + 0.01 * (double)i;
    struct cp_verdict_opts o;
    cp_verdict_opts_init(&o);
    struct cp_comparison med, p99;
    cr_assert_eq(cp_verdict_compare(b, 200, a, 200, CP_BETTER_LOWER, &o, &med, NULL), CP_OK);
    o.quantile = 0.99;
    cr_assert_eq(cp_verdict_compare(b, 200, a, 200, CP_BETTER_LOWER, &o, &p99, NULL), CP_OK);
    cr_expect_eq(med.verdict, CP_VERDICT_UNCHANGED, "median delta %g", med.delta_pct);
    cr_expect_eq(p99.verdict, CP_VERDICT_REGRESSED);
    cr_expect_eq(p99.test, CP_TEST_BOOTSTRAP);
    cr_expect(p99.delta_pct > 50);
}

/* A p99 that moved in a few heavy tails: the samples' spread is small, the
 * tail's is not. The sample-size figures come from the bootstrap interval,
 * so an inconclusive p99 asks for more samples than it has, never fewer. */
Test(verdict, an_inconclusive_p99_asks_for_more_samples_than_it_has)
{
    double b[60], a[60];
    draw(b, 60, 10.0, 0.1, 12);
    draw(a, 60, 10.0, 0.1, 13);
    b[59] = 14.0; /* one slow outlier each side, the after one slower */
    a[58] = 18.0;
    struct cp_verdict_opts o;
    cp_verdict_opts_init(&o);
    o.quantile = 0.99;
    struct cp_comparison c;
    cr_assert_eq(cp_verdict_compare(b, 60, a, 60, CP_BETTER_LOWER, &o, &c, NULL), CP_OK);
    cr_assert_eq(c.verdict, CP_VERDICT_INCONCLUSIVE, "delta %g CI [%g, %g] p %g", c.delta_pct,
                 c.ci_lo_pct, c.ci_hi_pct, c.p);
    cr_expect(c.n_needed > 60, "n_needed %zu", c.n_needed);
    cr_expect(c.mde_pct > fabs(c.delta_pct) * 0.5, "mde %g delta %g", c.mde_pct, c.delta_pct);
}

/* Two samples a side say nothing of a p99, however far apart they are. */
Test(verdict, a_p99_from_too_few_samples_is_no_verdict)
{
    double b[2] = {300, 300}, a[2] = {10, 10};
    struct cp_verdict_opts o;
    cp_verdict_opts_init(&o);
    o.quantile = 0.99;
    struct cp_comparison c;
    cr_assert_eq(cp_verdict_compare(b, 2, a, 2, CP_BETTER_LOWER, &o, &c, NULL), CP_OK);
    cr_expect_eq(c.verdict, CP_VERDICT_INCONCLUSIVE);
    cr_expect(c.n_needed >= 10, "n_needed %zu", c.n_needed);
}

Test(verdict, bad_input_is_refused_with_a_reason)
{
    double b[3] = {1, 2, 3}, a[3] = {1, NAN, 3}, z[2] = {0, 0};
    struct cp_verdict_opts o;
    cp_verdict_opts_init(&o);
    struct cp_comparison c;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_expect_eq(cp_verdict_compare(b, 3, a, 3, CP_BETTER_LOWER, &o, &c, &d), CP_ERR_INVALID);
    cr_expect(strstr(d.msg, "after") != NULL, "%s", d.msg);
    cr_expect(isnan(c.delta_pct));
    cr_expect_eq(cp_verdict_compare(b, 1, a, 3, CP_BETTER_LOWER, &o, &c, &d), CP_ERR_INVALID);
    cr_expect_eq(cp_verdict_compare(z, 2, b, 2, CP_BETTER_LOWER, &o, &c, &d), CP_ERR_INVALID);
    o.alpha = 0.7;
    cp_diag_init(&d); /* a diag keeps its first message */
    cr_expect_eq(cp_verdict_compare(b, 3, b, 3, CP_BETTER_LOWER, &o, &c, &d), CP_ERR_INVALID);
    cr_expect(strstr(d.msg, "alpha") != NULL, "%s", d.msg);
}

Test(verdict, test_names_round_trip)
{
    for (size_t i = 0; i < 4; i++) {
        enum cp_stat_test t;
        cr_expect(cp_stat_test_parse(cp_stat_test_name(all_tests[i]), &t));
        cr_expect_eq(t, all_tests[i]);
    }
    enum cp_stat_test t;
    cr_expect(cp_stat_test_parse("Welch", &t) && t == CP_TEST_WELCH);
    cr_expect(!cp_stat_test_parse("z-test", &t));
    cr_expect_str_eq(cp_verdict_name(CP_VERDICT_INCONCLUSIVE), "inconclusive");
}

Test(bootstrap, the_quantile_ratio_at_one_half_is_the_median_ratio)
{
    double b[30], a[30];
    draw(b, 30, 10.0, 1.0, 12);
    draw(a, 30, 12.0, 1.0, 13);
    struct cp_bootstrap_opts o;
    cp_bootstrap_opts_init(&o);
    o.resamples = 2000;
    struct cp_bootstrap_ci m, q;
    cr_assert_eq(cp_stats_bootstrap_median_ratio(b, 30, a, 30, &o, &m, NULL), CP_OK);
    cr_assert_eq(cp_stats_bootstrap_quantile_ratio(b, 30, a, 30, 0.5, &o, &q, NULL), CP_OK);
    cr_expect_eq(m.lo, q.lo);
    cr_expect_eq(m.hi, q.hi);
    cr_expect_eq(m.p, q.p);
    cr_expect(m.p < 0.01);
    cr_expect_eq(cp_stats_bootstrap_quantile_ratio(b, 30, a, 30, 1.0, &o, &q, NULL),
                 CP_ERR_INVALID);
}

/* The paired t-test against the closed form of Student's t with 3 degrees
 * of freedom: F(t) = 1/2 + (u / (1 + u^2) + atan u) / pi, u = t / sqrt 3. */
Test(paired, the_paired_t_test_matches_the_closed_form_at_three_degrees_of_freedom)
{
    const double x[] = {1, 2, 3, 4}, y[] = {1.5, 2.1, 3.9, 4.2};
    struct cp_ttest r;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_stats_ttest_paired(x, y, 4, &r, &d), CP_OK, "%s", d.msg);
    cr_expect_float_eq(r.diff, -0.425, 1e-12);
    cr_expect_float_eq(r.se, 0.17969882210706514, 1e-12);
    cr_expect_float_eq(r.t, -2.365068368376859, 1e-12);
    cr_expect_float_eq(r.df, 3.0, 0);
    cr_expect_float_eq(r.p, 0.09894459695402391, 1e-9);
    const double same[] = {1, 2, 3, 4};
    cr_expect_eq(cp_stats_ttest_paired(x, same, 4, &r, &d), CP_ERR_INVALID,
                 "no variance of the differences has no t");
}

static struct cp_comparison paired(const double *b, const double *a, size_t n)
{
    struct cp_verdict_opts o;
    cp_verdict_opts_init(&o);
    struct cp_comparison c;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_verdict_compare_paired(b, a, n, CP_BETTER_LOWER, &o, &c, &d), CP_OK, "%s",
                 d.msg);
    return c;
}

/* Runs that swing between a fast and a slow state, each pair in one state:
 * Welch on the runs sees the swing and cannot decide; the pairs see the 5%
 * change. */
Test(paired, pairs_in_a_shared_state_see_a_change_that_the_swing_hides_from_welch)
{
    double b[6], a[6], jitter[6];
    draw(jitter, 6, 0.0, 0.004, 11);
    for (int i = 0; i < 6; i++) {
        b[i] = i % 2 ? 0.92 : 0.76;
        a[i] = b[i] * 1.05 * (1.0 + jitter[i]);
    }
    struct cp_comparison c = paired(b, a, 6);
    cr_expect_eq(c.test, CP_TEST_PAIRED_T);
    cr_expect_eq(c.verdict, CP_VERDICT_REGRESSED, "delta %g p %g", c.delta_pct, c.p);
    cr_expect(c.delta_pct > 4.0 && c.delta_pct < 6.0, "delta %g", c.delta_pct);
    cr_expect(c.ci_lo_pct > 2.0 && c.ci_hi_pct < 8.0, "CI %g..%g", c.ci_lo_pct, c.ci_hi_pct);
    cr_expect(c.mde_pct > 0 && c.mde_pct < 5.0, "mde %g", c.mde_pct);
    struct cp_comparison w = run(b, 6, a, 6, CP_BETTER_LOWER, CP_TEST_WELCH);
    cr_expect_eq(w.verdict, CP_VERDICT_INCONCLUSIVE, "welch p %g", w.p);

    for (int i = 0; i < 6; i++)
        a[i] = b[i] * (1.0 + jitter[i]);
    c = paired(b, a, 6);
    cr_expect_eq(c.verdict, CP_VERDICT_UNCHANGED, "A/A delta %g p %g", c.delta_pct, c.p);
}

Test(paired, noisy_pairs_are_inconclusive_and_say_how_many_pairs_would_do)
{
    double b[4], a[4];
    const double jitter[4] = {0.07, -0.05, 0.08, -0.04};
    for (int i = 0; i < 4; i++) {
        b[i] = 1.0;
        a[i] = 1.05 * (1.0 + jitter[i]);
    }
    struct cp_comparison c = paired(b, a, 4);
    cr_assert_eq(c.verdict, CP_VERDICT_INCONCLUSIVE, "delta %g p %g", c.delta_pct, c.p);
    cr_expect(c.n_needed > 4, "n_needed %zu", c.n_needed);
}

Test(paired, bad_pairs_are_refused_and_the_paired_test_is_not_a_test_option)
{
    struct cp_verdict_opts o;
    cp_verdict_opts_init(&o);
    struct cp_comparison c;
    struct cp_diag d;
    cp_diag_init(&d);
    const double b[] = {1, 2, 3}, neg[] = {1, -2, 3};
    cr_expect_eq(cp_verdict_compare_paired(b, neg, 3, CP_BETTER_LOWER, &o, &c, &d), CP_ERR_INVALID);
    cr_expect(strstr(d.msg, "pair 1") != NULL, "%s", d.msg);
    cp_diag_init(&d);
    cr_expect_eq(cp_verdict_compare_paired(b, b, 1, CP_BETTER_LOWER, &o, &c, &d), CP_ERR_INVALID);
    enum cp_stat_test t;
    cr_expect(!cp_stat_test_parse("paired-t", &t), "pairs come from the runs, not from --test");
    cr_expect_str_eq(cp_stat_test_name(CP_TEST_PAIRED_T), "paired-t");
    o.test = CP_TEST_PAIRED_T;
    cp_diag_init(&d);
    cr_expect_eq(cp_verdict_compare(b, 3, b, 3, CP_BETTER_LOWER, &o, &c, &d), CP_ERR_INVALID);
}
