/* The charts (report/chart.h): bars, stacked bars with a legend,
 * cumulative distributions and XY plots (trajectories, Pareto fronts,
 * rooflines), drawn with cairo and labelled with pango. */
#include "report/chart.h"
#include "report/chart_internal.h"

#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <math.h>
#include <pango/pangocairo.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Okabe & Ito's palette: distinguishable with the common colour-vision
 * deficiencies, and in grey. */
static const unsigned char PALETTE[8][3] = {
    {0, 114, 178},   /* blue */
    {230, 159, 0},   /* orange */
    {0, 158, 115},   /* bluish green */
    {204, 121, 167}, /* reddish purple */
    {86, 180, 233},  /* sky blue */
    {213, 94, 0},    /* vermillion */
    {240, 228, 66},  /* yellow */
    {0, 0, 0},       /* black */
};

void cp_chart_colour(size_t i, double rgb[3])
{
    for (int k = 0; k < 3; k++)
        rgb[k] = PALETTE[i % 8][k] / 255.0;
}

void cp_chart_tint_hex(size_t i, double t, char out[8])
{
    double c[3];
    cp_chart_colour(i, c);
    t = t < 0 ? 0 : t > 1 ? 1 : t;
    unsigned char rgb[3];
    for (int k = 0; k < 3; k++)
        rgb[k] = (unsigned char)lround(255 * (c[k] + (1 - c[k]) * t));
    snprintf(out, 8, "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
}

double cp_chart_name_tint(const char *name)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const char *p = name ? name : ""; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return CP_CHART_NAME_TINT_MAX * (double)(h % 1000) / 1000.0;
}

/* ColorBrewer's sequential "Blues", light to dark: ordered in lightness,
 * so it reads in grey and with the common colour-vision deficiencies. */
static const char *const RAMP[CP_CHART_RAMP_N] = {"#f7fbff", "#deebf7", "#c6dbef",
                                                  "#9ecae1", "#6baed6", "#4292c6",
                                                  "#2171b5", "#08519c", "#08306b"};

const char *cp_chart_ramp_hex(size_t k, bool *light_text)
{
    if (k >= CP_CHART_RAMP_N)
        k = CP_CHART_RAMP_N - 1;
    if (light_text)
        *light_text = k >= CP_CHART_RAMP_N - 3;
    return RAMP[k];
}

void ch_set_colour(cairo_t *cr, size_t i)
{
    double c[3];
    cp_chart_colour(i, c);
    cairo_set_source_rgb(cr, c[0], c[1], c[2]);
}

/* pango's font map lives for the process; it is let go at exit, so that a
 * leak checker sees only real leaks. cairo's and fontconfig's caches are
 * left alone: cairo_debug_reset_static_data asserts when any of its objects
 * is still alive, and FcFini asserts when a cache is still referenced, and
 * cairo's font faces hold fontconfig patterns past pango's map (either
 * aborted the process at exit, now and then, after it wrote its file).
 * Both stay reachable from their globals, which a leak checker does not
 * report. */
static void release_fonts(void)
{
    pango_cairo_font_map_set_default(NULL);
}

static pthread_once_t fonts_once = PTHREAD_ONCE_INIT;

static void fonts_at_exit(void)
{
    atexit(release_fonts);
}

void cp_report_fonts_used(void)
{
    pthread_once(&fonts_once, fonts_at_exit);
}

/* A layout of `s` in the chart's font at `size` points. */
PangoLayout *ch_make_layout(cairo_t *cr, const char *s, double size, bool bold)
{
    cp_report_fonts_used();
    PangoLayout *l = pango_cairo_create_layout(cr);
    char font[64];
    snprintf(font, sizeof font, FONT "%s %.1f", bold ? " Bold" : "", size);
    PangoFontDescription *fd = pango_font_description_from_string(font);
    pango_layout_set_font_description(l, fd);
    pango_font_description_free(fd);
    pango_layout_set_text(l, s ? s : "", -1);
    return l;
}

double ch_layout_width(PangoLayout *l)
{
    int w = 0, h = 0;
    pango_layout_get_size(l, &w, &h);
    return (double)w / PANGO_SCALE;
}

/* Text at (x, y) (its top), `size` points, optionally right-aligned at x;
 * returns its width. */
double ch_text(cairo_t *cr, const char *s, double x, double y, double size, bool bold, bool right)
{
    PangoLayout *l = ch_make_layout(cr, s, size, bold);
    double tw = ch_layout_width(l);
    cairo_move_to(cr, right ? x - tw : x, y);
    pango_cairo_show_layout(cr, l);
    g_object_unref(l);
    return tw;
}

/* Text at (x, y) as ch_text, cut with "…" (in the middle: a title is
 * often a path, whose two ends say most) to at most max_w points; returns
 * the width drawn. Nothing when max_w is not above 0. */
double ch_text_within(cairo_t *cr, const char *s, double x, double y, double size, bool bold,
                      double max_w, bool middle)
{
    if (!(max_w > 0))
        return 0; /* no room left */
    PangoLayout *l = ch_make_layout(cr, s, size, bold);
    if (ch_layout_width(l) > max_w) {
        pango_layout_set_width(l, (int)(max_w * PANGO_SCALE));
        pango_layout_set_ellipsize(l, middle ? PANGO_ELLIPSIZE_MIDDLE : PANGO_ELLIPSIZE_END);
    }
    double tw = ch_layout_width(l);
    cairo_move_to(cr, x, y);
    pango_cairo_show_layout(cr, l);
    g_object_unref(l);
    return tw;
}

/* The width and height text would take. */
void ch_text_extent(cairo_t *cr, const char *s, double size, double *w, double *h)
{
    PangoLayout *l = ch_make_layout(cr, s, size, false);
    int lw = 0, lh = 0;
    pango_layout_get_size(l, &lw, &lh);
    *w = (double)lw / PANGO_SCALE;
    *h = (double)lh / PANGO_SCALE;
    g_object_unref(l);
}

double ch_text_width(cairo_t *cr, const char *s, double size)
{
    double w, h;
    ch_text_extent(cr, s, size, &w, &h);
    return w;
}

/* A value as its label: 3 significant digits (whole numbers below a
 * million in full, not as 1.2e+03), the unit after. */
void ch_value_label(double v, const char *unit, char out[48])
{
    const char *sep = unit && unit[0] && unit[0] != '%' ? " " : "";
    if (!isfinite(v))
        snprintf(out, 48, "n/a");
    else if (fabs(v) >= 1000 && fabs(v) < 1e6)
        snprintf(out, 48, "%.0f%s%s", v, sep, unit ? unit : "");
    else
        snprintf(out, 48, "%.3g%s%s", v, sep, unit ? unit : "");
}

/* ---- FRAMES: a flame graph drawn still (PNG, PDF, a page) ---------------------------------- */

#define FRAME_H 14.0

static double frames_depth(const struct cp_chart *c)
{
    int d = 0;
    for (size_t i = 0; c->frames && i < c->n_frames; i++)
        d = c->frames[i].depth > d ? c->frames[i].depth : d;
    return d < 4096 ? d : 4096;
}

static void draw_frames(cairo_t *cr, const struct cp_chart *c, double x, double y, double w)
{
    double top = frames_depth(c);
    for (size_t i = 0; c->frames && i < c->n_frames; i++) {
        const struct cp_chart_frame *f = &c->frames[i];
        if (!(f->w > 0) || !(f->x >= 0) || f->x > 1 || f->depth < 0 || f->depth > 4096)
            continue;
        double fx = x + f->x * w, fw = fmin(f->w, 1 - f->x) * w;
        double fy = y + (top - f->depth) * FRAME_H;
        cairo_set_source_rgb(cr, f->rgb[0], f->rgb[1], f->rgb[2]);
        cairo_rectangle(cr, fx, fy, fw, FRAME_H - 1);
        cairo_fill(cr);
        if (fw < 14 || !f->label || !f->label[0])
            continue;
        /* the label, cut to the frame with an ellipsis */
        PangoLayout *l = ch_make_layout(cr, f->label, 7, false);
        pango_layout_set_width(l, (int)((fw - 4) * PANGO_SCALE));
        pango_layout_set_ellipsize(l, PANGO_ELLIPSIZE_END);
        cairo_set_source_rgb(cr, 0.05, 0.05, 0.05);
        cairo_move_to(cr, fx + 2, fy + 2);
        pango_cairo_show_layout(cr, l);
        g_object_unref(l);
    }
}

/* The lines under a chart, wrapped to w: its note, and what an XY chart
 * left out; NULL when there are none. */
static PangoLayout *note_layout(cairo_t *cr, const struct cp_chart *c, double w)
{
    char extra[160];
    bool left_out = ch_xy_left_out(c, extra, sizeof extra);
    if (!c->note && !left_out)
        return NULL;
    struct cp_buf b;
    cp_buf_init(&b);
    if (c->note)
        cp_buf_puts(&b, c->note);
    if (c->note && left_out)
        cp_buf_puts(&b, "; ");
    if (left_out)
        cp_buf_puts(&b, extra);
    cp_buf_putc(&b, '\0');
    PangoLayout *l = ch_make_layout(cr, b.failed ? "" : b.data, 8, false);
    cp_buf_release(&b);
    pango_layout_set_width(l, (int)(fmax(w, 1) * PANGO_SCALE));
    pango_layout_set_wrap(l, PANGO_WRAP_WORD_CHAR);
    return l;
}

/* The room the lines under a chart take at width w (0: none), measured
 * without hinted metrics, as the vector surfaces lay text out. */
double ch_note_height(const struct cp_chart *c, double w)
{
    cairo_surface_t *s = cairo_image_surface_create(CAIRO_FORMAT_A8, 1, 1);
    cairo_t *cr = cairo_create(s);
    cairo_font_options_t *fo = cairo_font_options_create();
    cairo_font_options_set_hint_metrics(fo, CAIRO_HINT_METRICS_OFF);
    cairo_set_font_options(cr, fo);
    cairo_font_options_destroy(fo);
    PangoLayout *l = note_layout(cr, c, w);
    double h = 0;
    if (l) {
        int lw = 0, lh = 0;
        pango_layout_get_size(l, &lw, &lh);
        h = fmax(NOTE_H, (double)lh / PANGO_SCALE + 4);
        g_object_unref(l);
    }
    cairo_destroy(cr);
    cairo_surface_destroy(s);
    return h;
}

double cp_chart_height(const struct cp_chart *c, double width)
{
    double h = (c->title ? TITLE_H : 0) + ch_note_height(c, width) + PAD * 2;
    switch (c->kind) {
    case CP_CHART_BARS:
        return h + (double)c->n * (BAR_H + BAR_GAP);
    case CP_CHART_STACKED:
        return h + LEGEND_H + (double)c->n * (BAR_H + BAR_GAP);
    case CP_CHART_CDF:
        return h + CDF_H + AXIS_H + LEGEND_H;
    case CP_CHART_XY:
        return h + ch_xy_natural(width) + LEGEND_H;
    case CP_CHART_FRAMES:
        return h + (frames_depth(c) + 1) * FRAME_H;
    case CP_CHART_GRAPH:
        return h + ch_graph_height(c, width);
    }
    return h;
}

/* The widest label, capped. */
static double label_column(cairo_t *cr, const struct cp_chart *c, double w)
{
    double lw = 0;
    for (size_t i = 0; i < c->n; i++)
        lw = fmax(lw, ch_text_width(cr, c->labels[i], 8.5));
    return fmin(lw + PAD, w * LABEL_MAX);
}

static void draw_bars(cairo_t *cr, const struct cp_chart *c, double x, double y, double w)
{
    double lw = label_column(cr, c, w), max = 0;
    for (size_t i = 0; i < c->n; i++)
        max = fmax(max, isfinite(c->values[i]) ? c->values[i] : 0);
    double vw = 70; /* room for the value label */
    double bw = w - lw - vw;
    for (size_t i = 0; i < c->n; i++) {
        double by = y + (double)i * (BAR_H + BAR_GAP);
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        cairo_save(cr);
        cairo_rectangle(cr, x, by, lw - PAD, BAR_H);
        cairo_clip(cr);
        ch_text(cr, c->labels[i], x + lw - PAD, by + 2, 8.5, false, true);
        cairo_restore(cr);
        double v = isfinite(c->values[i]) ? c->values[i] : 0;
        double len = max > 0 ? bw * v / max : 0;
        ch_set_colour(cr, 0);
        cairo_rectangle(cr, x + lw, by, len, BAR_H);
        cairo_fill(cr);
        char lab[48];
        ch_value_label(c->values[i], c->unit, lab);
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        ch_text(cr, lab, x + lw + len + 4, by + 2, 8.5, false, false);
    }
}

/* Each name after its key: a square of its colour, or for XY `series` (not
 * NULL) the series' line and marker. */
void ch_legend(cairo_t *cr, const char *const *names, size_t n, double x, double y,
               const struct cp_chart_series *series)
{
    double at = x;
    for (size_t k = 0; k < n; k++) {
        double kw = series ? 16 : 10;
        if (series) {
            ch_series_key(cr, &series[k], k, at, y + 8, kw);
        } else {
            ch_set_colour(cr, k);
            cairo_rectangle(cr, at, y + 3, 10, 10);
            cairo_fill(cr);
        }
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        at += kw + 4 + ch_text(cr, names[k], at + kw + 4, y + 1, 8.5, false, false) + 12;
    }
}

static void draw_stacked(cairo_t *cr, const struct cp_chart *c, double x, double y, double w)
{
    size_t k_n = c->n_parts < CP_CHART_MAX_PARTS ? c->n_parts : CP_CHART_MAX_PARTS;
    ch_legend(cr, c->part_names, k_n, x, y, NULL);
    y += LEGEND_H;
    double lw = label_column(cr, c, w), max = 0;
    for (size_t i = 0; i < c->n; i++) {
        double t = 0;
        for (size_t k = 0; k < k_n; k++) {
            double v = c->values[i * c->n_parts + k];
            t += isfinite(v) && v > 0 ? v : 0;
        }
        max = fmax(max, t);
    }
    double vw = 70, bw = w - lw - vw;
    for (size_t i = 0; i < c->n; i++) {
        double by = y + (double)i * (BAR_H + BAR_GAP), at = x + lw, total = 0;
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        cairo_save(cr);
        cairo_rectangle(cr, x, by, lw - PAD, BAR_H);
        cairo_clip(cr);
        ch_text(cr, c->labels[i], x + lw - PAD, by + 2, 8.5, false, true);
        cairo_restore(cr);
        for (size_t k = 0; k < k_n; k++) {
            double v = c->values[i * c->n_parts + k];
            v = isfinite(v) && v > 0 ? v : 0;
            double len = max > 0 ? bw * v / max : 0;
            ch_set_colour(cr, k);
            cairo_rectangle(cr, at, by, len, BAR_H);
            cairo_fill(cr);
            /* the part's number inside it when it fits */
            char lab[48];
            ch_value_label(v, c->unit, lab);
            if (v > 0 && ch_text_width(cr, lab, 7) + 4 < len) {
                cairo_set_source_rgb(cr, k == 6 ? 0 : 1, k == 6 ? 0 : 1, k == 6 ? 0 : 1);
                ch_text(cr, lab, at + 2, by + 3, 7, false, false);
            }
            at += len;
            total += v;
        }
        char lab[48];
        ch_value_label(total, c->unit, lab);
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        ch_text(cr, lab, at + 4, by + 2, 8.5, false, false);
    }
}

int ch_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void draw_cdf(cairo_t *cr, const struct cp_chart *c, double x, double y, double w)
{
    size_t ns = c->samples[1] && c->n_samples[1] ? 2 : 1;
    double lo = INFINITY, hi = -INFINITY;
    for (size_t s = 0; s < ns; s++)
        for (size_t i = 0; i < c->n_samples[s]; i++)
            if (isfinite(c->samples[s][i])) {
                lo = fmin(lo, c->samples[s][i]);
                hi = fmax(hi, c->samples[s][i]);
            }
    if (!(hi > lo)) {
        hi = lo + 1;
        if (!isfinite(lo))
            lo = 0, hi = 1;
    }
    double ax = x + 36, aw = w - 44, ay = y, ah = CDF_H;
    /* axes and grid, with their numbers */
    cairo_set_line_width(cr, 0.5);
    cairo_set_source_rgb(cr, 0.8, 0.8, 0.8);
    for (int g = 0; g <= 4; g++) {
        double gy = ay + ah * (1 - g / 4.0), gx = ax + aw * g / 4.0;
        cairo_move_to(cr, ax, gy);
        cairo_line_to(cr, ax + aw, gy);
        cairo_move_to(cr, gx, ay);
        cairo_line_to(cr, gx, ay + ah);
    }
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
    for (int g = 0; g <= 4; g++) {
        char lab[48];
        snprintf(lab, sizeof lab, "%d%%", g * 25);
        ch_text(cr, lab, ax - 4, ay + ah * (1 - g / 4.0) - 5, 7.5, false, true);
        ch_value_label(lo + (hi - lo) * g / 4.0, c->unit, lab);
        double tw = ch_text_width(cr, lab, 7.5);
        ch_text(cr, lab, fmin(fmax(ax + aw * g / 4.0 - tw / 2, x), x + w - tw), ay + ah + 3, 7.5,
                false, false);
    }
    for (size_t s = 0; s < ns; s++) {
        size_t n = c->n_samples[s];
        double *v = cp_calloc(n ? n : 1, sizeof *v);
        if (!v)
            continue;
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (isfinite(c->samples[s][i]))
                v[m++] = c->samples[s][i];
        qsort(v, m, sizeof *v, ch_cmp_double);
        ch_set_colour(cr, s == 0 ? 0 : 5);
        cairo_set_line_width(cr, 1.5);
        for (size_t i = 0; i < m; i++) {
            double px = ax + aw * (v[i] - lo) / (hi - lo);
            double py0 = ay + ah * (1 - (double)i / (double)m),
                   py1 = ay + ah * (1 - (double)(i + 1) / (double)m);
            if (i == 0)
                cairo_move_to(cr, px, py0);
            else
                cairo_line_to(cr, px, py0);
            cairo_line_to(cr, px, py1);
        }
        cairo_stroke(cr);
        free(v);
    }
    const char *names[2] = {c->sample_names[0] ? c->sample_names[0] : "sample",
                            c->sample_names[1] ? c->sample_names[1] : "second"};
    /* the legend uses colours 0 and 5 */
    double at = ax;
    for (size_t s = 0; s < ns; s++) {
        ch_set_colour(cr, s == 0 ? 0 : 5);
        cairo_rectangle(cr, at, ay + ah + AXIS_H + 3, 10, 10);
        cairo_fill(cr);
        cairo_set_source_rgb(cr, 0.1, 0.1, 0.1);
        char lab[200];
        snprintf(lab, sizeof lab, "%s (n=%zu)", names[s], c->n_samples[s]);
        at += 14 + ch_text(cr, lab, at + 14, ay + ah + AXIS_H + 1, 8.5, false, false) + 12;
    }
}

void cp_chart_draw(cairo_t *cr, const struct cp_chart *c, double x, double y, double w, double h)
{
    cairo_save(cr);
    y += PAD;
    if (c->title) {
        cairo_set_source_rgb(cr, 0.05, 0.05, 0.05);
        ch_text_within(cr, c->title, x, y, 10, true, w, true);
        y += TITLE_H;
    }
    switch (c->kind) {
    case CP_CHART_BARS:
        draw_bars(cr, c, x, y, w);
        y += (double)c->n * (BAR_H + BAR_GAP);
        break;
    case CP_CHART_STACKED:
        draw_stacked(cr, c, x, y, w);
        y += LEGEND_H + (double)c->n * (BAR_H + BAR_GAP);
        break;
    case CP_CHART_CDF:
        draw_cdf(cr, c, x, y, w);
        y += CDF_H + AXIS_H + LEGEND_H;
        break;
    case CP_CHART_XY: {
        double ph = ch_xy_plot_h(c, w, h);
        ch_draw_xy(cr, c, x, y, w, ph);
        y += ph + LEGEND_H;
        break;
    }
    case CP_CHART_FRAMES:
        draw_frames(cr, c, x, y, w);
        y += (frames_depth(c) + 1) * FRAME_H;
        break;
    case CP_CHART_GRAPH:
        ch_draw_graph(cr, c, x, y, w);
        y += ch_graph_height(c, w);
        break;
    }
    PangoLayout *l = note_layout(cr, c, w);
    if (l) {
        cairo_set_source_rgb(cr, 0.25, 0.25, 0.25);
        cairo_move_to(cr, x, y + 2);
        pango_cairo_show_layout(cr, l);
        g_object_unref(l);
    }
    cairo_restore(cr);
}

/* ---- alone, as a file ------------------------------------------------------------------- */

/* A chart alone has this margin left and right, in points. */
#define RENDER_MARGIN 8.0
#define PNG_MAX_BYTES (64.0 * 1024 * 1024)

static cairo_status_t to_buf(void *closure, const unsigned char *data, unsigned int length)
{
    struct cp_buf *b = closure;
    cp_buf_append(b, data, length);
    return cp_buf_status(b) == CP_OK ? CAIRO_STATUS_SUCCESS : CAIRO_STATUS_NO_MEMORY;
}

static enum cp_status render(const struct cp_chart *c, enum cp_chart_format f, double width,
                             struct cp_buf *out, struct cp_diag *d);
static void stable_svg(const char *in, const char *prefix, bool whole, struct cp_buf *out);

enum cp_status cp_chart_render(const struct cp_chart *c, enum cp_chart_format f, double width,
                               struct cp_buf *out, struct cp_diag *d)
{
    if (f != CP_CHART_SVG)
        return render(c, f, width, out, d);
    struct cp_buf raw;
    cp_buf_init(&raw);
    enum cp_status st = render(c, f, width, &raw, d);
    if (st == CP_OK && raw.data)
        stable_svg(raw.data, "", true, out);
    cp_buf_release(&raw);
    if (st == CP_OK && cp_buf_status(out) != CP_OK)
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
    return st;
}

static enum cp_status render(const struct cp_chart *c, enum cp_chart_format f, double width,
                             struct cp_buf *out, struct cp_diag *d)
{
    double h = cp_chart_height(c, width - 2 * RENDER_MARGIN);
    /* PNG at twice the points, but for a picture that would take more
     * than PNG_MAX_BYTES so */
    double png_scale = width * h * 4 * 4 <= PNG_MAX_BYTES ? 2 : 1;
    cairo_surface_t *s = NULL;
    switch (f) {
    case CP_CHART_SVG:
        s = cairo_svg_surface_create_for_stream(to_buf, out, width, h);
        break;
    case CP_CHART_PDF:
        s = cairo_pdf_surface_create_for_stream(to_buf, out, width, h);
        break;
    case CP_CHART_PNG:
        s = cairo_image_surface_create(CAIRO_FORMAT_RGB24, (int)ceil(width * png_scale),
                                       (int)ceil(h * png_scale));
        break;
    }
    if (!s || cairo_surface_status(s) != CAIRO_STATUS_SUCCESS) {
        const char *why = s ? cairo_status_to_string(cairo_surface_status(s)) : "no surface";
        if (s)
            cairo_surface_destroy(s);
        return cp_diag_set(d, CP_ERR_INTERNAL, "cairo: %s", why);
    }
    cairo_t *cr = cairo_create(s);
    if (f == CP_CHART_PNG)
        cairo_scale(cr, png_scale, png_scale);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    cp_chart_draw(cr, c, RENDER_MARGIN, 0, width - 2 * RENDER_MARGIN, h);
    cairo_status_t cs = cairo_status(cr);
    cairo_destroy(cr);
    if (f == CP_CHART_PNG && cs == CAIRO_STATUS_SUCCESS)
        cs = cairo_surface_write_to_png_stream(s, to_buf, out);
    cairo_surface_finish(s);
    if (cs == CAIRO_STATUS_SUCCESS)
        cs = cairo_surface_status(s);
    cairo_surface_destroy(s);
    if (cs != CAIRO_STATUS_SUCCESS)
        return cp_diag_set(d, cs == CAIRO_STATUS_NO_MEMORY ? CP_ERR_NOMEM : CP_ERR_INTERNAL,
                           "cairo: %s", cairo_status_to_string(cs));
    return CP_OK;
}

/* ---- SVG made stable --------------------------------------------------------------------- */

/* Copy cairo's SVG `in` to out: every id and reference to one prefixed with
 * `prefix`, and cairo's process-wide surface numbers renumbered in order of
 * appearance, so that a chart's bytes do not depend on what was drawn
 * before it. From <svg on when !whole. */
static void stable_svg(const char *in, const char *prefix, bool whole, struct cp_buf *out)
{
    const char *p = whole ? in : strstr(in, "<svg");
    p = p ? p : in;
    long seen[64];
    size_t n_seen = 0;
    static const char *const keys[] = {"id=\"", "href=\"#", "url(#"};
    while (*p) {
        size_t k = 0, kl = 0;
        for (k = 0; k < 3; k++) {
            kl = strlen(keys[k]);
            if (strncmp(p, keys[k], kl) == 0)
                break;
        }
        if (k == 3) {
            size_t run = strcspn(p + 1, "iuh") + 1; /* up to the next candidate */
            cp_buf_append(out, p, run);
            p += run;
            continue;
        }
        cp_buf_append(out, p, kl);
        p += kl;
        cp_buf_puts(out, prefix);
        if (strncmp(p, "surface", 7) == 0 && p[7] >= '0' && p[7] <= '9') {
            char *end = NULL;
            long num = strtol(p + 7, &end, 10);
            size_t i = 0;
            while (i < n_seen && seen[i] != num)
                i++;
            if (i == n_seen && n_seen < 64)
                seen[n_seen++] = num;
            cp_buf_printf(out, "surface%zu", i + 1);
            p = end;
        }
    }
}

enum cp_status cp_chart_svg_inline(const struct cp_chart *c, double width, const char *prefix,
                                   struct cp_buf *out, struct cp_diag *d)
{
    struct cp_buf svg;
    cp_buf_init(&svg);
    enum cp_status st = render(c, CP_CHART_SVG, width, &svg, d);
    if (st == CP_OK && svg.data)
        stable_svg(svg.data, prefix, false, out);
    cp_buf_release(&svg);
    if (st != CP_OK)
        return st;
    return cp_buf_status(out) == CP_OK ? CP_OK : cp_diag_set(d, CP_ERR_NOMEM, "out of memory");
}
