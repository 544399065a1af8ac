/* validate: the comparison of two runs, metric by metric, and its renderings.
 * Private to cli/: cmd_validate.c computes, validate_report.c renders. */
#ifndef CP_CLI_VALIDATE_H
#define CP_CLI_VALIDATE_H

#include "core/core.h"
#include "stats/verdict.h"
#include "trace/trace.h"

enum cp_vmetric {
    CP_VM_LATENCY = 0,
    CP_VM_P99,
    CP_VM_THROUGHPUT,
    CP_VM_DEVICE_UTIL,
    CP_VM_MEMORY,
    CP_VM_PRECISION,
};
#define CP_VM_COUNT 6

/* One metric's comparison, with how to show its values. */
struct cp_vrow {
    enum cp_vmetric metric;
    const char *name; /* "latency", "p99", ... */
    const char *unit; /* "ms", "items/s", "%", "MiB" */
    double scale;     /* displayed value = raw value * scale */
    struct cp_comparison c;
};

/* Which iterations the timing metrics (latency, p99, throughput,
 * device_util) compared: the undisturbed ones (runner/probe.h) when both
 * runs recorded the interference probe, else all. */
struct cp_vprobe {
    bool used;                /* undisturbed iterations only */
    bool too_few;             /* a side had fewer than CP_VALIDATE_MIN_UNDISTURBED:
                               * all iterations compared, timing verdicts inconclusive */
    uint64_t floor_ns[2];     /* each run's own probe floor (before, after); 0: no probe */
    uint64_t reference_ns[2]; /* the floor each side was judged against */
    size_t total[2], kept[2]; /* iterations in each run, and undisturbed ones */
    char why[200];            /* when !used: why all iterations were compared */
};

/* A run with fewer undisturbed iterations than this gives no timing
 * verdict. */
#define CP_VALIDATE_MIN_UNDISTURBED 20

/* The whole comparison. Labels say where each side came from. */
struct cp_vresult {
    struct cp_vrow rows[CP_VM_COUNT];
    size_t n_rows;
    const char *before_label, *after_label;
    const struct cp_run_metrics *before, *after;
    bool models_differ;
    struct cp_verdict_opts opts;
    double precision_tolerance; /* percentage points */
    double asked_threshold_pct; /* --threshold as given */
    double noise_floor_pct;     /* run-to-run noise of the service's history; NaN: none */
    size_t noise_runs;          /* earlier validations it was estimated from */
    struct cp_vprobe probe;
    enum cp_verdict overall;
};

/* The overall verdict: regressed if any metric regressed, else improved if
 * any improved, else inconclusive if any is, else unchanged. */
enum cp_verdict cp_vresult_overall(const struct cp_vresult *r);

/* Renderings, appended to `out`. */
void cp_validate_render_table(const struct cp_vresult *r, struct cp_buf *out);
void cp_validate_render_json(const struct cp_vresult *r, struct cp_buf *out);
void cp_validate_render_markdown(const struct cp_vresult *r, struct cp_buf *out);
void cp_validate_render_junit(const struct cp_vresult *r, struct cp_buf *out);
/* Just the per-metric figures as one JSON object {"latency": {...}, ...}
 * (what the knowledge base and webhooks keep). */
void cp_validate_render_figures(const struct cp_vresult *r, struct cp_buf *out);
/* One plain line per metric, for alerts. */
void cp_validate_render_text(const struct cp_vresult *r, struct cp_buf *out);

#endif
