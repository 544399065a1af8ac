/* `cannprof suggest`: its convert commands paste and run, a change whose
 * risk breaks a constraint is marked and ranked after those that do not,
 * every output format is written, and bad input exits 2. The trace is one
 * with injected kernel times (support/replay.h), so which findings it has
 * does not depend on this machine; tests/perf/test_perf_suggest.c pastes
 * the LayerNorm change of a measured one. */
#include "core/core.h"
#include "knowledge/kb.h"
#include "knowledge/kb_tuning.h"
#include "support/cli.h"
#include "support/replay.h"
#include "support/run.h"

#include "cli/cli_test.h"
#include "cli/suggest_test.h"
#include "tuner/tuner.h"

#include <criterion/criterion.h>
#include <jansson.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *g_trace, *g_om;

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
    g_om = om;
}

static void teardown(void)
{
    cp_t_scratch_close();
    free(g_trace);
    free(g_om);
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
        {"-o", "report.txt", ".md, .json, .html or .pdf"},
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

/* The knowledge base at `path` records that `tune` measured the change of
 * `rule` three times on this very model, on this hardware: each time it
 * made the model 10% slower. */
static void seed_history(const char *path, const char *rule)
{
    struct cp_kb *kb = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_kb_open(path, &kb, &d), CP_OK, "%s", d.msg);
    struct cp_kb_fingerprint fp;
    bool approx = false;
    cr_assert_eq(cp_tune_fingerprint_model(kb, g_om, &fp, &approx, &d), CP_OK, "%s", d.msg);
    struct cp_kb_hardware hw;
    cp_kb_hardware_detect(&hw);
    int64_t model = 0, h = 0, s = 0;
    struct cp_kb_session ses = {.key = (char *)"k", .status = (char *)"done"};
    ses.baseline_median_ns = ses.best_median_ns = NAN;
    ses.model_id = 0;
    cr_assert_eq(cp_kb_model_upsert(kb, &fp, &model, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_kb_hardware_upsert(kb, &hw, &h, &d), CP_OK, "%s", d.msg);
    ses.model_id = model;
    ses.hw_id = h;
    cr_assert_eq(cp_kb_session_begin(kb, &ses, &s, &d), CP_OK, "%s", d.msg);
    char source[160];
    snprintf(source, sizeof source, "rule:%s", rule);
    for (int i = 1; i <= 3; i++) {
        struct cp_kb_candidate c;
        memset(&c, 0, sizeof c);
        c.session_id = s;
        c.step = i;
        c.delta = (char *)"x=1";
        c.source = source;
        c.status = CP_STEP_REJECTED;
        c.reason = (char *)"significantly worse";
        c.config_json = (char *)"{}";
        c.config_id = (char *)"0011223344556677";
        c.expected_gain = 0.2;
        c.measured_gain = -0.10;
        c.ci_lo = -0.12;
        c.ci_hi = -0.08;
        c.p = 0.001;
        c.precision_loss = c.median_ns = c.throughput = NAN;
        int64_t id = 0;
        cr_assert_eq(cp_kb_candidate_add(kb, &c, &id, &d), CP_OK, "%s", d.msg);
    }
    cp_kb_fingerprint_release(&fp);
    cp_kb_close(kb);
}

static json_t *suggest_with(const char *flag, const char *value)
{
    char *out = cp_t_path("h.json");
    struct cp_run r;
    cp_run_cli(&r, "suggest", g_trace, "-o", out, "--no-calibrate", flag, value, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    json_t *j = cp_t_json_file(out);
    cr_assert_not_null(j);
    free(out);
    return j;
}

static json_t *finding_of_rule(json_t *j, const char *rule, size_t *at)
{
    json_t *fs = json_object_get(j, "findings");
    for (size_t i = 0; i < json_array_size(fs); i++)
        if (strcmp(json_string_value(json_object_get(json_array_get(fs, i), "rule")), rule) == 0) {
            *at = i;
            return json_array_get(fs, i);
        }
    cr_assert_fail("no finding of rule %s", rule);
    return NULL;
}

static double saved(json_t *f, const char *key)
{
    return json_number_value(json_object_get(json_object_get(f, "expected_gain"), key));
}

Test(cli_suggest, the_knowledge_base_history_refines_a_prior_and_the_ranking)
{
    char *kb = cp_t_path("history.sqlite");
    /* none yet: the priors stand, and no file is made */
    json_t *j0 = suggest_with("--kb", kb);
    cr_expect_not(cp_path_exists(kb), "suggest made %s", kb);
    cr_expect_str_eq(json_string_value(json_object_get(j0, "knowledge_base")), "no knowledge base");
    json_t *fs0 = json_object_get(j0, "findings");
    cr_assert_geq(json_array_size(fs0), 2, "two findings at least, to rank");
    const char *top = json_string_value(json_object_get(json_array_get(fs0, 0), "rule"));
    double prior = saved(json_array_get(fs0, 0), "latency_saved");
    double lo = saved(json_array_get(fs0, 0), "low");
    cr_assert_null(json_object_get(json_array_get(fs0, 0), "history"));

    seed_history(kb, top);
    json_t *j1 = suggest_with("--kb", kb);
    size_t at = 0;
    json_t *f = finding_of_rule(j1, top, &at);
    double refined = (prior + 3 * -0.10) / 4;
    cr_expect_float_eq(saved(f, "latency_saved"), refined, 1e-9);
    cr_expect_float_eq(saved(f, "low"), lo + refined - prior, 1e-9);
    json_t *h = json_object_get(f, "history");
    cr_assert_not_null(h);
    cr_expect_eq(json_integer_value(json_object_get(h, "runs")), 3);
    cr_expect_float_eq(json_number_value(json_object_get(h, "mean_gain")), -0.10, 1e-9);
    cr_expect_float_eq(json_number_value(json_object_get(h, "prior_gain")), prior, 1e-9);
    cr_expect_gt(json_number_value(json_object_get(h, "similarity")), 0.99, "the model itself");
    cr_expect_gt(at, 0, "a change measured slower ranks below the others now");
    cr_expect(strstr(json_string_value(json_object_get(j1, "knowledge_base")), "1 of ") != NULL,
              "%s", json_string_value(json_object_get(j1, "knowledge_base")));

    /* --no-history keeps the prior */
    char *out = cp_t_path("n.json");
    struct cp_run r;
    cp_run_cli(&r, "suggest", g_trace, "-o", out, "--no-calibrate", "--kb", kb, "--no-history",
               NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    json_t *j3 = cp_t_json_file(out);
    cr_expect_float_eq(saved(finding_of_rule(j3, top, &at), "latency_saved"), prior, 1e-12);
    cr_expect(json_is_null(json_object_get(j3, "knowledge_base")));

    /* and the Markdown says it */
    cp_run_cli(&r, "suggest", g_trace, "--no-calibrate", "--kb", kb, NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    ct_assert_mentions(
        r.out, "Knowledge base: ", "**History:** `tune` measured this rule's change 3 times", NULL);
    cp_run_release(&r);
    json_decref(j0);
    json_decref(j1);
    json_decref(j3);
    free(out);
    free(kb);
}
