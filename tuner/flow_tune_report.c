/* A flow tuning's result as JSON and as the text `cannprof tune FLOW.toml`
 * prints (tuner/tuner.h). */
#include "core/json.h"
#include "tuner/tuner.h"

#include <math.h>
#include <stdio.h>

json_t *cp_flow_tune_json(const struct cp_flow_tune_opts *o, const struct cp_flow_tune_result *r)
{
    json_t *j = json_object(), *steps = json_array();
    bool ok = j && steps && cp_json_set_str(j, "flow", o->flow) &&
              cp_json_set_str(j, "target", cp_target_name(o->target)) &&
              cp_json_set_num(j, "capacity", r->capacity) && cp_json_set_num(j, "rate", r->rate) &&
              cp_json_set_str(j, "limiting_node", r->limiting) &&
              cp_json_set_int(j, "evaluations", r->evaluations) &&
              cp_json_set_num(j, "final_change_pct", r->final_pct) &&
              cp_json_set_num(j, "final_ci_lo_pct", r->final_lo) &&
              cp_json_set_num(j, "final_ci_hi_pct", r->final_hi) &&
              cp_json_set_num(j, "final_p", r->final_p) &&
              cp_json_set_num(j, "baseline", r->baseline_value) &&
              cp_json_set_num(j, "best", r->best_value) &&
              cp_json_set_str(j, "best_flow", r->best_flow);
    for (size_t i = 0; ok && i < r->n_steps; i++) {
        const struct cp_flow_tune_step *s = &r->steps[i];
        json_t *e = json_object();
        ok = e && cp_json_set_int(e, "round", s->round) &&
             cp_json_set_str(e, "change", s->change) && cp_json_set_str(e, "source", s->source) &&
             cp_json_set_num(e, "predicted_pct", s->predicted_pct) &&
             cp_json_set_num(e, "measured_pct", s->measured_pct) &&
             cp_json_set_num(e, "ci_lo_pct", s->ci_lo) &&
             cp_json_set_num(e, "ci_hi_pct", s->ci_hi) && cp_json_set_num(e, "p", s->p) &&
             cp_json_set_str(e, "verdict", cp_verdict_name(s->verdict)) &&
             cp_json_set_bool(e, "accepted", s->accepted) &&
             cp_json_set_str(e, "reason", s->reason) && json_array_append_new(steps, e) == 0;
        if (!ok)
            json_decref(e);
    }
    if (ok && json_object_set_new(j, "steps", steps) == 0)
        return j;
    if (!ok)
        json_decref(steps);
    json_decref(j);
    return NULL;
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
    cp_buf_printf(out, "\n%-5s %-44s %-18s %10s %26s  %s\n", "round", "change", "source",
                  "predicted", thr ? "throughput, measured" : "mean latency, measured", "verdict");
    for (size_t i = 0; i < r->n_steps; i++) {
        const struct cp_flow_tune_step *s = &r->steps[i];
        char m[64];
        snprintf(m, sizeof m, "%+.1f%% [%+.1f, %+.1f]", s->measured_pct, s->ci_lo, s->ci_hi);
        cp_buf_printf(out, "%-5d %-44.44s %-18.18s %+9.1f%% %26s  %s\n", s->round, s->change,
                      s->source, s->predicted_pct, m, s->reason);
    }
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
