/* `cannprof validate` as a CI gate: verdicts and exit codes on traces whose
 * answer is known (made through the trace store API with seeded samples),
 * every output format, bad input (exit 2), different models refused unless
 * --force, and the pair of a model converted with and without its fusion
 * passes, as measured on a quiet and on a busy machine (the real pair is
 * measured in tests/perf/test_perf_validate.c). Nothing here is measured. */
#include "core/core.h"
#include "support/cli.h"
#include "support/db.h"
#include "support/hook_server.h"
#include "support/run.h"
#include "trace/trace.h"

#include "cli/cli_test.h"

#include <criterion/criterion.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <jansson.h>

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(cli_validate, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close);

struct fake_run {
    const char *model_hash;
    double mean_ms, sd_ms;
    size_t n;
    unsigned long seed;
    uint64_t arena_bytes;
    bool kernels;            /* record kernel events (device_util) */
    double precision_loss;   /* < 0: none */
    const double *values_ms; /* n explicit samples instead of random ones */
    double probe_ns;         /* > 0: an interference probe per iteration, within 1% above */
};

/* A trace with one bench run of normal latency samples. */
static char *make_trace(const char *name, const struct fake_run *f)
{
    char *p = cp_t_path(name);
    struct cp_trace_run_info info = {
        .kind = "bench",
        .model_path = "/models/m.om",
        .model_hash = f->model_hash,
        .config_id = "c0",
        .threads = 2,
        .batch = 1,
        .iterations = (int)f->n,
        .weight_bytes = 1 << 20,
        .arena_bytes = f->arena_bytes ? f->arena_bytes : 1 << 20,
    };
    int64_t run;
    struct cp_trace_store *s = cp_t_trace_store(p, &info, &run);
    cr_assert_not_null(s);
    struct cp_diag d;
    cp_diag_init(&d);
    uint64_t *ns = calloc(f->n, sizeof *ns);
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(r, f->seed);
    for (size_t i = 0; i < f->n; i++)
        ns[i] = (uint64_t)((f->values_ms ? f->values_ms[i]
                                         : f->mean_ms + gsl_ran_gaussian(r, f->sd_ms)) *
                           1e6);
    double *probe = calloc(f->n, sizeof *probe);
    for (size_t i = 0; i < f->n; i++)
        probe[i] = f->probe_ns * (1 + 0.01 * gsl_rng_uniform(r));
    gsl_rng_free(r);
    cr_assert_eq(cp_trace_store_add_samples(s, run, 0, ns, f->n, &d), CP_OK, "%s", d.msg);
    if (f->probe_ns > 0)
        cr_assert_eq(cp_trace_store_add_counter_series(s, run, "probe_ns", 0, probe, f->n, &d),
                     CP_OK, "%s", d.msg);
    free(probe);
    if (f->kernels) {
        struct cp_trace_recorder *rec = cp_trace_recorder_create(f->n);
        int32_t id = cp_trace_intern(rec, "k0");
        for (size_t i = 0; i < f->n; i++)
            cp_trace_record(rec, CP_LAYER_DEVICE, id, 0, (int32_t)i, 1000 * i,
                            1000 * i + ns[i] * 9 / 10, 0);
        struct cp_trace_kernel k = {.node = "k0",
                                    .op_type = "Conv",
                                    .impl = "ref",
                                    .origins = "[]",
                                    .inputs = "[]",
                                    .outputs = "[]"};
        cr_assert_eq(cp_trace_store_add_kernels(s, run, &k, 1, &d), CP_OK, "%s", d.msg);
        cr_assert_eq(cp_trace_store_add_events(s, run, rec, &d), CP_OK, "%s", d.msg);
        cp_trace_recorder_free(rec);
    }
    if (f->precision_loss >= 0)
        cr_assert_eq(
            cp_trace_store_add_counter(s, run, -1, "precision_loss", f->precision_loss, 0, &d),
            CP_OK);
    free(ns);
    cp_trace_store_close(s);
    return p;
}

Test(cli_validate, a_slower_after_is_a_regression_and_exits_1)
{
    struct fake_run a = {
        .model_hash = "h", .mean_ms = 10, .sd_ms = 0.2, .n = 100, .seed = 1, .precision_loss = -1};
    struct fake_run b = a;
    b.mean_ms = 11;
    b.seed = 2;
    char *pa = make_trace("a.db", &a), *pb = make_trace("b.db", &b);
    struct cp_run r;
    cp_run_cli(&r, "validate", "--before", pa, "--after", pb, "--json", NULL);
    cr_assert_eq(r.exit_code, 1, "exit %d: %s %s", r.exit_code, r.out, r.err);
    json_t *j = ct_json(r.out);
    cr_expect_str_eq(json_string_value(json_object_get(j, "verdict")), "regressed");
    cr_expect_str_eq(ct_verdict_of(j, "latency"), "regressed");
    cr_expect_str_eq(ct_verdict_of(j, "p99"), "regressed");
    cr_expect_str_eq(ct_verdict_of(j, "throughput"), "regressed");
    cr_expect_str_eq(ct_verdict_of(j, "memory"), "unchanged");
    json_t *lat = json_object_get(json_object_get(j, "metrics"), "latency");
    double delta = json_real_value(json_object_get(lat, "delta_pct"));
    cr_expect(delta > 8 && delta < 12, "delta %g", delta);
    cr_expect(json_real_value(json_object_get(lat, "p")) < 0.001);
    cr_expect_eq(json_array_size(json_object_get(lat, "ci_pct")), 2);
    cr_expect_null(json_object_get(json_object_get(j, "metrics"), "device_util"),
                   "no kernel events, so no device_util by default");
    json_decref(j);
    cp_run_release(&r);

    /* the other way round it is an improvement: exit 0 */
    cp_run_cli(&r, "validate", "--before", pb, "--after", pa, NULL);
    cr_expect_eq(r.exit_code, 0, "%s", r.err);
    cr_expect(strstr(r.out, "improved") != NULL, "%s", r.out);
    cp_run_release(&r);
    free(pa);
    free(pb);
}

Test(cli_validate, same_distribution_is_unchanged_by_every_test)
{
    struct fake_run a = {.model_hash = "h",
                         .mean_ms = 10,
                         .sd_ms = 0.3,
                         .n = 100,
                         .seed = 3,
                         .kernels = true,
                         .precision_loss = -1};
    struct fake_run b = a;
    b.seed = 4;
    char *pa = make_trace("a.db", &a), *pb = make_trace("b.db", &b);
    const char *tests[] = {"welch", "t-test", "mann-whitney", "bootstrap"};
    for (size_t i = 0; i < 4; i++) {
        struct cp_run r;
        cp_run_cli(&r, "validate", "--before", pa, "--after", pb, "--statistical_test", tests[i],
                   "--json", NULL);
        cr_expect_eq(r.exit_code, 0, "%s: %s", tests[i], r.err);
        json_t *j = ct_json(r.out);
        cr_expect_str_eq(ct_verdict_of(j, "latency"), "unchanged", "%s", tests[i]);
        cr_expect_str_eq(ct_verdict_of(j, "device_util"), "unchanged");
        cr_expect_str_eq(json_string_value(json_object_get(j, "test")), tests[i]);
        json_decref(j);
        cp_run_release(&r);
    }
    free(pa);
    free(pb);
}

Test(cli_validate, a_large_change_in_few_noisy_samples_is_inconclusive)
{
    static const double before[] = {8, 12, 9, 11, 10, 10};
    static const double after[] = {8.5, 12.5, 9.5, 11.5, 10.5, 10.8}; /* +5.5% */
    struct fake_run a = {.model_hash = "h", .n = 6, .values_ms = before, .precision_loss = -1};
    struct fake_run b = a;
    b.values_ms = after;
    char *pa = make_trace("a.db", &a), *pb = make_trace("b.db", &b);
    struct cp_run r;
    cp_run_cli(&r, "validate", "--before", pa, "--after", pb, "--test", "welch", "--metrics",
               "latency", NULL);
    /* no verdict: exit 4, so CI can tell it from "no regression" */
    cr_expect_eq(r.exit_code, 4, "exit %d: %s %s", r.exit_code, r.out, r.err);
    cr_expect(strstr(r.out, "inconclusive") != NULL, "%s", r.out);
    cr_expect(strstr(r.out, "per side would settle it") != NULL, "%s", r.out);
    cp_run_release(&r);
    free(pa);
    free(pb);
}

Test(cli_validate, a_small_significant_change_is_unchanged_under_the_threshold)
{
    struct fake_run a = {
        .model_hash = "h", .mean_ms = 10, .sd_ms = 0.01, .n = 200, .seed = 7, .precision_loss = -1};
    struct fake_run b = a;
    b.mean_ms = 10.1; /* +1%: significant, below 2% */
    b.seed = 8;
    char *pa = make_trace("a.db", &a), *pb = make_trace("b.db", &b);
    struct cp_run r;
    cp_run_cli(&r, "validate", "--before", pa, "--after", pb, "--json", NULL);
    cr_expect_eq(r.exit_code, 0, "%s", r.err);
    json_t *j = ct_json(r.out);
    cr_expect_str_eq(ct_verdict_of(j, "latency"), "unchanged");
    json_decref(j);
    cp_run_release(&r);
    /* with a 0.5% threshold the same change is a regression */
    cp_run_cli(&r, "validate", "--before", pa, "--after", pb, "--threshold", "0.5%", NULL);
    cr_expect_eq(r.exit_code, 1, "%s", r.out);
    cp_run_release(&r);
    free(pa);
    free(pb);
}

Test(cli_validate, memory_and_precision_regressions_fail_the_gate)
{
    struct fake_run a = {
        .model_hash = "h", .mean_ms = 10, .sd_ms = 0.1, .n = 50, .seed = 9, .precision_loss = 0.2};
    struct fake_run b = a;
    b.seed = 10;
    b.arena_bytes = 3 << 20; /* 2 MiB -> 4 MiB in all */
    char *pa = make_trace("a.db", &a), *pb = make_trace("b.db", &b);
    struct cp_run r;
    cp_run_cli(&r, "validate", "--before", pa, "--after", pb, "--json", NULL);
    cr_expect_eq(r.exit_code, 1);
    json_t *j = ct_json(r.out);
    cr_expect_str_eq(ct_verdict_of(j, "memory"), "regressed");
    cr_expect_str_eq(ct_verdict_of(j, "precision"), "unchanged");
    json_decref(j);
    cp_run_release(&r);
    free(pb);
    b.arena_bytes = 0;
    b.precision_loss = 0.9;
    pb = make_trace("c.db", &b);
    cp_run_cli(&r, "validate", "--before", pa, "--after", pb, "--metrics", "latency,precision",
               "--json", NULL);
    cr_expect_eq(r.exit_code, 1, "%s", r.out);
    j = ct_json(r.out);
    cr_expect_str_eq(ct_verdict_of(j, "precision"), "regressed");
    json_decref(j);
    cp_run_release(&r);
    free(pa);
    free(pb);
}

Test(cli_validate, markdown_and_junit_outputs)
{
    struct fake_run a = {
        .model_hash = "h", .mean_ms = 10, .sd_ms = 0.2, .n = 60, .seed = 11, .precision_loss = -1};
    struct fake_run b = a;
    b.mean_ms = 12;
    b.seed = 12;
    char *pa = make_trace("a.db", &a), *pb = make_trace("b.db", &b);
    char *junit = cp_t_path("j.xml");
    struct cp_run r;
    cp_run_cli(&r, "validate", "--before", pa, "--after", pb, "--markdown", "--junit", junit, NULL);
    cr_expect_eq(r.exit_code, 1);
    cr_expect(strstr(r.out, "| Metric | Before | After |") != NULL, "%s", r.out);
    cr_expect(strstr(r.out, "**regressed**") != NULL, "%s", r.out);
    cp_run_release(&r);
    uint8_t *x = NULL;
    size_t len = 0;
    cr_assert_eq(cp_file_read(junit, &x, &len, NULL), CP_OK);
    const char *xml = (const char *)x;
    cr_expect(strstr(xml, "<testsuites tests=\"4\" failures=\"3\">") != NULL, "%s", xml);
    cr_expect(strstr(xml, "name=\"latency\"") != NULL);
    cr_expect(strstr(xml, "<failure type=\"regression\"") != NULL);
    /* memory did not change: its testcase has no failure */
    const char *mem = strstr(xml, "name=\"memory\"");
    cr_assert_not_null(mem);
    const char *end = strstr(mem, "</testcase>");
    const char *failure = strstr(mem, "<failure");
    cr_expect(end && (!failure || failure > end));
    free(x);
    free(pa);
    free(pb);
    free(junit);
}

Test(cli_validate, traces_of_different_models_need_force)
{
    struct fake_run a = {
        .model_hash = "h1", .mean_ms = 10, .sd_ms = 0.2, .n = 30, .seed = 13, .precision_loss = -1};
    struct fake_run b = a;
    b.model_hash = "h2";
    char *pa = make_trace("a.db", &a), *pb = make_trace("b.db", &b);
    struct cp_run r;
    cp_run_cli(&r, "validate", "--before", pa, "--after", pb, NULL);
    cr_expect_eq(r.exit_code, 2);
    cr_expect(strstr(r.err, "different models") && strstr(r.err, "--force"), "%s", r.err);
    cp_run_release(&r);
    cp_run_cli(&r, "validate", "--before", pa, "--after", pb, "--force", "--json", NULL);
    cr_expect_eq(r.exit_code, 0, "%s", r.err);
    cr_expect(strstr(r.out, "\"models_differ\":true") != NULL, "%s", r.out);
    cr_expect(strstr(r.err, "warning") != NULL);
    cp_run_release(&r);
    free(pa);
    free(pb);
}

Test(cli_validate, bad_input_exits_2_and_names_the_problem)
{
    struct fake_run a = {
        .model_hash = "h", .mean_ms = 10, .sd_ms = 0.2, .n = 30, .seed = 14, .precision_loss = -1};
    char *pa = make_trace("a.db", &a), *missing = cp_t_path("missing.db");
    char *empty = cp_t_path("e.db");
    struct cp_trace_store *s = NULL;
    cr_assert_eq(cp_trace_store_open(empty, &s, NULL), CP_OK);
    struct cp_trace_run_info info = {.kind = "run", .model_hash = "h"};
    int64_t run;
    cr_assert_eq(cp_trace_store_begin_run(s, &info, &run, NULL), CP_OK);
    cp_trace_store_close(s);
    struct {
        const char *args[8];
        const char *expect;
    } cases[] = {
        {{"--before", missing, "--after", pa}, "no such file"},
        {{"--before", empty, "--after", pa}, "no latency samples"},
        {{"--before", pa}, "both --before and --after"},
        {{"--before", pa, "--after", pa, "--test", "z"}, "unknown test"},
        {{"--before", pa, "--after", pa, "--alpha", "2"}, "--alpha"},
        {{"--before", pa, "--after", pa, "--threshold", "x"}, "--threshold"},
        {{"--before", pa, "--after", pa, "--metrics", "latency,speed"}, "unknown metric 'speed'"},
        {{"--before", pa, "--after", pa, "--metrics", "device_util"}, "kernel events"},
        {{"--before", pa, "--after", pa, "--metrics", "precision"}, "precision_loss"},
        {{"--ab", pa}, "not an A/B trace"},
        {{"--baseline", "latest", "--trace", pa}, "missing --service"},
        {{"--before", pa, "--after", pa, "--alert-on-regression"}, "--alert-on-regression"},
        {{NULL}, "nothing to compare"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *argv[12] = {(char *)CP_CLI, (char *)"validate"};
        size_t k = 2;
        for (size_t j = 0; j < 8 && cases[i].args[j]; j++)
            argv[k++] = (char *)cases[i].args[j];
        argv[k] = NULL;
        struct cp_run r;
        cp_run_argv(&r, argv);
        cr_expect_eq(r.exit_code, 2, "case %zu: exit %d", i, r.exit_code);
        cr_expect(strstr(r.err, cases[i].expect) != NULL, "case %zu: want '%s' in: %s", i,
                  cases[i].expect, r.err);
        cp_run_release(&r);
    }
    free(pa);
    free(missing);
    free(empty);
}

/* The real pair of tests/perf/test_perf_validate.c with its answer known:
 * the SD-like example with its fusion passes (about 30 ms a run, as one
 * thread measures it) and without (40% slower, more memory: the unfused
 * plan keeps more buffers), 30 iterations each, probed. */
static struct fake_run fused_run(void)
{
    return (struct fake_run){.model_hash = "h",
                             .mean_ms = 30,
                             .sd_ms = 0.3,
                             .n = 30,
                             .seed = 71,
                             .precision_loss = -1,
                             .probe_ns = 10000};
}

static struct fake_run unfused_run(void)
{
    struct fake_run b = fused_run();
    b.mean_ms = 42;
    b.seed = 72;
    b.arena_bytes = 3 << 20;
    return b;
}

Test(cli_validate, a_slower_model_regresses_on_every_and_on_undisturbed_iterations)
{
    struct fake_run a = fused_run(), b = unfused_run();
    char *fast = make_trace("fused.db", &a), *slow = make_trace("unfused.db", &b);
    struct cp_run r;
    cp_run_cli(&r, "validate", "--before", fast, "--after", slow, "--json", "--all-iterations",
               NULL);
    cr_expect_eq(r.exit_code, 1, "%s %s", r.out, r.err);
    json_t *j = ct_json(r.out);
    cr_expect_str_eq(ct_verdict_of(j, "latency"), "regressed");
    cr_expect_str_eq(json_string_value(json_object_get(j, "verdict")), "regressed");
    cr_expect_str_eq(json_string_value(json_object_get(j, "iterations")), "all");
    json_decref(j);
    cp_run_release(&r);
    /* the default: both runs' probes saw a quiet machine, so the
     * undisturbed iterations (all of them) are compared */
    cp_run_cli(&r, "validate", "--before", fast, "--after", slow, "--json", NULL);
    cr_expect_eq(r.exit_code, 1, "%s %s", r.out, r.err);
    j = ct_json(r.out);
    cr_expect_str_eq(json_string_value(json_object_get(j, "iterations")), "undisturbed");
    cr_expect_str_eq(ct_verdict_of(j, "latency"), "regressed");
    cr_expect_str_eq(ct_verdict_of(j, "memory"), "regressed");
    json_decref(j);
    cp_run_release(&r);
    cp_run_cli(&r, "validate", "--before", slow, "--after", fast, "--metrics", "latency",
               "--all-iterations", NULL);
    cr_expect_eq(r.exit_code, 0, "%s %s", r.out, r.err);
    cr_expect(strstr(r.out, "improved") != NULL, "%s", r.out);
    cp_run_release(&r);
    free(fast);
    free(slow);
}

Test(cli_validate, a_slower_model_measured_on_a_busy_machine_gets_no_timing_verdict)
{
    /* the unfused run was made while a neighbour shared its core: every
     * probe at 1.5x the fused run's floor, so none of its iterations is
     * undisturbed against the lower floor */
    struct fake_run a = fused_run(), b = unfused_run();
    b.probe_ns = 15000;
    b.arena_bytes = 0; /* the same memory: timing is all there is to judge */
    char *fast = make_trace("fused.db", &a), *slow = make_trace("unfused.db", &b);
    struct cp_run r;
    cp_run_cli(&r, "validate", "--before", fast, "--after", slow, "--json", NULL);
    cr_expect_eq(r.exit_code, 4, "inconclusive: %s %s", r.out, r.err);
    json_t *j = ct_json(r.out);
    cr_expect_str_eq(json_string_value(json_object_get(j, "iterations")), "too-few-undisturbed");
    cr_expect_str_eq(ct_verdict_of(j, "latency"), "inconclusive");
    cr_expect_str_eq(ct_verdict_of(j, "memory"), "unchanged");
    cr_expect_str_eq(json_string_value(json_object_get(j, "verdict")), "inconclusive");
    json_decref(j);
    cp_run_release(&r);
    /* every iteration: the slowdown is far larger than what the busy
     * machine did, and is a regression */
    cp_run_cli(&r, "validate", "--before", fast, "--after", slow, "--json", "--all-iterations",
               NULL);
    cr_expect_eq(r.exit_code, 1, "%s %s", r.out, r.err);
    j = ct_json(r.out);
    cr_expect_str_eq(ct_verdict_of(j, "latency"), "regressed");
    json_decref(j);
    cp_run_release(&r);
    free(slow);
    /* with the unfused plan's larger memory, memory is still judged: exit 1 */
    b.arena_bytes = 3 << 20;
    slow = make_trace("unfused-mem.db", &b);
    cp_run_cli(&r, "validate", "--before", fast, "--after", slow, "--json", NULL);
    cr_expect_eq(r.exit_code, 1, "%s %s", r.out, r.err);
    j = ct_json(r.out);
    cr_expect_str_eq(json_string_value(json_object_get(j, "iterations")), "too-few-undisturbed");
    cr_expect_str_eq(ct_verdict_of(j, "latency"), "inconclusive");
    cr_expect_str_eq(ct_verdict_of(j, "memory"), "regressed");
    cr_expect_str_eq(json_string_value(json_object_get(j, "verdict")), "regressed");
    json_decref(j);
    cp_run_release(&r);
    free(fast);
    free(slow);
}

/* ---- against a baseline, with alerts ------------------------------------- */

struct baseline_fixture {
    char *kb, *fast, *slow, *url;
    struct hook_server server;
};

static void baseline_setup(struct baseline_fixture *f, int n_status, const int *status)
{
    struct fake_run a = {
        .model_hash = "h", .mean_ms = 10, .sd_ms = 0.2, .n = 80, .seed = 21, .precision_loss = -1};
    struct fake_run b = a;
    b.mean_ms = 11.5;
    b.seed = 22;
    f->kb = cp_t_path("kb.sqlite");
    f->fast = make_trace("release.db", &a);
    f->slow = make_trace("nightly.db", &b);
    struct cp_run r;
    cp_run_cli(&r, "baseline", "set", "--service", "search", "--trace", f->fast, "--tag", "v3.2",
               "--kb", f->kb, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    cr_assert(server_start(&f->server, n_status, status, NULL));
    struct cp_buf b2;
    cp_buf_init(&b2);
    cp_buf_printf(&b2, "http://127.0.0.1:%d/hook", f->server.port);
    f->url = cp_buf_steal(&b2);
}

static void baseline_teardown(struct baseline_fixture *f)
{
    server_release(&f->server);
    free(f->kb);
    free(f->fast);
    free(f->slow);
    free(f->url);
}

/* The validations `baseline show --json` lists for the service. */
static json_t *validations(const char *kb)
{
    struct cp_run r;
    cp_run_cli(&r, "baseline", "show", "--service", "search", "--json", "--kb", kb, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    json_t *j = ct_json(r.out);
    cp_run_release(&r);
    json_t *v = json_incref(json_object_get(j, "validations"));
    json_decref(j);
    cr_assert(json_is_array(v), "baseline show --json has no validations array");
    return v;
}

Test(cli_validate, a_regression_against_the_baseline_alerts_and_is_stored, .timeout = 60)
{
    struct baseline_fixture f;
    baseline_setup(&f, 1, (int[]){200});
    struct cp_run r;
    cp_run_cli(&r, "validate", "--baseline", "latest", "--service", "search", "--trace", f.slow,
               "--kb", f.kb, "--alert-on-regression", "--webhook", f.url, NULL);
    server_stop(&f.server);
    cr_expect_eq(r.exit_code, 1, "%s %s", r.out, r.err);
    cr_expect(strstr(r.out, "v3.2") != NULL, "%s", r.out);
    cp_run_release(&r);
    cr_expect_eq(f.server.requests, 1);
    cr_expect_str_eq(f.server.method, "POST");
    json_t *body = json_loads(f.server.body ? f.server.body : "", 0, NULL);
    cr_assert_not_null(body, "payload is not JSON: %s", f.server.body);
    cr_expect_str_eq(json_string_value(json_object_get(body, "verdict")), "regressed");
    cr_expect_str_eq(json_string_value(json_object_get(body, "service")), "search");
    json_t *lat = json_object_get(json_object_get(body, "figures"), "latency");
    cr_expect_str_eq(json_string_value(json_object_get(lat, "verdict")), "regressed");
    json_decref(body);
    json_t *v = validations(f.kb);
    cr_assert_eq(json_array_size(v), 1);
    json_t *first = json_array_get(v, 0);
    cr_expect_str_eq(json_string_value(json_object_get(first, "verdict")), "regressed");
    json_decref(v);
    baseline_teardown(&f);
}

Test(cli_validate, an_unchanged_run_sends_nothing_with_alert_on_regression, .timeout = 60)
{
    struct baseline_fixture f;
    baseline_setup(&f, 1, (int[]){200});
    struct cp_run r;
    cp_run_cli(&r, "validate", "--baseline", "v3.2", "--service", "search", "--trace", f.fast,
               "--kb", f.kb, "--alert-on-regression", "--webhook", f.url, "--json", NULL);
    server_stop(&f.server);
    cr_expect_eq(r.exit_code, 0, "%s %s", r.out, r.err);
    cp_run_release(&r);
    cr_expect_eq(f.server.requests, 0);
    json_t *v = validations(f.kb);
    cr_expect_eq(json_array_size(v), 1, "every validation is stored");
    json_decref(v);
    baseline_teardown(&f);
}

Test(cli_validate, a_failed_delivery_exits_3_when_the_verdict_was_fine, .timeout = 120)
{
    struct baseline_fixture f;
    baseline_setup(&f, 1, (int[]){500});
    struct cp_run r;
    /* --webhook alone reports every validation, so a fine one is sent too */
    cp_run_cli(&r, "validate", "--baseline", "latest", "--service", "search", "--trace", f.fast,
               "--kb", f.kb, "--webhook", f.url, NULL);
    cr_expect_eq(r.exit_code, 3, "%s %s", r.out, r.err);
    cr_expect(strstr(r.err, "not delivered") != NULL, "%s", r.err);
    cp_run_release(&r);
    /* a regression still exits 1 when the alert fails too */
    cp_run_cli(&r, "validate", "--baseline", "latest", "--service", "search", "--trace", f.slow,
               "--kb", f.kb, "--alert-on-regression", "--webhook", f.url, NULL);
    server_stop(&f.server);
    cr_expect_eq(r.exit_code, 1, "%s %s", r.out, r.err);
    cr_expect(strstr(r.err, "not delivered") != NULL, "%s", r.err);
    cp_run_release(&r);
    cr_expect(f.server.requests >= 2, "retries: %d requests", f.server.requests);
    json_t *v = validations(f.kb);
    cr_assert_eq(json_array_size(v), 2);
    json_decref(v);
    baseline_teardown(&f);
}

Test(cli_validate, an_unknown_baseline_or_service_is_bad_input)
{
    struct baseline_fixture f;
    baseline_setup(&f, 1, (int[]){200});
    struct cp_run r;
    cp_run_cli(&r, "validate", "--baseline", "v9", "--service", "search", "--trace", f.slow, "--kb",
               f.kb, NULL);
    cr_expect_eq(r.exit_code, 2);
    cr_expect(strstr(r.err, "v9") != NULL && strstr(r.err, "v3.2") != NULL, "%s", r.err);
    cp_run_release(&r);
    cp_run_cli(&r, "validate", "--baseline", "latest", "--service", "nosuch", "--trace", f.slow,
               "--kb", f.kb, NULL);
    cr_expect_eq(r.exit_code, 2);
    cr_expect(strstr(r.err, "nosuch") != NULL, "%s", r.err);
    cp_run_release(&r);
    cp_run_cli(&r, "validate", "--baseline", "latest", "--service", "search", "--trace", f.slow,
               "--kb", f.kb, "--alert-on-regression", NULL);
    cr_expect_eq(r.exit_code, 2);
    cr_expect(strstr(r.err, "--webhook") != NULL, "%s", r.err);
    cp_run_release(&r);
    server_stop(&f.server);
    baseline_teardown(&f);
}

Test(cli_validate, a_noisy_service_history_raises_the_threshold, .timeout = 120)
{
    /* a baseline and nine earlier nights that drifted by a few percent
     * either way: the service's run-to-run noise */
    struct baseline_fixture f;
    baseline_setup(&f, 1, (int[]){200});
    server_stop(&f.server);
    static const double drift[] = {10.3, 9.7, 10.35, 9.75, 10.2, 9.65, 10.4, 9.8, 10.25};
    struct cp_run r;
    for (size_t i = 0; i < sizeof drift / sizeof *drift; i++) {
        struct fake_run n = {.model_hash = "h",
                             .mean_ms = drift[i],
                             .sd_ms = 0.2,
                             .n = 80,
                             .seed = 40 + i,
                             .precision_loss = -1};
        char name[32];
        snprintf(name, sizeof name, "night%zu.db", i);
        char *p = make_trace(name, &n);
        cp_run_cli(&r, "validate", "--baseline", "v3.2", "--service", "search", "--trace", p,
                   "--kb", f.kb, "--no-noise-floor", NULL);
        cr_assert(r.exit_code == 0 || r.exit_code == 1, "%s", r.err);
        cp_run_release(&r);
        free(p);
    }
    /* tonight: +4%, significant and above the 2% threshold, but within
     * this service's noise */
    struct fake_run t = {.model_hash = "h",
                         .mean_ms = 10.4,
                         .sd_ms = 0.2,
                         .n = 80,
                         .seed = 60,
                         .precision_loss = -1};
    char *p = make_trace("tonight.db", &t);
    cp_run_cli(&r, "validate", "--baseline", "v3.2", "--service", "search", "--trace", p, "--kb",
               f.kb, "--json", NULL);
    cr_expect_eq(r.exit_code, 0, "%s %s", r.out, r.err);
    json_t *j = ct_json(r.out);
    cr_expect_eq(json_integer_value(json_object_get(j, "noise_runs")), 9);
    double floor = json_number_value(json_object_get(j, "noise_floor_pct"));
    cr_expect(floor > 4.0, "noise floor %g%%", floor);
    cr_expect(fabs(json_number_value(json_object_get(j, "threshold_pct")) - floor) < 1e-3);
    cr_expect_str_eq(ct_verdict_of(j, "latency"), "unchanged");
    json_decref(j);
    cp_run_release(&r);
    /* without the history the same run is a regression */
    cp_run_cli(&r, "validate", "--baseline", "v3.2", "--service", "search", "--trace", p, "--kb",
               f.kb, "--no-noise-floor", NULL);
    cr_expect_eq(r.exit_code, 1, "%s", r.out);
    cp_run_release(&r);
    free(p);
    baseline_teardown(&f);
}

Test(cli_validate, a_secret_file_signs_the_alert_and_bad_secrets_are_bad_input, .timeout = 60)
{
    struct baseline_fixture f;
    baseline_setup(&f, 1, (int[]){200});
    char *secret = cp_t_path("hook.secret");
    cr_assert(cp_t_write_file(secret, "s3cr3t-value\n", 13));
    struct cp_run r;
    cp_run_cli(&r, "validate", "--baseline", "latest", "--service", "search", "--trace", f.slow,
               "--kb", f.kb, "--alert-on-regression", "--webhook", f.url, "--webhook-secret-file",
               secret, NULL);
    server_stop(&f.server);
    cr_expect_eq(r.exit_code, 1, "%s %s", r.out, r.err);
    cr_expect_null(strstr(r.out, "s3cr3t"));
    cr_expect_null(strstr(r.err, "s3cr3t"));
    cp_run_release(&r);
    cr_assert_eq(f.server.requests, 1);
    cr_expect_neq(f.server.sig_timestamp[0], '\0', "no X-Cannprof-Timestamp");
    cr_expect(strncmp(f.server.signature, "sha256=", 7) == 0, "signature '%s'", f.server.signature);
    cr_expect_eq(strlen(f.server.signature), 7 + 64);

    /* the same secret from the environment */
    server_release(&f.server);
    cr_assert(server_start(&f.server, 1, (int[]){200}, NULL));
    free(f.url);
    struct cp_buf u;
    cp_buf_init(&u);
    cp_buf_printf(&u, "http://127.0.0.1:%d/hook", f.server.port);
    f.url = cp_buf_steal(&u);
    cr_assert_eq(setenv("CANNPROF_WEBHOOK_SECRET", "s3cr3t-value", 1), 0);
    cp_run_cli(&r, "validate", "--baseline", "latest", "--service", "search", "--trace", f.slow,
               "--kb", f.kb, "--webhook", f.url, NULL);
    server_stop(&f.server);
    cr_expect_eq(r.exit_code, 1, "%s %s", r.out, r.err);
    cp_run_release(&r);
    cr_expect(strncmp(f.server.signature, "sha256=", 7) == 0, "signature '%s'", f.server.signature);

    /* slack cannot be signed; a missing or empty secret file names itself */
    cp_run_cli(&r, "validate", "--baseline", "latest", "--service", "search", "--trace", f.slow,
               "--kb", f.kb, "--webhook", f.url, "--webhook-format", "slack", NULL);
    cr_expect_eq(r.exit_code, 2, "%s", r.err);
    ct_assert_mentions(r.err, "slack", "CANNPROF_WEBHOOK_SECRET", NULL);
    cp_run_release(&r);
    cr_assert_eq(unsetenv("CANNPROF_WEBHOOK_SECRET"), 0);
    char *missing = cp_t_path("no.secret"), *empty = cp_t_path("empty.secret");
    cr_assert(cp_t_write_file(empty, "\n", 1));
    const char *bad[] = {missing, empty};
    for (int i = 0; i < 2; i++) {
        cp_run_cli(&r, "validate", "--baseline", "latest", "--service", "search", "--trace", f.slow,
                   "--kb", f.kb, "--webhook", f.url, "--webhook-secret-file", bad[i], NULL);
        cr_expect_eq(r.exit_code, 2, "%s", r.err);
        ct_assert_mentions(r.err, bad[i], NULL);
        cp_run_release(&r);
    }
    free(missing);
    free(empty);
    free(secret);
    baseline_teardown(&f);
}
