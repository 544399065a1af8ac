/*
 * Interleaved A/B measurement: is model B faster or slower than model A?
 *
 * Two benchmarks run one after the other see different machines: a CPU that
 * warmed up, a neighbour that started compiling, a frequency governor that
 * changed its mind. Drift of that kind is larger than the few percent a
 * tuner wants to detect, and it would be read as a difference between the
 * models. So A and B run in the same process, in rounds: every round runs
 * each plan once, and the order alternates (round 0 runs A then B, round 1
 * B then A, ...) so that neither model always runs right after itself, in
 * caches the other one warmed. Whatever drifts hits both sides of a round
 * alike. The result is one latency per model per round: paired samples.
 *
 * The verdict (stats/verdict.h) is taken with A as "before" and B as
 * "after", lower latency being better: "improved" means B is faster.
 *
 * `cannprof bench A.om --vs B.om` is the command-line face of this; the tuner
 * calls the same functions on its candidate plans. Nothing here prints.
 */
#ifndef CP_RUNNER_BENCH_AB_H
#define CP_RUNNER_BENCH_AB_H

#include "runner/runner.h"
#include "stats/stats.h"
#include "stats/verdict.h"

#include <stddef.h>
#include <stdint.h>

/* How long to measure. */
struct cp_bench_ab_opts {
    int64_t warmup;    /* warm-up rounds (each runs A and B once, alternating), not measured */
    int64_t rounds;    /* measured rounds, >= 2; 0: measure for duration_s instead */
    double duration_s; /* with rounds == 0: rounds until this many seconds have passed
                        * (at least 2 rounds whatever the time) */
    /* Optional recorders (NULL: none) of the runtimes that run A and B: the
     * "warmup" and "measure" application ranges are opened on them and the
     * round index is their current iteration while a round runs. Kernel
     * events are stamped with the round index by the runtime itself. */
    struct cp_trace_recorder *trace_a;
    struct cp_trace_recorder *trace_b;
};

/* The order of a round: true when round `round` (warm-up rounds counted
 * apart, from 0) runs A first: the even rounds. */
bool cp_bench_ab_a_first(size_t round);

/* Paired samples: round i took a_ns[i] for A and b_ns[i] for B. */
struct cp_bench_ab_result {
    size_t n;       /* rounds measured */
    uint64_t *a_ns; /* n latencies of A in nanoseconds, in round order */
    uint64_t *b_ns; /* n latencies of B */
};

/* Check that plans a and b take the same inputs: the same names (in any
 * order), each with the same dtype and shape, so that one set of input
 * tensors can feed both. `a_name` and `b_name` (e.g. the model paths) are
 * only used in the message. CP_ERR_INVALID naming the first input at fault
 * (and both shapes or dtypes) otherwise. */
enum cp_status cp_bench_ab_check_inputs(const struct cp_plan *a, const struct cp_plan *b,
                                        const char *a_name, const char *b_name, struct cp_diag *d);

/* Index of the input called `name` in plan p, or -1. */
long cp_bench_ab_find_input(const struct cp_plan *p, const char *name);

/* Run the interleaved measurement on two plans whose inputs are set: o->warmup
 * rounds, then o->rounds rounds (or rounds for o->duration_s seconds), each
 * running A and B once in the order cp_bench_ab_a_first gives, timing each
 * cp_plan_run on the monotonic clock. Round i is passed to cp_plan_run as
 * the iteration. a and b may be the same plan (an A/A measurement).
 * CP_ERR_INVALID for options out of range; a failing run's status and
 * message otherwise. OUT: *r (release with cp_bench_ab_result_release; empty
 * on failure). */
enum cp_status cp_bench_ab_measure(struct cp_plan *a, struct cp_plan *b,
                                   const struct cp_bench_ab_opts *o, struct cp_bench_ab_result *r,
                                   struct cp_diag *d);
void cp_bench_ab_result_release(struct cp_bench_ab_result *r); /* safe on an empty result */

/* Describe each side's latencies (nanoseconds). OUT: *a, *b. */
enum cp_status cp_bench_ab_summarize(const struct cp_bench_ab_result *r, struct cp_summary *a,
                                     struct cp_summary *b, struct cp_diag *d);

/* The verdict on the paired samples: cp_verdict_compare with A's latencies
 * as "before", B's as "after" and CP_BETTER_LOWER (vo NULL: the defaults of
 * cp_verdict_opts_init). Needs r->n >= 2. OUT: *c. */
enum cp_status cp_bench_ab_compare(const struct cp_bench_ab_result *r,
                                   const struct cp_verdict_opts *vo, struct cp_comparison *c,
                                   struct cp_diag *d);

/* Parse "2", "2%" or "0.5%" as a threshold in percent (finite, 0 to 1000).
 * false for anything else. */
bool cp_bench_ab_parse_threshold(const char *s, double *pct);

/* Parse a significance level: a number in (0, 0.5]. false otherwise. */
bool cp_bench_ab_parse_alpha(const char *s, double *alpha);

#endif
