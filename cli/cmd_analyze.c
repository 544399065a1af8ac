/* cannprof analyze: name the bottlenecks of a traced run, with confidence,
 * expected gain and the change that addresses each. */
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/output.h"
#include "rules/rules.h"
#include "tuner/tuner.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    OPT_NO_CALIBRATE = 1,
    OPT_OUTPUT,
    OPT_SKELETON,
    OPT_TOP,
};

static const struct cp_opt own[] = {
    {"no-calibrate", 0, CP_OPT_FLAG, OPT_NO_CALIBRATE, NULL,
     "skip the machine's roofline (roofline features become absent)"},
    {"output", 'o', CP_OPT_VALUE, OPT_OUTPUT, "FILE.md|.json|.html|.pdf",
     "also write the analysis as a report: Markdown, JSON (as --json prints it), or HTML and PDF "
     "with charts of where the time goes and the top kernels' roofline (docs/reports.md)"},
    {"skeleton", 0, CP_OPT_VALUE, OPT_SKELETON, "FILE",
     "where an unclassified hotspot's rule skeleton goes (default TRACE.rule-skeleton.yaml)"},
    {"top", 0, CP_OPT_VALUE, OPT_TOP, "N", "show the first N findings (default 0: all)"},
};

static const struct cp_opt_use shared[] = {
    {CP_SO_HELP, NULL},
    {CP_SO_JSON, "print findings and features as JSON"},
    {CP_SO_RULES, "rule packs to use instead of the default ones (repeatable)"},
    {CP_SO_RUN, NULL},
    {CP_SO_TARGET, NULL},
};

static const struct cp_command_opts OPTS = {
    .cmd = "analyze",
    .own = own,
    .n_own = sizeof own / sizeof own[0],
    .shared = shared,
    .n_shared = sizeof shared / sizeof shared[0],
    .usage = "usage: cannprof analyze TRACE.db [--rules DIR ...] [--target T] [--json]\n"
             "                        [-o REPORT.md|.json|.html|.pdf]\n\n"
             "Compute features from a traced run (record one with `cannprof bench MODEL --trace\n"
             "TRACE.db`), evaluate the rule packs (rules/packs/*.yaml, docs/rule-language.md)\n"
             "and list the findings, largest expected gain first: bottleneck type, root cause,\n"
             "confidence, affected ONNX nodes, time share, expected gain with its interval,\n"
             "the change to make, and its risks. When no rule explains a hotspot, an\n"
             "'unclassified hotspot' finding is listed and a rule skeleton is written.\n",
    .exit_codes = "0 analysed (with or without findings), 2 bad usage or input (a trace or rule "
                  "pack that cannot be read), 3 environment failure (the rule skeleton cannot be "
                  "written)",
};

/* The first few names of a JSON array of strings, for a table cell. */
static void short_list(const char *json, char *out, size_t n)
{
    size_t len = strlen(json ? json : "");
    if (!json || len <= 2) {
        snprintf(out, n, "-");
        return;
    }
    if (len < n) {
        snprintf(out, n, "%.*s", (int)(len - 2), json + 1);
        return;
    }
    snprintf(out, n, "%.*s...", (int)(n - 5), json + 1);
}

static void print_change(const struct cp_change *c)
{
    printf("    change:     %s\n", c->summary);
    for (size_t i = 0; c->convert && c->convert[i]; i++)
        printf("                convert %s\n", c->convert[i]);
    for (size_t i = 0; c->fusion_switches && c->fusion_switches[i]; i++)
        printf("                fusion switch %s\n", c->fusion_switches[i]);
    for (size_t i = 0; c->runtime && c->runtime[i]; i++)
        printf("                runtime %s\n", c->runtime[i]);
}

static void print_findings(const struct cp_diagnosis *dg, size_t top, const char *trace)
{
    const struct cp_analysis *a = &dg->analysis;
    printf("trace: %s (run %lld, %s, %zu kernels)\n", trace, (long long)dg->run.run_id,
           dg->run.model_path, dg->features->n_kernels);
    double used;
    if (cp_features_get(dg->features, "iterations", &used) && used < (double)dg->run.n)
        printf("timing: the %.0f of %zu iterations that ran undisturbed (interference probe)\n",
               used, dg->run.n);
    printf("rules: %zu loaded, %zu evaluated for this target%s\n\n", cp_rule_set_count(dg->rules),
           a->rules_evaluated, dg->calibrated ? "" : "; roofline features absent (--no-calibrate)");
    if (a->n == 0) {
        printf("no findings: no rule fired and no hotspot stands out.\n");
        return;
    }
    size_t n = top && top < a->n ? top : a->n;
    for (size_t i = 0; i < n; i++) {
        const struct cp_finding *f = &a->findings[i];
        char nodes[200];
        short_list(f->nodes_json, nodes, sizeof nodes);
        printf("%zu. %s\n", i + 1, f->title);
        printf("    bottleneck: %s, root cause %s (rule %s)\n", f->bottleneck_type, f->root_cause,
               f->rule);
        printf("    confidence: %s (score %.2f)%s%s\n", cp_confidence_name(f->confidence), f->score,
               f->missing[0] ? "; missing features: " : "", f->missing);
        printf("    time share: %.1f%% of the iteration\n", 100 * f->time_share);
        if (f->unclassified)
            printf("    gain:       unknown, at most %.1f%% if the hotspot vanished\n",
                   100 * f->gain_hi);
        else
            printf("    gain:       %.1f%% latency [%.1f%%, %.1f%%] (speedup prior %.2gx of "
                   "the affected time)\n",
                   100 * f->gain, 100 * f->gain_lo, 100 * f->gain_hi, f->speedup);
        printf("    nodes:      %s\n", nodes);
        /* a profile without framework ops behind its tasks (a task table
         * alone): the kernels are what can be named */
        if (strcmp(nodes, "-") == 0 && f->kernels_json && strcmp(f->kernels_json, "[]") != 0) {
            char kernels[200];
            short_list(f->kernels_json, kernels, sizeof kernels);
            printf("    kernels:    %s\n", kernels);
        }
        if (f->stacks_json)
            printf("    stacks:     %s\n", f->stacks_json);
        print_change(&f->change);
        if (isfinite(f->risk_precision_loss) || isfinite(f->risk_memory)) {
            printf("    risks:     ");
            if (isfinite(f->risk_precision_loss))
                printf(" precision loss ~%.2f%%", f->risk_precision_loss);
            if (isfinite(f->risk_memory))
                printf(" memory %+.0f%%", 100 * f->risk_memory);
            printf("\n");
        }
        if (f->violates)
            printf("    CONSTRAINT: %s\n", f->violation);
    }
    if (n < a->n)
        printf("\n(%zu more; --top 0 shows all)\n", a->n - n);
}

static int write_skeleton(const struct cp_diagnosis *dg, const char *path)
{
    const struct cp_finding *f = dg->analysis.n ? &dg->analysis.findings[0] : NULL;
    if (!f || !f->unclassified)
        return 0;
    struct cp_buf b;
    cp_buf_init(&b);
    cp_rules_skeleton(f, dg->features, &b);
    struct cp_diag d;
    cp_diag_init(&d);
    if (cp_buf_write_file(&b, path, &d) != CP_OK) {
        cp_cli_error("analyze", d.msg);
        cp_buf_release(&b);
        return 3;
    }
    cp_buf_release(&b);
    fprintf(stderr, "cannprof analyze: no rule explains the hotspot; a rule skeleton is in %s\n",
            path);
    return 0;
}

/* The --json document: the trace, the run, the target, the findings and
 * the features. NULL when out of memory. */
static json_t *analysis_json(const struct cp_diagnosis *dg, const char *trace,
                             enum cp_target target)
{
    json_t *j = json_object();
    if (j && cp_json_set_str(j, "trace", trace) && cp_json_set_int(j, "run", dg->run.run_id) &&
        cp_json_set_str(j, "target", cp_target_name(target)) &&
        cp_json_set_int(j, "rules_loaded", (int64_t)cp_rule_set_count(dg->rules)) &&
        cp_json_set(j, "findings", cp_analysis_to_json(&dg->analysis)) &&
        cp_json_set(j, "features", cp_features_to_json(dg->features)))
        return j;
    json_decref(j);
    return NULL;
}

/* -o: the analysis as a report file, by its extension. */
static int write_report(const struct cp_diagnosis *dg, const char *trace, enum cp_target t,
                        const char *out)
{
    struct cp_diag d;
    cp_diag_init(&d);
    enum cp_status st = CP_OK;
    if (cp_path_has_suffix(out, ".json")) {
        json_t *j = analysis_json(dg, trace, t);
        st = j ? cp_json_write_file(j, out, &d) : cp_diag_set(&d, CP_ERR_NOMEM, "out of memory");
        json_decref(j);
    } else if (cp_path_has_suffix(out, ".md")) {
        struct cp_buf b;
        cp_buf_init(&b);
        cp_suggest_markdown(dg, "analyze", trace, t, NULL, NULL, NULL, &b);
        st = cp_buf_write_file(&b, out, &d);
        cp_buf_release(&b);
    } else {
        struct cp_doc *doc = cp_suggest_doc(dg, "analyze", trace, t, NULL, NULL, NULL);
        st = doc ? cp_doc_write(doc, out, &d) : cp_diag_set(&d, CP_ERR_NOMEM, "out of memory");
        cp_doc_free(doc);
    }
    if (st != CP_OK)
        return cp_cli_fail("analyze", &d);
    fprintf(stderr, "analyze: report -> %s\n", out);
    return 0;
}

int cp_cmd_analyze(int argc, char **argv)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_args args;
    if (cp_args_parse_cmd(&OPTS, argc, argv, &args, &d) != CP_OK) {
        cp_cli_error("analyze", d.msg);
        return cp_status_exit_code(d.status);
    }
    if (cp_args_has(&args, CP_SO_HELP)) {
        cp_cmd_help(stdout, &OPTS);
        return 0;
    }
    if (args.n_positional != 1) {
        cp_cli_error("analyze", "give exactly one TRACE.db");
        return 2;
    }
    const char *trace = args.positional[0];
    struct cp_diagnose_opts o = {.run_id = cp_args_int(&args, CP_SO_RUN, -1),
                                 .calibrate = !cp_args_has(&args, OPT_NO_CALIBRATE)};
    o.analysis.target = (enum cp_target)cp_args_int(&args, CP_SO_TARGET, CP_TARGET_LATENCY);
    const char *paths[CP_MAX_ARGS];
    o.n_rule_paths = cp_args_all(&args, CP_SO_RULES, paths, CP_MAX_ARGS);
    o.rule_paths = paths;
    const char *v;
    int64_t n = 0;
    if ((v = cp_args_get(&args, OPT_TOP)) && (!cp_parse_i64(v, &n) || n < 0)) {
        cp_cli_error("analyze", "--top takes a whole number (0: all)");
        return 2;
    }
    struct cp_diagnosis dg;
    if (cp_rules_diagnose(trace, &o, &dg, &d) != CP_OK) {
        cp_cli_error("analyze", d.msg);
        cp_diagnosis_release(&dg);
        return cp_status_exit_code(d.status);
    }
    int rc = 0;
    if (cp_args_has(&args, CP_SO_JSON)) {
        json_t *j = analysis_json(&dg, trace, o.analysis.target);
        rc = cp_out_json(j, "analyze");
        json_decref(j);
    } else
        print_findings(&dg, (size_t)n, trace);
    if (rc == 0 && (v = cp_args_get(&args, OPT_OUTPUT)))
        rc = write_report(&dg, trace, o.analysis.target, v);
    if (rc == 0) {
        struct cp_buf p;
        cp_buf_init(&p);
        if ((v = cp_args_get(&args, OPT_SKELETON)))
            cp_buf_puts(&p, v);
        else
            cp_buf_printf(&p, "%s.rule-skeleton.yaml", trace);
        if (cp_buf_status(&p) == CP_OK)
            rc = write_skeleton(&dg, p.data);
        else {
            cp_cli_error("analyze", "out of memory");
            rc = 3;
        }
        cp_buf_release(&p);
    }
    cp_diagnosis_release(&dg);
    return rc;
}
