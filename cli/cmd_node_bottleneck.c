/* cannprof node-bottleneck: which node of a pipeline run limits it, why,
 * what else is wrong, and the path of the median and the p99 request
 * (pipeline/pipeline.h, docs/pipelines.md). */
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/output.h"
#include "view/view.h"
#include "core/json.h"
#include "pipeline/pipeline.h"
#include "rules/rules.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OPT_OUTPUT = 1, OPT_WHATIF, OPT_CHECK, OPT_FIX };

static const struct cp_opt own[] = {
    {"check", 0, CP_OPT_FLAG, OPT_CHECK, NULL,
     "with --what-if: run the changed flow as many requests and report the prediction's error"},
    {"fix", 0, CP_OPT_VALUE, OPT_FIX, "OUT.toml",
     "write the flow with the changes (--what-if's, else the problems' fixes) made; relative "
     "paths in it are its folder's, so write it beside the flow"},
    {"output", 'o', CP_OPT_VALUE, OPT_OUTPUT, "REPORT.md|.html|.pdf|.json",
     "write the report to a file (Markdown, self-contained HTML, PDF or JSON, by its "
     "extension) instead of stdout"},
    {"what-if", 0, CP_OPT_VALUE, OPT_WHATIF, "CHANGES",
     "replay the run with changes, \"node.key=value,...\" (key: speed, a factor; workers; "
     "batch_size; queue_size), and predict throughput and latency"},
};

static const struct cp_opt_use shared[] = {
    {CP_SO_HELP, NULL},
    {CP_SO_JSON, "print the analysis as JSON: nodes, the limiting node, problems, paths"},
    {CP_SO_RUN, "the pipeline run to analyse (default: the last)"},
};

static const struct cp_command_opts OPTS = {
    .cmd = "node-bottleneck",
    .own = own,
    .n_own = sizeof own / sizeof own[0],
    .shared = shared,
    .n_shared = sizeof shared / sizeof shared[0],
    .usage =
        "usage: cannprof node-bottleneck TRACE.db [--run N] [--json] [-o REPORT.md|.html|.pdf]\n"
        "       cannprof node-bottleneck TRACE.db --what-if CHANGES [--check] [--fix OUT.toml]\n\n"
        "Analyse a pipeline run (record one with `cannprof pipeline run FLOW.toml --trace\n"
        "TRACE.db`): per node, how busy its workers were, how long they starved and were\n"
        "blocked, and where their busy time went (on-CPU, waiting for a CPU, off-CPU);\n"
        "the node that limits the flow's throughput, with its evidence and a confidence\n"
        "(the share of the run's windows in which it was the busiest); named problems\n"
        "(I/O-bound nodes, back-pressure, queues too small, batches left unfilled, CPU\n"
        "oversubscription) with the key that fixes each; and the path of the median and\n"
        "the p99 request through the nodes, with queue waits and service times.\n"
        "--what-if replays the run with changes (a node k times faster, more workers,\n"
        "another batch or queue size) and predicts throughput and latency; --check\n"
        "runs the changed flow and reports the prediction's error.\n",
    .exit_codes = "0 analysed, 2 bad usage or input (not a pipeline run), 3 environment failure "
                  "(the report cannot be written)",
};

static void figures_line(const char *what, const struct cp_whatif_figures *f)
{
    printf("  %-22s %9.2f req/s  p50 %9.2f ms  p99 %9.2f ms\n", what, f->throughput, f->p50_ms,
           f->p99_ms);
}

static double err(double predicted, double measured)
{
    return measured > 0 ? 100.0 * (predicted - measured) / measured : 0;
}

/* --what-if [--check] [--fix] */
static int what_if(const struct cp_args *a, const char *trace)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_flow_whatif w;
    if (cp_pipeline_whatif(trace, cp_args_int(a, CP_SO_RUN, -1), cp_args_get(a, OPT_WHATIF), &w,
                           &d) != CP_OK)
        return cp_cli_fail(OPTS.cmd, &d);
    const char *fix = cp_args_get(a, OPT_FIX);
    if (fix && cp_flow_patch(w.flow, w.changes, w.n_changes, fix, &d) != CP_OK)
        return cp_cli_fail(OPTS.cmd, &d);
    struct cp_whatif_figures checked = {0};
    bool check = cp_args_has(a, OPT_CHECK);
    if (check) {
        /* the changed flow beside the original, so its paths resolve */
        char patched[1200];
        snprintf(patched, sizeof patched, "%s.whatif-check.toml", w.flow);
        struct cp_flow *f = NULL;
        struct cp_flow_run_opts o = {.requests = w.requests};
        struct cp_flow_run_result r;
        memset(&r, 0, sizeof r);
        enum cp_status st = cp_flow_patch(w.flow, w.changes, w.n_changes, patched, &d);
        if (st == CP_OK)
            st = cp_flow_load(patched, &f, &d);
        if (st == CP_OK)
            st = cp_flow_run(f, &o, &r, &d);
        remove(patched);
        cp_flow_free(f);
        if (st != CP_OK) {
            cp_flow_run_result_release(&r);
            return cp_cli_fail(OPTS.cmd, &d);
        }
        checked = (struct cp_whatif_figures){r.throughput, r.latency_p50_ms, r.latency_p99_ms,
                                             r.latency_mean_ms};
        cp_flow_run_result_release(&r);
    }
    if (cp_args_has(a, CP_SO_JSON)) {
        json_t *j = json_object(), *ch = json_array();
        bool ok = j && ch && cp_json_set_str(j, "trace", trace) &&
                  cp_json_set_int(j, "run", w.run_id) && cp_json_set_str(j, "flow", w.flow) &&
                  cp_json_set_int(j, "requests", (int64_t)w.requests);
        for (size_t i = 0; ok && i < w.n_changes; i++) {
            json_t *o = json_object();
            ok = o && cp_json_set_str(o, "node", w.changes[i].node) &&
                 cp_json_set_str(o, "key", w.changes[i].key) &&
                 cp_json_set_str(o, "value", w.changes[i].value) && cp_json_push(ch, o);
            if (!ok)
                json_decref(o);
        }
        const struct {
            const char *k;
            const struct cp_whatif_figures *f;
        } figs[] = {{"measured", &w.measured},
                    {"replayed", &w.replayed},
                    {"simulated", &w.simulated},
                    {"predicted", &w.predicted},
                    {"checked", &checked}};
        for (size_t i = 0; ok && i < (check ? 5u : 4u); i++) {
            json_t *o = json_object();
            ok = o && cp_json_set_num(o, "throughput", figs[i].f->throughput) &&
                 cp_json_set_num(o, "latency_p50_ms", figs[i].f->p50_ms) &&
                 cp_json_set_num(o, "latency_p99_ms", figs[i].f->p99_ms) &&
                 cp_json_set_num(o, "latency_mean_ms", figs[i].f->mean_ms) &&
                 cp_json_set(j, figs[i].k, o);
            if (!ok)
                json_decref(o);
        }
        if (ok && check)
            ok = cp_json_set_num(j, "throughput_error_pct",
                                 err(w.predicted.throughput, checked.throughput)) &&
                 cp_json_set_num(j, "p50_error_pct", err(w.predicted.p50_ms, checked.p50_ms)) &&
                 cp_json_set_num(j, "p99_error_pct", err(w.predicted.p99_ms, checked.p99_ms));
        if (ok && cp_json_set(j, "changes", ch))
            ch = NULL;
        json_decref(ch);
        return cp_out_json_take(ok ? j : (json_decref(j), NULL), OPTS.cmd);
    }
    printf("what-if: %s (run %lld, %s), %llu requests:", trace, (long long)w.run_id, w.flow,
           (unsigned long long)w.requests);
    for (size_t i = 0; i < w.n_changes; i++)
        printf("%s %s.%s=%s", i ? "," : "", w.changes[i].node, w.changes[i].key,
               w.changes[i].value);
    printf("\n");
    figures_line("measured", &w.measured);
    figures_line("replayed as it was", &w.replayed);
    figures_line("replayed with changes", &w.simulated);
    figures_line("predicted", &w.predicted);
    printf("  (the replay of the flow as it was is %+.0f%% off the measured throughput: the "
           "prediction scales the measurement by the two replays' ratio)\n",
           err(w.replayed.throughput, w.measured.throughput));
    if (check) {
        figures_line("checked (ran it)", &checked);
        printf("  prediction error: throughput %+.1f%%, p50 %+.1f%%, p99 %+.1f%%\n",
               err(w.predicted.throughput, checked.throughput),
               err(w.predicted.p50_ms, checked.p50_ms), err(w.predicted.p99_ms, checked.p99_ms));
    }
    if (fix)
        printf("what-if: wrote %s\n", fix);
    return 0;
}

/* ---- the limiting node's model --------------------------------------------------------- */

/* The rules on the limiting inference node's own model run (the kernels
 * under its calls, docs/pipelines.md): what its conversion leaves on the
 * table. Findings whose change is only how the model is run (threads,
 * batch) are left out: those are the flow's knobs, node-bottleneck's and
 * the flow tuner's. */
struct model_view {
    const char *node;
    int64_t run;
    bool have; /* analysed */
    char err[600];
    struct cp_diagnosis dg;
};

static bool conversion_change(const struct cp_finding *f)
{
    return (f->change.convert && f->change.convert[0]) ||
           (f->change.fusion_switches && f->change.fusion_switches[0]);
}

static void model_view_make(const char *trace, const struct cp_bottleneck *b, struct model_view *v)
{
    memset(v, 0, sizeof *v);
    v->run = -1;
    if (b->limiting < 0 || b->nodes[b->limiting].model_run < 0)
        return;
    v->node = b->nodes[b->limiting].name;
    v->run = b->nodes[b->limiting].model_run;
    struct cp_diagnose_opts o = {.run_id = v->run, .analysis = {.target = CP_TARGET_LATENCY}};
    struct cp_diag d;
    cp_diag_init(&d);
    if (cp_rules_diagnose(trace, &o, &v->dg, &d) == CP_OK)
        v->have = true;
    else
        snprintf(v->err, sizeof v->err, "%.590s", d.msg);
}

static void model_view_text(const struct model_view *v, const char *trace, bool md,
                            struct cp_buf *o)
{
    if (v->run < 0)
        return;
    cp_buf_printf(
        o, "\n%sthe limiting node's model: %s (run %lld: cannprof analyze %s --run %lld)\n\n",
        md ? "## " : "", v->node, (long long)v->run, trace, (long long)v->run);
    if (!v->have) {
        cp_buf_printf(o, "not analysed: %s\n", v->err);
        return;
    }
    size_t shown = 0;
    for (size_t i = 0; i < v->dg.analysis.n && shown < 3; i++) {
        const struct cp_finding *f = &v->dg.analysis.findings[i];
        if (!conversion_change(f))
            continue;
        shown++;
        cp_buf_printf(o,
                      "%zu. %s (%s): %s\n   %.0f%% of its kernel time; predicted %.1f%% faster a "
                      "call [%.1f, %.1f]\n",
                      shown, f->rule, f->root_cause, f->title, 100 * f->time_share, 100 * f->gain,
                      100 * f->gain_lo, 100 * f->gain_hi);
        for (size_t k = 0; f->change.convert && f->change.convert[k]; k++)
            cp_buf_printf(o, "   convert %s\n", f->change.convert[k]);
        for (size_t k = 0; f->change.fusion_switches && f->change.fusion_switches[k]; k++)
            cp_buf_printf(o, "   fusion switch %s\n", f->change.fusion_switches[k]);
    }
    if (shown == 0)
        cp_buf_puts(o, "no rule finds its conversion at fault\n");
}

static json_t *model_view_json(const struct model_view *v)
{
    if (v->run < 0)
        return NULL;
    json_t *o = json_object(), *arr = json_array();
    cp_json_set_str(o, "node", v->node);
    cp_json_set_int(o, "run", v->run);
    if (!v->have)
        cp_json_set_str(o, "error", v->err);
    for (size_t i = 0; v->have && i < v->dg.analysis.n; i++) {
        const struct cp_finding *f = &v->dg.analysis.findings[i];
        if (!conversion_change(f))
            continue;
        json_t *x = json_object(), *conv = json_array(), *sw = json_array();
        cp_json_set_str(x, "rule", f->rule);
        cp_json_set_str(x, "root_cause", f->root_cause);
        cp_json_set_str(x, "title", f->title);
        cp_json_set_num(x, "time_share", f->time_share);
        cp_json_set_num(x, "gain", f->gain);
        cp_json_set_num(x, "gain_lo", f->gain_lo);
        cp_json_set_num(x, "gain_hi", f->gain_hi);
        for (size_t k = 0; f->change.convert && f->change.convert[k]; k++)
            json_array_append_new(conv, json_string(f->change.convert[k]));
        for (size_t k = 0; f->change.fusion_switches && f->change.fusion_switches[k]; k++)
            json_array_append_new(sw, json_string(f->change.fusion_switches[k]));
        json_object_set_new(x, "convert", conv);
        json_object_set_new(x, "fusion_switches", sw);
        json_array_append_new(arr, x);
    }
    json_object_set_new(o, "findings", arr);
    return o;
}

static json_t *report_json(const struct cp_bottleneck *b, const char *trace,
                           const struct model_view *v)
{
    json_t *j = cp_bottleneck_json(b, trace);
    json_t *m = model_view_json(v);
    if (j && m)
        json_object_set_new(j, "limiting_model", m);
    else
        json_decref(m);
    return j;
}

/* The flow as it ran, queue depth and wait on its edges, at the end of
 * the report (view/view.h); a flow that cannot be drawn says why there. */
static void add_topology(struct cp_doc *doc, const char *trace, int64_t run)
{
    struct cp_topology_opts to = {.run_id = run, .still = true, .doc = doc};
    struct cp_buf unused;
    cp_buf_init(&unused);
    struct cp_diag td;
    cp_diag_init(&td);
    cp_doc_heading(doc, 1, "Topology");
    if (cp_view_topology(trace, &to, &unused, NULL, &td) != CP_OK) {
        char line[600];
        snprintf(line, sizeof line, "The flow could not be drawn: %.500s", td.msg);
        cp_doc_text(doc, line);
    }
    cp_buf_release(&unused);
}

int cp_cmd_node_bottleneck(int argc, char **argv)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_args a;
    if (cp_args_parse_cmd(&OPTS, argc, argv, &a, &d) != CP_OK) {
        cp_cli_error(OPTS.cmd, d.msg);
        return cp_status_exit_code(d.status);
    }
    if (cp_args_has(&a, CP_SO_HELP)) {
        cp_cmd_help(stdout, &OPTS);
        return 0;
    }
    if (a.n_positional != 1) {
        cp_cli_error(OPTS.cmd, "give the trace (TRACE.db) of a pipeline run");
        return 2;
    }
    const char *trace = a.positional[0];
    if (cp_args_get(&a, OPT_WHATIF))
        return what_if(&a, trace);
    if (cp_args_has(&a, OPT_CHECK)) {
        cp_cli_error(OPTS.cmd, "--check checks a --what-if prediction: give --what-if CHANGES");
        return 2;
    }
    struct cp_bottleneck b;
    if (cp_node_bottleneck(trace, cp_args_int(&a, CP_SO_RUN, -1), &b, &d) != CP_OK)
        return cp_cli_fail(OPTS.cmd, &d);
    int rc = 0;
    struct model_view mv;
    model_view_make(trace, &b, &mv);
    const char *out = cp_args_get(&a, OPT_OUTPUT);
    bool json_file = out && cp_path_has_suffix(out, ".json");
    if (cp_args_has(&a, CP_SO_JSON) && !out) {
        rc = cp_out_json_take(report_json(&b, trace, &mv), OPTS.cmd);
    } else if (out && (cp_path_has_suffix(out, ".html") || cp_path_has_suffix(out, ".htm") ||
                       cp_path_has_suffix(out, ".pdf"))) {
        struct cp_doc *doc = cp_bottleneck_doc(&b, trace);
        if (!doc) {
            cp_diag_set(&d, CP_ERR_NOMEM, "out of memory");
        } else {
            if (mv.run >= 0) {
                struct cp_buf t;
                cp_buf_init(&t);
                model_view_text(&mv, trace, true, &t);
                /* its heading, then its lines as paragraphs */
                char *text = cp_buf_steal(&t), *line = text ? strstr(text, "## ") : NULL;
                char *save = NULL;
                for (char *l = line ? strtok_r(line, "\n", &save) : NULL; l;
                     l = strtok_r(NULL, "\n", &save)) {
                    if (strncmp(l, "## ", 3) == 0)
                        cp_doc_heading(doc, 1, l + 3);
                    else
                        cp_doc_text(doc, l);
                }
                free(text);
            }
            add_topology(doc, trace, cp_args_int(&a, CP_SO_RUN, -1));
        }
        if (!doc || cp_doc_write(doc, out, &d) != CP_OK)
            rc = cp_cli_fail(OPTS.cmd, &d);
        else
            printf("node-bottleneck: wrote %s\n", out);
        cp_doc_free(doc);
    } else if (out) {
        char *text = NULL;
        if (json_file) {
            json_t *j = report_json(&b, trace, &mv);
            text = j ? json_dumps(j, JSON_INDENT(2)) : NULL;
            json_decref(j);
        } else {
            struct cp_buf o;
            cp_buf_init(&o);
            cp_bottleneck_text(&b, trace, true, &o);
            model_view_text(&mv, trace, true, &o);
            text = cp_buf_steal(&o);
        }
        if (!text)
            cp_diag_set(&d, CP_ERR_NOMEM, "out of memory");
        if (!text || cp_file_write_atomic(out, text, strlen(text), &d) != CP_OK)
            rc = cp_cli_fail(OPTS.cmd, &d);
        else
            printf("node-bottleneck: wrote %s\n", out);
        free(text);
    } else {
        struct cp_buf o;
        cp_buf_init(&o);
        cp_bottleneck_text(&b, trace, false, &o);
        model_view_text(&mv, trace, false, &o);
        rc = cp_out_buf(&o, OPTS.cmd);
        cp_buf_release(&o);
    }
    const char *fix = cp_args_get(&a, OPT_FIX);
    if (rc == 0 && fix) {
        /* the problems' fixes, as a flow */
        struct cp_whatif_change ch[CP_BOTTLENECK_MAX_PROBLEMS];
        size_t n = 0;
        for (size_t i = 0; i < b.n_problems; i++) {
            const struct cp_bottleneck_problem *p = &b.problems[i];
            if (!p->fix_key[0] || p->node < 0)
                continue;
            snprintf(ch[n].node, sizeof ch[n].node, "%s", b.nodes[p->node].name);
            snprintf(ch[n].key, sizeof ch[n].key, "%s", p->fix_key);
            snprintf(ch[n].value, sizeof ch[n].value, "%ld", p->fix_value);
            n++;
        }
        if (n == 0) {
            printf("node-bottleneck: no problem with a fix: %s not written\n", fix);
        } else if (cp_flow_patch(b.flow, ch, n, fix, &d) != CP_OK) {
            rc = cp_cli_fail(OPTS.cmd, &d);
        } else {
            printf("node-bottleneck: wrote %s (%zu change%s)\n", fix, n, n == 1 ? "" : "s");
        }
    }
    cp_bottleneck_release(&b);
    if (mv.have)
        cp_diagnosis_release(&mv.dg);
    return rc;
}
