/* What a tuning session tells people: progress lines while it runs, and
 * report.md / report.json when it stops. */
#include "core/json.h"
#include "tuner/tuner_internal.h"

#include <jansson.h>

#include <math.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void clock_text(const struct cp_tune_ctx *c, char out[16])
{
    unsigned s = (unsigned)((cp_clock_ns() - c->t0) / 1000000000ull);
    snprintf(out, 16, "%02u:%02u", s / 60, s % 60);
}

void cp_tune_progress_note(const struct cp_tune_ctx *c, const char *fmt, ...)
{
    FILE *f = c->o->progress;
    if (!f)
        return;
    char t[16];
    clock_text(c, t);
    fprintf(f, "[tune %s] ", t);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fflush(f);
}

void cp_tune_progress_step(const struct cp_tune_ctx *c, const struct cp_tune_step *s)
{
    FILE *f = c->o->progress;
    if (!f)
        return;
    const struct cp_tune_result *r = c->r;
    char t[16];
    clock_text(c, t);
    bool tty = c->o->progress_tty;
    const char *on = "", *off = "";
    if (tty) {
        off = "\033[0m";
        on = s->status == CP_STEP_ACCEPTED   ? "\033[32m"
             : s->status == CP_STEP_REJECTED ? "\033[33m"
                                             : "\033[31m";
    }
    if (c->o->target == CP_TARGET_THROUGHPUT)
        fprintf(f, "[%d/%d %s] %s%-8s%s %s (%s): %s; best %.1f items/s\n", r->evaluations,
                c->o->budget, t, on, cp_step_status_name(s->status), off, s->delta, s->source,
                s->reason, r->best_items_s);
    else
        fprintf(f, "[%d/%d %s] %s%-8s%s %s (%s): %s; best %.3f ms\n", r->evaluations, c->o->budget,
                t, on, cp_step_status_name(s->status), off, s->delta, s->source, s->reason,
                r->best_ns / 1e6);
    fflush(f);
}

/* ---- report.json ----------------------------------------------------------------- */

static void convert_command(const struct cp_tune_opts *o, const struct cp_tune_point *p,
                            const char *output, struct cp_buf *out)
{
    struct cp_convert_config cfg = p->cfg;
    snprintf(cfg.output, sizeof cfg.output, "%.1000s", output);
    /* the switches as a file next to the report, so the command stands alone */
    if (cfg.fusion_switches[0])
        snprintf(cfg.fusion_switch_file, sizeof cfg.fusion_switch_file, "%.990s/best.switches",
                 o->out_dir);
    else
        cfg.fusion_switch_file[0] = '\0';
    if (cfg.keep_dtype[0])
        snprintf(cfg.keep_dtype_file, sizeof cfg.keep_dtype_file, "%.990s/best.keep_dtype",
                 o->out_dir);
    else
        cfg.keep_dtype_file[0] = '\0';
    cfg.int8_nodes_file[0] = cfg.quant_ranges_file[0] = '\0';
    if (cfg.int8_nodes[0]) {
        snprintf(cfg.int8_nodes_file, sizeof cfg.int8_nodes_file, "%.990s/best.int8_nodes",
                 o->out_dir);
        snprintf(cfg.quant_ranges_file, sizeof cfg.quant_ranges_file, "%.990s/best.quant_ranges",
                 o->out_dir);
    }
    cp_convert_config_cmdline(&cfg, out);
}

static void runtime_flags(const struct cp_tune_point *p, struct cp_buf *out)
{
    if (p->threads > 0)
        cp_buf_printf(out, " --threads %d", p->threads);
    if (p->batch > 0)
        cp_buf_printf(out, " --batch %d", p->batch);
}

/* [lo, hi] */
static json_t *pair(double lo, double hi)
{
    json_t *a = json_array();
    if (a && cp_json_push(a, cp_json_num(lo)) && cp_json_push(a, cp_json_num(hi)))
        return a;
    json_decref(a);
    return NULL;
}

static json_t *step_json(const struct cp_tune_step *s)
{
    json_t *o = json_object();
    if (o && cp_json_set_int(o, "step", s->step) && cp_json_set_str(o, "delta", s->delta) &&
        cp_json_set_str(o, "source", s->source) &&
        cp_json_set_str(o, "status", cp_step_status_name(s->status)) &&
        cp_json_set_str(o, "reason", s->reason) &&
        cp_json_set_num(o, "expected_gain", s->expected_gain) &&
        cp_json_set_num(o, "measured_gain", s->measured_gain) &&
        cp_json_set(o, "ci", pair(s->ci_lo, s->ci_hi)) && cp_json_set_num(o, "p", s->p) &&
        cp_json_set_num(o, "precision_loss_pct", s->precision_loss) &&
        cp_json_set_int(o, "memory_bytes", (int64_t)s->memory_bytes) &&
        cp_json_set_num(o, "median_ms", s->after_ns / 1e6) &&
        cp_json_set_int(o, "rounds", s->rounds) &&
        cp_json_set_bool(o, "stopped_early", s->stopped_early) &&
        cp_json_set_bool(o, "held_back_loaded", s->loaded) &&
        cp_json_set_num(o, "undisturbed_share", s->rounds > 0 ? s->undisturbed_share : NAN) &&
        cp_json_set_str(o, "om", s->om_path) && cp_json_set_str(o, "trace", s->trace_path))
        return o;
    json_decref(o);
    return NULL;
}

/* {"point","median_ms","items_per_s","memory_bytes","precision_loss_pct"}
 * of the baseline or the best. */
static json_t *side_json(const struct cp_tune_point *p, double ns, double items_s, uint64_t memory,
                         double loss)
{
    json_t *o = json_object();
    if (o && cp_json_set(o, "point", cp_tune_point_to_json(p)) &&
        cp_json_set_num(o, "median_ms", ns / 1e6) && cp_json_set_num(o, "items_per_s", items_s) &&
        cp_json_set_int(o, "memory_bytes", (int64_t)memory) &&
        cp_json_set_num(o, "precision_loss_pct", loss))
        return o;
    json_decref(o);
    return NULL;
}

/* The figure to quote: both measured interleaved at the end. */
static json_t *against_json(const struct cp_tune_opts *o, const struct cp_tune_result *r)
{
    json_t *a = json_object();
    if (a &&
        cp_json_set_str(a, "metric",
                        o->target == CP_TARGET_THROUGHPUT ? "throughput" : "latency") &&
        cp_json_set_num(a, "gain_pct", 100 * r->final_change) &&
        cp_json_set(a, "ci_pct", pair(100 * r->final_ci_lo, 100 * r->final_ci_hi)) &&
        cp_json_set_num(a, "p", r->final_p) &&
        cp_json_set_num(a, "baseline_median_ms", r->final_baseline_ns / 1e6) &&
        cp_json_set_num(a, "best_median_ms", r->final_best_ns / 1e6))
        return a;
    json_decref(a);
    return NULL;
}

/* The steps on the Pareto front of (latency, precision_loss, memory): no
 * other measured point is at least as good in all three and better in
 * one. Indices into r->steps, in step order. OUT: n. Caller frees. */
size_t *cp_tune_pareto_steps(const struct cp_tune_result *r, size_t *n)
{
    *n = 0;
    size_t *v = cp_calloc(r->n_steps ? r->n_steps : 1, sizeof *v);
    for (size_t i = 0; v && i < r->n_steps; i++) {
        const struct cp_tune_step *a = &r->steps[i];
        if (!isfinite(a->after_ns) || !isfinite(a->precision_loss) || a->status == CP_STEP_FAILED)
            continue;
        bool dominated = false;
        for (size_t k = 0; k < r->n_steps && !dominated; k++) {
            const struct cp_tune_step *b = &r->steps[k];
            if (k == i || !isfinite(b->after_ns) || !isfinite(b->precision_loss) ||
                b->status == CP_STEP_FAILED)
                continue;
            bool no_worse = b->after_ns <= a->after_ns && b->precision_loss <= a->precision_loss &&
                            b->memory_bytes <= a->memory_bytes;
            bool better = b->after_ns < a->after_ns || b->precision_loss < a->precision_loss ||
                          b->memory_bytes < a->memory_bytes;
            dominated = no_worse && better;
        }
        if (!dominated)
            v[(*n)++] = i;
    }
    return v;
}

static json_t *int8_json(const struct cp_tune_int8_report *p)
{
    json_t *o = json_object();
    if (o && cp_json_set_str(o, "summary", p->summary) && cp_json_set_str(o, "base", p->base) &&
        cp_json_set_str(o, "calibration", p->calibration) &&
        cp_json_set_int(o, "nodes", (int64_t)p->nodes) &&
        cp_json_set_int(o, "candidates", (int64_t)p->candidates) &&
        cp_json_set_int(o, "int8_nodes", (int64_t)p->chosen) &&
        cp_json_set_num(o, "all_int8_loss_pct", p->loss_all) &&
        cp_json_set_num(o, "plan_loss_pct", p->loss_plan) &&
        cp_json_set_num(o, "profile_base_ms", p->base_ns / 1e6) &&
        cp_json_set_num(o, "profile_int8_ms", p->int8_ns / 1e6) &&
        cp_json_set_num(o, "predicted_ms", p->predicted_ns / 1e6) &&
        cp_json_set_int(o, "precision_checks", p->checks))
        return o;
    json_decref(o);
    return NULL;
}

static json_t *prec_json(const struct cp_tune_prec_report *p)
{
    json_t *o = json_object(), *trials = json_array();
    bool ok = o && trials;
    for (size_t i = 0; ok && i < p->n_trials; i++) {
        json_t *t = json_object();
        ok = t && cp_json_set_int(t, "bf16_nodes", (int64_t)p->trials[i].k) &&
             cp_json_set_num(t, "precision_loss_pct", p->trial_loss[i]) &&
             cp_json_set_num(t, "share_of_bound", p->trials[i].loss) &&
             cp_json_set_num(t, "predicted_ms", (p->fp32_ns - p->trials[i].gain_ns) / 1e6) &&
             cp_json_set_bool(t, "fits", p->trials[i].fits) && cp_json_push(trials, t);
    }
    ok = ok && cp_json_set_str(o, "summary", p->summary) &&
         cp_json_set_int(o, "nodes", (int64_t)p->nodes) &&
         cp_json_set_int(o, "candidates", (int64_t)p->candidates) &&
         cp_json_set_int(o, "bf16_nodes", (int64_t)p->chosen) &&
         cp_json_set_num(o, "whole_model_loss_pct", p->loss_all) &&
         cp_json_set_num(o, "plan_loss_pct", p->loss_plan) &&
         cp_json_set_num(o, "profile_fp32_ms", p->fp32_ns / 1e6) &&
         cp_json_set_num(o, "profile_bf16_ms", p->bf16_ns / 1e6) &&
         cp_json_set_num(o, "predicted_ms", p->predicted_ns / 1e6) &&
         cp_json_set_int(o, "precision_checks", p->checks);
    if (ok) {
        ok = cp_json_set(o, "trials", trials);
        trials = NULL;
    }
    json_decref(trials);
    if (ok)
        return o;
    json_decref(o);
    return NULL;
}

/* report.json's format: 2 added "report_version", "verdicts",
 * "inconclusive", "inconclusive_steps" and "cpus" (a report without
 * "report_version" is of format 1). */
#define CP_TUNE_REPORT_VERSION 2

/* A candidate measured against the best: it has a verdict. */
static bool step_has_verdict(const struct cp_tune_step *s)
{
    return (s->status == CP_STEP_ACCEPTED || s->status == CP_STEP_REJECTED) &&
           isfinite(s->measured_gain);
}

/* A candidate rejected because its verdict was inconclusive: not
 * significant although the estimated change reached the threshold, the
 * case loop.c's evaluate() words "not significant (inconclusive)" (the one
 * rule of cp_tune_why_not, on the step's figures, which after a failed
 * confirmation are the second measurement's). A candidate a look stopped
 * could not win, which is a verdict. The memory target judges latency only
 * for "not worse", never inconclusive. */
static bool step_inconclusive(const struct cp_tune_opts *o, const struct cp_tune_step *s)
{
    if (o->target == CP_TARGET_MEMORY || s->status != CP_STEP_REJECTED || !step_has_verdict(s))
        return false;
    return cp_tune_why_not(o, s) == CP_WHY_NOT_INCONCLUSIVE;
}

/* "verdicts", "inconclusive" and "inconclusive_steps" (the step numbers)
 * into j; false when out of memory. */
static bool verdict_counts(const struct cp_tune_opts *o, const struct cp_tune_result *r, json_t *j)
{
    json_t *steps = json_array();
    int verdicts = 0, inconclusive = 0;
    bool ok = steps != NULL;
    for (size_t i = 0; ok && i < r->n_steps; i++) {
        verdicts += step_has_verdict(&r->steps[i]);
        if (step_inconclusive(o, &r->steps[i])) {
            inconclusive++;
            ok = cp_json_push(steps, json_integer(r->steps[i].step));
        }
    }
    ok = ok && cp_json_set_int(j, "verdicts", verdicts) &&
         cp_json_set_int(j, "inconclusive", inconclusive);
    if (ok) {
        ok = cp_json_set(j, "inconclusive_steps", steps);
        steps = NULL;
    }
    json_decref(steps);
    return ok;
}

/* The CPUs this process may run on when it writes the report (a --batch
 * job's own, "0"); null when the kernel does not say. */
static json_t *cpus_json(void)
{
    int *cpus = NULL;
    size_t n = 0;
    if (cp_tune_affinity(&cpus, &n, NULL) != CP_OK)
        return json_null();
    struct cp_buf b;
    cp_buf_init(&b);
    cp_tune_cpus_format(cpus, n, &b);
    free(cpus);
    json_t *v = cp_buf_status(&b) == CP_OK && b.data ? cp_json_str(b.data) : NULL;
    cp_buf_release(&b);
    return v;
}

/* report.json's object; NULL when out of memory. */
static json_t *report_json(const struct cp_tune_opts *o, const struct cp_tune_result *r,
                           const char *cmd)
{
    struct cp_buf ct;
    cp_buf_init(&ct);
    cp_constraints_format(&o->constraints, &ct);
    json_t *j = json_object(), *steps = json_array();
    json_t *best =
        side_json(&r->best, r->best_ns, r->best_items_s, r->best_memory, r->best_precision_loss);
    bool ok = j && steps && best && cp_buf_status(&ct) == CP_OK;
    for (size_t i = 0; ok && i < r->n_steps; i++)
        ok = cp_json_push(steps, step_json(&r->steps[i]));
    ok = ok &&
         cp_json_set_num(best, "latency_change_pct", 100 * (r->best_ns / r->baseline_ns - 1)) &&
         cp_json_set_num(best, "throughput_change_pct",
                         100 * (r->best_items_s / r->baseline_items_s - 1)) &&
         cp_json_set(best, "against_baseline", against_json(o, r)) &&
         cp_json_set_str(best, "om", r->best_om) && cp_json_set_str(best, "convert_command", cmd);
    ok = ok && cp_json_set_int(j, "report_version", CP_TUNE_REPORT_VERSION) &&
         cp_json_set_str(j, "model", o->model) && cp_json_set_int(j, "session", r->session_id) &&
         cp_json_set_str(j, "target", cp_target_name(o->target)) &&
         cp_json_set_str(j, "constraints", ct.data ? ct.data : "") &&
         cp_json_set_int(j, "budget", o->budget) &&
         cp_json_set_int(j, "evaluations", r->evaluations) &&
         cp_json_set_int(j, "latency_evaluations", r->latency_evals) &&
         cp_json_set_int(j, "confirmations", r->confirmations) &&
         cp_json_set_int(j, "precision_checks", r->precision_checks) &&
         cp_json_set_int(j, "profile_runs", r->profile_runs) &&
         cp_json_set_int(j, "early_stops", r->early_stops) &&
         cp_json_set_int(j, "races", r->races) && cp_json_set_int(j, "rounds", r->rounds_spent) &&
         cp_json_set_str(j, "priority", cp_measure_priority_name(o->priority)) &&
         cp_json_set(j, "precision_plan", r->prec.ran ? prec_json(&r->prec) : json_null()) &&
         cp_json_set(j, "int8_plan", r->int8.ran ? int8_json(&r->int8) : json_null()) &&
         cp_json_set_str(j, "stop_reason", r->stop_reason) &&
         cp_json_set_bool(j, "resumed", r->resumed) &&
         cp_json_set_bool(j, "interrupted", r->interrupted) && verdict_counts(o, r, j) &&
         cp_json_set(j, "cpus", cpus_json()) &&
         cp_json_set(j, "baseline",
                     side_json(&r->baseline, r->baseline_ns, r->baseline_items_s,
                               r->baseline_memory, r->baseline_precision_loss));
    size_t n_front = 0, *front = ok ? cp_tune_pareto_steps(r, &n_front) : NULL;
    json_t *fj = json_array();
    ok = ok && front && fj;
    for (size_t i = 0; ok && i < n_front; i++)
        ok = cp_json_push(fj, json_integer(r->steps[front[i]].step));
    free(front);
    if (ok) {
        ok = cp_json_set(j, "pareto_steps", fj);
        fj = NULL;
    }
    json_decref(fj);
    if (ok) {
        ok = cp_json_set(j, "steps", steps);
        steps = NULL;
    }
    if (ok) {
        ok = cp_json_set(j, "best", best);
        best = NULL;
    }
    json_decref(steps);
    json_decref(best);
    cp_buf_release(&ct);
    if (ok)
        return j;
    json_decref(j);
    return NULL;
}

/* ---- report.md ---------------------------------------------------------------------- */

static void pct(struct cp_buf *b, double v)
{
    if (isfinite(v))
        cp_buf_printf(b, "%+.1f%%", 100 * v);
    else
        cp_buf_puts(b, "-");
}

static void int8_md(const struct cp_tune_result *r, struct cp_buf *b)
{
    const struct cp_tune_int8_report *p = &r->int8;
    if (!p->ran)
        return;
    cp_buf_printf(b,
                  "\n## int8 plan\n\n%s.\n\nCalibration: %s. On %s, %zu Conv/MatMul/Gemm; with "
                  "all of them in int8 the traced profile gave %.3f ms against %.3f ms and "
                  "precision_loss %.4f%%; %zu are faster in int8 and within the budget alone. "
                  "%d precision checks.\n",
                  p->summary, p->calibration[0] ? p->calibration : "(none)", p->base, p->nodes,
                  p->int8_ns / 1e6, p->base_ns / 1e6, p->loss_all, p->candidates, p->checks);
}

/* The per-node precision plan: what it measured and each check of its
 * bisection. */
static void prec_md(const struct cp_tune_result *r, struct cp_buf *b)
{
    const struct cp_tune_prec_report *p = &r->prec;
    if (!p->ran)
        return;
    cp_buf_printf(b,
                  "\n## Per-node precision plan\n\n%s.\n\n%zu nodes compute in bf16 under "
                  "the bf16 modes; %zu are faster in bf16 (traced profile: %.3f ms all fp32, "
                  "%.3f ms all bf16) and within the budget alone. %d precision checks.\n",
                  p->summary, p->nodes, p->candidates, p->fp32_ns / 1e6, p->bf16_ns / 1e6,
                  p->checks);
    if (!p->n_trials)
        return;
    cp_buf_puts(b, "\n| check | nodes in bf16 | precision_loss | share of the tightest bound | "
                   "predicted ms | fits |\n|---:|---:|---:|---:|---:|---|\n");
    for (size_t i = 0; i < p->n_trials; i++)
        cp_buf_printf(b, "| %zu | %zu | %.4f%% | %.3f | %.3f | %s |\n", i + 1, p->trials[i].k,
                      p->trial_loss[i], p->trials[i].loss,
                      (p->fp32_ns - p->trials[i].gain_ns) / 1e6, p->trials[i].fits ? "yes" : "no");
}

/* The measured points no other measured point beats in latency,
 * precision_loss and memory at once. */
static void pareto_md(const struct cp_tune_result *r, struct cp_buf *b)
{
    size_t n = 0, *front = cp_tune_pareto_steps(r, &n);
    if (!front || n < 1) {
        free(front);
        return;
    }
    cp_buf_puts(b, "\n## Pareto front (latency, precision_loss, memory)\n\n"
                   "| # | change | median ms | precision_loss | memory |\n"
                   "|---:|---|---:|---:|---:|\n");
    for (size_t i = 0; i < n; i++) {
        const struct cp_tune_step *s = &r->steps[front[i]];
        char mem[32];
        cp_format_bytes(s->memory_bytes, mem);
        cp_buf_printf(b, "| %d | `%s` | %.3f | %.4f%% | %s |\n", s->step,
                      s->delta[0] ? s->delta : "(baseline)", s->after_ns / 1e6, s->precision_loss,
                      mem);
    }
    free(front);
}

static void write_md(const struct cp_tune_opts *o, const struct cp_tune_result *r, const char *cmd,
                     struct cp_buf *b)
{
    struct cp_buf ct;
    cp_buf_init(&ct);
    cp_constraints_format(&o->constraints, &ct);
    cp_buf_printf(b, "# cannprof tune: %s\n\n", o->model);
    cp_buf_printf(b,
                  "Target **%s**, constraints `%s`, budget %d evaluations; session %lld%s. "
                  "Stopped: %s after %d evaluations.\n\n",
                  cp_target_name(o->target), ct.data && ct.data[0] ? ct.data : "none", o->budget,
                  (long long)r->session_id, r->resumed ? " (resumed)" : "", r->stop_reason,
                  r->evaluations);
    cp_buf_release(&ct);
    cp_buf_printf(b,
                  "Spent: %d latency evaluations (interleaved A/B against the best; %d stopped "
                  "early as clear losers; %d races of alternatives), %d confirmations, %lld "
                  "interleaved rounds in all, %d precision checks (deterministic runs against the "
                  "fp32 reference), %d profiling runs%s.\n\n",
                  r->latency_evals, r->early_stops, r->races, r->confirmations,
                  (long long)r->rounds_spent, r->precision_checks, r->profile_runs,
                  o->priority == CP_MEASURE_PRIORITY_HIGH
                      ? "; every measurement at high priority (nice -20)"
                      : "");
    cp_buf_puts(b, "## Result\n\n| | baseline | best | change |\n|---|---:|---:|---:|\n");
    cp_buf_printf(b, "| latency (median, ms) | %.3f | %.3f | %+.1f%% |\n", r->baseline_ns / 1e6,
                  r->best_ns / 1e6, 100 * (r->best_ns / r->baseline_ns - 1));
    cp_buf_printf(b, "| throughput (items/s) | %.2f | %.2f | %+.1f%% |\n", r->baseline_items_s,
                  r->best_items_s, 100 * (r->best_items_s / r->baseline_items_s - 1));
    char mb[32], mbb[32];
    cp_format_bytes(r->baseline_memory, mb);
    cp_format_bytes(r->best_memory, mbb);
    cp_buf_printf(
        b, "| memory (weights + arena) | %s | %s | %+.1f%% |\n", mb, mbb,
        r->baseline_memory ? 100 * ((double)r->best_memory / (double)r->baseline_memory - 1) : 0.0);
    cp_buf_printf(b, "| precision_loss | %.4f%% | %.4f%% | |\n\n", r->baseline_precision_loss,
                  r->best_precision_loss);
    if (isfinite(r->final_change)) {
        bool thr = o->target == CP_TARGET_THROUGHPUT;
        cp_buf_printf(b,
                      "Measured against each other at the end, interleaved (%d rounds): "
                      "**%s %+.1f%%** [%+.1f%%, %+.1f%%], p = %.3g (medians %.3f ms → %.3f ms). "
                      "The table's baseline and best come from separate measurements and "
                      "drift with the machine; this line does not.\n\n",
                      2 * o->rounds, thr ? "throughput" : "latency",
                      (thr ? 100 : -100) * r->final_change,
                      thr ? 100 * r->final_ci_lo : -100 * r->final_ci_hi,
                      thr ? 100 * r->final_ci_hi : -100 * r->final_ci_lo, r->final_p,
                      r->final_baseline_ns / 1e6, r->final_best_ns / 1e6);
    }
    cp_buf_printf(b, "Reproduce `best.om`:\n\n```\n%s\n```\n", cmd);
    if (r->best.cfg.fusion_switches[0])
        cp_buf_printf(b,
                      "\nwith `%s/best.switches` holding one line per switched-off pass:\n\n"
                      "```\n%s\n```\n",
                      o->out_dir, r->best.cfg.fusion_switches);
    if (r->best.cfg.keep_dtype[0])
        cp_buf_printf(b,
                      "\nwith `%s/best.keep_dtype` holding the ONNX nodes that keep fp32, one a "
                      "line:\n\n```\n%s\n```\n",
                      o->out_dir, r->best.cfg.keep_dtype);
    if (r->best.cfg.int8_nodes[0])
        cp_buf_printf(b,
                      "\nwith `%s/best.int8_nodes` holding the ONNX nodes computed in int8, one a "
                      "line:\n\n```\n%s\n```\n\nand `%s/best.quant_ranges` their calibrated "
                      "activation ranges (%zu tensors).\n",
                      o->out_dir, r->best.cfg.int8_nodes, o->out_dir,
                      cp_quant_ranges_count(r->best.cfg.quant_ranges));
    if (r->best.threads > 0 || r->best.batch > 0) {
        struct cp_buf rf;
        cp_buf_init(&rf);
        runtime_flags(&r->best, &rf);
        cp_buf_printf(b, "\nRun it with `cannprof bench best.om%s`.\n", rf.data ? rf.data : "");
        cp_buf_release(&rf);
    }
    cp_buf_puts(b, "\n## Steps\n\n| # | change | source | expected | measured [95% CI] | p | "
                   "precision_loss | median ms | decision |\n"
                   "|---:|---|---|---:|---:|---:|---:|---:|---|\n");
    for (size_t i = 0; i < r->n_steps; i++) {
        const struct cp_tune_step *s = &r->steps[i];
        cp_buf_printf(b, "| %d | `%s` | %s | ", s->step, s->delta[0] ? s->delta : "(baseline)",
                      s->source);
        pct(b, s->expected_gain);
        cp_buf_puts(b, " | ");
        pct(b, s->measured_gain);
        if (isfinite(s->ci_lo)) {
            cp_buf_puts(b, " [");
            pct(b, s->ci_lo);
            cp_buf_puts(b, ", ");
            pct(b, s->ci_hi);
            cp_buf_puts(b, "]");
        }
        if (isfinite(s->p))
            cp_buf_printf(b, " | %.3g", s->p);
        else
            cp_buf_puts(b, " | -");
        if (isfinite(s->precision_loss))
            cp_buf_printf(b, " | %.4f%%", s->precision_loss);
        else
            cp_buf_puts(b, " | -");
        if (isfinite(s->after_ns))
            cp_buf_printf(b, " | %.3f", s->after_ns / 1e6);
        else
            cp_buf_puts(b, " | -");
        cp_buf_printf(b, " | **%s**: %s |\n", cp_step_status_name(s->status), s->reason);
    }
    prec_md(r, b);
    int8_md(r, b);
    pareto_md(r, b);
    cp_buf_puts(b, "\nGains are the share of latency saved (throughput won for the throughput "
                   "target) against the best at that step, measured interleaved "
                   "(docs/validation.md); a step is accepted only when the change is "
                   "significant and above the threshold and every constraint holds.\n");
}

enum cp_status cp_tune_write_report(const struct cp_tune_opts *o, struct cp_tune_result *r,
                                    struct cp_diag *d)
{
    struct cp_buf cmd, json, md, sw;
    cp_buf_init(&cmd);
    cp_buf_init(&json);
    cp_buf_init(&md);
    cp_buf_init(&sw);
    char out[1100];
    snprintf(out, sizeof out, "%s/best", o->out_dir);
    convert_command(o, &r->best, out, &cmd);
    /* one line, as `tune --json` prints it */
    json_t *j = report_json(o, r, cmd.data ? cmd.data : "");
    if (!j || cp_json_dump(j, false, &json) != CP_OK)
        json.failed = true;
    cp_buf_putc(&json, '\n');
    json_decref(j);
    write_md(o, r, cmd.data ? cmd.data : "", &md);
    char copy[sizeof r->best.cfg.fusion_switches];
    snprintf(copy, sizeof copy, "%s", r->best.cfg.fusion_switches);
    for (char *save = NULL, *t = strtok_r(copy, ";", &save); t; t = strtok_r(NULL, ";", &save))
        cp_buf_printf(&sw, "%s\n", t);
    const struct {
        const char *name, *canon;
    } lists[] = {
        {"best.keep_dtype", r->best.cfg.keep_dtype},
        {"best.int8_nodes", r->best.cfg.int8_nodes},
        {"best.quant_ranges", r->best.cfg.int8_nodes[0] ? r->best.cfg.quant_ranges : ""},
    };
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        if (!lists[i].canon[0])
            continue;
        char kp[1100];
        snprintf(kp, sizeof kp, "%.1000s/%s", o->out_dir, lists[i].name);
        size_t kl = strlen(lists[i].canon);
        char *text = malloc(kl + 2);
        enum cp_status kst = text ? CP_OK : cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
        if (text) {
            memcpy(text, lists[i].canon, kl);
            text[kl] = '\n';
            kst = cp_file_write_atomic(kp, text, kl + 1, d);
            free(text);
        }
        if (kst != CP_OK) {
            cp_buf_release(&cmd);
            cp_buf_release(&json);
            cp_buf_release(&md);
            cp_buf_release(&sw);
            return kst;
        }
    }
    snprintf(r->report_md, sizeof r->report_md, "%s/report.md", o->out_dir);
    snprintf(r->report_json, sizeof r->report_json, "%s/report.json", o->out_dir);
    enum cp_status st = CP_OK;
    if (cp_buf_status(&cmd) != CP_OK || cp_buf_status(&json) != CP_OK ||
        cp_buf_status(&md) != CP_OK || cp_buf_status(&sw) != CP_OK)
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory writing the report");
    if (st == CP_OK && sw.len) {
        char swp[1100];
        snprintf(swp, sizeof swp, "%s/best.switches", o->out_dir);
        st = cp_file_write_atomic(swp, sw.data, sw.len, d);
    }
    if (st == CP_OK)
        st = cp_file_write_atomic(r->report_json, json.data, json.len, d);
    if (st == CP_OK)
        st = cp_file_write_atomic(r->report_md, md.data, md.len, d);
    if (st == CP_OK)
        st = cp_tune_write_report_doc(o, r, &md, d);
    cp_buf_release(&cmd);
    cp_buf_release(&json);
    cp_buf_release(&md);
    cp_buf_release(&sw);
    return st;
}

/* ---- reading report.json back ---------------------------------------------------------- */

void cp_tune_report_row_release(struct cp_tune_report_row *r)
{
    if (!r)
        return;
    free(r->model);
    for (size_t i = 0; i < r->n_accepted; i++)
        free(r->accepted[i]);
    free(r->accepted);
    memset(r, 0, sizeof *r);
}

static enum cp_status not_a_report(const char *path, const char *field, const char *want,
                                   struct cp_diag *d)
{
    return cp_diag_set(d, CP_ERR_CORRUPT, "%s: not a tune report: '%s' is missing or not %s", path,
                       field, want);
}

/* o[key] as a number; JSON null (what the writer puts for an unknown
 * figure) is NaN. */
static bool figure(const json_t *o, const char *key, double *out)
{
    const json_t *v = json_object_get(o, key);
    if (json_is_null(v)) {
        *out = NAN;
        return true;
    }
    if (!json_is_number(v))
        return false;
    *out = json_number_value(v);
    return true;
}

/* o[key] as a whole number in [lo, hi]. */
static bool whole(const json_t *o, const char *key, json_int_t lo, json_int_t hi, json_int_t *out)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return false;
    *out = json_integer_value(v);
    return true;
}

/* The verdict counts of a report of format 2 or later; a report without
 * "report_version" predates them and counts none. */
static enum cp_status read_counts(const char *path, const json_t *j, struct cp_tune_report_row *out,
                                  struct cp_diag *d)
{
    json_int_t version = 1, verdicts = 0, inconclusive = 0;
    if (json_object_get(j, "report_version") && !whole(j, "report_version", 1, INT32_MAX, &version))
        return not_a_report(path, "report_version", "a whole number from 1", d);
    if (version >= 2) {
        if (!whole(j, "verdicts", 0, INT32_MAX, &verdicts))
            return not_a_report(path, "verdicts", "a whole number from 0", d);
        if (!whole(j, "inconclusive", 0, verdicts, &inconclusive))
            return not_a_report(path, "inconclusive", "a whole number from 0 to 'verdicts'", d);
    }
    out->verdicts = (int)verdicts;
    out->inconclusive = (int)inconclusive;
    return CP_OK;
}

static enum cp_status read_row(const char *path, const json_t *j, struct cp_tune_report_row *out,
                               struct cp_diag *d)
{
    if (!json_is_object(j))
        return cp_diag_set(d, CP_ERR_CORRUPT, "%s: not a tune report: not a JSON object", path);
    const json_t *model = json_object_get(j, "model"), *base = json_object_get(j, "baseline");
    const json_t *best = json_object_get(j, "best"), *steps = json_object_get(j, "steps");
    if (!json_is_string(model))
        return not_a_report(path, "model", "a string", d);
    if (!json_is_object(base) || !figure(base, "median_ms", &out->baseline_ms))
        return not_a_report(path, "baseline.median_ms", "a number", d);
    if (!json_is_object(best) || !figure(best, "median_ms", &out->best_ms))
        return not_a_report(path, "best.median_ms", "a number", d);
    if (!figure(best, "precision_loss_pct", &out->best_precision_loss))
        return not_a_report(path, "best.precision_loss_pct", "a number", d);
    if (!figure(best, "memory_bytes", &out->best_memory_bytes))
        return not_a_report(path, "best.memory_bytes", "a number", d);
    if (!json_is_array(steps))
        return not_a_report(path, "steps", "an array", d);
    enum cp_status cst = read_counts(path, j, out, d);
    if (cst != CP_OK)
        return cst;
    if (!(out->model = cp_strdup(json_string_value(model))))
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory", path);
    out->accepted = cp_calloc(json_array_size(steps) + 1, sizeof *out->accepted);
    if (!out->accepted)
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory", path);
    size_t i;
    const json_t *st;
    json_array_foreach(steps, i, st)
    {
        const char *status = json_string_value(json_object_get(st, "status"));
        const char *delta = json_string_value(json_object_get(st, "delta"));
        if (!status || !delta) {
            char field[48];
            snprintf(field, sizeof field, "steps[%zu].%s", i, !status ? "status" : "delta");
            return not_a_report(path, field, "a string", d);
        }
        enum cp_step_status known;
        if (!cp_step_status_parse(status, &known)) {
            char field[48];
            snprintf(field, sizeof field, "steps[%zu].status", i);
            return not_a_report(path, field, "baseline, accepted, rejected or failed", d);
        }
        if (known != CP_STEP_ACCEPTED)
            continue;
        if (!(out->accepted[out->n_accepted] = cp_strdup(delta)))
            return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory", path);
        out->n_accepted++;
    }
    return CP_OK;
}

enum cp_status cp_tune_report_read(const char *path, struct cp_tune_report_row *out,
                                   struct cp_diag *d)
{
    memset(out, 0, sizeof *out);
    if (!cp_path_exists(path))
        return cp_diag_set(d, CP_ERR_IO, "%s: no such file", path);
    json_error_t err;
    json_t *j = json_load_file(path, 0, &err);
    if (!j)
        return cp_diag_set(d, CP_ERR_CORRUPT, "%s:%d:%d: not a tune report: %s", path, err.line,
                           err.column, err.text);
    enum cp_status st = read_row(path, j, out, d);
    json_decref(j);
    if (st != CP_OK)
        cp_tune_report_row_release(out);
    return st;
}
