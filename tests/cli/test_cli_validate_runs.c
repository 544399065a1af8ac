/* Separate runs: `bench --runs N` measures in N processes and stores one
 * group of runs; `validate` compares two groups run against run (each
 * run's median one sample, Welch), so the variance between processes is
 * in the verdict. Verdicts are checked on groups made through the trace
 * store with seeded samples whose answer is known: between-run noise that
 * a single run per side would call a regression is "unchanged" here, and a
 * real +6% change is still a regression. The CLI path is checked for its
 * shape only, never for which verdict a real measurement gives. */
#include "core/core.h"
#include "support/cli.h"
#include "support/db.h"
#include "support/run.h"
#include "trace/trace.h"

#include "cli/cli_test.h"

#include <criterion/criterion.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <jansson.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void setup(void)
{
    cp_t_scratch_setup();
    char *cache = cp_t_path("cache");
    cr_assert_eq(setenv("XDG_CACHE_HOME", cache, 1), 0);
    free(cache);
}

TestSuite(cli_validate_runs, .init = setup, .fini = cp_t_scratch_close);

/* A trace of `runs` runs of one group; run r's iterations scatter (sd
 * 0.5%) around mean_ms * (1 + offset[r]): a process-level offset each. */
static char *make_group(const char *name, size_t runs, double mean_ms, const double *offset,
                        unsigned long seed)
{
    char *p = cp_t_path(name);
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_trace_store *s = NULL;
    cr_assert_eq(cp_trace_store_open(p, &s, &d), CP_OK, "%s", d.msg);
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, seed);
    int64_t first = 0;
    for (size_t r = 0; r < runs; r++) {
        struct cp_trace_run_info info = {.kind = "bench",
                                         .model_path = "/models/m.om",
                                         .model_hash = "h",
                                         .config_id = "c0",
                                         .threads = 2,
                                         .batch = 1,
                                         .iterations = 200,
                                         .weight_bytes = 1 << 20,
                                         .arena_bytes = 1 << 20};
        int64_t run;
        cr_assert_eq(cp_trace_store_begin_run(s, &info, &run, &d), CP_OK, "%s", d.msg);
        uint64_t ns[200];
        double m = mean_ms * (1 + offset[r]);
        for (size_t i = 0; i < 200; i++)
            ns[i] = (uint64_t)((m + gsl_ran_gaussian(rng, 0.005 * m)) * 1e6);
        cr_assert_eq(cp_trace_store_add_samples(s, run, 0, ns, 200, &d), CP_OK, "%s", d.msg);
        if (r == 0)
            first = run;
        if (runs > 1)
            cr_assert_eq(cp_trace_store_set_run_group(s, run, first, (int64_t)r, (int64_t)runs, &d),
                         CP_OK, "%s", d.msg);
    }
    gsl_rng_free(rng);
    cp_trace_store_close(s);
    return p;
}

/* `validate --before A --after B --json [extra]`: exit code and JSON. */
static json_t *validate(const char *a, const char *b, const char *extra, int *rc)
{
    struct cp_run r;
    if (extra)
        cp_run_cli(&r, "validate", "--before", a, "--after", b, "--json", "--metrics",
                   "latency,throughput", extra, NULL);
    else
        cp_run_cli(&r, "validate", "--before", a, "--after", b, "--json", "--metrics",
                   "latency,throughput", NULL);
    cr_assert_eq(r.signal, 0, "%s", r.err);
    *rc = r.exit_code;
    json_t *j = ct_json(r.out);
    cp_run_release(&r);
    return j;
}

static const char *verdict_of(const json_t *j, const char *metric)
{
    const json_t *m = json_object_get(json_object_get(j, "metrics"), metric);
    cr_assert_not_null(m, "no metric %s", metric);
    return json_string_value(json_object_get(m, "verdict"));
}

/* Process offsets of a few percent: what separate runs of one model look
 * like on a shared machine. */
static const double OFF_A[5] = {0.000, 0.018, -0.012, 0.025, -0.004};
static const double OFF_B[5] = {0.021, -0.009, 0.031, 0.004, 0.015};

Test(cli_validate_runs, process_noise_is_unchanged_between_groups_but_not_between_single_runs)
{
    char *a = make_group("a.db", 5, 10, OFF_A, 1), *b = make_group("b.db", 5, 10, OFF_B, 2);
    int rc = -1;
    json_t *j = validate(a, b, NULL, &rc);
    cr_expect_str_eq(json_string_value(json_object_get(j, "comparison")), "between-runs");
    cr_expect_eq(ct_num(json_object_get(j, "before"), "runs"), 5);
    cr_expect_eq(ct_num(json_object_get(j, "after"), "runs"), 5);
    const json_t *lat = json_object_get(json_object_get(j, "metrics"), "latency");
    cr_expect(json_is_true(json_object_get(lat, "between_runs")));
    cr_expect_eq(ct_num(lat, "n_before"), 5, "the samples are the runs");
    cr_expect_str_eq(json_string_value(json_object_get(lat, "test")), "welch");
    cr_expect_str_neq(verdict_of(j, "latency"), "regressed", "process noise is no regression");
    cr_expect_neq(rc, 1);
    json_decref(j);

    /* one run on each side (B's first is +2.1% on A's first): 200
     * iterations each make the noise of one process look like a change */
    struct cp_run r;
    cp_run_cli(&r, "validate", "--before", a, "--before-run", "1", "--after", b, "--after-run", "1",
               "--metrics", "latency", "--json", NULL);
    j = ct_json(r.out);
    cr_expect_str_eq(json_string_value(json_object_get(j, "comparison")), "iterations");
    cr_expect_str_eq(verdict_of(j, "latency"), "regressed",
                     "what a single run per side cannot tell from a change");
    json_decref(j);
    cp_run_release(&r);
    cp_run_cli(&r, "validate", "--before", a, "--before-run", "1", "--after", b, "--after-run", "1",
               "--metrics", "latency", NULL);
    cr_expect(strstr(r.out, "one run on a side"), "the output says what it cannot see: %s", r.out);
    cp_run_release(&r);
    free(a);
    free(b);
}

Test(cli_validate_runs, a_real_change_is_found_between_groups)
{
    double slower[5];
    for (size_t i = 0; i < 5; i++)
        slower[i] = 0.06 + OFF_B[i];
    char *a = make_group("a.db", 5, 10, OFF_A, 3), *b = make_group("b.db", 5, 10, slower, 4);
    int rc = -1;
    json_t *j = validate(a, b, NULL, &rc);
    cr_expect_str_eq(json_string_value(json_object_get(j, "comparison")), "between-runs");
    cr_expect_str_eq(verdict_of(j, "latency"), "regressed");
    cr_expect_str_eq(verdict_of(j, "throughput"), "regressed");
    cr_expect_eq(rc, 1);
    const json_t *lat = json_object_get(json_object_get(j, "metrics"), "latency");
    double delta = ct_num(lat, "delta_pct");
    cr_expect(delta > 4 && delta < 9, "delta %g", delta);
    json_decref(j);
    /* and the other way round it is an improvement */
    j = validate(b, a, NULL, &rc);
    cr_expect_str_eq(verdict_of(j, "latency"), "improved");
    cr_expect_eq(rc, 0);
    json_decref(j);
    free(a);
    free(b);
}

/* Sets whole-run counter `name` of run `run` in trace `path`, as bench
 * records it. */
static void mark_counter(const char *path, int64_t run, const char *name, double value)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_trace_store *s = NULL;
    cr_assert_eq(cp_trace_store_open(path, &s, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_trace_store_add_counter(s, run, -1, name, value, 0, &d), CP_OK, "%s", d.msg);
    cp_trace_store_close(s);
}

static void mark_time_limit(const char *path, int64_t run, double hit)
{
    mark_counter(path, run, "measure.time_limit_hit", hit);
}

/* A run that stopped at its time limit found the machine busy throughout:
 * separate runs with one such run get no timing verdict, whatever their
 * figures say, and the output says which side and why. */
Test(cli_validate_runs, a_run_stopped_by_its_time_limit_leaves_timing_without_a_verdict)
{
    double slower[5];
    for (size_t i = 0; i < 5; i++)
        slower[i] = 0.06 + OFF_B[i];
    char *a = make_group("a.db", 5, 10, OFF_A, 3), *b = make_group("b.db", 5, 10, slower, 4);
    for (int64_t run = 1; run <= 5; run++) /* what bench writes when the limit was not hit */
        mark_time_limit(b, run, 0);
    int rc = -1;
    json_t *j = validate(a, b, NULL, &rc);
    cr_expect_str_eq(verdict_of(j, "latency"), "regressed");
    cr_expect_eq(ct_num(json_object_get(j, "after"), "runs_at_time_limit"), 0);
    json_decref(j);

    mark_time_limit(b, 3, 1);
    j = validate(a, b, NULL, &rc);
    cr_expect_str_eq(verdict_of(j, "latency"), "inconclusive");
    cr_expect_str_eq(verdict_of(j, "throughput"), "inconclusive");
    cr_expect_eq(rc, 4);
    cr_expect_eq(ct_num(json_object_get(j, "after"), "runs_at_time_limit"), 1);
    cr_expect_eq(ct_num(json_object_get(j, "before"), "runs_at_time_limit"), 0);
    json_decref(j);
    struct cp_run r;
    cp_run_cli(&r, "validate", "--before", a, "--after", b, "--metrics", "latency", NULL);
    cr_expect_eq(r.exit_code, 4);
    ct_assert_mentions(r.out, "1 of the after side's 5 runs stopped at their time limit",
                       "bench A --vs B", "--priority high", NULL);
    /* a run measured at high priority already: that advice would change
     * nothing, so it is not given */
    mark_counter(b, 3, "measure.priority_raised", 1);
    cp_run_cli(&r, "validate", "--before", a, "--after", b, "--metrics", "latency", NULL);
    cr_expect_eq(r.exit_code, 4);
    ct_assert_mentions(r.out, "stopped at their time limit", "bench A --vs B", NULL);
    cr_expect_null(strstr(r.out, "--priority"), "%s", r.out);
    cp_run_release(&r);
    free(a);
    free(b);
}

Test(cli_validate_runs, a_run_of_the_trace_alone_is_compared_alone)
{
    char *a = make_group("a.db", 5, 10, OFF_A, 5), *b = make_group("b.db", 5, 10, OFF_B, 6);
    int rc = -1;
    json_t *j = validate(a, b, "--after-run=4", &rc);
    cr_expect_str_eq(json_string_value(json_object_get(j, "comparison")), "iterations");
    cr_expect_eq(ct_num(json_object_get(j, "after"), "runs"), 1);
    cr_expect_eq(ct_num(json_object_get(j, "after"), "run"), 4);
    json_decref(j);
    free(a);
    free(b);
}

/* Several traces per side (processes of A and B run alternately, one
 * trace each): run i of each side is a pair, compared by the paired test of
 * their log ratios; a change is found, process noise is not one. The same
 * traces in an order that did not alternate are compared between runs. */
Test(cli_validate_runs, alternating_traces_are_compared_pair_by_pair)
{
    char *pa[5], *pb[5], *ps[5];
    for (size_t i = 0; i < 5; i++) {
        char name[32];
        double off_a = OFF_A[i], off_b = OFF_B[i], off_s = 0.06 + OFF_B[i];
        snprintf(name, sizeof name, "a%zu.db", i);
        pa[i] = make_group(name, 1, 10, &off_a, 20 + i);
        snprintf(name, sizeof name, "b%zu.db", i);
        pb[i] = make_group(name, 1, 10, &off_b, 30 + i);
        snprintf(name, sizeof name, "s%zu.db", i);
        ps[i] = make_group(name, 1, 10, &off_s, 40 + i);
    }
    struct cp_run r;
    cp_run_cli(&r, "validate", "--before", pa[0], "--before", pa[1], "--before", pa[2], "--before",
               pa[3], "--before", pa[4], "--after", pb[0], "--after", pb[1], "--after", pb[2],
               "--after", pb[3], "--after", pb[4], "--metrics", "latency", "--json", NULL);
    json_t *j = ct_json(r.out);
    cr_expect_str_eq(json_string_value(json_object_get(j, "comparison")), "paired-runs");
    cr_expect_eq(ct_num(json_object_get(j, "before"), "runs"), 5);
    cr_expect_str_neq(verdict_of(j, "latency"), "regressed", "process noise is no regression");
    json_decref(j);
    cp_run_release(&r);
    cp_run_cli(&r, "validate", "--before", pa[0], "--before", pa[1], "--before", pa[2], "--before",
               pa[3], "--before", pa[4], "--after", pb[0], "--after", pb[1], "--after", pb[2],
               "--metrics", "latency", NULL);
    cr_expect(strstr(r.out, "welch on run medians"), "unequal counts are not pairs:\n%s", r.out);
    cp_run_release(&r);
    cp_run_cli(&r, "validate", "--before", pa[1], "--before", pa[0], "--before", pa[2], "--before",
               pa[3], "--before", pa[4], "--after", pb[0], "--after", pb[1], "--after", pb[2],
               "--after", pb[3], "--after", pb[4], "--metrics", "latency", "--json", NULL);
    j = ct_json(r.out);
    cr_expect_str_eq(json_string_value(json_object_get(j, "comparison")), "between-runs",
                     "b1 began before a0: not alternating");
    json_decref(j);
    cp_run_release(&r);
    cp_run_cli(&r, "validate", "--before", pa[0], "--before", pa[1], "--before", pa[2], "--before",
               pa[3], "--before", pa[4], "--after", ps[0], "--after", ps[1], "--after", ps[2],
               "--after", ps[3], "--after", ps[4], "--metrics", "latency", "--json", NULL);
    cr_expect_eq(r.exit_code, 1, "%s", r.err);
    cr_expect(strstr(r.out, "paired t on run medians") || strstr(r.out, "paired-runs"), "%s",
              r.out);
    j = ct_json(r.out);
    cr_expect_str_eq(verdict_of(j, "latency"), "regressed");
    json_decref(j);
    cp_run_release(&r);
    cp_run_cli(&r, "validate", "--before", pa[0], "--before", pa[1], "--before-run", "1", "--after",
               pb[0], NULL);
    cr_expect_eq(r.exit_code, 2);
    cr_expect(strstr(r.err, "--before-run picks a run of one trace"), "%s", r.err);
    cp_run_release(&r);
    for (size_t i = 0; i < 5; i++) {
        free(pa[i]);
        free(pb[i]);
        free(ps[i]);
    }
}

/* ---- bench --runs ------------------------------------------------------------------- */

Test(cli_validate_runs, bench_runs_stores_one_group_that_validate_reads, .timeout = 300)
{
    char *om = ct_convert("nhwc_roundtrip"), *db = cp_t_path("t.db");
    struct cp_run r;
    cp_run_cli(&r, "bench", om, "--runs", "3", "-n", "5", "-w", "1", "--threads", "1",
               "--max-duration", "3s", "--trace", db, "--json", NULL);
    cr_assert_eq(r.exit_code, 0, "exit %d: %s", r.exit_code, r.err);
    json_t *j = ct_json(r.out);
    cr_expect_eq(ct_num(j, "runs"), 3);
    const json_t *runs = json_object_get(j, "run");
    cr_assert(json_is_array(runs) && json_array_size(runs) == 3);
    for (size_t i = 0; i < 3; i++) {
        const json_t *one = json_array_get(runs, i);
        cr_expect_eq(ct_num(one, "trace_run"), (double)(i + 1));
        cr_expect_geq(ct_num(one, "iterations"), 1);
    }
    const json_t *b = json_object_get(j, "between_runs");
    cr_expect_leq(ct_num(b, "min_median_ms"), ct_num(b, "median_ms"));
    cr_expect_leq(ct_num(b, "median_ms"), ct_num(b, "max_median_ms"));
    json_decref(j);
    cp_run_release(&r);

    sqlite3 *raw = NULL;
    cr_assert_eq(sqlite3_open_v2(db, &raw, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    int64_t v = 0;
    cr_assert(cp_t_sql_int(raw, "SELECT count(*) FROM runs", &v));
    cr_expect_eq(v, 3);
    cr_assert(cp_t_sql_int(
        raw, "SELECT count(DISTINCT value) FROM counters WHERE name = 'run.group'", &v));
    cr_expect_eq(v, 1, "one group");
    cr_assert(cp_t_sql_int(raw,
                           "SELECT count(*) FROM counters WHERE name = 'run.group_size' AND "
                           "value = 3",
                           &v));
    cr_expect_eq(v, 3);
    sqlite3_close(raw);

    /* a group against itself: every iteration the same on both sides, so
     * unchanged (the undisturbed ones might be too few to judge) */
    cp_run_cli(&r, "validate", "--before", db, "--after", db, "--json", "--all-iterations", NULL);
    cr_expect_eq(r.exit_code, 0, "exit %d: %s", r.exit_code, r.err);
    j = ct_json(r.out);
    cr_expect_eq(ct_num(json_object_get(j, "before"), "runs"), 3);
    json_decref(j);
    cp_run_release(&r);

    /* a single run appended later is the trace's last run, alone */
    cp_run_cli(&r, "bench", om, "-n", "5", "-w", "1", "--threads", "1", "--max-duration", "3s",
               "--trace", db, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    cp_run_cli(&r, "validate", "--before", db, "--after", db, "--json", NULL);
    j = ct_json(r.out);
    cr_expect_eq(ct_num(json_object_get(j, "before"), "runs"), 1);
    cr_expect_eq(ct_num(json_object_get(j, "before"), "run"), 4);
    json_decref(j);
    cp_run_release(&r);
    free(db);
    free(om);
}

Test(cli_validate_runs, bench_runs_refuses_what_it_cannot_do)
{
    char *om = ct_convert("nhwc_roundtrip");
    const char *bad[][4] = {
        {"--runs", "0", NULL},
        {"--runs", "65", NULL},
        {"--runs", "x", NULL},
        {"--runs", "2", "--vs", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct cp_run r;
        if (bad[i][2])
            cp_run_cli(&r, "bench", om, bad[i][0], bad[i][1], bad[i][2], om, NULL);
        else
            cp_run_cli(&r, "bench", om, bad[i][0], bad[i][1], NULL);
        char *err = ct_fails_2(&r);
        cr_expect_not_null(strstr(err, "--runs"), "case %zu: %s", i, err);
        free(err);
    }
    free(om);
}
