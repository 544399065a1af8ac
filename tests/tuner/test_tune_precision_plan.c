/* The per-node precision plan (tuner/precision_plan.c).
 *
 * The assembly and its bisection run on injected figures: each node's gain
 * and its loss alone, and a precision oracle that adds the chosen nodes'
 * losses in a known way (in quadrature, as the assembly assumes, or
 * linearly, worse than it assumes). They pin the order, the first guess,
 * how many checks the bisection spends, and that the plan is always a
 * prefix whose own check fitted.
 *
 * End to end, a session on the SD-like example under precision_loss<0.5%
 * (whole-model bf16 loses about 0.69% there) with replayed latencies: the
 * plan's proposal is the first step, fits the bound as measured, and the
 * report and best.om carry its --keep_dtype list. */
#include "support/calibration.h"
#include "support/cli.h"
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

/* ---- injected figures ------------------------------------------------------------ */

struct oracle {
    const struct cp_prec_item *items;
    bool linear; /* losses add linearly (else in quadrature) */
    int calls;
    bool fail; /* the check itself fails */
};

static enum cp_status oracle(void *ctx, const bool *in_bf16, size_t n, double *loss,
                             struct cp_diag *d)
{
    struct oracle *o = ctx;
    o->calls++;
    if (o->fail)
        return cp_diag_set(d, CP_ERR_INVALID, "the check failed");
    double sum = 0, sq = 0;
    for (size_t i = 0; i < n; i++)
        if (in_bf16[i]) {
            sum += o->items[i].loss;
            sq += o->items[i].loss * o->items[i].loss;
        }
    *loss = o->linear ? sum : sqrt(sq);
    return CP_OK;
}

static void select_ok(const struct cp_prec_item *items, size_t n, double budget, bool strict,
                      struct oracle *o, struct cp_prec_plan *p)
{
    struct cp_diag d;
    cp_diag_init(&d);
    o->items = items;
    cr_assert_eq(cp_prec_plan_select(items, n, budget, strict, oracle, o, p, &d), CP_OK, "%s",
                 d.msg);
    cr_assert_eq((int)p->n_trials, o->calls, "every check is recorded");
}

/* The plan is a prefix of the order whose own check fitted, and no longer
 * checked prefix fitted. */
static void expect_verified(const struct cp_prec_plan *p, double budget)
{
    bool found = p->k == 0;
    for (size_t t = 0; t < p->n_trials; t++) {
        if (p->trials[t].k == p->k && p->trials[t].fits) {
            found = true;
            cr_expect(p->trials[t].loss < budget);
            cr_expect_eq(p->trials[t].loss, p->loss);
        }
        if (p->trials[t].k > p->k)
            cr_expect_not(p->trials[t].fits, "a longer prefix (%zu) fitted", p->trials[t].k);
    }
    cr_expect(found, "the plan's prefix %zu was never checked", p->k);
}

TestSuite(prec_plan);

Test(prec_plan, candidates_are_ordered_by_gain_per_squared_loss)
{
    const struct cp_prec_item items[] = {
        {100, 0.2}, /* 2500 */
        {50, 0.05}, /* 20000 */
        {-5, 0.01}, /* slower in bf16: never a candidate */
        {80, 0.0},  /* loses nothing: first */
        {400, 0.4}, /* 2500, larger gain than item 0 */
        {30, 0.9},  /* breaks the budget alone */
        {0, 0.01},  /* no gain */
        {10, NAN},  /* unmeasured */
    };
    struct oracle o = {0};
    struct cp_prec_plan p;
    select_ok(items, 8, 0.5, true, &o, &p);
    size_t want[] = {3, 1, 4, 0};
    cr_assert_eq(p.n_order, 4);
    for (size_t i = 0; i < 4; i++)
        cr_expect_eq(p.order[i], want[i], "order[%zu] is %zu, expected %zu", i, p.order[i],
                     want[i]);
    cp_prec_plan_release(&p);
}

Test(prec_plan, quadrature_losses_are_predicted_and_verified_in_few_checks)
{
    /* 40 nodes of 0.1% each: sqrt(k) * 0.1 < 0.5 for k <= 24 */
    struct cp_prec_item items[40];
    for (size_t i = 0; i < 40; i++)
        items[i] = (struct cp_prec_item){.gain_ns = 100.0 + (double)i, .loss = 0.1};
    struct oracle o = {0};
    struct cp_prec_plan p;
    select_ok(items, 40, 0.5, true, &o, &p);
    cr_expect_eq(p.predicted_k, 24);
    cr_expect_eq(p.k, 24, "the guess is right when the losses add as assumed");
    cr_expect_eq(o.calls, 2 + 4, "the guess, everything, then bisection up to 40 (got %d)",
                 o.calls);
    expect_verified(&p, 0.5);
    /* the largest gains come first among equal losses */
    cr_expect_eq(p.order[0], 39);
    double gain = 0;
    for (size_t i = 0; i < p.k; i++)
        gain += items[p.order[i]].gain_ns;
    cr_expect_eq(p.gain_ns, gain);
    cp_prec_plan_release(&p);
}

Test(prec_plan, losses_worse_than_assumed_are_bisected_down_to_a_fitting_prefix)
{
    struct cp_prec_item items[40];
    for (size_t i = 0; i < 40; i++)
        items[i] = (struct cp_prec_item){.gain_ns = 100, .loss = 0.1};
    struct oracle o = {.linear = true};
    struct cp_prec_plan p;
    select_ok(items, 40, 0.5, true, &o, &p);
    /* linearly, 5 x 0.1 = 0.5 is not < 0.5: 4 fit */
    cr_expect_eq(p.k, 4, "k = %zu", p.k);
    cr_expect(p.loss < 0.5);
    cr_expect_leq(o.calls, 1 + 5, "%d checks for a prefix of 24", o.calls);
    expect_verified(&p, 0.5);
    cp_prec_plan_release(&p);

    /* <= admits the equality */
    memset(&o, 0, sizeof o);
    o.linear = true;
    select_ok(items, 40, 0.5, false, &o, &p);
    cr_expect_eq(p.k, 5, "k = %zu", p.k);
    expect_verified(&p, 0.5 + 1e-12);
    cp_prec_plan_release(&p);
}

Test(prec_plan, everything_fitting_takes_one_check_and_nothing_fitting_none)
{
    struct cp_prec_item items[10];
    for (size_t i = 0; i < 10; i++)
        items[i] = (struct cp_prec_item){.gain_ns = 10, .loss = 0.01};
    struct oracle o = {0};
    struct cp_prec_plan p;
    select_ok(items, 10, 1.0, true, &o, &p);
    cr_expect_eq(p.k, 10);
    cr_expect_eq(o.calls, 1);
    cp_prec_plan_release(&p);

    for (size_t i = 0; i < 10; i++)
        items[i].loss = 2.0;
    memset(&o, 0, sizeof o);
    select_ok(items, 10, 1.0, true, &o, &p);
    cr_expect_eq(p.k, 0);
    cr_expect_eq(p.n_order, 0);
    cr_expect_eq(o.calls, 0, "no node fits alone: nothing to check");
    cr_expect(isnan(p.loss));
    cp_prec_plan_release(&p);
}

Test(prec_plan, a_failing_check_fails_the_plan)
{
    struct cp_prec_item items[3] = {{10, 0.1}, {10, 0.1}, {10, 0.1}};
    struct oracle o = {.fail = true, .items = items};
    struct cp_prec_plan p;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_expect_eq(cp_prec_plan_select(items, 3, 1.0, true, oracle, &o, &p, &d), CP_ERR_INVALID);
    cr_expect_not_null(strstr(d.msg, "the check failed"));
    cp_prec_plan_release(&p);
}

/* ---- a session ------------------------------------------------------------------------ */

TestSuite(prec_plan_session, .init = cp_t_scratch_calibrated_setup, .fini = cp_t_scratch_close,
          .timeout = 600);

/* A machine on which bf16 at any share of nodes takes 0.6 of fp32's time,
 * and every other change nothing. */
static double bf16_faster(const struct cp_tune_point *p)
{
    return p->cfg.precision_mode == CP_PREC_ALLOW_MIX_PRECISION_BF16 ? 0.6e6 : 1e6;
}

static enum cp_status replay(void *ctx, const struct cp_tune_ab_request *q,
                             struct cp_measurement *out, struct cp_diag *d)
{
    (void)ctx;
    (void)d;
    return tt_replay(q, out, bf16_faster);
}

Test(prec_plan_session, a_mix_within_the_budget_is_found_and_reproducible)
{
    char cpu[256];
    if (!cp_t_host_has_bf16(cpu, sizeof cpu))
        cr_skip_test("this CPU (%s) has no bf16 arithmetic: no precision plan", cpu);
    struct cp_tune_opts o;
    char buf[1024];
    replayed_quick_opts(&o, cp_example_model(buf, sizeof buf, "sd_unet_tiny"), "plan", 2, replay);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_constraints_parse("precision_loss<0.5%", &o.constraints, &d), CP_OK);
    struct cp_tune_result r;
    cr_assert_eq(cp_tune(&o, &r, &d), CP_OK, "%s", d.msg);

    /* the plan: whole-model bf16 breaks the bound, a mix does not */
    cr_assert(r.prec.ran);
    cr_expect_gt(r.prec.loss_all, 0.5, "whole-model bf16 loses %g%%", r.prec.loss_all);
    cr_assert_gt(r.prec.chosen, 0, "%s", r.prec.summary);
    cr_expect_lt(r.prec.chosen, r.prec.nodes);
    cr_expect_lt(r.prec.loss_plan, 0.5);
    cr_expect_gt(r.prec.checks, (int)r.prec.candidates, "one check a candidate, then the plan's");
    cr_expect_geq(r.precision_checks, r.prec.checks);
    cr_expect_eq(r.profile_runs, 1);

    /* its proposal is the first step, measured and accepted */
    cr_assert_geq(r.n_steps, 2);
    const struct cp_tune_step *s = &r.steps[1];
    cr_expect_str_eq(s->source, "plan:precision");
    cr_expect_str_eq(cp_step_status_name(s->status), "accepted", "%s", s->reason);
    cr_expect_eq(s->precision_loss, r.prec.loss_plan, "the step's check is the plan's");
    cr_expect(isfinite(s->expected_gain) && s->expected_gain > 0);
    cr_expect_eq(r.best.cfg.precision_mode, CP_PREC_ALLOW_MIX_PRECISION_BF16);
    cr_expect_neq(r.best.cfg.keep_dtype[0], '\0');
    /* a step rejected on precision (a layout that moves the loss past the
     * bound) spends no latency evaluation */
    int measured = 0;
    for (size_t i = 1; i < r.n_steps; i++)
        measured += isfinite(r.steps[i].measured_gain);
    cr_expect_eq(r.latency_evals, measured);
    /* no step on the whole-model point the plan measured */
    for (size_t i = 1; i < r.n_steps; i++)
        cr_expect_str_neq(r.steps[i].delta, "precision_mode=allow_mix_precision_bf16");

    /* best.keep_dtype and the command in the report reproduce best.om */
    char *keep = cp_t_fmt("%s/best.keep_dtype", o.out_dir);
    char *text = ct_read_text(keep);
    cr_assert_not_null(text);
    cr_expect_eq(strlen(text), strlen(r.best.cfg.keep_dtype) + 1);
    char *rep = ct_read_text(cp_t_fmt("%s/report.json", o.out_dir));
    json_t *j = ct_json(rep);
    json_t *plan = json_object_get(j, "precision_plan");
    cr_assert(json_is_object(plan));
    cr_expect_eq(json_integer_value(json_object_get(plan, "bf16_nodes")), (long long)r.prec.chosen);
    cr_expect_eq(json_array_size(json_object_get(plan, "trials")), r.prec.n_trials);
    cr_expect(json_is_array(json_object_get(j, "pareto_steps")));
    const char *cmd =
        json_string_value(json_object_get(json_object_get(j, "best"), "convert_command"));
    cr_assert_not_null(cmd);
    cr_expect_not_null(strstr(cmd, "--keep_dtype="), "%s", cmd);
    char *md = ct_read_text(cp_t_fmt("%s/report.md", o.out_dir));
    cr_expect_not_null(strstr(md, "Per-node precision plan"));
    cr_expect_not_null(strstr(md, "precision checks"));

    char *again = cp_t_fmt("%s/again", cp_t_dir);
    struct cp_run cr;
    cp_run_cli(&cr, "convert", cp_t_fmt("--model=%s", buf), "--framework=5",
               cp_t_fmt("--output=%s", again), "--precision_mode=allow_mix_precision_bf16",
               cp_t_fmt("--keep_dtype=%s", keep), NULL);
    cr_assert_eq(cr.exit_code, 0, "%s", cr.err);
    cp_run_release(&cr);
    cp_run_cli(&cr, "compare", buf, cp_t_fmt("%s.om", again), "--json", "--threads", "1", NULL);
    json_t *cj = ct_json(cr.out);
    double loss = json_number_value(json_object_get(cj, "precision_loss_pct"));
    cr_expect(fabs(loss - r.best_precision_loss) < 1e-6,
              "the reproduced model computes as the best did: %.9g%% against %.9g%%", loss,
              r.best_precision_loss);
    json_decref(cj);
    cp_run_release(&cr);
    json_decref(j);
    free(rep);
    free(md);
    free(text);
    cp_tune_result_release(&r);
    opts_release(&o);
}

Test(prec_plan_session, a_bound_on_one_output_is_planned_for_and_a_wrong_name_refused)
{
    char cpu[256];
    if (!cp_t_host_has_bf16(cpu, sizeof cpu))
        cr_skip_test("this CPU (%s) has no bf16 arithmetic: no precision plan", cpu);
    struct cp_tune_opts o;
    char buf[1024];
    replayed_quick_opts(&o, cp_example_model(buf, sizeof buf, "sd_unet_tiny"), "wrong", 1, replay);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_constraints_parse("precision_loss[nope]<1%", &o.constraints, &d), CP_OK);
    struct cp_tune_result r;
    cr_expect_eq(cp_tune(&o, &r, &d), CP_ERR_USAGE, "%s", d.msg);
    cr_expect_not_null(strstr(d.msg, "no output 'nope'"), "%s", d.msg);
    cr_expect_not_null(strstr(d.msg, "noise_pred"), "the message lists the outputs: %s", d.msg);
    cp_tune_result_release(&r);
    opts_release(&o);

    replayed_quick_opts(&o, buf, "output", 1, replay);
    cp_diag_init(&d);
    cr_assert_eq(cp_constraints_parse("precision_loss[noise_pred]<0.5%", &o.constraints, &d),
                 CP_OK);
    cr_assert_eq(cp_tune(&o, &r, &d), CP_OK, "%s", d.msg);
    cr_assert(r.prec.ran);
    cr_assert_gt(r.prec.chosen, 0, "%s", r.prec.summary);
    cr_expect_lt(r.prec.loss_plan, 0.5, "the only output carries the whole loss");
    cr_expect_not_null(strstr(r.prec.summary, "precision_loss[noise_pred]<0.5%"), "%s",
                       r.prec.summary);
    for (size_t t = 0; t < r.prec.n_trials; t++)
        cr_expect_eq(r.prec.trials[t].fits, r.prec.trials[t].loss < 1.0, "check %zu", t);
    cr_assert_geq(r.n_steps, 2);
    cr_expect_str_eq(cp_step_status_name(r.steps[1].status), "accepted", "%s", r.steps[1].reason);
    cp_tune_result_release(&r);
    opts_release(&o);
}
