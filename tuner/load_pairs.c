/* Measuring two served configurations against each other under one
 * workload (tuner_internal.h): the flow tuner's flows and the serve
 * tuner's servers. */
#include "tuner/tuner_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>

enum cp_status cp_tune_load_pairs(cp_tune_load_fn run, void *ctx, int pairs, uint64_t seed,
                                  enum cp_target target, const struct cp_verdict_opts *vo,
                                  FILE *progress, const char *tag, struct cp_comparison *cmp,
                                  struct cp_tune_load_sample *b_worst, struct cp_diag *d)
{
    double va[CP_TUNE_MAX_PAIRS], vb[CP_TUNE_MAX_PAIRS];
    pairs = pairs < CP_TUNE_MAX_PAIRS ? pairs : CP_TUNE_MAX_PAIRS;
    *b_worst = (struct cp_tune_load_sample){.value = NAN, .p99_ms = 0, .throughput = INFINITY};
    /* a warm-up run each: the first requests' set-up */
    struct cp_tune_load_sample s = {0};
    enum cp_status st = run(ctx, 0, seed, &s, d);
    if (st == CP_OK)
        st = run(ctx, 1, seed, &s, d);
    for (int i = 0; st == CP_OK && i < pairs; i++) {
        uint64_t pair_seed = seed + 1 + (uint64_t)i;
        struct cp_tune_load_sample x = {0}, y = {0};
        /* alternate which goes first, so that neither is always second */
        int first = i % 2;
        st = run(ctx, first, pair_seed, first ? &y : &x, d);
        if (st == CP_OK)
            st = run(ctx, 1 - first, pair_seed, first ? &x : &y, d);
        if (st != CP_OK)
            break;
        va[i] = x.value;
        vb[i] = y.value;
        if (progress) {
            fprintf(progress, "%s:     pair %d: %.4g vs %.4g %s\n", tag, i + 1, x.value, y.value,
                    target == CP_TARGET_THROUGHPUT ? "requests/s" : "ms");
            fflush(progress);
        }
        b_worst->p99_ms = fmax(b_worst->p99_ms, y.p99_ms);
        b_worst->throughput = fmin(b_worst->throughput, y.throughput);
    }
    if (st != CP_OK)
        return st;
    enum cp_better better = target == CP_TARGET_THROUGHPUT ? CP_BETTER_HIGHER : CP_BETTER_LOWER;
    return cp_verdict_compare_paired(va, vb, (size_t)pairs, better, vo, cmp, d);
}

bool cp_tune_load_constraints_hold(const struct cp_constraints *c,
                                   const struct cp_tune_load_sample *w, char *why, size_t n)
{
    const struct cp_constraint *lat = cp_constraints_find(c, CP_CONSTRAINT_LATENCY);
    const struct cp_constraint *thr = cp_constraints_find(c, CP_CONSTRAINT_THROUGHPUT);
    char v[48], b[48];
    if (lat && !cp_constraint_holds(lat, w->p99_ms / 1e3)) {
        cp_constraint_format_value(CP_CONSTRAINT_LATENCY, w->p99_ms / 1e3, v);
        cp_constraint_format_value(CP_CONSTRAINT_LATENCY, lat->value, b);
        snprintf(why, n, "a run's p99 latency %s breaks latency%s%s", v,
                 cp_constraint_op_text(lat->op), b);
        return false;
    }
    if (thr && !cp_constraint_holds(thr, w->throughput)) {
        cp_constraint_format_value(CP_CONSTRAINT_THROUGHPUT, w->throughput, v);
        cp_constraint_format_value(CP_CONSTRAINT_THROUGHPUT, thr->value, b);
        snprintf(why, n, "a run's throughput %s breaks throughput%s%s", v,
                 cp_constraint_op_text(thr->op), b);
        return false;
    }
    return true;
}

void cp_tune_load_judge(struct cp_flow_tune_step *s, const struct cp_comparison *cmp,
                        const char *failure, const struct cp_constraints *c,
                        const struct cp_tune_load_sample *worst)
{
    if (!cmp) {
        s->verdict = CP_VERDICT_INCONCLUSIVE;
        s->accepted = false;
        snprintf(s->reason, sizeof s->reason, "failed: %.400s", failure);
        s->measured_pct = s->ci_lo = s->ci_hi = s->p = NAN;
        return;
    }
    s->measured_pct = cmp->delta_pct;
    s->ci_lo = cmp->ci_lo_pct;
    s->ci_hi = cmp->ci_hi_pct;
    s->p = cmp->p;
    s->before = cmp->before;
    s->after = cmp->after;
    s->verdict = cmp->verdict;
    char why[200] = "";
    bool holds = cp_tune_load_constraints_hold(c, worst, why, sizeof why);
    s->accepted = cmp->verdict == CP_VERDICT_IMPROVED && holds;
    snprintf(s->reason, sizeof s->reason, "%s",
             s->accepted                            ? "accepted"
             : !holds                               ? why
             : cmp->verdict == CP_VERDICT_REGRESSED ? "slower: rejected"
             : cmp->verdict == CP_VERDICT_UNCHANGED ? "no change beyond the threshold"
                                                    : "not significant");
}

void cp_tune_progress(FILE *f, const char *fmt, ...)
{
    if (!f)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fflush(f);
}

enum cp_status cp_tune_load_step_add(struct cp_flow_tune_step **steps, size_t *n,
                                     const struct cp_flow_tune_step *s, struct cp_diag *d)
{
    struct cp_flow_tune_step *g = cp_realloc_array(*steps, *n + 1, sizeof *g);
    if (!g)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    *steps = g;
    (*steps)[(*n)++] = *s;
    return CP_OK;
}
