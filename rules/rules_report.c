/* Findings as JSON, and rule skeletons for what no rule explains. */
#include "core/json.h"
#include "rules/rules_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* A NULL-terminated list of strings as a JSON array. */
static json_t *strv(char *const *v)
{
    json_t *a = json_array();
    for (size_t i = 0; a && v && v[i]; i++)
        if (!cp_json_push(a, cp_json_str(v[i]))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

/* A JSON array kept as text (a finding's nodes and kernels), or [] */
static json_t *array_text(const char *s)
{
    json_t *j = s ? json_loads(s, 0, NULL) : NULL;
    if (json_is_array(j))
        return j;
    json_decref(j);
    return json_array();
}

static json_t *finding_json(const struct cp_finding *f, size_t rank)
{
    json_t *o = json_object(), *gain = json_object(), *change = json_object(),
           *risks = json_object();
    bool ok = o && gain && change && risks && cp_json_set_num(gain, "latency_saved", f->gain) &&
              cp_json_set_num(gain, "low", f->gain_lo) &&
              cp_json_set_num(gain, "high", f->gain_hi) &&
              cp_json_set_num(gain, "speedup_prior", f->speedup) &&
              cp_json_set_str(change, "summary", f->change.summary) &&
              cp_json_set(change, "convert", strv(f->change.convert)) &&
              cp_json_set(change, "fusion_switches", strv(f->change.fusion_switches)) &&
              cp_json_set(change, "runtime", strv(f->change.runtime)) &&
              cp_json_set_num(risks, "precision_loss_pct", f->risk_precision_loss) &&
              cp_json_set_num(risks, "memory_change", f->risk_memory);
    ok = ok && cp_json_set_int(o, "rank", (int64_t)rank) && cp_json_set_str(o, "rule", f->rule) &&
         cp_json_set_str(o, "bottleneck_type", f->bottleneck_type) &&
         cp_json_set_str(o, "root_cause", f->root_cause) && cp_json_set_str(o, "title", f->title) &&
         cp_json_set_str(o, "confidence", cp_confidence_name(f->confidence)) &&
         cp_json_set_num(o, "score", f->score) && cp_json_set_num(o, "time_share", f->time_share);
    if (ok) {
        ok = cp_json_set(o, "expected_gain", gain);
        gain = NULL;
    }
    ok = ok && cp_json_set(o, "nodes", array_text(f->nodes_json)) &&
         cp_json_set(o, "kernels", array_text(f->kernels_json));
    if (ok) {
        ok = cp_json_set(o, "change", change);
        change = NULL;
    }
    if (ok) {
        ok = cp_json_set(o, "risks", risks);
        risks = NULL;
    }
    if (ok && f->stacks_json) {
        json_t *st = json_loads(f->stacks_json, 0, NULL);
        ok = st && cp_json_set(o, "call_stacks", st);
    }
    if (ok && f->history_runs > 0) {
        json_t *h = json_object();
        if (h && cp_json_set_int(h, "runs", f->history_runs) &&
            cp_json_set_num(h, "mean_gain", f->history_gain) &&
            cp_json_set_num(h, "similarity", f->history_similarity) &&
            cp_json_set_num(h, "prior_gain", f->prior_gain))
            ok = cp_json_set(o, "history", h); /* steals h */
        else {
            json_decref(h);
            ok = false;
        }
    }
    ok = ok && cp_json_set_bool(o, "violates_constraints", f->violates) &&
         cp_json_set_str(o, "violation", f->violation) &&
         cp_json_set_str(o, "missing_features", f->missing) &&
         cp_json_set_str(o, "evidence", f->evidence) &&
         cp_json_set_bool(o, "unclassified", f->unclassified);
    json_decref(gain);
    json_decref(change);
    json_decref(risks);
    if (ok)
        return o;
    json_decref(o);
    return NULL;
}

json_t *cp_analysis_to_json(const struct cp_analysis *a)
{
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < a->n; i++)
        if (!cp_json_push(arr, finding_json(&a->findings[i], i + 1))) {
            json_decref(arr);
            return NULL;
        }
    return arr;
}

void cp_rules_skeleton(const struct cp_finding *f, const struct cp_features *feat,
                       struct cp_buf *out)
{
    const struct cp_op_type_feat *top = feat->n_op_types ? &feat->op_types[0] : NULL;
    cp_buf_puts(out, "# A rule skeleton written by `cannprof analyze` for a hotspot no rule\n"
                     "# explains. Replace every <...>, check it with `cannprof analyze TRACE "
                     "--rules DIR`,\n# and contribute it to rules/packs/.\n#\n");
    cp_buf_printf(out, "# finding: %s\n", f->title);
    cp_buf_puts(out, "# measured:\n");
    size_t n;
    const char *const *names = cp_features_scalar_names(&n);
    for (size_t i = 0; i < n; i++) {
        double v;
        if (cp_features_get(feat, names[i], &v))
            cp_buf_printf(out, "#   %-32s %.6g\n", names[i], v);
    }
    cp_buf_printf(out, "# affected kernels: %s\n# ONNX nodes: %s\n", f->kernels_json,
                  f->nodes_json);
    cp_buf_puts(out, "rules:\n  - name: <a_name_for_the_bottleneck>\n"
                     "    bottleneck_type: <memory_bound, compute_bound, launch_bound, ...>\n"
                     "    title: <one line for people>\n    indicators:\n");
    if (f->unclassified && top && top->time_share > 0.30)
        cp_buf_printf(out, "      - share(op_type == \"%s\") > 30%%\n", top->op_type);
    else
        cp_buf_puts(out, "      - device_util < 60%\n");
    cp_buf_puts(out, "    root_causes:\n      - name: <a_name_for_the_cause>\n        evidence:\n"
                     "          - <a condition that tells this cause from others>\n");
    if (f->unclassified && top && top->time_share > 0.30)
        cp_buf_printf(out, "        affected: op_type == \"%s\"\n", top->op_type);
    cp_buf_puts(out, "        change:\n          summary: <what to change>\n"
                     "          convert: [\"--<flag>=<value>\"]\n"
                     "        gain: {speedup: 1.5, low: 1.1, high: 2.0}   # <your priors>\n"
                     "        risks: {precision_loss: 0%, memory: 0%}\n");
}
