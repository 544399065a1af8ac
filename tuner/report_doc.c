/* A tuning session's report as HTML and PDF (tuner/tuner.h): report.md read
 * back as a document (report/doc.h), with charts under its headings: the
 * trajectory under "Steps", the Pareto front under "Pareto", and the final
 * check's latency and the best's op types under "Result". */
#include "report/doc.h"
#include "trace/query.h"
#include "tuner/tuner_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct charts {
    const struct cp_tune_result *r;
    /* the trajectory: the best so far at each step, and each candidate */
    struct cp_chart_trajectory traj;
    /* the Pareto plane: every measured point, the front */
    double *px, *py, *fx, *fy;
    const char **plab, **flab;
    size_t np, nf;
    /* the final interleaved measurement (final.db): both sides' latency,
     * and the best's kernel time by op type */
    double *lat[2];
    size_t nlat[2];
    char change[200];
    char *ops[12];
    double op_ms[12];
    size_t nops;
};

/* The final check's store: run 1 the baseline, run 2 the best. Nothing when
 * there was none (no change accepted) or it cannot be read: the charts are
 * then left out, the text says what was measured. */
static void final_measurement(struct charts *c, const char *out_dir)
{
    char path[1200];
    snprintf(path, sizeof path, "%.1100s/final.db", out_dir);
    struct cp_trace_store *s = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    if (!cp_path_exists(path) || cp_trace_store_open_ro(path, &s, &d) != CP_OK)
        return;
    for (int side = 0; side < 2; side++) {
        struct cp_trace_sample *v = NULL;
        size_t n = 0;
        if (cp_trace_query_samples(s, side + 1, &v, &n, &d) != CP_OK || n == 0) {
            free(v);
            continue;
        }
        c->lat[side] = cp_calloc(n, sizeof(double));
        for (size_t i = 0; c->lat[side] && i < n; i++)
            c->lat[side][i] = (double)v[i].latency_ns / 1e6;
        c->nlat[side] = c->lat[side] ? n : 0;
        free(v);
    }
    struct cp_trace_kernel_desc *k = NULL;
    struct cp_trace_kernel_time *kt = NULL;
    size_t nk = 0, nt = 0;
    struct cp_trace_run run;
    memset(&run, 0, sizeof run);
    if (cp_trace_query_kernels(s, 2, &k, &nk, &d) == CP_OK &&
        cp_trace_query_kernel_times(s, 2, NULL, 0, &kt, &nt, &d) == CP_OK &&
        cp_trace_query_run(s, 2, &run, &d) == CP_OK) {
        /* summed by op type, per iteration */
        double iters = c->nlat[1] ? (double)c->nlat[1] : 1;
        char *names[64];
        double ms[64];
        size_t m = 0;
        for (size_t i = 0; i < nt; i++) {
            const char *op = "(op not recorded)";
            for (size_t j = 0; j < nk; j++)
                if (k[j].idx == kt[i].kernel_idx && k[j].op_type[0])
                    op = k[j].op_type;
            size_t at = 0;
            while (at < m && strcmp(names[at], op) != 0)
                at++;
            if (at == m && m < 64) {
                names[m] = (char *)op;
                ms[m++] = 0;
            }
            if (at < m)
                ms[at] += kt[i].total_ns / 1e6 / iters;
        }
        /* the largest first */
        for (size_t t = 0; t < 12 && t < m; t++) {
            size_t b = t;
            for (size_t j = t + 1; j < m; j++)
                if (ms[j] > ms[b] || (ms[j] == ms[b] && strcmp(names[j], names[b]) < 0))
                    b = j;
            char *tn = names[t];
            double tm = ms[t];
            names[t] = names[b];
            ms[t] = ms[b];
            names[b] = tn;
            ms[b] = tm;
            c->ops[c->nops] = cp_strdup(names[t]);
            c->op_ms[c->nops] = ms[t];
            c->nops += c->ops[c->nops] != NULL;
        }
    }
    cp_trace_run_release(&run);
    cp_trace_kernels_free(k, nk);
    free(kt);
    cp_trace_store_close(s);
}

static void charts_release(struct charts *c)
{
    cp_chart_trajectory_release(&c->traj);
    free(c->px);
    free(c->py);
    free(c->fx);
    free(c->fy);
    free(c->plab);
    free(c->flab);
    free(c->lat[0]);
    free(c->lat[1]);
    for (size_t i = 0; i < c->nops; i++)
        free(c->ops[i]);
}

static bool charts_init(struct charts *c, const struct cp_tune_result *r, const char *out_dir)
{
    memset(c, 0, sizeof *c);
    c->r = r;
    final_measurement(c, out_dir);
    if (isfinite(r->final_change))
        snprintf(c->change, sizeof c->change,
                 "measured interleaved: the best's median %.3f ms against the baseline's %.3f "
                 "ms, %+.1f%% [%+.1f%%, %+.1f%%] latency, p = %.3g",
                 r->final_best_ns / 1e6, r->final_baseline_ns / 1e6, -100 * r->final_change,
                 -100 * r->final_ci_hi, -100 * r->final_ci_lo, r->final_p);
    size_t n = r->n_steps ? r->n_steps : 1;
    if (!cp_chart_trajectory_init(&c->traj, n))
        return false;
    double **v[] = {&c->px, &c->py, &c->fx, &c->fy};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (!(*v[i] = cp_calloc(n, sizeof **v[i])))
            return false;
    c->plab = cp_calloc(n, sizeof *c->plab);
    c->flab = cp_calloc(n, sizeof *c->flab);
    if (!c->plab || !c->flab)
        return false;
    double best = r->baseline_ns;
    for (size_t i = 0; i < r->n_steps; i++) {
        const struct cp_tune_step *s = &r->steps[i];
        if (s->status == CP_STEP_ACCEPTED && isfinite(s->after_ns))
            best = s->after_ns;
        cp_chart_trajectory_best(&c->traj, s->step, best / 1e6);
        if (!isfinite(s->after_ns) || s->status == CP_STEP_BASELINE)
            continue;
        if (s->status == CP_STEP_ACCEPTED || s->status == CP_STEP_REJECTED)
            cp_chart_trajectory_point(&c->traj, s->step, s->after_ns / 1e6,
                                      s->status == CP_STEP_ACCEPTED);
        if (isfinite(s->precision_loss) && s->status != CP_STEP_FAILED) {
            c->px[c->np] = s->precision_loss;
            c->py[c->np] = s->after_ns / 1e6;
            c->plab[c->np++] = NULL;
        }
    }
    size_t nf = 0, *front = cp_tune_pareto_steps(r, &nf);
    if (!front)
        return false;
    /* the front in order of precision_loss, labelled by its changes */
    for (size_t i = 0; i < nf; i++) {
        const struct cp_tune_step *s = &r->steps[front[i]];
        size_t k = c->nf++;
        while (k > 0 && c->fx[k - 1] > s->precision_loss) {
            c->fx[k] = c->fx[k - 1];
            c->fy[k] = c->fy[k - 1];
            c->flab[k] = c->flab[k - 1];
            k--;
        }
        c->fx[k] = s->precision_loss;
        c->fy[k] = s->after_ns / 1e6;
        c->flab[k] = s->delta[0] ? s->delta : "baseline";
    }
    free(front);
    return true;
}

static void tune_section(void *ctx, struct cp_doc *doc, const char *heading)
{
    const struct charts *c = ctx;
    if (strncmp(heading, "Result", 6) == 0 && c->nlat[0] && c->nlat[1]) {
        struct cp_chart ch = {.kind = CP_CHART_CDF,
                              .title = "Latency before and after: the baseline against the best",
                              .unit = "ms",
                              .samples = {c->lat[0], c->lat[1]},
                              .n_samples = {c->nlat[0], c->nlat[1]},
                              .sample_names = {"baseline", "best"},
                              .note = c->change[0] ? c->change : NULL};
        cp_doc_chart(doc, &ch);
    }
    if (strncmp(heading, "Result", 6) == 0 && c->nops) {
        struct cp_chart ch = {.kind = CP_CHART_BARS,
                              .title = "Where the best's time goes: kernel time by op type",
                              .unit = "ms",
                              .labels = (const char *const *)c->ops,
                              .n = c->nops,
                              .values = c->op_ms,
                              .note = "per iteration of the final measurement"};
        cp_doc_chart(doc, &ch);
    }
    if (strncmp(heading, "Steps", 5) == 0 && c->traj.n > 1) {
        struct cp_chart ch =
            cp_chart_trajectory(&c->traj, "Tuning trajectory: the best's median latency by step");
        cp_doc_chart(doc, &ch);
    }
    if (strncmp(heading, "Pareto", 6) == 0 && c->np > 0) {
        struct cp_chart ch = {.kind = CP_CHART_XY,
                              .title = "Latency against precision_loss",
                              .x_title = "precision_loss (%)",
                              .y_title = "median latency (ms)",
                              .n_series = 2,
                              .note = "the front: no other point is as fast with as little "
                                      "loss and memory"};
        ch.series[0] = (struct cp_chart_series){"measured", c->px, c->py, c->np, false, true, NULL};
        ch.series[1] =
            (struct cp_chart_series){"Pareto front", c->fx, c->fy, c->nf, true, true, c->flab};
        cp_doc_chart(doc, &ch);
    }
}

/* report.html and report.pdf beside report.md: the same text, with the
 * trajectory and the Pareto front drawn. */
enum cp_status cp_tune_write_report_doc(const struct cp_tune_opts *o, struct cp_tune_result *r,
                                        const struct cp_buf *md, struct cp_diag *d)
{
    struct charts c;
    enum cp_status st = CP_OK;
    struct cp_doc *doc = NULL;
    if (!charts_init(&c, r, o->out_dir) ||
        !(doc = cp_doc_from_markdown(md->data ? md->data : "", NULL, tune_section, &c)))
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory writing the report");
    snprintf(r->report_html, sizeof r->report_html, "%s/report.html", o->out_dir);
    snprintf(r->report_pdf, sizeof r->report_pdf, "%s/report.pdf", o->out_dir);
    if (st == CP_OK)
        st = cp_doc_write(doc, r->report_html, d);
    if (st == CP_OK)
        st = cp_doc_write(doc, r->report_pdf, d);
    cp_doc_free(doc);
    charts_release(&c);
    return st;
}
