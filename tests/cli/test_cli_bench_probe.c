/* `cannprof bench` with the interference probe, driven as a user would on a
 * small example model: how many iterations each of --undisturbed,
 * --iterations, --duration and --no-probe measures, the "probe" figures of
 * the JSON and text outputs and how they agree with the probe_ns counters
 * of the trace, the floor file kept in $XDG_CACHE_HOME/cannprof (written,
 * then used as the reference of the next run, a damaged one ignored), and
 * the options that do not go together (exit 2, naming them). Counts and
 * consistency only: nothing here depends on how fast or how quiet the
 * machine is (where a test needs a busy machine, a floor file of 1 ns
 * makes it one). */
#include "core/core.h"
#include "support/cli.h"
#include "support/db.h"
#include "support/run.h"
#include "runner/probe.h"
#include "stats/stats.h"
#include "trace/trace.h"

#include "cli/cli_test.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <jansson.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <time.h>

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The floor cache goes to <scratch>/cache, never to the real one. */
static void setup(void)
{
    cp_t_scratch_setup();
    char *cache = cp_t_path("cache");
    if (setenv("XDG_CACHE_HOME", cache, 1) != 0)
        abort();
    free(cache);
}

TestSuite(cli_bench_probe, .init = setup, .fini = cp_t_scratch_close);

#define MODEL "nhwc_roundtrip"

/* `bench OM --threads 1 --warmup 1 <args...>` (NULL-terminated, at most
 * 12): asserts exit 0 and returns the run (caller releases). */
static void bench_ok(struct cp_run *r, const char *om, ...)
{
    char *argv[24] = {CP_CLI, "bench", (char *)om, "--threads", "1", "--warmup", "1"};
    size_t n = 7;
    va_list ap;
    va_start(ap, om);
    const char *a;
    while ((a = va_arg(ap, const char *)) != NULL) {
        cr_assert_lt(n, 22);
        argv[n++] = (char *)a;
    }
    va_end(ap);
    argv[n] = NULL;
    cp_run_argv(r, argv);
    cr_assert_eq(r->signal, 0, "signal %d: %s", r->signal, r->err);
    cr_assert_eq(r->exit_code, 0, "exit %d: %s", r->exit_code, r->err);
}

static sqlite3 *open_db(const char *path)
{
    sqlite3 *db = NULL;
    cr_assert_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK, "%s", path);
    return db;
}

static int64_t q_int(sqlite3 *db, const char *sql)
{
    int64_t v = 0;
    cr_assert(cp_t_sql_int(db, sql, &v), "%s (see stderr)", sql);
    return v;
}

/* The path of the one probe floor file in <scratch>/cache/cannprof for
 * `threads` threads, or NULL when there is none. */
static char *floor_file(int threads)
{
    char *dir = cp_t_path("cache/cannprof");
    char *suffix = cp_t_fmt("-t%d", threads);
    char *found = NULL;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        size_t len = strlen(e->d_name), sl = strlen(suffix);
        if (strncmp(e->d_name, "probe-floor-", 12) == 0 && len > sl &&
            strcmp(e->d_name + len - sl, suffix) == 0) {
            cr_assert_null(found, "two floor files for %d threads", threads);
            found = cp_t_fmt("%s/%s", dir, e->d_name);
        }
    }
    if (d)
        closedir(d);
    free(suffix);
    free(dir);
    return found;
}

/* The value a floor file holds ("floor_ns N\n"). */
static uint64_t floor_in_file(const char *path)
{
    char *text = ct_read_text(path);
    unsigned long long v = 0;
    cr_assert_eq(sscanf(text, "floor_ns %llu", &v), 1, "floor file holds '%s'", text);
    free(text);
    return (uint64_t)v;
}

static const json_t *probe_of(const json_t *j)
{
    const json_t *p = json_object_get(j, "probe");
    cr_assert(json_is_object(p), "no \"probe\" object");
    return p;
}

/* The trace's probe_ns counters agree with the JSON: one per sample, at
 * the same iterations, positive; the floor is the value at rank n/100
 * (the minimum below 200); the undisturbed count is that of the
 * iterations whose window of probes (runner/probe.h, the window from the
 * median of the stored samples) is all at most 1.15x the reference. */
static void check_trace(const char *db_path, const json_t *j)
{
    sqlite3 *db = open_db(db_path);
    int64_t n = (int64_t)ct_num(j, "iterations");
    const json_t *p = probe_of(j);
    cr_assert_eq(q_int(db, "SELECT count(*) FROM samples"), n);
    cr_assert_eq(q_int(db, "SELECT count(*) FROM counters WHERE name = 'probe_ns'"), n);
    cr_assert_eq(q_int(db, "SELECT count(*) FROM samples s JOIN counters c ON c.run_id = s.run_id "
                           "AND c.iteration = s.iteration AND c.name = 'probe_ns'"),
                 n, "a probe_ns counter for every sample's iteration");
    cr_assert_eq(q_int(db, "SELECT count(*) FROM counters WHERE name = 'probe_ns' AND value <= 0"),
                 0);
    cr_assert_eq(q_int(db, "SELECT min(iteration) FROM counters WHERE name = 'probe_ns'"), 0);
    cr_assert_eq(q_int(db, "SELECT max(iteration) FROM counters WHERE name = 'probe_ns'"), n - 1);
    char *sql = cp_t_fmt("SELECT CAST(value AS INTEGER) FROM counters WHERE name = 'probe_ns' "
                         "ORDER BY value LIMIT 1 OFFSET %" PRId64,
                         n < 200 ? 0 : n / 100);
    int64_t floor = q_int(db, sql);
    free(sql);
    cr_assert_eq(ct_num(p, "floor_ns"), (double)floor, "floor_ns of %" PRId64 " probes", n);
    sql =
        cp_t_fmt("SELECT count(*) FROM counters WHERE name = 'probe_ns' AND value <= %.17g * %.17g",
                 ct_num(p, "tolerance"), ct_num(p, "reference_ns"));
    int64_t quiet = q_int(db, sql);
    free(sql);
    sqlite3_close(db);
    cr_assert_leq(ct_num(p, "undisturbed"), (double)quiet,
                  "an undisturbed iteration has an undisturbed probe");

    /* the same runs read back as validate reads them */
    struct cp_trace_store *s = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_trace_store_open_ro(db_path, &s, &d), CP_OK, "%s", d.msg);
    struct cp_run_metrics m;
    cr_assert_eq(cp_trace_store_run_metrics(s, -1, &m, &d), CP_OK, "%s", d.msg);
    cp_trace_store_close(s);
    cr_assert_eq((int64_t)m.n, n);
    cr_assert_not_null(m.probe_ns);
    double *x = calloc(m.n, sizeof *x);
    cr_assert_not_null(x);
    for (size_t i = 0; i < m.n; i++)
        x[i] = (double)m.latency_ns[i];
    size_t w = cp_probe_window(cp_stats_quantile(x, m.n, 0.5));
    size_t k = cp_probe_mark(m.probe_ns, m.n, (uint64_t)ct_num(p, "reference_ns"), w, NULL);
    cr_assert_eq(ct_num(p, "undisturbed"), (double)k, "window %zu", w);
    free(x);
    cp_run_metrics_release(&m);
}

Test(cli_bench_probe, undisturbed_stores_a_probe_per_sample_and_keeps_the_floor, .timeout = 300)
{
    char *om = ct_convert(MODEL), *db = cp_t_path("t.db");
    cr_assert_null(floor_file(1), "the scratch cache starts empty");
    struct cp_run r;
    bench_ok(&r, om, "--undisturbed", "5", "--max-duration", "2s", "--json", "--trace", db, NULL);
    json_t *j = ct_json(r.out);
    cp_run_release(&r);
    double n = ct_num(j, "iterations");
    const json_t *p = probe_of(j);
    double und = ct_num(p, "undisturbed"), floor = ct_num(p, "floor_ns");
    cr_assert_geq(n, 5, "at least --undisturbed iterations in all");
    cr_assert_leq(und, n);
    cr_assert_gt(floor, 0);
    cr_assert_eq(ct_num(p, "tolerance"), 1.15);
    cr_assert_eq(ct_num(p, "reference_ns"), floor, "no floor seen before: its own");
    /* (whether this machine let any iteration run undisturbed is its own
     * business: the summary of none is in the_next_run_is_judged_...,
     * that of some in tests/runner/test_bench.c, on a replayed probe) */
    check_trace(db, j);

    char *ff = floor_file(1);
    cr_assert_not_null(ff, "no probe-floor-*-t1 in $XDG_CACHE_HOME/cannprof");
    cr_assert_eq((double)floor_in_file(ff), floor);
    free(ff);
    json_decref(j);
    free(db);
    free(om);
}

Test(cli_bench_probe, the_next_run_is_judged_against_the_lowest_floor_seen, .timeout = 300)
{
    char *om = ct_convert(MODEL);
    struct cp_run r;
    bench_ok(&r, om, "-n", "8", "--json", NULL);
    json_t *j1 = ct_json(r.out);
    cp_run_release(&r);
    uint64_t f1 = (uint64_t)ct_num(probe_of(j1), "floor_ns");
    char *ff = floor_file(1);
    cr_assert_not_null(ff);
    cr_assert_eq(floor_in_file(ff), f1);

    bench_ok(&r, om, "-n", "8", "--json", NULL);
    json_t *j2 = ct_json(r.out);
    cp_run_release(&r);
    uint64_t f2 = (uint64_t)ct_num(probe_of(j2), "floor_ns");
    uint64_t lowest = f1 < f2 ? f1 : f2;
    cr_assert_eq((uint64_t)ct_num(probe_of(j2), "reference_ns"), lowest);
    cr_assert_eq(floor_in_file(ff), lowest, "the file keeps the lowest floor");

    /* a floor far below anything real: every iteration counts as disturbed */
    ct_write_probe_floor(ff, 1, 0);
    /* none can then be undisturbed: bench waits until its time limit */
    bench_ok(&r, om, "-n", "6", "--max-duration", "200ms", "--json", NULL);
    json_t *j3 = ct_json(r.out);
    cp_run_release(&r);
    cr_assert_eq(ct_num(probe_of(j3), "reference_ns"), 1);
    cr_assert_eq(ct_num(probe_of(j3), "undisturbed"), 0);
    cr_assert_null(json_object_get(probe_of(j3), "latency_ms"), "nothing to summarise");
    cr_assert_eq(floor_in_file(ff), 1, "a higher floor does not replace it");
    bench_ok(&r, om, "-n", "6", "--max-duration", "200ms", NULL);
    ct_assert_mentions(r.out, "; 0 of ", " iterations undisturbed", "undisturbed latency: none",
                       NULL);
    cp_run_release(&r);

    /* a floor another binary measured, or one too old, is no hint */
    ct_write_probe_floor(ff, 1, CP_PROBE_FLOOR_MAX_AGE_S + 60);
    bench_ok(&r, om, "-n", "6", "--json", NULL);
    json_t *j5 = ct_json(r.out);
    cp_run_release(&r);
    cr_assert_eq(ct_num(probe_of(j5), "reference_ns"), ct_num(probe_of(j5), "floor_ns"),
                 "an expired floor is ignored");
    cr_assert_eq((double)floor_in_file(ff), ct_num(probe_of(j5), "floor_ns"));
    ct_write_text(ff, "floor_ns 1\nexe 1:2:3:4\nsaved_at 1\n");
    bench_ok(&r, om, "-n", "6", "--json", NULL);
    json_t *j6 = ct_json(r.out);
    cp_run_release(&r);
    cr_assert_eq(ct_num(probe_of(j6), "reference_ns"), ct_num(probe_of(j6), "floor_ns"),
                 "another binary's floor is ignored");
    json_decref(j5);
    json_decref(j6);

    /* a damaged file is as good as none, and gets replaced */
    ct_write_text(ff, "this is not a floor\n");
    bench_ok(&r, om, "-n", "6", "--json", NULL);
    json_t *j4 = ct_json(r.out);
    cp_run_release(&r);
    double f4 = ct_num(probe_of(j4), "floor_ns");
    cr_assert_eq(ct_num(probe_of(j4), "reference_ns"), f4);
    cr_assert_eq((double)floor_in_file(ff), f4);
    json_decref(j1);
    json_decref(j2);
    json_decref(j3);
    json_decref(j4);
    free(ff);
    free(om);
}

/* --iterations N counts undisturbed iterations: bench stops once N ran
 * undisturbed, or at the time limit, which it then reports. Which of the
 * two a real run ends with is the machine's business; the time limit is
 * made certain below (ct_plant_busy_floor), the target is reached on a
 * replayed probe in tests/runner/test_bench.c. */
Test(cli_bench_probe, iterations_counts_undisturbed_iterations_with_a_probe_each, .timeout = 300)
{
    char *om = ct_convert(MODEL), *db = cp_t_path("t.db");
    struct cp_run r;
    bench_ok(&r, om, "-n", "7", "--json", "--trace", db, NULL);
    json_t *j = ct_json(r.out);
    cp_run_release(&r);
    cr_assert_eq(ct_num(j, "undisturbed_target"), 7);
    cr_assert_geq(ct_num(j, "iterations"), ct_num(probe_of(j), "undisturbed"));
    check_trace(db, j);
    int64_t n = (int64_t)ct_num(j, "iterations");
    sqlite3 *s = open_db(db);
    cr_assert_eq(q_int(s, "SELECT count(*) FROM samples"), n);
    cr_assert_eq(q_int(s, "SELECT count(*) FROM counters WHERE name = 'probe_ns'"), n);
    cr_assert_eq(q_int(s, "SELECT CAST(value AS INTEGER) FROM counters WHERE name = "
                          "'measure.target'"),
                 7);
    sqlite3_close(s);
    json_decref(j);
    free(db);
    free(om);
}

Test(cli_bench_probe, the_time_limit_ends_a_busy_run_and_is_reported, .timeout = 300)
{
    char *om = ct_convert(MODEL);
    struct cp_run r;
    bench_ok(&r, om, "-n", "7", "--json", NULL); /* leaves this machine's floor file */
    cp_run_release(&r);
    char *ff = floor_file(1);
    cr_assert_not_null(ff);
    ct_write_probe_floor(ff, 1, 0); /* every probe is then far above 1.15x the floor */
    bench_ok(&r, om, "-n", "50", "--max-duration", "300ms", "--json", NULL);
    json_t *j = ct_json(r.out);
    cp_run_release(&r);
    cr_assert_eq(ct_num(j, "undisturbed_target"), 50);
    cr_assert_str_eq(json_string_value(json_object_get(j, "stop")), "time limit");
    cr_assert(json_is_true(json_object_get(j, "time_limit_hit")));
    cr_assert_eq(ct_num(probe_of(j), "undisturbed"), 0);
    cr_assert_float_eq(ct_num(j, "time_limit_s"), 0.3, 1e-9);
    cr_assert_geq(ct_num(j, "elapsed_s"), 0.3);
    json_decref(j);
    bench_ok(&r, om, "-n", "50", "--max-duration", "300ms", NULL);
    ct_assert_mentions(r.out, "time limit: 0.3 s reached with 0 of 50 iterations undisturbed",
                       "--max-duration", NULL);
    cp_run_release(&r);
    free(ff);
    free(om);
}

/* 100 to 199 iterations (the default measures at least 100): the floor
 * is still the lowest probe. */
Test(cli_bench_probe, a_run_of_120_iterations_takes_its_lowest_probe_as_floor, .timeout = 300)
{
    char *om = ct_convert(MODEL), *db = cp_t_path("t.db");
    struct cp_run r;
    bench_ok(&r, om, "-n", "120", "--json", "--trace", db, NULL);
    json_t *j = ct_json(r.out);
    cp_run_release(&r);
    cr_assert_eq(ct_num(j, "undisturbed_target"), 120);
    check_trace(db, j);
    json_decref(j);
    free(db);
    free(om);
}

Test(cli_bench_probe, no_probe_measures_exactly_n_without_a_probe, .timeout = 300)
{
    char *om = ct_convert(MODEL), *db = cp_t_path("t.db");
    struct cp_run r;
    bench_ok(&r, om, "--no-probe", "-n", "7", "--json", "--trace", db, NULL);
    json_t *j = ct_json(r.out);
    cp_run_release(&r);
    cr_assert_eq(ct_num(j, "iterations"), 7);
    cr_assert_null(json_object_get(j, "probe"), "no \"probe\" key with --no-probe");
    sqlite3 *s = open_db(db);
    cr_assert_eq(q_int(s, "SELECT count(*) FROM samples"), 7);
    cr_assert_eq(q_int(s, "SELECT count(*) FROM counters WHERE name = 'probe_ns'"), 0);
    sqlite3_close(s);
    json_decref(j);
    char *ff = floor_file(1);
    cr_assert_null(ff, "--no-probe writes no floor file: %s", ff ? ff : "");

    bench_ok(&r, om, "--no-probe", "-n", "3", NULL);
    cr_assert_not(cp_t_has_line(r.out, "probe:"), "%s", r.out);
    cr_assert_null(strstr(r.out, "undisturbed"), "%s", r.out);
    cp_run_release(&r);
    free(db);
    free(om);
}

Test(cli_bench_probe, no_probe_alone_measures_exactly_100, .timeout = 300)
{
    char *om = ct_convert(MODEL);
    struct cp_run r;
    bench_ok(&r, om, "--no-probe", "--json", NULL);
    json_t *j = ct_json(r.out);
    cp_run_release(&r);
    cr_assert_eq(ct_num(j, "iterations"), 100);
    cr_assert_null(json_object_get(j, "probe"));
    json_decref(j);
    free(om);
}

Test(cli_bench_probe, duration_runs_the_probe_too, .timeout = 300)
{
    char *om = ct_convert(MODEL);
    struct cp_run r;
    bench_ok(&r, om, "--duration", "200ms", "--json", NULL);
    json_t *j = ct_json(r.out);
    cp_run_release(&r);
    double n = ct_num(j, "iterations");
    cr_assert_geq(n, 1);
    cr_assert_leq(ct_num(probe_of(j), "undisturbed"), n);
    json_decref(j);
    free(om);
}

Test(cli_bench_probe, the_text_output_has_a_probe_line, .timeout = 300)
{
    char *om = ct_convert(MODEL);
    struct cp_run r;
    bench_ok(&r, om, "-n", "5", "--json", NULL);
    json_t *j = ct_json(r.out);
    cp_run_release(&r);
    bench_ok(&r, om, "-n", "5", NULL);
    cr_assert(cp_t_has_line(r.out, "probe:"), "%s", r.out);
    ct_assert_mentions(r.out, "floor", " us", " iterations undisturbed", NULL);
    cr_assert(cp_t_has_line(r.out, "undisturbed latency"), "%s", r.out);
    cr_assert(cp_t_has_line(r.out, "iterations: "), "%s", r.out);
    cr_assert(strstr(r.out, " measured\n"), "%s", r.out);
    json_decref(j);
    cp_run_release(&r);
    free(om);
}

/* `bench OM <args>` must exit 2 and its stderr mention every needle. */
static void conflict(const char *om, const char *const *args, size_t n, const char *const *needles,
                     size_t nn)
{
    char *argv[16] = {CP_CLI, "bench", (char *)om};
    size_t k = 3;
    for (size_t i = 0; i < n; i++)
        argv[k++] = (char *)args[i];
    argv[k] = NULL;
    struct cp_run r;
    cp_run_argv(&r, argv);
    char *err = ct_fails_2(&r);
    for (size_t i = 0; i < nn; i++)
        cr_expect_not_null(strstr(err, needles[i]), "bench %s %s ...: expected '%s' in: %s",
                           args[0], n > 1 ? args[1] : "", needles[i], err);
    free(err);
}

#define CONFLICT(om, args, needles)                                                                \
    conflict(om, args, sizeof args / sizeof *args, needles, sizeof needles / sizeof *needles)

Test(cli_bench_probe, options_that_do_not_go_together_exit_2_and_name_them, .timeout = 300)
{
    char *om = ct_convert(MODEL);
    {
        const char *a[] = {"-n", "5", "--undisturbed", "5"};
        const char *m[] = {"--iterations", "--undisturbed"};
        CONFLICT(om, a, m);
    }
    {
        const char *a[] = {"--duration", "1s", "--undisturbed", "5"};
        const char *m[] = {"--duration", "--undisturbed"};
        CONFLICT(om, a, m);
    }
    {
        const char *a[] = {"--max-duration", "1s", "--duration", "1s"};
        const char *m[] = {"--max-duration", "--duration"};
        CONFLICT(om, a, m);
    }
    {
        const char *a[] = {"--no-probe", "--max-duration", "1s"};
        const char *m[] = {"--max-duration", "--no-probe"};
        CONFLICT(om, a, m);
    }
    {
        const char *a[] = {"--no-probe", "--undisturbed", "3"};
        const char *m[] = {"--undisturbed", "--no-probe"};
        CONFLICT(om, a, m);
    }
    {
        const char *a[] = {"--max-duration", "abc"};
        const char *m[] = {"--max-duration"};
        CONFLICT(om, a, m);
    }
    {
        const char *a[] = {"--undisturbed", "0"};
        const char *m[] = {"--undisturbed"};
        CONFLICT(om, a, m);
    }
    {
        const char *a[] = {"--undisturbed", "many"};
        const char *m[] = {"--undisturbed"};
        CONFLICT(om, a, m);
    }
    /* none of these measured anything, so no floor file either */
    char *ff = floor_file(1);
    cr_assert_null(ff, "%s", ff ? ff : "");
    ff = floor_file(2);
    cr_assert_null(ff, "%s", ff ? ff : "");
    free(om);
}
