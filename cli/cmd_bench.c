/* cannprof bench: latency statistics of a model, optionally with a trace;
 * with --vs, an interleaved A/B measurement of two models and its verdict.
 * The measuring is runner/bench.h; this file parses and prints. */
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/bench_out.h"
#include "cli/output.h"
#include "core/json.h"
#include "runner/bench.h"
#include "runner/probe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    OPT_MAX_DURATION = 1,
    OPT_NO_PROBE,
    OPT_RUNS,
    OPT_TRACE,
    OPT_UNDISTURBED,
    OPT_VS,
};

static const struct cp_opt own[] = {
    {"max-duration", 0, CP_OPT_VALUE, OPT_MAX_DURATION, "S",
     "time limit on the wait for undisturbed iterations (default: the larger of 10 s and 3x "
     "what they take)"},
    {"no-probe", 0, CP_OPT_FLAG, OPT_NO_PROBE, NULL,
     "no interference probe: exactly --iterations (default 100) iterations"},
    {"runs", 0, CP_OPT_VALUE, OPT_RUNS, "N",
     "measure in N separate processes, one after the other (default 1); --trace stores them as "
     "one group that validate compares run against run"},
    {"trace", 0, CP_OPT_VALUE, OPT_TRACE, "OUT.db",
     "record a full-stack trace into a SQLite trace store"},
    {"undisturbed", 0, CP_OPT_VALUE, OPT_UNDISTURBED, "N", "the same as --iterations"},
    {"vs", 0, CP_OPT_VALUE, OPT_VS, "B.om",
     "measure MODEL (A) and B interleaved in rounds and give B's verdict against A"},
};

static const struct cp_opt_use shared[] = {
    {CP_SO_ALPHA, "with --vs: significance level, (0, 0.5] (default 0.05)"},
    {CP_SO_BATCH, NULL},
    {CP_SO_DURATION, "measure for S seconds instead (every iteration kept)"},
    {CP_SO_HELP, NULL},
    {CP_SO_INPUT, NULL},
    {CP_SO_INPUT_SHAPE, NULL},
    {CP_SO_ITERATIONS, "undisturbed iterations (with --vs: rounds) to measure (default 100)"},
    {CP_SO_JSON, NULL},
    {CP_SO_PRIORITY, NULL},
    {CP_SO_SEED, "seed of random inputs (default 0)"},
    {CP_SO_TEST, "with --vs: mann-whitney (default), welch, t-test or bootstrap"},
    {CP_SO_THREADS, NULL},
    {CP_SO_THRESHOLD, "with --vs: smallest change that matters, percent (default 2%)"},
    {CP_SO_WARMUP, "warm-up iterations (rounds), not measured (default 10)"},
};

static const struct cp_command_opts OPTS = {
    .cmd = "bench",
    .own = own,
    .n_own = sizeof own / sizeof own[0],
    .shared = shared,
    .n_shared = sizeof shared / sizeof shared[0],
    .usage = "usage: cannprof bench MODEL.om|MODEL.onnx [--iterations N [--max-duration S] |\n"
             "                      --duration S] [--no-probe] [--warmup N] [--batch B]\n"
             "                      [--threads T] [--trace OUT.db] [--json]\n"
             "       cannprof bench A.om --vs B.om [same options] [--test T] [--alpha A]\n"
             "                      [--threshold P]\n\n"
             "Measure latency per iteration on a monotonic clock (warm-up excluded) and print\n"
             "mean, median, p90, p99, standard deviation, CV, min, max and throughput.\n"
             "Percentiles interpolate linearly between closest ranks.\n\n"
             "After every measured iteration a small fixed workload, the interference probe,\n"
             "is timed outside the measurement (docs/validation.md): when it, or a probe\n"
             "within 2 ms of the iteration, takes more than 1.15x its floor, a neighbour was\n"
             "competing for the CPU and the iteration was disturbed. bench measures until\n"
             "--iterations (default 100) iterations ran undisturbed, capped by a time limit\n"
             "(--max-duration; by default the larger of 10 s and three times what those\n"
             "iterations take), and says so when the limit stopped it. --duration S measures\n"
             "for S seconds instead; --no-probe turns the probe off and measures exactly\n"
             "--iterations iterations. The statistics cover every iteration; the undisturbed\n"
             "ones are summarised apart, and 'cannprof validate' compares those. --trace\n"
             "stores the probe as the per-iteration counter probe_ns. The lowest floor seen\n"
             "is kept in the cache folder ($XDG_CACHE_HOME/cannprof). Ctrl-C stops after\n"
             "the running iteration and prints what was measured.\n\n"
             "Two processes of one model measure further apart than two runs in one process.\n"
             "--runs N measures in N separate processes, one after the other, and prints each\n"
             "run and the spread between them; with --trace the N runs are stored as one group,\n"
             "and 'cannprof validate' compares groups run against run, so that its verdict\n"
             "counts the variance between processes (docs/validation.md).\n\n"
             "With --vs B.om, A (MODEL) and B run in one process, interleaved in rounds whose\n"
             "order alternates (A B, B A, A B, ...) so that machine drift hits both alike;\n"
             "--iterations and --warmup count rounds, each running A and B once, and the\n"
             "probe runs after every round. Both take the same inputs (same names, dtypes\n"
             "and shapes, else exit 2). The verdict on B against A (lower latency is better),\n"
             "on the undisturbed rounds: improved or regressed when the change is significant\n"
             "at --alpha and at least --threshold; unchanged when it is smaller than the\n"
             "threshold; inconclusive when it is not significant but could matter (the rounds\n"
             "that would settle it are printed). --trace stores two runs of kind \"bench-ab\",\n"
             "A then B, with the round as iteration (docs/trace-format.md). bench measures and\n"
             "exits 0 whatever the verdict; 'cannprof validate' gates.\n",
    .exit_codes = "0 measured, 2 bad usage or input, 3 environment failure (a trace that "
                  "cannot be written), 130 interrupted (what was measured is printed)",
};

/* Everything the command line says, checked. */
struct bench_cli {
    struct cp_bench_request req;
    const char *inputs[CP_MAX_ARGS];
    int runs;
    bool json;
};

static bool usage_error(const char *fmt, const char *a, const char *b)
{
    char msg[300];
    snprintf(msg, sizeof msg, fmt, a, b);
    cp_cli_error("bench", msg);
    return false;
}

static bool parse_cli(const struct cp_args *args, struct bench_cli *c)
{
    struct cp_bench_request *q = &c->req;
    cp_bench_request_init(q);
    struct cp_measure_policy *p = &q->policy;
    q->models[0] = args->positional[0];
    q->models[1] = cp_args_get(args, OPT_VS);
    bool has_n = cp_args_has(args, CP_SO_ITERATIONS), has_u = cp_args_has(args, OPT_UNDISTURBED);
    bool has_d = cp_args_has(args, CP_SO_DURATION), no_probe = cp_args_has(args, OPT_NO_PROBE);
    if (has_n + has_u + has_d > 1)
        return usage_error("give one of --%s and --%s",
                           has_d ? "duration" : cp_args_name(args, CP_SO_ITERATIONS),
                           has_u ? "undisturbed" : "iterations");
    if (has_u && no_probe)
        return usage_error("--undisturbed needs the probe: drop --no-probe%s%s", "", "");
    int64_t iterations = CP_MEASURE_DEFAULT_ITERATIONS;
    if (has_u) {
        int64_t v;
        if (!cp_parse_i64(cp_args_get(args, OPT_UNDISTURBED), &v) || v < 1 || v > 100000000)
            return usage_error("--undisturbed takes a whole number from 1 to 100000000%s%s", "",
                               "");
        iterations = v;
    }
    iterations = cp_args_int(args, CP_SO_ITERATIONS, iterations);
    if (q->models[1] && iterations < 2)
        return usage_error("--%s takes a whole number of rounds from 2 (a verdict needs two "
                           "samples a side) to 100000000%s",
                           cp_args_name(args, CP_SO_ITERATIONS), "");
    p->iterations = iterations;
    p->warmup = cp_args_int(args, CP_SO_WARMUP, CP_MEASURE_DEFAULT_WARMUP);
    p->probe = !no_probe;
    p->mode = has_d ? CP_MEASURE_DURATION : no_probe ? CP_MEASURE_EXACT : CP_MEASURE_UNDISTURBED;
    p->duration_s = cp_args_num(args, CP_SO_DURATION, 0);
    p->priority = (enum cp_measure_priority)cp_args_int(args, CP_SO_PRIORITY, p->priority);
    const char *v = cp_args_get(args, OPT_MAX_DURATION);
    if (v) {
        if (!cp_parse_duration(v, &p->time_limit_s))
            return usage_error("--max-duration takes seconds: \"10\", \"2.5s\", \"1m\"%s%s", "",
                               "");
        if (has_d || no_probe)
            return usage_error("--max-duration bounds the wait for undisturbed iterations: it "
                               "goes without --%s%s",
                               has_d ? "duration" : "no-probe", "");
    }
    static const int verdict_opts[] = {CP_SO_TEST, CP_SO_ALPHA, CP_SO_THRESHOLD};
    for (size_t i = 0; i < sizeof verdict_opts / sizeof *verdict_opts && !q->models[1]; i++)
        if (cp_args_has(args, verdict_opts[i]))
            return usage_error("--%s judges an A/B measurement: give --vs B.om too%s",
                               cp_args_name(args, verdict_opts[i]), "");
    q->verdict.test = (enum cp_stat_test)cp_args_int(args, CP_SO_TEST, q->verdict.test);
    q->verdict.alpha = cp_args_num(args, CP_SO_ALPHA, q->verdict.alpha);
    q->verdict.threshold_pct = cp_args_num(args, CP_SO_THRESHOLD, q->verdict.threshold_pct);
    q->session[0].threads = (int)cp_args_int(args, CP_SO_THREADS, 0);
    q->session[0].batch = cp_args_int(args, CP_SO_BATCH, 0);
    q->session[0].input_shape = cp_args_get(args, CP_SO_INPUT_SHAPE);
    q->session[1] = q->session[0];
    q->seed = (uint64_t)cp_args_int(args, CP_SO_SEED, 0);
    q->trace_path = cp_args_get(args, OPT_TRACE);
    q->perf = q->trace_path != NULL;
    q->n_inputs = cp_args_all(args, CP_SO_INPUT, c->inputs, CP_MAX_ARGS);
    q->inputs = c->inputs;
    c->json = cp_args_has(args, CP_SO_JSON);
    c->runs = 1;
    if ((v = cp_args_get(args, OPT_RUNS))) {
        int64_t n;
        if (!cp_parse_i64(v, &n) || n < 1 || n > CP_BENCH_MAX_RUNS)
            return usage_error("--runs takes a whole number from 1 to %s%s", "64", "");
        if (q->models[1])
            return usage_error("--runs measures one model in separate processes; --vs "
                               "interleaves two in one%s%s",
                               "", "");
        c->runs = (int)n;
    }
    return true;
}

static int bench_runs(const struct bench_cli *c)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_bench_runs rs;
    int rc = 0;
    if (cp_bench_models_runs(&c->req, c->runs, &rs, &d) != CP_OK) {
        cp_cli_error("bench", d.msg);
        rc = cp_status_exit_code(d.status);
    } else if (rs.n > 0 && rs.runs[0].m.priority_why[0])
        fprintf(stderr,
                "cannprof bench: warning: --priority high: %s; measured at normal priority\n",
                rs.runs[0].m.priority_why);
    if (rc == 0 && c->json) {
        json_t *j = cp_bench_json_runs(&c->req, &rs);
        rc = cp_out_json(j, "bench");
        json_decref(j);
    } else if (rc == 0)
        cp_bench_print_runs(&c->req, &rs);
    if (rc == 0 && rs.interrupted)
        rc = 130;
    cp_bench_runs_release(&rs);
    return rc;
}

int cp_cmd_bench(int argc, char **argv)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_args args;
    if (cp_args_parse_cmd(&OPTS, argc, argv, &args, &d) != CP_OK) {
        cp_cli_error("bench", d.msg);
        return cp_status_exit_code(d.status);
    }
    if (cp_args_has(&args, CP_SO_HELP)) {
        cp_cmd_help(stdout, &OPTS);
        return 0;
    }
    if (args.n_positional != 1) {
        cp_cli_error("bench", "give exactly one MODEL (.om or .onnx); compare two with "
                              "'MODEL --vs B.om'");
        return 2;
    }
    struct bench_cli *c = cp_calloc(1, sizeof *c);
    if (!c) {
        cp_cli_error("bench", "out of memory");
        return 3;
    }
    int rc = 2;
    struct cp_bench_result r;
    memset(&r, 0, sizeof r);
    if (!parse_cli(&args, c))
        goto out;
    c->req.policy.interrupt = cp_cli_interrupt_flag();
    if (c->runs > 1) {
        rc = bench_runs(c);
        goto out;
    }
    if (cp_bench_models(&c->req, &r, &d) != CP_OK) {
        cp_cli_error("bench", d.msg);
        rc = cp_status_exit_code(d.status);
        goto out;
    }
    rc = r.m.stop == CP_MEASURE_STOP_INTERRUPTED ? 130 : 0;
    if (r.m.priority_why[0])
        fprintf(stderr,
                "cannprof bench: warning: --priority high: %s; measured at normal priority\n",
                r.m.priority_why);
    if (c->json) {
        json_t *j =
            c->req.models[1] ? cp_bench_json_ab(&c->req, &r) : cp_bench_json_one(&c->req, &r);
        if (cp_out_json(j, "bench") != 0)
            rc = 3;
        json_decref(j);
    } else if (c->req.models[1])
        cp_bench_print_ab(&c->req, &r);
    else
        cp_bench_print_one(&c->req, &r);
out:
    cp_bench_result_release(&r);
    free(c);
    return rc;
}
