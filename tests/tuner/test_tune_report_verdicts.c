/* What report.json says about the verdicts of a session (format 2): how
 * many candidates were measured against the best, which of them were
 * rejected as inconclusive (not significant although the change reached
 * the threshold), and the CPUs the session ran on; `tune --batch` reads the
 * counts back. A report written before they were counted reads as none;
 * a report of format 2 with them missing or malformed is refused. */
#include "support/cli.h"
#include "tuner/tuner.h"

#include <criterion/criterion.h>
#include <jansson.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

TestSuite(tune_report_verdicts, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close);

/* A step measured against the best: gain (fraction of latency saved), its
 * CI and p. */
static struct cp_tune_step measured(int n, enum cp_step_status st, double gain, double lo,
                                    double hi, double p)
{
    struct cp_tune_step s;
    memset(&s, 0, sizeof s);
    s.step = n;
    s.status = st;
    snprintf(s.delta, sizeof s.delta, "threads=%d", n);
    s.expected_gain = s.precision_loss = NAN;
    s.measured_gain = gain;
    s.ci_lo = lo;
    s.ci_hi = hi;
    s.p = p;
    return s;
}

/* Write a session of these steps with `target`; returns report.json parsed. */
static json_t *write_session(enum cp_target target, struct cp_tune_step *steps, size_t n,
                             struct cp_tune_report_row *row)
{
    struct cp_tune_opts o;
    cp_tune_opts_init(&o);
    o.model = "m.onnx";
    o.out_dir = cp_t_dir;
    o.target = target;
    struct cp_tune_result r;
    memset(&r, 0, sizeof r);
    cp_convert_config_init(&r.baseline.cfg);
    r.best = r.baseline;
    r.baseline_ns = r.best_ns = 1e6;
    r.steps = steps;
    r.n_steps = n;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_tune_write_report(&o, &r, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_tune_report_read(r.report_json, row, &d), CP_OK, "%s", d.msg);
    json_error_t err;
    json_t *j = json_load_file(r.report_json, 0, &err);
    cr_assert_not_null(j, "%s", err.text);
    return j;
}

static struct cp_tune_step baseline(void)
{
    struct cp_tune_step s = measured(0, CP_STEP_BASELINE, NAN, NAN, NAN, NAN);
    s.delta[0] = '\0';
    return s;
}

Test(tune_report_verdicts, an_inconclusive_rejection_is_counted_and_named)
{
    struct cp_tune_step steps[] = {
        baseline(),
        /* the case: -17.6% with a CI of [-24.8%, +122.3%] */
        measured(1, CP_STEP_REJECTED, 0.176, -1.223, 0.248, 0.31),
        /* significantly worse: a verdict, not an inconclusive one */
        measured(2, CP_STEP_REJECTED, -0.30, -0.35, -0.25, 0.001),
        /* no significant change, and small */
        measured(3, CP_STEP_REJECTED, 0.005, -0.01, 0.02, 0.6),
        measured(4, CP_STEP_ACCEPTED, 0.20, 0.15, 0.25, 0.001),
        /* rejected on precision before any measurement: no verdict */
        measured(5, CP_STEP_REJECTED, NAN, NAN, NAN, NAN),
        measured(6, CP_STEP_FAILED, NAN, NAN, NAN, NAN),
    };
    struct cp_tune_report_row row;
    json_t *j = write_session(CP_TARGET_LATENCY, steps, sizeof steps / sizeof steps[0], &row);
    cr_expect_eq(json_integer_value(json_object_get(j, "report_version")), 2);
    cr_expect_eq(json_integer_value(json_object_get(j, "verdicts")), 4);
    cr_expect_eq(json_integer_value(json_object_get(j, "inconclusive")), 1);
    json_t *which = json_object_get(j, "inconclusive_steps");
    cr_assert(json_is_array(which) && json_array_size(which) == 1);
    cr_expect_eq(json_integer_value(json_array_get(which, 0)), 1);
    /* the CPUs this process may run on, as a list */
    const char *cpus = json_string_value(json_object_get(j, "cpus"));
    cr_assert_not_null(cpus);
    cr_expect(cpus[0] >= '0' && cpus[0] <= '9', "%s", cpus);
    cr_expect_eq(row.verdicts, 4);
    cr_expect_eq(row.inconclusive, 1);
    cp_tune_report_row_release(&row);
    json_decref(j);
}

/* The memory target asks of latency only that it is not worse: no
 * candidate of it is rejected as inconclusive. */
Test(tune_report_verdicts, the_memory_target_has_no_inconclusive_rejections)
{
    struct cp_tune_step steps[] = {
        baseline(),
        measured(1, CP_STEP_REJECTED, 0.176, -1.223, 0.248, 0.31),
    };
    struct cp_tune_report_row row;
    json_t *j = write_session(CP_TARGET_MEMORY, steps, 2, &row);
    cr_expect_eq(row.verdicts, 1);
    cr_expect_eq(row.inconclusive, 0);
    cp_tune_report_row_release(&row);
    json_decref(j);
}

#define HEAD                                                                                       \
    "{\"model\":\"m\",\"baseline\":{\"median_ms\":1},\"best\":{\"median_ms\":1,"                   \
    "\"precision_loss_pct\":0,\"memory_bytes\":1},\"steps\":[]"

static enum cp_status read_text(const char *text, struct cp_tune_report_row *row, struct cp_diag *d)
{
    char *path = cp_t_path("report.json");
    cr_assert(cp_t_write_file(path, text, strlen(text)), "(see stderr)");
    memset(row, 0xab, sizeof *row);
    cp_diag_init(d);
    enum cp_status st = cp_tune_report_read(path, row, d);
    free(path);
    return st;
}

Test(tune_report_verdicts, a_report_from_before_the_counts_reads_as_none)
{
    struct cp_tune_report_row row;
    struct cp_diag d;
    cr_assert_eq(read_text(HEAD "}", &row, &d), CP_OK, "%s", d.msg);
    cr_expect_eq(row.verdicts, 0);
    cr_expect_eq(row.inconclusive, 0);
    cp_tune_report_row_release(&row);
    /* and a report of format 2 reads its counts */
    cr_assert_eq(
        read_text(HEAD ",\"report_version\":2,\"verdicts\":5,\"inconclusive\":2}", &row, &d), CP_OK,
        "%s", d.msg);
    cr_expect_eq(row.verdicts, 5);
    cr_expect_eq(row.inconclusive, 2);
    cp_tune_report_row_release(&row);
}

Test(tune_report_verdicts, a_report_with_bad_counts_is_refused_naming_the_field)
{
    static const char *const bad[][2] = {
        {HEAD ",\"report_version\":\"2\"}", "'report_version'"},
        {HEAD ",\"report_version\":0}", "'report_version'"},
        /* format 2 without its counts: not a report from before them */
        {HEAD ",\"report_version\":2}", "'verdicts'"},
        {HEAD ",\"report_version\":2,\"verdicts\":3}", "'inconclusive'"},
        {HEAD ",\"report_version\":2,\"verdicts\":-1,\"inconclusive\":0}", "'verdicts'"},
        {HEAD ",\"report_version\":2,\"verdicts\":3,\"inconclusive\":1.5}", "'inconclusive'"},
        {HEAD ",\"report_version\":2,\"verdicts\":3,\"inconclusive\":4}", "'inconclusive'"},
        {HEAD ",\"report_version\":2,\"verdicts\":3,\"inconclusive\":null}", "'inconclusive'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct cp_tune_report_row row;
        struct cp_diag d;
        cr_expect_eq(read_text(bad[i][0], &row, &d), CP_ERR_CORRUPT, "%s", bad[i][0]);
        cr_expect(strstr(d.msg, "report.json") && strstr(d.msg, bad[i][1]), "%s: %s", bad[i][0],
                  d.msg);
        cr_expect_null(row.model, "outputs are left empty");
        cr_expect_null(row.accepted);
    }
}
