/* validate's renderings: a terminal table, JSON, Markdown, JUnit XML and a
 * plain text for alerts. All read one struct cp_vresult. */
#include "cli/validate.h"
#include "runner/probe.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum cp_verdict cp_vresult_overall(const struct cp_vresult *r)
{
    bool improved = false, inconclusive = false;
    for (size_t i = 0; i < r->n_rows; i++) {
        switch (r->rows[i].c.verdict) {
        case CP_VERDICT_REGRESSED:
            return CP_VERDICT_REGRESSED;
        case CP_VERDICT_IMPROVED:
            improved = true;
            break;
        case CP_VERDICT_INCONCLUSIVE:
            inconclusive = true;
            break;
        case CP_VERDICT_UNCHANGED:
            break;
        }
    }
    return improved       ? CP_VERDICT_IMPROVED
           : inconclusive ? CP_VERDICT_INCONCLUSIVE
                          : CP_VERDICT_UNCHANGED;
}

/* Precision is compared in percentage points, not in percent of itself. */
static bool is_points(const struct cp_vrow *row)
{
    return row->metric == CP_VM_PRECISION;
}

static void fmt_value(const struct cp_vrow *row, double v, char *out, size_t n)
{
    if (!isfinite(v))
        snprintf(out, n, "-");
    else if (row->metric == CP_VM_MEMORY)
        snprintf(out, n, "%.2f", v * row->scale);
    else if (row->metric == CP_VM_THROUGHPUT)
        snprintf(out, n, "%.2f", v * row->scale);
    else
        snprintf(out, n, "%.3f", v * row->scale);
}

static void fmt_delta(const struct cp_vrow *row, char *out, size_t n)
{
    if (!isfinite(row->c.delta_pct))
        snprintf(out, n, "-");
    else
        snprintf(out, n, "%+.2f%s", row->c.delta_pct, is_points(row) ? " pp" : "%");
}

static void fmt_ci(const struct cp_vrow *row, char *out, size_t n)
{
    if (row->c.exact || !isfinite(row->c.ci_lo_pct))
        snprintf(out, n, "-");
    else
        snprintf(out, n, "[%+.2f%%, %+.2f%%]", row->c.ci_lo_pct, row->c.ci_hi_pct);
}

static void fmt_p(const struct cp_vrow *row, char *out, size_t n)
{
    if (!isfinite(row->c.p))
        snprintf(out, n, "-");
    else if (row->c.p < 0.0001)
        snprintf(out, n, "<0.0001");
    else
        snprintf(out, n, "%.4f", row->c.p);
}

static const char *overall_sentence(enum cp_verdict v)
{
    switch (v) {
    case CP_VERDICT_REGRESSED:
        return "REGRESSED: at least one metric got significantly worse";
    case CP_VERDICT_IMPROVED:
        return "improved: at least one metric got significantly better, none worse";
    case CP_VERDICT_INCONCLUSIVE:
        return "inconclusive: a change above the threshold is not yet significant";
    case CP_VERDICT_UNCHANGED:
        break;
    }
    return "unchanged: no metric moved beyond the threshold";
}

/* Which iterations the timing metrics compared, and why. */
static void probe_note(const struct cp_vresult *r, struct cp_buf *out, const char *bullet)
{
    const struct cp_vprobe *p = &r->probe;
    static const char *side[2] = {"before", "after"};
    if (p->used) {
        char floors[64];
        if (p->reference_ns[0] == p->reference_ns[1])
            snprintf(floors, sizeof floors, "a floor of %.2f us", (double)p->reference_ns[0] / 1e3);
        else /* different thread counts: each run its own */
            snprintf(floors, sizeof floors, "floors of %.2f and %.2f us",
                     (double)p->reference_ns[0] / 1e3, (double)p->reference_ns[1] / 1e3);
        cp_buf_printf(out,
                      "%stiming compares undisturbed iterations only (interference probe at most "
                      "%.2fx %s): before %zu of %zu, after %zu of %zu; "
                      "--all-iterations compares every one\n",
                      bullet, CP_PROBE_TOLERANCE, floors, p->kept[0], p->total[0], p->kept[1],
                      p->total[1]);
        return;
    }
    if (p->too_few) {
        for (int s = 0; s < 2; s++)
            if (p->kept[s] < CP_VALIDATE_MIN_UNDISTURBED)
                cp_buf_printf(out,
                              "%stiming: only %zu of the %s run's %zu iterations ran undisturbed "
                              "(its probe floor %.2f us against %.2f us): the machine was busy, "
                              "so timing gets no verdict; measure again\n",
                              bullet, p->kept[s], side[s], p->total[s],
                              (double)p->floor_ns[s] / 1e3, (double)p->reference_ns[s] / 1e3);
        return;
    }
    if (p->why[0] && !strstr(p->why, "interleaved"))
        cp_buf_printf(out, "%stiming compares every iteration: %s\n", bullet, p->why);
}

static void notes(const struct cp_vresult *r, struct cp_buf *out, const char *bullet)
{
    probe_note(r, out, bullet);
    for (size_t i = 0; i < r->n_rows; i++) {
        const struct cp_vrow *row = &r->rows[i];
        if (row->c.verdict == CP_VERDICT_INCONCLUSIVE && row->c.n_needed > 0)
            cp_buf_printf(out,
                          "%s%s: a %+.2f%% change is not significant with %zu vs %zu samples; "
                          "about %zu per side would settle it\n",
                          bullet, row->name, row->c.delta_pct, row->c.n_before, row->c.n_after,
                          row->c.n_needed);
    }
    if (r->models_differ)
        cp_buf_printf(out, "%swarning: the traces are of different models (--force)\n", bullet);
}

void cp_validate_render_table(const struct cp_vresult *r, struct cp_buf *out)
{
    const char *what = r->probe.used ? " undisturbed" : "";
    cp_buf_printf(out, "before: %s (run %lld, %zu%s of %zu samples)\n", r->before_label,
                  (long long)r->before->run_id, r->before->n, what, r->probe.total[0]);
    cp_buf_printf(out, "after:  %s (run %lld, %zu%s of %zu samples)\n", r->after_label,
                  (long long)r->after->run_id, r->after->n, what, r->probe.total[1]);
    cp_buf_printf(out, "test:   %s, alpha %g, threshold %g%%, %g%% CI\n",
                  cp_stat_test_name(r->opts.test), r->opts.alpha, r->opts.threshold_pct,
                  100 * r->opts.boot.level);
    if (r->noise_runs)
        cp_buf_printf(out,
                      "noise:  %.2f%% run-to-run (3 x the robust spread of %zu earlier "
                      "validations)%s\n",
                      r->noise_floor_pct, r->noise_runs,
                      r->opts.threshold_pct > r->asked_threshold_pct
                          ? "; the threshold is raised to it"
                          : "; below the threshold");
    cp_buf_putc(out, '\n');
    cp_buf_printf(out, "%-18s %12s %12s %10s %22s %9s  %s\n", "metric", "before", "after", "delta",
                  "95% CI of delta", "p", "verdict");
    for (size_t i = 0; i < r->n_rows; i++) {
        const struct cp_vrow *row = &r->rows[i];
        char name[40], b[32], a[32], dl[32], ci[48], p[16];
        snprintf(name, sizeof name, "%s (%s)", row->name, row->unit);
        fmt_value(row, row->c.before, b, sizeof b);
        fmt_value(row, row->c.after, a, sizeof a);
        fmt_delta(row, dl, sizeof dl);
        fmt_ci(row, ci, sizeof ci);
        fmt_p(row, p, sizeof p);
        cp_buf_printf(out, "%-18s %12s %12s %10s %22s %9s  %s\n", name, b, a, dl, ci, p,
                      cp_verdict_name(row->c.verdict));
    }
    cp_buf_putc(out, '\n');
    notes(r, out, "");
    cp_buf_printf(out, "verdict: %s\n", overall_sentence(r->overall));
}

static void json_num(struct cp_buf *b, double v)
{
    if (isfinite(v))
        cp_buf_printf(b, "%.10g", v);
    else
        cp_buf_puts(b, "null");
}

static void row_json(const struct cp_vrow *row, struct cp_buf *out)
{
    cp_buf_puts(out, "{\"unit\":");
    cp_buf_json_str(out, row->unit);
    cp_buf_puts(out, ",\"before\":");
    json_num(out, row->c.before * row->scale);
    cp_buf_puts(out, ",\"after\":");
    json_num(out, row->c.after * row->scale);
    cp_buf_puts(out, is_points(row) ? ",\"delta_pp\":" : ",\"delta_pct\":");
    json_num(out, row->c.delta_pct);
    cp_buf_puts(out, ",\"ci_pct\":");
    if (row->c.exact)
        cp_buf_puts(out, "null");
    else {
        cp_buf_putc(out, '[');
        json_num(out, row->c.ci_lo_pct);
        cp_buf_putc(out, ',');
        json_num(out, row->c.ci_hi_pct);
        cp_buf_putc(out, ']');
    }
    cp_buf_puts(out, ",\"p\":");
    json_num(out, row->c.p);
    cp_buf_printf(out, ",\"n_before\":%zu,\"n_after\":%zu,\"test\":", row->c.n_before,
                  row->c.n_after);
    cp_buf_json_str(out, row->c.exact ? "exact" : cp_stat_test_name(row->c.test));
    cp_buf_puts(out, ",\"mde_pct\":");
    json_num(out, row->c.mde_pct);
    cp_buf_puts(out, ",\"samples_needed\":");
    if (row->c.n_needed)
        cp_buf_printf(out, "%zu", row->c.n_needed);
    else
        cp_buf_puts(out, "null");
    cp_buf_puts(out, ",\"verdict\":");
    cp_buf_json_str(out, cp_verdict_name(row->c.verdict));
    cp_buf_putc(out, '}');
}

void cp_validate_render_figures(const struct cp_vresult *r, struct cp_buf *out)
{
    cp_buf_putc(out, '{');
    for (size_t i = 0; i < r->n_rows; i++) {
        if (i)
            cp_buf_putc(out, ',');
        cp_buf_json_str(out, r->rows[i].name);
        cp_buf_putc(out, ':');
        row_json(&r->rows[i], out);
    }
    cp_buf_putc(out, '}');
}

static void side_json(const char *label, const struct cp_run_metrics *m, const struct cp_vprobe *p,
                      int s, struct cp_buf *out)
{
    cp_buf_puts(out, "{\"source\":");
    cp_buf_json_str(out, label);
    cp_buf_printf(out, ",\"run\":%lld,\"samples\":%zu,\"iterations\":%zu,", (long long)m->run_id,
                  m->n, p->total[s]);
    if (p->floor_ns[s])
        cp_buf_printf(out, "\"probe_floor_ns\":%llu,", (unsigned long long)p->floor_ns[s]);
    else
        cp_buf_puts(out, "\"probe_floor_ns\":null,");
    cp_buf_printf(out, "\"undisturbed\":%zu,\"model\":", p->kept[s]);
    cp_buf_json_str(out, m->model_path);
    cp_buf_puts(out, ",\"model_hash\":");
    cp_buf_json_str(out, m->model_hash);
    cp_buf_puts(out, ",\"config_id\":");
    cp_buf_json_str(out, m->config_id);
    cp_buf_puts(out, ",\"created_at\":");
    cp_buf_json_str(out, m->created_at);
    cp_buf_putc(out, '}');
}

void cp_validate_render_json(const struct cp_vresult *r, struct cp_buf *out)
{
    cp_buf_puts(out, "{\"before\":");
    side_json(r->before_label, r->before, &r->probe, 0, out);
    cp_buf_puts(out, ",\"after\":");
    side_json(r->after_label, r->after, &r->probe, 1, out);
    cp_buf_printf(out, ",\"iterations\":\"%s\",\"iterations_why\":",
                  r->probe.used      ? "undisturbed"
                  : r->probe.too_few ? "too-few-undisturbed"
                                     : "all");
    cp_buf_json_str(out, r->probe.why);
    cp_buf_puts(out, ",\"test\":");
    cp_buf_json_str(out, cp_stat_test_name(r->opts.test));
    cp_buf_puts(out, ",\"noise_floor_pct\":");
    json_num(out, r->noise_floor_pct);
    cp_buf_printf(out, ",\"noise_runs\":%zu,\"asked_threshold_pct\":%g", r->noise_runs,
                  r->asked_threshold_pct);
    cp_buf_printf(out, ",\"alpha\":%g,\"threshold_pct\":%g,\"confidence\":%g,", r->opts.alpha,
                  r->opts.threshold_pct, r->opts.boot.level);
    cp_buf_printf(out, "\"models_differ\":%s,\"metrics\":", r->models_differ ? "true" : "false");
    cp_validate_render_figures(r, out);
    cp_buf_puts(out, ",\"verdict\":");
    cp_buf_json_str(out, cp_verdict_name(r->overall));
    cp_buf_puts(out, "}\n");
}

void cp_validate_render_markdown(const struct cp_vresult *r, struct cp_buf *out)
{
    cp_buf_printf(out, "### cannprof validate: %s\n\n", cp_verdict_name(r->overall));
    cp_buf_printf(out,
                  "Before `%s` (%zu%s samples), after `%s` (%zu%s samples); %s test, "
                  "α = %g, threshold %g%%.\n\n",
                  r->before_label, r->before->n, r->probe.used ? " undisturbed" : "",
                  r->after_label, r->after->n, r->probe.used ? " undisturbed" : "",
                  cp_stat_test_name(r->opts.test), r->opts.alpha, r->opts.threshold_pct);
    cp_buf_puts(out, "| Metric | Before | After | Δ | 95% CI of Δ | p | Verdict |\n"
                     "|---|---:|---:|---:|---:|---:|---|\n");
    for (size_t i = 0; i < r->n_rows; i++) {
        const struct cp_vrow *row = &r->rows[i];
        char b[32], a[32], dl[32], ci[48], p[16];
        fmt_value(row, row->c.before, b, sizeof b);
        fmt_value(row, row->c.after, a, sizeof a);
        fmt_delta(row, dl, sizeof dl);
        fmt_ci(row, ci, sizeof ci);
        fmt_p(row, p, sizeof p);
        bool bad = row->c.verdict == CP_VERDICT_REGRESSED;
        cp_buf_printf(out, "| %s (%s) | %s | %s | %s | %s | %s | %s%s%s |\n", row->name, row->unit,
                      b, a, dl, ci, p, bad ? "**" : "", cp_verdict_name(row->c.verdict),
                      bad ? "**" : "");
    }
    cp_buf_putc(out, '\n');
    notes(r, out, "- ");
    cp_buf_printf(out, "\n**Verdict:** %s\n", overall_sentence(r->overall));
}

/* XML text: the five special characters escaped, control characters
 * dropped (XML 1.0 cannot hold them). */
static void xml_text(struct cp_buf *b, const char *s)
{
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        switch (c) {
        case '<':
            cp_buf_puts(b, "&lt;");
            break;
        case '>':
            cp_buf_puts(b, "&gt;");
            break;
        case '&':
            cp_buf_puts(b, "&amp;");
            break;
        case '"':
            cp_buf_puts(b, "&quot;");
            break;
        case '\'':
            cp_buf_puts(b, "&apos;");
            break;
        default:
            if (c >= 0x20 || c == '\n' || c == '\t')
                cp_buf_putc(b, (char)c);
        }
    }
}

static void row_line(const struct cp_vrow *row, char *out, size_t n)
{
    char b[32], a[32], dl[32], ci[48], p[16];
    fmt_value(row, row->c.before, b, sizeof b);
    fmt_value(row, row->c.after, a, sizeof a);
    fmt_delta(row, dl, sizeof dl);
    fmt_ci(row, ci, sizeof ci);
    fmt_p(row, p, sizeof p);
    snprintf(out, n, "%s: %s -> %s %s (%s), delta %s, CI %s, p %s", row->name, b, a, row->unit,
             cp_verdict_name(row->c.verdict), dl, ci, p);
}

void cp_validate_render_junit(const struct cp_vresult *r, struct cp_buf *out)
{
    size_t failures = 0;
    for (size_t i = 0; i < r->n_rows; i++)
        failures += r->rows[i].c.verdict == CP_VERDICT_REGRESSED;
    cp_buf_puts(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    cp_buf_printf(out, "<testsuites tests=\"%zu\" failures=\"%zu\">\n", r->n_rows, failures);
    cp_buf_printf(out,
                  "  <testsuite name=\"cannprof validate\" tests=\"%zu\" failures=\"%zu\" "
                  "errors=\"0\" skipped=\"0\">\n",
                  r->n_rows, failures);
    cp_buf_puts(out, "    <properties>\n      <property name=\"before\" value=\"");
    xml_text(out, r->before_label);
    cp_buf_puts(out, "\"/>\n      <property name=\"after\" value=\"");
    xml_text(out, r->after_label);
    cp_buf_printf(out,
                  "\"/>\n      <property name=\"test\" value=\"%s\"/>\n"
                  "      <property name=\"alpha\" value=\"%g\"/>\n"
                  "      <property name=\"threshold_pct\" value=\"%g\"/>\n    </properties>\n",
                  cp_stat_test_name(r->opts.test), r->opts.alpha, r->opts.threshold_pct);
    for (size_t i = 0; i < r->n_rows; i++) {
        const struct cp_vrow *row = &r->rows[i];
        char line[256];
        row_line(row, line, sizeof line);
        cp_buf_printf(out,
                      "    <testcase classname=\"cannprof.validate\" name=\"%s\" time=\"0\">\n",
                      row->name);
        if (row->c.verdict == CP_VERDICT_REGRESSED) {
            cp_buf_puts(out, "      <failure type=\"regression\" message=\"");
            xml_text(out, line);
            cp_buf_puts(out, "\"/>\n");
        }
        cp_buf_puts(out, "      <system-out>");
        xml_text(out, line);
        if (row->c.n_needed)
            cp_buf_printf(out, "; about %zu samples per side would settle it", row->c.n_needed);
        cp_buf_puts(out, "</system-out>\n    </testcase>\n");
    }
    cp_buf_puts(out, "  </testsuite>\n</testsuites>\n");
}

void cp_validate_render_text(const struct cp_vresult *r, struct cp_buf *out)
{
    for (size_t i = 0; i < r->n_rows; i++) {
        char line[256];
        row_line(&r->rows[i], line, sizeof line);
        cp_buf_printf(out, "%s\n", line);
    }
    notes(r, out, "");
}
