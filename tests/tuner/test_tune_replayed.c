/* The tuning loop's verdicts on measured gains, with the measurements
 * replayed (cp_tune_opts.measure): a machine on which each point of the
 * knob space takes a known time, with a seeded scatter of 0.5%. Everything
 * after the measurement runs as for measured rounds, so these pin down
 * what the loop does with a gain, on any machine and however loaded:
 *
 *   - a candidate replayed 2x faster (the next layout, against a .om in
 *     plain NCHW whose own config is the baseline) is accepted, confirmed
 *     by a second measurement, with its gain, CI and p in the step, the
 *     knowledge base (raw samples included), the report, the step's trace
 *     and the final check against the baseline;
 *   - one replayed 3x slower is rejected as significantly worse, after the
 *     first look of its measurement (10 of 20 rounds);
 *   - one that is faster only the first time is rejected, "not reproduced";
 *   - a real improvement below the threshold is not accepted;
 *   - for the throughput target the verdict is on items per second: a
 *     batch of 2 whose runs take 1.5x as long is accepted;
 *   - a measurement that is not a pair of rounds fails the step.
 *
 * The baseline's own bench still runs (a few rounds); no rule pack is
 * loaded, so the proposals are the knob space's neighbours, in its order,
 * and the calibration is a fixed one. The same verdicts measured for real
 * are tests/perf/test_perf_tune.c. */
#include "knowledge/kb_tuning.h"
#include "support/calibration.h"
#include "support/cli.h"
#include "support/db.h"
#include "support/run.h"
#include "tuner/tuner.h"

#include "cli/cli_test.h"
#include "tuner/tune_test.h"

#include <criterion/criterion.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <jansson.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(tune_replayed, .init = cp_t_scratch_calibrated_setup, .fini = cp_t_scratch_close,
          .timeout = 300);

/* ---- the replayed machine ------------------------------------------------------ */

#define BASE_NS 1e6 /* one run of the baseline: 1 ms */

/* How many times as long one run of point p takes as the baseline's, in
 * the measurement of `kind`. */
typedef double (*factor_fn)(const struct cp_tune_point *p, enum cp_tune_ab_kind kind);

struct replay {
    factor_fn factor;
    double scatter; /* relative sd of a run; 0.005 when 0 */
    int calls[3];   /* by kind */
    int confirms_of_step[16];
    bool single; /* give one subject only (a broken measurement) */
    /* The k-th confirmation of the session ran on a noisy minute: both
     * subjects alike, their rounds scattered this much (0: a normal one). */
    double noisy_confirm[4];
    /* != 0: every confirmation ran on a busy machine: probed, not one round
     * undisturbed, and the change's size scaled by this (0.02: a 50% gain
     * measures 1%; negative: it measures as a loss). */
    double busy_confirm;
};

static enum cp_status replay(void *ctx, const struct cp_tune_ab_request *q,
                             struct cp_measurement *out, struct cp_diag *d)
{
    (void)d;
    struct replay *r = ctx;
    r->calls[q->kind]++;
    if (q->kind == CP_TUNE_AB_CONFIRM && q->step >= 0 && q->step < 16)
        r->confirms_of_step[q->step]++;
    size_t n = (size_t)q->rounds;
    out->n_subjects = r->single ? 1 : 2;
    out->n = n;
    out->warmup = q->warmup;
    out->target = q->rounds;
    out->stop = CP_MEASURE_STOP_COUNT;
    gsl_rng *g = gsl_rng_alloc(gsl_rng_mt19937);
    cr_assert_not_null(g);
    gsl_rng_set(g, 1000 * (unsigned long)q->step + (unsigned long)q->kind + 1);
    const struct cp_tune_point *pts[2] = {q->a, q->b};
    double sd = r->scatter > 0 ? r->scatter : 0.005;
    int k = r->calls[CP_TUNE_AB_CONFIRM] - 1;
    bool noisy = q->kind == CP_TUNE_AB_CONFIRM && k < 4 && r->noisy_confirm[k] > 0;
    if (noisy)
        sd = r->noisy_confirm[k];
    bool busy = q->kind == CP_TUNE_AB_CONFIRM && r->busy_confirm != 0;
    if (busy) {
        out->probed = true;
        out->n_undisturbed = 0;
        out->undisturbed = calloc(n, sizeof *out->undisturbed);
        out->probe_ns = calloc(n, sizeof *out->probe_ns);
        cr_assert(out->undisturbed && out->probe_ns);
    }
    for (size_t s = 0; s < out->n_subjects; s++) {
        out->ns[s] = malloc(n * sizeof *out->ns[s]);
        cr_assert_not_null(out->ns[s]);
        double f = r->factor(pts[s], q->kind);
        if (busy)
            f = 1 + (f - 1) * r->busy_confirm;
        double mean = BASE_NS * (noisy ? 1.0 : f);
        for (size_t i = 0; i < n; i++)
            out->ns[s][i] = (uint64_t)(mean * fmax(0.05, 1 + gsl_ran_gaussian(g, sd)));
    }
    gsl_rng_free(g);
    return CP_OK;
}

/* ---- running a session ------------------------------------------------------------- */

/* A rule pack without rules: no finding is proposed, only the knob
 * space's neighbours (which do not depend on what was measured). */
static const char *const *no_rules(void)
{
    static char *paths[1];
    free(paths[0]);
    paths[0] = cp_t_path("none.yaml");
    ct_write_text(paths[0], "pack: none\nversion: 1\nrules: []\n");
    return (const char *const *)paths;
}

/* quick_opts for a replayed session: few rounds for the baseline's real
 * bench, the replay as the measurement. */
static void replayed_opts(struct cp_tune_opts *o, const char *model, const char *tag,
                          struct replay *r)
{
    quick_opts(o, model, tag);
    o->rounds = 20;
    o->warmup = 1;
    o->rule_paths = no_rules();
    o->n_rule_paths = 1;
    o->measure = replay;
    o->measure_ctx = r;
}

static void run(const struct cp_tune_opts *o, struct cp_tune_result *r)
{
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_tune(o, r, &d), CP_OK, "%s", d.msg);
}

static void expect_near(double got, double want, double tol, const char *what)
{
    cr_expect(fabs(got - want) <= tol, "%s: %g, expected %g +- %g", what, got, want, tol);
}

static double median_of(const uint64_t *x, size_t n)
{
    uint64_t *c = malloc(n * sizeof *c);
    cr_assert_not_null(c);
    memcpy(c, x, n * sizeof *c);
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && c[j] < c[j - 1]; j--) {
            uint64_t t = c[j];
            c[j] = c[j - 1];
            c[j - 1] = t;
        }
    double m = n % 2 ? (double)c[n / 2] : ((double)c[n / 2 - 1] + (double)c[n / 2]) / 2;
    free(c);
    return m;
}

/* ---- the verdicts --------------------------------------------------------------------- */

/* Plain NCHW as the real test finds it on resnet_tiny: every other layout
 * twice as fast. */
static double nchw_twice_as_slow(const struct cp_tune_point *p, enum cp_tune_ab_kind kind)
{
    (void)kind;
    return p->cfg.layout_policy == CP_LAYOUT_POLICY_NCHW ? 1.0 : 0.5;
}

Test(tune_replayed, a_candidate_replayed_twice_as_fast_is_accepted_with_its_gain)
{
    char *om = ct_convert_to("resnet_tiny", "nchw", "--layout_policy=nchw", NULL);
    struct replay rp = {.factor = nchw_twice_as_slow};
    struct cp_tune_opts o;
    replayed_opts(&o, om, "better", &rp);
    o.budget = 2; /* the other precision, then nhwc (the knob space's order) */
    struct cp_tune_result r;
    run(&o, &r);
    cr_expect_eq(r.baseline.cfg.layout_policy, CP_LAYOUT_POLICY_NCHW);
    const struct cp_tune_step *s = step_with(&r, "layout_policy=");
    cr_assert_not_null(s, "no other layout was tried within the budget");
    cr_expect_str_eq(s->delta, "layout_policy=nhwc");
    cr_expect_str_eq(cp_step_status_name(s->status), "accepted", "%s", s->reason);
    expect_near(s->measured_gain, 0.5, 0.01, "latency saved");
    cr_expect(s->ci_lo <= s->measured_gain && s->measured_gain <= s->ci_hi, "[%g, %g]", s->ci_lo,
              s->ci_hi);
    cr_expect_lt(s->p, 1e-6);
    cr_expect(strstr(s->reason, "latency -") != NULL, "%s", s->reason);
    expect_near(s->after_ns / s->before_ns, 0.5, 0.01, "after / before");
    cr_expect_eq(rp.confirms_of_step[s->step], 1, "an improvement is measured again");
    cr_expect_eq(r.best.cfg.layout_policy, CP_LAYOUT_POLICY_NHWC);
    cr_expect_eq(r.best_ns, s->after_ns);
    cr_expect_eq(r.evaluations, 2);
    /* the final check: the best against the baseline, replayed too */
    cr_expect_eq(rp.calls[CP_TUNE_AB_FINAL], 1);
    expect_near(r.final_change, 0.5, 0.01, "final change");
    cr_expect_lt(r.final_p, 1e-6);

    /* the knowledge base has the step and its rounds */
    struct cp_kb *kb = cp_t_kb(o.kb_path);
    cr_assert_not_null(kb);
    struct cp_kb_candidate *kc = NULL;
    size_t n = 0;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_kb_candidate_list(kb, r.session_id, &kc, &n, &d), CP_OK, "%s", d.msg);
    const struct cp_kb_candidate *k = NULL;
    for (size_t i = 0; i < n; i++)
        if (kc[i].step == s->step)
            k = &kc[i];
    cr_assert_not_null(k);
    cr_expect_str_eq(cp_step_status_name(k->status), "accepted");
    cr_expect_eq(k->measured_gain, s->measured_gain);
    uint64_t *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    cr_assert_eq(cp_kb_measurement_get(kb, k->id, "a", &a, &na, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_kb_measurement_get(kb, k->id, "b", &b, &nb, &d), CP_OK, "%s", d.msg);
    cr_expect_eq(na, 20);
    cr_expect_eq(nb, 20);
    expect_near(median_of(b, nb) / median_of(a, na), 0.5, 0.01, "stored rounds, b / a");
    free(a);
    free(b);
    cp_kb_candidate_list_free(kc, n);
    cp_kb_close(kb);

    /* the report says so, and the step's trace is an A/B trace of these rounds */
    char *rep = ct_read_text(r.report_json);
    char *want = cp_t_fmt("\"delta\":\"%s\"", s->delta);
    cr_expect(strstr(rep, want) && strstr(rep, "\"accepted\""), "%s", rep);
    free(want);
    free(rep);
    struct cp_run v;
    cp_run_cli(&v, "validate", "--ab", s->trace_path, "--metrics", "latency", "--json", NULL);
    cr_expect_eq(v.exit_code, 0, "%s %s", v.out, v.err);
    json_t *j = ct_json(v.out);
    cr_expect_str_eq(json_string_value(json_object_get(j, "verdict")), "improved");
    json_decref(j);
    cp_run_release(&v);
    cp_tune_result_release(&r);
    opts_release(&o);
    free(om);
}

static double nchw_three_times_slower(const struct cp_tune_point *p, enum cp_tune_ab_kind kind)
{
    (void)kind;
    return p->cfg.layout_policy == CP_LAYOUT_POLICY_NCHW ? 3.0 : 1.0;
}

Test(tune_replayed, a_candidate_replayed_three_times_slower_is_rejected_as_significantly_worse)
{
    char buf[2048];
    struct replay rp = {.factor = nchw_three_times_slower};
    struct cp_tune_opts o;
    replayed_opts(&o, cp_example_model(buf, sizeof buf, "resnet_tiny"), "worse", &rp);
    o.budget = 2; /* the other precision, then nchw */
    struct cp_tune_result r;
    run(&o, &r);
    const struct cp_tune_step *s = step_with(&r, "layout_policy=nchw");
    cr_assert_not_null(s, "nchw was not tried within the budget");
    cr_expect_str_eq(cp_step_status_name(s->status), "rejected", "%s", s->reason);
    cr_expect(strstr(s->reason, "significantly worse") != NULL, "%s", s->reason);
    cr_expect(strstr(s->reason, "latency +") != NULL, "%s", s->reason);
    expect_near(s->measured_gain, -2.0, 0.04, "latency saved");
    /* a clear loser stops at the first look (tuner.h, "sequential looks") */
    cr_expect(s->stopped_early, "%s", s->reason);
    cr_expect_eq(s->rounds, 10, "stopped after %lld rounds", (long long)s->rounds);
    cr_expect(strstr(s->reason, "stopped after 10 rounds") != NULL, "%s", s->reason);
    cr_expect_lt(s->p, 1e-3);
    cr_expect_geq(r.early_stops, 1);
    cr_expect_eq(rp.confirms_of_step[s->step], 0, "a rejection is not measured again");
    cr_expect_eq(r.best.cfg.layout_policy, CP_LAYOUT_POLICY_AUTO);
    cr_expect_eq(rp.calls[CP_TUNE_AB_FINAL], 0, "the best is the baseline: nothing to check");
    cp_tune_result_release(&r);
    opts_release(&o);
}

/* NHWC is twice as fast the first time it is measured, as a burst of load
 * on the other run would make it look, and no faster when measured again. */
static double nhwc_faster_once(const struct cp_tune_point *p, enum cp_tune_ab_kind kind)
{
    return p->cfg.layout_policy == CP_LAYOUT_POLICY_NHWC && kind == CP_TUNE_AB_CANDIDATE ? 0.5
                                                                                         : 1.0;
}

Test(tune_replayed, a_gain_the_confirmation_does_not_reproduce_is_rejected)
{
    char buf[2048];
    struct replay rp = {.factor = nhwc_faster_once};
    struct cp_tune_opts o;
    replayed_opts(&o, cp_example_model(buf, sizeof buf, "resnet_tiny"), "once", &rp);
    o.budget = 3; /* the other precision, nchw, nhwc */
    struct cp_tune_result r;
    run(&o, &r);
    const struct cp_tune_step *s = step_with(&r, "layout_policy=nhwc");
    cr_assert_not_null(s, "nhwc was not tried within the budget");
    cr_expect_eq(rp.confirms_of_step[s->step], 1);
    cr_expect_str_eq(cp_step_status_name(s->status), "rejected", "%s", s->reason);
    cr_expect(strncmp(s->reason, "not reproduced: a second measurement gave ", 42) == 0, "%s",
              s->reason);
    /* the figures are the second measurement's */
    expect_near(s->measured_gain, 0, 0.01, "latency saved, measured again");
    cr_expect_eq(r.best.cfg.layout_policy, CP_LAYOUT_POLICY_AUTO);
    cp_tune_result_release(&r);
    opts_release(&o);
}

/* NHWC twice as fast whenever it is measured calmly. */
static double nhwc_twice_as_fast(const struct cp_tune_point *p, enum cp_tune_ab_kind kind)
{
    (void)kind;
    return p->cfg.layout_policy == CP_LAYOUT_POLICY_NHWC ? 0.5 : 1.0;
}

/* The confirmation of a real gain ran on a noisy minute (rounds scattered
 * by 60%, the gain hidden): it cannot tell, so a third measurement decides,
 * and the gain is kept. */
Test(tune_replayed, an_inconclusive_confirmation_is_decided_by_a_third)
{
    char buf[2048];
    struct replay rp = {.factor = nhwc_twice_as_fast, .noisy_confirm = {0.6}};
    struct cp_tune_opts o;
    replayed_opts(&o, cp_example_model(buf, sizeof buf, "resnet_tiny"), "noisy", &rp);
    o.budget = 3;
    struct cp_tune_result r;
    run(&o, &r);
    const struct cp_tune_step *s = step_with(&r, "layout_policy=nhwc");
    cr_assert_not_null(s, "nhwc was not tried within the budget");
    cr_expect_eq(rp.confirms_of_step[s->step], 2, "a third measurement");
    cr_expect_str_eq(cp_step_status_name(s->status), "accepted", "%s", s->reason);
    expect_near(s->measured_gain, 0.5, 0.02, "the third measurement is the one reported");
    cr_expect_eq(r.best.cfg.layout_policy, CP_LAYOUT_POLICY_NHWC);
    cr_expect_eq(r.confirmations, 2);
    cp_tune_result_release(&r);
    opts_release(&o);
}

/* Both confirmations noisy: the gain is not taken, and the reason gives
 * both. */
Test(tune_replayed, two_inconclusive_confirmations_reject_the_gain)
{
    char buf[2048];
    struct replay rp = {.factor = nhwc_twice_as_fast, .noisy_confirm = {0.6, 0.6}};
    struct cp_tune_opts o;
    replayed_opts(&o, cp_example_model(buf, sizeof buf, "resnet_tiny"), "noisy2", &rp);
    o.budget = 3;
    struct cp_tune_result r;
    run(&o, &r);
    const struct cp_tune_step *s = step_with(&r, "layout_policy=nhwc");
    cr_assert_not_null(s, "nhwc was not tried within the budget");
    cr_expect_eq(rp.confirms_of_step[s->step], 2);
    cr_expect_str_eq(cp_step_status_name(s->status), "rejected", "%s", s->reason);
    cr_expect(strstr(s->reason, "(inconclusive), a third"), "%s", s->reason);
    cr_expect_neq(r.best.cfg.layout_policy, CP_LAYOUT_POLICY_NHWC);
    cp_tune_result_release(&r);
    opts_release(&o);
}

/* The confirmation ran on a busy machine (every round disturbed, the
 * halving measured as 1% faster): it agrees in direction, significantly, so
 * the gain is kept, with the first measurement's figures and a note. */
Test(tune_replayed, a_busy_confirmation_that_agrees_in_direction_confirms)
{
    char buf[2048];
    struct replay rp = {.factor = nhwc_twice_as_fast, .scatter = 0.001, .busy_confirm = 0.02};
    struct cp_tune_opts o;
    replayed_opts(&o, cp_example_model(buf, sizeof buf, "resnet_tiny"), "busy", &rp);
    o.budget = 3;
    struct cp_tune_result r;
    run(&o, &r);
    const struct cp_tune_step *s = step_with(&r, "layout_policy=nhwc");
    cr_assert_not_null(s, "nhwc was not tried within the budget");
    cr_expect_str_eq(cp_step_status_name(s->status), "accepted", "%s", s->reason);
    cr_expect(strstr(s->reason, "confirmed on a busy machine: -1.0%"), "%s", s->reason);
    expect_near(s->measured_gain, 0.5, 0.02, "the first (undisturbed) measurement is reported");
    cr_expect_eq(r.best.cfg.layout_policy, CP_LAYOUT_POLICY_NHWC);
    cp_tune_result_release(&r);
    opts_release(&o);
}

/* A busy confirmation that measures a loss does not confirm. */
Test(tune_replayed, a_busy_confirmation_that_measures_a_loss_rejects)
{
    char buf[2048];
    struct replay rp = {.factor = nhwc_twice_as_fast, .scatter = 0.001, .busy_confirm = -0.04};
    struct cp_tune_opts o;
    replayed_opts(&o, cp_example_model(buf, sizeof buf, "resnet_tiny"), "busyloss", &rp);
    o.budget = 3;
    struct cp_tune_result r;
    run(&o, &r);
    const struct cp_tune_step *s = step_with(&r, "layout_policy=nhwc");
    cr_assert_not_null(s, "nhwc was not tried within the budget");
    cr_expect_str_eq(cp_step_status_name(s->status), "rejected", "%s", s->reason);
    cr_expect(strstr(s->reason, "not reproduced"), "%s", s->reason);
    cr_expect_neq(r.best.cfg.layout_policy, CP_LAYOUT_POLICY_NHWC);
    cp_tune_result_release(&r);
    opts_release(&o);
}

/* NCHW 1% faster, each run within 0.1%: real, and below the 2% threshold. */
static double nchw_one_percent_faster(const struct cp_tune_point *p, enum cp_tune_ab_kind kind)
{
    (void)kind;
    return p->cfg.layout_policy == CP_LAYOUT_POLICY_NCHW ? 0.99 : 1.0;
}

Test(tune_replayed, an_improvement_below_the_threshold_is_not_accepted)
{
    char buf[2048];
    struct replay rp = {.factor = nchw_one_percent_faster, .scatter = 0.001};
    struct cp_tune_opts o;
    replayed_opts(&o, cp_example_model(buf, sizeof buf, "resnet_tiny"), "small", &rp);
    o.budget = 2;
    struct cp_tune_result r;
    run(&o, &r);
    const struct cp_tune_step *s = step_with(&r, "layout_policy=nchw");
    cr_assert_not_null(s);
    cr_expect_str_eq(cp_step_status_name(s->status), "rejected", "%s", s->reason);
    cr_expect(strstr(s->reason, "a real change, but below the threshold") != NULL, "%s", s->reason);
    expect_near(s->measured_gain, 0.01, 0.002, "latency saved");
    cr_expect_lt(s->p, 0.05, "significant");
    cr_expect(s->stopped_early, "1%% cannot reach the 2%% threshold: the first look stops it");
    cr_expect_eq(rp.confirms_of_step[s->step], 0);
    cr_expect_eq(r.best.cfg.layout_policy, CP_LAYOUT_POLICY_AUTO);
    cp_tune_result_release(&r);
    opts_release(&o);
}

/* A batch of b items takes 1 + (b - 1) / 2 times as long as one item: every
 * run slower, more items per second. */
static double batch_amortises(const struct cp_tune_point *p, enum cp_tune_ab_kind kind)
{
    (void)kind;
    int b = p->batch > 0 ? p->batch : 1;
    return 1 + (b - 1) / 2.0;
}

Test(tune_replayed, the_throughput_target_judges_items_per_second)
{
    char buf[2048];
    struct replay rp = {.factor = batch_amortises};
    struct cp_tune_opts o;
    replayed_opts(&o, cp_example_model(buf, sizeof buf, "resnet_tiny"), "thr", &rp);
    o.target = CP_TARGET_THROUGHPUT;
    /* the other precision, three layouts (the default is auto), all
     * cores (when there are more than one), then batch=2 */
    o.budget = 6;
    struct cp_tune_result r;
    run(&o, &r);
    const struct cp_tune_step *s = step_with(&r, "batch=2");
    cr_assert_not_null(s, "batch 2 was not tried within the budget");
    cr_expect_str_eq(cp_step_status_name(s->status), "accepted", "%s", s->reason);
    /* 2 items in 1.5x the time: a third more items per second */
    expect_near(s->measured_gain, 1.0 / 3, 0.01, "throughput won");
    cr_expect(strstr(s->reason, "throughput +") != NULL, "%s", s->reason);
    /* while each run is half as long again */
    expect_near(s->after_ns / s->before_ns, 1.5, 0.02, "latency after / before");
    cr_expect_eq(r.best.batch, 2);
    expect_near(r.best_items_s, 2 * 1e9 / (1.5 * BASE_NS), 15, "items/s of the best");
    cp_tune_result_release(&r);
    opts_release(&o);
}

static double all_alike(const struct cp_tune_point *p, enum cp_tune_ab_kind kind)
{
    (void)p;
    (void)kind;
    return 1.0;
}

Test(tune_replayed, a_measurement_that_is_not_a_pair_fails_the_step)
{
    char buf[2048];
    struct replay rp = {.factor = all_alike, .single = true};
    struct cp_tune_opts o;
    replayed_opts(&o, cp_example_model(buf, sizeof buf, "resnet_tiny"), "broken", &rp);
    o.budget = 2;
    struct cp_tune_result r;
    run(&o, &r);
    const struct cp_tune_step *s = step_with(&r, "layout_policy=nchw");
    cr_assert_not_null(s);
    cr_expect_str_eq(cp_step_status_name(s->status), "failed");
    cr_expect(strstr(s->reason, "measurement: ") && strstr(s->reason, "2 subjects"), "%s",
              s->reason);
    cr_expect_eq(r.evaluations, 2, "a failed step counts against the budget");
    cp_tune_result_release(&r);
    opts_release(&o);
}
