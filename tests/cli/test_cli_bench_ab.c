/* `cannprof bench A.om --vs B.om`, the interleaved A/B measurement, driven
 * as a user would: --json carries both sides and the verdict, --trace
 * stores two paired runs of kind "bench-ab" with the ab.* meta keys, models
 * with other inputs and bad verdict options exit 2 naming what is wrong, and
 * A against itself works. Timing and which verdict a real A/B gives are
 * never asserted, only that the verdict is one of the four words.
 * The alternating order of the rounds is checked through the library in
 * tests/runner/test_measure.c. */
#include "core/core.h"
#include "runner/runner.h"
#include "support/cli.h"
#include "support/db.h"
#include "support/examples.h"
#include "support/run.h"
#include "trace/trace.h"

#include "cli/cli_test.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <sqlite3.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(cli_bench_ab, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close);

static const char *str(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    cr_assert(json_is_string(v), "'%s' is not a string", key);
    return json_string_value(v);
}

static bool is_verdict_word(const char *s)
{
    return strcmp(s, "improved") == 0 || strcmp(s, "regressed") == 0 ||
           strcmp(s, "unchanged") == 0 || strcmp(s, "inconclusive") == 0;
}

/* One side of the JSON: its model and positive latency figures. */
static void check_side(const json_t *side, const char *model)
{
    cr_assert(json_is_object(side));
    cr_assert_str_eq(str(side, "model"), model);
    const json_t *lat = json_object_get(side, "latency_ms");
    cr_assert(json_is_object(lat), "latency_ms");
    cr_assert_gt(ct_num(lat, "median"), 0);
    cr_assert_gt(ct_num(lat, "mean"), 0);
    cr_assert_geq(ct_num(lat, "p99"), ct_num(lat, "median"));
}

static char *meta(struct cp_trace_store *s, const char *key)
{
    struct cp_diag d;
    cp_diag_init(&d);
    char *v = NULL;
    cr_assert_eq(cp_trace_store_get_meta(s, key, &v, &d), CP_OK, "%s", d.msg);
    cr_assert_not_null(v, "meta key %s is missing", key);
    return v;
}

Test(cli_bench_ab, json_and_trace_hold_both_sides_paired)
{
    char *a = ct_convert_to("resnet_tiny", "a", NULL);
    char *b = ct_convert_to("resnet_tiny", "b", "--layout_policy=nchw", NULL);
    char *db = cp_t_path("ab.db");
    struct cp_run r;
    /* --no-probe: exactly 20 rounds (with the probe: 20 undisturbed ones,
     * tested below) */
    cp_run_cli(&r, "bench", a, "--vs", b, "--no-probe", "-n", "20", "--warmup", "2", "--threads",
               "1", "--trace", db, "--json", NULL);
    cr_assert_eq(r.exit_code, 0, "exit %d; stderr: %s", r.exit_code, r.err);
    json_t *j = ct_json(r.out);
    check_side(json_object_get(j, "a"), a);
    check_side(json_object_get(j, "b"), b);
    cr_assert_str_neq(str(json_object_get(j, "a"), "config_id"),
                      str(json_object_get(j, "b"), "config_id"), "different configs");
    cr_assert_eq(ct_num(j, "rounds"), 20);
    cr_assert_eq(ct_num(j, "warmup"), 2);
    cr_assert_eq(ct_num(j, "threads"), 1);
    cr_assert_str_eq(str(j, "order"), "alternating");
    cr_assert_float_eq(ct_num(j, "alpha"), 0.05, 1e-12);
    cr_assert_float_eq(ct_num(j, "threshold_pct"), 2, 1e-12);
    cr_assert_float_eq(ct_num(j, "confidence"), 0.95, 1e-12);
    /* The comparison has the shape of a metric of `validate --json`. */
    const json_t *c = json_object_get(j, "comparison");
    cr_assert(json_is_object(c), "comparison");
    cr_assert_str_eq(str(c, "metric"), "latency");
    cr_assert_str_eq(str(c, "unit"), "ms");
    cr_assert_str_eq(str(c, "test"), "mann-whitney");
    cr_assert_str_eq(str(c, "statistic"), "median");
    cr_assert_eq(ct_num(c, "n_before"), 20);
    cr_assert_eq(ct_num(c, "n_after"), 20);
    double p = ct_num(c, "p");
    cr_assert(p >= 0 && p <= 1, "p = %g", p);
    const json_t *ci = json_object_get(c, "ci_pct");
    cr_assert(json_is_array(ci) && json_array_size(ci) == 2, "ci_pct is [lo, hi]");
    double lo = json_number_value(json_array_get(ci, 0)),
           hi = json_number_value(json_array_get(ci, 1));
    cr_assert_leq(lo, ct_num(c, "delta_pct"));
    cr_assert_geq(hi, ct_num(c, "delta_pct"));
    /* delta is B's compared statistic relative to A's, and they are the
     * medians of each side. */
    cr_assert_float_eq(ct_num(c, "delta_pct"), 100 * (ct_num(c, "after") / ct_num(c, "before") - 1),
                       1e-6);
    cr_assert_float_eq(ct_num(c, "before"),
                       ct_num(json_object_get(json_object_get(j, "a"), "latency_ms"), "median"),
                       1e-5);
    cr_assert_float_eq(ct_num(c, "after"),
                       ct_num(json_object_get(json_object_get(j, "b"), "latency_ms"), "median"),
                       1e-5);
    cr_assert_str_eq(str(c, "verdict"), str(j, "verdict"));
    const json_t *need = json_object_get(c, "samples_needed");
    cr_assert(json_is_null(need) ||
                  (strcmp(str(j, "verdict"), "inconclusive") == 0 && json_is_integer(need)),
              "samples_needed only for inconclusive");
    cr_assert(is_verdict_word(str(j, "verdict")), "verdict '%s'", str(j, "verdict"));
    cr_assert_str_eq(str(j, "trace"), db);
    const json_t *tr = json_object_get(j, "trace_runs");
    int64_t run_a = (int64_t)ct_num(tr, "a"), run_b = (int64_t)ct_num(tr, "b");
    cr_assert_lt(run_a, run_b, "A is stored first");

    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_trace_store *s = NULL;
    cr_assert_eq(cp_trace_store_open_ro(db, &s, &d), CP_OK, "%s", d.msg);
    char *before = meta(s, "ab.before_run"), *after = meta(s, "ab.after_run"),
         *order = meta(s, "ab.order");
    cr_assert_eq(strtoll(before, NULL, 10), run_a);
    cr_assert_eq(strtoll(after, NULL, 10), run_b);
    cr_assert_str_eq(order, "alternating");
    const char *paths[2] = {a, b};
    int64_t runs[2] = {run_a, run_b};
    for (int i = 0; i < 2; i++) {
        struct cp_run_metrics m;
        cr_assert_eq(cp_trace_store_run_metrics(s, runs[i], &m, &d), CP_OK, "%s", d.msg);
        cr_assert_str_eq(m.kind, "bench-ab");
        cr_assert_str_eq(m.model_path, paths[i]);
        cr_assert_eq(m.n, 20, "run %lld has %zu samples", (long long)runs[i], m.n);
        cr_assert_not_null(m.device_ns, "kernel events of run %lld", (long long)runs[i]);
        for (size_t k = 0; k < m.n; k++)
            cr_assert_gt(m.latency_ns[k], 0);
        cp_run_metrics_release(&m);
    }
    /* Iterations are the rounds 0..19, in both runs. */
    sqlite3 *db3 = cp_trace_store_db(s);
    sqlite3_stmt *st = NULL;
    cr_assert_eq(sqlite3_prepare_v2(db3,
                                    "SELECT run_id, min(iteration), max(iteration), count(*) "
                                    "FROM samples GROUP BY run_id ORDER BY run_id",
                                    -1, &st, NULL),
                 SQLITE_OK);
    int rows = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        cr_assert_eq(sqlite3_column_int(st, 1), 0);
        cr_assert_eq(sqlite3_column_int(st, 2), 19);
        cr_assert_eq(sqlite3_column_int(st, 3), 20);
        rows++;
    }
    sqlite3_finalize(st);
    cr_assert_eq(rows, 2, "two runs in the store");
    free(before);
    free(after);
    free(order);
    cp_trace_store_close(s);
    json_decref(j);
    cp_run_release(&r);
    free(a);
    free(b);
    free(db);
}

/* With the probe (the default), bench runs it after every round and stops
 * once --iterations rounds ran undisturbed, or at the time limit; the
 * verdict compares the undisturbed rounds when there are any, and both
 * runs of the trace carry the same probe reading for each round. Here the
 * machine is made busy (a floor of 1 ns): no round is undisturbed, the
 * time limit ends the run and the verdict compares every round. The quiet
 * machine, on a replayed probe: tests/runner/test_bench.c. */
Test(cli_bench_ab, the_probe_judges_rounds_and_a_busy_machine_ends_at_the_time_limit)
{
    ct_plant_busy_floor(1);
    char *a = ct_convert_to("resnet_tiny", "a", NULL);
    char *db = cp_t_path("ab.db");
    struct cp_run r;
    cp_run_cli(&r, "bench", a, "--vs", a, "-n", "10", "--warmup", "1", "--threads", "1",
               "--max-duration", "300ms", "--trace", db, "--json", NULL);
    cr_assert_eq(r.exit_code, 0, "exit %d; stderr: %s", r.exit_code, r.err);
    json_t *j = ct_json(r.out);
    const json_t *p = json_object_get(j, "probe");
    cr_assert(json_is_object(p), "a probe object");
    double rounds = ct_num(j, "rounds");
    cr_assert_eq(ct_num(p, "undisturbed"), 0);
    cr_assert_eq(ct_num(j, "undisturbed_target"), 10);
    cr_assert_str_eq(str(j, "stop"), "time limit");
    const json_t *c = json_object_get(j, "comparison");
    cr_assert(json_is_false(json_object_get(j, "verdict_on_undisturbed_rounds")));
    cr_assert_eq(ct_num(c, "n_before"), rounds, "every round compared");
    cr_assert_eq(ct_num(c, "n_after"), ct_num(c, "n_before"));
    cp_run_release(&r);
    sqlite3 *raw = NULL;
    cr_assert_eq(sqlite3_open_v2(db, &raw, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    int64_t n = 0;
    cr_assert(cp_t_sql_int(raw,
                           "SELECT count(*) FROM counters x JOIN counters y ON x.name = "
                           "'probe_ns' AND y.name = 'probe_ns' AND x.run_id = 1 AND y.run_id = 2 "
                           "AND x.iteration = y.iteration AND x.value = y.value",
                           &n));
    cr_assert_eq(n, (int64_t)rounds, "one probe per round, the same for A and B");
    sqlite3_close(raw);
    json_decref(j);
    free(a);
    free(db);
}

Test(cli_bench_ab, table_names_both_sides_and_a_verdict)
{
    char *a = ct_convert_to("resnet_tiny", "a", NULL);
    struct cp_run r;
    cp_run_cli(&r, "bench", a, "--vs", a, "-n", "10", "-w", "1", "--threads", "1",
               "--statistical_test", "welch", "--threshold", "5%", "--alpha", "0.01", NULL);
    cr_assert_eq(r.exit_code, 0, "exit %d; stderr: %s", r.exit_code, r.err);
    cr_assert(strstr(r.out, "A (before)") && strstr(r.out, "B (after)"), "%s", r.out);
    cr_assert(strstr(r.out, "welch") && strstr(r.out, "mean"), "%s", r.out);
    const char *v = strstr(r.out, "verdict:");
    cr_assert_not_null(v, "%s", r.out);
    char word[32] = "";
    cr_assert_eq(sscanf(v, "verdict: %31s", word), 1);
    cr_assert(is_verdict_word(word), "verdict '%s'", word);
    cr_assert(strstr(v, "alpha 0.01") && strstr(v, "threshold 5%"), "%s", v);
    cp_run_release(&r);
    free(a);
}

Test(cli_bench_ab, a_against_itself_works)
{
    char *a = ct_convert_to("resnet_tiny", "a", NULL);
    struct cp_run r;
    cp_run_cli(&r, "bench", a, "--vs", a, "--no-probe", "-n", "8", "-w", "0", "--threads", "1",
               "--test", "t-test", "--json", NULL);
    cr_assert_eq(r.exit_code, 0, "exit %d; stderr: %s", r.exit_code, r.err);
    json_t *j = ct_json(r.out);
    cr_assert_eq(ct_num(j, "rounds"), 8);
    cr_assert_str_eq(str(json_object_get(j, "a"), "config_id"),
                     str(json_object_get(j, "b"), "config_id"));
    const json_t *c = json_object_get(j, "comparison");
    cr_assert_str_eq(str(c, "test"), "t-test");
    cr_assert_str_eq(str(c, "statistic"), "mean");
    cr_assert(is_verdict_word(str(j, "verdict")));
    json_decref(j);
    cp_run_release(&r);
    free(a);
}

Test(cli_bench_ab, duration_counts_rounds)
{
    char *a = ct_convert_to("resnet_tiny", "a", NULL);
    struct cp_run r;
    cp_run_cli(&r, "bench", a, "--vs", a, "--duration", "100ms", "-w", "0", "--threads", "1",
               "--json", NULL);
    cr_assert_eq(r.exit_code, 0, "exit %d; stderr: %s", r.exit_code, r.err);
    json_t *j = ct_json(r.out);
    cr_assert_geq(ct_num(j, "rounds"), 2, "at least two rounds whatever the time");
    json_decref(j);
    cp_run_release(&r);
    free(a);
}

Test(cli_bench_ab, other_input_names_exit_2_naming_the_input)
{
    char *a = ct_convert_to("resnet_tiny", "a", NULL);
    char *t = ct_convert_to("transformer_encoder_op17", "t", NULL);
    struct cp_run r;
    cp_run_cli(&r, "bench", a, "--vs", t, "-n", "3", NULL);
    cr_assert_eq(r.exit_code, 2, "exit %d; stderr: %s", r.exit_code, r.err);
    cr_assert(strstr(r.err, "input '"), "names the input: %s", r.err);
    cr_assert(strstr(r.err, a) && strstr(r.err, t), "names both models: %s", r.err);
    cr_assert_str_eq(r.out, "", "nothing measured: %s", r.out);
    cp_run_release(&r);
    free(a);
    free(t);
}

Test(cli_bench_ab, other_input_shapes_exit_2_naming_the_input_and_shapes)
{
    char *a = ct_convert_to("resnet_tiny", "a", NULL);
    char *s = ct_convert_to("resnet_tiny", "small", "--input_shape=input:1,3,32,32", NULL);
    char *db = cp_t_path("bad.db");
    struct cp_run r;
    cp_run_cli(&r, "bench", a, "--vs", s, "-n", "3", "--trace", db, NULL);
    cr_assert_eq(r.exit_code, 2, "exit %d; stderr: %s", r.exit_code, r.err);
    cr_assert(strstr(r.err, "input 'input'"), "names the input: %s", r.err);
    cr_assert(strstr(r.err, "[1,3,64,64]") && strstr(r.err, "[1,3,32,32]"), "both shapes: %s",
              r.err);
    cp_run_release(&r);
    free(a);
    free(s);
    free(db);
}

Test(cli_bench_ab, bad_verdict_options_exit_2_naming_the_flag)
{
    char *a = ct_convert_to("resnet_tiny", "a", NULL);
    static const char *const bad[][2] = {
        {"--test", "anova"},   {"--statistical_test", "x"},
        {"--alpha", "0"},      {"--alpha", "0.6"},
        {"--alpha", "x"},      {"--threshold", "two"},
        {"--threshold", "-1"}, {"--threshold", "2%%"},
        {"--iterations", "1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct cp_run r;
        cp_run_cli(&r, "bench", a, "--vs", a, bad[i][0], bad[i][1], NULL);
        cr_assert_eq(r.exit_code, 2, "%s %s: exit %d; stderr: %s", bad[i][0], bad[i][1],
                     r.exit_code, r.err);
        cr_assert(strstr(r.err, bad[i][0]), "%s %s: names the flag: %s", bad[i][0], bad[i][1],
                  r.err);
        cp_run_release(&r);
    }
    /* Verdict options without --vs judge nothing. */
    struct cp_run r;
    cp_run_cli(&r, "bench", a, "--test", "welch", NULL);
    cr_assert_eq(r.exit_code, 2, "exit %d; stderr: %s", r.exit_code, r.err);
    cr_assert(strstr(r.err, "--test") && strstr(r.err, "--vs"), "%s", r.err);
    cp_run_release(&r);
    cp_run_cli(&r, "bench", a, "--vs", NULL);
    cr_assert_eq(r.exit_code, 2, "exit %d; stderr: %s", r.exit_code, r.err);
    cp_run_release(&r);
    cp_run_cli(&r, "bench", "--help", NULL);
    cr_assert_eq(r.exit_code, 0);
    cr_assert(strstr(r.out, "--vs") && strstr(r.out, "--threshold"), "%s", r.out);
    cp_run_release(&r);
    free(a);
}
