/* `cannprof validate` with the interference probe: on traces seeded through
 * the trace store API (latency samples plus a "probe_ns" counter per
 * iteration) whose answer is known, timing metrics compare only the
 * iterations whose probes (their own and those within 2 ms: at 10 ms an
 * iteration, the one before and the one after) are at most 1.15x the lower
 * of the two runs' floors: a disturbed stretch of the after run does not pass for a
 * regression, a real slowdown still does, a run busy throughout gets no
 * timing verdict (memory still judged), a run without probes, --ab traces
 * and --all-iterations compare every iteration, and with different thread
 * counts each run keeps its own floor. Nothing here is measured. */
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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(cli_validate_probe, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close);

enum { N = 200 };

/* One bench run: normal latency around mean_ms; a probe per iteration
 * within 1% above floor_ns; iterations [dist_from, dist_from + dist_n)
 * disturbed: latency times dist_slow and probe floor_ns * dist_probe. */
struct probe_run {
    double mean_ms, sd_ms;
    unsigned long seed;
    int threads;                    /* 2 when 0 */
    double floor_ns;                /* 0: no probe at all */
    size_t dist_from, dist_n;       /* the disturbed stretch */
    double dist_slow;               /* latency factor in it */
    double dist_probe;              /* probe factor in it */
    size_t spike_from, spike_every; /* single probes at 1.6x: spike_from, +every, ... */
    long missing_probe;             /* an iteration without its probe; -1: none */
    uint64_t arena_bytes;           /* 1 MiB when 0 */
};

/* The usual undisturbed run: 10 ms +- 0.1, probe floor 10 us. */
static struct probe_run quiet(unsigned long seed)
{
    return (struct probe_run){.mean_ms = 10,
                              .sd_ms = 0.1,
                              .seed = seed,
                              .floor_ns = 10000,
                              .dist_slow = 1,
                              .dist_probe = 1,
                              .missing_probe = -1};
}

/* Add one run described by f to the open store s. OUT: the run id. */
static int64_t add_run(struct cp_trace_store *s, const struct probe_run *f)
{
    struct cp_trace_run_info info = {
        .kind = "bench",
        .model_path = "/models/m.om",
        .model_hash = "h",
        .config_id = "c0",
        .threads = f->threads ? f->threads : 2,
        .batch = 1,
        .iterations = N,
        .weight_bytes = 1 << 20,
        .arena_bytes = f->arena_bytes ? f->arena_bytes : 1 << 20,
    };
    struct cp_diag d;
    cp_diag_init(&d);
    int64_t run = 0;
    cr_assert_eq(cp_trace_store_begin_run(s, &info, &run, &d), CP_OK, "%s", d.msg);
    uint64_t ns[N];
    double probe[N];
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, f->seed);
    for (size_t i = 0; i < N; i++) {
        bool hit = i >= f->dist_from && i < f->dist_from + f->dist_n;
        double ms = f->mean_ms + gsl_ran_gaussian(r, f->sd_ms);
        ns[i] = (uint64_t)(ms * (hit ? f->dist_slow : 1.0) * 1e6);
        double p = f->floor_ns * (1 + 0.01 * gsl_rng_uniform(r));
        probe[i] = hit ? f->floor_ns * f->dist_probe * (1 + 0.01 * gsl_rng_uniform(r)) : p;
        if (f->spike_every && i >= f->spike_from && (i - f->spike_from) % f->spike_every == 0)
            probe[i] = f->floor_ns * 1.6;
    }
    gsl_rng_free(r);
    cr_assert_eq(cp_trace_store_add_samples(s, run, 0, ns, N, &d), CP_OK, "%s", d.msg);
    if (f->floor_ns > 0) {
        size_t cut = f->missing_probe >= 0 ? (size_t)f->missing_probe : N;
        if (cut > 0)
            cr_assert_eq(cp_trace_store_add_counter_series(s, run, "probe_ns", 0, probe, cut, &d),
                         CP_OK, "%s", d.msg);
        if (cut + 1 < N)
            cr_assert_eq(cp_trace_store_add_counter_series(s, run, "probe_ns", (int32_t)cut + 1,
                                                           probe + cut + 1, N - cut - 1, &d),
                         CP_OK, "%s", d.msg);
    }
    return run;
}

/* <scratch>/NAME holding one run made from f. */
static char *make_trace(const char *name, const struct probe_run *f)
{
    char *p = cp_t_path(name);
    struct cp_trace_store *s = cp_t_trace_store(p, NULL, NULL);
    cr_assert_not_null(s);
    add_run(s, f);
    cp_trace_store_close(s);
    return p;
}

/* `validate --before A --after B [extra] --json`: its exit code and
 * parsed output. */
static json_t *validate_json(const char *a, const char *b, const char *extra, int *exit_code)
{
    struct cp_run r;
    if (extra)
        cp_run_cli(&r, "validate", "--before", a, "--after", b, "--json", extra, NULL);
    else
        cp_run_cli(&r, "validate", "--before", a, "--after", b, "--json", NULL);
    cr_assert_eq(r.signal, 0, "signal %d: %s", r.signal, r.err);
    cr_assert(r.exit_code == 0 || r.exit_code == 1 || r.exit_code == 4, "exit %d: %s", r.exit_code,
              r.err);
    *exit_code = r.exit_code;
    json_t *j = ct_json(r.out);
    cp_run_release(&r);
    return j;
}

static const char *verdict_of(const json_t *j, const char *metric)
{
    json_t *m = json_object_get(json_object_get(j, "metrics"), metric);
    cr_assert_not_null(m, "no metric %s", metric);
    return json_string_value(json_object_get(m, "verdict"));
}

static const char *str_of(const json_t *j, const char *key)
{
    const char *s = json_string_value(json_object_get(j, key));
    cr_assert_not_null(s, "'%s' is missing or not a string", key);
    return s;
}

static const json_t *side(const json_t *j, const char *which)
{
    const json_t *s = json_object_get(j, which);
    cr_assert(json_is_object(s), "no '%s' object", which);
    return s;
}

/* The after run of test (a): 40% of its iterations (80 of 200, in one
 * stretch) 15% slower, with a probe at 1.6x the floor. With 10 ms
 * iterations the window is one iteration each side: the two neighbours of
 * the stretch go too, 118 stay. */
enum { KEPT = N - 82 };
static struct probe_run disturbed_after(void)
{
    struct probe_run b = quiet(2);
    b.dist_from = 60;
    b.dist_n = 80;
    b.dist_slow = 1.15;
    b.dist_probe = 1.6;
    return b;
}

Test(cli_validate_probe, a_disturbed_stretch_is_left_out_and_the_runs_are_unchanged)
{
    struct probe_run a = quiet(1), b = disturbed_after();
    char *pa = make_trace("a.db", &a), *pb = make_trace("b.db", &b);
    int rc = -1;
    json_t *j = validate_json(pa, pb, NULL, &rc);
    cr_expect_eq(rc, 0, "exit %d", rc);
    cr_expect_str_eq(str_of(j, "iterations"), "undisturbed");
    cr_expect_str_eq(verdict_of(j, "latency"), "unchanged");
    cr_expect_str_eq(verdict_of(j, "p99"), "unchanged");
    cr_expect_str_eq(verdict_of(j, "throughput"), "unchanged");
    cr_expect_str_eq(verdict_of(j, "memory"), "unchanged");
    cr_expect_str_eq(str_of(j, "verdict"), "unchanged");
    const json_t *sb = side(j, "before"), *sa = side(j, "after");
    cr_expect_eq(ct_num(sb, "iterations"), N);
    cr_expect_eq(ct_num(sb, "undisturbed"), N);
    cr_expect_eq(ct_num(sb, "samples"), N);
    cr_expect_eq(ct_num(sa, "iterations"), N);
    cr_expect_eq(ct_num(sa, "undisturbed"), KEPT);
    cr_expect_eq(ct_num(sa, "samples"), KEPT, "only the undisturbed ones are compared");
    for (int s = 0; s < 2; s++) {
        double f = ct_num(s ? sa : sb, "probe_floor_ns");
        cr_expect(f >= 10000 && f <= 10100, "probe_floor_ns %g", f);
    }
    json_t *lat = json_object_get(json_object_get(j, "metrics"), "latency");
    cr_expect_eq(ct_num(lat, "n_before"), N);
    cr_expect_eq(ct_num(lat, "n_after"), KEPT);
    json_decref(j);

    /* every iteration: the disturbed stretch shows as a regression */
    j = validate_json(pa, pb, "--all-iterations", &rc);
    cr_expect_eq(rc, 1, "exit %d", rc);
    cr_expect_str_eq(str_of(j, "iterations"), "all");
    cr_expect_not_null(strstr(str_of(j, "iterations_why"), "--all-iterations"));
    cr_expect_str_eq(str_of(j, "verdict"), "regressed");
    cr_expect_str_eq(verdict_of(j, "p99"), "regressed");
    lat = json_object_get(json_object_get(j, "metrics"), "latency");
    cr_expect_eq(ct_num(lat, "n_after"), N);
    /* the counts are still reported */
    cr_expect_eq(ct_num(side(j, "after"), "undisturbed"), KEPT);
    cr_expect_eq(ct_num(side(j, "after"), "samples"), N);
    json_decref(j);
    free(pa);
    free(pb);
}

Test(cli_validate_probe, short_iterations_are_judged_by_the_probes_2_ms_around_them)
{
    /* 0.45 ms iterations: five probes on each side. One probe in twenty at
     * 1.6x the floor (iterations 10, 30, ..., 190) takes the eleven
     * iterations around it along: 110 go, 90 stay. */
    struct probe_run a = quiet(13), b = quiet(14);
    a.mean_ms = b.mean_ms = 0.45;
    a.sd_ms = b.sd_ms = 0.0045;
    b.spike_from = 10;
    b.spike_every = 20;
    char *pa = make_trace("a.db", &a), *pb = make_trace("b.db", &b);
    int rc = -1;
    json_t *j = validate_json(pa, pb, NULL, &rc);
    cr_expect_eq(rc, 0, "exit %d", rc);
    cr_expect_str_eq(str_of(j, "iterations"), "undisturbed");
    cr_expect_eq(ct_num(side(j, "before"), "undisturbed"), N);
    cr_expect_eq(ct_num(side(j, "after"), "undisturbed"), 90);
    cr_expect_eq(ct_num(side(j, "after"), "samples"), 90);
    json_decref(j);
    free(pb);

    /* at 10 ms an iteration, the window is one each side: 3 go per spike */
    b.mean_ms = 10;
    b.sd_ms = 0.1;
    a.mean_ms = 10;
    a.sd_ms = 0.1;
    free(pa);
    pa = make_trace("a10.db", &a);
    pb = make_trace("b10.db", &b);
    j = validate_json(pa, pb, NULL, &rc);
    cr_expect_eq(ct_num(side(j, "after"), "undisturbed"), N - 30);
    json_decref(j);
    free(pa);
    free(pb);
}

Test(cli_validate_probe, a_real_slowdown_of_undisturbed_iterations_is_a_regression)
{
    struct probe_run a = quiet(3), b = disturbed_after();
    b.mean_ms = 10.8; /* +8% */
    b.dist_n = 60;    /* 30% disturbed, slower still: 62 left out */
    b.seed = 4;
    char *pa = make_trace("a.db", &a), *pb = make_trace("b.db", &b);
    int rc = -1;
    json_t *j = validate_json(pa, pb, NULL, &rc);
    cr_expect_eq(rc, 1, "exit %d", rc);
    cr_expect_str_eq(str_of(j, "iterations"), "undisturbed");
    cr_expect_eq(ct_num(side(j, "after"), "undisturbed"), N - 62);
    cr_expect_str_eq(verdict_of(j, "latency"), "regressed");
    cr_expect_str_eq(verdict_of(j, "throughput"), "regressed");
    cr_expect_str_eq(str_of(j, "verdict"), "regressed");
    double delta = ct_num(json_object_get(json_object_get(j, "metrics"), "latency"), "delta_pct");
    cr_expect(delta > 6.5 && delta < 9.5, "delta %g: the undisturbed slowdown is 8%%", delta);
    json_decref(j);
    free(pa);
    free(pb);
}

/* The after run was made while a neighbour competed throughout: every
 * probe at 1.5x the before run's floor (its own floor is that busy
 * level), and its latency 15% worse. */
static struct probe_run busy_after(void)
{
    struct probe_run b = quiet(6);
    b.floor_ns = 15000;
    b.mean_ms = 11.5;
    return b;
}

Test(cli_validate_probe, a_run_busy_throughout_gets_no_timing_verdict)
{
    struct probe_run a = quiet(5), b = busy_after();
    char *pa = make_trace("a.db", &a), *pb = make_trace("b.db", &b);
    int rc = -1;
    json_t *j = validate_json(pa, pb, NULL, &rc);
    cr_expect_eq(rc, 4, "exit %d: a busy machine is no regression, and no verdict either", rc);
    cr_expect_str_eq(str_of(j, "iterations"), "too-few-undisturbed");
    const char *timing[] = {"latency", "p99", "throughput"};
    for (size_t i = 0; i < 3; i++) {
        cr_expect_str_eq(verdict_of(j, timing[i]), "inconclusive", "%s", timing[i]);
        json_t *m = json_object_get(json_object_get(j, "metrics"), timing[i]);
        cr_expect(json_is_null(json_object_get(m, "samples_needed")), "%s", timing[i]);
        cr_expect_eq(ct_num(m, "n_after"), N, "all iterations compared");
    }
    cr_expect_str_eq(verdict_of(j, "memory"), "unchanged", "memory is still judged");
    cr_expect_str_eq(str_of(j, "verdict"), "inconclusive");
    const json_t *sb = side(j, "before"), *sa = side(j, "after");
    cr_expect_eq(ct_num(sa, "undisturbed"), 0);
    cr_expect_eq(ct_num(sb, "undisturbed"), N);
    cr_expect_eq(ct_num(sa, "samples"), N);
    double fa = ct_num(sa, "probe_floor_ns");
    cr_expect(fa >= 15000 && fa <= 15150, "after's own floor %g", fa);
    json_decref(j);

    /* the note names the run */
    struct cp_run r;
    cp_run_cli(&r, "validate", "--before", pa, "--after", pb, NULL);
    cr_expect_eq(r.exit_code, 4, "%s", r.err);
    ct_assert_mentions(r.out, "after run", "undisturbed", "busy", NULL);
    cr_expect_null(strstr(r.out, "before run"), "%s", r.out);
    cp_run_release(&r);
    free(pb);

    /* memory still fails the gate */
    b.arena_bytes = 4 << 20;
    pb = make_trace("b2.db", &b);
    j = validate_json(pa, pb, NULL, &rc);
    cr_expect_eq(rc, 1, "exit %d", rc);
    cr_expect_str_eq(verdict_of(j, "memory"), "regressed");
    cr_expect_str_eq(verdict_of(j, "latency"), "inconclusive");
    cr_expect_str_eq(str_of(j, "verdict"), "regressed");
    json_decref(j);

    /* and the other way round: the before run was the busy one */
    j = validate_json(pb, pa, NULL, &rc);
    cr_expect_str_eq(str_of(j, "iterations"), "too-few-undisturbed");
    cr_expect_eq(ct_num(side(j, "before"), "undisturbed"), 0);
    cr_expect_str_eq(verdict_of(j, "latency"), "inconclusive");
    json_decref(j);
    cp_run_cli(&r, "validate", "--before", pb, "--after", pa, NULL);
    ct_assert_mentions(r.out, "before run", NULL);
    cp_run_release(&r);
    free(pa);
    free(pb);
}

Test(cli_validate_probe, a_side_without_probes_compares_every_iteration)
{
    struct probe_run a = quiet(7), b = disturbed_after();
    a.floor_ns = 0; /* recorded with --no-probe */
    char *pa = make_trace("a.db", &a), *pb = make_trace("b.db", &b);
    int rc = -1;
    json_t *j = validate_json(pa, pb, NULL, &rc);
    cr_expect_str_eq(str_of(j, "iterations"), "all");
    const char *why = str_of(j, "iterations_why");
    cr_expect_not_null(strstr(why, "no interference probe"), "why: %s", why);
    cr_expect_not_null(strstr(why, "before"), "why: %s", why);
    cr_expect(json_is_null(json_object_get(side(j, "before"), "probe_floor_ns")));
    cr_expect(json_is_number(json_object_get(side(j, "after"), "probe_floor_ns")));
    cr_expect_eq(ct_num(side(j, "after"), "samples"), N);
    cr_expect_eq(rc, 1, "the disturbed stretch counts: exit %d", rc);
    cr_expect_str_eq(verdict_of(j, "p99"), "regressed");
    json_decref(j);

    struct cp_run r;
    cp_run_cli(&r, "validate", "--before", pa, "--after", pb, NULL);
    cr_expect(cp_t_has_line(r.out, "timing compares every iteration"), "%s", r.out);
    ct_assert_mentions(r.out, "no interference probe", NULL);
    cp_run_release(&r);
    free(pa);
    free(pb);
}

Test(cli_validate_probe, a_run_with_one_iteration_lacking_its_probe_counts_as_without)
{
    struct probe_run a = quiet(8), b = quiet(9);
    b.missing_probe = 123;
    char *pa = make_trace("a.db", &a), *pb = make_trace("b.db", &b);
    int rc = -1;
    json_t *j = validate_json(pa, pb, NULL, &rc);
    cr_expect_eq(rc, 0);
    cr_expect_str_eq(str_of(j, "iterations"), "all");
    const char *why = str_of(j, "iterations_why");
    cr_expect_not_null(strstr(why, "after run has no interference probe"), "why: %s", why);
    cr_expect(json_is_null(json_object_get(side(j, "after"), "probe_floor_ns")));
    json_decref(j);
    free(pa);
    free(pb);
}

Test(cli_validate_probe, different_thread_counts_keep_each_runs_own_floor)
{
    /* 4 threads: the probe waits for the slowest of four, its floor is
     * twice the 2-thread one; 40% of that run is disturbed. */
    struct probe_run a = quiet(10), b = disturbed_after();
    b.threads = 4;
    b.floor_ns = 20000;
    char *pa = make_trace("a.db", &a), *pb = make_trace("b.db", &b);
    int rc = -1;
    json_t *j = validate_json(pa, pb, NULL, &rc);
    cr_expect_eq(rc, 0, "exit %d", rc);
    cr_expect_str_eq(str_of(j, "iterations"), "undisturbed",
                     "against the 2-thread floor no 4-thread iteration would count");
    const json_t *sb = side(j, "before"), *sa = side(j, "after");
    cr_expect_eq(ct_num(sb, "undisturbed"), N);
    cr_expect_eq(ct_num(sa, "undisturbed"), KEPT);
    double fb = ct_num(sb, "probe_floor_ns"), fa = ct_num(sa, "probe_floor_ns");
    cr_expect(fb >= 10000 && fb <= 10100, "before floor %g", fb);
    cr_expect(fa >= 20000 && fa <= 20200, "after floor %g", fa);
    cr_expect_str_eq(verdict_of(j, "latency"), "unchanged");
    cr_expect_str_eq(verdict_of(j, "p99"), "unchanged");
    json_decref(j);

    /* the same thread count: the lower floor (the before run's) judges
     * both, and the 4-thread-like run is busy throughout */
    b.threads = 2;
    char *pc = make_trace("c.db", &b);
    j = validate_json(pa, pc, NULL, &rc);
    cr_expect_str_eq(str_of(j, "iterations"), "too-few-undisturbed");
    cr_expect_eq(ct_num(side(j, "after"), "undisturbed"), 0);
    json_decref(j);
    free(pa);
    free(pb);
    free(pc);
}

Test(cli_validate_probe, table_and_markdown_say_undisturbed)
{
    struct probe_run a = quiet(11), b = disturbed_after();
    char *pa = make_trace("a.db", &a), *pb = make_trace("b.db", &b);
    struct cp_run r;
    cp_run_cli(&r, "validate", "--before", pa, "--after", pb, NULL);
    cr_assert_eq(r.exit_code, 0, "%s %s", r.out, r.err);
    char *hb = cp_t_fmt("before: %s (run 1, 200 undisturbed of 200 samples)", pa);
    char *ha = cp_t_fmt("after:  %s (run 1, 118 undisturbed of 200 samples)", pb);
    cr_expect(cp_t_has_line(r.out, hb), "expected '%s' in:\n%s", hb, r.out);
    cr_expect(cp_t_has_line(r.out, ha), "expected '%s' in:\n%s", ha, r.out);
    cr_expect(cp_t_has_line(r.out, "timing compares undisturbed iterations only"), "%s", r.out);
    ct_assert_mentions(r.out, "before 200 of 200, after 118 of 200", "--all-iterations", NULL);
    free(hb);
    free(ha);
    cp_run_release(&r);

    cp_run_cli(&r, "validate", "--before", pa, "--after", pb, "--markdown", NULL);
    cr_assert_eq(r.exit_code, 0, "%s %s", r.out, r.err);
    ct_assert_mentions(r.out, "(200 undisturbed samples)", "(118 undisturbed samples)", NULL);
    cr_expect(cp_t_has_line(r.out, "- timing compares undisturbed iterations only"), "%s", r.out);
    cp_run_release(&r);

    /* --all-iterations: no "undisturbed" in the headers, and no such note */
    cp_run_cli(&r, "validate", "--before", pa, "--after", pb, "--all-iterations", NULL);
    cr_expect_eq(r.exit_code, 1, "%s", r.err);
    char *hall = cp_t_fmt("after:  %s (run 1, 200 of 200 samples)", pb);
    cr_expect(cp_t_has_line(r.out, hall), "expected '%s' in:\n%s", hall, r.out);
    cr_expect_not(cp_t_has_line(r.out, "timing compares undisturbed"), "%s", r.out);
    free(hall);
    cp_run_release(&r);
    free(pa);
    free(pb);
}

Test(cli_validate_probe, ab_traces_compare_the_undisturbed_rounds_paired)
{
    /* An A/B trace: each round's probe judges the round for both runs
     * (the engine stores one reading in both), so a disturbed stretch
     * leaves the same rounds out of both sides and the pairs stay whole. */
    char *p = cp_t_path("ab.db");
    struct cp_trace_store *s = cp_t_trace_store(p, NULL, NULL);
    cr_assert_not_null(s);
    struct probe_run a = quiet(12), b = disturbed_after();
    int64_t ra = add_run(s, &a), rb = add_run(s, &b);
    struct cp_diag d;
    cp_diag_init(&d);
    char ids[2][24];
    snprintf(ids[0], sizeof ids[0], "%lld", (long long)ra);
    snprintf(ids[1], sizeof ids[1], "%lld", (long long)rb);
    cr_assert_eq(cp_trace_store_set_meta(s, "ab.before_run", ids[0], &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_trace_store_set_meta(s, "ab.after_run", ids[1], &d), CP_OK, "%s", d.msg);
    cp_trace_store_close(s);
    struct cp_run r;
    cp_run_cli(&r, "validate", "--ab", p, "--json", NULL);
    cr_assert_eq(r.signal, 0);
    json_t *j = ct_json(r.out);
    cr_expect_str_eq(str_of(j, "iterations"), "undisturbed");
    cr_expect_eq(ct_num(side(j, "before"), "samples"), KEPT);
    cr_expect_eq(ct_num(side(j, "after"), "samples"), KEPT);
    json_t *lat = json_object_get(json_object_get(j, "metrics"), "latency");
    cr_expect_eq(ct_num(lat, "n_before"), ct_num(lat, "n_after"), "the rounds stay paired");
    json_decref(j);
    cp_run_release(&r);
    /* every round with --all-iterations */
    cp_run_cli(&r, "validate", "--ab", p, "--json", "--all-iterations", NULL);
    j = ct_json(r.out);
    cr_expect_str_eq(str_of(j, "iterations"), "all");
    cr_expect_eq(ct_num(side(j, "after"), "samples"), N);
    json_decref(j);
    cp_run_release(&r);
    free(p);
}

Test(cli_validate_probe, a_baseline_keeps_its_probe_and_is_compared_on_undisturbed_iterations)
{
    /* The baseline is set from a quiet run; the nightly run has a disturbed
     * stretch. The baseline's copy in the knowledge base carries its probe,
     * so validate --baseline selects as --before/--after does. */
    struct probe_run a = quiet(31), b = disturbed_after();
    char *pa = make_trace("release.db", &a), *pb = make_trace("nightly.db", &b);
    char *kb = cp_t_path("kb.sqlite");
    struct cp_run r;
    cp_run_cli(&r, "baseline", "set", "--service", "search", "--trace", pa, "--tag", "v1", "--kb",
               kb, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    cp_run_cli(&r, "validate", "--baseline", "latest", "--service", "search", "--trace", pb, "--kb",
               kb, "--json", NULL);
    cr_expect_eq(r.exit_code, 0, "%s %s", r.out, r.err);
    json_t *j = ct_json(r.out);
    cr_expect_str_eq(str_of(j, "iterations"), "undisturbed");
    cr_expect_str_eq(verdict_of(j, "latency"), "unchanged");
    cr_expect_eq(ct_num(side(j, "before"), "undisturbed"), N);
    cr_expect_eq(ct_num(side(j, "after"), "samples"), KEPT);
    json_decref(j);
    cp_run_release(&r);
    /* every iteration: the stretch is a regression against the baseline */
    cp_run_cli(&r, "validate", "--baseline", "latest", "--service", "search", "--trace", pb, "--kb",
               kb, "--all-iterations", "--no-noise-floor", NULL);
    cr_expect_eq(r.exit_code, 1, "%s %s", r.out, r.err);
    cp_run_release(&r);
    free(kb);
    free(pa);
    free(pb);
}
