/*
 * runner/bench: benchmarking model files, the whole way.
 *
 * What `cannprof bench` does, as a library the tuner and other callers use
 * too: open one model (a plain benchmark) or two (an interleaved A/B
 * comparison), feed them the same inputs, measure them under one policy
 * (runner/measure.h), record the trace when asked, and summarise: latency
 * statistics over every iteration and over the undisturbed ones, memory,
 * throughput, and with two models the verdict on the second against the
 * first (stats/verdict.h; lower latency is better). Nothing here prints.
 */
#ifndef CP_RUNNER_BENCH_H
#define CP_RUNNER_BENCH_H

#include "runner/measure.h"
#include "runner/session.h"
#include "stats/verdict.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cp_bench_request {
    const char *models[2]; /* .om or .onnx paths; models[1] NULL: one model */
    /* Per model: threads, batch, input_shape, buffer_optimize (model_path
     * and trace are set here). */
    struct cp_session_opts session[2];
    /* Feed both models one set of inputs, checked to fit both (bench
     * --vs); false: each model gets its own, made the same way (the tuner,
     * whose candidates may change the batch). */
    bool same_inputs;
    const char *const *inputs; /* "--input NAME=FILE" values, n_inputs of them */
    size_t n_inputs;
    uint64_t seed;                   /* of random inputs */
    struct cp_measure_policy policy; /* threads and min_rounds are set here */
    const char *trace_path;          /* NULL: no trace */
    const char *kind;                /* run kind in the trace; NULL: "bench" or "bench-ab" */
    bool perf;                       /* with a trace: perf counters of the measured loop */
    struct cp_verdict_opts verdict;  /* two models */
};

/* Defaults: one model, all cores, the model's batch and buffer reuse, the
 * same inputs, seed 0, cp_measure_policy_init, no trace,
 * cp_verdict_opts_init. */
void cp_bench_request_init(struct cp_bench_request *r);

struct cp_bench_result {
    size_t n_models;
    struct cp_measurement m;
    struct cp_summary all[2];         /* every iteration of each model (ns) */
    struct cp_summary undisturbed[2]; /* the undisturbed ones; n = 0 when none */
    int64_t items[2];                 /* items one run processes (batch) */
    double items_per_s[2];            /* from the mean over every iteration */
    struct cp_mem_report mem[2];
    uint64_t peak_rss;
    int threads;              /* of the first model's runtime (the probe's: the larger) */
    char config_id[2][17];    /* the .om's config id; "" for an .onnx */
    int64_t run_ids[2];       /* runs in the trace; 0 without one */
    struct cp_comparison cmp; /* two models: B against A on latency */
    bool cmp_undisturbed;     /* the verdict compared undisturbed rounds only */
};

/* Run the request. Errors: a model that cannot be opened or planned, inputs
 * that do not fit (or differ between the two models: CP_ERR_INVALID naming
 * the input), a trace that cannot be written (CP_ERR_WRITE), a policy out
 * of range. OUT: *res (release with cp_bench_result_release, also after a
 * failure). */
enum cp_status cp_bench_models(const struct cp_bench_request *req, struct cp_bench_result *res,
                               struct cp_diag *d);
void cp_bench_result_release(struct cp_bench_result *res);

/* ---- separate runs -------------------------------------------------------- */

/* Two processes of one model measure further apart than two runs in one
 * process (thread placement, code and data layout, the machine's state when
 * each starts), and no test on one run's iterations can see that. So
 * `bench --runs N` measures in N processes, one after the other: each a
 * fresh child (fork) that runs cp_bench_models and sends its result back;
 * with a trace, each stores its run and the runs are tied into one group
 * (cp_trace_store_set_run_group), which `cannprof validate` compares run
 * against run. The parent does nothing before forking that a child could
 * inherit half-made (no runtime, no threads). */

#define CP_BENCH_MAX_RUNS 64

struct cp_bench_runs {
    size_t n;                     /* runs measured (fewer than asked when interrupted) */
    struct cp_bench_result *runs; /* n results */
    double median_of_medians_ns;  /* the runs' medians (undisturbed iterations when probed) */
    double min_median_ns, max_median_ns;
    double cv_of_medians; /* sd / mean of the runs' medians; 0 for one run */
    bool interrupted;
};

/* Run the request (one model) in `runs` processes (1 .. CP_BENCH_MAX_RUNS).
 * A child that fails passes its error back (status and message); one that
 * dies is CP_ERR_INTERNAL naming the run and the signal. OUT: *out (release
 * with cp_bench_runs_release, also after a failure). */
enum cp_status cp_bench_models_runs(const struct cp_bench_request *req, int runs,
                                    struct cp_bench_runs *out, struct cp_diag *d);
void cp_bench_runs_release(struct cp_bench_runs *r);

#endif
