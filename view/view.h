/*
 * view/view.h: pictures of a trace, a model or a flow (docs/views.md),
 * each one self-contained file that opens offline:
 *
 *   - a flame graph (interactive SVG: search, zoom, tooltips) of where the
 *     time of a run goes, every layer stacked by containment on its thread:
 *     application ranges, runtime phases, kernels, imported framework ops,
 *     or a pipeline's nodes;
 *   - a differential flame graph of two runs, every frame coloured by its
 *     change and marked by whether the change stands out of the noise of
 *     its per-iteration times (a frame that moved within noise is grey);
 *   - a topology: the converted graph, a traced run's kernels or a flow,
 *     laid out by Graphviz (libgvc), coloured by time share;
 *   - a timeline: a few iterations as tracks per layer and thread, as one
 *     HTML page with its own script (no network).
 *
 * The same input gives the same bytes. Errors are CP_ERR_INVALID for input
 * that cannot be drawn (an empty trace, a run without iterations, two
 * different models diffed without force), naming the file and what is
 * missing; CP_ERR_NOMEM; the store's own errors as they come.
 */
#ifndef CP_VIEW_H
#define CP_VIEW_H

#include "core/core.h"
#include "report/chart.h"
#include "trace/trace.h"

#include <stdbool.h>
#include <stdint.h>

/* ---- flame graphs ------------------------------------------------------ */

/* What the kernels' frames are named by. */
enum cp_flame_group {
    CP_FLAME_BY_LAYER = 0, /* the stack as recorded, kernels by their node */
    CP_FLAME_BY_OP,        /* kernels under a frame of their op type */
    CP_FLAME_BY_ONNX,      /* kernels by the original ONNX nodes they stand for */
    CP_FLAME_BY_PIPELINE,  /* a pipeline run's nodes, their time on and off the CPU */
};

/* Which iterations the widths are. */
enum cp_flame_iters {
    CP_FLAME_MEAN = 0, /* the mean iteration: every measured one, summed, over their count */
    CP_FLAME_MEDIAN,   /* the iteration whose latency is the median */
    CP_FLAME_ALL,      /* every measured iteration, summed */
    CP_FLAME_ONE,      /* iteration `iteration` */
};

/* "layer"/"op"/"onnx"/"pipeline"; "mean"/"median"/"all" or a number. False
 * for anything else. */
bool cp_flame_group_parse(const char *s, enum cp_flame_group *g);
bool cp_flame_iters_parse(const char *s, enum cp_flame_iters *w, int64_t *iteration);

struct cp_flame_opts {
    int64_t run_id; /* < 0: the last run */
    enum cp_flame_group group;
    enum cp_flame_iters iters;
    int64_t iteration; /* CP_FLAME_ONE */
    const char *title; /* NULL: from the trace's path and run */
    double width;      /* pixels; 0: 1200 */
    /* diff: the share of a frame's time below which a change is not
     * marked even when significant (0: 2%), and the false discovery rate
     * over the frames (0: 0.05) */
    double min_change, fdr;
    bool force; /* diff: runs of different models */
    /* every measured iteration, not only the undisturbed ones (a run that
     * recorded the interference probe: bench, bench --vs, tune) */
    bool all_iterations;
    /* a still picture for a page or a slide, drawn by the chart module
     * (report/chart.h) as PNG or PDF, instead of the interactive SVG */
    bool still;
    enum cp_chart_format still_format;
    /* a POSIX extended regular expression: only the frames around those
     * whose names match, their callees merged under one root, or with
     * `callers` their callers above it (speedscope's sandwich, in two
     * pictures); NULL: every frame */
    const char *focus;
    bool callers;
    /* children widest first (speedscope's "left heavy"), not in name order
     * (flamegraph.pl's, which keeps a frame in place between runs) */
    bool left_heavy;
};

void cp_flame_opts_init(struct cp_flame_opts *o);

/* A diff marks a frame only when its change moves the median iteration (A's
 * root) by this share or more, besides min_change of its own time. */
#define CP_FLAME_MIN_OF_ROOT 0.005

/* What a picture holds, for the command to print. */
struct cp_flame_info {
    int64_t run_id, run_id_b;
    size_t frames;          /* drawn */
    size_t iterations;      /* the iterations the widths came from */
    double total_ns;        /* the root's width */
    size_t slower, faster;  /* diff: frames significantly slower, faster */
    size_t unchanged, gone; /* diff: within noise; only in A */
    size_t matched;         /* --focus: the frames that matched (A's, in a diff) */
};

/* The flame graph of one run of `s` (opened on `path`, named in errors and
 * the title), as an SVG document appended to `out`. */
enum cp_status cp_view_flame(struct cp_trace_store *s, const struct cp_flame_opts *o,
                             struct cp_buf *out, struct cp_flame_info *info, struct cp_diag *d);

/* The differential flame graph of run o->run_id of `a` against the last run
 * (or o->run_id when both are one store's) of `b`: B's widths, A→B change
 * per frame. */
enum cp_status cp_view_flame_diff(struct cp_trace_store *a, struct cp_trace_store *b, int64_t run_a,
                                  int64_t run_b, const struct cp_flame_opts *o, struct cp_buf *out,
                                  struct cp_flame_info *info, struct cp_diag *d);

/* ---- topology ---------------------------------------------------------- */

struct cp_doc;

/* A finding to mark on the node it names (a kernel's node in the converted
 * graph, or one of the ONNX nodes it stands for). */
struct cp_topology_mark {
    const char *node;
    const char *text; /* "1. fp32_where_bf16_available" */
};

struct cp_topology_opts {
    int64_t run_id;    /* a trace: < 0 the last run */
    const char *title; /* NULL: from the path */
    /* a trace's kernels: findings to mark (may be none) */
    const struct cp_topology_mark *marks;
    size_t n_marks;
    /* a still picture for a page or a slide, drawn by the chart module
     * (report/chart.h) as PNG or PDF from Graphviz's layout, instead of
     * Graphviz's SVG with its tooltips */
    bool still;
    enum cp_chart_format still_format;
    /* with still: the picture appended to this document as a chart
     * (report/doc.h), scaled to a page, instead of written to `out` */
    struct cp_doc *doc;
};

/* What a topology holds, for the command to print. */
struct cp_topology_info {
    size_t nodes, edges;
    size_t fused;     /* nodes that stand for more than one ONNX node */
    size_t flagged;   /* nodes marked with a finding */
    const char *kind; /* "trace", "model" or "flow" (static) */
};

/* The topology of `path` (a trace store, a CPU .om, or a flow's .toml,
 * told apart by their content), laid out by Graphviz's dot and rendered
 * as SVG, appended to `out`. */
enum cp_status cp_view_topology(const char *path, const struct cp_topology_opts *o,
                                struct cp_buf *out, struct cp_topology_info *info,
                                struct cp_diag *d);

/* ---- timeline ------------------------------------------------------------ */

struct cp_timeline_opts {
    int64_t run_id;    /* < 0: the last run */
    int64_t first;     /* the first iteration shown; < 0: the median one */
    int64_t count;     /* how many from there; 0: 1, at most 16 */
    const char *title; /* NULL: from the trace's path and run */
};

struct cp_timeline_info {
    int64_t run_id, first, count;
    size_t events, tracks, flows;
};

/* A self-contained HTML timeline of a few iterations of a run of `s`
 * (tracks per layer and thread, zoom and pan, the flow from a runtime
 * phase to the kernels it launched), appended to `out`. */
enum cp_status cp_view_timeline(struct cp_trace_store *s, const struct cp_timeline_opts *o,
                                struct cp_buf *out, struct cp_timeline_info *info,
                                struct cp_diag *d);

#endif
