/*
 * validate: is the after run better, worse or the same as the before run?
 *
 * The comparison of measured runs, metric by metric, as a library: used by
 * `cannprof validate`, and by anything else that must tell a regression
 * from noise (the tuner's reports, the serving monitor). Its pieces:
 *
 *   - sides: the runs each side is made of, read from a trace (one run, or
 *     the group of runs `bench --runs N` recorded in separate processes),
 *     from an A/B trace (the two interleaved runs of `bench --vs`), or from
 *     a service's baseline in the knowledge base;
 *   - which iterations count: when every run recorded the interference
 *     probe (runner/probe.h), the timing metrics compare only the
 *     iterations that ran undisturbed, judged against the lowest floor of
 *     the runs (each run its own when thread counts differ);
 *   - the comparison: with one run per side, the iterations of the two
 *     runs (stats/verdict.h's tests); with two or more runs on both sides,
 *     the runs themselves: each run's statistic (median latency, p99, mean
 *     throughput, mean device_util) is one sample, and Welch's test on
 *     those models the variance between processes, which no test on one
 *     run's iterations can see; and when the runs alternated (before 1,
 *     after 1, before 2, ...: equal counts, start times in that order), run
 *     i of each side is a pair, and the paired t-test of their log ratios
 *     cancels what the machine's state of the moment adds to both;
 *   - the service's noise floor: against a baseline, the run-to-run spread
 *     of the service's earlier validations raises the threshold;
 *   - alerts (notify/) and the record of every validation against a
 *     baseline (knowledge/);
 *   - renderings: table, JSON, Markdown, JUnit XML, alert text.
 *
 * The overall verdict: regressed if any metric regressed, else improved if
 * any improved, else inconclusive if any is, else unchanged. Exit codes
 * (cp_validate_exit_code): 0 no regression, 1 a metric regressed, 4 no
 * verdict could be reached (inconclusive).
 */
#ifndef CP_VALIDATE_H
#define CP_VALIDATE_H

#include "core/core.h"
#include "core/json.h"
#include "knowledge/kb.h"
#include "notify/notify.h"
#include "report/doc.h"
#include "stats/stats.h"
#include "stats/verdict.h"
#include "trace/trace.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum cp_vmetric {
    CP_VM_LATENCY = 0,
    CP_VM_P99,
    CP_VM_THROUGHPUT,
    CP_VM_DEVICE_UTIL,
    CP_VM_MEMORY,
    CP_VM_PRECISION,
};
#define CP_VM_COUNT 6

/* The exit code of an inconclusive validation: no verdict (not "no
 * regression"), so that CI can tell the two apart. */
#define CP_VALIDATE_EXIT_INCONCLUSIVE 4

/* A run with fewer undisturbed iterations than this gives no timing
 * verdict. */
#define CP_VALIDATE_MIN_UNDISTURBED 20

/* Runs a side may hold. */
#define CP_VALIDATE_MAX_RUNS 64

/* "latency", "p99", "throughput", "device_util", "memory", "precision". */
const char *cp_vmetric_name(enum cp_vmetric m);

/* "latency,p99" -> wanted[] (CP_VM_COUNT flags). CP_ERR_INVALID naming an
 * unknown metric and listing the known ones, or for an empty list. */
enum cp_status cp_vmetric_parse_list(const char *s, bool wanted[CP_VM_COUNT], struct cp_diag *d);

/* ---- sides ---------------------------------------------------------------- */

/* The runs one side of a comparison is made of. */
struct cp_validate_side {
    const char *label; /* the trace path or the baseline's tag, as shown */
    struct cp_run_metrics *runs[CP_VALIDATE_MAX_RUNS];
    size_t n_runs;
    struct cp_run_metrics own[CP_VALIDATE_MAX_RUNS]; /* storage of runs read from traces */
    size_t n_own;
};

void cp_validate_side_release(struct cp_validate_side *s); /* safe on a zeroed side */

/* Read a side from trace `path`: run `run_text` ("3"; NULL: the last run,
 * and with it every run of its group when `bench --runs` recorded one).
 * Errors (CP_ERR_INVALID, naming the file and the run): no such file, no
 * such run, a run without latency samples. */
enum cp_status cp_validate_side_from_trace(const char *path, const char *run_text,
                                           struct cp_validate_side *s, struct cp_diag *d);

/* Add the runs of another trace to side s (read the same way): several
 * traces per side, e.g. processes of A and B run alternately, each with
 * its own trace, so that a drift of the machine reaches both sides. The
 * label stays the first trace's. At most CP_VALIDATE_MAX_RUNS runs per
 * side. */
enum cp_status cp_validate_side_add_trace(const char *path, const char *run_text,
                                          struct cp_validate_side *s, struct cp_diag *d);

/* Read both sides of an A/B trace (`bench A --vs B --trace`): the runs its
 * ab.before_run / ab.after_run meta keys name. */
enum cp_status cp_validate_sides_from_ab(const char *path, struct cp_validate_side *before,
                                         struct cp_validate_side *after, struct cp_diag *d);

/* A side made of one run that lives elsewhere (a baseline's copy): borrowed,
 * not released with the side. */
void cp_validate_side_borrow(struct cp_validate_side *s, const char *label,
                             struct cp_run_metrics *m);

/* ---- the comparison ---------------------------------------------------------- */

/* One metric's comparison, with how to show its values. */
struct cp_vrow {
    enum cp_vmetric metric;
    const char *name;  /* "latency", "p99", ... */
    const char *unit;  /* "ms", "items/s", "%", "MiB" */
    double scale;      /* displayed value = raw value * scale */
    bool between_runs; /* the samples were the runs' statistics */
    bool paired;       /* ... compared pair by pair (cp_vresult.paired) */
    struct cp_comparison c;
};

/* Which iterations the timing metrics compared: the undisturbed ones when
 * every run recorded the interference probe, else all. */
struct cp_vprobe {
    bool used;                /* undisturbed iterations only */
    bool too_few;             /* a side had too few undisturbed iterations (or usable runs):
                               * timing verdicts are inconclusive */
    uint64_t floor_ns[2];     /* the lowest own probe floor of each side's runs; 0: no probe */
    uint64_t reference_ns[2]; /* the floor each side was judged against */
    size_t total[2], kept[2]; /* iterations in each side's runs, and undisturbed ones */
    size_t busy[2];           /* runs of each side that stopped at their time limit short of
                               * the undisturbed iterations they asked for (separate runs):
                               * the machine was busy throughout them, and timing gets no
                               * verdict */
    size_t busy_raised[2];    /* of them, runs measured at high priority already */
    char why[200];            /* when !used: why all iterations were compared */
};

struct cp_validate_opts {
    bool wanted[CP_VM_COUNT]; /* metrics to compare */
    bool asked;               /* `wanted` was asked for: a metric a side lacks is an error */
    struct cp_verdict_opts verdict;
    double precision_tolerance; /* percentage points of precision_loss growth; default 0.1 */
    bool all_iterations;        /* compare disturbed iterations too */
    bool interleaved;           /* the sides are the two runs of an A/B trace */
    bool force;                 /* compare different models */
};

/* Every metric wanted, cp_verdict_opts_init, precision tolerance 0.1. */
void cp_validate_opts_init(struct cp_validate_opts *o);

/* The whole comparison. Labels say where each side came from. */
struct cp_vresult {
    struct cp_vrow rows[CP_VM_COUNT];
    size_t n_rows;
    const char *before_label, *after_label;
    const struct cp_run_metrics *before, *after; /* each side's first run */
    size_t runs[2];                              /* runs on each side */
    bool between_runs; /* timing compared run against run (both sides >= 2 runs) */
    bool paired;       /* between_runs, and the runs alternated (before 1, after 1, before 2,
                        * ...): run i of each side compared as a pair */
    bool interleaved;  /* the sides are the two interleaved runs of an A/B trace */
    bool models_differ;
    struct cp_verdict_opts opts;
    double precision_tolerance; /* percentage points */
    double asked_threshold_pct; /* --threshold as given */
    double noise_floor_pct;     /* run-to-run noise of the service's history; NaN: none */
    size_t noise_runs;          /* earlier validations it was estimated from */
    struct cp_vprobe probe;
    enum cp_verdict overall;
};

/* Compare the two sides. The sides' iteration arrays are compacted to the
 * undisturbed iterations when those are compared. CP_ERR_INVALID for
 * different models without o->force (naming both), for an asked metric a
 * side cannot give, or a metric that cannot be compared (naming it).
 * `noise_floor_pct` (NaN: none) raises the threshold when larger. OUT: *r. */
enum cp_status cp_validate_compare(struct cp_validate_side *before, struct cp_validate_side *after,
                                   const struct cp_validate_opts *o, double noise_floor_pct,
                                   size_t noise_runs, struct cp_vresult *r, struct cp_diag *d);

/* The overall verdict of the rows (see the top of this file). */
enum cp_verdict cp_vresult_overall(const struct cp_vresult *r);

/* 0 unchanged or improved, 1 regressed, CP_VALIDATE_EXIT_INCONCLUSIVE. */
int cp_validate_exit_code(const struct cp_vresult *r);

/* ---- baselines, noise, alerts ------------------------------------------------------ */

/* The run-to-run noise of a service, from its last 60 validations in the
 * knowledge base: 3 times the robust spread (MAD as a sigma) of their
 * latency changes. OUT: *pct (NaN without at least 5 of them), *n. */
void cp_validate_noise_floor(struct cp_kb *kb, const char *service, double *pct, size_t *n);

struct cp_validate_alert {
    const char *url;
    const char *secret; /* NULL: unsigned */
    enum cp_webhook_format format;
    bool attempted, delivered;
    char error[1024];
};

/* POST the result to the webhook (title, verdict, figures, trace, tag). The
 * outcome is in al (attempted, delivered, error). */
/* The webhook signing secret: FILE's first line (without its line end), else
 * $CANNPROF_WEBHOOK_SECRET, else none (out ""). A file that cannot be read
 * or holds an empty first line, or a secret of n bytes or more, is
 * CP_ERR_INVALID naming it (the flag's name is in the message). */
enum cp_status cp_validate_alert_secret(const char *file, char *out, size_t n, struct cp_diag *d);

/* Where and how alerts go, from a command's --webhook URL (NULL: else
 * $CANNPROF_WEBHOOK; empty is none), --webhook-format F (NULL: generic) and
 * --webhook-secret-file FILE (cp_validate_alert_secret, read only when there
 * is a URL). A bad format, a secret file without a URL, or a signed Slack
 * webhook (Slack's URL is its secret) is CP_ERR_USAGE naming the flag.
 * OUT: *al (al->url NULL when there is no webhook), secret[n] (al->secret
 * points into it). */
enum cp_status cp_validate_webhook_setup(const char *url, const char *format,
                                         const char *secret_file, struct cp_validate_alert *al,
                                         char *secret, size_t n, struct cp_diag *d);

void cp_validate_send_alert(const struct cp_vresult *r, const char *service, const char *tag,
                            const char *trace, struct cp_validate_alert *al);

/* Record a validation against baseline b of `service` in the knowledge base
 * (its figures, verdict, exit code, the alert's outcome). */
enum cp_status cp_validate_record(struct cp_kb *kb, const struct cp_kb_baseline *b,
                                  const char *service, const char *trace,
                                  const struct cp_vresult *r, int exit_code,
                                  const struct cp_validate_alert *al, struct cp_diag *d);

/* ---- baselines (baseline.c): what `cannprof baseline` stores and shows ------------ */

/* A baseline's figures, computed from its samples. */
struct cp_baseline_figures {
    struct cp_summary latency; /* of m.latency_ns; zeroed without samples */
    struct cp_summary device;  /* of m.device_ns; zeroed when the run had no kernel events */
    double throughput;         /* items per second at the mean latency; NaN unknown */
};

/* Store run `run` (the last when < 0) of trace `trace` as `service`'s
 * baseline under `tag` (NULL: "latest"; replace: overwrite an existing tag).
 * Refuses a run without latency samples. The trace path is kept absolute
 * when it resolves. OUT: *out, the stored baseline as read back
 * (cp_kb_baseline_release). */
enum cp_status cp_validate_baseline_set(struct cp_kb *kb, const char *service, const char *tag,
                                        const char *trace, int64_t run, bool replace,
                                        struct cp_kb_baseline *out, struct cp_diag *d);

/* The figures of a baseline read with its samples. OUT: *f. */
enum cp_status cp_validate_baseline_figures(const struct cp_kb_baseline *b,
                                            struct cp_baseline_figures *f, struct cp_diag *d);

/* JSON: a baseline's figures (with its validations when v is not NULL:
 * `show`), a list of baselines (`list`). NULL when out of memory. */
json_t *cp_validate_baseline_json(const struct cp_kb_baseline *b,
                                  const struct cp_baseline_figures *f,
                                  const struct cp_kb_validation *v, size_t nv);
json_t *cp_validate_baselines_json(const struct cp_kb_baseline *v, size_t n);

/* Text: what `set` says it stored; a baseline with its last validations
 * (`show`); the table of a list. */
void cp_validate_render_baseline_set(const struct cp_kb *kb, const struct cp_kb_baseline *b,
                                     const struct cp_baseline_figures *f, struct cp_buf *out);
void cp_validate_render_baseline(const struct cp_kb *kb, const struct cp_kb_baseline *b,
                                 const struct cp_baseline_figures *f,
                                 const struct cp_kb_validation *v, size_t nv, struct cp_buf *out);
void cp_validate_render_baselines(const struct cp_kb_baseline *v, size_t n, struct cp_buf *out);

/* ---- renderings ----------------------------------------------------------------- */

void cp_validate_render_table(const struct cp_vresult *r, struct cp_buf *out);
void cp_validate_render_markdown(const struct cp_vresult *r, struct cp_buf *out);
/* JUnit XML: one testcase per metric; a regression is a <failure>, an
 * inconclusive metric is <skipped> (no verdict). */
void cp_validate_render_junit(const struct cp_vresult *r, struct cp_buf *out);
/* One plain line per metric and the notes, for alerts. */
void cp_validate_render_text(const struct cp_vresult *r, struct cp_buf *out);
/* The whole result as JSON; NULL when out of memory. */
json_t *cp_validate_json(const struct cp_vresult *r);
/* The result as a document (report/doc.h): the metrics' table, the two
 * sides' latency distributions as a chart with the change's CI, the
 * notes. Written as HTML or PDF with cp_doc_write. NULL when out of
 * memory; cp_doc_free. */
struct cp_doc *cp_validate_doc(const struct cp_vresult *r);
/* cp_validate_render_junit and cp_validate_doc written to a file (the doc
 * as HTML or PDF by the path's suffix), replacing it whole. A file that
 * cannot be written is CP_ERR_IO naming it; out of memory CP_ERR_NOMEM. */
enum cp_status cp_validate_write_junit(const struct cp_vresult *r, const char *path,
                                       struct cp_diag *d);
enum cp_status cp_validate_write_doc(const struct cp_vresult *r, const char *path,
                                     struct cp_diag *d);

/* Just the per-metric figures {"latency": {...}, ...} (what the knowledge
 * base and webhooks keep); NULL when out of memory. */
json_t *cp_validate_figures_json(const struct cp_vresult *r);

#endif
