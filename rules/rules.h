/*
 * rules/rules.h: rule packs and the findings they produce.
 *
 * A rule pack is a YAML file (docs/rule-language.md, "Rule files") holding
 * rules. A rule names a bottleneck type and the indicators that reveal it;
 * each of its root causes has evidence, a concrete change (the exact
 * `cannprof convert` flags, fusion-switch entries or runtime settings), an
 * expected-gain model and risks. Every expression is parsed once, when the
 * pack is loaded, and checked against the feature names (rules/features.h),
 * so a typo is reported as FILE:LINE:COLUMN before any trace is read.
 *
 * cp_rules_analyze evaluates every rule against the features of a run and
 * returns findings sorted by expected gain (constraint violations last):
 *
 *   fires       all indicators hold (an ABSENT indicator neither holds nor
 *               blocks, but lowers the confidence), for the rule's targets;
 *   root cause  each root cause whose evidence holds gives one finding
 *               (ABSENT evidence counts as not agreeing);
 *   confidence  from how far the indicators clear their thresholds
 *               (cp_expr_margin), how much of the evidence agrees, and
 *               whether features were missing (docs/rule-language.md);
 *   gain        Amdahl: with f the affected share of the iteration time and
 *               s the expected speedup of that part, the latency saved is
 *               f * (1 - 1/s); the interval uses the prior's low/high s.
 *               Under the memory target the gain is the memory saved, the
 *               rule's expected memory change (risks: memory) when negative;
 *   nodes       the original ONNX node names of the affected kernels.
 *
 * When no rule fires but a hotspot exists (one op type above 30% of the
 * time, or device_util under 60%), an "unclassified hotspot" finding is made
 * and cp_rules_skeleton writes a rule skeleton for it.
 */
#ifndef CP_RULES_RULES_H
#define CP_RULES_RULES_H

#include "core/core.h"
#include "rules/constraints.h"
#include "rules/features.h"
#include "trace/trace.h"

#include <stdbool.h>
#include <stddef.h>

/* A set of rules loaded from one or more files. Opaque. */
struct cp_rule_set;

/* An empty set. NULL on OOM. Free with cp_rule_set_free. */
struct cp_rule_set *cp_rule_set_create(void);
void cp_rule_set_free(struct cp_rule_set *rs); /* NULL is a no-op */

/* Load one YAML pack into `rs`. Errors name FILE:LINE:COLUMN: YAML syntax,
 * a missing or unknown key, a bad expression, an unknown feature, a rule
 * name already loaded. On failure `rs` is unchanged. */
enum cp_status cp_rule_set_load_file(struct cp_rule_set *rs, const char *path, struct cp_diag *d);

/* Load every *.yaml / *.yml of a folder, in name order. */
enum cp_status cp_rule_set_load_dir(struct cp_rule_set *rs, const char *dir, struct cp_diag *d);

/* The folder of the default packs: $CANNPROF_RULES when set, else the
 * source tree's rules/packs. */
const char *cp_rules_default_dir(void);

size_t cp_rule_set_count(const struct cp_rule_set *rs);
/* Name of rule i (load order). */
const char *cp_rule_set_name(const struct cp_rule_set *rs, size_t i);

enum cp_confidence {
    CP_CONFIDENCE_LOW = 0,
    CP_CONFIDENCE_MEDIUM,
    CP_CONFIDENCE_HIGH,
};
const char *cp_confidence_name(enum cp_confidence c); /* "low", "medium", "high" */

enum cp_target {
    CP_TARGET_LATENCY = 0,
    CP_TARGET_THROUGHPUT,
    CP_TARGET_MEMORY,
};
const char *cp_target_name(enum cp_target t);
bool cp_target_parse(const char *s, enum cp_target *out);

/* The change a finding proposes. Arrays of strings, NULL-terminated lists
 * owned by the finding. */
struct cp_change {
    char *summary;  /* one line */
    char **convert; /* `cannprof convert` flags: "--precision_mode=allow_mix_precision_bf16" */
    char **fusion_switches; /* switch-file lines: "FlashAttentionFusionPass:on" */
    char **runtime;         /* run/bench flags: "--threads=2", "--batch=8" */
};

struct cp_finding {
    char *rule;            /* rule name */
    char *bottleneck_type; /* "memory_bound", "compute_bound", ... */
    char *root_cause;      /* "kernel_fusion_missing", ... */
    char *title;           /* one line for people */
    enum cp_confidence confidence;
    double score;                           /* 0..1, what the confidence level was cut from */
    double time_share;                      /* affected share of kernel time, 0..1 */
    double gain, gain_lo, gain_hi;          /* expected latency saved (memory saved under the memory
                                             * target), fraction 0..1 */
    double speedup, speedup_lo, speedup_hi; /* the prior used */
    char *nodes_json;                       /* JSON array of original ONNX node names */
    char *kernels_json;                     /* JSON array of converted-graph node names */
    char *evidence;                         /* lines "indicator: text = value (holds)" */
    char *missing; /* comma-separated features that were ABSENT, "" when none */
    struct cp_change change;
    double risk_precision_loss; /* percent; NaN when the rule does not say */
    double risk_memory;         /* relative change of memory, e.g. -0.1; NaN when unsaid */
    bool violates;              /* a risk breaks a constraint */
    char *violation;            /* why, "" when none */
    bool unclassified;          /* the "unclassified hotspot" finding */
    /* The knowledge base's record, when one refined the gain
     * (tuner/tuner.h, cp_tune_history_refine): the rule's measured gains
     * on similar models on this hardware. history_runs 0: none; then gain
     * is the rule's own prior. */
    /* The call stacks of the framework ops the finding names (an imported
     * profile that had them): a JSON object, op name -> frames (outermost
     * first, paths cut to their last two parts); NULL when none. */
    char *stacks_json;
    int history_runs;
    double history_gain;       /* their similarity-weighted mean */
    double history_similarity; /* of the most similar model */
    double prior_gain;         /* the rule's gain before refinement */
};

struct cp_analysis {
    struct cp_finding *findings; /* sorted: constraint-respecting first, then by gain */
    size_t n;
    size_t rules_evaluated;
    size_t already_applied; /* findings dropped because the run already has their change */
};

struct cp_analysis_opts {
    enum cp_target target;
    const struct cp_constraints *constraints; /* may be NULL */
    double memory_bytes; /* the run's model memory, to judge memory risks; 0: unknown */
    /* The run analysed (may be NULL): a change its config or settings
     * already have (the pass is on, the flag has that value, the run used
     * that many threads) is dropped and counted in cp_analysis.already_applied. */
    const struct cp_run_metrics *run;
};

/* Evaluate every rule of `rs` on `f`. OUT: *out (release with
 * cp_analysis_release). Errors: an expression that fails at evaluation
 * (type errors the loader could not see), CP_ERR_NOMEM. */
enum cp_status cp_rules_analyze(const struct cp_rule_set *rs, const struct cp_features *f,
                                const struct cp_analysis_opts *o, struct cp_analysis *out,
                                struct cp_diag *d);
void cp_analysis_release(struct cp_analysis *a);

/* A rule skeleton (YAML) for an unclassified finding, with the features
 * measured in comments, to complete and contribute. Appended to `out`. */
void cp_rules_skeleton(const struct cp_finding *f, const struct cp_features *feat,
                       struct cp_buf *out);

/* The findings as a JSON array (core/json.h), best first: rank, rule,
 * bottleneck_type, root_cause, title, confidence, score, time_share,
 * expected_gain, nodes, kernels, change, risks, violates_constraints,
 * violation, missing_features, evidence, unclassified, call_stacks (an
 * import's, when it had them), and history ({runs, mean_gain, similarity,
 * prior_gain}) when the knowledge base refined the gain; a number that is
 * not finite is null. A new reference the caller releases with
 * json_decref; NULL when out of memory. */
json_t *cp_analysis_to_json(const struct cp_analysis *a);

/* Sort the findings as cp_rules_analyze does: constraint-respecting first,
 * then by expected gain, then by score and rule name. For callers that
 * changed the gains (the knowledge base's refinement). */
void cp_analysis_sort(struct cp_analysis *a);

/* ---- the whole diagnosis of one run, as analyze, suggest and the tuner
 * need it ------------------------------------------------------------------- */

struct cp_diagnosis {
    struct cp_rule_set *rules;
    struct cp_features *features;
    struct cp_analysis analysis;
    struct cp_machine machine; /* zeroed when not calibrated */
    bool calibrated;
    struct cp_run_metrics run; /* the run's identity and memory (samples too) */
};

struct cp_diagnose_opts {
    const char *const *rule_paths; /* folders or files; none: cp_rules_default_dir() */
    size_t n_rule_paths;
    int64_t run_id;                   /* < 0: the last run */
    bool calibrate;                   /* use (or measure once and cache) the machine's roofline */
    const char *cache_dir;            /* calibration cache; NULL: the default */
    struct cp_analysis_opts analysis; /* memory_bytes 0: taken from the run */
};

/* Load the rules, read the run, calibrate, compute features and analyze.
 * Errors name the trace, the rule file (FILE:LINE:COLUMN) or the figure that
 * failed. OUT: *out (release with cp_diagnosis_release, also after a
 * failure). */
enum cp_status cp_rules_diagnose(const char *trace_path, const struct cp_diagnose_opts *o,
                                 struct cp_diagnosis *out, struct cp_diag *d);
void cp_diagnosis_release(struct cp_diagnosis *dg);

#endif
