/* cannprof suggest: a report of what to change, with commands that can be
 * pasted into `cannprof convert`, expected gains and risks, ranked for a
 * target under constraints. */
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
    OPT_MEASURE = 1,
    OPT_NO_CALIBRATE,
    OPT_NO_HISTORY,
    OPT_NO_RACE,
    OPT_OUTPUT,
};

static const struct cp_opt own[] = {
    {"measure", 0, CP_OPT_FLAG, OPT_MEASURE, NULL,
     "replace each expected gain by a quick interleaved measurement of the change on the run's "
     "own model (-n rounds, default 30) and rank by it"},
    {"no-calibrate", 0, CP_OPT_FLAG, OPT_NO_CALIBRATE, NULL, "skip the machine's roofline"},
    {"no-history", 0, CP_OPT_FLAG, OPT_NO_HISTORY, NULL,
     "keep the rules' priors: do not refine them by the knowledge base's measured history"},
    {"no-race", 0, CP_OPT_FLAG, OPT_NO_RACE, NULL,
     "with --measure: rank by the what-ifs alone, without racing the top three whose "
     "intervals overlap"},
    {"output", 'o', CP_OPT_VALUE, OPT_OUTPUT, "FILE.md|.json|.html|.pdf",
     "write the report there (format by extension; default: Markdown on stdout)"},
};

static const struct cp_opt_use shared[] = {
    {CP_SO_CONSTRAINTS, NULL},
    {CP_SO_HELP, NULL},
    {CP_SO_ITERATIONS, "with --measure: interleaved rounds per finding (default 30)"},
    {CP_SO_JSON, "print the report as JSON on stdout; with -o, what was written"},
    {CP_SO_PRIORITY, "with --measure: normal (default) or high (nice -20 while measuring)"},
    {CP_SO_KB, "knowledge base whose measured history refines the priors (default "
               "$XDG_DATA_HOME/cannprof/kb.sqlite; one that does not exist is not created)"},
    {CP_SO_RULES, NULL},
    {CP_SO_RUN, NULL},
    {CP_SO_TARGET, NULL},
};

static const struct cp_command_opts OPTS = {
    .cmd = "suggest",
    .own = own,
    .n_own = sizeof own / sizeof own[0],
    .shared = shared,
    .n_shared = sizeof shared / sizeof shared[0],
    .usage = "usage: cannprof suggest TRACE.db [--target latency|throughput|memory]\n"
             "                        [--constraints \"memory<3GB,precision_loss<1%\"]\n"
             "                        [-o FILE.md|.json|.html|.pdf] [--rules DIR ...] [--json]\n\n"
             "Diagnose a traced run as `analyze` does and write a report for people: where the\n"
             "bottleneck is (ONNX nodes), its root cause, the concrete change as a complete\n"
             "`cannprof convert` command (and runtime flags), the expected gain with its\n"
             "interval, and the risks. A change whose risk breaks a constraint is marked and\n"
             "ranked below the others. --json prints the report as JSON (the form -o FILE.json\n"
             "writes); with -o it prints what was written: trace, run, output, format,\n"
             "findings.\n\n"
             "A rule's expected gain is a prior. Where the knowledge base (--kb) holds what the\n"
             "rule's change gained when `tune` measured it on similar models (similarity >= 0.5)\n"
             "on this hardware, the prior is refined by it, counting as one measurement, and the\n"
             "report says so (--no-history keeps the priors). --measure replaces the gain: each\n"
             "change is converted from the run's recorded config and measured against the run's\n"
             "own .om, interleaved (-n rounds, default 30; seconds per finding), and the\n"
             "findings are ranked by the measured gain and its 95% CI. The prior stays in the\n"
             "report beside it. Findings ranked second and third whose interval overlaps the\n"
             "first's are then raced against it: the two changed models measured against each\n"
             "other, interleaved (2 x -n rounds); one faster by 2 points or more, significantly,\n"
             "ranks first (--no-race skips the race).\n",
    .exit_codes = "0 reported, 2 bad usage or input (a trace, rule pack or constraint that cannot "
                  "be read), 3 environment failure (FILE cannot be written)",
};

/* With --json and -o: what was written. NULL when out of memory. */
static json_t *written_json(const struct cp_diagnosis *dg, const char *trace, const char *out,
                            const char *fmt)
{
    json_t *j = json_object();
    if (j && cp_json_set_str(j, "trace", trace) && cp_json_set_int(j, "run", dg->run.run_id) &&
        cp_json_set_str(j, "output", out) && cp_json_set_str(j, "format", fmt) &&
        cp_json_set_int(j, "findings", (int64_t)dg->analysis.n))
        return j;
    json_decref(j);
    return NULL;
}

enum report_format { MD, JSON, HTML, PDF };

/* Write the report to `out` (stdout when NULL). 0, or the exit code after
 * saying what failed. */
static int write_report(const struct cp_diagnosis *dg, const char *trace, enum cp_target t,
                        const char *constraints, const struct cp_whatif *w, const char *history,
                        enum report_format fmt, const char *out)
{
    struct cp_diag d;
    cp_diag_init(&d);
    if (fmt == JSON) {
        json_t *j = cp_suggest_json(dg, trace, t, constraints, w, history);
        int rc;
        if (!out)
            rc = cp_out_json(j, "suggest");
        else if (!j) {
            cp_cli_error("suggest", "out of memory");
            rc = 3;
        } else if (cp_json_write_file(j, out, &d) != CP_OK) {
            cp_cli_error("suggest", d.msg);
            rc = cp_status_exit_code(d.status);
        } else
            rc = 0;
        json_decref(j);
        return rc;
    }
    if (fmt == HTML || fmt == PDF) {
        struct cp_doc *doc = cp_suggest_doc(dg, "suggest", trace, t, constraints, w, history);
        int rc = 0;
        if (!doc) {
            cp_cli_error("suggest", "out of memory");
            rc = 3;
        } else if (cp_doc_write(doc, out, &d) != CP_OK) {
            cp_cli_error("suggest", d.msg);
            rc = cp_status_exit_code(d.status);
        }
        cp_doc_free(doc);
        return rc;
    }
    struct cp_buf b;
    cp_buf_init(&b);
    cp_suggest_markdown(dg, "suggest", trace, t, constraints, w, history, &b);
    int rc = 0;
    if (cp_buf_status(&b) != CP_OK) {
        cp_cli_error("suggest", "out of memory");
        rc = 3;
    } else if (out) {
        if (cp_file_write_atomic(out, b.data, b.len, &d) != CP_OK) {
            cp_cli_error("suggest", d.msg);
            rc = cp_status_exit_code(d.status);
        }
    } else
        fputs(b.data, stdout);
    cp_buf_release(&b);
    return rc;
}

int cp_cmd_suggest(int argc, char **argv)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_args args;
    if (cp_args_parse_cmd(&OPTS, argc, argv, &args, &d) != CP_OK) {
        cp_cli_error("suggest", d.msg);
        return cp_status_exit_code(d.status);
    }
    if (cp_args_has(&args, CP_SO_HELP)) {
        cp_cmd_help(stdout, &OPTS);
        return 0;
    }
    if (args.n_positional != 1) {
        cp_cli_error("suggest", "give exactly one TRACE.db");
        return 2;
    }
    const char *trace = args.positional[0];
    struct cp_constraints cons;
    cp_constraints_init(&cons);
    const char *ctext = cp_args_get(&args, CP_SO_CONSTRAINTS);
    if (ctext && cp_constraints_parse(ctext, &cons, &d) != CP_OK) {
        cp_cli_error("suggest", d.msg);
        return 2;
    }
    struct cp_diagnose_opts o = {.run_id = cp_args_int(&args, CP_SO_RUN, -1),
                                 .calibrate = !cp_args_has(&args, OPT_NO_CALIBRATE)};
    o.analysis.constraints = &cons;
    o.analysis.target = (enum cp_target)cp_args_int(&args, CP_SO_TARGET, CP_TARGET_LATENCY);
    const char *out = cp_args_get(&args, OPT_OUTPUT);
    bool json = cp_args_has(&args, CP_SO_JSON);
    enum report_format fmt = json && !out ? JSON : MD;
    if (out) {
        if (cp_path_has_suffix(out, ".json"))
            fmt = JSON;
        else if (cp_path_has_suffix(out, ".html") || cp_path_has_suffix(out, ".htm"))
            fmt = HTML;
        else if (cp_path_has_suffix(out, ".pdf"))
            fmt = PDF;
        else if (!cp_path_has_suffix(out, ".md")) {
            cp_cli_error("suggest", "-o: name a .md, .json, .html or .pdf file");
            return 2;
        }
    }
    const char *paths[CP_MAX_ARGS];
    o.n_rule_paths = cp_args_all(&args, CP_SO_RULES, paths, CP_MAX_ARGS);
    o.rule_paths = paths;
    struct cp_diagnosis dg;
    if (cp_rules_diagnose(trace, &o, &dg, &d) != CP_OK) {
        cp_cli_error("suggest", d.msg);
        cp_diagnosis_release(&dg);
        return cp_status_exit_code(d.status);
    }
    char history[1400];
    bool use_history = !cp_args_has(&args, OPT_NO_HISTORY);
    /* an imported profile has no model here to fingerprint: its priors
     * stay as they are, and the report says why */
    bool imported = dg.run.kind && strcmp(dg.run.kind, "import") == 0;
    if (use_history && imported)
        snprintf(history, sizeof history,
                 "not read: an imported profile has no model to compare with the knowledge "
                 "base's; the priors stand");
    if (use_history && !imported &&
        cp_tune_history_refine(&dg.analysis, dg.run.model_path, cp_args_get(&args, CP_SO_KB),
                               history, sizeof history, &d) != CP_OK) {
        cp_cli_error("suggest", d.msg);
        cp_diagnosis_release(&dg);
        return cp_status_exit_code(d.status);
    }
    struct cp_whatif *w = NULL;
    if (cp_args_has(&args, OPT_MEASURE)) {
        struct cp_whatif_opts wo;
        cp_whatif_opts_init(&wo);
        wo.rounds = (int)cp_args_int(&args, CP_SO_ITERATIONS, wo.rounds);
        wo.priority = (enum cp_measure_priority)cp_args_int(&args, CP_SO_PRIORITY, wo.priority);
        cp_cli_check_priority("suggest", &wo.priority);
        if (cp_args_has(&args, OPT_NO_RACE))
            wo.race_top = 0;
        wo.target =
            o.analysis.target == CP_TARGET_THROUGHPUT ? CP_TARGET_THROUGHPUT : CP_TARGET_LATENCY;
        if (cp_tune_whatif_analysis(&dg, &wo, &w, &d) != CP_OK) {
            cp_cli_error("suggest", d.msg);
            cp_diagnosis_release(&dg);
            return cp_status_exit_code(d.status);
        }
    }
    int rc = write_report(&dg, trace, o.analysis.target, ctext, w, use_history ? history : NULL,
                          fmt, out);
    free(w);
    if (rc == 0 && out) {
        static const char *const names[] = {"markdown", "json", "html", "pdf"};
        if (json) {
            json_t *j = written_json(&dg, trace, out, names[fmt]);
            rc = cp_out_json(j, "suggest");
            json_decref(j);
        } else
            printf("suggest: %zu findings -> %s\n", dg.analysis.n, out);
    }
    cp_diagnosis_release(&dg);
    return rc;
}
