/* tuner internals shared by evaluate.c, loop.c and report.c. Not a public
 * header. */
#ifndef CP_TUNER_INTERNAL_H
#define CP_TUNER_INTERNAL_H

#include "knowledge/kb_tuning.h"
#include "runner/bench.h"
#include "runner/runner.h"
#include "runner/session.h"
#include "tuner/tuner.h"

/* The shortest wait for undisturbed rounds in one evaluation (the engine's
 * default is longer: runner/measure.h). */
#define CP_TUNE_MIN_TIME_LIMIT_S 2.0

/* ---- two served configurations under one workload (load_pairs.c) ---------- */

#define CP_TUNE_MAX_PAIRS 64

/* One run of a workload: the target's figure (mean latency in ms, or
 * answered requests/s), and the p99 and throughput the constraints bound. */
struct cp_tune_load_sample {
    double value, p99_ms, throughput;
};

/* Run the workload of `seed` once against side 0 (the current
 * configuration) or side 1 (the candidate). */
typedef enum cp_status (*cp_tune_load_fn)(void *ctx, int side, uint64_t seed,
                                          struct cp_tune_load_sample *out, struct cp_diag *d);

/* Side 1 against side 0: a warm-up run each, then `pairs` (at most
 * CP_TUNE_MAX_PAIRS) pairs, which side goes first alternating, both sides
 * of a pair on the same arrivals (seed); the paired test of the log ratios
 * of the target's figure judges it (stats/verdict.h). Each pair is printed
 * on `progress` (may be NULL) after `tag`. OUT: *cmp, *b_worst (side 1's
 * highest p99 and lowest throughput over the pairs). */
enum cp_status cp_tune_load_pairs(cp_tune_load_fn run, void *ctx, int pairs, uint64_t seed,
                                  enum cp_target target, const struct cp_verdict_opts *vo,
                                  FILE *progress, const char *tag, struct cp_comparison *cmp,
                                  struct cp_tune_load_sample *b_worst, struct cp_diag *d);

/* Whether a candidate's worst runs respect c (latency<X bounds their p99,
 * throughput>Y their throughput); why not in `why`. */
bool cp_tune_load_constraints_hold(const struct cp_constraints *c,
                                   const struct cp_tune_load_sample *w, char *why, size_t n);

/* Append step s to *steps (n of them). */
enum cp_status cp_tune_load_step_add(struct cp_flow_tune_step **steps, size_t *n,
                                     const struct cp_flow_tune_step *s, struct cp_diag *d);

/* printf to f and flush; nothing when f is NULL (quiet). */
void cp_tune_progress(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A measured step's figures and outcome from its comparison (NULL: the
 * measurement failed with `failure`): accepted when significantly better
 * and the worst runs respect c; the reason otherwise. */
void cp_tune_load_judge(struct cp_flow_tune_step *s, const struct cp_comparison *cmp,
                        const char *failure, const struct cp_constraints *c,
                        const struct cp_tune_load_sample *worst);

/* ---- tune --serve in the knowledge base (serve_tune_kb.c) ----------------- */

/* The same knobs (windows within 1e-9 ms). serve_tune.c */
bool cp_serve_knobs_equal(const struct cp_serve_knobs *a, const struct cp_serve_knobs *b);

struct cp_serve_kb {
    struct cp_kb *kb;
    struct cp_kb_fingerprint fp;
    bool approximate; /* fingerprinted from a converted graph */
    struct cp_kb_hardware hw;
    int64_t model_id, hw_id, session_id;
};

/* Open the knowledge base at path (NULL: the default), fingerprint model
 * and record it and this hardware. */
enum cp_status cp_serve_kb_open(const char *path, const char *model, struct cp_serve_kb *k,
                                struct cp_diag *d);
void cp_serve_kb_close(struct cp_serve_kb *k);
/* The session of one run and its step 0 (the starting knobs). */
enum cp_status cp_serve_kb_begin(struct cp_serve_kb *k, const struct cp_serve_tune_opts *o,
                                 const struct cp_serve_knobs *start, struct cp_diag *d);
/* Step `step`, the knobs `to` measured against `from` (s: its verdict),
 * and its outcome as a strategy (when it was measured). */
enum cp_status cp_serve_kb_step(struct cp_serve_kb *k, const struct cp_serve_tune_opts *o, int step,
                                const struct cp_serve_knobs *from, const struct cp_serve_knobs *to,
                                const struct cp_flow_tune_step *s, struct cp_diag *d);
/* The session done: its evaluations, best knobs and stop reason. */
enum cp_status cp_serve_kb_finish(struct cp_serve_kb *k, const struct cp_serve_tune_opts *o,
                                  const struct cp_serve_tune_result *r, struct cp_diag *d);
/* The serving strategies recorded on models at least
 * CP_TUNE_HISTORY_MIN_SIMILARITY similar on this hardware, best first
 * (cp_kb_strategy_hits_free(*hits, *n)). */
enum cp_status cp_serve_kb_hints(struct cp_serve_kb *k, struct cp_kb_strategy_hit **hits, size_t *n,
                                 struct cp_diag *d);
/* "serve:max_batch=2 serve:threads=1": the knobs b sets that a does not
 * have. */
void cp_serve_kb_delta(const struct cp_serve_knobs *a, const struct cp_serve_knobs *b, char *out,
                       size_t n);
/* cur with delta's knobs set, into out; false when the delta is not a
 * serving delta, sets a value out of range (threads above cores, batching
 * when !batch_ok) or changes nothing. */
bool cp_serve_kb_apply(const char *delta, const struct cp_serve_knobs *cur, int cores,
                       bool batch_ok, struct cp_serve_knobs *out);

/* ---- racing what-ifs (whatif.c) -------------------------------------------- */

/* Measure the changed model of `challenger` against the one of `leader`
 * into out (gain: the challenger's advantage; out->measured false and
 * out->note when it could not be). Errors stop the race. */
typedef enum cp_status (*cp_whatif_race_fn)(void *ctx, const struct cp_whatif *leader,
                                            const struct cp_whatif *challenger,
                                            struct cp_whatif_race *out, int rounds,
                                            struct cp_diag *d);

/* The race of cp_tune_whatif_analysis over findings f and what-ifs w (n,
 * already ranked): each finding ranked 2..top that was measured, respects
 * the constraints and whose CI overlaps the first's is raced against the
 * first; a challenger faster by at least CP_WHATIF_DRIFT_POINTS, at p <
 * alpha, moves to the top. */
enum cp_status cp_whatif_race_top(struct cp_finding *f, struct cp_whatif *w, size_t n, size_t top,
                                  int rounds, double alpha, cp_whatif_race_fn race, void *ctx,
                                  struct cp_diag *d);

/* ---- int8 calibration (calibrate.c) --------------------------------------- */

#define CP_CALIB_BINS 2048

/* What calibration keeps of one tensor: its extent (pass 0) and a
 * histogram over it (pass 1; of |x| over [0, max |x|] for entropy). */
struct cp_calib_acc {
    double min, max;
    int64_t count;
    int64_t hist[CP_CALIB_BINS];
};

/* Add n values to a in pass 0 or 1 (non-finite values are skipped). */
void cp_calib_acc_add(struct cp_calib_acc *a, const float *v, int64_t n, int pass,
                      enum cp_calib_method m);

/* The range [lo, hi] method m takes from a (percentile in %, e.g. 99.999):
 * minmax the extent; percentile both tails clipped at 100 - p and p;
 * entropy the threshold T of least KL divergence between the |x|
 * histogram and its 8-bit quantization, [0, T] for a tensor without
 * negative values, else [-T, T]. */
void cp_calib_range(const struct cp_calib_acc *a, enum cp_calib_method m, double percentile,
                    double *lo, double *hi);

/* The tensor names to calibrate in source graph g: input 0 and output 0 of
 * every Conv/MatMul/Gemm `canon` lists (NULL: all), and the names the
 * conversion may give them (a folded Pad's input, a folded
 * BatchNormalization's output). OUT: *out (n malloc'ed strings). */
enum cp_status cp_calib_tensors(const struct cp_graph *g, const char *canon, char ***out, size_t *n,
                                struct cp_diag *d);

/* The Conv/MatMul/Gemm nodes of the source model c->model with an f32
 * input (input shapes from c), by ONNX name. OUT: *out (n malloc'ed
 * strings; free with cp_calib_names_free). */
enum cp_status cp_calib_nodes(const struct cp_convert_config *c, char ***out, size_t *n,
                              struct cp_diag *d);
void cp_calib_names_free(char **v, size_t n);

/* Reference outputs of the unconverted model at one batch. */
struct cp_tune_ref {
    int batch;
    struct cp_host_tensor *out;
    size_t n;
};

/* A proposal waiting to be evaluated. */
struct cp_tune_proposal {
    struct cp_delta delta;
    char source[96];
    double expected_gain; /* NaN unknown */
    char title[160];      /* what the finding said, for the report */
    /* Alternatives of one knob share a race key ("layout_policy",
     * "threads", "kernel:NODE"): consecutive ones are raced (loop.c). ""
     * for a proposal raced with none. */
    char race[160];
};

struct cp_tune_ctx {
    const struct cp_tune_opts *o;
    struct cp_tune_result *r;
    char onnx[1024]; /* the source model */
    char source_hash[33];
    char name[128]; /* its stem */
    struct cp_kb *kb;
    struct cp_kb_fingerprint fp;
    struct cp_kb_hardware hw;
    int64_t model_id, hw_id;
    struct cp_kb_session sess;
    int cores;
    uint64_t t0; /* monotonic start, for the time limit and progress */
    struct cp_tune_ref refs[8];
    /* the last precision check's loss for each constraint of
     * o->constraints (precision_loss ones; per output where one is named) */
    double con_loss[CP_CONSTRAINTS_MAX];
    size_t n_refs;
    char (*seen)[48]; /* keys of points evaluated (or the baseline) */
    size_t n_seen, cap_seen;
    /* the current best */
    char best_om[1100];
    char best_trace[1100];
    int64_t best_run;
    int64_t best_candidate_id;
    int next_step;
    bool batch_failed; /* a batch candidate could not be planned: the model fixes it */
    bool prec_planned; /* the per-node precision plan ran (once a session) */
    bool have_prec_proposal;
    struct cp_tune_proposal prec_proposal; /* its proposal, offered until evaluated */
    bool int8_planned;                     /* the int8 plan ran (once a session) */
    bool have_int8_proposal;
    struct cp_tune_proposal int8_proposal;
};

/* ---- precision_plan.c: the latency model's profile ---- */

/* One kernel's time per execution: its node and the first ONNX node it
 * stands for (its first origin). */
struct cp_tune_node_time {
    char *node, *origin;
    double ns;
};

/* Two models measured interleaved with a trace (out_dir/TRACE_NAME.db):
 * the medians and every kernel's time, side 0 and side 1. */
struct cp_tune_pair_profile {
    double median_ns[2];
    struct cp_tune_node_time *t[2];
    size_t n[2];
};

enum cp_status cp_tune_profile_pair(struct cp_tune_ctx *c, const char *om_a,
                                    const struct cp_tune_point *pa, const char *om_b,
                                    const char *trace_name, struct cp_tune_pair_profile *out,
                                    struct cp_diag *d);
void cp_tune_pair_profile_release(struct cp_tune_pair_profile *p);
/* Every kernel's time in run `run` (< 0: the last) of a trace store. */
enum cp_status cp_tune_trace_node_times(const char *trace, int64_t run,
                                        struct cp_tune_node_time **out, size_t *n,
                                        struct cp_diag *d);
void cp_tune_node_times_free(struct cp_tune_node_time *v, size_t n);

/* The summed time of the kernels of node `name` (or, by_origin, of the
 * kernels standing first for ONNX node `name`); NaN when none. */
double cp_tune_node_time_of(const struct cp_tune_node_time *v, size_t n, const char *name,
                            bool by_origin);

/* ---- loop.c ---- */

/* Whether a point's key was evaluated (or is the baseline). */
bool cp_tune_is_seen(const struct cp_tune_ctx *c, const char *key);

/* ---- proposals.c ---- */

struct cp_tune_proposals {
    struct cp_tune_proposal *p;
    size_t n, cap;
};

/* A knob that failed for structural reasons: no step is spent on it. */
bool cp_tune_knob_blocked(const struct cp_tune_ctx *c, const struct cp_delta *dl);
/* Whether `dl` applied to `best` gives a point evaluated already. */
bool cp_tune_point_seen(const struct cp_tune_ctx *c, const struct cp_tune_point *best,
                        const struct cp_delta *dl);
/* Append the proposals of each source for the current best, in the
 * loop's order: the plans, the knowledge base, the rules, the space. */
void cp_tune_propose_plans(struct cp_tune_ctx *c, struct cp_tune_proposals *ps,
                           const struct cp_tune_point *best);
void cp_tune_propose_kb(struct cp_tune_ctx *c, struct cp_tune_proposals *ps,
                        const struct cp_tune_point *best);
void cp_tune_propose_rules(struct cp_tune_ctx *c, struct cp_tune_proposals *ps,
                           const struct cp_tune_point *best);
void cp_tune_propose_space(struct cp_tune_ctx *c, struct cp_tune_proposals *ps,
                           const struct cp_tune_point *best);

/* Record a point's key as evaluated (or known), so no step is spent on it. */
enum cp_status cp_tune_mark_seen(struct cp_tune_ctx *c, const char *key, struct cp_diag *d);

/* ---- regions.c ---- */

/* A conv region of a converted model (LayoutTransformPass's): the nodes
 * that keep their activations NHWC or blocked, connected. */
struct cp_tune_region {
    char name[256]; /* the ONNX node of its first convolution (else first node) */
    bool nhwc;      /* its first node writes NHWC (else a blocked layout) */
    bool has_conv;
    size_t nodes;
    int32_t root; /* internal */
};

/* The conv regions of `om`, in the order of their first node. OUT: *out
 * (caller frees), *n. */
enum cp_status cp_tune_conv_regions(const char *om, struct cp_tune_region **out, size_t *n,
                                    struct cp_diag *d);

/* ---- precision_plan.c ---- */

/* Plan per-node precision for the current best when a precision_loss
 * constraint rules out whole-model bf16 (tuner/tuner.h). Fills
 * c->r->prec; when a mix fits, *made and *out (source "plan:precision").
 * The whole-model bf16 point is marked seen when it breaks the budget. */
enum cp_status cp_tune_precision_plan(struct cp_tune_ctx *c, struct cp_tune_proposal *out,
                                      bool *made, struct cp_diag *d);

/* precision_loss of point p, converted as <out>/<name>.om (a precision
 * check; cp_tune_precision_share then gives its share of the bounds). */
enum cp_status cp_tune_loss_of(struct cp_tune_ctx *c, const struct cp_tune_point *p,
                               const char *name, double *loss, struct cp_diag *d);

/* ---- int8_plan.c ---- */

/* Plan int8 nodes on top of the best float point when o->int8 is set and a
 * precision_loss bound is given: calibrate, check every candidate in int8,
 * profile, assemble and verify as the precision plan does. Fills c->r->int8;
 * when some nodes fit with a gain, *made and *out (source "plan:int8"). */
enum cp_status cp_tune_int8_plan(struct cp_tune_ctx *c, struct cp_tune_proposal *out, bool *made,
                                 struct cp_diag *d);

/* ---- evaluate.c ---- */

/* Convert point p to <out>/<name>.om (its switch file beside it). OUT:
 * om_path[1100]. */
enum cp_status cp_tune_convert(struct cp_tune_ctx *c, const struct cp_tune_point *p,
                               const char *name, char om_path[1100], struct cp_diag *d);

/* Open a converted point for running, inputs set (seeded or the user's),
 * recording into `rec` when not NULL. */
enum cp_status cp_tune_open(struct cp_tune_ctx *c, const struct cp_tune_point *p,
                            const char *om_path, struct cp_trace_recorder *rec,
                            struct cp_session *s, struct cp_diag *d);

/* precision_loss (percent) of a session's outputs against the reference of
 * its batch (computed on first use). The session's plan is run once. */
enum cp_status cp_tune_precision(struct cp_tune_ctx *c, const struct cp_tune_point *p,
                                 struct cp_session *s, double *loss, struct cp_diag *d);

/* Whether the last precision check breaks a precision_loss constraint
 * (over all outputs, or of one output); the reason when it does. */
bool cp_tune_precision_breaks(const struct cp_tune_ctx *c, char *why, size_t n);

/* The last precision check as the largest share of its bound any
 * precision_loss constraint uses (1: at the bound); NaN without one. */
double cp_tune_precision_share(const struct cp_tune_ctx *c);

/* Why a measured candidate was not an improvement, in the words its reason
 * and the reports use. */
enum cp_tune_why_not {
    CP_WHY_NOT_WORSE = 0,       /* "significantly worse" */
    CP_WHY_NOT_CANNOT_WIN,      /* a look stopped it: its optimistic gain misses the threshold */
    CP_WHY_NOT_BELOW_THRESHOLD, /* "a real change, but below the threshold" */
    CP_WHY_NOT_INCONCLUSIVE,    /* "not significant (inconclusive)": large, not significant */
    CP_WHY_NOT_NO_CHANGE,       /* "no significant change" */
    CP_WHY_NOT_LOADED,          /* a thread count that won on a loaded machine */
};

/* A candidate that changes the thread count is not accepted on a
 * measurement whose rounds were mostly disturbed: on a loaded machine
 * fewer threads win because the others are taken, and that verdict does
 * not carry over to the machine the model will run on. */
#define CP_TUNE_LOADED_SHARE 0.5

/* The case of step s (measured, not improved) under o's verdict options. */
enum cp_tune_why_not cp_tune_why_not(const struct cp_tune_opts *o, const struct cp_tune_step *s);
const char *cp_tune_why_not_text(enum cp_tune_why_not w);

/* Weights + activation arena of a session's plan. */
uint64_t cp_tune_memory(const struct cp_session *s);

/* Bench a point alone with a trace (the baseline): fills *median_ns and the
 * run id in the trace at trace_path. */
/* The measurement policy of every tuning evaluation (evaluate.c): the
 * engine's, with the session's warm-up, rounds, priority, inputs and
 * interrupt flag. */
void cp_tune_policy(const struct cp_tune_ctx *c, struct cp_bench_request *q);

enum cp_status cp_tune_bench(struct cp_tune_ctx *c, const struct cp_tune_point *p,
                             const char *om_path, const char *trace_path, double *median_ns,
                             double *items_s, uint64_t *memory, int64_t *run_id, struct cp_diag *d);

/* Measure candidate b against the current best a, interleaved, into
 * trace_path (run of a, then run of b): with the engine, or as
 * o->measure gives the rounds (`kind` says which measurement it is). The
 * verdict follows the target:
 * latency (lower is better) or throughput (items per second, higher is
 * better); for the memory target, latency must not have regressed. Fills
 * step's measured figures (gain, CI, p, medians). OUT: *b_run (the
 * candidate's run in the trace), *improved (the verdict says b is better,
 * or for memory: not worse), *res (the paired rounds, subject 0 = a; release
 * with cp_measurement_release). Ctrl-C (o->interrupt) stops the measurement
 * and fails the evaluation. */
enum cp_status cp_tune_ab(struct cp_tune_ctx *c, enum cp_tune_ab_kind kind,
                          const struct cp_tune_point *a, const char *a_om,
                          const struct cp_tune_point *b, const char *b_om, const char *trace_path,
                          struct cp_tune_step *step, int64_t *b_run, bool *improved,
                          struct cp_measurement *res, struct cp_diag *d);

void cp_tune_refs_release(struct cp_tune_ctx *c);

/* ---- report.c ---- */

/* Progress line for a finished step. */
void cp_tune_progress_step(const struct cp_tune_ctx *c, const struct cp_tune_step *s);
void cp_tune_progress_note(const struct cp_tune_ctx *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The steps on the Pareto front of (latency, precision_loss, memory), in
 * step order (tuner/report.c). Caller frees; NULL when out of memory. */
size_t *cp_tune_pareto_steps(const struct cp_tune_result *r, size_t *n);
/* report.html and report.pdf beside report.md, from its Markdown `md`, with
 * the session's charts (tuner/report_doc.c); their paths into r. */
enum cp_status cp_tune_write_report_doc(const struct cp_tune_opts *o, struct cp_tune_result *r,
                                        const struct cp_buf *md, struct cp_diag *d);

#endif
