/* Findings as JSON, and rule skeletons for what no rule explains. */
#include "rules/rules_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void num(struct cp_buf *b, double v)
{
    if (isfinite(v))
        cp_buf_printf(b, "%.6g", v);
    else
        cp_buf_puts(b, "null");
}

static void strv(struct cp_buf *b, char *const *v)
{
    cp_buf_putc(b, '[');
    for (size_t i = 0; v && v[i]; i++) {
        if (i)
            cp_buf_putc(b, ',');
        cp_buf_json_str(b, v[i]);
    }
    cp_buf_putc(b, ']');
}

void cp_analysis_json(const struct cp_analysis *a, struct cp_buf *out)
{
    cp_buf_putc(out, '[');
    for (size_t i = 0; i < a->n; i++) {
        const struct cp_finding *f = &a->findings[i];
        cp_buf_puts(out, i ? ",{" : "{");
        cp_buf_printf(out, "\"rank\":%zu,\"rule\":", i + 1);
        cp_buf_json_str(out, f->rule);
        cp_buf_puts(out, ",\"bottleneck_type\":");
        cp_buf_json_str(out, f->bottleneck_type);
        cp_buf_puts(out, ",\"root_cause\":");
        cp_buf_json_str(out, f->root_cause);
        cp_buf_puts(out, ",\"title\":");
        cp_buf_json_str(out, f->title);
        cp_buf_puts(out, ",\"confidence\":");
        cp_buf_json_str(out, cp_confidence_name(f->confidence));
        cp_buf_puts(out, ",\"score\":");
        num(out, f->score);
        cp_buf_puts(out, ",\"time_share\":");
        num(out, f->time_share);
        cp_buf_puts(out, ",\"expected_gain\":{\"latency_saved\":");
        num(out, f->gain);
        cp_buf_puts(out, ",\"low\":");
        num(out, f->gain_lo);
        cp_buf_puts(out, ",\"high\":");
        num(out, f->gain_hi);
        cp_buf_puts(out, ",\"speedup_prior\":");
        num(out, f->speedup);
        cp_buf_puts(out, "},\"nodes\":");
        cp_buf_puts(out, f->nodes_json ? f->nodes_json : "[]");
        cp_buf_puts(out, ",\"kernels\":");
        cp_buf_puts(out, f->kernels_json ? f->kernels_json : "[]");
        cp_buf_puts(out, ",\"change\":{\"summary\":");
        cp_buf_json_str(out, f->change.summary);
        cp_buf_puts(out, ",\"convert\":");
        strv(out, f->change.convert);
        cp_buf_puts(out, ",\"fusion_switches\":");
        strv(out, f->change.fusion_switches);
        cp_buf_puts(out, ",\"runtime\":");
        strv(out, f->change.runtime);
        cp_buf_puts(out, "},\"risks\":{\"precision_loss_pct\":");
        num(out, f->risk_precision_loss);
        cp_buf_puts(out, ",\"memory_change\":");
        num(out, f->risk_memory);
        cp_buf_printf(
            out, "},\"violates_constraints\":%s,\"violation\":", f->violates ? "true" : "false");
        cp_buf_json_str(out, f->violation);
        cp_buf_puts(out, ",\"missing_features\":");
        cp_buf_json_str(out, f->missing);
        cp_buf_puts(out, ",\"evidence\":");
        cp_buf_json_str(out, f->evidence);
        cp_buf_printf(out, ",\"unclassified\":%s}", f->unclassified ? "true" : "false");
    }
    cp_buf_putc(out, ']');
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
