/*
 * tuner: the closed loop. Profile a model, diagnose it, re-convert
 * candidates, measure each against the current best, keep only real
 * improvements that respect the constraints, and remember what worked.
 *
 * A *point* is one place in the knob space: a conversion config plus the
 * runtime settings (threads, batch). A *delta* is a change of some knobs,
 * written as canonical text so that it can be stored, compared and shared
 * between models ("layout_policy=nchw precision_mode=allow_mix_precision_bf16
 * switch:FlashAttentionFusionPass=on threads=1 batch=8"; items sorted by
 * key). Findings of the rule engine, strategies of the knowledge base and
 * the neighbours of the current best in the knob space all become deltas.
 *
 * cp_tune runs the loop of docs/tuning.md:
 *
 *   1. baseline: convert the given config (or the defaults), bench it with a
 *      trace;
 *   2. reference: fp32 outputs of the unconverted ONNX model on seeded
 *      inputs (or the user's), the yardstick of precision_loss;
 *   3. proposals: the knowledge base's strategies for similar models first,
 *      then the findings of the rule engine on the current best's trace (by
 *      expected gain, refined by the rule's history), then the untried
 *      single-knob neighbours of the current best;
 *   4. each proposal: convert; check memory; check precision against the
 *      reference; measure it interleaved against the current best
 *      (runner/measure.h); accept only when the verdict is "improved"
 *      (significant and above the threshold) and every constraint holds;
 *   5. after an acceptance, diagnose the new best again;
 *   6. stop when no proposal is left, the budget or the time limit is
 *      reached, the target is met, or an interrupt was requested.
 *
 * Everything is recorded in the knowledge base as it happens (session,
 * candidates, raw samples, strategies), so an interrupted run resumes where
 * it stopped when the same command runs again.
 */
#ifndef CP_TUNER_TUNER_H
#define CP_TUNER_TUNER_H

#include "report/doc.h"
#include "atc_bridge/convert.h"
#include "core/core.h"
#include "core/json.h"
#include "knowledge/kb_tuning.h"
#include "rules/constraints.h"
#include "rules/rules.h"
#include "runner/measure.h"
#include "stats/verdict.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

/* ---- points and deltas --------------------------------------------------- */

struct cp_tune_point {
    struct cp_convert_config cfg;
    int threads; /* runtime threads; 0: all cores */
    int batch;   /* static batch (dimension 0 of every input); 0: the model's */
};

#define CP_DELTA_MAX_ITEMS 24

struct cp_delta_item {
    char key[96];     /* "layout_policy", "switch:GeluFusionPass", "threads", "batch" */
    char value[1100]; /* "nchw", "on", "1", "8"; keep_dtype: a file's path */
};

struct cp_delta {
    size_t n;
    struct cp_delta_item items[CP_DELTA_MAX_ITEMS];
};

/* Parse "k=v k=v ..." (blank-separated; "" is the empty delta). Keys: the
 * convert flags layout_policy, precision_mode, buffer_optimize,
 * op_select_implmode, keep_dtype (a --keep_dtype file, read by
 * cp_delta_apply; "" is written "-" and means no list), layout_regions
 * ("NODE:POLICY;..." as --layout_regions takes it; "-" for none); switch:<Pass>
 * (on/off; switch:ALL=on clears every off switch); threads; batch. Values
 * are checked by cp_delta_apply. Errors name the item. */
enum cp_status cp_delta_parse(const char *text, struct cp_delta *out, struct cp_diag *d);

/* Canonical text: items sorted by key, the last value of a repeated key
 * winning. Appended to `out`. */
void cp_delta_format(const struct cp_delta *dl, struct cp_buf *out);

/* The delta a rule finding proposes: convert flags ("--layout_policy=nchw"
 * -> layout_policy=nchw; "--dynamic_batch_size=..." is left to the runtime
 * "--batch=N", which becomes batch=N), fusion-switch lines ("Pass:on" ->
 * switch:Pass=on) and runtime flags ("--threads=1" -> threads=1). A flag
 * the tuner cannot turn is CP_ERR_UNSUPPORTED naming it. */
enum cp_status cp_delta_from_change(const struct cp_change *c, struct cp_delta *out,
                                    struct cp_diag *d);

/* out = p with the delta applied. Values are validated as `cannprof
 * convert` validates flags; errors name the item. */
enum cp_status cp_delta_apply(const struct cp_tune_point *p, const struct cp_delta *dl,
                              struct cp_tune_point *out, struct cp_diag *d);

/* The delta that turns a into b (knobs the tuner turns only). */
void cp_delta_between(const struct cp_tune_point *a, const struct cp_tune_point *b,
                      struct cp_delta *out);

/* A point's identity: the config id (16 hex) + "/t<threads>/b<batch>".
 * out[48]. */
void cp_tune_point_key(const struct cp_tune_point *p, char out[48]);

/* The point as JSON {"config":{...},"threads":N,"batch":N,"command":"cannprof convert ..."}
 * (core/json.h), and back (the command is for people and is not read
 * back). cp_tune_point_to_json returns a new reference (json_decref), NULL
 * when out of memory; cp_tune_point_json appends the same object as
 * compact text to `out` (out of memory marks `out` failed). */
json_t *cp_tune_point_to_json(const struct cp_tune_point *p);
void cp_tune_point_json(const struct cp_tune_point *p, struct cp_buf *out);
enum cp_status cp_tune_point_from_json(struct cp_tune_point *p, const char *json,
                                       struct cp_diag *d);

/* The single-knob neighbours of p in the knob space (docs/tuning.md): other
 * layout policies, the other precision mode, threads 1 and all cores, and
 * for the throughput target larger batches, for the memory target buffer
 * reuse. OUT: *out (caller frees), *n. */
enum cp_status cp_tune_neighbours(const struct cp_tune_point *p, enum cp_target target, int cores,
                                  struct cp_delta **out, size_t *n, struct cp_diag *d);

/* ---- measurements in place of the engine's --------------------------------- */

/* Which interleaved measurement the tuner asks for. */
enum cp_tune_ab_kind {
    CP_TUNE_AB_CANDIDATE = 0, /* a candidate against the current best */
    CP_TUNE_AB_CONFIRM,       /* the same again, after it came out improved */
    CP_TUNE_AB_FINAL,         /* the best against the baseline, at the end */
};

/* One interleaved measurement: subject 0 is `a` (the current best; the
 * baseline in the final check), subject 1 is `b` (the candidate; the best
 * in the final check), each a point and its converted .om. */
struct cp_tune_ab_request {
    enum cp_tune_ab_kind kind;
    int step; /* the candidate's step; 0 for the final check */
    const struct cp_tune_point *a, *b;
    const char *a_om, *b_om;
    int64_t rounds, warmup; /* what the engine would run (the final check: twice the rounds) */
};

/* A measurement in place of the engine's (cp_tune_opts.measure): a caller
 * that replays known figures (tests, a what-if over recorded rounds) fills
 * *out, which the tuner gives zeroed, with the paired rounds of q as
 * runner/measure.h describes them: n_subjects 2, n >= 2 rounds, ns[0] and
 * ns[1] of n latencies (ns) each; with `probed`, probe_ns, undisturbed and
 * n_undisturbed as the engine sets them, else those NULL and 0 (every
 * round counts). Arrays come from malloc: the tuner releases *out with
 * cp_measurement_release, after a failure too. An error status fails the
 * evaluation ("failed", with the message), as a failed measurement does;
 * so does a result that is not a pair of at least 2 rounds. */
typedef enum cp_status (*cp_tune_measure_fn)(void *ctx, const struct cp_tune_ab_request *q,
                                             struct cp_measurement *out, struct cp_diag *d);

/* ---- per-node precision (precision_plan.c) -------------------------------------
 *
 * Under a precision_loss constraint that whole-model bf16 breaks, the plan
 * finds which compute nodes can run in bf16 (the rest keep fp32 through
 * --keep_dtype), spending precision checks (one deterministic run each, no
 * timing) rather than latency evaluations:
 *
 *   1. a latency model: the best and the whole model in bf16 measured
 *      interleaved with a trace; each node's gain is its kernel time in fp32
 *      minus in bf16;
 *   2. sensitivity: each node's precision_loss with it alone in bf16;
 *   3. assembly: nodes ordered by gain per unit of squared loss (errors of
 *      independent roundings add in quadrature), the prefix whose summed
 *      squares fit the budget picked first;
 *   4. verification by bisection over the prefix length: each check runs
 *      the prefix; the longest prefix whose check fits is the plan, so the
 *      plan's loss is always a measured one.
 *
 * The plan is one proposal (source "plan:precision"), measured and accepted
 * like any other. */

#define CP_PREC_MAX_TRIALS 64

/* One node as the plan sees it. */
struct cp_prec_item {
    double gain_ns; /* its time in fp32 minus in bf16, per run */
    double loss;    /* precision_loss (%) with it alone in bf16 */
};

/* A precision check: precision_loss (%) with the items of `in_bf16` (n
 * flags) in bf16 and every other one in fp32. */
typedef enum cp_status (*cp_prec_check_fn)(void *ctx, const bool *in_bf16, size_t n, double *loss,
                                           struct cp_diag *d);

/* One verified prefix. */
struct cp_prec_trial {
    size_t k;       /* the first k items of the order in bf16 */
    double loss;    /* its measured precision_loss (%) */
    double gain_ns; /* the latency model's gain */
    bool fits;      /* loss within the budget */
};

struct cp_prec_plan {
    size_t *order; /* candidate items (faster in bf16, within the budget alone), best first */
    size_t n_order;
    size_t predicted_k; /* the prefix the quadrature sum picked */
    size_t k;           /* the plan: order[0..k) in bf16; 0 when nothing fits */
    double loss;        /* its measured precision_loss (%); NaN when k = 0 */
    double gain_ns;     /* its gain in the latency model */
    struct cp_prec_trial trials[CP_PREC_MAX_TRIALS];
    size_t n_trials; /* every check, in the order made */
};

/* Assemble and verify a plan for n items under `budget` (precision_loss %,
 * strict: loss < budget, else <=). `check` runs a candidate assignment.
 * OUT: *out (release with cp_prec_plan_release, also after a failure). */
enum cp_status cp_prec_plan_select(const struct cp_prec_item *items, size_t n, double budget,
                                   bool strict, cp_prec_check_fn check, void *ctx,
                                   struct cp_prec_plan *out, struct cp_diag *d);
void cp_prec_plan_release(struct cp_prec_plan *p);

/* What the plan found in a session, for the report. */
struct cp_tune_prec_report {
    bool ran;
    char summary[384];       /* what it concluded, or why it made no proposal */
    size_t nodes;            /* nodes the bf16 modes change */
    size_t candidates;       /* of which faster in bf16 and within the budget alone */
    size_t chosen;           /* in bf16 in the plan */
    double loss_all;         /* precision_loss (%) of the whole model in bf16 */
    bool whole_fits;         /* which is within every bound: no plan needed */
    double loss_plan;        /* of the plan; NaN when none */
    double fp32_ns, bf16_ns; /* the profile's medians: the best, and it all in bf16 */
    double predicted_ns;     /* the latency model's figure for the plan */
    /* the bisection's checks: trials[].loss is the share of the tightest
     * precision bound used (1: at it; several bounds when outputs have
     * their own), trial_loss the precision_loss over all outputs */
    struct cp_prec_trial trials[CP_PREC_MAX_TRIALS];
    double trial_loss[CP_PREC_MAX_TRIALS];
    size_t n_trials;
    int checks; /* precision checks the plan spent */
};

/* What the int8 plan found in a session (int8_plan.c), for the report. */
struct cp_tune_int8_report {
    bool ran;
    char summary[384];     /* what it concluded, or why it made no proposal */
    char base[160];        /* the float point it quantizes on top of */
    char calibration[256]; /* method, samples, where from */
    size_t nodes;          /* Conv/MatMul/Gemm the pass quantized with all listed */
    size_t candidates;     /* of which faster in int8 and within the budget alone */
    size_t chosen;         /* in int8 in the plan */
    double loss_all;       /* precision_loss (%) with every candidate node in int8 */
    double loss_plan;      /* of the plan; NaN when none */
    double base_ns, int8_ns, predicted_ns; /* the profile's medians, the model's figure */
    int checks;
};

/* ---- int8 calibration (calibrate.c) --------------------------------------- */

struct cp_calib_opts {
    int threads;         /* 0: all cores */
    uint64_t seed;       /* of random inputs */
    bool all_candidates; /* every Conv/MatMul/Gemm, not only c->int8_nodes' */
    const struct cp_log *log;
};

/* Measure the activation ranges int8 quantization needs and store them in
 * c->quant_ranges (c->calibration_samples: how many samples ran). The
 * source model c->model runs unconverted in fp32 on the samples of
 * c->calibration_data (one sub-folder a sample holding NAME.pb/.npy per
 * input, or, for one input, one file a sample; at most
 * c->calibration_samples of them when set), or on c->calibration_samples
 * (default 8) seeded random inputs, with a warning that they are not
 * representative. The range of each tensor an int8 node reads or writes is
 * taken by c->calibration_method. Errors name the folder, sample or input
 * (CP_ERR_USAGE). */
enum cp_status cp_tune_calibrate(struct cp_convert_config *c, const struct cp_calib_opts *o,
                                 struct cp_diag *d);

/* ---- the loop ------------------------------------------------------------- */

struct cp_tune_opts {
    const char *model; /* .onnx, or .om whose recorded source model and config are used */
    enum cp_target target;
    struct cp_constraints constraints;
    const char *constraints_text; /* as given, for the report and the session key */
    int budget;                   /* candidate evaluations (the baseline is not one); default 12 */
    double time_limit_s;          /* 0: none */
    const char *out_dir;          /* artifacts */
    const char *kb_path;          /* NULL: the default knowledge base */
    bool keep_all;                /* keep every candidate's .om (else only best.om) */
    const char *const *inputs;    /* "--input NAME=FILE" values */
    size_t n_inputs;
    uint64_t seed; /* of random inputs */
    int threads;   /* the baseline's threads; 0: all cores */
    int rounds;    /* A/B rounds per evaluation; default 60 */
    int warmup;    /* A/B warm-up rounds; default 5 */
    /* every measurement's priority (runner/measure.h); default normal */
    enum cp_measure_priority priority;
    struct cp_verdict_opts verdict;
    bool fresh;                    /* start a new session even when one can be resumed */
    bool use_kb_strategies;        /* try strategies from similar models first (default true) */
    const char *const *rule_paths; /* rule packs; none: the defaults */
    size_t n_rule_paths;
    /* int8 post-training quantization as a knob (int8_plan.c): with a
     * precision_loss bound, the plan puts the Conv/MatMul/Gemm that gain
     * and fit into int8, calibrated on calibration_data (NULL: seeded
     * random inputs, with a warning) by calibration_method. */
    bool int8;
    const char *calibration_data;
    enum cp_calib_method calibration_method;
    FILE *progress;                   /* progress lines; NULL: none */
    bool progress_tty;                /* progress goes to a terminal */
    volatile sig_atomic_t *interrupt; /* set asynchronously to stop after this measurement */
    /* How a candidate is measured against the current best: NULL for the
     * measurement engine (runner/bench.h: both models run interleaved with
     * the interference probe). Otherwise measure(measure_ctx, ...) gives
     * the rounds, and everything after it runs as for measured ones: the
     * verdict (cp_measurement_compare, in the target's metric), the
     * confirmation, acceptance, the knowledge base (raw samples included),
     * the report and the step's trace, whose two runs (kind "tune-replay")
     * hold the given rounds with each model's kernels and memory. The
     * baseline's own bench (its trace and the diagnosis of it) is measured
     * as always. */
    cp_tune_measure_fn measure;
    void *measure_ctx;
};

/* Defaults: latency, no constraints, budget 12, no time limit, 60 rounds,
 * 5 warm-up rounds, cp_verdict_opts_init, KB strategies on. */
void cp_tune_opts_init(struct cp_tune_opts *o);

/* ---- sequential looks: dropping clear losers early ---------------------------
 *
 * A candidate's rounds run in CP_TUNE_LOOK_BLOCKS blocks. After each block
 * but the last, a look asks whether even the optimistic end of the gain's
 * confidence interval is below the threshold; if so the candidate cannot be
 * accepted and its measurement stops there (futility). The interval's level
 * spends CP_TUNE_FUTILITY_BETA over the looks (Bonferroni: each look at
 * 1 - 2 beta / looks two-sided), so a candidate truly better by the
 * threshold is dropped with probability at most beta over all of them.
 * Only losers stop: an acceptance still needs every round and the
 * confirmation, so looking never raises the false-acceptance rate. Not for
 * the memory target, whose candidates are accepted when latency holds. */
#define CP_TUNE_LOOK_BLOCKS     4
#define CP_TUNE_FUTILITY_BETA   0.05
#define CP_TUNE_LOOK_MIN_ROUNDS 8 /* undisturbed rounds a look needs to judge */

struct cp_tune_futility {
    enum cp_target target;
    struct cp_verdict_opts verdict; /* the step's test and threshold */
    int64_t items[2];               /* items per run of each side (throughput) */
    int looks_max;                  /* CP_TUNE_LOOK_BLOCKS - 1 */
    int looks;                      /* made so far */
    double upper;                   /* the last judged look's optimistic gain bound; NaN */
    int64_t stopped_at;             /* rounds when it stopped; 0: it did not */
};

/* One look at the rounds so far (subject 0 the best, 1 the candidate):
 * true when the candidate cannot be better by the threshold. Counts the
 * look; after looks_max looks it always says false. */
bool cp_tune_futile(struct cp_tune_futility *f, const struct cp_measurement *so_far);

/* One evaluated proposal. */
struct cp_tune_step {
    int step;
    char delta[2048];           /* canonical text */
    char source[96];            /* "kb", "rule:<name>", "space" */
    enum cp_step_status status; /* knowledge/kb_tuning.h: its name is what reports print */
    char reason[512];
    double expected_gain; /* fraction of latency (or throughput) gained; NaN unknown */
    double measured_gain, ci_lo, ci_hi, p; /* NaN when not measured */
    double precision_loss;                 /* percent; NaN when not measured */
    uint64_t memory_bytes;
    double before_ns, after_ns; /* medians of the current best and the candidate */
    char om_path[1100], trace_path[1100];
    int64_t rounds;           /* rounds of its interleaved measurement; 0: not measured */
    bool stopped_early;       /* a look found it could not win (futility) */
    double upper;             /* then: the optimistic gain bound it stopped on */
    bool loaded;              /* a thread-count win held back: most rounds were disturbed */
    double undisturbed_share; /* of its measurement's rounds; NaN without the probe */
};

/* Alternatives of one knob (the layout policies, thread counts, the other
 * kernels of one node) are raced: up to CP_TUNE_RACE_MAX of them measured
 * against the same best, each with its futility looks, an improvement kept
 * only when Holm's procedure across the race rejects at --alpha, the
 * largest of those confirmed and accepted (docs/tuning.md). */
#define CP_TUNE_RACE_MAX 3

struct cp_tune_result {
    int64_t session_id;
    bool resumed;
    bool already_done; /* the session had finished: nothing was measured */
    struct cp_tune_point baseline, best;
    double baseline_ns, best_ns;           /* medians, per run of the plan */
    double baseline_items_s, best_items_s; /* throughput */
    uint64_t baseline_memory, best_memory;
    double baseline_precision_loss, best_precision_loss;
    struct cp_tune_step *steps;
    size_t n_steps;
    int evaluations;      /* candidate steps, what --budget counts */
    int latency_evals;    /* of which measured interleaved against the best */
    int confirmations;    /* second measurements of an improvement */
    int precision_checks; /* deterministic precision runs (this process; not resumed) */
    int profile_runs;     /* traced measurements for the latency model (the plan's) */
    int early_stops;      /* latency evaluations a look stopped (futility) */
    int races;            /* groups of alternatives raced (each candidate is an evaluation) */
    int64_t rounds_spent; /* interleaved rounds of every latency evaluation */
    struct cp_tune_prec_report prec;
    struct cp_tune_int8_report int8;
    char stop_reason[256];
    /* The best against the baseline, measured interleaved at the end (the
     * figure to quote): gain in the target's metric (latency saved, or
     * throughput won) with its 95% CI and p-value, and the two medians of
     * that measurement. NaN when best is the baseline or it failed. */
    double final_change, final_ci_lo, final_ci_hi, final_p;
    double final_baseline_ns, final_best_ns;
    char best_om[1100];
    char report_md[1100], report_json[1100], report_html[1100], report_pdf[1100];
    bool interrupted;
};

void cp_tune_result_release(struct cp_tune_result *r);

/* Run (or resume) a tuning session. Errors: a model that cannot be read or
 * converted, a .om whose source model is gone (CP_ERR_INVALID naming it),
 * the knowledge base (CP_ERR_DB...), the output folder (CP_ERR_IO). A
 * candidate that fails to convert or run is a "failed" step, not an error.
 * OUT: *r (release with cp_tune_result_release, also after a failure). */
enum cp_status cp_tune(const struct cp_tune_opts *o, struct cp_tune_result *r, struct cp_diag *d);

/* Write report.md and report.json for r into o->out_dir, and the same
 * report as report.html and report.pdf with the tuning trajectory and the
 * Pareto front drawn (report/; paths into r).
 * `command` is the cannprof command line that produced the session. */
enum cp_status cp_tune_write_report(const struct cp_tune_opts *o, struct cp_tune_result *r,
                                    struct cp_diag *d);

/* The figures of a report.json that a summary of many sessions shows
 * (`tune --batch`). Strings are owned by the struct. */
struct cp_tune_report_row {
    char *model;                 /* the model as given to tune */
    double baseline_ms, best_ms; /* median latencies; NaN when the report has null */
    double best_precision_loss;  /* percent; NaN when null */
    double best_memory_bytes;    /* the best's memory */
    char **accepted;             /* the deltas of the accepted steps, in order */
    size_t n_accepted;
    /* Candidates measured against the best (a verdict each), and those of
     * them rejected because the verdict was inconclusive: not significant
     * although the estimated change reached the threshold. Both 0 for a
     * report written before they were counted (no "report_version"). */
    int verdicts, inconclusive;
};

/* Read back a report.json that cp_tune_write_report wrote. The file is read
 * as untrusted: one that is not JSON, or in which a field the row needs is
 * missing or of the wrong type, is CP_ERR_CORRUPT with a message naming the
 * file (and line:column, or the field); a missing file is CP_ERR_IO.
 * OUT: *out (release with cp_tune_report_row_release; zeroed on failure). */
enum cp_status cp_tune_report_read(const char *path, struct cp_tune_report_row *out,
                                   struct cp_diag *d);
void cp_tune_report_row_release(struct cp_tune_report_row *r); /* NULL ok; leaves it zeroed */

/* ---- what-if (whatif.c) ------------------------------------------------------
 *
 * A rule's expected gain is a prior: a speed-up typical of its kind of
 * change, scaled by the time share it touches. A what-if replaces it by a
 * measurement on the configuration the change will be applied to: the
 * diagnosed run's own .om (A) against its recorded config with the change
 * (B), converted and measured interleaved for a few rounds on the run's
 * threads and batch (B's own when the change sets them). Seconds, not a
 * tuning step; the gain and its 95% CI are what `suggest --measure` and
 * callers report. */

struct cp_whatif_opts {
    int rounds;                        /* interleaved rounds; default 30 */
    int warmup;                        /* default 3 */
    enum cp_measure_priority priority; /* default normal */
    enum cp_target target;             /* latency (default) or throughput */
    struct cp_verdict_opts verdict;    /* the test and its alpha */
    const char *work_dir; /* where the changed models are converted, f<N>/ a finding; NULL: a
                           * temporary folder, removed after */
    /* cp_tune_whatif_analysis: the findings ranked 2..race_top whose CI
     * overlaps the first's are raced against it (below); 0 or 1: none.
     * Default 3. Rounds of a race: race_rounds; 0 (default): 2 x rounds. */
    int race_top;
    int race_rounds;
    volatile sig_atomic_t *interrupt; /* Ctrl-C: stop, keep the prior */
};

void cp_whatif_opts_init(struct cp_whatif_opts *o);

/* What a separate measurement of the same change may differ by beyond the
 * what-if's own CI: the drift between runs on a shared machine
 * (docs/validation.md measured A/A differences up to about 1.3% between
 * interleaved runs): the larger of 2 percentage points and 10% of the
 * gain. */
#define CP_WHATIF_DRIFT_POINTS   0.02
#define CP_WHATIF_DRIFT_RELATIVE 0.10

struct cp_whatif {
    bool measured;
    char note[256];              /* why not, when !measured: no config in the trace, the model
                                  * is gone, the change does not convert, ... */
    double gain, lo, hi, p;      /* latency saved (throughput won), fraction, with its 95% CI */
    double expect_lo, expect_hi; /* the interval a later measurement should fall in: the CI
                                  * widened by the drift between runs (above) */
    double before_ns, after_ns;
    int64_t rounds;
    double seconds;                        /* conversion and measurement */
    double prior_gain, prior_lo, prior_hi; /* what the rule expected */
    int threads, batch;                    /* the changed model's session (batch 0: its own) */
    int slot;                              /* cp_tune_whatif_analysis: the finding's index when
                                            * measured (its candidate's folder) */
    /* The race against the finding ranked first, run when this one's CI
     * overlapped the first's: two what-ifs measured apart cannot order
     * changes a few points apart, one interleaved measurement of the two
     * changed models against each other can. */
    struct cp_whatif_race {
        bool run;               /* raced */
        bool measured;          /* and measured (else note says why) */
        char against[256];      /* the other finding's title */
        double gain, lo, hi, p; /* this change over the other: latency saved (throughput won) */
        int64_t rounds;
        bool won; /* ranked above the other */
        char note[200];
    } race;
};

/* Measure every finding of a diagnosis that proposes a change, replace its
 * gain and interval by the measured ones, and rank the findings again
 * (constraint-respecting first, then by gain). Then race (o->race_top):
 * each finding ranked 2..race_top whose CI overlaps the first's has its
 * changed model measured against the first's, interleaved; a challenger
 * faster by at least CP_WHATIF_DRIFT_POINTS at p < alpha ranks first (a
 * smaller difference is not one a later measurement reproduces), and the
 * race is recorded on the challenger.
 * OUT: *out, one what-if per finding in the new order (caller frees). */
enum cp_status cp_tune_whatif_analysis(struct cp_diagnosis *dg, const struct cp_whatif_opts *o,
                                       struct cp_whatif **out, struct cp_diag *d);

/* ---- tuning a flow (flow_tune.c; docs/tuning.md, "Tuning a flow") ------------------------ */

struct cp_flow_tune_opts {
    const char *flow;                  /* FLOW.toml */
    enum cp_target target;             /* latency (each run's mean) or throughput */
    struct cp_constraints constraints; /* latency<X bounds the runs' p99, throughput>Y theirs */
    int budget;                        /* candidates measured; default 8 */
    int pairs;           /* alternating runs of each side per measurement, 3..64; default 5 */
    uint64_t requests;   /* per run; default 60 */
    double rate;         /* the workload, requests/s; 0: 60% (latency) or 150% (throughput) of
                          * the flow's capacity flat out */
    int concurrency;     /* requests in flight at most; default 64 */
    bool models;         /* also tune the inference nodes' .om models (the model loop) */
    int model_budget;    /* its budget per model; default 4 */
    const char *out_dir; /* traces, the models tuned */
    const char *kb_path; /* for the model loop; NULL: the default */
    struct cp_verdict_opts verdict;
    uint64_t seed;  /* of the workload's arrivals */
    FILE *progress; /* NULL: quiet */
};

/* Defaults as above. */
void cp_flow_tune_opts_init(struct cp_flow_tune_opts *o);

struct cp_flow_tune_step {
    int round;
    char change[1300];                    /* "node.key=value" */
    char source[64];                      /* the problem it fixes, "limiting node", "model tuned" */
    double predicted_pct;                 /* the replay's change of the target's figure; NaN */
    double measured_pct, ci_lo, ci_hi, p; /* paired, from the runs; NaN when it failed */
    double before, after;                 /* the sides' medians (ms or requests/s) */
    enum cp_verdict verdict;
    bool accepted;
    char reason[512];
};

struct cp_flow_tune_result {
    double capacity;    /* requests/s flat out, the original */
    double rate;        /* the workload */
    char limiting[128]; /* the original's limiting node */
    struct cp_flow_tune_step *steps;
    size_t n_steps;
    int evaluations;
    /* the tuned flow against the original (NaN: nothing was accepted) */
    double final_pct, final_lo, final_hi, final_p;
    double baseline_value, best_value;
    char best_flow[1100]; /* the original when nothing was accepted */
};

/* Tune the flow's knobs (see flow_tune.c). A candidate that fails to run
 * is a failed step, not an error. Errors: a flow that does not load or run
 * (its message), the output folder (CP_ERR_IO). OUT: *r (release). */
enum cp_status cp_flow_tune(const struct cp_flow_tune_opts *o, struct cp_flow_tune_result *r,
                            struct cp_diag *d);
void cp_flow_tune_result_release(struct cp_flow_tune_result *r);

/* The result as JSON (NULL when out of memory) and as the text `cannprof
 * tune FLOW.toml` prints, appended to out (flow_tune_report.c). */
json_t *cp_flow_tune_json(const struct cp_flow_tune_opts *o, const struct cp_flow_tune_result *r);
void cp_flow_tune_render(const struct cp_flow_tune_opts *o, const struct cp_flow_tune_result *r,
                         struct cp_buf *out);

/* ---- a served model's runtime knobs (serve_tune.c) ------------------------------ */

/* What `cannprof serve MODEL` runs with. */
struct cp_serve_knobs {
    int max_batch;    /* --max-batch, 1 .. 256 */
    double window_ms; /* --batch-window */
    int threads;      /* --threads; 0: all cores (resolved before measuring) */
};

/* "max_batch=4 window=1.5ms threads=2" */
void cp_serve_knobs_format(const struct cp_serve_knobs *k, char *out, size_t n);
/* {"max_batch": 4, "batch_window_ms": 1.5, "threads": 2}; NULL when out of
 * memory. */
json_t *cp_serve_knobs_json(const struct cp_serve_knobs *k);

struct cp_serve_tune_opts {
    const char *model;     /* .om or .onnx */
    const char *cli;       /* the cannprof program whose `serve` is measured; NULL: this one */
    enum cp_target target; /* latency (each run's mean) or throughput */
    struct cp_constraints constraints; /* latency<X bounds the runs' p99, throughput>Y theirs */
    struct cp_serve_knobs start;       /* default: max_batch 1, no window, all cores */
    int budget;                        /* candidates measured; default 8 */
    int pairs;       /* alternating runs of each side per measurement, 3..64; default 5 */
    double run_s;    /* seconds of load per run; default 2 */
    double rate;     /* the workload, requests/s; 0: 60% (latency) or 150% (throughput) of
                      * the capacity at the starting knobs */
    int concurrency; /* requests in flight at most; default 64 */
    /* high: the tuner (the load generator) and the servers it starts run at
     * nice CP_MEASURE_HIGH_NICE throughout (runner/measure.h) */
    enum cp_measure_priority priority;
    const char *out_dir; /* the servers' logs */
    /* The run, its steps and their outcomes are recorded in the knowledge
     * base at kb_path (NULL: the default), and knobs that held on this or a
     * similar model on this hardware are tried first (use_kb_hints,
     * default true). */
    const char *kb_path;
    bool use_kb_hints;
    struct cp_verdict_opts verdict;
    uint64_t seed;  /* of the workload's arrivals */
    FILE *progress; /* NULL: quiet */
};

/* Defaults as above. */
void cp_serve_tune_opts_init(struct cp_serve_tune_opts *o);

struct cp_serve_tune_result {
    double capacity;     /* requests/s flat out at the starting knobs */
    double call_ms;      /* mean latency at a tenth of it */
    double rate;         /* the workload */
    bool batch_settable; /* a server at --max-batch 2 started */
    char batch_why[512]; /* why not */
    struct cp_serve_knobs original, best;
    struct cp_flow_tune_step *steps; /* change: "max_batch 1 -> 2"; predicted_pct NaN */
    size_t n_steps;
    int evaluations;
    char stop_reason[160];
    /* the best knobs against the starting ones (NaN: nothing was accepted,
     * or that measurement failed: final_why) */
    double final_pct, final_lo, final_hi, final_p;
    double baseline_value, best_value;
    char final_why[512];
    char command[1200];   /* `cannprof serve MODEL ...` with the best knobs */
    bool priority_raised; /* measured at high priority */
    int64_t kb_session;   /* the knowledge base's session of this run */
    char kb_path[1024];
    int kb_hints; /* serving strategies the knowledge base offered */
};

/* Tune the knobs of `cannprof serve` for o->model (see serve_tune.c). A
 * candidate that fails to start or answer is a failed step, not an error.
 * Errors: the model cannot be served at the starting knobs (its message),
 * the output folder (CP_ERR_IO), options out of range (CP_ERR_USAGE).
 * OUT: *r (release). */
enum cp_status cp_serve_tune(const struct cp_serve_tune_opts *o, struct cp_serve_tune_result *r,
                             struct cp_diag *d);
void cp_serve_tune_result_release(struct cp_serve_tune_result *r);

/* The result as JSON (NULL when out of memory) and as text appended to out
 * (flow_tune_report.c). */
json_t *cp_serve_tune_json(const struct cp_serve_tune_opts *o,
                           const struct cp_serve_tune_result *r);
void cp_serve_tune_render(const struct cp_serve_tune_opts *o, const struct cp_serve_tune_result *r,
                          struct cp_buf *out);

/* ---- suggest's report (suggest_report.c) ---------------------------------------- */

/* The report of a diagnosis `dg` of `trace` for target t under
 * `constraints` (text, may be NULL): per finding, its bottleneck, root
 * cause, expected gain and risks, the change applied to the run's recorded
 * config as a `cannprof convert` command (with its switch file and runtime
 * flags), what --measure found (w: one per finding, or NULL) and the
 * knowledge base's note (history, or NULL), titled "cannprof CMD: TRACE"
 * (CMD NULL: "suggest"). The Markdown is appended to b; the JSON is a new
 * reference (NULL when out of memory). */
void cp_suggest_markdown(const struct cp_diagnosis *dg, const char *cmd, const char *trace,
                         enum cp_target t, const char *constraints, const struct cp_whatif *w,
                         const char *history, struct cp_buf *b);
/* The Markdown as a document (report/doc.h) with charts under "Where the
 * time goes": kernel time by op type, each finding's expected gain, the top
 * kernels on the machine's roofline (when calibrated). NULL when out of
 * memory. */
struct cp_doc *cp_suggest_doc(const struct cp_diagnosis *dg, const char *cmd, const char *trace,
                              enum cp_target t, const char *constraints, const struct cp_whatif *w,
                              const char *history);
json_t *cp_suggest_json(const struct cp_diagnosis *dg, const char *trace, enum cp_target t,
                        const char *constraints, const struct cp_whatif *w, const char *history);

/* ---- the rules' measured history (history.c) --------------------------------- */

/* A rule's history counts on models at least this similar (knowledge/). */
#define CP_TUNE_HISTORY_MIN_SIMILARITY 0.5

/* What the knowledge base measured of a rule's change ("rule:NAME"
 * candidates) on models similar to fp on hardware hw (NULL: any), and the
 * prior refined by it: (prior + mean * runs) / (1 + runs), the prior
 * counting as one measurement. runs 0 (no KB, no history, an error): the
 * prior stands. */
struct cp_tune_rule_history {
    int runs;          /* measured candidates counted */
    double mean;       /* their similarity-weighted mean gain; NaN: none */
    double similarity; /* of the most similar model counted */
    double refined;    /* the prior, refined */
};
void cp_tune_rule_history(struct cp_kb *kb, const struct cp_kb_fingerprint *fp,
                          const struct cp_kb_hardware *hw, const char *rule, double prior,
                          struct cp_tune_rule_history *h);

/* Refine every finding's expected gain (and shift its interval) by its
 * rule's history for the run's model (model_path, an .om or .onnx) on this
 * hardware, record it in the finding (history_*, prior_gain), and rank the
 * findings again. The knowledge base is kb_path, else the default; one
 * that does not exist is not created, and a model that cannot be
 * fingerprinted leaves the priors as they are: `note` says which happened.
 * Errors: a knowledge base that cannot be opened. */
enum cp_status cp_tune_history_refine(struct cp_analysis *a, const char *model_path,
                                      const char *kb_path, char *note, size_t note_size,
                                      struct cp_diag *d);

/* ---- a model's fingerprint (fingerprint.c) ---------------------------------- */

/* Fingerprint an ONNX file as the tuner does: import (no input shape
 * overrides), verify, compact, infer, then cp_kb_fingerprint_graph under
 * `name` (NULL: the file's stem). OUT: *fp (cp_kb_fingerprint_release),
 * hash: the file's content hash (may be NULL). */
enum cp_status cp_tune_fingerprint_onnx(const char *path, const char *name,
                                        struct cp_kb_fingerprint *fp, char hash[33],
                                        struct cp_diag *d);

/* The fingerprint of a model the user names: an .onnx directly; a .om by
 * its source model (the file it names, else the knowledge base's record of
 * its source hash, else the converted graph itself, whose fused ops make
 * similarity approximate: then *approximate is true). OUT: *fp. */
enum cp_status cp_tune_fingerprint_model(struct cp_kb *kb, const char *path,
                                         struct cp_kb_fingerprint *fp, bool *approximate,
                                         struct cp_diag *d);

/* ---- many models (batch.c) ----------------------------------------------------- */

/* `cannprof tune --batch`: a list of models, each tuned into a folder of
 * its own under one output folder, by worker processes that share the
 * knowledge base. */
#define CP_TUNE_MAX_JOBS 64

struct cp_tune_batch {
    char **models; /* n model paths */
    char **dirs;   /* n folder names, different for every model */
    size_t n, cap;
    bool interrupted; /* after cp_tune_batch_run: Ctrl-C stopped it */
    bool failures;    /* after cp_tune_batch_run: a model failed or a worker died */
};

/* The models of a list file (one path per line, any length; blank lines
 * and # comments skipped) or a folder (every .onnx, sorted), as many as
 * there are, each with its folder name: its file stem; for stems that
 * several models share (ONNX's own test layout has a/model.onnx,
 * b/model.onnx), "<parent folder>-<stem>"; then "-2", "-3", ... Errors
 * name the list and the line. OUT: *b (release with
 * cp_tune_batch_release; empty on failure). */
enum cp_status cp_tune_batch_list(const char *src, struct cp_tune_batch *b, struct cp_diag *d);
void cp_tune_batch_release(struct cp_tune_batch *b);

/* How the jobs of a batch share the CPUs: each job that runs at once is
 * pinned to a set of CPUs of its own, so that no job's measurements are
 * disturbed by another's (a job's interference probe sees only its own
 * CPUs). Every job gets the same number of CPUs, so that no model's result
 * depends on which job tuned it; CPUs left over stay idle. */
struct cp_tune_batch_plan {
    int workers;    /* jobs that run at once, 1 .. CP_TUNE_MAX_JOBS */
    int threads;    /* each job's tuning threads (cp_tune_opts.threads) */
    size_t per_job; /* CPUs each job is pinned to */
    int *cpus;      /* the n_cpus CPUs available, ascending; job w is pinned to
                     * cpus[w * per_job .. (w + 1) * per_job) */
    size_t n_cpus;
    bool reduced; /* fewer jobs run at once than min(jobs, models) */
    char *note;   /* one line for people: how the CPUs are shared, and why
                   * fewer jobs run at once than asked */
};

/* Plan `jobs` jobs (1 .. CP_TUNE_MAX_JOBS) for `n_models` models (>= 1) on
 * the CPUs `cpus` (n_cpus >= 1 CPU numbers >= 0, any order, repeats
 * ignored); `threads` is the --threads given, 0 for none. A pure function
 * of its arguments: W = min(jobs, n_models) jobs are wanted.
 *   threads 0: min(W, CPUs) jobs, the CPUs split evenly between them
 *     (floor(CPUs / jobs) each, the rest idle: 4 CPUs and 3 jobs give one
 *     CPU each), each job's threads the size of its set;
 *   threads T <= CPUs: min(W, floor(CPUs / T)) jobs, so that jobs x T never
 *     exceeds the CPUs, each on floor(CPUs / jobs) CPUs with T threads;
 *   threads T > CPUs: one job at a time on every CPU, with its T threads.
 * When fewer than W jobs run at once, `reduced` is set and the note says
 * why ("--jobs 2 with --threads 2 needs 4 CPUs, 2 available: running 1 job
 * at a time"). Errors: CP_ERR_INVALID for arguments out of range.
 * OUT: *out (release with cp_tune_batch_plan_release; zeroed on failure). */
enum cp_status cp_tune_batch_plan_cpus(const int *cpus, size_t n_cpus, int jobs, int threads,
                                       size_t n_models, struct cp_tune_batch_plan *out,
                                       struct cp_diag *d);
void cp_tune_batch_plan_release(struct cp_tune_batch_plan *p); /* NULL ok; leaves it zeroed */

/* The CPUs of the job that tunes model i (models go to the jobs in turn:
 * model i to job i mod workers). OUT: *n. The pointer is into p->cpus. */
const int *cp_tune_batch_plan_job_cpus(const struct cp_tune_batch_plan *p, size_t model, size_t *n);

/* The CPUs this process may run on (sched_getaffinity: what taskset and
 * cgroup cpusets leave it), ascending. OUT: *cpus (caller frees), *n.
 * CP_ERR_INTERNAL when the kernel does not say. */
enum cp_status cp_tune_affinity(int **cpus, size_t *n, struct cp_diag *d);

/* A CPU list as Linux writes one ("0-3,8,10-11"), appended to `out`. */
void cp_tune_cpus_format(const int *cpus, size_t n, struct cp_buf *out);

/* The environment variable that has the OpenMP runtime bind threads to
 * CPUs of its own choosing (OMP_PROC_BIND but "false", OMP_PLACES,
 * GOMP_CPU_AFFINITY, KMP_AFFINITY), or NULL. libgomp reads it when the
 * program loads: it has bound this process to its first place already, and
 * binds a job's threads to places outside the job's CPUs. */
const char *cp_tune_batch_binding_env(void);

/* Tune every model of b into <out_root>/<its folder> by the jobs of
 * `plan` (cp_tune_batch_plan_cpus for b->n models): plan->workers worker
 * processes, each pinned to its CPUs (sched_setaffinity) before it tunes,
 * its models with `base` and plan->threads threads (its model and out_dir
 * set per model). Before pinned jobs start, a process on every CPU
 * calibrates the machine (rules/calibrate.h) unless it is cached, so that
 * no job measures the all-core figures on its own few CPUs. A model that
 * fails leaves its message in error.txt in its folder; so does every model
 * of a job that could not be pinned. Sets b->interrupted and b->failures.
 * CP_ERR_INVALID when the plan has no jobs; CP_ERR_INTERNAL when a worker
 * cannot be started. */
enum cp_status cp_tune_batch_run(const struct cp_tune_opts *base, struct cp_tune_batch *b,
                                 const struct cp_tune_batch_plan *plan, const char *out_root,
                                 struct cp_diag *d);

enum cp_tune_batch_kind {
    CP_TUNE_BATCH_DONE = 0,  /* report.json read: row */
    CP_TUNE_BATCH_FAILED,    /* error.txt: error */
    CP_TUNE_BATCH_NO_REPORT, /* neither (interrupted before it finished) */
};

struct cp_tune_batch_result {
    enum cp_tune_batch_kind kind;
    struct cp_tune_report_row row;
    char *error;
};

/* What model i of b came to, read from its folder. A report.json that
 * cannot be read as one is CP_ERR_CORRUPT naming the file
 * (cp_tune_report_read). OUT: *out (cp_tune_batch_result_release). */
enum cp_status cp_tune_batch_outcome(const struct cp_tune_batch *b, size_t i, const char *out_root,
                                     struct cp_tune_batch_result *out, struct cp_diag *d);
void cp_tune_batch_result_release(struct cp_tune_batch_result *r);

/* ---- what tune prints (render.c) ---------------------------------------------- */

/* A finished session as `tune` prints it: the model, the session, baseline
 * against best (latency, throughput, memory, precision_loss), the
 * interleaved final check, the accepted changes, where the best model and
 * the reports are. Appended to out. */
void cp_tune_summary_text(const struct cp_tune_opts *o, const struct cp_tune_result *r,
                          struct cp_buf *out);

/* Whether a batch row's best meets o's precision_loss and memory
 * constraints. */
bool cp_tune_row_constraints_met(const struct cp_tune_opts *o,
                                 const struct cp_tune_report_row *row);

/* A batch's Markdown table: its head, and model `name`'s row (its outcome,
 * or `error`; cpus: the CPUs its job ran on), appended to out. */
void cp_tune_batch_table_head(struct cp_buf *out);
void cp_tune_batch_table_row(struct cp_buf *out, const char *name,
                             const struct cp_tune_batch_result *res, const struct cp_tune_opts *o,
                             const char *cpus, const char *error);

/* The same row as a JSON object (new reference), with the model, its
 * folder under out_root and the job's threads. */
json_t *cp_tune_batch_row_json(const char *name, const char *model, const char *out_root,
                               const struct cp_tune_batch_result *res, const struct cp_tune_opts *o,
                               const char *cpus, int threads, const char *error);

#endif
