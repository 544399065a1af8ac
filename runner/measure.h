/*
 * runner/measure: the one measurement engine.
 *
 * Every timing loop of cannprof runs here, under one policy: a single
 * model's bench, an interleaved A/B comparison, the tuner's baseline and
 * its candidate-against-best decisions (and later the serving monitor). The
 * policy covers
 *
 *   - warm-up: rounds run before measuring, not recorded;
 *   - rounds: a round runs every subject once, in an order that rotates
 *     from round to round (with two subjects: A B, B A, A B, ...), so that
 *     machine drift hits all subjects alike and none always runs right
 *     after itself, in caches another one warmed; with one subject a round
 *     is an iteration;
 *   - the interference probe (runner/probe.h) after every round, outside
 *     the timed region: a round counts as undisturbed when every probe
 *     within the probe window around it saw an undisturbed machine; the
 *     probe floor it is judged against is the lower of this measurement's
 *     own and the lowest this machine showed lately (a small cache file);
 *   - the stopping rule: until `iterations` rounds ran undisturbed, capped
 *     by a time limit (by default the larger of 10 s and three times what
 *     those rounds would take undisturbed), which the result reports when
 *     it is hit; or for a fixed duration; or exactly `iterations` rounds
 *     without the probe;
 *   - Ctrl-C: an interrupt flag set asynchronously stops after the round
 *     that is running, and the result says so;
 *   - what goes into a trace (cp_measure_store): per subject a run with
 *     every round's latency as its samples, the probe as the per-iteration
 *     counter "probe_ns", the policy as run counters ("measure.*"), the
 *     plan's kernels and the recorded events, and for two subjects the
 *     meta keys that pair the runs (docs/trace-format.md).
 *
 * A subject is a callback (cp_measure_run_fn), so anything that can be run
 * and timed can be measured the same way; cp_measure_plan_subject wraps a
 * plan. Nothing here prints.
 */
#ifndef CP_RUNNER_MEASURE_H
#define CP_RUNNER_MEASURE_H

#include "core/core.h"
#include "runner/runner.h"
#include "runner/session.h"
#include "stats/stats.h"
#include "stats/verdict.h"
#include "trace/perf.h"
#include "trace/trace.h"

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CP_MEASURE_MAX_SUBJECTS 4

/* The defaults of cp_measure_policy_init. */
#define CP_MEASURE_DEFAULT_WARMUP     10
#define CP_MEASURE_DEFAULT_ITERATIONS 100
/* The default time limit is the larger of this and CP_MEASURE_LIMIT_FACTOR
 * times what the asked-for rounds take undisturbed. */
#define CP_MEASURE_MIN_LIMIT_S  10.0
#define CP_MEASURE_LIMIT_FACTOR 3.0

/* Run subject `subject` once, as iteration `iteration` (-1 in warm-up). */
typedef enum cp_status (*cp_measure_run_fn)(void *ctx, size_t subject, int32_t iteration,
                                            struct cp_diag *d);

struct cp_measure_subject {
    cp_measure_run_fn run;
    void *ctx;
    /* Optional recorder of this subject: the "warmup" and "measure"
     * application ranges are opened on it and the round is its current
     * iteration while the subject runs. Several subjects may share one. */
    struct cp_trace_recorder *trace;
};

/* A subject that runs `plan` (cp_plan_run). */
struct cp_measure_subject cp_measure_plan_subject(struct cp_plan *plan,
                                                  struct cp_trace_recorder *trace);

enum cp_measure_mode {
    CP_MEASURE_UNDISTURBED = 0, /* until `iterations` rounds ran undisturbed, or the time limit */
    CP_MEASURE_EXACT,           /* exactly `iterations` rounds; no probe */
    CP_MEASURE_DURATION,        /* for `duration_s` seconds (at least min_rounds) */
};

struct cp_measurement;

enum cp_measure_priority {
    CP_MEASURE_PRIORITY_NORMAL = 0, /* as the process runs */
    CP_MEASURE_PRIORITY_HIGH,       /* nice CP_MEASURE_HIGH_NICE while measuring */
};
#define CP_MEASURE_HIGH_NICE (-20)

/* "normal" / "high" <-> the enum; parse returns false for anything else. */
const char *cp_measure_priority_name(enum cp_measure_priority p);
bool cp_measure_priority_parse(const char *s, enum cp_measure_priority *out);

struct cp_measure_policy {
    enum cp_measure_mode mode;
    int64_t warmup;      /* rounds before measuring, >= 0 */
    int64_t iterations;  /* UNDISTURBED: undisturbed rounds wanted; EXACT: rounds; >= 1 */
    double duration_s;   /* DURATION: seconds, > 0 */
    double time_limit_s; /* UNDISTURBED: cap on the measuring, 0: the default (above) */
    /* The default limit's floor, CP_MEASURE_MIN_LIMIT_S unless a caller
     * that measures often (the tuner) wants a shorter wait. */
    double time_limit_min_s;
    /* The interference probe after every round (UNDISTURBED needs it;
     * DURATION may run it). `threads` is the number of threads it runs on:
     * the runtime's. */
    bool probe;
    int threads;
    /* Keep the lowest probe floor of this machine in the cache folder
     * (cp_probe_floor_path) and judge rounds against it too. */
    bool floor_cache;
    /* Rounds measured at the least whatever the clock says: 2 when the
     * rounds are compared, 1 otherwise. */
    int64_t min_rounds;
    /* Set asynchronously (a signal handler) to stop after the running
     * round; NULL: none. */
    volatile sig_atomic_t *interrupt;
    /* Counters of the measured loop only, paused around the probe; NULL:
     * none. */
    struct cp_perf *perf;
    /* What the probe reads after round `round`, in nanoseconds: NULL for
     * the real probe (runner/probe.h). A caller that replays a known
     * machine (tests, a simulation of a busy neighbour) gives its own. */
    uint64_t (*probe_fn)(void *ctx, size_t round);
    void *probe_ctx;
    /* A sequential rule: every `look_every` measured rounds (>= 2), look_fn
     * sees the rounds so far (undisturbed flags as the end would set them)
     * and returns true to stop there (CP_MEASURE_STOP_EARLY). A caller that
     * looks repeatedly must spend its error rate across the looks (the
     * tuner's futility rule does: tuner/tuner.h). NULL: no looks. */
    bool (*look_fn)(void *ctx, const struct cp_measurement *so_far);
    void *look_ctx;
    int64_t look_every;
    /* CP_MEASURE_PRIORITY_HIGH: every thread of the process runs at nice
     * CP_MEASURE_HIGH_NICE from warm-up to the end (core/host.h), so that
     * other work on the machine takes little of the CPUs from the subjects;
     * each thread's value is restored after. Without the right to raise it
     * the measurement goes on at normal priority and says why. */
    enum cp_measure_priority priority;
};

/* mode UNDISTURBED, warm-up 10, 100 iterations, the default time limit
 * (at least CP_MEASURE_MIN_LIMIT_S), probe on with the floor cache, 1
 * thread, min_rounds 1. */
void cp_measure_policy_init(struct cp_measure_policy *p);

/* Why the measurement stopped. */
enum cp_measure_stop {
    CP_MEASURE_STOP_TARGET = 0,  /* the undisturbed rounds asked for */
    CP_MEASURE_STOP_COUNT,       /* EXACT: the rounds asked for */
    CP_MEASURE_STOP_DURATION,    /* DURATION: the time asked for */
    CP_MEASURE_STOP_TIME_LIMIT,  /* UNDISTURBED: the time limit, short of the target */
    CP_MEASURE_STOP_INTERRUPTED, /* the interrupt flag */
    CP_MEASURE_STOP_EARLY,       /* the policy's look_fn said so */
};
const char *cp_measure_stop_name(enum cp_measure_stop s); /* "target", "time limit", ... */

struct cp_measurement {
    size_t n_subjects;
    size_t n;                              /* rounds measured */
    uint64_t *ns[CP_MEASURE_MAX_SUBJECTS]; /* per subject, n latencies in round order */
    uint64_t *probe_ns;                    /* n probe durations; NULL without the probe */
    bool *undisturbed;                     /* n flags; all true without the probe */
    size_t n_undisturbed;                  /* rounds flagged */
    uint64_t floor_ns;                     /* this measurement's own probe floor; 0: none */
    uint64_t reference_ns;                 /* the floor rounds were judged against */
    uint64_t floor_hint_ns;                /* the cached floor that was used; 0: none */
    enum cp_measure_stop stop;
    double time_limit_s; /* the limit that applied (UNDISTURBED), else 0 */
    double elapsed_s;    /* measuring, warm-up excluded */
    int64_t warmup, target;
    bool probed;
    struct cp_perf_reading perf; /* valid when perf_valid */
    bool perf_valid;
    /* The priority it ran at: raised (nice CP_MEASURE_HIGH_NICE) or not;
     * when high was asked for and could not be had, why (else ""). */
    bool priority_raised;
    char priority_why[160];
};

/* Measure n subjects (1 .. CP_MEASURE_MAX_SUBJECTS) under policy p.
 * CP_ERR_INVALID for a policy out of range (naming the field); a failing
 * run's status and message otherwise (nothing is kept). An interrupt is not
 * an error: the rounds measured so far are kept (at least one, else
 * CP_ERR_INVALID "interrupted before any round"). OUT: *out (release with
 * cp_measurement_release; empty on failure). */
enum cp_status cp_measure(const struct cp_measure_subject *s, size_t n,
                          const struct cp_measure_policy *p, struct cp_measurement *out,
                          struct cp_diag *d);
void cp_measurement_release(struct cp_measurement *m); /* safe on an empty result */

/* The latencies (nanoseconds, as doubles) of one subject: of every round,
 * or of the undisturbed ones. OUT: *x (caller frees), *n. */
enum cp_status cp_measurement_values(const struct cp_measurement *m, size_t subject,
                                     bool undisturbed_only, double **x, size_t *n,
                                     struct cp_diag *d);

/* Describe one subject's latencies (nanoseconds). An empty selection gives
 * a zeroed summary with n = 0 (not an error). */
enum cp_status cp_measurement_summary(const struct cp_measurement *m, size_t subject,
                                      bool undisturbed_only, struct cp_summary *out,
                                      struct cp_diag *d);

/* A verdict on the undisturbed rounds alone needs at least this many of
 * them. Fewer say little (a t-test on 2 rounds cannot be significant) and
 * mean the probe judged nearly every round disturbed, a probe floor the
 * machine no longer reaches: then every round is compared, which the
 * interleaving keeps paired. (Found by bench/tune_regret.py: beside two
 * hogs, 2 of 180 rounds judged undisturbed turned a +45% gain, measured
 * three times, into three "inconclusive" verdicts.) */
#define CP_MEASURE_MIN_UNDISTURBED_COMPARED 10

/* Whether a verdict on m takes its undisturbed rounds alone: it probed,
 * and at least CP_MEASURE_MIN_UNDISTURBED_COMPARED were. */
bool cp_measurement_uses_undisturbed(const struct cp_measurement *m);

/* The verdict on subject b against subject a (a is "before"), on the
 * rounds both ran in: the undisturbed ones when the measurement probed and
 * at least CP_MEASURE_MIN_UNDISTURBED_COMPARED were, else all
 * (*used_undisturbed says which; may be NULL).
 * metric "latency" (lower is better) or, with items_a/items_b > 0,
 * throughput in items per second (higher is better). vo NULL: the defaults.
 * OUT: *c. */
enum cp_status cp_measurement_compare(const struct cp_measurement *m, size_t a, size_t b,
                                      int64_t items_a, int64_t items_b,
                                      const struct cp_verdict_opts *vo, struct cp_comparison *c,
                                      bool *used_undisturbed, struct cp_diag *d);

/* ---- recording ------------------------------------------------------------ */

/* What to store for one subject: its session (kernels, memory, the .om's
 * config), the model path, the batch asked for, its recorder (may be NULL). */
struct cp_measure_record {
    struct cp_session *session;
    const char *model_path;
    int64_t batch;
    struct cp_trace_recorder *trace;
    /* The counters the policy read (may be NULL): their values, or why
     * they are absent, are stored with this subject's run. */
    const struct cp_perf *perf;
};

/* Store measurement m into `store`: one run per subject of kind `kind`
 * (host meta, samples, kernels, events, peak RSS, the probe series and the
 * policy counters, and the perf counters a record names). With
 * two subjects the meta keys ab.before_run, ab.after_run and ab.order
 * ("alternating") pair them. OUT: run_ids[m->n_subjects]. */
enum cp_status cp_measure_store(struct cp_trace_store *store, const char *kind,
                                const struct cp_measure_record *rec, const struct cp_measurement *m,
                                int64_t *run_ids, struct cp_diag *d);

/* ---- inputs shared by several plans ---------------------------------------- */

/* Check that plans a and b take the same inputs: the same names (in any
 * order), each with the same dtype and shape, so that one set of input
 * tensors can feed both. `a_name` and `b_name` (the model paths) are only
 * used in the message. CP_ERR_INVALID naming the first input at fault (and
 * both shapes or dtypes) otherwise. */
enum cp_status cp_measure_check_inputs(const struct cp_plan *a, const struct cp_plan *b,
                                       const char *a_name, const char *b_name, struct cp_diag *d);

/* Index of the input called `name` in plan p, or -1. */
long cp_measure_find_input(const struct cp_plan *p, const char *name);

/* Make one set of inputs (from sessions[0]'s plan: "--input NAME=FILE"
 * values, else seeded random) and feed it to every session, matched by
 * name, so that all see the very same data. */
enum cp_status cp_measure_feed_inputs(struct cp_session *const *sessions, size_t n,
                                      const char *const *inputs, size_t n_inputs, uint64_t seed,
                                      struct cp_diag *d);

#endif
