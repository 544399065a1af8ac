/* The results of tuning a flow and a served model, as JSON and as the text
 * `cannprof tune FLOW.toml` and `cannprof tune MODEL --serve` print
 * (tuner/tuner.h): the same steps, measured the same way. */
#include "core/json.h"
#include "tuner/tuner.h"

#include <math.h>
#include <stdio.h>

/* The steps as a JSON array; NULL when out of memory. */
static json_t *steps_json(const struct cp_flow_tune_step *steps, size_t n)
{
    json_t *a = json_array();
    bool ok = a != NULL;
    for (size_t i = 0; ok && i < n; i++) {
        const struct cp_flow_tune_step *s = &steps[i];
        json_t *e = json_object();
        ok = e && cp_json_set_int(e, "round", s->round) &&
             cp_json_set_str(e, "change", s->change) && cp_json_set_str(e, "source", s->source) &&
             cp_json_set_num(e, "predicted_pct", s->predicted_pct) &&
             cp_json_set_num(e, "measured_pct", s->measured_pct) &&
             cp_json_set_num(e, "ci_lo_pct", s->ci_lo) &&
             cp_json_set_num(e, "ci_hi_pct", s->ci_hi) && cp_json_set_num(e, "p", s->p) &&
             cp_json_set_str(e, "verdict", cp_verdict_name(s->verdict)) &&
             cp_json_set_bool(e, "accepted", s->accepted) &&
             cp_json_set_str(e, "reason", s->reason) && json_array_append_new(a, e) == 0;
        if (!ok)
            json_decref(e);
    }
    if (ok)
        return a;
    json_decref(a);
    return NULL;
}

/* The final comparison's keys of j; its two figures under the names given. */
static bool final_json(json_t *j, double pct, double lo, double hi, double p,
                       const char *before_key, double before, const char *after_key, double after)
{
    return cp_json_set_num(j, "final_change_pct", pct) &&
           cp_json_set_num(j, "final_ci_lo_pct", lo) && cp_json_set_num(j, "final_ci_hi_pct", hi) &&
           cp_json_set_num(j, "final_p", p) && cp_json_set_num(j, before_key, before) &&
           cp_json_set_num(j, after_key, after);
}

json_t *cp_flow_tune_json(const struct cp_flow_tune_opts *o, const struct cp_flow_tune_result *r)
{
    json_t *j = json_object();
    bool ok = j && cp_json_set_str(j, "flow", o->flow) &&
              cp_json_set_str(j, "target", cp_target_name(o->target)) &&
              cp_json_set_num(j, "capacity", r->capacity) && cp_json_set_num(j, "rate", r->rate) &&
              cp_json_set_str(j, "limiting_node", r->limiting) &&
              cp_json_set_int(j, "evaluations", r->evaluations) &&
              final_json(j, r->final_pct, r->final_lo, r->final_hi, r->final_p, "baseline",
                         r->baseline_value, "best", r->best_value) &&
              cp_json_set_str(j, "best_flow", r->best_flow) &&
              cp_json_set(j, "steps", steps_json(r->steps, r->n_steps));
    if (ok)
        return j;
    json_decref(j);
    return NULL;
}

/* Where the run was recorded: {"path", "session", "hints"}. */
static json_t *serve_kb_json(const struct cp_serve_tune_result *r)
{
    json_t *o = json_object();
    if (o && cp_json_set_str(o, "path", r->kb_path) &&
        cp_json_set_int(o, "session", r->kb_session) && cp_json_set_int(o, "hints", r->kb_hints))
        return o;
    json_decref(o);
    return NULL;
}

json_t *cp_serve_tune_json(const struct cp_serve_tune_opts *o, const struct cp_serve_tune_result *r)
{
    json_t *j = json_object();
    bool ok = j && cp_json_set_str(j, "model", o->model) &&
              cp_json_set_str(j, "target", cp_target_name(o->target)) &&
              cp_json_set_num(j, "capacity", r->capacity) &&
              cp_json_set_num(j, "call_ms", r->call_ms) && cp_json_set_num(j, "rate", r->rate) &&
              cp_json_set_bool(j, "batch_settable", r->batch_settable) &&
              (r->batch_settable || cp_json_set_str(j, "batch_why", r->batch_why)) &&
              cp_json_set(j, "original", cp_serve_knobs_json(&r->original)) &&
              cp_json_set(j, "best", cp_serve_knobs_json(&r->best)) &&
              cp_json_set_str(j, "command", r->command) &&
              cp_json_set_int(j, "evaluations", r->evaluations) &&
              cp_json_set_str(j, "stop_reason", r->stop_reason) &&
              cp_json_set_str(j, "priority", r->priority_raised ? "high" : "normal") &&
              final_json(j, r->final_pct, r->final_lo, r->final_hi, r->final_p, "baseline_value",
                         r->baseline_value, "best_value", r->best_value) &&
              (!r->final_why[0] || cp_json_set_str(j, "final_failed", r->final_why)) &&
              cp_json_set(j, "knowledge_base", serve_kb_json(r)) &&
              cp_json_set(j, "steps", steps_json(r->steps, r->n_steps));
    if (ok)
        return j;
    json_decref(j);
    return NULL;
}

/* The steps as a table. */
static void steps_render(const struct cp_flow_tune_step *steps, size_t n, bool thr, bool predicted,
                         struct cp_buf *out)
{
    cp_buf_printf(out, "\n%-5s %-44s %-18s ", "round", "change", "source");
    if (predicted)
        cp_buf_printf(out, "%10s ", "predicted");
    cp_buf_printf(out, "%26s  %s\n", thr ? "throughput, measured" : "mean latency, measured",
                  "verdict");
    for (size_t i = 0; i < n; i++) {
        const struct cp_flow_tune_step *s = &steps[i];
        char m[64];
        snprintf(m, sizeof m, "%+.1f%% [%+.1f, %+.1f]", s->measured_pct, s->ci_lo, s->ci_hi);
        cp_buf_printf(out, "%-5d %-44.44s %-18.18s ", s->round, s->change, s->source);
        if (predicted)
            cp_buf_printf(out, "%+9.1f%% ", s->predicted_pct);
        cp_buf_printf(out, "%26s  %s\n", m, s->reason);
    }
}

void cp_flow_tune_render(const struct cp_flow_tune_opts *o, const struct cp_flow_tune_result *r,
                         struct cp_buf *out)
{
    bool thr = o->target == CP_TARGET_THROUGHPUT;
    cp_buf_printf(out,
                  "flow:        %s\ncapacity:    %.1f requests/s flat out (limiting node %s)\n"
                  "workload:    %.1f requests/s, open loop, %d pairs of %llu requests per "
                  "measurement\n",
                  o->flow, r->capacity, r->limiting, r->rate, o->pairs,
                  (unsigned long long)o->requests);
    steps_render(r->steps, r->n_steps, thr, true, out);
    if (isfinite(r->final_pct))
        cp_buf_printf(out,
                      "\ntuned vs original, alternating: %s %+.1f%% [%+.1f%%, %+.1f%%], p=%.3g "
                      "(%.4g -> %.4g %s)\ntuned flow:  %s\n",
                      thr ? "throughput" : "mean latency", r->final_pct, r->final_lo, r->final_hi,
                      r->final_p, r->baseline_value, r->best_value, thr ? "requests/s" : "ms",
                      r->best_flow);
    else
        cp_buf_printf(out, "\nno change was accepted: the flow stays as it is (%s)\n",
                      r->best_flow);
}

void cp_serve_tune_render(const struct cp_serve_tune_opts *o, const struct cp_serve_tune_result *r,
                          struct cp_buf *out)
{
    bool thr = o->target == CP_TARGET_THROUGHPUT;
    char start[128], best[128];
    cp_serve_knobs_format(&r->original, start, sizeof start);
    cp_serve_knobs_format(&r->best, best, sizeof best);
    cp_buf_printf(out,
                  "model:       %s\nstart:       %s\ncapacity:    %.1f requests/s flat out; a "
                  "call %.3f ms at a tenth of it\n"
                  "workload:    %.1f requests/s, open loop, %d pairs of %.1f s runs per "
                  "measurement\n",
                  o->model, start, r->capacity, r->call_ms, r->rate, o->pairs, o->run_s);
    if (r->priority_raised)
        cp_buf_printf(out, "priority:    high (the load and the servers at nice -20)\n");
    if (!r->batch_settable)
        cp_buf_printf(out, "batching:    not tried: %s\n", r->batch_why);
    steps_render(r->steps, r->n_steps, thr, false, out);
    cp_buf_printf(out, "\nstopped:     %s after %d measurements\n", r->stop_reason, r->evaluations);
    if (isfinite(r->final_pct))
        cp_buf_printf(out,
                      "tuned vs start, alternating: %s %+.1f%% [%+.1f%%, %+.1f%%], p=%.3g "
                      "(%.4g -> %.4g %s)\n",
                      thr ? "throughput" : "mean latency", r->final_pct, r->final_lo, r->final_hi,
                      r->final_p, r->baseline_value, r->best_value, thr ? "requests/s" : "ms");
    else if (r->final_why[0])
        cp_buf_printf(out, "tuned vs start: not measured: %s\n", r->final_why);
    else
        cp_buf_printf(out, "no change was accepted: the starting knobs stay\n");
    cp_buf_printf(out, "best:        %s\nserve it:    %s\n", best, r->command);
    if (r->kb_session > 0)
        cp_buf_printf(out, "recorded:    session %lld in %s%s\n", (long long)r->kb_session,
                      r->kb_path, r->kb_hints ? " (its serving strategies were tried first)" : "");
}
