/* `cannprof suggest`: its convert commands paste and run, a change whose
 * risk breaks a constraint is marked and ranked after those that do not,
 * every output format is written, and bad input exits 2. The trace is one
 * with injected kernel times (support/replay.h), so which findings it has
 * does not depend on this machine; tests/perf/test_perf_suggest.c pastes
 * the LayerNorm change of a measured one. */
#include "core/core.h"
#include "support/cli.h"
#include "support/replay.h"
#include "support/run.h"

#include "cli/cli_test.h"
#include "cli/suggest_test.h"

#include <criterion/criterion.h>
#include <jansson.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *g_trace;

/* The LayerNorm chains of the opset-14 transformer converted with
 * LayerNorm fusion off, run on one thread: the chains' tiny kernels (8 us
 * each) take most of the time, the other kernels 12 us. */
static bool in_layernorm(const char *node, const char *op)
{
    (void)op;
    return strstr(node, "/ln1/") || strstr(node, "/ln2/");
}

/* A trace of that conversion with those kernel times (support/replay.h),
 * on a host with bf16 units, so that bf16 is proposed too: a change whose
 * precision risk (0.7%) breaks a tight precision_loss constraint. */
static void setup(void)
{
    cp_t_scratch_setup();
    char *f = ct_switch_file("ln_off.cfg", "LayerNormFusionPass:off\n");
    char *om = ct_convert_to("transformer_encoder_op14", "ln_off", f, NULL);
    char *db = cp_t_path("ln_off.db");
    struct cp_t_timing t = {in_layernorm, 8000, 12000, 0.88};
    g_trace = cp_t_replayed_trace(om, db, 1, true, &t);
    cr_assert_not_null(g_trace, "no replayed trace (see stderr)");
    free(db);
    free(f);
    free(om);
}

static void teardown(void)
{
    cp_t_scratch_close();
    free(g_trace);
}

TestSuite(cli_suggest, .init = setup, .fini = teardown, .timeout = 300);

static json_t *suggest_json(const char *constraints)
{
    return st_suggest_json(g_trace, constraints);
}

Test(cli_suggest, the_layernorm_change_pastes_into_convert_and_takes_effect)
{
    st_expect_layernorm_change_takes_effect(g_trace);
}

Test(cli_suggest, a_change_that_breaks_a_constraint_is_marked_and_ranked_last)
{
    json_t *j = suggest_json("precision_loss<0.05%");
    json_t *findings = json_object_get(j, "findings");
    bool seen_violation = false;
    for (size_t i = 0; i < json_array_size(findings); i++) {
        json_t *f = json_array_get(findings, i);
        bool v = json_is_true(json_object_get(f, "violates_constraints"));
        if (v) {
            seen_violation = true;
            cr_expect(strstr(json_string_value(json_object_get(f, "violation")),
                             "precision_loss<") != NULL);
        } else
            cr_expect(!seen_violation,
                      "finding %zu respects the constraints but is ranked "
                      "after one that breaks them",
                      i);
    }
    /* bf16 on this trace's host: expected precision loss 0.7% */
    cr_expect(seen_violation, "no finding breaks precision_loss<0.05%%");
    json_t *last = json_array_get(findings, json_array_size(findings) - 1);
    cr_expect(json_is_true(json_object_get(last, "violates_constraints")));
    json_decref(j);
}

Test(cli_suggest, markdown_html_and_bad_input)
{
    char *md = cp_t_path("s.md"), *html = cp_t_path("s.html");
    struct cp_run r;
    cp_run_cli(&r, "suggest", g_trace, "-o", md, "--no-calibrate", NULL);
    cr_expect_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    uint8_t *text = NULL;
    size_t len = 0;
    cr_assert_eq(cp_file_read(md, &text, &len, NULL), CP_OK);
    cr_expect(strstr((char *)text, "| # | bottleneck | root cause |") != NULL);
    cr_expect(strstr((char *)text, "```\ncannprof convert ") != NULL);
    free(text);
    cp_run_cli(&r, "suggest", g_trace, "-o", html, "--target", "throughput", "--no-calibrate",
               NULL);
    cr_expect_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    cr_assert_eq(cp_file_read(html, &text, &len, NULL), CP_OK);
    cr_expect(strstr((char *)text, "<!DOCTYPE html>") != NULL);
    free(text);
    struct {
        const char *a, *b, *expect;
    } bad[] = {
        {"--constraints", "memory<<3GB", "--constraints"},
        {"--constraints", "speed<3ms", "speed"},
        {"--target", "fast", "--target"},
        {"-o", "report.txt", ".md, .json or .html"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cp_run_cli(&r, "suggest", g_trace, bad[i].a, bad[i].b, NULL);
        cr_expect_eq(r.exit_code, 2, "%s %s", bad[i].a, bad[i].b);
        cr_expect(strstr(r.err, bad[i].expect) != NULL, "%s", r.err);
        cp_run_release(&r);
    }
    cp_run_cli(&r, "suggest", "/nonexistent.db", NULL);
    cr_expect_eq(r.exit_code, 2, "%s", r.err);
    cp_run_release(&r);
    free(md);
    free(html);
}

/* The bf16 finding's change, or NULL. */
static json_t *bf16_change(json_t *report)
{
    json_t *findings = json_object_get(report, "findings");
    for (size_t i = 0; i < json_array_size(findings); i++) {
        json_t *c = json_object_get(json_array_get(findings, i), "change");
        json_t *conv = json_object_get(c, "convert");
        for (size_t k = 0; k < json_array_size(conv); k++)
            if (strstr(json_string_value(json_array_get(conv, k)), "--precision_mode=bf16") ||
                strstr(json_string_value(json_array_get(conv, k)), "_bf16"))
                return c;
    }
    return NULL;
}

static bool lists(json_t *arr, const char *s)
{
    for (size_t k = 0; k < json_array_size(arr); k++)
        if (strcmp(json_string_value(json_array_get(arr, k)), s) == 0)
            return true;
    return false;
}

/* A precision flag acts through PrecisionModePass: on a run whose switch
 * file turned that pass off, the bf16 change also switches it on and says
 * why, so that it takes effect as printed; on a run with the pass on it
 * does not. */
Test(cli_suggest, a_flag_whose_pass_is_off_comes_with_that_pass_switched_on)
{
    json_t *j = suggest_json("precision_loss<5%");
    json_t *c = bf16_change(j);
    cr_assert_not_null(c, "no bf16 finding on the reference trace");
    cr_expect_not(lists(json_object_get(c, "fusion_switches"), "PrecisionModePass:on"));
    json_decref(j);

    char *f = ct_switch_file("ln_prec_off.cfg", "LayerNormFusionPass:off\nPrecisionModePass:off\n");
    char *om = ct_convert_to("transformer_encoder_op14", "ln_prec_off", f, NULL);
    char *db = cp_t_path("ln_prec_off.db");
    struct cp_t_timing t = {in_layernorm, 8000, 12000, 0.88};
    char *trace = cp_t_replayed_trace(om, db, 1, true, &t);
    cr_assert_not_null(trace, "no replayed trace (see stderr)");
    j = st_suggest_json(trace, "precision_loss<5%");
    c = bf16_change(j);
    cr_assert_not_null(c, "no bf16 finding with PrecisionModePass off");
    cr_expect(lists(json_object_get(c, "fusion_switches"), "PrecisionModePass:on"),
              "the change does not switch PrecisionModePass on");
    const char *sum = json_string_value(json_object_get(c, "summary"));
    cr_expect(sum && strstr(sum, "PrecisionModePass:on"), "summary: %s", sum ? sum : "(none)");
    json_decref(j);
    free(trace);
    free(db);
    free(om);
    free(f);
}
