/* cannprof tune: the closed loop on one model, or on many (--batch).
 * Parsing and printing only: the loop is tuner/loop.c, the batch
 * tuner/batch.c. */
#include "cli/cmd_tune.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/output.h"
#include "core/json.h"
#include "tuner/tuner.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct cp_opt own[] = {
    {"batch", 0, CP_OPT_VALUE, OPT_BATCH, "LIST.txt|DIR",
     "tune many models: one path per line, or every .onnx of a folder"},
    {"batch-window", 0, CP_OPT_VALUE, OPT_BATCH_WINDOW, "MS",
     "--serve: the batching window to start from, ms (default 0)"},
    {"calibration-data", 0, CP_OPT_VALUE, OPT_CALIBRATION_DATA, "DIR",
     "int8 calibration inputs (implies --int8): one folder a sample holding NAME.pb/.npy per "
     "input, or one file a sample for one input"},
    {"calibration-method", 0, CP_OPT_VALUE, OPT_CALIBRATION_METHOD, "METHOD",
     "int8 activation ranges: minmax (default), percentile, entropy"},
    {"concurrency", 0, CP_OPT_VALUE, OPT_CONCURRENCY, "C",
     "a flow or --serve: requests in flight at most in the workload (default 64)"},
    {"fresh", 0, CP_OPT_FLAG, OPT_FRESH, NULL, "start a new session instead of resuming"},
    {"int8", 0, CP_OPT_FLAG, OPT_INT8, NULL,
     "let the plan put Conv/MatMul/Gemm into int8 under the precision_loss bound (calibrated; "
     "without --calibration-data on seeded random inputs, with a warning)"},
    {"jobs", 'j', CP_OPT_VALUE, OPT_JOBS, "N",
     "with --batch: N worker processes, each pinned to CPUs of its own (default 1)"},
    {"keep", 0, CP_OPT_VALUE, OPT_KEEP, "best|all", "candidate .om files to keep (default all)"},
    {"max-batch", 0, CP_OPT_VALUE, OPT_MAX_BATCH, "N",
     "--serve: the largest batch to start from, 1 to 256 (default 1)"},
    {"models", 0, CP_OPT_FLAG, OPT_MODELS, NULL,
     "a flow: also tune its inference nodes' .om models with the model loop"},
    {"no-kb-strategies", 0, CP_OPT_FLAG, OPT_NO_KB, NULL,
     "do not try what won on similar models first"},
    {"out", 'o', CP_OPT_VALUE, OPT_OUT, "DIR", "artifacts (default tune-<model>)"},
    {"pairs", 0, CP_OPT_VALUE, OPT_PAIRS, "N",
     "a flow or --serve: alternating runs of each side per measurement, 3 to 64 (default 5)"},
    {"rate", 0, CP_OPT_VALUE, OPT_RATE, "R",
     "a flow or --serve: the workload in requests/s (default: 60% of its capacity for latency, "
     "150% for "
     "throughput)"},
    {"requests", 0, CP_OPT_VALUE, OPT_REQUESTS, "N", "a flow: requests per run (default 60)"},
    {"serve", 0, CP_OPT_FLAG, OPT_SERVE, NULL,
     "tune how `cannprof serve MODEL` runs it (--max-batch, --batch-window, --threads) under an "
     "open-loop workload, instead of its conversion"},
    {"time-limit", 0, CP_OPT_VALUE, OPT_TIME_LIMIT, "T", "stop after T (\"10m\", \"90s\", \"1h\")"},
};

static const struct cp_opt_use shared[] = {
    {CP_SO_ALPHA, "significance level of acceptance (default 0.05)"},
    {CP_SO_BUDGET, NULL},
    {CP_SO_CONSTRAINTS, "what every accepted candidate must respect (docs/constraints.md)"},
    {CP_SO_DURATION, "--serve: seconds of load per run (default 2s)"},
    {CP_SO_HELP, NULL},
    {CP_SO_INPUT, "inputs for measurement and precision (default: seeded random data)"},
    {CP_SO_ITERATIONS, "undisturbed interleaved rounds per evaluation, 5 or more (default 60)"},
    {CP_SO_JSON, "print report.json instead of the summary; with --batch, one object per model"},
    {CP_SO_KB, NULL},
    {CP_SO_PRIORITY, NULL},
    {CP_SO_QUIET, NULL},
    {CP_SO_RULES, NULL},
    {CP_SO_SEED, "seed of random inputs (default 0)"},
    {CP_SO_TARGET, NULL},
    {CP_SO_TEST, "acceptance test: mann-whitney (default), welch, t-test, bootstrap"},
    {CP_SO_THREADS, "the baseline's threads (default: all cores; with --batch, the job's CPUs)"},
    {CP_SO_THRESHOLD, "smallest gain worth accepting (default 2%)"},
    {CP_SO_WARMUP, "warm-up rounds per evaluation (default 5)"},
};

static const struct cp_command_opts OPTS = {
    .cmd = "tune",
    .own = own,
    .n_own = sizeof own / sizeof own[0],
    .shared = shared,
    .n_shared = sizeof shared / sizeof shared[0],
    .usage = "usage: cannprof tune MODEL.onnx|MODEL.om [--target latency|throughput|memory]\n"
             "                     [--constraints \"memory<3GB,precision_loss<1%\"] [--budget N]\n"
             "                     [--time-limit 10m] [--out DIR] [--kb FILE] [--keep best|all]\n"
             "       cannprof tune --batch LIST.txt|DIR [--jobs N] [same options]\n"
             "       cannprof tune FLOW.toml [--target latency|throughput] [--budget N]\n"
             "                     [--rate R] [--pairs N] [--requests N] [--models]\n"
             "       cannprof tune MODEL --serve [--target latency|throughput] [--budget N]\n"
             "                     [--rate R] [--pairs N] [--duration S] [--max-batch N]\n\n"
             "Profile the model, diagnose it with the rule packs, re-convert candidates and\n"
             "measure each interleaved against the current best; accept a candidate only when\n"
             "it is significantly better by more than the threshold and every constraint holds\n"
             "(precision against the unconverted model, memory). What was tried is stored in\n"
             "the knowledge base: the same command again resumes the session, and later models\n"
             "start with what won on similar ones. Ctrl-C stops after the current measurement.\n"
             "See docs/tuning.md.\n\n"
             "A flow (FLOW.toml, docs/pipelines.md) is tuned by its knobs instead: workers,\n"
             "queue and batch sizes from node-bottleneck's problems and limiting node, and with\n"
             "--models its .om models through the loop above; each candidate predicted by the\n"
             "what-if replay, then served beside the current flow and loaded alternately with\n"
             "`cannprof load`'s open-loop workload, accepted under the same rules. The tuned\n"
             "flow is written beside the original as NAME.tuned.toml.\n\n"
             "--serve tunes how `cannprof serve MODEL` runs the model instead: --max-batch,\n"
             "--batch-window and --threads, one at a time, each candidate served beside the\n"
             "current knobs and loaded alternately with the same open-loop workload, accepted\n"
             "under the same rules; it prints the `cannprof serve` command of the best.\n",
    .exit_codes = "0 done, 2 bad usage or input (a model, constraint or report.json that cannot "
                  "be read), 3 environment failure (an output that cannot be written, a worker "
                  "that died), 130 interrupted",
};

static int tune_one(struct cp_tune_opts *o, bool json)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_tune_result r;
    enum cp_status st = cp_tune(o, &r, &d);
    int rc = 0;
    if (st != CP_OK) {
        cp_cli_error("tune", d.msg);
        rc = cp_status_exit_code(st);
    } else if (json) {
        uint8_t *data = NULL;
        size_t len = 0;
        if (cp_file_read(r.report_json, &data, &len, &d) != CP_OK ||
            fwrite(data, 1, len, stdout) != len || fflush(stdout) != 0) {
            cp_cli_error("tune", d.status != CP_OK ? d.msg : "cannot write to stdout");
            rc = 3;
        }
        free(data);
    } else {
        struct cp_buf text;
        cp_buf_init(&text);
        cp_tune_summary_text(o, &r, &text);
        rc = cp_out_buf(&text, "tune");
        cp_buf_release(&text);
    }
    if (st == CP_OK && r.interrupted) {
        fprintf(stderr, "cannprof tune: interrupted; run the same command again to resume\n");
        rc = 130;
    }
    cp_tune_result_release(&r);
    return rc;
}

/* ---- many models ------------------------------------------------------------------ */

/* "0" or "0-1": the CPUs of the job that tuned model i. */
static void job_cpus(const struct cp_tune_batch_plan *plan, size_t i, struct cp_buf *out)
{
    size_t n = 0;
    const int *cpus = cp_tune_batch_plan_job_cpus(plan, i, &n);
    cp_tune_cpus_format(cpus, n, out);
}

/* How the jobs share this process's CPUs; false after printing why not. */
static bool plan_jobs(const struct cp_tune_batch *b, int jobs, int threads,
                      struct cp_tune_batch_plan *plan, int *rc)
{
    struct cp_diag d;
    cp_diag_init(&d);
    int *cpus = NULL;
    size_t n = 0;
    enum cp_status st = cp_tune_affinity(&cpus, &n, &d);
    if (st == CP_OK)
        st = cp_tune_batch_plan_cpus(cpus, n, jobs, threads, b->n, plan, &d);
    free(cpus);
    if (st != CP_OK) {
        cp_cli_error("tune", d.msg);
        *rc = cp_status_exit_code(st);
        return false;
    }
    return true;
}

static int tune_batch(struct cp_tune_opts *o, const char *src, int jobs, bool json)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_tune_batch b;
    if (cp_tune_batch_list(src, &b, &d) != CP_OK) {
        cp_cli_error("tune", d.msg);
        return cp_status_exit_code(d.status);
    }
    struct cp_tune_batch_plan plan;
    int rc = 0;
    if (!plan_jobs(&b, jobs, o->threads, &plan, &rc)) {
        cp_tune_batch_release(&b);
        return rc;
    }
    fprintf(stderr, "cannprof tune: %zu model%s, %d worker%s, artifacts in %s\n", b.n,
            b.n == 1 ? "" : "s", plan.workers, plan.workers == 1 ? "" : "s", o->out_dir);
    const char *bind = cp_tune_batch_binding_env();
    if (bind)
        fprintf(stderr,
                "cannprof tune: %s is set: OpenMP binds threads to CPUs of its own choosing "
                "(this process already to the CPUs below), and a job's threads may leave the "
                "CPUs given to it; unset it to give every job CPUs of its own\n",
                bind);
    fprintf(stderr, "cannprof tune: %s\n", plan.note);
    if (cp_tune_batch_run(o, &b, &plan, o->out_dir, &d) != CP_OK) {
        cp_cli_error("tune", d.msg);
        rc = 3;
    }
    struct cp_buf table;
    cp_buf_init(&table);
    if (!json)
        cp_tune_batch_table_head(&table);
    json_t *arr = json ? json_array() : NULL;
    enum cp_status worst = CP_OK;
    long verdicts = 0, inconclusive = 0;
    for (size_t i = 0; i < b.n; i++) {
        struct cp_tune_batch_result res;
        cp_diag_init(&d);
        enum cp_status st = cp_tune_batch_outcome(&b, i, o->out_dir, &res, &d);
        const char *error = st != CP_OK                           ? d.msg
                            : res.kind == CP_TUNE_BATCH_FAILED    ? res.error
                            : res.kind == CP_TUNE_BATCH_NO_REPORT ? "no report (interrupted?)"
                                                                  : NULL;
        if (st != CP_OK) {
            cp_cli_error("tune", d.msg);
            if (worst == CP_OK)
                worst = st;
        }
        if (!error) {
            verdicts += res.row.verdicts;
            inconclusive += res.row.inconclusive;
        }
        struct cp_buf cpus;
        cp_buf_init(&cpus);
        job_cpus(&plan, i, &cpus);
        const char *c = cp_buf_status(&cpus) == CP_OK && cpus.data ? cpus.data : "-";
        if (arr)
            json_array_append_new(arr, cp_tune_batch_row_json(b.dirs[i], b.models[i], o->out_dir,
                                                              &res, o, c, plan.threads, error));
        else
            cp_tune_batch_table_row(&table, b.dirs[i], &res, o, c, error);
        cp_buf_release(&cpus);
        cp_tune_batch_result_release(&res);
    }
    if (!json) {
        cp_buf_printf(&table,
                      "\n%ld of %ld verdict%s inconclusive (not significant although the change "
                      "reached the threshold: measured too noisily to tell)\n",
                      inconclusive, verdicts, verdicts == 1 ? "" : "s");
        if (cp_out_buf(&table, "tune") != 0 && !rc)
            rc = 3;
    }
    cp_buf_release(&table);
    if (arr && cp_out_json(arr, "tune") != 0 && !rc)
        rc = 3;
    json_decref(arr);
    bool interrupted = b.interrupted, failures = b.failures;
    cp_tune_batch_release(&b);
    cp_tune_batch_plan_release(&plan);
    if (interrupted) {
        fprintf(stderr, "cannprof tune: interrupted; run the same command again to resume\n");
        return 130;
    }
    if (rc)
        return rc;
    if (failures)
        return 3;
    return cp_status_exit_code(worst);
}

/* ---- options ------------------------------------------------------------------------ */

static bool parse_opts(const struct cp_args *a, struct cp_tune_opts *o, struct cp_diag *d)
{
    const char *v;
    o->target = (enum cp_target)cp_args_int(a, CP_SO_TARGET, o->target);
    if ((v = cp_args_get(a, CP_SO_CONSTRAINTS))) {
        if (cp_constraints_parse(v, &o->constraints, d) != CP_OK)
            return false;
        o->constraints_text = v;
    }
    o->budget = (int)cp_args_int(a, CP_SO_BUDGET, o->budget);
    if ((v = cp_args_get(a, OPT_TIME_LIMIT)) && !cp_parse_duration(v, &o->time_limit_s))
        return cp_diag_set(d, CP_ERR_USAGE, "--time-limit takes \"10m\", \"90s\" or \"1h\""), false;
    int64_t rounds = cp_args_int(a, CP_SO_ITERATIONS, o->rounds);
    if (rounds < 5 || rounds > 100000)
        return cp_diag_set(d, CP_ERR_USAGE, "--%s takes a whole number from 5 to 100000, not %lld",
                           cp_args_name(a, CP_SO_ITERATIONS), (long long)rounds),
               false;
    o->rounds = (int)rounds;
    int64_t warmup = cp_args_int(a, CP_SO_WARMUP, o->warmup);
    if (warmup > 10000)
        return cp_diag_set(d, CP_ERR_USAGE, "--warmup takes a whole number from 0 to 10000"), false;
    o->warmup = (int)warmup;
    o->priority = (enum cp_measure_priority)cp_args_int(a, CP_SO_PRIORITY, o->priority);
    o->threads = (int)cp_args_int(a, CP_SO_THREADS, o->threads);
    o->seed = (uint64_t)cp_args_int(a, CP_SO_SEED, (int64_t)o->seed);
    o->verdict.test = (enum cp_stat_test)cp_args_int(a, CP_SO_TEST, o->verdict.test);
    o->verdict.alpha = cp_args_num(a, CP_SO_ALPHA, o->verdict.alpha);
    o->verdict.threshold_pct = cp_args_num(a, CP_SO_THRESHOLD, o->verdict.threshold_pct);
    if ((v = cp_args_get(a, OPT_KEEP))) {
        if (strcmp(v, "best") != 0 && strcmp(v, "all") != 0)
            return cp_diag_set(d, CP_ERR_USAGE, "--keep: best or all, not '%s'", v), false;
        o->keep_all = strcmp(v, "all") == 0;
    }
    o->int8 = cp_args_has(a, OPT_INT8) || cp_args_has(a, OPT_CALIBRATION_DATA);
    o->calibration_data = cp_args_get(a, OPT_CALIBRATION_DATA);
    if ((v = cp_args_get(a, OPT_CALIBRATION_METHOD))) {
        struct cp_convert_config tmp;
        cp_convert_config_init(&tmp);
        if (cp_convert_config_set(&tmp, "calibration_method", v, d) != CP_OK)
            return false;
        o->calibration_method = tmp.calibration_method;
        o->int8 = true;
    }
    if (o->int8 && !cp_constraints_find(&o->constraints, CP_CONSTRAINT_PRECISION_LOSS))
        return cp_diag_set(d, CP_ERR_USAGE,
                           "--int8 needs a precision budget: add precision_loss<X%% to "
                           "--constraints, e.g. --constraints \"precision_loss<1%%\""),
               false;
    o->fresh = cp_args_has(a, OPT_FRESH);
    o->use_kb_strategies = !cp_args_has(a, OPT_NO_KB);
    o->kb_path = cp_args_get(a, CP_SO_KB);
    return true;
}

/* The file name of `path` without its extension, for "tune-<stem>". */
void cp_tune_default_out(const char *path, char *out, size_t cap)
{
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    const char *dot = strrchr(name, '.');
    int len = dot && dot != name ? (int)(dot - name) : (int)strlen(name);
    snprintf(out, cap, "tune-%.*s", len, *name ? name : "model");
}

int cp_cmd_tune(int argc, char **argv)
{
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_args args;
    if (cp_args_parse_cmd(&OPTS, argc, argv, &args, &d) != CP_OK) {
        cp_cli_error("tune", d.msg);
        return cp_status_exit_code(d.status);
    }
    if (cp_args_has(&args, CP_SO_HELP)) {
        cp_cmd_help(stdout, &OPTS);
        return 0;
    }
    if (args.n_positional == 1 && cp_path_has_suffix(args.positional[0], ".toml"))
        return cp_tune_cli_flow(&args, args.positional[0]);
    if (cp_args_has(&args, OPT_SERVE)) {
        if (args.n_positional != 1) {
            cp_cli_error("tune", "--serve tunes one MODEL (.om or .onnx)");
            return 2;
        }
        return cp_tune_cli_serve(&args, args.positional[0]);
    }
    static const int flow_only[] = {OPT_PAIRS,  OPT_RATE,      OPT_REQUESTS,     OPT_CONCURRENCY,
                                    OPT_MODELS, OPT_MAX_BATCH, OPT_BATCH_WINDOW, CP_SO_DURATION};
    for (size_t i = 0; i < sizeof flow_only / sizeof *flow_only; i++)
        if (cp_args_has(&args, flow_only[i])) {
            cp_cli_error("tune", "--pairs, --rate, --concurrency and --duration tune a flow "
                                 "(FLOW.toml) or a served model (--serve); --requests and --models "
                                 "a flow; --max-batch and --batch-window a served model");
            return 2;
        }
    struct cp_tune_opts o;
    cp_tune_opts_init(&o);
    o.keep_all = true;
    if (!parse_opts(&args, &o, &d)) {
        cp_cli_error("tune", d.msg);
        return 2;
    }
    cp_cli_check_priority("tune", &o.priority);
    const char *batch = cp_args_get(&args, OPT_BATCH);
    if ((batch && args.n_positional) || (!batch && args.n_positional != 1)) {
        cp_cli_error("tune", "give one MODEL (.onnx or .om), or --batch LIST.txt|DIR");
        return 2;
    }
    int jobs = 1;
    const char *v = cp_args_get(&args, OPT_JOBS);
    if (v) {
        int64_t j;
        if (!batch || !cp_parse_i64(v, &j) || j < 1 || j > CP_TUNE_MAX_JOBS) {
            char msg[96];
            snprintf(msg, sizeof msg,
                     batch ? "--jobs takes a whole number from 1 to %d"
                           : "--jobs works with --batch",
                     CP_TUNE_MAX_JOBS);
            cp_cli_error("tune", msg);
            return 2;
        }
        jobs = (int)j;
    }
    const char *inputs[CP_MAX_ARGS], *rules[CP_MAX_ARGS];
    o.n_inputs = cp_args_all(&args, CP_SO_INPUT, inputs, CP_MAX_ARGS);
    o.n_rule_paths = cp_args_all(&args, CP_SO_RULES, rules, CP_MAX_ARGS);
    o.inputs = inputs;
    o.rule_paths = rules;
    bool quiet = cp_args_has(&args, CP_SO_QUIET);
    o.progress = quiet ? NULL : stderr;
    o.progress_tty = !quiet && isatty(STDERR_FILENO);
    o.interrupt = cp_cli_interrupt_flag();
    char out[1100];
    cp_tune_default_out(batch ? batch : args.positional[0], out, sizeof out);
    o.out_dir = cp_args_get(&args, OPT_OUT) ? cp_args_get(&args, OPT_OUT) : out;
    bool json = cp_args_has(&args, CP_SO_JSON);
    if (batch)
        return tune_batch(&o, batch, jobs, json);
    o.model = args.positional[0];
    return tune_one(&o, json);
}
