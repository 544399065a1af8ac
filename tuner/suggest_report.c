/* The report `cannprof suggest` writes (tuner/tuner.h): each finding's
 * change applied to the run's recorded config as a complete `cannprof
 * convert` command, switch file and runtime flags, with the expected gain,
 * the risks, what the knowledge base's history and --measure made of it;
 * as Markdown, HTML or JSON. */
#include "tuner/tuner.h"
#include "core/json.h"

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

void cp_suggest_markdown(const struct cp_diagnosis *dg, const char *trace, enum cp_target t,
                         const char *constraints, const struct cp_whatif *w, const char *history,
                         struct cp_buf *b)
{
    const struct cp_analysis *a = &dg->analysis;
    cp_buf_printf(b, "# cannprof suggest: %s\n\n", trace);
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
        cp_buf_printf(b, "- **Where:** %.1f%% of the iteration; %s %s\n", 100 * f->time_share,
                      dg->run.kind && strcmp(dg->run.kind, "import") == 0 ? "framework ops"
                                                                          : "ONNX nodes",
                      f->nodes_json);
        if (f->stacks_json)
            cp_buf_printf(b, "- **Call stacks:** `%s`\n", f->stacks_json);
        cp_buf_printf(b, "- **Expected gain:** %s\n- **Risks:** %s\n", g, r);
        if (f->history_runs > 0) {
            char h[256];
            fmt_history(f, h, sizeof h);
            cp_buf_printf(b, "- **History:** %s\n", h);
        }
        if (w) {
            char m[600];
            fmt_measured(&w[i], t, m, sizeof m);
            cp_buf_printf(b, "- **Measured:** %s\n", m);
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

/* ---- HTML -------------------------------------------------------------------------- */

void cp_suggest_html(const struct cp_diagnosis *dg, const char *trace, enum cp_target t,
                     const char *constraints, const struct cp_whatif *w, const char *history,
                     struct cp_buf *b)
{
    const struct cp_analysis *a = &dg->analysis;
    cp_buf_puts(b, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>cannprof "
                   "suggest</title>\n<style>body{font-family:sans-serif;max-width:70em;margin:"
                   "2em auto}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
                   "padding:.3em .6em}pre{background:#f4f4f4;padding:.6em;overflow-x:auto}"
                   ".bad{color:#b00}</style></head><body>\n<h1>cannprof suggest: ");
    cp_buf_markup(b, trace);
    cp_buf_puts(b, "</h1>\n<p>Model <code>");
    cp_buf_markup(b, dg->run.model_path);
    cp_buf_printf(b, "</code>, target <b>%s</b>, constraints <code>", cp_target_name(t));
    cp_buf_markup(b, constraints ? constraints : "none");
    cp_buf_puts(b, "</code>");
    if (history) {
        cp_buf_puts(b, "; knowledge base: ");
        cp_buf_markup(b, history);
    }
    cp_buf_printf(b,
                  "; %zu findings.</p>\n<table><tr><th>#</th><th>finding</th>"
                  "<th>root cause</th><th>confidence</th><th>expected gain</th><th>risks</th>"
                  "<th>constraints</th></tr>\n",
                  a->n);
    for (size_t i = 0; i < a->n; i++) {
        const struct cp_finding *f = &a->findings[i];
        char g[96], r[128];
        fmt_gain(f, t, g, sizeof g);
        fmt_risk(f, r, sizeof r);
        cp_buf_printf(b, "<tr><td>%zu</td><td><a href=\"#f%zu\">", i + 1, i + 1);
        cp_buf_markup(b, f->title);
        cp_buf_puts(b, "</a></td><td>");
        cp_buf_markup(b, f->root_cause);
        cp_buf_printf(b, "</td><td>%s</td><td>%s</td><td>%s</td><td%s>%s</td></tr>\n",
                      cp_confidence_name(f->confidence), g, r, f->violates ? " class=\"bad\"" : "",
                      f->violates ? "breaks" : "ok");
    }
    cp_buf_puts(b, "</table>\n");
    for (size_t i = 0; i < a->n; i++) {
        const struct cp_finding *f = &a->findings[i];
        cp_buf_printf(b, "<h2 id=\"f%zu\">%zu. ", i + 1, i + 1);
        cp_buf_markup(b, f->title);
        cp_buf_puts(b, "</h2>\n");
        if (f->violates) {
            cp_buf_puts(b, "<p class=\"bad\">Breaks a constraint: ");
            cp_buf_markup(b, f->violation);
            cp_buf_puts(b, "</p>\n");
        }
        cp_buf_puts(b, "<p>Where: ONNX nodes <code>");
        cp_buf_markup(b, f->nodes_json);
        cp_buf_printf(b, "</code> (%.1f%% of the iteration).</p>\n", 100 * f->time_share);
        if (f->history_runs > 0) {
            char h[256];
            fmt_history(f, h, sizeof h);
            cp_buf_puts(b, "<p>History: ");
            cp_buf_markup(b, h);
            cp_buf_puts(b, "</p>\n");
        }
        if (w) {
            char m[600];
            fmt_measured(&w[i], t, m, sizeof m);
            cp_buf_puts(b, "<p>Measured: ");
            cp_buf_markup(b, m);
            cp_buf_puts(b, "</p>\n");
        }
        cp_buf_puts(b, "<p>Change: ");
        cp_buf_markup(b, f->change.summary);
        cp_buf_puts(b, "</p>\n");
        struct applied ap;
        applied_init(&ap);
        if (!f->unclassified)
            apply(&dg->run, f, &ap);
        if (ap.ok) {
            if (ap.switches.len) {
                cp_buf_puts(b, "<p>switches.cfg:</p><pre>");
                cp_buf_markup(b, ap.switches.data);
                cp_buf_puts(b, "</pre>\n");
            }
            cp_buf_puts(b, "<pre>");
            cp_buf_markup(b, ap.convert.data);
            cp_buf_puts(b, "</pre>\n");
            if (ap.runtime.len) {
                cp_buf_puts(b, "<pre>cannprof bench suggested.om");
                cp_buf_markup(b, ap.runtime.data);
                cp_buf_puts(b, "</pre>\n");
            }
        }
        applied_release(&ap);
        cp_buf_puts(b, "<details><summary>evidence</summary><pre>");
        cp_buf_markup(b, f->evidence);
        cp_buf_puts(b, "</pre></details>\n");
    }
    cp_buf_puts(b, "</body></html>\n");
}

/* ---- JSON ---------------------------------------------------------------------------- */

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
                  cp_json_set(o, "prior_interval", prior) && cp_json_push(a, o);
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
