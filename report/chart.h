/*
 * report/chart.h: the one chart module (docs/reports.md). Every view and
 * report draws its charts here, through cairo, onto an SVG, PNG or PDF
 * surface, or into a box of a page being drawn.
 *
 * Choices made once: the Okabe-Ito palette (told apart with the common
 * colour-vision deficiencies; XY series also by their markers' shapes),
 * every bar carrying its number in a label, text through pango (CJK names
 * render with the system's fallback fonts), a white background. The same
 * chart gives the same bytes as SVG and PNG on the same cairo and pango.
 */
#ifndef CP_REPORT_CHART_H
#define CP_REPORT_CHART_H

#include "core/core.h"

#include <cairo.h>
#include <stdbool.h>
#include <stddef.h>

enum cp_chart_kind {
    CP_CHART_BARS = 0, /* one value per label, horizontal bars */
    CP_CHART_STACKED,  /* parts per label, stacked horizontal bars, with a legend */
    CP_CHART_CDF,      /* one or two samples' cumulative distributions */
    CP_CHART_XY,       /* series of (x, y) points on two numeric axes, joined or not */
    CP_CHART_FRAMES,   /* a flame graph: frames stacked by depth, as wide as their time */
    CP_CHART_GRAPH,    /* a graph laid out elsewhere (Graphviz): boxes, splines, labels */
};

/* One frame of a FRAMES chart: x and w in 0..1 of the chart's width, depth
 * 0 at the bottom, its label (cut with "…" to fit) and fill colour. */
struct cp_chart_frame {
    double x, w;
    int depth;
    const char *label;
    double rgb[3];
};

/* A node of a GRAPH chart, in the layout's points (y up, as Graphviz
 * gives them): a box, rounded or not, its border doubled for a mark, its
 * label's lines (separated by '\n') centred in a monospace font, made
 * smaller when they would not fit. */
struct cp_chart_gnode {
    double x, y, w, h; /* centre and size */
    const char *label;
    double font; /* points */
    double fill[3], text[3], pen[3];
    double pen_width;
    bool rounded, double_border;
};

/* An edge of a GRAPH chart: a cubic Bezier spline through n_pts points (x,
 * y pairs, 1 + 3k of them), an arrowhead from its end to the tip when
 * arrow, a label centred at (lx, ly). */
struct cp_chart_gedge {
    const double *pts;
    size_t n_pts;
    bool dashed, arrow;
    double tip_x, tip_y;
    const char *label;
    double lx, ly, font;
};

#define CP_CHART_MAX_PARTS  6
#define CP_CHART_MAX_SERIES 4

/* One series of an XY chart. */
struct cp_chart_series {
    const char *name; /* in the legend */
    const double *x, *y;
    size_t n;
    bool line;                 /* joined in x order as given (a trajectory, a front) */
    bool points;               /* a marker at each point */
    const char *const *labels; /* NULL, or n point labels (NULL entries: none) */
};

/* A chart's data, borrowed: the caller keeps it alive while drawing. */
struct cp_chart {
    enum cp_chart_kind kind;
    const char *title;
    const char *unit; /* of the values ("ms", "%", "requests/s") */
    /* BARS and STACKED: n labels; values[i] (BARS) or values[i * n_parts + k]
     * (STACKED) */
    const char *const *labels;
    size_t n;
    const double *values;
    const char *const *part_names; /* STACKED: n_parts of them */
    size_t n_parts;
    /* CDF: samples[s] of n_samples[s] values, named sample_names[s] (1 or 2) */
    const double *samples[2];
    size_t n_samples[2];
    const char *sample_names[2];
    /* XY: up to CP_CHART_MAX_SERIES series; axis titles with their units;
     * logarithmic axes (non-positive values are left out, and counted in
     * the note); the roofline min(roof_peak, roof_bw * x) drawn under the
     * points when roof_peak > 0 and roof_bw > 0 (FLOP/s and bytes/s against
     * FLOP per byte, in the axes' units), its roofs and ridge labelled with
     * their numbers in `unit` ("GFLOP/s" also names the bandwidth "GB/s") */
    struct cp_chart_series series[CP_CHART_MAX_SERIES];
    size_t n_series;
    const char *x_title, *y_title;
    bool log_x, log_y;
    double roof_peak, roof_bw;
    /* FRAMES */
    const struct cp_chart_frame *frames;
    size_t n_frames;
    /* GRAPH: the layout's nodes and edges in a graph_w x graph_h box,
     * scaled down (never up) to the width, and to CP_CHART_GRAPH_MAX_H */
    const struct cp_chart_gnode *gnodes;
    size_t n_gnodes;
    const struct cp_chart_gedge *gedges;
    size_t n_gedges;
    double graph_w, graph_h;
    /* GRAPH: the layout's own label (lines separated by '\n'), left
     * aligned from (glabel_x, glabel_y), its top left corner */
    const char *glabel;
    double glabel_x, glabel_y, glabel_font;
    double max_h;     /* GRAPH: the tallest it is drawn; 0: CP_CHART_GRAPH_MAX_H */
    const char *note; /* a line under the chart (the CI of a change...); NULL: none */
};

/* The tallest a GRAPH chart is drawn, in points: a taller layout is scaled
 * down to it (its labels shrink with it; the SVG view has them whole). */
#define CP_CHART_GRAPH_MAX_H 14000.0

/* A tuning trajectory, as the tune report and the knowledge card draw it:
 * the best so far at each step (x, best: n points, joined) and each
 * candidate accepted (ax, ay) or rejected (rx, ry), median latency in ms by
 * step. Made with room for `cap` steps (false when out of memory; release
 * it either way), filled step by step; the chart borrows its arrays. */
struct cp_chart_trajectory {
    double *x, *best, *ax, *ay, *rx, *ry;
    size_t n, na, nr, cap;
};
bool cp_chart_trajectory_init(struct cp_chart_trajectory *t, size_t cap);
void cp_chart_trajectory_release(struct cp_chart_trajectory *t);
/* The best so far after `step` (a step already last: its best replaced). */
void cp_chart_trajectory_best(struct cp_chart_trajectory *t, double step, double best_ms);
/* A candidate measured at `step`, accepted or rejected. */
void cp_chart_trajectory_point(struct cp_chart_trajectory *t, double step, double ms,
                               bool accepted);
struct cp_chart cp_chart_trajectory(const struct cp_chart_trajectory *t, const char *title);

/* Its natural height in points for a width (bars grow with their labels). */
double cp_chart_height(const struct cp_chart *c, double width);

/* Draw c into the box (x, y, w, h) of a cairo context (points). */
void cp_chart_draw(cairo_t *cr, const struct cp_chart *c, double x, double y, double w, double h);

enum cp_chart_format { CP_CHART_SVG = 0, CP_CHART_PNG, CP_CHART_PDF };

/* Render c alone, `width` points wide (its natural height), as a whole file
 * in `f`, appended to `out`. Errors: cairo failing (CP_ERR_INTERNAL, its
 * message), CP_ERR_NOMEM. */
enum cp_status cp_chart_render(const struct cp_chart *c, enum cp_chart_format f, double width,
                               struct cp_buf *out, struct cp_diag *d);

/* The SVG of c for inlining in an HTML page with others: from <svg on (no
 * XML declaration), every id and reference to one prefixed with `prefix`
 * (so that two charts' glyphs do not collide), and cairo's process-wide
 * surface numbers renumbered from 1, so that the same chart gives the same
 * bytes however many were drawn before it. Appended to out. */
enum cp_status cp_chart_svg_inline(const struct cp_chart *c, double width, const char *prefix,
                                   struct cp_buf *out, struct cp_diag *d);

/* Called before pango is first used (the module does it): pango's font
 * map, cairo's caches and fontconfig's are released at exit. */
void cp_report_fonts_used(void);

/* The palette: colour i (0..7) as r, g, b in 0..1. What each colour means
 * where the views share one: */
void cp_chart_colour(size_t i, double rgb[3]);
enum {
    CP_CHART_BLUE = 0,
    CP_CHART_ORANGE = 1,
    CP_CHART_GREEN = 2,
    CP_CHART_PURPLE = 3,
    CP_CHART_SKY = 4,
    CP_CHART_VERMILLION = 5,
    CP_CHART_YELLOW = 6,
    CP_CHART_BLACK = 7,
};
/* Palette colours as "#rrggbb" for pages and stylesheets; within noise,
 * unchanged, merged: a light grey; a highlight (a search's matches) in the
 * palette's reddish purple. */
#define CP_CHART_BLUE_HEX       "#0072b2"
#define CP_CHART_VERMILLION_HEX "#d55e00"
#define CP_CHART_GREY_HEX       "#c8c8c8"
#define CP_CHART_NEUTRAL_HEX    "#f0f0f0"
#define CP_CHART_HIGHLIGHT_HEX  "#cc79a7"

/* Palette colour i lightened toward white by t (0: itself, 1: white), as
 * "#rrggbb". */
void cp_chart_tint_hex(size_t i, double t, char out[8]);

/* How much a name lightens its colour (0..CP_CHART_NAME_TINT_MAX), from a
 * hash of it: neighbours with different names differ, the same name looks
 * the same in every view and every run. */
#define CP_CHART_NAME_TINT_MAX 0.30
double cp_chart_name_tint(const char *name);

/* The sequential ramp for a share (ColorBrewer's "Blues"), step k of
 * CP_CHART_RAMP_N, light to dark, as "#rrggbb"; *light_text (may be NULL):
 * the step is dark enough to take white text. */
#define CP_CHART_RAMP_N 9
const char *cp_chart_ramp_hex(size_t k, bool *light_text);

#endif
