/* The interference probe (runner/probe.h): the workload runs and takes
 * time on one thread and on several, its floor is the value at rank n/100
 * (the minimum below 200 values) whatever the order and without touching
 * the input, the undisturbed test is inclusive at exactly 1.15x the floor,
 * an iteration is judged by the probes within its window (2 ms of
 * iterations, 1 to 16 on each side),
 * the floor file survives a round trip and reads as 0 when missing or
 * damaged; and the per-iteration counter "probe_ns" goes into a trace
 * (cp_trace_store_add_counter_series) and comes back aligned with the
 * latency samples (cp_trace_store_run_metrics), or not at all when an
 * iteration lacks it. No assertion on how long anything takes. */
#include "runner/probe.h"
#include "trace/trace.h"

#include "support/cli.h"
#include "support/db.h"

#include <criterion/criterion.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

TestSuite(probe, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close);

/* ---- the workload ------------------------------------------------------------------------ */

Test(probe, create_rejects_fewer_than_one_thread)
{
    int bad[] = {0, -1};
    for (size_t i = 0; i < 2; i++) {
        struct cp_diag d;
        cp_diag_init(&d);
        struct cp_probe *p = (struct cp_probe *)&d; /* must be reset to NULL */
        cr_assert_eq(cp_probe_create(bad[i], &p, &d), CP_ERR_INVALID, "%d threads", bad[i]);
        cr_assert_null(p);
        cr_assert_not_null(strstr(d.msg, "thread"), "message: %s", d.msg);
    }
    cp_probe_free(NULL); /* a no-op */
}

Test(probe, a_run_takes_some_time_on_one_and_on_two_threads)
{
    for (int threads = 1; threads <= 2; threads++) {
        struct cp_diag d;
        cp_diag_init(&d);
        struct cp_probe *p = NULL;
        cr_assert_eq(cp_probe_create(threads, &p, &d), CP_OK, "%s", d.msg);
        cr_assert_not_null(p);
        for (int k = 0; k < 3; k++)
            cr_assert_gt(cp_probe_run(p), 0, "%d threads, run %d", threads, k);
        cp_probe_free(p);
    }
}

/* ---- the floor --------------------------------------------------------------------------- */

/* A deterministic shuffle (an LCG drives Fisher-Yates). */
static void shuffle(uint64_t *v, size_t n, uint32_t seed)
{
    uint32_t s = seed;
    for (size_t i = n; i > 1; i--) {
        s = s * 1664525u + 1013904223u;
        size_t j = (s >> 8) % i;
        uint64_t t = v[i - 1];
        v[i - 1] = v[j];
        v[j] = t;
    }
}

Test(probe, floor_of_nothing_is_zero)
{
    cr_assert_eq(cp_probe_floor(NULL, 0), 0);
    uint64_t one = 1234;
    cr_assert_eq(cp_probe_floor(&one, 0), 0);
    cr_assert_eq(cp_probe_floor(&one, 1), 1234);
}

Test(probe, floor_below_200_values_is_the_minimum)
{
    size_t sizes[] = {2, 17, 99, 100, 150, 199};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        size_t n = sizes[k];
        uint64_t v[199];
        for (size_t i = 0; i < n; i++)
            v[i] = 10000 + 7 * i;
        shuffle(v, n, (uint32_t)n);
        cr_expect_eq(cp_probe_floor(v, n), 10000, "n = %zu: %llu", n,
                     (unsigned long long)cp_probe_floor(v, n));
    }
}

Test(probe, floor_of_200_values_is_the_third_lowest)
{
    uint64_t v[200];
    for (size_t i = 0; i < 200; i++)
        v[i] = 1 + i;
    shuffle(v, 200, 9);
    cr_assert_eq(cp_probe_floor(v, 200), 3); /* rank 200/100 = 2 */
}

Test(probe, floor_of_1000_ignores_a_few_absurdly_low_readings_and_keeps_the_input)
{
    enum { N = 1000 };
    uint64_t *v = malloc(N * sizeof *v), *copy = malloc(N * sizeof *copy);
    cr_assert(v && copy);
    for (size_t i = 0; i < N; i++)
        v[i] = 10000 + i; /* 10000 .. 10999 */
    for (size_t i = 0; i < 5; i++)
        v[100 * i + 3] = 1 + i; /* five freak readings replace 10003, 10103, ... */
    shuffle(v, N, 42);
    memcpy(copy, v, N * sizeof *v);
    /* Sorted: 1..5, then 10000, 10001, 10002, 10004, 10005, 10006, ...;
     * rank 10 is the sixth normal value, 10006. */
    cr_assert_eq(cp_probe_floor(v, N), 10006);
    cr_assert_eq(memcmp(v, copy, N * sizeof *v), 0, "cp_probe_floor changed its input");
    free(v);
    free(copy);
}

/* ---- undisturbed or not ------------------------------------------------------------------ */

Test(probe, exactly_1_15_times_the_floor_is_undisturbed_and_just_above_is_not)
{
    /* Floors whose 1.15x product is exact in double arithmetic. */
    uint64_t floors[] = {1000, 2000, 10000, 20000};
    for (size_t i = 0; i < sizeof floors / sizeof *floors; i++) {
        uint64_t f = floors[i], edge = f * 115 / 100;
        cr_assert(cp_probe_undisturbed(f, f), "floor %llu", (unsigned long long)f);
        cr_assert(cp_probe_undisturbed(f / 2, f), "below the floor");
        cr_assert(cp_probe_undisturbed(edge, f), "%llu against floor %llu is exactly 1.15x",
                  (unsigned long long)edge, (unsigned long long)f);
        cr_assert_not(cp_probe_undisturbed(edge + 1, f), "%llu against floor %llu",
                      (unsigned long long)(edge + 1), (unsigned long long)f);
        cr_assert_not(cp_probe_undisturbed(f * 16 / 10, f), "1.6x the floor");
    }
}

/* "at most CP_PROBE_TOLERANCE times the floor" for every floor, including
 * those (100, 6860 ns, ...) where 1.15 * floor in double is a hair below
 * the exact product. */
Test(probe, undisturbed_boundary_is_exact_for_every_floor)
{
    uint64_t floors[] = {100, 6860, 10020, 9980};
    for (size_t i = 0; i < sizeof floors / sizeof *floors; i++) {
        uint64_t f = floors[i], edge = f * 115 / 100;
        cr_assert_eq(edge * 100, f * 115, "the test needs an exact edge");
        cr_expect(cp_probe_undisturbed(edge, f), "%llu ns is exactly 1.15x the floor %llu ns",
                  (unsigned long long)edge, (unsigned long long)f);
        cr_expect_not(cp_probe_undisturbed(edge + 1, f), "%llu against %llu",
                      (unsigned long long)(edge + 1), (unsigned long long)f);
    }
}

Test(probe, a_zero_floor_finds_everything_undisturbed)
{
    cr_assert(cp_probe_undisturbed(0, 0));
    cr_assert(cp_probe_undisturbed(1, 0));
    cr_assert(cp_probe_undisturbed(UINT64_MAX, 0));
    uint64_t v[] = {5, 50000, UINT64_MAX};
    cr_assert_eq(cp_probe_count_undisturbed(v, 3, 0), 3);
}

Test(probe, count_undisturbed)
{
    uint64_t v[] = {1000, 1150, 1151, 2000, 900, 1600, 1100};
    cr_assert_eq(cp_probe_count_undisturbed(v, 7, 1000), 4); /* 1000, 1150, 900, 1100 */
    cr_assert_eq(cp_probe_count_undisturbed(v, 3, 1000), 2);
    cr_assert_eq(cp_probe_count_undisturbed(v, 0, 1000), 0);
    cr_assert_eq(cp_probe_count_undisturbed(v, 7, 2000), 7);
    cr_assert_eq(cp_probe_count_undisturbed(v, 7, 100), 0);
}

/* ---- the window an iteration is judged by ----------------------------------------------- */

Test(probe, the_window_spans_2_ms_of_iterations_between_1_and_16)
{
    cr_assert_eq(cp_probe_window(0), 1, "unknown duration");
    cr_assert_eq(cp_probe_window(-5), 1);
    cr_assert_eq(cp_probe_window(NAN), 1, "NaN");
    cr_assert_eq(cp_probe_window(10e6), 1, "10 ms iterations: still the neighbours");
    cr_assert_eq(cp_probe_window(2e6), 1);
    cr_assert_eq(cp_probe_window(1.9e6), 2);
    cr_assert_eq(cp_probe_window(1e6), 2);
    cr_assert_eq(cp_probe_window(0.4e6), 5, "0.4 ms: five on each side");
    cr_assert_eq(cp_probe_window(0.39e6), 6);
    cr_assert_eq(cp_probe_window(125000), 16);
    cr_assert_eq(cp_probe_window(100000), 16, "capped");
    cr_assert_eq(cp_probe_window(3), 16);
    cr_assert_eq(cp_probe_window(INFINITY), 1, "infinitely long iterations");
}

/* iteration i is undisturbed when probes i-w .. i+w (clipped) all are */
static size_t mark_by_hand(const uint64_t *p, size_t n, uint64_t floor, size_t w, bool *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t lo = i > w ? i - w : 0, hi = i + w < n ? i + w : n - 1;
        bool ok = true;
        for (size_t j = lo; j <= hi; j++)
            ok = ok && cp_probe_undisturbed(p[j], floor);
        out[i] = ok;
        k += ok;
    }
    return k;
}

Test(probe, mark_clears_the_window_around_each_disturbed_probe)
{
    uint64_t p[20];
    for (size_t i = 0; i < 20; i++)
        p[i] = 1000;
    bool out[20];
    cr_assert_eq(cp_probe_mark(p, 20, 1000, 3, out), 20);
    for (size_t i = 0; i < 20; i++)
        cr_assert(out[i]);
    p[10] = 1600;
    cr_assert_eq(cp_probe_mark(p, 20, 1000, 3, out), 13); /* 7..13 disturbed */
    for (size_t i = 0; i < 20; i++)
        cr_assert_eq(out[i], i < 7 || i > 13, "iteration %zu", i);
    cr_assert_eq(cp_probe_mark(p, 20, 1000, 0, out), 19, "w 0: its own probe only");
    cr_assert_eq(cp_probe_mark(p, 20, 1000, 1, NULL), 17, "out may be NULL");
    /* clipped at both ends */
    p[10] = 1000;
    p[0] = 1600;
    p[19] = 1600;
    cr_assert_eq(cp_probe_mark(p, 20, 1000, 2, out), 14); /* 0..2 and 17..19 */
    cr_assert(!out[0] && !out[2] && out[3] && out[16] && !out[17] && !out[19]);
    /* a window as wide as the run: one disturbed probe spoils all */
    cr_assert_eq(cp_probe_mark(p, 20, 1000, 19, NULL), 0);
    cr_assert_eq(cp_probe_mark(p, 20, 1000, 100, NULL), 0);
    /* floor 0: nothing is disturbed */
    cr_assert_eq(cp_probe_mark(p, 20, 0, 5, NULL), 20);
    cr_assert_eq(cp_probe_mark(p, 0, 1000, 5, NULL), 0);
}

Test(probe, mark_agrees_with_judging_each_window_by_hand)
{
    uint32_t s = 12345;
    for (int round = 0; round < 400; round++) {
        uint64_t p[64];
        bool got[64], want[64];
        s = s * 1664525u + 1013904223u;
        size_t n = 1 + (s >> 10) % 64;
        s = s * 1664525u + 1013904223u;
        size_t w = (s >> 10) % 24;
        s = s * 1664525u + 1013904223u;
        uint32_t rate = 1 + (s >> 10) % 12; /* 1 in rate probes disturbed */
        for (size_t i = 0; i < n; i++) {
            s = s * 1664525u + 1013904223u;
            p[i] = (s >> 10) % rate == 0 ? 1200 + (s >> 20) % 900 : 900 + (s >> 20) % 250;
        }
        size_t k_hand = mark_by_hand(p, n, 1000, w, want);
        size_t k = cp_probe_mark(p, n, 1000, w, got);
        cr_assert_eq(k, k_hand, "round %d: n %zu, w %zu", round, n, w);
        for (size_t i = 0; i < n; i++)
            cr_assert_eq(got[i], want[i], "round %d: n %zu, w %zu, iteration %zu", round, n, w, i);
    }
}

/* ---- the floor file ---------------------------------------------------------------------- */

Test(probe, floor_file_round_trip)
{
    char *path = cp_t_path("probe-floor-x-t2");
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_probe_floor_save(path, 9876, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_probe_floor_load(path), 9876);
    /* saving again replaces the value */
    cr_assert_eq(cp_probe_floor_save(path, 8123, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_probe_floor_load(path), 8123);
    /* values beyond 32 bits survive */
    cr_assert_eq(cp_probe_floor_save(path, 5000000000ull, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_probe_floor_load(path), 5000000000ull);
    size_t len = 0;
    char *text = (char *)cp_t_read_file(path, &len);
    cr_assert_not_null(text);
    cr_assert(strncmp(text, "floor_ns 5000000000\nexe ", 24) == 0, "%s", text);
    cr_assert_not_null(strstr(text, "\nsaved_at "), "%s", text);
    free(text);
    free(path);
}

/* The file as cp_probe_floor_save wrote it, with its exe or saved_at line
 * replaced. */
static void rewrite_floor(const char *path, const char *exe, long long saved_at)
{
    size_t len = 0;
    char *text = (char *)cp_t_read_file(path, &len);
    cr_assert_not_null(text);
    char cur_exe[128];
    long long cur_saved;
    unsigned long long v;
    cr_assert_eq(sscanf(text, "floor_ns %llu exe %127s saved_at %lld", &v, cur_exe, &cur_saved), 3);
    char out[256];
    int n = snprintf(out, sizeof out, "floor_ns %llu\nexe %s\nsaved_at %lld\n", v,
                     exe ? exe : cur_exe, saved_at);
    cr_assert(cp_t_write_file(path, out, (size_t)n));
    free(text);
}

Test(probe, a_floor_from_another_binary_or_too_old_is_no_hint)
{
    char *path = cp_t_path("probe-floor-y-t1");
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_probe_floor_save(path, 7000, &d), CP_OK, "%s", d.msg);
    long long now = (long long)time(NULL);
    rewrite_floor(path, NULL, now - 10);
    cr_assert_eq(cp_probe_floor_load(path), 7000, "a recent floor of this binary is a hint");
    rewrite_floor(path, NULL, now - CP_PROBE_FLOOR_MAX_AGE_S - 5);
    cr_assert_eq(cp_probe_floor_load(path), 0, "too old");
    rewrite_floor(path, NULL, now + 3600);
    cr_assert_eq(cp_probe_floor_load(path), 0, "from the future: the clock moved");
    rewrite_floor(path, "1:2:3:4", now);
    cr_assert_eq(cp_probe_floor_load(path), 0, "another binary");
    free(path);
}

Test(probe, a_missing_floor_file_reads_as_zero)
{
    char *path = cp_t_path("no-such-file");
    cr_assert_eq(cp_probe_floor_load(path), 0);
    free(path);
    cr_assert_eq(cp_probe_floor_load("/nonexistent-dir/probe-floor"), 0);
}

Test(probe, a_damaged_floor_file_reads_as_zero)
{
    const char *texts[] = {
        "",       "garbage\n",       "floor_ns\n", "floor_ns abc\n", "floor 1234\n",
        "1234\n", "\x01\x02\xff\xfe"};
    char *path = cp_t_path("floor");
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        cr_assert(cp_t_write_file(path, texts[i], strlen(texts[i])));
        cr_assert_eq(cp_probe_floor_load(path), 0, "file text '%s'", texts[i]);
    }
    /* a folder is no file either */
    cr_assert_eq(cp_probe_floor_load(cp_t_dir), 0);
    free(path);
}

Test(probe, saving_into_a_missing_folder_fails_with_a_message)
{
    char *path = cp_t_path("missing/probe-floor");
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_neq(cp_probe_floor_save(path, 1000, &d), CP_OK);
    cr_assert_neq(d.msg[0], '\0');
    cr_assert_eq(cp_probe_floor_load(path), 0);
    free(path);
}

/* ---- probe_ns in a trace ----------------------------------------------------------------- */

static const struct cp_trace_run_info run_info = {
    .kind = "bench",
    .model_path = "/models/m.om",
    .model_hash = "h",
    .config_id = "c0",
    .threads = 2,
    .batch = 1,
    .iterations = 10,
};

/* Begin a run with latency samples 1000 + i for iterations 0..n-1. */
static int64_t run_with_samples(struct cp_trace_store *s, size_t n)
{
    struct cp_diag d;
    cp_diag_init(&d);
    int64_t run = 0;
    cr_assert_eq(cp_trace_store_begin_run(s, &run_info, &run, &d), CP_OK, "%s", d.msg);
    uint64_t ns[64];
    cr_assert_leq(n, 64);
    for (size_t i = 0; i < n; i++)
        ns[i] = 1000 + i;
    cr_assert_eq(cp_trace_store_add_samples(s, run, 0, ns, n, &d), CP_OK, "%s", d.msg);
    return run;
}

static void read_metrics(const char *path, int64_t run, struct cp_run_metrics *m)
{
    struct cp_trace_store *s = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_store_open_ro(path, &s, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_trace_store_run_metrics(s, run, m, &d), CP_OK, "%s", d.msg);
    cp_trace_store_close(s);
}

Test(probe, probe_ns_reads_back_aligned_with_the_samples)
{
    char *path = cp_t_path("t.db");
    struct cp_trace_store *s = cp_t_trace_store(path, NULL, NULL);
    cr_assert_not_null(s);
    struct cp_diag d;
    cp_diag_init(&d);
    int64_t r1 = run_with_samples(s, 10), r2 = run_with_samples(s, 10);
    double p1[10], p2[10];
    for (size_t i = 0; i < 10; i++) {
        p1[i] = 5000 + 10 * (double)i;
        p2[i] = 9000 + (double)i;
    }
    /* in two pieces, the later iterations first: the order of insertion
     * does not matter, the iteration does */
    cr_assert_eq(cp_trace_store_add_counter_series(s, r1, "probe_ns", 6, p1 + 6, 4, &d), CP_OK,
                 "%s", d.msg);
    cr_assert_eq(cp_trace_store_add_counter_series(s, r1, "probe_ns", 0, p1, 6, &d), CP_OK, "%s",
                 d.msg);
    cr_assert_eq(cp_trace_store_add_counter_series(s, r2, "probe_ns", 0, p2, 10, &d), CP_OK, "%s",
                 d.msg);
    /* another counter per iteration, and one per run, change nothing */
    double other[10] = {0};
    cr_assert_eq(cp_trace_store_add_counter_series(s, r1, "cycles", 0, other, 10, &d), CP_OK);
    cr_assert_eq(cp_trace_store_add_counter(s, r1, -1, "probe_ns", 1.0, 0, &d), CP_OK);
    /* nothing at all is fine too */
    cr_assert_eq(cp_trace_store_add_counter_series(s, r1, "probe_ns", 0, p1, 0, &d), CP_OK);
    cp_trace_store_close(s);

    struct cp_run_metrics m;
    read_metrics(path, r1, &m);
    cr_assert_eq(m.n, 10);
    cr_assert_not_null(m.probe_ns);
    for (size_t i = 0; i < 10; i++) {
        cr_assert_eq(m.latency_ns[i], 1000 + i);
        cr_assert_eq(m.probe_ns[i], 5000 + 10 * i, "iteration %zu: %llu", i,
                     (unsigned long long)m.probe_ns[i]);
    }
    cp_run_metrics_release(&m);
    read_metrics(path, r2, &m);
    cr_assert_not_null(m.probe_ns);
    for (size_t i = 0; i < 10; i++)
        cr_assert_eq(m.probe_ns[i], 9000 + i);
    cp_run_metrics_release(&m);
    free(path);
}

Test(probe, a_run_where_one_iteration_lacks_its_probe_has_none)
{
    char *path = cp_t_path("t.db");
    struct cp_trace_store *s = cp_t_trace_store(path, NULL, NULL);
    cr_assert_not_null(s);
    struct cp_diag d;
    cp_diag_init(&d);
    int64_t gap = run_with_samples(s, 10), shifted = run_with_samples(s, 10),
            none = run_with_samples(s, 10);
    double p[11];
    for (size_t i = 0; i < 11; i++)
        p[i] = 7000 + (double)i;
    /* iterations 0..3 and 5..9: 4 is missing */
    cr_assert_eq(cp_trace_store_add_counter_series(s, gap, "probe_ns", 0, p, 4, &d), CP_OK);
    cr_assert_eq(cp_trace_store_add_counter_series(s, gap, "probe_ns", 5, p + 5, 5, &d), CP_OK);
    /* iterations 1..10: 0 is missing, 10 has no sample */
    cr_assert_eq(cp_trace_store_add_counter_series(s, shifted, "probe_ns", 1, p, 10, &d), CP_OK);
    cp_trace_store_close(s);

    int64_t runs[] = {gap, shifted, none};
    for (size_t k = 0; k < 3; k++) {
        struct cp_run_metrics m;
        read_metrics(path, runs[k], &m);
        cr_assert_eq(m.n, 10, "run %lld", (long long)runs[k]);
        cr_assert_null(m.probe_ns, "run %lld", (long long)runs[k]);
        cp_run_metrics_release(&m);
    }
    free(path);
}

Test(probe, a_counter_series_for_a_missing_run_or_out_of_range_is_an_error)
{
    char *path = cp_t_path("t.db");
    struct cp_trace_store *s = cp_t_trace_store(path, NULL, NULL);
    cr_assert_not_null(s);
    int64_t run = run_with_samples(s, 3);
    double v[3] = {1, 2, 3};
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_store_add_counter_series(s, run + 5, "probe_ns", 0, v, 3, &d),
                 CP_ERR_INVALID);
    cr_assert_neq(d.msg[0], '\0');
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_store_add_counter_series(s, -1, "probe_ns", 0, v, 3, &d), CP_ERR_INVALID);
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_store_add_counter_series(s, run, NULL, 0, v, 3, &d), CP_ERR_INVALID);
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_store_add_counter_series(s, run, "probe_ns", -1, v, 3, &d),
                 CP_ERR_INVALID);
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_store_add_counter_series(s, run, "probe_ns", INT32_MAX - 1, v, 3, &d),
                 CP_ERR_INVALID);
    /* none of them wrote anything (the run's start is begin_run's) */
    int64_t rows = -1;
    cr_assert(cp_t_sql_int(
        cp_trace_store_db(s),
        "SELECT count(*) FROM counters WHERE name <> '" CP_TRACE_STARTED_COUNTER "'", &rows));
    cr_assert_eq(rows, 0);
    cp_trace_store_close(s);
    free(path);
}
