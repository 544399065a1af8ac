/* Reading report.json back (what `tune --batch` summarises): a report the
 * tuner wrote reads back with its figures and accepted changes; a file that
 * is not JSON, or not shaped as a report, is an error naming the file and
 * what is wrong, never a crash or a row of zeros. */
#include "cli/cli_test.h"
#include "support/cli.h"
#include "tuner/tuner.h"

#include <criterion/criterion.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

TestSuite(tune_report, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close);

static void write_text(const char *path, const char *text)
{
    cr_assert(cp_t_write_file(path, text, strlen(text)), "(see stderr)");
}

Test(tune_report, a_written_report_reads_back)
{
    struct cp_tune_opts o;
    cp_tune_opts_init(&o);
    o.model = "models/m.onnx";
    o.out_dir = cp_t_dir;
    struct cp_tune_result r;
    memset(&r, 0, sizeof r);
    cp_convert_config_init(&r.baseline.cfg);
    r.best = r.baseline;
    r.baseline_ns = 2e6;
    r.best_ns = 1.5e6;
    r.best_memory = 4096;
    r.best_precision_loss = NAN; /* written as null */
    struct cp_tune_step steps[3];
    memset(steps, 0, sizeof steps);
    const enum cp_step_status status[] = {CP_STEP_BASELINE, CP_STEP_ACCEPTED, CP_STEP_REJECTED};
    const char *delta[] = {"", "layout_policy=nhwc", "threads=1"};
    for (int i = 0; i < 3; i++) {
        steps[i].step = i;
        steps[i].status = status[i];
        snprintf(steps[i].delta, sizeof steps[i].delta, "%s", delta[i]);
    }
    r.steps = steps;
    r.n_steps = 3;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_tune_write_report(&o, &r, &d), CP_OK, "%s", d.msg);
    struct cp_tune_report_row row;
    cr_assert_eq(cp_tune_report_read(r.report_json, &row, &d), CP_OK, "%s", d.msg);
    cr_assert_str_eq(row.model, "models/m.onnx");
    cr_assert_float_eq(row.baseline_ms, 2.0, 1e-9);
    cr_assert_float_eq(row.best_ms, 1.5, 1e-9);
    cr_assert_float_eq(row.best_memory_bytes, 4096, 1e-9);
    cr_assert(isnan(row.best_precision_loss), "null reads as unknown");
    cr_assert_eq(row.n_accepted, 1);
    cr_assert_str_eq(row.accepted[0], "layout_policy=nhwc");
    cp_tune_report_row_release(&row);
    cr_assert_null(row.model);
}

/* Each text, written to report.json, must be refused with `status` and a
 * message naming the file and containing `what`. */
static void expect_refused(const char *text, enum cp_status status, const char *what)
{
    char *path = cp_t_path("report.json");
    if (text)
        write_text(path, text);
    struct cp_tune_report_row row;
    memset(&row, 0xab, sizeof row);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_tune_report_read(path, &row, &d), status, "%s: %s", text, d.msg);
    cr_assert(strstr(d.msg, path) && strstr(d.msg, what), "%s: %s", text ? text : "(none)", d.msg);
    cr_assert_null(row.model, "outputs are left empty");
    cr_assert_null(row.accepted);
    free(path);
}

Test(tune_report, a_missing_report_is_an_io_error)
{
    expect_refused(NULL, CP_ERR_IO, "no such file");
}

Test(tune_report, a_report_that_is_not_json_names_the_place)
{
    expect_refused("{\"model\": \"m\", \"baseline\": {", CP_ERR_CORRUPT, "report.json:1:");
    expect_refused("", CP_ERR_CORRUPT, "not a tune report");
    expect_refused("[1, 2, 3]", CP_ERR_CORRUPT, "not a JSON object");
}

Test(tune_report, a_report_of_the_wrong_shape_names_the_field)
{
    static const char *const bad[][2] = {
        {"{\"baseline\":{},\"best\":{},\"steps\":[]}", "'model'"},
        {"{\"model\":\"m\",\"baseline\":3,\"best\":{},\"steps\":[]}", "'baseline.median_ms'"},
        {"{\"model\":\"m\",\"baseline\":{\"median_ms\":\"fast\"},\"best\":{},\"steps\":[]}",
         "'baseline.median_ms'"},
        {"{\"model\":\"m\",\"baseline\":{\"median_ms\":1},\"best\":{\"median_ms\":1,"
         "\"precision_loss_pct\":0,\"memory_bytes\":1},\"steps\":{}}",
         "'steps'"},
        /* a step without a status: the summary used to strcmp(NULL, ...) */
        {"{\"model\":\"m\",\"baseline\":{\"median_ms\":1},\"best\":{\"median_ms\":1,"
         "\"precision_loss_pct\":0,\"memory_bytes\":1},\"steps\":[{\"delta\":\"x\"}]}",
         "'steps[0].status'"},
        /* a status no step can have */
        {"{\"model\":\"m\",\"baseline\":{\"median_ms\":1},\"best\":{\"median_ms\":1,"
         "\"precision_loss_pct\":0,\"memory_bytes\":1},\"steps\":[{\"status\":\"maybe\","
         "\"delta\":\"x\"}]}",
         "'steps[0].status'"},
        {"{\"model\":\"m\",\"baseline\":{\"median_ms\":1},\"best\":{\"median_ms\":1,"
         "\"precision_loss_pct\":0,\"memory_bytes\":1},\"steps\":[{\"status\":\"accepted\","
         "\"delta\":7}]}",
         "'steps[0].delta'"},
        {"{\"model\":\"m\",\"baseline\":{\"median_ms\":1},\"best\":{\"median_ms\":1,"
         "\"precision_loss_pct\":0},\"steps\":[]}",
         "'best.memory_bytes'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_refused(bad[i][0], CP_ERR_CORRUPT, bad[i][1]);
}

/* What `tune` prints of a session: both sides, the interleaved check
 * (latency saved shown as a fall), the accepted changes, the files. */
Test(tune_report, the_summary_prints_both_sides_the_final_check_and_the_changes)
{
    struct cp_tune_opts o;
    cp_tune_opts_init(&o);
    o.model = "m.onnx";
    struct cp_tune_result r;
    memset(&r, 0, sizeof r);
    r.session_id = 7;
    r.evaluations = 3;
    snprintf(r.stop_reason, sizeof r.stop_reason, "budget reached");
    r.baseline_ns = 2e6;
    r.best_ns = 1.5e6;
    r.baseline_items_s = 500;
    r.best_items_s = 666.67;
    r.baseline_memory = r.best_memory = 1 << 20;
    r.final_change = 0.24;
    r.final_ci_lo = 0.2;
    r.final_ci_hi = 0.28;
    r.final_p = 0.001;
    struct cp_tune_step steps[2] = {{.step = 1, .status = CP_STEP_ACCEPTED},
                                    {.step = 2, .status = CP_STEP_REJECTED}};
    snprintf(steps[0].delta, sizeof steps[0].delta, "layout_policy=nhwc");
    snprintf(steps[0].source, sizeof steps[0].source, "rule:layout");
    snprintf(steps[0].reason, sizeof steps[0].reason, "24%% faster");
    snprintf(steps[1].delta, sizeof steps[1].delta, "threads=1");
    r.steps = steps;
    r.n_steps = 2;
    snprintf(r.best_om, sizeof r.best_om, "out/best.om");
    snprintf(r.report_md, sizeof r.report_md, "out/report.md");
    struct cp_buf b;
    cp_buf_init(&b);
    cp_tune_summary_text(&o, &r, &b);
    ct_assert_mentions(b.data, "model:       m.onnx",
                       "session:     7, 3 evaluations, stopped: "
                       "budget reached",
                       "latency (median, ms)", "2.000", "1.500", "-25.0%",
                       "best vs baseline, interleaved: latency -24.0% [-28.0%, -20.0%]",
                       "1. layout_policy=nhwc (rule:layout): 24% faster",
                       "best model:  out/best.om", NULL);
    cr_expect_null(strstr(b.data, "threads=1"), "a rejected change is not listed: %s", b.data);
    cp_buf_release(&b);
}
