/* `cannprof suggest --measure`: each finding's change is converted from
 * the run's recorded config and measured against the run's own .om; the
 * report carries the measured gain and CI beside the rule's prior, ranks by
 * what was measured, and says why a finding could not be measured instead
 * of failing. What the figures are is the machine's business: these tests
 * check the report's shape and its consistency, never a speed. */
#include "core/core.h"
#include "support/cli.h"
#include "support/run.h"

#include "cli/cli_test.h"

#include <criterion/criterion.h>
#include <jansson.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

TestSuite(cli_suggest_measure, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close,
          .timeout = 300);

/* resnet_tiny with every fusion pass off, benched with a trace. */
static char *unfused_trace(char **om_out)
{
    char *flag = ct_switch_file("off.cfg", "ALL:off\n");
    char *om = ct_convert_to("resnet_tiny", "unfused", flag, NULL);
    char *trace = cp_t_path("t.db");
    struct cp_run r;
    cp_run_cli(&r, "bench", om, "-n", "20", "--threads", "1", "--trace", trace, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    free(flag);
    if (om_out)
        *om_out = om;
    else
        free(om);
    return trace;
}

/* race: leave the race on (else --no-race) */
static json_t *suggest_measure(const char *trace, bool race)
{
    struct cp_run r;
    cp_run_cli(&r, "suggest", trace, "--measure", "-n", "8", "--json", "--no-calibrate",
               race ? NULL : "--no-race", NULL);
    cr_assert_eq(r.exit_code, 0, "exit %d: %s", r.exit_code, r.err);
    json_t *j = ct_json(r.out);
    cp_run_release(&r);
    return j;
}

static double gain_of(json_t *finding)
{
    return json_number_value(
        json_object_get(json_object_get(finding, "expected_gain"), "latency_saved"));
}

Test(cli_suggest_measure, every_change_is_measured_and_ranked_by_what_was_measured)
{
    char *trace = unfused_trace(NULL);
    json_t *j = suggest_measure(trace, false);
    json_t *findings = json_object_get(j, "findings"), *measured = json_object_get(j, "measured");
    cr_assert(json_is_array(measured), "no measured array");
    cr_assert_eq(json_array_size(measured), json_array_size(findings));
    cr_assert_gt(json_array_size(findings), 0);
    size_t n_measured = 0;
    double prev = INFINITY;
    for (size_t i = 0; i < json_array_size(findings); i++) {
        json_t *f = json_array_get(findings, i), *m = json_array_get(measured, i);
        bool unclassified = json_is_true(json_object_get(f, "unclassified"));
        if (!json_is_true(json_object_get(m, "measured"))) {
            cr_expect(unclassified || *json_string_value(json_object_get(m, "note")),
                      "finding %zu: not measured and no reason", i);
            continue;
        }
        n_measured++;
        double g = json_number_value(json_object_get(m, "gain"));
        json_t *ci = json_object_get(m, "ci");
        double lo = json_number_value(json_array_get(ci, 0));
        double hi = json_number_value(json_array_get(ci, 1));
        cr_expect(isfinite(g) && lo <= g && g <= hi, "finding %zu: %g not in [%g, %g]", i, g, lo,
                  hi);
        cr_expect_eq(gain_of(f), g, "the finding's expected gain is the measured one");
        /* what a later measurement should fall in: the CI and the drift
         * between runs, at least 2 points either side */
        json_t *ex = json_object_get(m, "expect");
        double elo = json_number_value(json_array_get(ex, 0));
        double ehi = json_number_value(json_array_get(ex, 1));
        cr_expect(elo <= lo - 0.0199 && ehi >= hi + 0.0199, "[%g, %g] does not widen [%g, %g]", elo,
                  ehi, lo, hi);
        json_t *eg = json_object_get(f, "expected_gain");
        cr_expect_eq(json_number_value(json_object_get(eg, "low")), elo);
        cr_expect_eq(json_number_value(json_object_get(eg, "high")), ehi);
        cr_expect_geq(json_integer_value(json_object_get(m, "rounds")), 8);
        cr_expect(json_is_number(json_object_get(m, "prior_gain")), "the prior stays");
        cr_expect(json_is_null(json_object_get(m, "race")), "--no-race raced");
        /* ranked by the measured gain among findings that respect the
         * constraints (none are given here) */
        cr_expect_leq(g, prev, "finding %zu (%g) ranked after a smaller gain (%g)", i, g, prev);
        prev = g;
    }
    cr_expect_gt(n_measured, 0, "no change was measured");
    json_decref(j);

    /* Markdown says what was measured and what the rule expected */
    struct cp_run r;
    cp_run_cli(&r, "suggest", trace, "--measure", "-n", "8", "--no-calibrate", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cr_expect_not_null(strstr(r.out, "**Measured:**"), "%s", r.out);
    cr_expect_not_null(strstr(r.out, "the rule's prior was"), "%s", r.out);
    cp_run_release(&r);
    free(trace);
}

Test(cli_suggest_measure, a_run_whose_model_is_gone_keeps_its_priors_and_says_why)
{
    char *om = NULL;
    char *trace = unfused_trace(&om);
    cr_assert_eq(unlink(om), 0);
    json_t *j = suggest_measure(trace, true);
    json_t *measured = json_object_get(j, "measured");
    cr_assert_gt(json_array_size(measured), 0);
    for (size_t i = 0; i < json_array_size(measured); i++) {
        json_t *m = json_array_get(measured, i);
        cr_expect(!json_is_true(json_object_get(m, "measured")));
        const char *note = json_string_value(json_object_get(m, "note"));
        cr_expect(note && (strstr(note, "unfused.om") || strstr(note, "no change")), "%s", note);
        cr_expect(json_is_null(json_object_get(m, "gain")), "an unmeasured gain is null");
    }
    json_decref(j);
    free(om);
    free(trace);
}

/* The race: a finding ranked second or third whose CI overlaps the first's
 * is measured against it. Which ones overlap is the machine's business;
 * what a race records, and where it leaves the two findings, is not. */
Test(cli_suggest_measure, overlapping_findings_are_raced_and_ranked_by_the_race)
{
    char *trace = unfused_trace(NULL);
    json_t *j = suggest_measure(trace, true);
    json_t *findings = json_object_get(j, "findings"), *measured = json_object_get(j, "measured");
    size_t n = json_array_size(findings), raced = 0;
    cr_assert_eq(json_array_size(measured), n);
    for (size_t i = 0; i < n; i++) {
        json_t *race = json_object_get(json_array_get(measured, i), "race");
        if (json_is_null(race))
            continue;
        cr_assert(json_is_object(race), "finding %zu: race is neither null nor an object", i);
        raced++;
        cr_expect_lt(i, 3, "only the top three are raced");
        const char *against = json_string_value(json_object_get(race, "against"));
        cr_assert(against, "finding %zu: a race names the other finding", i);
        size_t other = n;
        for (size_t k = 0; k < n; k++)
            if (k != i &&
                strcmp(json_string_value(json_object_get(json_array_get(findings, k), "title")),
                       against) == 0)
                other = k;
        cr_assert_lt(other, n, "finding %zu raced '%s', which is not in the list", i, against);
        if (!json_is_true(json_object_get(race, "measured"))) {
            cr_expect(*json_string_value(json_object_get(race, "note")), "no reason given");
            continue;
        }
        double g = json_number_value(json_object_get(race, "gain"));
        json_t *ci = json_object_get(race, "ci");
        cr_expect(json_number_value(json_array_get(ci, 0)) <= g &&
                      g <= json_number_value(json_array_get(ci, 1)),
                  "the race's gain lies in its CI");
        cr_expect_geq(json_integer_value(json_object_get(race, "rounds")), 16,
                      "a race runs 2 x -n rounds");
        bool won = json_is_true(json_object_get(race, "won"));
        double p = json_number_value(json_object_get(race, "p"));
        cr_expect_eq(won, g >= 0.02 && p < 0.05,
                     "won is 2 points or more, significantly (%g, p=%g)", g, p);
        /* the winner ranks above the finding it beat, the loser below */
        cr_expect_eq(won, i < other, "finding %zu (won %d) and %zu are in the wrong order", i, won,
                     other);
    }
    cr_log_info("%zu findings raced", raced);
    json_decref(j);

    /* a raced finding's Markdown says how its race ended */
    struct cp_run r;
    cp_run_cli(&r, "suggest", trace, "--measure", "-n", "8", "--no-calibrate", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    for (const char *p = strstr(r.out, "**Raced:**"); p; p = strstr(p + 1, "**Raced:**")) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        char line[1024];
        snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line ? len : sizeof line - 1), p);
        cr_expect(strstr(line, "ranked above it") || strstr(line, "ranked below it") ||
                      strstr(line, "order stands"),
                  "%s", line);
    }
    cp_run_release(&r);
    free(trace);
}
