/* What the chart module's files share (report/chart.c: the common parts,
 * bars, stacked bars, CDFs, frames, rendering; report/chart_xy.c: the XY
 * kind; report/chart_graph.c: the GRAPH kind). Private to report/. */
#ifndef CP_REPORT_CHART_INTERNAL_H
#define CP_REPORT_CHART_INTERNAL_H

#include "report/chart.h"

#include <pango/pangocairo.h>
#include <stdbool.h>
#include <stddef.h>

#define FONT      "Sans"
#define PAD       6.0
#define BAR_H     16.0
#define BAR_GAP   6.0
#define TITLE_H   22.0
#define LEGEND_H  18.0
#define NOTE_H    16.0
#define AXIS_H    18.0
#define CDF_H     200.0
#define LABEL_MAX 0.32 /* of the width, at most, for the labels */

void ch_set_colour(cairo_t *cr, size_t i);
PangoLayout *ch_make_layout(cairo_t *cr, const char *s, double size, bool bold);
double ch_layout_width(PangoLayout *l);
double ch_text(cairo_t *cr, const char *s, double x, double y, double size, bool bold, bool right);
double ch_text_within(cairo_t *cr, const char *s, double x, double y, double size, bool bold,
                      double max_w, bool middle);
double ch_note_height(const struct cp_chart *c, double w);
void ch_text_extent(cairo_t *cr, const char *s, double size, double *w, double *h);
double ch_text_width(cairo_t *cr, const char *s, double size);
void ch_value_label(double v, const char *unit, char out[48]);
int ch_cmp_double(const void *a, const void *b);
void ch_legend(cairo_t *cr, const char *const *names, size_t n, double x, double y,
               const struct cp_chart_series *series);

/* XY (report/chart_xy.c) */
bool ch_xy_left_out(const struct cp_chart *c, char *out, size_t cap);
double ch_xy_natural(double width);
double ch_xy_plot_h(const struct cp_chart *c, double w, double h);
void ch_draw_xy(cairo_t *cr, const struct cp_chart *c, double x, double y, double w, double bh);
void ch_series_key(cairo_t *cr, const struct cp_chart_series *s, size_t k, double x, double y,
                   double w);

/* GRAPH (report/chart_graph.c) */
double ch_graph_height(const struct cp_chart *c, double w);
void ch_draw_graph(cairo_t *cr, const struct cp_chart *c, double x, double y, double w);

#endif
