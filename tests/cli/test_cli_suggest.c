/* `cannprof suggest`: its convert commands paste and run, a change whose
 * risk breaks a constraint is marked and ranked after those that do not,
 * every output format is written, and bad input exits 2. */
#include "core/core.h"
#include "support/cli.h"
#include "support/run.h"

#include "cli/cli_test.h"

#include <criterion/criterion.h>
#include <jansson.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *g_trace;

/* A trace of the opset-14 transformer converted with LayerNorm fusion off:
 * decomposed LayerNorms for the rules to find. */
static void setup(void)
{
    cp_t_scratch_setup();
    char *f = ct_switch_file("ln_off.cfg", "LayerNormFusionPass:off\n");
    char *om = ct_convert_to("transformer_encoder_op14", "ln_off", f, NULL);
    g_trace = cp_t_path("ln_off.db");
    cr_assert(cp_t_bench_trace(om, g_trace, "-n", "20", "-w", "3", "--threads", "1", NULL),
              "bench --trace failed (see stderr)");
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
    char *out = cp_t_path("s.json");
    struct cp_run r;
    cp_run_cli(&r, "suggest", g_trace, "--constraints", constraints, "-o", out, "--no-calibrate",
               NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    json_t *j = cp_t_json_file(out);
    cr_assert_not_null(j, "%s is not JSON (see stderr)", out);
    free(out);
    return j;
}

Test(cli_suggest, the_layernorm_change_pastes_into_convert_and_takes_effect)
{
    json_t *j = suggest_json("precision_loss<1%");
    json_t *findings = json_object_get(j, "findings"), *cmds = json_object_get(j, "commands");
    cr_assert_eq(json_array_size(findings), json_array_size(cmds));
    size_t k = json_array_size(findings);
    for (size_t i = 0; i < json_array_size(findings); i++)
        if (strcmp(json_string_value(json_object_get(json_array_get(findings, i), "root_cause")),
                   "layernorm_decomposed") == 0)
            k = i;
    cr_assert(k < json_array_size(findings), "no layernorm finding");
    json_t *cmd = json_array_get(cmds, k);
    const char *convert = json_string_value(json_object_get(cmd, "convert"));
    const char *switches = json_string_value(json_object_get(cmd, "switch_file"));
    cr_assert_not_null(convert);
    cr_expect_eq(strncmp(convert, "cannprof convert ", 17), 0, "%s", convert);
    /* paste: the switch file it names (if any) and the command, run where
     * the report says to run it */
    cr_assert_eq(chdir(cp_t_dir), 0);
    if (switches && *switches)
        cr_assert_eq(cp_file_write_atomic("switches.cfg", switches, strlen(switches), NULL), CP_OK);
    char *argv[32] = {(char *)CP_CLI};
    size_t n = 1;
    char *copy = strdup(convert + strlen("cannprof "));
    for (char *save = NULL, *t = strtok_r(copy, " ", &save); t && n < 31;
         t = strtok_r(NULL, " ", &save))
        argv[n++] = t;
    argv[n] = NULL;
    struct cp_run r;
    cp_run_argv(&r, argv);
    cr_assert_eq(r.exit_code, 0, "%s: %s", convert, r.err);
    cp_run_release(&r);
    char *om = cp_t_path("suggested.om");
    cp_run_cli(&r, "info", om, "--json", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    json_t *info = json_loads(r.out, 0, NULL);
    const char *offs =
        json_string_value(json_object_get(json_object_get(info, "config"), "fusion_switches"));
    cr_expect(offs && !strstr(offs, "LayerNormFusionPass"), "still off: %s", offs);
    json_decref(info);
    cp_run_release(&r);
    free(copy);
    free(om);
    json_decref(j);
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
