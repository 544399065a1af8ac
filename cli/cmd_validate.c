/* cannprof validate: is the after run better, worse or the same as the
 * before run (or a service's baseline)? A CI gate: exit 1 on a regression,
 * 4 when no verdict could be reached. The comparing is validate/; this
 * file parses and prints. */
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/output.h"
#include "validate/validate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    OPT_AB = 1,
    OPT_AFTER,
    OPT_AFTER_RUN,
    OPT_ALERT,
    OPT_ALL_ITERATIONS,
    OPT_BASELINE,
    OPT_BEFORE,
    OPT_BEFORE_RUN,
    OPT_FORCE,
    OPT_JUNIT,
    OPT_MARKDOWN,
    OPT_METRICS,
    OPT_NO_NOISE,
    OPT_OUTPUT,
    OPT_PRECISION_TOL,
    OPT_TRACE,
    OPT_WEBHOOK,
    OPT_WEBHOOK_FORMAT,
    OPT_WEBHOOK_SECRET_FILE,
};

static const struct cp_opt own[] = {
    {"ab", 0, CP_OPT_VALUE, OPT_AB, "AB.db", "the two runs of `cannprof bench A --vs B --trace`"},
    {"after", 0, CP_OPT_MULTI, OPT_AFTER, "B.db",
     "trace of the new version (repeat for several, e.g. processes run alternately)"},
    {"after-run", 0, CP_OPT_VALUE, OPT_AFTER_RUN, "N",
     "run of the after trace (default: the last, with its group of runs)"},
    {"alert-on-regression", 0, CP_OPT_FLAG, OPT_ALERT, NULL,
     "POST an alert to the webhook when a metric regressed"},
    {"all-iterations", 0, CP_OPT_FLAG, OPT_ALL_ITERATIONS, NULL,
     "compare every iteration, also those the interference probe found disturbed"},
    {"baseline", 0, CP_OPT_VALUE, OPT_BASELINE, "TAG|latest",
     "compare --trace with a baseline of --service from the knowledge base"},
    {"before", 0, CP_OPT_MULTI, OPT_BEFORE, "A.db",
     "trace of the reference version (repeat for several)"},
    {"before-run", 0, CP_OPT_VALUE, OPT_BEFORE_RUN, "N",
     "run of the before trace (default: the last, with its group of runs)"},
    {"force", 'f', CP_OPT_FLAG, OPT_FORCE, NULL, "compare traces of different models anyway"},
    {"junit", 0, CP_OPT_VALUE, OPT_JUNIT, "FILE",
     "also write JUnit XML: one testcase per metric, failing on a regression, skipped when "
     "inconclusive"},
    {"markdown", 0, CP_OPT_FLAG, OPT_MARKDOWN, NULL, "print the result as Markdown"},
    {"metrics", 0, CP_OPT_VALUE, OPT_METRICS, "LIST",
     "latency,p99,throughput,device_util,memory,precision (default: all the traces have)"},
    {"no-noise-floor", 0, CP_OPT_FLAG, OPT_NO_NOISE, NULL,
     "against a baseline: do not raise the threshold to the service's run-to-run noise"},
    {"output", 0, CP_OPT_VALUE, OPT_OUTPUT, "REPORT.html|.pdf",
     "also write the result as a report: the metrics, the latency distributions of both sides "
     "with the change's CI, the notes (docs/reports.md)"},
    {"precision-tolerance", 0, CP_OPT_VALUE, OPT_PRECISION_TOL, "PP",
     "precision_loss growth that counts as a regression, percentage points (default 0.1)"},
    {"trace", 0, CP_OPT_VALUE, OPT_TRACE, "NEW.db", "trace to check against --baseline"},
    {"webhook", 0, CP_OPT_VALUE, OPT_WEBHOOK, "URL",
     "POST each result there (only regressions with --alert-on-regression; "
     "default $CANNPROF_WEBHOOK)"},
    {"webhook-format", 0, CP_OPT_VALUE, OPT_WEBHOOK_FORMAT, "F",
     "generic (default), slack, feishu or dingtalk"},
    {"webhook-secret-file", 0, CP_OPT_VALUE, OPT_WEBHOOK_SECRET_FILE, "FILE",
     "sign the alert with the secret on FILE's first line (default $CANNPROF_WEBHOOK_SECRET)"},
};

static const struct cp_opt_use shared[] = {
    {CP_SO_ALPHA, NULL},
    {CP_SO_HELP, NULL},
    {CP_SO_JSON, NULL},
    {CP_SO_KB, NULL},
    {CP_SO_RESAMPLES, NULL},
    {CP_SO_SEED, "bootstrap seed (default 1)"},
    {CP_SO_SERVICE, "service whose baseline to use"},
    {CP_SO_TEST, NULL},
    {CP_SO_THRESHOLD, NULL},
};

static const struct cp_command_opts OPTS = {
    .cmd = "validate",
    .own = own,
    .n_own = sizeof own / sizeof own[0],
    .shared = shared,
    .n_shared = sizeof shared / sizeof shared[0],
    .usage = "usage: cannprof validate --before A.db --after B.db [options]\n"
             "       cannprof validate --ab AB.db [options]\n"
             "       cannprof validate --baseline TAG|latest --service NAME --trace NEW.db\n"
             "                         [--alert-on-regression] [--webhook URL] [options]\n\n"
             "Compare two measured runs metric by metric: before, after, change in percent with\n"
             "its 95% confidence interval, p-value, and a verdict. A change counts only when it\n"
             "is significant at --alpha AND at least --threshold: smaller significant changes\n"
             "are 'unchanged'; a large change that is not significant is 'inconclusive', with\n"
             "the samples per side that would settle it. Against a baseline, the result is\n"
             "stored in the knowledge base. See docs/validation.md.\n\n"
             "When the runs recorded the interference probe (cannprof bench does by default),\n"
             "the timing metrics compare only the iterations that ran while no neighbour\n"
             "competed for the CPU: those whose probe took at most 1.15x the lowest of the\n"
             "runs' probe floors. A run with fewer than 20 of them is left out; a side left\n"
             "with none gives no timing verdict (inconclusive, with the reason).\n"
             "--all-iterations compares every one.\n\n"
             "Two processes of one model differ by more than two measurements in one process.\n"
             "A trace recorded with `cannprof bench --runs N` holds N runs of separate\n"
             "processes: when both sides have two or more, each run's median is one sample and\n"
             "the verdict counts the variance between processes. With one run on a side it\n"
             "cannot, and the output says so. --before and --after may be given several times:\n"
             "traces of A and B measured alternately (A, B, A, B, ...) put a drift of the\n"
             "machine on both sides, which runs of one side after the other cannot. A run\n"
             "that stopped at its time limit short of its undisturbed iterations found the\n"
             "machine busy throughout: separate runs with one get no timing verdict.\n",
    .exit_codes = "0 no regression (unchanged or improved), 1 a metric regressed, 2 bad usage or "
                  "input, 3 environment failure (an alert not delivered, a report not written or "
                  "the result not stored, when the verdict was fine), 4 inconclusive: no verdict "
                  "could be reached",
};

static int fail(struct cp_diag *d)
{
    cp_cli_error("validate", d->msg);
    return cp_status_exit_code(d->status);
}

struct inputs {
    const char *before, *after, *ab, *baseline, *service, *trace, *junit;
};

/* Check which mode the flags name, and that they are complete. */
static bool check_mode(const struct inputs *in, bool alert, struct cp_diag *d)
{
    bool pair = in->before || in->after;
    bool base = in->baseline || in->service || in->trace;
    int modes = (pair ? 1 : 0) + (in->ab ? 1 : 0) + (base ? 1 : 0);
    if (modes != 1) {
        cp_diag_set(d, CP_ERR_USAGE,
                    modes ? "give one of --before/--after, --ab, or --baseline/--service/--trace"
                          : "nothing to compare: give --before A.db --after B.db, --ab AB.db, "
                            "or --baseline TAG --service NAME --trace NEW.db");
        return false;
    }
    if (pair && (!in->before || !in->after)) {
        cp_diag_set(d, CP_ERR_USAGE, "give both --before and --after");
        return false;
    }
    if (base && (!in->baseline || !in->service || !in->trace)) {
        cp_diag_set(d, CP_ERR_USAGE, "--baseline, --service and --trace go together (missing %s)",
                    !in->baseline  ? "--baseline"
                    : !in->service ? "--service"
                                   : "--trace");
        return false;
    }
    if (alert && !base) {
        cp_diag_set(d, CP_ERR_USAGE,
                    "--alert-on-regression works with --baseline/--service/--trace");
        return false;
    }
    return true;
}

static bool parse_opts(const struct cp_args *args, struct cp_validate_opts *o, struct cp_diag *d)
{
    cp_validate_opts_init(o);
    o->verdict.test = (enum cp_stat_test)cp_args_int(args, CP_SO_TEST, o->verdict.test);
    o->verdict.alpha = cp_args_num(args, CP_SO_ALPHA, o->verdict.alpha);
    o->verdict.threshold_pct = cp_args_num(args, CP_SO_THRESHOLD, o->verdict.threshold_pct);
    o->verdict.boot.resamples =
        (size_t)cp_args_int(args, CP_SO_RESAMPLES, (int64_t)o->verdict.boot.resamples);
    o->verdict.boot.seed = (uint64_t)cp_args_int(args, CP_SO_SEED, (int64_t)o->verdict.boot.seed);
    const char *v = cp_args_get(args, OPT_PRECISION_TOL);
    if (v && !cp_parse_percent(v, 1000, &o->precision_tolerance)) {
        cp_diag_set(d, CP_ERR_USAGE,
                    "--precision-tolerance: '%s' is not a number of percentage points like 0.1", v);
        return false;
    }
    const char *list = cp_args_get(args, OPT_METRICS);
    if (list && cp_vmetric_parse_list(list, o->wanted, d) != CP_OK)
        return false;
    o->asked = list != NULL;
    o->all_iterations = cp_args_has(args, OPT_ALL_ITERATIONS);
    o->force = cp_args_has(args, OPT_FORCE);
    return true;
}

/* The alert options: where, how signed, in which format; only against a
 * baseline. */
static bool parse_alert(const struct cp_args *args, const struct inputs *in, bool alert,
                        struct cp_validate_alert *al, char *secret, size_t n, struct cp_diag *d)
{
    const char *url = cp_args_get(args, OPT_WEBHOOK);
    if (cp_validate_webhook_setup(alert || url ? url : "", cp_args_get(args, OPT_WEBHOOK_FORMAT),
                                  cp_args_get(args, OPT_WEBHOOK_SECRET_FILE), al, secret, n,
                                  d) != CP_OK)
        return false;
    if (alert && !al->url) {
        cp_diag_set(d, CP_ERR_USAGE,
                    "--alert-on-regression needs --webhook URL (or $CANNPROF_WEBHOOK)");
        return false;
    }
    if (al->url && !in->baseline) {
        cp_diag_set(d, CP_ERR_USAGE, "--webhook works with --baseline/--service/--trace");
        return false;
    }
    return true;
}

/* --before and --after, each given once or more: every trace's last run
 * with its group (or the one --before-run/--after-run names, which needs a
 * single trace on its side). */
static enum cp_status read_sides(const struct cp_args *args, struct cp_validate_side *before,
                                 struct cp_validate_side *after, struct cp_diag *d)
{
    const int ids[2] = {OPT_BEFORE, OPT_AFTER}, run_ids[2] = {OPT_BEFORE_RUN, OPT_AFTER_RUN};
    struct cp_validate_side *sides[2] = {before, after};
    enum cp_status st = CP_OK;
    for (int k = 0; k < 2 && st == CP_OK; k++) {
        const char *paths[CP_MAX_ARGS];
        size_t n = cp_args_all(args, ids[k], paths, CP_MAX_ARGS);
        const char *run = cp_args_get(args, run_ids[k]);
        if (run && n > 1)
            return cp_diag_set(d, CP_ERR_USAGE, "--%s picks a run of one trace; give one --%s",
                               k ? "after-run" : "before-run", k ? "after" : "before");
        memset(sides[k], 0, sizeof *sides[k]);
        for (size_t i = 0; i < n && st == CP_OK; i++)
            st = cp_validate_side_add_trace(paths[i], run, sides[k], d);
    }
    return st;
}

/* Print the result in the asked-for form, and the JUnit file. 0, or 3 when
 * an output cannot be written. */
static int output(const struct cp_args *args, const struct cp_vresult *r, const char *junit)
{
    int rc = 0;
    if (cp_args_has(args, CP_SO_JSON)) {
        json_t *j = cp_validate_json(r);
        rc = cp_out_json(j, "validate");
        json_decref(j);
    } else {
        struct cp_buf out;
        cp_buf_init(&out);
        if (cp_args_has(args, OPT_MARKDOWN))
            cp_validate_render_markdown(r, &out);
        else
            cp_validate_render_table(r, &out);
        if (cp_buf_status(&out) != CP_OK) {
            cp_cli_error("validate", "out of memory rendering the result");
            rc = 3;
        } else
            fputs(out.data, stdout);
        cp_buf_release(&out);
    }
    const char *report = cp_args_get(args, OPT_OUTPUT);
    struct cp_diag d;
    cp_diag_init(&d);
    if (rc == 0 && report && cp_validate_write_doc(r, report, &d) != CP_OK) {
        cp_cli_error("validate", d.msg);
        rc = cp_status_exit_code(d.status);
    } else if (rc == 0 && report && !cp_args_has(args, CP_SO_JSON))
        printf("report: %s\n", report);
    if (rc == 0 && junit && cp_validate_write_junit(r, junit, &d) != CP_OK) {
        cp_cli_error("validate", d.msg);
        rc = 3;
    }
    return rc;
}

int cp_cmd_validate(int argc, char **argv)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_args args;
    if (cp_args_parse_cmd(&OPTS, argc, argv, &args, &d) != CP_OK)
        return fail(&d);
    if (cp_args_has(&args, CP_SO_HELP)) {
        cp_cmd_help(stdout, &OPTS);
        return 0;
    }
    const char *report = cp_args_get(&args, OPT_OUTPUT);
    if (report && !cp_path_has_suffix(report, ".html") && !cp_path_has_suffix(report, ".htm") &&
        !cp_path_has_suffix(report, ".pdf")) {
        cp_cli_error("validate", "--output writes a report as REPORT.html or REPORT.pdf");
        return 2;
    }
    if (args.n_positional) {
        cp_cli_error("validate", "unexpected argument; traces go after --before/--after, --ab "
                                 "or --trace");
        return 2;
    }
    struct inputs in = {
        .before = cp_args_get(&args, OPT_BEFORE),
        .after = cp_args_get(&args, OPT_AFTER),
        .ab = cp_args_get(&args, OPT_AB),
        .baseline = cp_args_get(&args, OPT_BASELINE),
        .service = cp_args_get(&args, CP_SO_SERVICE),
        .trace = cp_args_get(&args, OPT_TRACE),
        .junit = cp_args_get(&args, OPT_JUNIT),
    };
    bool alert = cp_args_has(&args, OPT_ALERT);
    struct cp_validate_opts o;
    struct cp_validate_alert al;
    char secret[1024] = "";
    if (!check_mode(&in, alert, &d) || !parse_opts(&args, &o, &d) ||
        !parse_alert(&args, &in, alert, &al, secret, sizeof secret, &d))
        return fail(&d);

    /* large (the sides hold up to 64 runs each): one per process */
    static struct cp_validate_side before, after;
    static struct cp_vresult r;
    struct cp_kb *kb = NULL;
    struct cp_kb_baseline b;
    memset(&b, 0, sizeof b);
    int rc;
    enum cp_status st;
    if (in.ab) {
        o.interleaved = true;
        st = cp_validate_sides_from_ab(in.ab, &before, &after, &d);
    } else if (in.before) {
        st = read_sides(&args, &before, &after, &d);
    } else {
        st = cp_kb_check_service(in.service, &d);
        if (st == CP_OK)
            st = cp_validate_side_from_trace(in.trace, cp_args_get(&args, OPT_AFTER_RUN), &after,
                                             &d);
        if (st == CP_OK && (st = cp_kb_open(cp_args_get(&args, CP_SO_KB), &kb, &d)) == CP_OK &&
            (st = cp_kb_baseline_get(kb, in.service, in.baseline, &b, &d)) == CP_OK)
            cp_validate_side_borrow(&before, b.tag, &b.m);
    }
    double noise = NAN;
    size_t noise_runs = 0;
    if (st == CP_OK && kb && !cp_args_has(&args, OPT_NO_NOISE))
        cp_validate_noise_floor(kb, in.service, &noise, &noise_runs);
    if (st == CP_OK)
        st = cp_validate_compare(&before, &after, &o, noise, noise_runs, &r, &d);
    if (st != CP_OK) {
        rc = fail(&d);
        goto out;
    }
    if (r.models_differ)
        fprintf(stderr,
                "cannprof validate: warning: the traces are of different models (%s vs %s)\n",
                r.before->model_path, r.after->model_path);
    rc = cp_validate_exit_code(&r);
    /* --webhook alone reports every validation; with --alert-on-regression
     * only regressions. */
    if (al.url && (!alert || r.overall == CP_VERDICT_REGRESSED)) {
        cp_validate_send_alert(&r, in.service, b.tag, in.trace, &al);
        if (!al.delivered)
            fprintf(stderr, "cannprof validate: error: alert not delivered: %s\n", al.error);
    }
    int orc = output(&args, &r, in.junit);
    if (kb && cp_validate_record(kb, &b, in.service, in.trace, &r, rc, &al, &d) != CP_OK) {
        cp_cli_error("validate", d.msg);
        orc = 3;
    }
    if (rc == 0 && (orc || (al.attempted && !al.delivered)))
        rc = 3;
out:
    cp_validate_side_release(&before);
    cp_validate_side_release(&after);
    cp_kb_baseline_release(&b);
    cp_kb_close(kb);
    return rc;
}
