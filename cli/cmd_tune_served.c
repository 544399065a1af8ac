/* The tuning of a served workload, parsing and printing only: a flow
 * (tuner/flow_tune.c) and a model's serving (tuner/serve_tune.c). */
#include "cli/cmd_tune.h"
#include "cli/output.h"
#include "core/json.h"
#include "tuner/tuner.h"

#include <stdio.h>
#include <stdlib.h>

/* What tuning a served flow or model shares: the target, constraints,
 * budget, acceptance and the workload. Each points into its options. */
struct workload {
    enum cp_target *target;
    struct cp_constraints *constraints;
    int *budget, *pairs, *concurrency;
    struct cp_verdict_opts *verdict;
    uint64_t *seed;
    double *rate;
};

/* Refuses the model loop's own options ("that option tunes a model, not
 * WHAT") and parses the shared ones. */
static bool parse_workload(const struct cp_args *args, const char *what, struct workload w,
                           struct cp_diag *d)
{
    static const int model_only[] = {
        OPT_BATCH, OPT_CALIBRATION_DATA, OPT_CALIBRATION_METHOD, OPT_INT8, OPT_JOBS, OPT_KEEP,
        OPT_FRESH, OPT_TIME_LIMIT};
    for (size_t i = 0; i < sizeof model_only / sizeof *model_only; i++)
        if (cp_args_get(args, model_only[i]) || cp_args_has(args, model_only[i]))
            return cp_diag_set(d, CP_ERR_USAGE, "that option tunes a model, not %s", what), false;
    if (cp_args_has(args, CP_SO_TARGET)) {
        *w.target = (enum cp_target)cp_args_int(args, CP_SO_TARGET, CP_TARGET_LATENCY);
        if (*w.target == CP_TARGET_MEMORY)
            return cp_diag_set(d, CP_ERR_USAGE, "%s is tuned for latency or throughput", what),
                   false;
    }
    if (cp_args_get(args, CP_SO_CONSTRAINTS) &&
        cp_constraints_parse(cp_args_get(args, CP_SO_CONSTRAINTS), w.constraints, d) != CP_OK)
        return false;
    *w.budget = (int)cp_args_int(args, CP_SO_BUDGET, *w.budget);
    w.verdict->alpha = cp_args_num(args, CP_SO_ALPHA, w.verdict->alpha);
    w.verdict->threshold_pct = cp_args_num(args, CP_SO_THRESHOLD, w.verdict->threshold_pct);
    *w.seed = (uint64_t)cp_args_int(args, CP_SO_SEED, (int64_t)*w.seed);
    const char *v;
    int64_t x;
    if ((v = cp_args_get(args, OPT_PAIRS)) && (!cp_parse_i64(v, &x) || x < 3 || x > 64))
        return cp_diag_set(d, CP_ERR_USAGE, "--pairs takes 3 to 64"), false;
    if (v)
        *w.pairs = (int)x;
    if ((v = cp_args_get(args, OPT_CONCURRENCY)) && (!cp_parse_i64(v, &x) || x < 1 || x > 1024))
        return cp_diag_set(d, CP_ERR_USAGE, "--concurrency takes 1 to 1024"), false;
    if (v)
        *w.concurrency = (int)x;
    if ((v = cp_args_get(args, OPT_RATE))) {
        char *end = NULL;
        *w.rate = strtod(v, &end);
        if (end == v || *end || !(*w.rate > 0) || *w.rate > 1e6)
            return cp_diag_set(d, CP_ERR_USAGE, "--rate takes requests per second above 0"), false;
    }
    return true;
}

int cp_tune_cli_flow(const struct cp_args *args, const char *flow)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_flow_tune_opts o;
    cp_flow_tune_opts_init(&o);
    o.flow = flow;
    static const int serve_only[] = {OPT_SERVE, OPT_MAX_BATCH, OPT_BATCH_WINDOW, CP_SO_DURATION};
    for (size_t i = 0; i < sizeof serve_only / sizeof *serve_only; i++)
        if (cp_args_has(args, serve_only[i])) {
            cp_cli_error("tune", "--serve, --max-batch, --batch-window and --duration tune a "
                                 "served model; a flow's batching is its nodes' batch_size");
            return 2;
        }
    struct workload w = {&o.target,      &o.constraints, &o.budget, &o.pairs,
                         &o.concurrency, &o.verdict,     &o.seed,   &o.rate};
    if (!parse_workload(args, "a flow", w, &d)) {
        cp_cli_error("tune", d.msg);
        return 2;
    }
    if (cp_args_has(args, OPT_NO_KB)) {
        cp_cli_error("tune", "that option tunes a model, not a flow");
        return 2;
    }
    o.kb_path = cp_args_get(args, CP_SO_KB);
    o.models = cp_args_has(args, OPT_MODELS);
    const char *v;
    int64_t x;
    if ((v = cp_args_get(args, OPT_REQUESTS)) && (!cp_parse_i64(v, &x) || x < 10 || x > 100000)) {
        cp_cli_error("tune", "--requests takes 10 to 100000");
        return 2;
    }
    if (v)
        o.requests = (uint64_t)x;
    char out[1100];
    cp_tune_default_out(flow, out, sizeof out);
    o.out_dir = cp_args_get(args, OPT_OUT) ? cp_args_get(args, OPT_OUT) : out;
    o.progress = cp_args_has(args, CP_SO_QUIET) ? NULL : stderr;
    struct cp_flow_tune_result r;
    enum cp_status st = cp_flow_tune(&o, &r, &d);
    if (st != CP_OK) {
        cp_flow_tune_result_release(&r);
        return cp_cli_fail("tune", &d);
    }
    if (cp_args_has(args, CP_SO_JSON)) {
        json_t *j = cp_flow_tune_json(&o, &r);
        cp_flow_tune_result_release(&r);
        return cp_out_json_take(j, "tune");
    }
    struct cp_buf text;
    cp_buf_init(&text);
    cp_flow_tune_render(&o, &r, &text);
    int rc = cp_out_buf(&text, "tune");
    cp_buf_release(&text);
    cp_flow_tune_result_release(&r);
    return rc;
}

/* tune MODEL --serve: the knobs of `cannprof serve MODEL`. */
int cp_tune_cli_serve(const struct cp_args *args, const char *model)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_serve_tune_opts o;
    cp_serve_tune_opts_init(&o);
    o.model = model;
    if (cp_args_has(args, OPT_REQUESTS) || cp_args_has(args, OPT_MODELS)) {
        cp_cli_error("tune", "--requests and --models tune a flow (FLOW.toml); --serve runs "
                             "for --duration");
        return 2;
    }
    struct workload w = {&o.target,      &o.constraints, &o.budget, &o.pairs,
                         &o.concurrency, &o.verdict,     &o.seed,   &o.rate};
    if (!parse_workload(args, "its serving (--serve)", w, &d)) {
        cp_cli_error("tune", d.msg);
        return 2;
    }
    o.run_s = cp_args_num(args, CP_SO_DURATION, o.run_s);
    o.kb_path = cp_args_get(args, CP_SO_KB);
    o.use_kb_hints = !cp_args_has(args, OPT_NO_KB);
    o.priority = (enum cp_measure_priority)cp_args_int(args, CP_SO_PRIORITY, o.priority);
    cp_cli_check_priority("tune", &o.priority);
    o.start.threads = (int)cp_args_int(args, CP_SO_THREADS, 0);
    const char *v;
    int64_t x;
    if ((v = cp_args_get(args, OPT_MAX_BATCH)) && (!cp_parse_i64(v, &x) || x < 1 || x > 256)) {
        cp_cli_error("tune", "--max-batch takes 1 to 256");
        return 2;
    }
    if (v)
        o.start.max_batch = (int)x;
    if ((v = cp_args_get(args, OPT_BATCH_WINDOW))) {
        char *end = NULL;
        o.start.window_ms = strtod(v, &end);
        if (end == v || *end || !(o.start.window_ms >= 0) || o.start.window_ms > 10000) {
            cp_cli_error("tune", "--batch-window takes milliseconds from 0 to 10000");
            return 2;
        }
    }
    char out[1100];
    cp_tune_default_out(model, out, sizeof out);
    o.out_dir = cp_args_get(args, OPT_OUT) ? cp_args_get(args, OPT_OUT) : out;
    o.progress = cp_args_has(args, CP_SO_QUIET) ? NULL : stderr;
    struct cp_serve_tune_result r;
    enum cp_status st = cp_serve_tune(&o, &r, &d);
    if (st != CP_OK) {
        cp_serve_tune_result_release(&r);
        return cp_cli_fail("tune", &d);
    }
    if (cp_args_has(args, CP_SO_JSON)) {
        json_t *j = cp_serve_tune_json(&o, &r);
        cp_serve_tune_result_release(&r);
        return cp_out_json_take(j, "tune");
    }
    struct cp_buf text;
    cp_buf_init(&text);
    cp_serve_tune_render(&o, &r, &text);
    int rc = cp_out_buf(&text, "tune");
    cp_buf_release(&text);
    cp_serve_tune_result_release(&r);
    return rc;
}
