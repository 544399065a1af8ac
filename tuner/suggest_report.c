/* The report `cannprof suggest` writes (tuner/tuner.h): each finding's
 * change applied to the run's recorded config as a complete `cannprof
 * convert` command, switch file and runtime flags, with the expected gain,
 * the risks, what the knowledge base's history and --measure made of it;
 * as Markdown or JSON, and the Markdown as HTML and PDF with charts of
 * where the time goes (report/). */
#include "tuner/tuner.h"
#include "core/json.h"
#include "report/doc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The change applied to the run's own config, as commands. */
struct applied {
    bool ok;
    char note[256];         /* why not, when !ok */
    struct cp_buf convert;  /* the full convert command */
    struct cp_buf switches; /* switch file content ("" when none) */
    struct cp_buf runtime;  /* " --threads 1 --batch 8" */
};

static void applied_init(struct applied *a)
{
    memset(a, 0, sizeof *a);
    cp_buf_init(&a->convert);
    cp_buf_init(&a->switches);
    cp_buf_init(&a->runtime);
}

static void applied_release(struct applied *a)
{
    cp_buf_release(&a->convert);
    cp_buf_release(&a->switches);
    cp_buf_release(&a->runtime);
}

static void apply(const struct cp_run_metrics *run, const struct cp_finding *f, struct applied *out)
{
    struct cp_tune_point p, q;
    memset(&p, 0, sizeof p);
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_delta dl;
    cp_convert_config_init(&p.cfg);
    if (!run->config_json || !*run->config_json ||
        cp_convert_config_from_json(&p.cfg, run->config_json, &d) != CP_OK) {
        snprintf(out->note, sizeof out->note,
                 "the trace does not record the conversion config; apply the change by hand");
        return;
    }
    if (cp_delta_from_change(&f->change, &dl, &d) != CP_OK ||
        cp_delta_apply(&p, &dl, &q, &d) != CP_OK) {
        snprintf(out->note, sizeof out->note, "%.250s", d.msg);
        return;
    }
    char *slash = strrchr(q.cfg.output, '/');
    snprintf(q.cfg.output + (slash ? slash - q.cfg.output + 1 : 0),
             sizeof q.cfg.output - (size_t)(slash ? slash - q.cfg.output + 1 : 0), "suggested");
    if (q.cfg.fusion_switches[0]) {
        snprintf(q.cfg.fusion_switch_file, sizeof q.cfg.fusion_switch_file, "switches.cfg");
        char copy[sizeof q.cfg.fusion_switches];
        snprintf(copy, sizeof copy, "%s", q.cfg.fusion_switches);
        for (char *save = NULL, *t = strtok_r(copy, ";", &save); t; t = strtok_r(NULL, ";", &save))
            cp_buf_printf(&out->switches, "%s\n", t);
    } else
        q.cfg.fusion_switch_file[0] = '\0';
    cp_convert_config_cmdline(&q.cfg, &out->convert);
    for (size_t i = 0; f->change.runtime && f->change.runtime[i]; i++)
        cp_buf_printf(&out->runtime, " %s", f->change.runtime[i]);
    out->ok = true;
}

static void fmt_gain(const struct cp_finding *f, enum cp_target t, char *out, size_t n)
{
    const char *what = t == CP_TARGET_MEMORY ? "memory" : "latency";
    if (f->unclassified)
        snprintf(out, n, "unknown (at most %.1f%%)", 100 * f->gain_hi);
    else
        snprintf(out, n, "%.1f%% %s [%.1f%%, %.1f%%]", 100 * f->gain, what, 100 * f->gain_lo,
                 100 * f->gain_hi);
}

static void fmt_risk(const struct cp_finding *f, char *out, size_t n)
{
    char a[64] = "", b[64] = "";
    if (isfinite(f->risk_precision_loss))
        snprintf(a, sizeof a, "precision loss ~%.2f%%", f->risk_precision_loss);
    if (isfinite(f->risk_memory))
        snprintf(b, sizeof b, "memory %+.0f%%", 100 * f->risk_memory);
    snprintf(out, n, "%s%s%s", a, a[0] && b[0] ? ", " : "", a[0] || b[0] ? b : "none stated");
}

/* What the knowledge base's history did to a finding's prior. */
static void fmt_history(const struct cp_finding *f, char *out, size_t n)
{
    snprintf(out, n,
             "`tune` measured this rule's change %d time%s on similar models on this hardware "
             "(similarity up to %.2f): %.1f%% on average; the rule's prior of %.1f%% is refined "
             "to %.1f%%",
             f->history_runs, f->history_runs == 1 ? "" : "s", f->history_similarity,
             100 * f->history_gain, 100 * f->prior_gain, 100 * f->gain);
}

/* ---- Markdown --------------------------------------------------------------------- */

/* What --measure found for a finding, as a line for people. */
static void fmt_measured(const struct cp_whatif *w, enum cp_target t, char *out, size_t n)
{
    const char *what = t == CP_TARGET_THROUGHPUT ? "throughput" : "latency";
    if (w->measured)
        snprintf(out, n,
                 "%.1f%% %s, 95%% CI [%.1f%%, %.1f%%], in %lld interleaved rounds (p = %.3g, "
                 "%.1f s); expect [%.1f%%, %.1f%%] from a later measurement, drift between runs "
                 "included; the rule's prior was %.1f%% [%.1f%%, %.1f%%]",
                 100 * w->gain, what, 100 * w->lo, 100 * w->hi, (long long)w->rounds, w->p,
                 w->seconds, 100 * w->expect_lo, 100 * w->expect_hi, 100 * w->prior_gain,
                 100 * w->prior_lo, 100 * w->prior_hi);
    else
        snprintf(out, n, "not measured (%s); the rule's prior stands", w->note);
}

/* The race of a finding against the one ranked first by its what-if, as
 * a line for people; "" when it was not raced. */
static void fmt_race(const struct cp_whatif *w, enum cp_target t, char *out, size_t n)
{
    const struct cp_whatif_race *r = &w->race;
    if (!r->run)
        *out = '\0';
    else if (!r->measured)
        snprintf(out, n,
                 "against \"%s\", whose interval overlapped this one's: %s; the what-ifs' "
                 "order stands",
                 r->against, r->note);
    else
        snprintf(out, n,
                 "against \"%s\", whose interval overlapped this one's: this change's %s %s "
                 "%.1f%%, 95%% CI [%.1f%%, %.1f%%], in %lld interleaved rounds of the two changed "
                 "models (p = %.3g); ranked %s it%s",
                 r->against, t == CP_TARGET_THROUGHPUT ? "throughput" : "latency",
                 t == CP_TARGET_THROUGHPUT ? "higher by" : "lower by", 100 * r->gain, 100 * r->lo,
                 100 * r->hi, (long long)r->rounds, r->p, r->won ? "above" : "below",
                 !r->won && r->gain > 0
                     ? " (a win under 2 points, or not significant, is not one a later "
                       "measurement reproduces)"
                     : "");
}

/* The op types by kernel time, the biggest first. */
static void where_time_goes(const struct cp_diagnosis *dg, struct cp_buf *b)
{
    const struct cp_features *f = dg->features;
    if (!f || f->n_op_types == 0)
        return;
    cp_buf_puts(b, "\n## Where the time goes\n\n| op type | kernels | time per iteration | "
                   "share |\n|---|---:|---:|---:|\n");
    for (size_t i = 0; i < f->n_op_types && i < 12; i++)
        cp_buf_printf(b, "| %s | %zu | %.3f ms | %.1f%% |\n", f->op_types[i].op_type,
                      f->op_types[i].n_kernels, f->op_types[i].time_ns / 1e6,
                      100 * f->op_types[i].time_share);
    if (f->n_op_types > 12)
        cp_buf_printf(b, "\n(%zu more op types)\n", f->n_op_types - 12);
}

void cp_suggest_markdown(const struct cp_diagnosis *dg, const char *cmd, const char *trace,
                         enum cp_target t, const char *constraints, const struct cp_whatif *w,
                         const char *history, struct cp_buf *b)
{
    const struct cp_analysis *a = &dg->analysis;
    cp_buf_printf(b, "# cannprof %s: %s\n\n", cmd ? cmd : "suggest", trace);
    cp_buf_printf(b,
                  "Model `%s` (run %lld), target **%s**, constraints `%s`. %zu findings from "
                  "%zu rules%s.\n\n",
                  dg->run.model_path, (long long)dg->run.run_id, cp_target_name(t),
                  constraints ? constraints : "none", a->n, a->rules_evaluated,
                  a->already_applied ? " (changes the run already has are left out)" : "");
    if (history)
        cp_buf_printf(b, "Knowledge base: %s.\n\n", history);
    if (a->n == 0) {
        cp_buf_puts(b, "No rule fired and no hotspot stands out: nothing to suggest.\n");
        return;
    }
    cp_buf_puts(b, "| # | bottleneck | root cause | confidence | expected gain | risks | "
                   "constraints |\n|---:|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < a->n; i++) {
        const struct cp_finding *f = &a->findings[i];
        char g[96], r[128];
        fmt_gain(f, t, g, sizeof g);
        fmt_risk(f, r, sizeof r);
        cp_buf_printf(b, "| %zu | %s | %s | %s | %s%s | %s | %s |\n", i + 1, f->bottleneck_type,
                      f->root_cause, cp_confidence_name(f->confidence), g,
                      w && w[i].measured ? " (measured)" : "", r,
                      f->violates ? "**breaks**" : "ok");
    }
    where_time_goes(dg, b);
    for (size_t i = 0; i < a->n; i++) {
        const struct cp_finding *f = &a->findings[i];
        char g[96], r[128];
        fmt_gain(f, t, g, sizeof g);
        fmt_risk(f, r, sizeof r);
        cp_buf_printf(b, "\n## %zu. %s\n\n", i + 1, f->title);
        if (f->violates)
            cp_buf_printf(b,
                          "> **Breaks a constraint:** %s. Ranked below the changes that "
                          "do not.\n\n",
                          f->violation);
        cp_buf_printf(b, "- **Bottleneck:** %s; **root cause:** %s (rule `%s`)\n",
                      f->bottleneck_type, f->root_cause, f->rule);
        cp_buf_printf(b, "- **Confidence:** %s (score %.2f)%s%s\n",
                      cp_confidence_name(f->confidence), f->score,
                      f->missing[0] ? "; missing features: " : "", f->missing);
        bool none = !f->nodes_json || strcmp(f->nodes_json, "[]") == 0;
        bool kernels = none && f->kernels_json && strcmp(f->kernels_json, "[]") != 0;
        cp_buf_printf(b, "- **Where:** %.1f%% of the iteration", 100 * f->time_share);
        if (!none)
            cp_buf_printf(b, "; %s %s",
                          dg->run.kind && strcmp(dg->run.kind, "import") == 0 ? "framework ops"
                                                                              : "ONNX nodes",
                          f->nodes_json);
        else if (kernels)
            cp_buf_printf(b, "; kernels %s", f->kernels_json);
        cp_buf_puts(b, "\n");
        if (f->stacks_json)
            cp_buf_printf(b, "- **Call stacks:** `%s`\n", f->stacks_json);
        cp_buf_printf(b, "- **Expected gain:** %s\n- **Risks:** %s\n", g, r);
        if (f->history_runs > 0) {
            char h[256];
            fmt_history(f, h, sizeof h);
            cp_buf_printf(b, "- **History:** %s\n", h);
        }
        if (w) {
            char m[1024];
            fmt_measured(&w[i], t, m, sizeof m);
            cp_buf_printf(b, "- **Measured:** %s\n", m);
            fmt_race(&w[i], t, m, sizeof m);
            if (*m)
                cp_buf_printf(b, "- **Raced:** %s\n", m);
        }
        cp_buf_printf(b, "- **Change:** %s\n\n", f->change.summary);
        struct applied ap;
        applied_init(&ap);
        if (!f->unclassified)
            apply(&dg->run, f, &ap);
        if (ap.ok) {
            if (ap.switches.len)
                cp_buf_printf(b, "Fusion switch file `switches.cfg`:\n\n```\n%s```\n\n",
                              ap.switches.data);
            cp_buf_printf(b, "```\n%s\n```\n", ap.convert.data ? ap.convert.data : "");
            if (ap.runtime.len)
                cp_buf_printf(b, "\nRun it with:\n\n```\ncannprof bench suggested.om%s\n```\n",
                              ap.runtime.data);
        } else if (ap.note[0])
            cp_buf_printf(b, "(%s)\n", ap.note);
        applied_release(&ap);
        cp_buf_printf(b, "\n<details><summary>evidence</summary>\n\n```\n%s```\n</details>\n",
                      f->evidence);
    }
}

/* ---- HTML and PDF ------------------------------------------------------------------- */

struct suggest_charts {
    const struct cp_diagnosis *dg;
    enum cp_target t;
    bool drawn;
    /* op types by time; findings' expected gains; the top kernels' roofline */
    const char *op_labels[12];
    double op_share[12];
    size_t n_ops;
    char gain_text[16][96];
    const char *gain_labels[16];
    double gains[16];
    size_t n_gains;
    double rx[12], ry[12];
    const char *rlab[12];
    size_t n_roof;
};

static void suggest_charts_init(struct suggest_charts *c, const struct cp_diagnosis *dg,
                                enum cp_target t)
{
    memset(c, 0, sizeof *c);
    c->dg = dg;
    c->t = t;
    const struct cp_features *f = dg->features;
    for (size_t i = 0; f && i < f->n_op_types && c->n_ops < 12; i++) {
        c->op_labels[c->n_ops] = f->op_types[i].op_type;
        c->op_share[c->n_ops++] = 100 * f->op_types[i].time_share;
    }
    const struct cp_analysis *a = &dg->analysis;
    for (size_t i = 0; i < a->n && c->n_gains < 16; i++) {
        if (!isfinite(a->findings[i].gain))
            continue;
        snprintf(c->gain_text[c->n_gains], sizeof c->gain_text[0], "%zu. %.50s", i + 1,
                 a->findings[i].root_cause);
        c->gain_labels[c->n_gains] = c->gain_text[c->n_gains];
        c->gains[c->n_gains++] = 100 * a->findings[i].gain;
    }
    /* the kernels that take the most time, where the roofline can place them */
    if (!f || !dg->calibrated || dg->machine.peak_flops_f32 <= 0 || dg->machine.mem_bw <= 0)
        return;
    bool used[4096] = {false};
    for (size_t k = 0; k < 12; k++) {
        size_t best = SIZE_MAX;
        for (size_t i = 0; i < f->n_kernels && i < 4096; i++) {
            const struct cp_kernel_feat *q = &f->kernels[i];
            if (used[i] || !isfinite(q->intensity) || !isfinite(q->achieved_flops) ||
                q->intensity <= 0 || q->achieved_flops <= 0)
                continue;
            if (best == SIZE_MAX || q->mean_ns > f->kernels[best].mean_ns)
                best = i;
        }
        if (best == SIZE_MAX)
            break;
        used[best] = true;
        c->rx[c->n_roof] = f->kernels[best].intensity;
        c->ry[c->n_roof] = f->kernels[best].achieved_flops / 1e9;
        c->rlab[c->n_roof++] = f->kernels[best].node;
    }
}

/* The charts go under "Where the time goes". */
static void suggest_section(void *ctx, struct cp_doc *doc, const char *heading)
{
    struct suggest_charts *c = ctx;
    if (c->drawn || strncmp(heading, "Where the time goes", 19) != 0)
        return;
    c->drawn = true;
    if (c->n_ops) {
        struct cp_chart ch = {.kind = CP_CHART_BARS,
                              .title = "Kernel time by op type",
                              .unit = "%",
                              .labels = c->op_labels,
                              .n = c->n_ops,
                              .values = c->op_share};
        cp_doc_chart(doc, &ch);
    }
    if (c->n_gains) {
        struct cp_chart ch = {.kind = CP_CHART_BARS,
                              .title = c->t == CP_TARGET_MEMORY
                                           ? "Expected memory saved by each finding's change"
                                           : "Expected gain of each finding's change",
                              .unit = "%",
                              .labels = c->gain_labels,
                              .n = c->n_gains,
                              .values = c->gains,
                              .note = "the rules' estimates before measurement; --measure "
                                      "measures them"};
        cp_doc_chart(doc, &ch);
    }
    if (c->n_roof) {
        char note[160];
        snprintf(note, sizeof note,
                 "this machine: %.0f GFLOP/s fp32 peak, %.1f GB/s memory "
                 "(cannprof calibrate)",
                 c->dg->machine.peak_flops_f32 / 1e9, c->dg->machine.mem_bw / 1e9);
        struct cp_chart ch = {.kind = CP_CHART_XY,
                              .title = "Roofline: the top kernels by time",
                              .x_title = "arithmetic intensity (FLOP/byte)",
                              .y_title = "achieved GFLOP/s",
                              .log_x = true,
                              .log_y = true,
                              .roof_peak = c->dg->machine.peak_flops_f32 / 1e9,
                              .roof_bw = c->dg->machine.mem_bw / 1e9,
                              .n_series = 1,
                              .note = note};
        ch.series[0] =
            (struct cp_chart_series){"kernels", c->rx, c->ry, c->n_roof, false, true, c->rlab};
        cp_doc_chart(doc, &ch);
    }
}

struct cp_doc *cp_suggest_doc(const struct cp_diagnosis *dg, const char *cmd, const char *trace,
                              enum cp_target t, const char *constraints, const struct cp_whatif *w,
                              const char *history)
{
    struct cp_buf md;
    cp_buf_init(&md);
    cp_suggest_markdown(dg, cmd, trace, t, constraints, w, history, &md);
    struct suggest_charts *c = cp_calloc(1, sizeof *c);
    struct cp_doc *doc = NULL;
    if (c && cp_buf_status(&md) == CP_OK) {
        suggest_charts_init(c, dg, t);
        doc = cp_doc_from_markdown(md.data, NULL, suggest_section, c);
    }
    free(c);
    cp_buf_release(&md);
    return doc;
}

/* ---- JSON ---------------------------------------------------------------------------- */

/* A finding's race (null when it was not raced); NULL when out of memory. */
static json_t *race_json(const struct cp_whatif_race *r)
{
    if (!r->run)
        return json_null();
    json_t *o = json_object(), *ci = json_array();
    if (!o || !ci || !cp_json_push(ci, cp_json_num(r->lo)) ||
        !cp_json_push(ci, cp_json_num(r->hi))) {
        json_decref(ci);
        json_decref(o);
        return NULL;
    }
    /* ci is o's from here, whatever happens */
    if (cp_json_set(o, "ci", ci) && cp_json_set_str(o, "against", r->against) &&
        cp_json_set_bool(o, "measured", r->measured) && cp_json_set_str(o, "note", r->note) &&
        cp_json_set_num(o, "gain", r->gain) && cp_json_set_num(o, "p", r->p) &&
        cp_json_set_int(o, "rounds", r->rounds) && cp_json_set_bool(o, "won", r->won))
        return o;
    json_decref(o);
    return NULL;
}

/* --measure's results, one per finding. NULL when out of memory. */
static json_t *measured_json(const struct cp_whatif *w, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) {
        json_t *o = json_object(), *ci = json_array(), *prior = json_array(),
               *expect = json_array();
        bool ok = o && ci && prior && expect && cp_json_push(expect, cp_json_num(w[i].expect_lo)) &&
                  cp_json_push(expect, cp_json_num(w[i].expect_hi)) &&
                  cp_json_push(ci, cp_json_num(w[i].lo)) &&
                  cp_json_push(ci, cp_json_num(w[i].hi)) &&
                  cp_json_push(prior, cp_json_num(w[i].prior_lo)) &&
                  cp_json_push(prior, cp_json_num(w[i].prior_hi)) &&
                  cp_json_set_bool(o, "measured", w[i].measured) &&
                  cp_json_set_str(o, "note", w[i].note) && cp_json_set_num(o, "gain", w[i].gain) &&
                  cp_json_set(o, "ci", ci) && cp_json_set(o, "expect", expect) &&
                  cp_json_set_num(o, "p", w[i].p) && cp_json_set_int(o, "rounds", w[i].rounds) &&
                  cp_json_set_num(o, "seconds", w[i].seconds) &&
                  cp_json_set_num(o, "prior_gain", w[i].prior_gain) &&
                  cp_json_set(o, "prior_interval", prior) &&
                  cp_json_set(o, "race", race_json(&w[i].race)) && cp_json_push(a, o);
        if (!ok) {
            json_decref(o);
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

json_t *cp_suggest_json(const struct cp_diagnosis *dg, const char *trace, enum cp_target t,
                        const char *constraints, const struct cp_whatif *w, const char *history)
{
    json_t *j = json_object(), *cmds = json_array();
    bool ok = j && cmds;
    for (size_t i = 0; ok && i < dg->analysis.n; i++) {
        struct applied ap;
        applied_init(&ap);
        if (!dg->analysis.findings[i].unclassified)
            apply(&dg->run, &dg->analysis.findings[i], &ap);
        json_t *c = json_object();
        ok = c && cp_buf_status(&ap.convert) == CP_OK && cp_buf_status(&ap.switches) == CP_OK &&
             cp_buf_status(&ap.runtime) == CP_OK &&
             cp_json_set(c, "convert", ap.ok ? cp_json_str(ap.convert.data) : json_null()) &&
             cp_json_set_str(c, "switch_file", ap.switches.data ? ap.switches.data : "") &&
             cp_json_set_str(c, "runtime", ap.runtime.data ? ap.runtime.data : "");
        if (ok)
            ok = cp_json_push(cmds, c); /* steals c */
        else
            json_decref(c);
        applied_release(&ap);
    }
    ok = ok && cp_json_set_str(j, "trace", trace) &&
         cp_json_set_str(j, "model", dg->run.model_path) &&
         cp_json_set_int(j, "run", dg->run.run_id) &&
         cp_json_set_str(j, "target", cp_target_name(t)) &&
         cp_json_set_str(j, "constraints", constraints ? constraints : "") &&
         cp_json_set(j, "knowledge_base", history ? cp_json_str(history) : json_null()) &&
         cp_json_set(j, "findings", cp_analysis_to_json(&dg->analysis)) &&
         cp_json_set(j, "measured", w ? measured_json(w, dg->analysis.n) : json_null());
    if (ok) {
        ok = cp_json_set(j, "commands", cmds);
        cmds = NULL;
    }
    json_decref(cmds);
    if (ok)
        return j;
    json_decref(j);
    return NULL;
}
