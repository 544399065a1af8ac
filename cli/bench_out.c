/* The printing of cannprof bench's results, as text and as JSON
 * (core/json.h). Private to cli/. */
#include "cli/bench_out.h"
#include "cli/output.h"
#include "runner/probe.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void print_stop(const struct cp_measurement *m, const char *what)
{
    if (m->stop == CP_MEASURE_STOP_TIME_LIMIT)
        printf("time limit: %.1f s reached with %zu of %lld %s undisturbed (%zu measured); "
               "measure again when the machine is quieter%s, or raise --max-duration\n",
               m->time_limit_s, m->n_undisturbed, (long long)m->target, what, m->n,
               m->priority_raised ? "" : " or with --priority high (as root)");
    else if (m->stop == CP_MEASURE_STOP_INTERRUPTED)
        printf("interrupted: after %zu %s (%.1f s)\n", m->n, what, m->elapsed_s);
}

/* Only when --priority high was asked for: whether it was had. */
static void print_priority(const struct cp_measurement *m)
{
    if (m->priority_raised)
        printf("priority:   high (nice %d while measuring)\n", CP_MEASURE_HIGH_NICE);
    else if (m->priority_why[0])
        printf("priority:   normal: high was refused (%s)\n", m->priority_why);
}

void cp_bench_print_one(const struct cp_bench_request *q, const struct cp_bench_result *r)
{
    const struct cp_summary *sm = &r->all[0];
    const struct cp_measurement *m = &r->m;
    cp_out_model_line("model:     ", q->models[0], r->items[0], r->threads);
    printf("iterations: %zu measured\n", m->n);
    cp_out_latency_lines(sm);
    printf("throughput: %.2f items/s\n", r->items_per_s[0]);
    cp_out_memory_line(&r->mem[0], r->peak_rss);
    if (m->probed) {
        printf("probe:      floor %.2f us", (double)m->floor_ns / 1e3);
        if (m->reference_ns < m->floor_ns)
            printf(" (lowest seen on this machine %.2f us)", (double)m->reference_ns / 1e3);
        printf("; %zu of %zu iterations undisturbed\n", m->n_undisturbed, m->n);
        const struct cp_summary *u = &r->undisturbed[0];
        if (u->n > 0)
            printf("undisturbed latency ms: median %.3f  p99 %.3f  mean %.3f\n", u->median / 1e6,
                   u->p99 / 1e6, u->mean / 1e6);
        else
            printf("undisturbed latency: none (the machine was busy throughout; measure again, "
                   "or longer with --max-duration)\n");
    }
    print_priority(m);
    print_stop(m, "iterations");
    if (q->trace_path)
        printf("trace:      %s (cannprof export %s --format chrome -o trace.json)\n", q->trace_path,
               q->trace_path);
}

void cp_bench_print_ab(const struct cp_bench_request *q, const struct cp_bench_result *r)
{
    const struct cp_comparison *m = &r->cmp;
    const struct cp_verdict_opts *vo = &q->verdict;
    const struct cp_summary *sa = r->cmp_undisturbed ? &r->undisturbed[0] : &r->all[0];
    const struct cp_summary *sb = r->cmp_undisturbed ? &r->undisturbed[1] : &r->all[1];
    printf("A (before): %s\n", q->models[0]);
    printf("B (after):  %s\n", q->models[1]);
    printf("rounds:     %zu interleaved (A B, B A, ...), warm-up %lld; batch %lld, %d threads\n",
           r->m.n, (long long)r->m.warmup, (long long)r->items[0], r->threads);
    if (r->m.probed)
        printf("probe:      %zu of %zu rounds undisturbed; the verdict compares %s\n",
               r->m.n_undisturbed, r->m.n, r->cmp_undisturbed ? "those" : "every round");
    printf("\nlatency ms      median        mean         p99\n");
    printf("A          %11.3f %11.3f %11.3f\n", sa->median / 1e6, sa->mean / 1e6, sa->p99 / 1e6);
    printf("B          %11.3f %11.3f %11.3f\n\n", sb->median / 1e6, sb->mean / 1e6, sb->p99 / 1e6);
    printf("change:     %s %+.2f%% (%.0f%% CI %+.2f%% to %+.2f%%), p = %.3g (%s)\n",
           cp_out_compared_statistic(m, vo), m->delta_pct, vo->boot.level * 100, m->ci_lo_pct,
           m->ci_hi_pct, m->p, cp_stat_test_name(m->test));
    printf("verdict:    %s (alpha %g, threshold %g%%", cp_verdict_name(m->verdict), vo->alpha,
           vo->threshold_pct);
    if (isfinite(m->mde_pct))
        printf("; these rounds detect changes of %.2f%% and more", m->mde_pct);
    printf(")\n");
    if (m->verdict == CP_VERDICT_INCONCLUSIVE && m->n_needed > 0)
        printf("            about %zu rounds would settle it (--iterations %zu)\n", m->n_needed,
               m->n_needed);
    print_priority(&r->m);
    print_stop(&r->m, "rounds");
    if (q->trace_path)
        printf("trace:      %s (run %lld = A, run %lld = B)\n", q->trace_path,
               (long long)r->run_ids[0], (long long)r->run_ids[1]);
}

void cp_bench_print_runs(const struct cp_bench_request *q, const struct cp_bench_runs *rs)
{
    const struct cp_bench_result *r0 = &rs->runs[0];
    cp_out_model_line("model:     ", q->models[0], r0->items[0], r0->threads);
    printf("runs:       %zu separate processes%s\n\n", rs->n,
           rs->interrupted ? " (interrupted)" : "");
    printf("run  iterations  undisturbed   median ms      p99 ms  mean ms   stop\n");
    for (size_t i = 0; i < rs->n; i++) {
        const struct cp_bench_result *r = &rs->runs[i];
        const struct cp_summary *sm = r->undisturbed[0].n ? &r->undisturbed[0] : &r->all[0];
        printf("%3zu  %10zu  %11zu  %10.3f  %10.3f  %7.3f   %s\n", i + 1, r->m.n,
               r->m.n_undisturbed, sm->median / 1e6, sm->p99 / 1e6, sm->mean / 1e6,
               cp_measure_stop_name(r->m.stop));
    }
    printf("\nbetween runs: median %.3f ms, range %.3f to %.3f ms (%.2f%% apart), cv %.2f%%\n",
           rs->median_of_medians_ns / 1e6, rs->min_median_ns / 1e6, rs->max_median_ns / 1e6,
           rs->min_median_ns > 0 ? 100 * (rs->max_median_ns / rs->min_median_ns - 1) : 0,
           100 * rs->cv_of_medians);
    printf("            (each run's median of its undisturbed iterations)\n");
    cp_out_memory_line(&r0->mem[0], r0->peak_rss);
    print_priority(&r0->m);
    if (q->trace_path)
        printf("trace:      %s (runs %lld to %lld, one group: cannprof validate compares them "
               "run against run)\n",
               q->trace_path, (long long)rs->runs[0].run_ids[0],
               (long long)rs->runs[rs->n - 1].run_ids[0]);
}

/* The measurement's policy and outcome, as JSON keys of `o`. */
static bool json_policy(json_t *o, const struct cp_measurement *m)
{
    bool ok = cp_json_set_int(o, "warmup", m->warmup) &&
              cp_json_set_int(o, "undisturbed_target", m->target) &&
              cp_json_set_str(o, "stop", cp_measure_stop_name(m->stop)) &&
              cp_json_set_bool(o, "time_limit_hit", m->stop == CP_MEASURE_STOP_TIME_LIMIT) &&
              cp_json_set_num(o, "time_limit_s", m->time_limit_s > 0 ? m->time_limit_s : NAN) &&
              cp_json_set_num(o, "elapsed_s", m->elapsed_s) &&
              cp_json_set_str(o, "priority", m->priority_raised ? "high" : "normal");
    if (ok && m->priority_why[0])
        ok = cp_json_set_str(o, "priority_refused", m->priority_why);
    if (ok && m->probed) {
        json_t *p = json_object();
        ok = p && cp_json_set_int(p, "floor_ns", (int64_t)m->floor_ns) &&
             cp_json_set_int(p, "reference_ns", (int64_t)m->reference_ns) &&
             cp_json_set_num(p, "tolerance", CP_PROBE_TOLERANCE) &&
             cp_json_set_int(p, "undisturbed", (int64_t)m->n_undisturbed);
        if (!cp_json_set(o, "probe", p))
            ok = false;
    }
    return ok;
}

json_t *cp_bench_json_one(const struct cp_bench_request *q, const struct cp_bench_result *r)
{
    json_t *o = json_object();
    bool ok = o && cp_json_set_str(o, "model", q->models[0]) &&
              cp_json_set_int(o, "batch", r->items[0]) &&
              cp_json_set_int(o, "threads", r->threads) &&
              cp_json_set_int(o, "iterations", (int64_t)r->m.n) &&
              cp_json_set(o, "latency_ms", cp_out_latency_json(&r->all[0])) &&
              cp_json_set_num(o, "throughput_items_per_s", r->items_per_s[0]) &&
              cp_json_set(o, "memory", cp_out_memory_json(&r->mem[0], r->peak_rss)) &&
              json_policy(o, &r->m);
    json_t *p = o ? json_object_get(o, "probe") : NULL;
    if (ok && p && r->undisturbed[0].n > 0)
        ok = cp_json_set(p, "latency_ms", cp_out_latency_json(&r->undisturbed[0]));
    if (ok && q->trace_path)
        ok = cp_json_set_str(o, "trace", q->trace_path);
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *cp_bench_json_runs(const struct cp_bench_request *q, const struct cp_bench_runs *rs)
{
    json_t *o = json_object(), *arr = json_array();
    bool ok = o && arr && cp_json_set_str(o, "model", q->models[0]) &&
              cp_json_set_int(o, "runs", (int64_t)rs->n) &&
              cp_json_set_bool(o, "interrupted", rs->interrupted);
    for (size_t i = 0; ok && i < rs->n; i++) {
        json_t *one = cp_bench_json_one(q, &rs->runs[i]);
        if (!one || !cp_json_set_int(one, "trace_run", rs->runs[i].run_ids[0])) {
            json_decref(one);
            ok = false;
            break;
        }
        ok = cp_json_push(arr, one); /* takes `one`, also when it fails */
    }
    if (ok) {
        ok = cp_json_set(o, "run", arr);
        arr = NULL;
    }
    json_t *b = ok ? json_object() : NULL;
    ok = ok && b && cp_json_set_num(b, "median_ms", rs->median_of_medians_ns / 1e6) &&
         cp_json_set_num(b, "min_median_ms", rs->min_median_ns / 1e6) &&
         cp_json_set_num(b, "max_median_ms", rs->max_median_ns / 1e6) &&
         cp_json_set_num(b, "cv", rs->cv_of_medians);
    if (ok) {
        ok = cp_json_set(o, "between_runs", b);
        b = NULL;
    }
    if (ok && q->trace_path)
        ok = cp_json_set_str(o, "trace", q->trace_path);
    json_decref(arr);
    json_decref(b);
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *json_side(const char *model, const char *config, const struct cp_summary *sm)
{
    json_t *o = json_object();
    if (o && cp_json_set_str(o, "model", model) && cp_json_set_str(o, "config_id", config) &&
        cp_json_set(o, "latency_ms", cp_out_latency_json(sm)))
        return o;
    json_decref(o);
    return NULL;
}

json_t *cp_bench_json_ab(const struct cp_bench_request *q, const struct cp_bench_result *r)
{
    const struct cp_verdict_opts *vo = &q->verdict;
    bool und = r->cmp_undisturbed;
    json_t *o = json_object();
    bool ok =
        o &&
        cp_json_set(
            o, "a",
            json_side(q->models[0], r->config_id[0], und ? &r->undisturbed[0] : &r->all[0])) &&
        cp_json_set(
            o, "b",
            json_side(q->models[1], r->config_id[1], und ? &r->undisturbed[1] : &r->all[1])) &&
        cp_json_set_int(o, "rounds", (int64_t)r->m.n) &&
        cp_json_set_str(o, "order", "alternating") && cp_json_set_int(o, "batch", r->items[0]) &&
        cp_json_set_int(o, "threads", r->threads) && json_policy(o, &r->m) &&
        cp_json_set_bool(o, "verdict_on_undisturbed_rounds", und) &&
        cp_json_set_num(o, "alpha", vo->alpha) &&
        cp_json_set_num(o, "threshold_pct", vo->threshold_pct) &&
        cp_json_set_num(o, "confidence", vo->boot.level) &&
        cp_json_set(o, "comparison", cp_out_comparison_json("latency", "ms", 1e-6, &r->cmp, vo)) &&
        cp_json_set_str(o, "verdict", cp_verdict_name(r->cmp.verdict));
    if (ok && q->trace_path) {
        json_t *runs = json_object();
        ok = cp_json_set_str(o, "trace", q->trace_path) && runs &&
             cp_json_set_int(runs, "a", r->run_ids[0]) && cp_json_set_int(runs, "b", r->run_ids[1]);
        if (!cp_json_set(o, "trace_runs", runs))
            ok = false;
    }
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}
