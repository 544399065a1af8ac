/* validate's renderings: a terminal table, JSON, Markdown, JUnit XML and a
 * plain text for alerts. All read one struct cp_vresult. */
#include "validate/validate.h"
#include "runner/probe.h"
#include "report/doc.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Precision is compared in percentage points, not in percent of itself. */
static bool is_points(const struct cp_vrow *row)
{
    return row->metric == CP_VM_PRECISION;
}

static void fmt_value(const struct cp_vrow *row, double v, char *out, size_t n)
{
    if (!isfinite(v))
        snprintf(out, n, "-");
    else if (row->metric == CP_VM_MEMORY || row->metric == CP_VM_THROUGHPUT)
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
        return "inconclusive: no verdict could be reached (exit 4)";
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
    for (int s = 0; s < 2; s++)
        if (p->busy[s])
            cp_buf_printf(out,
                          "%stiming: %zu of the %s side's %zu runs stopped at their time limit "
                          "before they had the undisturbed iterations they asked for: the "
                          "machine was busy throughout them, so timing gets no verdict; measure "
                          "again when it is quieter, %sor interleaved (`cannprof bench A --vs "
                          "B`)\n",
                          bullet, p->busy[s], side[s], s ? r->runs[1] : r->runs[0],
                          p->busy_raised[s] < p->busy[s]
                              ? "at a higher priority (`bench --priority high`, as root), "
                              : "");
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
            if (p->kept[s] < CP_VALIDATE_MIN_UNDISTURBED * (s ? r->runs[1] : r->runs[0]))
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
    else if (p->why[0])
        cp_buf_printf(out, "%stiming: %s\n", bullet, p->why);
}

/* The test the timing metrics went through, as the renderings name it. */
static const char *test_label(const struct cp_vresult *r)
{
    return r->paired         ? "paired t on run medians"
           : r->between_runs ? "welch on run medians"
                             : cp_stat_test_name(r->opts.test);
}

/* How the runs entered the comparison. */
static void runs_note(const struct cp_vresult *r, struct cp_buf *out, const char *bullet)
{
    if (r->paired)
        cp_buf_printf(out,
                      "%stiming compares the runs pair by pair: %zu alternating pairs (before 1, "
                      "after 1, before 2, ...), the paired t-test of the log ratios of their "
                      "medians, so the variance between processes is in the verdict and what "
                      "the machine added to both runs of a pair cancels\n",
                      bullet, r->runs[0]);
    else if (r->between_runs)
        cp_buf_printf(out,
                      "%stiming compares the runs: %zu before, %zu after, each run's median one "
                      "sample (Welch), so the variance between processes is in the verdict\n",
                      bullet, r->runs[0], r->runs[1]);
    else if (!r->interleaved && (r->runs[0] == 1 || r->runs[1] == 1) && !r->noise_runs)
        cp_buf_printf(out,
                      "%sone run on a side: the difference between two processes of one model is "
                      "not in this verdict; record several runs per side with `cannprof bench "
                      "--runs N --trace` to have it counted\n",
                      bullet);
}

static void notes(const struct cp_vresult *r, struct cp_buf *out, const char *bullet)
{
    probe_note(r, out, bullet);
    runs_note(r, out, bullet);
    for (size_t i = 0; i < r->n_rows; i++) {
        const struct cp_vrow *row = &r->rows[i];
        if (row->c.verdict == CP_VERDICT_INCONCLUSIVE && row->c.n_needed > 0)
            cp_buf_printf(out,
                          "%s%s: a %+.2f%% change is not significant with %zu vs %zu %s; "
                          "about %zu per side would settle it\n",
                          bullet, row->name, row->c.delta_pct, row->c.n_before, row->c.n_after,
                          row->paired         ? "pairs"
                          : row->between_runs ? "runs"
                                              : "samples",
                          row->c.n_needed);
    }
    if (r->models_differ)
        cp_buf_printf(out, "%swarning: the traces are of different models (--force)\n", bullet);
}

static void side_line(struct cp_buf *out, const char *name, const char *label,
                      const struct cp_run_metrics *m, size_t runs, size_t kept, size_t total,
                      bool und)
{
    if (runs > 1)
        cp_buf_printf(out, "%s %s (%zu runs, %zu%s of %zu samples)\n", name, label, runs, kept,
                      und ? " undisturbed" : "", total);
    else
        cp_buf_printf(out, "%s %s (run %lld, %zu%s of %zu samples)\n", name, label,
                      (long long)m->run_id, und ? kept : m->n, und ? " undisturbed" : "", total);
}

void cp_validate_render_table(const struct cp_vresult *r, struct cp_buf *out)
{
    side_line(out, "before:", r->before_label, r->before, r->runs[0], r->probe.kept[0],
              r->probe.total[0], r->probe.used);
    side_line(out, "after: ", r->after_label, r->after, r->runs[1], r->probe.kept[1],
              r->probe.total[1], r->probe.used);
    cp_buf_printf(out, "test:   %s, alpha %g, threshold %g%%, %g%% CI\n", test_label(r),
                  r->opts.alpha, r->opts.threshold_pct, 100 * r->opts.boot.level);
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

/* ---- JSON ------------------------------------------------------------------------ */

static json_t *row_json(const struct cp_vrow *row)
{
    json_t *o = json_object();
    bool ok = o && cp_json_set_str(o, "unit", row->unit) &&
              cp_json_set_num(o, "before", row->c.before * row->scale) &&
              cp_json_set_num(o, "after", row->c.after * row->scale) &&
              cp_json_set_num(o, is_points(row) ? "delta_pp" : "delta_pct", row->c.delta_pct);
    if (ok && row->c.exact)
        ok = cp_json_set(o, "ci_pct", json_null());
    else if (ok) {
        json_t *ci = json_array();
        ok = ci && cp_json_push(ci, cp_json_num(row->c.ci_lo_pct)) &&
             cp_json_push(ci, cp_json_num(row->c.ci_hi_pct));
        if (!cp_json_set(o, "ci_pct", ci))
            ok = false;
    }
    ok = ok && cp_json_set_num(o, "p", row->c.p) &&
         cp_json_set_int(o, "n_before", (int64_t)row->c.n_before) &&
         cp_json_set_int(o, "n_after", (int64_t)row->c.n_after) &&
         cp_json_set_str(o, "test", row->c.exact ? "exact" : cp_stat_test_name(row->c.test)) &&
         cp_json_set_bool(o, "between_runs", row->between_runs) &&
         cp_json_set_num(o, "mde_pct", row->c.mde_pct) &&
         cp_json_set(o, "samples_needed",
                     row->c.n_needed ? cp_json_int((int64_t)row->c.n_needed) : json_null()) &&
         cp_json_set_str(o, "verdict", cp_verdict_name(row->c.verdict));
    if (ok)
        return o;
    json_decref(o);
    return NULL;
}

json_t *cp_validate_figures_json(const struct cp_vresult *r)
{
    json_t *o = json_object();
    for (size_t i = 0; o && i < r->n_rows; i++)
        if (!cp_json_set(o, r->rows[i].name, row_json(&r->rows[i]))) {
            json_decref(o);
            return NULL;
        }
    return o;
}

static json_t *side_json(const char *label, const struct cp_run_metrics *m, size_t runs,
                         const struct cp_vprobe *p, int s)
{
    json_t *o = json_object();
    if (o && cp_json_set_str(o, "source", label) && cp_json_set_int(o, "run", m->run_id) &&
        cp_json_set_int(o, "runs", (int64_t)runs) &&
        cp_json_set_int(o, "samples", (int64_t)(p->used ? p->kept[s] : p->total[s])) &&
        cp_json_set_int(o, "iterations", (int64_t)p->total[s]) &&
        cp_json_set(o, "probe_floor_ns",
                    p->floor_ns[s] ? cp_json_int((int64_t)p->floor_ns[s]) : json_null()) &&
        cp_json_set_int(o, "undisturbed", (int64_t)p->kept[s]) &&
        cp_json_set_int(o, "runs_at_time_limit", (int64_t)p->busy[s]) &&
        cp_json_set_str(o, "model", m->model_path) &&
        cp_json_set_str(o, "model_hash", m->model_hash) &&
        cp_json_set_str(o, "config_id", m->config_id) &&
        cp_json_set_str(o, "created_at", m->created_at))
        return o;
    json_decref(o);
    return NULL;
}

json_t *cp_validate_json(const struct cp_vresult *r)
{
    json_t *o = json_object();
    bool ok =
        o &&
        cp_json_set(o, "before", side_json(r->before_label, r->before, r->runs[0], &r->probe, 0)) &&
        cp_json_set(o, "after", side_json(r->after_label, r->after, r->runs[1], &r->probe, 1)) &&
        cp_json_set_str(o, "iterations",
                        r->probe.used      ? "undisturbed"
                        : r->probe.too_few ? "too-few-undisturbed"
                                           : "all") &&
        cp_json_set_str(o, "iterations_why", r->probe.why) &&
        cp_json_set_str(o, "comparison",
                        r->paired         ? "paired-runs"
                        : r->between_runs ? "between-runs"
                                          : "iterations") &&
        cp_json_set_str(o, "test", cp_stat_test_name(r->opts.test)) &&
        cp_json_set_num(o, "noise_floor_pct", r->noise_floor_pct) &&
        cp_json_set_int(o, "noise_runs", (int64_t)r->noise_runs) &&
        cp_json_set_num(o, "asked_threshold_pct", r->asked_threshold_pct) &&
        cp_json_set_num(o, "alpha", r->opts.alpha) &&
        cp_json_set_num(o, "threshold_pct", r->opts.threshold_pct) &&
        cp_json_set_num(o, "confidence", r->opts.boot.level) &&
        cp_json_set_bool(o, "models_differ", r->models_differ) &&
        cp_json_set(o, "metrics", cp_validate_figures_json(r)) &&
        cp_json_set_str(o, "verdict", cp_verdict_name(r->overall)) &&
        cp_json_set_int(o, "exit_code", cp_validate_exit_code(r));
    if (ok)
        return o;
    json_decref(o);
    return NULL;
}

/* ---- Markdown, JUnit, text ------------------------------------------------------ */

void cp_validate_render_markdown(const struct cp_vresult *r, struct cp_buf *out)
{
    cp_buf_printf(out, "### cannprof validate: %s\n\n", cp_verdict_name(r->overall));
    char sides[2][64];
    for (int s = 0; s < 2; s++) {
        size_t runs = r->runs[s], k = r->probe.used ? r->probe.kept[s] : r->probe.total[s];
        if (runs > 1)
            snprintf(sides[s], sizeof sides[s], "%zu runs, %zu%s samples", runs, k,
                     r->probe.used ? " undisturbed" : "");
        else
            snprintf(sides[s], sizeof sides[s], "%zu%s samples", k,
                     r->probe.used ? " undisturbed" : "");
    }
    cp_buf_printf(out, "Before `%s` (%s), after `%s` (%s); %s test, α = %g, threshold %g%%.\n\n",
                  r->before_label, sides[0], r->after_label, sides[1], test_label(r), r->opts.alpha,
                  r->opts.threshold_pct);
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

struct cp_doc *cp_validate_doc(const struct cp_vresult *r)
{
    char title[160];
    snprintf(title, sizeof title, "cannprof validate: %s", cp_verdict_name(r->overall));
    struct cp_doc *d = cp_doc_new(title);
    if (!d)
        return NULL;
    char line[2600];
    snprintf(line, sizeof line,
             "Before: %.1100s. After: %.1100s. %s test, alpha %g, threshold %g%%.", r->before_label,
             r->after_label, test_label(r), r->opts.alpha, r->opts.threshold_pct);
    cp_doc_text(d, line);
    cp_doc_text(d, overall_sentence(r->overall));
    cp_doc_heading(d, 1, "Metrics");
    static const char *const head[] = {"metric",           "before", "after",  "change",
                                       "95% CI of change", "p",      "verdict"};
    char cells[(CP_VM_COUNT + 1) * 7][64];
    const char *ptr[(CP_VM_COUNT + 1) * 7];
    for (size_t c = 0; c < 7; c++)
        ptr[c] = head[c];
    for (size_t i = 0; i < r->n_rows; i++) {
        const struct cp_vrow *row = &r->rows[i];
        char(*x)[64] = &cells[(i + 1) * 7];
        snprintf(x[0], 64, "%.30s (%.20s)", row->name, row->unit);
        fmt_value(row, row->c.before, x[1], 64);
        fmt_value(row, row->c.after, x[2], 64);
        fmt_delta(row, x[3], 64);
        fmt_ci(row, x[4], 64);
        fmt_p(row, x[5], 64);
        snprintf(x[6], 64, "%s", cp_verdict_name(row->c.verdict));
        for (size_t c = 0; c < 7; c++)
            ptr[(i + 1) * 7 + c] = x[c];
    }
    cp_doc_table(d, 7, r->n_rows + 1, ptr);
    /* the two sides' latencies, as distributions */
    const struct cp_run_metrics *b = r->before, *a = r->after;
    if (b && a && b->n && a->n) {
        double *xb = cp_calloc(b->n, sizeof *xb), *xa = cp_calloc(a->n, sizeof *xa);
        if (xb && xa) {
            for (size_t i = 0; i < b->n; i++)
                xb[i] = (double)b->latency_ns[i] / 1e6;
            for (size_t i = 0; i < a->n; i++)
                xa[i] = (double)a->latency_ns[i] / 1e6;
            const struct cp_vrow *lat = NULL;
            for (size_t i = 0; i < r->n_rows; i++)
                if (r->rows[i].metric == CP_VM_LATENCY)
                    lat = &r->rows[i];
            char note[200] = "";
            if (lat && isfinite(lat->c.delta_pct))
                snprintf(note, sizeof note, "latency change %+.2f%%, 95%% CI [%+.2f%%, %+.2f%%]",
                         lat->c.delta_pct, lat->c.ci_lo_pct, lat->c.ci_hi_pct);
            struct cp_chart c = {.kind = CP_CHART_CDF,
                                 .title = "Latency, cumulative (each side's first run)",
                                 .unit = "ms",
                                 .samples = {xb, xa},
                                 .n_samples = {b->n, a->n},
                                 .sample_names = {"before", "after"},
                                 .note = note[0] ? note : NULL};
            cp_doc_chart(d, &c);
        }
        free(xb);
        free(xa);
    }
    struct cp_buf nb;
    cp_buf_init(&nb);
    notes(r, &nb, "- ");
    if (nb.data && nb.len) {
        cp_doc_heading(d, 1, "Notes");
        cp_doc_pre(d, nb.data);
    }
    cp_buf_release(&nb);
    return d;
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
    size_t failures = 0, skipped = 0;
    for (size_t i = 0; i < r->n_rows; i++) {
        failures += r->rows[i].c.verdict == CP_VERDICT_REGRESSED;
        skipped += r->rows[i].c.verdict == CP_VERDICT_INCONCLUSIVE;
    }
    cp_buf_puts(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    cp_buf_printf(out, "<testsuites tests=\"%zu\" failures=\"%zu\">\n", r->n_rows, failures);
    cp_buf_printf(out,
                  "  <testsuite name=\"cannprof validate\" tests=\"%zu\" failures=\"%zu\" "
                  "errors=\"0\" skipped=\"%zu\">\n",
                  r->n_rows, failures, skipped);
    cp_buf_puts(out, "    <properties>\n      <property name=\"before\" value=\"");
    cp_buf_markup(out, r->before_label);
    cp_buf_puts(out, "\"/>\n      <property name=\"after\" value=\"");
    cp_buf_markup(out, r->after_label);
    cp_buf_printf(out,
                  "\"/>\n      <property name=\"test\" value=\"%s\"/>\n"
                  "      <property name=\"alpha\" value=\"%g\"/>\n"
                  "      <property name=\"threshold_pct\" value=\"%g\"/>\n"
                  "      <property name=\"verdict\" value=\"%s\"/>\n"
                  "      <property name=\"exit_code\" value=\"%d\"/>\n    </properties>\n",
                  cp_stat_test_name(r->opts.test), r->opts.alpha, r->opts.threshold_pct,
                  cp_verdict_name(r->overall), cp_validate_exit_code(r));
    for (size_t i = 0; i < r->n_rows; i++) {
        const struct cp_vrow *row = &r->rows[i];
        char line[256];
        row_line(row, line, sizeof line);
        cp_buf_printf(out,
                      "    <testcase classname=\"cannprof.validate\" name=\"%s\" time=\"0\">\n",
                      row->name);
        if (row->c.verdict == CP_VERDICT_REGRESSED) {
            cp_buf_puts(out, "      <failure type=\"regression\" message=\"");
            cp_buf_markup(out, line);
            cp_buf_puts(out, "\"/>\n");
        } else if (row->c.verdict == CP_VERDICT_INCONCLUSIVE) {
            /* no verdict: neither a pass nor a failure */
            cp_buf_puts(out, "      <skipped message=\"inconclusive: ");
            cp_buf_markup(out, line);
            cp_buf_puts(out, "\"/>\n");
        }
        cp_buf_puts(out, "      <system-out>");
        cp_buf_markup(out, line);
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

enum cp_status cp_validate_write_junit(const struct cp_vresult *r, const char *path,
                                       struct cp_diag *d)
{
    struct cp_buf x;
    cp_buf_init(&x);
    cp_validate_render_junit(r, &x);
    enum cp_status st = cp_buf_write_file(&x, path, d);
    cp_buf_release(&x);
    return st;
}

enum cp_status cp_validate_write_doc(const struct cp_vresult *r, const char *path,
                                     struct cp_diag *d)
{
    struct cp_doc *doc = cp_validate_doc(r);
    enum cp_status st = doc ? cp_doc_write(doc, path, d)
                            : cp_diag_set(d, CP_ERR_NOMEM, "out of memory making the report");
    cp_doc_free(doc);
    return st;
}
