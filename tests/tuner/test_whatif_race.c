/* The race of `suggest --measure` (tuner/whatif.c, cp_whatif_race_top),
 * with injected measurements: which findings are raced (ranked 2..top,
 * measured, within the constraints, their CI overlapping the first's),
 * that a challenger faster by the drift between runs, significantly, moves
 * to the top and the next one races the new leader, that a smaller or
 * insignificant win does not, that a race which could not be measured leaves
 * the order as it was, and that an error stops the race. */
#include "tuner/tuner.h"
#include "tuner/tuner_internal.h"

#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#define MAXF 6

struct fixture {
    struct cp_finding f[MAXF];
    struct cp_whatif w[MAXF];
    char titles[MAXF][24];
    size_t n;
};

/* Findings ranked as given: gain g[i] with CI [g - h[i], g + h[i]]. */
static void setup(struct fixture *x, size_t n, const double *g, const double *h)
{
    memset(x, 0, sizeof *x);
    x->n = n;
    for (size_t i = 0; i < n; i++) {
        snprintf(x->titles[i], sizeof x->titles[i], "F%zu", i);
        x->f[i].title = x->titles[i];
        x->f[i].gain = g[i];
        x->w[i].measured = true;
        x->w[i].gain = g[i];
        x->w[i].lo = g[i] - h[i];
        x->w[i].hi = g[i] + h[i];
        x->w[i].slot = (int)i;
    }
}

/* The injected race: the challenger's advantage over the leader is
 * truth[challenger] - truth[leader]; calls are logged as "L>C". */
struct oracle {
    double truth[MAXF];
    bool fail_measure; /* the race cannot be measured */
    bool fail_error;   /* the race returns an error */
    double p;          /* the races' p-value; 0: 0.01 */
    char log[128];
    int rounds_seen;
};

static enum cp_status race(void *ctx, const struct cp_whatif *leader,
                           const struct cp_whatif *challenger, struct cp_whatif_race *out,
                           int rounds, struct cp_diag *d)
{
    struct oracle *o = ctx;
    size_t len = strlen(o->log);
    snprintf(o->log + len, sizeof o->log - len, "%s%d>%d", len ? " " : "", leader->slot,
             challenger->slot);
    o->rounds_seen = rounds;
    if (o->fail_error)
        return cp_diag_set(d, CP_ERR_IO, "injected");
    if (o->fail_measure) {
        snprintf(out->note, sizeof out->note, "the race failed: injected");
        return CP_OK;
    }
    out->measured = true;
    out->gain = o->truth[challenger->slot] - o->truth[leader->slot];
    out->lo = out->gain - 0.01;
    out->hi = out->gain + 0.01;
    out->p = o->p > 0 ? o->p : 0.01;
    out->rounds = rounds;
    return CP_OK;
}

static void order(const struct fixture *x, char *out, size_t n)
{
    out[0] = '\0';
    for (size_t i = 0; i < x->n; i++) {
        size_t len = strlen(out);
        snprintf(out + len, n - len, "%s%d", i ? "," : "", x->w[i].slot);
        cr_expect_str_eq(x->f[i].title, x->titles[x->w[i].slot],
                         "finding and what-if moved apart at %zu", i);
    }
}

static void run(struct fixture *x, struct oracle *o, size_t top, const char *want_order,
                const char *want_log)
{
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_whatif_race_top(x->f, x->w, x->n, top, 60, 0.05, race, o, &d), CP_OK, "%s",
                 d.msg);
    char got[64];
    order(x, got, sizeof got);
    cr_expect_str_eq(got, want_order);
    cr_expect_str_eq(o->log, want_log);
}

Test(whatif_race, overlapping_challengers_race_the_leader_and_the_faster_moves_up)
{
    struct fixture x;
    /* F1's and F2's CIs reach F0's: both raced; F1 is faster in truth */
    setup(&x, 4, (double[]){0.05, 0.04, 0.035, 0.03}, (double[]){0.02, 0.02, 0.02, 0.02});
    struct oracle o = {.truth = {0.03, 0.06, 0.02, 0.10}};
    run(&x, &o, 3, "1,0,2,3", "0>1 1>2");
    /* the record is on the challengers: F1 beat F0, F2 lost to F1 */
    cr_expect(x.w[0].race.run && x.w[0].race.measured && x.w[0].race.won);
    cr_expect_str_eq(x.w[0].race.against, "F0");
    cr_expect_float_eq(x.w[0].race.gain, 0.03, 1e-12);
    cr_expect(x.w[2].race.run && !x.w[2].race.won);
    cr_expect_str_eq(x.w[2].race.against, "F1", "the third raced the new leader");
    cr_expect(!x.w[1].race.run, "the old leader was not a challenger");
    /* the fourth is beyond top: never raced, even though it is fastest */
    cr_expect(!x.w[3].race.run);
    cr_expect_eq(o.rounds_seen, 60);
}

Test(whatif_race, a_challenger_whose_ci_is_clear_of_the_leaders_is_not_raced)
{
    struct fixture x;
    /* F1's top (0.05) is below F0's bottom (0.08): the what-ifs order them */
    setup(&x, 3, (double[]){0.10, 0.03, 0.02}, (double[]){0.02, 0.02, 0.10});
    struct oracle o = {.truth = {0.0, 0.5, 0.5}};
    run(&x, &o, 3, "2,0,1", "0>2");
    cr_expect(!x.w[2].race.run, "F1 stayed unraced");
}

Test(whatif_race, a_losing_challenger_leaves_the_order)
{
    struct fixture x;
    setup(&x, 3, (double[]){0.05, 0.045, 0.04}, (double[]){0.02, 0.02, 0.02});
    struct oracle o = {.truth = {0.05, 0.04, 0.05}};
    /* a tie (estimate 0) is not a win: the what-if's order stands */
    run(&x, &o, 3, "0,1,2", "0>1 0>2");
    cr_expect(x.w[1].race.run && !x.w[1].race.won && x.w[1].race.gain < 0);
    cr_expect(x.w[2].race.run && !x.w[2].race.won);
}

Test(whatif_race, a_win_within_the_drift_or_not_significant_leaves_the_order)
{
    struct fixture x;
    /* faster by 1 point, significantly: within the drift between runs */
    setup(&x, 3, (double[]){0.05, 0.045, 0.04}, (double[]){0.02, 0.02, 0.02});
    struct oracle o = {.truth = {0.05, 0.06, 0.06}};
    run(&x, &o, 3, "0,1,2", "0>1 0>2");
    cr_expect(x.w[1].race.measured && !x.w[1].race.won);
    /* faster by 10 points, not significantly */
    setup(&x, 3, (double[]){0.05, 0.045, 0.04}, (double[]){0.02, 0.02, 0.02});
    struct oracle o2 = {.truth = {0.0, 0.1, 0.1}, .p = 0.2};
    run(&x, &o2, 3, "0,1,2", "0>1 0>2");
    /* exactly the drift, significantly: a win */
    setup(&x, 2, (double[]){0.05, 0.045}, (double[]){0.02, 0.02});
    struct oracle o3 = {.truth = {0.0, CP_WHATIF_DRIFT_POINTS}};
    run(&x, &o3, 3, "1,0", "0>1");
}

Test(whatif_race, only_measured_findings_within_the_constraints_are_raced)
{
    struct fixture x;
    setup(&x, 4, (double[]){0.05, 0.05, 0.05, 0.05}, (double[]){0.02, 0.02, 0.02, 0.02});
    x.w[1].measured = false;
    x.f[2].violates = true;
    struct oracle o = {.truth = {0.0, 1.0, 1.0, 1.0}};
    run(&x, &o, 4, "3,0,1,2", "0>3");

    /* a leader that was not measured, or breaks a constraint, is not raced */
    setup(&x, 3, (double[]){0.05, 0.05, 0.05}, (double[]){0.02, 0.02, 0.02});
    x.w[0].measured = false;
    struct oracle o2 = {.truth = {0.0, 1.0, 1.0}};
    run(&x, &o2, 3, "0,1,2", "");
    setup(&x, 3, (double[]){0.05, 0.05, 0.05}, (double[]){0.02, 0.02, 0.02});
    x.f[0].unclassified = true;
    struct oracle o3 = {.truth = {0.0, 1.0, 1.0}};
    run(&x, &o3, 3, "0,1,2", "");
}

Test(whatif_race, top_below_two_or_one_finding_races_nothing)
{
    struct fixture x;
    setup(&x, 3, (double[]){0.05, 0.05, 0.05}, (double[]){0.02, 0.02, 0.02});
    struct oracle o = {.truth = {0.0, 1.0, 1.0}};
    run(&x, &o, 1, "0,1,2", "");
    run(&x, &o, 0, "0,1,2", "");
    setup(&x, 1, (double[]){0.05}, (double[]){0.02});
    run(&x, &o, 3, "0", "");
}

Test(whatif_race, a_race_that_cannot_be_measured_keeps_the_order_and_says_why)
{
    struct fixture x;
    setup(&x, 3, (double[]){0.05, 0.045, 0.04}, (double[]){0.02, 0.02, 0.02});
    struct oracle o = {.truth = {0.0, 1.0, 1.0}, .fail_measure = true};
    run(&x, &o, 3, "0,1,2", "0>1 0>2");
    cr_expect(x.w[1].race.run && !x.w[1].race.measured && !x.w[1].race.won);
    cr_expect(strstr(x.w[1].race.note, "injected") != NULL);
    cr_expect(isnan(x.w[1].race.gain), "an unmeasured race has no gain");
}

Test(whatif_race, an_error_stops_the_race)
{
    struct fixture x;
    setup(&x, 3, (double[]){0.05, 0.045, 0.04}, (double[]){0.02, 0.02, 0.02});
    struct oracle o = {.truth = {0.0, 1.0, 1.0}, .fail_error = true};
    struct cp_diag d;
    cp_diag_init(&d);
    cr_expect_eq(cp_whatif_race_top(x.f, x.w, x.n, 3, 60, 0.05, race, &o, &d), CP_ERR_IO);
    cr_expect_str_eq(o.log, "0>1", "no race after the error");
}
