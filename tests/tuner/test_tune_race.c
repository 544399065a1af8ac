/* Races (tuner/tuner.h, CP_TUNE_RACE_MAX): the layout policies are
 * alternatives of one knob, measured against the same best on replayed
 * rounds. The largest significant gain wins and is the one accepted; the
 * others are rejected with the race's reason; each raced candidate is an
 * evaluation. (Holm's procedure itself: tests/stats/test_stats.c.) */
#include "support/cli.h"
#include "support/run.h"
#include "tuner/tuner.h"

#include "cli/cli_test.h"
#include "tuner/tune_test.h"

#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(tune_race, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close, .timeout = 300);

/* NCHW 2 ms; NHWC 1.2 ms; blocked 1 ms (the winner); auto 1.5 ms; one
 * thread much slower. */
static double layout_ns(const struct cp_tune_point *p)
{
    double ns = p->cfg.layout_policy == CP_LAYOUT_POLICY_NCHW      ? 2.0e6
                : p->cfg.layout_policy == CP_LAYOUT_POLICY_NHWC    ? 1.2e6
                : p->cfg.layout_policy == CP_LAYOUT_POLICY_BLOCKED ? 1.0e6
                                                                   : 1.5e6;
    return p->threads == 1 ? 3 * ns : ns;
}

static enum cp_status replay(void *ctx, const struct cp_tune_ab_request *q,
                             struct cp_measurement *out, struct cp_diag *d)
{
    (void)ctx;
    (void)d;
    return tt_replay(q, out, layout_ns);
}

Test(tune_race, the_largest_significant_gain_of_a_race_wins)
{
    char *om = ct_convert_to("resnet_tiny", "nchw", "--layout_policy=nchw", NULL);
    struct cp_tune_opts o;
    replayed_quick_opts(&o, om, "race", 6, replay);
    o.threads = 0;
    struct cp_tune_result r;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_tune(&o, &r, &d), CP_OK, "%s", d.msg);
    cr_expect_geq(r.races, 1, "the layouts are raced");
    size_t raced = 0, accepted = 0;
    const struct cp_tune_step *win = NULL;
    for (size_t i = 0; i < r.n_steps; i++) {
        const struct cp_tune_step *s = &r.steps[i];
        if (!strstr(s->delta, "layout_policy=") || !strstr(s->reason, "[race of"))
            continue;
        raced++;
        if (s->status == CP_STEP_ACCEPTED) {
            accepted++;
            win = s;
        }
    }
    cr_expect_geq(raced, 2, "at least two layouts in one race");
    cr_assert_eq(accepted, 1, "one winner of the first race");
    cr_expect_not_null(strstr(win->delta, "layout_policy=blocked"), "the fastest wins: %s",
                       win->delta);
    cr_expect_eq(r.best.cfg.layout_policy, CP_LAYOUT_POLICY_BLOCKED);
    const struct cp_tune_step *nhwc = step_with(&r, "layout_policy=nhwc");
    cr_assert_not_null(nhwc);
    cr_expect_eq(nhwc->status, CP_STEP_REJECTED);
    cr_expect_not_null(strstr(nhwc->reason, "raced: layout_policy=blocked gained more"), "%s",
                       nhwc->reason);
    cr_expect(nhwc->measured_gain > 0.1, "the loser was a real gain too: %g", nhwc->measured_gain);
    cr_expect_leq(r.evaluations, o.budget, "every raced candidate is an evaluation");
    cr_expect_eq(r.n_steps, (size_t)r.evaluations + 1);
    cp_tune_result_release(&r);
    opts_release(&o);
    free(om);
}

/* A machine on which one thread runs twice as fast as two: what a loaded
 * machine shows, where the second core is taken. The replayed rounds carry
 * a probe that flags `undisturbed_pct` of them undisturbed. */
static int undisturbed_pct;

static double one_thread_wins(const struct cp_tune_point *p)
{
    return p->threads == 1 ? 1.0e6 : 2.0e6;
}

static enum cp_status replay_probed(void *ctx, const struct cp_tune_ab_request *q,
                                    struct cp_measurement *out, struct cp_diag *d)
{
    (void)ctx;
    (void)d;
    enum cp_status st = tt_replay(q, out, one_thread_wins);
    out->probed = true;
    out->probe_ns = malloc(out->n * sizeof *out->probe_ns);
    out->undisturbed = malloc(out->n * sizeof *out->undisturbed);
    cr_assert(out->probe_ns && out->undisturbed);
    out->n_undisturbed = 0;
    for (size_t i = 0; i < out->n; i++) {
        bool quiet = (int)(i % 100) < undisturbed_pct;
        out->probe_ns[i] = quiet ? 1000 : 5000;
        out->undisturbed[i] = quiet;
        out->n_undisturbed += quiet;
    }
    out->floor_ns = out->reference_ns = 1000;
    return st;
}

static struct cp_tune_result tune_threads(int pct, const char *tag)
{
    char *om = ct_convert_to("resnet_tiny", tag, NULL);
    struct cp_tune_opts o;
    replayed_quick_opts(&o, om, tag, 6, replay_probed);
    o.threads = 2;
    o.rounds = 100;
    undisturbed_pct = pct;
    struct cp_tune_result r;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_tune(&o, &r, &d), CP_OK, "%s", d.msg);
    opts_release(&o);
    free(om);
    return r;
}

Test(tune_race, a_thread_count_that_wins_on_a_loaded_machine_is_not_taken)
{
    struct cp_tune_result r = tune_threads(30, "loaded");
    const struct cp_tune_step *s = step_with(&r, "threads=1");
    cr_assert_not_null(s, "the thread count is tried");
    cr_expect_eq(s->status, CP_STEP_REJECTED, "%s", s->reason);
    cr_expect(s->loaded);
    cr_expect_float_eq(s->undisturbed_share, 0.30, 1e-9);
    cr_expect(s->measured_gain > 0.4, "the win itself was measured: %g", s->measured_gain);
    cr_expect_not_null(strstr(s->reason, "loaded machine"), "%s", s->reason);
    cr_expect_eq(r.best.threads, 2);
    cp_tune_result_release(&r);
}

Test(tune_race, the_same_win_on_a_quiet_machine_is_taken)
{
    struct cp_tune_result r = tune_threads(90, "quiet");
    const struct cp_tune_step *s = step_with(&r, "threads=1");
    cr_assert_not_null(s, "the thread count is tried");
    cr_expect_eq(s->status, CP_STEP_ACCEPTED, "%s", s->reason);
    cr_expect_not(s->loaded);
    cr_expect_eq(r.best.threads, 1);
    cp_tune_result_release(&r);
}
