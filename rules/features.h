/*
 * rules/features: the numbers rules reason about, computed from one run of a
 * trace store.
 *
 * cp_features_compute reads a run (samples, kernels, events, counters, meta;
 * schema in docs/trace-format.md) and derives three things:
 *
 *   scalars   whole-run features by name: latency statistics, device_util,
 *             runtime overhead, launches per iteration, shares of layout
 *             transforms and copies, roofline utilisation (time-weighted over
 *             kernels), dtype mix, threads against cores, unfused patterns,
 *             cache_miss_rate. A scalar is PRESENT with a value or ABSENT
 *             with a reason (cache_miss_rate without hardware counters, the
 *             roofline without a calibrated machine): rules that need an
 *             absent feature lower their confidence instead of failing.
 *   kernels   one row per kernel of the plan: time, share, FLOPs, bytes,
 *             arithmetic intensity, achieved FLOP/s and bandwidth, their
 *             utilisation against the machine's roofline, bound class,
 *             compute dtype, and the unfused pattern it belongs to.
 *   patterns  unfused patterns still present in the converted graph
 *             (attention, LayerNorm, GroupNorm, GELU, conv/matmul with a
 *             separate activation or Add, layout round trips), each with its
 *             kernels, the time they cost, the original ONNX node names and
 *             the conversion pass (fusion switch) that would fuse it.
 *
 * docs/features.md defines every scalar and row field with its unit. Times
 * are per measured iteration (iteration >= 0); shares are fractions 0..1.
 *
 * cp_features_env adapts the result to the rule language (rules/expr.h):
 * scalars by name, rows = kernels, row weight = time_share.
 */
#ifndef CP_RULES_FEATURES_H
#define CP_RULES_FEATURES_H

#include "core/core.h"
#include "core/json.h"
#include "rules/calibrate.h"
#include "rules/expr.h"
#include "trace/trace.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A kernel shorter than this per call is "small" (launch-bound). */
#define CP_FEATURES_SMALL_KERNEL_NS 10000.0

/* One kernel of the run's plan. Strings are owned by the features. Numbers
 * that cannot be computed are NaN (and ABSENT to the rule language). */
struct cp_kernel_feat {
    size_t idx;            /* kernels.idx */
    const char *node;      /* node in the converted graph */
    const char *op_type;   /* "Conv", "FusedAttention", ... */
    const char *impl;      /* "onednn:conv", ... */
    const char *dtype;     /* compute dtype: "bf16" when the kernel computed in bf16,
                            * else its first input's dtype ("f32", ...) */
    const char *origins;   /* JSON array of the original ONNX node names */
    const char *layout;    /* its first input's layout: "NCHW", "nChw16c", ... ("" unknown) */
    const char *pattern;   /* kind of the unfused pattern it belongs to, "" when none */
    double calls;          /* executions per measured iteration */
    double mean_ns;        /* time per measured iteration (all its calls) */
    double time_share;     /* mean_ns / kernel time per iteration */
    double flops, bytes;   /* estimated per execution */
    double intensity;      /* flops / bytes, FLOP/byte; NaN when bytes is 0 */
    double achieved_flops; /* FLOP/s while it runs; NaN without time */
    double achieved_bw;    /* bytes/s while it runs; NaN without time */
    double alu_util;       /* achieved_flops / peak for its dtype and the run's threads */
    double bw_util;        /* achieved_bw / machine bandwidth */
    bool has_bound;        /* memory_bound is known (machine given, bytes > 0) */
    bool memory_bound;     /* intensity below the ridge point */
    bool small;            /* time per call < CP_FEATURES_SMALL_KERNEL_NS */
    bool layout_transform; /* TransData or Transpose */
    bool copy;             /* a data-movement op (docs/features.md lists them) */
    bool compute;          /* Conv/MatMul/Gemm/attention family */
};

/* An unfused pattern. */
struct cp_pattern {
    const char *kind;     /* "attention", "layernorm", "groupnorm", "gelu", "conv_act", "conv_add",
                           * "conv_bn", "matmul_act", "matmul_add", "layout_roundtrip"
                           * (static; docs/features.md) */
    const char *fix_pass; /* the pass (fusion switch name) that fuses it, "" when none (static) */
    const char *fix_hint; /* one line: what to change, e.g. "--layout_policy=nchw" (static) */
    bool fix_pass_off;    /* the run's conversion config switched fix_pass off: turning it on
                           * should fuse the pattern; false: the pass ran and left it */
    size_t *kernels;      /* kernel idx values, in execution order */
    size_t n;
    double time_ns;     /* mean time per iteration of those kernels */
    double time_share;  /* time_ns / kernel time per iteration */
    char *origins_json; /* JSON array of the ONNX node names of its kernels */
    char *nodes_json;   /* JSON array of its kernels' node names */
};

/* Time of one op type. */
struct cp_op_type_feat {
    const char *op_type;
    size_t n_kernels;
    double time_ns;    /* per iteration */
    double time_share; /* of kernel time */
};

/* What cp_features_compute found. The arrays are read-only for callers. */
struct cp_features {
    int64_t run_id;
    struct cp_kernel_feat *kernels; /* in idx order */
    size_t n_kernels;
    struct cp_op_type_feat *op_types; /* by time, largest first (ties by name) */
    size_t n_op_types;
    struct cp_pattern *patterns; /* in the order of their first kernel */
    size_t n_patterns;
    struct cp_features_priv *priv; /* scalars and owned memory */
};

/* Compute the features of run `run_id` of `s` (the last run when < 0).
 * `m` (may be NULL) is the calibrated machine: without it, or with peaks of
 * 0, the roofline features are ABSENT. `m` is copied; `s` is only read and
 * may be closed afterwards. A run without samples or device events is not
 * an error: the features that need them are ABSENT.
 * OUT: *out (free with cp_features_free), NULL on failure.
 * Errors: CP_ERR_INVALID (no such run, no runs), CP_ERR_DB (a query failed;
 * the message names the store), CP_ERR_CORRUPT (a kernels row whose inputs
 * or outputs are not the JSON the format describes), CP_ERR_NOMEM. */
enum cp_status cp_features_compute(struct cp_trace_store *s, int64_t run_id,
                                   const struct cp_machine *m, struct cp_features **out,
                                   struct cp_diag *d);

void cp_features_free(struct cp_features *f); /* NULL is a no-op */

/* The value of scalar `name`. Returns false when it is absent, or no such
 * scalar exists (cp_features_is_known tells them apart); *value is then NaN. */
bool cp_features_get(const struct cp_features *f, const char *name, double *value);

/* What kind of run the features describe: cannprof's own (the CPU
 * target), or a profile another tool wrote (import/), by the hardware it
 * ran on. A rule pack says which kinds it covers (`profiles:`), so that a
 * change for the CPU target is never proposed for an NPU's profile. */
enum cp_profile_kind {
    CP_PROFILE_CANNPROF = 0,
    CP_PROFILE_ASCEND,      /* torch_npu, msprof */
    CP_PROFILE_GPU,         /* Kineto */
    CP_PROFILE_ONNXRUNTIME, /* ONNX Runtime's profiler */
    CP_PROFILE_CHROME,      /* any other trace */
    CP_PROFILE_N
};
/* "cannprof", "ascend", "gpu", "onnxruntime", "chrome" <-> enum; parse:
 * false for an unknown name. */
const char *cp_profile_kind_name(enum cp_profile_kind k);
bool cp_profile_kind_parse(const char *name, enum cp_profile_kind *out);
enum cp_profile_kind cp_features_profile(const struct cp_features *f);

/* Whether `name` is a scalar feature (present or not). */
bool cp_features_is_known(const char *name);

/* Why scalar `name` is absent ("" when present or unknown). Owned by f. */
const char *cp_features_absent_reason(const struct cp_features *f, const char *name);

/* Names of all scalar features, present or not, in the order of
 * docs/features.md; static. OUT: *n. */
const char *const *cp_features_scalar_names(size_t *n);

/* Names of the row (kernel) fields, for checking rule expressions; static.
 * OUT: *n. */
const char *const *cp_features_field_names(size_t *n);

/* The rule-language environment of `f`: scalars by name (ABSENT when
 * absent), rows = kernels with the fields of cp_features_field_names,
 * row weight = time_share. `env` borrows `f`, which must outlive it. */
void cp_features_env(const struct cp_features *f, struct cp_expr_env *env);

/* The features as one JSON object (core/json.h): {"run":..,"scalars":
 * {name: value or null},"absent":{name: reason},"kernels":[..],
 * "op_types":[..],"patterns":[..]}; a number that is not finite is null.
 * A new reference the caller releases with json_decref; NULL when out of
 * memory. */
json_t *cp_features_to_json(const struct cp_features *f);

#endif
