/* The tuning loop's verdicts on measured gains, measured for real (ctest
 * label `perf`, run by bench/perf_tests.sh, never by scripts/test.sh): a
 * much better layout is accepted and a much worse one rejected as
 * significantly worse, and what held on one model (fusion passes turned
 * back on, accepted on their measured gain) is tried first on a similar
 * one. These depend on this machine making the faster model measure
 * faster; test_tune_replayed.c pins the same logic on replayed rounds. */
#include "support/cli.h"
#include "support/run.h"
#include "tuner/tuner.h"

#include "cli/cli_test.h"
#include "tuner/tune_test.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(tune, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close, .timeout = 600);

Test(tune, a_much_better_layout_is_accepted_and_a_worse_one_rejected)
{
    /* resnet_tiny in plain NCHW is several times slower than in the
     * blocked layout the convolutions want */
    char *om = ct_convert_to("resnet_tiny", "nchw", "--layout_policy=nchw", NULL);
    struct cp_tune_opts o;
    quick_opts(&o, om, "layout");
    o.budget = 4;
    o.threads = 0;
    struct cp_tune_result r;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_tune(&o, &r, &d), CP_OK, "%s", d.msg);
    cr_expect_eq(r.baseline.cfg.layout_policy, CP_LAYOUT_POLICY_NCHW,
                 "the .om's own config is the baseline");
    /* the layouts are alternatives of one knob, raced: one that leaves
     * NCHW for a layout the convolutions like (nhwc or blocked) wins */
    const struct cp_tune_step *layout = NULL;
    for (size_t i = 0; i < r.n_steps; i++)
        if (strstr(r.steps[i].delta, "layout_policy=") && r.steps[i].status == CP_STEP_ACCEPTED)
            layout = &r.steps[i];
    cr_assert_not_null(layout, "no other layout was accepted (%s)",
                       step_with(&r, "layout_policy=") ? step_with(&r, "layout_policy=")->reason
                                                       : "none tried");
    /* raced with the other layouts, or proposed by the layout rule itself */
    cr_expect(strstr(layout->reason, "[race of") || strstr(layout->reason, "blocked layout"), "%s",
              layout->reason);
    cr_expect(layout->measured_gain > 0.1, "gain %g", layout->measured_gain);
    cr_expect(layout->p < 0.05);
    cr_expect_eq(r.best.cfg.layout_policy != CP_LAYOUT_POLICY_NCHW, true);
    cr_expect(r.best_ns < r.baseline_ns);
    cr_expect(r.evaluations <= o.budget);
    cr_expect_eq(r.n_steps, (size_t)r.evaluations + 1, "baseline + one step per evaluation");
    cr_expect(cp_path_exists(r.best_om));
    cr_expect(cp_path_exists(r.report_md) && cp_path_exists(r.report_json));
    cp_tune_result_release(&r);
    opts_release(&o);
    free(om);
}

Test(tune, a_much_worse_layout_is_rejected_as_significantly_worse)
{
    /* from the blocked default, plain NCHW is several times slower */
    char buf[2048];
    struct cp_tune_opts o;
    quick_opts(&o, cp_example_model(buf, sizeof buf, "resnet_tiny"), "worse");
    o.budget = 8;
    struct cp_tune_result r;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_tune(&o, &r, &d), CP_OK, "%s", d.msg);
    const struct cp_tune_step *nchw = step_with(&r, "layout_policy=nchw");
    cr_assert_not_null(nchw, "nchw was never tried within the budget");
    cr_expect_str_eq(cp_step_status_name(nchw->status), "rejected", "%s", nchw->reason);
    cr_expect(strstr(nchw->reason, "significantly worse") != NULL, "%s", nchw->reason);
    cr_expect(nchw->measured_gain < 0);
    cr_expect_neq(r.best.cfg.layout_policy, CP_LAYOUT_POLICY_NCHW);
    cp_tune_result_release(&r);
    opts_release(&o);
}

Test(tune, what_held_on_one_model_is_tried_first_on_a_similar_one)
{
    /* op17 converted without its passes: fusing attention, GELU, ... wins */
    char *a = convert_unfused("transformer_encoder_op17", "op17");
    struct cp_tune_opts o;
    quick_opts(&o, a, "op17");
    o.budget = 4;
    o.use_kb_strategies = true;
    struct cp_tune_result r;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_tune(&o, &r, &d), CP_OK, "%s", d.msg);
    struct cp_buf held;
    cp_buf_init(&held);
    for (size_t i = 1; i < r.n_steps; i++)
        if (r.steps[i].status == CP_STEP_ACCEPTED)
            cp_buf_printf(&held, "[%s]", r.steps[i].delta);
    cr_assert(held.len > 0, "nothing held on op17 without its passes");
    cp_tune_result_release(&r);

    /* op14, the same architecture exported at another opset, converted the
     * same way: the knowledge base's strategy comes first */
    char *b = convert_unfused("transformer_encoder_op14", "op14");
    struct cp_tune_opts p;
    quick_opts(&p, b, "op14");
    p.budget = 1;
    p.use_kb_strategies = true;
    cr_assert_eq(cp_tune(&p, &r, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(r.n_steps, 2);
    cr_expect_str_eq(r.steps[1].source, "kb", "first step came from %s", r.steps[1].source);
    char *want = cp_t_fmt("[%s]", r.steps[1].delta);
    cr_expect(strstr(held.data, want) != NULL, "%s did not hold on op17 (%s)", r.steps[1].delta,
              held.data);
    char first[sizeof r.steps[1].delta];
    snprintf(first, sizeof first, "%s", r.steps[1].delta);
    free(want);
    cp_tune_result_release(&r);

    /* and the query shows it, with the model it held on */
    struct cp_run q;
    char *kb = cp_t_path("kb.sqlite");
    cp_run_cli(&q, "kb", "query", "--model", b, "--kb", kb, "--json", NULL);
    cr_expect_eq(q.exit_code, 0, "%s", q.err);
    cr_expect(strstr(q.out, first) && strstr(q.out, "transformer_encoder_op17"), "%s", q.out);
    cp_run_release(&q);
    cp_buf_release(&held);
    opts_release(&o);
    opts_release(&p);
    free(kb);
    free(a);
    free(b);
}
