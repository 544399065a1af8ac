/* The tuning loop on small models: constraint violations are rejected with
 * the constraint named, the budget holds, an interrupted session resumes
 * from the knowledge base, a missing source of a .om is a clear error,
 * batch tuning runs two workers against one knowledge base, the report
 * reproduces the best model, and deltas parse and print canonically.
 * Nothing here depends on which candidate measures faster: the verdicts on
 * measured gains are pinned in test_tune_replayed.c (replayed rounds) and
 * measured for real in tests/perf/test_perf_tune.c. */
#define _GNU_SOURCE
#include "support/cli.h"
#include "support/db.h"
#include "support/host.h"
#include "support/run.h"
#include "tuner/tuner.h"

#include "cli/cli_test.h"
#include "tuner/tune_test.h"

#include <criterion/criterion.h>
#include <jansson.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

TestSuite(tune, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close, .timeout = 600);

/* Whether step s is the bf16 candidate, which a CPU without bf16
 * arithmetic cannot convert. */
static bool is_bf16_step(const struct cp_tune_step *s)
{
    return strstr(s->delta, "precision_mode=allow_mix_precision_bf16") != NULL;
}

/* The bf16 candidate on a CPU without bf16: failed, with the conversion's
 * refusal as its reason, and never the best. */
static void expect_bf16_failed(const struct cp_tune_result *r, const struct cp_tune_step *s)
{
    cr_expect_str_eq(cp_step_status_name(s->status), "failed", "step %d %s: %s", s->step, s->delta,
                     s->reason);
    cr_expect(cp_t_is_bf16_refusal(s->reason, "allow_mix_precision_bf16"), "%s", s->reason);
    cr_expect_eq(r->best.cfg.precision_mode, CP_PREC_FORCE_FP32);
}

/* Every step has one outcome on a given CPU: memory<10KB rejects every
 * candidate that converts (the bound is checked before anything is run);
 * the bf16 candidate is rejected for precision on a CPU with bf16
 * arithmetic and fails to convert on one without. */
Test(tune, constraint_violations_are_rejected_with_the_constraint_named)
{
    char cpu[256];
    bool bf16_here = cp_t_host_has_bf16(cpu, sizeof cpu);
    cr_log_info("this CPU (%s) %s bf16 arithmetic", cpu, bf16_here ? "has" : "lacks");
    char buf[2048];
    struct cp_tune_opts o;
    quick_opts(&o, cp_example_model(buf, sizeof buf, "resnet_tiny"), "cons");
    o.budget = 3;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_constraints_parse("memory<10KB", &o.constraints, &d), CP_OK, "%s", d.msg);
    struct cp_tune_result r;
    cr_assert_eq(cp_tune(&o, &r, &d), CP_OK, "%s", d.msg);
    cr_assert(r.n_steps >= 2);
    for (size_t i = 1; i < r.n_steps; i++) {
        const struct cp_tune_step *s = &r.steps[i];
        if (!bf16_here && is_bf16_step(s)) {
            expect_bf16_failed(&r, s);
            continue;
        }
        cr_expect_str_eq(cp_step_status_name(s->status), "rejected", "step %zu %s: %s", i, s->delta,
                         s->reason);
        cr_expect(strstr(s->reason, "breaks memory<") != NULL, "%s", s->reason);
    }
    cp_tune_result_release(&r);

    /* bf16 changes the arithmetic: a precision bound it cannot meet */
    struct cp_tune_opts p;
    quick_opts(&p, cp_example_model(buf, sizeof buf, "resnet_tiny"), "prec");
    p.budget = 2;
    cr_assert_eq(cp_constraints_parse("precision_loss<0.0001%", &p.constraints, &d), CP_OK);
    cr_assert_eq(cp_tune(&p, &r, &d), CP_OK, "%s", d.msg);
    const struct cp_tune_step *bf16 = step_with(&r, "precision_mode=allow_mix_precision_bf16");
    if (bf16_here) {
        /* the precision plan measured whole-model bf16 against the bound
         * first, and no step is spent on a point known to break it */
        cr_expect(r.prec.ran);
        cr_expect(r.prec.loss_all > 0.0001, "whole-model bf16 loses %g%%", r.prec.loss_all);
        for (size_t i = 1; i < r.n_steps; i++) {
            cr_expect_str_neq(r.steps[i].delta, "precision_mode=allow_mix_precision_bf16");
            if (r.steps[i].status == CP_STEP_ACCEPTED)
                cr_expect(r.steps[i].precision_loss < 0.0001, "%s", r.steps[i].delta);
        }
    } else {
        cr_assert_not_null(bf16);
        expect_bf16_failed(&r, bf16);
    }
    cp_tune_result_release(&r);
    opts_release(&o);
    opts_release(&p);
}

/* A progress stream that raises the interrupt flag after the first step's
 * line, as Ctrl-C during the second measurement would. */
static volatile sig_atomic_t g_stop;

static ssize_t watch_write(void *cookie, const char *buf, size_t n)
{
    (void)cookie;
    if (memmem(buf, n, "[1/", 3))
        g_stop = 1;
    return (ssize_t)n;
}

Test(tune, an_interrupted_session_resumes_from_the_knowledge_base)
{
    char buf[2048];
    struct cp_tune_opts o;
    quick_opts(&o, cp_example_model(buf, sizeof buf, "resnet_tiny"), "resume");
    o.budget = 3;
    cookie_io_functions_t io = {.write = watch_write};
    FILE *progress = fopencookie(NULL, "w", io);
    cr_assert_not_null(progress);
    setvbuf(progress, NULL, _IONBF, 0);
    g_stop = 0;
    o.progress = progress;
    o.interrupt = &g_stop;
    struct cp_tune_result r;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_tune(&o, &r, &d), CP_OK, "%s", d.msg);
    cr_expect(r.interrupted);
    cr_expect_eq(r.evaluations, 1, "stopped after the measurement in progress");
    cr_expect_str_eq(r.stop_reason, "interrupted");
    int64_t session = r.session_id;
    char first[sizeof r.steps[1].delta];
    snprintf(first, sizeof first, "%s", r.steps[1].delta);
    cp_tune_result_release(&r);
    fclose(progress);

    o.progress = NULL;
    o.interrupt = NULL;
    cr_assert_eq(cp_tune(&o, &r, &d), CP_OK, "%s", d.msg);
    cr_expect(r.resumed);
    cr_expect_eq(r.session_id, session);
    cr_expect_eq(r.evaluations, o.budget, "the budget counts the earlier evaluation");
    cr_expect_str_eq(r.steps[1].delta, first, "the first step is the one measured before");
    for (size_t i = 2; i < r.n_steps; i++)
        cr_expect_str_neq(r.steps[i].delta, first, "no configuration is measured twice");
    cp_tune_result_release(&r);

    /* finished: running it again measures nothing */
    cr_assert_eq(cp_tune(&o, &r, &d), CP_OK, "%s", d.msg);
    cr_expect(r.already_done);
    cr_expect_eq(r.evaluations, o.budget);
    cp_tune_result_release(&r);
    opts_release(&o);
}

Test(tune, a_om_whose_source_is_gone_is_a_clear_error)
{
    char buf[2048];
    char *copy = cp_t_path("model.onnx");
    uint8_t *data = NULL;
    size_t len = 0;
    cr_assert_eq(cp_file_read(cp_example_model(buf, sizeof buf, "resnet_tiny"), &data, &len, NULL),
                 CP_OK);
    cr_assert_eq(cp_file_write_atomic(copy, data, len, NULL), CP_OK);
    free(data);
    char *base = cp_t_path("gone");
    char *om = cp_t_convert_file(copy, base, NULL);
    cr_assert_not_null(om);
    unlink(copy);
    char *kb = cp_t_path("kb.sqlite");
    struct cp_run r;
    cp_run_cli(&r, "tune", om, "--kb", kb, "--out", cp_t_dir, "--quiet", NULL);
    cr_expect_eq(r.exit_code, 2, "%s", r.err);
    cr_expect(strstr(r.err, "model.onnx") && strstr(r.err, "gone"), "%s", r.err);
    cp_run_release(&r);
    free(copy);
    free(base);
    free(om);
    free(kb);
}

Test(tune, the_report_reproduces_best_om)
{
    char buf[2048];
    char *kb = cp_t_path("kb.sqlite"), *out = cp_t_path("cli");
    struct cp_run r;
    /* --priority high: every measurement at nice -20 as root (the report
     * and each run's counters say so); refused with a warning otherwise */
    cp_run_cli(&r, "tune", cp_example_model(buf, sizeof buf, "resnet_tiny"), "--budget", "2",
               "--rounds", "20", "--kb", kb, "--out", out, "--quiet", "--json", "--priority",
               "high", NULL);
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    json_error_t e;
    json_t *j = json_loads(r.out, 0, &e);
    cr_assert_not_null(j, "tune --json: %s", e.text);
    bool root = geteuid() == 0;
    cr_expect_str_eq(json_string_value(json_object_get(j, "priority")), root ? "high" : "normal");
    if (!root)
        cr_expect(strstr(r.err, "--priority high"), "%s", r.err);
    cp_run_release(&r);
    const char *cmd =
        json_string_value(json_object_get(json_object_get(j, "best"), "convert_command"));
    cr_assert_not_null(cmd);
    cr_expect_eq(strncmp(cmd, "cannprof convert ", 17), 0, "%s", cmd);
    cr_expect_eq(json_array_size(json_object_get(j, "steps")), 3);
    /* the baseline trace carries the interference probe of every round,
     * so the diagnosis reads kernel times from undisturbed ones */
    char *bdb = cp_t_fmt("%s/baseline.db", out);
    sqlite3 *db = NULL;
    cr_assert_eq(sqlite3_open_v2(bdb, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK, "%s", bdb);
    int64_t samples = -1, probes = -2;
    cr_assert(cp_t_sql_int(db, "SELECT count(*) FROM samples", &samples));
    cr_assert(cp_t_sql_int(db,
                           "SELECT count(*) FROM counters WHERE name = 'probe_ns' AND "
                           "iteration >= 0",
                           &probes));
    /* the baseline measures 20 undisturbed rounds (or stops at its time
     * limit with fewer): every one it measured is stored */
    cr_expect_geq(samples, 1);
    cr_expect_eq(probes, samples);
    int64_t raised = -1;
    cr_assert(cp_t_sql_int(db,
                           "SELECT value FROM counters WHERE name = 'measure.priority_raised' "
                           "ORDER BY run_id LIMIT 1",
                           &raised));
    cr_expect_eq(raised, root ? 1 : 0);
    sqlite3_close(db);
    free(bdb);
    /* run the printed command (split on blanks: our paths have none) and
     * compare the model it writes with best.om byte for byte */
    char *argv[32] = {(char *)CP_CLI};
    size_t k = 1;
    char *copy = strdup(cmd + strlen("cannprof "));
    for (char *save = NULL, *t = strtok_r(copy, " ", &save); t && k < 31;
         t = strtok_r(NULL, " ", &save))
        argv[k++] = t;
    argv[k] = NULL;
    /* best.om records the paths it was converted with; the graph, the
     * weights and the knobs are what must be the same */
    char *best = cp_t_fmt("%s/best.om", out), *orig = cp_t_fmt("%s/best-from-tune.om", out);
    cr_assert_eq(rename(best, orig), 0);
    cp_run_argv(&r, argv);
    cr_assert_eq(r.exit_code, 0, "%s: %s", cmd, r.err);
    cp_run_release(&r);
    json_t *info[2];
    const char *files[2] = {orig, best};
    for (int i = 0; i < 2; i++) {
        cp_run_cli(&r, "info", files[i], "--json", NULL);
        cr_assert_eq(r.exit_code, 0, "%s", r.err);
        info[i] = json_loads(r.out, 0, NULL);
        cr_assert_not_null(info[i]);
        cp_run_release(&r);
    }
    cr_expect(json_equal(json_object_get(info[0], "graph"), json_object_get(info[1], "graph")),
              "the command converts the same graph");
    const char *knobs[] = {"precision_mode", "layout_policy", "fusion_switches", "buffer_optimize"};
    for (size_t i = 0; i < 4; i++)
        cr_expect(json_equal(json_object_get(json_object_get(info[0], "config"), knobs[i]),
                             json_object_get(json_object_get(info[1], "config"), knobs[i])),
                  "%s differs", knobs[i]);
    json_decref(info[0]);
    json_decref(info[1]);
    free(copy);
    free(best);
    free(orig);
    json_decref(j);
    free(kb);
    free(out);
}

Test(tune, batch_tuning_runs_two_workers_against_one_knowledge_base)
{
    char buf[2048];
    char *list = cp_t_path("models.txt");
    struct cp_buf text;
    cp_buf_init(&text);
    cp_buf_printf(&text, "# two models\n%s\n", cp_example_model(buf, sizeof buf, "resnet_tiny"));
    cp_buf_printf(&text, "%s\n", cp_example_model(buf, sizeof buf, "transformer_encoder_op14"));
    cr_assert_eq(cp_file_write_atomic(list, text.data, text.len, NULL), CP_OK);
    cp_buf_release(&text);
    char *kb = cp_t_path("kb.sqlite"), *out = cp_t_path("batch");
    struct cp_run r;
    cp_run_cli(&r, "tune", "--batch", list, "--jobs", "2", "--budget", "2", "--rounds", "15",
               "--kb", kb, "--out", out, "--quiet", NULL);
    cr_assert_eq(r.exit_code, 0, "%s\n%s", r.out, r.err);
    cr_expect(strstr(r.out, "| resnet_tiny |") != NULL, "%s", r.out);
    cr_expect(strstr(r.out, "| transformer_encoder_op14 |") != NULL, "%s", r.out);
    cr_expect(strstr(r.out, "error") == NULL, "%s", r.out);
    cp_run_release(&r);
    char *rep = cp_t_fmt("%s/resnet_tiny/report.json", out);
    cr_expect(cp_path_exists(rep));
    free(rep);
    /* again: both sessions are finished, nothing is measured */
    cp_run_cli(&r, "tune", "--batch", list, "--jobs", "2", "--budget", "2", "--rounds", "15",
               "--kb", kb, "--out", out, "--quiet", NULL);
    cr_expect_eq(r.exit_code, 0, "%s", r.err);
    cp_run_release(&r);
    cp_run_cli(&r, "kb", "list", "--kb", kb, "--json", NULL);
    cr_expect_eq(r.exit_code, 0, "%s", r.err);
    json_t *j = json_loads(r.out, 0, NULL);
    cr_expect_eq(json_array_size(j), 2, "two sessions, not four: %s", r.out);
    json_decref(j);
    cp_run_release(&r);
    free(list);
    free(kb);
    free(out);
}

Test(tune, bad_input_exits_2)
{
    char buf[2048];
    const char *model = cp_example_model(buf, sizeof buf, "resnet_tiny");
    struct {
        const char *a, *b, *expect;
    } cases[] = {
        {"--target", "speed", "--target"}, {"--constraints", "memroy<3GB", "memroy"},
        {"--budget", "0", "--budget"},     {"--time-limit", "soon", "--time-limit"},
        {"--keep", "some", "--keep"},      {"--test", "z", "--test"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        struct cp_run r;
        cp_run_cli(&r, "tune", model, cases[i].a, cases[i].b, NULL);
        cr_expect_eq(r.exit_code, 2, "%s %s", cases[i].a, cases[i].b);
        cr_expect(strstr(r.err, cases[i].expect) != NULL, "%s", r.err);
        cp_run_release(&r);
    }
    struct cp_run r;
    cp_run_cli(&r, "tune", "/nonexistent/model.onnx", "--quiet", NULL);
    cr_expect_eq(r.exit_code, 2, "%s", r.err);
    cp_run_release(&r);
}

Test(tune, deltas_parse_apply_and_print_canonically)
{
    struct cp_delta dl;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_delta_parse("threads=1 layout_policy=nchw switch:GeluFusionPass=off", &dl, &d),
                 CP_OK, "%s", d.msg);
    struct cp_buf b;
    cp_buf_init(&b);
    cp_delta_format(&dl, &b);
    cr_expect_str_eq(b.data, "layout_policy=nchw switch:GeluFusionPass=off threads=1");
    cp_buf_release(&b);
    struct cp_tune_point p, q, back;
    memset(&p, 0, sizeof p);
    cp_convert_config_init(&p.cfg);
    cr_assert_eq(cp_delta_apply(&p, &dl, &q, &d), CP_OK, "%s", d.msg);
    cr_expect_eq(q.cfg.layout_policy, CP_LAYOUT_POLICY_NCHW);
    cr_expect_eq(q.threads, 1);
    cr_expect_str_eq(q.cfg.fusion_switches, "GeluFusionPass:off");
    struct cp_delta between;
    cp_delta_between(&p, &q, &between);
    cr_expect_eq(between.n, 3);
    cr_assert_eq(cp_delta_parse("switch:ALL=on", &dl, &d), CP_OK);
    cr_assert_eq(cp_delta_apply(&q, &dl, &back, &d), CP_OK);
    cr_expect_str_eq(back.cfg.fusion_switches, "");
    char k1[48], k2[48];
    back.threads = 0;
    back.cfg.layout_policy = p.cfg.layout_policy;
    cp_tune_point_key(&p, k1);
    cp_tune_point_key(&back, k2);
    cr_expect_str_eq(k1, k2, "the same knobs are the same point");
    cp_diag_init(&d);
    cr_expect_eq(cp_delta_parse("speed=max", &dl, &d), CP_ERR_INVALID);
    cr_expect(strstr(d.msg, "unknown knob 'speed'") != NULL, "%s", d.msg);
    cp_diag_init(&d);
    cr_assert_eq(cp_delta_parse("switch:NoSuchPass=on", &dl, &d), CP_OK);
    cr_expect_eq(cp_delta_apply(&p, &dl, &q, &d), CP_ERR_INVALID);
    cr_expect(strstr(d.msg, "NoSuchPass") != NULL, "%s", d.msg);
    cp_diag_init(&d);
    cr_assert_eq(cp_delta_parse("layout_policy=diagonal", &dl, &d), CP_OK);
    cr_expect_neq(cp_delta_apply(&p, &dl, &q, &d), CP_OK);
}
